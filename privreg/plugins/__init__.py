"""Built-in plugins, one folder per method. Each registers through the ``privreg``
entry-point group exactly like a third-party plugin; the core never imports them."""
