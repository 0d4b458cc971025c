"""Privacy of LDP TrieHH: the charged event, its epsilons, and approximate k-anonymity.

Sun et al. 2024 (arXiv:2404.11607), Section 3:

* Theorem 1 -- item-level ``eps``-LDP: every report is one run of Subset Selection
  (Algorithm 1) on one prefix or the dummy ``gamma``, and each of a user's items reaches at
  most one report.
* Theorem 2 -- central ``(eps', delta)``-DP at item level for the final output and every
  intermediate prefix set, with ``eps'`` the amplification by shuffling of ``n = N*B``
  reports. The bound is computed by :mod:`privreg.accountant.shuffle`; its default is the
  Feldman-McMillan-Talwar 2021 numerical bound (valid for every eps0-LDP randomizer). The
  paper cites FMT 2023 Theorem 3.2, which after its erratum holds only for a class of
  randomizers that Subset Selection with ``d >= 2`` is not in (see that module), so
  ``bound="fmt23-numerical"`` is refused unless every layer's reports hold one item.
* Lemma 1 -- approximate k-anonymity (:func:`k_anonymity`).

Accounting. A user reports in exactly one layer of one pass (Algorithm 2, line 7; the
multi-pass variant uses disjoint users), so an item-level change touches one report of
one layer. Every layer is one shuffle of ``N*B`` reports of the same randomizer; layers
after it only post-process, layers before it are unaffected (adaptive parallel
composition). The whole run therefore costs exactly one
``Shuffled(LocalDP(eps), num_reports=N*B)`` event, charged once before any noise is drawn
(:func:`triehh_event`). Its inner ``LocalDP`` is Theorem 1's guarantee, and an accountant
composing the event gives Theorem 2's ``eps'`` (:func:`central_epsilon`).
"""

from __future__ import annotations

import math

import attrs
import numpy as np
from scipy import special, stats

from privreg.accountant import make_accountant
from privreg.accountant.shuffle import DEFAULT_SHUFFLE_BOUND
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import PrivacyEvent, Shuffled
from privreg.mechanisms import SubsetSelection

__all__ = [
    "triehh_event",
    "central_epsilon",
    "local_epsilon",
    "KAnonymity",
    "keep_probability_bound",
    "k_anonymity",
]


def triehh_event(
    *,
    randomizer: SubsetSelection,
    users_per_layer: int,
    contribution_bound: int,
    bound: str = DEFAULT_SHUFFLE_BOUND,
) -> Shuffled:
    """The event of a whole LDP TrieHH run (any number of layers and passes): the
    randomizer's own shuffled event for ``n = N*B`` reports (Theorem 2), naming the
    amplification ``bound`` accountants must apply. See the module docstring for why one
    event covers every layer. ``bound="fmt23-numerical"`` is refused for a randomizer
    outside the FMT23 class (``d >= 2``; :attr:`SubsetSelection.admits_fmt23_decomposition`)."""
    if not isinstance(randomizer, SubsetSelection):
        raise PrivregTypeError(f"randomizer must be a SubsetSelection; got {randomizer!r}")
    if bound == "fmt23-numerical" and not randomizer.admits_fmt23_decomposition:
        raise PrivregValueError(
            f"bound='fmt23-numerical' does not hold for Subset Selection with d="
            f"{randomizer.subset_size} >= 2 items per report (s={randomizer.s}, epsilon="
            f"{randomizer.epsilon}): it is outside the class the FMT23 bound holds for after its "
            f"erratum; use bound='fmt21-numerical' (the default, valid for every eps0-LDP randomizer)"
        )
    n = v.check_int("users_per_layer", users_per_layer, minimum=1) * v.check_int(
        "contribution_bound", contribution_bound, minimum=1
    )
    event = randomizer.privacy_event(num_reports=n, shuffled=True)
    if not isinstance(event, Shuffled):  # a subclass overriding privacy_event broke its contract
        raise PrivregTypeError(
            f"{type(randomizer).__name__}.privacy_event(shuffled=True) must return a Shuffled event; got {event!r}"
        )
    return attrs.evolve(event, bound=bound)


def central_epsilon(event: PrivacyEvent, delta: float) -> float:
    """The central epsilon at ``delta`` of the charged ``event`` (Theorem 2), as the basic
    accountant composes it (the shuffle bound the event names, read at ``delta``)."""
    delta = v.check_delta("delta", delta, allow_zero=False)
    return make_accountant("basic", event_delta=delta, neighbouring="replace_one").compose(event).epsilon(delta)


