"""What the outlier workflows print beside each release: interval, noise scale, warning.

**The count.** The smooth-sensitivity Gaussian draws ``N_Z(0, sigma(X)^2)`` on the grid
with ``sigma(X) = ceil_24bit((S(X) + g) / (alpha g))``; ``S(X)`` depends on the data and is
never shown (showing it would leak). Every term of Algorithm 2 is at most
``G = min(n, GS_UB)`` (Theorem 6; ``GS_UB = k K_d + 1``, Theorem 4), so ``S(X) <= G`` and
``sigma(G)`` is a public upper bound on the scale: the interval is that of the discrete
Gaussian at ``sigma(G)`` (:func:`privreg.analysis.accuracy.smooth_gaussian_accuracy`),
valid for every dataset. It is also nearly the scale used: ``L(t) >= min(G, t + 1)``, so
``S(X) >= G e^(-beta (G - 1))`` for every dataset, and the scale used is at least that
fraction of the bound (0.68 at ``outlier-count``'s defaults; :func:`scale_fraction`).

Consequence (why a count is informative only when it is large): the ``level``
half-width is about ``z G / alpha`` with ``alpha = epsilon / (5 sqrt(2 ln(2/delta)))``,
i.e. ``1.96 x 26.9 G / epsilon`` at delta = 1e-6, and ``G >= 3`` (one column, k = 1):
a count must exceed about ``158 / epsilon`` outliers before the half-width is below it
(``outlier-count``'s defaults: 381 outliers, G = 7, half-width 92 at epsilon 4).

**The selection** releases subspaces, not numbers: its noise scale is the exponential
mechanism's ``2 Delta / epsilon'`` (``Delta = 1`` in utility, ``GS_UB`` outliers) and
its interval the McSherry-Talwar bound on the outliers each draw may lose against the
best subspace not yet drawn (:func:`selection_report`).
"""

from __future__ import annotations

import math
from typing import Any

from privreg.analysis.accuracy import discrete_gaussian_half_width, exponential_loss_bound, smooth_gaussian_accuracy
from privreg.analysis.report import NoisyValue, count_release, needed
from privreg.mechanisms.smooth_gaussian import (
    SmoothGaussianMechanism,
    certifies,
    grid_sigma,
    smooth_gaussian_parameters,
)
from privreg.plugins.outliers.kissing import global_sensitivity_upper

__all__ = ["count_bound", "scale_fraction", "count_half_width", "report_count", "selection_report"]

#: how far the needed epsilon is searched, as a multiple of the epsilon used
_EPSILON_RANGE = 1e4


def count_bound(*, n: int, k: int, dimension: int) -> int:
    """``G = min(n, GS_UB(k, d))``: the public bound on the smooth sensitivity."""
    return global_sensitivity_upper(n=n, k=k, d=dimension)


def scale_fraction(*, bound: int, epsilon: float, delta: float) -> float:
    """``e^(-beta (G - 1))``: the scale used is at least this fraction of the public bound
    (up to the 24-bit rounding of sigma) for every dataset (module docstring)."""
    beta = smooth_gaussian_parameters(epsilon=epsilon, delta=delta)[1]
    return math.exp(-beta * (bound - 1))


def _at_least(x: float) -> str:
    """``x`` rounded down to 2 significant digits ('0' when negligible)."""
    if not x >= 1e-300:
        return "0"
    e = 1 - math.floor(math.log10(x))
    return f"{math.floor(x * 10.0**e) / 10.0**e:.2g}"


def count_half_width(*, epsilon: float, delta: float, step: float, bound: int, level: float) -> int:
    """The integer ``level`` half-width of the post-processed count at ``(epsilon, delta)``
    with the smooth bound at most ``bound`` (pure arithmetic: no mechanism is built, so
    epsilons the mechanism would not certify can be evaluated too)."""
    alpha = smooth_gaussian_parameters(epsilon=epsilon, delta=delta)[0]
    t = discrete_gaussian_half_width(grid_sigma(bound, alpha=alpha, step=step), level)
    return math.floor(t * step + step / 2 + 0.5)


def report_count(
    raw: float,
    *,
    name: str,
    mech: SmoothGaussianMechanism,
    n: int,
    k: int,
    dimension: int,
    level: float,
    epsilon_share: float = 1.0,
) -> NoisyValue:
    """A released outlier count, post-processed to the nearest integer in ``[0, n]`` (free:
    the count of ``n`` records lies there), with its ``level`` interval at the public scale
    bound. ``epsilon_share``: the count's share of the workflow's total epsilon, so the
    needed epsilon is stated for the whole workflow. Never raises."""
    g = count_bound(n=n, k=k, dimension=dimension)
    half, acc = smooth_gaussian_accuracy(mech, level, g, "outliers")
    c, lo, hi, h = count_release(raw, half, upper=n)
    delta = mech.delta

    def half_at(total: float) -> float:
        return count_half_width(epsilon=total * epsilon_share, delta=delta, step=mech.step, bound=g, level=level)

    total = mech.epsilon / epsilon_share
    need = needed(half_at, c, total, limit=_EPSILON_RANGE * total)
    most = "" if h < n else f", and here it is at most {n}"
    advice = f"the half-width does not shrink with more records: the count itself must exceed {h}{most}"
    if need is not None and not certifies(epsilon=need * epsilon_share, delta=delta):
        advice = f"the mechanism certifies no such epsilon at delta = {delta:g}; " + advice
    if need is not None and epsilon_share != 1.0:
        advice = "that epsilon is the workflow's total, at the same count_fraction and h; " + advice
    frac = _at_least(scale_fraction(bound=g, epsilon=mech.epsilon, delta=delta))
    return NoisyValue(
        name=name,
        value=c,
        low=lo,
        high=hi,
        level=level,
        half_width=h,
        noise_scale=acc.noise_scale,
        noise=f"discrete Gaussian sd, public bound at smooth sensitivity <= min(n, GS_UB) = {g}; the sd used "
        f"depends on the data, is not shown, and is at least {frac} times this",
        scale_is_bound=True,
        post_processing=f"count rounded to the nearest integer in [0, {n}]",
        needed_epsilon=need,
        advice=advice,
    )


def selection_report(
    *, epsilon: float, h: int, candidates: int, n: int, k: int, dimension: int, level: float
) -> dict[str, Any]:
    """The public accuracy of ``h`` exponential-mechanism draws at ``epsilon / h`` each on
    the utility ``q / GS_UB`` (sensitivity 1), in outliers: the noise scale ``2 GS_UB h /
    epsilon`` and the McSherry-Talwar bound, at ``level`` jointly over the draws (union
    bound), on how many fewer outliers a drawn subspace may hold than the best one not
    yet drawn."""
    g = count_bound(n=n, k=k, dimension=dimension)
    per_draw = epsilon / h
    loss = g * exponential_loss_bound(epsilon=per_draw, sensitivity=1.0, candidates=candidates, beta=(1 - level) / h)
    return {
        "epsilon_per_draw": per_draw,
        "candidates": candidates,
        "gs_ub": g,
        "noise_scale_outliers": 2 * g / per_draw,
        "loss_bound_outliers": loss,
        "level": level,
    }
