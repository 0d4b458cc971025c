"""A memory estimate of clk-dice (:mod:`~privreg.plugins.pprl.dice_protocol`) per role.

Defaults (issue #33): ``blocking="relay"`` and ``comparison="dealer"``. Under relay a data
party's blocking transient is its words, their keyed orders, the collision groups and the
candidates formed from them a chunk at a time: measured :data:`RELAY_PARTY_BYTES` per word
(``W = J + F`` words per record; int32 groups and orders, each side of the groups dropped
once indexed), plus one chunk of :data:`RELAY_CHUNK` pairs; the linkage unit holds every
party's words (``8 W m n``) and, per pair, finds the collision groups in passes over the
word space (:func:`~privreg.plugins.pprl.relay_blocking.relay_entry`): measured
:data:`RELAY_LU_BYTES` per word of one party, then sends each left party a bit per own
position and 8 bytes per peer position in a shared word, for every pair it is left of, held
twice while sent (the message and its encoding, :func:`privreg.mpc.wire.encode_buffer`)
(``benchmarks/pprl_relay_memory.py``: 39.8 and 15.4 bytes per word at 20,000 records per
party). Under ``comparison="dealer"`` a batch of decisions holds packed bits (at most
:data:`DEALER_BYTES` per decision), not DGK ciphertexts. At 3 x 1M records, ``F = 2``
(FEBRL_CLK_SCHEMA's exact passes), ``c = 3``, a data party and the linkage unit need
4.3 and 3.1 GB at ``J = 64`` (the band rule's ``J`` at 1M records for a median popcount of
about 350 in 1,024 bits), 6.5 and 5.1 GB at ``J = 113`` (about 450), 8.6 and 7.2 GB at
``J = 161`` (about 500), 11.1 and 9.6 GB at ``J = 219`` (544: the synthetic population's
CLKs), 14.5 and 12.8 GB at ``J = 296`` (about 560), and 15.4-15.9 and
13.7-14.1 GB at ``J = 316-326`` (569-573: FEBRL 4's CLKs). So 3 x 1M fits in 16 GB per
role up to ``J`` of about 325 (a median popcount of about 575); at 5 parties the linkage
unit (left of two pairs, holding five word lists) fits up to ``J`` of about 200. The terms
below are those of ``blocking="linkage-unit"`` and ``comparison="dgk"``, the mode before.

:func:`memory_estimate` adds, per role, what is held for the whole run and the largest
transient of one phase (phases do not overlap). ``m`` records per data party, ``n``
parties, ``c`` dealt candidate pairs per record and peer (dummies included; at least 1
at the default ``pad=1``), ``L`` filter bits, ``J`` bands, ``F`` exact passes, ``C`` =
:data:`~privreg.crypto.beaver.CHUNK_PAIRS`, ``B`` = ``BATCH_DECISIONS``:

Data party, held: the CLKs (``m L`` bytes, numpy booleans; the block filters are the same
array), popcounts (``8 m``), per peer the deal (pairs and Beaver shares, ``24 c m``) and
its inner-product shares (``8 c m``). Transient, the largest of: blocking (the band
tokens' computation, measured :data:`BAND_TOKEN_BYTES` per token of a chunk of
:data:`~privreg.plugins.pprl.bands.TOKEN_CHUNK` tokens, plus the tokens message
``8 (J + F) m``); the masked exchange (per chunk its own masks, the masked rows sent and
received, ``3 x 8 L C``, and the pairwise products, 32 MiB); a threshold batch (``B``
decisions of ``D (2^k - 1) + D`` DGK ciphertexts, each held as a Python integer and once
serialised, :func:`ciphertext_held_bytes`).

Linkage unit, held: every party's tokens (``8 (J + F) m n``) and per pair of parties its
deal (pairs, dummy flags and both Beaver shares, ``33 c m``) and decisions (``c m``).
Transient, the largest of: the candidate join of one pair of parties (measured
:data:`JOIN_BYTES` per token of both parties), the dealer's chunk (``2 x 8 L C`` plus
products) and a threshold batch.

The measured constants come from ``tracemalloc`` on this repository's blocking
(``band_tokens``, ``candidate_pairs``: 20,000 records per party, ``J = 40``); the other
terms are array sizes. ``benchmarks/pprl_decisions.py`` prints the estimate next to a
run's measured peak. At 3 x 1M records, ``c = 3``, ``J = 64``, ``F = 16``, ``L = 1024``
(``J`` is 51-113 for median popcounts 250-450 at 1M records): a data party needs about
2.2 GB (CLKs 1.0, deals and shares 0.2, the largest transient 1.0: the tokens), within
16 GB; the linkage unit about 16.3 GB, of which 14.1 GB is the candidate join's transient
(:func:`~privreg.plugins.pprl.bands.candidate_pairs` over 2 x 64 M tokens) and 1.9 GB the
tokens. Before masks were expanded per chunk, every party held ``8 L`` bytes per record
and peer (8 GiB per peer at 1M records) and the dealer twice that per pair of parties.
"""