def local_epsilon(event: Shuffled) -> float:
    """The item-level local epsilon of one report (Theorem 1): the accountant's pure
    epsilon of the event's inner ``LocalDP``."""
    if not isinstance(event, Shuffled):
        raise PrivregTypeError(f"event must be a Shuffled event; got {event!r}")
    return make_accountant("basic", neighbouring="replace_one").compose(event.event).epsilon(0.0)


# --------------------------------------------------------------------- k-anonymity


@attrs.frozen(kw_only=True)
class KAnonymity:
    """Lemma 1 for one configuration.

    ``k`` is the largest count such that ``Pr(f(k) >= tau) <= 1 - alpha`` is certified,
    so outputs satisfy alpha-approximate k-anonymity (``None``: not even ``k = 0`` is
    certified; Lemma 1 then gives no guarantee). ``certified`` is the certified upper bound
    on ``Pr(f(k) >= tau)`` at that ``k`` and ``independent`` the value of the same
    probability if the vote counts of tau were independent (an approximation, for
    comparison). ``s, d, p, q`` are Lemma 1's, ``reports`` is ``N*B``.
    """

    k: int | None
    alpha: float
    certified: float
    independent: float
    s: int
    d: int
    p: float
    q: float
    reports: int


def _kl(a: float, b: np.ndarray) -> np.ndarray:
    """Relative entropy ``KL(Bern(a) || Bern(b))`` in nats, elementwise in ``b``."""
    return special.xlogy(a, a) - special.xlogy(a, b) + special.xlog1py(1 - a, -a) - special.xlog1py(1 - a, -b)


class _Lemma1:
    """Shared pieces of Lemma 1 for one configuration (see :func:`keep_probability_bound`)."""

    def __init__(self, *, epsilon: float, reports: int, max_prefixes: int, alphabet_size: int) -> None:
        self.eta = v.check_int("max_prefixes", max_prefixes, minimum=1)
        self.s = self.eta * v.check_int("alphabet_size", alphabet_size, minimum=2) + 1
        self.n = v.check_int("reports", reports, minimum=1)
        ss = SubsetSelection(epsilon=epsilon, s=self.s)
        self.d = ss.subset_size
        self.p, self.q = float(ss.keep_probability), float(ss.other_probability)
        m, big_m = self.d - 2, self.s - 1  # tau: n uniform (d-2)-subsets of s-1 items
        if m <= 0:  # tau >= 0 only: Lemma 1 certifies nothing
            self.cut = 0
            self.tau_cdf_upper = np.zeros(0)
            self.tau_cdf_independent = np.zeros(0)
            return
        rate = m / big_m
        hi = int(math.ceil(self.n * rate + 60 * math.sqrt(self.n * rate) + 60))
        t = np.arange(hi + 2)
        pi = stats.binom.sf(t - 1, self.n, rate)  # pi[t] = Pr(C_j >= t), each count Bin(n, m/M)
        a = (self.eta - 1) / big_m
        # Pr(tau <= t) = Pr(Y_{t+1} <= eta - 1), Y_t = #{j : C_j >= t} a sum of negatively
        # associated indicators: the Chernoff-Hoeffding lower tail holds (Dubhashi-Ranjan 1998)
        chernoff = np.where(a < pi[1:], np.exp(-big_m * _kl(a, np.clip(pi[1:], 1e-300, 1.0))), 1.0)
        upper = np.minimum(chernoff, 1.0)
        self.cut = int(np.argmax(upper >= 1.0)) if (upper >= 1.0).any() else upper.size
        self.tau_cdf_upper = upper[: self.cut]  # Pr(tau <= t) <= upper[t]; 1 from cut on
        self.tau_cdf_independent = stats.binom.cdf(self.eta - 1, big_m, pi[1:])[: self.cut]

    def pmf_below_cut(self, k: int) -> np.ndarray:
        """``Pr(f(k) = t)`` for ``t < cut``, ``f(k) = Bin(k, p) + Bin(n - k, q)``."""
        t = np.arange(self.cut)
        own = stats.binom.pmf(t[: min(k, self.cut - 1) + 1], k, self.p)
        rest = stats.binom.pmf(t, self.n - k, self.q)
        return np.convolve(own, rest)[: self.cut]

    def probabilities(self, k: int) -> tuple[float, float]:
        """(certified upper bound, independence approximation) of ``Pr(f(k) >= tau)``."""
        if self.cut == 0:
            return 1.0, 1.0
        pmf = self.pmf_below_cut(k)
        beyond = max(0.0, 1.0 - float(pmf.sum()))  # Pr(f(k) >= cut), where Pr(tau <= t) <= 1
        upper = beyond + float(pmf @ self.tau_cdf_upper)
        approx = beyond + float(pmf @ self.tau_cdf_independent)
        return min(upper * (1 + 1e-9) + 1e-12, 1.0), min(approx, 1.0)


