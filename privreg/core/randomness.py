"""Sources of randomness for noise and for cryptography.

Privacy noise and protocol randomness must come from a cryptographically secure source:
:class:`SecureRandom` draws from the OS CSPRNG (``os.urandom``). A seeded source exists only
so tests and benchmarks can be reproducible; it must be created explicitly by its name,
:class:`InsecureReproducibleRandom`, and every charge made with it is flagged
``reproducible=True`` in the ledger.
"""

from __future__ import annotations

import os
import random
import threading
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


#: Bytes the process-wide pool of :class:`SecureRandom` reads from the OS at a time.
POOL_BYTES = 4096
#: Requests up to this many bytes are served from the pool; larger ones read the OS directly.
POOL_MAX_REQUEST = 512

# The pool: OS CSPRNG bytes read ahead in one syscall, handed out in order, each byte
# once. One per process, under a lock (threads never get the same bytes), emptied in a
# forked child (os.register_at_fork), so parent and child never share a byte.
_pool_lock = threading.Lock()
_pool = b""
_pool_pos = 0


def _pooled(n: int) -> bytes:
    """The next ``n <= POOL_MAX_REQUEST`` bytes of the pool (refilled from the OS when short;
    a remainder too short for the request is discarded, never handed out twice)."""
    global _pool, _pool_pos
    with _pool_lock:
        pos = _pool_pos
        end = pos + n
        if end > len(_pool):
            _pool, pos, end = os.urandom(POOL_BYTES), 0, n
        _pool_pos = end
        return _pool[pos:end]


def _empty_pool_in_child() -> None:
    """After a fork, the child drops the parent's unread bytes (the parent hands them
    out itself) and takes a fresh lock (another thread may have held it at the fork)."""
    global _pool, _pool_pos, _pool_lock
    _pool, _pool_pos, _pool_lock = b"", 0, threading.Lock()


os.register_at_fork(after_in_child=_empty_pool_in_child)


class SecureRandom(RandomSource):
    """The OS CSPRNG (``os.urandom``, which :mod:`secrets` reads). The default everywhere.

    Small requests (at most :data:`POOL_MAX_REQUEST` bytes, e.g. one scalar release) are
    served from a process-wide pool of OS bytes read :data:`POOL_BYTES` at a time, so a
    release costs a slice instead of a syscall; every byte is still an ``os.urandom``
    byte, handed out once, in order, under a lock, and a forked child empties the pool
    (``os.register_at_fork``), so no two threads or processes get the same byte. Instances
    hold no state (copies and pickles share nothing). Unread pool bytes sit in process
    memory until used, like any key material the process holds.

    ``randbits(k)`` is what ``secrets.randbits`` computes (the top ``k`` bits of
    ``ceil(k / 8)`` CSPRNG bytes, big-endian); ``randbelow`` is exact rejection sampling on
    it (:meth:`RandomSource.randbelow`)."""

    reproducible = False

    def randbits(self, k: int) -> int:
        if k <= 0:
            return 0
        nbytes = (k + 7) >> 3
        raw = _pooled(nbytes) if nbytes <= POOL_MAX_REQUEST else os.urandom(nbytes)
        return int.from_bytes(raw, "big") >> (nbytes * 8 - k)

    def random_bytes(self, n: int) -> bytes:
        return _pooled(n) if 0 <= n <= POOL_MAX_REQUEST else os.urandom(n)  # os.urandom refuses n < 0


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
