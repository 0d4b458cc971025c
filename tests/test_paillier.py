"""The Paillier layer (privreg.crypto): keys, encoding, homomorphic operations, overflow,
wrong keys, re-randomisation, obfuscators, the wire type, multiprocessing and counts.

Test keys are 512-1024 bits with the explicit insecure opt-in (speed); one test
generates a default 2048-bit key. Results are checked against plaintext arithmetic and,
where possible, against python-paillier decrypting the same ciphertexts.
"""

from __future__ import annotations

import copy
import pickle

import gmpy2
import numpy as np
import phe
import pytest
from crypto_keys import cached_keypair
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import PrivregTypeError, PrivregValueError, SerializationError
from privreg.core.protocol import Party, Protocol
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import (
    EncryptedVector,
    FixedBaseTable,
    FixedPoint,
    ObfuscatorPool,
    ObfuscatorsExhaustedError,
    OpCounts,
    PaillierPrivateKey,
    PaillierPublicKey,
    PlaintextOverflowError,
    WrongKeyError,
    counting,
    decrypt,
    decrypt_ints,
    decrypt_packed,
    encrypt,
    generate_paillier_keypair,
    pack,
    parallel,
)
from privreg.crypto.channel import rerandomized, send_encrypted
from privreg.crypto.vector import _from_wire, _to_wire, vector_from_ciphertexts
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.mpc.wire import decode, encode

# every example encrypts and decrypts under Paillier: keep the budget small
SETTINGS = settings(max_examples=40)
CODEC = FixedPoint(scale=2**20)


@pytest.fixture(scope="module")
def kp():
    return cached_keypair(512, 1)


@pytest.fixture(scope="module")
def kp_other():
    return cached_keypair(512, 2)


def phe_decrypt(kp, vec):
    """python-paillier's decryption of our ciphertexts (an independent implementation)."""
    psk = kp.private_key.to_phe()
    return [psk.raw_decrypt(c) for c in vec.ciphertexts]


# ------------------------------------------------------------------ keys


@pytest.mark.parametrize("bits", [512, 1024, 2047])
def test_keys_below_2048_bits_are_refused_unless_insecure_is_asked(bits):
    with pytest.raises(PrivregValueError) as info:
        generate_paillier_keypair(n_bits=bits)
    msg = str(info.value)
    assert f"n_bits={bits}" in msg and "2048" in msg and "insecure_allow_small_keys=True" in msg


def test_small_key_with_opt_in_is_marked_insecure():
    kp = generate_paillier_keypair(n_bits=256, insecure_allow_small_keys=True)
    assert kp.insecure and kp.public_key.insecure and kp.public_key.n_bits == 256
    assert "256 bits" in kp.public_key.insecure_reasons[0]
    assert "INSECURE" in repr(kp.public_key)
    # a public key built from a small modulus is refused the same way
    with pytest.raises(PrivregValueError, match="insecure_allow_small_keys"):
        PaillierPublicKey(n=int(kp.public_key.n))
    assert PaillierPublicKey(n=int(kp.public_key.n), insecure_allow_small_keys=True).insecure


def test_key_size_arguments_are_validated():
    with pytest.raises(PrivregValueError, match="too small even for tests"):
        generate_paillier_keypair(n_bits=64, insecure_allow_small_keys=True)
    with pytest.raises(PrivregTypeError, match="insecure_allow_small_keys"):
        generate_paillier_keypair(n_bits=512, insecure_allow_small_keys="yes")
    with pytest.raises(PrivregTypeError):
        generate_paillier_keypair(n_bits=2048.0)


def test_default_key_is_2048_bits_secure_and_interoperates_with_phe():
    kp = generate_paillier_keypair()
    pk, sk = kp.public_key, kp.private_key
    assert pk.n_bits == 2048 and not pk.insecure and "INSECURE" not in repr(pk)
    assert sk.p % 4 == 3 and sk.q % 4 == 3 and gmpy2.gcd(sk.p - 1, sk.q - 1) == 2
    assert gmpy2.is_prime(sk.p, 30) and gmpy2.is_prime(sk.q, 30) and sk.p * sk.q == pk.n
    assert pk.djn_exponent_bits == 1024
    vals = [0, 1, -1, 2**40, -(2**40)]
    enc = encrypt(pk, vals, bound=2**40)
    assert decrypt(sk, enc).tolist() == vals
    assert [x if x < pk.n // 2 else x - pk.n for x in phe_decrypt(kp, enc)] == vals
    # and phe's encryption decrypts with ours
    c = pk.to_phe().encrypt(12345).ciphertext()
    assert decrypt(sk, vector_from_ciphertexts(pk, [gmpy2.mpz(c)], bound=2**20)).tolist() == [12345]


def test_seeded_keys_are_reproducible_and_flagged():
    a = generate_paillier_keypair(n_bits=256, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=5))
    b = generate_paillier_keypair(n_bits=256, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=5))
    assert a.public_key == b.public_key
    assert any("reproducible" in r for r in a.public_key.insecure_reasons)