def keep_probability_bound(
    k: int,
    *,
    epsilon: float,
    users_per_layer: int,
    contribution_bound: int,
    max_prefixes: int,
    alphabet_size: int,
) -> tuple[float, float]:
    """Lemma 1's ``Pr(f(k) >= tau)``: a prefix contributed at most ``k`` times is kept
    with at most this probability (for outputs of length at least
    ``log_|X| eta_max``, with ``|Z_i| = eta_max |X|``).

    Returns ``(certified, independent)``. ``certified`` is a rigorous upper bound:
    ``Pr(f >= tau) = E[G(tau)]`` with ``G(t) = Pr(f(k) >= t)`` non-increasing and ``f``
    independent of ``tau`` (the proof's coupling), so
    ``Pr(f >= tau) <= Pr(f >= T) + sum_{t<T} Pr(f = t) Pr(tau <= t)``. Each count behind
    ``tau`` is exactly ``Bin(N*B, (d-2)/(s-1))``; the counts are negatively associated
    (sums of independent uniform-subset indicators, Joag-Dev and Proschan 1983), hence so
    are the indicators ``C_j >= t``, and ``Pr(tau <= t) = Pr(#{j: C_j >= t+1} <= eta - 1)``
    obeys the Chernoff-Hoeffding bound ``exp(-(s-1) KL((eta-1)/(s-1) || Pr(C >= t+1)))``
    (Dubhashi and Ranjan 1998). Binomial terms come from scipy (relative error ~1e-12,
    and the result is rounded up by a relative 1e-9 plus 1e-12). ``independent`` evaluates the same
    sum with ``Pr(tau <= t)`` computed as if the counts were independent: not a bound,
    an approximation (the counts are only weakly dependent).
    """
    lemma = _Lemma1(
        epsilon=epsilon,
        reports=users_per_layer * contribution_bound,
        max_prefixes=max_prefixes,
        alphabet_size=alphabet_size,
    )
    k = v.check_int("k", k, minimum=0)
    if k > lemma.n:
        raise PrivregValueError(f"k must be at most N*B = {lemma.n}; got {k}")
    return lemma.probabilities(k)


def k_anonymity(
    *,
    epsilon: float,
    users_per_layer: int,
    contribution_bound: int,
    max_prefixes: int,
    alphabet_size: int,
    alpha: float = 0.95,
) -> KAnonymity:
    """Lemma 1: the largest ``k`` for which LDP TrieHH is certified alpha-approximately
    k-anonymous, i.e. ``Pr(f(k) >= tau) <= 1 - alpha`` by the certified bound of
    :func:`keep_probability_bound` (which is non-decreasing in ``k``: ``p > q``).
    """
    alpha = v.check_probability("alpha", alpha, open_low=True, open_high=True)
    lemma = _Lemma1(
        epsilon=epsilon,
        reports=v.check_int("users_per_layer", users_per_layer, minimum=1)
        * v.check_int("contribution_bound", contribution_bound, minimum=1),
        max_prefixes=max_prefixes,
        alphabet_size=alphabet_size,
    )
    target = 1.0 - alpha

    def result(k: int | None, certified: float, independent: float) -> KAnonymity:
        return KAnonymity(
            k=k,
            certified=certified,
            independent=independent,
            alpha=alpha,
            s=lemma.s,
            d=lemma.d,
            p=lemma.p,
            q=lemma.q,
            reports=lemma.n,
        )

    upper, approx = lemma.probabilities(0)
    if upper > target:
        return result(None, upper, approx)
    lo, hi = 0, 1
    while hi <= lemma.n and lemma.probabilities(hi)[0] <= target:  # gallop, then bisect
        lo, hi = hi, 2 * hi
    hi = min(hi, lemma.n + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if lemma.probabilities(mid)[0] <= target:
            lo = mid
        else:
            hi = mid
    upper, approx = lemma.probabilities(lo)
    return result(lo, upper, approx)
