"""Gaussian noise scaled to smooth sensitivity, on a fixed public grid.

The mechanism (Nissim-Raskhodnikova-Smith 2007; Gaussian constants of Okada et al. 2015,
paper 003, Theorem 2 with output dimension p = 1) releases

    M(x) = g * (F(x) + Z),   F(x) = round(f(x) / g),   Z ~ N_Z(0, sigma(x)^2),
    sigma(x) = ceil_24bit((S(x) + g) / (alpha g)),

with ``g`` a public grid step, ``S`` a beta-smooth upper bound on the local sensitivity of
``f`` and ``N_Z`` the discrete Gaussian sampled exactly (CKS 2020). The grid never depends
on the data: a data-dependent spacing would reveal ``S(x)`` through the set of possible
outputs (Mironov 2012), and the output is a deterministic function of an integer.

Why this is (epsilon, delta)-DP -- our own lemma, checked numerically for every
configuration by :func:`privacy_loss_bound`, rather than a transcription of the
continuous proof:

* ``S~ = S + g`` is beta-smooth and bounds the local sensitivity of ``F`` in grid units:
  ``|F(x) - F(x')| <= |f(x) - f(x')| / g + 1 <= S~(x) / g``. Rounding sigma up to 24
  significant bits keeps ``sigma(x') / sigma(x) <= e^beta (1 + 2^-23) = e^beta'``, and
  ``|mu| = |F(x') - F(x)| <= alpha sigma(x)``.
* Privacy loss at ``w = z - F(x)``, ``u = w / sigma(x)``:
  ``L = ln(Zn(sigma') / Zn(sigma)) + (w - mu)^2 / (2 sigma'^2) - w^2 / (2 sigma^2)``, where
  ``Zn(s) = sum_y exp(-y^2 / 2s^2) = sqrt(2 pi) s (1 + tau(s))`` with
  ``0 <= tau(s) <= 2 sum_k exp(-2 pi^2 s^2 k^2)`` (Poisson summation). Hence
  ``L <= beta' + ln(1 + tau(1/alpha)) + ((e^{2 beta'} - 1) u^2 + 2 e^{2 beta'} alpha |u|
  + e^{2 beta'} alpha^2) / 2``.
* The discrete Gaussian is sigma^2-subgaussian (CKS 2020, Section 2.1), so
  ``P(|u| > a) <= 2 exp(-a^2 / 2) = delta`` for ``a = sqrt(2 ln(2 / delta))``. With the bound
  above at ``|u| = a`` at most epsilon, ``P(L > epsilon) <= delta`` in both directions, which
  gives (epsilon, delta)-DP. For Theorem 2's alpha and beta the bound is about 0.7 epsilon
  at epsilon = 1: the paper's constants are certified for every epsilon <= 2 with
  delta <= 0.1 and for epsilon <= 8 with delta <= 1e-6 (tests/test_smooth_gaussian.py). A
  configuration the lemma cannot certify (large epsilon with large delta) is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import ApproxDP, PrivacyEvent
from privreg.core.laws import DiscreteGaussianLaw, OutputLaw
from privreg.core.mechanism import Mechanism
from privreg.core.params import OPEN_UNIT, POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.core.sensitivity import Sensitivity, SensitivityKind
from privreg.mechanisms.grid_mechanism import grid_to_float
from privreg.noise.fast import MAX_PART
from privreg.noise.gaussian import discrete_gaussian, discrete_gaussian_many

__all__ = [
    "SmoothGaussianMechanism",
    "smooth_gaussian_parameters",
    "privacy_loss_bound",
    "certifies",
    "grid_sigma",
    "SIGMA_BITS",
]

#: Significant bits kept when rounding sigma up (ratio error at most 2^-(SIGMA_BITS - 1)).
SIGMA_BITS = 24
_QUANTISATION = math.log1p(2.0 ** -(SIGMA_BITS - 1))


def _check_delta(delta: Any) -> float:
    delta = v.check_delta("delta", delta)
    if delta == 0:
        raise PrivregValueError(
            "delta must be > 0 for the smooth-sensitivity Gaussian (its guarantee is "
            "approximate DP); pass e.g. delta=1e-6"
        )
    return delta


def smooth_gaussian_parameters(*, epsilon: float, delta: float) -> tuple[float, float]:
    """``(alpha, beta)`` of Okada et al. 2015 (paper 003), Theorem 2 with p = 1:
    ``alpha = eps / (5 sqrt(2 ln(2/delta)))``, ``beta = eps / (4 (1 + ln(2/delta)))``.
    Noise is ``S(x) / alpha`` times a standard Gaussian; ``S`` must be beta-smooth."""
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = _check_delta(delta)
    log_term = math.log(2.0 / delta)
    return epsilon / (5.0 * math.sqrt(2.0 * log_term)), epsilon / (4.0 * (1.0 + log_term))


def _tau(sigma: float) -> float:
    """Upper bound on ``Zn(sigma) / (sqrt(2 pi) sigma) - 1`` (Poisson summation)."""
    r = math.exp(-2.0 * math.pi**2 * sigma * sigma)  # inf for a huge sigma (not OverflowError): r = 0
    return 2.0 * r / (1.0 - r) if r < 1.0 else math.inf


#: the largest x with math.exp(x) finite (about 709.78)
_EXP_MAX = math.log(2.0**1023 * (2.0 - 2.0**-52))


def privacy_loss_bound(*, alpha: float, beta: float, delta: float) -> float:
    """The largest privacy loss of the mechanism outside an event of probability
    ``delta`` (module docstring): the mechanism is (epsilon, delta)-DP whenever this is
    at most epsilon."""
    b = beta + _QUANTISATION
    if 2.0 * b > _EXP_MAX:  # e^(2b) overflows a float: the bound is infinite, never certified
        return math.inf
    a = math.sqrt(2.0 * math.log(2.0 / delta))
    grow = math.exp(2.0 * b)
    quadratic = (math.expm1(2.0 * b) * a * a + 2.0 * grow * alpha * a + grow * alpha * alpha) / 2.0
    return b + math.log1p(_tau(1.0 / alpha)) + quadratic


def certifies(*, epsilon: float, delta: float) -> bool:
    """Whether the lemma of the module docstring certifies ``(epsilon, delta)``-DP for
    Theorem 2's alpha and beta at these parameters (what the mechanism requires)."""
    alpha, beta = smooth_gaussian_parameters(epsilon=epsilon, delta=delta)
    return privacy_loss_bound(alpha=alpha, beta=beta, delta=delta) * (1 + 1e-9) <= epsilon