def test_private_key_checks_and_is_not_pickled(kp):
    pk, sk = kp.public_key, kp.private_key
    with pytest.raises(PrivregValueError):
        PaillierPrivateKey(public_key=pk, p=int(sk.p), q=int(sk.p))
    with pytest.raises(TypeError):
        pickle.dumps(sk)
    with pytest.raises(SerializationError):
        encode(sk)
    assert "p=" not in repr(sk) and str(int(sk.p)) not in repr(sk)


# ------------------------------------------------------------------ homomorphic results equal plaintext

small_ints = st.integers(min_value=-(2**30), max_value=2**30)


@SETTINGS
@given(st.lists(small_ints, min_size=1, max_size=8), st.data())
def test_integer_operations_equal_plaintext(xs, data):
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    ys = data.draw(st.lists(small_ints, min_size=len(xs), max_size=len(xs)))
    ks = data.draw(st.lists(st.integers(-1000, 1000), min_size=len(xs), max_size=len(xs)))
    ex, ey = encrypt(pk, xs, bound=2**30), encrypt(sk, ys, bound=2**30)
    x, y, k = np.array(xs, dtype=object), np.array(ys, dtype=object), np.array(ks, dtype=object)
    assert decrypt(sk, ex + ey).tolist() == (x + y).tolist()
    assert decrypt(sk, ex - ey).tolist() == (x - y).tolist()
    assert decrypt(sk, -ex).tolist() == (-x).tolist()
    assert decrypt(sk, ex + np.array(ks)).tolist() == (x + k).tolist()
    assert decrypt(sk, ex * np.array(ks)).tolist() == (x * k).tolist()
    assert decrypt(sk, ex * 7 - 3).tolist() == (x * 7 - 3).tolist()
    assert decrypt(sk, ex.sum()).tolist() == [sum(xs)]
    assert decrypt(sk, ex.dot(np.array(ks))).tolist() == [int(np.dot(x, k))]
    m = np.array([ks, [1] * len(xs), [0] * len(xs)])
    assert decrypt(sk, ex.dot(m, bound=1000)).tolist() == [int(np.dot(x, k)), sum(xs), 0]
    assert decrypt(sk, ex[::-1]).tolist() == xs[::-1]
    assert decrypt(sk, EncryptedVector.concat([ex, ey])).tolist() == xs + ys


@SETTINGS
@given(st.lists(st.floats(-1000, 1000), min_size=1, max_size=6), st.data())
def test_fixed_point_operations_equal_plaintext_on_the_encoded_integers(xs, data):
    kp = cached_keypair(512, 1)
    pk, sk = kp.public_key, kp.private_key
    ws = data.draw(st.lists(st.floats(-10, 10), min_size=len(xs), max_size=len(xs)))
    S = CODEC.scale
    ex = encrypt(pk, xs, bound=1000, codec=CODEC)
    xi = CODEC.encode(xs)
    wi = CODEC.encode(ws)
    # exact on the scaled integers: one public scale, power tracked by the operations
    assert decrypt_ints(sk, ex) == xi
    prod = ex * np.array(ws)
    assert prod.power == 2 and decrypt_ints(sk, prod) == [a * b for a, b in zip(xi, wi)]
    dot = ex.dot(np.array(ws))
    assert decrypt_ints(sk, dot) == [sum(a * b for a, b in zip(xi, wi))]
    mixed = prod + ex  # aligned to power 2 by multiplying ex by the scale
    assert decrypt_ints(sk, mixed) == [a * b + a * S for a, b in zip(xi, wi)]
    assert decrypt_ints(sk, ex + np.array(ws)) == [a + b for a, b in zip(xi, wi)]
    # and the decoded reals are within the rounding error of plaintext arithmetic
    np.testing.assert_allclose(decrypt(sk, dot), [np.dot(xs, ws)], atol=2000 * 10 / S)
    np.testing.assert_allclose(decrypt(sk, ex), xs, atol=0.5 / S)


