"""The merged-trial engine behind the fast discrete Laplace and discrete Gaussian samplers,
vectorised (:func:`draw_many`) and for one value in plain Python (:func:`draw_one`).

A trial (Canonne-Kamath-Steinke 2020, Algorithm 2, with Algorithm 3's coin merged into
it) draws ``U`` uniform on ``[0, t)`` (masked words; ``U >= t`` rejects the trial),
``V`` with ``P(V >= v) = exp(-v)``, a sign, and the coin ``U_C < exp(-lambda)`` with
``lambda = U / t`` (discrete Laplace) or ``U/t + (X - sigma2/t)^2 / (2 sigma2)`` (discrete
Gaussian), ``X = U + t V``. The value is ``Y = X // s`` (``s = 1`` for the Gaussian); a
negative sign with ``Y = 0`` rejects the trial (zero would be counted twice). For the
Laplace, a trial is accepted with value ``y`` with probability
``sum_{x : x // s = |y|} (1/t) e^(-u/t) (1 - e^-1) e^-v / 2 = C exp(-|y| s / t)``: the
discrete Laplace of scale ``t / s`` (CKS Algorithm 2); for the Gaussian see
:func:`privreg.noise.gaussian.discrete_gaussian_many`. Every decision is exact: the
geometric count comes from a 16-bit table exact except on tie words
(:data:`privreg.noise.coins.GEOMETRIC_TIE`), the coin from a float filter with a proven
error far inside its band (:func:`privreg.noise.coins.exp_neg_approx`); ties and undecided
coins are finished in exact arithmetic on the same uniforms
(:class:`~privreg.noise.coins.LazyUniform`).

**Scalar and vector paths agree draw for draw.** A round reads all its bulk bytes at once
(the same layout in both paths) and finishes its rare exact cases (which read further
``randbits``) trial by trial, in trial order, stopping at the trial that completes the
values asked for. :func:`draw_one` walks the same trials in plain Python ints and floats
-- the float filter uses only correctly rounded IEEE operations, so it computes the very
doubles numpy computes -- and so returns ``draw_many(plan, 1, rng)[0]`` and leaves ``rng``
in the same state (``tests/test_fast_paths.py``).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from privreg.core.randomness import RandomSource
from privreg.noise.coins import (
    GEOMETRIC,
    GEOMETRIC_TIE,
    TAYLOR,
    LazyUniform,
    exp_neg_approx,
    exp_neg_approx_one,
)

__all__ = ["Plan", "laplace_plan", "gaussian_plan", "draw_many", "draw_one"]

#: Trials per vectorised round (bounds memory; small enough to stay in cache).
MAX_TRIALS = 1 << 16
#: Width of the uniform words the fast path compares with exp(-v) and exp(-lambda).
WORD_BITS = 16
_WORD_BYTES = WORD_BITS // 8
#: Half-width of the undecided band around the float threshold, in units of 2**-16: far
#: above the proven float error (2**16 * 2**-31 = 2**-15).
BAND = 2.0**-8
#: Gaussian trials with a larger geometric count (probability e**-64) decide their coin exactly.
MAX_FLOAT_V = 64
_GEOMETRIC_LIST: list[int] = GEOMETRIC.tolist()
_GEOMETRIC_TIE_LIST: list[bool] = GEOMETRIC_TIE.tolist()


#: (trials, bytes, u_bytes, u_mask, t, s, t_f, quadratic, shift_f, inv2s2_f, x_cap, and the
#: offsets of the geometric words, coin words and sign bits in a round)
_OneConsts = tuple[int, int, int, int, int, int, float, bool, float, float, int, int, int, int]


@attrs.frozen
class Plan:
    """Per-parameter constants of a sampler (cached: they cost Fraction arithmetic)."""

    t: int
    s: int  # values are X // s (1 for the Gaussian)
    u_bytes: int  # bytes of the word U is masked from (0 when t = 1)
    u_mask: int
    quadratic: bool  # the Gaussian's (X - shift)^2 / (2 sigma2) term
    shift: Fraction  # sigma2 / t, exact (Gaussian)
    inv2s2: Fraction  # 1 / (2 sigma2), exact (Gaussian)
    shift_f: float  # the same, rounded to nearest double
    inv2s2_f: float
    t_f: float
    x_cap: int  # a Gaussian coin is decided by the filter only for X below this
    acceptance: float  # estimated P(trial accepted); only sizes rounds
    one_trials: int = attrs.field(init=False)  # trials_for(self, 1), cached for draw_one
    one_bytes: int = attrs.field(init=False)  # the bytes of such a round
    #: draw_one's constants in one tuple (one attribute read per draw instead of a dozen)
    one_consts: _OneConsts = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        n = trials_for(self, 1)
        nbytes = _round_bytes(self, n)
        object.__setattr__(self, "one_trials", n)
        object.__setattr__(self, "one_bytes", nbytes)
        pos = n * self.u_bytes
        consts: _OneConsts = (
            *(n, nbytes, self.u_bytes, self.u_mask, self.t, self.s, self.t_f, self.quadratic),
            *(self.shift_f, self.inv2s2_f, self.x_cap, pos, pos + n * _WORD_BYTES, pos + 2 * n * _WORD_BYTES),
        )
        object.__setattr__(self, "one_consts", consts)


def _u_layout(t: int) -> tuple[int, int]:
    bits = (t - 1).bit_length()
    return (0 if bits == 0 else 2 if bits <= 16 else 4 if bits <= 32 else 8), (1 << bits) - 1


@functools.lru_cache(maxsize=256)
def laplace_plan(t: int, s: int) -> Plan:
    """The plan of the discrete Laplace of scale ``t / s`` (``t, s <= 2**40``)."""
    u_bytes, mask = _u_layout(t)
    coin = 1.0 if t == 1 else (1 - math.exp(-1)) / (t * -math.expm1(-1 / t))  # E exp(-U/t)
    zero = -math.expm1(-s / t) / 2  # about P(negative and Y = 0)
    acceptance = (t / (mask + 1)) * coin * (1 - zero)
    return Plan(t, s, u_bytes, mask, False, Fraction(0), Fraction(0), 0.0, 0.0, float(t), 0, acceptance)


@functools.lru_cache(maxsize=64)
def gaussian_plan(sigma2: Fraction) -> Plan:
    """The plan of the discrete Gaussian of parameter ``sigma2`` (CKS Algorithm 3 with
    ``t = floor(sigma) + 1``)."""
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    u_bytes, mask = _u_layout(t)
    shift, inv2s2 = sigma2 / t, 1 / (2 * sigma2)
    s2 = float(sigma2)
    if s2 >= 1:
        mass = math.sqrt(2 * math.pi * s2)  # sum_y exp(-y^2 / 2 s2), to within exp(-2 pi^2 s2)
    else:
        mass = 1 + 2 * sum(math.exp(-y * y / (2 * s2)) for y in range(1, 40))
    acceptance = (t / (mask + 1)) * (1 - math.exp(-1)) / (2 * t) * math.exp(-s2 / (2 * t * t)) * mass
    x_cap = (MAX_FLOAT_V + 1) * t
    return Plan(t, 1, u_bytes, mask, True, shift, inv2s2, float(shift), float(inv2s2), float(t), x_cap, acceptance)


def trials_for(plan: Plan, need: int) -> int:
    """Trials in a round that still needs ``need`` values (about one round in all)."""
    return min(MAX_TRIALS, int(need / plan.acceptance * 1.03) + 16)


def _lambda(plan: Plan, u: int, x: int) -> Fraction:
    """A trial's exact exponent."""
    lam = Fraction(u, plan.t)
    return lam + (x - plan.shift) ** 2 * plan.inv2s2 if plan.quadratic else lam


