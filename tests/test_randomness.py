"""Tests of privreg.core.randomness.

Statistical tests use InsecureReproducibleRandom with fixed seeds, so they are
deterministic. Each rejects only when a chi-square p-value is below ALPHA = 1e-4: for a
correct generator and a fresh seed, the false-alarm rate per test is 1e-4. SecureRandom is
only checked with assertions that hold for every possible output (ranges, types).
"""

from __future__ import annotations

import copy
import os
import pickle
import random
import select
import signal
import sys
import threading

import numpy as np
import pytest
from scipy import stats

from privreg.core import randomness
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import (
    InsecureReproducibleRandom,
    RandomSource,
    SecureRandom,
    resolve_random,
)

ALPHA = 1e-4


def chi2_uniform_pvalue(values, n_buckets: int) -> float:
    counts = np.bincount(np.asarray(values, dtype=np.int64), minlength=n_buckets)
    assert len(counts) == n_buckets
    expected = len(values) / n_buckets
    assert expected >= 5
    return float(stats.chisquare(counts, np.full(n_buckets, expected)).pvalue)


# ----------------------------------------------------------------- InsecureReproducibleRandom


def test_same_seed_same_streams():
    a, b = InsecureReproducibleRandom(seed=123), InsecureReproducibleRandom(seed=123)
    for _ in range(3):  # interleaved calls stay in lockstep
        assert [a.randbits(64) for _ in range(20)] == [b.randbits(64) for _ in range(20)]
        assert a.random_bytes(100) == b.random_bytes(100)
        assert [a.randbelow(1000) for _ in range(50)] == [b.randbelow(1000) for _ in range(50)]
        assert a.randbits(0) == b.randbits(0) == 0


def test_different_seeds_differ():
    a, b = InsecureReproducibleRandom(seed=1), InsecureReproducibleRandom(seed=2)
    assert [a.randbits(64) for _ in range(4)] != [b.randbits(64) for _ in range(4)]
    assert a.random_bytes(32) != b.random_bytes(32)


def test_reproducible_flag_and_describe():
    r = InsecureReproducibleRandom(seed=987654321)
    assert r.reproducible is True
    assert r.seed == 987654321
    assert r.describe() == {
        "source": "InsecureReproducibleRandom",
        "reproducible": True,
        "seed": 987654321,
    }


def test_seed_validation():
    with pytest.raises(PrivregValueError, match="seed"):
        InsecureReproducibleRandom(seed=-1)
    for bad in (1.0, "1", None, True):
        with pytest.raises(PrivregTypeError, match="seed"):
            InsecureReproducibleRandom(seed=bad)
    with pytest.raises(TypeError):  # the seed must be given by name
        InsecureReproducibleRandom(5)
    assert InsecureReproducibleRandom(seed=np.int64(7)).seed == 7


def test_output_types_and_sizes():
    r = InsecureReproducibleRandom(seed=4)
    for k in (1, 7, 64, 200):
        xs = [r.randbits(k) for _ in range(200)]
        assert all(isinstance(x, int) and 0 <= x < 2**k for x in xs)
    assert max(r.randbits(200) for _ in range(20)) >= 2**190  # really uses all 200 bits
    for n in (0, 1, 17):
        b = r.random_bytes(n)
        assert isinstance(b, bytes) and len(b) == n


# ----------------------------------------------------------------- SecureRandom


def test_secure_random_flags_and_outputs():
    s = SecureRandom()
    assert s.reproducible is False
    assert s.describe() == {"source": "SecureRandom", "reproducible": False}
    assert "seed" not in s.describe()
    assert s.randbits(0) == 0
    assert all(0 <= s.randbits(5) < 32 for _ in range(200))
    assert all(0 <= s.randbelow(3) < 3 for _ in range(200))
    assert all(s.randbelow(1) == 0 for _ in range(50))
    b = s.random_bytes(16)
    assert isinstance(b, bytes) and len(b) == 16
    big = 10**40
    assert all(0 <= s.randbelow(big) < big for _ in range(50))


