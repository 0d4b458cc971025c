"""Encrypted inner products between a key holder and a data holder.

The key holder has a Paillier key pair and a vector ``u``; the data holder has a
plaintext matrix ``X`` (one row per inner product). The key holder sends ``E[u]``; the
data holder computes ``E[X u]`` homomorphically (at most one multiplication per nonzero
binary entry, an exponentiation per other entry), adds a mask if the result is to be shared,
re-randomises, and sends it back; the key holder decrypts.

Two outputs:

``reveal="keyholder"``: the key holder learns ``X u``; the data holder learns nothing
    (it only ever holds ciphertexts under the key holder's key).
``reveal="shares"``: the data holder adds ``r`` uniform in ``[0, 2^(l + 1 + sigma))``, where
    ``2^l`` bounds ``|X u|`` (from public bounds only); the key holder's share is
    ``X u + r`` and the data holder's ``-r``, so the shares sum to ``X u`` (as scaled
    integers). The key holder's share is within statistical distance ``2^-sigma`` of a
    value independent of ``X u`` (sigma is the statistical security parameter, 40 by
    default).

Both roles are coroutines (:func:`inner_product_keyholder`, :func:`inner_product_holder`)
that any protocol can call inside its own parties; :class:`EncryptedInnerProduct` runs
them as a standalone :class:`~privreg.core.protocol.Protocol`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto.channel import (
    RoleParty,
    recv_encrypted,
    recv_public_key,
    require_input,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.encoding import FixedPoint
from privreg.crypto.keys import PaillierKeypair, PaillierPrivateKey
from privreg.crypto.vector import EncryptedVector, check_bound, decrypt, decrypt_ints, encrypt

__all__ = [
    "AdditiveShares",
    "EncryptedInnerProduct",
    "inner_product_holder",
    "inner_product_keyholder",
    "REVEALS",
]

REVEALS = ("keyholder", "shares")


class AdditiveShares:
    """One party's additive shares of scaled integers: the two parties' ``values`` sum
    to ``round(y * scale**power)`` for the shared reals ``y``."""

    def __init__(self, values: Sequence[int], *, scale: int, power: int) -> None:
        self.values = [int(x) for x in values]
        self.scale = scale
        self.power = power

    def __len__(self) -> int:
        return len(self.values)

    def combine(self, other: AdditiveShares) -> np.ndarray:
        """The shared values (floats if fixed point, else integers)."""
        if not isinstance(other, AdditiveShares) or (other.scale, other.power, len(other)) != (
            self.scale,
            self.power,
            len(self),
        ):
            raise PrivregValueError("shares of different layouts cannot be combined")
        total = [a + b for a, b in zip(self.values, other.values)]
        if self.power:
            d = self.scale**self.power
            return np.array([x / d for x in total], dtype=np.float64)
        return np.array(total, dtype=object if any(abs(x) >= 2**63 for x in total) else np.int64)

    def __repr__(self) -> str:
        return f"AdditiveShares({len(self)} values, scale {self.scale}^{self.power})"


def _check_reveal(reveal: object) -> str:
    if reveal not in REVEALS:
        raise PrivregValueError(f"reveal must be one of {REVEALS}; got {reveal!r}.")
    return reveal


async def inner_product_holder(
    ch: Channel,
    *,
    keyholder: str,
    enc: EncryptedVector,
    matrix: Any,
    matrix_bound: float,
    reveal: str = "keyholder",
    sigma: int = 40,
    step: str = "ip.result",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> AdditiveShares | None:
    """The data holder's role: send ``E[matrix @ u]`` (masked if ``reveal="shares"``).

    ``matrix_bound`` is a public bound on ``|matrix entries|``. Returns this party's
    shares, or None when the key holder learns the result.
    """
    _check_reveal(reveal)
    sigma = v.check_int("sigma", sigma, minimum=1)
    rng = resolve_random(rng)
    y = enc.dot(matrix, bound=matrix_bound, workers=workers)
    if reveal == "keyholder":
        await send_encrypted(ch, keyholder, y, step=step, rng=rng, workers=workers)
        return None
    if not y.bound_public:
        raise PrivregValueError(
            "the mask size must follow from public bounds; the encrypted vector's bound is "
            "private (declare bounds on every operation that produced it)"
        )
    mask_bits = y.bound.bit_length() + 1 + sigma  # |Xu| <= B < 2^l: shifts of 2B against 2^(l+1+sigma)
    r = [rng.randbits(mask_bits) for _ in range(len(y))]
    masked = _add_raw(y, r, 1 << mask_bits)
    await send_encrypted(ch, keyholder, masked, step=step, rng=rng, workers=workers)
    return AdditiveShares([-x for x in r], scale=y.scale, power=y.power)


def _add_raw(y: EncryptedVector, ints: Sequence[int], ints_bound: int) -> EncryptedVector:
    """``y`` plus raw scaled integers ``ints`` (|ints| < ints_bound, a public bound)."""
    pk = y.public_key
    bound = check_bound(pk, y.bound + ints_bound, "the masked value")
    n, n2 = pk.n, pk.n2
    return EncryptedVector(
        public_key=pk,
        ciphertexts=[c * (1 + (k % n) * n) % n2 for c, k in zip(y._c, ints)],
        scale=y.scale,
        power=y.power,
        bound=bound,
        bound_public=y.bound_public,
        randomised=False,
    )


async def inner_product_keyholder(
    ch: Channel,
    *,
    holder: str,
    private_key: PaillierPrivateKey,
    rows: int,
    reveal: str = "keyholder",
    step: str = "ip.result",
    workers: int | None = None,
) -> np.ndarray | AdditiveShares:
    """The key holder's role: receive ``rows`` results and decrypt them."""
    _check_reveal(reveal)
    y = await recv_encrypted(ch, holder, step=step, public_key=private_key.public_key, length=rows)
    if reveal == "keyholder":
        return decrypt(private_key, y, workers=workers)
    return AdditiveShares(decrypt_ints(private_key, y, workers=workers), scale=y.scale, power=y.power)


