"""The released sets S_1..S_k as integer tries, and the valid k-grams V_k they imply.

S_1 is indexed 0..n1-1 (sorted tokens). A k-gram of S_k (k >= 2) is stored by its key
``pre * n1 + last``: ``pre`` its (k-1)-prefix's index in S_{k-1}, ``last`` its last token's
index in S_1; S_k's index of a k-gram is its rank among the sorted keys. Everything here
depends only on released sets (public), so it is post-processing.

Valid k-grams (Kim-Gopi-Kulkarni-Yekhanin 2021, Algorithm 1 and Section 3.1.1, "Pruning rule"):

* both-side: ``V_k = (S_1 x S_{k-1}) n (S_{k-1} x S_1)``; as pairs (u, v) of S_{k-1} with
  ``u[1:] = v[:-1]`` (for k = 2 every pair of S_1). ``|V_k| = sum_y A_y B_y`` exactly, with
  A_y (B_y) the number of (k-1)-grams whose suffix (prefix) is the (k-2)-gram y.
* single-side: ``V_k = S_{k-1} x S_1``, ``|V_k| = |S_{k-1}| n1``.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.noise.vector import uniform_below
from privreg.plugins.ngrams.backends.bounding import sorted_unique

__all__ = [
    "Level",
    "PRUNINGS",
    "lookup",
    "valid_count",
    "estimate_valid_count",
    "valid_keys",
    "is_valid",
    "sample_spurious",
    "check_pruning",
]

PRUNINGS = ("both", "single")


def lookup(table: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, index): whether each query is in the sorted array ``table`` and where."""
    queries = np.asarray(queries)
    if table.size == 0:
        return np.zeros(queries.shape, dtype=bool), np.zeros(queries.shape, dtype=np.int64)
    j = np.minimum(np.searchsorted(table, queries), table.size - 1)
    return table[j] == queries, j.astype(np.int64)


@attrs.frozen(kw_only=True)
class Level:
    """S_k as arrays aligned with its sorted ``keys``: ``pre`` (index in S_{k-1}; -1 for
    k = 1), ``last`` and ``first`` (indices in S_1), ``suf`` (index in S_{k-1} of the
    suffix (k-1)-gram, -1 if it was not released; -1 for k = 1)."""

    k: int
    n1: int
    keys: np.ndarray
    pre: np.ndarray
    last: np.ndarray
    first: np.ndarray
    suf: np.ndarray

    @property
    def size(self) -> int:
        return int(self.keys.size)

    @classmethod
    def unigrams(cls, n1: int) -> Level:
        idx = np.arange(n1, dtype=np.int64)
        none = np.full(n1, -1, dtype=np.int64)
        return cls(k=1, n1=n1, keys=idx, pre=none, last=idx, first=idx, suf=none.copy())

    @classmethod
    def build(cls, keys: np.ndarray, prev: Level) -> Level:
        """S_k from its keys (any order, distinct) and S_{k-1}."""
        n1 = prev.n1
        keys = sorted_unique(np.asarray(keys, dtype=np.int64))
        pre, last = keys // n1, keys % n1
        if keys.size and (pre.max() >= prev.size or pre.min() < 0):
            raise PrivregValueError("keys refer to (k-1)-grams that are not in S_{k-1}")
        first = prev.first[pre]
        if prev.k == 1:
            suf = last.copy()
        else:
            sp = prev.suf[pre]
            cand = np.where(sp >= 0, sp * n1 + last, -1)
            found, j = lookup(prev.keys, cand)
            suf = np.where((sp >= 0) & found, j, -1)
        return cls(k=prev.k + 1, n1=n1, keys=keys, pre=pre, last=last, first=first, suf=suf.astype(np.int64))

    def strings(self, below: list[np.ndarray], tokens: np.ndarray) -> np.ndarray:
        """S_k as space-joined strings, given the strings of S_1..S_{k-1} (``below``)."""
        if self.k == 1:
            return tokens.astype(str)
        prefix = below[-1][self.pre]
        return np.char.add(np.char.add(prefix.astype(str), " "), tokens[self.last].astype(str))


