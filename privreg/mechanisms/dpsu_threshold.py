"""DPSU's Gaussian threshold: the one implementation of paper 002's rho.

Differentially private set union with the weighted Gaussian policy (Gopi-Gulhane-Kulkarni-
Shen-Shokouhi-Yekhanin 2020, "Differentially Private Set Union", ICML, Section 5;
Kim-Gopi-Kulkarni-Yekhanin 2021, "Differentially private n-gram extraction", NeurIPS,
Theorem 2.1, rho_1) releases a key iff its total plus ``N(0, sigma^2)`` exceeds

    ``rho = max_{1<=t<=Delta_0} Delta_2/sqrt(t) + sigma PhiInv((1 - delta_thr)^(1/t))``.

A user who adds ``t`` new keys puts a weight of at most ``Delta_2/sqrt(t)`` on each, so
every one of them stays below rho with probability at least ``(1 - delta_thr)^(1/t)``, and
the probability that any is released is at most ``delta_thr``: the ``(0, delta_thr)`` part
of DPSU's guarantee. Used by the ``gaussian-thresholding`` mechanism
(:attr:`~privreg.mechanisms.thresholding.GaussianThresholding.paper_threshold`) and by the
``ngrams`` plugin (DPNE's rho_1 and the DPSU baselines' thresholds).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy import special

from privreg.accountant.calibration import EXACT_MARGIN, smallest_passing
from privreg.core import validation as v

__all__ = ["dpsu_threshold", "dpsu_threshold_ok"]


def dpsu_threshold_ok(
    rho: float, *, sigma: float, delta_threshold: float, t: np.ndarray, sensitivity: float = 1.0
) -> bool:
    """For every ``t`` in the float array ``t``: P[some of t new keys of weight
    ``sensitivity/sqrt(t)`` crosses rho] <= delta_threshold, i.e.
    ``t log Phi((rho - sensitivity/sqrt(t)) / sigma) >= log(1 - delta_threshold)``.

    Checked in doubles for every t, and exactly (mpmath; ``rho``, ``sigma``,
    ``delta_threshold``, ``sensitivity`` and ``sqrt(t)`` taken exactly) for every t whose
    double-precision slack is within a relative 1e-9 of the bound: only those can be
    misjudged by rounding, which is of order 1e-14 relative here."""
    tail_log = math.log1p(-delta_threshold)
    z = (rho - sensitivity / np.sqrt(t)) / sigma
    slack = t * special.log_ndtr(z) - tail_log
    if not bool(np.all(slack >= 0)):
        return False
    near = t[slack <= 1e-9 * -tail_log]
    with mpmath.workdps(60):
        bound = mpmath.log1p(-mpmath.mpf(delta_threshold))
        for ti in near.astype(np.int64).tolist():
            zi = (mpmath.mpf(rho) - mpmath.mpf(sensitivity) / mpmath.sqrt(ti)) / mpmath.mpf(sigma)
            if ti * mpmath.log1p(-mpmath.ncdf(-zi)) * (1 + EXACT_MARGIN) < bound:
                return False
    return True


def dpsu_threshold(*, sigma: float, max_keys: int, delta_threshold: float, sensitivity: float = 1.0) -> float:
    """DPSU's weighted-Gaussian threshold (see the module docstring) for noise ``sigma``,
    at most ``max_keys`` (Delta_0) keys per user and a user weight vector of L2 norm at
    most ``sensitivity`` (Delta_2).

    Guarantee: the returned float is the smallest one passing :func:`dpsu_threshold_ok`
    for every ``t <= max_keys``, so a user's new keys are released with probability at
    most ``delta_threshold``, verified exactly and in doubles; it lies within a few ulps
    of the closed form."""
    sigma = v.check_sensitivity("sigma", sigma)
    max_keys = v.check_count("max_keys", max_keys)
    delta_threshold = v.check_delta("delta_threshold", delta_threshold, allow_zero=False)
    sensitivity = v.check_sensitivity("sensitivity", sensitivity)
    t = np.arange(1, max_keys + 1, dtype=np.float64)
    tail = -np.expm1(math.log1p(-delta_threshold) / t)  # 1 - (1 - delta_thr)^(1/t), no cancellation
    # PhiInv(1 - tail) = -PhiInv(tail) = isf(tail): accurate in the far tail
    rho = float(np.max(sensitivity / np.sqrt(t) - sigma * special.ndtri(tail)))
    return smallest_passing(
        rho,
        lambda r: dpsu_threshold_ok(r, sigma=sigma, delta_threshold=delta_threshold, t=t, sensitivity=sensitivity),
        "DPSU threshold rho",
    )
