"""The template plugin and the READMEs use only privreg's public names (issue #17): every
privreg module they import is public (no component starts with an underscore) and
declares ``__all__``, and every name they import from it is in that ``__all__``."""

import ast
import importlib
import re

import pytest
from conftest import ROOT, TEMPLATE


def _sources():
    """(label, python source) of the template's modules and tests and the README blocks."""
    out = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted(TEMPLATE.rglob("*.py"))]
    for readme in (ROOT / "README.md", TEMPLATE / "README.md"):
        blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.S)
        out += [(f"{readme.relative_to(ROOT)} block {i}", b) for i, b in enumerate(blocks)]
    return out


def _module_problem(name):
    parts = name.split(".")
    if any(p.startswith("_") for p in parts):
        return f"{name} is a private module"
    module = importlib.import_module(name)
    if not hasattr(module, "__all__"):
        return f"{name} declares no __all__, so none of its names is exported"
    return None


def private_imports(source):
    """What ``source`` imports from privreg that is not public, as messages."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "privreg":
                    problems.append(_module_problem(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] == "privreg":
            problem = _module_problem(node.module)
            if problem:
                problems.append(problem)
                continue
            exported = importlib.import_module(node.module).__all__
            for alias in node.names:
                if alias.name not in exported:
                    problems.append(f"{alias.name} is not in {node.module}.__all__")
    return [p for p in problems if p]


SOURCES = _sources()


def test_sources_are_found():
    labels = [label for label, _ in SOURCES]
    assert any(label.endswith("hooks.py") for label in labels)
    assert any(label.startswith("README.md block") for label in labels)


def test_the_check_finds_private_names():
    assert private_imports("from privreg.core.randomizer import np") == ["np is not in privreg.core.randomizer.__all__"]
    assert private_imports("from privreg.core.items import params_from") == [
        "params_from is not in privreg.core.items.__all__"
    ]
    assert private_imports("import privreg._nothing") == ["privreg._nothing is a private module"]
    assert private_imports("from privreg import Param, hookimpl\nimport numpy") == []


@pytest.mark.parametrize("label,source", SOURCES, ids=[label for label, _ in SOURCES])
def test_only_public_names_are_imported(label, source):
    assert private_imports(source) == []
