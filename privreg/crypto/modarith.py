"""Modular products and powers over lists of ciphertexts (gmpy2 integers).

Shared by the vector, packing, comparison and Hamming code. The ``*_chunk`` functions
take plain integers and lists so that :func:`privreg.crypto.parallel.run_chunks` can ship
them to worker processes.
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
from gmpy2 import mpz

__all__ = ["multi_pow", "mulmod_chunk", "powmod_chunk", "prod_mod"]


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


def multi_pow(bases: Sequence[mpz], exps: Sequence[int], n2: mpz) -> mpz:
    """``prod_i bases[i]^exps[i] mod n2`` for integer exponents of either sign, by
    simultaneous square-and-multiply (Straus 1964; Menezes, van Oorschot and Vanstone,
    Handbook of Applied Cryptography, Algorithm 14.88): the squarings are shared by all
    bases, and the negative exponents' product is inverted once. The same residue as
    the product of separate powers."""
    pos = [(c, k) for c, k in zip(bases, exps) if k > 0]
    neg = [(c, -k) for c, k in zip(bases, exps) if k < 0]
    out = _straus(pos, n2)
    if neg:
        out = out * gmpy2.invert(_straus(neg, n2), n2) % n2
    return out


def _straus(terms: Sequence[tuple[mpz, int]], n2: mpz) -> mpz:
    if not terms:
        return mpz(1)
    if len(terms) == 1:
        return gmpy2.powmod(terms[0][0], terms[0][1], n2)
    acc = None
    for bit in range(max(k.bit_length() for _, k in terms) - 1, -1, -1):
        if acc is not None:
            acc = acc * acc % n2
        for c, k in terms:
            if k >> bit & 1:
                acc = c if acc is None else acc * c % n2
    return mpz(1) if acc is None else acc
