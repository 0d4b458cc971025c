"""The ``privreg`` command line."""