def _ceil_bits(x: Fraction, bits: int) -> Fraction:
    """The least ``m 2^e >= x`` with ``m`` an integer below ``2^bits``, for ``x > 0``
    (exact): a round-up to ``bits`` significant bits."""
    top = x.numerator.bit_length() - x.denominator.bit_length()  # floor(log2 x) or one more
    if Fraction(2) ** top > x:
        top -= 1
    scale = Fraction(2) ** (top - bits + 1)
    return math.ceil(x / scale) * scale


def grid_sigma(smooth: Any, *, alpha: float, step: float) -> Fraction:
    """``sigma = ceil_24bit((S + g) / (alpha g))``, the noise scale in grid units for the
    smooth bound ``S = smooth`` (exact). Non-decreasing in ``S``: a public upper bound on
    ``S`` gives a public upper bound on the scale."""
    g = Fraction(step)
    return _ceil_bits((Fraction(smooth) + g) / (Fraction(alpha) * g), SIGMA_BITS)


def _callable(f: Any) -> Callable[[Any], Any]:
    if not callable(f):
        raise PrivregTypeError(f"query must be callable (dataset -> float); got {f!r}")
    return f


def _smooth(s: Any) -> Sensitivity:
    if not isinstance(s, Sensitivity) or s.kind is not SensitivityKind.SMOOTH:
        raise PrivregTypeError(
            f"sensitivity must be a smooth sensitivity (privreg SmoothSensitivity or a "
            f"Sensitivity of kind 'smooth' with a beta); got {s!r}"
        )
    if not hasattr(s, "beta"):
        raise PrivregTypeError(f"sensitivity {s!r} has no beta; a smooth bound declares its beta")
    return s


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class SmoothGaussianMechanism(Mechanism):
    """``(epsilon, delta)``-DP release of a real statistic ``query(dataset)`` with Gaussian
    noise of scale ``S(dataset) / alpha`` where ``S = sensitivity`` is beta-smooth
    (Nissim-Raskhodnikova-Smith 2007; alpha, beta of Okada et al. 2015, Theorem 2).

    ``release(dataset)`` takes the dataset itself: the query and the smooth bound are
    evaluated before anything is charged (errors there charge nothing). ``step`` is the
    public output grid in the query's units; it must not be chosen from the data. The
    neighbour relation is whatever ``sensitivity`` bounds local sensitivity over.
    Guarantee: (epsilon, delta)-DP, proved in the module docstring for the discrete
    Gaussian on the grid and certified numerically at construction (an uncertifiable
    configuration raises). Charges ``ApproxDP(epsilon, delta)`` for ``neighbouring``:
    ``replace_one`` by default, because a smooth bound (Nissim-Raskhodnikova-Smith 2007,
    Definition 2.1) bounds local sensitivity over datasets of the same size ``n`` at
    Hamming distance ``k``; an add/remove budget refuses such an event rather than
    reading it as an add/remove guarantee.

    Errors raised by validation name the rule, never the statistic or its smooth bound.
    After the charge only exact integer arithmetic runs, and the output is rounded once
    to a float (``+-inf`` beyond the float range), so a release cannot fail. Timing
    depends on the data: the query, the smooth bound and the noise sampler (its time
    grows with sigma) all run on it (``smooth-gaussian``: up to 50-60x between inputs).
    """

    name = "smooth-gaussian"

    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    delta: float = param_field(doc="privacy parameter delta", **OPEN_UNIT)
    query: Callable[[Any], Any] = attrs.field(converter=_callable)
    sensitivity: Sensitivity = attrs.field(converter=_smooth)
    step: float = param_field(doc="public output grid", **POSITIVE)
    neighbouring: str = param_field(
        default="replace_one",
        choices=("add_remove", "replace_one"),
        doc="the relation the smooth bound is proven over (NRS 2007 smooth bounds: replace one of n records)",
    )

    def __attrs_post_init__(self) -> None:
        alpha, beta = smooth_gaussian_parameters(epsilon=self.epsilon, delta=self.delta)
        s_beta = v.check_epsilon("sensitivity.beta", self.sensitivity.beta)  # type: ignore[attr-defined]
        if s_beta > beta:
            raise PrivregValueError(
                f"sensitivity.beta = {s_beta:g} exceeds the beta = {beta:g} that epsilon = "
                f"{self.epsilon:g}, delta = {self.delta:g} allow (paper 003, Theorem 2); build the "
                f"smooth bound with beta = smooth_gaussian_parameters(...)[1]"
            )
        if not certifies(epsilon=self.epsilon, delta=self.delta):
            loss = privacy_loss_bound(alpha=alpha, beta=beta, delta=self.delta)
            # the lemma fails at both ends: tiny epsilons (the bound's constant terms) and large ones
            fix = (
                "use a larger epsilon"
                if any(certifies(epsilon=self.epsilon * 2.0**k, delta=self.delta) for k in range(1, 40))
                else "use a smaller epsilon or delta"
            )
            raise PrivregValueError(
                f"epsilon = {self.epsilon:g}, delta = {self.delta:g}: the privacy loss bound "
                f"{loss:.4g} exceeds epsilon, so this configuration cannot be certified; {fix}"
            )

    @property
    def alpha(self) -> float:
        return smooth_gaussian_parameters(epsilon=self.epsilon, delta=self.delta)[0]

    def parameters(self) -> dict[str, Any]:
        alpha, beta = smooth_gaussian_parameters(epsilon=self.epsilon, delta=self.delta)
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "step": self.step,
            "alpha": alpha,
            "beta": beta,
            "sensitivity_beta": float(self.sensitivity.beta),  # type: ignore[attr-defined]
            "query": getattr(self.query, "__name__", type(self.query).__name__),
        }

    def privacy_event(self) -> PrivacyEvent:
        relation = None if self.neighbouring == "add_remove" else self.neighbouring  # None: the default
        return ApproxDP(epsilon=self.epsilon, delta=self.delta, neighbouring=relation)

    def noise_parameters(self, dataset: Any) -> tuple[int, Fraction]:
        """``(F, sigma^2)`` in grid units at ``dataset`` -- data-dependent, never release it.
        Errors name the rule, never the statistic or its bound (both are data)."""
        answer = self.query(dataset)
        if isinstance(answer, bool) or not isinstance(answer, (int, float, np.integer, np.floating)):
            raise PrivregTypeError(f"query(dataset) must return a real number; got a {type(answer).__name__}")
        try:
            answer = float(answer)
        except OverflowError:
            answer = math.inf
        if not math.isfinite(answer):
            raise PrivregValueError(
                "query(dataset) must return a finite number within the float64 range; clean the data or bound the query"
            )
        smooth = self.sensitivity.bound(dataset)
        if (
            isinstance(smooth, bool)
            or not isinstance(smooth, (int, float, np.integer, np.floating, Fraction))
            or not math.isfinite(float(smooth))
            or smooth < 0
        ):
            raise PrivregValueError(
                "the smooth sensitivity bound at the dataset must be a finite number >= 0; "
                "declare finite bounds on the data (its range)"
            )
        sigma = grid_sigma(smooth, alpha=self.alpha, step=self.step)
        return round(Fraction(answer) / Fraction(self.step)), sigma * sigma

    def validate_input(self, value: Any) -> tuple[int, Fraction]:
        if value is None:
            raise PrivregValueError("release needs the dataset: pass release(dataset, charger=...)")
        return self.noise_parameters(value)

    def output_law(self, value: tuple[int, Fraction]) -> OutputLaw | None:
        """The discrete Gaussian of parameter ``sigma(x)^2`` around ``F(x)`` in grid units,
        both computed from the input as the release computes them (its centre and its
        scale differ between neighbours; the exact check compares the two laws). Outputs
        are encoded back to ``round(output / step) - F(x)``, exact while the total is below
        2**53 grid steps (beyond, the single rounding to a float merges outcomes: a
        post-processing, never a larger loss)."""
        centre, sigma2 = value
        step = Fraction(self.step)

        def codes(outputs: Any) -> np.ndarray:
            flat = np.asarray(outputs, dtype=np.float64).reshape(-1).tolist()
            return np.array([round(Fraction(o) / step) - centre for o in flat], dtype=np.int64)

        return DiscreteGaussianLaw(center=centre, sigma2=sigma2, encode=codes)

    def _on_grid(self, k: Any) -> float:
        """``k * step`` rounded once to the nearest float (``+-inf`` beyond the float
        range): exact integer arithmetic, so it never raises after the charge."""
        return grid_to_float(k, Fraction(self.step))

    def _sample(self, value: tuple[int, Fraction], rng: RandomSource, data: Any) -> float:
        centre, sigma2 = value
        return self._on_grid(centre + discrete_gaussian(sigma2, rng))

    def _sample_many(self, value: tuple[int, Fraction], count: int, rng: RandomSource, data: Any) -> np.ndarray:
        centre, sigma2 = value
        if math.isqrt(sigma2.numerator // sigma2.denominator) + 1 < MAX_PART:
            noise = discrete_gaussian_many(sigma2, count, rng).tolist()
        else:
            noise = [discrete_gaussian(sigma2, rng) for _ in range(count)]
        return np.array([self._on_grid(centre + z) for z in noise], dtype=np.float64)
