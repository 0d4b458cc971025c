"""Inner products of bit vectors by dealer-assisted additive sharing (Beaver triples).

Two parties, A with bit vectors ``a`` and B with bit vectors ``b`` (length ``L``), obtain
additive shares modulo ``2^K`` of ``<a, b>`` for a list of pairs, with the help of a
dealer that never sees any message between them (Beaver, "Efficient multiparty
protocols using circuit randomization", CRYPTO 1991; for inner products the
"commodity-based" form of Beaver, "Commodity-based cryptography", STOC 1997, and Du and
Atallah, "Protocols for secure remote database access with approximate matching", 2001):

1. The dealer draws two 32-byte seeds and gives ``seed_u`` to A and ``seed_v`` to B; both
   it and the receiver expand them (:func:`mask_rows`, SHAKE-256 as a PRF of the row
   index) into uniform masks ``u_a`` (one per record of A) and ``v_b`` in ``Z_{2^K}^L``.
2. A sends B ``a' = a + u_a mod 2^K``; B sends A ``b' = b + v_b mod 2^K``. Each is a
   one-time pad of the other's bits: perfectly hiding from its receiver.
3. For every pair ``(a, b)`` the dealer draws ``w_B`` uniform in ``Z_{2^K}`` and sets
   ``w_A = <u_a, v_b> - w_B``; A gets ``w_A``, B gets ``w_B`` (each alone is uniform).
4. A's share ``w_A - <u_a, b'>``, B's share ``<a', b> + w_B``: they add up to
   ``<a + u, b> - <u, b + v> + <u, v> = <a, b>`` modulo ``2^K``.

What each learns (semi-honest): A sees ``b'`` and ``w_A``, B sees ``a'`` and ``w_B``:
uniform and independent of the other's bits. The dealer sees nothing of ``a`` or ``b``.
A dealer that colludes with B reads ``a = a' - u_a`` (and with A, ``b``): the dealer must
not collude with either party -- the same assumption as a key holder that must not
obtain the ciphertexts a comparer holds.

Arithmetic: numpy ``uint64`` wraps modulo ``2^64``, so sums and products are exact modulo
``2^K`` for ``K <= 64`` after masking. Cost: two ``L``-word vectors per record on the
wire (8 L bytes each), and one ``L``-term dot product per pair and party.

Memory: each mask row is derived on its own (``SHAKE-256(label | 0 | seed | row)``, a
PRF keyed by the seed), so a party expands only the rows that occur in a chunk of its
candidate pairs (:func:`pair_chunks`) and the dealer computes its shares chunk by chunk
(:func:`dealer_shares_from_seeds`): ``2 C L`` words per chunk of ``C`` =
:data:`CHUNK_PAIRS` pairs (64 MiB at ``L = 1024``) instead of ``L`` words per record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random

__all__ = [
    "SHARE_BITS",
    "new_seed",
    "CHUNK_PAIRS",
    "expand_masks",
    "mask_rows",
    "pair_chunks",
    "dealer_shares_from_seeds",
    "mask_bits",
    "dealer_shares",
    "left_share",
    "right_share",
]

#: ``K``: shares live in ``Z_{2^K}``.
SHARE_BITS = 60
_MASK = np.uint64((1 << SHARE_BITS) - 1)
_CHUNK = 1 << 21  # elements per chunk of a pairwise dot product (16 MiB of uint64)
#: Candidate pairs per chunk of mask expansion: at most this many mask rows per side are
#: held at once (``8 L`` bytes each: 32 MiB per side at ``L = 1024``).
CHUNK_PAIRS = 4096


def new_seed(rng: RandomSource | None = None) -> bytes:
    """A fresh 32-byte seed from ``rng`` (default the OS CSPRNG)."""
    return resolve_random(rng).random_bytes(32)


def mask_rows(seed: bytes, rows: np.ndarray, *, length: int, label: str) -> np.ndarray:
    """(len(rows), length) uint64 masks uniform in ``Z_{2^K}``, one per row index in
    ``rows``: row ``r`` is SHAKE-256 of ``label | 0 | seed | r`` (``r`` as 8 little-endian
    bytes; ``seed`` has a fixed length, so the input is unambiguous) read as little-endian
    words with the top ``64 - K`` bits cleared. A row's mask depends only on the seed, the
    label and its index, so any subset of rows can be expanded, in any order, alone."""
    if not isinstance(seed, bytes) or len(seed) != 32:
        raise PrivregValueError("seed must be 32 bytes (from new_seed); got something else")
    length = v.check_int("length", length, minimum=1)
    idx = np.asarray(rows)
    if idx.ndim != 1 or (idx.size and (idx.dtype.kind not in "iu" or int(idx.min()) < 0)):
        raise PrivregValueError("rows must be a 1-D array of non-negative row indices")
    prefix = hashlib.shake_256(label.encode("utf-8") + b"\0" + seed)
    size = 8 * length

    def row(r: int) -> bytes:
        h = prefix.copy()  # the absorbed prefix is shared by every row
        h.update(r.to_bytes(8, "little"))
        return h.digest(size)

    stream = b"".join(map(row, idx.tolist()))
    out: np.ndarray = np.frombuffer(stream, dtype="<u8").reshape(idx.size, length) & _MASK
    return out


def expand_masks(seed: bytes, *, rows: int, length: int, label: str) -> np.ndarray:
    """(rows, length) masks of rows ``0 .. rows - 1`` (:func:`mask_rows`); ``8 rows
    length`` bytes: for tests and small inputs (the protocol expands chunks)."""
    rows = v.check_int("rows", rows, minimum=0)
    return mask_rows(seed, np.arange(rows, dtype=np.int64), length=length, label=label)


def pair_chunks(count: int, chunk: int | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of at most ``chunk`` (default :data:`CHUNK_PAIRS`) pairs
    covering ``count`` pairs; one empty range when there are none (every chunk is one
    message, so both parties agree on their number from the count alone)."""
    size = CHUNK_PAIRS if chunk is None else v.check_int("chunk", chunk, minimum=1)
    return [(lo, min(lo + size, count)) for lo in range(0, count, size)] or [(0, 0)]


