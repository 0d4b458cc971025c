"""Exact vectorised coins: Bernoulli(p) for rationals p, and Bernoulli(exp(-gamma)) for
per-index rational gammas, from exact uniform CSPRNG integers (Canonne-Kamath-Steinke
2020, Algorithm 1). Used by the selection mechanisms and the discrete Gaussian sampler."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from privreg.core.randomness import RandomSource
from privreg.noise.exact import bernoulli, bernoulli_exp_neg
from privreg.noise.vector import uniform_below

__all__ = ["bernoulli_many", "bernoulli_exp_neg_unit", "ExpCoins"]

_DIGIT_BITS = 62  # uniform_below draws exact uniform integers below 2**62 in one pass
_ONE = Fraction(1)


def bernoulli_many(p: Fraction, size: int, rng: RandomSource) -> np.ndarray:
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


def bernoulli_exp_neg_unit(gamma: Fraction, size: int, rng: RandomSource) -> np.ndarray:
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
        self._digits: dict[int, np.ndarray] = {}

    def _digit_table(self, k: int) -> np.ndarray:
        """First base-2**62 digit of ``frac_i / k`` for every candidate ``i``."""
        table = self._digits.get(k)
        if table is None:
            table = np.array(
                [(f.numerator << _DIGIT_BITS) // (f.denominator * k) for f in self.frac], dtype=np.int64
            )
            self._digits[k] = table
        return table

    def _frac_over(self, k: int, cands: np.ndarray, rng: RandomSource) -> np.ndarray:
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

    def __call__(self, cands: np.ndarray, rng: RandomSource) -> np.ndarray:
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
