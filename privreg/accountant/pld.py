"""Privacy loss distributions (Koskela et al. 2020; Doroshenko et al. 2022) on Google's
``dp-accounting``: tight numerical accounting with pessimistic discretisation, so every
reported epsilon is an upper bound on the true one.

How a composition is computed (:class:`PLDAccountant`):

- Identical leaves are grouped; every Gaussian leaf (no subsampling) is merged into one
  Gaussian of ratio ``mu = sqrt(sum_i n_i mu_i^2)``: the privacy loss of a Gaussian
  mechanism is N(mu^2/2, mu^2) under either neighbour, so the composition is exactly
  another Gaussian (Dong, Roth and Su 2022, Corollary 3.3). It is discretised once, by
  connect-the-dots (Doroshenko et al. 2022, Algorithm 1) on a grid spanning the mean
  +- :data:`_GAUSSIAN_TAIL_SD` standard deviations; losses below are moved up to the
  lowest point, those above go to the point at infinity (both pessimistic).
- A Poisson-subsampled Gaussian and a (subsampled) Laplace are discretised by the same
  algorithm on dp-accounting's own grid, with the hockey-stick divergences evaluated in
  one vectorised pass (the formulas of dp-accounting's ``GaussianPrivacyLoss`` and
  ``LaplacePrivacyLoss``, which invert the privacy loss in a Python loop). Gaussian
  masses at small losses come from ``delta - (1 - e^eps)``, not from differences of a
  delta close to 1 (see :func:`_connect_dots`).
- A (Poisson-subsampled) discrete Gaussian is discretised as dp-accounting's
  ``from_discrete_gaussian_mechanism`` does (privacy buckets, each noise value's loss
  rounded up to the grid), with all noise values handled in one vectorised pass (its
  builder loops in Python over +-11.6 sigma of them): the same PMF to the bit.
- The grid of the result is bounded *before* anything is composed, by Chernoff bounds
  on the sum of the privacy losses (the bound dp-accounting uses for a self-composition,
  ``compute_self_convolve_bounds``, here applied to the whole sum): its log-moment
  generating function is the sum of the groups' (``count`` times each), evaluated at
  orders around ``sqrt(2 ln(2/tau)) / sd`` of the sum. The mass outside this window is at
  most :data:`TAIL_MASS`. A grid over :data:`MAX_PLD_POINTS` is refused then.
- The whole batch, with the state composed so far, is composed in one pass: each
  distinct PMF is transformed once (real FFT at the window's size), raised to its count,
  multiplied, and transformed back (Koskela et al. 2020). The cyclic convolution folds
  the tails outside the window into it: mass from below the window lands higher than it
  was (pessimistic), mass from above lower, so :data:`TAIL_MASS` is added to the mass
  at infinity whenever the window cuts a tail (dp-accounting's self-composition does the
  same), and any mass folded outside the window is moved to infinity.

Memory is bounded: a leaf whose distribution would need more than
:data:`MAX_PLD_POINTS` grid points (tiny noise: its epsilon is huge anyway), or a
composition whose window would, is refused (the accountant cannot vouch) instead of
allocating gigabytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
from dp_accounting.pld import common, pld_pmf
from dp_accounting.pld import privacy_loss_distribution as dpl
from dp_accounting.pld import privacy_loss_mechanism as plm
from scipy import fft, special

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
    "TAIL_MASS",
]

#: dp-accounting enumerates a discrete Laplace's sensitivity range; above this many grid
#: units we use the PLD of a pure eps-DP mechanism instead (valid for any eps-DP event).
MAX_EXACT_DISCRETE_SENSITIVITY = 4096
#: A discrete Gaussian's PLD is built from its whole support (+-ceil(11.6 sigma), as
#: dp-accounting truncates it), a few float64 arrays of that size (106 MiB at peak at this
#: sigma, 0.2 CPU-s at sigma 1e5); above this sigma, or for more than one coordinate, the
#: event is left to RDP and zCDP (exact there). privreg.mechanisms.gaussian verifies a
#: scalar discrete Gaussian under PLD up to this sigma.
MAX_EXACT_DISCRETE_SIGMA = 2e5
#: The largest privacy loss grid of one PMF (one side: remove or add) the accountant will
#: build or hold: 8 bytes a point once built (two sides at most in the state). Discrete
#: Laplace leaves are built by dp-accounting, which needs up to ~160 bytes a point while
#: building (about 330 MiB at this limit); the other leaves and compositions are built
#: here with a few float64 arrays of the grid's size at a time, one side at a time: about
#: 100 bytes a point at peak (measured: 160 MiB for the 1000-release mix of
#: tests/test_pld_scale.py, two sides of 1.73e6 points; about 200 MiB at this limit).
MAX_PLD_POINTS = 1 << 21
#: A composition whose mass at finite loss would fall below this is refused: its delta is
#: 1 to six digits anyway, and dp-accounting's tail truncation (1e-15) empties such a
#: PMF and then fails (IndexError).
MIN_FINITE_MASS = 1e-6
#: Allowance for floating-point error of FFT composition, added to every delta per
#: release composed (2**-52 each; none for a one-point PMF, which composes exactly).
#: Against the exact Gaussian curve dp-accounting's FFT self-composition fell short by
#: up to 1.6e-13 at 1e4 releases and 2.6e-12 at 1e6 (deltas near 1e-11), about a tenth
#: of this allowance; the one-pass composition here stays above the exact curve even
#: without it (tests/test_pld_scale.py). The FFT's negative rounding is dropped (mass 0):
#: it adds ~5e-18 a point, up to 1e-12 of delta over a tail of 2e5 points, which only
#: raises delta; left signed (as dp-accounting leaves it) it made delta(eps) rise with
#: eps after 10^12 releases.
FFT_ERROR = 2.0**-52
# A built PMF whose total mass (with the mass at infinity) is below 1 by more than this
# has lost mass and is refused.
_MASS_TOLERANCE = 1e-9
#: Probability mass a composition may leave outside its grid (the Chernoff window); it is
#: added to the mass at infinity (to delta) when a tail is cut. dp-accounting's default.
TAIL_MASS = 1e-15
# Standard deviations of a Gaussian's support dp-accounting keeps (its truncation
# bound, 1e-15 tail mass, is about 8 standard deviations; 12 leaves margin).
_TAIL_SD = 12.0
# The merged Gaussian's grid: mean +- this many standard deviations of its privacy loss
# (the normal tail beyond is TAIL_MASS / 2 on each side).
_GAUSSIAN_TAIL_SD = float(-special.ndtri(TAIL_MASS / 2))
# Multiples of 1 / sd (sd of the composed loss, in grid units) at which the Chernoff
# bound is evaluated, on each side; any order gives a valid bound, more give tighter ones.
_ORDER_FACTORS = np.geomspace(1 / 8, 8, 13)


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


#: The largest Gaussian noise / sensitivity composed as it is; more is composed as this
#: much. Less noise loses more privacy (its loss distribution dominates), so this only
#: overstates a loss of about 1e-100, far below any grid step, and keeps ``noise**2`` and
#: ``mu**2`` finite (a ratio of 1e162 overflowed them).
MAX_GAUSSIAN_NOISE = 1e100


def _noise(multiplier: float) -> float:
    if not 0 < multiplier < math.inf:
        raise ValueError(f"noise / sensitivity = {multiplier!r} is not a positive finite number")
    return multiplier


@dataclasses.dataclass(frozen=True)
class _GaussianLoss:
    """The privacy loss of a Gaussian mechanism of ratio ``mu`` = sensitivity / sigma:
    N(mu^2/2, mu^2) under either neighbour. Kept symbolic so that all Gaussian leaves
    of a composition merge into one (their ``mu^2`` add) and are discretised once."""

    mu: float


def _unsampled(q: float, adjacency: Any, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(delta, g, inside, L)`` for a mechanism Poisson-subsampled with probability
    ``q``: delta (and g = delta - (1 - e^eps)) filled in where eps is outside the range
    of the subsampled privacy loss, and for the epsilons ``inside`` it the privacy loss
    ``L`` of the mechanism without subsampling whose subsampled loss is eps
    (dp-accounting's ``AdditiveNoisePrivacyLoss.inverse_privacy_loss``, vectorised)."""
    deltas = np.zeros_like(eps)
    g = np.zeros_like(eps)
    if q == 1.0:
        return deltas, g, np.ones(eps.shape, dtype=bool), eps
    if adjacency == plm.AdjacencyType.REMOVE:
        inside = eps > math.log1p(-q)
        deltas[~inside] = -np.expm1(eps[~inside])  # g = 0
        e = eps[inside]
        with np.errstate(divide="ignore"):  # log1p(-1) at eps = log(1 - q): x = inf
            return deltas, g, inside, e - math.log(q) + np.log1p(-(1 - q) * np.exp(-e))
    inside = eps < -math.log1p(-q)
    g[~inside] = np.expm1(eps[~inside])  # delta = 0
    e = eps[inside]
    with np.errstate(divide="ignore"):
        return deltas, g, inside, -(-e - math.log(q) + np.log1p(-(1 - q) * np.exp(e)))


