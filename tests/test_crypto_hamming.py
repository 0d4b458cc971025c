"""Encrypted Hamming distances (privreg.crypto.hamming): in both ciphertext layouts the
decrypted distances equal the plaintext ones (random filters, edge cases), the masked
slots hide the distances the comparer was not asked to reveal, the payloads survive the
wire only re-randomised, and wrong keys, tampering and malformed inputs raise."""

from __future__ import annotations

import numpy as np
import pytest
from crypto_keys import cached_keypair
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import PrivregTypeError, PrivregValueError, SerializationError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import PlaintextOverflowError, WrongKeyError, counting, decrypt_ints, encrypt, pack
from privreg.crypto.channel import rerandomized
from privreg.crypto.hamming import (
    LAYOUTS,
    EncryptedDistances,
    EncryptedFilters,
    decrypt_distances,
    encrypt_filters,
    hamming_distances,
    plaintext_distances,
    slot_layout,
)
from privreg.crypto.vector import vector_from_ciphertexts
from privreg.mpc.wire import decode, encode

RNG = InsecureReproducibleRandom  # seeded sources: tests only


@pytest.fixture(scope="module")
def kp():
    return cached_keypair(512, 2)


def run(kp, a, rows, b, layout, sigma=40, seed=0):
    """Encrypt ``a``, compute distances of (a[rows[k]], b[k]) and decrypt them."""
    enc = encrypt_filters(kp.public_key, a, layout=layout, sigma=sigma, rng=RNG(seed=seed), workers=1)
    addr = enc.rows()[np.asarray(rows, dtype=np.int64)]
    d = hamming_distances(enc, addr, b, rng=RNG(seed=seed + 1), workers=1)
    return decrypt_distances(kp.private_key, d, workers=1), enc, d


@st.composite
def instances(draw):
    length = draw(st.integers(1, 40))
    m = draw(st.integers(1, 7))
    k = draw(st.integers(0, 9))
    bits = st.lists(st.booleans(), min_size=length, max_size=length)
    a = np.array(draw(st.lists(bits, min_size=m, max_size=m)), dtype=bool)
    b = np.array(draw(st.lists(bits, min_size=k, max_size=k)), dtype=bool).reshape(k, length)
    rows = draw(st.lists(st.integers(0, m - 1), min_size=k, max_size=k))
    return a, rows, b


