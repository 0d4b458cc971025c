"""EncryptedVector: an array of Paillier ciphertexts with vectorised homomorphic operations.

Ciphertexts are held as gmpy2 integers and every operation is a loop of gmpy2
multiplications, exponentiations and inversions modulo n^2 (never one python-paillier
object per value). Large batches spread over cores (see :mod:`privreg.crypto.parallel`).

Overflow is tracked, not hoped away: every vector carries ``bound``, an upper bound on
``|plaintext|`` of its scaled integers. Encryption checks the values against the declared
bound; every operation computes the bound of its result and raises
:class:`~privreg.crypto.errors.PlaintextOverflowError` if it could exceed the key's
signed range ``max_int = (n - 1) // 3``; decryption raises if a value lies outside the
range or above the bound. Nothing wraps modulo n silently.

A bound is *public* when it follows from public quantities only (declared bounds,
lengths, the operations done); it then travels with the vector on the wire. A bound
computed from a party's private plaintext operand (an operation without a declared
``bound=``) is kept locally and not sent, so the metadata of a sent vector never depends
on private data; the receiver then only has the key's range check.

Sending: a vector can be sent through :mod:`privreg.mpc.wire` (and so through protocol
transports, which count its ciphertexts) only once it is *re-randomised*: fresh from
encryption or from :meth:`EncryptedVector.rerandomize`. The result of any homomorphic
operation is not, because it is a deterministic function of ciphertexts the receiver
may know (for example ``prod E[w_j]^x_j`` against the E[w] the receiver sent) and would
leak the plaintext operand. A received vector counts as not re-randomised, so it cannot
be forwarded unchanged either.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpz

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, SerializationError
from privreg.core.randomness import RandomSource
from privreg.crypto import parallel
from privreg.crypto.binary_dot import CsrRows, plan_blocks, shared_binary_dot
from privreg.crypto.counting import add_count
from privreg.crypto.encoding import FixedPoint, as_int_list, as_real_array, decode_scaled
from privreg.crypto.errors import PlaintextOverflowError
from privreg.crypto.keys import PaillierPrivateKey, PaillierPublicKey, lookup_public_key
from privreg.crypto.modarith import mulmod_chunk, multi_pow, powmod_chunk, prod_mod
from privreg.crypto.obfuscation import ObfuscatorPool, draw_obfuscators
from privreg.mpc.wire import register_type

__all__ = [
    "EncryptedVector",
    "check_bound",
    "declared_bound",
    "fixed_point_fits",
    "decrypt",
    "decrypt_ints",
    "encrypt",
    "vector_from_ciphertexts",
]


def _bits(x: int) -> str:
    return f"{int(x).bit_length()} bits"


def check_bound(pk: PaillierPublicKey, bound: int, what: str) -> int:
    """``bound`` (a bound on ``|plaintext|`` of ``what``) as an int, or PlaintextOverflowError
    if it exceeds the key's signed plaintext range, so that no result wraps modulo n."""
    if bound > pk.max_int:
        raise PlaintextOverflowError(
            f"{what} could reach {_bits(bound)} in magnitude, beyond the key's signed plaintext range "
            f"({_bits(pk.max_int)}); the result would wrap modulo n. Use a larger key, a smaller "
            f"fixed-point scale, smaller operands or tighter declared bounds."
        )
    return int(bound)


def _is_real_operand(values: object) -> bool:
    if isinstance(values, np.ndarray):
        dtype: np.dtype[Any] = values.dtype  # isinstance leaves the array's dtype parameter Any
        return dtype.kind == "f"
    if isinstance(values, (float, np.floating)):
        return True
    if isinstance(values, (list, tuple)):
        return any(isinstance(x, (float, np.floating)) for x in values)
    return False


def declared_bound(name: str, bound: Any, factor: int) -> int:
    """A declared bound in value units as a bound on scaled integers (exact, rounded up).
    Integer bounds are taken exactly, whatever their size (no float conversion)."""
    if isinstance(bound, (int, np.integer)) and not isinstance(bound, bool):
        if bound < 0:
            raise PrivregValueError(f"{name} must be a finite number >= 0; got {bound!r}.")
        return int(bound) * factor
    x = v.check_real(name, bound)
    if not x >= 0 or math.isinf(x):
        raise PrivregValueError(f"{name} must be a finite number >= 0; got {bound!r}.")
    return math.ceil(Fraction(bound) * factor)


