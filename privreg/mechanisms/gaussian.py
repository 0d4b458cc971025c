"""The Gaussian mechanism, sampled securely and exactly on an integer grid."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.accountant import make_accountant
from privreg.accountant.calibration import calibrate_gaussian_sigma
from privreg.accountant.pld import MAX_EXACT_DISCRETE_SIGMA
from privreg.core import validation as v
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.events import ApproxDP, DiscreteGaussian, PrivacyEvent
from privreg.core.laws import DiscreteLaw
from privreg.core.params import OPEN_UNIT, POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.core.sensitivity import (
    GlobalSensitivity,
    Norm,
)
from privreg.mechanisms.grid_mechanism import GridMechanism
from privreg.mechanisms.laws import discrete_gaussian_law
from privreg.mechanisms.noise_params import PATHS, as_global
from privreg.noise import Grid
from privreg.noise.gaussian import discrete_gaussian, discrete_gaussian_many, discrete_gaussian_sampler

__all__ = ["GaussianMechanism", "as_global_l2", "classic_gaussian_ratio", "CALIBRATIONS"]


def as_global_l2(x: Any) -> GlobalSensitivity:
    """A number (global L2 sensitivity) or a global L2 Sensitivity, validated."""
    return as_global(x, norm=Norm.L2, who="the Gaussian mechanism")


#: How the continuous sigma is chosen before discretisation.
CALIBRATIONS = ("analytic", "classic")

#: sigma_int is kept on a dyadic grid of this many fractional bits, so it is exactly a
#: float (the event charges the very sigma that is applied) and sigma_int^2 is a small Fraction.
_SIGMA_BITS = 20
#: Relative precision of the verified sigma_int search.
_SEARCH_TOL = 1e-5
_MAX_SEARCH_STEPS = 200


def _calibration(x: Any) -> str:
    if x not in CALIBRATIONS:
        raise PrivregValueError(
            f"calibration must be one of {CALIBRATIONS}; got {x!r}. Use calibration='analytic' "
            f"(Balle-Wang 2018, tightest) unless you need the textbook formula."
        )
    return x


def classic_gaussian_ratio(epsilon: float, delta: float) -> float:
    """sigma / sensitivity of the classic Gaussian mechanism, ``sqrt(2 ln(1.25/delta)) /
    epsilon``, which is (epsilon, delta)-DP for ``0 < epsilon < 1`` only (Dwork-Roth 2014,
    "The Algorithmic Foundations of Differential Privacy", Theorem A.1)."""
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = v.check_delta("delta", delta, allow_zero=False)
    if epsilon >= 1:
        raise PrivregValueError(
            f"calibration='classic' needs epsilon < 1 (Dwork-Roth 2014, Theorem A.1 is proved only "
            f"there); got epsilon={epsilon!r}. Use calibration='analytic', valid for every epsilon."
        )
    return math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def _verifier(sigma_int: Fraction, delta_int: int, dimension: int) -> str:
    """The accountant the discrete noise is verified under (see GaussianMechanism)."""
    return "pld" if dimension == 1 and sigma_int <= MAX_EXACT_DISCRETE_SIGMA else "rdp"


def _epsilon_of(sigma_int: Fraction, delta_int: int, dimension: int, delta: float) -> float:
    """epsilon(delta) of the DiscreteGaussian actually applied, under its verifier."""
    acc = make_accountant(_verifier(sigma_int, delta_int, dimension))
    acc.compose(DiscreteGaussian(sigma=float(sigma_int), sensitivity=delta_int, dimension=dimension))
    return acc.epsilon(delta)


def _dyadic_up(x: Fraction) -> Fraction:
    """The smallest multiple of 2**-_SIGMA_BITS that is >= x, itself rounded up to a float
    when it has more than 53 significant bits (sigma_int > 2**33): always exactly a float."""
    d = Fraction(-((-x.numerator << _SIGMA_BITS) // x.denominator), 1 << _SIGMA_BITS)
    f = float(d)
    return d if Fraction(f) == d else Fraction(f if Fraction(f) > d else math.nextafter(f, math.inf))


@functools.lru_cache(maxsize=256)
def _calibrate(epsilon: float, delta: float, dimension: int, calibration: str) -> tuple[int, int, Fraction]:
    """(grid multiple m, integer L2 sensitivity, verified sigma_int) -- see GaussianMechanism.
    Independent of the sensitivity's value: everything is in units of sensitivity / m."""
    if calibration == "classic":
        ratio = classic_gaussian_ratio(epsilon, delta)
    else:
        ratio = calibrate_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0)
    # m >= 1024 max(ceil(sqrt d), sensitivity / sigma): the rounding slack ceil(sqrt d) is
    # <= 1/1024 of the sensitivity, and the grid step <= sigma / 1024.
    want = 1024 * max(Fraction(math.isqrt(dimension - 1) + 1), 1 / Fraction(ratio))
    multiple = 2
    while multiple < want:
        multiple *= 2
    delta_int = multiple if dimension == 1 else multiple + math.isqrt(dimension - 1) + 1
    sigma_int = _dyadic_up(Fraction(ratio) * delta_int)  # the continuous calibration, in grid units
    for _ in range(_MAX_SEARCH_STEPS):  # grow until verified
        achieved = _epsilon_of(sigma_int, delta_int, dimension, delta)
        if achieved <= epsilon:
            return multiple, delta_int, sigma_int
        # epsilon(delta) falls at least like 1/sigma near the target, so scaling sigma by
        # achieved/epsilon (plus a margin) usually verifies at the next step
        # achieved / epsilon overflows for a subnormal epsilon: grow by the cap (2) then
        ratio_now = achieved / epsilon
        factor = Fraction(ratio_now) if math.isfinite(ratio_now) else Fraction(2)
        sigma_int = _dyadic_up(sigma_int * min(Fraction(2), factor) * (1 + Fraction(_SEARCH_TOL)))
    raise PrivregValueError(  # pragma: no cover - epsilon(delta) -> 0 as sigma -> inf
        f"could not verify a discrete Gaussian for epsilon={epsilon}, delta={delta}"
    )


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class GaussianMechanism(GridMechanism):
    """Adds Gaussian noise to a query of ``dimension`` coordinates (1: a scalar) whose
    global L2 sensitivity is ``sensitivity``; ``(epsilon, delta)``-DP.

    **Calibration.** ``"analytic"`` (default): the smallest continuous sigma for which the
    Gaussian mechanism is (epsilon, delta)-DP, exactly (Balle-Wang 2018, "Improving the
    Gaussian Mechanism for Differential Privacy: Analytical Calibration and Optimal
    Denoising", ICML, Theorem 8; :func:`privreg.accountant.calibration.calibrate_gaussian_sigma`).
    ``"classic"``: ``sigma = sensitivity sqrt(2 ln(1.25/delta)) / epsilon`` (Dwork-Roth 2014,
    Theorem A.1), proved only for ``epsilon < 1``; larger epsilons are refused.

    **Discretisation.** The answer is snapped to a grid of step ``g = sensitivity / m``
    (``m`` a power of two, ``m >= 1024 max(ceil(sqrt(d)), sensitivity / sigma)``), giving
    integers ``k_i = round(x_i / g)``. Integer L2 sensitivity: ``m`` for a scalar (rounding
    is monotone and commutes with shifts by the even integer ``m``, see
    :mod:`privreg.noise.grid`, so ``|k - k'| <= m``), and ``m + ceil(sqrt(d))`` for ``d``
    coordinates. Proof of the latter: write ``k_i = x_i / g + e_i`` with ``|e_i| <= 1/2``.
    For neighbours, ``k - k' = (x - x') / g + (e - e')``; ``||(x - x') / g||_2 <= m`` and
    every ``|e_i - e'_i| <= 1``, so ``||e - e'||_2 <= sqrt(d)``; by the triangle inequality
    ``||k - k'||_2 <= m + sqrt(d) <= m + ceil(sqrt(d))``.

    **Noise and verification.** The continuous sigma becomes ``sigma * Delta_int /
    sensitivity`` grid units, rounded up to a multiple of 2**-20 (exactly a float). Then
    the discrete noise actually added is *verified*: the event
    ``DiscreteGaussian(sigma=sigma_int, sensitivity=Delta_int)`` must give
    ``epsilon(delta) <= epsilon`` under the PLD accountant (dp-accounting's discrete-Gaussian
    PLD with pessimistic discretisation) for a scalar with ``sigma_int <= 2e5``, and under
    the RDP accountant otherwise (the discrete Gaussian is exactly
    ``Delta_int^2 / (2 sigma_int^2)``-zCDP also for vectors with L2 shift ``Delta_int``:
    Canonne-Kamath-Steinke 2020, "The Discrete Gaussian for Differential Privacy", NeurIPS,
    Theorem 14; the PLD accountant models a one-dimensional shift, so it is used for
    scalars only). If the check fails, sigma_int is multiplied by
    ``min(2, achieved epsilon / epsilon) * (1 + 1e-5)`` and checked again, until it passes;
    only a verified value is used. So the mechanism is (epsilon, delta)-DP by that
    verification. For scalars sigma_int is within about 1e-3 of the continuous calibration
    (the PLD's pessimistic discretisation costs ~5e-5 in epsilon); the zCDP-based RDP route
    (vectors, or sigma_int > 2e5) is looser, typically 5-15%.

    The charged event (:meth:`privacy_event`) is that very ``DiscreteGaussian``, with the
    sigma actually applied (exactly, not rounded). Noise is drawn from the OS CSPRNG by
    the exact CKS 2020 Algorithm 3 (:mod:`privreg.noise.gaussian`), independently per
    coordinate. The output ``(k + z) * g`` is a deterministic function of integers, so its
    floating-point bits carry no further information about the input (Mironov 2012).

    Paths: ``"fast"`` (default) vectorised, several million draws per second per core (benchmarks/noise.py);
    ``"exact"`` one scalar draw at a time. Both sample the discrete Gaussian exactly.

    **Input range.** Every finite float64, scalar or ``dimension``-vector; NaN, inf and
    integers beyond 1.8e308 are refused before the charge. Nothing is clamped: the
    snapped value and the noise are added in exact integer arithmetic and the output is
    their grid point rounded once to the nearest float (``+-inf`` only beyond the float
    range), so no input that passes validation can make the release fail after the charge.

    **Timing.** Values beyond about ``2**53`` grid steps take an exact Python-integer path:
    measured (``benchmarks/data_timing.py``) 1.1-1.2x for one release of 1000
    coordinates, up to 3.4x for ``release_many`` of 1e5 draws of a scalar near 1e300.
    """

    name: ClassVar[str] = "gaussian"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    delta: float = param_field(doc="privacy parameter delta, well below 1/n", **OPEN_UNIT)
    sensitivity: GlobalSensitivity = param_field(
        type=float, doc="global L2 sensitivity of the query", converter=as_global_l2, **POSITIVE
    )
    dimension: int = param_field(default=1, minimum=1, doc="number of coordinates of the query (1: a scalar)")
    calibration: str = param_field(
        default="analytic",
        choices=CALIBRATIONS,
        doc="analytic (Balle-Wang 2018), or classic sqrt(2 ln(1.25/delta))/eps for eps < 1",
    )
    path: str = param_field(
        default="fast", choices=PATHS, doc="vectorised exact sampler, or one exact rational draw at a time"
    )

    def __attrs_post_init__(self) -> None:
        if self.calibration == "classic":
            classic_gaussian_ratio(self.epsilon, self.delta)  # refuses epsilon >= 1 at once
        self._calibrated()  # fail (and cache) at construction, not at release

    def _calibrated(self) -> tuple[int, int, Fraction]:
        return _calibrate(self.epsilon, self.delta, self.dimension, self.calibration)

    @property
    def continuous_sigma(self) -> float:
        """The continuous sigma of the chosen calibration (in the query's units)."""
        if self.calibration == "classic":
            return classic_gaussian_ratio(self.epsilon, self.delta) * self.sensitivity.value
        return calibrate_gaussian_sigma(epsilon=self.epsilon, delta=self.delta, sensitivity=self.sensitivity.value)

    _immutable: ClassVar[bool] = True

    # Immutable: the grid, sigma, event and guarantee are computed once, on first use.
    @functools.cached_property
    def grid(self) -> Grid:
        multiple = self._calibrated()[0]
        return Grid(step=Fraction(self.sensitivity.value) / multiple, multiple=multiple)

    @property
    def integer_sensitivity(self) -> int:
        """L2 sensitivity of the snapped integer vector (see the class docstring)."""
        return self._calibrated()[1]

    @property
    def sigma_int(self) -> Fraction:
        """The verified sigma of the integer noise actually drawn (grid units)."""
        return self._calibrated()[2]

    @functools.cached_property
    def noise_sigma2(self) -> Fraction:
        """sigma_int^2, the exact parameter passed to the discrete Gaussian sampler."""
        return self.sigma_int**2

    @property
    def verification_accountant(self) -> str:
        """The accountant the target was verified under ("pld" or "rdp")."""
        return _verifier(self.sigma_int, self.integer_sensitivity, self.dimension)

    def stated_guarantee(self) -> PrivacyEvent:
        """(epsilon, delta) as asked for: the discrete noise was verified to meet it under
        :attr:`verification_accountant` (a budget charges one release no more than this)."""
        return self._stated

    @functools.cached_property
    def _stated(self) -> PrivacyEvent:
        return ApproxDP(epsilon=self.epsilon, delta=self.delta)

    def privacy_event(self) -> PrivacyEvent:
        return self._event

    @functools.cached_property
    def _event(self) -> PrivacyEvent:
        sigma = float(self.sigma_int)
        if Fraction(sigma) != self.sigma_int:  # dyadic with few bits: exact, never above
            # the charge must be for the very sigma the sampler draws with; a rounded one
            # could be larger than sigma_int and under-charge the release
            raise PrivregError(
                f"internal error: the sampled sigma {self.sigma_int} is not exactly a float; "
                f"refusing to charge the rounded {sigma!r}"
            )
        return DiscreteGaussian(sigma=sigma, sensitivity=self.integer_sensitivity, dimension=self.dimension)

    def coordinate_law(self, center: int) -> DiscreteLaw | None:
        """Discrete Gaussian noise of the calibrated ``sigma_int**2`` around the snapped ``center``."""
        return discrete_gaussian_law(self.noise_sigma2, center)

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        sigma2 = self.noise_sigma2
        if self.path == "fast":
            return discrete_gaussian_many(sigma2, count, rng)
        return np.array([discrete_gaussian(sigma2, rng) for _ in range(count)], dtype=np.int64)

    def _scalar_noise(self) -> Callable[[RandomSource], int]:
        # the value _noise(1, rng) draws, from the same stream, by a sampler bound to sigma_int^2
        return discrete_gaussian_sampler(self.noise_sigma2, exact=self.path != "fast")