from __future__ import annotations

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.crypto import beaver
from privreg.crypto.threshold import DIGIT_BITS
from privreg.plugins.pprl.bands import TOKEN_CHUNK, pair_roles

__all__ = [
    "BAND_TOKEN_BYTES",
    "JOIN_BYTES",
    "RELAY_PARTY_BYTES",
    "RELAY_LU_BYTES",
    "DEALER_BYTES",
    "ciphertext_held_bytes",
    "MemoryEstimate",
    "memory_estimate",
]

#: Peak bytes per band token while a data party computes its tokens (measured).
BAND_TOKEN_BYTES = 340
#: Peak bytes per token (of both parties) of the linkage unit's candidate join (measured).
JOIN_BYTES = 110
#: Peak bytes per word of a data party's relay blocking, from its band tokens to its
#: candidates (tokens, words, orders, the groups it receives and their checks, the peer's
#: order, relay_candidates' index; measured 39.8 with small chunks at 20,000 records,
#: ``benchmarks/pprl_relay_memory.py``).
RELAY_PARTY_BYTES = 44
#: Peak bytes per word (of one party) of the linkage unit's relay_entry of one pair,
#: its result included (measured 15.4).
RELAY_LU_BYTES = 18
#: Pairs per chunk of relay_candidates and the bytes per pair of a chunk's transient
#: (measured 43.3 at 20,000 records, where one chunk held all 3.6 M pairs met).
RELAY_CHUNK = 1 << 22
RELAY_CHUNK_BYTES = 48
#: A bound on the bytes per decision of a dealer-comparison batch (packed bits: a and b
#: shares, corrections, openings, about 50 bytes measured from the circuit's 42 ANDs).
DEALER_BYTES = 512
#: Bytes per DGK ciphertext in flight: a Python integer of the key size (``k / 8 + 48``)
#: and its serialised copy (``k / 8``).
CIPHERTEXT_HELD_BYTES_EXTRA = 48
_PRODUCTS = 32 << 20  # two chunks of pairwise products in beaver._pair_dots


def _most_left_pairs(n: int) -> int:
    """The most pairs any of ``n`` data parties is the left party of (:func:`bands.pair_roles`)."""
    return max(sum(1 for j in range(n) if j != i and pair_roles(min(i, j), max(i, j))[0] == i) for i in range(n))


