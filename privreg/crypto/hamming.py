"""Encrypted Hamming distances between bit vectors (Bloom filters) of two parties.

The *encryptor* holds filters ``a`` (bits, length ``L``) and encrypts them under the key
holder's public key; the *comparer* holds plaintext filters ``b`` and computes encryptions
of ``HD(a, b) = |a| + |b| - 2 <a, b>`` homomorphically; the key holder decrypts the
distances and nothing else. This is the homomorphic distance of the scalable matching of
paper 004 (MP-SPPRL, Section 5, Algorithm 1: one record of a pair is encrypted, the other
party computes), a sub-protocol of :mod:`privreg.plugins.pprl`.

Two ciphertext layouts (``layout=``), same results:

``"bits"``: one ciphertext per bit, ``E[a_i]``. The comparer computes
    ``E[HD] = E[|a|] * g^|b| * (prod_{i: b_i = 1} E[a_i])^-2`` with
    ``E[|a|] = prod_i E[a_i]`` (once per encrypted filter): ``|b|`` multiplications and
    one inversion per pair, no exponentiation. When ``b`` is dense it uses the zeros of
    ``b`` instead, ``E[HD] = E[|a|]^-1 * g^|b| * (prod_{i: b_i = 0} E[a_i])^2`` (the
    inverse of ``E[|a|]`` is computed once per filter), whichever needs fewer
    multiplications. The distances (in ``[0, L]``) are packed with
    :func:`privreg.crypto.packing.pack` (``bits(2L)``-bit slots, hundreds per
    ciphertext) before they go to the key holder: one decryption per pack.
    Cost: ``L`` encryptions per filter; per pair ``min(|b| + inversion, L - |b|)``
    multiplications; one decryption per ~``|n| / bits(2L)`` pairs. The key holder learns
    exactly the distances.

``"slots"``: the bits of up to ``R`` filters share one ciphertext per bit position,
    ``E[sum_r a_{r,i} 2^(r s)]`` (``s``-bit slots, ``R = floor((|n|/2 - 1) / s)``: 21
    at 2048 bits), so a filter costs ``L / R`` encryptions instead of ``L``. The same
    formula applied to a whole unit of ``R`` filters yields ``sum_r HD(a_r, b) 2^(r s)``:
    the distance of ``b`` to every filter of the unit, slot by slot. The comparer keeps
    the slots of the pairs it must reveal and adds to every other slot a mask uniform in
    ``[0, 2^(s-1))``; with ``s - 1 >= bits(L) + sigma`` a masked slot is within
    statistical distance ``L / 2^(s-1) <= 2^-sigma`` of independent of its distance,
    and since ``L + 2^(s-1) < 2^s`` no slot carries into its neighbour. One ciphertext
    (one re-randomisation, one decryption) per (unit, comparer filter) holds the
    distances of all its pairs. Slot plaintexts stay below ``2^(|n|/2 - 1)``, below both
    primes of the key, so the key holder decrypts modulo one prime only (one
    exponentiation modulo ``p^2``: half a CRT decryption). Cost: ``L / R`` encryptions
    per filter; per result ciphertext ``min(|b| + inversion, L - |b|)``
    multiplications, one re-randomisation and half a decryption. The key holder learns
    the distances of the requested pairs and, per masked slot, at most ``2^-sigma``
    statistical information.

Which is faster: ``"bits"`` pays ``L`` encryptions (about 1 ms each at 2048 bits) per
filter and almost nothing per pair; ``"slots"`` pays about ``L / R`` encryptions per
filter (about 5 ms) and a re-randomisation plus half a decryption (about 3 ms together)
per result ciphertext. With a few pairs per encrypted filter (record linkage after
blocking) ``"slots"`` is several times faster; ``"bits"`` wins when each encrypted filter
meets many (more than ~30) comparer filters that do not share result ciphertexts.

Bounds: encrypted bits are declared with bound 1, every distance is at most ``L`` (a
public bound); packed plaintexts stay in the key's signed range (as in
:mod:`~privreg.crypto.packing`) and slot plaintexts below ``2^(|n|/2 - 1)``. Decryption
checks every distance against ``[0, L]`` and every slot plaintext against its layout,
raising :class:`~privreg.crypto.errors.PlaintextOverflowError` instead of returning
garbage (decryption modulo one prime cannot detect a tampered plaintext above that prime:
the parties are semi-honest).

Security (semi-honest; see :mod:`privreg.crypto` for the assumptions of the layer): the
comparer holds only ciphertexts under the key holder's key (semantic security: DCR, plus
the DJN short-exponent assumption for the default DJN encryption); everything it sends
goes through :func:`privreg.crypto.channel.send_encrypted`, which re-randomises it, so
the key holder sees fresh encryptions of the packed or masked values only. A key holder
that obtains the encryptor's ciphertexts (collusion with the comparer) decrypts the
filters: the protocol assumes it does not. Identical ciphertexts sent to two comparers
let those two, if they collude, see that they received the same encrypted filter.

Objects travel as payloads of layer containers (``to_payload`` / ``from_payload``): the
ciphertexts inside are an :class:`~privreg.crypto.vector.EncryptedVector` or
:class:`~privreg.crypto.packing.PackedCiphertexts`, which the channel re-randomises and
the wire codec refuses to send unless fresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpz
from numpy.typing import NDArray

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, SerializationError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import parallel
from privreg.crypto.counting import add_count
from privreg.crypto.errors import PlaintextOverflowError
from privreg.crypto.keys import PaillierPrivateKey, PaillierPublicKey
from privreg.crypto.modarith import prod_mod
from privreg.crypto.obfuscation import ObfuscatorPool
from privreg.crypto.packing import PackedCiphertexts, decrypt_packed, pack
from privreg.crypto.vector import EncryptedVector, decrypt_ints, encrypt, vector_from_ciphertexts

__all__ = [
    "check_layout",
    "LAYOUTS",
    "DEFAULT_SIGMA",
    "EncryptedFilters",
    "EncryptedDistances",
    "slot_layout",
    "encrypt_filters",
    "hamming_distances",
    "decrypt_distances",
    "plaintext_distances",
]

LAYOUTS = ("bits", "slots")
#: Statistical security parameter of the masked slots (``"slots"`` layout).
DEFAULT_SIGMA = 40
#: Cost of one inversion modulo n^2 in multiplications (measured with gmpy2 at 2048 bits:
#: about 50 us against 6 us); decides between the ones and the zeros form of a pair.
_INVERSION_COST = 8


def check_layout(layout: object) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`, else a PrivregValueError naming them."""
    if layout not in LAYOUTS:
        raise PrivregValueError(f"layout must be one of {LAYOUTS}; got {layout!r}.")
    return layout


