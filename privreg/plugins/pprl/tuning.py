"""Choosing the LSH parameters ``J`` (groups) and ``K`` (bits per group) (paper 004, Sec. 4.1).

**Pairwise collision probability.** Two filters of length ``L`` at Hamming distance ``d``
get the same key in one group when none of its ``K`` positions is among the ``d``
differing ones:

* positions drawn independently with replacement (the paper's ``h_jk``, each position
  uniform on ``[0, L)``): ``p1 = (1 - d/L)^K``;
* ``K`` distinct positions (what :func:`blocking.lsh_positions` draws):
  ``p1 = C(L-d, K) / C(L, K) = prod_{i<K} (L-d-i)/(L-i)``, slightly smaller.

Groups are drawn independently, so the pair shares at least one LSH block with
probability ``P = 1 - (1 - p1)^J`` -- with replacement this is the familiar
``1 - (1 - (1 - d/L)^K)^J``.

**Multi-party.** A candidate group of ``n`` records survives LSH only if in some group
*all* ``n`` keys are equal, i.e. all ``n - 1`` pairs with the first record collide **in the
same group** -- not merely each pair in some group. Given the *spread* ``D`` (the number
of positions where the ``n`` filters do not all agree) this is exactly
``1 - (1 - p1(D))^J`` (:func:`group_collision_probability`). To predict it we use the
*star model*: each record is the entity's reference filter with ``deviation`` bits flipped
at uniformly random distinct positions, independently per record (with
``reference_included`` one record is the reference itself). ``D`` is then the size of a
union of random ``deviation``-subsets (a Markov chain we evaluate exactly), and since the
same filters meet every group, ``P = E_D[1 - (1 - p1(D))^J]`` (expectation *outside*).

**Choice** (:func:`suggest_lsh`): among ``1 <= K <= max_bits``, ``1 <= J <= max_groups``
meeting the recall target, minimise the expected work per record,
``J * (1 + records * p1(background_distance))``: the record is placed in ``J`` blocks
(hashing, signatures, merging) and in each group meets, in expectation,
``records * p1(background_distance)`` non-matching records of another party of
``records`` records, each of which becomes candidate work. Ties go to the smaller ``J``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import attrs
import numpy as np
from scipy.special import gammaln

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.plugins.pprl.encoding import hamming
from privreg.plugins.pprl.records import EncodedRecords

__all__ = [
    "key_probability",
    "collision_probability",
    "group_collision_probability",
    "spread_distribution",
    "multiparty_collision_probability",
    "deviation_for_distance",
    "LshSuggestion",
    "suggest_lsh",
    "distance_quantiles",
    "DispersionCalibration",
    "calibrate_dispersion",
]


@overload
def _check(filter_length: Any, bits: Any, groups: None = None) -> tuple[int, int, None]: ...


@overload
def _check(filter_length: Any, bits: Any, groups: int) -> tuple[int, int, int]: ...


def _check(filter_length: Any, bits: Any, groups: Any | None = None) -> tuple[int, int, int | None]:
    L = v.check_int("filter_length", filter_length, minimum=1)
    K = v.check_int("bits", bits, minimum=1)
    J = None if groups is None else v.check_int("groups", groups, minimum=1)
    if K > L:
        raise PrivregValueError(f"bits K={K} cannot exceed filter_length L={L}")
    return L, K, J


def key_probability(distance: Any, *, filter_length: int, bits: int, replacement: bool = False) -> np.ndarray:
    """``p1``: probability that ``K`` sampled positions avoid ``distance`` differing ones
    (vectorised over ``distance``)."""
    L, K, _ = _check(filter_length, bits)
    d = np.asarray(distance, dtype=float)
    if np.any((d < 0) | (d > L)):
        raise PrivregValueError(f"distance must lie in [0, filter_length={L}]; got {distance!r}")
    if replacement:
        return (1.0 - d / L) ** K
    i = np.arange(K)
    terms = (L - d[..., None] - i) / (L - i)
    return np.where(L - d >= K, np.prod(np.clip(terms, 0.0, None), axis=-1), 0.0)


def collision_probability(
    distance: Any, *, filter_length: int, bits: int, groups: int, replacement: bool = False
) -> np.ndarray:
    """Probability that a pair at Hamming ``distance`` shares an LSH block in at least one
    of ``groups`` independent groups: ``1 - (1 - p1)^J`` (module docstring). With
    ``replacement=True`` this is ``1 - (1 - (1 - d/L)^K)^J``."""
    L, K, J = _check(filter_length, bits, groups)
    p1 = key_probability(distance, filter_length=L, bits=K, replacement=replacement)
    return 1.0 - (1.0 - p1) ** J


def group_collision_probability(
    spread: Any, *, filter_length: int, bits: int, groups: int, replacement: bool = False
) -> np.ndarray:
    """Exact probability that ``n`` fixed filters whose ``spread`` positions are not all
    equal share an LSH block (all keys equal in one group)."""
    return collision_probability(spread, filter_length=filter_length, bits=bits, groups=groups, replacement=replacement)


def _log_comb(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        out = gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)
    return np.where((b < 0) | (b > a), -np.inf, out)


def spread_distribution(*, filter_length: int, deviation: int, records: int) -> np.ndarray:
    """pmf (length ``L + 1``) of the size of the union of ``records`` independent uniformly
    random ``deviation``-subsets of ``[0, L)``."""
    L = v.check_int("filter_length", filter_length, minimum=1)
    d = v.check_int("deviation", deviation, minimum=0)
    r = v.check_int("records", records, minimum=0)
    if d > L:
        raise PrivregValueError(f"deviation must be <= filter_length={L}; got {d}")
    pmf = np.zeros(L + 1)
    pmf[0] = 1.0
    u = np.arange(L + 1, dtype=float)
    a = np.arange(d + 1, dtype=float)
    log_total = _log_comb(np.array(float(L)), np.array(float(d)))
    # transition u -> u + a: choose a new positions among L - u and d - a old ones among u
    logt = _log_comb((L - u)[:, None], a[None, :]) + _log_comb(u[:, None], (d - a)[None, :]) - log_total
    trans = np.exp(logt)
    for _ in range(r):
        nxt = np.zeros(L + 1)
        for step in range(d + 1):  # trans[u, step] = 0 whenever u + step > L
            nxt[step:] += (pmf * trans[:, step])[: L + 1 - step]
        pmf = nxt
    return pmf / pmf.sum()


def multiparty_collision_probability(
    *,
    deviation: int,
    parties: int,
    filter_length: int,
    bits: int,
    groups: int,
    replacement: bool = False,
    reference_included: bool = False,
) -> float:
    """Probability that the ``parties`` records of one entity share an LSH block, under the
    star model (module docstring): ``E_D[1 - (1 - p1(D))^J]``."""
    L, K, J = _check(filter_length, bits, groups)
    n = v.check_int("parties", parties, minimum=2)
    pmf = spread_distribution(filter_length=L, deviation=deviation, records=n - 1 if reference_included else n)
    p = collision_probability(np.arange(L + 1), filter_length=L, bits=K, groups=J, replacement=replacement)
    return float(np.dot(pmf, p))


def deviation_for_distance(distance: float, *, filter_length: int) -> int:
    """The per-record deviation ``d_r`` of the star model whose expected pairwise distance
    ``2 d_r (1 - d_r / L)`` equals ``distance`` (rounded to the nearest integer)."""
    L = v.check_int("filter_length", filter_length, minimum=1)
    x = v.check_real("distance", distance)
    if not 0 <= x <= L / 2:
        raise PrivregValueError(f"distance must lie in [0, L/2 = {L / 2}] for the star model; got {distance!r}")
    return int(round(L / 2 * (1 - math.sqrt(1 - 2 * x / L))))


@attrs.frozen(kw_only=True)
class LshSuggestion:
    """A suggested ``(groups J, bits K)`` with its predicted ``recall`` (collision
    probability of a true pair or group) and ``work`` (the objective
    ``J * (1 + records * p1(background))`` per record). Unpacks as ``J, K = suggest_lsh(...)``."""

    groups: int
    bits: int
    recall: float
    work: float

    def __iter__(self) -> Any:
        return iter((self.groups, self.bits))


def suggest_lsh(
    *,
    filter_length: int,
    distance: float,
    target_recall: float,
    max_bits: int = 64,
    max_groups: int = 64,
    background_distance: float | None = None,
    records: int = 10_000,
    parties: int = 2,
    deviation: int | None = None,
    replacement: bool = False,
    min_bits: int = 1,
) -> LshSuggestion:
    """``(J, K)`` minimising ``J * (1 + records * p1(background_distance))`` subject to
    recall >= ``target_recall`` (module docstring).

    ``distance``: Hamming distance of two records of one entity to plan for (e.g. a high
    quantile of true-pair distances, :func:`distance_quantiles`). ``background_distance``:
    typical distance of non-matching records (default ``L / 2``; measure it, names share
    q-grams). ``records``: size of another party's database. ``parties > 2`` uses the
    multi-party star model with ``deviation`` (default :func:`deviation_for_distance`).
    ``min_bits``: the smallest K considered. With many parties the work objective (which
    counts pairwise background collisions) can favour a tiny K whose blocks hold most
    records; set e.g. ``min_bits=8`` to keep blocks selective."""
    L = v.check_int("filter_length", filter_length, minimum=1)
    d = v.check_real("distance", distance)
    target = v.check_probability("target_recall", target_recall, open_low=True, open_high=True)
    max_bits = min(v.check_int("max_bits", max_bits, minimum=1), L)
    min_bits = v.check_int("min_bits", min_bits, minimum=1)
    if min_bits > max_bits:
        raise PrivregValueError(f"min_bits={min_bits} exceeds max_bits={max_bits}; lower min_bits.")
    max_groups = v.check_int("max_groups", max_groups, minimum=1)
    n = v.check_int("parties", parties, minimum=2)
    size = v.check_int("records", records, minimum=1)
    bg = L / 2 if background_distance is None else v.check_real("background_distance", background_distance)
    if not 0 <= bg <= L or not 0 <= d <= L:
        raise PrivregValueError(f"distances must lie in [0, {L}]; got distance={d}, background_distance={bg}")
    if n > 2:
        dev = (
            deviation_for_distance(d, filter_length=L)
            if deviation is None
            else v.check_int("deviation", deviation, minimum=0)
        )
        pmf = spread_distribution(filter_length=L, deviation=dev, records=n)
        spreads = np.arange(L + 1)
    best: LshSuggestion | None = None
    best_recall = 0.0
    for K in range(min_bits, max_bits + 1):
        Js = np.arange(1, max_groups + 1)
        if n == 2:
            p1 = float(key_probability(d, filter_length=L, bits=K, replacement=replacement))
            recall = 1.0 - (1.0 - p1) ** Js
        else:
            p1s = key_probability(spreads, filter_length=L, bits=K, replacement=replacement)
            recall = (pmf[None, :] * (1.0 - (1.0 - p1s[None, :]) ** Js[:, None])).sum(axis=1)
        best_recall = max(best_recall, float(recall.max()))
        ok = np.flatnonzero(recall >= target)
        if ok.size == 0:
            continue
        J = int(Js[ok[0]])
        work = J * (1.0 + size * float(key_probability(bg, filter_length=L, bits=K, replacement=replacement)))
        cand = LshSuggestion(groups=J, bits=K, recall=float(recall[ok[0]]), work=work)
        if best is None or (cand.work, cand.groups) < (best.work, best.groups):
            best = cand
    if best is None:
        raise PrivregValueError(
            f"no J <= {max_groups}, K <= {max_bits} reaches target_recall={target} at distance {d} "
            f"(best {best_recall:.3f}); raise max_groups, lower the target, or reduce the distance "
            f"(fewer hash functions per q-gram)"
        )
    return best


def distance_quantiles(
    a: np.ndarray, b: np.ndarray, *, quantiles: Sequence[float] = (0.5, 0.8, 0.9, 0.95)
) -> dict[float, float]:
    """Quantiles of the row-wise Hamming distances between aligned filters ``a[i]``,
    ``b[i]`` (e.g. true pairs of a labelled sample, to choose ``distance``)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] == 0:
        raise PrivregValueError(f"a and b must be non-empty 2-d arrays of equal shape; got {a.shape}, {b.shape}")
    d = hamming(a, b)
    return {float(q): float(np.quantile(d, q)) for q in quantiles}


