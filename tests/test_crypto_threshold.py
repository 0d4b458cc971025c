"""Threshold decisions on packed Paillier ciphertexts (privreg.crypto.threshold): the key
holder's decisions are right on random and boundary values for every digit layout, for
wanted subsets of many slots, in parallel too; what each party receives is only
ciphertexts (holder) or masked slots and blinded terms (key holder); bad arguments and
malformed messages raise the right privreg errors, naming the argument or the sender."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Protocol
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import EncryptedVector, PlaintextOverflowError, encrypt
from privreg.crypto.channel import RoleParty, recv_public_key, send_encrypted, send_public_key
from privreg.crypto.dgk import DgkCiphertexts, generate_dgk_keypair, recv_dgk_public_key, send_dgk_public_key
from privreg.crypto.threshold import DIGIT_BITS, slot_layout, threshold_holder, threshold_keyholder
from privreg.crypto.vector import vector_from_ciphertexts
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport

SIGMA = 40


@pytest.fixture(scope="module")
def kp():
    return cached_keypair(512, 3)


@pytest.fixture(scope="module")
def dk():
    return generate_dgk_keypair(n_bits=512, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=21))


def pack(kp, rows, bits, sigma=SIGMA):
    """Raw ciphertexts of ``rows`` (one list of slot values per ciphertext)."""
    slot_bits, per = slot_layout(kp.public_key, bits=bits, sigma=sigma)
    assert all(len(r) <= per for r in rows)
    packed = [sum(x << (i * slot_bits) for i, x in enumerate(row)) for row in rows]
    vec = encrypt(kp.public_key, packed, bound=(1 << (per * slot_bits)) - 1, rng=InsecureReproducibleRandom(seed=99))
    return [int(c) for c in vec.ciphertexts]


class Threshold(Protocol):
    """The two roles after the key holder sent its Paillier and DGK public keys. ``holder``
    may be replaced by another coroutine (a misbehaving holder)."""

    name = "threshold-test"
    caveats = "test wrapper of privreg.crypto.threshold"

    def __init__(self, kp, dk, cts, wanted, bits, c, *, sigma=SIGMA, seed=0, workers=1, holder=None, keyholder=None):
        self.kp, self.dk, self.cts, self.wanted, self.bits, self.c = kp, dk, cts, wanted, bits, c
        self.sigma, self.seed, self.workers = sigma, seed, workers
        self.holder_fn, self.keyholder_fn = holder, keyholder

    def learns(self):
        return {"keyholder": "the decisions", "holder": "nothing"}

    def parties(self):
        return [RoleParty("holder", self.holder_fn or self._holder), RoleParty("keyholder", self._keyholder)]

    async def _keyholder(self, ch):
        await send_public_key(ch, "holder", self.kp.public_key, step="thr.pk")
        await send_dgk_public_key(ch, "holder", self.dk.public_key, step="thr.dgk-pk")
        if self.keyholder_fn is not None:
            return await self.keyholder_fn(ch)
        return await threshold_keyholder(
            ch,
            holder="holder",
            private_key=self.kp.private_key,
            dgk_private_key=self.dk.private_key,
            count=len(self.cts),
            wanted=self.wanted,
            bits=self.bits,
            threshold=self.c,
            sigma=self.sigma,
            step="thr",
            rng=InsecureReproducibleRandom(seed=self.seed + 1),
            workers=self.workers,
        )

    async def _holder(self, ch):
        pk = await recv_public_key(ch, "keyholder", step="thr.pk", allow_insecure=True)
        dgk = await recv_dgk_public_key(ch, "keyholder", step="thr.dgk-pk", allow_insecure=True)
        return await threshold_holder(
            ch,
            keyholder="keyholder",
            ciphertexts=self.cts,
            public_key=pk,
            dgk_key=dgk,
            wanted=self.wanted,
            bits=self.bits,
            threshold=self.c,
            sigma=self.sigma,
            step="thr",
            rng=InsecureReproducibleRandom(seed=self.seed),
            workers=self.workers,
        )


def decide(kp, dk, rows, wanted, bits, c, **kw):
    res = run_protocol(Threshold(kp, dk, pack(kp, rows, bits), wanted, bits, c, **kw), transport=InMemoryTransport())
    assert res.outputs["holder"] is None
    return res.outputs["keyholder"], res.transcript


def expected(rows, wanted, c):
    return np.array([rows[i][j] >= c for i, j in wanted], dtype=bool)


def boundary_rows(bits, c, per, rng):
    """Slot values around ``c`` and at the ends of the range, then random ones."""
    top = (1 << bits) - 1
    special = sorted({x for x in (0, 1, top - 1, top, c - 1, c, c + 1) if 0 <= x <= top})
    values = special + [rng.randrange(top + 1) for _ in range(2 * per)]
    return [values[i : i + per] for i in range(0, len(values), per)]


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 7, 14])
def test_decisions_on_boundaries_and_random_values(kp, dk, bits):
    import random

    rng = random.Random(bits)
    _, per = slot_layout(kp.public_key, bits=bits)
    top = 1 << bits
    for c in sorted({0, 1, top // 2, top - 1, top, rng.randrange(top + 1)}):
        rows = boundary_rows(bits, c, per, rng)
        wanted = [(i, j) for i, row in enumerate(rows) for j in range(len(row))]
        got, _ = decide(kp, dk, rows, wanted, bits, c, seed=bits * 100 + c)
        assert got.dtype == bool and np.array_equal(got, expected(rows, wanted, c)), (bits, c)


def test_many_comparisons_with_a_one_bit_top_digit(kp, dk):
    """120 comparisons per run at bits=7 (digits of 3, 3 and 1 bits), two seeds: the
    holder's sign s is drawn per comparison, so both signs occur (all equal with
    probability 2^-119 per run) and with them both forms of the terms."""
    import random

    rng = random.Random(5)
    bits, c = 7, 77
    _, per = slot_layout(kp.public_key, bits=bits)
    rows = [[rng.randrange(1 << bits) for _ in range(per)] for _ in range(12)]
    wanted = [(i, j) for i in range(12) for j in range(per)]
    for seed in (1, 2):
        got, _ = decide(kp, dk, rows, wanted, bits, c, seed=seed)
        assert np.array_equal(got, expected(rows, wanted, c))


def test_a_subset_of_many_slots_and_unwanted_ciphertexts(kp, dk):
    import random

    rng = random.Random(7)
    bits, c = 14, 9000
    _, per = slot_layout(kp.public_key, bits=bits)
    rows = [[rng.randrange(1 << bits) for _ in range(per)] for _ in range(6)]
    wanted = sorted(rng.sample([(i, j) for i in (0, 2, 5) for j in range(per)], 10))
    got, t = decide(kp, dk, rows, wanted, bits, c, seed=3)
    assert np.array_equal(got, expected(rows, wanted, c))
    masked = [m for m in t.received_by("keyholder") if m.step == "thr.masked"]
    assert len(masked) == 1 and masked[0].ciphertexts == len({i for i, _ in wanted})  # only those with wanted slots


def test_empty_wanted_sends_nothing(kp, dk):
    rows = [[1, 2, 3]]
    got, t = decide(kp, dk, rows, [], 14, 5)
    assert got.shape == (0,) and got.dtype == bool
    assert [m.step for m in t.messages] == ["thr.pk", "thr.dgk-pk"]


def test_parallel_run_gives_the_same_decisions_and_messages(kp, dk):
    import random

    rng = random.Random(8)
    bits, c = 14, 1 << 13
    _, per = slot_layout(kp.public_key, bits=bits)
    rows = [[rng.randrange(1 << bits) for _ in range(per)] for _ in range(40)]
    wanted = [(i, j) for i in range(40) for j in range(per)]  # enough terms to use the worker pool
    one, t1 = decide(kp, dk, rows, wanted, bits, c, seed=4, workers=1)
    two, t2 = decide(kp, dk, rows, wanted, bits, c, seed=4, workers=2)
    assert np.array_equal(one, expected(rows, wanted, c)) and np.array_equal(one, two)
    terms1 = next(m.payload for m in t1.received_by("keyholder") if m.step == "thr.terms")["terms"]
    terms2 = next(m.payload for m in t2.received_by("keyholder") if m.step == "thr.terms")["terms"]
    assert terms1.ciphertexts == terms2.ciphertexts  # randomness comes from the parent only


def test_what_each_party_receives(kp, dk):
    """The key holder receives masked slots and blinded DGK terms, the holder only
    ciphertexts. Every slot the key holder decrypts (wanted or not) differs from the
    holder's value: with masks uniform in [0, 2^(bits + sigma)) a slot equals its value
    with probability 2^-(bits + sigma) = 2^-54 each, so a false alarm over these 45 slots
    has probability below 2^-48 (and the seeds are fixed)."""
    import random

    rng = random.Random(9)
    bits, c = 14, 4321
    slot_bits, per = slot_layout(kp.public_key, bits=bits)
    rows = [[rng.randrange(1 << bits) for _ in range(per)] for _ in range(5)]
    wanted = [(i, j) for i in range(5) for j in range(per) if (i + j) % 2 == 0]
    got, t = decide(kp, dk, rows, wanted, bits, c, seed=6)
    assert np.array_equal(got, expected(rows, wanted, c))

    to_holder = t.received_by("holder")
    assert [m.step for m in to_holder] == ["thr.pk", "thr.dgk-pk", "thr.bits"]
    (bits_msg,) = [m.payload for m in to_holder if m.step == "thr.bits"]
    assert isinstance(bits_msg, DgkCiphertexts)
    terms_per = -(-bits // DIGIT_BITS)
    assert len(bits_msg) == len(wanted) * (7 * 4 + 3)  # the thermometers: digits of 3, 3, 3, 3 and 2 bits

    to_keyholder = t.received_by("keyholder")
    assert [m.step for m in to_keyholder] == ["thr.masked", "thr.terms"]
    masked, terms = to_keyholder[0].payload, to_keyholder[1].payload
    assert isinstance(masked, EncryptedVector) and len(masked) == 5
    plain = kp.private_key.raw_decrypt(masked._c, workers=1)
    for i, m in enumerate(plain):
        for j in range(per):
            z = int(m) >> (j * slot_bits) & ((1 << slot_bits) - 1)
            assert z != rows[i][j] and 0 <= z - rows[i][j] < 1 << (bits + SIGMA)
    assert set(terms) == {"terms", "shares"}
    assert isinstance(terms["terms"], DgkCiphertexts) and len(terms["terms"]) == len(wanted) * terms_per
    shares = terms["shares"]
    assert isinstance(shares, np.ndarray) and shares.shape == (len(wanted),) and set(shares.tolist()) <= {0, 1}
    # the DGK terms: per comparison at most one zero, the others blinded to [1, u)
    values = dk.private_key.decrypt(terms["terms"], workers=1)
    u = dk.public_key.u
    zeros = 0
    for k in range(len(wanted)):
        group = values[k * terms_per : (k + 1) * terms_per]
        assert group.count(0) <= 1 and all(0 <= x < u for x in group)
        zeros += group.count(0)
    assert 0 < zeros < len(wanted)  # delta is a random bit, neither always 0 nor always 1


# ------------------------------------------------------------------ layout and arguments


def test_slot_layout():
    big = cached_keypair(2048, 0).public_key
    assert slot_layout(big, bits=14) == (55, 37)
    assert slot_layout(big, bits=14, sigma=80) == (95, 21)
    small = cached_keypair(512, 3).public_key
    slot_bits, per = slot_layout(small, bits=14)
    assert slot_bits == 55 and per * slot_bits <= (small.max_int + 1).bit_length() - 1 < (per + 1) * slot_bits
    with pytest.raises(PlaintextOverflowError, match="bits=500"):
        slot_layout(small, bits=500)
    with pytest.raises(PrivregTypeError, match="public_key"):
        slot_layout(small.n, bits=14)
    with pytest.raises(PrivregValueError, match="sigma"):
        slot_layout(small, bits=14, sigma=0)


def _holder_call(kp, dk, **change):
    args = dict(
        keyholder="keyholder",
        ciphertexts=pack(kp, [[1, 2]], 14),
        public_key=kp.public_key,
        dgk_key=dk.public_key,
        wanted=[(0, 0), (0, 1)],
        bits=14,
        threshold=3,
        step="thr",
    )
    args.update(change)
    return asyncio.run(threshold_holder(None, **args))


def _keyholder_call(kp, dk, **change):
    args = dict(
        holder="holder",
        private_key=kp.private_key,
        dgk_private_key=dk.private_key,
        count=1,
        wanted=[(0, 0)],
        bits=14,
        threshold=3,
        step="thr",
    )
    args.update(change)
    return asyncio.run(threshold_keyholder(None, **args))


@pytest.mark.parametrize(
    "change, error, words",
    [
        ({"threshold": (1 << 14) + 1}, PrivregValueError, r"threshold must lie in \[0, 2\^bits\]"),
        ({"threshold": -1}, PrivregValueError, "threshold"),
        ({"threshold": 2.5}, PrivregTypeError, "threshold"),
        ({"bits": 0}, PrivregValueError, "bits"),
        ({"sigma": 0}, PrivregValueError, "sigma"),
        ({"wanted": [(0, 1), (0, 0)]}, PrivregValueError, "wanted must be sorted"),
        ({"wanted": [(0, 0), (0, 0)]}, PrivregValueError, "distinct"),
        ({"wanted": [(1, 0)]}, PrivregValueError, r"wanted\[0\] = \(1, 0\) is out of range"),
        ({"wanted": [(0, 99)]}, PrivregValueError, "out of range"),
        ({"wanted": [(0,)]}, PrivregTypeError, r"wanted\[0\]"),
        ({"wanted": 5}, PrivregTypeError, "wanted"),
        ({"step": "bad step!"}, PrivregValueError, "step"),
        ({"step": "x" * 125}, PrivregValueError, "step"),
        ({"keyholder": ""}, PrivregValueError, "keyholder"),
        ({"public_key": "pk"}, PrivregTypeError, "public_key"),
        ({"dgk_key": "dk"}, PrivregTypeError, "dgk_key"),
        ({"ciphertexts": [0]}, PrivregValueError, r"ciphertexts\[0\]"),
        ({"ciphertexts": ["c"]}, PrivregTypeError, r"ciphertexts\[0\]"),
        ({"workers": 0}, PrivregValueError, "workers"),
    ],
)
def test_holder_arguments_are_checked(kp, dk, change, error, words):
    with pytest.raises(error, match=words):
        _holder_call(kp, dk, **change)


@pytest.mark.parametrize(
    "change, error, words",
    [
        ({"threshold": 1 << 15}, PrivregValueError, "threshold"),
        ({"count": -1}, PrivregValueError, "count"),
        ({"holder": 3}, PrivregTypeError, "holder"),
        ({"private_key": "sk"}, PrivregTypeError, "private_key"),
        ({"dgk_private_key": None}, PrivregTypeError, "dgk_private_key"),
        ({"wanted": [(0, 0), (0, 0)]}, PrivregValueError, "wanted"),
        ({"step": ""}, PrivregValueError, "step"),
    ],
)
def test_keyholder_arguments_are_checked(kp, dk, change, error, words):
    with pytest.raises(error, match=words):
        _keyholder_call(kp, dk, **change)


def test_a_dgk_key_too_small_for_the_comparison_is_refused(kp):
    tiny_u = generate_dgk_keypair(
        n_bits=512, comparison_bits=1, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=3)
    )
    assert tiny_u.public_key.u == 17
    bits = 17 * DIGIT_BITS  # 17 digits: terms up to 17, not below u
    with pytest.raises(PrivregValueError, match=r"dgk_key has plaintext modulus u=17.*comparison_bits >= 51"):
        _holder_call(kp, tiny_u, bits=bits, ciphertexts=pack(kp, [[1, 2]], bits))
    with pytest.raises(PrivregValueError, match="dgk_private_key has plaintext modulus u=17"):
        _keyholder_call(kp, tiny_u, bits=bits)


# ------------------------------------------------------------------ malformed messages


def test_a_value_outside_its_range_is_caught_by_the_key_holder(kp, dk):
    bits = 14
    _, per = slot_layout(kp.public_key, bits=bits)
    rows = [[5] * (per - 1) + [(1 << (bits + SIGMA)) + (1 << bits)]]  # the top slot: never fits after masking
    with pytest.raises(ProtocolError, match=r"'keyholder' failed.*'holder' sent at step 'thr.masked'.*\[0, 2\^14\)"):
        decide(kp, dk, rows, [(0, 0)], bits, 3)


def _lying_holder(kp, dk, *, shares=None, terms=None):
    """A holder that sends encryptions of zeros as masked slots and then ``terms`` and
    ``shares`` (defaults: well-formed) of its own."""
    rng = InsecureReproducibleRandom(seed=41)

    async def run(ch):
        pk = await recv_public_key(ch, "keyholder", step="thr.pk", allow_insecure=True)
        dgk = await recv_dgk_public_key(ch, "keyholder", step="thr.dgk-pk", allow_insecure=True)
        vec = vector_from_ciphertexts(pk, encrypt(pk, [0], bound=0, rng=rng)._c, bound=0)
        await send_encrypted(ch, "keyholder", vec, step="thr.masked", rng=rng)
        await ch.recv("keyholder", step="thr.bits")
        sent_terms = dgk.encrypt([1] * 5, rng=rng) if terms is None else terms(dgk)
        sent_shares = np.zeros(1, dtype=np.uint8) if shares is None else shares
        await ch.send("keyholder", {"terms": sent_terms, "shares": sent_shares}, step="thr.terms")

    return run


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"shares": np.array([2], dtype=np.uint8)}, "shares that are not 1 bits"),
        ({"shares": np.zeros(2, dtype=np.uint8)}, "shares that are not 1 bits"),
        ({"shares": np.zeros(1)}, "shares that are not 1 bits"),
        (
            {"terms": lambda dgk: dgk.encrypt([1] * 4, rng=InsecureReproducibleRandom(seed=42))},
            "something other than 5 DGK ciphertexts",
        ),
        ({"terms": lambda dgk: "terms"}, "something other than 5 DGK ciphertexts"),
    ],
)
def test_malformed_terms_are_refused_naming_the_holder(kp, dk, kw, words):
    proto = Threshold(kp, dk, pack(kp, [[1]], 14), [(0, 0)], 14, 3, holder=_lying_holder(kp, dk, **kw))
    with pytest.raises(ProtocolError, match=f"'holder' sent at step 'thr.terms' {words}"):
        run_protocol(proto)


def test_masked_ciphertexts_under_another_key_are_refused(kp, dk):
    other = cached_keypair(512, 4).public_key

    async def wrong_key(ch):
        await recv_public_key(ch, "keyholder", step="thr.pk", allow_insecure=True)
        await recv_dgk_public_key(ch, "keyholder", step="thr.dgk-pk", allow_insecure=True)
        seeded = InsecureReproducibleRandom(seed=43)
        await send_encrypted(ch, "keyholder", encrypt(other, [0], bound=0, rng=seeded), step="thr.masked", rng=seeded)

    proto = Threshold(kp, dk, pack(kp, [[1]], 14), [(0, 0)], 14, 3, holder=wrong_key)
    with pytest.raises(ProtocolError, match=r"'holder' sent at step 'thr\.masked' ciphertexts under another key"):
        run_protocol(proto)


def test_a_lying_holder_can_only_change_the_decision(kp, dk):
    """Well-formed lies are not detected (semi-honest protocol): the key holder outputs a bit."""
    proto = Threshold(kp, dk, pack(kp, [[1]], 14), [(0, 0)], 14, 3, holder=_lying_holder(kp, dk))
    out = run_protocol(proto).outputs["keyholder"]
    assert out.shape == (1,) and out.dtype == bool


def test_malformed_bits_are_refused_naming_the_key_holder(kp, dk):
    async def short_bits(ch):
        await ch.recv("holder", step="thr.masked")
        await ch.send(
            "holder", dk.private_key.encrypt([1] * 3, rng=InsecureReproducibleRandom(seed=44)), step="thr.bits"
        )

    proto = Threshold(kp, dk, pack(kp, [[1]], 14), [(0, 0)], 14, 3, keyholder=short_bits)
    with pytest.raises(ProtocolError, match=r"'keyholder' sent 3 DGK ciphertexts .* expected 31"):
        run_protocol(proto)

    async def wrong_type(ch):
        await ch.recv("holder", step="thr.masked")
        await ch.send("holder", [1, 2, 3], step="thr.bits")

    proto = Threshold(kp, dk, pack(kp, [[1]], 14), [(0, 0)], 14, 3, keyholder=wrong_type)
    with pytest.raises(ProtocolError, match="expected DgkCiphertexts from 'keyholder'"):
        run_protocol(proto)


# ------------------------------------------------------------------ full size


@pytest.mark.slow
def test_full_size_keys():
    """2048-bit Paillier and DGK keys (t = 160), bits = 14: boundaries and random values."""
    import random

    kp2 = cached_keypair(2048, 0)
    dk2 = generate_dgk_keypair(n_bits=2048, rng=InsecureReproducibleRandom(seed=31))
    rng = random.Random(11)
    bits, c = 14, 12345
    _, per = slot_layout(kp2.public_key, bits=bits)
    rows = boundary_rows(bits, c, per, rng)
    wanted = [(i, j) for i, row in enumerate(rows) for j in range(len(row))]
    got, _ = decide(kp2, dk2, rows, wanted, bits, c, seed=12)
    assert np.array_equal(got, expected(rows, wanted, c))
