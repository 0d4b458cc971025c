"""mkdocs hook: the registry page, generated from the registry at every build.

``registry_markdown()`` renders every item of the built-in plugins -- the project's own
``privreg`` entry points in ``pyproject.toml``, never whatever else is installed -- with
its kind, summary, citation, parameters and their ranges, neighbour relation and its
guarantee text (the factory's docstring, which states the privacy guarantee, the input
range and the timing caveats), converted from reST to Markdown (``rest_markup.py``). It
needs no mkdocs, so the tests can check it covers every item.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import inspect
import logging
import tomllib
from pathlib import Path
from types import ModuleType

from privreg.core.items import ItemKind, Param, RegistryItem
from privreg.core.registry import ENTRY_POINT_GROUP, Registry, load_registry

ROOT = Path(__file__).resolve().parents[2]


def _sibling(name: str) -> ModuleType:
    """Another file of docs/_hooks (mkdocs loads hooks by path, not as a package)."""
    spec = importlib.util.spec_from_file_location(f"privreg_docs_{name}", Path(__file__).with_name(f"{name}.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load docs/_hooks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_rest = _sibling("rest_markup")

PAGE = "registry.md"

_TITLES = {
    ItemKind.MECHANISM: "Mechanisms",
    ItemKind.RANDOMIZER: "Randomizers",
    ItemKind.SENSITIVITY: "Sensitivities",
    ItemKind.PROTOCOL: "Protocols",
    ItemKind.WORKFLOW: "Workflows",
}

log = logging.getLogger("mkdocs.hooks.registry_page")  # mkdocs counts its warnings (strict)


def builtin_entry_points() -> list[md.EntryPoint]:
    """The project's own plugins: the ``privreg`` entry points of its ``pyproject.toml``
    (the installed ones when this checkout is installed, for their version)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    installed = {
        (ep.name, ep.value): ep
        for ep in md.entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None and ep.dist.metadata["Name"] == "privreg"
    }
    return [
        installed.get((name, value), md.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP))
        for name, value in declared.items()
    ]


def builtin_registry() -> Registry:
    """The registry of the built-in plugins only, whatever else is installed or set in
    ``PRIVREG_PLUGINS``."""
    eps = builtin_entry_points()
    return load_registry(entry_points=eps, autoload=True, allow=[ep.name for ep in eps])


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped, reST literals as code spans."""
    return _rest.inline(" ".join(str(text).split())).replace("|", "\\|")


def _code(text: object) -> str:
    s = str(text)
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def _text_block(text: str) -> list[str]:
    # docstrings are reST-flavoured prose: roles, literals and tables become Markdown
    return [_rest.to_markdown(text)]


def _params_table(params: tuple[Param, ...]) -> list[str]:
    if not params:
        return ["No parameters."]
    rows = ["| parameter | type | default | range | meaning |", "|---|---|---|---|---|"]
    for p in params:
        default = "required" if p.required else _code(repr(p.default))
        rows.append(
            f"| {_code(p.name)} | {p.type_name} | {_cell(default)} | "
            f"{_cell(p.constraint_text() or '-')} | {_cell(p.doc)} |"
        )
    return rows


def _neighbours(item: RegistryItem) -> str:
    if item.neighbouring == "replace_one":
        return "replace one user's data (`replace_one`): local or shuffled reports"
    return "add or remove one user's data (`add_remove`)"


def item_markdown(item: RegistryItem) -> list[str]:
    """The section of one item."""
    lines = [f"### {item.name}", "", f"*{item.kind.value}* from plugin `{item.plugin}` -- {_cell(item.summary)}", ""]
    cite = _cell(item.citation)
    lines += [f"**Citation:** {cite}" + (f" <{item.citation.url}>" if item.citation.url else ""), ""]
    lines += ["**Parameters:**", "", *_params_table(item.params), ""]
    example = ", ".join(f"{k}={v!r}" for k, v in item.example.params.items())
    lines += [f"**Example:** {_code(example) if example else '(no parameters)'}", ""]
    lines += [f"**Neighbours:** {_neighbours(item)}", ""]
    if item.kind is ItemKind.WORKFLOW:
        accounting = (
            "charges nothing (no differentially private release)"
            if not item.charges
            else f"`privreg run` charges a `{item.neighbouring}` budget under the basic filter"
        )
        lines += [f"**Accounting:** {accounting}", ""]
    if item.description:
        lines += [
            "**Guarantee, input range and caveats** (the factory's docstring):",
            "",
            *_text_block(item.description),
            "",
        ]
    caveats = getattr(item.factory, "caveats", None)  # protocols state their assumptions
    if isinstance(caveats, str) and caveats.strip():
        lines += ["**Protocol caveats:**", "", *_text_block(inspect.cleandoc(caveats)), ""]
    return lines


def registry_markdown(registry: Registry | None = None) -> str:
    """The whole registry page as Markdown (of the built-in plugins unless ``registry``
    is given)."""
    registry = builtin_registry() if registry is None else registry
    for failure in registry.failures:
        log.warning("plugin failed to load, its items are missing from the registry page: %s", failure)
    out = [
        "# Registry",
        "",
        "Every item registered by privreg's built-in plugins, generated from the registry when this "
        "site was built (the same data as `privreg list` and `privreg describe NAME`; those also show "
        "any other plugin you have installed).",
        "",
    ]
    out += ["| plugin | version | module | items |", "|---|---|---|---|"]
    for p in registry.plugins:
        count = sum(1 for i in registry.items() if i.plugin == p.name)
        out.append(f"| `{p.name}` | {p.version or '-'} | `{p.module}` | {count} |")
    out.append("")
    for kind in ItemKind:
        items = registry.items(kind)
        if not items:
            continue
        out += [f"## {_TITLES[kind]}", "", "| name | plugin | summary |", "|---|---|---|"]
        out += [f"| [{i.name}](#{i.name}) | `{i.plugin}` | {_cell(i.summary)} |" for i in items]
        out.append("")
        for item in items:
            out += item_markdown(item)
    return "\n".join(out)


def on_files(files, config):  # type: ignore[no-untyped-def]
    """mkdocs event: add the generated page to the site's files."""
    from mkdocs.structure.files import File  # only the docs build needs mkdocs

    files.append(File.generated(config, PAGE, content=registry_markdown()))
    return files
