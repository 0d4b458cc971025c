"""The version has one source, privreg/__about__.py, which the build reads."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import privreg
from privreg import __about__

ROOT = Path(__file__).resolve().parents[1]


def test_installed_metadata_matches_package_version() -> None:
    # a stale install (version bumped, package not reinstalled) fails here
    assert importlib.metadata.version("privreg") == privreg.__version__


def test_package_version_is_the_about_module_version() -> None:
    assert privreg.__version__ is __about__.__version__


def test_pyproject_reads_the_version_from_about() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in config["project"], "a static version would be a second source"
    assert "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "privreg.__about__.__version__"}
