"""Paillier public keys received from a peer: size range, modulus and base checks, and
the sender's insecure reasons carried with the key.

A receiver in another process has no key object for the modulus yet; the tests get that
situation in one process by emptying the key registry (``fresh_registry``).
"""

from __future__ import annotations

import weakref

import gmpy2
import pytest
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregValueError, ProtocolError, SerializationError
from privreg.core.protocol import Party, Protocol
from privreg.crypto import MAX_KEY_BITS, MIN_KEY_BITS, PaillierPublicKey, generate_paillier_keypair
from privreg.crypto import keys as keys_module
from privreg.crypto.channel import recv_public_key, send_public_key
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS, _public_from_wire, _public_to_wire
from privreg.mpc.runtime import run_protocol
from privreg.mpc.wire import decode, encode

SEEDED = "primes drawn from a reproducible (seeded) source"
# made (and so registered in the process's key registry) before any test swaps it out
SMALL = cached_keypair(256, 3).public_key  # below 2048 bits and seeded: two reasons
BIG = cached_keypair(2048, 0).public_key  # 2048 bits but seeded: one reason


@pytest.fixture
def fresh_registry(monkeypatch):
    """No key objects known: as in a process that has not seen the key yet."""
    monkeypatch.setattr(keys_module, "_REGISTRY", weakref.WeakValueDictionary())


def _prime(bits: int) -> int:
    return int(gmpy2.next_prime(gmpy2.mpz(1) << (bits - 1) | 12345))


def _wire(n: int, h: int | None = None, reasons: list[str] | None = None) -> dict:
    """A wire form for modulus ``n`` (h a unit modulo n^2 unless given)."""
    return {"n": n, "h": 4 if h is None else h, "insecure_reasons": [SEEDED] if reasons is None else reasons}


def _refused(d: dict, words: str) -> SerializationError:
    with pytest.raises(SerializationError, match=words) as info:
        _public_from_wire(d)
    message = str(info.value)
    assert message.startswith("received Paillier key: ")
    if isinstance(d, dict) and isinstance(d.get("n"), int) and d["n"] > 0:  # the key is not quoted
        assert str(d["n"]) not in message and format(d["n"], "x") not in message
    return info.value


# ------------------------------------------------------------------ what travels


def test_a_key_arrives_with_the_senders_insecure_reasons(fresh_registry):
    assert len(SMALL.insecure_reasons) == 2 and BIG.insecure_reasons == (SEEDED,)
    for pk in (SMALL, BIG):
        got = decode(encode(pk))
        assert got is not pk and got == pk and got.h_s == pk.h_s
        assert got.insecure_reasons == pk.insecure_reasons and got.insecure


def test_a_key_without_reasons_arrives_secure(fresh_registry):
    seeded = BIG
    pk = PaillierPublicKey(n=int(seeded.n), h_s=int(seeded.h_s))  # the same modulus, imported
    assert not pk.insecure
    keys_module._REGISTRY.clear()
    got = decode(encode(pk))
    assert got is not pk and not got.insecure and got.insecure_reasons == ()


def test_in_one_process_the_senders_key_object_arrives():
    pk = SMALL
    assert decode(encode(pk)) is pk


def test_a_known_modulus_with_other_reasons_gives_a_key_with_the_senders_reasons():
    seeded = BIG
    assert decode(encode(seeded)) is seeded
    wire = {**_public_to_wire(seeded), "insecure_reasons": []}
    got = _public_from_wire(wire)  # the sender says the key is fine: it is not the seeded object
    assert got is not seeded and got == seeded and not got.insecure
    assert _public_from_wire(_public_to_wire(seeded)) is seeded


def test_a_small_key_is_insecure_whatever_the_sender_says(fresh_registry):
    pk = SMALL
    wire = _public_to_wire(pk)
    _refused({**wire, "insecure_reasons": []}, r"256 bits, below the 2048-bit minimum.*not say it is insecure")
    got = _public_from_wire({**wire, "insecure_reasons": ["a test key"]})
    assert got.insecure_reasons == (pk.insecure_reasons[0], "a test key")  # the size reason is put back


def test_the_wire_form_carries_the_reasons_and_not_a_flag():
    pk = SMALL
    assert _public_to_wire(pk) == {"n": int(pk.n), "h": int(pk.h_s), "insecure_reasons": list(pk.insecure_reasons)}
    # the size of a key message: n and h, the field names, and the reasons
    fixed = len(encode({"n": int(pk.n), "h": int(pk.h_s), "insecure_reasons": []}))
    reasons = sum(len(encode(r)) for r in pk.insecure_reasons)
    assert len(encode(pk)) == 2 + len("privreg.paillier.PublicKey") + fixed + reasons


# ------------------------------------------------------------------ refused keys


P2048 = _prime(2048)


@pytest.mark.parametrize(
    "n, words",
    [
        (P2048, "modulus is prime"),
        (_prime(512), "modulus is prime"),
        (3 * P2048, "prime factor below 65536"),
        (65521 * P2048, "prime factor below 65536"),
        (2 * P2048, "even"),
        ((1 << 125) + 1, "126 bits; accepted are 128 to 8192"),  # sizes are checked first
        ((1 << 8192) + 1, "8193 bits; accepted are 128 to 8192"),
        (-3 * P2048, "not positive"),
        (0, "not positive"),
    ],
    ids=["prime", "small-prime", "factor-3", "factor-65521", "even", "too-small", "too-large", "negative", "zero"],
)
def test_weak_or_malformed_moduli_are_refused(n, words, fresh_registry):
    _refused(_wire(n), words)