def ciphertext_held_bytes(key_bits: int) -> int:
    """Bytes per DGK ciphertext held in a threshold batch (integer and serialised copy)."""
    return 2 * (key_bits // 8) + CIPHERTEXT_HELD_BYTES_EXTRA


@attrs.frozen(kw_only=True)
class MemoryEstimate:
    """Bytes per role: ``held`` for the whole run, ``transient`` per phase (the largest
    counts), and ``peak`` = held + largest transient."""

    data_party_held: dict[str, int]
    data_party_transient: dict[str, int]
    linkage_unit_held: dict[str, int]
    linkage_unit_transient: dict[str, int]

    @property
    def data_party_peak(self) -> int:
        return sum(self.data_party_held.values()) + max(self.data_party_transient.values())

    @property
    def linkage_unit_peak(self) -> int:
        return sum(self.linkage_unit_held.values()) + max(self.linkage_unit_transient.values())


def memory_estimate(
    *,
    records: int,
    parties: int = 3,
    candidates_per_record: float = 3.0,
    filter_length: int = 1024,
    bands: int = 64,
    exact_passes: int = 16,
    key_bits: int = 2048,
    comparison_bits: int = 16,
    batch_decisions: int = 16_384,
    chunk_pairs: int | None = None,
    blocking: str = "relay",
    comparison: str = "dealer",
) -> MemoryEstimate:
    """The memory of each role of a clk-dice run (module docstring), in bytes.

    ``records`` per data party; ``candidates_per_record``: dealt pairs per record and peer
    (dummies included); ``comparison_bits``: the protocol's ``x_bits`` (16 at the default
    levels); ``chunk_pairs``: default :data:`~privreg.crypto.beaver.CHUNK_PAIRS`;
    ``blocking`` ``"relay"`` or ``"linkage-unit"``, ``comparison`` ``"dealer"`` or ``"dgk"``
    (the protocol's options)."""
    if blocking not in ("relay", "linkage-unit"):
        raise PrivregValueError(f"blocking must be 'relay' or 'linkage-unit'; got {blocking!r}")
    if comparison not in ("dealer", "dgk"):
        raise PrivregValueError(f"comparison must be 'dealer' or 'dgk'; got {comparison!r}")
    m = v.check_int("records", records, minimum=1)
    n = v.check_int("parties", parties, minimum=2)
    c = v.check_real("candidates_per_record", candidates_per_record)
    if c < 0:
        raise PrivregValueError(f"candidates_per_record must be >= 0; got {c}; pass the dealt pairs per record")
    L = v.check_int("filter_length", filter_length, minimum=1)
    J = v.check_int("bands", bands, minimum=1)
    F = v.check_int("exact_passes", exact_passes, minimum=0)
    kb = v.check_int("key_bits", key_bits, minimum=1)
    bits = v.check_int("comparison_bits", comparison_bits, minimum=1)
    B = v.check_int("batch_decisions", batch_decisions, minimum=1)
    C = beaver.CHUNK_PAIRS if chunk_pairs is None else v.check_int("chunk_pairs", chunk_pairs, minimum=1)
    pairs = int(c * m)  # per pair of parties
    digits = -(-bits // DIGIT_BITS)
    batch = B * digits * 2**DIGIT_BITS * ciphertext_held_bytes(kb)  # thermometer + terms
    if comparison == "dealer":
        batch = B * DEALER_BYTES
    tokens = 8 * (J + F) * m
    words = (J + F) * m
    relay = blocking == "relay"
    party_blocking = {"blocking": BAND_TOKEN_BYTES * min(J * m, TOKEN_CHUNK) + tokens}
    lu_blocking = {"candidate join": JOIN_BYTES * 2 * J * m}
    if relay:
        # a message sent is held once more, encoded (privreg.mpc.wire.encode_buffer): the word
        # list and its encoding, with the keyed order, before the groups arrive
        party_blocking["relay"] = max(RELAY_PARTY_BYTES * words, (2 * 8 + 4) * words) + RELAY_CHUNK_BYTES * RELAY_CHUNK
        # one party's groups message: per pair it is left of, a bit per own position and
        # (group, position) rows of the peer's positions in a shared word (every one at most;
        # int32 below 2^31 positions). Held while the next pair's are found, and once more,
        # encoded, when it is sent
        left, row = _most_left_pairs(n), 8 if words < 2**31 else 16
        groups = row * words + -(-words // 8)
        lu_blocking = {
            "relay groups": max(RELAY_LU_BYTES * words + groups * (left - 1), 2 * groups * left),
        }
    return MemoryEstimate(
        data_party_held={
            "clks": m * L,
            "popcounts": 8 * m,
            "deals": 24 * pairs * (n - 1),
            "shares": 8 * pairs * (n - 1),
        },
        data_party_transient={
            **party_blocking,
            "masked exchange": 3 * 8 * L * min(C, pairs) + _PRODUCTS,
            "threshold batch": batch,
        },
        linkage_unit_held={
            "words" if relay else "tokens": n * tokens,
            "deals": 33 * pairs * n * (n - 1) // 2,
            "decisions": pairs * n * (n - 1) // 2,
        },
        linkage_unit_transient={
            **lu_blocking,
            "dealer chunk": 2 * 8 * L * min(C, pairs) + _PRODUCTS,
            "threshold batch": batch,
        },
    )
