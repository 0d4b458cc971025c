"""What the recommended protocol's messages let a party infer, measured on its transcript.

The cryptographic layer (:mod:`dice_protocol`) hides the similarities, but the blocking
layer does not: the linkage unit receives every record's keyed band tokens
(:mod:`bands`) and exact-pass tokens, and the data parties receive their candidate pairs.
These functions compute, from what a party *receives*, the inferences the protocol's
``learns()`` and caveats declare, so that a test and ``benchmarks/pprl_leakage.py`` can
measure them (issue #33):

* the linkage unit's similarity estimate: two records at Hamming distance ``d`` (filters
  of ``L`` bits) share a band of ``K`` sampled positions with probability about
  ``(1 - d / L)^K`` (Indyk and Motwani 1998), so the count ``s`` of equal tokens out of
  ``J`` bands gives ``d ~ L (1 - (s / J)^(1 / K))`` and ``Dice ~ 1 - d / (2 m)``, with
  ``m`` the median popcount the linkage unit reads off ``J`` (:func:`popcount_from_bands`).
  Its rank correlation with the true Dice is the leakage figure; a blocking mode that hides
  similarity must drive it towards 0 for this same estimator;
* the exact-pass tokens' frequency classes (equal dates of birth, equal id numbers);
* a data party's membership inference: "my record has a candidate at party Q" as a
  predictor of "Q holds this person";
* under ``blocking="parties"`` (:mod:`party_blocking`), what the linkage unit holds of a
  candidate slot: its position in the pair's keyed order before the decisions
  (:func:`slot_view`, :func:`slot_truth`) and, after them, the records of the accepted
  slots; :func:`bucket_spearman` is the best estimator of Dice from such discrete
  features (cross-fitted bucket means).

Every function is a measurement for tests and benchmarks (it needs the ground truth); none
runs inside the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from scipy.stats import spearmanr

from privreg.core.errors import PrivregValueError
from privreg.plugins.pprl.bands import recommended_bands

__all__ = [
    "SimilarityLeakage",
    "Membership",
    "shared_bands",
    "popcount_from_bands",
    "estimate_dice",
    "true_dice",
    "similarity_leakage",
    "frequency_classes",
    "membership",
    "count_advantage",
    "linkage_unit_view",
    "candidates_received",
    "within_party_pairs",
    "SlotView",
    "slot_view",
    "slot_truth",
    "bucket_spearman",
]

#: Pairs sharing at least this many bands are the "strong" pairs of the report.
STRONG_BANDS = 10


@attrs.frozen(kw_only=True)
class SimilarityLeakage:
    """How well the estimate tracks the true Dice over ``pairs`` candidate pairs:
    Spearman rank correlation, mean absolute error (all pairs, and pairs sharing >= 5
    bands), and the fraction of pairs sharing >= :data:`STRONG_BANDS` bands that are
    true matches (``nan`` where no pair qualifies)."""

    pairs: int
    spearman: float
    mae: float
    mae_five: float
    strong_pairs: int
    strong_match_fraction: float


@attrs.frozen(kw_only=True)
class Membership:
    """True- and false-positive rates of "my record has a candidate at Q" for "Q holds
    this person", over every ordered pair of data parties (``positives``: records whose
    person the peer holds; ``negatives``: the others)."""

    tpr: float
    fpr: float
    positives: int
    negatives: int


def shared_bands(tokens_a: np.ndarray, tokens_b: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Per pair ``(i, j)``: how many of the ``J`` band tokens of ``tokens_a[i]`` and
    ``tokens_b[j]`` are equal (tokens are keyed by band, so only the same column can match)."""
    a = np.asarray(tokens_a)
    b = np.asarray(tokens_b)
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise PrivregValueError(f"token matrices must be (records, bands) with equal bands; got {a.shape}, {b.shape}")
    return np.asarray((a[p[:, 0]] == b[p[:, 1]]).sum(axis=1), dtype=np.int64)


