"""A keyed AES-CTR stream behind numpy's samplers, for large aggregate simulations.

:func:`keyed_generator` returns a ``numpy.random.Generator`` over randomgen's
``AESCounter`` (AES-128 in counter mode), keyed with 128 bits drawn from a
:class:`~privreg.core.RandomSource`: the OS CSPRNG in use, a seeded source in tests. The
bits are those of a pseudorandom function, so the stream is as unpredictable as the key.

What it does *not* give is exactness: numpy's binomial, hypergeometric and multinomial
samplers compute acceptance tests in double precision, so the probability of each outcome
is exact only up to rounding (relative errors near 2^-50). Their outputs are integers, so
nothing about an input can show through the floating-point grid (Mironov 2012), but use
this only where a sampler documents the trade-off; the samplers of :mod:`privreg.noise`
are exact.
"""

from __future__ import annotations

import numpy as np
from randomgen import AESCounter

from privreg.core.randomness import RandomSource, resolve_random

__all__ = ["keyed_generator"]


def keyed_generator(rng: RandomSource | None) -> np.random.Generator:
    """A numpy ``Generator`` on AES-128-CTR keyed with 128 bits from ``rng`` (the OS
    CSPRNG when ``None``); deterministic when ``rng`` is a seeded test source."""
    key = resolve_random(rng).randbits(128)
    return np.random.Generator(AESCounter(key=key))