def _check_key(public_key: Any) -> PaillierPublicKey:
    if not isinstance(public_key, PaillierPublicKey):
        raise PrivregTypeError(f"public_key must be a PaillierPublicKey; got {type(public_key).__name__}.")
    return public_key


def _check_filters(name: str, filters: Any, length: int | None = None) -> np.ndarray:
    """``filters`` as a 2-D boolean array (0/1 integers accepted)."""
    arr = np.asarray(filters)
    if arr.ndim != 2:
        raise PrivregValueError(f"{name} must be a 2-D array (one filter per row); got shape {arr.shape}.")
    if arr.dtype.kind == "b":
        out = arr
    elif arr.dtype.kind in "iu":
        if arr.size and not np.all((arr == 0) | (arr == 1)):
            raise PrivregValueError(f"{name} must hold bits (0 or 1 only).")
        out = arr.astype(bool)
    else:
        raise PrivregTypeError(f"{name} must be a boolean or 0/1 integer array; got dtype {arr.dtype}.")
    if out.shape[1] < 1:
        raise PrivregValueError(f"{name} must have at least one column (the filter length).")
    if length is not None and out.shape[1] != length:
        raise PrivregValueError(f"{name} has filters of length {out.shape[1]}; the encrypted filters have {length}.")
    return np.ascontiguousarray(out)


def _slot_capacity(public_key: PaillierPublicKey) -> int:
    """Bits of a slot plaintext: below ``2^(|n|/2 - 1)``, hence below both primes of a
    key from :func:`~privreg.crypto.keys.generate_paillier_keypair` (each has at least
    ``|n|/2`` bits, top bits set), so the key holder recovers it modulo one prime."""
    return public_key.n_bits // 2 - 1


