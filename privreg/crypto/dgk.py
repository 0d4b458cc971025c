"""The DGK cryptosystem: additively homomorphic encryption of small plaintexts with a
cheap zero test, for secure comparison.

Damgard, Geisler and Kroigaard, "Efficient and secure comparison for on-line auctions"
(ACISP 2007), with "A correction to 'Efficient and secure comparison for on-line
auctions'" (IJACT 1(4), 2009). A key is

- ``n = p q`` of ``n_bits`` bits (2048 by default; smaller only with
  ``insecure_allow_small_keys=True``, and then marked insecure);
- a small public prime ``u``, the plaintext space ``Z_u``;
- secret ``t``-bit primes ``vp``, ``vq`` (``t = 160`` by default) with ``u vp | p - 1`` and
  ``u vq | q - 1`` (and ``vq`` not dividing ``p - 1`` nor ``vp`` dividing ``q - 1``, so that
  ``Z_n^*`` has exactly one subgroup of order ``vp vq``);
- public ``g`` of order ``u vp vq`` and ``h`` of order ``vp vq``. Key generation checks both
  orders exactly, per prime: ``g mod p`` has order ``u vp`` (``g^u != 1`` and ``g^vp != 1``
  modulo ``p``), ``g mod q`` order ``u vq``, ``h mod p`` order ``vp`` and ``h mod q`` order
  ``vq``; ``g`` and ``h`` are joined from these by the CRT.

``Enc(m) = g^m h^r mod n`` with ``r`` uniform of ``ceil(2.5 t)`` bits, as in the paper
(``h^r`` is then within statistical distance ``2^-(t/2)`` of uniform in ``<h>``). The
public side reads ``h^r`` off a fixed-base table (:class:`~privreg.crypto.obfuscation.
FixedBaseTable`, 8-bit windows: ``ceil(2.5 t / 8) - 1`` = 49 multiplications modulo ``n``
at ``t = 160``, about 90 us at 2048 bits); re-randomisation multiplies by a fresh ``h^r``.
The key holder encrypts by the CRT: ``g^m h^a`` modulo ``p`` and ``q`` with ``a`` uniform
modulo ``vp`` and ``vq`` (two 160-bit fixed-base tables modulo the 1024-bit primes), an
exactly uniform element of ``<h>``, about 3 times faster (30 us against 90).

Zero test (the key holder): ``c^vp mod p = 1`` iff ``m = 0 (mod u)``: ``(g^m h^r)^vp =
(g^vp)^m mod p`` and ``g^vp mod p`` has order ``u``. Exact, one exponentiation by a
``t``-bit exponent modulo the 1024-bit prime (about 60 us). Full decryption looks
``c^vp mod p`` up in a table of the ``u`` powers of ``g^vp``.

Choice of ``u``: :func:`generate_dgk_keypair` takes ``comparison_bits`` (``l``, the longest
comparison the key serves) and picks the smallest prime above ``2^bits(3 l + 6)``: so
``u > 3 l + 6``, enough for the terms of the paper's bitwise comparison
(``|c_i| <= 3 l + 5``) and for the digit-wise terms of :mod:`privreg.crypto.threshold`
(at most ``l``). The power of two fixes ``u``'s length for a range of ``l`` (``l = 32``
gives ``u = 131``). ``u`` is public and at most :data:`MAX_U`; its size does not affect
security, only the blinding exponents (``< u``) and the decryption table.

Security: semantic security rests on the DGK subgroup assumption (elements of ``<h>``
cannot be told from elements of ``<g>``; it implies factoring is hard). The Coron, Joux,
Mandal, Naccache and Tibouchi attack on small hidden-order subgroups ("Cryptanalysis of
the RSA subgroup assumption from TCC 2005", PKC 2011) finds the factors in about
``2^(t/2)`` operations, so ``t = 160`` (the paper's) gives about 80-bit security against
it, below the 112 bits of a 2048-bit modulus; pass ``t=224`` for parity (zero tests and
encryptions then cost about 1.4 times more). Keys with ``t < 160`` are refused unless
``insecure_allow_small_keys=True`` and marked insecure. Nothing here is constant time.

Wire: a public key travels as ``privreg.dgk.PublicKey`` (``n, g, h, u, t`` and the
sender's insecure reasons) and is checked on receipt like a Paillier key (see
:mod:`privreg.crypto.keys`): size, odd, no prime factor below ``2^16``, not a probable
prime; ``u`` a prime in ``[3, MAX_U]``; ``t`` in range and leaving room for the key's
structure; ``g, h`` units in ``[2, n)`` of order above 2. The receiver cannot check the
orders of ``g`` and ``h`` nor the size of ``vp, vq`` (that needs the factors): a key
holder who lies about them is outside the semi-honest model. Ciphertexts travel as
``privreg.dgk.Ciphertexts`` (key id and a fixed-width blob), refused unless fresh or
re-randomised, and checked on receipt to lie in ``(0, n)``.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import weakref
from collections.abc import Sequence
from typing import Any

import attrs
import gmpy2
from gmpy2 import mpz

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError, SerializationError
from privreg.core.protocol import Channel
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import parallel
from privreg.crypto.keys import (
    MAX_KEY_BITS,
    MAX_KEYS_PER_MESSAGE,
    MIN_INSECURE_KEY_BITS,
    MIN_KEY_BITS,
    check_composite_modulus,
    received_reasons,
)
from privreg.crypto.obfuscation import fixed_base_table
from privreg.mpc.wire import register_type

__all__ = [
    "MAX_U",
    "MIN_T",
    "DgkCiphertexts",
    "DgkKeypair",
    "DgkPrivateKey",
    "DgkPublicKey",
    "generate_dgk_keypair",
    "lookup_dgk_public_key",
    "plaintext_modulus",
    "power_table",
    "random_bits",
    "uniform_below",
    "recv_dgk_public_key",
    "send_dgk_public_key",
]

#: The smallest subgroup prime length ``t`` accepted without ``insecure_allow_small_keys=True``.
MIN_T = 160
#: The smallest ``t`` accepted at all (tests).
MIN_INSECURE_T = 32
#: The largest ``t`` accepted.
MAX_T = 512
#: The largest plaintext modulus ``u`` (the decryption table has ``u`` entries).
MAX_U = 1 << 16

_SEEDED = "primes drawn from a reproducible (seeded) source"

_CHECKED: collections.OrderedDict[bytes, None] = collections.OrderedDict()
_MAX_CHECKED = 256
_REGISTRY: weakref.WeakValueDictionary[bytes, DgkPublicKey] = weakref.WeakValueDictionary()


def _int_bytes(x: int) -> bytes:
    return int(x).to_bytes((int(x).bit_length() + 8) // 8, "big", signed=True)


def dgk_key_id(n: int, g: int, h: int, u: int, t: int) -> bytes:
    """A 16-byte identifier of a DGK public key (what ciphertext messages carry)."""
    digest = hashlib.sha256(b"privreg.dgk.key\x00")
    for x in (n, g, h, u, t):
        digest.update(_int_bytes(x) + b"\x00")
    return digest.digest()[:16]


def lookup_dgk_public_key(kid: bytes) -> DgkPublicKey | None:
    """The live DGK public key with identifier ``kid`` in this process, if any."""
    return _REGISTRY.get(kid)


def _check_flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise PrivregTypeError(f"insecure_allow_small_keys must be True or False; got {value!r}.")
    return value


def _size_reason(n_bits: int) -> str:
    return f"n has {n_bits} bits, below the {MIN_KEY_BITS}-bit minimum (allowed by insecure_allow_small_keys=True)"


def _t_reason(t: int) -> str:
    return f"vp and vq have t={t} bits, below the {MIN_T}-bit minimum (allowed by insecure_allow_small_keys=True)"


def _check_n_bits(argname: str, n_bits: int, insecure: bool) -> None:
    if n_bits > MAX_KEY_BITS:
        raise PrivregValueError(
            f"{argname}={n_bits} is above the {MAX_KEY_BITS}-bit maximum; use {argname}={MIN_KEY_BITS} "
            f"(or up to {MAX_KEY_BITS})."
        )
    if n_bits < MIN_INSECURE_KEY_BITS:
        raise PrivregValueError(
            f"{argname}={n_bits} is below {MIN_INSECURE_KEY_BITS} bits, too small even for tests; "
            f"use {argname}={MIN_KEY_BITS} (or >= {MIN_INSECURE_KEY_BITS} with insecure_allow_small_keys=True)."
        )
    if n_bits < MIN_KEY_BITS and not insecure:
        raise PrivregValueError(
            f"{argname}={n_bits} is below the {MIN_KEY_BITS}-bit minimum for DGK keys. Use {argname}={MIN_KEY_BITS} "
            f"or more; for tests only, pass insecure_allow_small_keys=True (the key is then marked insecure)."
        )


def _check_t(value: Any, insecure: bool) -> int:
    t = v.check_int("t", value)
    if not MIN_INSECURE_T <= t <= MAX_T:
        raise PrivregValueError(
            f"t={t} is outside [{MIN_INSECURE_T}, {MAX_T}]; use t={MIN_T} (the paper's) or t=224 (112-bit security)."
        )
    if t < MIN_T and not insecure:
        raise PrivregValueError(
            f"t={t} is below the {MIN_T}-bit minimum for the subgroup primes; use t={MIN_T} or more, or for tests "
            f"only pass insecure_allow_small_keys=True (the key is then marked insecure)."
        )
    return t


def _room(n_bits: int, u: int, t: int) -> int:
    """Bits left for the random cofactor of the smaller prime ``p = 2 u vp k + 1``."""
    return n_bits // 2 - 1 - u.bit_length() - t


_MIN_ROOM = 16  # a cofactor of at least 16 bits leaves enough primes of the form 2 u vp k + 1


def _r_bits(t: int) -> int:
    """Bits of the public encryption exponent: ceil(2.5 t), as in the paper."""
    return (5 * t + 1) // 2


def _units(n: mpz, **values: int) -> dict[str, mpz]:
    out = {}
    for name, value in values.items():
        x = mpz(v.check_int(name, value, minimum=2))
        if x >= n or gmpy2.gcd(x, n) != 1 or x * x % n == 1:
            raise PrivregValueError(f"{name} must be a unit modulo n in [2, n) of order above 2 (the DGK base {name}).")
        out[name] = x
    return out


@functools.lru_cache(maxsize=8)
def power_table(base: int, modulus: int, count: int) -> tuple[mpz, ...]:
    """``base^j mod modulus`` for ``j`` in ``[0, count)``, built once per process (small LRU
    cache): the plaintext powers ``g^m`` of a key, ``m < u``."""
    m, b = mpz(modulus), mpz(base)
    out = [mpz(1)]
    for _ in range(count - 1):
        out.append(out[-1] * b % m)
    return tuple(out)


def random_bits(rng: RandomSource, bits: int, count: int) -> list[int]:
    """``count`` uniform integers in ``[0, 2^bits)`` from one draw of ``rng.random_bytes``
    (one system call for the OS CSPRNG instead of one per value)."""
    nbytes = (bits + 7) // 8
    buf = rng.random_bytes(nbytes * count)
    mask = (1 << bits) - 1
    return [int.from_bytes(buf[i : i + nbytes], "little") & mask for i in range(0, nbytes * count, nbytes)]


def uniform_below(rng: RandomSource, bound: int, count: int) -> list[int]:
    """``count`` integers exactly uniform in ``[0, bound)``: ``bits(bound - 1)``-bit draws from
    :func:`random_bits`, rejected when ``>= bound`` (at most half are, on average)."""
    bits = (int(bound) - 1).bit_length()
    out: list[int] = []
    while len(out) < count:
        need = count - len(out)
        out.extend(x for x in random_bits(rng, bits, need + need // 2 + 4) if x < bound)
    return out[:count]


class DgkPublicKey:
    """A DGK public key ``(n, g, h, u, t)`` (see the module docstring).

    Args:
        n: the modulus ``p q``.
        g: a public element of order ``u vp vq``.
        h: a public element of order ``vp vq``.
        u: the plaintext modulus, a prime in ``[3, MAX_U]``.
        t: the bit length of the secret subgroup primes ``vp`` and ``vq``.
        insecure_allow_small_keys: accept ``n`` below 2048 bits or ``t`` below 160; the key
            is then marked insecure.

    Keys with the same ``(n, g, h, u, t)`` are equal. The orders of ``g`` and ``h`` cannot be
    checked without the factors; :func:`generate_dgk_keypair` checks them.
    """

    def __init__(
        self,
        *,
        n: int,
        g: int,
        h: int,
        u: int,
        t: int,
        insecure_allow_small_keys: bool = False,
        _reasons: Sequence[str] = (),
    ) -> None:
        insecure = _check_flag(insecure_allow_small_keys)
        n = v.check_int("n", n, minimum=3)
        if n % 2 == 0:
            raise PrivregValueError(f"n must be an odd modulus p*q; got an even number ({n.bit_length()} bits).")
        self.n = mpz(n)
        self.n_bits = n.bit_length()
        _check_n_bits("n (bits)", self.n_bits, insecure)
        self.t = _check_t(t, insecure)
        u = v.check_int("u", u, minimum=3)
        if u > MAX_U or not gmpy2.is_prime(u):
            raise PrivregValueError(f"u must be a prime in [3, {MAX_U}] (the plaintext modulus); got {u}.")
        if _room(self.n_bits, u, self.t) < _MIN_ROOM:
            raise PrivregValueError(
                f"t={self.t} and u={u} leave no room in a {self.n_bits}-bit modulus for primes p = 2 u vp k + 1; "
                f"use a smaller t or a larger key."
            )
        self.u = u
        units = _units(self.n, g=g, h=h)
        self.g, self.h = units["g"], units["h"]
        if self.g == self.h:
            raise PrivregValueError("g and h must differ (g has order u vp vq, h has order vp vq).")
        reasons = list(_reasons)
        if self.t < MIN_T:
            reasons.insert(0, _t_reason(self.t))
        if self.n_bits < MIN_KEY_BITS:
            reasons.insert(0, _size_reason(self.n_bits))
        self.insecure_reasons: tuple[str, ...] = tuple(reasons)
        #: Bits of the encryption and re-randomisation exponent: ceil(2.5 t).
        self.r_bits = _r_bits(self.t)
        self.key_id = dgk_key_id(n, int(self.g), int(self.h), u, self.t)
        _REGISTRY.setdefault(self.key_id, self)

    @property
    def insecure(self) -> bool:
        """True when ``n`` is below 2048 bits, ``t`` below 160, or the key came from a seeded source."""
        return bool(self.insecure_reasons)

    def _fields(self) -> tuple[int, int, int, int, int]:
        return int(self.n), int(self.g), int(self.h), self.u, self.t

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DgkPublicKey) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(("dgk", *self._fields()))

    def __repr__(self) -> str:
        flag = f", INSECURE: {'; '.join(self.insecure_reasons)}" if self.insecure else ""
        return f"DgkPublicKey({self.n_bits} bits, u={self.u}, t={self.t}, id={self.key_id.hex()[:12]}{flag})"

    def check_same(self, other: DgkPublicKey, what: str) -> None:
        """Raise PrivregValueError unless ``other`` is this key."""
        if other != self:
            raise PrivregValueError(
                f"{what} is under DGK key {other.key_id.hex()[:12]} but this operation uses key "
                f"{self.key_id.hex()[:12]}; ciphertexts of different keys cannot be combined"
            )

    def _plaintexts(self, values: Any) -> list[int]:
        ms = [v.check_int("values", m) for m in values]
        for m in ms:
            if not 0 <= m < self.u:
                raise PrivregValueError(
                    f"values must lie in [0, u) = [0, {self.u}) (the DGK plaintext space); got {m}."
                )
        return ms

    def encrypt(
        self, values: Sequence[int], *, rng: RandomSource | None = None, workers: int | None = None
    ) -> DgkCiphertexts:
        """Encryptions ``g^m h^r`` of ``values`` (each in ``[0, u)``), ``r`` of ``ceil(2.5 t)`` bits."""
        ms = self._plaintexts(values)
        exps = random_bits(resolve_random(rng), self.r_bits, len(ms))
        w = parallel.resolve_workers(len(ms), workers)
        chunks = [
            (int(self.n), int(self.g), int(self.h), self.u, self.r_bits, list(ms[i0 : i0 + len(part)]), list(part))
            for i0, part in _offsets(parallel.split(exps, w))
        ]
        cts = parallel.run_chunks(_public_encrypt_chunk, chunks, w) if ms else []
        return DgkCiphertexts(public_key=self, ciphertexts=cts, randomised=True)

    def rerandomize(
        self, ciphertexts: DgkCiphertexts, *, rng: RandomSource | None = None, workers: int | None = None
    ) -> DgkCiphertexts:
        """Fresh ciphertexts of the same plaintexts: each multiplied by ``h^r``, ``r`` of
        ``ceil(2.5 t)`` bits (a fixed-base table lookup)."""
        if not isinstance(ciphertexts, DgkCiphertexts):
            raise PrivregTypeError(f"ciphertexts must be DgkCiphertexts; got {type(ciphertexts).__name__}.")
        self.check_same(ciphertexts.public_key, "the ciphertexts")
        exps = random_bits(resolve_random(rng), self.r_bits, len(ciphertexts))
        w = parallel.resolve_workers(len(exps), workers)
        cts = ciphertexts._c
        chunks = [
            (int(self.n), int(self.h), self.r_bits, cts[i0 : i0 + len(part)], list(part))
            for i0, part in _offsets(parallel.split(exps, w))
        ]
        out = parallel.run_chunks(_rerandomize_chunk, chunks, w) if exps else []
        return DgkCiphertexts(public_key=self, ciphertexts=out, randomised=True)


def _offsets(parts: list[Sequence[int]]) -> list[tuple[int, Sequence[int]]]:
    out, start = [], 0
    for part in parts:
        out.append((start, part))
        start += len(part)
    return out


def _public_encrypt_chunk(
    n: int, g: int, h: int, u: int, r_bits: int, ms: Sequence[int], exps: Sequence[int]
) -> list[mpz]:
    table, gpow, nn = fixed_base_table(h, n, r_bits), power_table(g, n, u), mpz(n)
    return [gpow[m] * table.pow(a) % nn for m, a in zip(ms, exps)]


def _rerandomize_chunk(n: int, h: int, r_bits: int, cts: Sequence[mpz], exps: Sequence[int]) -> list[mpz]:
    table, nn = fixed_base_table(h, n, r_bits), mpz(n)
    return [c * table.pow(a) % nn for c, a in zip(cts, exps)]


# ------------------------------------------------------------------ ciphertexts


class DgkCiphertexts:
    """Raw DGK ciphertexts under one key (residues modulo ``n``).

    ``randomised`` is True for fresh encryptions and re-randomised ciphertexts only; the
    wire codec refuses to send others (a value computed from a peer's ciphertexts could
    leak the operands), and received ciphertexts count as not re-randomised.
    """

    __slots__ = ("_c", "public_key", "randomised")

    def __init__(self, *, public_key: DgkPublicKey, ciphertexts: list[mpz], randomised: bool) -> None:
        if not isinstance(public_key, DgkPublicKey):
            raise PrivregTypeError(f"public_key must be a DgkPublicKey; got {type(public_key).__name__}.")
        self.public_key = public_key
        self._c = ciphertexts
        self.randomised = randomised

    def __len__(self) -> int:
        return len(self._c)

    @property
    def ciphertext_count(self) -> int:
        """Ciphertexts held (what transcripts count)."""
        return len(self._c)

    @property
    def ciphertexts(self) -> tuple[int, ...]:
        """The raw ciphertexts as Python ints (copies)."""
        return tuple(int(c) for c in self._c)

    def raw(self) -> list[mpz]:
        """The ciphertexts as a new list of gmpy2 integers (for protocol code)."""
        return list(self._c)

    def __repr__(self) -> str:
        return (
            f"DgkCiphertexts({len(self)} ciphertexts, key {self.public_key.key_id.hex()[:12]}"
            f"{'' if self.randomised else ', not re-randomised'})"
        )


def _cts_to_wire(cts: DgkCiphertexts) -> tuple[Any, ...]:
    if not cts.randomised:
        raise SerializationError(
            "DgkCiphertexts must be fresh or re-randomised before they are sent: values computed from a peer's "
            "ciphertexts could leak the operands; send key.rerandomize(ciphertexts)"
        )
    pk = cts.public_key
    width = (pk.n_bits + 7) // 8
    return (pk.key_id, width, b"".join(int(c).to_bytes(width, "big") for c in cts._c))


def _cts_from_wire(t: Any) -> DgkCiphertexts:
    if not (
        isinstance(t, tuple)
        and len(t) == 3
        and isinstance(t[0], bytes)
        and isinstance(t[1], int)
        and not isinstance(t[1], bool)
        and isinstance(t[2], bytes)
    ):
        raise SerializationError("malformed DgkCiphertexts")
    kid, width, blob = t
    pk = lookup_dgk_public_key(kid)
    if pk is None:
        raise SerializationError(
            f"DGK ciphertexts under unknown key {kid.hex()[:12]}: the sender must send its DgkPublicKey first, "
            f"and the receiver must keep a reference to it"
        )
    if width != (pk.n_bits + 7) // 8 or len(blob) % width:
        raise SerializationError("malformed DgkCiphertexts (width)")
    n = pk.n
    cts = [mpz.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]
    if any(not 0 < c < n for c in cts):
        raise SerializationError("a DGK ciphertext lies outside (0, n)")
    return DgkCiphertexts(public_key=pk, ciphertexts=cts, randomised=False)


# ------------------------------------------------------------------ public keys on the wire


def _public_to_wire(pk: DgkPublicKey) -> dict[str, Any]:
    return {
        "n": int(pk.n),
        "g": int(pk.g),
        "h": int(pk.h),
        "u": pk.u,
        "t": pk.t,
        "insecure_reasons": list(pk.insecure_reasons),
    }


def _refuse(why: str) -> SerializationError:
    return SerializationError(f"received DGK key: {why}")


def _check_received(n: int, g: int, h: int, u: int, t: int, reasons: list[str]) -> None:
    """Raise SerializationError unless the fields are a plausible DGK key (module doc)."""
    if n <= 0:
        raise _refuse("modulus is not positive")
    bits = n.bit_length()
    if not MIN_INSECURE_KEY_BITS <= bits <= MAX_KEY_BITS:
        raise _refuse(f"modulus has {bits} bits; accepted are {MIN_INSECURE_KEY_BITS} to {MAX_KEY_BITS}")
    if (bits < MIN_KEY_BITS or t < MIN_T) and not reasons:
        raise _refuse(
            f"modulus of {bits} bits with t={t} is below the minimum ({MIN_KEY_BITS} bits, t={MIN_T}) and the key "
            f"does not say it is insecure; the sender must generate it with insecure_allow_small_keys=True"
        )
    if not MIN_INSECURE_T <= t <= MAX_T:
        raise _refuse(f"t={t} is outside [{MIN_INSECURE_T}, {MAX_T}]")
    if not 3 <= u <= MAX_U or not gmpy2.is_prime(u):
        raise _refuse(f"u must be a prime in [3, {MAX_U}]")
    if _room(bits, u, t) < _MIN_ROOM:
        raise _refuse(f"t={t} and u={u} do not fit a {bits}-bit modulus of the DGK form")
    check_composite_modulus(n, what="DGK key")
    for name, x in (("g", g), ("h", h)):
        if not 2 <= x < n or gmpy2.gcd(x, n) != 1 or x * x % n == 1:
            raise _refuse(f"{name} must be a unit in [2, n) of order above 2")
    if g == h:
        raise _refuse("g and h are equal")


def _checked_digest(fields: tuple[int, ...], reasons: list[str]) -> bytes:
    digest = hashlib.sha256(b"privreg.dgk.checked\x00")
    for x in fields:
        digest.update(_int_bytes(x) + b"\x00")
    digest.update("\x00".join(reasons).encode("utf-8"))
    return digest.digest()


def _public_from_wire(d: Any) -> DgkPublicKey:
    if not isinstance(d, dict) or set(d) != {"n", "g", "h", "u", "t", "insecure_reasons"}:
        raise _refuse("expected a dict of the fields 'n', 'g', 'h', 'u', 't' and 'insecure_reasons'")
    n, g, h, u, t = (d[k] for k in ("n", "g", "h", "u", "t"))
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (n, g, h, u, t)):
        raise _refuse("n, g, h, u and t must be integers")
    reasons = received_reasons(d["insecure_reasons"], what="DGK key")
    digest = _checked_digest((n, g, h, u, t), reasons)
    if digest in _CHECKED:  # this key passed the checks in this process already
        _CHECKED.move_to_end(digest)
    else:
        _check_received(n, g, h, u, t, reasons)
        _CHECKED[digest] = None
        if len(_CHECKED) > _MAX_CHECKED:
            _CHECKED.popitem(last=False)
    existing = _REGISTRY.get(dgk_key_id(n, g, h, u, t))
    if existing is not None and list(existing.insecure_reasons) == reasons:
        return existing
    computed = {_size_reason(n.bit_length()), _t_reason(t)}
    own = [r for r in reasons if r not in computed]  # the constructor puts the computed ones back
    small = n.bit_length() < MIN_KEY_BITS or t < MIN_T
    try:
        return DgkPublicKey(n=n, g=g, h=h, u=u, t=t, insecure_allow_small_keys=small, _reasons=own)
    except (PrivregValueError, PrivregTypeError) as exc:  # checked above: should not happen
        raise _refuse("DgkPublicKey refused it") from exc


register_type(
    "privreg.dgk.PublicKey", DgkPublicKey, _public_to_wire, _public_from_wire, max_per_message=MAX_KEYS_PER_MESSAGE
)
register_type("privreg.dgk.Ciphertexts", DgkCiphertexts, _cts_to_wire, _cts_from_wire)


async def send_dgk_public_key(ch: Channel, to: str, public_key: DgkPublicKey, *, step: str) -> None:
    """Send a DGK public key (``n, g, h, u, t`` and its insecure reasons)."""
    if not isinstance(public_key, DgkPublicKey):
        raise PrivregTypeError(f"public_key must be a DgkPublicKey; got {type(public_key).__name__}.")
    await ch.send(to, public_key, step=step)


async def recv_dgk_public_key(ch: Channel, frm: str, *, step: str, allow_insecure: bool = False) -> DgkPublicKey:
    """Receive a DGK public key; an insecure one (below 2048 bits, ``t`` below 160, or from a
    seeded source) only if ``allow_insecure``. The codec has checked the key already."""
    pk = await ch.recv(frm, step=step)
    if not isinstance(pk, DgkPublicKey):
        raise ProtocolError(f"expected a DgkPublicKey from {frm!r} at step {step!r}; got {type(pk).__name__}")
    if pk.insecure and not allow_insecure:
        raise ProtocolError(
            f"{frm!r} sent an insecure DGK key ({'; '.join(pk.insecure_reasons)}); accept it only for tests with "
            f"allow_insecure=True"
        )
    return pk


# ------------------------------------------------------------------ private key


def _crt(xp: mpz, xq: mpz, q: mpz, q_inv_p: mpz, p: mpz) -> mpz:
    return xq + q * ((xp - xq) * q_inv_p % p)


def _crt_encrypt_chunk(params: tuple[int, ...], ms: Sequence[int], aps: Sequence[int], aqs: Sequence[int]) -> list[mpz]:
    """``g^m h^a`` by the CRT: ``g_p^m h_p^(a_p)`` modulo p and ``g_q^m h_q^(a_q)`` modulo q,
    exponents uniform modulo vp and vq; ``params`` = (p, q, g_p, g_q, h_p, h_q, q^-1 mod p, u, t)."""
    p, q, gp, gq, hp, hq, q_inv_p, u, t = params
    tp, tq = fixed_base_table(hp, p, t), fixed_base_table(hq, q, t)
    gpp, gqq = power_table(gp, p, u), power_table(gq, q, u)
    pp, qq, qi = mpz(p), mpz(q), mpz(q_inv_p)
    out = []
    for m, a, b in zip(ms, aps, aqs):
        xp, xq = tp.pow(a), tq.pow(b)
        if m:
            xp, xq = xp * gpp[m] % pp, xq * gqq[m] % qq
        out.append(_crt(xp, xq, qq, qi, pp))
    return out


def _zero_chunk(p: int, vp: int, cts: Sequence[mpz]) -> list[bool]:
    pp, e = mpz(p), mpz(vp)
    return [gmpy2.powmod(c % pp, e, pp) == 1 for c in cts]


def _decrypt_chunk(p: int, vp: int, base: int, u: int, cts: Sequence[mpz]) -> list[int]:
    pp, e = mpz(p), mpz(vp)
    table = {int(x): m for m, x in enumerate(power_table(base, p, u))}
    return [table.get(int(gmpy2.powmod(c % pp, e, pp)), -1) for c in cts]


class DgkPrivateKey:
    """The factors ``p, q`` and subgroup primes ``vp, vq`` of a DGK public key.

    It cannot be pickled or sent. It encrypts by the CRT (:meth:`encrypt`), tests
    plaintexts for zero (:meth:`is_zero`, exact) and decrypts (:meth:`decrypt`, a table
    of ``u`` entries).
    """

    def __init__(self, *, public_key: DgkPublicKey, p: int, q: int, vp: int, vq: int) -> None:
        if not isinstance(public_key, DgkPublicKey):
            raise PrivregTypeError(f"public_key must be a DgkPublicKey; got {type(public_key).__name__}.")
        p, q = mpz(v.check_int("p", p, minimum=3)), mpz(v.check_int("q", q, minimum=3))
        vp, vq = mpz(v.check_int("vp", vp, minimum=3)), mpz(v.check_int("vq", vq, minimum=3))
        if p * q != public_key.n or p == q:
            raise PrivregValueError("p and q must be the two distinct prime factors of public_key.n.")
        u = public_key.u
        if (
            (p - 1) % (u * vp)
            or (q - 1) % (u * vq)
            or vp.bit_length() != public_key.t
            or vq.bit_length() != public_key.t
        ):
            raise PrivregValueError("vp and vq must be t-bit primes with u vp | p - 1 and u vq | q - 1.")
        self.public_key = public_key
        self.p, self.q, self.vp, self.vq = p, q, vp, vq
        g, h = public_key.g, public_key.h
        self.gp, self.gq, self.hp, self.hq = g % p, g % q, h % p, h % q
        self.q_inv_p = gmpy2.invert(q, p)
        #: ``g^vp mod p``, of order u: the zero test and decryption compare against its powers.
        self.gvp = gmpy2.powmod(self.gp, vp, p)

    def __repr__(self) -> str:
        return f"DgkPrivateKey(for {self.public_key!r})"

    def __reduce__(self) -> Any:
        raise TypeError("a DgkPrivateKey is not pickled; ship its integers explicitly if you must")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DgkPrivateKey) and self.public_key == other.public_key

    def __hash__(self) -> int:
        return hash(("dgk-private", *self.public_key._fields()))

    def check_orders(self) -> bool:
        """Whether ``g`` has order exactly ``u vp vq`` and ``h`` exactly ``vp vq``, checked per
        prime (``g mod p`` of order ``u vp``, ``g mod q`` of ``u vq``, ``h mod p`` of ``vp``,
        ``h mod q`` of ``vq``); and the subgroup of order ``vp vq`` is unique."""
        u, p, q, vp, vq = self.public_key.u, self.p, self.q, self.vp, self.vq

        def order_is(x: mpz, modulus: mpz, primes: Sequence[int]) -> bool:
            order = mpz(1)
            for r in primes:
                order *= r
            return gmpy2.powmod(x, order, modulus) == 1 and all(
                gmpy2.powmod(x, order // r, modulus) != 1 for r in primes
            )

        return (
            order_is(self.gp, p, [u, int(vp)])
            and order_is(self.gq, q, [u, int(vq)])
            and order_is(self.hp, p, [int(vp)])
            and order_is(self.hq, q, [int(vq)])
            and (p - 1) % vq != 0
            and (q - 1) % vp != 0
        )

    def _params(self) -> tuple[int, ...]:
        pk = self.public_key
        return tuple(int(x) for x in (self.p, self.q, self.gp, self.gq, self.hp, self.hq, self.q_inv_p, pk.u, pk.t))

    def encrypt(
        self, values: Sequence[int], *, rng: RandomSource | None = None, workers: int | None = None
    ) -> DgkCiphertexts:
        """Encryptions of ``values`` (each in ``[0, u)``) by the CRT, with an exactly uniform
        element of ``<h>`` as randomness (see the module docstring)."""
        pk = self.public_key
        ms = pk._plaintexts(values)
        rng = resolve_random(rng)
        aps, aqs = uniform_below(rng, int(self.vp), len(ms)), uniform_below(rng, int(self.vq), len(ms))
        w = parallel.resolve_workers(len(ms), workers)
        params = self._params()
        chunks = [
            (params, list(ms[i0 : i0 + len(part)]), list(part), aqs[i0 : i0 + len(part)])
            for i0, part in _offsets(parallel.split(aps, w))
        ]
        cts = parallel.run_chunks(_crt_encrypt_chunk, chunks, w) if ms else []
        return DgkCiphertexts(public_key=pk, ciphertexts=cts, randomised=True)

    def _own(self, ciphertexts: Any) -> list[mpz]:
        if isinstance(ciphertexts, DgkCiphertexts):
            self.public_key.check_same(ciphertexts.public_key, "the ciphertexts")
            return ciphertexts._c
        return [mpz(v.check_int("ciphertexts", c, minimum=1)) for c in ciphertexts]

    def is_zero(self, ciphertexts: DgkCiphertexts | Sequence[int], *, workers: int | None = None) -> list[bool]:
        """Whether each plaintext is 0 modulo ``u``: ``c^vp mod p == 1`` (exact for
        encryptions under this key)."""
        cts = self._own(ciphertexts)
        w = parallel.resolve_workers(len(cts), workers)
        chunks = [(int(self.p), int(self.vp), list(part)) for part in parallel.split(cts, w)]
        return parallel.run_chunks(_zero_chunk, chunks, w) if cts else []

    def decrypt(self, ciphertexts: DgkCiphertexts | Sequence[int], *, workers: int | None = None) -> list[int]:
        """The plaintexts in ``[0, u)``; PrivregValueError if a ciphertext is not an
        encryption under this key (``c^vp mod p`` outside the powers of ``g^vp``)."""
        cts = self._own(ciphertexts)
        w = parallel.resolve_workers(len(cts), workers)
        pk = self.public_key
        chunks = [(int(self.p), int(self.vp), int(self.gvp), pk.u, list(part)) for part in parallel.split(cts, w)]
        out = parallel.run_chunks(_decrypt_chunk, chunks, w) if cts else []
        bad = [i for i, m in enumerate(out) if m < 0]
        if bad:
            raise PrivregValueError(
                f"ciphertexts {bad[:5]} are not DGK encryptions under this key (c^vp mod p is no power of g^vp)."
            )
        return [int(m) for m in out]


@attrs.frozen(kw_only=True)
class DgkKeypair:
    """A DGK public key and its private key."""

    public_key: DgkPublicKey
    private_key: DgkPrivateKey = attrs.field(repr=False)

    @property
    def insecure(self) -> bool:
        return self.public_key.insecure


# ------------------------------------------------------------------ key generation


def _random_prime(bits: int, rng: RandomSource) -> mpz:
    """A random ``bits``-bit prime (top bit set)."""
    while True:
        x = gmpy2.next_prime(mpz(rng.randbits(bits)) | (mpz(1) << (bits - 1)))
        if x.bit_length() == bits:
            return x


def _is_prime(x: mpz) -> bool:
    return bool(gmpy2.is_prime(x, 50) and gmpy2.is_strong_bpsw_prp(x))


def _dgk_prime(bits: int, u: int, v: mpz, avoid: mpz | None, rng: RandomSource) -> mpz:
    """A ``bits``-bit prime ``P = 2 u v k + 1`` at least ``sqrt(2) 2^(bits-1)`` (so that two of
    them make a modulus of exactly the requested length), with ``avoid`` not dividing
    ``P - 1``."""
    step = 2 * u * v
    lo = -(-(gmpy2.isqrt(mpz(1) << (2 * bits - 1)) + 1) // step)
    hi = ((mpz(1) << bits) - 2) // step
    while True:
        k = lo + rng.randbelow(int(hi - lo + 1))
        cand = step * k + 1
        if (avoid is None or (cand - 1) % avoid) and _is_prime(cand):
            return cand


def _element_of_order(prime: mpz, cofactor: mpz, order_primes: Sequence[int], rng: RandomSource) -> mpz:
    """An element of ``Z_prime^*`` of order exactly ``prod(order_primes)`` (distinct primes
    whose product times ``cofactor`` is ``prime - 1``): ``x^cofactor`` for random ``x``,
    kept when no ``x^(cofactor * order / r)`` is 1."""
    order = mpz(1)
    for r in order_primes:
        order *= r
    while True:
        x = mpz(2 + rng.randbelow(int(prime) - 3))
        y = gmpy2.powmod(x, cofactor, prime)
        if y != 1 and all(gmpy2.powmod(y, order // r, prime) != 1 for r in order_primes):
            return y


def plaintext_modulus(comparison_bits: int) -> int:
    """The ``u`` of a key for comparisons of up to ``comparison_bits`` bits: the smallest
    prime above ``2^bits(3 comparison_bits + 6)`` (so ``u > 3 l + 6``; 131 for ``l = 32``)."""
    bits = v.check_int("comparison_bits", comparison_bits, minimum=1)
    u = int(gmpy2.next_prime(mpz(1) << (3 * bits + 6).bit_length()))
    if u > MAX_U:
        raise PrivregValueError(
            f"comparison_bits={bits} needs a plaintext modulus above {MAX_U} (MAX_U); use comparison_bits <= "
            f"{(MAX_U // 2 - 6) // 3}."
        )
    return u


def generate_dgk_keypair(
    *,
    n_bits: int = MIN_KEY_BITS,
    t: int = MIN_T,
    comparison_bits: int = 32,
    insecure_allow_small_keys: bool = False,
    rng: RandomSource | None = None,
) -> DgkKeypair:
    """A fresh DGK key pair (module docstring): an ``n_bits``-bit modulus (default 2048),
    ``t``-bit subgroup primes (default 160) and ``u`` = :func:`plaintext_modulus`
    (``comparison_bits``).

    Below 2048 bits or ``t = 160`` only with ``insecure_allow_small_keys=True`` (tests); the
    key then says it is insecure, as does a key drawn from a reproducible ``rng``. Primes
    pass 50 Miller-Rabin rounds and a strong BPSW test; the orders of ``g`` and ``h`` are
    checked exactly. Well under a second at 2048 bits (0.04-0.08 s measured).
    """
    insecure = _check_flag(insecure_allow_small_keys)
    n_bits = v.check_int("n_bits", n_bits)
    _check_n_bits("n_bits", n_bits, insecure)
    t = _check_t(t, insecure)
    u = plaintext_modulus(comparison_bits)
    if _room(n_bits, u, t) < _MIN_ROOM:
        raise PrivregValueError(
            f"t={t} and comparison_bits={comparison_bits} (u={u}) leave no room for primes p = 2 u vp k + 1 in a "
            f"{n_bits}-bit modulus; use a smaller t or a larger n_bits."
        )
    rng = resolve_random(rng)
    reasons = [_SEEDED] if rng.reproducible else []
    p_bits = n_bits // 2
    q_bits = n_bits - p_bits
    min_gap = mpz(1) << max(0, p_bits - 100)
    while True:
        vp = _random_prime(t, rng)
        vq = _random_prime(t, rng)
        if vp == vq:
            continue
        p = _dgk_prime(p_bits, u, vp, vq, rng)
        q = _dgk_prime(q_bits, u, vq, vp, rng)
        n = p * q
        if p != q and abs(p - q) >= min_gap and n.bit_length() == n_bits:
            break
    gp = _element_of_order(p, (p - 1) // (u * vp), [u, int(vp)], rng)
    gq = _element_of_order(q, (q - 1) // (u * vq), [u, int(vq)], rng)
    hp = _element_of_order(p, (p - 1) // vp, [int(vp)], rng)
    hq = _element_of_order(q, (q - 1) // vq, [int(vq)], rng)
    q_inv_p = gmpy2.invert(q, p)
    g, h = _crt(gp, gq, q, q_inv_p, p), _crt(hp, hq, q, q_inv_p, p)
    public = DgkPublicKey(n=int(n), g=int(g), h=int(h), u=u, t=t, insecure_allow_small_keys=insecure, _reasons=reasons)
    private = DgkPrivateKey(public_key=public, p=int(p), q=int(q), vp=int(vp), vq=int(vq))
    if not private.check_orders():  # by construction; a failure would be a bug
        raise PrivregValueError("DGK key generation produced bases of the wrong order; report this as a bug.")
    return DgkKeypair(public_key=public, private_key=private)
