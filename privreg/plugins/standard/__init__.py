"""The ``standard`` plugin: the mechanisms, randomizers and sensitivities every paper
plugin reuses (entry point ``standard = "privreg.plugins.standard.hooks"``)."""
