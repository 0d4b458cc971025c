"""Dealer-model threshold decisions (privreg.crypto.dealer_compare) and clk-dice's
``comparison="dealer"``: the circuit decides exactly as the plaintext rule on edge and
random values; the openings each data party receives and the output shares the dealer
receives are uniform and independent of the inputs (chi-square tests at a stated
false-alarm rate, fixed seeds); clk-dice decides the same under "dealer" as under "dgk"
and its linkage unit then receives output shares only; malformed messages are refused
naming their sender."""

from __future__ import annotations

import numpy as np
import pytest
from crypto_keys import cached_dgk_keypair, cached_keypair
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from test_pprl_dice_adversarial import _Tap
from test_pprl_dice_protocol import BANDS, PARTIES, SECRET, encoded_records

from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Protocol
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto.channel import RoleParty
from privreg.crypto.dealer_compare import (
    MAX_BITS,
    and_counts,
    compare_dealer,
    compare_left,
    compare_right,
    evaluate,
    words,
)
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.mpc.wire import encode
from privreg.plugins.pprl.dice_protocol import BATCH_DECISIONS, LINKAGE_UNIT, DiceLinkageProtocol
from privreg.plugins.pprl.records import EncodedRecords

K = 60  # clk-dice's share modulus 2^K
MOD = 1 << K
# chi-square tests: each rejects a true null hypothesis with probability ALPHA; with fixed
# seeds the outcome is deterministic
ALPHA = 1e-4


def split(x: list[int], seed: int, modulus: int = MOD) -> tuple[np.ndarray, np.ndarray]:
    """Uniform additive shares of ``x`` modulo ``modulus``."""
    rng = np.random.default_rng(seed)
    right = [int(r) % modulus for r in rng.integers(0, 2**63, size=len(x), dtype=np.int64)]
    left = [(v - r) % modulus for v, r in zip(x, right)]
    return np.array(left, dtype=np.uint64), np.array(right, dtype=np.uint64)


def edge_values(c: int, bits: int) -> list[int]:
    """``x`` at and around ``c`` and at the extremes ``c +- (2^bits - 1)`` (may be negative:
    shares are modulo 2^K)."""
    top = (1 << bits) - 1
    return [c, c - 1, c + 1, c - top, c + top, c - top + 1, c + top - 1]


@pytest.mark.parametrize("bits", [1, 2, 3, 7, 14, 15, 16, 18, 59])
def test_edge_values_decide_as_the_plaintext_rule(bits):
    rng = np.random.default_rng(bits)
    for c in sorted({0, 1, (1 << bits) - 1, int(rng.integers(0, 1 << min(bits, 62)))}):
        xs = edge_values(c, bits)
        xs += [c + int(d) for d in rng.integers(-(1 << bits) + 1, 1 << bits, size=200, dtype=np.int64)]
        left, right = split(xs, seed=c + bits)
        got = evaluate(left, right, threshold=c, bits=bits, rng=InsecureReproducibleRandom(seed=bits)).decisions
        assert got.tolist() == [x >= c for x in xs]


@given(
    bits=st.integers(1, MAX_BITS - 1),
    data=st.data(),
)
def test_property_random_shares_decide_as_the_plaintext_rule(bits, data):
    """Any shares modulo 2^64 (K = 64) and any x within 2^bits of c."""
    c = data.draw(st.integers(0, (1 << 62) - 1))
    offsets = data.draw(st.lists(st.integers(-(1 << bits) + 1, (1 << bits) - 1), min_size=1, max_size=130))
    xs = [c + d for d in offsets]
    rights = data.draw(st.lists(st.integers(0, (1 << 64) - 1), min_size=len(xs), max_size=len(xs)))
    left = np.array([(x - r) % (1 << 64) for x, r in zip(xs, rights)], dtype=np.uint64)
    right = np.array(rights, dtype=np.uint64)
    got = evaluate(left, right, threshold=c, bits=bits, rng=InsecureReproducibleRandom(seed=1)).decisions
    assert got.tolist() == [d >= 0 for d in offsets]