def _dot_chunk(n2: int, cts: Sequence[mpz], rows: Sequence[tuple[Sequence[int], Sequence[int] | None]]) -> list[mpz]:
    """``prod_j cts[j]^k_j mod n2`` per row; ``coefs`` None means all ones (binary rows)."""
    n2 = mpz(n2)
    out = []
    for idx, coefs in rows:
        if coefs is None:
            out.append(prod_mod([cts[j] for j in idx], n2))
            continue
        out.append(multi_pow([cts[j] for j in idx], coefs, n2))  # squarings shared by the row's terms
    return out


def _localised(n2: int, cts: Sequence[mpz], rows: Sequence[tuple[Sequence[int], Any]]) -> tuple[Any, ...]:
    """A dot-product task carrying only the ciphertexts its rows use (less to pickle)."""
    cols = sorted({j for idx, _ in rows for j in idx})
    where = {j: i for i, j in enumerate(cols)}
    return (n2, [cts[j] for j in cols], [([where[j] for j in idx], coefs) for idx, coefs in rows])


class EncryptedVector:
    """Ciphertexts of one key, of scaled integers ``round(x * scale**power)``.

    Build one with :func:`encrypt` (a public key, or the private key as key holder). Operations:
    ``+``/``-`` with another vector or with plaintext values, ``*`` (element-wise) by
    plaintext values, :meth:`dot` with a plaintext vector or matrix, :meth:`sum`,
    :meth:`rerandomize`, indexing and :meth:`concat`. Plaintext integers act exactly;
    plaintext reals are fixed-point encoded with the vector's ``scale`` (a product with
    a real raises ``power`` by one).
    """

    __slots__ = ("_c", "bound", "bound_public", "power", "public_key", "randomised", "scale")

    def __init__(
        self,
        *,
        public_key: PaillierPublicKey,
        ciphertexts: list[mpz],
        scale: int,
        power: int,
        bound: int,
        bound_public: bool,
        randomised: bool,
    ) -> None:
        self.public_key = public_key
        self._c = ciphertexts
        self.scale = scale
        self.power = power
        self.bound = bound
        self.bound_public = bound_public
        self.randomised = randomised

    # ------------------------------------------------------------ basics

    @property
    def ciphertext_count(self) -> int:
        """Ciphertexts held (what transcripts count)."""
        return len(self._c)

    def __len__(self) -> int:
        return len(self._c)

    @property
    def ciphertexts(self) -> tuple[int, ...]:
        """The raw ciphertexts as Python ints (copies)."""
        return tuple(int(c) for c in self._c)

    def __repr__(self) -> str:
        kind = "integers" if self.power == 0 else f"fixed point, scale {self.scale}^{self.power}"
        return (
            f"EncryptedVector({len(self)} ciphertexts, {kind}, |value| <= {self.bound.bit_length()} bits, "
            f"key {self.public_key.key_id.hex()[:12]}{'' if self.randomised else ', not re-randomised'})"
        )

    def _like(
        self,
        cts: list[mpz],
        *,
        bound: int | None = None,
        power: int | None = None,
        bound_public: bool | None = None,
        randomised: bool = False,
    ) -> EncryptedVector:
        return EncryptedVector(
            public_key=self.public_key,
            ciphertexts=cts,
            scale=self.scale,
            power=self.power if power is None else power,
            bound=self.bound if bound is None else bound,
            bound_public=self.bound_public if bound_public is None else bound_public,
            randomised=randomised,
        )

    def __getitem__(self, index: Any) -> EncryptedVector:
        if isinstance(index, numbers.Integral) and not isinstance(index, bool):
            cts = [self._c[int(index)]]
        elif isinstance(index, slice):
            cts = self._c[index]
        else:
            idx = np.asarray(index)
            if idx.dtype.kind == "b":
                if idx.shape != (len(self),):
                    raise PrivregValueError(f"a boolean index must have length {len(self)}; got shape {idx.shape}.")
                idx = np.flatnonzero(idx)
            elif idx.dtype.kind not in "iu" or idx.ndim != 1:
                raise PrivregTypeError(f"index must be an int, a slice, or a 1-D int/bool array; got {index!r}.")
            cts = [self._c[int(i)] for i in idx.tolist()]
        return self._like(list(cts), randomised=self.randomised)

    @classmethod
    def concat(cls, vectors: Sequence[EncryptedVector]) -> EncryptedVector:
        """One vector of the ciphertexts of ``vectors`` (same key, scale and power)."""
        vectors = list(vectors)
        if not vectors or not all(isinstance(x, EncryptedVector) for x in vectors):
            raise PrivregTypeError("concat needs a non-empty sequence of EncryptedVector.")
        first = vectors[0]
        for x in vectors[1:]:
            first.public_key.check_same(x.public_key, "a concatenated vector")
            if (x.scale, x.power) != (first.scale, first.power):
                raise PrivregValueError("concat needs vectors of the same scale and power; use rescale_to first.")
        return first._like(
            [c for x in vectors for c in x._c],
            bound=max(x.bound for x in vectors),
            bound_public=all(x.bound_public for x in vectors),
            randomised=all(x.randomised for x in vectors),
        )

    # ------------------------------------------------------------ plaintext operands

    def _operand(self, values: Any, *, for_mul: bool, bound: Any) -> tuple[list[int], int, int, bool]:
        """(scaled ints of length len(self), power added, bound of |ints|, bound public?)."""
        if isinstance(values, EncryptedVector):
            raise PrivregTypeError(
                "multiplying two encrypted values is not possible with Paillier; one operand must be plaintext"
            )
        real = _is_real_operand(values)
        if real and self.scale == 1:
            raise PrivregTypeError(
                "this vector holds integers (encrypted without a codec), so its plaintext operands must be "
                "integers; encrypt with codec=FixedPoint(...) to compute with reals"
            )
        if real:
            arr = as_real_array("values", values)
            power_add = 1 if for_mul else 0
            factor = self.scale if for_mul else self.scale**self.power
            ints = FixedPoint(scale=self.scale).encode(arr, power=1 if for_mul else self.power)
            actual = float(np.max(np.abs(arr))) if arr.size else 0.0
        else:
            ints = as_int_list("values", values)
            power_add = 0
            factor = 1 if for_mul else self.scale**self.power
            ints = [k * factor for k in ints]
            actual = max((abs(k) for k in ints), default=0) // factor
        if len(ints) == 1 and len(self) != 1:
            ints = ints * len(self)
        if len(ints) != len(self):
            raise PrivregValueError(f"the plaintext operand has {len(ints)} values; the vector has {len(self)}.")
        if bound is None:
            return ints, power_add, max((abs(k) for k in ints), default=0), False
        declared = declared_bound("bound", bound, factor)
        if actual > float(bound) or max((abs(k) for k in ints), default=0) > declared:
            raise PlaintextOverflowError(
                f"a plaintext operand exceeds its declared bound={bound!r}; declare a bound that holds for every value"
            )
        return ints, power_add, declared, True

    def _align(self, other: EncryptedVector) -> tuple[EncryptedVector, EncryptedVector]:
        self.public_key.check_same(other.public_key, "the other vector")
        if self.scale != other.scale:
            raise PrivregValueError(f"cannot combine vectors of scales {self.scale} and {other.scale}.")
        if len(self) != len(other):
            raise PrivregValueError(f"vectors differ in length: {len(self)} and {len(other)}.")
        p = max(self.power, other.power)
        return self.rescale_to(p), other.rescale_to(p)

    def rescale_to(self, power: int) -> EncryptedVector:
        """The same reals at a higher ``power`` (multiplies plaintexts by ``scale**(power - self.power)``)."""
        power = v.check_int("power", power, minimum=self.power)
        if power == self.power:
            return self
        factor = self.scale ** (power - self.power)
        bound = check_bound(self.public_key, self.bound * factor, "rescaling")
        n2 = self.public_key.n2
        return self._like([gmpy2.powmod(c, factor, n2) for c in self._c], bound=bound, power=power)

    # ------------------------------------------------------------ arithmetic

    def __add__(self, other: Any) -> EncryptedVector:
        if isinstance(other, EncryptedVector):
            a, b = self._align(other)
            bound = check_bound(self.public_key, a.bound + b.bound, "the sum")
            n2 = self.public_key.n2
            return a._like(
                [x * y % n2 for x, y in zip(a._c, b._c)], bound=bound, bound_public=a.bound_public and b.bound_public
            )
        return self.add_plain(other)

    __radd__ = __add__

    def __neg__(self) -> EncryptedVector:
        n2 = self.public_key.n2
        return self._like([gmpy2.invert(c, n2) for c in self._c])

    def __sub__(self, other: Any) -> EncryptedVector:
        if isinstance(other, EncryptedVector):
            return self + (-other)
        return self.add_plain(_negate(other))

    def __rsub__(self, other: Any) -> EncryptedVector:
        return (-self).add_plain(other)

    def add_plain(self, values: Any, *, bound: float | None = None) -> EncryptedVector:
        """Add plaintext ``values`` (a scalar broadcasts). ``bound``: a public bound on
        ``|values|``; without it the result's bound is private (computed from the values)."""
        ints, _, b, public = self._operand(values, for_mul=False, bound=bound)
        pk = self.public_key
        new_bound = check_bound(pk, self.bound + b, "the sum")
        n, n2 = pk.n, pk.n2
        return self._like(
            [c * (1 + (k % n) * n) % n2 for c, k in zip(self._c, ints)],
            bound=new_bound,
            bound_public=self.bound_public and public,
        )

    def __mul__(self, other: Any) -> EncryptedVector:
        return self.mul_plain(other)

    __rmul__ = __mul__

    def mul_plain(self, values: Any, *, bound: float | None = None, workers: int | None = None) -> EncryptedVector:
        """Multiply element-wise by plaintext ``values`` (a scalar broadcasts); reals raise
        ``power`` by one. ``bound``: a public bound on ``|values|``."""
        ints, power_add, b, public = self._operand(values, for_mul=True, bound=bound)
        new_bound = check_bound(self.public_key, self.bound * b, "the product")
        w = parallel.resolve_workers(len(self), workers)
        n2 = int(self.public_key.n2)
        idx = parallel.split(list(range(len(self))), w)
        chunks = [(n2, [self._c[i] for i in part], [ints[i] for i in part]) for part in idx]
        return self._like(
            parallel.run_chunks(powmod_chunk, chunks, w),
            bound=new_bound,
            power=self.power + power_add,
            bound_public=self.bound_public and public,
        )

    def sum(self) -> EncryptedVector:
        """The encrypted sum of all entries (a vector of length 1)."""
        bound = check_bound(self.public_key, self.bound * len(self), "the sum")
        return self._like([prod_mod(self._c, self.public_key.n2)], bound=bound)

    def dot(self, matrix: Any, *, bound: float | None = None, workers: int | None = None) -> EncryptedVector:
        """``matrix @ x`` for the encrypted vector ``x``: one ciphertext per row of the
        plaintext ``matrix`` (a 1-D array gives one inner product).

        ``matrix`` may be a numpy array (integer, bool or real) or a scipy.sparse matrix;
        binary rows cost at most one multiplication per nonzero (rows that share columns
        share partial products: :mod:`~privreg.crypto.binary_dot`), other rows one
        simultaneous exponentiation (:func:`~privreg.crypto.modarith.multi_pow`); the
        ciphertexts are the products of the terms' powers either way. ``bound``: a public bound on
        ``|matrix entries|``; the result's bound is then ``bound * ncols * self.bound``
        and public, otherwise it is computed from the rows and private.
        """
        rows, ncols, power_add, row_l1, entry_max, real = self._rows(matrix)
        if ncols != len(self):
            raise PrivregValueError(f"the matrix has {ncols} columns; the vector has {len(self)} entries.")
        factor = self.scale if real else 1
        if bound is not None:
            declared = declared_bound("bound", bound, factor)
            if entry_max > declared:
                raise PlaintextOverflowError(f"a matrix entry exceeds its declared bound={bound!r}.")
            new_bound, public = declared * ncols * self.bound, self.bound_public
        else:
            new_bound, public = row_l1 * self.bound, False
        new_bound = check_bound(self.public_key, new_bound, "an inner product")
        if isinstance(rows, CsrRows):  # a binary sparse matrix: no Python list per row
            terms = int(rows.indices.size)
            plan = plan_blocks(rows, ncols)
        else:
            terms = sum(len(r[0]) for r in rows)
            plan = plan_blocks([idx for idx, _ in rows], ncols) if all(k is None for _, k in rows) else None
        w = parallel.resolve_workers(terms, workers)
        if plan is not None:  # binary rows sharing columns: shared partial products
            out = shared_binary_dot(int(self.public_key.n2), self._c, plan, w)
            return self._like(out, bound=new_bound, power=self.power + power_add, bound_public=public)
        if isinstance(rows, CsrRows):
            rows = [(rows.indices[a:b].tolist(), None) for a, b in itertools.pairwise(rows.indptr.tolist())]
        if w == 1:
            out = _dot_chunk(int(self.public_key.n2), self._c, rows)
        else:
            chunks = [_localised(int(self.public_key.n2), self._c, part) for part in parallel.split(rows, w)]
            out = parallel.run_chunks(_dot_chunk, chunks, w)
        return self._like(out, bound=new_bound, power=self.power + power_add, bound_public=public)

    def _rows(self, matrix: Any) -> tuple[list[tuple[list[int], list[int] | None]] | CsrRows, int, int, int, int, bool]:
        """Rows as (column indices, scaled coefficients or None for all-ones), or, for a
        sparse matrix of ones, its :class:`~privreg.crypto.binary_dot.CsrRows` (every
        check done on the arrays: no Python step per nonzero)."""
        try:
            import scipy.sparse as sp
        except ImportError:  # pragma: no cover - scipy is a dependency
            sp = None
        if sp is not None and sp.issparse(matrix):
            csr = sp.csr_matrix(matrix)
            if not csr.has_canonical_format:  # one entry per (row, column), the caller's matrix untouched
                csr = csr.copy()
                csr.sum_duplicates()
            csr.eliminate_zeros()
            real = csr.dtype.kind == "f"
            ncols = csr.shape[1]
            indptr, indices, data = csr.indptr, csr.indices, csr.data
            if csr.dtype.kind in "biu" and bool(np.all(data == 1)):
                longest = int(np.max(np.diff(indptr), initial=0))
                ones = CsrRows(np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64))
                return ones, ncols, 0, longest, 1 if data.size else 0, False
            pieces = [
                (indices[indptr[i] : indptr[i + 1]], data[indptr[i] : indptr[i + 1]]) for i in range(csr.shape[0])
            ]
        else:
            arr = np.asarray(matrix)
            if arr.dtype.kind == "O" and not all(
                isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in arr.reshape(-1)
            ):
                raise PrivregTypeError("an object-dtype matrix must hold Python integers only.")
            if arr.dtype.kind not in "biufO":
                raise PrivregTypeError(f"matrix must be numeric; got dtype {arr.dtype}.")
            if arr.ndim == 1:
                arr = arr[None, :]
            if arr.ndim != 2:
                raise PrivregValueError(f"matrix must be 1-D or 2-D; got shape {arr.shape}.")
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise PrivregValueError("matrix must be finite.")
            real = arr.dtype.kind == "f"
            ncols = arr.shape[1]
            pieces = []
            for row in arr:
                idx = np.flatnonzero(row)
                pieces.append((idx, row[idx]))
        if real and self.scale == 1:
            raise PrivregTypeError(
                "this vector holds integers; multiply it by an integer matrix, or encrypt "
                "with codec=FixedPoint(...) to use real coefficients"
            )
        codec = FixedPoint(scale=self.scale) if real else None
        rows: list[tuple[list[int], list[int] | None]] = []
        row_l1 = entry_max = 0
        for idx, vals in pieces:
            coefs = codec.encode(vals, power=1) if codec is not None else [int(x) for x in vals.tolist()]
            row_l1 = max(row_l1, sum(abs(k) for k in coefs))
            entry_max = max(entry_max, max((abs(k) for k in coefs), default=0))
            binary = all(k == 1 for k in coefs)
            rows.append(([int(j) for j in idx.tolist()], None if binary else coefs))
        return rows, ncols, 1 if real else 0, row_l1, entry_max, real

    # ------------------------------------------------------------ randomness

    def rerandomize(
        self, *, obfuscation: str | ObfuscatorPool = "djn", rng: RandomSource | None = None, workers: int | None = None
    ) -> EncryptedVector:
        """Fresh ciphertexts of the same plaintexts (multiplied by new obfuscators):
        unlinkable to this vector, and allowed on the wire."""
        rho = draw_obfuscators(self.public_key, len(self), obfuscation, rng=rng, workers=workers)  # the costly part
        out = mulmod_chunk(int(self.public_key.n2), self._c, rho)
        add_count("rerandomizations", len(self))
        return self._like(out, randomised=True)