def _lambda_approx(plan: Plan, u: NDArray[np.int64], x: NDArray[np.int64]) -> NDArray[np.float64]:
    """float64 approximation of lambda (error analysis: discrete_gaussian_many)."""
    if not plan.quadratic:
        out: NDArray[np.float64] = u / plan.t_f
        return out
    lam = x.astype(np.float64)
    lam -= plan.shift_f
    lam *= lam
    lam *= plan.inv2s2_f
    lam += u / plan.t_f
    return lam


def _lambda_approx_one(plan: Plan, u: int, x: int) -> float:
    """:func:`_lambda_approx` of one trial: the same IEEE operations in the same order."""
    if not plan.quadratic:
        return float(u) / plan.t_f
    lam = float(x) - plan.shift_f
    lam = lam * lam
    lam = lam * plan.inv2s2_f
    return lam + float(u) / plan.t_f


def coin_filter(
    plan: Plan, u: NDArray[np.int64], x: NDArray[np.int64], word: NDArray[np.unsignedinteger[Any]]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """``(accept, decided)``: where ``decided``, ``accept`` equals ``U' < exp(-lambda)`` for
    every uniform ``U'`` in ``[word, word + 1) / 2**16``."""
    threshold = exp_neg_approx(_lambda_approx(plan, u, x))
    threshold *= float(1 << WORD_BITS)
    coin = word.astype(np.float64)
    accept = coin + 1 <= threshold - BAND
    decided = accept | (coin >= threshold + BAND)
    if plan.quadratic:
        decided &= x < plan.x_cap  # keeps x exact and within the error analysis
    return accept & decided, decided


def _coin_one(plan: Plan, u: int, x: int, word: int, rng: RandomSource) -> bool:
    """One trial's coin: the float filter of :func:`coin_filter`, else exactly."""
    threshold = exp_neg_approx_one(_lambda_approx_one(plan, u, x)) * float(1 << WORD_BITS)
    coin = float(word)
    if not plan.quadratic or x < plan.x_cap:
        if coin + 1 <= threshold - BAND:
            return True
        if coin >= threshold + BAND:
            return False
    return LazyUniform(word, WORD_BITS, rng).below_exp_neg(_lambda(plan, u, x))


def _geometric_exactly(word: int, count: int, rng: RandomSource) -> int:
    """``#{v >= 1 : U < exp(-v)}`` for the uniform ``U`` whose first 16 bits are the tie
    word ``word``, exactly; ``U < exp(-v)`` is already certain for ``v <= count``."""
    geo = LazyUniform(word, WORD_BITS, rng)
    while geo.below_exp_neg(Fraction(count + 1)):
        count += 1
    return count


def _words(buf: bytes, offset: int, nbytes: int, count: int) -> NDArray[np.unsignedinteger[Any]]:
    dtype = {2: "<u2", 4: "<u4", 8: "<u8"}[nbytes]
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset)