@settings(max_examples=25)  # each example runs the encrypted protocol
@given(instances(), st.sampled_from(LAYOUTS), st.sampled_from([16, 40]))
def test_encrypted_distances_equal_plaintext(kp, inst, layout, sigma):
    a, rows, b = inst
    got, enc, d = run(kp, a, rows, b, layout, sigma=sigma)
    want = plaintext_distances(a[np.asarray(rows, dtype=np.int64)], b) if rows else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(got, want)
    assert len(d) == len(rows) and enc.count == a.shape[0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_edge_cases_zeros_ones_identical_complementary(kp, layout):
    rng = np.random.default_rng(4)
    L = 64
    x = rng.random(L) < 0.5
    zeros, ones = np.zeros(L, dtype=bool), np.ones(L, dtype=bool)
    a = np.stack([zeros, ones, x, x, zeros, ones])
    b = np.stack([ones, zeros, x, ~x, zeros, ones])
    got, _, _ = run(kp, a, [0, 1, 2, 3, 4, 5], b, layout)
    np.testing.assert_array_equal(got, [L, L, 0, L, 0, 0])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dense_and_sparse_comparer_filters_use_either_form(kp, layout):
    """A sparse ``b`` uses the product over its ones (and an inversion), a dense one the
    product over its zeros: both give the distance."""
    rng = np.random.default_rng(5)
    a = rng.random((5, 100)) < 0.5
    b = np.stack([rng.random(100) < p for p in (0.02, 0.2, 0.45, 0.55, 0.8, 0.98)])
    rows = [0, 1, 2, 3, 4, 0]
    got, _, _ = run(kp, a, rows, b, layout)
    np.testing.assert_array_equal(got, plaintext_distances(a[rows], b))


def test_slots_share_ciphertexts_and_mask_the_other_slots(kp):
    """Pairs of one comparer filter with filters of one unit come back in one ciphertext;
    every slot not asked for is masked (its plaintext is not the distance)."""
    pk, sk = kp.public_key, kp.private_key
    s_bits, per = slot_layout(pk, length=30, sigma=40)
    assert per >= 4
    rng = np.random.default_rng(6)
    a = rng.random((per, 30)) < 0.5
    b = rng.random(30) < 0.5
    enc = encrypt_filters(pk, a, layout="slots", rng=RNG(seed=1), workers=1)
    assert len(enc.units) == 1 and enc.ciphertext_count == 30
    d = hamming_distances(enc, enc.rows()[[0, 2]], np.stack([b, b]), rng=RNG(seed=2), workers=1)
    assert d.ciphertext_count == 1
    np.testing.assert_array_equal(decrypt_distances(sk, d), plaintext_distances(a[[0, 2]], np.stack([b, b])))
    raw = decrypt_ints(sk, d.vec)[0]
    slots = [(raw >> (t * s_bits)) & ((1 << s_bits) - 1) for t in range(per)]
    true = plaintext_distances(a, np.tile(b, (per, 1)))
    assert slots[0] == true[0] and slots[2] == true[2]
    for t in range(per):
        if t not in (0, 2):
            assert slots[t] != true[t] and slots[t] < (1 << (s_bits - 1)) + 31  # masked, no carry


def test_payloads_cross_the_wire_only_rerandomised(kp):
    pk, sk = kp.public_key, kp.private_key
    rng = np.random.default_rng(7)
    a, b = rng.random((4, 20)) < 0.5, rng.random((3, 20)) < 0.5
    for layout in LAYOUTS:
        enc = encrypt_filters(pk, a, layout=layout, rng=RNG(seed=3), workers=1)
        got = EncryptedFilters.from_payload(decode(encode(enc.to_payload())), public_key=pk)
        with pytest.raises(SerializationError):
            encode(got.to_payload())  # received ciphertexts cannot be forwarded as they are
        d = hamming_distances(got, got.rows()[[0, 3, 1]], b, rng=RNG(seed=4), workers=1)
        with pytest.raises(SerializationError, match="re-randomised"):
            encode(d.to_payload())  # results of homomorphic operations must be re-randomised
        wire = decode(encode(rerandomized(d.to_payload(), rng=RNG(seed=5))))
        back = EncryptedDistances.from_payload(wire, public_key=pk)
        np.testing.assert_array_equal(decrypt_distances(sk, back), plaintext_distances(a[[0, 3, 1]], b))


def test_units_keep_their_ids_across_select_and_merge(kp):
    pk, sk = kp.public_key, kp.private_key
    rng = np.random.default_rng(8)
    a1, a2 = rng.random((7, 16)) < 0.5, rng.random((3, 16)) < 0.5
    for layout in LAYOUTS:
        first = encrypt_filters(pk, a1, layout=layout, rng=RNG(seed=1), workers=1)
        more = encrypt_filters(pk, a2, layout=layout, first_unit=len(first.units), rng=RNG(seed=2), workers=1)
        full = first.merged(more)
        part = full.select([full.units[-1], full.units[0]])
        rows = np.intersect1d(part.rows(), full.rows())
        allf = np.concatenate([a1, a2])
        where = {int(r): i for i, r in enumerate(full.rows().tolist())}
        b = rng.random((rows.size, 16)) < 0.5
        d = hamming_distances(part, rows, b, rng=RNG(seed=3), workers=1)
        np.testing.assert_array_equal(
            decrypt_distances(sk, d), plaintext_distances(allf[[where[int(r)] for r in rows]], b)
        )
        with pytest.raises(PrivregValueError, match="held twice"):
            full.merged(more)
        with pytest.raises(PrivregValueError, match="not held"):
            hamming_distances(part, [int(full.rows().max()) + 1000], b[:1])


def test_parallel_workers_give_the_same_distances(kp):
    rng = np.random.default_rng(9)
    a, b = rng.random((12, 40)) < 0.5, rng.random((300, 40)) < 0.5
    rows = rng.integers(0, 12, 300)
    for layout in LAYOUTS:
        enc = encrypt_filters(kp.public_key, a, layout=layout, rng=RNG(seed=1), workers=1)
        d = hamming_distances(enc, enc.rows()[rows], b, rng=RNG(seed=2), workers=2)
        np.testing.assert_array_equal(decrypt_distances(kp.private_key, d, workers=2), plaintext_distances(a[rows], b))


def test_operation_counts(kp):
    pk, sk = kp.public_key, kp.private_key
    rng = np.random.default_rng(10)
    a, b = rng.random((9, 50)) < 0.5, rng.random((9, 50)) < 0.5
    _, per = slot_layout(pk, length=50, sigma=40)
    with counting() as c:
        enc = encrypt_filters(pk, a, layout="slots", rng=RNG(seed=1), workers=1)
        d = hamming_distances(enc, enc.rows(), b, rng=RNG(seed=2), workers=1)
        decrypt_distances(sk, d)
    assert c.encryptions == 50 * -(-9 // per)  # L ciphertexts per unit of `per` filters
    assert c.decryptions == d.ciphertext_count == 9 and c.values_decrypted == 9
    with counting() as c:
        enc = encrypt_filters(pk, a, layout="bits", rng=RNG(seed=1), workers=1)
        d = hamming_distances(enc, enc.rows(), b, workers=1)
        decrypt_distances(sk, d)
    assert c.encryptions == 9 * 50 and c.decryptions == 1 and d.ciphertext_count == 1  # 9 distances, one pack


def test_wrong_key_raises(kp):
    other = cached_keypair(512, 3)
    rng = np.random.default_rng(11)
    a, b = rng.random((3, 10)) < 0.5, rng.random((2, 10)) < 0.5
    for layout in LAYOUTS:
        enc = encrypt_filters(kp.public_key, a, layout=layout, rng=RNG(seed=1), workers=1)
        d = hamming_distances(enc, enc.rows()[:2], b, rng=RNG(seed=2), workers=1)
        with pytest.raises(WrongKeyError):
            decrypt_distances(other.private_key, d)
        with pytest.raises(WrongKeyError):
            EncryptedDistances.from_payload(d.rerandomize(rng=RNG(seed=3)).to_payload(), public_key=other.public_key)
        with pytest.raises(WrongKeyError):
            EncryptedFilters.from_payload(enc.to_payload(), public_key=other.public_key)
        foreign = encrypt_filters(other.public_key, a, layout=layout, first_unit=100, rng=RNG(seed=4), workers=1)
        with pytest.raises(WrongKeyError):
            enc.merged(foreign)


def test_values_that_are_not_distances_raise(kp):
    pk, sk = kp.public_key, kp.private_key
    vec = encrypt(pk, [3, 21], bound=21, rng=RNG(seed=1))  # 21 > L = 20: not a distance
    bad = EncryptedDistances(public_key=pk, layout="bits", length=20, count=2, packed=pack(vec))
    with pytest.raises(PlaintextOverflowError, match="outside"):
        decrypt_distances(sk, bad)
    with pytest.raises(SerializationError, match="bound"):
        EncryptedDistances.from_payload(bad.rerandomize(rng=RNG(seed=2)).to_payload(), public_key=pk)
    s_bits, per = slot_layout(pk, length=20, sigma=40)
    big = vector_from_ciphertexts(
        pk, [encrypt(pk, [90], bound=90, rng=RNG(seed=3))._c[0]], bound=(1 << (per * s_bits)) - 1
    )
    slot = EncryptedDistances(
        public_key=pk,
        layout="slots",
        length=20,
        count=1,
        vec=big,
        pair_ct=np.zeros(1, dtype=np.int64),
        pair_slot=np.zeros(1, dtype=np.int64),
        slot_bits=s_bits,
    )
    with pytest.raises(PlaintextOverflowError):
        decrypt_distances(sk, slot)


def test_inputs_are_validated(kp):
    pk = kp.public_key
    with pytest.raises(PrivregValueError, match="bits"):
        encrypt_filters(pk, np.array([[0, 2, 1]]))
    with pytest.raises(PrivregValueError, match="2-D"):
        encrypt_filters(pk, np.zeros(5, dtype=bool))
    with pytest.raises(PrivregTypeError):
        encrypt_filters(pk, np.zeros((2, 3)))  # floats
    with pytest.raises(PrivregValueError, match="layout"):
        encrypt_filters(pk, np.zeros((2, 3), dtype=bool), layout="packed")
    enc = encrypt_filters(pk, np.zeros((2, 8), dtype=bool), rng=RNG(seed=1), workers=1)
    with pytest.raises(PrivregValueError, match="length"):
        hamming_distances(enc, [0], np.zeros((1, 9), dtype=bool))
    with pytest.raises(PrivregValueError, match="one filter per pair"):
        hamming_distances(enc, [0, 1], np.zeros((1, 8), dtype=bool))
    with pytest.raises(PlaintextOverflowError, match="does not fit"):
        slot_layout(cached_keypair(256, 1).public_key, length=100, sigma=200)
    empty = hamming_distances(enc, np.zeros(0, dtype=np.int64), np.zeros((0, 8), dtype=bool))
    assert decrypt_distances(kp.private_key, empty).size == 0