def test_the_size_range_is_documented_by_constants():
    assert MIN_INSECURE_KEY_BITS == 128 and MIN_KEY_BITS == 2048 and MAX_KEY_BITS == 8192
    n = (1 << MAX_KEY_BITS) + 1
    with pytest.raises(PrivregValueError, match="8192-bit maximum"):
        PaillierPublicKey(n=n, h_s=4)
    with pytest.raises(PrivregValueError, match="MAX_KEY_BITS"):
        generate_paillier_keypair(n_bits=MAX_KEY_BITS + 1)


@pytest.mark.parametrize("h", [0, 1, "n", "n*n", "n*n+4", -4], ids=str)
def test_a_base_that_is_no_unit_modulo_n_squared_is_refused(h, fresh_registry):
    pk = SMALL
    n = int(pk.n)
    value = {"n": n, "n*n": n * n, "n*n+4": n * n + 4}.get(h, h)
    _refused({**_public_to_wire(pk), "h": value}, r"h \(the DJN base\) must lie in \[2, n\^2\)")


@pytest.mark.parametrize(
    "reasons, words",
    [
        ("seeded", "list of at most 8 strings"),
        ([SEEDED] * 9, "list of at most 8 strings"),
        (["x" * 201], "1-200 printable characters"),
        ([""], "1-200 printable characters"),
        (["line\nbreak"], "1-200 printable characters"),
        ([b"seeded"], "1-200 printable characters"),
        ([None], "1-200 printable characters"),
    ],
)
def test_reasons_are_bounded(reasons, words, fresh_registry):
    pk = SMALL
    _refused({**_public_to_wire(pk), "insecure_reasons": reasons}, words)
    assert _public_from_wire({**_public_to_wire(pk), "insecure_reasons": ["x" * 200] * 8}).insecure


@pytest.mark.parametrize(
    "d",
    [
        {"n": 5, "h": 4, "insecure": True},  # the former wire form
        {"n": 5, "h": 4},
        {"n": 5, "h": 4, "insecure_reasons": [], "extra": 1},
        [5, 4, []],
        None,
    ],
)
def test_other_shapes_are_refused(d, fresh_registry):
    _refused(d, "expected a dict of the fields 'n', 'h' and 'insecure_reasons'")


@pytest.mark.parametrize("n, h", [(b"\x05", 4), (5, 4.0), (True, 4), (5, None)])
def test_fields_of_other_types_are_refused(n, h, fresh_registry):
    _refused({"n": n, "h": h, "insecure_reasons": []}, "n and h must be integers")


def test_a_refused_key_fails_decode_naming_the_wire_type_and_the_reason(fresh_registry):
    raw = b"X\x1aprivreg.paillier.PublicKey" + encode(_wire(P2048, reasons=[]))
    with pytest.raises(SerializationError) as info:
        decode(raw)
    assert str(info.value) == (
        "wire type 'privreg.paillier.PublicKey' rejected its value: received Paillier key: "
        "modulus is prime (or a base-2 strong pseudoprime), not a product of two primes"
    )
    assert isinstance(info.value.__cause__, SerializationError)


# ------------------------------------------------------------------ recv_public_key


class _KeySender(Party):
    name = "holder"

    def __init__(self, pk):
        self.pk = pk

    async def run(self, ch):
        await send_public_key(ch, "peer", self.pk, step="key")


class _KeyReceiver(Party):
    name = "peer"

    def __init__(self, allow_insecure):
        self.allow_insecure = allow_insecure

    async def run(self, ch):
        return await recv_public_key(ch, "holder", step="key", allow_insecure=self.allow_insecure)


class _KeyExchange(Protocol):
    name = "key-exchange"
    caveats = "test protocol"

    def __init__(self, pk, allow_insecure):
        self.pk, self.allow_insecure = pk, allow_insecure

    def parties(self):
        return [_KeySender(self.pk), _KeyReceiver(self.allow_insecure)]

    def learns(self):
        return {"holder": "-", "peer": "the public key"}


@pytest.mark.parametrize("registry", ["fresh", "shared"])
def test_recv_public_key_refuses_a_seeded_2048_bit_key_unless_allowed(registry, monkeypatch):
    pk = BIG
    if registry == "fresh":  # the receiver has no key object: the reasons come off the wire
        monkeypatch.setattr(keys_module, "_REGISTRY", weakref.WeakValueDictionary())
    with pytest.raises(ProtocolError, match=r"insecure key.*reproducible"):
        run_protocol(_KeyExchange(pk, allow_insecure=False))
    got = run_protocol(_KeyExchange(pk, allow_insecure=True)).outputs["peer"]
    assert got == pk and got.insecure_reasons == (SEEDED,)


def test_recv_public_key_accepts_a_key_without_reasons(fresh_registry):
    seeded = BIG
    pk = PaillierPublicKey(n=int(seeded.n), h_s=int(seeded.h_s))
    got = run_protocol(_KeyExchange(pk, allow_insecure=False)).outputs["peer"]
    assert got == pk and not got.insecure


def test_an_insecure_key_is_allowed_only_by_opt_in_or_a_seeded_party():
    from privreg.core.randomness import InsecureReproducibleRandom, SecureRandom
    from privreg.crypto.channel import insecure_key_allowed

    assert not insecure_key_allowed(False, None)
    assert not insecure_key_allowed(False, SecureRandom())
    assert insecure_key_allowed(False, InsecureReproducibleRandom(seed=1))
    assert insecure_key_allowed(True, None)
