"""Threshold decisions ``[x >= c]`` on additively shared ``x`` by a boolean circuit with
Beaver AND triples from a dealer, for the dealer only.

Setting (record linkage, the dealer model): the *left* party holds ``x_L``, the *right*
party ``x_R``, one per decision, with ``x = x_L + x_R mod 2^K`` (any ``K`` with ``bits <
K <= 64``). For a public threshold ``c`` and a public ``bits`` with ``|x - c| < 2^bits``
the *dealer* must learn exactly ``[x >= c]`` per decision; the two parties learn nothing.
The dealer must collude with neither party. :func:`compare_left`,
:func:`compare_right` and :func:`compare_dealer` are the three roles, for a whole batch;
:func:`evaluate` runs the same code in memory (for tests).

Maths. With ``b = bits``, ``alpha = (x_L - c) mod 2^(b+1)`` (left) and ``beta = x_R mod
2^(b+1)`` (right), ``z = alpha + beta mod 2^(b+1) = (x - c) mod 2^(b+1)`` exactly, since
``2^(b+1)`` divides ``2^K``. As ``x - c`` lies in ``(-2^b, 2^b)``, ``x >= c`` iff bit ``b``
of ``z`` is 0: ``b + 1`` bits of the shares suffice, whatever ``K``, and no wrap can make
a decision wrong. Bit ``b`` of ``z`` is ``alpha_b XOR beta_b XOR carry``, ``carry`` the
carry out of the low ``b`` bits of ``alpha + beta``, which is ``[alpha' > gamma]`` for
``alpha' = alpha mod 2^b`` and ``gamma = 2^b - 1 - (beta mod 2^b)``: the greater-than of
two private ``b``-bit numbers. Its leaves ``gt_i = alpha_i AND NOT gamma_i = alpha_i AND
beta_i`` (one AND of the left's and the right's bit) and ``eq_i = NOT(alpha_i XOR
gamma_i) = alpha_i XOR beta_i`` (free) are a carry-lookahead adder's generate and
propagate bits, combined by ``(gt_hi, eq_hi) o (gt_lo, eq_lo) = (gt_hi XOR (eq_hi AND
gt_lo), eq_hi AND eq_lo)`` in a tree of ``ceil(log2 b)`` levels (XOR is an OR here: a
segment that is greater is not equal). The segment holding bit 0 never needs its
``eq``: ``b + sum over levels of (2 pairs - 1)`` ANDs, 36 at ``b = 14`` and 42 at ``b =
16``, in ``1 + ceil(log2 b)`` rounds (5).

Protocol (bits of a batch of ``N`` decisions packed into ``W = ceil(N / 64)`` uint64
words per wire, one message per round and direction for the whole batch):

1. ``<step>.triples``, dealer to both. Per AND gate and decision an XOR-shared triple
   ``(a, b, c)`` with ``c = a AND b`` (Beaver, "Efficient multiparty protocols using
   circuit randomization", CRYPTO 1991): the left party's ``a_L, b_L, c_L`` and the
   right's ``a_R, b_R`` are SHAKE-256 expansions of a fresh 32-byte seed each (the
   message), domain-separated by the caller's ``domain`` (pair, level, batch), the round
   and the role; the right party also gets ``c_R = (a_L ^ a_R) & (b_L ^ b_R) ^ c_L``
   explicitly (one word per gate and 64 decisions).
2. ``<step>.open<r>``, ``r = 0, 1, ...``, each party to the other: for the round's AND
   gates ``z = x AND y`` the openings ``d_i = x_i ^ a_i``, ``e_i = y_i ^ b_i`` (a
   ``(2 g, W)`` array: ``g`` rows of ``d``, then ``g`` of ``e``); then ``d, e`` are public
   to both and ``z_i = c_i ^ (d & b_i) ^ (e & a_i)``, the left adding ``d & e``. The
   left's round-0 message carries one more row: an output mask ``m`` uniform from its
   randomness.
3. ``<step>.out``, each party to the dealer: its share of the decision XOR ``m`` (``W``
   words): left ``NOT alpha_b ^ carry_L ^ m``, right ``beta_b ^ carry_R ^ m``. The dealer
   XORs the two.

What each learns (semi-honest): a party sees its triple shares (uniform), the peer's
openings, each XORed with a fresh uniform triple bit of the peer's that it never sees
(``a_R`` and ``b_R`` are unknown to the left; ``a_L``, ``b_L`` and ``c_L``, which masks
``c_R``, are unknown to the right), and the output mask: all uniform and independent of
both inputs. It sees no output. The dealer sees no opening; it receives two output shares
whose XOR is the decision and each of which is masked by ``m`` (unknown to it): uniform.
So each view is simulated from that party's input (the dealer's: from the decisions).
Public: ``N``, ``bits``, ``c``. Security is perfect given the triples, and the triples rest
on SHAKE-256 as a PRG; there is no key and no computational assumption beyond that.

Caveats: semi-honest parties and a dealer that colludes with neither party (with the
left's seed the right reads the left's bits off its openings, and vice versa). A malicious
party can flip any output share, so the dealer's decisions are only as good as the
parties' honesty; every message is type- and shape-checked and a malformed one raises
ProtocolError naming its sender. Inputs with ``|x - c| >= 2^bits`` give wrong decisions
(the caller's contract). Not constant time (numpy on public shapes only: the running
time depends on ``N`` and ``bits``, not on the data).

Cost: per decision, ``ANDs / 8`` bytes of correction bits to the right party (4.5 at ``b =
14``), ``2 ANDs / 8`` bytes of openings per direction (9), two bits to the dealer; a few
numpy word operations per gate and 64 decisions, no public-key operation. Measured in
clk-dice at 3 x 2,000 (``benchmarks/pprl_decisions.py --comparison dealer``): about 0.01
CPU-ms per decision at the dealer and at each party.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Channel
from privreg.core.randomness import RandomSource, resolve_random
from privreg.mpc.transport import STEP_MAX_CHARS, is_step

__all__ = [
    "MAX_BITS",
    "SEED_BYTES",
    "Evaluation",
    "and_counts",
    "compare_dealer",
    "compare_left",
    "compare_right",
    "evaluate",
    "words",
]

#: The largest ``bits``: ``bits + 1`` bits of the uint64 shares are used.
MAX_BITS = 63
#: Bytes of a triple seed.
SEED_BYTES = 32
_DOMAIN = b"privreg/dealer-compare/v1"
_LONGEST_SUFFIX = len(".triples")

# a party's evaluation: yields its openings of a round, receives the peer's, returns its share
_Eval = Generator[np.ndarray, np.ndarray, np.ndarray]


def words(count: int) -> int:
    """Words ``W`` of a packed wire for ``count`` decisions (``ceil(count / 64)``)."""
    return -(-count // 64)


def _levels(bits: int) -> list[list[bool]]:
    """The tree's levels: per level, per pair combined, whether its low segment holds bit 0
    (then the combined ``eq`` is not needed: one AND, else two)."""
    segs = [i == 0 for i in range(bits)]  # per segment: holds bit 0
    out = []
    while len(segs) > 1:
        level = [segs[k] for k in range(0, len(segs) - 1, 2)]
        out.append(level)
        segs = level + ([segs[-1]] if len(segs) % 2 else [])
    return out


def and_counts(bits: int) -> list[int]:
    """AND gates per round for ``bits`` (round 0: the ``bits`` leaves; then one tree level
    each). Public: both parties and the dealer derive the same schedule."""
    bits = _check_bits(bits)
    return [bits] + [sum(1 if low else 2 for low in level) for level in _levels(bits)]


def _check_bits(bits: Any) -> int:
    b = v.check_int("bits", bits, minimum=1)
    if b > MAX_BITS:
        raise PrivregValueError(
            f"bits must be at most {MAX_BITS} (the circuit uses bits + 1 bits of uint64 shares); got {b}."
        )
    return b


def _check_step(step: Any) -> str:
    if not isinstance(step, str) or len(step) > STEP_MAX_CHARS - _LONGEST_SUFFIX - 2 or not is_step(step):
        raise PrivregValueError(
            f"step must be a name of 1 to {STEP_MAX_CHARS - _LONGEST_SUFFIX - 2} ASCII letters, digits, '-', '_', "
            f"'.', '[' or ']' (the messages are '<step>.triples', '<step>.open<r>' and '<step>.out'); got "
            f"{step!r:.80}."
        )
    return step


def _check_domain(domain: Any) -> bytes:
    if not isinstance(domain, str) or not 1 <= len(domain) <= 256:
        raise PrivregValueError(
            f"domain must be a string of 1 to 256 characters naming the batch (pair, level, batch); got {domain!r:.80}."
        )
    return domain.encode("utf-8")


def _check_shares(shares: Any) -> np.ndarray:
    if not isinstance(shares, np.ndarray) or shares.ndim != 1 or shares.dtype != np.uint64:
        raise PrivregTypeError(
            f"shares must be a 1-D numpy uint64 array (one share modulo 2^K per decision); got "
            f"{type(shares).__name__}{'' if not isinstance(shares, np.ndarray) else f' {shares.dtype} {shares.shape}'}."
        )
    return shares


def _check_rng(rng: RandomSource | None) -> RandomSource:
    if rng is not None and not isinstance(rng, RandomSource):
        raise PrivregTypeError(f"rng must be a RandomSource or None; got {type(rng).__name__}.")
    return resolve_random(rng)


def _expand(seed: bytes, domain: bytes, rnd: int, role: str, rows: int, width: int) -> np.ndarray:
    """``(rows, width)`` uniform words: SHAKE-256 of the fixed prefix, the seed, the domain
    (length-prefixed), the round and the role."""
    h = hashlib.shake_256(_DOMAIN + b"\0" + seed + len(domain).to_bytes(2, "little") + domain)
    h.update(rnd.to_bytes(2, "little") + role.encode("ascii"))
    raw = h.digest(8 * rows * width) if rows * width else b""
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(rows, width)


def _random_words(rng: RandomSource | None, width: int) -> np.ndarray:
    return np.frombuffer(resolve_random(rng).random_bytes(8 * width), dtype="<u8").astype(np.uint64)


def _bit_planes(values: np.ndarray, planes: int) -> np.ndarray:
    """``(planes, W)`` words: row ``i`` packs bit ``i`` of every value (decision ``k`` at bit
    ``k % 64`` of word ``k // 64``; the padding bits are 0)."""
    width = words(values.shape[0])
    bits = ((values[None, :] >> np.arange(planes, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(np.uint8)
    packed = np.packbits(bits, axis=1, bitorder="little")
    out = np.zeros((planes, 8 * width), dtype=np.uint8)
    out[:, : packed.shape[1]] = packed
    return out.view("<u8").astype(np.uint64).reshape(planes, width)


def _unpack(word_array: np.ndarray, count: int) -> np.ndarray:
    raw = word_array.astype("<u8").view(np.uint8)
    return np.unpackbits(raw, bitorder="little")[:count].astype(bool)


class _Triples:
    """A party's triples, round by round: ``(a, b, c)`` each ``(g, W)``; the right party's
    ``c`` comes from the dealer (``c_right``, None for the left)."""

    def __init__(self, seed: bytes, domain: bytes, width: int, c_right: np.ndarray | None) -> None:
        self.seed, self.domain, self.width = seed, domain, width
        self.c_right = c_right
        self.used = 0

    def take(self, rnd: int, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.c_right is None:
            abc = _expand(self.seed, self.domain, rnd, "left", 3 * g, self.width)
            return abc[:g], abc[g : 2 * g], abc[2 * g :]
        ab = _expand(self.seed, self.domain, rnd, "right", 2 * g, self.width)
        c = self.c_right[self.used : self.used + g]
        self.used += g
        return ab[:g], ab[g:], c


def _deal(seed_left: bytes, seed_right: bytes, domain: bytes, bits: int, width: int) -> np.ndarray:
    """The right party's ``c_R`` of every gate, in round and gate order: ``(ANDs, W)``."""
    out = []
    for rnd, g in enumerate(and_counts(bits)):
        left = _Triples(seed_left, domain, width, None).take(rnd, g)
        ar_br = _expand(seed_right, domain, rnd, "right", 2 * g, width)
        out.append(((left[0] ^ ar_br[:g]) & (left[1] ^ ar_br[g:])) ^ left[2])
    return np.concatenate(out) if out else np.zeros((0, width), dtype=np.uint64)


def _evaluate(left: bool, planes: np.ndarray, bits: int, triples: _Triples) -> _Eval:
    """One party's circuit (module docstring): yields its openings per round, is sent the
    peer's, returns its share of ``NOT bit_b(z)`` (before the output mask)."""
    rnd = 0

    def gate(x: np.ndarray, y: np.ndarray) -> _Eval:
        nonlocal rnd
        a, b, c = triples.take(rnd, x.shape[0])
        rnd += 1
        mine = np.concatenate([x ^ a, y ^ b])
        peer = yield mine
        de = mine ^ peer
        d, e = de[: x.shape[0]], de[x.shape[0] :]
        z: np.ndarray = c ^ (d & b) ^ (e & a)
        return z ^ (d & e) if left else z

    zero = np.zeros_like(planes[:bits])
    alpha = planes[:bits] if left else zero  # shares of alpha's bits: (alpha_i, 0)
    beta = zero if left else planes[:bits]  # and of beta's: (0, beta_i)
    gt = yield from gate(alpha, beta)  # generate: alpha_i AND beta_i
    eq = alpha ^ beta  # propagate, free
    # per segment (gt, eq); the eq of the segment holding bit 0 is never used (_levels)
    segs = [(gt[i], eq[i]) for i in range(bits)]
    for level in _levels(bits):
        xs, ys = [], []
        for k, low in enumerate(level):
            (g_lo, e_lo), (_, e_hi) = segs[2 * k], segs[2 * k + 1]
            xs += [e_hi] if low else [e_hi, e_hi]
            ys += [g_lo] if low else [g_lo, e_lo]
        z = yield from gate(np.stack(xs), np.stack(ys))
        new = []
        at = 0
        for k, low in enumerate(level):
            g_hi = segs[2 * k + 1][0]
            new.append((g_hi ^ z[at], segs[2 * k][1] if low else z[at + 1]))  # low: a placeholder eq
            at += 1 if low else 2
        segs = new + ([segs[-1]] if len(segs) % 2 else [])
    carry = segs[0][0]
    share: np.ndarray = planes[bits] ^ carry
    return ~share if left else share


def _planes(shares: np.ndarray, threshold: int, bits: int) -> np.ndarray:
    mask = np.uint64((1 << (bits + 1)) - 1)
    return _bit_planes((shares - np.uint64(threshold & int(mask))) & mask, bits + 1)


def _check_threshold(threshold: Any) -> int:
    return v.check_int("threshold", threshold, minimum=0)


# ------------------------------------------------------------------ message checks


def _words_msg(msg: Any, frm: str, step: str, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(msg, np.ndarray) or msg.dtype != np.uint64 or msg.shape != shape:
        got = f"{msg.dtype} {msg.shape}" if isinstance(msg, np.ndarray) else type(msg).__name__
        raise ProtocolError(
            f"{frm!r} sent at step {step!r} a malformed message: expected uint64 words {shape}, got {got}"
        )
    return msg


def _seed_msg(msg: Any, frm: str, step: str, keys: set[str]) -> bytes:
    if not isinstance(msg, dict) or set(msg) != keys:
        raise ProtocolError(f"{frm!r} sent at step {step!r} a malformed triples message (expected keys {sorted(keys)})")
    seed = msg["seed"]
    if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
        raise ProtocolError(f"{frm!r} sent at step {step!r} a triple seed that is not {SEED_BYTES} bytes")
    return seed


# ------------------------------------------------------------------ roles


async def _run_party(
    ch: Channel,
    *,
    left: bool,
    peer: str,
    dealer: str,
    planes: np.ndarray,
    count: int,
    bits: int,
    step: str,
    domain: bytes,
    rng: RandomSource | None,
) -> None:
    width = words(count)
    tstep = f"{step}.triples"
    msg = await ch.recv(dealer, step=tstep)
    if left:
        triples = _Triples(_seed_msg(msg, dealer, tstep, {"seed"}), domain, width, None)
    else:
        seed = _seed_msg(msg, dealer, tstep, {"seed", "c"})
        c = _words_msg(msg["c"], dealer, tstep, (sum(and_counts(bits)), width))
        triples = _Triples(seed, domain, width, c)
    gen = _evaluate(left, planes, bits, triples)
    # the output mask: the left draws it, the right gets it with round 0's openings
    out_mask = _random_words(rng, width) if left else np.zeros(width, dtype=np.uint64)
    mine = next(gen)
    rnd = 0
    while True:
        ostep = f"{step}.open{rnd}"
        rows = mine.shape[0]
        if rnd == 0 and left:
            await ch.send(peer, np.concatenate([mine, out_mask[None, :]]), step=ostep)
        else:
            await ch.send(peer, mine, step=ostep)
        got = await ch.recv(peer, step=ostep)
        extra = 1 if rnd == 0 and not left else 0
        got = _words_msg(got, peer, ostep, (rows + extra, width))
        if extra:
            out_mask, got = got[-1], got[:-1]
        try:
            mine = gen.send(got)
        except StopIteration as stop:
            share: np.ndarray = stop.value
            break
        rnd += 1
    await ch.send(dealer, share ^ out_mask, step=f"{step}.out")


async def compare_left(
    ch: Channel,
    *,
    peer: str,
    dealer: str,
    shares: np.ndarray,
    threshold: int,
    bits: int,
    step: str,
    domain: str,
    rng: RandomSource | None = None,
) -> None:
    """The left party's role: its shares ``x_L`` (uint64, modulo ``2^K``, ``bits < K <=
    64``), the public ``threshold`` ``c`` and ``bits`` (``|x - c| < 2^bits``). It learns
    nothing (module docstring). ``rng`` draws the output mask (default the OS CSPRNG).

    Raises ProtocolError naming the sender when the dealer's or the peer's message is
    malformed (type, keys, seed length, shape)."""
    x = _check_shares(shares)
    c, b = _check_threshold(threshold), _check_bits(bits)
    s, d, r = _check_step(step), _check_domain(domain), _check_rng(rng)
    if x.shape[0] == 0:
        return
    await _run_party(
        ch,
        left=True,
        peer=peer,
        dealer=dealer,
        planes=_planes(x, c, b),
        count=x.shape[0],
        bits=b,
        step=s,
        domain=d,
        rng=r,
    )


async def compare_right(
    ch: Channel, *, peer: str, dealer: str, shares: np.ndarray, bits: int, step: str, domain: str
) -> None:
    """The right party's role: its shares ``x_R`` (as for :func:`compare_left`). It learns
    nothing. Raises ProtocolError naming the sender of a malformed message."""
    x = _check_shares(shares)
    b, s, d = _check_bits(bits), _check_step(step), _check_domain(domain)
    if x.shape[0] == 0:
        return
    await _run_party(
        ch,
        left=False,
        peer=peer,
        dealer=dealer,
        planes=_planes(x, 0, b),
        count=x.shape[0],
        bits=b,
        step=s,
        domain=d,
        rng=None,
    )


async def compare_dealer(
    ch: Channel,
    *,
    left: str,
    right: str,
    count: int,
    bits: int,
    step: str,
    domain: str,
    rng: RandomSource | None = None,
) -> np.ndarray:
    """The dealer's role: deals the triples of ``count`` decisions and returns the boolean
    array ``[x_k >= c]``. ``rng`` draws the two seeds (default the OS CSPRNG).

    Raises ProtocolError naming the sender of a malformed output share."""
    n = v.check_int("count", count, minimum=0)
    b, s, d, r = _check_bits(bits), _check_step(step), _check_domain(domain), _check_rng(rng)
    if n == 0:
        return np.zeros(0, dtype=bool)
    width = words(n)
    seed_l, seed_r = r.random_bytes(SEED_BYTES), r.random_bytes(SEED_BYTES)
    await ch.send(left, {"seed": seed_l}, step=f"{s}.triples")
    await ch.send(right, {"seed": seed_r, "c": _deal(seed_l, seed_r, d, b, width)}, step=f"{s}.triples")
    ostep = f"{s}.out"
    o_l = _words_msg(await ch.recv(left, step=ostep), left, ostep, (width,))
    o_r = _words_msg(await ch.recv(right, step=ostep), right, ostep, (width,))
    return _unpack(o_l ^ o_r, n)


# ------------------------------------------------------------------ in memory


class Evaluation(NamedTuple):
    """:func:`evaluate`'s result: the decisions and every message each role received."""

    decisions: np.ndarray
    left_received: list[np.ndarray]  # the right's openings, round by round
    right_received: list[np.ndarray]  # the left's openings (round 0 with the output mask row)
    dealer_received: tuple[np.ndarray, np.ndarray]  # the two output shares


def evaluate(
    left_shares: np.ndarray,
    right_shares: np.ndarray,
    *,
    threshold: int,
    bits: int,
    domain: str = "test",
    rng: RandomSource | None = None,
    left_rng: RandomSource | None = None,
) -> Evaluation:
    """The three roles in memory, on the same code as the async roles (message for
    message): for tests and for checking a batch against the plaintext rule. ``rng`` draws
    the dealer's seeds, ``left_rng`` the left's output mask (default: ``rng``)."""
    xl, xr = _check_shares(left_shares), _check_shares(right_shares)
    if xl.shape != xr.shape:
        raise PrivregValueError(
            f"left_shares and right_shares must hold one share per decision each; got {xl.shape[0]} and {xr.shape[0]}."
        )
    c, b, d, r = _check_threshold(threshold), _check_bits(bits), _check_domain(domain), _check_rng(rng)
    n = xl.shape[0]
    width = words(n)
    seed_l, seed_r = r.random_bytes(SEED_BYTES), r.random_bytes(SEED_BYTES)
    gens = (
        _evaluate(True, _planes(xl, c, b), b, _Triples(seed_l, d, width, None)),
        _evaluate(False, _planes(xr, 0, b), b, _Triples(seed_r, d, width, _deal(seed_l, seed_r, d, b, width))),
    )
    mask = _random_words(r if left_rng is None else _check_rng(left_rng), width)
    got: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    msgs = [next(g) for g in gens]
    shares: list[np.ndarray] = []
    while not shares:
        sent = [np.concatenate([msgs[0], mask[None, :]]) if not got[1] else msgs[0], msgs[1]]
        got[0].append(sent[1])
        got[1].append(sent[0])
        step_out = []
        for k, g in enumerate(gens):
            peer = sent[1 - k][: msgs[1 - k].shape[0]]
            try:
                step_out.append(g.send(peer))
            except StopIteration as stop:
                shares.append(stop.value)
        if not shares:
            msgs = step_out
    outs = (shares[0] ^ mask, shares[1] ^ mask)
    return Evaluation(_unpack(outs[0] ^ outs[1], n), got[0], got[1], outs)