@pytest.mark.parametrize("source", [SecureRandom(), InsecureReproducibleRandom(seed=0)], ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("n", [0, -1, -(2**70)])
def test_randbelow_rejects_n_below_one(source, n):
    with pytest.raises(PrivregValueError, match="n must be >= 1"):
        source.randbelow(n)


@pytest.mark.parametrize("source", [SecureRandom(), InsecureReproducibleRandom(seed=0)], ids=lambda s: type(s).__name__)
def test_randbelow_rejects_non_integers(source):
    for bad in (2.0, "3", True):
        with pytest.raises(PrivregTypeError):
            source.randbelow(bad)


# ----------------------------------------------------------------- resolve_random


def test_resolve_random():
    assert isinstance(resolve_random(None), SecureRandom)
    assert resolve_random(None) is not resolve_random(None)  # a fresh source each time
    r = InsecureReproducibleRandom(seed=3)
    assert resolve_random(r) is r
    s = SecureRandom()
    assert resolve_random(s) is s


@pytest.mark.parametrize(
    "bad",
    [np.random.default_rng(0), random.Random(0), np.random.RandomState(0), random.SystemRandom(), 42],
    ids=lambda x: type(x).__name__,
)
def test_resolve_random_rejects_other_generators(bad):
    with pytest.raises(PrivregTypeError) as info:
        resolve_random(bad)
    msg = str(info.value)
    assert "RandomSource" in msg and "not cryptographically secure" in msg


# ----------------------------------------------------------------- exact uniformity


@pytest.mark.parametrize("n", [2, 3, 5, 7, 8, 1000, 1024, 1025])
def test_randbelow_exactly_uniform(n):
    """Chi-square against uniform on [0, n); alpha = 1e-4, deterministic under the seed.
    Powers of two and their neighbours exercise the rejection boundary."""
    r = InsecureReproducibleRandom(seed=n)
    size = max(20_000, 50 * n)
    xs = [r.randbelow(n) for _ in range(size)]
    assert min(xs) == 0 and max(xs) == n - 1  # full range hit, nothing outside
    p = chi2_uniform_pvalue(xs, n)
    assert p >= ALPHA, f"n={n}: chi-square p={p:.3g}"


@pytest.mark.parametrize("n, shift", [(3 * 2**62, 52), (2**64 + 2**63, 53), (5 * 2**100, 90)])
def test_randbelow_large_n_bucketed_uniform(n, shift):
    """Large n (a multiple of 2**shift): the high bits fall in n >> shift equally likely
    buckets; the low 10 bits are uniform. Chi-square, alpha = 1e-4 each."""
    r = InsecureReproducibleRandom(seed=shift)
    size = 60_000
    xs = [r.randbelow(n) for _ in range(size)]
    assert all(0 <= x < n for x in xs)
    assert chi2_uniform_pvalue([x >> shift for x in xs], n >> shift) >= ALPHA
    assert chi2_uniform_pvalue([x & 1023 for x in xs], 1024) >= ALPHA


def test_random_bytes_uniform():
    """Every byte value equally likely (chi-square, 255 dof, alpha = 1e-4)."""
    data = InsecureReproducibleRandom(seed=99).random_bytes(256 * 200)
    assert chi2_uniform_pvalue(list(data), 256) >= ALPHA


def test_custom_source_gets_exact_randbelow_from_randbits():
    """The base-class randbelow is rejection sampling on randbits: with a source whose
    randbits counts up 0, 1, 2, ... out-of-range draws are rejected, never reduced mod n."""

    class Counting(RandomSource):
        def __init__(self):
            self.next = 0

        def randbits(self, k):
            x = self.next % (1 << k)
            self.next += 1
            return x

        def random_bytes(self, n):
            return bytes(n)

    c = Counting()
    # n = 5 needs 3 bits: draws 0..7 -> accepted 0..4, 5, 6, 7 rejected -> next is 0 again
    assert [c.randbelow(5) for _ in range(6)] == [0, 1, 2, 3, 4, 0]
    assert c.next == 9
    assert c.reproducible is False
    assert c.describe() == {"source": "Counting", "reproducible": False}


# ----------------------------------------------------------------- SecureRandom's pool


@pytest.fixture
def counted_os(monkeypatch):
    """os.urandom replaced by a counting stream (byte i of the OS stream is i % 251), and
    an empty pool: what the pool hands out can be traced to OS bytes."""
    calls = []
    offset = [0]

    def urandom(n):
        calls.append(n)
        start = offset[0]
        offset[0] += n
        return bytes((start + i) % 251 for i in range(n))

    monkeypatch.setattr(randomness.os, "urandom", urandom)
    monkeypatch.setattr(randomness, "_pool", b"")
    monkeypatch.setattr(randomness, "_pool_pos", 0)
    return calls


def _os_bytes(start, n):
    return bytes((start + i) % 251 for i in range(n))


def test_pool_hands_out_each_os_byte_once_in_order(counted_os):
    s, t = SecureRandom(), SecureRandom()
    assert s.random_bytes(10) == _os_bytes(0, 10)
    assert counted_os == [randomness.POOL_BYTES]  # one read ahead
    assert t.random_bytes(20) == _os_bytes(10, 20)  # instances share the pool: no byte twice
    assert s.randbits(12) == int.from_bytes(_os_bytes(30, 2), "big") >> 4  # top bits, big-endian
    assert s.random_bytes(0) == b""
    big = randomness.POOL_MAX_REQUEST + 1
    assert s.random_bytes(big) == _os_bytes(randomness.POOL_BYTES, big)  # straight from the OS
    assert counted_os == [randomness.POOL_BYTES, big]
    assert s.random_bytes(1) == _os_bytes(32, 1)  # the pool went on where it was
    # a request longer than what is left: the rest is dropped (never handed out), a new read
    pos = 33
    while randomness.POOL_BYTES - pos >= 500:
        assert s.random_bytes(500) == _os_bytes(pos, 500)
        pos += 500
    left = randomness.POOL_BYTES - pos
    assert s.random_bytes(left + 1) == _os_bytes(randomness.POOL_BYTES + big, left + 1)
    assert counted_os == [randomness.POOL_BYTES, big, randomness.POOL_BYTES]


def test_secure_random_refuses_a_negative_byte_count():
    with pytest.raises(ValueError, match="negative"):
        SecureRandom().random_bytes(-1)


def test_copies_and_pickles_share_no_bytes():
    s = SecureRandom()
    s.random_bytes(1)
    for other in (copy.copy(s), copy.deepcopy(s), pickle.loads(pickle.dumps(s))):  # noqa: S301 -- our own object
        assert other.random_bytes(32) != s.random_bytes(32)


def test_threads_never_get_the_same_bytes():
    """Eight threads draw 8-byte words from one pool while switching threads every
    microsecond: every word is distinct (two equal words among 4e4 have probability below
    1e-10 from a correct source; a race handing out a slice twice repeats it at once)."""
    s = SecureRandom()
    out: list[list[bytes]] = [[] for _ in range(8)]

    def work(mine):
        for _ in range(5000):
            mine.append(s.random_bytes(8))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(mine,)) for mine in out]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    words = [w for mine in out for w in mine]
    assert len(words) == 40_000 and len(set(words)) == len(words)