def _gaussian_curve(noise: float, q: float, adjacency: Any, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(delta, g)`` at ``eps`` for a (Poisson-subsampled) Gaussian mechanism with
    sensitivity 1 and standard deviation ``noise``. ``delta`` is dp-accounting's
    ``GaussianPrivacyLoss.get_delta_for_epsilon`` (mu_upper_cdf(x) - e^eps mu_lower_cdf(x)
    at the inverse privacy loss x of eps), the same closed forms evaluated for all
    epsilons at once. ``g = delta - (1 - e^eps)`` = e^eps mu_lower_sf(x) - mu_upper_sf(x)
    = e^eps Q(L <= eps) - P(L <= eps) is computed from survival functions, so that it
    keeps its relative precision at small losses, where delta is close to 1."""
    deltas, g, inside, unsampled = _unsampled(q, adjacency, eps)
    remove = adjacency == plm.AdjacencyType.REMOVE
    x = -0.5 - unsampled * noise**2  # the inverse privacy loss without subsampling (remove)
    if not remove:
        x = x + 1.0

    def cdf(y: np.ndarray) -> np.ndarray:
        return np.asarray(special.ndtr(y / noise))

    def log_cdf(y: np.ndarray) -> np.ndarray:
        return np.asarray(special.log_ndtr(y / noise))

    if remove:  # mu_upper = (1 - q) mu + q mu(. + 1), mu_lower = mu
        upper = cdf(x + 1.0) if q == 1.0 else (1 - q) * cdf(x) + q * cdf(x + 1.0)
        upper_sf = cdf(-x - 1.0) if q == 1.0 else (1 - q) * cdf(-x) + q * cdf(-x - 1.0)
        log_lower, log_lower_sf = log_cdf(x), log_cdf(-x)
    else:  # mu_upper = mu, mu_lower = (1 - q) mu + q mu(. - 1)
        upper, upper_sf = cdf(x), cdf(-x)
        if q == 1.0:
            log_lower, log_lower_sf = log_cdf(x - 1.0), log_cdf(1.0 - x)
        else:
            log_lower = np.logaddexp(math.log1p(-q) + log_cdf(x), math.log(q) + log_cdf(x - 1.0))
            log_lower_sf = np.logaddexp(math.log1p(-q) + log_cdf(-x), math.log(q) + log_cdf(1.0 - x))
    with np.errstate(over="ignore"):
        deltas[inside] = upper - np.exp(eps[inside] + log_lower)
        g[inside] = np.exp(eps[inside] + log_lower_sf) - upper_sf
    return np.clip(deltas, 0.0, 1.0), g


def _connect_dots(vdi: float, lower: int, deltas: np.ndarray, g: np.ndarray | None) -> pld_pmf.DensePLDPmf:
    """The pessimistic connect-the-dots PMF on the grid ``lower .. lower + len - 1`` (in
    units of ``vdi``) from the hockey-stick divergences there (Doroshenko et al. 2022,
    Algorithm 1; dp-accounting's ``create_pmf_pessimistic_connect_dots_fixed_gap``,
    returned dense instead of through a dictionary). Its divergence dominates the
    mechanism's at every epsilon, for any choice of grid.

    Where ``|g| < delta`` (small losses, delta close to 1) the masses come from
    ``g = delta - (1 - e^eps)`` instead: the term 1 - e^eps cancels exactly from every
    mass but the first (it is linear in e^eps), and differences of delta itself would
    leave each mass ~1e-16 / vdi of rounding noise (1e-12 at vdi 1e-4, where the true
    masses are 1e-20: 5e-8 of spurious mass in all for a Gaussian of mu = 5.4; it is
    what dp-accounting's own PMFs carry)."""
    deltas = np.minimum.accumulate(deltas)
    if deltas.size == 1:
        return pld_pmf.DensePLDPmf(vdi, lower, np.array([1.0 - deltas[0]]), float(deltas[0]), True)
    e_d, em1_d = math.exp(vdi), math.expm1(vdi)
    eps = (lower + np.arange(deltas.size)) * vdi
    if g is None:  # from delta alone (dp-accounting's formulas)
        g = np.zeros_like(deltas)
        small = np.zeros(deltas.size - 1, dtype=bool)
    else:
        small = np.abs(g[:-1]) < deltas[:-1]  # g is the smaller: differences of g are the finer
    dg = np.diff(g)
    with np.errstate(over="ignore", invalid="ignore"):
        linear = -np.exp(eps[:-1]) * em1_d  # differences of 1 - e^eps
        diffs = np.where(small, linear + dg, np.diff(deltas))
        inner = np.where(small[:-1] & small[1:], dg[1:] - dg[:-1] * e_d, diffs[1:] - diffs[:-1] * e_d)
    probs = np.empty_like(deltas)
    probs[0] = (-g[0] + dg[0] / em1_d) if small[0] else 1.0 - deltas[0] + diffs[0] / em1_d
    probs[1:-1] = inner / em1_d
    probs[-1] = diffs[-1] / math.expm1(-vdi)
    return pld_pmf.DensePLDPmf(vdi, lower, np.maximum(probs, 0.0), float(deltas[-1]), True)


def _subsampled_gaussian_side(acc: PLDAccountant, noise: float, q: float, adjacency: Any) -> pld_pmf.DensePLDPmf:
    """One side of dp-accounting's ``from_gaussian_mechanism(noise, sampling_prob=q)``:
    the same grid (its connect-the-dots bounds at log mass truncation -50) and PMF."""
    bounds = plm.GaussianPrivacyLoss(noise, sampling_prob=q, adjacency_type=adjacency).connect_dots_bounds()
    lower = math.floor(bounds.epsilon_lower / acc.vdi)
    upper = math.ceil(bounds.epsilon_upper / acc.vdi)
    _checked(upper - lower + 1, acc)
    eps = np.arange(lower, upper + 1) * acc.vdi
    return _connect_dots(acc.vdi, lower, *_gaussian_curve(noise, q, adjacency, eps))


def _gaussian(acc: PLDAccountant, e: Gaussian, q: float = 1.0) -> dpl.PrivacyLossDistribution | _GaussianLoss:
    noise = min(_noise(e.noise_multiplier), MAX_GAUSSIAN_NOISE)
    _checked(_gaussian_points(1.0 / noise, acc.vdi), acc)
    if q == 1.0:
        return _GaussianLoss(1.0 / noise)
    return dpl.PrivacyLossDistribution(
        _subsampled_gaussian_side(acc, noise, q, plm.AdjacencyType.REMOVE),
        _subsampled_gaussian_side(acc, noise, q, plm.AdjacencyType.ADD),
    )


def _laplace_side(acc: PLDAccountant, scale: float, q: float, adjacency: Any) -> pld_pmf.DensePLDPmf:
    """One side of dp-accounting's ``from_laplace_mechanism(scale, sampling_prob=q)``: its
    grid (the connect-the-dots bounds) and PMF, with the divergences evaluated for all
    epsilons at once (dp-accounting inverts the privacy loss in a Python loop). The loss
    of a Laplace mechanism lies in [-1/scale, 1/scale], so plain differences of delta are
    as precise as the masses need."""
    loss = plm.LaplacePrivacyLoss(scale, sampling_prob=q, adjacency_type=adjacency)
    bounds = loss.connect_dots_bounds()
    lower = math.floor(bounds.epsilon_lower / acc.vdi)
    upper = math.ceil(bounds.epsilon_upper / acc.vdi)
    _checked(upper - lower + 1, acc)
    eps = np.arange(lower, upper + 1) * acc.vdi
    deltas, _, inside, unsampled = _unsampled(q, adjacency, eps)
    # the inverse privacy loss without subsampling (remove): x = (-1 - L scale) / 2 on
    # (-1/scale, 1/scale], +inf below, -inf above
    x = np.where(
        unsampled <= -1 / scale, np.inf, np.where(unsampled > 1 / scale, -np.inf, -0.5 * (1 + unsampled * scale))
    )
    if adjacency != plm.AdjacencyType.REMOVE:
        x = x + 1.0
    with np.errstate(over="ignore", divide="ignore"):
        deltas[inside] = loss.mu_upper_cdf(x) - np.exp(eps[inside] + loss.mu_lower_log_cdf(x))
    return _connect_dots(acc.vdi, lower, np.clip(deltas, 0.0, 1.0), None)


def _laplace(acc: PLDAccountant, e: Laplace, q: float = 1.0) -> dpl.PrivacyLossDistribution:
    _noise(e.noise_multiplier)
    _checked(_pure_points(1.0 / e.noise_multiplier, acc.vdi), acc)
    remove = _laplace_side(acc, e.noise_multiplier, q, plm.AdjacencyType.REMOVE)
    if q == 1.0:
        return dpl.PrivacyLossDistribution(remove)
    return dpl.PrivacyLossDistribution(remove, _laplace_side(acc, e.noise_multiplier, q, plm.AdjacencyType.ADD))


# x values of a discrete Gaussian's noise handled at a time (a few float64 arrays each).
_DISCRETE_CHUNK = 1 << 20


def _discrete_gaussian_cdf(sigma: float, truncation: int) -> np.ndarray:
    """dp-accounting's ``DiscreteGaussianPrivacyLoss`` noise CDF, the same operations:
    the discrete Gaussian truncated to ``-truncation .. truncation`` and renormalised;
    entry ``i`` is P(noise <= i - truncation - 1)."""
    indices = np.arange(-truncation, truncation + 1)
    log_cdf = np.logaddexp.accumulate(np.append(-np.inf, -0.5 * indices**2 / (sigma**2)))
    log_cdf -= log_cdf[-1]
    return np.exp(log_cdf, out=log_cdf)


def _discrete_gaussian_side(
    acc: PLDAccountant, sigma: float, sensitivity: int, q: float, adjacency: Any
) -> pld_pmf.DensePLDPmf:
    """One side of dp-accounting's ``from_discrete_gaussian_mechanism(sigma, sensitivity,
    sampling_prob=q)`` (privacy buckets, pessimistic: the mass of each noise value x goes
    to its privacy loss rounded up to the grid) -- the same support (+-ceil(11.6 sigma),
    truncated mass below 1e-30), masses (differences of the noise CDF) and losses, with
    every x handled at once instead of in a Python loop, and returned dense. Rounding each
    loss up moves mass only to larger losses: the divergence dominates the mechanism's."""
    truncation = math.ceil(11.6 * sigma)
    if 2 * truncation < sensitivity:
        raise ValueError(f"truncation bound ({truncation}) is smaller than 0.5 * sensitivity (0.5 * {sensitivity})")
    remove = adjacency == plm.AdjacencyType.REMOVE
    if remove:
        lower_x, upper_x = -truncation, truncation - sensitivity if q == 1.0 else truncation
    else:
        lower_x, upper_x = sensitivity - truncation if q == 1.0 else -truncation, truncation
    log_q, log_1mq = (math.log(q), math.log1p(-q)) if q < 1.0 else (0.0, -math.inf)

    def loss(x: np.ndarray) -> np.ndarray:
        """The privacy loss at the noise values ``x`` (dp-accounting's ``privacy_loss``)."""
        y = x if remove else -x  # ADD: minus the REMOVE loss at -x
        with np.errstate(divide="ignore"):
            unsampled = np.where(
                y > truncation - sensitivity,
                -np.inf,
                np.where(y < -truncation, np.inf, sensitivity * (-0.5 * sensitivity - y) / (sigma**2)),
            )
        if q < 1.0:  # log(q e^L + 1 - q), as common.log_a_times_exp_b_plus_c computes it
            d = unsampled + log_q
            top, low = np.maximum(d, log_1mq), np.minimum(d, log_1mq)
            with np.errstate(invalid="ignore"):
                unsampled = np.where(unsampled == 0, math.log(q + (1 - q)), top + np.log1p(np.exp(low - top)))
        return unsampled if remove else -unsampled

    ends = np.ceil(loss(np.array([upper_x, lower_x])) / acc.vdi)
    if not np.all(np.isfinite(ends)):
        raise ValueError("the privacy loss of a discrete Gaussian is infinite on its support")
    vdi = acc.vdi
    _checked(float(ends[1] - ends[0] + 1), acc)
    cdf = _discrete_gaussian_cdf(sigma, truncation)

    def noise_cdf(x: np.ndarray) -> np.ndarray:
        values: np.ndarray = cdf[np.clip(x, -truncation - 1, truncation) + truncation + 1]
        return values

    def upper_cdf(x: np.ndarray) -> np.ndarray:
        """The CDF of mu_upper, under which the loss is drawn."""
        if not remove:
            return noise_cdf(x)
        shifted = noise_cdf(x + sensitivity)
        return shifted if q == 1.0 else (1 - q) * noise_cdf(x) + q * shifted

    inf_mass = float(upper_cdf(np.array([lower_x - 1]))[0])
    low, probs = 0, np.zeros(0, dtype=np.float64)
    for start in range(lower_x, upper_x + 1, _DISCRETE_CHUNK):
        x = np.arange(start - 1, min(start + _DISCRETE_CHUNK, upper_x + 1))
        masses = np.diff(upper_cdf(x))
        rounded = np.ceil(loss(x[1:]) / vdi)
        if not np.all(np.isfinite(rounded)):
            raise ValueError("the privacy loss of a discrete Gaussian is infinite on its support")
        steps = rounded.astype(np.int64)
        first, last = int(steps.min()), int(steps.max())
        chunk: np.ndarray = np.bincount(steps - first, weights=masses).astype(np.float64, copy=False)
        if probs.size == 0:
            low, probs = first, chunk
            continue
        new_low, new_high = min(low, first), max(low + probs.size - 1, last)
        if new_low < low or new_high >= low + probs.size:
            grown = np.zeros(new_high - new_low + 1)
            grown[low - new_low : low - new_low + probs.size] = probs
            low, probs = new_low, grown
        probs[first - low : first - low + chunk.size] += chunk
    return pld_pmf.DensePLDPmf(vdi, low, probs, inf_mass, True)


def _discrete_gaussian(acc: PLDAccountant, e: DiscreteGaussian, q: float = 1.0) -> dpl.PrivacyLossDistribution | None:
    if e.dimension != 1 or e.sigma > MAX_EXACT_DISCRETE_SIGMA:
        return None  # left to RDP and zCDP, exact there
    remove = _discrete_gaussian_side(acc, e.sigma, e.sensitivity, q, plm.AdjacencyType.REMOVE)
    if q == 1.0:
        return dpl.PrivacyLossDistribution(remove)
    return dpl.PrivacyLossDistribution(
        remove, _discrete_gaussian_side(acc, e.sigma, e.sensitivity, q, plm.AdjacencyType.ADD)
    )


def _discrete_laplace(acc: PLDAccountant, e: DiscreteLaplace, q: float = 1.0) -> dpl.PrivacyLossDistribution | None:
    if e.sensitivity > MAX_EXACT_DISCRETE_SENSITIVITY:
        return _pure_pld(acc, e.epsilon) if q == 1.0 else None  # the pure-DP PLD: valid for any eps-DP event
    _checked(_pure_points(e.epsilon, acc.vdi), acc)
    return dpl.from_discrete_laplace_mechanism(
        parameter=1.0 / e.scale, sensitivity=e.sensitivity, value_discretization_interval=acc.vdi, sampling_prob=q
    )


#: ``build(accountant, inner event, sampling probability)``: the PLD of a Poisson sample.
_Build = Callable[["PLDAccountant", PrivacyEvent, float], "dpl.PrivacyLossDistribution | _GaussianLoss | None"]
_E = TypeVar("_E", bound=PrivacyEvent)


def _sampled(
    event_type: type[_E],
    build: Callable[[PLDAccountant, _E, float], dpl.PrivacyLossDistribution | _GaussianLoss | None],
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


def _poisson(acc: PLDAccountant, e: PoissonSampled) -> dpl.PrivacyLossDistribution | _GaussianLoss | None:
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


def _log_finite_mass(pmf: Any) -> float:
    """log of the probability of a finite privacy loss under ``pmf``."""
    inf_mass = float(pmf._infinity_mass)
    return math.log1p(-inf_mass) if inf_mass < 1 else -math.inf


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


def _log_mgf(lower: int, probs: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """log sum_i probs[i] exp(t (lower + i)) at each order t, in chunks of orders (an
    orders x points matrix of at most ~4e6 entries). Masses are non-negative (leaves are
    checked, _convolve drops the FFT's negative rounding); a negative one would count as 0."""
    with np.errstate(divide="ignore"):
        logp = np.log(np.maximum(probs, 0.0))
    steps = np.arange(probs.size, dtype=np.float64)
    out = np.empty(orders.size)
    chunk = max(1, 4_000_000 // max(probs.size, 1))
    for i in range(0, orders.size, chunk):
        v = orders[i : i + chunk, None] * steps
        v += logp
        top = np.max(v, axis=1, keepdims=True)
        v -= top
        np.exp(v, out=v)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[i : i + chunk] = top[:, 0] + np.log(np.sum(v, axis=1))
    out[~np.isfinite(out)] = -np.inf  # no finite mass
    return orders * lower + out


@dataclasses.dataclass(frozen=True)
class _Grid:
    """One PMF on the grid: ``probs[i]`` is the mass at loss ``(lower + i) * vdi``;
    ``inf`` the mass at infinity."""

    lower: int
    probs: np.ndarray
    inf: float

    @classmethod
    def of(cls, pmf: Any) -> _Grid:
        dense = pmf.to_dense_pmf()
        return cls(int(dense._lower_loss), np.asarray(dense._probs, dtype=np.float64), float(dense._infinity_mass))

    @property
    def upper(self) -> int:
        return self.lower + self.probs.size - 1

    def variance(self) -> float:
        """Variance of the finite part, normalised, in grid units."""
        mass = float(np.sum(self.probs))
        if not mass > 0:
            return 0.0
        steps = np.arange(self.probs.size, dtype=np.float64)
        mean = float(np.dot(steps, self.probs)) / mass
        return float(np.dot((steps - mean) ** 2, self.probs)) / mass


@dataclasses.dataclass(frozen=True)
class _MergedGaussian:
    """The composition of all Gaussian leaves of a batch: ratio ``mu``, discretised on
    ``lower .. upper`` (grid units)."""

    mu: float
    lower: int
    upper: int

    @classmethod
    def of(cls, mu2: float, vdi: float) -> _MergedGaussian:
        mu = math.sqrt(mu2)
        mean = mu2 / 2
        lower = math.floor((mean - _GAUSSIAN_TAIL_SD * mu) / vdi)
        upper = math.ceil((mean + _GAUSSIAN_TAIL_SD * mu) / vdi)
        return cls(mu, lower, upper)

    def build(self, vdi: float) -> _Grid:
        eps = np.arange(self.lower, self.upper + 1) * vdi
        pmf = _connect_dots(vdi, self.lower, *_gaussian_curve(1.0 / self.mu, 1.0, plm.AdjacencyType.REMOVE, eps))
        return _Grid.of(pmf)

    def log_finite(self, vdi: float) -> float:
        """log(1 - the mass at infinity), at most (connect-the-dots puts there the
        divergence at the last point, below the mass of larger losses)."""
        return math.log1p(-float(special.ndtr(-(self.upper * vdi - self.mu**2 / 2) / self.mu)))

    def log_mgf(self, orders: np.ndarray, vdi: float) -> np.ndarray:
        """An upper bound on the log-MGF of the built PMF (grid units). Connect-the-dots
        splits the mass of a loss l in [eps_i, eps_i+1] between those two points (it is
        the only PMF on the grid with the mechanism's divergences there), so a loss moves
        by less than one step; mass below the grid moves up to its first point, mass
        above it goes to its last point or to infinity."""
        mean, sd = self.mu**2 / 2 / vdi, self.mu / vdi
        gaussian = orders * mean + (orders * sd) ** 2 / 2 + np.abs(orders)
        below = float(special.log_ndtr((self.lower * vdi - self.mu**2 / 2) / self.mu)) + orders * self.lower
        above = float(special.log_ndtr(-(self.upper * vdi - self.mu**2 / 2) / self.mu)) + orders * self.upper
        bound: np.ndarray = np.logaddexp(gaussian, np.where(orders > 0, below, above))
        return bound


@dataclasses.dataclass(frozen=True)
class _Window:
    """The grid ``lower .. upper`` of a composition's result; ``cut`` when it leaves out
    a tail (of mass at most TAIL_MASS)."""

    lower: int
    upper: int
    cut: bool

    @property
    def points(self) -> int:
        return self.upper - self.lower + 1


def _window(trivial_lower: int, trivial_upper: int, orders: np.ndarray, log_mgf: np.ndarray) -> _Window:
    """The Chernoff window of a sum S of independent losses (grid units) whose log-MGF
    is at most ``log_mgf`` at ``orders``: P(S >= u) <= exp(K(t) - t u) for t > 0 (and
    P(S <= u) likewise for t < 0), each tail at most TAIL_MASS / 2 (dp-accounting's
    ``compute_self_convolve_bounds``), with one step of margin for rounding in K;
    never wider than the sum's whole support ``trivial_lower .. trivial_upper``."""
    lower, upper = trivial_lower, trivial_upper
    with np.errstate(invalid="ignore", over="ignore"):
        bounds = (log_mgf + math.log(2 / TAIL_MASS)) / orders
    finite = np.isfinite(bounds)
    up, down = bounds[(orders > 0) & finite], bounds[(orders < 0) & finite]
    if up.size:
        upper = min(upper, math.ceil(float(np.min(up))) + 1)
    if down.size:
        lower = max(lower, math.floor(float(np.max(down))) - 1)
    if lower > upper:  # only for a sum with no finite mass (refused by the caller)
        lower, upper = trivial_lower, trivial_upper
    return _Window(lower, upper, lower > trivial_lower or upper < trivial_upper)


@dataclasses.dataclass(frozen=True)
class _Side:
    """What one side (remove or add) of a batch composes, in two levels. Level one: the
    leaves' PMFs with their counts (``leaves``), convolved on ``leaves_window`` (None:
    one PMF, taken as it is). Level two: the state composed so far (``state``, None if
    a point mass), that result and the merged Gaussian, convolved on ``window``. Point
    masses are folded into ``shift`` (grid steps) and ``log_point_mass``."""

    leaves: tuple[tuple[_Grid, int], ...]
    leaves_window: _Window | None
    state: _Grid | None
    gaussian: _MergedGaussian | None
    shift: int
    log_point_mass: float
    log_finite: float
    window: _Window

    @property
    def points(self) -> int:
        """The largest grid this side builds: a window, or the merged Gaussian's."""
        gaussian = self.gaussian.upper - self.gaussian.lower + 1 if self.gaussian else 0
        return max(self.window.points, self.leaves_window.points if self.leaves_window else 0, gaussian)


def _plan_side(
    state: Any, pmfs: Sequence[tuple[Any, int]], gaussian: _MergedGaussian | None, vdi: float, cache: dict[Any, Any]
) -> _Side:
    """One side's plan and windows, from the PMFs' log-MGFs (nothing is convolved)."""
    grids: list[tuple[_Grid, int]] = []
    shift, log_point = 0, 0.0
    log_finite = _log_finite_mass(state) + (gaussian.log_finite(vdi) if gaussian else 0.0)
    state_grid = None
    for pmf, n in [(state, 1), *pmfs]:
        if pmf is not state:
            log_finite += n * _log_finite_mass(pmf)
        key = id(pmf)
        if key not in cache:
            cache[key] = (_Grid.of(pmf), pmf)  # keeps pmf alive: its id stays unique
        grid = cache[key][0]
        if grid.probs.size == 1:  # a point mass shifts the sum, exactly
            shift += n * grid.lower
            log_point += n * math.log(grid.probs[0]) if grid.probs[0] > 0 else -math.inf
        elif pmf is state:
            state_grid = grid
        else:
            grids.append((grid, n))
    var = sum(n * g.variance() for g, n in grids)
    total_var = var + (state_grid.variance() if state_grid else 0.0) + ((gaussian.mu / vdi) ** 2 if gaussian else 0.0)
    scale = math.sqrt(2 * math.log(2 / TAIL_MASS) / total_var) if total_var > 0 else 1.0
    orders = np.concatenate([-scale * _ORDER_FACTORS, scale * _ORDER_FACTORS])
    # level one
    leaves_window = None
    if grids:
        log_mgf = np.zeros(orders.size)
        for grid, n in grids:
            mgf_key = (id(grid), float(scale))
            if mgf_key not in cache:
                cache[mgf_key] = _log_mgf(grid.lower, grid.probs, orders)
            log_mgf = log_mgf + n * cache[mgf_key]
        lower = sum(n * g.lower for g, n in grids)
        upper = sum(n * g.upper for g, n in grids)
        if len(grids) > 1 or grids[0][1] > 1:
            leaves_window = _window(lower, upper, orders, log_mgf)
            if leaves_window.cut:  # the folded tails: mass <= TAIL_MASS inside the window
                edge = np.where(orders > 0, leaves_window.upper, leaves_window.lower)
                log_mgf = np.logaddexp(log_mgf, math.log(TAIL_MASS) + orders * edge)
            lower, upper = leaves_window.lower, leaves_window.upper
    else:
        log_mgf, lower, upper = np.zeros(orders.size), 0, 0
    # level two
    log_mgf = log_mgf + orders * shift
    lower, upper = lower + shift, upper + shift
    if state_grid is not None:
        log_mgf = log_mgf + _log_mgf(state_grid.lower, state_grid.probs, orders)
        lower, upper = lower + state_grid.lower, upper + state_grid.upper
    if gaussian is not None:
        log_mgf = log_mgf + gaussian.log_mgf(orders, vdi)
        lower, upper = lower + gaussian.lower, upper + gaussian.upper
    window = _window(lower, upper, orders, log_mgf) if total_var > 0 else _Window(lower, upper, False)
    return _Side(tuple(grids), leaves_window, state_grid, gaussian, shift, log_point, log_finite, window)


def _fold(probs: np.ndarray, size: int) -> np.ndarray:
    """``probs`` wrapped cyclically onto ``size`` points (index i to i mod size)."""
    if probs.size <= size:
        return probs
    padded = np.zeros(-(-probs.size // size) * size)
    padded[: probs.size] = probs
    folded: np.ndarray = padded.reshape(-1, size).sum(axis=0)
    return folded


def _power(spectrum: np.ndarray, n: int) -> np.ndarray:
    """``spectrum ** n`` by repeated squaring (float power past 2**31)."""
    if n >= 2**31:
        return np.asarray(np.power(spectrum, float(n)))
    result: np.ndarray | None = None
    base = spectrum
    while True:
        if n & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        n >>= 1
        if not n:
            break
        base = base * base
    assert result is not None  # noqa: S101 (n >= 1)
    return result


def _shifted(grid: _Grid, offset: int, window: _Window) -> tuple[np.ndarray, float]:
    """``grid`` moved by ``offset`` steps onto ``window``: mass below it moved up to its
    first point, mass above it returned (for infinity)."""
    start = window.lower - (offset + grid.lower)  # the window's first point in grid.probs
    out = np.zeros(window.points)
    lo, hi = max(start, 0), min(start + window.points, grid.probs.size)
    if lo < hi:
        out[lo - start : hi - start] = grid.probs[lo:hi]
    out[0] += float(np.sum(grid.probs[: max(lo, 0)]))
    return out, float(np.sum(grid.probs[max(hi, 0) :]))


def _convolve(factors: Sequence[tuple[_Grid, int]], offset: int, window: _Window) -> tuple[np.ndarray, float]:
    """The cyclic convolution of ``factors`` (each to its count) moved by ``offset``, on
    ``window``, and the mass it sends to infinity. Each distinct PMF is transformed once
    at the window's size. The window's points hold the sum's mass there plus the tails
    folded in (mass at most TAIL_MASS, only if the window cuts a tail: then TAIL_MASS
    goes to infinity); rounding error is covered by FFT_ERROR a release, and its negative
    part is dropped (delta stays non-increasing in epsilon, and only grows)."""
    if len(factors) == 1 and factors[0][1] == 1:
        return _shifted(factors[0][0], offset, window)
    size = fft.next_fast_len(window.points, real=True)
    product = np.ones(size // 2 + 1, dtype=np.complex128)
    base = offset
    for grid, n in factors:
        np.multiply(product, _power(fft.rfft(_fold(grid.probs, size), size), n), out=product)
        base += n * grid.lower
    cyclic = fft.irfft(product, size)
    probs = np.ascontiguousarray(np.roll(cyclic, -((window.lower - base) % size))[: window.points])
    # FFT rounding leaves signed noise (FFT_ERROR covers it); a negative mass would make
    # delta(eps) rise with eps. Dropping it only adds to every delta(eps): still an upper bound
    np.maximum(probs, 0.0, out=probs)
    return probs, TAIL_MASS if window.cut else 0.0


def _compose_side(side: _Side, vdi: float, gaussian_grid: _Grid | None) -> pld_pmf.PLDPmf:
    """The PMF of one side (see module docstring and :class:`_Side`)."""
    inf_mass = -math.expm1(side.log_finite)
    factors: list[tuple[_Grid, int]] = []
    if side.leaves_window is not None:
        probs, extra = _convolve(side.leaves, 0, side.leaves_window)
        inf_mass += extra
        factors.append((_Grid(side.leaves_window.lower, probs, 0.0), 1))
    else:
        factors.extend(side.leaves)
    if side.state is not None:
        factors.append((side.state, 1))
    if gaussian_grid is not None:
        factors.append((gaussian_grid, 1))
    if not factors:  # point masses only: exact
        return pld_pmf.SparsePLDPmf({side.shift: math.exp(side.log_point_mass)}, vdi, inf_mass, True)
    probs, extra = _convolve(factors, side.shift, side.window)
    return pld_pmf.DensePLDPmf(vdi, side.window.lower, probs * math.exp(side.log_point_mass), inf_mass + extra, True)


@dataclasses.dataclass(frozen=True)
class _Batch:
    """Everything one ``compose`` adds, planned: the sides (one if all is symmetric), the
    releases whose PMFs go through an FFT (for FFT_ERROR), and whether it changes the
    state at all."""

    remove: _Side
    add: _Side | None
    fft_releases: int
    noop: bool

    @property
    def points(self) -> int:
        """Grid points of the larger side (each side is composed on its own)."""
        return max(self.remove.points, self.add.points if self.add is not None else 0)


def _is_identity(pld: dpl.PrivacyLossDistribution) -> bool:
    """One point with no loss (P = Q): composing it changes nothing, exactly."""
    return all(
        p.size == 1 and float(p._infinity_mass) == 0.0 and float(p.get_delta_for_epsilon(0.0)) == 0.0
        for p in (pld._pmf_remove, pld._pmf_add)
    )


def _plan_batch(state: dpl.PrivacyLossDistribution, plan: Sequence[tuple[Any, int]], vdi: float) -> _Batch:
    mu2, gaussian_releases, fft_releases = 0.0, 0, 0
    plds: list[tuple[dpl.PrivacyLossDistribution, int]] = []
    for cost, n in plan:
        if isinstance(cost, _GaussianLoss):
            mu2 += n * cost.mu**2
            gaussian_releases += n
        elif not _is_identity(cost):
            plds.append((cost, n))
            if cost._pmf_remove.size > 1 or cost._pmf_add.size > 1:  # a point mass composes exactly
                fft_releases += n
    if not math.isfinite(mu2):
        raise OverflowError("the merged Gaussian's mu^2 overflows")
    gaussian = _MergedGaussian.of(mu2, vdi) if mu2 > 0 else None
    noop = gaussian is None and not plds
    cache: dict[Any, Any] = {}
    remove = _plan_side(state._pmf_remove, [(p._pmf_remove, n) for p, n in plds], gaussian, vdi, cache)
    symmetric = state._symmetric and all(p._symmetric for p, _ in plds)
    add = None if symmetric else _plan_side(state._pmf_add, [(p._pmf_add, n) for p, n in plds], gaussian, vdi, cache)
    return _Batch(remove, add, fft_releases + gaussian_releases, noop)


class PLDAccountant(Accountant):
    """Composes privacy loss distributions by FFT convolution.

    ``value_discretization_interval`` trades speed for tightness: smaller is tighter,
    never less safe. Identical leaves are grouped, Gaussian leaves merged into one, and a
    whole ``compose`` (with the state so far) is convolved in one FFT pass on a grid
    bounded beforehand (see the module docstring). Every answer is an upper bound:
    discretisation and truncation only move mass to larger losses or to infinity, and
    :data:`FFT_ERROR` per release covers the FFT's rounding.
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
        masses for an infinite noise multiplier, which it then fails to compose), or a
        Gaussian of finite positive ratio. A mass at infinity that rounded below 0 (pure
        eps-DP PLDs: -2e-18) is set to 0: else a truncated tail (1e-15) is booked against
        it and a finite epsilon answered at any delta (28.7 for 1000 x PureDP(0.1) at
        delta 1e-300, where the exact value is 100)."""
        if isinstance(cost, _GaussianLoss):
            return 0 < cost.mu < math.inf
        if not isinstance(cost, dpl.PrivacyLossDistribution):
            return False
        for pmf in (cost._pmf_remove, cost._pmf_add):
            if -1e-12 < pmf._infinity_mass < 0:
                pmf._infinity_mass = 0.0
        return all(_pmf_ok(p) for p in (cost._pmf_remove, cost._pmf_add))

    def _plan(self, event: PrivacyEvent, count: int) -> tuple[list[tuple[Any, int]], PrivacyEvent | None, str]:
        """The leaves' costs planned as one :class:`_Batch` (count 1): its grid is
        bounded here, before any composition is computed, and refused past
        MAX_PLD_POINTS."""
        plan, bad, why = super()._plan(event, count)
        if bad is not None:
            return plan, bad, why
        try:
            batch = _plan_batch(self._pld, plan, self.vdi)
        except (ArithmeticError, ValueError, MemoryError) as exc:  # extreme counts overflow the bounds
            return [], event, f"cannot bound its privacy loss grid ({type(exc).__name__}: {exc})"
        log_finite = min(batch.remove.log_finite, batch.add.log_finite if batch.add else 0.0)
        if not log_finite >= math.log(MIN_FINITE_MASS):
            return [], event, (f"its delta would exceed 1 - {MIN_FINITE_MASS:g}: nothing left to account")
        if not batch.points <= MAX_PLD_POINTS:
            return (
                [],
                event,
                (
                    f"the composed privacy loss grid would need {batch.points:.3g} points a side "
                    f"(limit {MAX_PLD_POINTS}); use the rdp or zcdp accountant"
                ),
            )
        return [(batch, 1)], None, ""

    def _add(self, cost: _Batch, count: int) -> None:
        self._released = True
        if cost.noop:
            return
        self._fft_slack += cost.fft_releases * FFT_ERROR
        gaussian = cost.remove.gaussian
        gaussian_grid = gaussian.build(self.vdi) if gaussian is not None else None
        remove = _compose_side(cost.remove, self.vdi, gaussian_grid)
        _check_normalised(remove)
        if cost.add is None:
            self._pld = dpl.PrivacyLossDistribution(remove)
            return
        add = _compose_side(cost.add, self.vdi, gaussian_grid)
        _check_normalised(add)
        self._pld = dpl.PrivacyLossDistribution(remove, add)

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