def slot_layout(public_key: PaillierPublicKey, *, length: int, sigma: int = DEFAULT_SIGMA) -> tuple[int, int]:
    """``(slot_bits, filters_per_ciphertext)`` of the ``"slots"`` layout for this key.

    ``slot_bits`` is ``bits(L) + 1 + sigma`` rounded up to whole bytes, so that a masked
    slot hides its distance to ``2^-sigma`` and never carries; the filters per ciphertext
    fill ``|n|/2 - 1`` bits, below both primes of the key, so that the key holder
    decrypts a result modulo one prime (half a CRT decryption).
    """
    _check_key(public_key)
    length = v.check_int("length", length, minimum=1)
    sigma = v.check_int("sigma", sigma, minimum=1)
    slot_bits = 8 * -(-(length.bit_length() + 1 + sigma) // 8)
    capacity = _slot_capacity(public_key)
    per = capacity // slot_bits
    if per < 1:
        raise PlaintextOverflowError(
            f"a slot of {slot_bits} bits (filter length {length}, sigma={sigma}) does not fit the key's "
            f"{capacity}-bit capacity; use a larger key or the 'bits' layout"
        )
    return slot_bits, per


# ------------------------------------------------------------------ encrypted filters


class EncryptedFilters:
    """Encrypted filters of one party, in *units* of ``L`` ciphertexts.

    A unit holds one filter (``"bits"``) or up to ``per_unit`` filters in slots
    (``"slots"``). Filters are addressed by ``row = unit * per_unit + slot``; units keep
    their ids when a subset is sent (:meth:`select`) and received subsets are joined
    with :meth:`merged`, so rows mean the same at the encryptor and at the comparer.
    """

    __slots__ = (
        "_c",
        "_where",
        "layout",
        "length",
        "per_unit",
        "public_key",
        "randomised",
        "sizes",
        "slot_bits",
        "units",
    )

    def __init__(
        self,
        *,
        public_key: PaillierPublicKey,
        layout: str,
        length: int,
        per_unit: int,
        slot_bits: int,
        units: Sequence[int],
        sizes: Sequence[int],
        ciphertexts: list[mpz],
        randomised: bool,
    ) -> None:
        self.public_key = public_key
        self.layout = layout
        self.length = length
        self.per_unit = per_unit
        self.slot_bits = slot_bits
        self.units = tuple(int(u) for u in units)
        self.sizes = tuple(int(s) for s in sizes)
        self._c = ciphertexts
        self._where = {u: i for i, u in enumerate(self.units)}
        self.randomised = randomised

    @property
    def ciphertext_count(self) -> int:
        return len(self._c)

    @property
    def count(self) -> int:
        """The number of filters held."""
        return sum(self.sizes)

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return (
            f"EncryptedFilters({self.count} filters of {self.length} bits, layout {self.layout!r}, "
            f"{len(self.units)} units, key {self.public_key.key_id.hex()[:12]})"
        )

    def rows(self) -> np.ndarray:
        """The row addresses of every filter held, unit by unit."""
        out = [u * self.per_unit + s for u, size in zip(self.units, self.sizes) for s in range(size)]
        return np.asarray(out, dtype=np.int64)

    def _unit_cts(self, unit: int) -> list[mpz]:
        i = self._where[unit]
        return self._c[i * self.length : (i + 1) * self.length]

    def _meta(self, units: Sequence[int], sizes: Sequence[int], cts: list[mpz], randomised: bool) -> EncryptedFilters:
        return EncryptedFilters(
            public_key=self.public_key,
            layout=self.layout,
            length=self.length,
            per_unit=self.per_unit,
            slot_bits=self.slot_bits,
            units=units,
            sizes=sizes,
            ciphertexts=cts,
            randomised=randomised,
        )

    def select(self, units: Any) -> EncryptedFilters:
        """The filters of ``units`` (ids held here), as a new container to send."""
        ids = [int(u) for u in np.asarray(units, dtype=np.int64).reshape(-1).tolist()]
        missing = [u for u in ids if u not in self._where]
        if missing:
            raise PrivregValueError(f"units {missing[:5]} are not held here (held: {len(self.units)} units).")
        if len(set(ids)) != len(ids):
            raise PrivregValueError("units must be distinct.")
        cts = [c for u in ids for c in self._unit_cts(u)]
        return self._meta(ids, [self.sizes[self._where[u]] for u in ids], cts, self.randomised)

    def merged(self, other: EncryptedFilters) -> EncryptedFilters:
        """These filters and ``other``'s (same key and layout, disjoint units)."""
        if not isinstance(other, EncryptedFilters):
            raise PrivregTypeError(f"other must be EncryptedFilters; got {type(other).__name__}.")
        self.public_key.check_same(other.public_key, "the other encrypted filters")
        if (other.layout, other.length, other.per_unit, other.slot_bits) != (
            self.layout,
            self.length,
            self.per_unit,
            self.slot_bits,
        ):
            raise PrivregValueError("encrypted filters of different layouts cannot be merged.")
        clash = set(self.units) & set(other.units)
        if clash:
            raise PrivregValueError(f"units {sorted(clash)[:5]} are held twice; merge disjoint sets only.")
        return self._meta(
            self.units + other.units, self.sizes + other.sizes, self._c + other._c, self.randomised and other.randomised
        )

    def _unit_bound(self) -> int:
        return 1 if self.layout == "bits" else (1 << (self.per_unit * self.slot_bits)) - 1

    def to_payload(self) -> dict[str, Any]:
        """The wire form: public layout metadata and one EncryptedVector."""
        vec = vector_from_ciphertexts(
            self.public_key, list(self._c), bound=self._unit_bound(), randomised=self.randomised
        )
        return {
            "layout": self.layout,
            "length": self.length,
            "per_unit": self.per_unit,
            "slot_bits": self.slot_bits,
            "units": np.asarray(self.units, dtype=np.int64),
            "sizes": np.asarray(self.sizes, dtype=np.int64),
            "cts": vec,
        }

    @classmethod
    def from_payload(cls, payload: Any, *, public_key: PaillierPublicKey, sigma: int | None = None) -> EncryptedFilters:
        """Rebuild received filters, checking the layout against ``public_key`` (and the
        agreed ``sigma`` for the slots layout, if given)."""
        _check_key(public_key)
        keys = {"layout", "length", "per_unit", "slot_bits", "units", "sizes", "cts"}
        if not isinstance(payload, Mapping) or set(payload) != keys:
            raise SerializationError(f"malformed encrypted filters: expected the fields {sorted(keys)}")
        layout, length, per_unit, slot_bits = (payload[k] for k in ("layout", "length", "per_unit", "slot_bits"))
        units, sizes, vec = payload["units"], payload["sizes"], payload["cts"]
        if (
            layout not in LAYOUTS
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (length, per_unit, slot_bits))
            or length < 1
            or per_unit < 1
            or not isinstance(vec, EncryptedVector)
            or not isinstance(units, np.ndarray)
            or not isinstance(sizes, np.ndarray)
            or units.ndim != 1
            or sizes.shape != units.shape
            or units.dtype.kind not in "iu"
            or sizes.dtype.kind not in "iu"
        ):
            raise SerializationError("malformed encrypted filters (layout fields)")
        public_key.check_same(vec.public_key, "the received encrypted filters")
        if layout == "bits":
            ok = per_unit == 1 and slot_bits == 0
        else:
            want = slot_layout(public_key, length=length, sigma=sigma) if sigma is not None else None
            ok = (
                slot_bits > length.bit_length()
                and per_unit * slot_bits <= _slot_capacity(public_key)
                and (want is None or (slot_bits, per_unit) == want)
            )
        if not ok:
            raise SerializationError("encrypted filters with a slot layout that does not match the key or sigma")
        if (
            len(vec) != len(units) * length
            or (units.size and units.min() < 0)
            or len(set(units.tolist())) != units.size
            or (sizes.size and (sizes.min() < 1 or sizes.max() > per_unit))
        ):
            raise SerializationError("malformed encrypted filters (units, sizes or ciphertext count)")
        out = cls(
            public_key=public_key,
            layout=layout,
            length=length,
            per_unit=per_unit,
            slot_bits=slot_bits,
            units=units.tolist(),
            sizes=sizes.tolist(),
            ciphertexts=list(vec._c),
            randomised=False,
        )
        if vec.bound > out._unit_bound():
            raise SerializationError("encrypted filters declare a bound above their layout")
        return out