def _round_bytes(plan: Plan, n: int) -> int:
    return n * (plan.u_bytes + 2 * _WORD_BYTES) + (n + 7) // 8


def _round(plan: Plan, trials: int, need: int, rng: RandomSource) -> NDArray[np.int64]:
    """``trials`` independent trials; the first ``need`` (or fewer) accepted values, in
    trial order. Trials needing exact work are finished in trial order, and only until
    ``need`` values are accepted (later trials are dropped whatever they would give)."""
    n = trials
    buf = rng.random_bytes(_round_bytes(plan, n))
    if plan.u_bytes:
        u = (_words(buf, 0, plan.u_bytes, n) & np.uint64(plan.u_mask)).astype(np.int64)
        u_ok = u < plan.t  # rejection sampling of the uniform on [0, t)
    else:
        u, u_ok = np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
    pos = n * plan.u_bytes
    geo_word = _words(buf, pos, _WORD_BYTES, n)
    coin_word = _words(buf, pos + n * _WORD_BYTES, _WORD_BYTES, n)
    sign_bytes = np.frombuffer(buf, dtype=np.uint8, offset=pos + 2 * n * _WORD_BYTES)
    negative = np.unpackbits(sign_bytes, count=n).astype(bool)
    count: NDArray[np.int64] = GEOMETRIC[geo_word]
    tie = GEOMETRIC_TIE[geo_word]
    x = u + plan.t * count
    y = x // plan.s if plan.s != 1 else x
    valid = u_ok & ~(negative & (y == 0))  # zero would otherwise be counted twice
    accept, decided = coin_filter(plan, u, x, coin_word)
    exact = tie | ~decided
    accept &= valid & ~exact
    late = np.flatnonzero(exact & u_ok)  # rare: ~2e-4 per trial
    if late.size:
        before = np.cumsum(accept)
        extra = 0
        for i in late.tolist():
            if (int(before[i - 1]) if i else 0) + extra >= need:
                break  # trials from here on are dropped
            geo, coin, neg = int(geo_word[i]), int(coin_word[i]), bool(negative[i])
            ok, value = _finish(plan, int(u[i]), int(count[i]), bool(tie[i]), geo, coin, neg, rng)
            accept[i], y[i] = ok, value
            extra += ok
    values: NDArray[np.int64] = np.where(negative, -y, y)
    return values[accept][:need]


