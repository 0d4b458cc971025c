"""Noise and thresholds of DPNE and the DPSU baselines, and the events they are charged as.

DPNE's calibration is Theorem 2.1 of Kim-Gopi-Kulkarni-Yekhanin 2021, computed by
:func:`privreg.plugins.ngrams.calibration.calibrate_dpne` (sigma*, the sigma_k schedule, rho_1);
the DPSU thresholds are :func:`privreg.mechanisms.dpsu_threshold.dpsu_threshold`.
The accounting of that theorem, and therefore the events charged, one per length:

* length 1 (DPSU, Algorithm 6): a Gaussian mechanism with L2 sensitivity 1 and noise
  sigma_1 composed with a (0, delta/2) event -- the probability that a key present only
  because of the added user crosses rho_1 (Gopi et al. 2020). Charged as
  ``Composed([Gaussian(sigma_1, 1), ApproxDP(0, delta/2)])``.
* length k >= 2: a Gaussian mechanism with L2 sensitivity 1 and noise sigma_k on the
  histogram over V_k (every valid k-gram, zero weights included; V_k is a function of the
  earlier releases only, so the composition is adaptive but the sensitivity stays 1).
  Charged as ``Gaussian(sigma_k, 1)``. rho_k does not affect privacy (Section 2).

The L2 sensitivity is exactly 1 because the backends add integer weights
``floor(2^20 / sqrt(t))`` (:func:`privreg.plugins.ngrams.backends.contribution_weights`): a user's vector
has norm <= 1 and a new key's weight is <= 1/sqrt(t), as Theorem 2.1's proof requires.

Theorem 2.1 adds the Gaussian part, exactly (epsilon, delta/2)-DP by Gaussian DP
composition, and the (0, delta/2) part by basic composition. privreg's ``gdp`` accountant
composes Gaussians exactly but does not accept ApproxDP events; the only accountant that
takes both is ``pld``, whose pessimistic discretisation reports about 5e-8 more epsilon
than the exact value. So the *applied* noise is calibrate_dpne at a slightly smaller
epsilon' = epsilon (1 - gamma), the smallest gamma in a fixed ladder (0 first) for which an
accountant verifies the charged events within (epsilon, delta) -- ``gdp`` is tried first so
that gamma = 0 is used as soon as it accepts ApproxDP(0, .). At epsilon = 4, delta = 1e-7
gamma is 3e-8 (sigma_k larger by a relative 2e-8): the release is never less private than
Theorem 2.1 says, and the ledger's bound never exceeds the budget.
"""

from __future__ import annotations

import functools

import attrs

from privreg.accountant import make_accountant
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.events import ApproxDP, Composed, Gaussian, PrivacyEvent
from privreg.mechanisms import dpsu_threshold
from privreg.plugins.ngrams.calibration import DPNECalibration, calibrate_dpne

__all__ = [
    "Release",
    "NoisePlan",
    "METHODS",
    "verify_events",
    "plan_dpne",
    "plan_dpsu_all",
    "plan_dpsu_even",
    "plan_dpsu_single",
]

#: Extraction methods: DPNE and the three DPSU baselines of paper 002, Table 3.
METHODS = ("dpne", "dpsu-all", "dpsu-even", "dpsu-single")
#: Accountants tried, in order, to verify a plan (both are exact or pessimistic).
VERIFIERS = ("gdp", "pld")
_GAMMAS = (0.0, 3e-8, 1e-7, 3e-7, 1e-6, 1e-5, 1e-4, 1e-3)


@attrs.frozen(kw_only=True)
class Release:
    """One charged release: which lengths it covers (a tuple of k; DPSU-all pools all),
    its noise ``sigma`` (L2 sensitivity 1), its DPSU threshold ``rho`` (None for DPNE's
    k >= 2, where rho_k is set from public data), the contribution bound ``max_keys`` and
    the ``event`` charged before its noise is drawn."""

    lengths: tuple[int, ...]
    sigma: float
    rho: float | None
    max_keys: int
    event: PrivacyEvent
    label: str

    @property
    def fixed_rho(self) -> float:
        """``rho`` of a release whose threshold the plan fixes (all but DPNE's k >= 2)."""
        if self.rho is None:
            raise PrivregValueError(f"release {self.label!r} has no fixed rho: rho_k is set from public data")
        return self.rho


