import sys
from pathlib import Path

import pytest

import privreg

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "examples" / "plugin_template"


@pytest.fixture(autouse=True)
def _fresh_default_registry():
    """Tests that change plugins or the environment must not leak a cached registry."""
    privreg.reset_default_registry()
    yield
    privreg.reset_default_registry()


@pytest.fixture
def template_on_path(monkeypatch):
    """The example third-party plugin importable (without installing it)."""
    monkeypatch.syspath_prepend(str(TEMPLATE))
    yield
    for name in [m for m in sys.modules if m.startswith("privreg_template")]:
        del sys.modules[name]


# the contract suite's fixture (privreg_contract) and its --privreg-* options
pytest_plugins = ["privreg.testing.pytest_plugin"]