def check_pruning(pruning: str) -> str:
    """``pruning`` if it is one of :data:`PRUNINGS`, else a PrivregValueError naming them."""
    if pruning not in PRUNINGS:
        raise PrivregValueError(f"pruning must be one of {PRUNINGS}; got {pruning!r}")
    return pruning


def valid_count(prev: Level, *, pruning: str) -> int:
    """|V_k| for k = prev.k + 1, exactly (Python int)."""
    check_pruning(pruning)
    n1 = prev.n1
    if pruning == "single" or prev.k == 1:
        return prev.size * n1
    # both-side: pairs (u, v) of S_{k-1} with suffix(u) = prefix(v)
    width = int(max(prev.pre.max(initial=-1), prev.suf.max(initial=-1))) + 1
    a = np.bincount(prev.suf[prev.suf >= 0], minlength=width)
    b = np.bincount(prev.pre[prev.pre >= 0], minlength=width)
    return int(sum(int(x) * int(y) for x, y in zip(a[a > 0].tolist(), b[a > 0].tolist())))


def _pair_table(prev: Level) -> tuple[np.ndarray, int]:
    """Sorted codes ``first * m + suf`` of S_{k-1} (k >= 3) and m, to find the (k-1)-gram
    with a given first token and suffix: a (k-1)-gram is determined by them."""
    m = int(prev.suf.max(initial=-1)) + 1
    ok = prev.suf >= 0
    codes = np.full(prev.size, -1, dtype=np.int64)
    codes[ok] = prev.first[ok] * max(m, 1) + prev.suf[ok]
    return codes, max(m, 1)


