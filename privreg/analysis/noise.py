"""The noise of a statistic's parts: Laplace (pure DP) or the discrete Gaussian (zCDP).

A :class:`NoiseSpec` says how much privacy one statistic may use and in what currency:

* ``laplace``: ``epsilon``, pure DP, shared equally by the statistic's parts. Counts draw
  discrete Laplace noise, sums Laplace noise on a grid (the existing mechanisms).
* ``gaussian``: ``rho``-zCDP (Bun-Steinke 2016), shared equally by the parts (zCDP adds
  up, Bun-Steinke 2016 Lemma 2.3). Counts (integer L2 sensitivity ``k``) draw the exact
  discrete Gaussian with ``sigma = k / sqrt(2 rho_part)``, which is exactly
  ``rho_part``-zCDP (Canonne-Kamath-Steinke 2020, Theorem 14). Sums use the grid
  :class:`~privreg.mechanisms.gaussian.GaussianMechanism`, asked for the (epsilon, delta)
  that a continuous Gaussian of that ``sigma`` meets; its charged event is the
  ``DiscreteGaussian`` it draws (verified to meet that pair), whose ``rho`` is within
  about 1e-3 of ``rho_part``. The session prices the charged events, never ``rho``.

Given (epsilon, delta), :func:`rho_for` is the largest ``rho`` whose tight conversion
(Canonne-Kamath-Steinke 2020, Proposition 12, over the RDP curve ``rho alpha``) is
within (epsilon, delta). Many statistics cost less under zCDP: ``k`` of them at
``rho / k`` each have Gaussian noise of scale ``~ sqrt(k)``, while ``k`` pure-DP ones at
``epsilon / k`` have Laplace noise of scale ``~ k``.

Intervals come from the law of the noise drawn (:func:`discrete_gaussian_accuracy`,
:func:`gaussian_accuracy`): for sigma up to 2,000 the discrete Gaussian's probabilities
summed (with a 1e-9 margin for floating-point error), else the normal-tail bound of
:func:`~privreg.analysis.accuracy.discrete_gaussian_half_width` (within about one unit,
CKS 2020's tail bound), never wider than that bound.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from privreg.accountant.curves import gaussian_epsilon
from privreg.accountant.zcdp import zcdp_epsilon
from privreg.analysis.accuracy import Accuracy, discrete_gaussian_half_width
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.gaussian import GaussianMechanism, as_global_l2

__all__ = [
    "NOISES",
    "NoiseSpec",
    "check_noise",
    "rho_for",
    "noise_spec",
    "gaussian_count",
    "gaussian_sum",
    "discrete_gaussian_exact_half_width",
    "discrete_gaussian_accuracy",
    "gaussian_accuracy",
]

#: The noise a count, sum, mean, histogram or group-by may draw.
NOISES = ("laplace", "gaussian")

#: Above this sigma the discrete Gaussian's probabilities are not summed (40 sigma terms):
#: the normal-tail bound is used instead, within about one unit of the exact half-width
#: (a relative 1e-3 or less there).
_SUMMED_SIGMA = 2.0e3


def check_noise(noise: Any) -> str:
    if noise not in NOISES:
        raise PrivregValueError(
            f"noise must be one of {NOISES}; got {noise!r}. Use noise='gaussian' with delta=... for zCDP "
            f"(many statistics compose better), or leave the default noise='laplace' (pure DP)."
        )
    return str(noise)


@attrs.frozen(kw_only=True)
class NoiseSpec:
    """The privacy one statistic may use: Laplace at ``epsilon``, or the Gaussian at
    zCDP ``rho`` with its grid Gaussians calibrated at ``delta``."""

    kind: str
    epsilon: float = 0.0
    rho: float = 0.0
    delta: float = 0.0

    def part(self, parts: int) -> NoiseSpec:
        """The Gaussian share of one of ``parts`` equal parts (zCDP adds up)."""
        return attrs.evolve(self, rho=self.rho / parts)


def rho_for(epsilon: float, delta: float) -> float:
    """The largest ``rho`` (to a relative 1e-12) with ``zcdp_epsilon(rho, delta) <=
    epsilon``: rho-zCDP then implies (epsilon, delta)-DP (CKS 2020, Proposition 12)."""
    return _rho_for(v.check_epsilon("epsilon", epsilon), v.check_delta("delta", delta, allow_zero=False))


@functools.lru_cache(maxsize=256)
def _rho_for(epsilon: float, delta: float) -> float:
    lo, hi = 0.0, max(epsilon, 1e-300)
    while zcdp_epsilon(hi, delta) <= epsilon:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if zcdp_epsilon(mid, delta) <= epsilon else (lo, mid)
    if lo <= 0:
        raise PrivregValueError(
            f"epsilon={epsilon!r} at delta={delta!r} leaves no zCDP budget for Gaussian noise; pass a larger epsilon"
        )
    return lo


def noise_spec(noise: Any, epsilon: Any, delta: Any) -> NoiseSpec:
    """The spec of a statistic asked for at ``epsilon`` (and ``delta`` for the Gaussian),
    validated; ``delta`` with Laplace noise is refused by the caller (it has its own
    meaning for partition selection)."""
    kind = check_noise(noise)
    epsilon = v.check_epsilon("epsilon", epsilon)
    if kind == "laplace":
        return NoiseSpec(kind=kind, epsilon=epsilon)
    if delta is None:
        raise PrivregValueError(
            "delta is required with noise='gaussian' (the statistic is (epsilon, delta)-DP through zCDP); got "
            "None. Pass delta=1e-6 (well below 1 / number of persons)."
        )
    delta = v.check_delta("delta", delta, allow_zero=False)
    return NoiseSpec(kind=kind, epsilon=epsilon, rho=rho_for(epsilon, delta), delta=delta)


def _sigma_up(sensitivity: float, rho: float) -> float:
    """``sensitivity / sqrt(2 rho)`` rounded up, so the event's rho is at most ``rho``."""
    sigma = sensitivity / math.sqrt(2.0 * rho)
    while sensitivity**2 / (2 * sigma**2) > rho:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def gaussian_count(spec: NoiseSpec, sensitivity: int, dimension: int = 1) -> DiscreteGaussianMechanism:
    """Discrete Gaussian noise for integer counts of L2 sensitivity ``sensitivity``:
    exactly ``spec.rho``-zCDP (CKS 2020, Theorem 14)."""
    return DiscreteGaussianMechanism(
        sigma=_sigma_up(sensitivity, spec.rho), sensitivity=sensitivity, dimension=dimension
    )


