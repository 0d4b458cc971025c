"""Faithful re-implementation of FMT21's published script (computeamplification.py).

Feldman, McMillan and Talwar published ``computeamplification.py`` (repository
github.com/apple/ml-shuffling-amplification; we follow its latest version, commit 993d285
of 28 Sep 2021, "change in order of iteration in deltacomp") with "Hiding among the
clones" (FOCS 2021, arXiv:2012.12803, Appendix E). Several papers report its output
verbatim, e.g. paper 001's eps = 0.315. :func:`fmt21_published_epsilon` is a faithful
re-implementation of that script's ``numericalanalysis`` and
:func:`fmt21_published_closed_form` of its ``closedformanalysis``: our own code (no code
copied), following the published algorithm step by step -- its search start, the order
in which it visits clone counts, its stopping rules and its quirks -- so that it returns
what the script prints. Use it to reproduce published numbers and as a benchmark
baseline. Accounting uses :func:`privreg.accountant.shuffle.shuffle_epsilon`, the
project's own numerical bound (the same FMT21 reduction on a fine grid, each clone
count's divergence in closed form, a bisection to relative 1e-9).

The published algorithm, step by step
=====================================
1. Search start: if ``eps0 < log(n / (16 log(4/delta)))`` the bisection starts from the
   script's closed form (a variant of FMT21 Theorem 3.1, slightly larger than the printed
   theorem: :func:`fmt21_published_closed_form`), otherwise from ``eps0`` itself.
2. Bisection: ``num_iterations`` halvings of ``[0, start]``; the upper end moves to the
   midpoint when the delta there is *strictly* below the target. The upper end is
   returned (so ``start`` itself when no midpoint qualifies).
3. Delta at ``eps`` (the script's ``deltacomp``): ``C ~ Bin(n-1, e^-eps0)``, ``m =
   (n-1) e^-eps0``. For ``B = 1, 2, ..., ceil(n/step) - 1`` it visits an interval above,
   ``[ceil(m + B step) - step, ceil(m + B step)]`` for ``B = 1`` (step + 1 values) and
   ``[ceil(m + B step) - step + 1, ceil(m + B step)]`` after, cut at ``n - 1`` and skipped
   once it starts beyond ``n - 1``; then one below, ``[ceil(m - B step), ceil(m - B step)
   + step - 1]``, cut at 0 and skipped once it ends below 0. Before charging an interval
   it stops with the target delta itself if ``max(deltap, deltaq)`` already exceeds it,
   and, if the uncovered mass ``1 - covered`` is below both ``deltap`` and ``deltaq``, with
   ``max(deltap + 1 - covered, deltaq + 1 - covered)`` (upper bound) or
   ``max(deltap, deltaq)`` (lower bound). Otherwise it adds the interval's mass
   (``cdf(hi) - cdf(lo) + pmf(lo)``) times: for ``deltap`` the larger (upper) or smaller
   (lower) divergence ``D(P_c || Q_c)`` at the two ends; for ``deltaq``, in the lower
   bound the smaller ``D(Q_c || P_c)`` at the two ends, in the upper bound the value at
   the interval's *upper* end (the script takes ``max`` of that value with itself). That
   quirk never loosens the upper bound (``D(Q_c || P_c) = D(P_c || Q_c)`` is
   non-increasing in ``c``, so ``deltaq <= deltap``), but it delays the stop in 3. With no
   stop the result is ``max(deltap, deltaq)``.
4. Divergence at ``c`` clones (the script's ``onestep``): ``P_c = alpha A + (1 - alpha)
   (A + 1)``, ``Q_c = alpha (A + 1) + (1 - alpha) A``, ``A ~ Bin(c, 1/2)``, ``alpha =
   e^eps0 / (e^eps0 + 1)``; with ``eps' = log(((e^eps + 1) alpha - 1) / ((e^eps + 1) alpha
   - e^eps))`` the cut is ``k = (c + 1) / (e^eps' + 1)`` for P (``(c + 1) / (e^-eps' + 1)``
   for Q; computed as the script does, the share first, then times ``c + 1``), and the
   divergence is ``P_c(<= k) - e^eps Q_c(<= k)`` (for Q: ``(1 - Q_c(<= k))
   - e^eps (1 - P_c(<= k))``), the cdfs at the non-integer ``k`` from scipy.

Consequences, shown by the tests: where the closed form's condition fails the search
starts from ``eps0``, and with step 100 the first interval below the mean charges the
whole mass ``Pr[C < ceil(m)]`` the divergence at ``c = 0`` (nearly 1), so at n = 1e6,
eps0 = 10, delta = 1e-10 (``m = 45.4``) no midpoint qualifies and the upper bound is
``eps0 = 10.0`` -- valid, but no amplification. With ``n <= step`` the loop of step 3 is empty (``B`` runs
to ``ceil(n/step) - 1 = 0``), every delta is 0 and the script returns ``start /
2^num_iterations`` -- not a valid bound (e.g. ``eps0 / 1024`` for 50 reports). Otherwise
(``n > step``) the upper bound is a valid FMT21 bound, looser than ``shuffle_epsilon``
(intervals of 100 clone counts, 10 bisection steps).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError

__all__ = ["pair_divergence_by_summation", "fmt21_published_epsilon", "fmt21_published_closed_form"]


def pair_divergence_by_summation(c: int, eps: float, eps0: float) -> float:
    """D_{e^eps}(P_c || Q_c) summed over every outcome k = 0..c+1 (FMT21 reduction)."""
    alpha = math.exp(eps0) / (math.exp(eps0) + 1)
    k = np.arange(c + 2)
    here, shifted = stats.binom.pmf(k, c, 0.5), stats.binom.pmf(k - 1, c, 0.5)
    p = alpha * shifted + (1 - alpha) * here
    q = (1 - alpha) * shifted + alpha * here
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def _check(n: int, eps0: float, delta: float) -> tuple[int, float, float]:
    n = v.check_count("n", n)
    eps0 = v.check_epsilon("eps0", eps0)
    delta = v.check_delta("delta", delta, allow_zero=False)
    return n, eps0, delta


def _closed_form_regime(n: int, eps0: float, delta: float) -> float:
    """The script's regime bound ``log(n / (16 log(4/delta)))`` (note 4/delta, where
    Theorem 3.1 has 2/delta)."""
    return math.log(n / (16 * math.log(4 / delta)))


def fmt21_published_closed_form(n: int, eps0: float, delta: float) -> float:
    """Faithful re-implementation of FMT21's published script (computeamplification.py),
    function ``closedformanalysis``: ``eps0`` when ``eps0 > log(n / (16 log(4/delta)))``
    (the script also prints a warning there), else ``log(1 + (1 - e^-eps0) / (1 +
    e^(-eps0 - log(1 + a + c))) (a + c))`` with ``a = 8 sqrt(e^eps0 log(4/delta) / n)``,
    ``c = 8 e^eps0 / n``."""
    n, eps0, delta = _check(n, eps0, delta)
    if eps0 > _closed_form_regime(n, eps0, delta):
        return eps0
    a = 8 * math.sqrt(math.exp(eps0) * math.log(4 / delta)) / math.sqrt(n)
    c = 8 * math.exp(eps0) / n
    shrink = (1 - math.exp(-eps0)) / (1 + math.exp(-eps0 - math.log(1 + a + c)))
    return math.log(1 + shrink * (a + c))


def _divergence(c: NDArray[np.int64], eps: float, eps0: float, p_side: bool) -> NDArray[np.float64]:
    """Step 4 of the module docstring (the script's ``onestep``), elementwise over the
    clone counts ``c``: the same float operations as the script's scalar code."""
    alpha = math.exp(eps0) / (math.exp(eps0) + 1)
    e = math.exp(eps)
    effective = math.log(((e + 1) * alpha - 1) / ((1 + e) * alpha - e))
    share = 1 / (math.exp(effective if p_side else -effective) + 1)
    cut = share * (c + 1)
    at_cut: NDArray[np.float64] = stats.binom.cdf(cut, c, 0.5)
    before: NDArray[np.float64] = stats.binom.cdf(cut - 1, c, 0.5)
    p_cdf = alpha * at_cut + (1 - alpha) * before
    q_cdf = (1 - alpha) * at_cut + alpha * before
    if p_side:
        return p_cdf - e * q_cdf
    return (1 - q_cdf) - e * (1 - p_cdf)


def _intervals(n: int, mean: float, step: int) -> Iterator[tuple[int, int]]:
    """Step 3's intervals ``(lo, hi)`` of clone counts, in the script's order."""
    for b in range(1, math.ceil(n / step)):
        hi = math.ceil(mean + b * step)
        lo = hi - step if b == 1 else hi - step + 1
        if lo <= n - 1:
            yield lo, min(hi, n - 1)
        lo = math.ceil(mean - b * step)
        hi = lo + step - 1
        if hi >= 0:
            yield max(0, lo), hi


_FIRST_CHUNK, _MAX_CHUNK = 8, 1 << 16  # intervals evaluated per vectorised batch


def _delta(n: int, eps0: float, eps: float, target: float, step: int, upper: bool) -> float:
    """Step 3 of the module docstring (the script's ``deltacomp``).

    The per-interval masses and end-point divergences are evaluated by scipy in batches
    (elementwise, so each value is the one the script's scalar call gets); the
    accumulation and both stopping rules run interval by interval in the script's order
    and float arithmetic, so the result is the script's to the bit. Batches grow from 8
    intervals, as the stopping rule usually ends the loop within a few."""
    delta_p = delta_q = covered = 0.0
    q = math.exp(-eps0)
    intervals = _intervals(n, (n - 1) * q, step)
    size = _FIRST_CHUNK
    while chunk := list(itertools.islice(intervals, size)):
        lo, hi = (np.array(ends, dtype=np.int64) for ends in zip(*chunk))
        masses = stats.binom.cdf(hi, n - 1, q) - stats.binom.cdf(lo, n - 1, q) + stats.binom.pmf(lo, n - 1, q)
        p_his, p_los = _divergence(hi, eps, eps0, True), _divergence(lo, eps, eps0, True)
        q_his, q_los = _divergence(hi, eps, eps0, False), _divergence(lo, eps, eps0, False)
        for mass, p_hi, p_lo, q_hi, q_lo in zip(
            masses.tolist(), p_his.tolist(), p_los.tolist(), q_his.tolist(), q_los.tolist()
        ):
            if max(delta_p, delta_q) > target:
                return target
            if 1 - covered < delta_p and 1 - covered < delta_q:
                if upper:
                    return max(delta_p + 1 - covered, delta_q + 1 - covered)
                return max(delta_p, delta_q)
            if upper:
                delta_p += mass * max(p_hi, p_lo)
                delta_q += mass * q_hi  # the script's max(q_hi, q_hi)
            else:
                delta_p += mass * min(p_hi, p_lo)
                delta_q += mass * min(q_hi, q_lo)
            covered += mass
        size = min(4 * size, _MAX_CHUNK)
    return max(delta_p, delta_q)


def fmt21_published_epsilon(
    n: int, eps0: float, delta: float, *, num_iterations: int = 10, step: int = 100, upper_bound: bool = True
) -> float:
    """Faithful re-implementation of FMT21's published script (computeamplification.py),
    function ``numericalanalysis(n, eps0, delta, num_iterations, step, upper_bound)``:
    what the script prints, step by step as in the module docstring (search start from
    the script's closed form or from ``eps0``, ``num_iterations`` bisection steps, clone
    counts in intervals of ``step``, the script's stopping rules). Defaults are the
    script's example settings (``example.py``: 10 iterations, step 100).

    ``upper_bound=True`` gives the script's upper bound on the shuffled epsilon (a valid
    FMT21 bound, looser than :func:`privreg.accountant.shuffle.shuffle_epsilon`);
    ``upper_bound=False`` the upper end of its bisection on a lower bound of delta.
    Cost: the stopping rule usually ends each delta after a few intervals, but where the
    divergences are far below the rounding of the covered mass it never fires and all
    ``n/step`` intervals are visited (paper 001's n = 3e7: minutes). We evaluate the
    intervals' scipy values in vectorised batches (same values, same result as the
    script, checked bit for bit on 258 settings against the script itself); the script
    makes scalar calls, about 1.5-2x slower where it stops early.
    """
    n, eps0, delta = _check(n, eps0, delta)
    num_iterations = v.check_int("num_iterations", num_iterations, minimum=0)
    step = v.check_int("step", step, minimum=1)
    if not isinstance(upper_bound, bool):
        raise PrivregValueError(f"upper_bound must be True or False; got {upper_bound!r}")
    if eps0 < _closed_form_regime(n, eps0, delta):
        high = fmt21_published_closed_form(n, eps0, delta)
    else:
        high = eps0
    low = 0.0
    for _ in range(num_iterations):
        mid = (high + low) / 2
        if _delta(n, eps0, mid, delta, step, upper_bound) < delta:
            high = mid
        else:
            low = mid
    return high
