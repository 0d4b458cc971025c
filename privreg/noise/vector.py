"""Vectorised exact uniform integers from a RandomSource's bulk bytes.

The foundation of fast samplers: ``uniform_below(bound, size)`` is exactly uniform on
``[0, bound)`` (rejection sampling on masked CSPRNG words; no modulo bias, no floats).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource

__all__ = ["uniform_below", "uniform_below_one"]


def _words(rng: RandomSource, size: int) -> NDArray[np.uint64]:
    return np.frombuffer(rng.random_bytes(8 * size), dtype="<u8").copy()


def uniform_below(bound: int, size: int, rng: RandomSource) -> NDArray[np.int64]:
    """``size`` independent integers, each exactly uniform on ``[0, bound)``, as int64.
    ``bound`` may be at most 2**62."""
    bound = v.check_int("bound", bound, minimum=1)
    size = v.check_int("size", size, minimum=0)
    if bound > 1 << 62:
        raise PrivregValueError(f"bound must be <= 2**62; got {bound}")
    mask = np.uint64((1 << (bound - 1).bit_length()) - 1)
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:  # each round accepts each draw with probability > 1/2
        draw = _words(rng, todo.size) & mask
        ok = draw < np.uint64(bound)
        out[todo[ok]] = draw[ok].astype(np.int64)
        todo = todo[~ok]
    return out


def uniform_below_one(bound: int, rng: RandomSource) -> int:
    """``int(uniform_below(bound, 1, rng)[0])`` in plain Python: the same value from the
    same stream (8-byte little-endian words, masked, rejected at ``bound`` and above).
    ``bound`` must be an int in ``[1, 2**62]`` (unchecked: callers pass a constant)."""
    mask = (1 << (bound - 1).bit_length()) - 1
    while True:
        draw = int.from_bytes(rng.random_bytes(8), "little") & mask
        if draw < bound:
            return draw
