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
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

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
