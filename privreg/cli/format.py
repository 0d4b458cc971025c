"""Plain-text rendering for the CLI."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from privreg.core.items import ItemKind

if TYPE_CHECKING:  # the registry and charges load the events: not at start-up
    from privreg.core.charging import Charge
    from privreg.core.items import RegistryItem
    from privreg.core.registry import Registry


def table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; the first row is the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


PLURAL = {
    ItemKind.MECHANISM: "mechanisms",
    ItemKind.RANDOMIZER: "randomizers",
    ItemKind.SENSITIVITY: "sensitivities",
    ItemKind.PROTOCOL: "protocols",
    ItemKind.WORKFLOW: "workflows",
}


def items_by_kind(registry: Registry, kind: str | None) -> str:
    blocks = []
    kinds = [ItemKind(kind)] if kind else list(ItemKind)
    for k in kinds:
        items = registry.items(k)
        if not items:
            continue
        rows = [(f"  {i.name}", i.summary, f"[{i.plugin}]") for i in items]
        blocks.append(f"{PLURAL[k]}:\n" + table([("", "", "")] + rows).split("\n", 1)[1])
    return "\n\n".join(blocks) if blocks else "no items registered"


def describe(item: RegistryItem) -> str:
    lines = [f"{item.name}  ({item.kind_name}, plugin {item.plugin})", f"  {item.summary}", ""]
    if item.params:
        rows = [("parameters:", "type", "default", "constraints", "")]
        for p in item.params:
            default = "required" if p.required else repr(p.default)
            rows.append((f"  --{p.name.replace('_', '-')}", p.type_name, default, p.constraint_text() or "-", p.doc))
        lines.append(table(rows))
    else:
        lines.append("parameters: none")
    example = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in item.example.params.items())
    lines += ["", f"example: {example or '(no parameters)'}"]
    lines += ["", "citation:", textwrap.indent(textwrap.fill(str(item.citation), 88), "  ")]
    relation = (
        "replace one user's data (replace_one): local or shuffled reports"
        if item.neighbouring == "replace_one"
        else "add or remove one user's data (add_remove)"
    )
    lines += ["", f"neighbours: {relation}"]
    if item.kind is ItemKind.WORKFLOW:
        lines += [
            "accounting: "
            + (
                "charges nothing (no differentially private release)"
                if not item.charges
                else f"privreg run charges a {item.neighbouring} budget under the basic "
                f"filter (fully adaptive; curve events at the budget's delta)"
            )
        ]
        if item.charges:
            lines += [
                "budget: "
                + (
                    " and ".join(f"--{n.replace('_', '-')}" for n in item.budget_params)
                    + " (what a run may spend, checked against its ledger before the first charge)"
                    if item.budget_params
                    else "not stated by any parameter: give 'privreg run' --budget-epsilon (a shared --ledger "
                    "cannot admit it)"
                ),
                f"largest epsilon: {item.max_epsilon:g} (more needs --allow-large-epsilon)",
            ]
    if item.description:
        lines += ["", "guarantees:", textwrap.indent(item.description, "  ")]
    return "\n".join(lines)


def charges(entries: Iterable[Charge]) -> str:
    rows = [("#", "label", "mechanism", "event", "randomness")]
    for n, c in enumerate(entries, 1):
        src = "REPRODUCIBLE (test only)" if c.randomness.get("reproducible") else "csprng"
        rows.append((str(n), c.label or "-", c.mechanism, c.event.to_json(), src))
    return table(rows) if len(rows) > 1 else "no releases were charged"