def test_sparse_and_bool_matrices(kp):
    import scipy.sparse as sp

    pk, sk = kp.public_key, kp.private_key
    u = np.arange(-5, 5)
    X = np.arange(40).reshape(4, 10) % 3 == 0
    enc = encrypt(pk, u, bound=5)
    assert decrypt(sk, enc.dot(X, bound=1)).tolist() == (X.astype(int) @ u).tolist()
    assert decrypt(sk, enc.dot(sp.csr_matrix(X.astype(np.int8)), bound=1)).tolist() == (X.astype(int) @ u).tolist()
    # a sparse 0/1 matrix takes the array path: the same ciphertexts and private bound as dense rows
    dense, sparse = enc.dot(X.astype(np.int64)), enc.dot(sp.csr_matrix(X.astype(np.int64)))
    assert sparse.ciphertexts == dense.ciphertexts and sparse.bound == dense.bound == 4 * 5
    assert not sparse.bound_public
    # one entry of 2: the general path, whose bound counts it
    X2 = sp.csr_matrix(X.astype(np.int64))
    X2.data[0] = 2
    assert enc.dot(X2).bound == enc.dot(X2.toarray()).bound == 5 * 5
    assert decrypt(sk, enc.dot(X2, bound=2)).tolist() == (X2.toarray() @ u).tolist()
    with pytest.raises(PlaintextOverflowError, match="declared bound"):
        enc.dot(X2, bound=1)
    assert decrypt(sk, enc[np.array([True, False] * 5)]).tolist() == u[::2].tolist()


def test_operand_validation(kp):
    pk = kp.public_key
    enc = encrypt(pk, [1, 2, 3], bound=10)
    with pytest.raises(PrivregValueError, match="3"):
        enc + np.array([1, 2])
    with pytest.raises(PrivregTypeError, match="integers"):
        enc * 0.5  # an integer vector has no fixed-point scale
    with pytest.raises(PrivregTypeError, match="Paillier"):
        enc.mul_plain(enc)
    with pytest.raises(PrivregTypeError):
        encrypt(pk, [0.5], bound=1)
    with pytest.raises(PrivregValueError, match="finite"):
        encrypt(pk, [np.nan], bound=1, codec=CODEC)


# ------------------------------------------------------------------ overflow raises, never wraps


def test_encrypt_checks_the_declared_bound(kp):
    pk = kp.public_key
    with pytest.raises(PlaintextOverflowError, match="bound"):
        encrypt(pk, [5, 11], bound=10)
    with pytest.raises(PlaintextOverflowError):
        encrypt(pk, [2.5], bound=2.0, codec=CODEC)
    with pytest.raises(PlaintextOverflowError, match="range"):
        encrypt(pk, [1], bound=int(pk.max_int) + 1)
    # integer bounds are exact at any size (a float would overflow past 2^1024)
    wide = cached_keypair(2400, 3)
    big = 2**1100 + 1
    enc = encrypt(wide.public_key, [big, -big], bound=big)
    assert decrypt(wide.private_key, enc).tolist() == [big, -big] and enc.bound == big
    with pytest.raises(PlaintextOverflowError, match="bound"):
        encrypt(wide.public_key, [big + 1], bound=big)
    with pytest.raises(PrivregValueError, match=">= 0"):
        encrypt(pk, [0], bound=-1)


