"""Accuracy before release: confidence half-widths from the exact noise laws.

Every half-width here is computed from the law of the noise the mechanism actually draws
(its exact scale after any rounding), never from a continuous idealisation:

* discrete Laplace (two-sided geometric) noise ``Z`` with ``P(z) ~ exp(-|z| / s)``:
  ``P(|Z| > t) = 2 p^(t+1) / (1 + p)`` with ``p = exp(-1/s)`` (Ghosh-Roughgarden-
  Sundararajan 2009; the sampler of Canonne-Kamath-Steinke 2020), so the smallest integer
  ``t`` with ``P(|Z| > t) <= 1 - level`` is an exact ``level`` interval;
* the Laplace mechanism on a grid of step ``g`` releases ``(round(x/g) + Z) g``, so
  ``|output - x| <= t g + g / 2`` with at least the same probability;
* the exponential-mechanism quantile: with probability ``>= 1 - beta`` its rank error is
  at most ``OPT + 2 Delta ln(points / beta) / epsilon`` (McSherry-Talwar 2007, Theorem 8),
  and likewise any exponential-mechanism draw among ``C`` candidates loses at most
  ``2 Delta ln(C / beta) / epsilon`` utility (:func:`exponential_loss_bound`);
* discrete Gaussian noise ``N_Z(0, sigma^2)`` (Canonne-Kamath-Steinke 2020):
  ``P(|Z| > t) <= 2 Q(t / sigma)`` with ``Q`` the standard normal tail, since the tail sum
  is at most the integral from ``t`` and the normaliser is at least ``sigma sqrt(2 pi)``
  (Poisson summation); the smallest such ``t`` is within about one unit of the exact one.
  The smooth-sensitivity Gaussian draws it with a data-dependent ``sigma``: its interval
  uses a public upper bound on the smooth bound (:func:`smooth_gaussian_accuracy`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.smooth_gaussian import SmoothGaussianMechanism, grid_sigma

__all__ = [
    "Accuracy",
    "check_level",
    "discrete_laplace_half_width",
    "discrete_laplace_coverage",
    "discrete_gaussian_half_width",
    "discrete_laplace_accuracy",
    "laplace_accuracy",
    "smooth_gaussian_accuracy",
    "exponential_loss_bound",
    "ratio_range",
]


def check_level(level: Any) -> float:
    """A confidence level in (0, 1)."""
    return v.check_probability("level", level, open_low=True, open_high=True)


def discrete_laplace_coverage(scale: Fraction | float, t: int) -> float:
    """``P(|Z| <= t)`` for discrete Laplace noise of scale ``scale`` (exact law)."""
    p = math.exp(-1.0 / float(scale))
    return 1.0 - 2.0 * p ** (t + 1) / (1.0 + p)


def discrete_laplace_half_width(scale: Fraction | float, level: float) -> int:
    """The smallest integer ``t >= 0`` with ``P(|Z| <= t) >= level`` for discrete Laplace
    noise of scale ``scale`` (in the noise's integer units)."""
    level = check_level(level)
    p = math.exp(-1.0 / float(scale))
    # 2 p^(t+1) / (1 + p) <= 1 - level  <=>  t + 1 >= ln((1 - level)(1 + p) / 2) / ln p
    t = max(0, math.ceil(math.log((1.0 - level) * (1.0 + p) / 2.0) / math.log(p)) - 1) if p > 0 else 0
    while t > 0 and discrete_laplace_coverage(scale, t - 1) >= level:  # float slack: the smallest t
        t -= 1
    while discrete_laplace_coverage(scale, t) < level:
        t += 1
    return t


@attrs.frozen(kw_only=True)
class Accuracy:
    """What a query's release will be worth, known before anything is charged.

    ``half_width``: with probability at least ``level`` the released value is within this
    of the true value (of the contribution-bounded, clipped data), in ``unit``; None when
    it depends on private quantities (a mean's denominator), in which case ``components``
    give the half-widths of the parts and ``note`` says how the interval of the release is
    formed. ``noise_scale`` is the scale of the noise added, in ``unit`` (the rank-error
    bound's own scale ``2 / epsilon`` for quantiles). ``mechanism`` names the registered
    mechanism(s) used."""

    level: float
    half_width: float | None
    unit: str
    noise_scale: float
    mechanism: str
    exact: bool
    note: str = ""
    components: Mapping[str, Accuracy] = attrs.field(factory=dict)

    def __str__(self) -> str:
        width = "depends on the data" if self.half_width is None else f"+-{self.half_width:.6g} {self.unit}"
        kind = "exact" if self.exact else "bound"
        return f"{self.level:.0%} half-width {width} ({kind}; noise scale {self.noise_scale:.4g}, {self.mechanism})"


def _float(x: Fraction) -> float:
    """``x`` as a float, ``inf`` beyond the float range (a half-width of noise on a grid
    near 1e308 may not fit in a float)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def discrete_gaussian_half_width(sigma: Fraction | float, level: float) -> int:
    """The smallest integer ``t >= 0`` with ``2 Q(t / sigma) <= 1 - level``: discrete
    Gaussian noise ``N_Z(0, sigma^2)`` lies in ``[-t, t]`` with probability at least
    ``level`` (module docstring), in the noise's integer units."""
    level = check_level(level)
    s = float(sigma) * math.sqrt(2.0)

    def tail(t: int) -> float:  # 2 Q(t / sigma)
        return math.erfc(t / s)

    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    if float(sigma) > 2.0**40:  # unit steps are below float resolution: a relative margin instead
        return math.ceil(float(sigma) * z * (1 + 1e-12))
    t = max(0, math.ceil(float(sigma) * z))
    while t > 0 and tail(t - 1) <= 1.0 - level:  # float slack: the smallest t
        t -= 1
    while tail(t) > 1.0 - level:
        t += 1
    return t


def discrete_laplace_accuracy(mech: DiscreteLaplaceMechanism, level: float, unit: str = "rows") -> tuple[int, Accuracy]:
    """The exact ``level`` half-width (integer noise units) of a discrete Laplace release."""
    t = discrete_laplace_half_width(mech.noise_scale, level)
    acc = Accuracy(
        level=level,
        half_width=float(t),
        unit=unit,
        noise_scale=float(mech.noise_scale),
        mechanism=mech.name,
        exact=True,
        note=f"P(|noise| <= {t}) = {discrete_laplace_coverage(mech.noise_scale, t):.6f} (discrete Laplace law)",
    )
    return t, acc


def laplace_accuracy(mech: LaplaceMechanism, level: float, unit: str) -> tuple[float, Accuracy]:
    """The ``level`` half-width of a Laplace release on its grid of step ``g``: ``t g + g / 2``
    with ``t`` the discrete Laplace half-width of the noise drawn (``g / 2`` for snapping);
    the noise scale is the drawn scale times ``g``, in the query's units."""
    step = mech.grid.step
    t = discrete_laplace_half_width(mech.noise_scale, level)
    half = _float(t * step + step / 2)
    acc = Accuracy(
        level=level,
        half_width=half,
        unit=unit,
        noise_scale=_float(mech.noise_scale * step),
        mechanism=mech.name,
        exact=False,
        note=f"{t} grid steps of {float(step):.4g} (discrete Laplace law) plus half a step of snapping",
    )
    return half, acc


def smooth_gaussian_accuracy(
    mech: SmoothGaussianMechanism, level: float, smooth_bound: float, unit: str
) -> tuple[float, Accuracy]:
    """The ``level`` half-width of a smooth-sensitivity Gaussian release when its smooth
    bound is at most ``smooth_bound``: the scale ``sigma(x)`` it draws with depends on the
    data and is never released, but is at most ``sigma`` at ``smooth_bound`` (monotone,
    :func:`~privreg.mechanisms.smooth_gaussian.grid_sigma`), and a discrete Gaussian's
    ``|Z|`` is stochastically increasing in sigma, so ``t g + g / 2`` at that sigma holds
    with probability at least ``level``. ``smooth_bound`` must be public (a function of
    public parameters only, e.g. the global sensitivity): the reported noise scale is then
    an upper bound on the one used, not the one used."""
    step = Fraction(mech.step)
    sigma = grid_sigma(smooth_bound, alpha=mech.alpha, step=mech.step)
    t = discrete_gaussian_half_width(sigma, level)
    half = _float(t * step + step / 2)
    acc = Accuracy(
        level=level,
        half_width=half,
        unit=unit,
        noise_scale=_float(sigma * step),
        mechanism=mech.name,
        exact=False,
        note=f"discrete Gaussian law at the public bound {smooth_bound:g} on the smooth sensitivity "
        "(the scale used depends on the data, is never shown, and is at most this)",
    )
    return half, acc


def exponential_loss_bound(*, epsilon: float, sensitivity: float, candidates: int, beta: float) -> float:
    """``2 Delta ln(C / beta) / epsilon``: with probability at least ``1 - beta`` an
    exponential-mechanism draw (weights ``exp(epsilon u / (2 Delta))``) among ``C``
    candidates has utility within this of the best (McSherry-Talwar 2007, Theorem 8)."""
    beta = v.check_probability("beta", beta, open_low=True, open_high=True)
    return 2.0 * sensitivity * math.log(candidates / beta) / epsilon


def ratio_range(s: tuple[float, float], n: tuple[float, float]) -> tuple[float, float] | None:
    """The range of ``S / N`` over the box ``s x n`` (None if ``N`` may be <= 0): the
    interval of a ratio of two releases from both releases' intervals."""
    if n[0] <= 0:
        return None
    corners = [a / b for a in s for b in n]
    return min(corners), max(corners)