def _slot_plaintexts(filters: np.ndarray, per_unit: int, slot_bits: int) -> tuple[list[int], list[int]]:
    """Per unit and bit position, ``sum_r a_{r,i} 2^(r s)``; and the unit sizes."""
    m, length = filters.shape
    n_units = -(-m // per_unit)
    step = slot_bits // 8
    pad = np.zeros((n_units * per_unit, length), dtype=np.uint8)
    pad[:m] = filters
    blocks = pad.reshape(n_units, per_unit, length).transpose(0, 2, 1)  # (unit, bit, slot)
    raw = np.zeros((n_units, length, per_unit * step), dtype=np.uint8)
    raw[:, :, ::step] = blocks  # a 1 in the lowest byte of the slot (little endian)
    values = [int.from_bytes(raw[u, i].tobytes(), "little") for u in range(n_units) for i in range(length)]
    sizes = [min(per_unit, m - u * per_unit) for u in range(n_units)]
    return values, sizes


def encrypt_filters(
    public_key: PaillierPublicKey,
    filters: Any,
    *,
    layout: str = "bits",
    sigma: int = DEFAULT_SIGMA,
    first_unit: int = 0,
    rng: RandomSource | None = None,
    workers: int | None = None,
    obfuscation: str | ObfuscatorPool = "djn",
) -> EncryptedFilters:
    """Encrypt the rows of ``filters`` ((m, L) bits) in ``layout``; units are numbered
    from ``first_unit`` (continue a set without clashing ids). Fresh encryptions, so the
    result can be sent as it is. ``obfuscation`` as in
    :func:`~privreg.crypto.vector.encrypt`."""
    _check_key(public_key)
    layout = check_layout(layout)
    first_unit = v.check_int("first_unit", first_unit, minimum=0)
    f = _check_filters("filters", filters)
    m, length = f.shape
    if layout == "bits":
        per_unit, slot_bits = 1, 0
        values: list[int] = f.reshape(-1).astype(np.int64).tolist()
        sizes, bound = [1] * m, 1
    else:
        slot_bits, per_unit = slot_layout(public_key, length=length, sigma=sigma)
        values, sizes = _slot_plaintexts(f, per_unit, slot_bits) if m else ([], [])
        bound = (1 << (per_unit * slot_bits)) - 1
    cts = encrypt(public_key, values, bound=bound, obfuscation=obfuscation, rng=rng, workers=workers)._c
    return EncryptedFilters(
        public_key=public_key,
        layout=layout,
        length=length,
        per_unit=per_unit,
        slot_bits=slot_bits,
        units=range(first_unit, first_unit + len(sizes)),
        sizes=sizes,
        ciphertexts=cts,
        randomised=True,
    )


# ------------------------------------------------------------------ distances


def _distance_chunk(
    n: int, n2: int, units: Sequence[Sequence[mpz]], tasks: Sequence[tuple[int, bool, Sequence[int], int]]
) -> list[mpz]:
    """One ciphertext per task ``(unit, ones_form, positions, plain)``:
    ones form ``S * Q^-2 * g^plain``, zeros form ``S^-1 * Q^2 * g^plain``, where
    ``S = prod(unit)`` and ``Q = prod(unit[positions])``."""
    n, n2 = mpz(n), mpz(n2)
    sums: dict[int, mpz] = {}
    inverses: dict[int, mpz] = {}
    out = []
    for u, ones_form, positions, plain in tasks:
        cts = units[u]
        s = sums.get(u)
        if s is None:
            s = sums[u] = prod_mod(list(cts), n2)
        q = mpz(1)
        for i in positions:
            q = q * cts[i] % n2
        if ones_form:
            q = gmpy2.invert(q, n2)
            base = s
        else:
            base = inverses.get(u)
            if base is None:
                base = inverses[u] = gmpy2.invert(s, n2)
        out.append(q * q % n2 * base % n2 * (1 + plain * n) % n2)
    return out


def _run_tasks(
    enc: EncryptedFilters, task_units: np.ndarray, tasks: list[tuple[int, bool, list[int], int]], workers: int | None
) -> list[mpz]:
    """Evaluate ``tasks`` (unit ids in ``task_units``, sorted) over processes, each chunk
    carrying only the ciphertexts of its units."""
    pk = enc.public_key
    w = parallel.resolve_workers(len(tasks), workers)
    chunks = []
    for part in parallel.split(list(range(len(tasks))), w):
        idx = list(part)
        ids = sorted({int(task_units[i]) for i in idx})
        local = {u: j for j, u in enumerate(ids)}
        units = [enc._unit_cts(u) for u in ids]
        chunk_tasks = [(local[int(task_units[i])], *tasks[i][1:]) for i in idx]
        chunks.append((int(pk.n), int(pk.n2), units, chunk_tasks))
    return parallel.run_chunks(_distance_chunk, chunks, w) if tasks else []


def _task_form(b: np.ndarray, length: int) -> tuple[bool, list[int]]:
    ones = int(b.sum())
    if ones + _INVERSION_COST <= length - ones:
        return True, np.flatnonzero(b).tolist()
    return False, np.flatnonzero(~b).tolist()


def hamming_distances(
    enc: EncryptedFilters, rows: Any, filters: Any, *, rng: RandomSource | None = None, workers: int | None = None
) -> EncryptedDistances:
    """Encrypted ``HD(a_row, b)`` for each pair ``(rows[k], filters[k])``: encrypted filter
    ``rows[k]`` of ``enc`` against the plaintext filter ``filters[k]`` (one row per pair).

    Returns :class:`EncryptedDistances` in the layout of ``enc`` (packed for ``"bits"``,
    masked slots for ``"slots"``), to be sent with
    :func:`~privreg.crypto.channel.send_encrypted` (``to_payload()``), which
    re-randomises it. ``rng`` draws the slot masks (default: the OS CSPRNG).
    """
    if not isinstance(enc, EncryptedFilters):
        raise PrivregTypeError(f"enc must be EncryptedFilters; got {type(enc).__name__}.")
    r = np.asarray(rows)
    if r.ndim != 1 or (r.size and r.dtype.kind not in "iu"):
        raise PrivregTypeError(f"rows must be a 1-D integer array of row addresses; got {rows!r:.80}.")
    r = r.astype(np.int64)
    f = _check_filters("filters", filters, enc.length) if r.size else np.zeros((0, enc.length), dtype=bool)
    if f.shape[0] != r.size:
        raise PrivregValueError(f"rows has {r.size} entries but filters has {f.shape[0]} rows; one filter per pair.")
    units, slots = r // enc.per_unit, r % enc.per_unit
    for u, s in zip(units.tolist(), slots.tolist()):
        if u not in enc._where or s >= enc.sizes[enc._where[u]]:
            raise PrivregValueError(f"row {u * enc.per_unit + s} is not held by these encrypted filters.")
    pk, length = enc.public_key, enc.length
    if enc.layout == "bits":
        order = np.argsort(units, kind="stable")
        tasks = []
        for k in order.tolist():
            ones_form, pos = _task_form(f[k], length)
            tasks.append((0, ones_form, pos, int(f[k].sum())))
        out = _run_tasks(enc, units[order], tasks, workers)
        cts: list[mpz] = [mpz(0)] * len(out)
        for j, k in enumerate(order.tolist()):
            cts[k] = out[j]
        vec = vector_from_ciphertexts(pk, cts, bound=length)
        packed = pack(vec, workers=workers) if cts else None
        return EncryptedDistances(public_key=pk, layout="bits", length=length, count=r.size, packed=packed)
    # slots: one result ciphertext per distinct (unit, comparer filter)
    rng = resolve_random(rng)
    s_bits = enc.slot_bits
    if r.size:
        key = np.concatenate([units[:, None].view(np.uint8).reshape(r.size, 8), np.packbits(f, axis=1)], axis=1)
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        first, inverse = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    group_units = units[first]
    order = np.argsort(group_units, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    targets: list[set[int]] = [set() for _ in range(first.size)]
    for g, s in zip(inverse.tolist(), slots.tolist()):
        targets[g].add(s)
    low = (1 << (s_bits - 1)) - 1  # a mask value fits below the slot's top bit
    tasks = []
    for g in order.tolist():
        u, b = int(group_units[g]), f[first[g]]
        size = enc.sizes[enc._where[u]]
        ones_form, pos = _task_form(b, length)
        spread = sum(1 << (t * s_bits) for t in range(size))  # |b| in every filled slot
        pattern = sum(low << (t * s_bits) for t in range(size) if t not in targets[g])
        mask = rng.randbits(size * s_bits) & pattern if pattern else 0
        tasks.append((0, ones_form, pos, int(b.sum()) * spread + mask))
    out = _run_tasks(enc, group_units[order], tasks, workers)
    vec = vector_from_ciphertexts(pk, out, bound=(1 << (enc.per_unit * s_bits)) - 1)
    return EncryptedDistances(
        public_key=pk,
        layout="slots",
        length=length,
        count=r.size,
        vec=vec,
        pair_ct=rank[inverse].astype(np.int64),
        pair_slot=slots.astype(np.int64),
        slot_bits=s_bits,
    )


class EncryptedDistances:
    """Encrypted Hamming distances of ``count`` pairs, in pair order: packed (``"bits"``)
    or one masked-slot ciphertext per (unit, comparer filter) (``"slots"``; pair ``k``
    is slot ``pair_slot[k]`` of ciphertext ``pair_ct[k]``)."""

    __slots__ = ("count", "layout", "length", "packed", "pair_ct", "pair_slot", "public_key", "slot_bits", "vec")

    def __init__(
        self,
        *,
        public_key: PaillierPublicKey,
        layout: str,
        length: int,
        count: int,
        packed: PackedCiphertexts | None = None,
        vec: EncryptedVector | None = None,
        pair_ct: np.ndarray | None = None,
        pair_slot: np.ndarray | None = None,
        slot_bits: int = 0,
    ) -> None:
        self.public_key = public_key
        self.layout = layout
        self.length = length
        self.count = count
        self.packed = packed
        self.vec = vec
        self.pair_ct = pair_ct
        self.pair_slot = pair_slot
        self.slot_bits = slot_bits

    def __len__(self) -> int:
        return self.count

    @property
    def ciphertext_count(self) -> int:
        inner = self.packed if self.layout == "bits" else self.vec
        return 0 if inner is None else inner.ciphertext_count

    @property
    def randomised(self) -> bool:
        inner = self.packed if self.layout == "bits" else self.vec
        return inner is None or inner.randomised

    def __repr__(self) -> str:
        return (
            f"EncryptedDistances({self.count} pairs in {self.ciphertext_count} ciphertexts, layout "
            f"{self.layout!r}, filters of {self.length} bits)"
        )

    def rerandomize(
        self, *, obfuscation: str | ObfuscatorPool = "djn", rng: RandomSource | None = None, workers: int | None = None
    ) -> EncryptedDistances:
        """Fresh ciphertexts of the same values (what the channel does before sending)."""
        packed, vec = self.packed, self.vec
        if packed is not None:
            packed = packed.rerandomize(obfuscation=obfuscation, rng=rng, workers=workers)
        if vec is not None:
            vec = vec.rerandomize(obfuscation=obfuscation, rng=rng, workers=workers)
        return EncryptedDistances(
            public_key=self.public_key,
            layout=self.layout,
            length=self.length,
            count=self.count,
            packed=packed,
            vec=vec,
            pair_ct=self.pair_ct,
            pair_slot=self.pair_slot,
            slot_bits=self.slot_bits,
        )

    def to_payload(self) -> dict[str, Any]:
        """The wire form (send it with ``send_encrypted``, which re-randomises it)."""
        out: dict[str, Any] = {"layout": self.layout, "length": self.length, "count": self.count}
        if self.layout == "bits":
            out["packed"] = self.packed
        else:
            out.update(cts=self.vec, pair_ct=self.pair_ct, pair_slot=self.pair_slot, slot_bits=self.slot_bits)
        return out

    @classmethod
    def from_payload(cls, payload: Any, *, public_key: PaillierPublicKey) -> EncryptedDistances:
        """Rebuild received distances, checking their layout against ``public_key``."""
        _check_key(public_key)
        if not isinstance(payload, Mapping) or payload.get("layout") not in LAYOUTS:
            raise SerializationError("malformed encrypted distances")
        layout, length, count = payload["layout"], payload.get("length"), payload.get("count")
        # isinstance spelled out per value (not in all(...)) so that mypy narrows both to int
        if (
            not isinstance(length, int)
            or isinstance(length, bool)
            or not isinstance(count, int)
            or isinstance(count, bool)
            or length < 1
            or count < 0
        ):
            raise SerializationError("malformed encrypted distances (length or count)")
        if layout == "bits":
            packed = payload.get("packed")
            fits = (packed is None and count == 0) or (isinstance(packed, PackedCiphertexts) and len(packed) == count)
            if set(payload) != {"layout", "length", "count", "packed"} or not fits:
                raise SerializationError("malformed packed distances")
            if packed is not None:
                public_key.check_same(packed.public_key, "the received distances")
                if packed.bound > length:
                    raise SerializationError("packed distances declare a bound above the filter length")
            return cls(public_key=public_key, layout=layout, length=length, count=count, packed=packed)
        keys = {"layout", "length", "count", "cts", "pair_ct", "pair_slot", "slot_bits"}
        vec, pct, pslot, s_bits = (payload.get(k) for k in ("cts", "pair_ct", "pair_slot", "slot_bits"))
        if (
            set(payload) != keys
            or not isinstance(vec, EncryptedVector)
            or not isinstance(pct, np.ndarray)
            or not isinstance(pslot, np.ndarray)
            or pct.shape != (count,)
            or pslot.shape != (count,)
            or (count and (pct.dtype.kind not in "iu" or pslot.dtype.kind not in "iu"))
            or not isinstance(s_bits, int)
            or isinstance(s_bits, bool)
            or s_bits <= length.bit_length()
        ):
            raise SerializationError("malformed slot distances")
        public_key.check_same(vec.public_key, "the received distances")
        per = _slot_capacity(public_key) // s_bits
        if count and (pct.min() < 0 or pct.max() >= len(vec) or pslot.min() < 0 or pslot.max() >= per):
            raise SerializationError("slot distances point outside their ciphertexts")
        return cls(
            public_key=public_key,
            layout=layout,
            length=length,
            count=count,
            vec=vec,
            pair_ct=pct.astype(np.int64),
            pair_slot=pslot.astype(np.int64),
            slot_bits=s_bits,
        )


def decrypt_distances(
    private_key: PaillierPrivateKey, distances: EncryptedDistances, *, workers: int | None = None
) -> np.ndarray:
    """The Hamming distances (int64, pair order). Raises WrongKeyError for another key's
    ciphertexts and PlaintextOverflowError if a value is not a distance in ``[0, L]`` or
    a slot plaintext leaves its layout (overflow or tampering)."""
    if not isinstance(private_key, PaillierPrivateKey):
        raise PrivregTypeError(f"private_key must be a PaillierPrivateKey; got {type(private_key).__name__}.")
    if not isinstance(distances, EncryptedDistances):
        raise PrivregTypeError(f"distances must be EncryptedDistances; got {type(distances).__name__}.")
    private_key.public_key.check_same(distances.public_key, "the distances")
    length = distances.length
    if distances.count == 0:
        return np.zeros(0, dtype=np.int64)
    packed, vec, pair_ct, pair_slot = distances.packed, distances.vec, distances.pair_ct, distances.pair_slot
    if distances.layout == "bits":
        if packed is None:  # only a hand-built EncryptedDistances lacks them (from_payload checks)
            raise PrivregValueError("bits-layout distances of a nonzero count hold no packed ciphertexts.")
        out = np.asarray(decrypt_packed(private_key, packed, workers=workers), dtype=np.int64)
    else:
        if vec is None or pair_ct is None or pair_slot is None:
            raise PrivregValueError("slots-layout distances of a nonzero count lack their ciphertexts or slot map.")
        raw = _decrypt_slots(private_key, vec, workers)
        s = distances.slot_bits
        mask = (1 << s) - 1
        out = np.array(
            [(raw[c] >> (t * s)) & mask for c, t in zip(pair_ct.tolist(), pair_slot.tolist())], dtype=np.int64
        )
        add_count("values_decrypted", int(out.size))
        if any(m < 0 or m > vec.bound for m in raw):
            raise PlaintextOverflowError("a slot ciphertext decrypts outside its slot layout: overflow or tampering")
    if out.size and (out.min() < 0 or out.max() > length):
        raise PlaintextOverflowError(
            f"a decrypted distance lies outside [0, {length}]: the ciphertexts are not Hamming distances of "
            f"{length}-bit filters (wrong layout or tampering)"
        )
    return out


def _mod_prime_chunk(p: int, hp: int, cts: Sequence[mpz]) -> list[mpz]:
    """Plaintexts modulo the prime ``p``: ``L_p(c^(p-1) mod p^2) hp mod p`` (half of the
    CRT decryption of :mod:`privreg.crypto.keys`)."""
    p, hp = mpz(p), mpz(hp)
    p2, pm1 = p * p, p - 1
    return [(gmpy2.powmod(c, pm1, p2) - 1) // p * hp % p for c in cts]


def _decrypt_slots(private_key: PaillierPrivateKey, vec: EncryptedVector, workers: int | None) -> list[int]:
    """Slot plaintexts (all below ``vec.bound``): modulo the smaller prime when the bound
    lies below it (one exponentiation modulo p^2 per ciphertext), else a full decryption."""
    sk = private_key
    p, hp = (sk.p, sk.hp) if sk.p < sk.q else (sk.q, sk.hq)
    if vec.bound >= p:  # a key with unbalanced primes (imported): decrypt in full
        return decrypt_ints(sk, vec, workers=workers)
    w = parallel.resolve_workers(len(vec), workers)
    chunks = [(int(p), int(hp), list(c)) for c in parallel.split(list(vec._c), w)]
    raw = parallel.run_chunks(_mod_prime_chunk, chunks, w)
    add_count("decryptions", len(raw))
    return [int(m) for m in raw]


def plaintext_distances(a: Any, b: Any) -> np.ndarray:
    """``HD(a[k], b[k])`` row by row (the reference the encrypted distances equal)."""
    fa, fb = _check_filters("a", a), _check_filters("b", b)
    if fa.shape != fb.shape:
        raise PrivregValueError(f"a and b must have the same shape; got {fa.shape} and {fb.shape}.")
    counts: NDArray[np.intp] = np.count_nonzero(fa != fb, axis=1)  # typed Any in numpy's stubs with axis
    return counts.astype(np.int64)
