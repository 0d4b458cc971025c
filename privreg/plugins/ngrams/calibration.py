"""DPNE's noise calibration (Kim-Gopi-Kulkarni-Yekhanin 2021, "Differentially private
n-gram extraction", Theorem 2.1 and Section 3.1.1): sigma*, the sigma_k schedule and rho_1.

Conservative in the sense of :mod:`privreg.accountant.calibration`, whose verification
helpers it uses: the sigmas are checked against the exact GDP curve (mpmath) and privreg's
GDP accountant and stepped to the safe side if rounding requires it; rho_1 is DPSU's
threshold, :func:`privreg.mechanisms.dpsu_threshold.dpsu_threshold`, verified exactly.
"""

from __future__ import annotations

import math

import attrs
import mpmath

from privreg.accountant.calibration import (
    MAX_SAFE_STEPS,
    calibrate_gaussian_sigma,
    exact_delta_at_most,
    step_up,
)
from privreg.accountant.gdp import GDPAccountant
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.events import Gaussian
from privreg.mechanisms import dpsu_threshold

__all__ = ["calibrate_dpne", "DPNECalibration", "DPNE_SCHEDULES"]

#: Noise schedules of DPNE (paper 002, Section 3.1.1 "Setting sigma_k").
DPNE_SCHEDULES = ("equal", "geometric")


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
    if decay is None:  # calibrate_dpne checks it first
        raise PrivregValueError("schedule='geometric' needs decay=c with 0 < c < 1")
    # sigma_k = c^(k-1) sigma_1, so 1/sigma_star^2 = (1/sigma_1^2) sum_{j<T} c^(-2j)
    weights = [decay ** (-2 * j) for j in range(t)]
    sigma_1 = sigma_star * math.sqrt(math.fsum(weights))
    return [sigma_1 * decay**j for j in range(t)]


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
            raise PrivregValueError("schedule='geometric' needs decay=c with 0 < c < 1 (sigma_k = c sigma_{k-1})")
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
        return acc.delta(epsilon) <= delta_gaussian and exact_delta_at_most(
            epsilon, delta_gaussian, lambda: mpmath.sqrt(mpmath.fsum(1 / mpmath.mpf(s) ** 2 for s in sigmas))
        )

    for _ in range(MAX_SAFE_STEPS):
        if composes(sigmas):
            break
        sigmas = [step_up(s) for s in sigmas]
    else:  # pragma: no cover - see MAX_SAFE_STEPS
        raise PrivregValueError("could not verify the DPNE sigma schedule")

    sigma_1 = sigmas[0]
    rho_1 = dpsu_threshold(sigma=sigma_1, max_keys=d1, delta_threshold=delta_threshold)

    return DPNECalibration(
        epsilon=epsilon,
        delta=delta,
        max_n=t_max,
        schedule=schedule,
        decay=decay,
        delta_1=d1,
        sigma_star=sigma_star,
        sigmas=tuple(float(s) for s in sigmas),
        rho_1=rho_1,
        delta_gaussian=delta_gaussian,
        delta_threshold=delta_threshold,
    )