def popcount_from_bands(bands: int, *, filter_length: int, records: int) -> tuple[float, int]:
    """``(median popcount, K)`` as the linkage unit infers them from the number of bands:
    the middle of the popcounts for which :func:`bands.recommended_bands` (at the largest
    party's ``records``, which the token matrices show) gives ``bands`` (binary search: the
    band count grows with the popcount), and the ``K`` it picks there."""

    def config(m: int) -> Any:
        return recommended_bands(filter_length=filter_length, popcount=m, records=records)

    def first(pred: Any) -> int:  # smallest m in [1, L] with pred(m), else L + 1
        lo, hi = 1, filter_length + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    lo = first(lambda m: config(m).bands >= bands)
    hi = first(lambda m: config(m).bands > bands) - 1
    m = (lo + hi) // 2 if lo <= hi else min(lo, filter_length)
    return (lo + hi) / 2 if lo <= hi else float(m), int(config(m).bits)


def estimate_dice(shared: np.ndarray, *, bands: int, bits: int, filter_length: int, popcount: float) -> np.ndarray:
    """The Dice similarity implied by ``shared`` equal band tokens of ``bands`` bands of
    ``bits`` positions, for filters of ``filter_length`` bits and median ``popcount``
    (module docstring); pairs sharing no band (exact-pass candidates) get half a band.
    Clipped to [0, 1]."""
    s = np.maximum(np.asarray(shared, dtype=np.float64), 0.5)
    agree = (s / bands) ** (1.0 / bits)
    d = filter_length * (1.0 - agree)
    return np.asarray(np.clip(1.0 - d / (2.0 * popcount), 0.0, 1.0), dtype=np.float64)


