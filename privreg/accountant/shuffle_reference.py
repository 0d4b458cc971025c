"""The FMT21 authors' published numerical procedure, re-implemented for reproduction.

Feldman, McMillan and Talwar published a script (``computeamplification.py``, repository
ml-shuffling-amplification) with their 2021 paper; several papers report its output
verbatim, e.g. paper 001's eps = 0.315. :func:`fmt21_tool_epsilon` evaluates the same
documented procedure with the same coarse settings (our own code; nothing copied), so a
published number can be traced to its computation. It is a valid upper bound but looser
and much slower than :func:`privreg.accountant.shuffle.shuffle_epsilon`; use it to
reproduce papers and as a benchmark baseline, not for accounting.

Caveat, found while benchmarking: the procedure bisects below its own closed-form start
value even where the closed form's condition fails, so there it can print an epsilon that
does not hold (n = 1e6, eps0 = 10, delta = 1e-10: it prints 1.95, where the FMT21 delta is
7.5e-8). :func:`~privreg.accountant.shuffle.shuffle_epsilon` has no such cap.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["pair_divergence_by_summation", "fmt21_tool_epsilon"]


def pair_divergence_by_summation(c: int, eps: float, eps0: float) -> float:
    """D_{e^eps}(P_c || Q_c) summed over every outcome k = 0..c+1 (FMT21 reduction)."""
    alpha = math.exp(eps0) / (math.exp(eps0) + 1)
    k = np.arange(c + 2)
    here, shifted = stats.binom.pmf(k, c, 0.5), stats.binom.pmf(k - 1, c, 0.5)
    p = alpha * shifted + (1 - alpha) * here
    q = (1 - alpha) * shifted + alpha * here
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def fmt21_tool_epsilon(n: int, eps0: float, delta: float, *, step: int = 100,
                       iterations: int = 10) -> float:
    """What the FMT21 authors' tool prints with its example settings (step 100, 10 steps).

    Our own reimplementation of the documented procedure (no code copied): bisection from
    the tool's own closed-form start, each step bounding delta by cutting C ~ Bin(n-1,
    e^-eps0) into intervals of ``step`` values, charging each interval the larger
    divergence at its two ends and the uncovered mass 1. The tool's first version aligns
    the intervals at n/2 (multiples of 100 for the even n used here), its later version at
    ceil(mean(C)); both alignments print the same values for the two cases tested.
    """
    trials, q = n - 1, math.exp(-eps0)
    mean, sd = trials * q, math.sqrt(trials * q * (1 - q))
    first = step * math.floor(max(mean - 60 * sd, 0) / step)
    lefts = np.arange(first, min(mean + 60 * sd, trials) + 1, step)
    rights = np.minimum(lefts + step - 1, trials)
    masses = stats.binom.cdf(rights, trials, q) - stats.binom.cdf(lefts - 1, trials, q)

    def delta_at(eps: float) -> float:
        ends = [max(pair_divergence_by_summation(int(a), eps, eps0),
                    pair_divergence_by_summation(int(b), eps, eps0)) for a, b in zip(lefts, rights)]
        return float(masses @ np.array(ends)) + (1 - masses.sum())

    a = 8 * math.sqrt(math.exp(eps0) * math.log(4 / delta) / n)
    c = 8 * math.exp(eps0) / n
    low, high = 0.0, math.log1p(-math.expm1(-eps0) / (1 + math.exp(-eps0 - math.log1p(a + c))) * (a + c))
    for _ in range(iterations):
        mid = (low + high) / 2
        low, high = (low, mid) if delta_at(mid) < delta else (mid, high)
    return high