def _candidates(
    x: np.ndarray, w: np.ndarray, prev: Level, pruning: str, table: tuple[np.ndarray, int] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Paper 002 Algorithms 2-3: for x uniform in S_1 and w uniform in S_{k-1}, the
    candidate k-gram and whether it is valid. both-side: w = y z, candidate x y z, valid iff
    x y is in S_{k-1} (z is in S_1 by construction); single-side: candidate w z' with
    z' = x (every element of S_{k-1} x S_1 is valid)."""
    n1 = prev.n1
    if pruning == "single":
        return w * n1 + x, np.ones(x.size, dtype=bool)
    if prev.k == 1:  # V_2 = S_1 x S_1
        return x * n1 + w, np.ones(x.size, dtype=bool)
    codes, m = table  # type: ignore[misc]
    y, z = prev.pre[w], prev.last[w]
    want = x * m + y
    order = np.argsort(codes, kind="stable")
    found, j = lookup(codes[order], want)
    ok = found & (y < m)
    u = np.where(ok, order[j] if order.size else 0, 0)
    return u * n1 + z, ok


def estimate_valid_count(prev: Level, *, pruning: str, rate: float | None, rng: RandomSource) -> int:
    """EstimateValidKgrams (paper 002, Algorithm 3): draw ``N = ceil(p |S_1| |S_{k-1}|)``
    pairs (x, w) uniformly from S_1 x S_{k-1}, count the valid candidates, return
    ``ceil(count / p)``, at most ``|S_1| |S_{k-1}|``. ``rate`` is p (default: enough for ~2^20 draws, at most 1)."""
    check_pruning(pruning)
    total = prev.n1 * prev.size
    if total == 0:
        return 0
    p = min(1.0, 2.0**20 / total) if rate is None else v.check_probability("rate", rate, open_low=True)
    draws = math.ceil(p * total)
    table = _pair_table(prev) if (pruning == "both" and prev.k > 1) else None
    count = 0
    for lo in range(0, draws, 1 << 20):
        size = min(1 << 20, draws - lo)
        x = uniform_below(prev.n1, size, rng)
        w = uniform_below(prev.size, size, rng)
        count += int(_candidates(x, w, prev, pruning, table)[1].sum())
    estimate = count / p  # inf for a tiny p: never more than the |S_1| |S_{k-1}| candidates
    return total if estimate >= total else math.ceil(estimate)


def valid_keys(prev: Level, *, pruning: str, limit: int) -> np.ndarray:
    """V_k materialised as sorted keys (Algorithm 1's explicit histogram domain); refuses
    more than ``limit`` keys."""
    check_pruning(pruning)
    count = valid_count(prev, pruning=pruning)
    if count > limit:
        raise PrivregValueError(
            f"|V_{prev.k + 1}| = {count:,} valid {prev.k + 1}-grams exceed the explicit variant's "
            f"limit {limit:,}; use variant='scalable' (Appendix A: V_k stays implicit)"
        )
    n1 = prev.n1
    if pruning == "single" or prev.k == 1:
        return np.arange(prev.size * n1, dtype=np.int64)
    by_pre = np.argsort(prev.pre, kind="stable")
    width = int(max(prev.pre.max(initial=-1), prev.suf.max(initial=-1))) + 1
    b = np.bincount(prev.pre, minlength=width)
    start = np.r_[0, np.cumsum(b)[:-1]]
    u = np.flatnonzero(prev.suf >= 0)
    reps = b[prev.suf[u]]
    u_rep = np.repeat(u, reps)
    offset = np.arange(u_rep.size) - np.repeat(np.cumsum(reps) - reps, reps)
    vv = by_pre[np.repeat(start[prev.suf[u]], reps) + offset]
    return np.sort(u_rep * n1 + prev.last[vv])


def is_valid(keys: np.ndarray, prev: Level, *, pruning: str) -> np.ndarray:
    """Whether each k-gram key (``pre * n1 + last``) lies in V_k."""
    check_pruning(pruning)
    n1 = prev.n1
    pre, last = keys // n1, keys % n1
    ok = (pre >= 0) & (pre < prev.size) & (last >= 0) & (last < n1)
    if pruning == "single" or prev.k == 1:
        return ok
    level = Level.build(keys[ok], prev)
    good = np.zeros(keys.size, dtype=bool)
    idx = np.flatnonzero(ok)
    pos = np.searchsorted(level.keys, keys[ok])
    good[idx] = level.suf[pos] >= 0
    return good


def sample_spurious(count: int, prev: Level, *, pruning: str, exclude: np.ndarray, rng: RandomSource) -> np.ndarray:
    """``count`` distinct k-grams drawn uniformly from ``V_k`` minus ``exclude`` (sorted
    keys), by the rejection loop of paper 002, Algorithm 2: x uniform in S_1, w uniform in
    S_{k-1}, keep the candidate if it is valid, not excluded and new. Uniform candidates
    conditioned on validity are uniform on V_k, so the result is a uniformly random
    ``count``-subset of V_k minus ``exclude``: what Algorithm 1's zero-weight keys that
    cross rho_k look like."""
    count = v.check_int("count", count, minimum=0)
    chosen = np.zeros(0, dtype=np.int64)
    if count == 0:
        return chosen
    table = _pair_table(prev) if (pruning == "both" and prev.k > 1) else None
    exclude = np.asarray(exclude, dtype=np.int64)
    draws, hits = 0, 0
    while chosen.size < count:
        need = count - chosen.size
        rate = (hits + 1) / (draws + 1)
        size = int(min(1 << 22, max(1024, 4 * need / rate)))
        x = uniform_below(prev.n1, size, rng)
        w = uniform_below(prev.size, size, rng)
        cand, ok = _candidates(x, w, prev, pruning, table)
        cand = cand[ok]
        draws += size
        hits += cand.size
        cand = cand[~lookup(exclude, cand)[0]]
        if chosen.size:
            cand = cand[~np.isin(cand, chosen)]
        _, first = np.unique(cand, return_index=True)  # keep draw order among new keys
        cand = cand[np.sort(first)]
        chosen = np.concatenate([chosen, cand[:need]])
        if draws > 1 << 34:
            raise PrivregValueError(  # pragma: no cover - only if V_k minus exclude is (nearly) empty
                f"could not draw {count} spurious {prev.k + 1}-grams from V_k minus the support"
            )
    return np.sort(chosen)
