"""Private selection: the exponential mechanism, report-noisy-max and permute-and-flip.

Each mechanism takes a vector of utilities (one per candidate, computed from the data)
whose entries each move by at most ``sensitivity`` (``Delta_u``) between neighbouring
datasets, and releases the index of one candidate. Every sampler here is exact: the
sampling weights ``exp(-gamma_i)`` with ``gamma_i = c (u_max - u_i)`` are rationals
(floats are converted with :class:`fractions.Fraction`, no rounding) and are drawn with
the Bernoulli(exp(-gamma)) algorithm of Canonne-Kamath-Steinke 2020 on uniform CSPRNG
integers, so the released index follows exactly the distribution the privacy proof is
about; no floating-point sampling is involved.

The scaling ``c`` is ``epsilon / (2 Delta_u)``, or ``epsilon / Delta_u`` when the caller
declares the utilities *monotonic* (between any two neighbours every utility moves in
the same direction, as for counts under add/remove). The privacy event each mechanism
charges is computed from ``c`` by :func:`epsilon_spent`, i.e. from the weights actually
used, never from a paper's headline (see :func:`epsilon_spent` for the trap of paper 003).

Runtime is not constant: the number of random draws depends on the utilities, so an
observer who can time a release learns something about them (as with every rejection
sampler, including CKS's). Run releases where their timing is not observable.
"""

from __future__ import annotations

import functools
import math
from abc import abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import Exponential, PrivacyEvent
from privreg.core.laws import OutputLaw
from privreg.core.mechanism import Mechanism
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomness import RandomSource
from privreg.mechanisms.laws import categorical_law, exponential_pmf, permute_and_flip_pmf
from privreg.noise import bernoulli_exp_neg, uniform_below
from privreg.noise.coins import ExpCoins
from privreg.noise.exact import bernoulli_exp_neg_ratio, randbelow

__all__ = [
    "ExponentialMechanism",
    "ReportNoisyMax",
    "exponential_index",
    "PermuteAndFlip",
    "epsilon_spent",
    "utility_array",
    "NOISE_KINDS",
]

#: Noise kinds of :class:`ReportNoisyMax`.
NOISE_KINDS = ("gumbel", "exponential")

_MAX_BATCH = 1 << 18  # trials evaluated at once by the vectorised samplers (memory bound)


# --- the paper-003 trap ------------------------------------------------------------------


def _positive_rational(name: str, value: Any) -> Fraction:
    """``value`` (a float, int or Fraction) as an exact positive rational."""
    if isinstance(value, Fraction):
        x = value
    else:
        f = v.check_real(name, value)
        if not math.isfinite(f):
            raise PrivregValueError(f"{name} must be finite; got {value!r}. Pass a finite number such as {name}=1.0.")
        x = Fraction(f)
    if x <= 0:
        raise PrivregValueError(f"{name} must be > 0; got {value!r}. Pass a positive number such as {name}=1.0.")
    return x


def _round_up(x: Fraction, what: str) -> float:
    """The smallest float >= ``x`` (so a charge is never below what was spent)."""
    try:
        f = float(x)
    except OverflowError:
        f = math.inf
    if math.isfinite(f) and Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    if not math.isfinite(f):
        raise PrivregValueError(f"{what} exceeds the largest float; use a smaller weight exponent or sensitivity")
    return f


