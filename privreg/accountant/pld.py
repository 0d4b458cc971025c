"""Privacy loss distributions (Koskela et al. 2020; Doroshenko et al. 2022) on Google's
``dp-accounting``: tight numerical accounting with pessimistic discretisation, so every
reported epsilon is an upper bound on the true one.

Memory is bounded: a leaf whose distribution would need more than
:data:`MAX_PLD_POINTS` grid points (tiny noise: its epsilon is huge anyway), or a
composition whose result would, is refused (the accountant cannot vouch) instead of
allocating gigabytes. Sizes are estimated before anything is built: a leaf from its
privacy-loss range, a k-fold self-composition from dp-accounting's own Chernoff
truncation bounds.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from dp_accounting.pld import common, pld_pmf
from dp_accounting.pld import privacy_loss_distribution as dpl

from privreg.accountant.base import Accountant, Handler, handles
from privreg.core import validation as v
from privreg.core.events import (
    ApproxDP,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    PoissonSampled,
    PrivacyEvent,
    PureDP,
)

__all__ = [
    "PLDAccountant",
    "PLD_HANDLERS",
    "FFT_ERROR",
    "MAX_EXACT_DISCRETE_SENSITIVITY",
    "MAX_EXACT_DISCRETE_SIGMA",
    "MAX_PLD_POINTS",
]

#: dp-accounting enumerates a discrete Laplace's sensitivity range; above this many grid
#: units we use the PLD of a pure eps-DP mechanism instead (valid for any eps-DP event).
MAX_EXACT_DISCRETE_SENSITIVITY = 4096
#: dp-accounting enumerates a discrete Gaussian's support (about +-11 sigma); above this
#: sigma, or for more than one coordinate, the event is left to RDP and zCDP (exact there).
MAX_EXACT_DISCRETE_SIGMA = 2e5
#: The largest privacy loss grid the accountant will hold: 8 bytes a point once built,
#: but dp-accounting needs up to ~160 bytes a point while building one (about 330 MiB
#: at this limit; 650 MiB at the former 1 << 22).
MAX_PLD_POINTS = 1 << 21
#: A composition whose mass at finite loss would fall below this is refused: its delta is
#: 1 to six digits anyway, and dp-accounting's tail truncation (1e-15) empties such a
#: PMF and then fails (IndexError).
MIN_FINITE_MASS = 1e-6
#: Allowance for floating-point error of FFT composition, added to every delta per
#: release composed (2**-52 each; none for a one-point PMF, which composes exactly).
#: Against the exact Gaussian curve dp-accounting's FFT self-composition fell short by
#: up to 1.6e-13 at 1e4 releases and 2.6e-12 at 1e6 (deltas near 1e-11), about a tenth
#: of this allowance.
FFT_ERROR = 2.0**-52
# A built PMF whose total mass (with the mass at infinity) is below 1 by more than this
# has lost mass and is refused.
_MASS_TOLERANCE = 1e-9
# Standard deviations of a Gaussian's support dp-accounting keeps (its truncation
# bound, 1e-15 tail mass, is about 8 standard deviations; 12 leaves margin).
_TAIL_SD = 12.0
# The largest count dp-accounting's sparse self-composition is left to (2 ** 16 > 1000
# points: dp-accounting itself turns a PMF of two or more points dense before that).
_SPARSE_MAX_COUNT = 16


def _gaussian_points(ratio: float, vdi: float) -> float:
    """Grid points of a Gaussian PLD with sensitivity/sigma = ``ratio``: the loss
    ratio * z - ratio^2 / 2 over |z| <= _TAIL_SD spans 2 _TAIL_SD ratio (+ ratio^2)."""
    return (2 * _TAIL_SD * ratio + ratio * ratio) / vdi


def _pure_points(eps: float, vdi: float) -> float:
    return 2 * eps / vdi


def _checked(points: float, acc: PLDAccountant) -> None:
    if not points <= MAX_PLD_POINTS:
        raise MemoryError(
            f"its privacy loss grid would need {points:.3g} points at interval {acc.vdi:g} (limit {MAX_PLD_POINTS})"
        )


def _pure_pld(acc: PLDAccountant, eps: float, delta: float = 0.0) -> dpl.PrivacyLossDistribution:
    _checked(_pure_points(eps, acc.vdi), acc)
    return dpl.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=acc.vdi
    )


def _noise(multiplier: float) -> float:
    if not 0 < multiplier < math.inf:
        raise ValueError(f"noise / sensitivity = {multiplier!r} is not a positive finite number")
    return multiplier


def _gaussian(acc: PLDAccountant, e: Gaussian, q: float = 1.0) -> dpl.PrivacyLossDistribution:
    _noise(e.noise_multiplier)
    _checked(_gaussian_points(1.0 / e.noise_multiplier, acc.vdi), acc)
    return dpl.from_gaussian_mechanism(
        standard_deviation=e.noise_multiplier, value_discretization_interval=acc.vdi, sampling_prob=q
    )


def _laplace(acc: PLDAccountant, e: Laplace, q: float = 1.0) -> dpl.PrivacyLossDistribution:
    _noise(e.noise_multiplier)
    _checked(_pure_points(1.0 / e.noise_multiplier, acc.vdi), acc)
    return dpl.from_laplace_mechanism(
        parameter=e.noise_multiplier, value_discretization_interval=acc.vdi, sampling_prob=q
    )


def _discrete_gaussian(acc: PLDAccountant, e: DiscreteGaussian, q: float = 1.0) -> dpl.PrivacyLossDistribution | None:
    if e.dimension != 1 or e.sigma > MAX_EXACT_DISCRETE_SIGMA:
        return None  # left to RDP and zCDP, exact there
    _checked(_gaussian_points(e.sensitivity / e.sigma, acc.vdi), acc)
    return dpl.from_discrete_gaussian_mechanism(
        sigma=e.sigma, sensitivity=e.sensitivity, value_discretization_interval=acc.vdi, sampling_prob=q
    )


def _discrete_laplace(acc: PLDAccountant, e: DiscreteLaplace, q: float = 1.0) -> dpl.PrivacyLossDistribution | None:
    if e.sensitivity > MAX_EXACT_DISCRETE_SENSITIVITY:
        return _pure_pld(acc, e.epsilon) if q == 1.0 else None  # the pure-DP PLD: valid for any eps-DP event
    _checked(_pure_points(e.epsilon, acc.vdi), acc)
    return dpl.from_discrete_laplace_mechanism(
        parameter=1.0 / e.scale, sensitivity=e.sensitivity, value_discretization_interval=acc.vdi, sampling_prob=q
    )


#: ``build(accountant, inner event, sampling probability)``: the PLD of a Poisson sample.
_Build = Callable[["PLDAccountant", PrivacyEvent, float], "dpl.PrivacyLossDistribution | None"]
_E = TypeVar("_E", bound=PrivacyEvent)


def _sampled(
    event_type: type[_E],
    build: Callable[[PLDAccountant, _E, float], dpl.PrivacyLossDistribution | None],
) -> tuple[type[PrivacyEvent], _Build]:
    """One entry of :data:`_SAMPLED`: looked up by exact class, ``build`` only receives
    ``event_type`` events (the cast says so)."""
    return event_type, cast(_Build, build)


_SAMPLED = dict(
    [
        _sampled(Gaussian, _gaussian),
        _sampled(Laplace, _laplace),
        _sampled(DiscreteGaussian, _discrete_gaussian),
        _sampled(DiscreteLaplace, _discrete_laplace),
    ]
)


def _poisson(acc: PLDAccountant, e: PoissonSampled) -> dpl.PrivacyLossDistribution | None:
    build = _SAMPLED.get(type(e.event))
    return None if build is None else build(acc, e.event, e.sampling_probability)


#: The PLD of one release. Gaussian and Laplace events (and their Poisson subsamples
#: under add/remove) use their exact PLDs; any other (eps, delta)-DP event uses the
#: tight PLD of an (eps, delta)-DP mechanism.
PLD_HANDLERS: dict[type[PrivacyEvent], Handler] = dict(
    [
        handles(Gaussian, _gaussian),
        handles(Laplace, _laplace),
        handles(DiscreteGaussian, _discrete_gaussian),
        handles(DiscreteLaplace, _discrete_laplace),
        handles(PoissonSampled, _poisson),
        handles(PureDP, lambda acc, e: _pure_pld(acc, e.epsilon)),
        handles(LocalDP, lambda acc, e: _pure_pld(acc, e.epsilon0)),
        handles(Exponential, lambda acc, e: _pure_pld(acc, e.epsilon)),
        handles(ApproxDP, lambda acc, e: _pure_pld(acc, e.epsilon, e.delta)),
    ]
)


def _size(pld: dpl.PrivacyLossDistribution) -> int:
    pmfs = {id(pld._pmf_remove): pld._pmf_remove, id(pld._pmf_add): pld._pmf_add}
    return sum(p.size for p in pmfs.values())


def _log_finite_mass(pld: dpl.PrivacyLossDistribution) -> float:
    """log of the smaller probability of a finite privacy loss (remove or add)."""
    inf_mass = max(float(pld._pmf_remove._infinity_mass), float(pld._pmf_add._infinity_mass))
    return math.log1p(-inf_mass) if inf_mass < 1 else -math.inf


def _self_composed_size(pld: dpl.PrivacyLossDistribution, count: int) -> float:
    """Grid points of ``pld`` self-composed ``count`` times, by dp-accounting's own
    truncation bounds (computed without the composition)."""
    if count == 1:
        return float(_size(pld))
    total = 0.0
    for pmf in {id(pld._pmf_remove): pld._pmf_remove, id(pld._pmf_add): pld._pmf_add}.values():
        if pmf.size * min(count, 1e18) <= 1000:
            total += pmf.size * count
            continue
        probs = pmf.to_dense_pmf()._probs
        if probs.size * math.sqrt(count) > MAX_PLD_POINTS * 64:
            return math.inf
        lower, upper = common.compute_self_convolve_bounds(probs, count, 1e-15)
        total += upper - lower + 1
    return total


def _pmf_ok(pmf: Any) -> bool:
    """Finite, non-negative masses summing to 1 (to rounding) with the mass at infinity.
    dp-accounting loses mass in some extremes (half of it for a Poisson-sampled discrete
    Laplace of scale 1e105): a delta computed from the rest could be too small."""
    if isinstance(pmf, pld_pmf.DensePLDPmf):
        probs = np.asarray(pmf._probs, dtype=np.float64)
    else:
        probs = np.fromiter(pmf._loss_probs.values(), dtype=np.float64, count=pmf.size)
    inf_mass = float(pmf._infinity_mass)
    if not (probs.size > 0 and np.all(probs >= 0) and np.all(np.isfinite(probs)) and 0 <= inf_mass <= 1):
        return False
    return float(np.sum(probs)) + inf_mass >= 1 - _MASS_TOLERANCE


def _check_normalised(pmf: Any) -> None:
    """Raise ArithmeticError (the accountant cannot vouch) if a composed PMF lost mass or
    its mass at infinity went negative. Rounding excess (pessimistic, so safe) compounds
    over very many compositions: 1e14 releases of a Laplace of scale 1e256 gave a mass at
    infinity of -0.08, and deltas of garbage."""
    inf_mass = float(pmf._infinity_mass)
    probs = pmf._probs if isinstance(pmf, pld_pmf.DensePLDPmf) else list(pmf._loss_probs.values())
    total = float(np.sum(probs)) + inf_mass
    if not (inf_mass >= -1e-12 and 1 - 1e-6 <= total <= 2):
        raise ArithmeticError(
            f"the composed privacy loss distribution is not normalised (total mass "
            f"{total:.6g}, mass at infinity {inf_mass:.3g})"
        )


def _dense_for_self_composition(pld: dpl.PrivacyLossDistribution, count: int) -> dpl.PrivacyLossDistribution:
    """``pld`` with dense PMFs when dp-accounting's sparse self-composition would not
    scale: it composes ``count - 1`` times in a Python loop while ``size ** count`` stays
    within 1000 (forever for a one-point PMF such as an eps = 0 event), and it computes
    that power as an exact integer (gigabytes for a count of 1e11). Past a count of 16 a
    PMF of two or more points is densified by dp-accounting itself, so only the
    one-point case changes its path (the result is the same point mass)."""
    pmfs = (pld._pmf_remove, pld._pmf_add)
    if all(isinstance(p, pld_pmf.DensePLDPmf) for p in pmfs) or not any(
        p.size == 1 or count > _SPARSE_MAX_COUNT for p in pmfs
    ):
        return pld
    remove = pld._pmf_remove.to_dense_pmf()
    if pld._symmetric:
        return dpl.PrivacyLossDistribution(remove)
    return dpl.PrivacyLossDistribution(remove, pld._pmf_add.to_dense_pmf())


class PLDAccountant(Accountant):
    """Composes privacy loss distributions by FFT convolution.

    ``value_discretization_interval`` trades speed for tightness: smaller is tighter,
    never less safe. Identical leaves are self-composed once (an FFT power).
    """

    name = "pld"
    handlers = PLD_HANDLERS

    def __init__(self, *, value_discretization_interval: float = 1e-4, neighbouring: str = "add_remove") -> None:
        super().__init__(neighbouring=neighbouring)
        self.vdi = v.check_sensitivity("value_discretization_interval", value_discretization_interval)
        self._pld = dpl.identity(value_discretization_interval=self.vdi)
        self._released = False
        self._cache: dict[Any, Any] = {}
        self._fft_slack = 0.0  # FFT_ERROR per release composed (see _delta)

    def cost(self, event: PrivacyEvent) -> tuple[Any, str]:
        try:
            hit = self._cache.get(event)
        except TypeError:
            hit = None
        if hit is None:
            hit = super().cost(event)
            with contextlib.suppress(TypeError):  # an unhashable (third-party) event is priced every time
                self._cache[event] = hit
        return hit

    def _valid(self, cost: Any) -> bool:
        """A PLD whose masses are finite and non-negative (dp-accounting returns NaN
        masses for an infinite noise multiplier, which it then fails to compose). A mass
        at infinity that rounded below 0 (pure eps-DP PLDs: -2e-18) is set to 0: else
        dp-accounting's self-composition books its truncated tail (1e-15) against it and
        answers a finite epsilon at any delta (28.7 for 1000 x PureDP(0.1) at delta 1e-300,
        where the exact value is 100)."""
        if not isinstance(cost, dpl.PrivacyLossDistribution):
            return False
        for pmf in (cost._pmf_remove, cost._pmf_add):
            if -1e-12 < pmf._infinity_mass < 0:
                pmf._infinity_mass = 0.0
        return all(_pmf_ok(p) for p in (cost._pmf_remove, cost._pmf_add))

    def _plan(self, event: PrivacyEvent, count: int) -> tuple[list[tuple[Any, int]], PrivacyEvent | None, str]:
        plan, bad, why = super()._plan(event, count)
        if bad is not None:
            return plan, bad, why
        points = float(_size(self._pld))
        log_finite = _log_finite_mass(self._pld)
        for pld, n in plan:
            points += _self_composed_size(pld, n)
            if not points <= MAX_PLD_POINTS:
                return (
                    [],
                    event,
                    (
                        f"the composed privacy loss grid would need {points:.3g} points "
                        f"(limit {MAX_PLD_POINTS}); use the rdp or zcdp accountant"
                    ),
                )
            log_finite += n * _log_finite_mass(pld)
            if not log_finite >= math.log(MIN_FINITE_MASS):
                return [], event, (f"its delta would exceed 1 - {MIN_FINITE_MASS:g}: nothing left to account")
        return plan, None, ""

    def _add(self, cost: dpl.PrivacyLossDistribution, count: int) -> None:
        self._released = True
        if (
            _size(cost) <= 2
            and float(cost.get_delta_for_epsilon(0.0)) == 0.0
            and all(p.size == 1 for p in (cost._pmf_remove, cost._pmf_add))
        ):
            return  # one point with no loss (P = Q): composing it changes nothing, exactly
        if cost._pmf_remove.size > 1 or cost._pmf_add.size > 1:  # a point mass composes exactly
            self._fft_slack += count * FFT_ERROR
        if count > 1:
            cost = _dense_for_self_composition(cost, count).self_compose(count)
        composed = self._pld.compose(cost)
        for pmf in (composed._pmf_remove, composed._pmf_add):
            _check_normalised(pmf)
        self._pld = composed

    def _epsilon(self, delta: float) -> float:
        if not self._released:
            return 0.0  # nothing composed: dp-accounting's identity answers inf at delta 0
        if self._fft_slack and delta <= self._fft_slack:
            return math.inf
        return float(self._pld.get_epsilon_for_delta(delta - self._fft_slack))

    def _delta(self, epsilon: float) -> float:
        if not self._released:
            return 0.0
        # the mass at infinite loss counts at every epsilon: dp-accounting's sum can round
        # below it (even below 0) when a long FFT composition leaves ~1e-13 noise
        inf_mass = max(float(self._pld._pmf_remove._infinity_mass), float(self._pld._pmf_add._infinity_mass))
        return max(float(self._pld.get_delta_for_epsilon(epsilon)), inf_mass) + self._fft_slack
