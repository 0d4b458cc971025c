"""An oblivious PRF for the band and exact-pass tokens of ``blocking="parties"`` (issue #33).

Construction: 2HashDH (Jarecki, Kiayias and Krawczyk, "Round-optimal password-protected
secret sharing and T-PAKE in the password-only model", ASIACRYPT 2014; the OPRF mode of
RFC 9497), ``F_k(x) = H2(x, k * H1(x))``, in the prime-order subgroup of edwards25519
(order ``l = 2^252 + ...``) through libsodium (PyNaCl): ``H1(x) = E(h_0) + E(h_1)`` with
``(h_0, h_1) = SHA-512(tag, x)`` and ``E`` libsodium's Elligator 2 map with cofactor
clearing (``crypto_core_ed25519_from_uniform``; two maps added, the random-oracle shape
of RFC 9380 section 3); ``H2`` the first 8 bytes of SHA-512 over ``x`` and the element.
PyNaCl does not bind ristretto255, so the subgroup is checked instead: libsodium's
``crypto_scalarmult_ed25519_noclamp`` refuses a point off the curve, of small order, with a
torsion part, or a product that is the identity.

1. The data party draws a scalar ``r`` per element (uniform in ``[1, l)``) and sends
   ``B = r * H1(x)`` (:func:`blind`).
2. The key holder (the linkage unit, key ``k`` uniform in ``[1, l)``, :class:`OprfKey`)
   returns ``k * B`` (:meth:`OprfKey.evaluate`).
3. The data party computes ``r^-1 * k * B = k * H1(x)`` and ``F_k(x)`` (:func:`finalize`).

What each learns (semi-honest): the key holder sees, per element, ``B``, uniform on the
group whatever ``x`` is (``r`` is uniform and the group has prime order), and how many;
the data party learns ``F_k`` on its own inputs only, and without ``k`` cannot evaluate
``F_k`` on any other value (one-more gap Diffie-Hellman, in the random-oracle model).
A party that colludes with the key holder can evaluate ``F_k`` anywhere.
"""

from __future__ import annotations

import hashlib

import nacl.bindings as sodium
import nacl.exceptions
import numpy as np

from privreg.core.errors import ProtocolError
from privreg.core.randomness import RandomSource

__all__ = ["ELEMENT_BYTES", "OprfKey", "blind", "finalize", "hash_to_group"]

#: Bytes of an encoded group element.
ELEMENT_BYTES = 32
_TAG = b"privreg/pprl/oprf/2hashdh-ed25519/v1/"


def _scalar(rng: RandomSource) -> bytes:
    """A uniform nonzero scalar mod ``l`` (64 random bytes reduced: bias below 2^-250)."""
    while True:
        s = sodium.crypto_core_ed25519_scalar_reduce(rng.random_bytes(64))
        if any(s):
            return bytes(s)


def _inputs(x: np.ndarray) -> list[bytes]:
    rows = np.ascontiguousarray(np.asarray(x, dtype=np.uint64).reshape(len(x), -1)).astype(">u8")
    return [bytes(r) for r in rows]


def hash_to_group(x: np.ndarray) -> list[bytes]:
    """``H1`` of each row of the uint64 matrix ``x`` (a row is one input)."""
    out = []
    for row in _inputs(x):
        h = hashlib.sha512(_TAG + b"H1/" + row).digest()
        out.append(
            sodium.crypto_core_ed25519_add(
                sodium.crypto_core_ed25519_from_uniform(h[:32]), sodium.crypto_core_ed25519_from_uniform(h[32:])
            )
        )
    return out


def _elements(name: str, sender: str, got: object, count: int) -> list[bytes]:
    if not isinstance(got, np.ndarray) or got.dtype != np.uint8 or got.shape != (count, ELEMENT_BYTES):
        raise ProtocolError(
            f"{sender!r} sent malformed {name} (expected {count} group elements of {ELEMENT_BYTES} bytes)"
        )
    raw = got.tobytes()
    return [raw[i : i + ELEMENT_BYTES] for i in range(0, len(raw), ELEMENT_BYTES)]


def _pack(elements: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(elements), dtype=np.uint8).reshape(len(elements), ELEMENT_BYTES).copy()


class OprfKey:
    """The key holder's secret ``k`` (fresh from ``rng``, the OS CSPRNG unless a test
    passes a seeded source); it evaluates blinded elements and nothing else."""

    def __init__(self, *, rng: RandomSource) -> None:
        self._k = _scalar(rng)

    def evaluate(self, blinded: object, *, count: int, sender: str) -> np.ndarray:
        """``k * B`` for each of exactly ``count`` blinded elements ``(count, 32)`` uint8
        from ``sender``; a malformed message or an element outside the group is refused."""
        out = []
        for b in _elements("blinded elements", sender, blinded, count):
            try:
                out.append(sodium.crypto_scalarmult_ed25519_noclamp(self._k, b))
            except (nacl.exceptions.RuntimeError, nacl.exceptions.TypeError, ValueError):
                raise ProtocolError(f"{sender!r} sent a blinded element that is not in the prime-order group") from None
        return _pack(out)


def blind(x: np.ndarray, rng: RandomSource) -> tuple[np.ndarray, list[bytes]]:
    """The blinded elements ``r * H1(x)`` of the rows of ``x`` ``(count, 32)`` uint8, and the
    inverses ``r^-1`` (kept by the data party for :func:`finalize`)."""
    blinded, inverses = [], []
    for p in hash_to_group(x):
        r = _scalar(rng)
        blinded.append(sodium.crypto_scalarmult_ed25519_noclamp(r, p))
        inverses.append(sodium.crypto_core_ed25519_scalar_invert(r))
    return _pack(blinded), inverses


def finalize(x: np.ndarray, evaluated: object, inverses: list[bytes], *, sender: str) -> np.ndarray:
    """``F_k`` of each row of ``x`` as a uint64 word, from the key holder's answer; a
    malformed answer or an element outside the group is refused (a wrong key is caught by
    the pair check of :mod:`party_blocking`)."""
    rows = _inputs(x)
    got = _elements("evaluated elements", sender, evaluated, len(rows))
    out = np.empty(len(rows), dtype=np.uint64)
    for i, (row, e, inv) in enumerate(zip(rows, got, inverses)):
        try:
            y = sodium.crypto_scalarmult_ed25519_noclamp(inv, e)
        except (nacl.exceptions.RuntimeError, nacl.exceptions.TypeError, ValueError):
            raise ProtocolError(f"{sender!r} sent an evaluated element that is not in the prime-order group") from None
        out[i] = int.from_bytes(hashlib.sha512(_TAG + b"H2/" + row + y).digest()[:8], "big")
    return out
