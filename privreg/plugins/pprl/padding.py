"""Dummy candidate pairs that hide from a data party which of its records have a real
candidate at a peer (issue #33, membership).

Without padding, a data party reads off its deal which of its records are candidates at
party Q, and "has a candidate at Q" predicts "Q holds this person" (``learns()``). The
linkage unit adds, per pair of parties and per side, dummy pairs for records with no real
candidate: each such record gets dummies with probability ``pad``, as many as the real
candidate count of a uniformly drawn record that has real candidates (so the count
distribution of padded records follows the real one), with partners drawn uniformly from
the peer's records. Dummies run through the same secure decisions as real pairs (the
cost: one more decision each, the same messages); the linkage unit, which alone knows
which pairs are dummies, discards their decisions, so they never reach an output.

At ``pad = 1`` every record gets at least one candidate at every peer, so "has a
candidate" says nothing; what stays is the count (dummy counts follow the real counts of
all candidate-holding records, not only those of the peer's true holders), and a dummy's
partner at the peer is a uniformly drawn record.
"""

from __future__ import annotations

import numpy as np

from privreg.core import validation as v
from privreg.core.randomness import RandomSource

__all__ = ["check_pad", "pad_candidates"]


def check_pad(pad: object) -> float:
    """``pad`` as a probability in [0, 1] (the fraction of candidate-less records padded)."""
    return v.check_probability("pad", pad)


def _uniform(rng: RandomSource, n: int) -> np.ndarray:
    """``n`` uniform floats in [0, 1) with 53 random bits each, from ``rng``."""
    raw = np.frombuffer(rng.random_bytes(8 * n), dtype="<u8") >> np.uint64(11)
    return np.asarray(raw, dtype=np.float64) / float(1 << 53)


def _below(rng: RandomSource, n: int, bound: int) -> np.ndarray:
    """``n`` integers in [0, bound): ``floor(u bound)`` for 53-bit ``u`` (bias below
    ``bound / 2^53``, 2^-33 for a million records: immaterial for a dummy's position)."""
    return np.minimum((_uniform(rng, n) * bound).astype(np.int64), bound - 1)


def _side(pairs: np.ndarray, col: int, rows: int, other: int, pad: float, rng: RandomSource) -> np.ndarray:
    """Dummy pairs (in the ``pairs`` orientation) for the records of column ``col``."""
    counts = np.bincount(pairs[:, col], minlength=rows) if pairs.size else np.zeros(rows, dtype=np.int64)
    bare = np.flatnonzero(counts == 0)
    if not bare.size or other == 0:
        return np.zeros((0, 2), dtype=np.int64)
    chosen = bare[_uniform(rng, bare.size) < pad]
    if not chosen.size:
        return np.zeros((0, 2), dtype=np.int64)
    real = counts[counts > 0]
    k = real[_below(rng, chosen.size, real.size)] if real.size else np.ones(chosen.size, dtype=np.int64)
    k = np.minimum(k, other)
    mine = np.repeat(chosen, k)
    theirs = _below(rng, mine.size, other)
    out = np.empty((mine.size, 2), dtype=np.int64)
    out[:, col], out[:, 1 - col] = mine, theirs
    return out


def pad_candidates(
    pairs: np.ndarray, *, rows: tuple[int, int], pad: float, rng: RandomSource, sides: tuple[int, ...] = (0, 1)
) -> tuple[np.ndarray, np.ndarray]:
    """``(pairs with dummies, dummy mask)``: the real candidate ``pairs`` (``(k, 2)``, rows
    of the left and right party, ``rows`` records each) and dummy pairs for the records of
    the ``sides`` (columns; default both) with no real candidate (module docstring), unique
    and in lexicographic order (the order tells nothing about which pairs are dummies). A
    dummy never equals a real pair: its own record has no real candidate."""
    real = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pad <= 0.0:
        return real, np.zeros(real.shape[0], dtype=bool)
    dummies = np.concatenate(
        [np.zeros((0, 2), dtype=np.int64), *(_side(real, c, rows[c], rows[1 - c], pad, rng) for c in sides)]
    )
    dummies = np.unique(dummies, axis=0) if dummies.size else dummies
    everything = np.concatenate([real, dummies])
    mask = np.concatenate([np.zeros(real.shape[0], dtype=bool), np.ones(dummies.shape[0], dtype=bool)])
    order = np.lexsort((everything[:, 1], everything[:, 0]))
    return everything[order], mask[order]