def test_gate_counts_and_rounds():
    # b leaves plus a log-depth tree; the segment of bit 0 needs no eq
    assert and_counts(14) == [14, 13, 5, 3, 1] and sum(and_counts(14)) == 36
    assert and_counts(16) == [16, 15, 7, 3, 1] and sum(and_counts(16)) == 42
    assert and_counts(1) == [1] and len(and_counts(59)) == 7


def bit_histogram(arrays: list[np.ndarray]) -> np.ndarray:
    """Counts of the 256 byte values over every word of ``arrays``."""
    raw = np.concatenate([a.astype("<u8").ravel().view(np.uint8) for a in arrays])
    return np.bincount(raw, minlength=256)


def views(xs: list[int], c: int, bits: int, seed: int):
    left, right = split(xs, seed=seed)
    return evaluate(left, right, threshold=c, bits=bits, rng=InsecureReproducibleRandom(seed=seed))


@pytest.mark.parametrize("who", ["left", "right", "dealer-left", "dealer-right"])
def test_what_each_role_receives_is_uniform_and_independent_of_the_inputs(who):
    """Per role, the byte histogram of everything it receives is uniform (chi-square, 255
    degrees of freedom, false-alarm rate ALPHA) for two input sets (all x = c - 1: every
    decision false; x random around c), and the two histograms do not differ (chi-square
    test of homogeneity, same rate)."""
    bits, c, n = 14, 8192, 64 * 1024

    def received(ev):
        if who == "left":
            return ev.left_received
        if who == "right":
            return ev.right_received
        return [ev.dealer_received[0 if who == "dealer-left" else 1]]  # one share alone (the XOR is the decision)

    rng = np.random.default_rng(5)
    a = received(views([c - 1] * n, c, bits, seed=11))
    b = received(views([c + int(d) for d in rng.integers(-8000, 8000, size=n)], c, bits, seed=12))
    ha, hb = bit_histogram(a), bit_histogram(b)
    assert ha.sum() >= 256 * 30  # enough bytes per cell for the chi-square approximation
    for h in (ha, hb):
        assert stats.chisquare(h).pvalue > ALPHA
    assert stats.chi2_contingency(np.stack([ha, hb]))[1] > ALPHA


def test_the_dealer_reads_the_decision_off_both_shares_only():
    xs = [8191, 8192, 8193] * 64
    ev = views(xs, 8192, 14, seed=3)
    o_l, o_r = ev.dealer_received
    assert ev.decisions.tolist() == [x >= 8192 for x in xs]
    assert not np.array_equal(o_l, o_r)  # the two shares differ where the decisions are true
    # with the dealer's seeds and the inputs fixed, the left's fresh output mask flips about
    # half of each share's bits (the dealer cannot compute a share from what it knows), not
    # their XOR; the fraction of 192 bits lies in [0.35, 0.65] except with probability < 1e-4
    left, right = split(xs, seed=3)
    again = [
        evaluate(
            left, right, threshold=8192, bits=14, rng=InsecureReproducibleRandom(seed=3),
            left_rng=InsecureReproducibleRandom(seed=s),
        ).dealer_received
        for s in (100, 101)
    ]  # fmt: skip
    flips = np.unpackbits((again[0][0] ^ again[1][0]).view(np.uint8))[:192]
    assert 0.35 <= flips.mean() <= 0.65
    assert np.array_equal(again[0][0] ^ again[0][1], again[1][0] ^ again[1][1])


def test_bad_arguments_name_the_argument():
    x = np.zeros(3, dtype=np.uint64)
    with pytest.raises(PrivregValueError, match="bits must be at most 63"):
        evaluate(x, x, threshold=0, bits=64)
    with pytest.raises(PrivregValueError, match="bits"):
        evaluate(x, x, threshold=0, bits=0)
    with pytest.raises(PrivregTypeError, match="shares must be a 1-D numpy uint64 array"):
        evaluate(x.astype(np.int64), x, threshold=0, bits=4)
    with pytest.raises(PrivregValueError, match="threshold"):
        evaluate(x, x, threshold=-1, bits=4)
    with pytest.raises(PrivregValueError, match="one share per decision each; got 3 and 2"):
        evaluate(x, x[:2], threshold=0, bits=4)