@attrs.frozen(kw_only=True)
class DispersionCalibration:
    """A calibration point ``(ht, lt)`` of formula (3) measured on labelled data, and the
    curve it was read from: ``lmins`` with the multi-party pair completeness and pairs
    quality of double blocking + sliding-window merge at each."""

    ht: float
    lt: int
    lmins: tuple[int, ...]
    pair_completeness: tuple[float, ...]
    pairs_quality: tuple[float, ...]


def calibrate_dispersion(
    parties: Sequence[EncodedRecords],
    *,
    config: Any,
    secret: bytes,
    lmins: Sequence[int] = tuple(range(2, 33, 2)),
    window: int | None = None,
    plateau: float = 0.95,
    rng: RandomSource | None = None,
) -> DispersionCalibration:
    """Measure the paper's calibration point on labelled data of the quality to be linked
    (Section 4.2.2: "``Ht`` is the overall dispersion of data of the same quality, ``lt``
    its best minimum suffix length").

    ``ht`` = the overall dispersion ``Hs`` of the parties' LSH blocks (as in
    :func:`blocking.choose_lmin`). ``lt`` = the smallest ``lmin`` of ``lmins`` whose pairs
    quality reaches ``plateau`` times the best over the sweep (the paper picks the
    ``lmin`` where precision and recall level off; recall falls only slowly with
    ``lmin``). The parties' :class:`EncodedRecords` must carry ground-truth entities.
    Use the result as ``DispersionConfig(ht=..., lt=...)``; keep ``theta`` below ``ht``."""
    from privreg.plugins.pprl.blocking import BlockingConfig, choose_lmin, party_signatures
    from privreg.plugins.pprl.merge import candidate_groups, sliding_window_merge
    from privreg.plugins.pprl.quality import blocking_quality

    if not isinstance(config, BlockingConfig):
        raise PrivregTypeError(f"config must be a BlockingConfig; got {config!r}")
    parts = list(parties)
    if len(parts) < 2 or any(not isinstance(p, EncodedRecords) or p.entities is None for p in parts):
        raise PrivregValueError("calibration needs at least 2 parties' EncodedRecords with ground-truth entities")
    plateau = v.check_probability("plateau", plateau, open_low=True)
    grid = tuple(sorted({v.check_int("lmin", x, minimum=1) for x in lmins}))
    if not grid:
        raise PrivregValueError("lmins must hold at least one suffix length >= 1")
    rng = resolve_random(rng)
    choice = choose_lmin(parts, config=config, secret=secret, rng=rng)
    if choice.hs is None:
        raise PrivregValueError(
            "no LSH block has more than dispersion.min_block_size records, so Hs is undefined; "
            "use more records, fewer lsh_bits or a smaller min_block_size"
        )
    w = config.window_for(len(parts)) if window is None else v.check_int("window", window, minimum=2)
    names = [p.party for p in parts]
    pcs, pqs = [], []
    for lmin in grid:
        sigs = [party_signatures(p, config=config, secret=secret, lmin=lmin) for p in parts]
        q = blocking_quality(candidate_groups(sliding_window_merge(sigs, window=w), parties=names), entities=parts)
        pcs.append(q.pair_completeness)
        pqs.append(q.pairs_quality)
    quality = np.nan_to_num(np.array(pqs), nan=0.0)
    lt = grid[int(np.flatnonzero(quality >= plateau * quality.max())[0])]
    return DispersionCalibration(
        ht=choice.hs, lt=lt, lmins=grid, pair_completeness=tuple(pcs), pairs_quality=tuple(pqs)
    )