def epsilon_spent(*, weight_exponent: Any, sensitivity: Any, monotonic: bool = False) -> float:
    """The pure-DP epsilon actually spent by selecting with weights ``exp(weight_exponent * u)``.

    Guarantee (McSherry-Talwar 2007, Theorem 6): sampling candidate ``i`` with probability
    proportional to ``exp(eps' u_i)``, where every utility moves by at most ``Delta_u``
    between neighbours, is ``2 eps' Delta_u``-DP, and ``eps' Delta_u``-DP when the
    utilities are monotonic (all move in the same direction). The same holds for
    permute-and-flip with flip probabilities ``exp(eps' (u_i - u_max))`` (McKenna-Sheldon
    2020) and for report-noisy-max with Gumbel or exponential noise of scale ``1/eps'``.

    The trap (paper 003, Okada et al., Theorem 3 / eq. (11), Theorem 7, Algorithm 3): the
    paper writes the exponential mechanism with weights ``exp(eps u)`` and states a
    ``2 eps Delta_u`` guarantee (``2 eps`` for its subspace utility, ``Delta_u <= 1``), yet
    Algorithm 3 runs ``h`` such draws at ``eps / h`` each and calls the whole ``eps``-DP:
    it spends ``2 eps``. Charging ``eps'`` for a draw with weights ``exp(eps' u)``
    under-reports the loss by a factor of ``2 Delta_u``; the accountant must be charged
    this function's value. Equivalently, to spend ``eps`` use
    :class:`ExponentialMechanism` with ``epsilon=eps``, whose weights are
    ``exp(eps u / (2 Delta_u))``.

    The result is rounded *up* to the next float, so it is never below the exact value
    ``2 * weight_exponent * sensitivity`` (computed in rationals).
    """
    w = _positive_rational("weight_exponent", weight_exponent)
    d = _positive_rational("sensitivity", sensitivity)
    factor = 1 if _flag("monotonic", monotonic) else 2
    return _round_up(factor * w * d, "the epsilon spent")


# --- validation --------------------------------------------------------------------------


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise PrivregTypeError(
            f"{name} must be True or False; got {value!r} of type {type(value).__name__}. "
            f"Pass {name}=True only if every utility moves in the same direction between "
            f"neighbouring datasets."
        )
    return bool(value)


def _noise(value: Any) -> str:
    if value not in NOISE_KINDS:
        raise PrivregValueError(
            f"noise must be one of {list(NOISE_KINDS)}; got {value!r}. Use noise='gumbel' "
            f"(the exponential mechanism's distribution) or noise='exponential' "
            f"(permute-and-flip's distribution)."
        )
    return value