# ------------------------------------------------------------------ the async roles


class Compare(Protocol):
    """The three roles of one batch; any role may be replaced (a misbehaving party)."""

    name = "dealer-compare-test"
    caveats = "test wrapper of privreg.crypto.dealer_compare"

    def __init__(self, xs, c, bits, *, seed=0, roles=None):
        self.left, self.right = split(xs, seed=seed)
        self.c, self.bits, self.seed, self.roles = c, bits, seed, roles or {}

    def learns(self):
        return {"dealer": "the decisions", "L": "nothing", "R": "nothing"}

    def parties(self):
        fns = {"dealer": self._dealer, "L": self._left, "R": self._right, **self.roles}
        return [RoleParty(name, fn) for name, fn in fns.items()]

    async def _dealer(self, ch):
        rng = InsecureReproducibleRandom(seed=self.seed)
        return await compare_dealer(
            ch, left="L", right="R", count=self.left.shape[0], bits=self.bits, step="cmp", domain="L/R/0", rng=rng
        )

    async def _left(self, ch):
        rng = InsecureReproducibleRandom(seed=self.seed + 1)
        await compare_left(
            ch, peer="R", dealer="dealer", shares=self.left, threshold=self.c, bits=self.bits, step="cmp",
            domain="L/R/0", rng=rng,
        )  # fmt: skip

    async def _right(self, ch):
        await compare_right(
            ch, peer="L", dealer="dealer", shares=self.right, bits=self.bits, step="cmp", domain="L/R/0"
        )


def test_async_roles_decide_and_send_one_message_per_round_and_direction():
    xs = list(range(8000, 8400))
    res = run_protocol(Compare(xs, 8192, 14, seed=2), transport=InMemoryTransport())
    assert res.outputs["dealer"].tolist() == [x >= 8192 for x in xs]
    steps = [(m.sender, m.receiver, m.step) for m in res.transcript.messages]
    rounds = len(and_counts(14))
    for a, b in (("L", "R"), ("R", "L")):
        assert [s for f, t, s in steps if (f, t) == (a, b)] == [f"cmp.open{r}" for r in range(rounds)]
    got = res.transcript.received_by("dealer")
    assert sorted(m.step for m in got) == ["cmp.out", "cmp.out"]  # output shares, no opening
    assert all(m.payload.shape == (words(len(xs)),) for m in got)


def bad_right(payload_at_round0):
    """A right party that sends ``payload_at_round0`` as its round-0 openings."""

    async def fn(ch):
        await ch.recv("dealer", step="cmp.triples")
        await ch.send("L", payload_at_round0, step="cmp.open0")
        await ch.recv("L", step="cmp.open0")

    return fn


@pytest.mark.parametrize(
    "payload",
    [
        # 400 decisions: W = 7 words, 14 gates: (28, 7) uint64 is well formed
        np.zeros((29, 7), dtype=np.uint64),
        np.zeros((28, 8), dtype=np.uint64),
        np.zeros((28, 7), dtype=np.int64),
        [1, 2, 3],
    ],
)
def test_malformed_openings_are_refused_naming_the_sender(payload):
    xs = list(range(8000, 8400))
    with pytest.raises(ProtocolError, match=r"'R' sent at step 'cmp.open0' a malformed message"):
        run_protocol(Compare(xs, 8192, 14, roles={"R": bad_right(payload)}), transport=InMemoryTransport())


