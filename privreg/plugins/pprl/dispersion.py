"""Entropy-based block dispersion and the minimum suffix length (paper 004, Section 4.2.2).

After LSH blocking, the *dispersion* of a block says how different its records still
are: low dispersion means LSH already separated dissimilar records (splitting further
would lose true matches), high dispersion means the block can be split by a suffix.

Per party (Section 4.2.2): among its LSH blocks (all ``J`` groups pooled) holding more
than ``X`` records, pick ``N`` at random, and from each pick ``q`` records at random.
``m`` bit positions of ``bf`` that no LSH hash function uses are fixed for all parties
(we draw them with a keyed PRG from the shared secret; when fewer than ``m`` positions
are free of every group, blocks of group ``j`` use positions outside group ``j``). Each sampled record gives the
sequence of its ``m`` bits; the *single-block dispersion* of block ``j`` is the entropy
(formula (1)) of the distribution of its ``I`` distinct sequences::

    H_j = - sum_{i=1..I} p_i log p_i        p_i = (count of sequence i) / q

and the *overall dispersion* (formula (2)) is their mean over the ``n x N`` sampled
blocks of all parties, ``Hs = (1 / nN) sum_j H_j``. Rule (formula (3)): if
``Hs <= theta`` suffix blocking is skipped; otherwise::

    lmin = lt (Hs - theta) / (Ht - theta)

where ``(Ht, lt)`` is a calibration point (overall dispersion and best minimum suffix
length measured on data of the same quality). The paper's worked example (Section 5,
30 % corruption): ``Ht = 1.4, lt = 15, theta = 0.5`` and ``Hs = 1.11`` give
``lmin = 10.17``, used as 10. We round to the nearest integer (halves up) and clamp to
``[1, maximum]`` (:func:`round_lmin`).

The paper's formulas (1)-(2) did not survive text extraction and it names neither the
logarithm base nor ``m, q, N, X``. We use base 2 (bits) by default (``log_base``) and the
defaults of :class:`DispersionConfig`; ``theta, Ht, lt`` are the paper's values for its
NCVR data and must be recalibrated for other data and other ``m, q`` (see
:mod:`tuning`). Sampling uses an explicit :class:`~privreg.core.randomness.RandomSource`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.noise.vector import uniform_below
from privreg.plugins.pprl.kdf import derive_key

__all__ = [
    "DispersionConfig",
    "lmin_from_dispersion",
    "round_lmin",
    "dispersion_positions",
    "sequence_entropy",
    "block_entropies",
    "overall_dispersion",
]


def _positive(name: str) -> Any:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        x = v.check_real(f"{name}.{attribute.name}", value)
        if not (math.isfinite(x) and x > 0):
            raise PrivregValueError(f"{name}.{attribute.name} must be finite and > 0; got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class DispersionConfig:
    """Parameters of the dispersion rule (Section 4.2.2).

    ``theta``, ``ht``, ``lt``: threshold and calibration point of formula (3) (paper:
    0.5 / 1.4 / 15 at 30 % corruption; theta = 0.3 at 75 %). ``positions`` = ``m`` bit
    positions unused by LSH; ``records`` = ``q`` records sampled per block; ``blocks`` =
    ``N`` blocks sampled per party; ``min_block_size`` = ``X`` (only blocks with more than
    ``X`` records are sampled; needs ``q <= X + 1``); ``log_base`` of the entropy.

    The paper gives no ``m, q, N, X``. With ``m = q = 4`` (at most 2 bits of entropy per
    block) the measured ``Hs`` falls in the paper's range: on FEBRL-like data (3 parties
    x 5000 records, 30 % corrupted, ``J = 3, K = 20``) ``Hs`` is about 1.15, so the paper's
    constants give ``lmin = 11``; there the precision plateau starts near ``lmin = 20``.
    Recalibrate ``(ht, lt)`` for your data with :func:`tuning.calibrate_dispersion`.
    """

    theta: float = attrs.field(default=0.5)
    ht: float = attrs.field(default=1.4, validator=_positive("dispersion"))
    lt: float = attrs.field(default=15.0, validator=_positive("dispersion"))
    positions: int = 4
    records: int = 4
    blocks: int = 100
    min_block_size: int = 8
    log_base: float = attrs.field(default=2.0, validator=_positive("dispersion"))

    def __attrs_post_init__(self) -> None:
        theta = v.check_real("dispersion.theta", self.theta)
        if not (math.isfinite(theta) and theta >= 0):
            raise PrivregValueError(f"dispersion.theta must be finite and >= 0; got {self.theta!r}")
        if self.ht <= theta:
            raise PrivregValueError(
                f"dispersion.ht must exceed theta (formula (3) divides by Ht - theta); got ht={self.ht}, theta={theta}"
            )
        m = v.check_int("dispersion.positions", self.positions, minimum=1)
        if m > 62:
            raise PrivregValueError(f"dispersion.positions must be <= 62; got {m}")
        q = v.check_int("dispersion.records", self.records, minimum=2)
        v.check_int("dispersion.blocks", self.blocks, minimum=1)
        x = v.check_int("dispersion.min_block_size", self.min_block_size, minimum=1)
        if q > x + 1:
            raise PrivregValueError(
                f"dispersion.records (q={q}) must be <= min_block_size + 1 = {x + 1}: blocks with more "
                f"than X={x} records must hold q records to sample. Raise min_block_size or lower records."
            )
        if self.log_base == 1:
            raise PrivregValueError("dispersion.log_base must not be 1")


def lmin_from_dispersion(hs: float, *, theta: float, ht: float, lt: float) -> float | None:
    """Formula (3): ``lt (Hs - theta) / (Ht - theta)``, or ``None`` (skip suffix blocking)
    when ``Hs <= theta``. Unrounded (see :func:`round_lmin`)."""
    hs = v.check_real("hs", hs)
    theta = v.check_real("theta", theta)
    ht = v.check_real("ht", ht)
    lt = v.check_real("lt", lt)
    if not all(math.isfinite(x) for x in (hs, theta, ht, lt)):
        raise PrivregValueError(f"hs, theta, ht, lt must be finite; got {hs}, {theta}, {ht}, {lt}")
    if ht <= theta:
        raise PrivregValueError(f"ht must exceed theta; got ht={ht}, theta={theta}")
    if hs <= theta:
        return None
    return lt * (hs - theta) / (ht - theta)


def round_lmin(raw: float | None, *, maximum: int) -> int:
    """The suffix length to use: 0 (no suffix blocking) for ``None``, otherwise ``raw``
    rounded to the nearest integer (halves up) and clamped to ``[1, maximum]``."""
    maximum = v.check_int("maximum", maximum, minimum=1)
    if raw is None:
        return 0
    raw = v.check_real("raw", raw)
    if not math.isfinite(raw):
        raise PrivregValueError(f"raw must be finite; got {raw}")
    return int(min(max(math.floor(raw + 0.5), 1), maximum))


def dispersion_positions(lsh_positions: np.ndarray, *, filter_length: int, count: int, secret: bytes) -> np.ndarray:
    """(J, count) bit positions (sorted per row) for the dispersion sequences of blocks of
    each LSH group, chosen by a keyed PRG from the shared secret (the same at every party).

    As in the paper, all rows are the same ``count`` positions that *no* LSH group uses,
    when there are that many. With many groups (``J K`` close to ``L``) there may be none;
    then row ``j`` holds positions outside group ``j`` only (within an LSH block of group
    ``j`` only that group's bits are constant, so these still measure the spread)."""
    L = v.check_int("filter_length", filter_length, minimum=1)
    count = v.check_int("count", count, minimum=1)
    lsh = np.asarray(lsh_positions, dtype=np.int64).reshape(-1, np.shape(lsh_positions)[-1])
    key = derive_key(secret, info="dispersion/positions")
    scores = np.array(
        [
            int.from_bytes(hashlib.blake2b(int(p).to_bytes(4, "big"), key=key, digest_size=8).digest(), "big")
            for p in range(L)
        ],
        dtype=np.uint64,
    )

    def pick(free: np.ndarray) -> np.ndarray:
        return np.sort(free[np.lexsort((free, scores[free]))[:count]])

    used = np.zeros(L, dtype=bool)
    used[lsh.ravel()] = True
    free = np.flatnonzero(~used)
    if free.size >= count:
        return np.tile(pick(free), (lsh.shape[0], 1))
    rows = []
    for group in lsh:
        free = np.setdiff1d(np.arange(L), group)
        if free.size < count:
            raise PrivregValueError(
                f"only {free.size} of the {L} filter positions are outside an LSH group; dispersion "
                f"needs positions={count}. Lower dispersion.positions or lsh_bits."
            )
        rows.append(pick(free))
    return np.stack(rows)


def sequence_entropy(codes: np.ndarray, *, log_base: float = 2.0) -> float:
    """Formula (1) for one block: entropy of the empirical distribution of ``codes``."""
    _, counts = np.unique(np.asarray(codes), return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum() / math.log(log_base)) + 0.0


def _random_order(size: int, rng: RandomSource) -> np.ndarray:
    return uniform_below(1 << 62, size, rng)


def block_entropies(
    filters: np.ndarray,
    keys: np.ndarray,
    *,
    positions: np.ndarray,
    config: DispersionConfig,
    rng: RandomSource | None = None,
) -> np.ndarray:
    """One party's single-block dispersions (formula (1)) of up to ``N`` sampled blocks.

    ``filters`` (m, L) are the party's ``bf``; ``keys`` (m, J) its LSH keys (any integer
    labels: records with equal key in column ``j`` share LSH block ``(j, key)``);
    ``positions`` the ``m`` sequence positions, (m,) or per group (J, m).
    Blocks with more than ``X`` records are eligible; ``min(N, eligible)`` are sampled
    uniformly without replacement, then ``q`` records from each. Returns an empty array
    when no block is eligible."""
    rng = resolve_random(rng)
    filters = np.asarray(filters, dtype=bool)
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[0] != filters.shape[0]:
        raise PrivregValueError(f"keys must be (records, groups) = ({filters.shape[0]}, J); got {keys.shape}")
    m, J = keys.shape
    if m == 0:
        return np.zeros(0)
    group = np.tile(np.arange(J, dtype=np.uint64), m)
    record = np.repeat(np.arange(m), J)
    flat = keys.astype(np.uint64).ravel()
    order = np.lexsort((record, flat, group))
    g, k, r = group[order], flat[order], record[order]
    start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (k[1:] != k[:-1])])
    sizes = np.diff(np.r_[start, g.size])
    eligible = np.flatnonzero(sizes > config.min_block_size)
    if eligible.size == 0:
        return np.zeros(0)
    pick = eligible[np.argsort(_random_order(eligible.size, rng), kind="stable")[: config.blocks]]
    # q random members of every sampled block: sort members by (block, random key), keep q
    b_of = np.repeat(np.arange(pick.size), sizes[pick])
    idx = np.concatenate([np.arange(start[b], start[b] + sizes[b]) for b in pick])
    rank_order = np.lexsort((_random_order(idx.size, rng), b_of))
    b_sorted, idx_sorted = b_of[rank_order], idx[rank_order]
    first = np.r_[0, np.cumsum(sizes[pick])[:-1]]
    within = np.arange(idx_sorted.size) - np.repeat(first, sizes[pick])
    keep = within < config.records
    members = r[idx_sorted[keep]]
    groups_of = g[idx_sorted[keep]].astype(np.int64)
    blocks_of = b_sorted[keep]
    pos = np.asarray(positions, dtype=np.int64)
    pos = np.tile(pos, (J, 1)) if pos.ndim == 1 else pos
    if pos.shape[0] != J:
        raise PrivregValueError(f"positions must be (m,) or (J={J}, m); got shape {pos.shape}")
    weights = np.left_shift(np.uint64(1), np.arange(pos.shape[1], dtype=np.uint64)[::-1])
    codes = (filters[members[:, None], pos[groups_of]].astype(np.uint64) * weights).sum(axis=1)
    # entropy per block from counts of distinct (block, code)
    pair = np.stack([blocks_of.astype(np.uint64), codes], axis=1)
    uniq, counts = np.unique(pair, axis=0, return_counts=True)
    p = counts / config.records
    h = -p * np.log(p) / math.log(config.log_base)
    return np.bincount(uniq[:, 0].astype(np.int64), weights=h, minlength=pick.size) + 0.0


def overall_dispersion(per_party: Sequence[np.ndarray]) -> float | None:
    """Formula (2): the mean single-block dispersion over all parties' sampled blocks
    (``None`` when no party had an eligible block)."""
    values = np.concatenate([np.asarray(x, dtype=float).ravel() for x in per_party]) if per_party else np.zeros(0)
    if values.size == 0:
        return None
    return float(values.mean())
