"""Exact vectorised coins: Bernoulli(p) for rationals p, and Bernoulli(exp(-gamma)) for
per-index rational gammas, from exact uniform CSPRNG integers (Canonne-Kamath-Steinke
2020, Algorithm 1). Used by the selection mechanisms.

Also the pieces of the fast discrete Gaussian's exact coin ``U < exp(-lambda)``: rigorous
integer bounds of ``exp(-lambda)`` (:func:`exp_neg_bounds`), a uniform whose bits are read
only as far as a comparison needs (:class:`LazyUniform`), and a float64 approximation of
``exp(-x)`` with a proven error bound (:func:`exp_neg_approx`) that lets most comparisons be
settled from the first 16 bits."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.noise.exact import bernoulli, bernoulli_exp_neg
from privreg.noise.vector import uniform_below

__all__ = [
    "bernoulli_many",
    "bernoulli_exp_neg_unit",
    "ExpCoins",
    "LazyUniform",
    "exp_neg_bounds",
    "exp_neg_approx",
    "EXP_NEG_APPROX_ERROR",
    "exp_neg_approx_one",
    "GEOMETRIC",
    "GEOMETRIC_TIE",
]

_DIGIT_BITS = 62  # uniform_below draws exact uniform integers below 2**62 in one pass
_ONE = Fraction(1)


def bernoulli_many(p: Fraction, size: int, rng: RandomSource) -> NDArray[np.bool_]:
    """``size`` independent draws, each True with probability exactly ``p`` (rational in
    [0, 1]), with any denominator.

    Exactness: let ``w_1, w_2, ...`` be independent uniform integers in ``[0, 2**62)``
    and ``U = sum_j w_j 2**(-62 j)``, uniform on [0, 1). Let ``d_1, d_2, ...`` be the
    base-``2**62`` digits of ``p`` (greedy expansion). ``U < p`` iff at the first ``j``
    with ``w_j != d_j``, ``w_j < d_j``; ties at every digit have probability zero. So
    comparing digit by digit, drawing a further word only while equal, returns True with
    probability ``P(U < p) = p``. The expected number of words per draw is just above 1.
    """
    out = np.zeros(size, dtype=bool)
    if size == 0 or p <= 0:
        return out
    if p >= 1:
        out[:] = True
        return out
    num, den = p.numerator, p.denominator
    todo = np.arange(size)
    while todo.size:
        digit, num = divmod(num << _DIGIT_BITS, den)
        words = uniform_below(1 << _DIGIT_BITS, todo.size, rng)
        decided = words != digit
        out[todo[decided]] = words[decided] < digit
        todo = todo[~decided]
    return out


def bernoulli_exp_neg_unit(gamma: Fraction, size: int, rng: RandomSource) -> NDArray[np.bool_]:
    """CKS 2020 Algorithm 1 for ``gamma`` in [0, 1], vectorised: ``K = 1``; while
    Bernoulli(gamma / K) succeeds, ``K += 1``; return ``K`` odd. All draws still running
    share the same ``K``, so each round is one :func:`bernoulli_many` call."""
    result = np.empty(size, dtype=bool)
    active = np.arange(size)
    k = 1
    while active.size:
        more = bernoulli_many(gamma / k, active.size, rng)
        result[active[~more]] = k % 2 == 1
        active = active[more]
        k += 1
    return result


class ExpCoins:
    """Exact, independent Bernoulli(exp(-gamma_i)) coins for many candidate indices at once.

    Each coin follows Canonne-Kamath-Steinke 2020 Algorithm 1 (as ``bernoulli_exp_neg``
    does): ``exp(-gamma) = exp(-1)**floor(gamma) * exp(-frac(gamma))``, a product of
    independent coins; the ``exp(-1)`` coins share one probability and are drawn by
    :func:`bernoulli_exp_neg_unit`; the ``exp(-frac)`` coin runs ``K = 1, 2, ...`` while
    Bernoulli(frac / K) succeeds and returns ``K`` odd. Bernoulli(p) for a per-coin
    rational ``p`` compares a uniform 62-bit word ``w`` with the first base-``2**62``
    digit ``d = floor(p 2**62)``: ``w < d`` is True, ``w > d`` False, and on a tie
    (probability ``2**-62``) an exact scalar Bernoulli of the remainder
    ``p 2**62 - d`` decides, so ``P(True) = d / 2**62 + rem / 2**62 = p`` exactly.
    """

    _CAP = 1 << 40  # exp(-1) rounds tracked in the array; beyond: exact scalar fallback

    def __init__(self, gammas: list[Fraction]) -> None:
        self.whole = [g.numerator // g.denominator for g in gammas]
        self.frac = [g - w for g, w in zip(gammas, self.whole)]
        self.rounds = np.array([min(w, self._CAP) for w in self.whole], dtype=np.int64)
        self._digits: dict[int, NDArray[np.int64]] = {}

    def _digit_table(self, k: int) -> NDArray[np.int64]:
        """First base-2**62 digit of ``frac_i / k`` for every candidate ``i``."""
        table = self._digits.get(k)
        if table is None:
            table = np.array([(f.numerator << _DIGIT_BITS) // (f.denominator * k) for f in self.frac], dtype=np.int64)
            self._digits[k] = table
        return table

    def _frac_over(self, k: int, cands: NDArray[np.intp], rng: RandomSource) -> NDArray[np.bool_]:
        """Independent Bernoulli(frac_c / k) for each candidate index ``c`` in ``cands``."""
        digits = self._digit_table(k)[cands]
        words = uniform_below(1 << _DIGIT_BITS, cands.size, rng)
        out = words < digits
        for e in np.flatnonzero(words == digits).tolist():  # probability 2**-62 each
            f = self.frac[int(cands[e])]
            den = f.denominator * k
            rem = Fraction((f.numerator << _DIGIT_BITS) - int(digits[e]) * den, den)
            out[e] = bernoulli(rem, rng)
        return out

    def __call__(self, cands: NDArray[np.intp], rng: RandomSource) -> NDArray[np.bool_]:
        n = cands.size
        alive = np.ones(n, dtype=bool)
        need = self.rounds[cands]
        done = 0
        while True:  # the exp(-1) factors; each round keeps a fraction exp(-1) alive
            sel = np.flatnonzero(alive & (need > done))
            if not sel.size:
                break
            alive[sel] = bernoulli_exp_neg_unit(_ONE, sel.size, rng)
            done += 1
        for e in np.flatnonzero(alive & (need == self._CAP)).tolist():  # never in practice
            extra = self.whole[int(cands[e])] - self._CAP
            alive[e] = bernoulli_exp_neg(Fraction(extra), rng)
        result = np.zeros(n, dtype=bool)
        active = np.flatnonzero(alive)
        k = 1
        while active.size:  # the exp(-frac) factor: CKS Algorithm 1
            more = self._frac_over(k, cands[active], rng)
            result[active[~more]] = k % 2 == 1
            active = active[more]
            k += 1
        return result


# --- exact comparisons of a uniform with exp(-lambda), and a certified float filter ----------
#
# A uniform U on [0, 1) is compared with exp(-lambda) by reading only as many of its bits as
# the comparison needs. The vectorised samplers read 16 bits and decide with a float
# approximation of exp(-lambda) whose error is proved below; the rare undecided draws finish
# here, in exact integer arithmetic, with the bits already read (LazyUniform).


def _exp_neg_unit_bounds(r: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2**prec * exp(-r) <= hi`` for rational ``0 <= r <= 1``.

    ``exp(-r) = sum_k (-r)**k / k!`` alternates with terms ``r**k / k!`` that never grow
    (``r <= 1 <= k``), so ``exp(-r)`` lies between any two consecutive partial sums
    (Leibniz). We take ``n`` with ``r**n / n! <= 2**-(prec + 1)`` and compute ``S_n`` and
    ``S_{n-1}`` exactly over the common denominator ``b**n n!`` (``r = a / b``): the
    numerators ``c_k = a**k b**(n-k) n!/k!`` are integers, ``c_k = c_{k-1} a / (b k)``.
    """
    a, b = r.numerator, r.denominator
    if a == 0:
        return 1 << prec, 1 << prec
    n, num, den = 0, 1, 1  # num / den = r**n / n!
    while num << (prec + 1) > den:
        n += 1
        num, den = num * a, den * b * n
    c = den  # c_0 = b**n n!
    total = c
    for k in range(1, n + 1):
        c = c * a // (b * k)
        total += -c if k % 2 else c
    other = total + c if n % 2 else total - c  # S_{n-1}, over the same denominator
    low, high = min(total, other), max(total, other)
    return (low << prec) // den, -((-high << prec) // den)