def test_malformed_triples_and_output_shares_are_refused_naming_the_sender():
    xs = list(range(8000, 8100))

    async def bad_dealer(ch):
        await ch.send("L", {"seed": b"short"}, step="cmp.triples")
        await ch.send("R", {"seed": bytes(32), "c": np.zeros((35, 2), dtype=np.uint64)}, step="cmp.triples")

    with pytest.raises(ProtocolError, match=r"'dealer' sent at step 'cmp.triples' a triple seed that is not 32"):
        run_protocol(Compare(xs, 8192, 14, roles={"dealer": bad_dealer}), transport=InMemoryTransport())

    async def bad_dealer2(ch):
        await ch.send("L", {"seed": bytes(32)}, step="cmp.triples")
        await ch.send("R", {"seed": bytes(32), "c": np.zeros((35, 2), dtype=np.uint64)}, step="cmp.triples")

    with pytest.raises(ProtocolError, match=r"'dealer' sent at step 'cmp.triples' a malformed message.*\(36, 2\)"):
        run_protocol(Compare(xs, 8192, 14, roles={"dealer": bad_dealer2}), transport=InMemoryTransport())

    async def bad_left(ch):
        await ch.recv("dealer", step="cmp.triples")
        await ch.send("dealer", np.zeros(3, dtype=np.uint64), step="cmp.out")

    async def quiet_right(ch):
        await ch.recv("dealer", step="cmp.triples")
        await ch.send("dealer", np.zeros(2, dtype=np.uint64), step="cmp.out")

    with pytest.raises(ProtocolError, match=r"'L' sent at step 'cmp.out' a malformed message"):
        run_protocol(Compare(xs, 8192, 14, roles={"L": bad_left, "R": quiet_right}), transport=InMemoryTransport())


# ------------------------------------------------------------------ clk-dice under comparison="dealer"

# a low threshold and a level below the default ones give conflicting clusters: every
# level is decided (13 to 16 bits)
THRESHOLD, LEVELS = 0.5, (0.7, 0.8, 0.9, 0.95)


@pytest.fixture(scope="module")
def records():
    return encoded_records()


def dice_protocol(records, comparison, **kw):
    kw.setdefault("rng", InsecureReproducibleRandom(seed=1))
    return DiceLinkageProtocol(
        parties=PARTIES,
        records=records,
        secret=SECRET,
        bands=BANDS,
        threshold=THRESHOLD,
        levels=LEVELS,
        keypair=cached_keypair(512, 4),
        dgk_keypair=cached_dgk_keypair(),
        insecure_allow_small_keys=True,
        workers=1,
        blocking="linkage-unit",
        record_counts={p: len(r) for p, r in records.items()},
        comparison=comparison,
        **kw,
    )


@pytest.fixture(scope="module")
def runs(records):
    return {
        c: run_protocol(dice_protocol(records, c), transport=InMemoryTransport(keep_payloads=True))
        for c in ("dealer", "dgk")
    }


def test_dealer_and_dgk_decide_the_same_and_as_exact_dice(records, runs):
    dealer, dgk = (runs[c].outputs[LINKAGE_UNIT] for c in ("dealer", "dgk"))
    assert dealer["refined"] > 10 and dealer["accepted"] > 100  # the levels are exercised
    for key in ("group_indices", "accepted", "refined", "decisions", "candidate_count", "dummy_pairs"):
        assert dealer[key] == dgk[key], key
    # the refine messages list the accepted pairs in conflicting clusters: equal too
    for p in PARTIES:
        ref = [[m.payload for m in runs[c].transcript.received_by(p) if m.step == "refine"] for c in runs]
        assert all(np.array_equal(a, b) for a, b in zip(ref[0][0], ref[1][0]))
    # and the accepted pairs are exactly those with 2 den <a, b> >= num (|a| + |b|) (num / den = 1 / 2)
    edges = set()
    for (left, right), cands in dealer["candidates"].items():
        fa, fb = records[left].match_filters[cands[:, 0]], records[right].match_filters[cands[:, 1]]
        inter, total = (fa & fb).sum(1), fa.sum(1) + fb.sum(1)
        ok = (4 * inter >= total) & (total > 0)  # Dice >= 1/2
        edges |= {(left, int(a), right, int(b)) for (a, b), y in zip(cands, ok) if y}
    assert len(edges) == dealer["accepted"]


def test_dealer_runs_without_keys_and_the_linkage_unit_receives_output_shares_only(runs):
    res = runs["dealer"]
    for p in PARTIES:
        steps = {m.step for m in res.transcript.received_by(p)}
        assert not steps & {"keys", "keys-dgk"} and not any(s.startswith("shares-") for s in steps)
        assert any(s.endswith(".triples") for s in steps) and any(".open" in s for s in steps)
    got = [m for m in res.transcript.received_by(LINKAGE_UNIT) if m.step != "tokens"]
    assert got and all(m.step.startswith("cmp-") and m.step.endswith(".out") for m in got)
    for m in got:  # one packed share bit per decision: no opening, no ciphertext
        assert isinstance(m.payload, np.ndarray) and m.payload.dtype == np.uint64 and m.payload.ndim == 1
    sent = {m.step.rsplit(".", 1)[-1] for m in res.transcript.sent_by(LINKAGE_UNIT) if m.step.startswith("cmp-")}
    assert sent == {"triples"}
    assert res.outputs[LINKAGE_UNIT]["operations"]["encryptions"] == 0


