import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import privreg

# The one place hypothesis is configured; a test sets only a max_examples of its own.
# Both profiles: no deadline and no too_slow check, since timings on a shared, loaded
# machine say nothing about the code; failures print a blob to replay them.
# ci: derandomized, so every run draws the same examples and statistical tests are
# deterministic; no example database. dev: fresh examples each run, failures kept in
# .hypothesis/ and replayed first.
_COMMON = dict(
    parent=settings.get_profile("default"), deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("ci", derandomize=True, database=None, **_COMMON)
settings.register_profile("dev", **_COMMON)
# HYPOTHESIS_PROFILE picks one; otherwise ci where CI is set (as hypothesis itself does).
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if "CI" in os.environ else "dev"))

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
