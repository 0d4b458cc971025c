"""Key thresholding (partition selection, differentially private set union).

Each user holds a set of keys (partitions, n-grams, browser agents, ...). The caller
first bounds every user's contribution -- at most ``max_partitions`` (Delta_0) keys per
user, with bounded weights -- and sums the weights per key. A mechanism here adds noise
to every present key's total and releases the keys (with their noisy totals) whose noisy
total exceeds a threshold tau. Neighbouring datasets differ by adding or removing one
user with all of their keys.

Why this is private (Korolova-Kenthapadi-Mishra-Ntoulas 2009; Gopi-Gulhane-Kulkarni-Shen-
Shokouhi-Yekhanin 2020, "Differentially Private Set Union", ICML; Wilson-Zhang-Lam-
Desfontaines-Simmons-Marengo-Gipson 2020, "Differentially Private SQL with Bounded User
Contribution", PoPETs): let D' = D plus user u. The keys present in D' but not in D
("new keys", at most Delta_0 of them) carry only u's weight. Their noisy totals are
independent of everything else, and the threshold makes the probability q that any of
them is released at most ``threshold_delta``. The released part on the keys present in D
is a post-processing of the noise mechanism applied to the vector of totals of those
keys, in which u changes at most Delta_0 coordinates (the "noise event"). Writing A, A'
for the releases restricted to D's keys, M(D) = A and M(D') = (A', B) with B the released
new keys, independent of A' and empty with probability 1 - q. For every epsilon >= 0 and
every output set S:

* ``P[M(D') in S] - e^eps P[M(D) in S] <= q + (1 - q) H_eps(A' || A)``;
* ``P[M(D) in S] - e^eps P[M(D') in S] = P[A in S] - e^eps (1 - q) P[A' in S]
  <= q + (1 - q) H_eps(A || A')`` (split on whether ``e^eps P[A' in S] + H_eps`` exceeds 1).

So the privacy profile is at most ``delta_T + (1 - delta_T) delta_noise(eps) <=
delta_noise(eps) + delta_T`` in both directions: the profile of the noise event composed
with ``ApproxDP(epsilon=0, delta=delta_T)``. Both trade-off functions are symmetric, so
the mechanism is f-DP for the tensor product of the two (Dong-Roth-Su 2022, Proposition
2.12 and Theorem 3.2). The charged events (data-independent) follow from this:

* Laplace: ``Composed([DiscreteLaplace(...), ApproxDP(0, delta)])`` -- accounted by every
  accountant that knows ``ApproxDP`` (basic, advanced, optimal, PLD), the PLD keeping the
  exact discrete-Laplace loss.
* Gaussian: ``ApproxDP(epsilon, delta)``, the bound above at the target epsilon
  (``delta/2`` verified for the noise plus ``delta/2`` for the threshold). The tighter
  ``Composed([DiscreteGaussian(dimension=Delta_0), ApproxDP(0, delta/2)])`` is not used
  because no accountant here supports both parts (basic/advanced/optimal/PLD refuse a
  multi-dimensional DiscreteGaussian without extra options, RDP/zCDP/GDP refuse ApproxDP).

The RDP, zCDP and GDP accountants refuse both events (UnsupportedEventError): an
``(epsilon, delta)`` guarantee with delta > 0 has no Renyi curve, and dropping the
threshold's delta would under-count.

Noise is integer noise on a grid, reusing privreg's samplers and calibration: the totals
are snapped to a grid of step ``g`` (:mod:`privreg.noise.grid`) and the threshold test is
done on integers, so nothing leaks through floating point; the thresholds below are
derived for the discrete noise actually drawn, not for its continuous idealisation.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from abc import abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, NamedTuple

import attrs
import numpy as np
from scipy import special

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import ApproxDP, Composed, DiscreteLaplace, PrivacyEvent
from privreg.core.laws import DiscreteLaw, OutputLaw, ProductLaw
from privreg.core.mechanism import Mechanism
from privreg.core.params import OPEN_UNIT, POSITIVE, param_field, param_fields
from privreg.core.randomizer import secure_permutation
from privreg.core.randomness import RandomSource
from privreg.mechanisms.dpsu_threshold import dpsu_threshold
from privreg.mechanisms.gaussian import GaussianMechanism, as_global_l2
from privreg.mechanisms.grid_mechanism import exact_sum, grid_values, snap_values
from privreg.mechanisms.laws import discrete_gaussian_law, two_sided_geometric_law
from privreg.mechanisms.noise_params import float_at_most, laplace_scale
from privreg.noise import Grid
from privreg.noise.fast import discrete_laplace_many, fast_scale
from privreg.noise.gaussian import discrete_gaussian_many

__all__ = ["LaplaceThresholding", "GaussianThresholding", "validate_key_counts", "canonical_order", "KeyCounts"]

# relative safety margin on float threshold computations (they are then rounded up to an
# integer number of grid steps and re-checked)
_MARGIN = 1e-9


class KeyCounts(NamedTuple):
    """Validated thresholding input: keys in canonical order with their totals."""

    keys: tuple[Hashable, ...]
    counts: np.ndarray  # float64, finite, >= 0
    sorted: bool  # False: no deterministic order exists; releases permute keys at random


def canonical_order(keys: Sequence[Hashable]) -> list[int] | None:
    """Indices putting ``keys`` in an order that depends only on the *set* of keys, never
    on the order the caller listed them in: ascending when the keys are totally ordered
    (numbers, strings, tuples of them), else by (type, repr) when those are distinct (keys
    of mixed types). None when neither gives a strict order (e.g. two NaN keys); the
    release then orders its keys by a uniform permutation from the secure source."""
    n = len(keys)
    # compared optimistically: keys that do not support < raise TypeError, handled below
    ordered: Sequence[Any] = keys
    with contextlib.suppress(TypeError):  # keys without a mutual <: try (type, repr) below
        order = sorted(range(n), key=ordered.__getitem__)
        if all(bool(ordered[a] < ordered[b]) for a, b in itertools.pairwise(order)):
            return order
    tags = [(type(k).__module__, type(k).__qualname__, repr(k)) for k in keys]
    if len(set(tags)) == n:
        return sorted(range(n), key=tags.__getitem__)
    return None


def validate_key_counts(value: Any) -> KeyCounts:
    """``value`` -- a mapping key -> count, or a pair ``(keys, counts)`` of equal length --
    as :class:`KeyCounts` in canonical order (:func:`canonical_order`), after checking keys
    are hashable and distinct and counts are finite, non-negative real numbers within the
    float64 range. Errors name the rule, never a key, a count or how many keys there are."""
    fix = (
        "Pass a dict {key: count} or a pair (keys, counts) of equal length, with the "
        "counts computed after bounding each user's contribution."
    )
    if isinstance(value, Mapping):
        keys, counts = list(value.keys()), list(value.values())
    elif isinstance(value, (tuple, list)) and len(value) == 2 and not isinstance(value[0], (str, bytes)):
        try:
            keys, counts = list(value[0]), list(np.asarray(value[1], dtype=object).reshape(-1))
        except TypeError:
            raise PrivregTypeError(
                f"value must be a mapping or a pair (keys, counts); got a pair holding "
                f"{type(value[0]).__name__} and {type(value[1]).__name__}. {fix}"
            ) from None
        if np.ndim(value[1]) != 1 or len(keys) != len(counts):
            raise PrivregValueError(f"value=(keys, counts) needs two 1-d sequences of equal length. {fix}")
    else:
        raise PrivregTypeError(
            f"value must be a mapping key -> count or a pair (keys, counts); got {type(value).__name__}. {fix}"
        )
    seen: set[Any] = set()
    for key in keys:
        try:
            hash(key)
        except TypeError:
            raise PrivregTypeError(
                f"every key must be hashable; got a key of type {type(key).__name__}. Use str, int or tuples as keys."
            ) from None
        if key in seen:
            raise PrivregValueError("keys must be distinct; a key appears twice. Sum its counts first.")
        seen.add(key)
    out = np.empty(len(counts), dtype=np.float64)
    for i, c in enumerate(counts):
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating, Fraction)):
            raise PrivregTypeError(
                f"every count must be a real number (int, float or Fraction); got a {type(c).__name__}. {fix}"
            )
        try:
            x = float(c)
        except OverflowError:
            x = math.inf
        if not math.isfinite(x) or x < 0:
            raise PrivregValueError(
                "every count must be finite, >= 0 and within the float64 range (<= 1.8e308); "
                "remove such keys or fix their counts."
            )
        out[i] = x
    order = canonical_order(keys)
    if order is None:
        return KeyCounts(keys=tuple(keys), counts=out, sorted=False)
    return KeyCounts(keys=tuple(keys[i] for i in order), counts=out[order], sorted=True)


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class _Thresholding(Mechanism):
    """Shared release logic: snap, add integer noise, keep the totals above the threshold.

    Input range: counts finite, >= 0 and within float64 (anything else is refused before
    the charge); nothing is clamped, the snapped totals and the noise are added exactly
    (:func:`~privreg.mechanisms.grid_mechanism.exact_sum`). Output order: the
    released keys in ascending order (:func:`canonical_order`), so the output never
    depends on the order of the input; keys with no such order come in a uniformly
    random order drawn from the secure source."""

    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    delta: float = param_field(doc="privacy parameter delta (bounds the release of keys held by one user)", **OPEN_UNIT)
    max_partitions: int = param_field(
        minimum=1, doc="Delta_0: the most keys one user contributes to (bounded by the caller)"
    )

    def validate_input(self, value: Any) -> KeyCounts:
        return validate_key_counts(value)

    @abstractmethod
    def _grid(self) -> Grid:
        """The grid the totals are snapped to."""

    @abstractmethod
    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        """``count`` independent integer noise values."""

    @property
    @abstractmethod
    def threshold_int(self) -> int:
        """The threshold T in grid units: released iff snapped total + noise > T."""

    @abstractmethod
    def _noise_law(self, center: int) -> DiscreteLaw | None:
        """The law of ``center + noise`` on a window (:mod:`privreg.mechanisms.laws`)."""

    def output_law(self, value: KeyCounts) -> OutputLaw | None:
        """Key by key, independently: "not released" (no value) with probability
        ``P[k + Z <= T]``, else the noisy total ``k + Z > T`` in grid units, for the
        snapped total ``k`` and the noise ``Z`` the release draws -- a product over the
        input's keys, labelled by key. A key absent from an input is never released (its
        factor there is "no value" surely), so neighbours are compared key by key and the
        keys only one of them holds carry the threshold's delta. Outputs (``{key: noisy
        total}``) are encoded as ``round(total / step) - k`` per key, NaN when the key is
        absent; exact while totals stay below 2**53 grid steps (beyond, the one rounding
        to a float merges outcomes: a post-processing). The order of the released keys
        is not part of the law: it is canonical, or uniform and independent of the
        totals when the keys have no order. The noise window leaves out mass below
        e^-70 (the factor's ``tail``); its share below the threshold, which the release
        reports as "not released", is counted in that tail."""
        centres = snap_values(value.counts, self._grid())
        threshold = self.threshold_int
        step = self._grid().step
        factors = []
        for c in centres:
            noise = self._noise_law(int(c))
            if noise is None:
                return None
            cut = threshold - int(c)  # released iff z > cut
            keep = noise.support > cut if cut > -(2**62) else np.ones(noise.support.size, dtype=bool)
            below = noise.log_pmf[~keep]
            factors.append(
                DiscreteLaw(
                    support=noise.support[keep],
                    log_pmf=noise.log_pmf[keep],
                    offset=noise.offset,
                    tail=noise.tail,
                    none_log_pmf=float(special.logsumexp(below)) if below.size else -math.inf,
                )
            )
        keys, centre_ints = value.keys, [int(c) for c in centres]

        def codes(outputs: Any) -> np.ndarray:
            out = np.full((len(outputs), len(keys)), np.nan)
            for i, released in enumerate(outputs):
                for j, (key, c) in enumerate(zip(keys, centre_ints)):
                    if key in released:
                        out[i, j] = round(Fraction(float(released[key])) / step) - c
            return out

        return ProductLaw(factors=factors, encode=codes, labels=keys)

    @property
    def threshold(self) -> float:
        """tau in data units: a key is released iff its noisy total is > tau."""
        return float(self.threshold_int * self._grid().step)

    def _released(self, value: KeyCounts, totals: np.ndarray, rng: RandomSource) -> list[dict[Hashable, float]]:
        """For each row of ``totals`` (noisy integer totals, one column per key): the keys
        whose total exceeds the threshold, with totals back in data units (a deterministic
        function of integers: post-processing), in canonical order."""
        keep = np.asarray(totals > self.threshold_int, dtype=bool)
        values = np.zeros(totals.shape, dtype=np.float64)
        values[keep] = grid_values(totals[keep], self._grid().step)
        out = []
        for row_keep, row_values in zip(keep, values):
            idx = np.flatnonzero(row_keep)
            if not value.sorted:
                idx = idx[secure_permutation(idx.size, rng)]
            out.append({value.keys[i]: x for i, x in zip(idx.tolist(), row_values[idx].tolist())})
        return out

    def _sample(self, value: KeyCounts, rng: RandomSource, data: Any) -> dict[Hashable, float]:
        k = snap_values(value.counts, self._grid())
        return self._released(value, exact_sum(k, self._noise(len(value.keys), rng))[None, :], rng)[0]

    def _sample_many(self, value: KeyCounts, count: int, rng: RandomSource, data: Any) -> list[dict[Hashable, float]]:
        k = snap_values(value.counts, self._grid())
        noise = self._noise(count * len(value.keys), rng).reshape(count, len(value.keys))
        return self._released(value, exact_sum(k, noise), rng)


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class LaplaceThresholding(_Thresholding):
    """Laplace thresholding: ``(epsilon, delta)``-DP release of the keys whose noisy total
    exceeds tau, with their noisy totals (Korolova et al. 2009, "Releasing Search Queries
    and Clicks Privately", WWW; Gopi et al. 2020, "Differentially Private Set Union", ICML,
    Laplace policy; Wilson et al. 2020, "Differentially Private SQL with Bounded User
    Contribution", PoPETs, Section 5).

    **Contract on the input.** ``{key: total}`` where each user contributed to at most
    ``max_partitions`` (Delta_0) keys, with a weight in ``[0, max_contribution]``
    (Delta_inf) on each (integers such as 1, or reals). The vector of totals then has L1
    sensitivity Delta_0 Delta_inf under adding/removing a user.

    **Noise.** Totals are snapped to the grid ``g = Delta_inf / m`` (``m`` a power of two
    >= 1024 max(1, epsilon), :meth:`privreg.noise.Grid.for_query`); rounding is monotone and
    commutes with even shifts, so each of the user's Delta_0 coordinates moves by at most
    ``m`` and the integer vector has L1 sensitivity ``Delta_0 m``. Two-sided geometric noise
    of scale ``s = Delta_0 m / epsilon`` grid units (continuous analogue: ``b = Delta_0
    Delta_inf / epsilon``) is added, drawn as the discrete Laplace mechanism draws it
    (exact CKS 2020 sampler, OS CSPRNG; ``fast_scale`` only rounds s up, by < 2**-39 relative for s >= 1).

    **Threshold.** A key present only because of the new user has snapped total
    ``k <= m``. For the discrete Laplace, ``P[Z >= j] = e^(-j/s) / (1 + e^(-1/s))`` for
    j >= 1, so with release iff ``k + Z > T``: ``P[released] <= e^(-(T+1-m)/s) / (1 +
    e^(-1/s)) =: p``. At most Delta_0 such keys, independent, so the probability that any
    is released is ``1 - (1 - p)^Delta_0``; requiring it <= delta gives
    ``p* = 1 - (1 - delta)^(1/Delta_0)`` and

        ``T = m - 1 + ceil( s ln(1 / (p* (1 + e^(-1/s)))) )``   (grid units),
        ``tau = T g``.

    Its continuous counterpart is the textbook ``tau = Delta_inf + b ln(1 / (2 p*))``
    (``<= Delta_inf + b ln(Delta_0 / (2 delta))``, Wilson et al.'s and Gopi et al.'s form);
    the discrete tau is within a few grid steps of it. ``delta`` is spent entirely on the
    threshold (the noise is pure DP).

    **Guarantee.** ``(epsilon, delta)``-DP for add/remove-one-user neighbours; charged as
    ``Composed([DiscreteLaplace(s, Delta_0 m), ApproxDP(0, delta)])`` (see the module
    docstring for why this composition bound is valid). Output: ``{key: noisy total}`` for
    the released keys only, totals on the grid (they may be below a key's true total).

    **Input range, order, timing.** Totals must be finite, ``>= 0`` and within float64
    (refused before the charge otherwise; the error never names a key or a count);
    nothing is clamped, totals and noise are added exactly. Released keys come in
    ascending order (by type and repr for keys of mixed types; in a uniformly random
    order from the secure source when no strict order exists), never in the caller's
    order. Running time is linear in the number of keys (itself data); totals beyond
    ``2**53`` grid steps take an exact Python-integer path (measured 1.0-1.5x for 1000
    keys near 1e300, ``benchmarks/data_timing.py``).
    """

    name: ClassVar[str] = "laplace-thresholding"
    max_contribution: float = param_field(
        default=1.0, doc="Delta_inf: the largest weight one user puts on one key", **POSITIVE
    )

    def __attrs_post_init__(self) -> None:
        self.threshold_int  # compute (and verify) at construction  # noqa: B018

    def _grid(self) -> Grid:
        return Grid.for_query(sensitivity=self.max_contribution, epsilon=self.epsilon, dimension=1)

    @property
    def integer_sensitivity(self) -> int:
        """L1 sensitivity of the snapped integer totals: Delta_0 m."""
        return self.max_partitions * self._grid().multiple

    @property
    def noise_scale(self) -> Fraction:
        """Scale s of the discrete Laplace noise actually drawn (grid units)."""
        return fast_scale(laplace_scale(self.integer_sensitivity, self.epsilon))

    @property
    def threshold_int(self) -> int:
        """T in grid units (see the class docstring); verified against delta."""
        s = float(self.noise_scale)  # the applied scale, as a float (relative error 1e-16)
        m = self._grid().multiple
        log_tail = math.log1p(-self.delta) / self.max_partitions  # log(1 - p*)
        p_star = -math.expm1(log_tail)
        # -log p*, in log space when p* ~ delta / max_partitions underflows to 0 (subnormal delta)
        neg_log_p = -math.log(p_star) if p_star > 0 else math.log(self.max_partitions) - math.log(self.delta)
        c = s * (neg_log_p - math.log1p(math.exp(-1 / s)))
        t = m - 1 + math.ceil(c * (1 + _MARGIN) + 1)
        while self.key_release_probability(t) > p_star * (1 - _MARGIN):  # pragma: no cover - margin suffices
            t += 1
        return t

    def key_release_probability(self, threshold_int: int | None = None) -> float:
        """Exact probability that one key held only by one user, with the largest total
        ``max_contribution``, is released (at threshold T, default :attr:`threshold_int`)."""
        t = self.threshold_int if threshold_int is None else threshold_int
        s = float(self.noise_scale)
        j = t + 1 - self._grid().multiple
        if j <= 0:
            return 1.0 - math.exp(-(1 - j) / s) / (1 + math.exp(-1 / s))
        return math.exp(-j / s) / (1 + math.exp(-1 / s))

    def privacy_event(self) -> PrivacyEvent:
        noise = DiscreteLaplace(scale=float_at_most(self.noise_scale), sensitivity=self.integer_sensitivity)
        return Composed(events=(noise, ApproxDP(epsilon=0.0, delta=self.delta)))

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        return discrete_laplace_many(self.noise_scale, count, rng)

    def _noise_law(self, center: int) -> DiscreteLaw | None:
        return two_sided_geometric_law(self.noise_scale, center)


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class GaussianThresholding(_Thresholding):
    """Gaussian thresholding, DPSU's weighted Gaussian policy (Gopi et al. 2020,
    "Differentially Private Set Union", ICML, Section 5 (Gaussian policies; threshold
    rho); Kim-Gopi-Kulkarni-Yekhanin 2021, "Differentially private n-gram extraction",
    NeurIPS, Theorem 2.1 rho_1, paper 002): ``(epsilon, delta)``-DP.

    **Contract on the input.** ``{key: total}`` where each user contributed to at most
    ``max_partitions`` (Delta_0) keys, and a user with ``t_u`` keys put a weight of at most
    ``sensitivity / sqrt(t_u)`` on each (DPSU's weighted Gaussian policy: exactly
    ``1/sqrt(|U_i|)`` with ``sensitivity=1``; equal integer weights 1 with
    ``sensitivity=sqrt(Delta_0)`` also qualify). Each user's weight vector then has L2 norm
    <= ``sensitivity`` (Delta_2) on <= Delta_0 keys, and a new key among ``t`` new keys of a
    user has weight <= Delta_2 / sqrt(t). (Only the first property is needed for the noise;
    the second is what the threshold formula of the papers assumes.)

    **Noise.** A :class:`~privreg.mechanisms.gaussian.GaussianMechanism` with
    ``(epsilon, delta/2)``, L2 sensitivity Delta_2 and ``dimension=Delta_0`` (the user moves
    at most Delta_0 coordinates) supplies the grid ``g = Delta_2 / m``, the integer L2
    sensitivity ``Delta_int`` (``m + ceil(sqrt(Delta_0))``, or ``m`` when Delta_0 = 1) and
    the verified discrete-Gaussian ``sigma_int`` (analytic Balle-Wang calibration, then
    verified under the PLD or RDP accountant, see that class). Untouched coordinates add no
    privacy loss, so its DiscreteGaussian event covers any number of keys.

    **Threshold.** Paper 002 / DPSU: ``rho = max_{1<=t<=Delta_0} Delta_2/sqrt(t) + sigma
    PhiInv((1 - delta/2)^(1/t))`` (:attr:`paper_threshold`, with the continuous analytic
    sigma). Implemented for the discrete noise actually drawn, in grid units: a new key
    among t has snapped total ``k <= m/sqrt(t) + 1/2``, and the discrete Gaussian tail obeys
    ``P[Z >= j] <= Q((j - 1)/sigma_int)`` for j >= 1 (each term ``e^(-z^2/2s^2) <= integral
    over [z-1, z]``, and the normaliser is >= ``sigma sqrt(2 pi)`` by Poisson summation), so
    with release iff ``k + Z > T``

        ``T = ceil( max_t m/sqrt(t) + 1/2 + sigma_int PhiInv((1 - delta/2)^(1/t)) )``,
        ``tau = T g``

    gives ``P[a given new key released] <= 1 - (1 - delta/2)^(1/t)``, hence at most delta/2
    for the t independent new keys. tau is at least the paper's rho, and exceeds it by the
    ratio ``sigma_int g / sigma`` (about 1 + 1e-3 when Delta_0 = 1; 5-15% when Delta_0 > 1,
    where GaussianMechanism verifies under RDP) plus a few grid steps.

    **Guarantee.** ``(epsilon, delta)``-DP for add/remove-one-user neighbours; charged
    as ``ApproxDP(epsilon, delta)`` (module docstring: the noise event is verified
    ``(epsilon, delta/2)``-DP and the threshold adds delta/2). Output:
    ``{key: noisy total}`` for the released keys only.

    **Input range, order, timing.** Totals must be finite, ``>= 0`` and within float64
    (refused before the charge otherwise; the error never names a key or a count);
    nothing is clamped, totals and noise are added exactly. Released keys come in
    ascending order (by type and repr for keys of mixed types; in a uniformly random
    order from the secure source when no strict order exists), never in the caller's
    order. Running time is linear in the number of keys (itself data); totals beyond
    ``2**53`` grid steps take an exact Python-integer path (measured 1.0-1.5x for 1000
    keys near 1e300, ``benchmarks/data_timing.py``).
    """

    name: ClassVar[str] = "gaussian-thresholding"
    sensitivity: float = param_field(
        default=1.0, doc="Delta_2: a user with t keys puts weight <= sensitivity/sqrt(t) on each", **POSITIVE
    )

    def __attrs_post_init__(self) -> None:
        self.threshold_int  # calibrate (cached) and verify at construction  # noqa: B018

    @property
    def noise_mechanism(self) -> GaussianMechanism:
        """The Gaussian mechanism whose grid, sensitivity and verified sigma are used."""
        return GaussianMechanism(
            epsilon=self.epsilon,
            delta=self.noise_delta,
            sensitivity=as_global_l2(self.sensitivity),
            dimension=self.max_partitions,
        )

    @property
    def noise_delta(self) -> float:
        return self.delta / 2

    @property
    def threshold_delta(self) -> float:
        return self.delta - self.delta / 2

    def _grid(self) -> Grid:
        return self.noise_mechanism.grid

    @property
    def sigma(self) -> float:
        """Standard deviation parameter of the applied noise, in data units (sigma_int g)."""
        return float(self.noise_mechanism.sigma_int * self._grid().step)

    @property
    def paper_threshold(self) -> float:
        """rho of paper 002 / DPSU with the continuous analytic sigma (reference value),
        verified exactly (:func:`~privreg.mechanisms.dpsu_threshold.dpsu_threshold`)."""
        return dpsu_threshold(
            sigma=self.noise_mechanism.continuous_sigma,
            max_keys=self.max_partitions,
            delta_threshold=self.threshold_delta,
            sensitivity=self.sensitivity,
        )

    @property
    def threshold_int(self) -> int:
        """T in grid units (see the class docstring)."""
        mech = self.noise_mechanism
        m, sigma_int = mech.grid.multiple, float(mech.sigma_int)
        t = np.arange(1, self.max_partitions + 1, dtype=np.float64)
        log_keep = math.log1p(-self.threshold_delta) / t
        tail = -np.expm1(log_keep)
        z = -special.ndtri(tail)  # PhiInv(1 - tail), accurate in the far tail
        need = m / np.sqrt(t) + 0.5 + sigma_int * z
        thr = math.ceil(float(np.max(need)) * (1 + _MARGIN) + 1e-6)
        # re-check with the survival function: P[key released] <= Q((T - k_max)/sigma_int)
        k_max = np.floor(m / np.sqrt(t) + 0.5)
        while np.any(special.log_ndtr(-(thr - k_max) / sigma_int) > np.log(tail) + math.log1p(-_MARGIN)):
            thr += 1  # pragma: no cover - the margin suffices
        return thr

    def privacy_event(self) -> PrivacyEvent:
        return ApproxDP(epsilon=self.epsilon, delta=self.delta)

    def _noise(self, count: int, rng: RandomSource) -> np.ndarray:
        return discrete_gaussian_many(self.noise_mechanism.noise_sigma2, count, rng)

    def _noise_law(self, center: int) -> DiscreteLaw | None:
        return discrete_gaussian_law(self.noise_mechanism.noise_sigma2, center)
