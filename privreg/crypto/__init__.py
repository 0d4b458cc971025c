"""privreg.crypto: a fast Paillier layer and reusable two-party sub-protocols.

Built on gmpy2 (the arithmetic) and interoperable with python-paillier (``phe``: keys
convert with ``to_phe``/``from_phe``; ``benchmarks/paillier.py`` compares the two).

- :mod:`~privreg.crypto.keys`: key generation from the OS CSPRNG, at least 2048 bits
  unless ``insecure_allow_small_keys=True``; CRT decryption of raw ciphertexts.
- :mod:`~privreg.crypto.encoding`: integers, and reals in fixed point with one public scale.
- :mod:`~privreg.crypto.vector`: :func:`encrypt` (public key, or the private key for the
  key holder's CRT encryption), :func:`decrypt`, :class:`EncryptedVector` with vectorised
  homomorphic operations and overflow tracking; wire type ``privreg.paillier.EncryptedVector``.
- :mod:`~privreg.crypto.obfuscation`: DJN fixed-base obfuscators, precomputed one-time
  obfuscators (:class:`ObfuscatorPool`).
- :mod:`~privreg.crypto.packing`: several values per ciphertext for decryption
  (:func:`pack`, :func:`decrypt_packed`).
- :mod:`~privreg.crypto.modarith`: modular products and powers over ciphertext lists.
- :mod:`~privreg.crypto.parallel`: multiprocessing for large batches.
- :mod:`~privreg.crypto.channel`: sending keys and ciphertexts (always re-randomised).
- :mod:`~privreg.crypto.inner_product`, :mod:`~privreg.crypto.compare`: the encrypted
  inner product and the DGK-style secure comparison, as sub-protocol roles and as
  :class:`~privreg.core.protocol.Protocol` classes.
- :mod:`~privreg.crypto.hamming`: encrypted Hamming distances between bit vectors (Bloom
  filters), one bit per ciphertext or many filters per ciphertext in masked slots.
- :mod:`~privreg.crypto.counting`: counts of encryptions, decryptions, re-randomisations.
- :mod:`~privreg.crypto.dgk`: the DGK cryptosystem (small plaintext space, exact zero
  test, CRT encryption by the key holder; :func:`generate_dgk_keypair`).
- :mod:`~privreg.crypto.threshold`: threshold decisions ``[x >= c]`` on packed Paillier
  slots for the key holder only, by a digit-wise DGK comparison.
- :mod:`~privreg.crypto.beaver`: additive shares of inner products of bit vectors with
  correlated randomness from a dealer (Beaver triples; masks expanded by SHAKE-256).
- :mod:`~privreg.crypto.dealer_compare`: threshold decisions ``[x >= c]`` on additively
  shared ``x`` for a dealer only, by a greater-than circuit on XOR-shared bits with Beaver
  AND triples the dealer deals (no key; exact).

Messages travel through :mod:`privreg.mpc` (this package registers its wire types there).

Caveats (each speed-up and what it rests on)
--------------------------------------------
- DJN encryption (the default, ``obfuscation="djn"``): the random factor is
  ``h_s^a mod n^2`` with a fixed public base and a random exponent ``a`` of
  ``ceil(|n|/2)`` bits (1024 bits for a 2048-bit key), read off a fixed-base table.
  Semantic security rests on DCR **plus** the short-exponent assumption of Damgard,
  Jurik and Nielsen (IJIS 2010): ``h_s^a`` for such ``a`` is indistinguishable from
  ``h_s`` to a uniform exponent. ``obfuscation="standard"`` needs DCR only (slower).
- Precomputed obfuscators (:class:`ObfuscatorPool`): each is used once; reusing one for
  two ciphertexts reveals the difference of their plaintexts. The pool enforces it
  (values are removed when taken; the pool cannot be copied or pickled).
- CRT (key holder only): decryption and the key holder's encryption work modulo p^2 and
  q^2; same results, no extra assumption. The key holder's ``djn`` path draws its
  exponent uniformly modulo lcm(p-1, q-1) (it knows the group order), so it needs DCR
  only: the short-exponent assumption concerns public-key encryption alone.
- Packing: values get slots of ``bits(2B) + headroom`` bits; a sum of packed
  ciphertexts may use up to ``2^headroom`` of them before a carry could corrupt the
  neighbouring slot, and that is tracked and refused. The layout reveals the public
  bound ``B`` only. The decryptor learns every packed value.
- Multiprocessing: randomness is drawn in the parent; private-key factors go to worker
  processes (children of this process) when decryption runs in parallel.
- Re-randomisation: every ciphertext is re-randomised before it is sent (the wire codec
  refuses vectors that are not), so received ciphertexts cannot be linked to, or tested
  against, ciphertexts the receiver produced.
- Fixed point: one public scale; ``power`` depends only on the operations performed, so
  no per-value exponent leaks. Overflow raises (encode, operations with tracked bounds,
  decode); nothing wraps silently.
- Hamming slots (``layout="slots"``): the comparer masks every slot it must not reveal
  with a uniform value of ``bits(L) + sigma`` bits (statistical distance ``<= 2^-sigma``
  per slot, ``sigma = 40`` by default); slot plaintexts stay below both primes, which lets
  the key holder decrypt modulo ``p^2`` alone (keys with unbalanced primes fall back to
  CRT decryption).
- DGK (:mod:`~privreg.crypto.dgk`): semantic security rests on the DGK subgroup
  assumption; with the default ``t = 160`` the best known attack (Coron et al., PKC 2011)
  costs about ``2^80``, below the 112 bits of a 2048-bit modulus (``t=224`` for parity).
- Not constant-time; the sub-protocols are secure against semi-honest parties only.
"""

from privreg.crypto.counting import OpCounts, counting, current_counts
from privreg.crypto.dgk import DgkCiphertexts, DgkKeypair, DgkPrivateKey, DgkPublicKey, generate_dgk_keypair
from privreg.crypto.encoding import FixedPoint
from privreg.crypto.errors import ObfuscatorsExhaustedError, PlaintextOverflowError, WrongKeyError
from privreg.crypto.keys import (
    MAX_KEY_BITS,
    MIN_KEY_BITS,
    PaillierKeypair,
    PaillierPrivateKey,
    PaillierPublicKey,
    generate_paillier_keypair,
)
from privreg.crypto.obfuscation import FixedBaseTable, ObfuscatorPool
from privreg.crypto.packing import PackedCiphertexts, decrypt_packed, pack
from privreg.crypto.vector import EncryptedVector, decrypt, decrypt_ints, encrypt

__all__ = [
    "MAX_KEY_BITS",
    "MIN_KEY_BITS",
    "DgkCiphertexts",
    "DgkKeypair",
    "DgkPrivateKey",
    "DgkPublicKey",
    "EncryptedVector",
    "FixedBaseTable",
    "FixedPoint",
    "ObfuscatorPool",
    "ObfuscatorsExhaustedError",
    "OpCounts",
    "PackedCiphertexts",
    "PaillierKeypair",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "PlaintextOverflowError",
    "WrongKeyError",
    "counting",
    "current_counts",
    "decrypt",
    "decrypt_ints",
    "decrypt_packed",
    "encrypt",
    "generate_dgk_keypair",
    "generate_paillier_keypair",
    "pack",
]