class EncryptedInnerProduct(Protocol):
    """``X u`` for the key holder's vector ``u`` and the data holder's matrix ``X``.

    Each process passes the inputs of the parties it hosts (``keypair``, ``u``,
    ``u_bound`` for the key holder; ``matrix``, ``matrix_bound`` for the holder); the
    public parameters (``rows``, ``reveal``, ``sigma``, ``codec``) must agree.
    Outputs: key holder ``X u`` (or its shares), holder None (or its shares).
    """

    name = "paillier-inner-product"
    caveats = (
        "Semi-honest parties. Security of the key holder's vector: semantic security of Paillier (DCR; with "
        "the default DJN encryption also the DJN short-exponent assumption). Security of the data holder's "
        "matrix: the result is re-randomised before it is sent, so the key holder learns only the decrypted "
        "value (X u, or X u + r with r statistically hiding at 2^-sigma in share mode). Public: the key, "
        "the dimensions, the public bounds and scale. Fixed-point reals are rounded to 1/scale on encoding. "
        "Network: over mutual TLS (privreg party, TcpTransport(tls=...)) an eavesdropper learns message sizes "
        "and timing (hence the dimensions and batch sizes) but no content; plaintext mode shows everything. "
        "A malicious data holder can return any value in place of X u (the key holder cannot tell); a malicious "
        "key holder gains nothing beyond its output from a malformed key, which is validated on receipt."
    )

    def __init__(
        self,
        *,
        rows: int,
        reveal: str = "keyholder",
        sigma: int = 40,
        codec: FixedPoint | None = None,
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
        self.rows = v.check_int("rows", rows, minimum=1)
        self.reveal = _check_reveal(reveal)
        self.sigma = v.check_int("sigma", sigma, minimum=1)
        if codec is not None and not isinstance(codec, FixedPoint):
            raise PrivregTypeError(f"codec must be a FixedPoint or None; got {codec!r}.")
        if keypair is not None and not isinstance(keypair, PaillierKeypair):
            raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
        self.codec, self.keypair, self.u, self.u_bound = codec, keypair, u, u_bound
        self.matrix, self.matrix_bound = matrix, matrix_bound
        self.allow_insecure, self.rng, self.workers = allow_insecure, rng, workers
        self.keyholder, self.holder = v.check_name("keyholder", keyholder), v.check_name("holder", holder)

    def learns(self) -> Mapping[str, str]:
        if self.reveal == "keyholder":
            return {
                self.keyholder: "X u (and the dimensions of X)",
                self.holder: "nothing beyond the public key, the length of u and its public bound",
            }
        return {
            self.keyholder: "its share X u + r: statistically (2^-sigma) independent of X u",
            self.holder: "its share -r; nothing about u beyond its length and public bound",
        }

    def parties(self) -> Sequence[Party]:
        return [RoleParty(self.keyholder, self._run_keyholder), RoleParty(self.holder, self._run_holder)]

    async def _run_keyholder(self, ch: Channel) -> Any:
        kp = require_input(self.keypair, "keypair", self.keyholder)
        u = require_input(self.u, "u", self.keyholder)
        u_bound = require_input(self.u_bound, "u_bound", self.keyholder)
        await send_public_key(ch, self.holder, kp.public_key, step="ip.public-key")
        enc = encrypt(kp.private_key, u, bound=u_bound, codec=self.codec, rng=self.rng, workers=self.workers)
        await send_encrypted(ch, self.holder, enc, step="ip.vector")
        return await inner_product_keyholder(
            ch, holder=self.holder, private_key=kp.private_key, rows=self.rows, reveal=self.reveal, workers=self.workers
        )

    async def _run_holder(self, ch: Channel) -> Any:
        matrix = require_input(self.matrix, "matrix", self.holder)
        matrix_bound = require_input(self.matrix_bound, "matrix_bound", self.holder)
        pk = await recv_public_key(ch, self.keyholder, step="ip.public-key", allow_insecure=self.allow_insecure)
        enc = await recv_encrypted(ch, self.keyholder, step="ip.vector", public_key=pk)
        n_rows = 1 if np.ndim(matrix) == 1 else matrix.shape[0]
        if n_rows != self.rows:
            raise ProtocolError(f"the matrix has {n_rows} rows but the protocol was set up for rows={self.rows}")
        return await inner_product_holder(
            ch,
            keyholder=self.keyholder,
            enc=enc,
            matrix=matrix,
            matrix_bound=matrix_bound,
            reveal=self.reveal,
            sigma=self.sigma,
            rng=self.rng,
            workers=self.workers,
        )
