"""The DGK cryptosystem (privreg.crypto.dgk): key structure and orders, encryption by the
CRT and by the public key, the exact zero test, re-randomisation, and keys and
ciphertexts on the wire (a received key is checked; tampered or too small keys are
refused)."""

from __future__ import annotations

import pickle
import weakref

import gmpy2
import pytest

from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError, SerializationError
from privreg.core.protocol import Protocol
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import dgk as dgk_module
from privreg.crypto.channel import RoleParty
from privreg.crypto.dgk import (
    MIN_T,
    DgkCiphertexts,
    DgkPrivateKey,
    DgkPublicKey,
    generate_dgk_keypair,
    plaintext_modulus,
    recv_dgk_public_key,
    send_dgk_public_key,
    uniform_below,
)
from privreg.mpc.runtime import run_protocol
from privreg.mpc.wire import decode, encode

SEEDED = "primes drawn from a reproducible (seeded) source"


@pytest.fixture(scope="module")
def kp():
    return generate_dgk_keypair(n_bits=512, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=11))


@pytest.fixture
def fresh_registry(monkeypatch):
    """No DGK key objects known: as in a process that has not seen the key yet."""
    monkeypatch.setattr(dgk_module, "_REGISTRY", weakref.WeakValueDictionary())
    monkeypatch.setattr(dgk_module, "_CHECKED", type(dgk_module._CHECKED)())


# ------------------------------------------------------------------ keys


def test_key_structure_and_orders(kp):
    pk, sk = kp.public_key, kp.private_key
    assert pk.n_bits == 512 and pk.u == 131 == plaintext_modulus(32) and pk.t == MIN_T
    assert sk.p * sk.q == pk.n and sk.vp.bit_length() == sk.vq.bit_length() == MIN_T
    assert (sk.p - 1) % (pk.u * sk.vp) == 0 and (sk.q - 1) % (pk.u * sk.vq) == 0
    assert sk.check_orders()
    # g of order u vp vq and h of order vp vq modulo n
    order_h = sk.vp * sk.vq
    assert gmpy2.powmod(pk.h, order_h, pk.n) == 1 and gmpy2.powmod(pk.g, pk.u * order_h, pk.n) == 1
    assert gmpy2.powmod(pk.g, order_h, pk.n) != 1
    assert pk.insecure and SEEDED in pk.insecure_reasons and any("512 bits" in r for r in pk.insecure_reasons)


def test_plaintext_modulus_covers_the_comparison_terms():
    for bits in (1, 14, 32, 100, 1000):
        u = plaintext_modulus(bits)
        assert gmpy2.is_prime(u) and u > 3 * bits + 6
    with pytest.raises(PrivregValueError, match="comparison_bits"):
        plaintext_modulus(40000)


def test_small_keys_need_the_opt_in():
    with pytest.raises(PrivregValueError, match=r"n_bits=512.*insecure_allow_small_keys"):
        generate_dgk_keypair(n_bits=512)
    with pytest.raises(PrivregValueError, match="t=100"):
        generate_dgk_keypair(n_bits=2048, t=100)
    with pytest.raises(PrivregValueError, match="t=20"):
        generate_dgk_keypair(n_bits=512, t=20, insecure_allow_small_keys=True)
    with pytest.raises(PrivregValueError, match=r"t=240.*no room"):
        generate_dgk_keypair(n_bits=512, t=240, insecure_allow_small_keys=True)
    with pytest.raises(PrivregTypeError, match="insecure_allow_small_keys"):
        generate_dgk_keypair(n_bits=512, insecure_allow_small_keys="yes")
    small_t = generate_dgk_keypair(
        n_bits=512, t=64, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=13)
    )
    assert small_t.private_key.check_orders()
    assert any("t=64" in r for r in small_t.public_key.insecure_reasons)


