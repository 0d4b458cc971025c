"""One draw of a trial plan, specialised to the plan: the scalar releases' sampler.

:func:`one_sampler` returns ``f`` with ``f(rng) == draw_one(plan, rng)`` for every stream:
the same value, and the same bytes read (one round of ``plan.one_bytes``, then the exact
finishes' ``randbits``). For the usual plans -- values ``X`` themselves (``s = 1``) and
two-byte or no uniforms: the discrete Gaussian for ``sigma < 2**16``, the Laplace
mechanism's grid noise, the discrete Laplace of a whole scale below ``2**16`` -- it is a
closure with the plan's constants bound, the words read through one memoryview and a
sign read only where it matters; every other plan gets
:func:`~privreg.noise.trials.draw_one` itself.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

from privreg.core.randomness import RandomSource
from privreg.noise import trials
from privreg.noise.trials import Plan

__all__ = ["one_sampler"]


@functools.lru_cache(maxsize=64)
def one_sampler(plan: Plan) -> Callable[[RandomSource], int]:
    """A sampler ``f(rng)`` of one value of ``plan``'s law, drawing what
    :func:`~privreg.noise.trials.draw_one` draws from the same stream. Bind it once (a
    mechanism caches it): finding it here hashes the plan, which costs about a draw."""
    if (
        plan.s == 1
        and plan.u_bytes in (0, 2)
        and max(trials._GEOMETRIC_LIST) < trials.MAX_FLOAT_V
        and sys.byteorder == "little"  # memoryview's 'H' words are then the stream's '<u2'
    ):
        return _words_one(plan)
    return functools.partial(trials.draw_one, plan)


def _words_one(plan: Plan) -> Callable[[RandomSource], int]:
    """draw_one for a plan of values ``X`` (``s = 1``) with two-byte or no uniforms: the
    same trials, tests and IEEE operations in the same order (see draw_one for the
    Taylor-bound pre-decision)."""
    n, nbytes, ub, mask, t, _, t_f, quadratic, shift_f, inv2s2_f, _, pos, coin_pos, sign_pos = plan.one_consts
    # a table count is below MAX_FLOAT_V (checked by one_sampler), so x < x_cap without a tie
    scaled, geometric = trials._SCALED_EXP_NEG, trials._GEOMETRIC_LIST
    geo, coin = pos // 2, coin_pos // 2  # word offsets of the geometric and coin words

    def draw(rng: RandomSource) -> int:
        ties = trials._GEOMETRIC_TIE_LIST  # read per call, like BAND, so that tests can force ties
        sure_above = trials.BAND + trials._TAYLOR_MARGIN
        sure_below = 1.0 + sure_above
        while True:
            buf = rng.random_bytes(nbytes)
            words = memoryview(buf)[:sign_pos].cast("H")  # the '<u2' words (little-endian host)
            for i in range(n):
                u = words[i] & mask if ub else 0
                if u >= t:
                    continue
                geo_word = words[geo + i]
                coin_word = words[coin + i]
                if ties[geo_word]:
                    negative = buf[sign_pos + (i >> 3)] >> (7 - (i & 7)) & 1
                    ok, y = trials._finish(plan, u, geometric[geo_word], True, geo_word, coin_word, bool(negative), rng)
                    if ok:
                        return -y if negative else y
                    continue
                x = u + t * geometric[geo_word]  # the value y (s = 1)
                if not x and buf[sign_pos + (i >> 3)] >> (7 - (i & 7)) & 1:
                    continue  # negative zero
                if quadratic:  # int - float, int / float: float(x) - shift_f, float(u) / t_f
                    d = x - shift_f
                    lam = d * d * inv2s2_f + u / t_f
                else:
                    lam = u / t_f
                if lam < 64.0:
                    if lam < 1.0:
                        r, e = lam, 65536.0
                    else:
                        m = int(lam)
                        r, e = lam - m, scaled[m]
                    low = e - r * (e - r * (e * 0.5 - r * (e * 0.16666666666666666)))
                    if coin_word + sure_below <= low:
                        return -x if buf[sign_pos + (i >> 3)] >> (7 - (i & 7)) & 1 else x  # the filter accepts
                    sq = r * r
                    if coin_word >= low + sq * sq * (e * 0.041666666666666664) + sure_above:
                        continue  # the filter rejects
                # the bounds leave it open (about 5%): the filter, else exactly, as draw_one
                if trials._coin_one(plan, u, x, coin_word, rng):
                    return -x if buf[sign_pos + (i >> 3)] >> (7 - (i & 7)) & 1 else x

    return draw