def utility_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a 1-d array of finite utilities, one per candidate (at least one).

    Integer utilities stay integers (int64/uint64) so large counts are not rounded;
    floating-point utilities become float64 (an exact widening). Every finite float64 is
    accepted (the sampler works on exact rationals, so nothing overflows); NaN, inf and
    integers beyond uint64 are refused. Errors name the rule, never a utility, its
    position or how many are bad: utilities are computed from the data.
    """
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise PrivregTypeError(
            f"{name} must be a 1-d array of numbers (one utility per candidate); got {type(value).__name__}"
        ) from None
    if arr.dtype.kind not in "iuf":
        raise PrivregTypeError(
            f"{name} must hold real numbers (one utility per candidate: int64, uint64 or "
            f"float); got dtype {arr.dtype}. Pass e.g. np.array([3.0, 1.0, 2.0])."
        )
    if arr.ndim != 1:
        raise PrivregValueError(
            f"{name} must be a 1-d vector with one utility per candidate; got shape {arr.shape}. "
            f"Flatten it, or select within each row separately."
        )
    if arr.size == 0:
        raise PrivregValueError(f"{name} must hold at least one candidate's utility; got an empty vector")
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise PrivregValueError(
                f"every entry of {name} must be finite; every candidate needs a finite "
                f"utility. Remove the candidate or give it a finite (e.g. very low) utility."
            )
    return arr


# --- exact vectorised Bernoulli samplers ---------------------------------------------------


def _acceptance_rate(gammas: list[Fraction]) -> float:
    """Approximate P(accept) of one rejection trial (>= 1/k); used only to size batches,
    never to sample."""
    return sum(math.exp(-float(g)) if g < 700 else 0.0 for g in gammas) / len(gammas)


# --- exact samplers ----------------------------------------------------------------------


def _exponential_one(gammas: list[Fraction], rng: RandomSource) -> int:
    """One exact draw with P(i) proportional to exp(-gamma_i), min gamma = 0."""
    k = len(gammas)
    while True:
        i = rng.randbelow(k)
        if bernoulli_exp_neg(gammas[i], rng):
            return i


def _exponential_one_ratio(gammas: list[tuple[int, int]], rng: RandomSource) -> int:
    """:func:`_exponential_one` on ``gamma_i = a_i / b_i`` in lowest terms: the same draws."""
    k = len(gammas)
    while True:
        i = randbelow(k, rng)
        a, b = gammas[i]
        if bernoulli_exp_neg_ratio(a, b, rng):
            return i


def exponential_index(gammas: list[Fraction], rng: RandomSource) -> int:
    """One exact draw of an index ``i`` with probability proportional to ``exp(-gamma_i)``,
    for exact rationals ``gamma_i >= 0`` of which at least one is 0 (the maximiser).

    The sampler of :class:`ExponentialMechanism`, public for mechanisms that compute their
    own exact rational utilities (e.g. :mod:`privreg.mechanisms.quantile`): a uniform
    candidate accepted by a Canonne-Kamath-Steinke 2020 Algorithm 1 coin, retried until
    one is accepted. The caller must draw nothing before its charge."""
    if not gammas or min(gammas) != 0:
        raise PrivregValueError("gammas must be non-empty with minimum 0 (gamma_i = c (u_max - u_i))")
    return _exponential_one(gammas, rng)


def _exponential_many(gammas: list[Fraction], count: int, rng: RandomSource) -> np.ndarray:
    """``count`` independent draws of :func:`_exponential_one`. Each pending draw gets
    ``m`` independent rejection trials per round and keeps its first accepted one; trials
    after the first acceptance are discarded unseen, so each draw is the first accepted
    trial of an i.i.d. sequence, exactly as in the sequential sampler."""
    k = len(gammas)
    accept = ExpCoins(gammas)
    m = max(1, min(k, math.ceil(1.0 / _acceptance_rate(gammas))))
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:
        rows = pending[: max(1, _MAX_BATCH // m)]
        cand = uniform_below(k, rows.size * m, rng)
        ok = accept(cand, rng).reshape(rows.size, m)
        cand = cand.reshape(rows.size, m)
        hit = ok.any(axis=1)
        first = ok.argmax(axis=1)  # index of the first True in each row
        out[rows[hit]] = cand[hit, first[hit]]
        pending = np.concatenate([rows[~hit], pending[rows.size :]])
    return out


def _permute_and_flip_one(gammas: list[Fraction], rng: RandomSource) -> int:
    """Visit the candidates in a uniformly random order (Fisher-Yates, drawn lazily) and
    return the first whose coin Bernoulli(exp(-gamma_i)) succeeds."""
    order = list(range(len(gammas)))
    for t in range(len(order)):
        j = t + rng.randbelow(len(order) - t)
        order[t], order[j] = order[j], order[t]
        if bernoulli_exp_neg(gammas[order[t]], rng):
            return order[t]
    raise AssertionError("unreachable: a maximiser has gamma = 0 and always succeeds")


def _permute_and_flip_one_ratio(gammas: list[tuple[int, int]], rng: RandomSource) -> int:
    """:func:`_permute_and_flip_one` on ``gamma_i = a_i / b_i`` in lowest terms: the same draws."""
    order = list(range(len(gammas)))
    for t in range(len(order)):
        j = t + randbelow(len(order) - t, rng)
        order[t], order[j] = order[j], order[t]
        a, b = gammas[order[t]]
        if bernoulli_exp_neg_ratio(a, b, rng):
            return order[t]
    raise AssertionError("unreachable: a maximiser has gamma = 0 and always succeeds")


def _permute_and_flip_many(gammas: list[Fraction], count: int, rng: RandomSource) -> np.ndarray:
    """``count`` independent draws with exactly the distribution of
    :func:`_permute_and_flip_one`, vectorised.

    Why this is the same distribution: in permute-and-flip the coins ``C_i`` are
    independent of the order ``pi`` and of each other, and the output is the first
    ``i`` in ``pi`` with ``C_i = 1``; coins after it are never looked at, so flipping
    them as well changes nothing. Given the set ``S = {i : C_i = 1}`` (never empty: a
    maximiser's coin has ``gamma = 0``), the first element of ``S`` in a uniformly random
    order is uniform on ``S``. So: flip all ``k`` coins, then return a uniformly random
    member of ``S`` (an exact uniform integer below ``|S|`` picks it).
    """
    k = len(gammas)
    coins = ExpCoins(gammas)
    out = np.empty(count, dtype=np.int64)
    block = max(1, _MAX_BATCH // k)
    for start in range(0, count, block):
        n = min(block, count - start)
        heads = coins(np.tile(np.arange(k), n), rng).reshape(n, k)
        size = heads.sum(axis=1)
        if not size.all():
            raise AssertionError("unreachable: a maximiser has gamma = 0 and always succeeds")
        rank = np.empty(n, dtype=np.int64)
        for s in np.unique(size).tolist():  # one exact uniform draw per distinct |S|
            rows = np.flatnonzero(size == s)
            rank[rows] = uniform_below(s, rows.size, rng)
        pick = heads & (np.cumsum(heads, axis=1) == (rank + 1)[:, None])
        out[start : start + n] = pick.argmax(axis=1)
    return out


# --- mechanisms --------------------------------------------------------------------------


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class _Selection(Mechanism):
    """Shared configuration and validation of the selection mechanisms."""

    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    sensitivity: float = param_field(
        doc="utility sensitivity Delta_u: the most any one candidate's utility can change between neighbours",
        **POSITIVE,
    )
    monotonic: bool = param_field(
        default=False,
        converter=lambda x: _flag("monotonic", x),
        doc="true only if all utilities always move in the same direction between neighbours (eps/Delta scaling)",
    )
    neighbouring: str = param_field(
        default="add_remove",
        choices=("add_remove", "replace_one"),
        doc="the neighbour relation the utility sensitivity is proven for; the charged event carries it",
    )

    _immutable: ClassVar[bool] = True

    @functools.cached_property
    def weight_exponent(self) -> Fraction:
        """``c`` in the weights ``exp(c u)``: exactly ``epsilon / (2 sensitivity)``, or
        ``epsilon / sensitivity`` when monotonic (as rationals, no rounding)."""
        factor = 1 if self.monotonic else 2
        return Fraction(self.epsilon) / (factor * Fraction(self.sensitivity))

    @abstractmethod
    def _variant(self) -> str:
        """The ``variant`` of the charged :class:`Exponential` event."""

    def privacy_event(self) -> PrivacyEvent:
        return self._event

    @functools.cached_property
    def _event(self) -> PrivacyEvent:
        eps = epsilon_spent(
            weight_exponent=self.weight_exponent, sensitivity=self.sensitivity, monotonic=self.monotonic
        )
        relation = None if self.neighbouring == "add_remove" else self.neighbouring  # None: the default
        return Exponential(epsilon=eps, variant=self._variant(), neighbouring=relation)

    def validate_input(self, value: Any) -> np.ndarray:
        return utility_array("utilities", value)

    def output_law(self, value: np.ndarray) -> OutputLaw | None:
        """The law of the selected index (:meth:`_pmf` of the exact weights)."""
        return categorical_law(self._pmf(self.gammas(value)))

    def _pmf(self, gammas: list[Fraction]) -> np.ndarray:
        """``P(i)`` for every candidate: the exponential mechanism's law by default."""
        return exponential_pmf(gammas)

    def gammas(self, utilities: np.ndarray) -> list[Fraction]:
        """``gamma_i = c (u_max - u_i) >= 0`` as exact rationals; candidate ``i`` has weight
        ``exp(-gamma_i)``, proportional to ``exp(c u_i)``."""
        us = [Fraction(x) for x in utilities.tolist()]
        top = max(us)
        c = self.weight_exponent
        return [c * (top - u) for u in us]

    def gamma_ratios(self, utilities: np.ndarray) -> list[tuple[int, int]]:
        """:meth:`gammas` as ``(numerator, denominator)`` in lowest terms, computed in
        integers (the scalar releases' path; the same rationals)."""
        values = utilities.tolist()  # all floats or all ints: max compares them exactly
        us = [x.as_integer_ratio() for x in values]
        tp, tq = max(values).as_integer_ratio()
        c = self.weight_exponent
        cn, cd = c.numerator, c.denominator
        out = []
        for p, q in us:
            num, den = cn * (tp * q - p * tq), cd * tq * q
            g = math.gcd(num, den)
            out.append((num // g, den // g))
        return out


@attrs.frozen(kw_only=True)
class ExponentialMechanism(_Selection):
    """The exponential mechanism: select candidate ``i`` with probability proportional to
    ``exp(epsilon u_i / (2 sensitivity))`` (``exp(epsilon u_i / sensitivity)`` if
    ``monotonic``).

    Guarantee: ``epsilon``-DP when every utility changes by at most ``sensitivity``
    between neighbouring datasets (and, with ``monotonic=True``, all utilities change in
    the same direction) -- McSherry-Talwar 2007, Theorem 6. It is also
    ``epsilon``-bounded-range, hence ``epsilon**2 / 8``-zCDP (Durfee-Rogers 2019;
    Cesar-Rogers 2021). Charged as ``Exponential(epsilon, variant="exponential")``.

    Exact sampling by rejection: draw ``i`` uniformly from the ``k`` candidates and
    accept with probability ``exp(-gamma_i)``, ``gamma_i = c (u_max - u_i)`` an exact
    rational, drawn by Canonne-Kamath-Steinke 2020 Algorithm 1; otherwise retry. A trial
    returns ``i`` with probability ``exp(-gamma_i) / k``, proportional to
    ``exp(c u_i)``, and trials are independent, so the first accepted index has exactly
    the exponential mechanism's distribution. The maximiser has ``gamma = 0``, so a trial
    is accepted with probability at least ``1/k``: at most ``k`` trials are expected.
    The input is the utility vector (1-d, finite); the output is the chosen index.

    **Input range.** Every finite float64, int64 or uint64 utility (converted to exact
    rationals: nothing overflows, nothing is clamped); NaN and inf are refused before the
    charge. **Timing depends on the utilities**: the rejection sampler needs about
    ``k / sum_i exp(-gamma_i)`` trials, from 1 (equal utilities) to ``k`` (one clear
    leader). Measured (``benchmarks/data_timing.py``, 100 candidates, epsilon 1): 0.34 ms
    with equal utilities, 2.8 ms with one leader and the others 100 below -- 8.3x. Run
    releases where their timing is not observable.
    """

    name: ClassVar[str] = "exponential"

    def _variant(self) -> str:
        return "exponential"

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> int:
        return _exponential_one_ratio(self.gamma_ratios(value), rng)

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> list[int]:
        return _exponential_many(self.gammas(value), count, rng).tolist()


@attrs.frozen(kw_only=True)
class PermuteAndFlip(_Selection):
    """Permute-and-flip: visit the candidates in a uniformly random order and return the
    first ``i`` for which a coin with probability ``exp(epsilon (u_i - u_max) /
    (2 sensitivity))`` (``/ sensitivity`` if ``monotonic``) comes up heads.

    Guarantee: ``epsilon``-DP when every utility changes by at most ``sensitivity``
    between neighbouring datasets (McKenna-Sheldon 2020, NeurIPS). With
    ``monotonic=True`` (all utilities change in the same direction) the doubled exponent
    is ``epsilon``-DP too: the mechanism equals report-noisy-max with one-sided
    exponential noise of scale ``sensitivity / epsilon`` (Ding et al. 2021), and for
    monotonic utilities the threshold a candidate's noise must beat moves by at most
    ``sensitivity``, as in the report-noisy-max proof of Dwork-Roth 2014, Claim 3.9
    (tests/test_selection.py checks both cases by exact enumeration). Its expected
    utility is never below the exponential mechanism's at the same epsilon
    (McKenna-Sheldon 2020). It is not ``epsilon``-bounded-range, so it is charged as
    ``Exponential(epsilon, variant="permute_and_flip")``.

    Exact sampling: the order is a Fisher-Yates shuffle from exact uniform CSPRNG
    integers and each coin is Canonne-Kamath-Steinke 2020 Algorithm 1 on the exact
    rational ``gamma_i = c (u_max - u_i)``. The maximiser's coin always succeeds, so at
    most ``k`` coins are flipped. ``release_many`` flips every coin and returns a
    uniformly random head, which has the same distribution (see
    :func:`_permute_and_flip_many`). The input is the utility vector; the output the index.

    **Input range.** Every finite float64, int64 or uint64 utility (converted to exact
    rationals: nothing overflows, nothing is clamped); NaN and inf are refused before the
    charge. **Timing depends on the utilities**: the number of coins flipped grows as the
    utilities spread, up to ``k``. Measured (``benchmarks/data_timing.py``, 100
    candidates, epsilon 1): 0.35 ms with equal utilities, 1.7 ms with one leader and the
    others 100 below -- 4.8x. Run releases where their timing is not observable.
    """

    name: ClassVar[str] = "permute-and-flip"

    def _variant(self) -> str:
        return "permute_and_flip"

    def _pmf(self, gammas: list[Fraction]) -> np.ndarray:
        return permute_and_flip_pmf(gammas)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> int:
        return _permute_and_flip_one_ratio(self.gamma_ratios(value), rng)

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> list[int]:
        return _permute_and_flip_many(self.gammas(value), count, rng).tolist()


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class ReportNoisyMax(_Selection):
    """Report-noisy-max: the index of the largest ``u_i + Z_i`` with i.i.d. noise ``Z_i`` of
    scale ``2 sensitivity / epsilon`` (``sensitivity / epsilon`` if ``monotonic``).

    * ``noise="gumbel"``: Gumbel noise. By the Gumbel-max identity the output has exactly
      the exponential mechanism's distribution, ``P(i) ~ exp(epsilon u_i / (2 sensitivity))``
      (e.g. Durfee-Rogers 2019), so it is ``epsilon``-DP and ``epsilon``-bounded-range
      (McSherry-Talwar 2007; Cesar-Rogers 2021). Charged as
      ``Exponential(epsilon, variant="report_noisy_max_gumbel")``.
    * ``noise="exponential"``: one-sided exponential noise. Its output distribution is
      exactly permute-and-flip's (Ding, Kifer, Saghaian, Steinke, Wang, Xiao, Zhang 2021,
      "The Permute-and-Flip Mechanism is Identical to Report-Noisy-Max with Exponential
      Noise"), so it is ``epsilon``-DP (McKenna-Sheldon 2020). Charged as
      ``Exponential(epsilon, variant="report_noisy_max_exponential")``.

    No continuous noise is drawn: the output is sampled from its exact distribution with
    the exact rejection sampler of :class:`ExponentialMechanism` (Gumbel) or the exact
    permute-and-flip sampler of :class:`PermuteAndFlip` (exponential), on exact rationals
    and uniform CSPRNG integers. Only the argmax is released, never the noisy values.

    **Input range.** Every finite float64, int64 or uint64 utility (converted to exact
    rationals: nothing overflows, nothing is clamped); NaN and inf are refused before the
    charge. **Timing depends on the utilities**, as for the sampler it uses: measured
    (``benchmarks/data_timing.py``, 100 candidates, epsilon 1, equal utilities against one
    leader with the others 100 below) 4.9x with exponential noise (permute-and-flip's
    sampler) and about 8x with Gumbel noise (the exponential mechanism's). Run releases
    where their timing is not observable.
    """

    name: ClassVar[str] = "report-noisy-max"
    noise: str = param_field(
        default="gumbel",
        choices=NOISE_KINDS,
        doc="gumbel (= exponential mechanism) or exponential (= permute-and-flip)",
    )

    def _variant(self) -> str:
        return "report_noisy_max_gumbel" if self.noise == "gumbel" else "report_noisy_max_exponential"

    def _pmf(self, gammas: list[Fraction]) -> np.ndarray:
        return exponential_pmf(gammas) if self.noise == "gumbel" else permute_and_flip_pmf(gammas)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> int:
        gammas = self.gamma_ratios(value)
        if self.noise == "gumbel":
            return _exponential_one_ratio(gammas, rng)
        return _permute_and_flip_one_ratio(gammas, rng)

    def _sample_many(self, value: np.ndarray, count: int, rng: RandomSource, data: Any) -> list[int]:
        gammas = self.gammas(value)
        if self.noise == "gumbel":
            return _exponential_many(gammas, count, rng).tolist()
        return _permute_and_flip_many(gammas, count, rng).tolist()
