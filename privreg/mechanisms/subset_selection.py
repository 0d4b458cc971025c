"""Subset Selection, a local randomizer that reports a random d-subset of the domain.

Each user holds one item ``z`` of a domain ``Z = {0, ..., s-1}`` and reports a set of
``d = ceil(s / (e^eps + 1))`` items. The set contains ``z`` with probability
``p = d e^eps / (d e^eps + s - d)`` (then the other ``d - 1`` members are a uniformly
random subset of ``Z \\ {z}``); otherwise it is a uniformly random ``d``-subset of
``Z \\ {z}``. With ``d = 1`` this is k-ary randomized response.

References: S. Wang, L. Huang, P. Wang, Y. Nie, H. Xu, W. Yang, X.-Y. Li, C. Qiao,
"Mutual information optimally local private discrete distribution estimation", arXiv
1607.08025, 2016 (the k-subset mechanism); M. Ye and A. Barg, "Optimal schemes for
discrete distribution estimation under local differential privacy", ISIT 2017 and IEEE
Trans. Inf. Theory 64(8), 2018; Z. Sun, P. Kairouz, H. Sun, A. Gascon, A. T. Suresh,
"Private federated discovery of out-of-vocabulary words for Gboard", arXiv 2404.11607,
2024, Algorithm 1 (the formulation implemented here).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.charging import Charger
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.laws import DiscreteLaw, OutputLaw
from privreg.core.params import POSITIVE, param_field, param_fields
from privreg.core.randomizer import FrequencyEstimate, Randomizer
from privreg.core.randomness import RandomSource, resolve_random
from privreg.mechanisms.probabilities import exp_lower_bound
from privreg.mechanisms.randomized_response import category_array
from privreg.mechanisms.subset_histogram import MAX_REPORTS, subset_histogram
from privreg.noise import uniform_below
from privreg.noise.stream import keyed_generator

__all__ = ["SubsetSelection", "uniform_chunked", "uniform_subsets"]

_BITS = 53
_ONE = 1 << _BITS
_MAX_DOMAIN = 1 << 62  # uniform_below draws below at most 2**62
_CHUNK = 1 << 20  # draws per uniform_below call (see uniform_chunked)


#: Largest number of d-subsets listed by SubsetSelection.output_law.
MAX_LISTED_SUBSETS = 200_000


def uniform_chunked(bound: int, size: int, rng: RandomSource) -> np.ndarray:
    """``uniform_below(bound, size, rng)`` in calls of at most 2**20 draws, concatenated
    (still independent exact uniforms). Smaller calls are faster (cache-sized working
    arrays) and keep each ``rng.random_bytes`` request below 2**28 bytes, which
    ``InsecureReproducibleRandom`` cannot serve (``random.Random.randbytes`` overflows)."""
    if size <= _CHUNK:
        return uniform_below(bound, size, rng)
    return np.concatenate([uniform_below(bound, min(_CHUNK, size - i), rng) for i in range(0, size, _CHUNK)])


def uniform_subsets(n: int, d: int, m: int, rng: RandomSource) -> np.ndarray:
    """An ``(n, d)`` int64 array whose rows are independent, uniformly random
    ``d``-subsets of ``{0, ..., m-1}`` (the order of the entries within a row is not
    uniform; callers that release a row must sort it).

    Method: every entry starts as an exact uniform draw on ``[0, m)``; in each round, an
    entry that repeats a value held by an entry to its left in the same row is redrawn,
    until no row has a repeat. Which entries are redrawn depends only on the pattern of
    equalities within the row (never on the values themselves), so the whole procedure
    commutes with every relabelling of ``{0, ..., m-1}``; the draws are exchangeable under
    relabelling, hence each row's final set is invariant under all permutations of the
    ground set, i.e. uniform over the ``C(m, d)`` subsets. Rows consume their draws
    independently of one another's values, so rows are independent. Each redraw lands on
    a new value with probability at least ``(m - d + 1) / m``, so the number of rounds is
    small (logarithmic in ``n`` for ``d <= m/2 + 1``).
    """
    n = v.check_int("n", n, minimum=0)
    d = v.check_int("d", d, minimum=1)
    m = v.check_int("m", m, minimum=1)
    if d > m:
        raise PrivregValueError(f"cannot draw {d} distinct items from a set of {m}")
    out = uniform_chunked(m, n * d, rng).reshape(n, d)
    if d == 1 or n == 0:
        return out
    srt = np.sort(out, axis=1)
    rows = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
    while rows.size:
        block = out[rows]
        order = np.argsort(block, axis=1, kind="stable")  # equal values keep column order
        ordered = np.take_along_axis(block, order, axis=1)
        repeat = np.zeros(block.shape, dtype=bool)
        repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]  # not the leftmost copy
        r, c = np.nonzero(repeat)
        out[rows[r], order[r, c]] = uniform_chunked(m, r.size, rng)
        block = out[rows]
        srt = np.sort(block, axis=1)
        rows = rows[(srt[:, 1:] == srt[:, :-1]).any(axis=1)]
    return out


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class SubsetSelection(Randomizer):
    """Subset Selection over the domain ``{0, ..., s-1}`` (Sun et al. 2024, Algorithm 1;
    Wang et al. 2016; Ye-Barg 2017/2018).

    **Report.** One row per user of an ``(n, d)`` int64 array holding the ``d`` distinct
    item codes of the user's subset in increasing order, ``d = ceil(s / (e^eps + 1))``.
    Sorting makes the row a canonical encoding of the *set*: the position of an item in
    the row carries no information (in particular not whether it is the true item). This
    costs ``8 d`` bytes per user, against ``s`` bytes for a membership matrix, so it
    suits the large domains of the paper (``s`` up to about ``10^6``); note that ``d``
    grows like ``s / (e^eps + 1)``, so a small epsilon over a large domain makes every
    report large.

    **Dummy item.** In LDP TrieHH (Sun et al., Algorithm 2) a user runs Subset Selection
    over ``Z_i U {gamma}``, where the dummy ``gamma`` pads users with fewer than ``B``
    prefixes, and the server drops ``gamma`` when it turns the report into a multi-hot
    vote over ``Z_i``. This class is the randomizer alone: it works over a domain of
    ``s`` codes; to reproduce the paper, give ``gamma`` a code of its own (e.g. ``s-1``
    with ``s = |Z_i| + 1``) and ignore that code's column of :meth:`item_counts`.

    **Privacy (epsilon-LDP, tight).** For a d-subset ``S`` and input ``z``,
    ``Pr[S | z] = p / C(s-1, d-1)`` if ``z in S`` and ``(1-p) / C(s-1, d)`` otherwise
    (a kept input is completed by a uniform (d-1)-subset of the ``s-1`` other items; a
    dropped one is replaced by a uniform d-subset of them). For two inputs ``z, z'``
    the ratio ``Pr[S | z] / Pr[S | z']`` is 1 when ``S`` holds both or neither, and
    otherwise ``r`` or ``1/r`` with
    ``r = p C(s-1, d) / ((1-p) C(s-1, d-1)) = p (s-d) / ((1-p) d)``, attained by every
    ``S`` that holds ``z`` but not ``z'``; so the report is exactly ``|ln r|``-LDP. The
    paper's ``p`` gives ``p / (1-p) = d e^eps / (s-d)``, i.e. ``r = e^eps``.
    Here ``p`` is realised as ``N / 2^53`` with
    ``N = floor(L d 2^53 / (s - d + L d))`` and ``L <= e^eps`` a certified rational lower
    bound (:func:`exp_lower_bound`). Then ``N (s-d) <= L d (2^53 - N)``, i.e. the
    realised ``r <= L <= e^eps``, with no floating point in the inequality. Since ``r``
    increases with ``N`` and ``N`` is at most one below the real solution of
    ``r = L``, the realised ``ln r >= eps - 2^-50 - 2^-53 / (p (1-p))`` (approximately),
    so essentially no budget is lost unless ``1 - p`` is below about ``2^-40`` (where the
    realised guarantee is strictly better than claimed). Parameters with ``r <= 1``
    (only for epsilon below about ``2 10^-15``) are refused, which also makes
    ``1/r < e^eps``. Keep decisions compare an exact uniform 53-bit integer with ``N``
    and every subset is drawn from exact uniform integers (:func:`uniform_subsets`), so
    the realised output distribution is exactly the one above.

    **Estimator.** An item ``j`` is in a user's report with probability ``p`` if it is
    the user's item and ``q = (d - p) / (s - 1)`` otherwise (Sun et al., proof of
    Lemma 1). With ``c_j`` reports containing ``j`` among ``n``,
    ``(c_j - n q) / (p - q)`` is an unbiased estimate of the number of users holding
    ``j``, with variance ``(n_j p (1-p) + (n - n_j) q (1-q)) / (p - q)^2`` (reports are
    independent). Units: counts of users.
    """

    name: ClassVar[str] = "subset-selection"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    s: int = param_field(
        minimum=2,
        maximum=_MAX_DOMAIN,
        doc="domain size: items are coded 0..s-1 (reports hold d = ceil(s/(e^eps+1)) items)",
    )

    def __attrs_post_init__(self) -> None:
        if self.privacy_ratio <= 1:
            raise PrivregValueError(
                f"epsilon={self.epsilon!r} is too small for subset selection over s={self.s} "
                f"items to be realised with 53-bit probabilities (the realised keep ratio "
                f"would not exceed 1); use epsilon >= 1e-14"
            )

    @property
    def epsilon0(self) -> float:
        return self.epsilon

    @property
    def subset_size(self) -> int:
        """``d = ceil(s / (e^epsilon + 1))``, the number of items in every report.

        When ``s / (e^epsilon + 1)`` is within a relative ``10^-9`` of an integer, that
        integer is used: it is then an exact solution for the intended epsilon, which was
        rounded to a float (e.g. ``epsilon = log(2), s = 3`` gives 1, where the ceiling of
        the float computation could give 2, with twice the variance). Privacy does not
        depend on ``d``: any ``1 <= d < s`` with the matching ``p`` is epsilon-LDP."""
        if self.epsilon > math.log(self.s) + 1:  # s / (e^eps + 1) < 1/e (and no overflow)
            return 1
        x = self.s / (math.exp(self.epsilon) + 1.0)
        nearest = round(x)
        d = nearest if abs(x - nearest) <= 1e-9 * max(1.0, x) else math.ceil(x)
        return min(max(d, 1), self.s - 1)

    @property
    def keep_numerator(self) -> int:
        """The true item is in the report with probability keep_numerator / 2**53."""
        d, s = self.subset_size, self.s
        low = exp_lower_bound(self.epsilon)
        return math.floor(low * d * _ONE / (s - d + low * d))

    @property
    def keep_probability(self) -> Fraction:
        """Realised ``p`` (at most the paper's ``d e^eps / (d e^eps + s - d)``)."""
        return Fraction(self.keep_numerator, _ONE)

    @property
    def other_probability(self) -> Fraction:
        """Realised ``q = (d - p) / (s - 1)``: probability that an item other than the
        user's is in the report."""
        return (self.subset_size - self.keep_probability) / (self.s - 1)

    @property
    def privacy_ratio(self) -> Fraction:
        """Realised worst-case likelihood ratio ``p (s-d) / ((1-p) d)`` (<= e^epsilon)."""
        p, d = self.keep_probability, self.subset_size
        return p * (self.s - d) / ((1 - p) * d)

    @property
    def admits_fmt23_decomposition(self) -> bool:
        """Whether this randomizer is in the class for which the FMT23 shuffle bound
        (``"fmt23-numerical"``) holds after its erratum, by the criterion of
        :func:`privreg.accountant.shuffle.admits_fmt23_decomposition`:
        ``min_x R(x)(S) (e^eps + 1) >= `` the two largest ``R(x)(S)``, for every output S.

        In closed form: a column's smallest entry is ``(1-p)/C(s-1, d)`` (an input outside
        S; one exists since ``d < s``), its two largest are the inputs in S, so with
        ``d = 1`` (k-ary randomized response) the condition is ``r <= e^eps`` (true) and with
        ``d >= 2`` it is ``2 r <= e^eps + 1`` for the realised ratio ``r``
        (:attr:`privacy_ratio`), which fails for every epsilon this class accepts
        (``r`` is within ``2^-50`` of ``e^eps``). Tests compare it with the matrix check."""
        if self.subset_size == 1:
            return True
        return 2 * self.privacy_ratio <= Fraction(math.exp(self.epsilon)) + 1

    def validate_inputs(self, inputs: Any) -> np.ndarray:
        return category_array("inputs", inputs, self.s)

    def output_law(self, value: Any) -> OutputLaw | None:
        """The report of a user holding item ``value``: a d-subset ``S``, coded as the
        bitmask ``sum 2**i``, with probability ``p / C(s-1, d-1)`` when ``value`` is in
        ``S`` and ``(1 - p) / C(s-1, d)`` otherwise (the realised ``p``). None beyond
        :data:`MAX_LISTED_SUBSETS` subsets or 62 items."""
        s, d, x = self.s, self.subset_size, int(value)
        if s > 62 or math.comb(s, d) > MAX_LISTED_SUBSETS:
            return None
        p = self.keep_probability
        inside = math.log(p) - math.log(math.comb(s - 1, d - 1))
        outside = math.log(1 - p) - math.log(math.comb(s - 1, d))
        codes, logs = [], []
        for subset in itertools.combinations(range(s), d):
            codes.append(sum(1 << i for i in subset))
            logs.append(inside if x in subset else outside)

        def bitmask(reports: Any) -> np.ndarray:
            rows = np.asarray(reports, dtype=np.int64).reshape(-1, d)
            return np.left_shift(np.int64(1), rows).sum(axis=1)

        return DiscreteLaw(support=np.array(codes, dtype=np.int64), log_pmf=np.array(logs), encode=bitmask)

    def _randomize(self, inputs: np.ndarray, rng: RandomSource) -> np.ndarray:
        n, d = inputs.size, self.subset_size
        keep = uniform_chunked(_ONE, n, rng) < self.keep_numerator
        # a uniform d-subset of the s-1 items other than the input, coded 0..s-2 ...
        out = uniform_subsets(n, d, self.s - 1, rng)
        out += out >= inputs[:, None]  # ... mapped onto {0..s-1} \ {input}
        # a kept input replaces a uniformly random member: removing a uniform member of a
        # uniform d-subset leaves a uniform (d-1)-subset of the other items
        rows = np.flatnonzero(keep)
        cols = uniform_chunked(d, rows.size, rng) if d > 1 else np.zeros(rows.size, dtype=np.int64)
        out[rows, cols] = inputs[rows]
        out.sort(axis=1)  # canonical order: the row reveals the set and nothing else
        return out

    def vote_counts(
        self, inputs: Any, *, charger: Charger, rng: RandomSource | None = None, label: str = ""
    ) -> np.ndarray:
        """How many reports contain each item (length ``s``, int64) when every entry of
        ``inputs`` sends one report: the :meth:`item_counts` of
        ``randomize(inputs).reports``, sampled in aggregate without forming the reports
        (:meth:`vote_counts_from_histogram`)."""
        values = self.validate_inputs(inputs)
        return self.vote_counts_from_histogram(
            np.bincount(values, minlength=self.s), charger=charger, rng=rng, label=label
        )

    def vote_counts_from_histogram(
        self, counts: Any, *, charger: Charger, rng: RandomSource | None = None, label: str = ""
    ) -> np.ndarray:
        """:meth:`vote_counts` for ``counts[x]`` reports with true item ``x`` (length
        ``s``). Charges ``charger`` for ``sum(counts)`` reports first, then samples with
        :func:`~.subset_histogram.subset_histogram`: the law of the summed reports up to
        double-precision rounding, AES-CTR randomness keyed from ``rng``, ``O(s log s)``
        instead of ``O(n d)``. For simulating many devices; a device itself runs
        :meth:`randomize`."""
        c = np.asarray(counts)
        if c.shape != (self.s,) or (c.size and c.dtype.kind not in "iu") or (c < 0).any():
            raise PrivregValueError(
                f"counts must be {self.s} non-negative integers (one per item); got shape {c.shape}, dtype {c.dtype}"
            )
        # checked before the charge (the sampler refuses more reports than this after it)
        if c.size and (int(c.max()) > MAX_REPORTS or int(c.astype(np.int64).sum()) > MAX_REPORTS):
            raise PrivregValueError(
                f"counts must sum to at most {MAX_REPORTS} reports per histogram; split the reports into batches"
            )
        rng = resolve_random(rng)
        self.charge_reports(int(c.sum()), charger=charger, rng=rng, label=label)
        return subset_histogram(
            c, subset_size=self.subset_size, keep_probability=float(self.keep_probability), gen=keyed_generator(rng)
        )

    def validate_reports(self, reports: Any) -> np.ndarray:
        """``reports`` as an ``(n, d)`` int64 array of subsets of ``[0, s)``; raise
        on a wrong shape, dtype, an item outside the domain, or a repeated item."""
        arr = np.asarray(reports)
        d = self.subset_size
        if arr.ndim != 2 or arr.shape[1] != d:
            raise PrivregValueError(
                f"reports must be a 2-d array of shape (n, {d}) (one {d}-subset per user); got shape {arr.shape}"
            )
        if arr.size and arr.dtype.kind not in "iu":
            raise PrivregTypeError(f"reports must hold integer item codes; got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        bad = (arr < 0) | (arr >= self.s)
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            raise PrivregValueError(f"reports[{i}, {j}] = {arr[i, j]} is outside the declared domain [0, {self.s})")
        srt = np.sort(arr, axis=1)
        rep = srt[:, 1:] == srt[:, :-1]
        if rep.any():
            i = int(np.flatnonzero(rep.any(axis=1))[0])
            raise PrivregValueError(f"reports[{i}] repeats an item; a report is a set of {d} distinct items")
        return arr

    def item_counts(self, reports: Any) -> np.ndarray:
        """How many reports contain each item (the paper's aggregated multi-hot vote
        vector, Algorithm 2 line 21), as an int64 array of length ``s``."""
        arr = self.validate_reports(reports)
        return np.bincount(arr.ravel(), minlength=self.s)

    def variance(self, true_counts: Any) -> np.ndarray:
        """Exact variance of :meth:`estimate`'s count for each item, given the true
        number of users holding each item (length ``s``; ``n`` is their sum)."""
        t = np.asarray(true_counts, dtype=np.float64)
        if t.shape != (self.s,) or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise PrivregValueError(f"true_counts must be {self.s} non-negative counts; got shape {t.shape}")
        return _variance(t, float(t.sum()), float(self.keep_probability), float(self.other_probability))

    def estimate(self, reports: np.ndarray) -> FrequencyEstimate:
        """Unbiased count of users per item, ``(c_j - n q) / (p - q)``, with the variance
        of each estimate evaluated at the estimate clipped to ``[0, n]``."""
        counts = self.item_counts(reports).astype(np.float64)
        n = float(np.asarray(reports).shape[0])
        p, q = float(self.keep_probability), float(self.other_probability)
        est = (counts - n * q) / (p - q)
        return FrequencyEstimate(counts=est, variance=_variance(np.clip(est, 0, n), n, p, q))


def _variance(c: np.ndarray, n: float, p: float, q: float) -> np.ndarray:
    return (c * p * (1 - p) + (n - c) * q * (1 - q)) / (p - q) ** 2
