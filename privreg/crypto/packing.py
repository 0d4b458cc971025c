"""Packing several values into one ciphertext, so the key holder decrypts fewer.

``pack`` turns a vector of ciphertexts of values ``m_0..m_{k-1}`` (|m_i| <= B) into one
ciphertext of ``sum_i (m_i + B) 2^(i s)``: every value is shifted to ``[0, 2B]`` and gets
a slot of ``s`` bits. One decryption (two exponentiations modulo p^2 and q^2) then
yields ``k`` values. Packing is Horner's rule on ciphertexts (``s`` squarings per slot),
done by whoever holds the ciphertexts; unpacking splits the decrypted integer.

Slot headroom: ``s = bits(2B) + headroom_bits``. Without headroom a slot holds exactly
the declared range; ``headroom_bits = h`` lets up to ``2^h`` packed ciphertexts of the
same layout be added (``+``) before decryption. The slot bound is tracked and an
addition that could carry into the next slot raises; decryption checks that every slot,
and the whole packed integer, lies in range, so overflow raises instead of corrupting the
neighbouring value. ``k * s`` stays below the bit length of the key's signed range.

Caveats: the slot layout (``s``, ``k``, the offset ``B``) travels with the ciphertexts,
so ``B`` must be public: packing a vector whose bound came from private data requires a
declared public ``bound=``. Whoever decrypts a packed ciphertext learns every value in
it, exactly as if each had been decrypted alone; statistical masks, if the protocol
needs them, must be added to the values before packing and fit the slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpz

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, SerializationError
from privreg.core.randomness import RandomSource
from privreg.crypto import parallel
from privreg.crypto.counting import add_count
from privreg.crypto.encoding import decode_scaled
from privreg.crypto.errors import PlaintextOverflowError
from privreg.crypto.keys import PaillierPrivateKey, PaillierPublicKey, lookup_public_key
from privreg.crypto.modarith import mulmod_chunk
from privreg.crypto.obfuscation import ObfuscatorPool, draw_obfuscators
from privreg.crypto.vector import EncryptedVector, declared_bound, fixed_point_fits
from privreg.mpc.wire import register_type

__all__ = ["PackedCiphertexts", "decrypt_packed", "pack", "unpack_plaintexts"]


class PackedCiphertexts:
    """Ciphertexts each holding ``per_ct`` values in ``slot_bits``-bit slots (see module doc)."""

    __slots__ = (
        "_c",
        "bound",
        "count",
        "offset",
        "per_ct",
        "power",
        "public_key",
        "randomised",
        "scale",
        "slot_bits",
        "slot_bound",
    )

    def __init__(
        self,
        *,
        public_key: PaillierPublicKey,
        ciphertexts: list[mpz],
        count: int,
        per_ct: int,
        slot_bits: int,
        offset: int,
        slot_bound: int,
        bound: int,
        scale: int,
        power: int,
        randomised: bool,
    ) -> None:
        self.public_key = public_key
        self._c = ciphertexts
        self.count = count
        self.per_ct = per_ct
        self.slot_bits = slot_bits
        self.offset = offset
        self.slot_bound = slot_bound
        self.bound = bound
        self.scale = scale
        self.power = power
        self.randomised = randomised

    @property
    def ciphertext_count(self) -> int:
        return len(self._c)

    def __len__(self) -> int:
        """The number of packed values."""
        return self.count

    def __repr__(self) -> str:
        return (
            f"PackedCiphertexts({self.count} values in {len(self._c)} ciphertexts, {self.per_ct} slots "
            f"of {self.slot_bits} bits each)"
        )

    def _layout(self) -> tuple[int, int, int, int, int, int]:
        return (self.count, self.per_ct, self.slot_bits, self.scale, self.power, len(self._c))

    def __add__(self, other: PackedCiphertexts) -> PackedCiphertexts:
        """Slot-wise sum of two packings of the same layout (uses the headroom)."""
        if not isinstance(other, PackedCiphertexts):
            raise PrivregTypeError("packed ciphertexts can only be added to packed ciphertexts of the same layout")
        self.public_key.check_same(other.public_key, "the other packed ciphertexts")
        if self._layout() != other._layout():
            raise PrivregValueError("packed ciphertexts of different layouts cannot be added")
        slot_bound = self.slot_bound + other.slot_bound
        if slot_bound >= 1 << self.slot_bits:
            raise PlaintextOverflowError(
                f"the sum could carry out of its {self.slot_bits}-bit slots; pack with more headroom_bits"
            )
        n2 = self.public_key.n2
        return PackedCiphertexts(
            public_key=self.public_key,
            ciphertexts=[a * b % n2 for a, b in zip(self._c, other._c)],
            count=self.count,
            per_ct=self.per_ct,
            slot_bits=self.slot_bits,
            offset=self.offset + other.offset,
            slot_bound=slot_bound,
            bound=self.bound + other.bound,
            scale=self.scale,
            power=self.power,
            randomised=False,
        )

    def rerandomize(
        self, *, obfuscation: str | ObfuscatorPool = "djn", rng: RandomSource | None = None, workers: int | None = None
    ) -> PackedCiphertexts:
        """Fresh ciphertexts of the same packed plaintexts (required before sending)."""
        rho = draw_obfuscators(self.public_key, len(self._c), obfuscation, rng=rng, workers=workers)
        add_count("rerandomizations", len(self._c))
        out = mulmod_chunk(int(self.public_key.n2), self._c, rho)
        return PackedCiphertexts(
            public_key=self.public_key,
            ciphertexts=out,
            count=self.count,
            per_ct=self.per_ct,
            slot_bits=self.slot_bits,
            offset=self.offset,
            slot_bound=self.slot_bound,
            bound=self.bound,
            scale=self.scale,
            power=self.power,
            randomised=True,
        )


def _pack_chunk(n: int, n2: int, slot_bits: int, offset: int, groups: Sequence[Sequence[mpz]]) -> list[mpz]:
    n, n2 = mpz(n), mpz(n2)
    shift = mpz(1) << slot_bits
    out = []
    for group in groups:
        acc = group[-1]
        for c in reversed(group[:-1]):
            acc = gmpy2.powmod(acc, shift, n2) * c % n2
        total = offset * ((shift ** len(group) - 1) // (shift - 1))  # offset in every slot
        out.append(acc * (1 + total * n) % n2)
    return out


def pack(
    vec: EncryptedVector, *, headroom_bits: int = 0, bound: float | None = None, workers: int | None = None
) -> PackedCiphertexts:
    """Pack ``vec`` into as few ciphertexts as the key allows (see the module docstring).

    ``bound``: a public bound on the values' magnitude (value units), needed when the
    vector's own bound is private; it must cover the tracked bound.
    """
    if not isinstance(vec, EncryptedVector):
        raise PrivregTypeError(f"vec must be an EncryptedVector; got {type(vec).__name__}.")
    headroom_bits = v.check_int("headroom_bits", headroom_bits, minimum=0)
    if bound is not None:
        b = declared_bound("bound", bound, vec.scale**vec.power)
        if b < vec.bound:
            raise PlaintextOverflowError(
                f"bound={bound!r} is below the vector's tracked bound ({vec.bound.bit_length()} bits as scaled "
                f"integers); declare a bound that covers every value"
            )
    elif vec.bound_public:
        b = vec.bound
    else:
        raise PrivregValueError(
            "the vector's bound was computed from private plaintext operands, and the packing layout would "
            "reveal it; pass a public bound=... (value units) that covers the values"
        )
    slot_bits = max(1, (2 * b).bit_length()) + headroom_bits
    capacity = vec.public_key.max_int.bit_length() - 1
    per_ct = capacity // slot_bits
    if per_ct < 1:
        raise PlaintextOverflowError(
            f"a slot of {slot_bits} bits does not fit the key's {capacity}-bit packing capacity; use fewer "
            f"headroom_bits or a larger key"
        )
    per_ct = min(per_ct, max(1, len(vec)))
    groups = [vec._c[i : i + per_ct] for i in range(0, len(vec), per_ct)]
    w = parallel.resolve_workers(len(vec), workers)
    pk = vec.public_key
    chunks = [(int(pk.n), int(pk.n2), slot_bits, b, part) for part in parallel.split(groups, w)]
    cts = parallel.run_chunks(_pack_chunk, chunks, w) if groups else []
    add_count("packed", len(vec))
    return PackedCiphertexts(
        public_key=pk,
        ciphertexts=cts,
        count=len(vec),
        per_ct=per_ct,
        slot_bits=slot_bits,
        offset=b,
        slot_bound=2 * b,
        bound=b,
        scale=vec.scale,
        power=vec.power,
        randomised=False,
    )


def unpack_plaintexts(packed: PackedCiphertexts, raw: Sequence[mpz]) -> list[int]:
    """The signed values in decrypted packed plaintexts ``raw``; raise on any overflow."""
    s = packed.slot_bits
    mask = (1 << s) - 1
    out: list[int] = []
    for j, plain in enumerate(raw):
        k = min(packed.per_ct, packed.count - j * packed.per_ct)
        m = int(plain)
        if m >> (k * s):
            raise PlaintextOverflowError(
                f"packed ciphertext {j} decrypts beyond its {k} slots: a value overflowed its slot or the "
                f"ciphertext does not match its layout"
            )
        for i in range(k):
            slot = (m >> (i * s)) & mask
            value = slot - packed.offset
            if slot > packed.slot_bound or abs(value) > packed.bound:
                raise PlaintextOverflowError(
                    f"packed value {j * packed.per_ct + i} lies outside its tracked range: overflow or tampering"
                )
            out.append(value)
    return out


def decrypt_packed(
    private_key: PaillierPrivateKey, packed: PackedCiphertexts, *, workers: int | None = None
) -> np.ndarray:
    """Decrypt packed ciphertexts: the same values as decrypting the vector unpacked."""
    if not isinstance(private_key, PaillierPrivateKey):
        raise PrivregTypeError(
            f"private_key must be a PaillierPrivateKey; got {type(private_key).__name__}. Pass keypair.private_key."
        )
    private_key.public_key.check_same(packed.public_key, "the packed ciphertexts")
    raw = private_key.raw_decrypt(packed._c, workers=workers)
    ints = unpack_plaintexts(packed, raw)
    add_count("values_decrypted", len(ints))
    return decode_scaled(ints, packed.scale, packed.power)


def _to_wire(p: PackedCiphertexts) -> tuple[Any, ...]:
    if not p.randomised:
        raise SerializationError("PackedCiphertexts must be re-randomised before they are sent; send p.rerandomize()")
    width = (2 * p.public_key.n_bits + 7) // 8
    blob = b"".join(c.to_bytes(width, "big") for c in p._c)
    return (
        p.public_key.key_id,
        *(int(x) for x in (p.count, p.per_ct, p.slot_bits, p.offset, p.slot_bound, p.bound, p.scale, p.power)),
        width,
        blob,
    )


def _from_wire(t: Any) -> PackedCiphertexts:
    if not (
        isinstance(t, tuple)
        and len(t) == 11
        and isinstance(t[0], bytes)
        and isinstance(t[10], bytes)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in t[1:10])
    ):
        raise SerializationError("malformed PackedCiphertexts")
    kid, count, per_ct, slot_bits, offset, slot_bound, bound, scale, power, width, blob = t
    pk = lookup_public_key(kid)
    if pk is None:
        raise SerializationError(f"packed ciphertexts under unknown key {kid.hex()[:12]}; send the public key first")
    capacity = pk.max_int.bit_length()
    # the sizes are checked before any arithmetic on them: a slot_bits of 2^62 must not
    # reach 1 << slot_bits, nor a huge count a float division
    if (
        width != (2 * pk.n_bits + 7) // 8
        or len(blob) % width
        or not 1 <= per_ct < capacity
        or not 1 <= slot_bits < capacity
        or per_ct * slot_bits >= capacity
        or count < 0
        or len(blob) // width != -(-count // per_ct)
        or not 0 <= offset <= bound <= slot_bound < (1 << slot_bits)
        or not fixed_point_fits(pk, scale, power)
    ):
        raise SerializationError("malformed PackedCiphertexts layout")
    cts = [mpz.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]
    if any(not 0 < c < pk.n2 for c in cts):
        raise SerializationError("a ciphertext lies outside (0, n^2)")
    return PackedCiphertexts(
        public_key=pk,
        ciphertexts=cts,
        count=count,
        per_ct=per_ct,
        slot_bits=slot_bits,
        offset=offset,
        slot_bound=slot_bound,
        bound=bound,
        scale=scale,
        power=power,
        randomised=False,
    )


register_type("privreg.paillier.PackedCiphertexts", PackedCiphertexts, _to_wire, _from_wire)
