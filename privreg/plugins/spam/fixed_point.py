"""Integers of the spam protocols: features in fixed point, uniform masks, and public
bounds declared on encrypted values (used by the training and evaluation protocols)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from gmpy2 import mpz

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.crypto import EncryptedVector
from privreg.crypto.errors import PlaintextOverflowError

__all__ = ["uniform_ints", "declare_bound", "quantize_features"]


def uniform_ints(rng: RandomSource, count: int, bits: int) -> list[int]:
    """``count`` independent integers uniform in ``[0, 2^bits)`` from ``rng``."""
    nbytes = (bits + 7) // 8
    raw = rng.random_bytes(count * nbytes)
    extra = nbytes * 8 - bits
    out = []
    for i in range(count):
        x = int.from_bytes(raw[i * nbytes : (i + 1) * nbytes], "big")
        out.append(x >> extra)
    return out


def declare_bound(vec: EncryptedVector, bound: int) -> EncryptedVector:
    """``vec`` with a public ``bound`` on |plaintext| that the protocol proves (its tracked
    bound is looser, or was computed from a private operand). Decryption still checks it.
    Raises PlaintextOverflowError if the bound does not fit the key's signed plaintext range."""
    if bound > vec.public_key.max_int:
        raise PlaintextOverflowError(
            f"a protocol value may reach {int(bound).bit_length()} bits, beyond the key's "
            f"{vec.public_key.max_int.bit_length()}-bit signed plaintext range; use a larger key or a smaller "
            f"sigma/scale"
        )
    return EncryptedVector(
        public_key=vec.public_key,
        ciphertexts=[mpz(x) for x in vec.ciphertexts],
        scale=vec.scale,
        power=vec.power,
        bound=int(bound),
        bound_public=True,
        randomised=False,
    )


def quantize_features(X: Any, feature_bits: int) -> sp.csr_matrix:
    """``round(X 2^feature_bits)`` as an int64 CSR matrix (binary int inputs unchanged)."""
    M = sp.csr_matrix(X)
    if feature_bits == 0:
        if M.dtype.kind == "f" and not np.all(M.data == np.round(M.data)):
            raise PrivregValueError("real-valued features need feature_bits > 0 (fixed point).")
        return sp.csr_matrix(M, dtype=np.int64)
    out = sp.csr_matrix((np.rint(M.data * 2.0**feature_bits).astype(np.int64), M.indices, M.indptr), shape=M.shape)
    out.eliminate_zeros()
    return out
