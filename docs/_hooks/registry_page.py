"""mkdocs hook: the registry page, generated from the registry at every build.

``registry_markdown()`` renders every registered item (all plugins, loaded the way
``privreg list`` loads them) with its kind, summary, citation, parameters and their ranges,
neighbour relation and its guarantee text (the factory's docstring, which states the
privacy guarantee, the input range and the timing caveats). It needs no mkdocs, so the
tests can check it covers every item.
"""

from __future__ import annotations

import inspect
import logging

from privreg.core.items import ItemKind, Param, RegistryItem
from privreg.core.registry import Registry, default_registry

PAGE = "registry.md"

_TITLES = {
    ItemKind.MECHANISM: "Mechanisms",
    ItemKind.RANDOMIZER: "Randomizers",
    ItemKind.SENSITIVITY: "Sensitivities",
    ItemKind.PROTOCOL: "Protocols",
    ItemKind.WORKFLOW: "Workflows",
}

log = logging.getLogger("mkdocs.hooks.registry_page")  # mkdocs counts its warnings (strict)


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped, code spans for literals."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: object) -> str:
    s = str(text)
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def _text_block(text: str) -> list[str]:
    # docstrings are reST-flavoured prose (2**53, :class: roles): shown verbatim, as the CLI does
    fence = "````" if "```" in text else "```"
    return [f"{fence}text", text, fence]


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
    lines = [f"### {item.name}", "", f"*{item.kind.value}* from plugin `{item.plugin}` -- {item.summary}", ""]
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
    """The whole registry page as Markdown."""
    registry = default_registry() if registry is None else registry
    for failure in registry.failures:
        log.warning("plugin failed to load, its items are missing from the registry page: %s", failure)
    out = [
        "# Registry",
        "",
        "Every item registered by the installed plugins, generated from the registry when this site "
        "was built (the same data as `privreg list` and `privreg describe NAME`).",
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