def _finish(
    plan: Plan, u: int, count: int, tie: bool, geo_word: int, coin_word: int, negative: bool, rng: RandomSource
) -> tuple[bool, int]:
    """One trial of a valid ``u`` from its geometric count on, exactly as :func:`draw_one`
    runs it: ``(accepted, |value|)``."""
    if tie:
        count = _geometric_exactly(geo_word, count, rng)
    x = u + plan.t * count
    y = x // plan.s
    if negative and y == 0:
        return False, 0
    return _coin_one(plan, u, x, coin_word, rng), y


def draw_many(plan: Plan, out: NDArray[np.int64], rng: RandomSource) -> None:
    """Fill ``out`` with independent draws of ``plan``'s law."""
    filled, size = 0, out.size
    while filled < size:
        need = size - filled
        got = _round(plan, trials_for(plan, need), need, rng)
        out[filled : filled + got.size] = got
        filled += got.size


#: Margin (in units of 2**-16) of draw_one's Taylor-bound pre-decision, above BAND: it
#: covers the filter's proven error (2**16 * EXP_NEG_APPROX_ERROR = 2**-16) and the float
#: rounding of the bounds (below 2**-30 in these units) many times over.
_TAYLOR_MARGIN = 2.0**-10
#: 2**16 exp(-m) for m = 0..63, exp(-m) as the filter rounds it (its value at m: P(0) = 1)
_SCALED_EXP_NEG: list[float] = [exp_neg_approx_one(float(m)) * 65536.0 for m in range(64)]