def true_dice(filters_a: np.ndarray, filters_b: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """The Dice coefficient ``2 |a & b| / (|a| + |b|)`` of each pair's bit filters (0 for two
    empty filters)."""
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    fa = np.asarray(filters_a, dtype=bool)[p[:, 0]]
    fb = np.asarray(filters_b, dtype=bool)[p[:, 1]]
    inter = (fa & fb).sum(axis=1)
    total = fa.sum(axis=1) + fb.sum(axis=1)
    return np.where(total > 0, 2.0 * inter / np.maximum(total, 1), 0.0)


def similarity_leakage(
    shared: np.ndarray, estimate: np.ndarray, truth: np.ndarray, match: np.ndarray
) -> SimilarityLeakage:
    """Compare the linkage unit's ``estimate`` (from ``shared`` band counts) with the true
    Dice ``truth`` of the same pairs; ``match``: whether each pair is one person."""
    s, e, t, m = (np.asarray(x) for x in (shared, estimate, truth, match))
    if not s.shape == e.shape == t.shape == m.shape or s.ndim != 1:
        raise PrivregValueError("shared, estimate, truth and match must be 1-D arrays of one length per pair")
    if s.size < 2:
        raise PrivregValueError(f"need at least 2 candidate pairs to correlate; got {s.size}")
    rho = float(spearmanr(e, t).statistic) if np.ptp(e) and np.ptp(t) else 0.0
    err = np.abs(e - t)
    five = s >= 5
    strong = s >= STRONG_BANDS
    return SimilarityLeakage(
        pairs=int(s.size),
        spearman=rho,
        mae=float(err.mean()),
        mae_five=float(err[five].mean()) if five.any() else float("nan"),
        strong_pairs=int(strong.sum()),
        strong_match_fraction=float(m[strong].mean()) if strong.any() else float("nan"),
    )


def frequency_classes(tokens: Sequence[np.ndarray]) -> dict[int, int]:
    """``{class size: records}`` of one exact pass pooled over the parties' token columns
    (0 = missing, left out): the linkage unit sees, e.g., which records share a date of
    birth and how common each date is, not the date."""
    col = np.concatenate([np.asarray(t, dtype=np.uint64).ravel() for t in tokens])
    col = col[col != 0]
    _, inverse, counts = np.unique(col, return_inverse=True, return_counts=True)
    sizes, records = np.unique(counts[inverse], return_counts=True)
    return {int(k): int(r) for k, r in zip(sizes, records)}


def membership(candidates: Mapping[tuple[str, str], np.ndarray], entities: Mapping[str, Sequence[Any]]) -> Membership:
    """Membership inference of the data parties. ``candidates[(p, q)]``: the rows of ``p``
    that have a candidate at ``q`` (what ``p`` reads off its deal); ``entities[p]``: the
    person of each of ``p``'s rows (ground truth)."""
    tp = fp = pos = neg = 0
    for (p, q), rows in candidates.items():
        held = set(entities[q])
        truth = np.array([e in held for e in entities[p]], dtype=bool)
        flagged = np.zeros(len(entities[p]), dtype=bool)
        flagged[np.asarray(rows, dtype=np.int64)] = True
        tp += int((flagged & truth).sum())
        fp += int((flagged & ~truth).sum())
        pos += int(truth.sum())
        neg += int((~truth).sum())
    return Membership(
        tpr=tp / pos if pos else float("nan"), fpr=fp / neg if neg else float("nan"), positives=pos, negatives=neg
    )


def count_advantage(
    candidates: Mapping[tuple[str, str], np.ndarray], entities: Mapping[str, Sequence[Any]]
) -> tuple[float, int]:
    """``(advantage, t)``: the best membership test on candidate *counts*, "my record has at
    least ``t`` candidates at Q" for "Q holds this person", maximising TPR - FPR over ``t``
    (pooled over ordered pairs of parties). ``candidates[(p, q)]``: ``p``'s row of each of
    its candidate pairs at ``q`` (repeats count). With padding (:mod:`padding`), "has a
    candidate" (``t = 1``) says nothing; this is what a party can still read off the counts."""
    score: list[np.ndarray] = []
    truth: list[np.ndarray] = []
    for (p, q), rows in candidates.items():
        held = set(entities[q])
        truth.append(np.array([e in held for e in entities[p]], dtype=bool))
        score.append(np.bincount(np.asarray(rows, dtype=np.int64), minlength=len(entities[p])))
    c, y = np.concatenate(score), np.concatenate(truth)
    if y.all() or not y.any():
        raise PrivregValueError("membership needs records whose person the peer holds and records it does not")
    best, arg = 0.0, 1
    for t in range(1, int(c.max(initial=0)) + 2):
        adv = float((c[y] >= t).mean() - (c[~y] >= t).mean())
        if adv > best:
            best, arg = adv, t
    return best, arg


def linkage_unit_view(transcript: Any, parties: Sequence[str], linkage_unit: str) -> dict[str, dict[str, np.ndarray]]:
    """``{party: {"tokens", "exact"}}``: the blocking tokens the linkage unit received
    (from a transcript that kept its payloads)."""
    got = {m.sender: m.payload for m in transcript.received_by(linkage_unit) if m.step == "tokens"}
    if sorted(got) != sorted(parties) or any(v is None for v in got.values()):
        raise PrivregValueError("the transcript lacks the tokens of some party; run with keep_payloads=True")
    return {p: {"tokens": got[p]["tokens"], "exact": got[p]["exact"]} for p in parties}


def candidates_received(
    transcript: Any, parties: Sequence[str], linkage_unit: str
) -> dict[tuple[str, str], np.ndarray]:
    """``{(p, q): (k, 2) pairs as (row of p, row of q)}``: the candidate pairs each data
    party ``p`` received from the linkage unit for peer ``q`` (its ``"deal"``)."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for p in parties:
        (deal,) = [m.payload for m in transcript.received_by(p) if m.step == "deal" and m.sender == linkage_unit]
        for d in deal:
            pairs = np.asarray(d["pairs"], dtype=np.int64).reshape(-1, 2)
            out[(p, d["peer"])] = pairs if d["role"] == "left" else pairs[:, ::-1]
    return out


def within_party_pairs(tokens: np.ndarray, *, min_shared: int) -> np.ndarray:
    """``(k, 2)`` pairs ``i < j`` of one party's records sharing at least ``min_shared``
    band tokens: the near-duplicates the linkage unit can find inside one party."""
    from privreg.plugins.pprl.bands import candidate_pairs

    pairs, _ = candidate_pairs(tokens, tokens, min_shared=min_shared)
    return pairs[pairs[:, 0] < pairs[:, 1]]


@attrs.frozen(kw_only=True)
class SlotView:
    """What the linkage unit received under ``blocking="parties"``: per data party and
    peer the slot count and digest (``summaries[p][q] = (count, digest)``), the slots it
    asked to resolve (``asked[(p, q)]``, its accepted slots) and the records it got back
    (``resolved[(p, q)]``: p's record of each asked slot)."""

    summaries: dict[str, dict[str, tuple[int, bytes]]]
    asked: dict[tuple[str, str], np.ndarray]
    resolved: dict[tuple[str, str], np.ndarray]
    steps: frozenset[str]


def slot_view(transcript: Any, parties: Sequence[str], linkage_unit: str) -> SlotView:
    """The linkage unit's view of a ``blocking="parties"`` run (payloads kept)."""
    got = transcript.received_by(linkage_unit)
    summaries = {
        m.sender: {d["peer"]: (int(d["count"]), bytes(d["digest"])) for d in m.payload}
        for m in got
        if m.step == "candidates"
    }
    if sorted(summaries) != sorted(parties):
        raise PrivregValueError("the transcript lacks some party's candidates message; run with keep_payloads=True")
    asked: dict[tuple[str, str], np.ndarray] = {}
    resolved: dict[tuple[str, str], np.ndarray] = {}
    for p in parties:
        peers = [q for q in parties if q != p]  # the pairs' order: the peers in run order
        (ask,) = [m.payload for m in transcript.received_by(p) if m.step == "resolve" and m.sender == linkage_unit]
        (rows,) = [m.payload for m in got if m.step == "resolved" and m.sender == p]
        for q, a, r in zip(peers, ask, rows):
            asked[(p, q)] = np.asarray(a, dtype=np.int64)
            resolved[(p, q)] = np.asarray(r, dtype=np.int64)
    return SlotView(summaries=summaries, asked=asked, resolved=resolved, steps=frozenset(m.step for m in got))


def slot_truth(outputs: Mapping[str, Any], left: str, right: str) -> np.ndarray:
    """``(k, 2)`` (left record, right record) of each slot of the pair, in slot order, from
    the two data parties' outputs (ground truth: no single party knows both columns)."""
    return np.column_stack([outputs[left]["slots"][right], outputs[right]["slots"][left]]).astype(np.int64)


def bucket_spearman(features: np.ndarray, truth: np.ndarray, *, folds: int = 2, seed: int = 0) -> float:
    """Spearman between the true Dice and the best estimator of it from discrete
    ``features`` ((k, f) integers): each pair's estimate is the mean truth of the pairs with
    the same feature values in the other folds (cross-fitted, so an estimator cannot
    memorise the truth; unseen values get the fold's mean). 0 for a constant estimate."""
    x = np.asarray(features, dtype=np.int64).reshape(len(truth), -1)
    t = np.asarray(truth, dtype=np.float64)
    if t.size < 2 * folds:
        raise PrivregValueError(f"need at least {2 * folds} pairs; got {t.size}")
    _, key = np.unique(x, axis=0, return_inverse=True)
    key = key.reshape(-1)
    fold = np.random.default_rng(seed).integers(0, folds, t.size)
    est = np.empty(t.size)
    for f in range(folds):
        train, test = fold != f, fold == f
        sums = np.bincount(key[train], weights=t[train], minlength=key.max() + 1)
        n = np.bincount(key[train], minlength=key.max() + 1)
        mean = t[train].mean() if train.any() else 0.0
        est[test] = np.where(n[key[test]] > 0, sums[key[test]] / np.maximum(n[key[test]], 1), mean)
    return float(spearmanr(est, t).statistic) if np.ptp(est) and np.ptp(t) else 0.0
