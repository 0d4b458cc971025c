"""Noise calibration: the smallest noise that meets an (epsilon, delta) target.

Every function here is *conservative*: the noise it returns is verified against the
privacy curve (or accountant) it was calibrated for, and if floating-point rounding put it
a hair on the unsafe side it is stepped up until the check passes. The returned noise
therefore never overshoots the budget; it may be larger than the exact optimum by at most
the stated tolerance.

"Verified" means exactly, not in double precision: a float check of a curve can pass a
value a few ulps on the unsafe side (double rounding of ``sensitivity / sigma`` and of the
log-space difference of two tails). The closed-form calibrations (Gaussian, Laplace)
therefore check the float they return against the curve evaluated in exact
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
* :func:`smallest_passing`, :func:`exact_delta_at_most`, :func:`step_up`: the
  verification helpers behind them, for calibrations built elsewhere (DPNE's lives in the
  ``ngrams`` plugin, DPSU's threshold in :mod:`privreg.mechanisms.dpsu_threshold`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
from scipy import optimize

from privreg.accountant import make_accountant
from privreg.accountant.curves import gaussian_delta
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import PrivacyEvent

__all__ = [
    "calibrate_gaussian_sigma",
    "calibrate_laplace_scale",
    "calibrate_noise_multiplier",
    "smallest_passing",
    "exact_delta_at_most",
    "step_up",
    "EXACT_MARGIN",
    "MAX_SAFE_STEPS",
]

# Safety valve for the "step to the safe side" loops: each step is a few ulps, and the
# raw solution is already within a few ulps of the root, so this is never reached in
# practice; reaching it means the check itself is broken.
MAX_SAFE_STEPS = 10_000


def step_up(x: float) -> float:
    """The next float above ``x`` (plus a relative 1e-15 so loops finish quickly)."""
    return max(math.nextafter(x, math.inf), x * (1 + 1e-15))


# --- exact checks ------------------------------------------------------------------------

_EXACT_DIGITS = 30  # significant digits kept after cancellation in the mpmath curves
EXACT_MARGIN = mpmath.mpf(10) ** -20  # relative margin against mpmath's own rounding
_MAX_DPS = 20_000  # beyond this the curve is not worth evaluating (never reached in tests)


def _bits(x: float) -> int:
    """The IEEE-754 bit pattern of ``x >= 0``, an integer increasing with ``x``."""
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits


def _from_bits(i: int) -> float:
    x: float = struct.unpack("<d", struct.pack("<q", i))[0]
    return x


_MAX_FLOAT_BITS = _bits(math.inf) - 1


def smallest_passing(x0: float, ok: Callable[[float], bool], what: str) -> float:
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
        f"the Gaussian curve at epsilon={epsilon} cannot be evaluated exactly; rescale the query"
    )


def exact_delta_at_most(epsilon: float, delta: float, mu: Callable[[], mpmath.mpf]) -> bool:
    """Whether the exact Gaussian delta at ``epsilon`` is at most ``delta`` (with the
    relative ``EXACT_MARGIN`` against the evaluation's rounding)."""
    d = _exact_gaussian_delta(epsilon, mu)
    with mpmath.workdps(40):
        return bool(d * (1 + EXACT_MARGIN) <= mpmath.mpf(delta))


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
    Sigma is the smallest float passing both checks: within a relative 1e-11 of the exact
    optimum for usual targets (the double-precision curve is widened by a bound on its
    rounding, so it errs high); with tiny epsilon and delta, up to a relative 1.2e-7 above
    it (epsilon 1e-4, delta 1e-250).

    ``epsilon > 0``, ``0 < delta < 1`` and ``sensitivity > 0`` are required (``delta = 0``
    is out of reach of any Gaussian).
    """
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = v.check_delta("delta", delta, allow_zero=False)
    sensitivity = v.check_sensitivity("sensitivity", sensitivity)
    mu = _largest_gaussian_mu(epsilon, delta)

    def ok(sigma: float) -> bool:
        return gaussian_delta(epsilon, sensitivity / sigma) <= delta and exact_delta_at_most(
            epsilon, delta, lambda: mpmath.mpf(sensitivity) / mpmath.mpf(sigma)
        )

    return smallest_passing(sensitivity / mu, ok, "Gaussian sigma")


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
            raise PrivregValueError(f"sensitivity / epsilon = {sensitivity} / {epsilon} overflows; rescale the query")
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