def test_public_key_constructor_checks(kp):
    pk = kp.public_key
    fields = dict(n=int(pk.n), g=int(pk.g), h=int(pk.h), u=pk.u, t=pk.t, insecure_allow_small_keys=True)
    assert DgkPublicKey(**fields) == pk
    for change, words in (
        ({"u": 132}, "u must be a prime"),
        ({"u": 65537}, "u must be a prime"),
        ({"g": 1}, "g must be"),
        ({"h": int(pk.n) - 1}, "h must be a unit"),
        ({"h": int(pk.g)}, "g and h must differ"),
        ({"n": int(pk.n) + 1}, "odd"),
    ):
        with pytest.raises(PrivregValueError, match=words):
            DgkPublicKey(**{**fields, **change})
    with pytest.raises(PrivregValueError, match="n \\(bits\\)=512"):
        DgkPublicKey(**{**fields, "insecure_allow_small_keys": False})


def test_private_key_checks_and_is_not_pickled(kp):
    sk = kp.private_key
    with pytest.raises(PrivregValueError, match="prime factors"):
        DgkPrivateKey(public_key=kp.public_key, p=int(sk.p), q=int(sk.p), vp=int(sk.vp), vq=int(sk.vq))
    with pytest.raises(PrivregValueError, match="vp and vq"):
        DgkPrivateKey(public_key=kp.public_key, p=int(sk.p), q=int(sk.q), vp=int(sk.vq), vq=int(sk.vp))
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(sk)
    assert "DgkPrivateKey(for DgkPublicKey(512 bits" in repr(sk)


# ------------------------------------------------------------------ encryption and the zero test


@pytest.mark.parametrize("side", ["private", "public"])
def test_decryption_and_zero_test_are_exact_for_every_plaintext(kp, side):
    pk, sk = kp.public_key, kp.private_key
    ms = list(range(pk.u)) * 2
    key = sk if side == "private" else pk
    cts = key.encrypt(ms, rng=InsecureReproducibleRandom(seed=3), workers=1)
    assert isinstance(cts, DgkCiphertexts) and cts.randomised and len(cts) == len(ms)
    assert sk.decrypt(cts, workers=1) == ms
    assert sk.is_zero(cts, workers=1) == [m == 0 for m in ms]
    # the randomness lies in <h>: c / g^m has order dividing vp vq
    for c, m in zip(cts.ciphertexts[:20], ms[:20]):
        rnd = c * gmpy2.invert(gmpy2.powmod(pk.g, m, pk.n), pk.n) % pk.n
        assert gmpy2.powmod(rnd, sk.vp * sk.vq, pk.n) == 1


def test_homomorphic_sums_and_multiples_reduce_modulo_u(kp):
    pk, sk = kp.public_key, kp.private_key
    rng = InsecureReproducibleRandom(seed=4)
    a = [rng.randbelow(pk.u) for _ in range(60)]
    b = [(pk.u - x) % pk.u if i % 3 == 0 else rng.randbelow(pk.u) for i, x in enumerate(a)]
    ca, cb = sk.encrypt(a, rng=rng).raw(), pk.encrypt(b, rng=rng).raw()
    sums = [x * y % pk.n for x, y in zip(ca, cb)]
    assert sk.decrypt(sums) == [(x + y) % pk.u for x, y in zip(a, b)]
    assert sk.is_zero(sums) == [(x + y) % pk.u == 0 for x, y in zip(a, b)]
    k = 97
    assert sk.decrypt([gmpy2.powmod(c, k, pk.n) for c in ca]) == [x * k % pk.u for x in a]


def test_rerandomize_keeps_the_plaintexts_and_changes_the_ciphertexts(kp):
    pk, sk = kp.public_key, kp.private_key
    cts = sk.encrypt([0, 1, 5, 130], rng=InsecureReproducibleRandom(seed=5))
    fresh = pk.rerandomize(cts, rng=InsecureReproducibleRandom(seed=6), workers=1)
    assert fresh.randomised and sk.decrypt(fresh) == [0, 1, 5, 130]
    assert all(x != y for x, y in zip(cts.ciphertexts, fresh.ciphertexts))
    with pytest.raises(PrivregTypeError, match="DgkCiphertexts"):
        pk.rerandomize(list(cts.ciphertexts))


