"""Modular products and powers over lists of ciphertexts (gmpy2 integers).

Shared by the vector, packing, comparison and Hamming code. The ``*_chunk`` functions
take plain integers and lists so that :func:`privreg.crypto.parallel.run_chunks` can ship
them to worker processes.
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
from gmpy2 import mpz

__all__ = ["mulmod_chunk", "powmod_chunk", "prod_mod"]


def prod_mod(cs: Sequence[mpz], n2: mpz) -> mpz:
    """Product of ``cs`` modulo ``n2`` (1 when empty), reduced after every multiplication
    so operands stay at |n2| bits: the homomorphic sum of the plaintexts."""
    if not cs:
        return mpz(1)
    acc = cs[0]
    for c in cs[1:]:
        acc = acc * c % n2
    return acc


def powmod_chunk(n2: int, cts: Sequence[mpz], exps: Sequence[int]) -> list[mpz]:
    """``cts[i]^exps[i] mod n2`` for each i (exponents 0 and 1 cost nothing; gmpy2 inverts
    for negative ones): plaintexts multiplied element-wise by ``exps``."""
    n2 = mpz(n2)
    out = []
    for c, k in zip(cts, exps):
        if k == 1:
            out.append(c)
        elif k == 0:
            out.append(mpz(1))
        else:
            out.append(gmpy2.powmod(c, k, n2))
    return out


def mulmod_chunk(n2: int, a: Sequence[mpz], b: Sequence[mpz]) -> list[mpz]:
    """``a[i] * b[i] mod n2`` for each i: plaintexts added element-wise, or ciphertexts
    multiplied by obfuscators ``b``."""
    n2 = mpz(n2)
    return [x * y % n2 for x, y in zip(a, b)]
