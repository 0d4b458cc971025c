"""Packing several values per ciphertext (privreg.crypto.packing): packed decryption
equals unpacked decryption; slots, headroom and overflow are enforced. (Overflow from
operations is prevented by tracking; arbitrary tampering is only caught when it leaves a
slot's range, which the tests below construct.)"""

from __future__ import annotations

import numpy as np
import pytest
from crypto_keys import cached_keypair
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import PrivregValueError, SerializationError
from privreg.crypto import FixedPoint, PackedCiphertexts, PlaintextOverflowError, decrypt, decrypt_packed, encrypt, pack
from privreg.crypto.packing import _from_wire, _to_wire
from privreg.mpc.wire import decode, encode


@settings(max_examples=30)  # up to 40 Paillier encryptions an example
@given(st.integers(1, 100), st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=40), st.integers(0, 6))
def test_packed_decrypt_equals_unpacked(bound_bits, xs, headroom):
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    bound = max(2**bound_bits, *(abs(x) for x in xs))
    enc = encrypt(pk, xs, bound=bound)
    packed = pack(enc, headroom_bits=headroom)
    assert packed.count == len(xs) and packed.ciphertext_count == -(-len(xs) // packed.per_ct)
    assert packed.per_ct * packed.slot_bits < pk.max_int.bit_length()
    assert decrypt_packed(sk, packed).tolist() == decrypt(sk, enc).tolist() == xs


def test_packing_saves_decryptions_and_keeps_fixed_point():
    kp = cached_keypair(1024, 1)
    pk, sk = kp.public_key, kp.private_key
    codec = FixedPoint(scale=2**16)
    x = np.linspace(-3, 3, 50)
    enc = encrypt(pk, x, bound=3, codec=codec)
    half = enc.mul_plain(np.full(50, 0.5), bound=0.5)  # power 2, public bound
    packed = pack(half)
    assert packed.power == 2
    np.testing.assert_array_equal(decrypt_packed(sk, packed), decrypt(sk, half))
    np.testing.assert_allclose(decrypt_packed(sk, packed), x / 2, atol=2**-16)
    assert packed.ciphertext_count <= 5  # 50 values in a handful of ciphertexts


def test_a_private_bound_needs_a_declared_public_bound():
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [1, 2, 3], bound=10)
    derived = enc * np.array([3, 1, 2])  # bound computed from the plaintext operand: private
    assert not derived.bound_public
    with pytest.raises(PrivregValueError, match="bound="):
        pack(derived)  # the slot layout would reveal the private bound
    packed = pack(derived, bound=30)
    assert packed.offset == 30
    assert decrypt_packed(sk, packed).tolist() == [3, 2, 6]


def test_headroom_allows_sums_and_refuses_carries():
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [7, -7, 0, 3], bound=7)
    p0 = pack(enc)
    with pytest.raises(PlaintextOverflowError, match="headroom"):
        p0 + p0
    p2 = pack(enc, headroom_bits=2)
    total = p2 + p2 + p2 + p2  # 4 = 2^2 sums fit
    assert decrypt_packed(sk, total).tolist() == [28, -28, 0, 12]
    with pytest.raises(PlaintextOverflowError):
        total + p2


def test_packed_values_out_of_their_slots_raise():
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [1, 2, 3], bound=3)
    packed = pack(enc)
    # tamper: add 2^slot_bits * 5 to the plaintext, which lands in a slot beyond the layout
    n, n2 = pk.n, pk.n2
    shift = 1 << (packed.slot_bits * packed.count)
    packed._c[0] = packed._c[0] * (1 + shift * n) % n2
    with pytest.raises(PlaintextOverflowError, match="beyond"):
        decrypt_packed(sk, packed)
    packed = pack(enc)
    packed._c[0] = packed._c[0] * (1 + 3 * n) % n2  # slot 0 (1 + B = 4) leaves its range [0, 2B]
    with pytest.raises(PlaintextOverflowError, match="range"):
        decrypt_packed(sk, packed)


def test_slots_that_cannot_fit_the_key_raise():
    kp = cached_keypair(512, 1)
    enc = encrypt(kp.public_key, [1], bound=2**200)
    with pytest.raises(PlaintextOverflowError, match="capacity"):
        pack(enc, headroom_bits=400)
    with pytest.raises(PlaintextOverflowError):
        pack(enc, bound=1)  # declared below the tracked bound


def test_packed_ciphertexts_on_the_wire():
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    packed = pack(encrypt(pk, list(range(30)), bound=30))
    with pytest.raises(SerializationError, match="re-randomised"):
        encode(packed)
    fresh = packed.rerandomize()
    back = decode(encode(fresh))
    assert isinstance(back, PackedCiphertexts) and not back.randomised
    assert decrypt_packed(sk, back).tolist() == list(range(30))
    t = _to_wire(fresh)
    with pytest.raises(SerializationError, match="layout"):
        _from_wire((*t[:2], t[2] * 100, *t[3:]))


@pytest.mark.parametrize(
    "fields",
    [
        {1: 0, 2: 0, 3: 2**40, 10: b""},  # no slots: 1 << slot_bits once allocated 2^37 bytes
        {1: 2**2000},  # a count beyond float: ceil(count / per_ct) raised OverflowError
        {2: 2**62},  # per_ct * slot_bits of huge operands
        {1: -1},
    ],
)
def test_packed_layout_sizes_are_checked_before_arithmetic(fields):
    kp = cached_keypair(512, 1)
    t = list(_to_wire(pack(encrypt(kp.public_key, [1, 2], bound=2)).rerandomize()))
    for i, value in fields.items():
        t[i] = value
    with pytest.raises(SerializationError, match="layout"):
        _from_wire(tuple(t))
    with pytest.raises(SerializationError, match="PackedCiphertexts"):
        decode(b"X\x22privreg.paillier.PackedCiphertexts" + encode(tuple(t)))
