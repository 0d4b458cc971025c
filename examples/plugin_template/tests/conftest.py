# privreg's contract suite as a pytest plugin: the privreg_contract fixture and --privreg-* options
pytest_plugins = ["privreg.testing.pytest_plugin"]