def test_dealer_in_small_batches_gives_the_same_groups(records, runs, monkeypatch):
    import privreg.plugins.pprl.dice_protocol as dp

    monkeypatch.setattr(dp, "BATCH_DECISIONS", 70)  # batches of 70: a partial last word
    res = run_protocol(dice_protocol(records, "dealer"), transport=InMemoryTransport(keep_payloads=False))
    assert res.outputs[LINKAGE_UNIT]["group_indices"] == runs["dealer"].outputs[LINKAGE_UNIT]["group_indices"]
    assert any(m.step.startswith("cmp-base.1.") for m in res.transcript.received_by(LINKAGE_UNIT))


def tampered(records, sender, step, fn):
    proto = dice_protocol(records, "dealer")

    def tap(frm, to, st, payload):
        return fn(payload) if (frm, st) == (sender, step) else payload

    roles = [RoleParty(p.name, lambda ch, p=p: p.run(_Tap(ch, tap))) for p in proto.parties()]
    proto.parties = lambda: roles  # type: ignore[method-assign]
    return proto


@pytest.mark.parametrize(
    ("sender", "step", "fn", "message"),
    [
        ("P1", "cmp-base.open0", lambda x: x[:-1], "'P1' sent at step 'cmp-base.open0' a malformed message"),
        ("P1", "cmp-base.open2", lambda x: x.astype(np.int64), "'P1' sent at step 'cmp-base.open2' a malformed"),
        ("P2", "cmp-base.out", lambda x: {"out": x}, "'P2' sent at step 'cmp-base.out' a malformed message"),
        (LINKAGE_UNIT, "cmp-base.triples", lambda x: {**x, "seed": x["seed"][:16]}, "'linkage_unit' sent at step"),
        # larger than the message's bound: refused by the transport before it is decoded
        ("P1", "cmp-base.open1", lambda x: np.zeros((x.shape[0], 99), np.uint64), "party 'P1' sent a .* above"),
        (LINKAGE_UNIT, "cmp-base.triples", lambda x: {**x, "pad": bytes(10**5)}, "party 'linkage_unit' sent .* above"),
    ],
)
def test_malformed_or_oversized_dealer_messages_are_refused_naming_the_sender(records, sender, step, fn, message):
    with pytest.raises(ProtocolError, match=message):
        run_protocol(tampered(records, sender, step, fn), transport=InMemoryTransport())


def test_dealer_messages_of_a_full_batch_fit_their_bounds_and_dgk_kinds_are_refused():
    proto = DiceLinkageProtocol(parties=2, record_counts={"P1": 200, "P2": 200}, comparison="dealer")
    d, b = BATCH_DECISIONS, proto.x_bits
    w = words(d)
    largest = {
        ("linkage_unit", "P2", "cmp-base.triples"): {
            "seed": bytes(32),
            "c": np.zeros((sum(and_counts(b)), w), np.uint64),
        },
        ("P1", "P2", "cmp-l4.3.open0"): np.zeros((2 * b + 1, w), np.uint64),
        ("P2", "linkage_unit", "cmp-base.out"): np.zeros(w, np.uint64),
    }
    for (s, r, step), payload in largest.items():
        bound = proto.message_bound(sender=s, receiver=r, step=step)
        assert len(encode(payload)) <= bound <= len(encode(payload)) + 1024 + 40, step
    for s, r, step in [
        ("linkage_unit", "P1", "keys"),
        ("linkage_unit", "P1", "keys-dgk"),
        ("P1", "P2", "shares-base"),
        ("linkage_unit", "P1", "cmp-base.bits"),
        ("P1", "linkage_unit", "cmp-base.terms"),
        ("P1", "linkage_unit", "cmp-base.masked"),
    ]:
        assert proto.message_bound(sender=s, receiver=r, step=step) == 0, step
    dgk = DiceLinkageProtocol(parties=2, record_counts={"P1": 200, "P2": 200}, comparison="dgk")
    for s, r, step in largest:
        assert dgk.message_bound(sender=s, receiver=r, step=step) == 0, step
    assert proto.max_message_bytes() < dgk.max_message_bytes()


