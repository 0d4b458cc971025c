"""Linkage quality against ground truth (paper 004, Section 5, formulas (4)-(5)).

Setting: parties ``P_1..P_n`` with record sets ``D_p``; every record has a ground-truth
entity label (evaluation only). Definitions (multi-party):

* a **true group** is an ``n``-tuple ``(r_1, ..., r_n)``, ``r_p`` in ``D_p``, whose records
  all have the same entity; their number is ``T = sum_e prod_p c_p(e)`` with ``c_p(e)``
  the number of records of entity ``e`` at party ``p`` (usually 0 or 1). Records without a
  label (``None`` or '') belong to no true group;
* for a set ``G`` of distinct groups (candidate groups after blocking, or groups declared
  matches), ``TP`` = true groups in ``G``, ``FP = |G| - TP``, ``FN = T - TP``;
* **recall** (blocking: *pair completeness*) = ``TP / T`` -- formula (4),
  ``TP / (TP + FN)``; **precision** (blocking: *pairs quality*) = ``TP / |G|`` -- formula
  (5); **error rate** of matched groups = ``FP / |G|`` = 1 - precision (the paper: share
  of non-matching groups in ``M``); **reduction ratio** = ``1 - |G| / prod_p |D_p|``.

**Pairwise versions**, over all ``n (n-1) / 2`` pairs of parties ``(a, b)``: project every
group onto ``(r_a, r_b)``, de-duplicate per party pair, and compare with the true pairs
(``sum_e c_a(e) c_b(e)`` per party pair): pairwise recall = sum of true projected pairs /
sum of true pairs, pairwise precision = sum of true projected pairs / sum of projected
pairs, pairwise reduction ratio = ``1 - sum |projected| / sum |D_a||D_b|``.

Undefined ratios (no true groups, empty ``G``) are ``nan``. Duplicate groups in ``G``
are counted once. Everything is vectorised over groups.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.pprl.records import CandidateGroups, EncodedRecords

__all__ = [
    "PairwiseQuality",
    "BlockingQuality",
    "LinkageQuality",
    "true_group_mask",
    "blocking_quality",
    "linkage_quality",
    "GroupQuality",
    "group_quality",
    "candidate_pair_quality",
]


@attrs.frozen(kw_only=True)
class PairwiseQuality:
    """Pairwise counts and ratios summed over all party pairs (module docstring)."""

    pairs: int
    true_pairs: int
    true_found: int
    recall: float
    precision: float
    reduction_ratio: float


@attrs.frozen(kw_only=True)
class BlockingQuality:
    """Quality of candidate groups: ``pair_completeness`` (= recall, formula (4)),
    ``pairs_quality`` (= precision, formula (5)) and ``reduction_ratio``."""

    candidates: int
    true_groups: int
    true_candidates: int
    reduction_ratio: float
    pair_completeness: float
    pairs_quality: float
    pairwise: PairwiseQuality


@attrs.frozen(kw_only=True)
class LinkageQuality:
    """Quality of groups declared matches: recall, precision, ``error_rate`` (FP / |M|)
    and F1."""

    linked: int
    true_groups: int
    true_linked: int
    recall: float
    precision: float
    error_rate: float
    f1: float
    pairwise: PairwiseQuality


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else math.nan


def _entity_codes(
    entities: Mapping[str, Sequence[Any]] | Sequence[EncodedRecords], parties: tuple[str, ...]
) -> list[np.ndarray]:
    if isinstance(entities, Mapping):
        table = {p: entities[p] for p in parties if p in entities}
    else:
        table = {}
        for r in entities:
            if not isinstance(r, EncodedRecords):
                raise PrivregTypeError("entities must map party -> labels, or be a sequence of EncodedRecords")
            if r.entities is None:
                raise PrivregValueError(f"EncodedRecords of party {r.party!r} carry no entities")
            table[r.party] = r.entities
    missing = [p for p in parties if p not in table]
    if missing:
        raise PrivregValueError(f"no ground-truth entities for parties {missing}")
    labels = [pd.Series(list(table[p]), dtype=object) for p in parties]
    flat = pd.concat(labels, ignore_index=True)
    flat = flat.where(flat.notna() & (flat.astype(str) != ""), None)
    codes, _ = pd.factorize(flat)  # None -> -1
    out, start = [], 0
    for s in labels:
        out.append(codes[start : start + len(s)].astype(np.int64))
        start += len(s)
    return out


def _groups(groups: CandidateGroups | np.ndarray, parties: Sequence[str] | None) -> tuple[np.ndarray, tuple[str, ...]]:
    if isinstance(groups, CandidateGroups):
        names = groups.parties
        if parties is not None and tuple(parties) != names:
            raise PrivregValueError(f"parties {list(parties)} differ from the groups' parties {list(names)}")
        rec = groups.records
    else:
        if parties is None:
            raise PrivregValueError("pass parties= (the column order) with a plain array of groups")
        names = tuple(parties)
        rec = np.asarray(groups)
    rec = np.asarray(rec, dtype=np.int64).reshape(-1, len(names))
    if rec.size:
        rec = np.unique(rec, axis=0)
    return rec, names


def true_group_mask(records: np.ndarray, codes: Sequence[np.ndarray]) -> np.ndarray:
    """Boolean mask of groups (rows of ``records``) whose records share one entity."""
    records = np.asarray(records, dtype=np.int64)
    n = len(codes)
    if records.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    for p in range(n):
        if records[:, p].min() < 0 or records[:, p].max() >= codes[p].size:
            raise PrivregValueError(f"group column {p} refers to records outside the party's {codes[p].size} records")
    e = np.stack([codes[p][records[:, p]] for p in range(n)], axis=1)
    return (e[:, 0] >= 0) & np.all(e == e[:, :1], axis=1)


def _true_count(codes: Sequence[np.ndarray], subset: Sequence[int]) -> int:
    size = max((int(c.max()) + 1 if c.size else 0) for c in codes)
    counts = [np.bincount(codes[p][codes[p] >= 0], minlength=size).astype(object) for p in subset]
    prod = counts[0]
    for c in counts[1:]:
        prod = prod * c
    return int(prod.sum()) if size else 0


def _pairwise(rec: np.ndarray, codes: list[np.ndarray]) -> PairwiseQuality:
    n = len(codes)
    pairs = true_pairs = found = 0
    space = 0
    for a, b in itertools.combinations(range(n), 2):
        nb = codes[b].size
        space += codes[a].size * nb
        true_pairs += _true_count(codes, (a, b))
        if rec.shape[0] == 0:
            continue
        key = np.unique(rec[:, a] * nb + rec[:, b])
        ra, rb = key // nb, key % nb
        pairs += key.size
        found += int(np.count_nonzero((codes[a][ra] >= 0) & (codes[a][ra] == codes[b][rb])))
    return PairwiseQuality(
        pairs=pairs,
        true_pairs=true_pairs,
        true_found=found,
        recall=_ratio(found, true_pairs),
        precision=_ratio(found, pairs),
        reduction_ratio=1.0 - _ratio(pairs, space) if space else math.nan,
    )


def _true_groups(groups: Any, entities: Any, parties: Any) -> tuple[np.ndarray, list[np.ndarray], int, int]:
    """``(records, entity codes, true groups among them, true groups in all)``."""
    rec, names = _groups(groups, parties)
    codes = _entity_codes(entities, names)
    tp = int(np.count_nonzero(true_group_mask(rec, codes)))
    return rec, codes, tp, _true_count(codes, range(len(names)))


def blocking_quality(
    candidates: CandidateGroups | np.ndarray,
    *,
    entities: Mapping[str, Sequence[Any]] | Sequence[EncodedRecords],
    parties: Sequence[str] | None = None,
) -> BlockingQuality:
    """Reduction ratio, pair completeness and pairs quality of candidate groups."""
    rec, codes, tp, total = _true_groups(candidates, entities, parties)
    space = math.prod(int(c.size) for c in codes)
    return BlockingQuality(
        candidates=int(rec.shape[0]),
        true_groups=total,
        true_candidates=tp,
        reduction_ratio=1.0 - _ratio(rec.shape[0], space) if space else math.nan,
        pair_completeness=_ratio(tp, total),
        pairs_quality=_ratio(tp, rec.shape[0]),
        pairwise=_pairwise(rec, codes),
    )


def linkage_quality(
    linked: CandidateGroups | np.ndarray,
    *,
    entities: Mapping[str, Sequence[Any]] | Sequence[EncodedRecords],
    parties: Sequence[str] | None = None,
) -> LinkageQuality:
    """Recall, precision, error rate and F1 of groups declared matches."""
    rec, codes, tp, total = _true_groups(linked, entities, parties)
    recall = _ratio(tp, total)
    precision = _ratio(tp, rec.shape[0])
    f1 = 2 * recall * precision / (recall + precision) if (recall + precision) > 0 else math.nan
    return LinkageQuality(
        linked=int(rec.shape[0]),
        true_groups=total,
        true_linked=tp,
        recall=recall,
        precision=precision,
        error_rate=1.0 - precision if not math.isnan(precision) else math.nan,
        f1=f1,
        pairwise=_pairwise(rec, codes),
    )


@attrs.frozen(kw_only=True)
class GroupQuality:
    """Quality of groups of any size (at most one record per party), as the recommended
    profile's solver outputs them: a *true group* is the set of an entity's records
    across the parties (if it has at least two); ``recall`` = true groups output exactly
    / true groups, ``precision`` = groups output that are exactly a true group / groups
    output; ``pairwise`` counts the record pairs implied by the groups."""

    groups: int
    true_groups: int
    exact: int
    recall: float
    precision: float
    pairwise: PairwiseQuality


def _members_entities(codes: list[np.ndarray], group: Sequence[tuple[int, int]]) -> list[int]:
    return [int(codes[p][r]) for p, r in group]


def group_quality(
    groups: Sequence[Sequence[tuple[int, int]]],
    *,
    entities: Mapping[str, Sequence[Any]] | Sequence[EncodedRecords],
    parties: Sequence[str],
) -> GroupQuality:
    """Group and pairwise recall and precision of ``groups`` of ``(party index, record)``."""
    names = tuple(parties)
    codes = _entity_codes(entities, names)
    sizes: dict[int, int] = {}
    for c in codes:
        for e, k in zip(*np.unique(c[c >= 0], return_counts=True)):
            sizes[int(e)] = sizes.get(int(e), 0) + int(k)
    true_groups = sum(1 for k in sizes.values() if k >= 2)
    exact = 0
    pairs: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for g in groups:
        ents = _members_entities(codes, g)
        if ents[0] >= 0 and all(e == ents[0] for e in ents) and sizes.get(ents[0], 0) == len(g):
            exact += 1
        members = sorted(g)
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                (pa, ra), (pb, rb) = members[i], members[j]
                pairs.setdefault((pa, pb), []).append((ra, rb))
    found = npairs = true_pairs = 0
    space = 0
    for a, b in itertools.combinations(range(len(names)), 2):
        space += codes[a].size * codes[b].size
        true_pairs += _true_count(codes, (a, b))
        got = pairs.get((a, b), [])
        npairs += len(got)
        found += sum(1 for ra, rb in got if codes[a][ra] >= 0 and codes[a][ra] == codes[b][rb])
    pw = PairwiseQuality(
        pairs=npairs,
        true_pairs=true_pairs,
        true_found=found,
        recall=_ratio(found, true_pairs),
        precision=_ratio(found, npairs),
        reduction_ratio=1.0 - _ratio(npairs, space) if space else math.nan,
    )
    return GroupQuality(
        groups=len(groups),
        true_groups=true_groups,
        exact=exact,
        recall=_ratio(exact, true_groups),
        precision=_ratio(exact, len(groups)),
        pairwise=pw,
    )


def candidate_pair_quality(
    candidates: Mapping[tuple[int, int], np.ndarray],
    *,
    entities: Mapping[str, Sequence[Any]] | Sequence[EncodedRecords],
    parties: Sequence[str],
) -> PairwiseQuality:
    """Pair completeness (``recall``), pairs quality (``precision``) and reduction ratio
    of candidate pairs ``{(party a, party b): (k, 2) records}`` over all party pairs."""
    names = tuple(parties)
    codes = _entity_codes(entities, names)
    found = npairs = true_pairs = space = 0
    for a, b in itertools.combinations(range(len(names)), 2):
        space += codes[a].size * codes[b].size
        true_pairs += _true_count(codes, (a, b))
        got = np.asarray(candidates.get((a, b), np.zeros((0, 2), dtype=np.int64)), dtype=np.int64).reshape(-1, 2)
        npairs += got.shape[0]
        ea, eb = codes[a][got[:, 0]], codes[b][got[:, 1]]
        found += int(np.count_nonzero((ea >= 0) & (ea == eb)))
    return PairwiseQuality(
        pairs=npairs,
        true_pairs=true_pairs,
        true_found=found,
        recall=_ratio(found, true_pairs),
        precision=_ratio(found, npairs),
        reduction_ratio=1.0 - _ratio(npairs, space) if space else math.nan,
    )
