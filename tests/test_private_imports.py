"""No module imports another module's private (underscore) name (CONTRIBUTING, "Layers").

A private name is an implementation detail of the module that defines it; a helper two
modules share is made public, with a docstring, where it lives.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "privreg").rglob("*.py"), *(ROOT / "examples").rglob("*.py")])


def private_imports(source: str) -> list[tuple[int, str]]:
    """(line, 'module.name') for every import of an underscore name or module, dunders
    (``__all__``, ``__version__``) excepted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            for alias in node.names:
                names = [*parts, alias.name]
                if any(p.startswith("_") and not p.endswith("__") for p in names):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(p.startswith("_") and not p.endswith("__") for p in alias.name.split(".")):
                    found.append((node.lineno, alias.name))
    return found


def test_the_check_finds_private_imports():
    src = "from privreg.core.randomizer import _perm\nimport privreg._impl\nfrom privreg import __version__\n"
    assert private_imports(src) == [(1, "privreg.core.randomizer._perm"), (2, "privreg._impl")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_is_imported_across_modules(path):
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in private_imports(path.read_text())]
    assert not bad, "import of a private name; make it public where it is defined:\n" + "\n".join(bad)