def test_operations_raise_before_the_bound_could_wrap(kp):
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [2**200, -(2**200)], bound=2**200)
    big = enc
    for _ in range(100):
        try:
            big = big * (2**20)
        except PlaintextOverflowError as exc:
            assert "range" in str(exc)  # noqa: PT017 -- raises at an unknown iteration; loop ends there
            break
    else:
        pytest.fail("multiplying by 2^20 a hundred times never raised at 512 bits")
    # every result computed before the refusal is exact
    k = big.bound // 2**200
    assert decrypt(sk, big).tolist() == [2**200 * k, -(2**200) * k]
    with pytest.raises(PlaintextOverflowError):
        enc.dot(np.full((1, 2), 2**320))  # refused by the bound even though the values cancel
    with pytest.raises(PlaintextOverflowError):
        encrypt(pk, [0] * 4, bound=pk.max_int // 2).sum()
    with pytest.raises(PlaintextOverflowError, match="declared"):
        enc.add_plain([5, 5], bound=4)


def test_decryption_refuses_values_outside_the_range_or_the_bound(kp):
    pk, sk = kp.public_key, kp.private_key
    n, n2 = pk.n, pk.n2
    middle = (1 + (n // 2) * n) % n2  # encrypts n/2: the overflow zone, neither sign
    with pytest.raises(PlaintextOverflowError, match="overflow zone"):
        decrypt(sk, vector_from_ciphertexts(pk, [middle], bound=int(pk.max_int)))
    ten = encrypt(pk, [10], bound=10)
    lying = vector_from_ciphertexts(pk, list(ten._c), bound=9)  # a ciphertext above its declared bound
    with pytest.raises(PlaintextOverflowError, match="bound"):
        decrypt(sk, lying)


# ------------------------------------------------------------------ wrong keys


def test_ciphertexts_under_another_key_raise(kp, kp_other):
    a = encrypt(kp.public_key, [1, 2], bound=5)
    b = encrypt(kp_other.public_key, [1, 2], bound=5)
    with pytest.raises(WrongKeyError, match="key"):
        a + b
    with pytest.raises(WrongKeyError):
        decrypt(kp_other.private_key, a)
    with pytest.raises(WrongKeyError):
        decrypt_packed(kp_other.private_key, pack(a))
    with pytest.raises(WrongKeyError):
        encrypt(kp.public_key, [1], bound=1, obfuscation=ObfuscatorPool(kp_other.public_key, size=1))
    with pytest.raises(WrongKeyError):
        EncryptedVector.concat([a, b])


def test_ciphertexts_under_an_unknown_key_are_refused_on_the_wire():
    kp = generate_paillier_keypair(n_bits=256, insecure_allow_small_keys=True)
    data = encode(encrypt(kp.public_key, [1], bound=1))
    del kp
    import gc

    gc.collect()
    with pytest.raises(SerializationError, match="unknown key"):
        decode(data)


def test_a_small_key_not_announced_as_insecure_is_refused_on_the_wire():
    from privreg.crypto.keys import _public_to_wire

    kp = generate_paillier_keypair(n_bits=256, insecure_allow_small_keys=True)
    wire = _public_to_wire(kp.public_key)
    n = wire["n"]
    del kp
    import gc

    gc.collect()
    from privreg.crypto.keys import _public_from_wire

    with pytest.raises(SerializationError, match="2048"):
        _public_from_wire({**wire, "insecure_reasons": []})
    assert _public_from_wire(wire).insecure and _public_from_wire(wire).n == n


# ------------------------------------------------------------------ re-randomisation


def test_rerandomised_ciphertexts_decrypt_the_same_and_differ(kp):
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [0, 5, -7, 0], bound=10)
    for obf in ("djn", "standard", ObfuscatorPool(pk, size=4)):
        fresh = enc.rerandomize(obfuscation=obf)
        assert fresh.randomised
        assert decrypt(sk, fresh).tolist() == [0, 5, -7, 0]
        assert all(a != b for a, b in zip(fresh.ciphertexts, enc.ciphertexts))
    # equal plaintexts never give equal ciphertexts
    assert len(set(encrypt(pk, [3] * 20, bound=3).ciphertexts)) == 20


def test_results_of_operations_must_be_rerandomised_before_sending(kp):
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [1, 2], bound=5)
    encode(enc)  # fresh from encryption: fine
    derived = enc * 3
    assert not derived.randomised
    with pytest.raises(SerializationError, match="re-randomised"):
        encode(derived)
    sent = decode(encode(rerandomized([derived, {"k": enc}])))
    assert decrypt(sk, sent[0]).tolist() == [3, 6] and decrypt(sk, sent[1]["k"]).tolist() == [1, 2]
    # a received vector cannot be forwarded unchanged
    with pytest.raises(SerializationError, match="re-randomised"):
        encode(sent[0])
    with pytest.raises(SerializationError):
        encode(pack(enc))


def test_every_obfuscation_decrypts_correctly_and_key_holder_matches(kp):
    pk, sk = kp.public_key, kp.private_key
    vals = list(range(-10, 10))
    for obf in ("djn", "standard"):
        for who in (pk, sk):
            enc = encrypt(who, vals, bound=10, obfuscation=obf)
            assert decrypt(sk, enc).tolist() == vals
            assert [x if x < pk.n // 2 else x - pk.n for x in phe_decrypt(kp, enc)] == vals
    with pytest.raises(PrivregValueError, match="obfuscation"):
        encrypt(pk, [1], bound=1, obfuscation="fast")


def test_obfuscator_pool_hands_out_each_obfuscator_once(kp):
    pk, sk = kp.public_key, kp.private_key
    pool = ObfuscatorPool(pk, size=5, rng=InsecureReproducibleRandom(seed=1))
    snapshot = list(pool._items)
    a = encrypt(pk, [1, 1], bound=1, obfuscation=pool)
    b = encrypt(pk, [1, 1, 1], bound=1, obfuscation=pool)
    assert len(pool) == 0 and pool.used == 5
    assert len(set(a.ciphertexts + b.ciphertexts)) == 5
    n, n2 = pk.n, pk.n2
    assert [int((1 + n) * r % n2) for r in snapshot] == list(a.ciphertexts + b.ciphertexts)
    with pytest.raises(ObfuscatorsExhaustedError, match="fill"):
        encrypt(pk, [1], bound=1, obfuscation=pool)
    pool.fill(1)
    assert decrypt(sk, encrypt(pk, [4], bound=4, obfuscation=pool)).tolist() == [4]
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="one-time"):
            attempt(pool)


@pytest.mark.parametrize("window", [8, 10, 5])
def test_fixed_base_table_matches_powmod(window):
    rng = InsecureReproducibleRandom(seed=3)
    mod = gmpy2.next_prime(gmpy2.mpz(rng.randbits(300))) * gmpy2.next_prime(gmpy2.mpz(rng.randbits(300)))
    base = rng.randbits(500)
    table = FixedBaseTable(base, mod, 130, window)
    for a in [0, 1, 255, 256, 1023, 1024, 2**130 - 1, 2**64 + 17] + [rng.randbits(130) for _ in range(20)]:
        assert table.pow(a) == gmpy2.powmod(base, a, mod)


@pytest.mark.parametrize("window", [8, 10, 5])
def test_fixed_base_pow_many_is_pow_over_batches(window):
    """Row by row over batches (more exponents than one batch, zero digits, the extremes):
    the same residues as one exponentiation at a time."""
    rng = InsecureReproducibleRandom(seed=4)
    mod = gmpy2.next_prime(gmpy2.mpz(rng.randbits(300))) * gmpy2.next_prime(gmpy2.mpz(rng.randbits(300)))
    base = rng.randbits(500)
    table = FixedBaseTable(base, mod, 130, window)
    exps = [0, 1, 2**130 - 1, 2**64] + [rng.randbits(rng.randbelow(131)) for _ in range(600)]
    assert table.pow_many(exps) == [gmpy2.powmod(base, a, mod) for a in exps]
    assert table.pow_many([]) == []
    top = window * table.ndigits  # the table's reach: 2^130 for 8 and 10 bits, 2^130 for 5
    for bad in (-1, 2**top):
        with pytest.raises(PrivregValueError, match="outside"):
            table.pow_many([3, bad])


# ------------------------------------------------------------------ wire and transcripts


class _Send(Party):
    def __init__(self, name, to, payloads):
        self.name, self.to, self.payloads = name, to, payloads

    async def run(self, ch):
        for step, p in self.payloads:
            await send_encrypted(ch, self.to, p, step=step)


class _Recv(Party):
    def __init__(self, name, frm, steps):
        self.name, self.frm, self.steps = name, frm, steps

    async def run(self, ch):
        return [await ch.recv(self.frm, step=s) for s in self.steps]


class _Pair(Protocol):
    name = "pair"
    caveats = "test protocol"

    def __init__(self, payloads):
        self._p = payloads

    def parties(self):
        return [_Send("A", "B", self._p), _Recv("B", "A", [s for s, _ in self._p])]

    def learns(self):
        return {"A": "-", "B": "what A sends"}


def test_vectors_and_keys_travel_and_are_counted_in_transcripts(kp):
    pk, sk = kp.public_key, kp.private_key
    enc = encrypt(pk, [1.5, -2.0, 3.25], bound=4, codec=CODEC)
    derived = enc.dot(np.eye(3)) * 2  # private bound: not sent
    payloads = [("key", pk), ("vec", enc), ("derived", derived), ("both", [enc, pack(enc)]), ("plain", [1, 2])]
    res = run_protocol(_Pair(payloads), transport=InMemoryTransport(keep_payloads=False))
    key, got, got_derived, both, _ = res.outputs["B"]
    assert key is pk  # one key object per modulus in a process
    assert got.bound == enc.bound and got.bound_public and got.power == 1 and got.scale == CODEC.scale
    assert decrypt(sk, got).tolist() == [1.5, -2.0, 3.25]
    assert not got_derived.bound_public and got_derived.bound == pk.max_int  # the private bound stayed home
    assert decrypt(sk, got_derived).tolist() == [3.0, -4.0, 6.5]
    assert decrypt_packed(sk, both[1]).tolist() == [1.5, -2.0, 3.25]
    steps = res.transcript.per_step()
    assert [steps[s].ciphertexts for s in ("key", "vec", "derived", "both", "plain")] == [0, 3, 3, 4, 0]
    assert steps["vec"].bytes > 3 * 2 * pk.n_bits // 8  # three 1024-bit ciphertexts
    per = res.transcript.per_party()
    assert per["B"]["received"].ciphertexts == 10 and per["A"]["sent"].ciphertexts == 10
    assert "ciphertexts" in res.transcript.step_table()


def test_malformed_vector_bytes_are_refused(kp):
    pk = kp.public_key
    enc = encrypt(pk, [1], bound=1)
    t = _to_wire(enc)

    zero = (t[0], t[1], t[2], t[3], t[4], b"\x00" * t[4])
    with pytest.raises(SerializationError, match="outside"):
        _from_wire(zero)
    with pytest.raises(SerializationError):
        _from_wire((t[0], t[1], t[2], t[3], t[4], t[5][:-1]))
    with pytest.raises(SerializationError):
        _from_wire(("x",))


# ------------------------------------------------------------------ multiprocessing and counting


def test_parallel_batches_equal_the_serial_path(monkeypatch, kp):
    pk, sk = kp.public_key, kp.private_key
    vals = list(range(-40, 40))
    try:
        serial = encrypt(pk, vals, bound=40, rng=InsecureReproducibleRandom(seed=9), workers=1)
        par = encrypt(pk, vals, bound=40, rng=InsecureReproducibleRandom(seed=9), workers=2)
        assert serial.ciphertexts == par.ciphertexts  # randomness comes from the parent
        kh = encrypt(sk, vals, bound=40, rng=InsecureReproducibleRandom(seed=9), workers=2)
        kh1 = encrypt(sk, vals, bound=40, rng=InsecureReproducibleRandom(seed=9), workers=1)
        assert kh.ciphertexts == kh1.ciphertexts
        assert decrypt(sk, par, workers=2).tolist() == vals
        X = np.arange(80 * 3).reshape(3, 80) % 3 - 1
        assert decrypt(sk, par.dot(X, workers=2)).tolist() == (X @ np.array(vals)).tolist()
        assert decrypt(sk, par.mul_plain(np.arange(80), workers=2)).tolist() == (np.arange(80) * vals).tolist()
        assert decrypt_packed(sk, pack(par, workers=2), workers=2).tolist() == vals
        # workers=None: small batches stay in-process, large ones go parallel
        monkeypatch.setattr(parallel, "PARALLEL_MIN_BATCH", 10)
        assert parallel.resolve_workers(9, None) == 1
        assert parallel.resolve_workers(10_000, None) == parallel.usable_cores()
        assert decrypt(sk, kh.rerandomize(workers=None)).tolist() == vals
    finally:
        parallel.shutdown()


def test_counts_are_kept_per_context(kp):
    pk, sk = kp.public_key, kp.private_key
    with counting() as c:
        enc = encrypt(pk, [1, 2, 3], bound=3)
        decrypt(sk, enc.rerandomize())
        decrypt_packed(sk, pack(enc))
    assert c == OpCounts(encryptions=3, rerandomizations=3, decryptions=4, values_decrypted=6, packed=3)
    encrypt(pk, [1], bound=1)  # outside the context: not counted
    assert c.encryptions == 3


def test_fixed_point_codec():
    codec = FixedPoint(scale=2**8)
    assert codec.encode([1.0, -0.5, 0.00390625, 0.001]) == [256, -128, 1, 0]
    assert codec.encode([1.5], power=2) == [98304]
    assert codec.decode([256, -128], power=1).tolist() == [1.0, -0.5]
    with pytest.raises(PrivregValueError):
        FixedPoint(scale=1)
    with pytest.raises(PrivregTypeError):
        FixedPoint(scale=2.0)


def test_phe_keys_convert_both_ways(kp):
    ppk = kp.public_key.to_phe()
    assert isinstance(ppk, phe.PaillierPublicKey) and ppk.n == kp.public_key.n
    back = PaillierPublicKey.from_phe(ppk, insecure_allow_small_keys=True)
    assert back == kp.public_key
    enc = encrypt(back, [42], bound=42)  # its own DJN base, same modulus: interoperable
    assert decrypt(kp.private_key, enc).tolist() == [42]