@functools.lru_cache(maxsize=1024)
def _exp_neg_int_bounds(m: int, prec: int) -> tuple[int, int]:
    """:func:`exp_neg_bounds` for an integer exponent ``m >= 0`` (cached)."""
    lo = hi = 1 << prec
    base_lo, base_hi = _exp_neg_unit_bounds(_ONE, prec)
    while m:  # square-and-multiply, lower bounds rounded down, upper bounds up
        if m & 1:
            lo, hi = (lo * base_lo) >> prec, -((-hi * base_hi) >> prec)
        m >>= 1
        if m:
            base_lo, base_hi = (base_lo * base_lo) >> prec, -((-base_hi * base_hi) >> prec)
    return lo, hi


def exp_neg_bounds(lam: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2**prec * exp(-lam) <= hi <= 2**prec`` for rational ``lam >= 0``.

    ``exp(-lam) = exp(-1)**m * exp(-r)`` with ``m = floor(lam)``, ``r = lam - m``: each
    factor is bracketed by :func:`_exp_neg_unit_bounds` and multiplied in fixed point,
    rounding the lower bound down and the upper bound up (square-and-multiply, so ``m``
    may be huge). The width ``hi - lo`` shrinks to 0 as ``prec`` grows.
    """
    if lam < 0:
        raise PrivregValueError(f"lam must be >= 0; got {lam}")
    m = lam.numerator // lam.denominator
    mlo, mhi = _exp_neg_int_bounds(m, prec)
    if lam.denominator == 1:
        return mlo, min(mhi, 1 << prec)
    rlo, rhi = _exp_neg_unit_bounds(lam - m, prec)
    return (mlo * rlo) >> prec, min(-((-mhi * rhi) >> prec), 1 << prec)


class LazyUniform:
    """A uniform ``U`` on [0, 1) of which the first ``bits`` binary digits, ``prefix``, are
    already drawn; further digits come from ``rng`` (32 at a time) only when a comparison
    needs them. Comparisons are exact, so the answers have exactly the conditional law
    given the prefix: a draw that began in a vectorised fast path and could not be decided
    there finishes here with the same ``U``."""

    def __init__(self, prefix: int, bits: int, rng: RandomSource) -> None:
        self.num, self.bits, self.rng = int(prefix), int(bits), rng

    def below_exp_neg(self, lam: Fraction) -> bool:
        """``U < exp(-lam)``, for rational ``lam >= 0``, decided exactly.

        With ``U`` in ``[num, num + 1) / 2**bits`` and ``exp(-lam)`` in ``[lo, hi] / 2**prec``
        (:func:`exp_neg_bounds`): the whole cell below ``lo`` means True, the whole cell at
        or above ``hi`` means False (``U = exp(-lam)`` has probability 0). Otherwise either
        the bounds are refined (when wider than a quarter of the cell) or 32 more bits of
        ``U`` are drawn; each refinement of ``U`` leaves the question open with probability
        at most about 1/2, so the loop ends with probability 1.
        """
        prec = self.bits + 32
        while True:
            lo, hi = exp_neg_bounds(lam, prec)
            if (self.num + 1) << prec <= lo << self.bits:
                return True
            if self.num << prec >= hi << self.bits:
                return False
            if (hi - lo) << (self.bits + 2) > 1 << prec:
                prec += 64
            else:
                self.num = (self.num << 32) | self.rng.randbits(32)
                self.bits += 32


#: Float64 filter for exp(-lam) (see exp_neg_approx): Taylor degree, coefficients
#: (-1)**k / k! rounded to nearest, and exp(-m) for m = 0..63 rounded to nearest (from
#: exact bounds tight enough that both round to the same double), then 0 for m >= 64.
TAYLOR_DEGREE = 12
TAYLOR = tuple(float(Fraction((-1) ** k, math.factorial(k))) for k in range(TAYLOR_DEGREE + 1))
#: Proven bound on |exp_neg_approx(x) - exp(-x)| for every float x >= 0.
EXP_NEG_APPROX_ERROR = 2.0**-32


def _nearest_double_exp_neg(m: int) -> float:
    prec = 128
    while True:
        lo, hi = exp_neg_bounds(Fraction(m), prec)
        a, b = float(Fraction(lo, 1 << prec)), float(Fraction(hi, 1 << prec))
        if a == b:  # rounding is monotone, so exp(-m) itself rounds to this double
            return a
        prec *= 2


_EXP_NEG_INT = np.array([_nearest_double_exp_neg(m) for m in range(64)] + [0.0])


def exp_neg_approx(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Float64 ``p`` with ``|p - exp(-x)| <= EXP_NEG_APPROX_ERROR = 2**-32`` elementwise,
    for float64 ``x >= 0`` (the error is with respect to the float given; it uses only
    IEEE-754 correctly rounded +, *, floor, so the bound is a theorem, not a libm claim).

    Proof. ``m = floor(x)`` and ``r = x - m`` are exact (the fractional part of a double
    is a double). If ``m >= 64`` the result is 0 and ``exp(-x) < 2**-92``. Otherwise
    ``p = fl(E_m * P(r))``, ``E_m`` = exp(-m) rounded to nearest (relative error <= u =
    2**-53), ``P`` the degree-12 Taylor polynomial of exp(-r) with rounded coefficients
    evaluated by Horner. Truncation: ``|sum_{k<=12} (-r)^k/k! - exp(-r)| <= 1/13! <
    2**-32.5`` for ``r`` in [0, 1). Coefficient rounding adds at most ``u e``, Horner's
    rounding at most ``gamma_24 e`` (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., eq. 5.3, with ``sum |a_k| r^k <= e``): together < 2**-46. With
    ``0 < P(r) < 1.01`` the last product and ``E_m``'s rounding add < 3u. In total
    ``|p - exp(-x)| < 2**-32.5 + 2**-45 < 2**-32``.
    """
    m = np.floor(x)
    r = x - m
    p = np.full(x.shape, TAYLOR[-1])
    for a in TAYLOR[-2::-1]:
        p *= r
        p += a
    p *= _EXP_NEG_INT[np.minimum(m, 64).astype(np.intp)]
    return p


_EXP_NEG_INT_LIST: list[float] = _EXP_NEG_INT.tolist()


def exp_neg_approx_one(x: float) -> float:
    """:func:`exp_neg_approx` of one float, in plain Python: the same correctly rounded
    IEEE operations in the same order, hence the very same double (and error bound)."""
    m = float(math.floor(x))
    r = x - m
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 = TAYLOR
    # Horner unrolled: each step is fl(fl(p * r) + c), as in the array version
    p = (
        (
            (((((((((c12 * r + c11) * r + c10) * r + c9) * r + c8) * r + c7) * r + c6) * r + c5) * r + c4) * r + c3) * r
            + c2
        )
        * r
        + c1
    ) * r + c0
    return p * _EXP_NEG_INT_LIST[int(min(m, 64.0))]


_WORD_BITS = 16


def _geometric_table() -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """For every 16-bit word ``w``: ``V(w) = #{v >= 1 : b_v > w}`` and whether ``w`` is a
    tie, where ``b_v = floor(2**16 exp(-v))`` (exact, from :func:`exp_neg_bounds`).

    For ``U`` uniform in ``[w, w + 1) / 2**16``: ``w < b_v`` gives ``U < (w+1)/2**16 <=
    exp(-v)``, and ``w > b_v`` gives ``U >= w/2**16 > exp(-v)``; so unless ``w = b_v`` for
    some ``v`` (``w = 0`` is a tie: ``b_v = 0`` for all ``v >= 12``), ``V(w)`` is exactly
    ``#{v >= 1 : U < exp(-v)}``, whose law is ``P(V >= v) = exp(-v)``: the geometric count
    of CKS Algorithm 2's ``exp(-1)`` successes.
    """
    bounds: list[int] = []
    while not bounds or bounds[-1]:
        prec = 64
        while True:  # exp(-k) 2**16 is irrational, so tight enough bounds agree on its floor
            lo, hi = exp_neg_bounds(Fraction(len(bounds) + 1), prec)
            if lo >> (prec - _WORD_BITS) == hi >> (prec - _WORD_BITS):
                break
            prec *= 2
        bounds.append(lo >> (prec - _WORD_BITS))
    words = np.arange(1 << _WORD_BITS)
    b = np.array(bounds)
    count = (b[None, :] > words[:, None]).sum(axis=1)
    tie = np.isin(words, b)
    return count.astype(np.int64), tie


#: The geometric count of each 16-bit word, and whether the word is a tie (see above).
GEOMETRIC, GEOMETRIC_TIE = _geometric_table()