def draw_one(plan: Plan, rng: RandomSource) -> int:
    """One draw of ``plan``'s law in plain Python: the value and the stream consumed are
    those of :func:`draw_many` filling one value.

    Most coins are settled before the float filter, by bounds on ``exp(-l) = exp(-m)
    exp(-r)`` (``m = floor(l) < 64``, ``r = l - m``): ``1 - r + r^2/2 - r^3/6 <= exp(-r) <=
    1 - r + r^2/2 - r^3/6 + r^4/24`` (true for every ``r >= 0``: the Lagrange remainders
    alternate in sign), times ``exp(-m)`` as the filter rounds it -- and only where the
    filter itself is certain to give the same answer: a word below the lower bound by more
    than ``BAND`` plus a margin is below the filter's threshold minus ``BAND`` (the
    threshold is within ``2**-16`` of ``2**16 exp(-l)``,
    :data:`~privreg.noise.coins.EXP_NEG_APPROX_ERROR`), so the filter accepts it too;
    likewise above the upper bound. So the decisions, hence the values and the bytes read,
    are the filter's (``tests/test_fast_paths.py``); the bounds only skip its degree-12
    polynomial for about 95% of the coins."""
    n, nbytes, ub, mask, t, s, t_f, quadratic, shift_f, inv2s2_f, x_cap, pos, coin_pos, sign_pos = plan.one_consts
    from_bytes = int.from_bytes
    geometric, ties = _GEOMETRIC_LIST, _GEOMETRIC_TIE_LIST
    sure_above = BAND + _TAYLOR_MARGIN  # read per call, so that tests can widen BAND
    sure_below = 1.0 + sure_above  # word + 1 <= low - BAND - margin; word >= high + BAND + margin
    while True:
        buf = rng.random_bytes(nbytes)
        for i in range(n):
            if ub == 2:  # the usual word: two bytes, little-endian (as numpy reads '<u2')
                u = (buf[2 * i] | buf[2 * i + 1] << 8) & mask
            else:
                u = from_bytes(buf[i * ub : i * ub + ub], "little") & mask if ub else 0
            if u >= t:
                continue
            geo_word = buf[pos + 2 * i] | buf[pos + 2 * i + 1] << 8
            coin_word = buf[coin_pos + 2 * i] | buf[coin_pos + 2 * i + 1] << 8
            negative = buf[sign_pos + (i >> 3)] >> (7 - (i & 7)) & 1
            tie = ties[geo_word]
            x = u + t * geometric[geo_word]
            if tie or (quadratic and x >= x_cap):
                ok, y = _finish(plan, u, geometric[geo_word], tie, geo_word, coin_word, bool(negative), rng)
            else:  # _finish and _coin_one inlined for the usual trial (no tie, filter applies)
                y = x // s
                if negative and not y:
                    continue
                if quadratic:  # _lambda_approx_one: the same IEEE operations in the same order
                    d = float(x) - shift_f
                    lam = d * d * inv2s2_f + float(u) / t_f
                else:
                    lam = float(u) / t_f
                if lam < 64.0:
                    # exp(-l) = exp(-m) exp(-r), m = floor(l), r = l - m (exact); bounds on
                    # 2**16 exp(-l): E (1 - r + r^2/2 - r^3/6), then + E r^4/24 (E = 2**16 exp(-m))
                    if lam < 1.0:
                        r, e = lam, 65536.0
                    else:
                        m = int(lam)
                        r, e = lam - m, _SCALED_EXP_NEG[m]
                    low = e - r * (e - r * (e * 0.5 - r * (e * 0.16666666666666666)))
                    if coin_word + sure_below <= low:
                        return -y if negative else y  # the filter accepts: ok
                    sq = r * r
                    if coin_word >= low + sq * sq * (e * 0.041666666666666664) + sure_above:
                        continue  # the filter rejects
                    threshold = (_taylor_below_one(lam) if lam < 1.0 else exp_neg_approx_one(lam)) * 65536.0
                else:
                    threshold = exp_neg_approx_one(lam) * 65536.0
                if coin_word + 1 <= threshold - BAND:
                    ok = True
                elif coin_word >= threshold + BAND:
                    ok = False
                else:
                    ok = LazyUniform(coin_word, WORD_BITS, rng).below_exp_neg(_lambda(plan, u, x))
            if ok:
                return -y if negative else y


def _taylor_below_one(lam: float) -> float:
    """:func:`~privreg.noise.coins.exp_neg_approx_one` of ``0 <= lam < 1`` (floor 0, so it
    is ``P(lam) * 1.0 = P(lam)``): the same IEEE operations, the same double."""
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 = TAYLOR
    p = ((((((c12 * lam + c11) * lam + c10) * lam + c9) * lam + c8) * lam + c7) * lam + c6) * lam + c5
    return ((((p * lam + c4) * lam + c3) * lam + c2) * lam + c1) * lam + c0
