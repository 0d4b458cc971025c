"""Noise calibration: the smallest noise that meets an (epsilon, delta) target.

Every function here is *conservative*: the noise it returns is verified against the
privacy curve (or accountant) it was calibrated for, and if floating-point rounding put it
a hair on the unsafe side it is stepped up until the check passes. The returned noise
therefore never overshoots the budget; it may be larger than the exact optimum by at most
the stated tolerance.

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
from typing import Any

import attrs
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

    Guarantee: ``gaussian_delta(epsilon, sensitivity / sigma) <= delta`` holds for the
    returned sigma, evaluated exactly as written, and sigma exceeds the exact optimum by a
    relative error of order 1e-15 only.

    ``epsilon > 0``, ``0 < delta < 1`` and ``sensitivity > 0`` are required (``delta = 0``
    is out of reach of any Gaussian).
    """
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = v.check_delta("delta", delta, allow_zero=False)
    sensitivity = v.check_sensitivity("sensitivity", sensitivity)
    mu = _largest_gaussian_mu(epsilon, delta)
    sigma = sensitivity / mu
    for _ in range(_MAX_SAFE_STEPS):
        if gaussian_delta(epsilon, sensitivity / sigma) <= delta:
            return sigma
        sigma = _step_up(sigma)
    raise PrivregValueError(  # pragma: no cover - see _MAX_SAFE_STEPS
        f"could not verify a Gaussian sigma for epsilon={epsilon}, delta={delta}")


def calibrate_laplace_scale(*, epsilon: float, sensitivity: float = 1.0) -> float:
    """The smallest Laplace scale ``b`` with ``sensitivity / b <= epsilon``: the Laplace
    mechanism on a query of L1 ``sensitivity`` is then pure ``epsilon``-DP
    (Dwork-McSherry-Nissim-Smith 2006). The division is verified in floating point and
    the scale stepped up if rounding made ``sensitivity / b`` exceed ``epsilon``."""
    epsilon = v.check_epsilon("epsilon", epsilon)
    sensitivity = v.check_sensitivity("sensitivity", sensitivity)
    scale = sensitivity / epsilon
    if not math.isfinite(scale) or scale == 0:
        raise PrivregValueError(
            f"sensitivity / epsilon = {sensitivity} / {epsilon} is not a usable scale "
            f"(overflow or underflow); rescale the query"
        )
    while sensitivity / scale > epsilon:
        scale = math.nextafter(scale, math.inf)
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


def _dpsu_threshold_ok(rho: float, sigma_1: float, tail_log: float, t: np.ndarray) -> bool:
    """For every t: P[some of t new items of weight 1/sqrt(t) crosses rho] <= delta_thr,
    i.e. t * log Phi((rho - 1/sqrt(t)) / sigma_1) >= log(1 - delta_thr)."""
    z = (rho - 1 / np.sqrt(t)) / sigma_1
    return bool(np.all(t * special.log_ndtr(z) >= tail_log))


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

    Guarantees (verified before returning, stepping to the safe side if rounding requires
    it): the T Gaussian steps together are ``(epsilon, delta/2)``-DP by the exact GDP
    accountant, and the threshold rho_1 keeps the bad-event probability of DPSU at most
    delta/2 for every t <= Delta_1; by basic composition DPNE is ``(epsilon, delta)``-DP.
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
    for _ in range(_MAX_SAFE_STEPS):  # the T Gaussians must compose to (eps, delta/2)
        acc = GDPAccountant()
        for s in sigmas:
            acc.compose(Gaussian(sigma=s))
        if acc.delta(epsilon) <= delta_gaussian:
            break
        sigmas = [_step_up(s) for s in sigmas]
    else:  # pragma: no cover - see _MAX_SAFE_STEPS
        raise PrivregValueError("could not verify the DPNE sigma schedule")

    sigma_1 = sigmas[0]
    t = np.arange(1, d1 + 1, dtype=np.float64)
    tail_log = math.log1p(-delta_threshold)  # log(1 - delta/2)
    tail = -np.expm1(tail_log / t)  # 1 - (1 - delta/2)^(1/t), without cancellation
    # PhiInv(1 - tail) = -PhiInv(tail) = isf(tail): accurate in the far tail
    rho_1 = float(np.max(1 / np.sqrt(t) - sigma_1 * special.ndtri(tail)))
    for _ in range(_MAX_SAFE_STEPS):
        if _dpsu_threshold_ok(rho_1, sigma_1, tail_log, t):
            break
        rho_1 = _step_up(rho_1)
    else:  # pragma: no cover - see _MAX_SAFE_STEPS
        raise PrivregValueError("could not verify the DPNE threshold rho_1")

    return DPNECalibration(
        epsilon=epsilon, delta=delta, max_n=t_max, schedule=schedule, decay=decay, delta_1=d1,
        sigma_star=sigma_star, sigmas=tuple(float(s) for s in sigmas), rho_1=rho_1,
        delta_gaussian=delta_gaussian, delta_threshold=delta_threshold,
    )
