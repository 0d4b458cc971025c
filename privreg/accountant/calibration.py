"""Noise calibration: the smallest noise that meets an (epsilon, delta) target.

Every function here is *conservative*: the noise it returns is verified against the
privacy curve (or accountant) it was calibrated for, and if floating-point rounding put it
a hair on the unsafe side it is stepped up until the check passes. The returned noise
therefore never overshoots the budget; it may be larger than the exact optimum by at most
the stated tolerance.

"Verified" means exactly, not in double precision: a float check of a curve can pass a
value a few ulps on the unsafe side (double rounding of ``sensitivity / sigma`` and of the
log-space difference of two tails). The closed-form calibrations (Gaussian, Laplace,
DPNE) therefore check the float they return against the curve evaluated in exact
rational arithmetic (Laplace) or in mpmath at a precision that keeps 30 significant
digits after cancellation (Gaussian tails), with a relative margin of 1e-20 for that
evaluation, *and* against privreg's own double-precision curve, so that accountants which
compose the returned noise in doubles also see the target met.

* :func:`calibrate_gaussian_sigma` -- the exact analytic Gaussian mechanism (Balle-Wang
  2018, Theorem 8), solved on :func:`privreg.accountant.curves.gaussian_delta`.
* :func:`calibrate_laplace_scale` -- pure DP Laplace, ``scale = sensitivity / epsilon``
  (Dwork-McSherry-Nissim-Smith 2006).
* :func:`calibrate_noise_multiplier` -- any event family ``z -> PrivacyEvent`` under any
  privreg accountant, by bisection (the pattern of ``dp_accounting.mechanism_calibration``).
* :func:`calibrate_dpne` -- the noise split of DPNE (Kim-Gopi-Kulkarni-Yekhanin 2021,
  "Differentially private n-gram extraction", Theorem 2.1 and Section 3.1.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import struct

import attrs
import mpmath
import numpy as np
from scipy import optimize, special

from privreg.accountant import make_accountant
from privreg.accountant.curves import gaussian_delta
from privreg.accountant.gdp import GDPAccountant
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import Gaussian, PrivacyEvent

__all__ = [
    "calibrate_gaussian_sigma",
    "calibrate_laplace_scale",
    "calibrate_noise_multiplier",
    "calibrate_dpne",
    "DPNECalibration",
    "DPNE_SCHEDULES",
]

#: Noise schedules of DPNE (paper 002, Section 3.1.1 "Setting sigma_k").
DPNE_SCHEDULES = ("equal", "geometric")

# Safety valve for the "step to the safe side" loops: each step is a few ulps, and the
# raw solution is already within a few ulps of the root, so this is never reached in
# practice; reaching it means the check itself is broken.
_MAX_SAFE_STEPS = 10_000


def _step_up(x: float) -> float:
    """The next float above ``x`` (plus a relative 1e-15 so loops finish quickly)."""
    return max(math.nextafter(x, math.inf), x * (1 + 1e-15))


# --- exact checks ------------------------------------------------------------------------

_EXACT_DIGITS = 30  # significant digits kept after cancellation in the mpmath curves
_EXACT_MARGIN = mpmath.mpf(10) ** -20  # relative margin against mpmath's own rounding
_MAX_DPS = 20_000  # beyond this the curve is not worth evaluating (never reached in tests)


def _bits(x: float) -> int:
    """The IEEE-754 bit pattern of ``x >= 0``, an integer increasing with ``x``."""
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits


def _from_bits(i: int) -> float:
    x: float = struct.unpack("<d", struct.pack("<q", i))[0]
    return x


_MAX_FLOAT_BITS = _bits(math.inf) - 1


def _smallest_passing(x0: float, ok: Callable[[float], bool], what: str) -> float:
    """The smallest positive float ``x`` with ``ok(x)``, searched from the estimate ``x0``.

    ``ok`` is meant to be monotone (false below a threshold, true above). The search
    gallops in ulps from ``x0`` to a float that fails and one that passes, then bisects
    over the floats in between, always keeping a float that *passed* and returning it;
    so the result passes ``ok`` even if ``ok`` is not quite monotone."""
    start = _bits(x0)
    if ok(x0):
        hi, step = start, 1
        while True:  # gallop down to a failing float (bits 0 is +0.0: counts as failing)
            lo = max(start - step, 0)
            if lo == 0 or not ok(_from_bits(lo)):
                break
            hi, step = lo, 2 * step
    else:
        lo, step = start, 1
        while True:  # gallop up to a passing float
            hi = start + step
            if hi > _MAX_FLOAT_BITS:
                raise PrivregValueError(f"no finite {what} meets the target; relax the target")
            if ok(_from_bits(hi)):
                break
            lo, step = hi, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(_from_bits(mid)):
            hi = mid
        else:
            lo = mid
    return _from_bits(hi)


def _exact_gaussian_delta(epsilon: float, mu: Callable[[], mpmath.mpf]) -> mpmath.mpf:
    """``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle-Wang 2018, Theorem 8) in
    mpmath; ``mu()`` builds the exact ratio at the working precision. The precision is
    raised until ``_EXACT_DIGITS`` significant digits survive the cancellation."""
    dps = 50
    while dps <= _MAX_DPS:
        with mpmath.workdps(dps):
            m, e = mu(), mpmath.mpf(epsilon)
            a = mpmath.ncdf(-e / m + m / 2)
            d = a - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
            if d > 0 and a < d * mpmath.mpf(10) ** (dps - _EXACT_DIGITS):
                return d
        dps *= 4
    raise PrivregValueError(  # pragma: no cover - would need mu below ~1e-5000
        f"the Gaussian curve at epsilon={epsilon} cannot be evaluated exactly; rescale the query")


def _exact_delta_at_most(epsilon: float, delta: float, mu: Callable[[], mpmath.mpf]) -> bool:
    """Whether the exact Gaussian delta at ``epsilon`` is at most ``delta`` (with the
    relative ``_EXACT_MARGIN`` against the evaluation's rounding)."""
    d = _exact_gaussian_delta(epsilon, mu)
    with mpmath.workdps(40):
        return bool(d * (1 + _EXACT_MARGIN) <= mpmath.mpf(delta))


def _largest_gaussian_mu(epsilon: float, delta: float) -> float:
    """The largest mu = sensitivity/sigma with gaussian_delta(epsilon, mu) <= delta,
    up to rounding (the caller verifies and steps to the safe side)."""

    def f(mu: float) -> float:
        return gaussian_delta(epsilon, mu) - delta

    lo, hi = 1.0, 1.0
    if f(1.0) <= 0:
        while f(hi) <= 0:  # delta(eps, mu) -> 1 as mu -> inf, so this ends
            lo, hi = hi, hi * 2
            if hi > 1e300:  # pragma: no cover - unreachable for delta < 1
                raise PrivregValueError(f"no Gaussian meets epsilon={epsilon}, delta={delta}")
    else:
        while f(lo) > 0:  # delta(eps, mu) -> 0 as mu -> 0, so this ends
            hi, lo = lo, lo / 2
            if lo < 1e-300:  # pragma: no cover - unreachable for delta > 0
                raise PrivregValueError(f"no Gaussian meets epsilon={epsilon}, delta={delta}")
    return float(optimize.brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))