def mask_bits(bits: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """``bits + masks mod 2^K`` (uint64), the vector a party sends its peer."""
    b = np.asarray(bits, dtype=bool)
    if b.shape != masks.shape:
        raise PrivregValueError(f"bits {b.shape} and masks {masks.shape} differ in shape")
    return (masks + b.astype(np.uint64)) & _MASK


def _pair_dots(
    left: np.ndarray, right: np.ndarray, pairs: np.ndarray, cast: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """``<left[i], right[j]> mod 2^K`` for each row ``(i, j)`` of ``pairs``, in chunks."""
    out = np.empty(pairs.shape[0], dtype=np.uint64)
    step = max(1, _CHUNK // max(1, left.shape[1]))
    for s in range(0, pairs.shape[0], step):
        p = pairs[s : s + step]
        prod = left[p[:, 0]] * cast(right[p[:, 1]])
        out[s : s + step] = prod.sum(axis=1, dtype=np.uint64) & _MASK
    return out


def _check_pairs(pairs: np.ndarray, m_left: int, m_right: int) -> np.ndarray:
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if p.size and (p.min() < 0 or p[:, 0].max() >= m_left or p[:, 1].max() >= m_right):
        raise PrivregValueError("pairs refer to rows outside the vectors")
    return p


def dealer_shares(
    u: np.ndarray, v_masks: np.ndarray, pairs: np.ndarray, *, rng: RandomSource | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The dealer's ``(w_A, w_B)`` per pair ``(a, b)``: ``w_A + w_B = <u_a, v_b> mod 2^K``."""
    p = _check_pairs(pairs, u.shape[0], v_masks.shape[0])
    t = _pair_dots(u, v_masks, p, lambda x: x)
    raw = resolve_random(rng).random_bytes(8 * p.shape[0])
    w_b = np.frombuffer(raw, dtype="<u8").astype(np.uint64) & _MASK
    return (t - w_b) & _MASK, w_b


def dealer_shares_from_seeds(
    seed_u: bytes,
    seed_v: bytes,
    pairs: np.ndarray,
    *,
    length: int,
    labels: tuple[str, str],
    rng: RandomSource | None = None,
    chunk: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dealer_shares` of the masks of ``seed_u`` and ``seed_v`` (:func:`mask_rows`
    with ``labels``), expanding per chunk of ``chunk`` (default :data:`CHUNK_PAIRS`) pairs
    only the rows that chunk names: memory ``2 chunk length`` words, whatever the number
    of records. Same values as :func:`dealer_shares` on the full masks, and the same draws
    from ``rng`` (one of ``8`` bytes per pair)."""
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if p.size and p.min() < 0:
        raise PrivregValueError("pairs refer to negative rows")
    t = np.empty(p.shape[0], dtype=np.uint64)
    for lo, hi in pair_chunks(p.shape[0], chunk):
        if hi == lo:
            continue
        part = p[lo:hi]
        ru, iu = np.unique(part[:, 0], return_inverse=True)
        rv, iv = np.unique(part[:, 1], return_inverse=True)
        u = mask_rows(seed_u, ru, length=length, label=labels[0])
        vm = mask_rows(seed_v, rv, length=length, label=labels[1])
        t[lo:hi] = _pair_dots(u, vm, np.column_stack([iu.ravel(), iv.ravel()]), lambda x: x)
        del u, vm
    raw = resolve_random(rng).random_bytes(8 * p.shape[0])
    w_b = np.frombuffer(raw, dtype="<u8").astype(np.uint64) & _MASK
    return (t - w_b) & _MASK, w_b


def left_share(u: np.ndarray, received: np.ndarray, pairs: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A's share per pair: ``w_A - <u_a, b'> mod 2^K`` (``received`` = B's ``b'``)."""
    p = _check_pairs(pairs, u.shape[0], received.shape[0])
    out: np.ndarray = (np.asarray(w, dtype=np.uint64) - _pair_dots(u, received, p, lambda x: x)) & _MASK
    return out


def right_share(received: np.ndarray, bits: np.ndarray, pairs: np.ndarray, w: np.ndarray) -> np.ndarray:
    """B's share per pair: ``<a', b> + w_B mod 2^K`` (``received`` = A's ``a'``)."""
    p = _check_pairs(pairs, received.shape[0], bits.shape[0])
    dots = _pair_dots(received, np.asarray(bits, dtype=bool), p, lambda x: x.astype(np.uint64))
    out: np.ndarray = (dots + np.asarray(w, dtype=np.uint64)) & _MASK
    return out
