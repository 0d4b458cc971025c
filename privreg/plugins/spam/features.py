"""Binary character 4-gram features hashed modulo a configurable space (paper 000, 6.2).

A message's first 35 KB are read as bytes; every window of four consecutive bytes is
the 32-bit big-endian integer ``b0 b1 b2 b3`` (so the space of 4-grams is ``2^32``, as in
the paper), reduced modulo ``space`` (the paper uses ``10^6``). ``hash="mix"`` first
applies a fixed public 64-bit mixing function (so small power-of-two spaces do not just
keep the last bytes); ``"modulo"`` is the paper's plain reduction. Features are binary:
present or absent.

``max_active`` (optional) keeps only the first ``max_active`` distinct features of a
message in order of first appearance, a public bound on ``||x||_1`` and ``||x||_2^2`` that
the differentially private training needs (its sensitivity is ``2 sqrt(max_active)``
times the largest gradient weight).

Vectorised with numpy per message (one pass of array operations over its bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import scipy.sparse as sp

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.spam.corpus import MAX_BYTES, Message

__all__ = ["NgramHasher", "HASHES", "ngram_codes", "binary_csr"]

HASHES = ("modulo", "mix")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier (public constant)


def ngram_codes(raw: bytes, n: int = 4) -> np.ndarray:
    """The overlapping ``n``-byte windows of ``raw`` as big-endian integers (uint64)."""
    a = np.frombuffer(raw, dtype=np.uint8).astype(np.uint64)
    if a.size < n:
        return np.zeros(0, dtype=np.uint64)
    code = np.zeros(a.size - n + 1, dtype=np.uint64)
    for k in range(n):
        code = (code << np.uint64(8)) | a[k : a.size - n + 1 + k]
    return code


def _mix(codes: np.ndarray) -> np.ndarray:
    x = codes * _MIX  # wraps modulo 2^64 on purpose
    return x ^ (x >> np.uint64(29))


def binary_csr(rows: Sequence[np.ndarray], ncols: int) -> sp.csr_matrix:
    """A binary CSR matrix (int8 ones) with the given sorted column indices per row."""
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([r.size for r in rows])
    indices = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, dtype=np.int64)
    data = np.ones(indices.size, dtype=np.int8)
    return sp.csr_matrix((data, indices, indptr), shape=(len(rows), ncols))


@attrs.frozen(kw_only=True)
class NgramHasher:
    """Binary hashed character ``n``-grams of the first ``max_bytes`` bytes.

    Args:
        space: number of features (hash buckets); the paper uses ``10**6``.
        n: n-gram length in bytes (4 in the paper).
        max_bytes: bytes of each message used (35 KB in the paper).
        hash: ``"modulo"`` (the paper: the 32-bit value modulo ``space``) or ``"mix"``.
        max_active: keep at most this many distinct features per message (first seen
            first); None keeps all.
    """

    space: int = attrs.field(default=10**6, converter=lambda x: v.check_int("space", x, minimum=2))
    n: int = attrs.field(default=4, converter=lambda x: v.check_int("n", x, minimum=1))
    max_bytes: int = attrs.field(default=MAX_BYTES, converter=lambda x: v.check_int("max_bytes", x, minimum=1))
    hash: str = attrs.field(default="modulo")
    max_active: int | None = attrs.field(default=None)

    @hash.validator
    def _check_hash(self, attribute: Any, value: Any) -> None:
        if value not in HASHES:
            raise PrivregValueError(f"hash must be one of {HASHES}; got {value!r}.")

    @max_active.validator
    def _check_active(self, attribute: Any, value: Any) -> None:
        if value is not None:
            v.check_int("max_active", value, minimum=1)

    def __attrs_post_init__(self) -> None:
        if self.n > 8:
            raise PrivregValueError(f"n must be at most 8 (n-grams are packed into 64 bits); got {self.n}.")

    def features(self, raw: bytes) -> np.ndarray:
        """Sorted distinct feature indices of one message."""
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            raise PrivregTypeError(f"a message must be bytes; got {type(raw).__name__}.")
        codes = ngram_codes(bytes(raw[: self.max_bytes]), self.n)
        if self.hash == "mix":
            codes = _mix(codes)
        idx = (codes % np.uint64(self.space)).astype(np.int64)
        if self.max_active is None:
            return np.unique(idx)
        uniq, first = np.unique(idx, return_index=True)
        keep = uniq[np.argsort(first, kind="stable")[: self.max_active]]
        return np.sort(keep)

    def transform(self, messages: Sequence[Message | bytes]) -> sp.csr_matrix:
        """The binary feature matrix (rows: messages, columns: ``space``), int8 CSR."""
        rows = [self.features(m.raw if isinstance(m, Message) else m) for m in messages]
        return binary_csr(rows, self.space)