def calibrate_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest sigma for which the Gaussian mechanism with L2 ``sensitivity`` is
    ``(epsilon, delta)``-DP, by the exact analytic Gaussian (Balle-Wang 2018, Theorem 8;
    the curve is :func:`privreg.accountant.curves.gaussian_delta`).

    Guarantee: for the returned float sigma the exact curve, with ``mu = sensitivity /
    sigma`` taken exactly (mpmath, see the module docstring), gives ``delta(epsilon) <=
    delta``, so sigma is never below the exact optimum; and so does privreg's double
    precision :func:`~privreg.accountant.curves.gaussian_delta` at ``sensitivity / sigma``.
    Sigma is the smallest float passing both checks: within a few ulps of the exact
    optimum for usual targets; where the double-precision curve errs high (epsilon near
    1e-4 with delta below 1e-200) up to a relative 1e-9 above it.

    ``epsilon > 0``, ``0 < delta < 1`` and ``sensitivity > 0`` are required (``delta = 0``
    is out of reach of any Gaussian).
    """
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = v.check_delta("delta", delta, allow_zero=False)
    sensitivity = v.check_sensitivity("sensitivity", sensitivity)
    mu = _largest_gaussian_mu(epsilon, delta)

    def ok(sigma: float) -> bool:
        return gaussian_delta(epsilon, sensitivity / sigma) <= delta and _exact_delta_at_most(
            epsilon, delta, lambda: mpmath.mpf(sensitivity) / mpmath.mpf(sigma))

    return _smallest_passing(sensitivity / mu, ok, "Gaussian sigma")


def calibrate_laplace_scale(*, epsilon: float, sensitivity: float = 1.0) -> float:
    """The smallest Laplace scale ``b`` with ``sensitivity / b <= epsilon``: the Laplace
    mechanism on a query of L1 ``sensitivity`` is then pure ``epsilon``-DP
    (Dwork-McSherry-Nissim-Smith 2006). ``sensitivity / b <= epsilon`` is verified in
    exact rational arithmetic (the float quotient can round below ``epsilon`` when the
    exact one is above it) and in floating point, and the scale stepped up by ulps until
    both hold."""
    epsilon = v.check_epsilon("epsilon", epsilon)
    sensitivity = v.check_sensitivity("sensitivity", sensitivity)
    scale = sensitivity / epsilon
    if not math.isfinite(scale) or scale == 0:
        raise PrivregValueError(
            f"sensitivity / epsilon = {sensitivity} / {epsilon} is not a usable scale "
            f"(overflow or underflow); rescale the query"
        )
    exact_sensitivity, exact_epsilon = Fraction(sensitivity), Fraction(epsilon)
    while sensitivity / scale > epsilon or exact_sensitivity > exact_epsilon * Fraction(scale):
        scale = math.nextafter(scale, math.inf)
        if math.isinf(scale):  # pragma: no cover - needs sensitivity / epsilon near 1.8e308
            raise PrivregValueError(f"sensitivity / epsilon = {sensitivity} / {epsilon} overflows; "
                                    f"rescale the query")
    return scale


def calibrate_noise_multiplier(
    *,
    epsilon: float,
    delta: float,
    make_event: Callable[[float], PrivacyEvent],
    accountant: str = "pld",
    accountant_options: Mapping[str, Any] | None = None,
    lower: float = 1e-2,
    upper: float = 1e3,
    tol: float = 1e-5,
) -> float:
    """The smallest noise multiplier ``z`` in ``[lower, upper]`` (to relative ``tol``)
    such that the accountant named ``accountant`` (see :data:`privreg.accountant.ACCOUNTANTS`),
    after composing ``make_event(z)``, reports ``epsilon(delta) <= epsilon``.

    ``make_event`` maps a noise multiplier to a privreg event, e.g.
    ``lambda z: SelfComposed(event=PoissonSampled(sampling_probability=q,
    event=Gaussian(sigma=z)), count=k)``. Each evaluation uses a fresh accountant
    (``make_accountant(accountant, **accountant_options)``).

    Method: geometric bisection, keeping ``hi`` a multiplier that has been *verified* to
    meet the target and returning it, so the result always meets the target under the
    named accountant, whatever its rounding. Minimality (within ``tol``: the returned
    ``z`` satisfies ``z <= z_min * (1 + tol)``) assumes epsilon(delta) is non-increasing
    in ``z``, which holds for the usual families (more noise, less privacy loss). The same
    pattern is used by ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism``.

    Raises :class:`PrivregValueError` for bad arguments, an unknown accountant, or when
    even ``z = upper`` misses the target; :class:`PrivregTypeError` if ``make_event``
    is not callable or returns something other than a PrivacyEvent;
    :class:`~privreg.core.errors.UnsupportedEventError` if the accountant cannot compose
    the events.
    """
    epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
    delta = v.check_delta("delta", delta)
    lower = v.check_sensitivity("lower", lower)
    upper = v.check_sensitivity("upper", upper)
    if not lower < upper:
        raise PrivregValueError(f"lower must be < upper; got lower={lower}, upper={upper}")
    tol = v.check_real("tol", tol)
    if not (0 < tol < 1):
        raise PrivregValueError(f"tol must lie in (0, 1) (a relative tolerance); got {tol!r}")
    if not callable(make_event):
        raise PrivregTypeError(f"make_event must be callable (z -> PrivacyEvent); got {make_event!r}")
    if not isinstance(accountant, str):
        raise PrivregTypeError(f"accountant must be an accountant name (str); got {accountant!r}")
    options = dict(accountant_options or {})
    make_accountant(accountant, **options)  # fail fast on an unknown name or bad options

    def meets(z: float) -> bool:
        event = make_event(z)
        if not isinstance(event, PrivacyEvent):
            raise PrivregTypeError(f"make_event({z!r}) must return a PrivacyEvent; got {event!r}")
        eps = make_accountant(accountant, **options).compose(event).epsilon(delta)
        return bool(eps <= epsilon)  # NaN counts as a miss

    if not meets(upper):
        raise PrivregValueError(
            f"no noise multiplier in [{lower}, {upper}] meets epsilon={epsilon} at delta={delta} "
            f"under the {accountant!r} accountant (even z={upper} misses); raise upper or relax "
            f"the target"
        )
    lo, hi = lower, upper
    moved_lo = False
    while hi > lo * (1 + tol):
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:  # no float strictly between: done
            break
        if meets(mid):
            hi = mid
        else:
            lo, moved_lo = mid, True
    if not moved_lo and meets(lower):
        return lower
    return hi


# --- DPNE (paper 002) -------------------------------------------------------------------

@attrs.frozen(kw_only=True)
class DPNECalibration:
    """Noise parameters of DPNE (Kim-Gopi-Kulkarni-Yekhanin 2021, Algorithm 1) that make
    the whole extraction ``(epsilon, delta)``-DP by their Theorem 2.1.

    * ``sigma_star``: the analytic-Gaussian sigma (sensitivity 1) at
      ``(epsilon, delta_gaussian)``, Eq. (1) of the paper;
    * ``sigmas``: ``(sigma_1, ..., sigma_T)`` with ``sum_k 1/sigma_k^2 <= 1/sigma_star^2``
      (equality up to rounding, on the safe side);
    * ``rho_1``: the DPSU threshold for 1-grams,
      ``max_{1<=t<=Delta_1} 1/sqrt(t) + sigma_1 PhiInv((1 - delta_threshold)^(1/t))``,
      which makes DPSU's release of 1-grams no user could have caused a
      ``(0, delta_threshold)`` event (Gopi et al. 2020);
    * the delta split: ``delta_gaussian + delta_threshold = delta`` (both delta/2).

    The thresholds rho_k for k >= 2 do not affect privacy (paper 002, Section 2) and are
    set from data (|S_{k-1}|, |V_k|), so they are not part of this calibration.
    """

    epsilon: float
    delta: float
    max_n: int
    schedule: str
    decay: float | None
    delta_1: int
    sigma_star: float
    sigmas: tuple[float, ...]
    rho_1: float
    delta_gaussian: float
    delta_threshold: float

    @property
    def mu(self) -> float:
        """The GDP parameter of all T Gaussian steps: sqrt(sum 1/sigma_k^2) <= 1/sigma_star."""
        return math.sqrt(math.fsum(1 / s**2 for s in self.sigmas))


def _schedule(sigma_star: float, t: int, schedule: str, decay: float | None) -> list[float]:
    """sigma_1..sigma_T with sum 1/sigma_k^2 = 1/sigma_star^2 (exact arithmetic)."""
    if schedule == "equal":
        return [sigma_star * math.sqrt(t)] * t
    assert decay is not None
    # sigma_k = c^(k-1) sigma_1, so 1/sigma_star^2 = (1/sigma_1^2) sum_{j<T} c^(-2j)
    weights = [decay ** (-2 * j) for j in range(t)]
    sigma_1 = sigma_star * math.sqrt(math.fsum(weights))
    return [sigma_1 * decay**j for j in range(t)]


def _dpsu_threshold_ok(rho: float, sigma_1: float, delta_threshold: float, t: np.ndarray) -> bool:
    """For every t: P[some of t new items of weight 1/sqrt(t) crosses rho] <= delta_thr,
    i.e. t * log Phi((rho - 1/sqrt(t)) / sigma_1) >= log(1 - delta_thr).

    Checked in doubles for every t, and exactly (mpmath; ``rho``, ``sigma_1``,
    ``delta_thr`` and ``sqrt(t)`` taken exactly) for every t whose double-precision slack
    is within a relative 1e-9 of the bound: only those can be misjudged by rounding, which
    is of order 1e-14 relative here."""
    tail_log = math.log1p(-delta_threshold)
    z = (rho - 1 / np.sqrt(t)) / sigma_1
    slack = t * special.log_ndtr(z) - tail_log
    if not bool(np.all(slack >= 0)):
        return False
    near = t[slack <= 1e-9 * -tail_log]
    with mpmath.workdps(60):
        bound = mpmath.log1p(-mpmath.mpf(delta_threshold))
        for ti in near.astype(np.int64).tolist():
            zi = (mpmath.mpf(rho) - 1 / mpmath.sqrt(ti)) / mpmath.mpf(sigma_1)
            if ti * mpmath.log1p(-mpmath.ncdf(-zi)) * (1 + _EXACT_MARGIN) < bound:
                return False
    return True


def calibrate_dpne(
    *,
    epsilon: float,
    delta: float,
    max_n: int,
    delta_1: int,
    schedule: str = "equal",
    decay: float | None = None,
) -> DPNECalibration:
    """Noise and 1-gram threshold for DPNE (Kim-Gopi-Kulkarni-Yekhanin 2021, Theorem 2.1).

    ``max_n`` is T (longest n-gram length), ``delta_1`` is Delta_1, the largest number of
    1-grams a user may contribute in DPSU (an integer, not a privacy delta). With
    ``delta_gaussian = delta_threshold = delta / 2``:

    * sigma* solves ``delta/2 = Phi(-eps sigma* + 1/(2 sigma*)) - e^eps Phi(-eps sigma* -
      1/(2 sigma*))`` (Eq. (1); the analytic Gaussian of Balle-Wang 2018 with sensitivity
      1, the L2 sensitivity of the weighted Gaussian DPSU policy);
    * ``1/sigma*^2 = sum_{k=1}^T 1/sigma_k^2`` (Gaussian composition, Dong-Roth-Su;
      paper 002 Proposition 2.3), with ``schedule="equal"``: sigma_k = sqrt(T) sigma*, or
      ``schedule="geometric"``: sigma_k = c sigma_{k-1} for ``decay`` c in (0, 1)
      (Section 3.1.1, "Setting sigma_k");
    * ``rho_1 = max_{1<=t<=Delta_1} 1/sqrt(t) + sigma_1 PhiInv((1 - delta/2)^(1/t))``.

    Guarantees (verified exactly before returning, as in the module docstring, stepping to
    the safe side if rounding requires it): the T Gaussian steps together are
    ``(epsilon, delta/2)``-DP by the exact GDP curve (and by privreg's GDP accountant), and
    the threshold rho_1 (the smallest float passing the check) keeps the bad-event
    probability of DPSU at most delta/2 for every t <= Delta_1; by basic composition DPNE
    is ``(epsilon, delta)``-DP.
    """
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = v.check_delta("delta", delta, allow_zero=False)
    t_max = v.check_count("max_n", max_n)
    d1 = v.check_count("delta_1", delta_1)
    if schedule not in DPNE_SCHEDULES:
        raise PrivregValueError(f"schedule must be one of {DPNE_SCHEDULES}; got {schedule!r}")
    if schedule == "geometric":
        if decay is None:
            raise PrivregValueError(
                "schedule='geometric' needs decay=c with 0 < c < 1 (sigma_k = c sigma_{k-1})")
        decay = v.check_real("decay", decay)
        if not (0 < decay < 1):
            raise PrivregValueError(
                f"decay must lie in (0, 1) (paper 002: sigma_k = c sigma_(k-1), 0 < c < 1); "
                f"got {decay!r}. Use schedule='equal' for c = 1."
            )
        if 2 * (t_max - 1) * -math.log(decay) > 700:  # c^(-2(T-1)) must stay a finite float
            raise PrivregValueError(f"decay={decay} is too small for max_n={t_max}: sigma_1 overflows")
    elif decay is not None:
        raise PrivregValueError(f"decay is only used with schedule='geometric'; got decay={decay!r}")

    delta_gaussian = delta / 2
    delta_threshold = delta - delta_gaussian
    sigma_star = calibrate_gaussian_sigma(epsilon=epsilon, delta=delta_gaussian)

    sigmas = _schedule(sigma_star, t_max, schedule, decay)

    def composes(sigmas: list[float]) -> bool:  # the T Gaussians compose to (eps, delta/2)
        acc = GDPAccountant()
        for s in sigmas:
            acc.compose(Gaussian(sigma=s))
        return acc.delta(epsilon) <= delta_gaussian and _exact_delta_at_most(
            epsilon, delta_gaussian, lambda: mpmath.sqrt(mpmath.fsum(1 / mpmath.mpf(s) ** 2 for s in sigmas)))

    for _ in range(_MAX_SAFE_STEPS):
        if composes(sigmas):
            break
        sigmas = [_step_up(s) for s in sigmas]
    else:  # pragma: no cover - see _MAX_SAFE_STEPS
        raise PrivregValueError("could not verify the DPNE sigma schedule")

    sigma_1 = sigmas[0]
    t = np.arange(1, d1 + 1, dtype=np.float64)
    tail = -np.expm1(math.log1p(-delta_threshold) / t)  # 1 - (1 - delta/2)^(1/t), no cancellation
    # PhiInv(1 - tail) = -PhiInv(tail) = isf(tail): accurate in the far tail
    rho_1 = float(np.max(1 / np.sqrt(t) - sigma_1 * special.ndtri(tail)))
    rho_1 = _smallest_passing(rho_1, lambda r: _dpsu_threshold_ok(r, sigma_1, delta_threshold, t),
                              "DPNE threshold rho_1")

    return DPNECalibration(
        epsilon=epsilon, delta=delta, max_n=t_max, schedule=schedule, decay=decay, delta_1=d1,
        sigma_star=sigma_star, sigmas=tuple(float(s) for s in sigmas), rho_1=rho_1,
        delta_gaussian=delta_gaussian, delta_threshold=delta_threshold,
    )
