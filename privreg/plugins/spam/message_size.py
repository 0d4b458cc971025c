"""Upper bounds on the encoded size of the spam protocols' messages (bytes of the
:mod:`privreg.mpc.wire` encoding), from public parameters only.

A message of these protocols is one of:

* a Paillier public key: the modulus ``n`` (``key_bits`` bits) and the DJN base ``h``
  (below ``n^2``, so at most ``2 key_bits`` bits) as wire integers, in a small dict;
* an :class:`~privreg.crypto.EncryptedVector` or
  :class:`~privreg.crypto.packing.PackedCiphertexts`: a fixed-width blob of ``N``
  ciphertexts of ``c = ceil(2 key_bits / 8)`` bytes each (every ciphertext lies below
  ``n^2``), a 16-byte key id and at most eight integers (layout, scale, bounds; each
  below the key's plaintext range, so at most ``key_bits`` bits);
* a list of integers (a weight share, comparison shares).

The wire codec writes an integer ``x`` as a tag, a varint length and ``bits(x) // 8 + 1``
bytes (two's complement), a byte string as a tag, a varint length and the bytes, and a
registered type as a tag, its name and its value. So an encrypted container of ``N``
ciphertexts takes at most ``N c + HEADER(key_bits)`` bytes with
``HEADER = 256 + 9 (key_bits / 8 + 8)`` (names, tags, varints, key id and the integers,
generously), and a key at most ``3 key_bits / 8 + HEADER``.

Packing: :func:`~privreg.crypto.pack` puts ``floor(capacity / s)`` values in one
ciphertext, ``s = bits(2 B)`` for the public bound ``B`` and ``capacity = bits(max_int) - 1``
with ``max_int = (n - 1) // 3``; a ``key_bits``-bit ``n`` has ``bits(max_int) >= key_bits - 2``,
so ``N <= ceil(count / max(1, floor((key_bits - 3) / s)))``.
"""

from __future__ import annotations

__all__ = [
    "MARGIN_BYTES",
    "ciphertext_bytes",
    "header_bytes",
    "int_list_bytes",
    "packed_count",
    "public_key_bytes",
    "vector_bytes",
    "with_margin",
]

#: Added to every bound (besides the 1/32 relative margin of :func:`with_margin`).
MARGIN_BYTES = 1024


def ciphertext_bytes(key_bits: int) -> int:
    """Bytes of one ciphertext on the wire (``ceil(2 key_bits / 8)``)."""
    return (2 * key_bits + 7) // 8


def header_bytes(key_bits: int) -> int:
    """A bound on everything of an encrypted container but its ciphertexts."""
    return 256 + 9 * (key_bits // 8 + 8)


def vector_bytes(count: int, key_bits: int) -> int:
    """A bound on an encrypted container of ``count`` ciphertexts."""
    return count * ciphertext_bytes(key_bits) + header_bytes(key_bits)


def public_key_bytes(key_bits: int) -> int:
    """A bound on a public key message (``n`` and ``h < n^2``)."""
    return 3 * key_bits // 8 + header_bytes(key_bits)


def packed_count(count: int, bound: int, key_bits: int) -> int:
    """A bound on the ciphertexts of ``count`` values of magnitude ``<= bound`` packed
    under a ``key_bits``-bit key."""
    slot_bits = max(1, (2 * bound).bit_length())
    per_ct = max(1, (key_bits - 3) // slot_bits)
    return -(-count // per_ct)


def int_list_bytes(count: int, magnitude: int) -> int:
    """A bound on a list of ``count`` integers of magnitude ``<= magnitude``: per entry a
    tag, a one-byte length and ``bits // 8 + 1`` bytes (lengths below 128 bytes)."""
    per = 2 + (max(1, magnitude).bit_length() + 8) // 8
    if per - 2 >= 128:
        per += 2  # a longer varint length
    return 16 + count * per


def with_margin(nbytes: int) -> int:
    """``nbytes`` plus a modest margin: 1/32 and :data:`MARGIN_BYTES`."""
    return nbytes + nbytes // 32 + MARGIN_BYTES
