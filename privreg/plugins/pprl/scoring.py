"""A linkage run scored against the truth (``privreg party score``; evaluation only).

The truth is a CSV with the columns ``party``, ``id`` and ``entity`` (one row per record;
``privreg party init`` writes ``inputs/truth.csv`` for its example records). The groups
are rebuilt from every data party's ``links.csv`` (group id, its own record id): each
party holds only its own column, so a score needs the outputs of every data party. The
measures are those of :mod:`privreg.plugins.pprl.quality` (paper 004, formulas (4)-(5)):
group recall and precision, and pairwise recall and precision over all party pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from privreg.core.errors import PrivregValueError
from privreg.plugins.pprl.quality import PairwiseQuality, group_quality, linkage_quality
from privreg.readers import read_table

__all__ = ["read_links", "read_truth", "score_linkage"]

TRUTH_COLUMNS = ("party", "id", "entity")


def read_truth(path: Path) -> dict[str, dict[str, str]]:
    """``{party: {record id: entity}}`` of a truth CSV (columns party, id, entity), in
    file order; a repeated (party, id) or an empty cell is refused."""
    table = read_table(path, None, format="csv", what="--truth")
    missing = [c for c in TRUTH_COLUMNS if c not in table]
    if missing:
        raise PrivregValueError(
            f"--truth {path} lacks the columns {missing}; give a CSV with the columns party,id,entity "
            f"(privreg party init writes inputs/truth.csv)."
        )
    out: dict[str, dict[str, str]] = {}
    for row, (party, rid, entity) in enumerate(zip(*(table[c] for c in TRUTH_COLUMNS)), 2):
        if not party or not rid or not entity:
            raise PrivregValueError(f"--truth {path}: line {row} has an empty party, id or entity; fill it in.")
        mine = out.setdefault(party, {})
        if rid in mine:
            raise PrivregValueError(f"--truth {path}: line {row} repeats a record of party {party!r}; list it once.")
        mine[rid] = entity
    return out


def read_links(path: Path, party: str, known: Mapping[str, str]) -> dict[int, str]:
    """``{group: record id}`` of one data party's ``links.csv``; every record must be one
    of ``known`` (the truth's records of that party) and appear at most once. Errors
    name the line, never a record id."""
    what = f"party {party}'s links.csv"
    if not path.is_file():
        raise PrivregValueError(f"{what}: no file at {path}; score a finished run (privreg party run).")
    table = read_table(path, None, format="csv", what=what)
    if set(table) != {"group", "record"}:
        raise PrivregValueError(
            f"{what} {path} has the columns {sorted(table)}, not group,record; give a links.csv of privreg party run."
        )
    out: dict[int, str] = {}
    seen: set[str] = set()
    for row, (group, rid) in enumerate(zip(table["group"], table["record"]), 2):
        if not (group and group.isascii() and group.isdigit()) or len(group) > 19:
            raise PrivregValueError(
                f"{what} {path}: line {row} has a group that is not a group id (1 to 19 ASCII digits)."
            )
        if rid is None or rid not in known:
            raise PrivregValueError(
                f"{what} {path}: line {row} names a record that --truth does not list for party {party!r}; "
                f"score against the truth file of the same inputs."
            )
        if int(group) in out or rid in seen:
            raise PrivregValueError(f"{what} {path}: line {row} repeats a group or a record; give an unedited file.")
        out[int(group)] = rid
        seen.add(rid)
    return out


def _pairwise_rows(pw: PairwiseQuality) -> list[tuple[str, float | int]]:
    return [
        ("pairs linked", pw.pairs),
        ("true pairs", pw.true_pairs),
        ("true pairs linked", pw.true_found),
        ("pair recall", pw.recall),
        ("pair precision", pw.precision),
    ]


def score_linkage(
    *, outputs: Mapping[str, Path], truth: Path, parties: Sequence[str], full_groups: bool
) -> list[tuple[str, float | int]]:
    """Group and pairwise recall/precision of a linkage run of the data ``parties``.

    ``outputs`` maps every data party (others are ignored) to its output folder.
    ``full_groups``: groups hold one record of every party (mp-spprl; a true group is an
    entity at every party, :func:`~privreg.plugins.pprl.quality.linkage_quality`), else
    any two or more (clk-dice; :func:`~privreg.plugins.pprl.quality.group_quality`)."""
    missing = [p for p in parties if p not in outputs]
    if missing:
        raise PrivregValueError(
            f"scoring a linkage needs every data party's outputs (each holds only its own links); "
            f"add the configurations of {missing}."
        )
    known = read_truth(truth)
    absent = [p for p in parties if p not in known]
    if absent:
        raise PrivregValueError(f"--truth {truth} lists no record of parties {absent}; give the run's truth file.")
    index = {p: {rid: i for i, rid in enumerate(known[p])} for p in parties}
    entities = {p: list(known[p].values()) for p in parties}
    groups: dict[int, list[tuple[int, int]]] = {}
    for k, p in enumerate(parties):
        for g, rid in read_links(outputs[p] / "links.csv", p, known[p]).items():
            groups.setdefault(g, []).append((k, index[p][rid]))
    ordered = [sorted(groups[g]) for g in sorted(groups)]
    if full_groups:
        if any(len(g) != len(parties) for g in ordered):
            raise PrivregValueError(
                "the links.csv files disagree: a group lacks a party's record; give the outputs of one run."
            )
        tuples = np.array([[r for _, r in g] for g in ordered], dtype=np.int64).reshape(-1, len(parties))
        q = linkage_quality(tuples, entities=entities, parties=parties)
        return [
            ("linked groups", q.linked),
            ("true groups", q.true_groups),
            ("true groups linked", q.true_linked),
            ("group recall", q.recall),
            ("group precision", q.precision),
            *_pairwise_rows(q.pairwise),
        ]
    gq = group_quality(ordered, entities=entities, parties=parties)
    return [
        ("linked groups", gq.groups),
        ("true groups", gq.true_groups),
        ("true groups linked", gq.exact),
        ("group recall", gq.recall),
        ("group precision", gq.precision),
        *_pairwise_rows(gq.pairwise),
    ]