def test_parallel_encryption_matches_one_process(kp):
    sk = kp.private_key
    ms = [i % kp.public_key.u for i in range(300)]
    one = sk.encrypt(ms, rng=InsecureReproducibleRandom(seed=7), workers=1)
    two = sk.encrypt(ms, rng=InsecureReproducibleRandom(seed=7), workers=2)
    assert one.ciphertexts == two.ciphertexts
    assert sk.is_zero(two, workers=2) == [m == 0 for m in ms]


def test_plaintexts_outside_zu_and_foreign_ciphertexts_are_refused(kp):
    pk, sk = kp.public_key, kp.private_key
    with pytest.raises(PrivregValueError, match=r"values must lie in \[0, u\)"):
        pk.encrypt([pk.u])
    with pytest.raises(PrivregValueError, match="values"):
        sk.encrypt([-1])
    with pytest.raises(PrivregValueError, match="not DGK encryptions"):
        sk.decrypt([int(pk.g) ** 0 + 1])  # 2 is no encryption under this key (c^vp mod p off the table)
    other = generate_dgk_keypair(n_bits=512, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=12))
    with pytest.raises(PrivregValueError, match="under DGK key"):
        sk.is_zero(other.public_key.encrypt([1], rng=InsecureReproducibleRandom(seed=14)))


def test_uniform_below_is_in_range_and_reproducible():
    draws = uniform_below(InsecureReproducibleRandom(seed=1), 131, 2000)
    assert draws == uniform_below(InsecureReproducibleRandom(seed=1), 131, 2000)
    assert min(draws) == 0 and max(draws) == 130 and len(set(draws)) == 131


# ------------------------------------------------------------------ wire


def _wire(pk: DgkPublicKey, **change):
    d = {
        "n": int(pk.n),
        "g": int(pk.g),
        "h": int(pk.h),
        "u": pk.u,
        "t": pk.t,
        "insecure_reasons": list(pk.insecure_reasons),
    }
    d.update(change)
    return d


def _refused(d, words):
    with pytest.raises(SerializationError, match=words) as info:
        dgk_module._public_from_wire(d)
    assert str(info.value).startswith("received DGK key: ")
    if isinstance(d, dict) and isinstance(d.get("n"), int) and d["n"] > 0:  # the key is not quoted
        assert str(d["n"]) not in str(info.value)


def test_a_key_and_ciphertexts_travel(kp, fresh_registry):
    pk = kp.public_key
    got = decode(encode(pk))
    assert got is not pk and got == pk and got.insecure_reasons == pk.insecure_reasons
    assert decode(encode(pk)) is got  # the receiver keeps one key object per key
    cts = pk.encrypt([3, 0, 7], rng=InsecureReproducibleRandom(seed=8))
    back = decode(encode(cts))
    assert back.public_key is got and not back.randomised and kp.private_key.decrypt(back) == [3, 0, 7]
    with pytest.raises(SerializationError, match="re-randomised"):
        encode(back)  # received ciphertexts cannot be forwarded unchanged
    assert kp.private_key.decrypt(decode(encode(got.rerandomize(back)))) == [3, 0, 7]


def test_ciphertexts_under_an_unknown_key_or_out_of_range_are_refused(kp, fresh_registry):
    pk = kp.public_key
    width = (pk.n_bits + 7) // 8
    with pytest.raises(SerializationError, match="unknown key"):
        dgk_module._cts_from_wire((b"\x00" * 16, width, b"\x01" * width))
    got = decode(encode(pk))  # the receiver holds a reference to the key (the registry is weak)
    kid = got.key_id
    with pytest.raises(SerializationError, match=r"outside \(0, n\)"):
        dgk_module._cts_from_wire((kid, width, int(pk.n).to_bytes(width, "big")))
    with pytest.raises(SerializationError, match="width"):
        dgk_module._cts_from_wire((kid, width, b"\x01" * (width + 1)))
    with pytest.raises(SerializationError, match="malformed"):
        dgk_module._cts_from_wire([kid, width, b""])