def _negate(values: Any) -> Any:
    if isinstance(values, np.ndarray):
        return -values if values.dtype.kind != "b" else -values.astype(np.int64)
    if isinstance(values, (list, tuple)):
        return [-x for x in values]
    return -values


def encrypt(
    key: PaillierPublicKey | PaillierPrivateKey,
    values: Any,
    *,
    bound: float,
    codec: FixedPoint | None = None,
    obfuscation: str | ObfuscatorPool = "djn",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> EncryptedVector:
    """Encrypt ``values`` (integers, or reals with ``codec``) as an EncryptedVector.

    ``key`` is a public key, or the private key for the key holder's encryption with
    obfuscators computed modulo p^2 and q^2 (CRT): ``"standard"`` then gives the same
    distribution as public-key encryption, and ``"djn"`` uses an exponent uniform modulo
    lcm(p-1, q-1), so unlike public-key DJN it rests on DCR alone.

    ``bound`` is the public bound on ``|value|`` (in the values' units); it is checked
    against the values and tracked through homomorphic operations so that overflow
    raises instead of wrapping. ``obfuscation``: ``"djn"`` (default, fast, DCR plus the
    DJN short-exponent assumption for a public key), ``"standard"`` (DCR only), or an
    ObfuscatorPool.
    """
    if isinstance(key, PaillierPrivateKey):
        pk, private_key = key.public_key, key
    elif isinstance(key, PaillierPublicKey):
        pk, private_key = key, None
    else:
        raise PrivregTypeError(
            f"key must be a PaillierPublicKey or PaillierPrivateKey; got {type(key).__name__}. "
            f"Pass keypair.public_key (or keypair.private_key to encrypt as the key holder)."
        )
    if codec is None:
        ints = as_int_list("values", values)
        scale, power = 1, 0
        b = declared_bound("bound", bound, 1)
        actual = max((abs(k) for k in ints), default=0)
        if actual > b:
            raise PlaintextOverflowError(
                f"a value to encrypt has magnitude {actual} > bound={bound!r}; declare a bound that holds "
                f"for every value (it is public)"
            )
    else:
        if not isinstance(codec, FixedPoint):
            raise PrivregTypeError(f"codec must be a FixedPoint; got {type(codec).__name__}.")
        arr = as_real_array("values", values)
        scale, power = codec.scale, 1
        b = declared_bound("bound", bound, codec.scale)
        if arr.size and float(np.max(np.abs(arr))) > float(bound):
            raise PlaintextOverflowError(
                f"a value to encrypt has magnitude {float(np.max(np.abs(arr)))!r} > bound={bound!r}; declare a "
                f"bound that holds for every value (it is public)"
            )
        ints = codec.encode(arr, power=1)
    check_bound(pk, b, "an encrypted value")
    rho = draw_obfuscators(pk, len(ints), obfuscation, rng=rng, workers=workers, private_key=private_key)
    n, n2 = pk.n, pk.n2
    cts = [(1 + (m % n) * n) * r % n2 for m, r in zip(ints, rho)]
    add_count("encryptions", len(cts))
    return EncryptedVector(
        public_key=pk, ciphertexts=cts, scale=scale, power=power, bound=b, bound_public=True, randomised=True
    )


def vector_from_ciphertexts(
    pk: PaillierPublicKey, cts: list[mpz], *, bound: int, randomised: bool = False
) -> EncryptedVector:
    """An integer vector from raw ciphertexts built by a protocol that tracks ``bound`` itself
    (checked against the key's range); ``randomised`` only if every ciphertext is fresh."""
    check_bound(pk, bound, "a protocol value")
    return EncryptedVector(
        public_key=pk, ciphertexts=cts, scale=1, power=0, bound=bound, bound_public=True, randomised=randomised
    )


# ------------------------------------------------------------------ decryption


def decrypt_ints(private_key: PaillierPrivateKey, vec: EncryptedVector, *, workers: int | None = None) -> list[int]:
    """The signed scaled integers of ``vec`` (exact).

    Raises PlaintextOverflowError if a value lies outside the key's signed range or
    outside the vector's tracked bound (a sign of overflow or of tampering).
    """
    if not isinstance(private_key, PaillierPrivateKey):
        raise PrivregTypeError(
            f"private_key must be a PaillierPrivateKey; got {type(private_key).__name__}. Pass keypair.private_key."
        )
    if not isinstance(vec, EncryptedVector):
        raise PrivregTypeError(f"vec must be an EncryptedVector; got {type(vec).__name__}.")
    pk = private_key.public_key
    pk.check_same(vec.public_key, "the vector")
    raw = private_key.raw_decrypt(vec._c, workers=workers)
    n, max_int = pk.n, pk.max_int
    out = []
    for i, m in enumerate(raw):
        if m <= max_int:
            x = int(m)
        elif m >= n - max_int:
            x = int(m - n)
        else:
            raise PlaintextOverflowError(
                f"decrypted value {i} lies in the overflow zone of the key (between +{max_int.bit_length()} "
                f"and -{max_int.bit_length()} bits): a result overflowed the plaintext range. Use a larger "
                f"key or smaller values/scale."
            )
        if abs(x) > vec.bound:
            raise PlaintextOverflowError(
                f"decrypted value {i} has {abs(x).bit_length()} bits, above the vector's tracked bound "
                f"({vec.bound.bit_length()} bits): the ciphertext does not match its declared bound"
            )
        out.append(x)
    add_count("values_decrypted", len(out))
    return out


def decrypt(private_key: PaillierPrivateKey, vec: EncryptedVector, *, workers: int | None = None) -> np.ndarray:
    """Decrypt ``vec``: floats (fixed point decoded) if it holds reals, else integers
    (int64, or object dtype beyond int64)."""
    ints = decrypt_ints(private_key, vec, workers=workers)
    return decode_scaled(ints, vec.scale, vec.power)


# ------------------------------------------------------------------ wire


def _to_wire(vec: EncryptedVector) -> tuple[Any, ...]:
    if not vec.randomised:
        raise SerializationError(
            "an EncryptedVector must be re-randomised before it is sent: it is the result of homomorphic "
            "operations (or was received) and could leak the plaintext operands; send vec.rerandomize()"
        )
    pk = vec.public_key
    width = (2 * pk.n_bits + 7) // 8
    blob = b"".join(c.to_bytes(width, "big") for c in vec._c)
    return (pk.key_id, int(vec.scale), int(vec.power), int(vec.bound) if vec.bound_public else None, width, blob)


def fixed_point_fits(pk: PaillierPublicKey, scale: int, power: int) -> bool:
    """Whether a received fixed-point denominator ``scale ** power`` is sane: ``scale >= 1``,
    ``power >= 0`` and ``scale ** power`` below ``n^2`` (a larger denominator encodes
    nothing, and a peer could make decoding compute an enormous power)."""
    return scale >= 1 and power >= 0 and (scale == 1 or power * (scale.bit_length() - 1) < 2 * pk.n_bits)


def _from_wire(t: Any) -> EncryptedVector:
    if not (
        isinstance(t, tuple)
        and len(t) == 6
        and isinstance(t[0], bytes)
        and isinstance(t[5], bytes)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in (t[1], t[2], t[4]))
        and (t[3] is None or (isinstance(t[3], int) and not isinstance(t[3], bool)))
    ):
        raise SerializationError("malformed EncryptedVector")
    kid, scale, power, bound, width, blob = t
    pk = lookup_public_key(kid)
    if pk is None:
        raise SerializationError(
            f"ciphertexts under unknown key {kid.hex()[:12]}: the sender must send its PaillierPublicKey "
            f"first, and the receiver must keep a reference to it"
        )
    if width != (2 * pk.n_bits + 7) // 8 or len(blob) % width or not fixed_point_fits(pk, scale, power):
        raise SerializationError("malformed EncryptedVector (width, scale or power)")
    if bound is not None and not 0 <= bound <= pk.max_int:
        raise SerializationError("EncryptedVector bound outside the key's plaintext range")
    n2 = pk.n2
    cts = [mpz.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]
    if any(not 0 < c < n2 for c in cts):
        raise SerializationError("a ciphertext lies outside (0, n^2)")
    return EncryptedVector(
        public_key=pk,
        ciphertexts=cts,
        scale=scale,
        power=power,
        bound=int(pk.max_int) if bound is None else bound,
        bound_public=bound is not None,
        randomised=False,
    )


register_type("privreg.paillier.EncryptedVector", EncryptedVector, _to_wire, _from_wire)
