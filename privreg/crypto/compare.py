"""Secure comparison over Paillier: the DGK bitwise protocol and an encrypted sign test.

DGK comparison (Damgard, Geisler and Kroigaard, "Efficient and secure comparison for
on-line auctions", ACISP 2007, with the correction of their 2009 note; here over Paillier
instead of the DGK cryptosystem, the variant of Veugen's survey "Comparing encrypted
data", 2011). The key holder has ``a``, the data holder ``b``, both ``l``-bit non-negative
integers; they end with XOR shares of ``[a < b]``:

1. Both append a bit so the values can never be equal: ``a' = 2a + 1``, ``b' = 2b``
   (``a' < b'`` iff ``a < b``). The key holder sends ``E[a'_i]`` for its ``l + 1`` bits.
2. The data holder draws ``s`` in ``{+1, -1}`` and, for each bit ``i`` (from the top),
   computes ``E[c_i]`` with ``c_i = s + a'_i - b'_i + 3 sum_{j > i} (a'_j XOR b'_j)``
   (XOR with a known bit is linear: ``a XOR 0 = a``, ``a XOR 1 = 1 - a``). Some
   ``c_i = 0`` iff ``i`` is the first differing bit and ``a'_i - b'_i = -s``, i.e.
   iff ``a' < b'`` (``s = +1``) or ``a' > b'`` (``s = -1``); all other ``c_i`` are
   nonzero and small (``|c_i| <= 3 l + 5``). It blinds each, ``E[c_i r_i]`` with ``r_i``
   uniform in ``Z_n^*``, shuffles them, re-randomises and sends them.
3. The key holder tests each for zero: ``delta_B = 1`` iff one is zero. The data holder's
   share is ``delta_A = [s = -1]``; ``delta_A XOR delta_B = [a < b]``.

Zero test: the key holder checks ``m = 0 (mod p)`` only (half a decryption). This is
exact here: every nonzero ``c_i`` is below ``p`` in magnitude and ``r_i`` is a unit, so
``c_i r_i`` is a unit mod n.

Encrypted sign (the comparison step of paper 000, Section 4.3): the data holder has
``E[z]`` with ``|z| < 2^l`` under the key holder's key and obtains ``[z >= 0]``. It sends
``E[d] = E[z + 2^l + r]`` with ``r`` uniform in ``[0, 2^(l + 1 + sigma))``; the key holder
decrypts ``d``. With ``z' = z + 2^l`` in ``[0, 2^(l+1))``, ``[z >= 0]`` is bit ``l`` of ``z'``
and ``floor(d / 2^l) = z'_l + floor(r / 2^l) + [d mod 2^l < r mod 2^l]``, so
``[z >= 0] = d_l XOR r_l XOR [alpha < beta]`` with ``alpha = d mod 2^l`` (key holder)
and ``beta = r mod 2^l`` (data holder), the last term from a DGK comparison. Each party
XORs its bit into its DGK share; the shares are revealed to whoever should learn.

What each party learns (semi-honest): the key holder sees ``d`` (within statistical
distance ``2^-sigma`` of independent of ``z``), a uniformly random ``delta_B`` and, in
a shuffled list, zero-or-not; the data holder sees only ciphertexts under the key
holder's key. Hence each learns only the output it is sent.

Cost per comparison (``l`` bits): the key holder encrypts ``l + 1`` bits (CRT) and makes
``l + 1`` half decryptions; the data holder does ``l + 1`` exponentiations with an
``|n|``-bit exponent (the blinding, the dominant cost) and ``l + 1`` re-randomisations.
Batches of comparisons share the messages (two per DGK run) and spread over cores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gmpy2
from gmpy2 import mpz

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import parallel
from privreg.crypto.channel import (
    RoleParty,
    recv_encrypted,
    recv_public_key,
    require_input,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.encoding import as_int_list
from privreg.crypto.keys import PaillierKeypair, PaillierPrivateKey, PaillierPublicKey
from privreg.crypto.modarith import powmod_chunk
from privreg.crypto.obfuscation import random_unit
from privreg.crypto.vector import EncryptedVector, check_bound, decrypt_ints, encrypt, vector_from_ciphertexts

__all__ = [
    "SecureComparison",
    "EncryptedSign",
    "dgk_keyholder",
    "dgk_holder",
    "sign_keyholder",
    "sign_holder",
    "OUTPUTS",
]

#: Who learns the result: the data holder, the key holder, both, or nobody (XOR shares).
OUTPUTS = ("holder", "keyholder", "both", "shares")


def _check_values(name: str, values: Any, bits: int) -> list[int]:
    ints = as_int_list(name, values)
    for x in ints:
        if not 0 <= x < 1 << bits:
            raise PrivregValueError(f"{name} must lie in [0, 2^{bits}) for bits={bits}; got {x}.")
    return ints


def _check_bits(bits: Any) -> int:
    return v.check_int("bits", bits, minimum=1)


def _check_output(output: object) -> str:
    if output not in OUTPUTS:
        raise PrivregValueError(f"output must be one of {OUTPUTS}; got {output!r}.")
    return output


# ------------------------------------------------------------------ DGK


async def dgk_keyholder(
    ch: Channel,
    *,
    holder: str,
    private_key: PaillierPrivateKey,
    values: Sequence[int],
    bits: int,
    step: str = "dgk",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> list[int]:
    """The key holder's DGK role for a batch: returns its XOR shares ``delta_B`` of
    ``[values[k] < holder's values[k]]``."""
    bits = _check_bits(bits)
    a = _check_values("values", values, bits)
    width = bits + 1
    plain = [((2 * x + 1) >> i) & 1 for x in a for i in range(width)]  # LSB first, per comparison
    enc = encrypt(private_key, plain, bound=1, rng=rng, workers=workers)
    await send_encrypted(ch, holder, enc, step=f"{step}.bits")
    blinded = await recv_encrypted(
        ch, holder, step=f"{step}.blinded", public_key=private_key.public_key, length=len(plain)
    )
    zero = private_key.zero_mod_p(blinded._c, workers=workers)
    return [int(any(zero[k * width : (k + 1) * width])) for k in range(len(a))]


async def dgk_holder(
    ch: Channel,
    *,
    keyholder: str,
    public_key: PaillierPublicKey,
    values: Sequence[int],
    bits: int,
    step: str = "dgk",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> list[int]:
    """The data holder's DGK role for a batch: returns its XOR shares ``delta_A``."""
    bits = _check_bits(bits)
    b = _check_values("values", values, bits)
    rng = resolve_random(rng)
    width = bits + 1
    enc = await recv_encrypted(ch, keyholder, step=f"{step}.bits", public_key=public_key, length=len(b) * width)
    n, n2 = public_key.n, public_key.n2
    check_bound(public_key, 3 * width + 5, "a DGK term")
    g = n + 1
    cs: list[mpz] = []
    shares = []
    for k, bk in enumerate(b):
        a_bits = enc._c[k * width : (k + 1) * width]
        b_bits = [((2 * bk) >> i) & 1 for i in range(width)]
        s = 1 if rng.randbits(1) else -1
        shares.append(int(s == -1))
        group: list[mpz] = []
        w = mpz(1)  # E[0] with trivial randomness: sum of XORs above bit i
        for i in reversed(range(width)):
            ci = a_bits[i] * (1 + ((s - b_bits[i]) % n) * n) % n2 * (w * w % n2 * w % n2) % n2
            group.append(ci)
            xor = a_bits[i] if b_bits[i] == 0 else g * gmpy2.invert(a_bits[i], n2) % n2
            w = w * xor % n2
        for i in range(len(group) - 1, 0, -1):  # Fisher-Yates: hide which bit differs first
            j = rng.randbelow(i + 1)
            group[i], group[j] = group[j], group[i]
        cs.extend(group)
    units = [random_unit(int(n), rng) for _ in cs]
    wk = parallel.resolve_workers(len(cs), workers)
    chunks = [
        (int(n2), cs[i0 : i0 + len(part)], units[i0 : i0 + len(part)])
        for i0, part in _offsets(parallel.split(list(range(len(cs))), wk))
    ]
    blinded = parallel.run_chunks(powmod_chunk, chunks, wk)
    vec = vector_from_ciphertexts(public_key, blinded, bound=public_key.max_int)
    await send_encrypted(ch, keyholder, vec, step=f"{step}.blinded", rng=rng, workers=workers)
    return shares


def _offsets(parts: list[Sequence[int]]) -> list[tuple[int, Sequence[int]]]:
    out, start = [], 0
    for part in parts:
        out.append((start, part))
        start += len(part)
    return out


async def _finish(
    ch: Channel, *, me: str, other: str, share: list[int], output: str, learns: bool, step: str
) -> list[int] | None:
    """Exchange XOR shares according to ``output``; ``learns`` says whether ``me`` is the
    party named by ``output`` ("holder"/"keyholder")."""
    if output == "shares":
        return share
    sends = output == "both" or not learns
    receives = output == "both" or learns
    if sends:
        await ch.send(other, share, step=f"{step}.share")
    if receives:
        theirs = await ch.recv(other, step=f"{step}.share")
        if not isinstance(theirs, list) or len(theirs) != len(share) or not all(x in (0, 1) for x in theirs):
            raise ProtocolError(f"malformed result shares from {other!r}")
        return [x ^ y for x, y in zip(share, theirs)]
    return None


# ------------------------------------------------------------------ encrypted sign


async def sign_holder(
    ch: Channel,
    *,
    keyholder: str,
    enc: EncryptedVector,
    bits: int,
    sigma: int = 40,
    output: str = "holder",
    step: str = "sign",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> list[int] | None:
    """The data holder's role: ``[z >= 0]`` for the encrypted integers ``z`` of ``enc``
    (scaled integers if fixed point), which must satisfy ``|z| < 2^bits``."""
    bits = _check_bits(bits)
    sigma = v.check_int("sigma", sigma, minimum=1)
    _check_output(output)
    rng = resolve_random(rng)
    pk = enc.public_key
    if enc.bound >= 1 << bits:
        raise PrivregValueError(
            f"the encrypted values may reach {enc.bound.bit_length()} bits but bits={bits}; the comparison needs "
            f"|z| < 2^bits: pass bits={enc.bound.bit_length() + 1} (or declare tighter bounds)"
        )
    mask_bits = bits + 1 + sigma
    top = 1 << bits
    r = [rng.randbits(mask_bits) for _ in range(len(enc))]
    bound = check_bound(pk, enc.bound + top + (1 << mask_bits), "the masked comparison value")
    n, n2 = pk.n, pk.n2
    masked = vector_from_ciphertexts(pk, [c * (1 + (top + rk) * n) % n2 for c, rk in zip(enc._c, r)], bound=bound)
    await send_encrypted(ch, keyholder, masked, step=f"{step}.masked", rng=rng, workers=workers)
    delta = await dgk_holder(
        ch,
        keyholder=keyholder,
        public_key=pk,
        values=[x & (top - 1) for x in r],
        bits=bits,
        step=f"{step}.dgk",
        rng=rng,
        workers=workers,
    )
    share = [((x >> bits) & 1) ^ dk for x, dk in zip(r, delta)]
    return await _finish(
        ch, me="holder", other=keyholder, share=share, output=output, learns=output == "holder", step=step
    )


async def sign_keyholder(
    ch: Channel,
    *,
    holder: str,
    private_key: PaillierPrivateKey,
    count: int,
    bits: int,
    sigma: int = 40,
    output: str = "holder",
    step: str = "sign",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> list[int] | None:
    """The key holder's role for ``count`` encrypted sign tests (see :func:`sign_holder`)."""
    bits = _check_bits(bits)
    v.check_int("sigma", sigma, minimum=1)
    _check_output(output)
    masked = await recv_encrypted(
        ch,
        holder,
        step=f"{step}.masked",
        public_key=private_key.public_key,
        length=v.check_int("count", count, minimum=1),
    )
    d = decrypt_ints(private_key, masked, workers=workers)
    if any(x < 0 for x in d):
        raise ProtocolError("a masked comparison value decrypted to a negative number; the holder broke the protocol")
    top = 1 << bits
    delta = await dgk_keyholder(
        ch,
        holder=holder,
        private_key=private_key,
        values=[x & (top - 1) for x in d],
        bits=bits,
        step=f"{step}.dgk",
        rng=rng,
        workers=workers,
    )
    share = [((x >> bits) & 1) ^ dk for x, dk in zip(d, delta)]
    return await _finish(
        ch, me="keyholder", other=holder, share=share, output=output, learns=output == "keyholder", step=step
    )


# ------------------------------------------------------------------ protocols

_CAVEATS = (
    "Semi-honest parties only: a malicious data holder could, for example, send blinded values that are not of "
    "the prescribed form. Security rests on Paillier's semantic security (DCR, and the DJN short-exponent "
    "assumption for the default fast encryption) and, for the key holder's view of the masked value, on the "
    "statistical parameter sigma (distance 2^-sigma). The bit length, the batch size and who learns the result are "
    "public. Cost is dominated by the data holder's l + 1 full-length exponentiations per comparison. "
    "Network: over mutual TLS (privreg party, TcpTransport(tls=...)) an eavesdropper learns message sizes "
    "and timing (hence the dimensions and batch sizes) but no content; plaintext mode shows everything. "
    "A malicious key holder can answer with wrong DGK bits and so flip results undetected; a received public key "
    "is checked (size, not prime, no small factors) before anything is encrypted under it."
)


def _learns(output: str, keyholder: str, holder: str, result: str) -> dict[str, str]:
    nothing = "nothing (its DGK share is a uniformly random bit)"
    out = {keyholder: nothing, holder: "nothing (it only sees ciphertexts under the key holder's key)"}
    if output in ("holder", "both"):
        out[holder] = result
    if output in ("keyholder", "both"):
        out[keyholder] = result
    if output == "shares":
        out = {
            keyholder: f"a uniformly random XOR share of {result}",
            holder: f"a uniformly random XOR share of {result}",
        }
    return out


class SecureComparison(Protocol):
    """The millionaires' problem for batches: ``[a_k < b_k]`` for the key holder's
    ``a`` and the data holder's ``b`` (``bits``-bit non-negative integers), by DGK
    over Paillier. ``output`` names who learns the bits ("holder", "keyholder", "both")
    or "shares" (each party keeps an XOR share)."""

    name = "paillier-dgk-comparison"
    caveats = _CAVEATS

    def __init__(
        self,
        *,
        bits: int,
        count: int,
        output: str = "holder",
        keypair: PaillierKeypair | None = None,
        keyholder_values: Any = None,
        holder_values: Any = None,
        allow_insecure: bool = False,
        rng: RandomSource | None = None,
        workers: int | None = None,
        keyholder: str = "keyholder",
        holder: str = "holder",
    ) -> None:
        self.bits = _check_bits(bits)
        self.count = v.check_int("count", count, minimum=1)
        self.output = _check_output(output)
        if keypair is not None and not isinstance(keypair, PaillierKeypair):
            raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
        self.keypair = keypair
        self.keyholder_values = (
            None if keyholder_values is None else _check_values("keyholder_values", keyholder_values, self.bits)
        )
        self.holder_values = None if holder_values is None else _check_values("holder_values", holder_values, self.bits)
        for name, vals in (("keyholder_values", self.keyholder_values), ("holder_values", self.holder_values)):
            if vals is not None and len(vals) != self.count:
                raise PrivregValueError(f"{name} has {len(vals)} values; count={self.count}.")
        self.allow_insecure, self.rng, self.workers = allow_insecure, rng, workers
        self.keyholder, self.holder = v.check_name("keyholder", keyholder), v.check_name("holder", holder)

    def learns(self) -> Mapping[str, str]:
        return _learns(self.output, self.keyholder, self.holder, "the bits [a_k < b_k]")

    def parties(self) -> Sequence[Party]:
        return [RoleParty(self.keyholder, self._run_keyholder), RoleParty(self.holder, self._run_holder)]

    async def _run_keyholder(self, ch: Channel) -> Any:
        kp = require_input(self.keypair, "keypair", self.keyholder)
        a = require_input(self.keyholder_values, "keyholder_values", self.keyholder)
        await send_public_key(ch, self.holder, kp.public_key, step="cmp.public-key")
        share = await dgk_keyholder(
            ch,
            holder=self.holder,
            private_key=kp.private_key,
            values=a,
            bits=self.bits,
            step="cmp.dgk",
            rng=self.rng,
            workers=self.workers,
        )
        return await _finish(
            ch,
            me=self.keyholder,
            other=self.holder,
            share=share,
            output=self.output,
            learns=self.output == "keyholder",
            step="cmp",
        )

    async def _run_holder(self, ch: Channel) -> Any:
        b = require_input(self.holder_values, "holder_values", self.holder)
        pk = await recv_public_key(ch, self.keyholder, step="cmp.public-key", allow_insecure=self.allow_insecure)
        share = await dgk_holder(
            ch,
            keyholder=self.keyholder,
            public_key=pk,
            values=b,
            bits=self.bits,
            step="cmp.dgk",
            rng=self.rng,
            workers=self.workers,
        )
        return await _finish(
            ch,
            me=self.holder,
            other=self.keyholder,
            share=share,
            output=self.output,
            learns=self.output == "holder",
            step="cmp",
        )


class EncryptedSign(Protocol):
    """``[x_k . u >= 0]`` for the key holder's vector ``u`` and the data holder's rows
    ``x_k`` (paper 000, Section 4.3, the evaluation step): the key holder sends ``E[u]``,
    the data holder computes ``E[X u]`` and runs the encrypted sign test; by default
    only the data holder learns the signs. ``bits`` must satisfy ``|x_k . u| < 2^bits``
    as scaled integers (it is checked against the public bounds)."""

    name = "paillier-encrypted-sign"
    caveats = _CAVEATS + (
        " The inner products are computed homomorphically from E[u]; with fixed-point reals a product "
        "within 1/scale^2 of zero may take either sign after rounding."
    )

    def __init__(
        self,
        *,
        bits: int,
        rows: int,
        output: str = "holder",
        sigma: int = 40,
        codec: Any = None,
        keypair: PaillierKeypair | None = None,
        u: Any = None,
        u_bound: float | None = None,
        matrix: Any = None,
        matrix_bound: float | None = None,
        allow_insecure: bool = False,
        rng: RandomSource | None = None,
        workers: int | None = None,
        keyholder: str = "keyholder",
        holder: str = "holder",
    ) -> None:
        self.bits = _check_bits(bits)
        self.rows = v.check_int("rows", rows, minimum=1)
        self.output = _check_output(output)
        self.sigma = v.check_int("sigma", sigma, minimum=1)
        self.codec, self.keypair, self.u, self.u_bound = codec, keypair, u, u_bound
        self.matrix, self.matrix_bound = matrix, matrix_bound
        self.allow_insecure, self.rng, self.workers = allow_insecure, rng, workers
        self.keyholder, self.holder = v.check_name("keyholder", keyholder), v.check_name("holder", holder)

    def learns(self) -> Mapping[str, str]:
        return _learns(self.output, self.keyholder, self.holder, "the signs [x_k . u >= 0]")

    def parties(self) -> Sequence[Party]:
        return [RoleParty(self.keyholder, self._run_keyholder), RoleParty(self.holder, self._run_holder)]

    async def _run_keyholder(self, ch: Channel) -> Any:
        kp = require_input(self.keypair, "keypair", self.keyholder)
        u = require_input(self.u, "u", self.keyholder)
        u_bound = require_input(self.u_bound, "u_bound", self.keyholder)
        await send_public_key(ch, self.holder, kp.public_key, step="sign.public-key")
        enc = encrypt(kp.private_key, u, bound=u_bound, codec=self.codec, rng=self.rng, workers=self.workers)
        await send_encrypted(ch, self.holder, enc, step="sign.vector")
        return await sign_keyholder(
            ch,
            holder=self.holder,
            private_key=kp.private_key,
            count=self.rows,
            bits=self.bits,
            sigma=self.sigma,
            output=self.output,
            rng=self.rng,
            workers=self.workers,
        )

    async def _run_holder(self, ch: Channel) -> Any:
        matrix = require_input(self.matrix, "matrix", self.holder)
        matrix_bound = require_input(self.matrix_bound, "matrix_bound", self.holder)
        pk = await recv_public_key(ch, self.keyholder, step="sign.public-key", allow_insecure=self.allow_insecure)
        enc = await recv_encrypted(ch, self.keyholder, step="sign.vector", public_key=pk)
        y = enc.dot(matrix, bound=matrix_bound, workers=self.workers)
        if len(y) != self.rows:
            raise ProtocolError(f"the matrix has {len(y)} rows but the protocol was set up for rows={self.rows}")
        return await sign_holder(
            ch,
            keyholder=self.keyholder,
            enc=y,
            bits=self.bits,
            sigma=self.sigma,
            output=self.output,
            rng=self.rng,
            workers=self.workers,
        )
