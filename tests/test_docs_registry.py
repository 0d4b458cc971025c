"""The documentation site's registry page covers every registered item."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import privreg

HOOK = Path(__file__).resolve().parents[1] / "docs" / "_hooks" / "registry_page.py"


def _hook_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("privreg_docs_registry_page", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_registry_page_has_a_section_for_every_item() -> None:
    registry = privreg.default_registry()
    assert registry.items(), "no plugin loaded: the page would be empty"
    page = _hook_module().registry_markdown(registry)
    headings = {line[4:] for line in page.splitlines() if line.startswith("### ")}
    assert headings == set(registry.names())
    for item in registry.items():
        assert item.summary in page, item.name
        assert item.citation.title in page, item.name
        for param in item.params:
            assert f"| `{param.name}` |" in page, (item.name, param.name)


def test_registry_page_lists_every_plugin() -> None:
    registry = privreg.default_registry()
    page = _hook_module().registry_markdown(registry)
    for plugin in registry.plugins:
        assert f"| `{plugin.name}` |" in page, plugin.name
