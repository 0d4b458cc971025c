"""Sending Paillier keys and ciphertexts through a protocol channel.

:func:`send_encrypted` re-randomises every ciphertext container in the payload that is
not fresh (see :mod:`privreg.crypto.vector`) and then sends it, so protocols call one
helper and never forget; the wire codec refuses any that slipped through.
"""

from __future__ import annotations

from typing import Any

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.core.protocol import Channel, Party
from privreg.core.randomness import RandomSource
from privreg.crypto.keys import PaillierPublicKey
from privreg.crypto.obfuscation import ObfuscatorPool
from privreg.crypto.packing import PackedCiphertexts
from privreg.crypto.vector import EncryptedVector

__all__ = [
    "RoleParty",
    "require_input",
    "rerandomized",
    "send_encrypted",
    "send_public_key",
    "recv_public_key",
    "recv_encrypted",
    "insecure_key_allowed",
]


def rerandomized(
    payload: Any,
    *,
    obfuscation: str | ObfuscatorPool = "djn",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> Any:
    """``payload`` with every ciphertext container that is not fresh re-randomised
    (lists, tuples and dict values are searched)."""
    if isinstance(payload, (EncryptedVector, PackedCiphertexts)):
        if payload.randomised:
            return payload
        return payload.rerandomize(obfuscation=obfuscation, rng=rng, workers=workers)
    if isinstance(payload, list):
        return [rerandomized(x, obfuscation=obfuscation, rng=rng, workers=workers) for x in payload]
    if isinstance(payload, tuple):
        return tuple(rerandomized(x, obfuscation=obfuscation, rng=rng, workers=workers) for x in payload)
    if isinstance(payload, dict):
        return {k: rerandomized(x, obfuscation=obfuscation, rng=rng, workers=workers) for k, x in payload.items()}
    return payload


async def send_encrypted(
    ch: Channel,
    to: str,
    payload: Any,
    *,
    step: str,
    obfuscation: str | ObfuscatorPool = "djn",
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> None:
    """Re-randomise the ciphertexts of ``payload`` that need it, then send it."""
    await ch.send(to, rerandomized(payload, obfuscation=obfuscation, rng=rng, workers=workers), step=step)


async def recv_encrypted(
    ch: Channel, frm: str, *, step: str, public_key: PaillierPublicKey, length: int | None = None
) -> EncryptedVector:
    """Receive one EncryptedVector under ``public_key`` (of ``length`` entries if given)."""
    vec = await ch.recv(frm, step=step)
    if not isinstance(vec, EncryptedVector):
        raise ProtocolError(f"expected an EncryptedVector from {frm!r} at step {step!r}; got {type(vec).__name__}")
    public_key.check_same(vec.public_key, f"the vector received at step {step!r}")
    if length is not None and len(vec) != length:
        raise ProtocolError(f"expected {length} ciphertexts from {frm!r} at step {step!r}; got {len(vec)}")
    return vec


async def send_public_key(ch: Channel, to: str, public_key: PaillierPublicKey, *, step: str) -> None:
    """Send a public key (its modulus and DJN base)."""
    await ch.send(to, public_key, step=step)


def insecure_key_allowed(allow_insecure: bool, rng: RandomSource | None) -> bool:
    """Whether a party may accept a key marked insecure: with an explicit opt-in, or when
    its own randomness is seeded (a test run, whose keys are marked for being seeded)."""
    return allow_insecure or bool(rng is not None and rng.reproducible)


async def recv_public_key(ch: Channel, frm: str, *, step: str, allow_insecure: bool = False) -> PaillierPublicKey:
    """Receive a public key; an insecure one (below 2048 bits, or generated from a seeded
    source: the sender's ``insecure_reasons`` travel with the key) only if ``allow_insecure``.
    The codec has checked the key already (size, modulus, base; see :mod:`privreg.crypto.keys`)."""
    pk = await ch.recv(frm, step=step)
    if not isinstance(pk, PaillierPublicKey):
        raise ProtocolError(f"expected a PaillierPublicKey from {frm!r} at step {step!r}; got {type(pk).__name__}")
    if pk.insecure and not allow_insecure:
        raise ProtocolError(
            f"{frm!r} sent an insecure key ({'; '.join(pk.insecure_reasons)}); accept it only for tests or paper "
            f"reproduction with allow_insecure=True"
        )
    return pk


class RoleParty(Party):
    """A party whose role is the coroutine ``fn(channel)`` (how the Protocol classes of
    this package wrap their role functions)."""

    def __init__(self, name: str, fn: Any) -> None:
        self.name = name
        self._fn = fn

    async def run(self, channel: Channel) -> Any:
        return await self._fn(channel)


def require_input(value: Any, name: str, role: str) -> Any:
    """``value``, or an error saying that the hosted ``role`` needs ``name``."""
    if value is None:
        raise PrivregValueError(f"the {role} party runs here but {name} was not given; pass {name}=...")
    return value