@attrs.frozen(kw_only=True)
class NoisePlan:
    """Everything a run needs before it touches data: the releases in charge order, the
    paper's calibration at the target (for reporting) and the accountant that verified
    the charged events within (epsilon, delta)."""

    method: str
    epsilon: float
    delta: float
    releases: tuple[Release, ...]
    paper: DPNECalibration
    applied_epsilon: float
    verified_by: str
    verified_epsilon: float

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        return tuple(r.event for r in self.releases)


@functools.lru_cache(maxsize=64)
def verify_events(events: tuple[PrivacyEvent, ...], epsilon: float, delta: float) -> tuple[str, float] | None:
    """(accountant, epsilon(delta)) of the first of :data:`VERIFIERS` that supports every
    event and bounds their composition within (epsilon, delta); None if none does."""
    for name in VERIFIERS:
        acc = make_accountant(name)
        if not all(acc.supports(e) for e in events):
            continue
        for e in events:
            acc.compose(e)
        eps = acc.epsilon(delta)
        if eps <= epsilon:
            return name, float(eps)
    return None


def _search(build, epsilon: float, delta: float):  # type: ignore[no-untyped-def]
    """The first gamma of the ladder whose plan ``build(epsilon')`` verifies."""
    for gamma in _GAMMAS:
        eps = epsilon * (1 - gamma)
        releases, paper = build(eps)
        found = verify_events(tuple(r.event for r in releases), epsilon, delta)
        if found is not None:
            return releases, paper, eps, found
    raise PrivregValueError(  # pragma: no cover - gamma = 1e-3 is far beyond any rounding
        f"could not verify the noise plan within epsilon={epsilon}, delta={delta}"
    )


def _check(epsilon: float, delta: float) -> tuple[float, float]:
    epsilon = v.check_epsilon("epsilon", epsilon)
    delta = v.check_delta("delta", delta, allow_zero=False)
    if delta >= 0.5:
        raise PrivregValueError(f"delta must be < 0.5 (well below 1/number of users); got {delta}")
    return epsilon, delta


def _keys(max_keys: tuple[int, ...], max_n: int) -> tuple[int, ...]:
    max_keys = tuple(v.check_count("max_keys", x) for x in max_keys)
    if len(max_keys) != max_n:
        raise PrivregValueError(f"max_keys must give Delta_k for k = 1..{max_n}; got {len(max_keys)} values")
    return max_keys


def plan_dpne(
    *,
    epsilon: float,
    delta: float,
    max_n: int,
    max_keys: tuple[int, ...],
    schedule: str = "equal",
    decay: float | None = None,
) -> NoisePlan:
    """DPNE (Algorithm 1 / 2) at (epsilon, delta) by Theorem 2.1: one release per length,
    ``max_keys[k-1]`` = Delta_k."""
    epsilon, delta = _check(epsilon, delta)
    max_n = v.check_count("max_n", max_n)
    max_keys = _keys(max_keys, max_n)

    def build(eps: float) -> tuple[list[Release], DPNECalibration]:
        cal = calibrate_dpne(epsilon=eps, delta=delta, max_n=max_n, delta_1=max_keys[0], schedule=schedule, decay=decay)
        out = [
            Release(
                lengths=(1,),
                sigma=cal.sigmas[0],
                rho=cal.rho_1,
                max_keys=max_keys[0],
                event=Composed(
                    events=(
                        Gaussian(sigma=cal.sigmas[0], sensitivity=1.0),
                        ApproxDP(epsilon=0.0, delta=cal.delta_threshold),
                    )
                ),
                label="DPNE 1-grams (DPSU, Algorithm 6)",
            )
        ]
        out += [
            Release(
                lengths=(k,),
                sigma=cal.sigmas[k - 1],
                rho=None,
                max_keys=max_keys[k - 1],
                event=Gaussian(sigma=cal.sigmas[k - 1], sensitivity=1.0),
                label=f"DPNE {k}-grams (Algorithm 1, pruned to V_{k})",
            )
            for k in range(2, max_n + 1)
        ]
        return out, cal

    releases, _, eps, (name, achieved) = _search(build, epsilon, delta)
    paper = calibrate_dpne(
        epsilon=epsilon, delta=delta, max_n=max_n, delta_1=max_keys[0], schedule=schedule, decay=decay
    )
    return NoisePlan(
        method="dpne",
        epsilon=epsilon,
        delta=delta,
        releases=tuple(releases),
        paper=paper,
        applied_epsilon=eps,
        verified_by=name,
        verified_epsilon=achieved,
    )