def test_comparison_is_validated_and_dealer_is_the_default():
    assert DiceLinkageProtocol(parties=2).comparison == "dealer"
    with pytest.raises(PrivregValueError, match=r"comparison must be one of \['dealer', 'dgk'\]; got 'paillier'"):
        DiceLinkageProtocol(parties=2, comparison="paillier")


# (|a|, |b|, |a & b|) with x - c = 2 den <a, b> - num (|a| + |b|) = 8 i - 3 t at threshold 3/4
TIES = [(8, 8, 6), (5, 6, 4), (2, 3, 2), (6, 7, 5), (1, 1, 1), (1, 1, 0), (9, 10, 7)]


def tie_records():
    """Two parties; pair k (an exact-pass candidate) has the popcounts and overlap of TIES[k]
    on bits of its own, so Dice sits at, just below or just above 0.75."""
    m, length = len(TIES), 1024
    a, b = np.zeros((m, length), dtype=bool), np.zeros((m, length), dtype=bool)
    for k, (na, nb, i) in enumerate(TIES):
        a[k, 64 * k : 64 * k + na] = True
        b[k, 64 * k + na - i : 64 * k + na - i + nb] = True
    keys = np.arange(1, m + 1, dtype=np.uint64).reshape(m, 1)
    return {
        p: EncodedRecords(
            party=p, ids=tuple(f"{p}-{k}" for k in range(m)), block_filters=f, match_filters=f, exact_keys=keys
        )
        for p, f in (("P1", a), ("P2", b))
    }


@pytest.mark.parametrize("comparison", ["dealer", "dgk"])
def test_decisions_at_ties_and_one_off_are_exact(comparison):
    recs = tie_records()
    assert [8 * i - 3 * (na + nb) for na, nb, i in TIES] == [0, -1, 1, 1, 2, -6, -1]
    proto = DiceLinkageProtocol(
        parties=("P1", "P2"),
        records=recs,
        secret=SECRET,
        bands=BANDS,
        levels=(),
        keypair=cached_keypair(512, 4),
        dgk_keypair=cached_dgk_keypair(),
        insecure_allow_small_keys=True,
        workers=1,
        blocking="linkage-unit",
        comparison=comparison,
        rng=InsecureReproducibleRandom(seed=2),
    )
    lu = run_protocol(proto, transport=InMemoryTransport()).outputs[LINKAGE_UNIT]
    (cands,) = lu["candidates"].values()
    assert {(k, k) for k in range(len(TIES))} <= {tuple(map(int, c)) for c in cands}
    want = {(("P1", k), ("P2", k)) for k, (na, nb, i) in enumerate(TIES) if 8 * i >= 3 * (na + nb)}
    assert {tuple(sorted(g)) for g in lu["groups"]} == want and len(want) == 4


def test_comparison_is_a_deployment_option_in_the_digest():
    from privreg.core.randomness import SecureRandom
    from privreg.mpc.deployment import options_digest
    from privreg.plugins.pprl.dice_deployment import DiceDeployment

    dep = DiceDeployment()
    default = dep.options({"records": [10, 10, 10]})
    dgk = dep.options({"records": [10, 10, 10], "comparison": "dgk"})
    assert default["comparison"] == "dealer" and dgk["comparison"] == "dgk"
    assert options_digest(dep, default) != options_digest(dep, dgk)  # parties of other modes refuse each other
    with pytest.raises(PrivregValueError, match="comparison"):
        dep.options({"records": [10, 10, 10], "comparison": "paillier"})
    proto = dep.protocol(party=LINKAGE_UNIT, inputs={}, options=dgk, rng=SecureRandom())
    assert proto.comparison == "dgk"
