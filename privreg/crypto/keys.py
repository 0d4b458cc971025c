"""Paillier keys: generation from the OS CSPRNG, CRT decryption of raw ciphertexts.

Keys work on integers only: encrypting and decrypting values (bounds, fixed point,
vectors) is :mod:`privreg.crypto.vector`'s (``encrypt``, ``decrypt``), packed
ciphertexts are :mod:`privreg.crypto.packing`'s.

The scheme is Paillier's (Eurocrypt 1999) with ``g = n + 1``, so ``g^m = 1 + m n mod n^2``,
plus the Damgard-Jurik-Nielsen fixed base ``h_s`` in the public key for fast encryption
(see :mod:`privreg.crypto.obfuscation`).

Key generation draws primes from :mod:`secrets` (through
:class:`~privreg.core.randomness.SecureRandom`): a random odd ``k``-bit candidate with its
top two bits set, then ``gmpy2.next_prime``, confirmed with 50 Miller-Rabin rounds and a
strong BPSW test. Primes satisfy ``p = q = 3 (mod 4)`` and ``gcd(p-1, q-1) = 2`` (the
moduli of DJN), ``|p - q|`` is large, and ``n`` has exactly the requested length.
Starting from a random point and taking the next prime slightly favours primes after
long gaps; this is the standard practice (python-paillier and GMP-based libraries do the
same) and is not known to help factoring.

Keys shorter than 2048 bits are refused unless ``insecure_allow_small_keys=True`` is
passed; such keys say so (``key.insecure`` and ``key.insecure_reasons``, and their repr).
The paper reproductions at 256 and 1024 bits use that opt-in. Keys longer than
:data:`MAX_KEY_BITS` (8192) are refused: nothing needs them, and a peer's oversized key
would make every operation under it slow.

A public key received from a peer (wire type ``privreg.paillier.PublicKey``: ``n``, the DJN
base ``h``, and the sender's ``insecure_reasons``) is checked before use, since a weak or
malformed key puts the values encrypted under it at risk: ``n`` must have
:data:`MIN_INSECURE_KEY_BITS` to :data:`MAX_KEY_BITS` bits (below :data:`MIN_KEY_BITS` only
if the key says it is insecure), be odd, have no prime factor below ``2^16`` (one gcd with
the product of those primes) and not be a probable prime (one strong Fermat test to base 2,
which every prime passes); ``h`` must be a unit modulo ``n^2``. That costs one modular
exponentiation modulo ``n`` (about 1-3 ms at 2048 bits, 0.2-0.3 s at 8192) plus a gcd, so
one message may carry at most :data:`MAX_KEYS_PER_MESSAGE` (4) keys (the codec refuses
more: protocols send one key per message), and a key that passed the checks is not
checked again when it arrives again (the process remembers the SHA-256 of ``n``, ``h``
and the reasons of the last 256 keys it accepted). The
checks cannot tell a modulus with two large factors from one with three, nor that ``h`` is
an ``n``-th residue: those need the factors. The rebuilt key has the sender's insecure
reasons (at most 8, of at most 200 printable characters each), plus the size reason when
``n`` is below 2048 bits whatever the sender says.

Decryption uses the CRT (exponent ``p - 1`` modulo ``p^2`` and ``q - 1`` modulo ``q^2``);
encryption by the key holder computes obfuscators modulo ``p^2`` and ``q^2`` and joins
them by the CRT; its fast (``djn``) path draws the exponent uniformly modulo
``lcm(p-1, q-1)`` and so needs DCR only (see :mod:`privreg.crypto.obfuscation`).
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
from privreg.core.errors import PrivregTypeError, PrivregValueError, SerializationError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import parallel
from privreg.crypto.counting import add_count
from privreg.crypto.errors import WrongKeyError
from privreg.mpc.wire import register_type

__all__ = [
    "MAX_KEY_BITS",
    "check_composite_modulus",
    "received_reasons",
    "MAX_KEYS_PER_MESSAGE",
    "MIN_KEY_BITS",
    "PaillierPublicKey",
    "PaillierPrivateKey",
    "PaillierKeypair",
    "generate_paillier_keypair",
    "lookup_public_key",
]

#: The smallest key accepted without ``insecure_allow_small_keys=True``.
MIN_KEY_BITS = 2048
#: The smallest key accepted at all (tests and paper reproduction).
MIN_INSECURE_KEY_BITS = 128
#: The largest key accepted (generated, built or received from a peer).
MAX_KEY_BITS = 8192

# a received modulus has no prime factor below this bound (checked by one gcd)
_TRIAL_DIVISION_BOUND = 2**16
# the insecure reasons a received key may carry
_MAX_REASONS = 8
_MAX_REASON_CHARS = 200

#: The most public keys one received message may carry (the codec refuses more).
MAX_KEYS_PER_MESSAGE = 4

# digests of the received keys (n, h, insecure reasons) that passed the checks, most
# recent last: a key received again is not checked again
_CHECKED: collections.OrderedDict[bytes, None] = collections.OrderedDict()
_MAX_CHECKED = 256

_REGISTRY: weakref.WeakValueDictionary[bytes, PaillierPublicKey] = weakref.WeakValueDictionary()


def key_id(n: int) -> bytes:
    """A 16-byte identifier of the modulus ``n`` (what ciphertext messages carry)."""
    n = int(n)
    return hashlib.sha256(b"privreg.paillier.n:" + n.to_bytes((n.bit_length() + 7) // 8, "big")).digest()[:16]


def lookup_public_key(kid: bytes) -> PaillierPublicKey | None:
    """The live public key with identifier ``kid`` in this process, if any."""
    return _REGISTRY.get(kid)


def _check_flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise PrivregTypeError(f"insecure_allow_small_keys must be True or False; got {value!r}.")
    return value


def _size_reason(n_bits: int) -> str:
    return f"n has {n_bits} bits, below the {MIN_KEY_BITS}-bit minimum (allowed by insecure_allow_small_keys=True)"


def _check_key_size(argname: str, n_bits: int, insecure: bool) -> None:
    if n_bits > MAX_KEY_BITS:
        raise PrivregValueError(
            f"{argname}={n_bits} is above the {MAX_KEY_BITS}-bit maximum (MAX_KEY_BITS); use {argname}={MIN_KEY_BITS} "
            f"(or up to {MAX_KEY_BITS})."
        )
    if n_bits < MIN_INSECURE_KEY_BITS:
        raise PrivregValueError(
            f"{argname}={n_bits} is below {MIN_INSECURE_KEY_BITS} bits, too small even for tests; "
            f"use {argname}={MIN_KEY_BITS} (or >= {MIN_INSECURE_KEY_BITS} with insecure_allow_small_keys=True)."
        )
    if n_bits < MIN_KEY_BITS and not insecure:
        raise PrivregValueError(
            f"{argname}={n_bits} is below the {MIN_KEY_BITS}-bit minimum for Paillier keys. Use "
            f"{argname}={MIN_KEY_BITS} or more; for tests or paper reproduction only, pass "
            f"insecure_allow_small_keys=True (the key is then marked insecure)."
        )


class PaillierPublicKey:
    """A Paillier public key ``n`` (with ``g = n + 1``) and its DJN base ``h_s``.

    Args:
        n: the modulus.
        h_s: the DJN fixed base ``(-x^2)^n mod n^2``; derived here from a fresh random
            ``x`` when None (for keys imported from elsewhere).
        insecure_allow_small_keys: accept ``n`` below 2048 bits; the key is marked insecure.
        rng: randomness for deriving ``h_s`` (default: the OS CSPRNG).

    Keys with the same ``n`` are equal and interoperate.
    """

    def __init__(
        self,
        *,
        n: int,
        h_s: int | None = None,
        insecure_allow_small_keys: bool = False,
        rng: RandomSource | None = None,
        _reasons: Sequence[str] = (),
    ) -> None:
        insecure = _check_flag(insecure_allow_small_keys)
        n = v.check_int("n", n, minimum=3)
        if n % 2 == 0:
            raise PrivregValueError(f"n must be an odd modulus p*q; got an even number ({n.bit_length()} bits).")
        self.n = mpz(n)
        self.n2 = self.n * self.n
        self.n_bits = n.bit_length()
        _check_key_size("n (bits)", self.n_bits, insecure)
        reasons = list(_reasons)
        if self.n_bits < MIN_KEY_BITS:
            reasons.insert(0, _size_reason(self.n_bits))
        self.insecure_reasons: tuple[str, ...] = tuple(reasons)
        #: Bits of the DJN short exponent: ceil(|n| / 2), as in DJN 2010.
        self.djn_exponent_bits = (self.n_bits + 1) // 2
        #: Largest |plaintext| of a signed value; (max_int, n - max_int) is the overflow zone.
        self.max_int = (self.n - 1) // 3
        if h_s is None:
            x = mpz(0)
            rng = resolve_random(rng)
            while x == 0 or gmpy2.gcd(x, self.n) != 1:
                x = mpz(rng.randbelow(n))
            h_s = gmpy2.powmod((-x * x) % self.n, self.n, self.n2)
        h_s = mpz(v.check_int("h_s", h_s, minimum=2))
        if h_s >= self.n2 or gmpy2.gcd(h_s, self.n) != 1:
            raise PrivregValueError("h_s must be a unit modulo n^2 (the DJN base (-x^2)^n mod n^2 of this key).")
        self.h_s = h_s
        self.key_id = key_id(n)
        _REGISTRY.setdefault(self.key_id, self)

    @property
    def insecure(self) -> bool:
        """True when the key is below 2048 bits or was generated from a seeded source."""
        return bool(self.insecure_reasons)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PaillierPublicKey) and self.n == other.n

    def __hash__(self) -> int:
        return hash(("paillier", int(self.n)))

    def __repr__(self) -> str:
        flag = f", INSECURE: {'; '.join(self.insecure_reasons)}" if self.insecure else ""
        return f"PaillierPublicKey({self.n_bits} bits, id={self.key_id.hex()[:12]}{flag})"

    def check_same(self, other: PaillierPublicKey, what: str) -> None:
        """Raise WrongKeyError unless ``other`` is this key."""
        if other.n != self.n:
            raise WrongKeyError(
                f"{what} is under key {other.key_id.hex()[:12]} but this operation uses key "
                f"{self.key_id.hex()[:12]}; ciphertexts of different keys cannot be combined or decrypted"
            )

    def to_phe(self) -> Any:
        """This key as a python-paillier ``PaillierPublicKey`` (for comparisons)."""
        import phe

        return phe.PaillierPublicKey(int(self.n))

    @classmethod
    def from_phe(cls, key: Any, *, insecure_allow_small_keys: bool = False) -> PaillierPublicKey:
        """A key from a python-paillier public key (``h_s`` derived from a fresh random x)."""
        return cls(n=int(key.n), insecure_allow_small_keys=insecure_allow_small_keys)


def _public_to_wire(pk: PaillierPublicKey) -> dict[str, Any]:
    return {"n": int(pk.n), "h": int(pk.h_s), "insecure_reasons": list(pk.insecure_reasons)}


@functools.cache
def _small_primes_product() -> mpz:
    """The product of the primes below ``_TRIAL_DIVISION_BOUND`` (94,000 bits; 1 ms once)."""
    return gmpy2.primorial(_TRIAL_DIVISION_BOUND - 1)


def _refuse(why: str, what: str = "Paillier key") -> SerializationError:
    return SerializationError(f"received {what}: {why}")


def received_reasons(raw: Any, *, what: str = "Paillier key") -> list[str]:
    """A received key's ``insecure_reasons``: at most 8 printable strings of 1-200
    characters, else SerializationError ("received <what>: ..."; the strings are never quoted)."""
    if not isinstance(raw, (list, tuple)) or len(raw) > _MAX_REASONS:
        raise _refuse(f"insecure_reasons must be a list of at most {_MAX_REASONS} strings", what)
    for r in raw:
        if not isinstance(r, str) or not 1 <= len(r) <= _MAX_REASON_CHARS or not r.isprintable():
            raise _refuse(
                f"each insecure reason must be 1-{_MAX_REASON_CHARS} printable characters; one is not (not shown)",
                what,
            )
    return list(raw)


def check_composite_modulus(n: int, *, what: str = "Paillier key") -> None:
    """Raise SerializationError ("received <what>: ...") unless the odd modulus ``n`` has no
    prime factor below 2^16 and fails a base-2 strong-probable-prime test (so is composite)."""
    if n % 2 == 0:
        raise _refuse("modulus is even", what)
    if gmpy2.gcd(n, _small_primes_product()) != 1:
        raise _refuse(f"modulus has a prime factor below {_TRIAL_DIVISION_BOUND}", what)
    # every prime passes a strong Fermat test; a product p*q of the kind generated here
    # (gcd(p-1, q-1) = 2) never does, and other products of two large primes almost never
    if gmpy2.is_strong_prp(n, 2):
        raise _refuse("modulus is prime (or a base-2 strong pseudoprime), not a product of two primes", what)


def _check_received_modulus(n: int, reasons: list[str]) -> None:
    """Raise SerializationError unless ``n`` is a plausible Paillier modulus (module doc)."""
    if n <= 0:
        raise _refuse("modulus is not positive")
    bits = n.bit_length()
    if not MIN_INSECURE_KEY_BITS <= bits <= MAX_KEY_BITS:
        raise _refuse(
            f"modulus has {bits} bits; accepted are {MIN_INSECURE_KEY_BITS} to {MAX_KEY_BITS} "
            f"(MIN_INSECURE_KEY_BITS to MAX_KEY_BITS)"
        )
    if bits < MIN_KEY_BITS and not reasons:
        raise _refuse(
            f"modulus has {bits} bits, below the {MIN_KEY_BITS}-bit minimum, and the key does not say it is "
            f"insecure; the sender must generate it with insecure_allow_small_keys=True"
        )
    check_composite_modulus(n)


def _checked_digest(n: int, h: int, reasons: list[str]) -> bytes:
    """What identifies a received key's checked fields in :data:`_CHECKED`."""
    digest = hashlib.sha256(b"privreg.paillier.checked\x00")
    for x in (n, h):
        digest.update(x.to_bytes((x.bit_length() + 8) // 8, "big", signed=True) + b"\x00")
    digest.update("\x00".join(reasons).encode("utf-8"))
    return digest.digest()


def _public_from_wire(d: Any) -> PaillierPublicKey:
    if not isinstance(d, dict) or set(d) != {"n", "h", "insecure_reasons"}:
        raise _refuse("expected a dict of the fields 'n', 'h' and 'insecure_reasons'")
    n, h = d["n"], d["h"]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (n, h)):
        raise _refuse("n and h must be integers")
    reasons = received_reasons(d["insecure_reasons"])
    digest = _checked_digest(n, h, reasons)
    if digest in _CHECKED:  # this key passed the checks in this process already
        _CHECKED.move_to_end(digest)
    else:
        _check_received_modulus(n, reasons)
        if not 2 <= h < n * n or gmpy2.gcd(h, n) != 1:
            raise _refuse("h (the DJN base) must lie in [2, n^2) and be coprime to n")
        _CHECKED[digest] = None
        if len(_CHECKED) > _MAX_CHECKED:
            _CHECKED.popitem(last=False)
    # one key object per modulus in a process, when the sender's reasons are its reasons
    existing = _REGISTRY.get(key_id(n))
    if existing is not None and list(existing.insecure_reasons) == reasons:
        return existing
    if n.bit_length() < MIN_KEY_BITS and reasons[0] == _size_reason(n.bit_length()):
        reasons = reasons[1:]  # the constructor puts it back
    try:
        return PaillierPublicKey(n=n, h_s=h, insecure_allow_small_keys=n.bit_length() < MIN_KEY_BITS, _reasons=reasons)
    except (PrivregValueError, PrivregTypeError) as exc:  # checked above: should not happen
        raise _refuse("PaillierPublicKey refused it") from exc


# a protocol sends one key per message; each costs a modular exponentiation to check
register_type(
    "privreg.paillier.PublicKey",
    PaillierPublicKey,
    _public_to_wire,
    _public_from_wire,
    max_per_message=MAX_KEYS_PER_MESSAGE,
)


# ------------------------------------------------------------------ private key


def _crt_params(p: int, q: int) -> tuple[mpz, mpz, mpz, mpz, mpz, mpz]:
    p, q = mpz(p), mpz(q)
    n = p * q
    p2, q2 = p * p, q * q
    hp = gmpy2.invert((gmpy2.powmod(n + 1, p - 1, p2) - 1) // p, p)
    hq = gmpy2.invert((gmpy2.powmod(n + 1, q - 1, q2) - 1) // q, q)
    return p2, q2, hp, hq, gmpy2.invert(q, p), gmpy2.invert(q2, p2)


def _decrypt_chunk(params: tuple[int, ...], cts: Sequence[int]) -> list[mpz]:
    """Plaintexts in [0, n) of ``cts`` by the CRT; ``params`` = (p, q, p^2, q^2, hp, hq, q^-1 mod p)."""
    p, q, p2, q2, hp, hq, q_inv_p = (mpz(x) for x in params)
    pm1, qm1 = p - 1, q - 1
    out = []
    for c in cts:
        mp = (gmpy2.powmod(c, pm1, p2) - 1) // p * hp % p
        mq = (gmpy2.powmod(c, qm1, q2) - 1) // q * hq % q
        out.append(mq + q * ((mp - mq) * q_inv_p % p))
    return out


def _zero_mod_p_chunk(p: int, cts: Sequence[int]) -> list[bool]:
    """Whether each plaintext is 0 modulo p (one exponentiation modulo p^2 each)."""
    p = mpz(p)
    p2, pm1 = p * p, p - 1
    return [gmpy2.powmod(c, pm1, p2) == 1 for c in cts]


class PaillierPrivateKey:
    """The factors ``p, q`` of a public key's modulus, with CRT precomputation.

    It cannot be pickled or sent through :mod:`privreg.mpc.wire`. Decrypt vectors with
    :func:`privreg.crypto.vector.decrypt`.
    """

    def __init__(self, *, public_key: PaillierPublicKey, p: int, q: int) -> None:
        if not isinstance(public_key, PaillierPublicKey):
            raise PrivregTypeError(f"public_key must be a PaillierPublicKey; got {type(public_key).__name__}.")
        p, q = mpz(v.check_int("p", p, minimum=3)), mpz(v.check_int("q", q, minimum=3))
        if p * q != public_key.n or p == q:
            raise PrivregValueError("p and q must be the two distinct prime factors of public_key.n.")
        if not (gmpy2.is_prime(p, 25) and gmpy2.is_prime(q, 25)):
            raise PrivregValueError("p and q must be prime.")
        self.public_key = public_key
        self.p, self.q = p, q
        self.p2, self.q2, self.hp, self.hq, self.q_inv_p, self.q2_inv_p2 = _crt_params(p, q)

    def __repr__(self) -> str:
        return f"PaillierPrivateKey(for {self.public_key!r})"

    def __reduce__(self) -> Any:
        raise TypeError("a PaillierPrivateKey is not pickled; ship p and q explicitly if you must")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PaillierPrivateKey) and self.public_key == other.public_key

    def __hash__(self) -> int:
        return hash(("paillier-private", int(self.public_key.n)))

    # ------------------------------------------------------------ decryption

    def raw_decrypt(self, cts: Sequence[mpz], *, workers: int | None = None) -> list[mpz]:
        """The plaintexts in [0, n) of the raw ciphertexts ``cts``, by the CRT (signed
        values and bounds are the business of :func:`privreg.crypto.vector.decrypt_ints`)."""
        w = parallel.resolve_workers(len(cts), workers)
        params = tuple(int(x) for x in (self.p, self.q, self.p2, self.q2, self.hp, self.hq, self.q_inv_p))
        chunks = [(params, c) for c in parallel.split(list(cts), w)]
        out = parallel.run_chunks(_decrypt_chunk, chunks, w)
        add_count("decryptions", len(cts))
        return out

    def zero_mod_p(self, cts: Sequence[mpz], *, workers: int | None = None) -> list[bool]:
        """Whether each plaintext is 0 mod p. Equals "is 0" only when every nonzero plaintext
        is a unit mod n (the blinded values of the comparison protocol); half a decryption."""
        w = parallel.resolve_workers(len(cts), workers)
        chunks = [(int(self.p), list(c)) for c in parallel.split(list(cts), w)]
        out = parallel.run_chunks(_zero_mod_p_chunk, chunks, w)
        add_count("decryptions", len(cts))
        return out

    def to_phe(self) -> Any:
        """This key as a python-paillier ``PaillierPrivateKey`` (for comparisons)."""
        import phe

        return phe.PaillierPrivateKey(self.public_key.to_phe(), int(self.p), int(self.q))


@attrs.frozen(kw_only=True)
class PaillierKeypair:
    """A public key and its private key."""

    public_key: PaillierPublicKey
    private_key: PaillierPrivateKey = attrs.field(repr=False)

    @property
    def insecure(self) -> bool:
        return self.public_key.insecure


def _random_prime(bits: int, rng: RandomSource) -> mpz:
    """A random ``bits``-bit prime = 3 (mod 4) with its top two bits set."""
    top = mpz(3) << (bits - 2)
    while True:
        p = gmpy2.next_prime(mpz(rng.randbits(bits)) | top | 3)
        while p % 4 != 3:
            p = gmpy2.next_prime(p)
        if p.bit_length() == bits and gmpy2.is_prime(p, 50) and gmpy2.is_strong_bpsw_prp(p):
            return p


def generate_paillier_keypair(
    *, n_bits: int = MIN_KEY_BITS, insecure_allow_small_keys: bool = False, rng: RandomSource | None = None
) -> PaillierKeypair:
    """A fresh key pair with an ``n_bits``-bit modulus (default 2048).

    Below 2048 bits only with ``insecure_allow_small_keys=True`` (tests, paper
    reproduction); the key then says it is insecure. ``rng`` defaults to the OS CSPRNG;
    a reproducible source (tests only) also marks the key insecure.
    """
    insecure = _check_flag(insecure_allow_small_keys)
    n_bits = v.check_int("n_bits", n_bits)
    _check_key_size("n_bits", n_bits, insecure)
    rng = resolve_random(rng)
    reasons = ["primes drawn from a reproducible (seeded) source"] if rng.reproducible else []
    p_bits = n_bits // 2
    q_bits = n_bits - p_bits
    min_gap = mpz(1) << max(0, p_bits - 100)
    while True:
        p = _random_prime(p_bits, rng)
        q = _random_prime(q_bits, rng)
        if p == q or abs(p - q) < min_gap or gmpy2.gcd(p - 1, q - 1) != 2:
            continue
        n = p * q
        if n.bit_length() == n_bits:
            break
    # h_s = (-x^2)^n mod n^2 by the CRT: the key holder's fast path
    x = mpz(0)
    while x == 0 or gmpy2.gcd(x, n) != 1:
        x = mpz(rng.randbelow(int(n)))
    h = (-x * x) % n
    p2, q2 = p * p, q * q
    hp = gmpy2.powmod(h, n % (p * (p - 1)), p2)
    hq = gmpy2.powmod(h, n % (q * (q - 1)), q2)
    h_s = hq + q2 * ((hp - hq) * gmpy2.invert(q2, p2) % p2)
    public = PaillierPublicKey(n=int(n), h_s=int(h_s), insecure_allow_small_keys=insecure, _reasons=reasons)
    return PaillierKeypair(public_key=public, private_key=PaillierPrivateKey(public_key=public, p=int(p), q=int(q)))