def gaussian_sum(spec: NoiseSpec, sensitivity: float, dimension: int = 1) -> GaussianMechanism:
    """The grid Gaussian for real sums of L2 sensitivity ``sensitivity`` at about
    ``spec.rho``-zCDP: asked for the (epsilon, delta) a continuous Gaussian of noise
    multiplier ``1 / sqrt(2 rho)`` meets at ``spec.delta`` (Balle-Wang 2018) for a scalar
    (verified under PLD), or that rho-zCDP meets (CKS 2020, Prop. 12) for a vector
    (verified under RDP, i.e. zCDP), so its verified discrete noise has about that rho."""
    mu = math.sqrt(2.0 * spec.rho)
    eps = gaussian_epsilon(spec.delta, mu) if dimension == 1 else zcdp_epsilon(spec.rho, spec.delta)
    return GaussianMechanism(epsilon=eps, delta=spec.delta, sensitivity=as_global_l2(sensitivity), dimension=dimension)


@functools.lru_cache(maxsize=1024)
def _summed_half_width(sigma: float, level: float) -> int:
    z = np.arange(0, math.ceil(40 * sigma) + 2, dtype=np.float64)
    w = np.exp(-(z * z) / (2.0 * sigma * sigma))
    w[1:] *= 2.0
    cover = np.cumsum(w) / float(np.sum(w))
    return int(np.searchsorted(cover, level + 1e-9, side="left"))


def discrete_gaussian_exact_half_width(sigma: Fraction | float, level: float) -> int:
    """The smallest integer ``t`` with ``P(|Z| <= t) >= level`` for ``Z ~ N_Z(0, sigma^2)``,
    from its probabilities summed (with a 1e-9 margin for rounding), never above the
    normal-tail bound; the bound alone above :data:`_SUMMED_SIGMA`."""
    bound = discrete_gaussian_half_width(sigma, level)
    s = float(sigma)
    if s > _SUMMED_SIGMA:
        return bound
    return min(bound, _summed_half_width(s, level))


def discrete_gaussian_accuracy(
    mech: DiscreteGaussianMechanism, level: float, unit: str = "rows"
) -> tuple[int, Accuracy]:
    """The ``level`` half-width (integer units) of a discrete Gaussian release."""
    t = discrete_gaussian_exact_half_width(mech.sigma, level)
    acc = Accuracy(
        level=level,
        half_width=float(t),
        unit=unit,
        noise_scale=float(mech.sigma),
        mechanism=mech.name,
        exact=True,
        note=f"P(|noise| <= {t}) >= {level:g} (discrete Gaussian law, sigma {mech.sigma:.6g}; CKS 2020)",
    )
    return t, acc


def gaussian_accuracy(mech: GaussianMechanism, level: float, unit: str) -> tuple[float, Accuracy]:
    """The ``level`` half-width of a grid Gaussian release: ``t g + g / 2`` with ``t`` the
    discrete Gaussian half-width of the integer noise drawn (``g / 2`` for snapping)."""
    step = mech.grid.step
    t = discrete_gaussian_exact_half_width(mech.sigma_int, level)
    half = float(t * step + step / 2)
    acc = Accuracy(
        level=level,
        half_width=half,
        unit=unit,
        noise_scale=float(mech.sigma_int * step),
        mechanism=mech.name,
        exact=False,
        note=f"{t} grid steps of {float(step):.4g} (discrete Gaussian law) plus half a step of snapping",
    )
    return half, acc
