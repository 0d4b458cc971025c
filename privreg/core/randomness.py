"""Sources of randomness for noise and for cryptography.

Privacy noise and protocol randomness must come from a cryptographically secure source:
:class:`SecureRandom` draws from ``secrets`` (the OS CSPRNG). A seeded source exists only
so tests and benchmarks can be reproducible; it must be created explicitly by its name,
:class:`InsecureReproducibleRandom`, and every charge made with it is flagged
``reproducible=True`` in the ledger.
"""

from __future__ import annotations

import os
import random
import secrets
from abc import ABC, abstractmethod
from typing import Any

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError

__all__ = ["RandomSource", "SecureRandom", "InsecureReproducibleRandom", "resolve_random"]


class RandomSource(ABC):
    """Uniform random integers and bytes. Samplers build every distribution from these."""

    #: True when the stream can be replayed from a seed (never for real releases).
    reproducible: bool = False

    @abstractmethod
    def randbits(self, k: int) -> int:
        """A uniform integer in [0, 2**k)."""

    @abstractmethod
    def random_bytes(self, n: int) -> bytes:
        """``n`` uniform random bytes (for vectorised samplers)."""

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), exactly (rejection sampling, no modulo bias)."""
        n = v.check_int("n", n, minimum=1)
        k = (n - 1).bit_length()
        while True:
            r = self.randbits(k)
            if r < n:
                return r

    def describe(self) -> dict[str, Any]:
        """What the ledger records about this source."""
        return {"source": type(self).__name__, "reproducible": self.reproducible}


class SecureRandom(RandomSource):
    """The OS CSPRNG: ``os.urandom``, which :mod:`secrets` reads. The default everywhere.

    ``randbits(k)`` is what ``secrets.randbits`` computes (``random.SystemRandom``: the
    top ``k`` bits of ``ceil(k / 8)`` OS bytes, big-endian), without its two extra Python
    calls; ``random_bytes`` is ``os.urandom`` (``secrets.token_bytes`` without the
    wrapper). A scalar release makes one or two such calls."""

    reproducible = False

    def randbits(self, k: int) -> int:
        if k <= 0:
            return 0
        nbytes = (k + 7) >> 3
        return int.from_bytes(os.urandom(nbytes), "big") >> (nbytes * 8 - k)

    def random_bytes(self, n: int) -> bytes:
        return os.urandom(n)

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(v.check_int("n", n, minimum=1))


class InsecureReproducibleRandom(RandomSource):
    """A seeded, replayable stream for tests and benchmarks ONLY.

    It is not cryptographically secure: anyone who learns the seed learns every noise
    value, so a release made with it has no privacy. The ledger flags such releases.
    """

    reproducible = True

    def __init__(self, *, seed: int) -> None:
        self.seed = v.check_int("seed", seed, minimum=0)
        self._rng = random.Random(self.seed)  # noqa: S311 -- the explicit test-only source; the ledger flags it

    def randbits(self, k: int) -> int:
        return self._rng.getrandbits(k) if k > 0 else 0

    def random_bytes(self, n: int) -> bytes:
        # randbytes(n) calls getrandbits(8n), which overflows a C int from n = 2**28
        chunk = 1 << 24
        return (
            b"".join(self._rng.randbytes(min(chunk, n - i)) for i in range(0, n, chunk))
            if n > chunk
            else self._rng.randbytes(n)
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "seed": self.seed}


def resolve_random(rng: RandomSource | None) -> RandomSource:
    """``rng`` itself, or a fresh :class:`SecureRandom` when ``None``."""
    if rng is None:
        return SecureRandom()
    if type(rng) in _BUILT_IN:  # the usual case, without the ABC instance check
        return rng
    if not isinstance(rng, RandomSource):
        raise PrivregTypeError(
            f"rng must be a privreg RandomSource (SecureRandom, or InsecureReproducibleRandom "
            f"for tests); got {rng!r}. numpy and random generators are not accepted because "
            f"they are not cryptographically secure."
        )
    return rng


_BUILT_IN = (SecureRandom, InsecureReproducibleRandom)