def _child_bytes(s, *, hold_lock):
    """64 bytes drawn by a forked child (None if it hung for a minute), and the parent's
    next 64 bytes, from the same SecureRandom ``s``."""
    read, write = os.pipe()
    lock = randomness._pool_lock if hold_lock else threading.Lock()
    with lock:  # held at the fork (hold_lock): the child must not wait for it
        pid = os.fork()
        if pid == 0:  # the child
            try:
                os.write(write, s.random_bytes(64))
            finally:
                os._exit(0)
    os.close(write)
    parent = s.random_bytes(64)
    ready, _, _ = select.select([read], [], [], 60)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    child = os.read(read, 64) if ready else None
    os.close(read)
    return child, parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_reuses_the_parents_pool():
    """After a fork the child starts from an empty pool: its bytes are not the parent's
    next ones (which a copied pool would give it, byte for byte)."""
    s = SecureRandom()
    s.random_bytes(1)  # the pool now holds unread bytes
    child, parent = _child_bytes(s, hold_lock=False)
    assert child is not None and len(child) == 64 and child != parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_wait_for_the_pools_lock():
    """The child gets a fresh lock: it draws even if another thread held the pool's lock
    at the fork (the holder does not exist in the child, so it would wait forever)."""
    child, parent = _child_bytes(SecureRandom(), hold_lock=True)
    assert child is not None, "the child hung on the pool's lock"
    assert child != parent
