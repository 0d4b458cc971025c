"""Exact binomial confidence bounds and the privacy-loss lower bound they imply.

Clopper-Pearson (1934) bounds are exact: for ``count ~ Binomial(n, p)``,
``P(clopper_pearson_lower(count, n, level) > p) <= level`` and
``P(clopper_pearson_upper(count, n, level) < p) <= level`` for every ``p``, whatever ``n``.

If a mechanism is ``(epsilon, delta)``-DP for two inputs, every event ``E`` satisfies
``P_hi(E) <= exp(epsilon) * P_lo(E) + delta`` in both orders of the inputs, hence
``epsilon >= log((P_hi(E) - delta) / P_lo(E))``. Replacing ``P_hi`` by a lower and ``P_lo``
by an upper confidence bound, each at level ``alpha / 2``, gives a lower bound on epsilon
that is wrong with probability at most ``alpha`` -- provided ``E`` was fixed before the
counts were drawn (see :mod:`privreg.audit.empirical`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from privreg.core.errors import PrivregValueError

__all__ = ["clopper_pearson_lower", "clopper_pearson_upper", "epsilon_lower_bound"]


def _counts(count: np.ndarray | int, n: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(count, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    if np.any(m < 1) or np.any(k < 0) or np.any(k > m) or np.any(k != np.floor(k)):
        raise PrivregValueError("counts must be integers in [0, n] with n >= 1")
    return np.broadcast_arrays(k, m)  # type: ignore[return-value]


def _level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise PrivregValueError(f"level must lie in (0, 1); got {level!r}")
    return float(level)


def clopper_pearson_lower(count: np.ndarray | int, n: np.ndarray | int, level: float) -> np.ndarray:
    """One-sided exact lower confidence bound on ``p``: the ``level`` quantile of
    ``Beta(count, n - count + 1)`` (0 when ``count == 0``). Vectorised."""
    k, m = _counts(count, n)
    level = _level(level)
    out = np.zeros_like(k)
    pos = k > 0
    out[pos] = special.betaincinv(k[pos], m[pos] - k[pos] + 1.0, level)
    return out


def clopper_pearson_upper(count: np.ndarray | int, n: np.ndarray | int, level: float) -> np.ndarray:
    """One-sided exact upper confidence bound on ``p``: the ``1 - level`` quantile of
    ``Beta(count + 1, n - count)`` (1 when ``count == n``). It inverts the upper tail of
    the Beta distribution directly (``betainccinv``), so small bounds keep full relative
    precision. Vectorised."""
    k, m = _counts(count, n)
    level = _level(level)
    out = np.ones_like(k)
    below = k < m
    out[below] = special.betainccinv(k[below] + 1.0, m[below] - k[below], level)
    return out


def epsilon_lower_bound(
    count_hi: np.ndarray | int,
    n_hi: np.ndarray | int,
    count_lo: np.ndarray | int,
    n_lo: np.ndarray | int,
    *,
    alpha: float,
    delta: float,
) -> np.ndarray:
    """``log((CP_lower(count_hi) - delta) / CP_upper(count_lo))`` with both bounds at
    ``alpha / 2``; ``-inf`` where the numerator is not positive. Vectorised.

    For a fixed event, the result exceeds the true epsilon of an ``(epsilon, delta)``-DP
    mechanism with probability at most ``alpha`` (union bound over the two one-sided
    Clopper-Pearson bounds)."""
    hi = clopper_pearson_lower(count_hi, n_hi, alpha / 2.0) - delta
    lo = clopper_pearson_upper(count_lo, n_lo, alpha / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(hi > 0.0, np.log(np.where(hi > 0.0, hi, 1.0)) - np.log(lo), -np.inf)
    return np.asarray(out, dtype=np.float64)