def test_tampered_keys_are_refused(kp, fresh_registry):
    pk, sk = kp.public_key, kp.private_key
    n = int(pk.n)
    prime = int(gmpy2.next_prime(gmpy2.mpz(1) << 511 | 12345))
    _refused(_wire(pk, n=n + 1), "even")
    _refused(_wire(pk, n=n * 3), "prime factor below")
    _refused(_wire(pk, n=prime), "prime")
    _refused(_wire(pk, u=132), "u must be a prime")
    _refused(_wire(pk, u=65537), "u must be a prime")
    _refused(_wire(pk, t=8), "t=8")
    _refused(_wire(pk, t=240), "do not fit")
    _refused(_wire(pk, g=int(sk.p)), "g must be a unit")
    _refused(_wire(pk, h=n), "h must be a unit")
    _refused(_wire(pk, h=n - 1), "order above 2")
    _refused(_wire(pk, h=int(pk.g)), "equal")
    _refused(_wire(pk, insecure_reasons=[]), "does not say it is insecure")
    _refused(_wire(pk, insecure_reasons=["x" * 300]), "printable")
    _refused(_wire(pk, u=True), "integers")
    _refused({**_wire(pk), "extra": 1}, "expected a dict")
    _refused(_wire(pk, n=1 << 9000), "bits")


@pytest.mark.parametrize("field", ["n", "g", "h", "u", "t"])
@pytest.mark.parametrize("value", [-1, 0, 1, -(1 << 600), 1 << 9000, None, "7", 2.0, [3]])
def test_any_field_value_is_refused_with_a_serialization_error_only(kp, fresh_registry, field, value):
    with pytest.raises(SerializationError, match="received DGK key"):
        dgk_module._public_from_wire(_wire(kp.public_key, **{field: value}))


def test_a_full_size_key_without_reasons_arrives_secure(fresh_registry):
    big = generate_dgk_keypair(n_bits=2048, rng=InsecureReproducibleRandom(seed=2)).public_key
    assert big.insecure_reasons == (SEEDED,)
    imported = DgkPublicKey(n=int(big.n), g=int(big.g), h=int(big.h), u=big.u, t=big.t)
    assert not imported.insecure
    dgk_module._REGISTRY.clear()
    got = decode(encode(imported))
    assert got == imported and not got.insecure


class _KeyExchange(Protocol):
    name = "dgk-key-exchange"
    caveats = "test protocol"

    def __init__(self, pk, allow_insecure):
        self.pk, self.allow_insecure = pk, allow_insecure

    def parties(self):
        async def send(ch):
            await send_dgk_public_key(ch, "peer", self.pk, step="key")

        async def recv(ch):
            return await recv_dgk_public_key(ch, "holder", step="key", allow_insecure=self.allow_insecure)

        return [RoleParty("holder", send), RoleParty("peer", recv)]

    def learns(self):
        return {"holder": "-", "peer": "the public key"}


def test_recv_refuses_an_insecure_key_unless_allowed(kp):
    with pytest.raises(ProtocolError, match="insecure DGK key"):
        run_protocol(_KeyExchange(kp.public_key, allow_insecure=False))
    assert run_protocol(_KeyExchange(kp.public_key, allow_insecure=True)).outputs["peer"] == kp.public_key
    with pytest.raises(ProtocolError, match="PrivregTypeError: public_key must be a DgkPublicKey"):
        run_protocol(_KeyExchange("not a key", allow_insecure=True))