def _single_dpsu(
    method: str, epsilon: float, delta: float, lengths: tuple[int, ...], max_keys: int, label: str
) -> NoisePlan:
    def build(eps: float) -> tuple[list[Release], DPNECalibration]:
        cal = calibrate_dpne(epsilon=eps, delta=delta, max_n=1, delta_1=max_keys)
        event = Composed(
            events=(Gaussian(sigma=cal.sigmas[0], sensitivity=1.0), ApproxDP(epsilon=0.0, delta=cal.delta_threshold))
        )
        return [
            Release(lengths=lengths, sigma=cal.sigmas[0], rho=cal.rho_1, max_keys=max_keys, event=event, label=label)
        ], cal

    releases, _, eps, (name, achieved) = _search(build, epsilon, delta)
    return NoisePlan(
        method=method,
        epsilon=epsilon,
        delta=delta,
        releases=tuple(releases),
        paper=calibrate_dpne(epsilon=epsilon, delta=delta, max_n=1, delta_1=max_keys),
        applied_epsilon=eps,
        verified_by=name,
        verified_epsilon=achieved,
    )


def plan_dpsu_all(*, epsilon: float, delta: float, max_n: int, max_keys: tuple[int, ...]) -> NoisePlan:
    """DPSU-all (Section 3.1.2): one DPSU over the n-grams of every length 1..T pooled,
    each user contributing at most ``sum(max_keys)`` (T Delta_0) of them."""
    epsilon, delta = _check(epsilon, delta)
    max_n = v.check_count("max_n", max_n)
    total = sum(_keys(max_keys, max_n))
    return _single_dpsu(
        "dpsu-all", epsilon, delta, tuple(range(1, max_n + 1)), total, f"DPSU-all: n-grams of lengths 1..{max_n} pooled"
    )


def plan_dpsu_single(*, epsilon: float, delta: float, length: int, max_keys: int) -> NoisePlan:
    """DPSU-single (Section 3.1.2): the whole budget on k-grams of one length."""
    epsilon, delta = _check(epsilon, delta)
    length = v.check_count("length", length)
    return _single_dpsu(
        "dpsu-single",
        epsilon,
        delta,
        (length,),
        v.check_count("max_keys", max_keys),
        f"DPSU-single: {length}-grams only",
    )


def plan_dpsu_even(*, epsilon: float, delta: float, max_n: int, max_keys: tuple[int, ...]) -> NoisePlan:
    """DPSU-even (Section 3.1.2): a separate DPSU per length k = 1..T with the budget split
    evenly. The paper splits with advanced composition (about epsilon/sqrt(T) each); here
    the split is exact instead -- sigma_k = sqrt(T) sigma* (Gaussian DP composition) and a
    threshold delta of delta/(2T) per length -- which only helps the baseline."""
    epsilon, delta = _check(epsilon, delta)
    max_n = v.check_count("max_n", max_n)
    max_keys = _keys(max_keys, max_n)
    per = delta / 2 / max_n

    def build(eps: float) -> tuple[list[Release], DPNECalibration]:
        cal = calibrate_dpne(epsilon=eps, delta=delta, max_n=max_n, delta_1=max_keys[0], schedule="equal")
        out = []
        for k in range(1, max_n + 1):
            sigma = cal.sigmas[k - 1]
            out.append(
                Release(
                    lengths=(k,),
                    sigma=sigma,
                    rho=dpsu_threshold(sigma=sigma, max_keys=max_keys[k - 1], delta_threshold=per),
                    max_keys=max_keys[k - 1],
                    event=Composed(events=(Gaussian(sigma=sigma, sensitivity=1.0), ApproxDP(epsilon=0.0, delta=per))),
                    label=f"DPSU-even: {k}-grams",
                )
            )
        return out, cal

    releases, _, eps, (name, achieved) = _search(build, epsilon, delta)
    paper = calibrate_dpne(epsilon=epsilon, delta=delta, max_n=max_n, delta_1=max_keys[0])
    return NoisePlan(
        method="dpsu-even",
        epsilon=epsilon,
        delta=delta,
        releases=tuple(releases),
        paper=paper,
        applied_epsilon=eps,
        verified_by=name,
        verified_epsilon=achieved,
    )
