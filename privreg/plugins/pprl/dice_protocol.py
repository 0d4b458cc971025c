"""The recommended record-linkage protocol: CLKs, keyed LSH bands and secure Dice
threshold decisions between n data parties and a linkage unit.

Flow (transcript step names in quotes):

1. ``"keys"``, ``"keys-dgk"`` (``comparison="dgk"`` only): the linkage unit sends every
   data party its Paillier public key and its DGK public key (2048 bits each unless
   ``insecure_allow_small_keys``). Under the default ``comparison="dealer"`` no key is
   generated or sent.
2. ``"popcount"`` (without explicit ``bands``): the data parties send each other their
   median CLK popcount and derive the same bands from the largest. ``"tokens"``: each
   party encodes its records as CLKs (:mod:`clk`) and sends, per record and band, a keyed
   band token (:mod:`bands`), and per exact blocking pass a keyed token of the pass's
   values (:func:`clk.exact_keys`). No filter leaves a party.
3. The linkage unit forms the candidate pairs of every pair of parties (records sharing
   at least ``min_shared`` band tokens, or an exact-pass token), pads them with dummy pairs
   for records with no candidate (``pad``, :mod:`padding`: a data party cannot tell from
   its deal which of its records have a real candidate; the linkage unit discards the
   dummies' decisions) and deals, per pair of parties, the correlated
   randomness of a Beaver inner product (:mod:`privreg.crypto.beaver`): ``"deal"`` gives
   each party a 32-byte mask seed and, per candidate pair, its share of ``<u_a, v_b>``.
4. ``"masked"`` (then ``"masked.<k>"``): the two parties of each pair exchange their
   masked CLKs peer to peer (``a + u_a mod 2^60``, a one-time pad) and compute additive
   shares of ``<a, b>`` for each candidate pair, a chunk of
   :data:`~privreg.crypto.beaver.CHUNK_PAIRS` candidate pairs at a time: masks are
   expanded only for the chunk's rows (the dealer's too), so no party holds a mask per
   record (memory: :mod:`~privreg.plugins.pprl.dice_memory`).
5. ``"cmp-<level>"``: per pair of parties, each party holds a share modulo ``2^60`` of
   ``x = 2 den <a, b> - num (|a| + |b|) + 2 num L`` (``Dice >= num / den`` iff ``x >= 2
   num L``; ``|a|, |b|`` never leave their owners), and the linkage unit learns only
   ``[Dice >= num / den]`` per candidate pair, by one of two ``comparison`` backends:

   - ``"dealer"`` (the default; :mod:`privreg.crypto.dealer_compare`): the linkage unit
     deals Beaver AND triples (``"cmp-<level>.triples"``: a 32-byte SHAKE-256 seed to each
     party, and the right party's correction bits), the two data parties evaluate a
     greater-than circuit on their XOR-shared bits peer to peer (``".open<r>"``: 5 rounds
     at 14 bits, one message per round and direction for a batch of
     :data:`BATCH_DECISIONS`), and each sends the linkage unit its output share
     (``".out"``, one bit per decision, masked by a bit the left party draws): their XOR
     is the decision. The linkage unit sees no opening; the data parties see openings
     masked by triple bits they do not hold and no output. No public-key operation:
     about 0.45 CPU-ms per decision for the whole run at 3 x 2,000 (blocking included;
     ``benchmarks/pprl_decisions.py``).
   - ``"dgk"`` (the previous mode), ``"shares-<level>"`` then ``"cmp-<level>"``: the
     *right* party packs its shares into Paillier plaintexts, encrypts them under the
     linkage unit's key and sends them to the *left* party, which adds its own shares and
     runs the packed threshold comparison (:mod:`privreg.crypto.threshold`) with the
     linkage unit.
6. Levels: pairs whose connected component of accepted pairs holds two records of one
   party (a conflict) are decided again at the stricter ``levels`` (0.8, 0.85, 0.9,
   0.95), so the solver can prefer the more similar pairs.
7. The linkage unit turns the decisions into groups (:func:`solver.greedy_groups`) and
   sends each party ``"result"``: its linked records and their group ids (random 62-bit
   numbers, the linkage unit's output ``group_ids``).

Blocking modes (``blocking``). Under ``"linkage-unit"`` steps 2-3 run as above, and the
linkage unit can estimate every candidate pair's Dice from the number of band tokens the
two records share (Spearman 0.97-0.98 on FEBRL 4). Under ``"parties"``
(:mod:`party_blocking`, issue #33) the tokens never reach it: each data party first passes
its tokens through the linkage unit's oblivious PRF (``"oprf-blinded"``,
``"oprf-evaluated"``: the linkage unit sees only blinded group elements, :mod:`oprf`), then
each pair of data parties exchanges them re-keyed with a pair key (``"pair-tokens"``, in a
private row order, with a check of the two parties' OPRF outputs),
both compute the same candidate pairs in the same keyed order (the pair's *slots*) and
send the linkage unit only their count and a keyed digest (``"candidates"``; it refuses to
deal when the two differ). The deal, the masked CLKs and the shares are per slot (a fresh
mask per slot, so a record's CLK is sent once per slot), and after the base decisions the
linkage unit asks each party for its record of every accepted slot (``"resolve"``,
``"resolved"``), which it needs for the conflicts and the groups; the rest is unchanged.
There is no membership padding under ``"parties"`` (the data parties compute their
candidates themselves, so dummies would hide nothing from them). Under ``"relay"`` (the
default; :mod:`relay_blocking`, issue #33) each data party sends the linkage unit its band
and exact tokens as one flat list in an order that links no word to a record or a band
(``"relay-tokens"``); the linkage unit finds the words each pair of parties shares and sends
the pair's *left* party only positions: a bit per own position in a shared word and, per
shared word, the peer's positions (``"relay-groups"``); the left party rebuilds the peer's
tokens where they equal its own, forms the candidate pairs with the same rule, pads the
right party's records that have none (``pad``), puts them in the pair's keyed slot order and
sends the right party its row of each slot (``"relay-slots"``). Both send the linkage unit
the slot count and a keyed digest, the left party also the dummy slots (``"candidates"``);
from there on it runs as ``"parties"`` (slots, ``"resolve"``), and the linkage unit
discards the dummies' decisions.

Correctness: under ``comparison="dealer"`` every decision is exact: the circuit adds the
low ``b + 1`` bits of the shares of ``x - 2 num L``, which lies in ``(-2^b, 2^b)``
(``b = _x_bits`` of the level), so bit ``b`` of the sum is its sign and no wrap can occur.
Under ``"dgk"`` the shares of ``x`` are taken modulo ``2^60`` and joined over the integers by
treating the left share as negative; this is exact unless the right share falls in
``[0, x]``, which has probability below ``2^(b + 1 - 60)`` per decision for ``x < 2^b``
(``b = 14`` at the default threshold 0.75: ``2^-45``; at most 16 at the default levels:
``2^-43``; 18 bits for a threshold such as 0.77). Each level is compared on its own ``b``
bits (``_x_bits`` of that level: fewer DGK digits for coarser levels). Such
a wrap makes the packed sum ``2^60`` too small, which shows up in the next slot of the
same ciphertext (a wrong decision there) or, in the last slot, as a ProtocolError.

Records with every field missing (an empty CLK) are never candidates: their band tokens
are replaced by fresh random words, and their exact-pass tokens are 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.params import Spec, check_params
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import beaver, counting, dealer_compare
from privreg.crypto.channel import (
    RoleParty,
    insecure_key_allowed,
    recv_encrypted,
    recv_public_key,
    require_input,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.dgk import (
    MIN_T,
    DgkKeypair,
    generate_dgk_keypair,
    recv_dgk_public_key,
    send_dgk_public_key,
)
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS, MIN_KEY_BITS, PaillierKeypair, generate_paillier_keypair
from privreg.crypto.threshold import DIGIT_BITS, slot_layout, threshold_holder, threshold_keyholder
from privreg.crypto.vector import encrypt
from privreg.plugins.pprl.bands import (
    MIN_SHARED,
    BandConfig,
    band_tokens,
    candidate_pairs,
    exact_pairs,
    pair_orientation,
    pair_roles,
    recommended_bands,
    union_pairs,
)
from privreg.plugins.pprl.message_bounds import OVERHEAD, ciphertext_bytes, header_bytes, public_key_bytes, step_kind
from privreg.plugins.pprl.oprf import ELEMENT_BYTES, OprfKey, blind, finalize
from privreg.plugins.pprl.padding import check_pad, pad_candidates
from privreg.plugins.pprl.party_blocking import (
    CANARIES,
    DIGEST_BYTES,
    canary_check,
    canary_rows,
    check_pair_tokens,
    oprf_rows,
    pair_key,
    pair_tokens,
    private_order,
    slot_digest,
    slot_order,
    slot_permutation,
)
from privreg.plugins.pprl.protocol import LINKAGE_UNIT, check_record_counts, data_party_names
from privreg.plugins.pprl.records import EncodedRecords, check_party_records
from privreg.plugins.pprl.relay_blocking import (
    check_groups,
    position_order,
    relay_candidates,
    relay_entry,
    relay_words,
)
from privreg.plugins.pprl.solver import conflict_pairs, greedy_groups
from privreg.timing import PhaseTimer

__all__ = [
    "DiceLinkageProtocol",
    "LINKAGE_UNIT",
    "DEFAULT_LEVELS",
    "LU_SEES",
    "LU_SEES_PARTIES",
    "LU_SEES_RELAY",
    "BLOCKINGS",
    "DEFAULT_BLOCKING",
    "COMPARISONS",
    "DEFAULT_COMPARISON",
    "run_candidates",
]

#: The stricter thresholds at which conflicting pairs are decided again.
DEFAULT_LEVELS = (0.8, 0.85, 0.9, 0.95)
#: The fraction of candidate-less records given dummy candidates (:mod:`padding`).
DEFAULT_PAD = 1.0
#: Where the candidate pairs are formed: by the linkage unit from every party's band
#: tokens, or by each pair of data parties among themselves (:mod:`party_blocking`).
BLOCKINGS = ("linkage-unit", "parties", "relay")
#: Records a party may claim when neither record_counts nor max_records bounds them.
_MAX_CLAIMED_RECORDS = 1 << 40
DEFAULT_BLOCKING = "relay"  # the linkage unit cannot estimate similarity (issue #33)
#: How each threshold decision is computed: a boolean circuit on XOR-shared bits with
#: Beaver AND triples dealt by the linkage unit (:mod:`privreg.crypto.dealer_compare`), or
#: Paillier-packed shares and a DGK comparison (:mod:`privreg.crypto.threshold`, the
#: previous mode). Same trust assumption (the linkage unit colludes with no data party).
COMPARISONS = ("dealer", "dgk")
DEFAULT_COMPARISON = "dealer"
#: What the linkage unit sees (for reports).
LU_SEES = (
    "under blocking='linkage-unit': every data party's record count; keyed band tokens and "
    "keyed exact-field tokens (which records share a "
    "band key, a date of birth, an id, within a party too), the candidate pairs, one decision Dice >= threshold"
    " per candidate pair and, for pairs in conflicting clusters, which stricter levels they reach; without "
    "explicit bands, the number of bands (a function of the data parties' largest median popcount). Never a "
    "filter or a record's popcount, but the number of band tokens two records share estimates their Dice "
    "similarity: on FEBRL 4 (3 x 5,000) Spearman 0.97-0.98 over about 16,000 candidate pairs, mean absolute "
    "error 0.002 for pairs sharing >= 5 bands, and all of the about 11,200 pairs sharing >= 10 bands are true "
    "matches (benchmarks/pprl_leakage.py); the same for near-duplicates within one party. The comparison messages "
    "(two masked output-share bits per decision under comparison='dealer', masked decryptions under 'dgk') "
    "add nothing to this (blocking='relay', the default, and 'parties' give it none of this: LU_SEES_RELAY, "
    "LU_SEES_PARTIES)"
)
#: What the linkage unit sees under ``blocking="relay"`` (the default).
LU_SEES_RELAY = (
    "every data party's record count (declared) and its m (J + F) keyed band and exact-pass words (the number of "
    "bands J is a function of the largest median popcount) in an order it cannot map to records or bands (rows in "
    "a fresh private order, positions permuted by a key of the data parties); per pair of data parties, which "
    "positions of the two lists carry equal words (so how many records of each side hold each shared band or "
    "exact value: frequency classes, never whose); from the words a party sends more than once, how many pairs of "
    "its own records share a band or exact value, never which (a party holding near-duplicates shows more repeats); "
    "the number of candidate pairs and of dummies, a keyed digest of "
    "the slot list, no token of a candidate and no record of one; one decision Dice >= threshold per slot (a "
    "dummy's discarded), then the two records of every accepted real slot only and, for pairs in conflicting "
    "clusters, which stricter levels they reach. It never holds two words of one record together, so the "
    "shared-band count of blocking='linkage-unit' is not available to it: before the decisions its best estimator "
    "of Dice (a slot's position) has Spearman -0.014 and -0.000 over the candidate pairs on FEBRL 4's two files "
    "and 3 x 5,000, and beyond the decisions the accepted graph's degrees rank the accepted pairs with Spearman "
    "-0.007 and -0.009 (benchmarks/pprl_blocking.py, tests/test_pprl_relay_blocking.py); the decision itself ranks "
    "them as a threshold does (0.67-0.69 there). These figures need many candidates per pair of parties: with a "
    "pair's total of shared positions and its real candidate count it knows the mean shared-band count, which for a "
    "pair of one-record parties is the single candidate's (tests/test_pprl_relay_adversary.py: Spearman 0.96 over "
    "12 such pairs, 0.07 at about 30 records per party). It links two records of one party only through accepted "
    "pairs with a common record of another party (a conflict)"
)
#: What the linkage unit sees under ``blocking="parties"``.
LU_SEES_PARTIES = (
    "every data party's record count (declared); from each data party, its OPRF query: m (J + F) + 4 (n - 1) "
    "uniformly random group elements (blinded; their number tells it the bands J, a function of the largest "
    "median popcount, and F the exact passes); per pair of data parties the number of candidate pairs and a "
    "keyed digest of their list, no token and no record of any candidate; one decision Dice >= threshold per "
    "candidate (an opaque slot in a keyed pseudorandom order), then the two records of every accepted slot only "
    "(to form the groups it outputs) and, for pairs in conflicting clusters, which stricter levels they reach. "
    "Before the decisions the best estimator of Dice from what it holds (a slot's position; the blinded elements "
    "are independent of the data) has Spearman -0.026 and -0.010 over the candidate pairs on FEBRL 4's two files "
    "and 3 x 5,000 (-0.08 on the test's synthetic data), and beyond the decisions the degrees of the accepted "
    "graph rank the accepted pairs with Spearman -0.017 and 0.015 (benchmarks/pprl_blocking.py, "
    "tests/test_pprl_party_blocking.py); the decision itself ranks them as a threshold does (Spearman 0.69-0.72 "
    "there, in either mode). It links two records of one party only through "
    "accepted pairs with a common record of another party (a conflict)"
)
_SIGMA = 40
#: DGK subgroup size t: 224 bits match a 2048-bit modulus (112-bit security; the best
#: known attack on DGK with t-bit subgroups costs about 2^(t/2), Coron et al., PKC 2011).
DGK_T = 224
_MAX_BANDS = 1024
#: Decisions per threshold batch: bounds every party's memory (about 30 DGK ciphertexts
#: of the key size per decision are in flight) and every message.
BATCH_DECISIONS = 16_384


def _fraction(name: str, x: Any) -> Fraction:
    t = v.check_real(name, x)
    if not 0.0 < t < 1.0:
        raise PrivregValueError(f"{name} must be a Dice similarity strictly between 0 and 1; got {t}")
    return Fraction(t).limit_denominator(100)


def _level_terms(level: Fraction, length: int) -> tuple[int, int, int, int]:
    """``(2 den, num, offset, threshold)`` of ``x = 2 den <a,b> - num (|a| + |b|) + offset``."""
    num, den = level.numerator, level.denominator
    return 2 * den, num, 2 * num * length, 2 * num * length


def _x_bits(levels: Sequence[Fraction], length: int) -> int:
    """Bits of ``x`` at every level: ``x <= 2 den L``."""
    return max((2 * lv.denominator * length).bit_length() for lv in levels)


def _array(payload: Any, key: str, frm: str, *, kind: str, ndim: int) -> np.ndarray:
    x = payload.get(key) if isinstance(payload, Mapping) else None
    if not isinstance(x, np.ndarray) or x.ndim != ndim or (x.size and x.dtype.kind not in kind):
        raise ProtocolError(f"{frm!r} sent a malformed {key!r} (expected a {ndim}-D {kind} array).")
    return x


# the registry's parameters (the other arguments are for Python callers)
_Parties = Annotated[int | Sequence[str], Spec(type=int, minimum=2, doc="number of data parties (P1..Pn)")]
_Threshold = Annotated[
    float, Spec(minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True, doc="Dice threshold of a match")
]
_KeyBits = Annotated[int, Spec(minimum=MIN_INSECURE_KEY_BITS, doc="Paillier and DGK modulus bits")]
_Insecure = Annotated[bool, Spec(doc="allow keys below 2048 bits (INSECURE; tests only)")]


class DiceLinkageProtocol(Protocol):
    """Linkage of n parties' CLKs with secure Dice threshold decisions (module docstring).

    Args:
        parties: the number of data parties (named ``P1..Pn``) or their names.
        records: ``{party: EncodedRecords}`` (CLKs in ``match_filters``) for the parties
            hosted in this process.
        secret: the data parties' shared secret (CLK keys, band positions and tokens).
        bands: the LSH banding; default (None): :func:`bands.recommended_bands` at the
            largest of the data parties' median CLK popcounts, which they exchange peer to
            peer (step ``"popcount"``; the linkage unit never sees it).
        threshold: the Dice threshold of a match (0.75); ``levels``: stricter thresholds
            for conflicting pairs (default 0.8, 0.85, 0.9, 0.95; empty: none).
        merge_fraction: see :func:`solver.greedy_groups`.
        key_bits: Paillier and DGK modulus size (2048, with DGK subgroups of
            :data:`DGK_T` = 224 bits; smaller only with
            ``insecure_allow_small_keys=True``); ``keypair``/``dgk_keypair``: keys to use
            instead of fresh ones (the linkage unit's, e.g. cached test keys).
        rng: randomness (keys, seeds, masks); default the OS CSPRNG. ``workers``:
            processes for the comparisons (None: automatic).
        max_records: public cap on a data party's records (bounds every message).
        record_counts: ``{data party: records}``, the run's declared record counts (the
            same at every party); a hosted party must hold exactly that many. With them
            (else with ``max_records``) every message is bounded per kind
            (:meth:`message_bound`, formulas in :mod:`~privreg.plugins.pprl.message_bounds`).
        exact_passes: at most this many exact blocking passes per record (the tokens
            message; the deployment gives its schema's count).
        pad: the fraction of records with no candidate at a peer that get dummy candidates
            (:mod:`~privreg.plugins.pprl.padding`), in [0, 1], under
            ``blocking="linkage-unit"`` only; default there :data:`DEFAULT_PAD` = 1: every
            record has a candidate at every peer. Cost: one secure decision per
            dummy, measured 1.15x the base decisions on FEBRL 4, 3 x 5,000 (2,409 dummies
            over 16,333 candidate pairs; 1.20x on the synthetic data of
            ``benchmarks/pprl_padding.py``); membership advantage (TPR - FPR of "has a
            candidate") 0.65 at 0, 0.31 at 0.5, 0 at 1, and 0.05 for the best test on
            candidate counts at 1. Dummies are drawn from ``rng`` (the OS CSPRNG by default).
        blocking_backend: where band tokens and candidate pairs are computed
            (:class:`~privreg.plugins.pprl.spark.SparkBlocking` for Spark; default: in
            this process). The exact passes are joined in this process, and under
            ``blocking="relay"`` the candidate pairs too (from the collision groups,
            :func:`relay_blocking.relay_candidates`, a chunk at a time).
        blocking: who forms the candidate pairs (:data:`BLOCKINGS`; module docstring):
            ``"linkage-unit"`` from every party's band tokens, or ``"parties"``, each pair
            of data parties among themselves (the linkage unit gets only counts and digests;
            the data parties see each other's re-keyed tokens: the caveats). ``pad`` is for
            ``"linkage-unit"`` only (default 1 there, 0 and refused otherwise under ``"parties"``).
        comparison: how each threshold decision is computed (:data:`COMPARISONS`; module
            docstring, step 5): ``"dealer"`` (default), a boolean circuit on AND triples the
            linkage unit deals (:mod:`privreg.crypto.dealer_compare`; exact, no key: ``key_bits``,
            ``keypair`` and ``dgk_keypair`` are unused), or ``"dgk"``, Paillier-packed shares and
            a DGK comparison (:mod:`privreg.crypto.threshold`, the previous mode). Both rest on
            the linkage unit colluding with no data party.
        progress: a :data:`~privreg.core.progress.ProgressCallback`, where the linkage
            unit runs: phases ``"blocking"`` (pairs of parties), ``"secure decisions"``
            and ``"stricter levels"`` (decisions, reported after each batch of
            :data:`BATCH_DECISIONS`). Counts only: what the linkage unit learns anyway.
    """

    name = "clk-dice"
    caveats = (
        "Semi-honest parties; the linkage unit colludes with no data party: it deals the masks of the Beaver "
        "inner products and, under comparison='dealer' (the default), the AND triples of the comparison circuit, "
        "so with the peer's masked CLK or circuit openings a colluding party could unmask the other's CLK or "
        "shares, and under comparison='dgk' a data party holding its shares under the linkage unit's key could "
        "have them decrypted. The data parties"
        " share the CLK and band secret. Under blocking='linkage-unit' (the end of this text says what changes "
        "under 'relay', the default, and 'parties') the linkage unit learns which records of which parties share a "
        "keyed "
        "band token (equality patterns of K-bit projections of the CLKs, and the records per party) or an "
        "exact-pass token (equal dates of birth or id numbers, within a party too: frequency classes, not "
        "values), the candidate pairs, one decision [Dice >= threshold] per candidate pair and, for pairs in a "
        "cluster with two records of one party, which of the stricter levels they reach; under comparison='dealer' it "
        "receives per decision two output-share bits whose XOR is the decision, each masked by a bit the left "
        "party draws (uniform), and never a circuit opening; under 'dgk' the masked values it "
        "decrypts are within 2^-40 statistical distance of independent of the similarities, and the DGK tests "
        "show only zero or not; without explicit bands, the number of bands tells it about the data parties' "
        "largest median popcount. It never receives a filter, a record's popcount or a Hamming distance, but it"
        " can estimate every candidate pair's similarity from the number of band tokens the two records share "
        "(measured on FEBRL 4, 3 x 5,000: Spearman 0.97-0.98 with the true Dice, error 0.002 for pairs sharing "
        ">= 5 bands; every pair sharing >= 10 bands is a true match; benchmarks/pprl_leakage.py, "
        "tests/test_pprl_leakage.py), and find near-duplicates within one party the same way. It learns every "
        "data party's record count. A data party learns every other data party's record count (sent with the "
        "median popcount when the bands are agreed) and, per other party, which of its records are candidates "
        "with which of the other's record indices (opaque positions), real and dummy alike: without padding "
        "(pad=0) a record with a candidate at a party predicts that this party holds the person (measured on "
        "FEBRL 4, 3 x 5,000 with 30 % of people held by some parties only: true-positive rate 1.000, "
        "false-positive rate 0.31-0.38); at the default pad=1 the linkage unit gives every record with no "
        "candidate at a peer dummy candidates (as many as a random candidate-holding record's real ones, decided "
        "securely like the real ones and then discarded; 1.15x the base secure decisions on that data), so every "
        "record has a candidate (true- and false-positive rate 1.000) and the best test on candidate counts keeps "
        "an advantage TPR - FPR of 0.05 (from 0.65; benchmarks/pprl_padding.py), and, as its output, which"
        " of its records were linked and under which group id (random); from the refine message, which of its "
        "candidate pairs were accepted and lie in a conflicting cluster; without explicit bands, the other data"
        " parties' median popcount; from its candidates, whether each exact pass was kept for that pair of "
        "parties (it is dropped when it yields more than 1.5 pairs per record of the smaller party, a count of "
        "equal keyed tokens the linkage unit holds anyway); everything else it receives is one-time padded (the"
        " peer's masked CLK, its Beaver share; under 'dealer' its triple seed and correction bits, and the "
        "peer's circuit openings, each XORed with a triple bit it does not hold; it sees no decision) or, under "
        "'dgk', encrypted under the linkage unit's keys. Under 'dealer' security rests on SHAKE-256 as a PRG "
        "for the masks and the triples alone (no key exists) and every decision is exact; under 'dgk' also on "
        "Paillier (DCR; DJN short exponents for public-key encryption) and the DGK subgroup assumptions, and "
        "each decision is exact except with probability below 2^-43 at the default levels. Not constant-time; "
        "running time depends on the number of candidate pairs. Network: "
        "over mutual TLS an eavesdropper learns message sizes and timing (hence record and candidate counts), "
        "no content. Malicious parties can corrupt decisions undetected; every received message is type- and "
        "range-checked and a malformed one stops the run naming its sender; every message kind is capped in size "
        "(message_bound: from the declared record counts, the CLK length and the key size, and after blocking "
        "from the candidate counts), so a peer can make a party allocate no more than a legitimate message of "
        "the run takes; the declared record counts are public to every party. Under blocking='parties' the "
        "linkage unit receives no token and no candidate's records, only blinded OPRF elements (LU_SEES_PARTIES), "
        "and every data party receives each peer's band and exact tokens from the linkage unit's OPRF (2HashDH on "
        "edwards25519's prime-order group: one-more gap Diffie-Hellman, random oracles), re-keyed for their pair: "
        "without the OPRF key it cannot evaluate the tokens of values it does not hold, so it cannot invert them by "
        "trying all values, but it sees which of its records share band or exact tokens with which of the peer's "
        "rows, so it reads the peer's band values (and dates of birth, ids) where it holds the same itself, "
        "estimates the Dice of every pair of its and the peer's records from the shared count (Spearman "
        "0.955-0.975 on FEBRL 4), finds near-duplicates within the peer, knows its real candidates (membership "
        "as at pad=0) and, from the resolve "
        "message, which of them were accepted. This holds for semi-honest parties: a data party that queries "
        "guessed values in place of its records can invert those (the query is capped at its declared records "
        "times the bands and exact passes), and a data party colluding with the linkage unit can evaluate the "
        "OPRF anywhere and invert every token. The OPRF costs about 0.55 CPU-ms per record and band or exact pass "
        "(PyNaCl; FEBRL 4: 760 CPU-s against 47 without it on the two files, 1,177 against 158 on 3 x 5,000). "
        "Under blocking='relay' (the default) the linkage unit receives every data party's band and exact tokens "
        "as one flat list in an order that links no word to a record or a band (rows in a fresh private order, "
        "positions permuted by a key of the data parties), finds the words each pair of parties shares and sends "
        "the pair's left party the positions of both sides per shared word, never a word; the left party rebuilds "
        "the peer's tokens where they equal its own, forms the candidate pairs by the same rule, gives the right "
        "party's records with no candidate dummies (pad, default 1) and sends the right party its row of each "
        "slot; the linkage unit then gets per pair a slot count, a keyed digest and the dummy slots, and after "
        "the decisions the records of the accepted real slots (LU_SEES_RELAY). It never holds two words of one "
        "record together, so it cannot count the bands two records share: its best Dice estimator over the "
        "candidate pairs has Spearman -0.014 and -0.000 on FEBRL 4's two files and 3 x 5,000 (0.96-0.98 under "
        "'linkage-unit'; it needs many candidates per pair of parties: for one-record parties the pair's mean "
        "shared-band count is the candidate's, Spearman 0.96 over 12 such pairs); from the collision groups it learns, "
        "per pair of parties, how many records of each side hold each shared band or exact value (frequency classes, "
        "not whose), and from a party's repeated words how many pairs of its records share a value (not which). "
        "The left party of a pair learns what "
        "a data party learns under 'parties' (which of its records share band or exact tokens with which of the "
        "peer's rows: the peer's value wherever it holds the same itself, a Dice estimate per pair from the shared "
        "count, Spearman 0.96-0.98 on FEBRL 4, near-duplicates within the peer, and its real candidates: "
        "membership as at pad=0) but never a peer token, so it cannot invert one by trying values; the right party "
        "learns only its row of each slot, real or dummy (membership hidden as under 'linkage-unit' at the same "
        "pad). Left and right alternate with the party indices, so each data party is left of about half of its "
        "peers. Semi-honest: a linkage unit colluding with a data party learns the permutations and with them the "
        "shared-band counts."
    )

    @check_params
    def __init__(
        self,
        *,
        parties: _Parties = 3,
        records: Mapping[str, EncodedRecords] | None = None,
        secret: bytes | None = None,
        bands: BandConfig | None = None,
        threshold: _Threshold = 0.75,
        levels: Sequence[float] = DEFAULT_LEVELS,
        merge_fraction: float = 0.5,
        filter_length: int = 1024,
        key_bits: _KeyBits = MIN_KEY_BITS,
        insecure_allow_small_keys: _Insecure = False,
        keypair: PaillierKeypair | None = None,
        dgk_keypair: DgkKeypair | None = None,
        rng: RandomSource | None = None,
        workers: int | None = None,
        linkage_unit: str = LINKAGE_UNIT,
        max_records: int | None = None,
        blocking_backend: Any = None,
        progress: ProgressCallback | None = None,
        record_counts: Mapping[str, int] | None = None,
        exact_passes: int = 16,
        pad: float | None = None,
        blocking: Annotated[
            str, Spec(choices=BLOCKINGS, doc="who forms the candidate pairs: the linkage unit or the data parties")
        ] = DEFAULT_BLOCKING,
        comparison: Annotated[
            str, Spec(choices=COMPARISONS, doc="threshold decisions: dealt Beaver triples (dealer) or Paillier and DGK")
        ] = DEFAULT_COMPARISON,
    ) -> None:
        from privreg.plugins.pprl.kdf import check_secret

        self.linkage_unit = v.check_name("linkage_unit", linkage_unit)
        self.names = data_party_names(parties, self.linkage_unit)
        self.records = {} if records is None else check_party_records(records, self.names)
        self.secret = None if secret is None else check_secret(secret)
        if bands is not None and not isinstance(bands, BandConfig):
            raise PrivregTypeError(f"bands must be a BandConfig or None; got {type(bands).__name__}")
        self.bands = bands
        self.threshold = _fraction("threshold", threshold)
        if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
            raise PrivregTypeError(f"levels must be a sequence of Dice thresholds; got {levels!r}")
        self.levels = tuple(_fraction("levels", x) for x in levels)
        if any(lv <= self.threshold for lv in self.levels) or list(self.levels) != sorted(set(self.levels)):
            raise PrivregValueError(
                f"levels must be increasing and above threshold={float(self.threshold)}; got {list(levels)}"
            )
        self.merge_fraction = v.check_probability("merge_fraction", merge_fraction)
        self.length = v.check_int("filter_length", filter_length, minimum=1)
        if not isinstance(insecure_allow_small_keys, bool):
            raise PrivregTypeError(
                f"insecure_allow_small_keys must be True or False; got {insecure_allow_small_keys!r}."
            )
        self.insecure = insecure_allow_small_keys
        self.key_bits = v.check_int("key_bits", key_bits, minimum=MIN_INSECURE_KEY_BITS)
        if keypair is not None and not isinstance(keypair, PaillierKeypair):
            raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
        if dgk_keypair is not None and not isinstance(dgk_keypair, DgkKeypair):
            raise PrivregTypeError(f"dgk_keypair must be a DgkKeypair; got {type(dgk_keypair).__name__}.")
        if self.key_bits < MIN_KEY_BITS and not self.insecure:
            raise PrivregValueError(
                f"a {self.key_bits}-bit key is below the {MIN_KEY_BITS}-bit minimum; use key_bits={MIN_KEY_BITS} "
                f"(the default), or pass insecure_allow_small_keys=True for tests only."
            )
        self.keypair = keypair
        self.dgk_keypair = dgk_keypair
        self.rng = rng
        self.workers = None if workers is None else v.check_int("workers", workers, minimum=1)
        self.max_records = None if max_records is None else v.check_int("max_records", max_records, minimum=1)
        self.record_counts = check_record_counts(record_counts, self.names, self.max_records)
        self.exact_passes = v.check_int("exact_passes", exact_passes, minimum=0)
        if blocking not in BLOCKINGS:
            raise PrivregValueError(f"blocking must be one of {', '.join(map(repr, BLOCKINGS))}; got {blocking!r}")
        self.blocking = blocking
        pad = None if pad is None else check_pad(pad)
        if blocking == "parties" and pad:
            raise PrivregValueError(
                f"pad={pad!r} applies to blocking='linkage-unit' or 'relay' only: under blocking='parties' the data "
                f"parties compute their candidate pairs themselves, so dummies would hide nothing from them; pass "
                f"pad=0 or leave it unset."
            )
        self.pad = (0.0 if blocking == "parties" else DEFAULT_PAD) if pad is None else pad
        for p, rec in self.records.items():
            if self.record_counts is not None and len(rec) != self.record_counts[p]:
                raise PrivregValueError(
                    f"party {p!r} holds {len(rec)} records but its declared record count is {self.record_counts[p]}; "
                    f"declare {len(rec)} at every party."
                )
            exact = rec.exact_keys
            if exact is not None and exact.shape[1] > self.exact_passes:
                raise PrivregValueError(
                    f"party {p!r} has {exact.shape[1]} exact blocking passes, above exact_passes={self.exact_passes}."
                )
            if rec.match_filters.shape[1] != self.length:
                raise PrivregValueError(
                    f"party {p!r} has {rec.match_filters.shape[1]}-bit filters; the protocol expects "
                    f"filter_length={self.length}"
                )
            if self.max_records is not None and len(rec) > self.max_records:
                raise PrivregValueError(
                    f"party {p!r} holds {len(rec)} records, above max_records={self.max_records}; raise it at "
                    f"every party."
                )
        self.x_bits = _x_bits((self.threshold, *self.levels), self.length)
        if comparison not in COMPARISONS:
            raise PrivregValueError(
                f"comparison must be one of {', '.join(map(repr, COMPARISONS))}; got {comparison!r}"
            )
        self.comparison = comparison
        if self.x_bits >= beaver.SHARE_BITS:  # the circuit reads bits + 1 bits of the 2^60 shares
            raise PrivregValueError(
                f"filter_length={self.length} makes the decision values {self.x_bits} bits wide, above "
                f"{beaver.SHARE_BITS - 1}; use a shorter filter or coarser levels"
            )
        if blocking_backend is not None and not (
            callable(getattr(blocking_backend, "band_tokens", None))
            and callable(getattr(blocking_backend, "candidate_pairs", None))
        ):
            raise PrivregTypeError(
                f"blocking_backend must offer band_tokens and candidate_pairs (pprl.spark.LocalBlocking or "
                f"SparkBlocking); got {type(blocking_backend).__name__}"
            )
        self.blocking_backend = blocking_backend
        self.progress = check_progress("progress", progress)
        # candidate pairs per pair of parties, once this process knows them (the linkage
        # unit after blocking, a data party from its deal): they tighten later bounds
        self._known_pairs: dict[frozenset[str], int] = {}

    @property
    def _slotted(self) -> bool:
        """True when the data parties form the candidate pairs (``"parties"``, ``"relay"``):
        the linkage unit deals per slot and never holds a candidate's records before its decision."""
        return self.blocking != "linkage-unit"

    def _left_of(self, p: str, q: str) -> bool:
        """True when data party ``p`` is the left party of its pair with ``q``."""
        i, j = sorted((self.names.index(p), self.names.index(q)))
        return self.names[pair_roles(i, j)[0]] == p

    def _record_bounds(self) -> dict[str, int] | None:
        """Records per data party that bound the messages: the declared counts, else
        ``max_records`` for every party, else None (no bound). Upper bounds only: a check for
        an exact count uses ``record_counts`` (``max_records`` declares none)."""
        if self.record_counts is not None:
            return dict(self.record_counts)
        if self.max_records is not None:
            return dict.fromkeys(self.names, self.max_records)
        return None

    def _kind_bound(self, kind: str, sender: str, receiver: str, counts: Mapping[str, int]) -> int:
        kb, lu, n = self.key_bits, self.linkage_unit, len(self.names)
        c, h = ciphertext_bytes(kb), header_bytes(kb)
        J = self.bands.bands if self.bands is not None else _MAX_BANDS
        # per decision: D = ceil(l / k) digits of k = DIGIT_BITS bits; the thermometers take
        # 2^k - 1 DGK ciphertexts (below n: ceil(key_bits / 8) bytes) per digit, the terms one
        digits, dgk_ct = -(-self.x_bits // DIGIT_BITS), (kb + 7) // 8
        thermometer, terms = digits * (2**DIGIT_BITS - 1) * dgk_ct, digits * dgk_ct
        # "dealer": per batch of D decisions, W = ceil(D / 64) words per wire; the right party's
        # triples hold c_R of every AND gate (the most at the widest level), an opening message
        # the round's d and e rows (round 0, the b leaves, is the largest) and the output mask
        dealer = self.comparison == "dealer"
        gates = sum(dealer_compare.and_counts(self.x_bits))

        def pairs_of(p: str, q: str) -> int:
            return self._known_pairs.get(frozenset((p, q)), counts[p] * counts[q])

        def decisions(p: str, q: str) -> int:
            return min(pairs_of(p, q), BATCH_DECISIONS)

        if sender == lu and receiver in counts:
            m, others = counts[receiver], [q for q in counts if q != receiver]
            pairs = sum(pairs_of(receiver, q) for q in others)
            if kind == "bits":
                return 0 if dealer else max(decisions(receiver, q) for q in others) * thermometer + h + OVERHEAD
            if kind == "triples":
                w = dealer_compare.words(max(decisions(receiver, q) for q in others))
                return 8 * gates * w + dealer_compare.SEED_BYTES + OVERHEAD if dealer else 0
            return {
                "keys": 0 if dealer else public_key_bytes(kb),
                "keys-dgk": 0 if dealer else public_key_bytes(kb, integers=4),
                # per peer: w (and the pairs under "linkage-unit"); a parties-mode entry holds w, a name
                # (<= MAX_NAME_LENGTH), a role and a 32-byte seed: 512 bytes cover its keys and headers
                "deal": 8 * pairs + len(others) * 512 if self._slotted else 24 * pairs + len(others) * OVERHEAD,
                "refine": 8 * pairs + n * OVERHEAD,
                "resolve": 8 * pairs + n * OVERHEAD if self._slotted else 0,
                "oprf-evaluated": self._oprf_bytes(m, n) if self.blocking == "parties" else 0,
                # per peer it is left of: a bit per own position, (group, position) rows for the peer's positions
                # in a shared word (a party left of no peer, as one of two, still gets the empty list)
                "relay-groups": max(
                    OVERHEAD,
                    sum(
                        -(-m * (J + self.exact_passes) // 8) + 16 * counts[q] * (J + self.exact_passes) + 4 * OVERHEAD
                        for q in others
                        if self._left_of(receiver, q)
                    ),
                )
                if self.blocking == "relay"
                else 0,
                "result": 16 * m + OVERHEAD,
            }.get(kind, 0)
        if receiver == lu and sender in counts:
            others = [q for q in counts if q != sender]
            d = max(decisions(sender, q) for q in others)
            mine = self._slotted
            words = 8 * (J + self.exact_passes) * counts[sender] + OVERHEAD
            return {
                "tokens": 0 if mine else words,
                "relay-tokens": words if self.blocking == "relay" else 0,
                # per peer: its name, a count and a digest (and under "relay" the left party's dummy slots)
                "candidates": n * 256
                + (8 * sum(pairs_of(sender, q) for q in others) if self.blocking == "relay" else 0)
                + OVERHEAD
                if mine
                else 0,
                "oprf-blinded": self._oprf_bytes(counts[sender], n) if self.blocking == "parties" else 0,
                "resolved": 8 * sum(pairs_of(sender, q) for q in others) + n * OVERHEAD if mine else 0,
                "masked": 0 if dealer else d * c + h + OVERHEAD,
                "terms": 0 if dealer else d * (terms + 1) + h + OVERHEAD,  # and one share byte per decision
                "out": 8 * dealer_compare.words(d) + OVERHEAD if dealer else 0,
            }.get(kind, 0)
        if sender in counts and receiver in counts and sender != receiver:
            slots = self._slotted  # masked CLKs per slot
            return {
                "popcount": 64,
                "relay-slots": 8 * pairs_of(sender, receiver) + OVERHEAD
                if self.blocking == "relay" and self._left_of(sender, receiver)
                else 0,
                "pair-tokens": 8 * (J + self.exact_passes) * counts[sender] + DIGEST_BYTES + OVERHEAD
                if self.blocking == "parties"
                else 0,
                # rows per chunk: one per slot under "parties", one per candidate record otherwise
                "masked": min(pairs_of(sender, receiver), beaver.CHUNK_PAIRS, *(() if slots else (counts[sender],)))
                * (8 * self.length + 8)
                + OVERHEAD,
                "shares": 0 if dealer else decisions(sender, receiver) * c + h + OVERHEAD,
                "open": (2 * self.x_bits + 1) * 8 * dealer_compare.words(decisions(sender, receiver)) + OVERHEAD
                if dealer
                else 0,
            }.get(kind, 0)
        return 0

    def _oprf_bytes(self, records: int, parties: int) -> int:
        """A bound on a party's OPRF query or its answer: one element per record, band and
        exact pass, and the check inputs."""
        J = self.bands.bands if self.bands is not None else _MAX_BANDS
        return ELEMENT_BYTES * (records * (J + self.exact_passes) + CANARIES * (parties - 1)) + OVERHEAD

    @staticmethod
    def _kind(step: str) -> str:
        if step.startswith("cmp-"):
            kind = step.rsplit(".", 1)[-1]  # cmp-<tag>[.k].masked / .bits / .terms; .triples / .open<r> / .out
            return "open" if kind.startswith("open") else kind
        return step_kind(step, {"shares-": "shares", "masked.": "masked"})

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        """The bound of a message of ``step`` from ``sender`` to ``receiver``, from the
        declared record counts (else ``max_records``), the filter length, the key size and
        the bands: the formulas of :mod:`~privreg.plugins.pprl.message_bounds`; 0 for a
        message the protocol never sends (it is refused). None without record counts."""
        counts = self._record_bounds()
        if counts is None:
            return None
        return self._kind_bound(self._kind(step), sender, receiver, counts)

    def max_message_bytes(self) -> int | None:
        """The largest :meth:`message_bound` of any message of the run (None without
        declared record counts or ``max_records``)."""
        counts = self._record_bounds()
        if counts is None:
            return None
        kinds: tuple[str, ...] = ("keys", "keys-dgk", "deal", "refine", "result", "bits", "tokens", "masked")
        kinds += (
            "terms",
            "popcount",
            "pair-tokens",
            "candidates",
            "resolve",
            "resolved",
            "oprf-blinded",
            "oprf-evaluated",
            "relay-tokens",
            "relay-groups",
            "relay-slots",
            "triples",
            "open",
            "out",
        )
        everyone = [self.linkage_unit, *self.names]
        return max(self._kind_bound(k, s, r, counts) for k in (*kinds, "shares") for s in everyone for r in everyone)

    def parties(self) -> Sequence[Party]:
        out: list[Party] = [RoleParty(self.linkage_unit, self._run_linkage_unit)]
        for p in self.names:
            out.append(RoleParty(p, lambda ch, p=p: self._run_party(ch, p)))
        return out

    def learns(self) -> Mapping[str, str]:
        party = (
            "without explicit bands, every other data party's record count; per "
            "other party, its candidate pairs with that party, real and dummy alike (the other's record indices are "
            "opaque positions). Without padding (pad=0) whether a record has a candidate there predicts whether "
            "that party holds the person: true-positive rate 1.000, false-positive rate 0.31-0.38 measured on FEBRL "
            "4, 3 x 5,000 (benchmarks/pprl_leakage.py); at the default pad=1 every record has a candidate at every "
            "peer (true- and false-positive rate 1.000: no advantage) and the best test on the number of candidates "
            "has an advantage TPR - FPR of 0.05 (0.65 unpadded; benchmarks/pprl_padding.py), at 1.15x the secure "
            "decisions; a mask seed and its Beaver shares (uniform), the other's masked CLKs (one-time padded); its "
            "output: which of its records were linked, under "
            "which group id; from the refine message, which of its candidate pairs were accepted at the threshold "
            "and lie in a cluster with two records of one party; without explicit bands, the other data parties' "
            "median popcount; from its candidates, whether each exact pass was kept for that pair of parties "
            "(dropped above 1.5 pairs per record of the smaller party)"
        )
        if self.blocking == "parties":
            party = (
                "its own tokens from the linkage unit's OPRF (the evaluated elements); "
                "every other data party's record count and, per other party, its band and exact-pass OPRF tokens "
                "re-keyed for the pair (in a private row order): it cannot invert them (no OPRF key), but it sees "
                "which of its records share a band or exact token with which of the peer's rows, so it reads the "
                "peer's band value, date of birth or id wherever it holds the same itself, and estimates the Dice of "
                "every pair of its and the peer's records from the shared count (Spearman 0.955-0.975 on FEBRL 4) "
                "and finds near-duplicates within the peer; "
                "a keyed digest of the peer's OPRF check outputs (equal to its own); its "
                "real candidate pairs (whether a record has a candidate at a peer predicts that the peer holds the "
                "person as without padding: true-positive rate 1.000, false-positive rate 0.31-0.38 on FEBRL 4); "
                "from the resolve message, which of them passed the threshold; a mask seed and its Beaver shares "
                "(uniform), the peer's masked CLKs (one-time padded, one per slot); from the refine message, "
                "which accepted pairs lie in a conflicting cluster; "
                "its output: which of its records were linked, under which group id; without explicit bands, the "
                "other data parties' median popcount"
            )
            return {self.linkage_unit: LU_SEES_PARTIES, **dict.fromkeys(self.names, f"{party}; {self._cmp_view()}")}
        if self.blocking == "relay":
            party = (
                "without explicit bands, every other data party's record count. Per "
                "other party of which it is the left party (left and right alternate with the party indices: about "
                "half of its peers): from the linkage unit, which of its band and exact-pass words the peer holds "
                "too, at which of the peer's rows (in the peer's private order) and bands, never a peer word, so it "
                "reads the peer's band value, date of birth or id wherever it holds the same itself, estimates the "
                "Dice of every pair of its and the peer's records from the shared count (Spearman 0.96-0.98 on FEBRL "
                "4) and finds near-duplicates within the peer; its real candidate pairs (whether a record has one "
                "predicts that the peer holds the person: true-positive rate 1.000, false-positive rate 0.31-0.38 on "
                "FEBRL 4, as at pad=0) and the dummies it draws for the peer. Per other party of which it is the right"
                " party: only its own row of each slot, real and dummy alike (at the default pad=1 every record has "
                "a slot at every such peer: true- and false-positive rate 1.000, as under blocking='linkage-unit'). "
                "From the resolve message, which slots passed the threshold; a mask seed and its Beaver shares "
                "(uniform), the peer's masked CLKs (one-time padded, one per slot); from the refine message, which "
                "accepted pairs lie in a conflicting cluster; its "
                "output: which of its records were linked, under which group id; without explicit bands, the other "
                "data parties' median popcount"
            )
            return {self.linkage_unit: LU_SEES_RELAY, **dict.fromkeys(self.names, f"{party}; {self._cmp_view()}")}
        return {self.linkage_unit: LU_SEES, **dict.fromkeys(self.names, f"{party}; {self._cmp_view()}")}

    def _cmp_view(self) -> str:
        """What a data party receives for the threshold decisions (``comparison``)."""
        if self.comparison == "dgk":
            return (
                "the linkage unit's Paillier and DGK public keys, and Paillier and DGK ciphertexts under them (the "
                "peer's packed shares, the thermometers): semantically secure, it decrypts nothing"
            )
        return (
            "per batch of decisions a triple seed from the linkage unit (and, as the right party of the pair, the "
            "correction bits of the AND triples) and the peer's circuit openings, each XORed with a triple bit it "
            "does not hold, and the left party's output mask: uniform and independent of the data; no decision "
            "(its output share goes to the linkage unit)"
        )

    # ------------------------------------------------------------------ helpers

    def _layout(self, public_key: Any, bits: int) -> tuple[int, int]:
        """``(slot bits, pairs per ciphertext)`` for ``bits``-bit values: a right share
        (``SHARE_BITS`` bits) must not push the packed plaintext past the layout's capacity."""
        s, r = slot_layout(public_key, bits=bits, sigma=_SIGMA)
        extra = max(0, beaver.SHARE_BITS + 1 - s)
        return s, max(1, r - -(-extra // s))

    # ------------------------------------------------------------------ linkage unit

    async def _run_linkage_unit(self, ch: Channel) -> dict[str, Any]:
        self._known_pairs.clear()  # this run's candidate counts only
        rng = resolve_random(self.rng)
        timer = PhaseTimer()
        names = self.names
        with counting() as ops:
            kp, dk = await self._send_keys(ch, rng)
            timer.lap("keys")
            tokens: list[np.ndarray] = []
            exact: list[np.ndarray] = []
            for p in names if self.blocking == "linkage-unit" else ():  # "parties": no tokens reach it
                msg = await ch.recv(p, step="tokens")
                tok = _array(msg, "tokens", p, kind="u", ndim=2)
                ex = _array(msg, "exact", p, kind="u", ndim=2)
                if ex.shape[0] != tok.shape[0] or (exact and ex.shape[1] != exact[0].shape[1]) or ex.shape[1] > 64:
                    raise ProtocolError(f"{p!r} sent exact blocking tokens of another shape than the others")
                exact.append(ex)
                want = self.bands.bands if self.bands is not None else (tokens[0].shape[1] if tokens else None)
                if not 1 <= tok.shape[1] <= _MAX_BANDS or (want is not None and tok.shape[1] != want):
                    raise ProtocolError(
                        f"{p!r} sent tokens for {tok.shape[1]} bands; expected {want or 'the same as all'}"
                    )
                counts = self._record_bounds()
                if counts is not None and tok.shape[0] > counts[p]:
                    raise ProtocolError(
                        f"{p!r} sent tokens for {tok.shape[0]} records, above its declared record count {counts[p]}"
                    )
                tokens.append(tok)
            # candidate pairs and the Beaver deal, per pair of parties
            plan: list[dict[str, Any]] = []
            deals: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(names))}
            skipped = 0
            orientation = pair_orientation(names)
            blocked = PhaseProgress(self.progress, "blocking", total=len(orientation), unit="party pair")
            if self.blocking == "parties":
                await self._evaluate_oprf(ch, rng)
                timer.lap("oprf")
            elif self.blocking == "relay":
                await self._relay_groups(ch)
                timer.lap("relay")
            if self._slotted:
                await self._deal_slots(ch, rng, plan, deals, blocked)
            for i, j in orientation if self.blocking == "linkage-unit" else ():
                left, right = pair_roles(i, j)
                cands, sk = self._candidates(tokens[left], tokens[right], exact[left], exact[right])
                skipped += sk
                su, sv = beaver.new_seed(rng), beaver.new_seed(rng)
                label = f"{names[left]}/{names[right]}"
                real = cands.shape[0]
                cands, dummy = pad_candidates(
                    cands, rows=(tokens[left].shape[0], tokens[right].shape[0]), pad=self.pad, rng=rng
                )
                # masks of the candidate rows only, a chunk of pairs at a time
                w_left, w_right = beaver.dealer_shares_from_seeds(
                    su, sv, cands, length=self.length, labels=("u/" + label, "v/" + label), rng=rng
                )
                plan.append({"left": left, "right": right, "pairs": cands, "dummy": dummy, "real": real})
                self._known_pairs[frozenset((names[left], names[right]))] = int(cands.shape[0])
                deals[left].append({"peer": names[right], "role": "left", "seed": su, "pairs": cands, "w": w_left})
                deals[right].append({"peer": names[left], "role": "right", "seed": sv, "pairs": cands, "w": w_right})
                blocked.advance()
            for i, p in enumerate(names):
                await ch.send(p, deals[i], step="deal")
            timer.lap("blocking")
            # base decisions
            decisions = []
            total = int(sum(item["pairs"].shape[0] for item in plan))
            shown = PhaseProgress(self.progress, "secure decisions", total=total, unit="decision")
            for item in plan:
                pair = (names[item["left"]], names[item["right"]])
                decisions.append(
                    await self._decide(ch, pair, kp, dk, item["pairs"].shape[0], self.threshold, "base", rng, shown)
                )
            if self._slotted:  # the records of the accepted slots, for the groups
                await self._resolve(ch, plan, decisions)
            edges, where = self._edges(plan, decisions)
            timer.lap("matching")
            levels = np.zeros(len(edges), dtype=np.int64)
            conflicts = conflict_pairs(edges) if len(edges) else np.zeros(0, dtype=bool)
            refine = [np.zeros(0, dtype=np.int64) for _ in plan]
            for e in np.flatnonzero(conflicts) if self.levels else ():
                k, idx = where[e]
                refine[k] = np.append(refine[k], idx)
            for i, p in enumerate(names):
                await ch.send(
                    p, [refine[k] for k, item in enumerate(plan) if i in (item["left"], item["right"])], step="refine"
                )
            refined = 0
            total = int(sum(sel.size for sel in refine)) * len(self.levels)
            # no line for an empty phase (no conflicts)
            shown = PhaseProgress(self.progress if total else None, "stricter levels", total=total, unit="decision")
            if self.levels:
                for k, item in enumerate(plan):
                    sel = refine[k]
                    if not sel.size:
                        continue
                    refined += int(sel.size)
                    for t, lv in enumerate(self.levels):
                        pair = (names[item["left"]], names[item["right"]])
                        ok = await self._decide(ch, pair, kp, dk, sel.size, lv, f"l{t + 1}", rng, shown)
                        pos = {int(idx): n for n, idx in enumerate(sel)}
                        for e in np.flatnonzero(conflicts):
                            kk, idx = where[e]
                            if kk == k and int(idx) in pos:
                                levels[e] += int(ok[pos[int(idx)]])
            timer.lap("levels")
            groups = greedy_groups(edges, levels=levels, merge_fraction=self.merge_fraction) if len(edges) else []
            # opaque group ids: positions in the sorted list would tell a party how many groups
            # there are and which of its groups hold a record of a party sorted before it
            ids: list[int] = []
            while len(ids) < len(groups):
                gid = rng.randbits(62)
                if gid not in ids:
                    ids.append(gid)
            links: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(names))}
            for gid, g in zip(ids, groups):
                for party, rec in g:
                    links[party].append((gid, rec))
            for i, p in enumerate(names):
                rows = sorted(links[i], key=lambda x: x[1])
                await ch.send(p, np.array(rows, dtype=np.int64).reshape(-1, 2), step="result")
            timer.lap("result")
        return {
            "bands": int(tokens[0].shape[1]) if tokens else None,  # "parties": the linkage unit never sees J
            "groups": [[(names[p], r) for p, r in g] for g in groups],
            "group_indices": groups,
            "group_ids": ids,
            # "parties": the linkage unit knows no candidate pair (run_candidates joins the parties' slots)
            "candidates": (
                {(names[it["left"]], names[it["right"]]): it["pairs"][~it["dummy"]] for it in plan}
                if self.blocking == "linkage-unit"
                else None
            ),
            "candidate_count": int(sum(it["real"] for it in plan)),
            "dummy_pairs": int(sum(int(it["dummy"].sum()) for it in plan)),
            "accepted": len(edges),
            "refined": refined,
            "skipped_blocks": skipped,
            "decisions": int(sum(it["pairs"].shape[0] for it in plan)) + refined * len(self.levels),
            "timings": dict(timer.wall),
            "operations": ops.as_dict(),
        }

    def _candidates(self, a: np.ndarray, b: np.ndarray, ex_a: np.ndarray, ex_b: np.ndarray) -> tuple[np.ndarray, int]:
        """The candidate pairs of two token matrices (left, right) and the skipped blocks."""
        cfg = self._cfg
        if self.blocking_backend is None:
            return candidate_pairs(
                a, b, max_block_pairs=cfg.max_block_pairs, min_shared=cfg.min_shared, exact_a=ex_a, exact_b=ex_b
            )
        lsh, sk = self.blocking_backend.candidate_pairs(
            a, b, max_block_pairs=cfg.max_block_pairs, min_shared=cfg.min_shared
        )
        ex, sk2 = exact_pairs(ex_a, ex_b, max_block_pairs=cfg.max_block_pairs)
        return union_pairs(lsh, ex), sk + sk2

    async def _evaluate_oprf(self, ch: Channel, rng: RandomSource) -> None:
        """``blocking="parties"``: raise every data party's blinded elements to a fresh OPRF
        key (:mod:`oprf`), at most as many as its declared records times the bands and exact
        passes, plus its check inputs, and the same number per record at every party."""
        key = OprfKey(rng=rng)
        counts, names, top = self.record_counts, self.names, self.max_records  # max_records bounds, declares none
        extra = CANARIES * (len(names) - 1)
        width: int | None = None
        limit = (self.bands.bands if self.bands is not None else _MAX_BANDS) + self.exact_passes
        for p in names:
            msg = await ch.recv(p, step="oprf-blinded")
            n = msg.shape[0] if isinstance(msg, np.ndarray) and msg.ndim == 2 else -1
            ok = n >= extra
            if ok and counts is not None:  # without declared counts nothing bounds the query per record
                w, r = divmod(n - extra, max(counts[p], 1))
                ok = r == 0 and (w == 0 if counts[p] == 0 else w <= limit and width in (None, w))
                width = w if ok and counts[p] else width
            elif ok and top is not None:
                ok = n - extra <= top * limit
            if not ok:
                raise ProtocolError(
                    f"{p!r} sent {n if n >= 0 else 'a malformed number of'} blinded elements; expected its declared "
                    f"records (at most max_records) times the bands and exact passes (the same at every party, at "
                    f"most {limit} per record) plus {extra} check inputs"
                )
            await ch.send(p, key.evaluate(msg, count=n, sender=p), step="oprf-evaluated")

    async def _relay_groups(self, ch: Channel) -> None:
        """``blocking="relay"`` (:mod:`relay_blocking`): receive every data party's word
        list (its declared records times the same width at every party) and send the left
        party of every pair the collision groups of their two lists (positions only, no word:
        :func:`relay_blocking.relay_entry`)."""
        counts, names = self.record_counts, self.names  # max_records bounds the lists (the transport), declares none
        limit = (self.bands.bands if self.bands is not None else _MAX_BANDS) + self.exact_passes
        words: dict[str, np.ndarray] = {}
        widths: dict[str, int] = {}
        expected = (
            "expected one unsigned word per declared record and band or exact pass, the same number per record at "
            f"every party (at most {limit})"
        )
        for p in names:
            msg = await ch.recv(p, step="relay-tokens")
            ok = isinstance(msg, np.ndarray) and msg.ndim == 1 and (not msg.size or msg.dtype.kind == "u")
            if ok and counts is not None and counts[p]:
                widths[p], r = divmod(msg.size, counts[p])
                ok = r == 0 and 1 <= widths[p] <= limit
            elif ok and counts is not None:
                ok = msg.size == 0
            if not ok:
                raise ProtocolError(f"{p!r} sent a malformed relay word list; {expected}")
            words[p] = np.asarray(msg, dtype=np.uint64)
        if len(set(widths.values())) > 1:  # blame the parties off the one most common width (all on a tie)
            tally = sorted(np.unique(list(widths.values()), return_counts=True)[1])
            common = max(widths.values(), key=list(widths.values()).count) if tally[-1] > tally[-2] else None
            odd = ", ".join(repr(p) for p, w in widths.items() if w != common)
            raise ProtocolError(f"{odd} sent a malformed relay word list; {expected} (words per record: {widths})")
        for p in names:  # only a pair's left party forms its candidates; one party's groups held at a time
            entry = []
            for q in names:  # per peer in run order
                if q != p and self._left_of(p, q):
                    entry.append({"peer": q, "size": int(words[q].size), **relay_entry(words[p], words[q])})
            await ch.send(p, entry, step="relay-groups")
            del entry

    async def _deal_slots(
        self,
        ch: Channel,
        rng: RandomSource,
        plan: list[dict[str, Any]],
        deals: dict[int, list[dict[str, Any]]],
        blocked: PhaseProgress,
    ) -> None:
        """``blocking="parties"`` or ``"relay"``: check that both parties of every pair sent the same slot
        count and digest, then deal the Beaver masks per slot (no record index involved)."""
        names, counts = self.names, self._record_bounds()
        got: dict[str, dict[str, tuple[int, bytes]]] = {}
        dummies: dict[tuple[str, str], np.ndarray] = {}
        for p in names:
            msg = await ch.recv(p, step="candidates")
            if not isinstance(msg, list) or len(msg) != len(names) - 1:
                raise ProtocolError(f"{p!r} sent a malformed candidates message (one entry per other party)")
            mine: dict[str, tuple[int, bytes]] = {}
            for d in msg:
                peer = d.get("peer") if isinstance(d, Mapping) else None
                if peer not in names or peer == p or peer in mine:
                    raise ProtocolError(f"{p!r} sent a candidates entry naming an unknown or repeated peer")
                k, digest = d.get("count"), d.get("digest")
                if (
                    not isinstance(k, int)
                    or isinstance(k, bool)
                    or k < 0
                    or not isinstance(digest, bytes)
                    or len(digest) != DIGEST_BYTES
                ):
                    raise ProtocolError(f"{p!r} sent a malformed candidate count or digest for peer {peer!r}")
                if counts is not None and k > counts[p] * counts[peer]:
                    raise ProtocolError(f"{p!r} sent more candidate pairs for peer {peer!r} than the two hold")
                mine[peer] = (k, digest)
                if "dummies" in d:  # "relay": the left party's dummy slots (membership padding)
                    dummies[(p, peer)] = _dummy_slots(d["dummies"], k, p, peer)
            got[p] = mine
        for i, j in pair_orientation(names):
            left, right = pair_roles(i, j)
            a, b = names[left], names[right]
            if got[a][b] != got[b][a]:
                raise ProtocolError(
                    f"{a!r} and {b!r} sent different candidate lists for their pair ({got[a][b][0]} and "
                    f"{got[b][a][0]} pairs, or different digests); refusing to deal"
                )
            k = got[a][b][0]
            dummy = np.zeros(k, dtype=bool)
            if (b, a) in dummies or ((a, b) in dummies) != (self.blocking == "relay"):
                raise ProtocolError(f"dummy slots for {a!r}/{b!r} must come from the left party {a!r} under relay only")
            dummy[dummies.get((a, b), np.zeros(0, dtype=np.int64))] = True
            su, sv = beaver.new_seed(rng), beaver.new_seed(rng)
            slot = np.arange(k, dtype=np.int64)
            w_left, w_right = beaver.dealer_shares_from_seeds(  # a chunk of slots' masks at a time
                su, sv, np.column_stack([slot, slot]), length=self.length, labels=(f"u/{a}/{b}", f"v/{a}/{b}"), rng=rng
            )
            # the records of a slot stay unknown (-1) unless it is accepted (_resolve)
            pairs = np.full((k, 2), -1, dtype=np.int64)
            plan.append({"left": left, "right": right, "pairs": pairs, "dummy": dummy, "real": int(k - dummy.sum())})
            self._known_pairs[frozenset((a, b))] = k
            deals[left].append({"peer": b, "role": "left", "seed": su, "w": w_left})
            deals[right].append({"peer": a, "role": "right", "seed": sv, "w": w_right})
            blocked.advance()

    async def _resolve(self, ch: Channel, plan: list[dict[str, Any]], decisions: list[np.ndarray]) -> None:
        """``blocking="parties"`` or ``"relay"``: ask each party for its record of every accepted slot."""
        asked = [np.flatnonzero(ok & ~it["dummy"]).astype(np.int64) for ok, it in zip(decisions, plan)]
        counts = self._record_bounds()
        for i, p in enumerate(self.names):
            await ch.send(p, [asked[k] for k, it in enumerate(plan) if i in (it["left"], it["right"])], step="resolve")
        for i, p in enumerate(self.names):
            got = await ch.recv(p, step="resolved")
            mine = [k for k, it in enumerate(plan) if i in (it["left"], it["right"])]
            if not isinstance(got, list) or len(got) != len(mine):
                raise ProtocolError(f"{p!r} sent a malformed resolved message")
            for k, rows in zip(mine, got):
                if (
                    not isinstance(rows, np.ndarray)
                    or rows.shape != asked[k].shape
                    or (rows.size and (rows.dtype.kind != "i" or rows.min() < 0))
                    or (rows.size and counts is not None and rows.max() >= counts[p])
                ):
                    raise ProtocolError(f"{p!r} sent records outside its own for the accepted slots")
                plan[k]["pairs"][asked[k], 0 if plan[k]["left"] == i else 1] = rows

    async def _send_keys(self, ch: Channel, rng: RandomSource) -> tuple[PaillierKeypair | None, DgkKeypair | None]:
        """``comparison="dgk"``: the linkage unit's Paillier and DGK keys, public halves sent
        to every data party (``"keys"``, ``"keys-dgk"``); ``"dealer"`` needs no key."""
        if self.comparison == "dealer":
            return None, None
        kp = self.keypair or generate_paillier_keypair(
            n_bits=self.key_bits, insecure_allow_small_keys=self.insecure, rng=rng
        )
        dk = self.dgk_keypair or generate_dgk_keypair(
            n_bits=self.key_bits,
            t=DGK_T if self.key_bits >= MIN_KEY_BITS else MIN_T,
            comparison_bits=self.x_bits,
            insecure_allow_small_keys=self.insecure,
            rng=rng,
        )
        for p in self.names:
            await send_public_key(ch, p, kp.public_key, step="keys")
            await send_dgk_public_key(ch, p, dk.public_key, step="keys-dgk")
        return kp, dk

    async def _decide(
        self,
        ch: Channel,
        pair: tuple[str, str],
        kp: PaillierKeypair | None,
        dk: DgkKeypair | None,
        count: int,
        level: Fraction,
        tag: str,
        rng: RandomSource,
        shown: PhaseProgress,
    ) -> np.ndarray:
        """The linkage unit's decisions ``[Dice >= level]`` of ``count`` candidate pairs of
        the party pair ``(left, right)``, batch by batch."""
        if count == 0:
            return np.zeros(0, dtype=bool)
        bits = _x_bits((level,), self.length)  # fewer digits or gates at a coarser level
        _, _, _, c = _level_terms(level, self.length)
        holder = pair[0]
        if kp is None or dk is None:  # "dealer": triples to both parties, output shares back
            outs = []
            for k, (lo, hi) in enumerate(_batches(count, 1)):
                step = _batch_step(f"cmp-{tag}", k)
                out = await dealer_compare.compare_dealer(
                    ch,
                    left=pair[0],
                    right=pair[1],
                    count=hi - lo,
                    bits=bits,
                    step=step,
                    domain=_domain(pair, step),
                    rng=rng,
                )
                outs.append(out)
                shown.advance(hi - lo)
            return np.concatenate(outs)
        _, per = self._layout(kp.public_key, bits)
        outs = []
        for k, (lo, hi) in enumerate(_batches(count, per)):
            wanted = [(i // per, i % per) for i in range(hi - lo)]
            out = await threshold_keyholder(
                ch,
                holder=holder,
                private_key=kp.private_key,
                dgk_private_key=dk.private_key,
                count=-(-(hi - lo) // per),
                wanted=wanted,
                bits=bits,
                threshold=c,
                sigma=_SIGMA,
                step=_batch_step(f"cmp-{tag}", k),
                rng=rng,
                workers=self.workers,
            )
            outs.append(np.asarray(out, dtype=bool))
            shown.advance(hi - lo)
        return np.concatenate(outs)

    def _edges(
        self, plan: list[dict[str, Any]], decisions: list[np.ndarray]
    ) -> tuple[np.ndarray, list[tuple[int, int]]]:
        rows: list[np.ndarray] = []
        where: list[tuple[int, int]] = []
        for k, (item, ok) in enumerate(zip(plan, decisions)):
            idx = np.flatnonzero(ok & ~item["dummy"])  # a dummy's decision is discarded
            p = item["pairs"][idx]
            rows.append(
                np.column_stack(
                    [np.full(idx.size, item["left"]), p[:, 0], np.full(idx.size, item["right"]), p[:, 1]]
                ).astype(np.int64)
            )
            where.extend((k, int(i)) for i in idx)
        edges = np.concatenate(rows) if rows else np.zeros((0, 4), dtype=np.int64)
        return edges, where

    # ------------------------------------------------------------------ data party

    async def _run_party(self, ch: Channel, me: str) -> dict[str, Any]:
        self._known_pairs.clear()  # this run's candidate counts only (every role starts before any deal)
        rec = require_input(self.records.get(me), f"records[{me!r}]", me)
        secret = require_input(self.secret, "secret", me)
        rng = resolve_random(self.rng)
        timer = PhaseTimer()
        allow = insecure_key_allowed(self.insecure, self.rng)
        pk = dpk = None  # "dealer": no key
        if self.comparison == "dgk":
            pk = await recv_public_key(ch, self.linkage_unit, step="keys", allow_insecure=allow)
            dpk = await recv_dgk_public_key(ch, self.linkage_unit, step="keys-dgk", allow_insecure=allow)
        bits = rec.match_filters
        m = bits.shape[0]
        config = self.bands or await self._agree_bands(ch, me, bits)
        if self.blocking_backend is None:
            tok, _ = band_tokens(bits, config=config, secret=secret)
        else:
            tok = np.array(self.blocking_backend.band_tokens(bits, config=config, secret=secret), dtype=np.uint64)
        empty = np.flatnonzero(~bits.any(axis=1))
        if empty.size:  # an empty CLK shares every band key with every other empty one
            raw = rng.random_bytes(8 * empty.size * tok.shape[1])
            tok[empty] = np.frombuffer(raw, dtype="<u8").reshape(empty.size, tok.shape[1])
        exact = rec.exact_keys if rec.exact_keys is not None else np.zeros((m, 0), dtype=np.uint64)
        slots: dict[str, np.ndarray] | None = None
        dummy_slots: dict[str, np.ndarray] | None = None
        if self.blocking == "parties":
            tok, exact, checks = await self._oprf_tokens(ch, me, secret, tok, exact, rng)
            timer.lap("oprf")
            slots = await self._block_with_peers(ch, me, secret, tok, exact, rng, checks=checks)
        elif self.blocking == "relay":
            held = [tok]
            del tok  # _relay_with_peers drops the band tokens once its words are made
            slots, dummy_slots = await self._relay_with_peers(ch, me, secret, held, exact, rng)
        else:
            await ch.send(self.linkage_unit, {"tokens": tok, "exact": exact}, step="tokens")
        timer.lap("tokens")
        deals = await ch.recv(self.linkage_unit, step="deal")
        entries = self._check_deals(deals, me, m, slots)
        pop = bits.sum(axis=1).astype(np.int64)
        # an empty CLK (every field missing) has Dice 0 with anything (clk.dice), but x
        # would be 2 num L >= the threshold; with popcount L instead x = num (L - |b|) or 0,
        # below every level and still in [0, 2 den L]
        pop[pop == 0] = self.length
        for e in entries:  # "parties": this party's CLK and popcount per slot
            own = e.get("own")
            e["bits"], e["pop"] = (bits, pop) if own is None else (bits[own], pop[own])
        for e in entries:  # the later messages of this pair are bounded by its candidate count
            self._known_pairs[frozenset((me, e["peer"]))] = int(e["pairs"].shape[0])
        # exchange masked CLKs chunk by chunk ("parties": per slot), then compute the inner-product shares
        shares = {e["peer"]: await self._masked_exchange(ch, me, e, e["bits"]) for e in entries}
        timer.lap("shares")
        for e in entries:
            await self._share_round(ch, me, e, shares[e["peer"]], e["pop"], None, self.threshold, "base", pk, dpk, rng)
        if self._slotted:
            await self._resolve_slots(ch, entries)
        refine = await ch.recv(self.linkage_unit, step="refine")
        if not isinstance(refine, list) or len(refine) != len(entries):
            raise ProtocolError(f"{self.linkage_unit!r} sent a malformed refine message")
        for e, sel in zip(entries, refine):
            if (
                not isinstance(sel, np.ndarray)
                or sel.ndim != 1
                or (sel.size and (sel.dtype.kind != "i" or sel.min() < 0 or sel.max() >= e["pairs"].shape[0]))
            ):
                raise ProtocolError(f"{self.linkage_unit!r} sent malformed refinement indices")
            if sel.size:
                for t, lv in enumerate(self.levels):
                    await self._share_round(ch, me, e, shares[e["peer"]], e["pop"], sel, lv, f"l{t + 1}", pk, dpk, rng)
        timer.lap("matching")
        links = await ch.recv(self.linkage_unit, step="result")
        if (
            not isinstance(links, np.ndarray)
            or links.ndim != 2
            or links.shape[1] != 2
            or (links.size and (links.dtype.kind != "i" or links.min() < 0 or links[:, 1].max() >= m))
        ):
            raise ProtocolError(f"{self.linkage_unit!r} sent a malformed result")
        return {
            "links": links,
            "ids": rec.ids,
            "timings": dict(timer.wall),
            "band_bits": config.bits,
            "bands": config.bands,
            # "parties", "relay": this party's record of each slot per peer (run_candidates joins them)
            "slots": slots,
            # "relay": per peer this party is left of, which slots are dummies (it drew them)
            "dummy_slots": dummy_slots,
        }

    @property
    def _cfg(self) -> BandConfig:
        """The linkage unit's blocking rule (``min_shared``, block cap); ``J`` comes with the tokens."""
        return self.bands or BandConfig(bands=MIN_SHARED, bits=16, min_shared=MIN_SHARED)

    async def _agree_bands(self, ch: Channel, me: str, bits: np.ndarray) -> BandConfig:
        """The recommended bands at the largest median popcount and the largest record count
        of the data parties, which they send each other (never to the linkage unit)."""
        mine = [int(np.median(bits.sum(axis=1))) if bits.shape[0] else 1, int(bits.shape[0])]
        others = [p for p in self.names if p != me]
        for p in others:
            await ch.send(p, mine, step="popcount")
        medians, counts = [mine[0]], [mine[1]]
        declared = self.record_counts
        for p in others:
            x = await ch.recv(p, step="popcount")
            if (
                not isinstance(x, list)
                or len(x) != 2
                or not all(isinstance(y, int) and not isinstance(y, bool) for y in x)
                or not 0 <= x[0] <= self.length
                or not 0 <= x[1] <= (self.max_records or _MAX_CLAIMED_RECORDS)
            ):
                raise ProtocolError(
                    f"{p!r} sent a malformed median popcount and record count (expected [0..{self.length}, count])"
                )
            if declared is not None and x[1] != declared[p]:
                raise ProtocolError(f"{p!r} sent a record count other than its declared one ({declared[p]})")
            medians.append(x[0])
            counts.append(x[1])
        return recommended_bands(filter_length=self.length, popcount=max(1, *medians), records=max(1, *counts))

    async def _oprf_tokens(
        self, ch: Channel, me: str, secret: bytes, tok: np.ndarray, exact: np.ndarray, rng: RandomSource
    ) -> tuple[np.ndarray, np.ndarray, dict[str, bytes]]:
        """``blocking="parties"``: the band and exact-pass tokens through the linkage unit's
        OPRF (:mod:`oprf`; inputs :func:`party_blocking.oprf_rows`, then
        :data:`~party_blocking.CANARIES` check inputs per peer, all blinded, in a private
        random order), and per peer the keyed digest of the pair's check outputs."""
        m, J = tok.shape
        F = exact.shape[1]
        peers = [q for q in self.names if q != me]
        keys = {}
        for q in peers:
            i, j = sorted((self.names.index(me), self.names.index(q)))
            keys[q] = pair_key(secret, self.names[i], self.names[j], "oprf-check")
        x = np.concatenate([oprf_rows(tok, exact, rng), *(canary_rows(keys[q]) for q in peers)])
        perm = private_order(x.shape[0], rng)
        blinded, inverses = blind(x[perm], rng)
        await ch.send(self.linkage_unit, blinded, step="oprf-blinded")
        got = await ch.recv(self.linkage_unit, step="oprf-evaluated")
        words = np.empty(x.shape[0], dtype=np.uint64)
        words[perm] = finalize(x[perm], got, inverses, sender=self.linkage_unit)
        new_tok = words[: m * J].reshape(m, J)
        new_ex = np.where(exact != 0, words[m * J : m * (J + F)].reshape(m, F) | np.uint64(1), np.uint64(0))
        base = m * (J + F)
        checks = {
            q: canary_check(words[base + k * CANARIES : base + (k + 1) * CANARIES], keys[q])
            for k, q in enumerate(peers)
        }
        return new_tok, new_ex.astype(np.uint64), checks

    async def _block_with_peers(
        self,
        ch: Channel,
        me: str,
        secret: bytes,
        tok: np.ndarray,
        exact: np.ndarray,
        rng: RandomSource,
        *,
        checks: Mapping[str, bytes],
    ) -> dict[str, np.ndarray]:
        """``blocking="parties"`` (:mod:`party_blocking`): exchange re-keyed tokens with every
        peer in a private row order, form the pair's slots and send the linkage unit their
        count and keyed digest; returns this party's record of each slot per peer."""
        counts = self.record_counts  # declared counts; max_records bounds, declares none
        peers = [q for q in self.names if q != me]
        sent: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for q in peers:
            i, j = sorted((self.names.index(me), self.names.index(q)))
            perm = private_order(tok.shape[0], rng)
            t, x = pair_tokens(tok[perm], exact[perm], pair_key(secret, self.names[i], self.names[j], "tokens"))
            await ch.send(q, {"tokens": t, "exact": x, "check": checks[q]}, step="pair-tokens")
            sent[q] = (perm, t, x)
        out: dict[str, np.ndarray] = {}
        summary = []
        for q in peers:
            got = await ch.recv(q, step="pair-tokens")
            if not isinstance(got, Mapping) or got.get("check") != checks[q]:
                raise ProtocolError(
                    f"{q!r} and {me!r} got different OPRF outputs from {self.linkage_unit!r} for their pair's check "
                    f"inputs (a wrong or missing evaluation); refusing to block"
                )
            t_q, x_q = check_pair_tokens(
                got, q, bands=tok.shape[1], exact=exact.shape[1], rows=None if counts is None else counts[q]
            )
            if self.max_records is not None and t_q.shape[0] > self.max_records:
                raise ProtocolError(f"{q!r} sent tokens for more records than max_records={self.max_records}")
            i, j = sorted((self.names.index(me), self.names.index(q)))
            perm, t, x = sent.pop(q)
            left = self.names[pair_roles(i, j)[0]] == me
            cands, _ = self._candidates(t, t_q, x, x_q) if left else self._candidates(t_q, t, x_q, x)
            key = pair_key(secret, self.names[i], self.names[j], "slots")
            order = slot_order(cands, key)
            out[q] = perm[order[:, 0 if left else 1]]
            summary.append({"peer": q, "count": int(order.shape[0]), "digest": slot_digest(order, key)})
        await ch.send(self.linkage_unit, summary, step="candidates")
        return out

    async def _relay_with_peers(
        self, ch: Channel, me: str, secret: bytes, held: list[np.ndarray], exact: np.ndarray, rng: RandomSource
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """``blocking="relay"`` (:mod:`relay_blocking`): send the linkage unit this party's
        words (rows in a fresh private order, positions in its keyed order). For each peer
        of which it is the left party: rebuild the peer's words from the collision groups,
        form the candidates, add dummies for the peer's records with none (``pad``), put
        them in the pair's keyed slot order and send the peer its row of each slot; from
        each other peer, receive its own row of each slot. To the linkage unit: per peer the
        slot count, a keyed digest of the right party's rows and (left) the dummy slots.
        Returns this party's record of each slot per peer, and per left pair the dummy mask.
        ``held``: the band tokens, taken from the list (memory: they are dropped here)."""
        tok = held.pop()
        m, J = tok.shape
        sigma = private_order(m, rng)  # row k of the words is record sigma[k]
        words = relay_words(tok[sigma], exact[sigma], rng)
        del tok
        W = words.shape[1]
        order = position_order(secret, me, m * W)
        sent = words.reshape(-1)[order]
        del words  # the candidates come from the groups and the positions alone
        await ch.send(self.linkage_unit, sent, step="relay-tokens")
        got = await ch.recv(self.linkage_unit, step="relay-groups")
        peers = [q for q in self.names if q != me]
        pair = {q: sorted((self.names.index(me), self.names.index(q))) for q in peers}
        formed = [q for q in peers if self._left_of(me, q)]
        if not isinstance(got, list) or [d.get("peer") if isinstance(d, Mapping) else None for d in got] != formed:
            raise ProtocolError(
                f"{self.linkage_unit!r} sent a malformed relay-groups message (one entry per peer this party is "
                f"left of)"
            )
        counts = self.record_counts  # declared counts, else at most max_records (or _MAX_CLAIMED_RECORDS)
        top, most = (
            (self.max_records, f"max_records={self.max_records}")
            if self.max_records
            else (_MAX_CLAIMED_RECORDS, "2^40")
        )
        checked: list[tuple[int, tuple[np.ndarray, np.ndarray]]] = []
        for q, d in zip(formed, got):
            size = d.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ProtocolError(f"{self.linkage_unit!r} sent a malformed word count for peer {q!r}")
            if size % W:  # without declared counts the linkage unit cannot check the peer's list
                raise ProtocolError(
                    f"{self.linkage_unit!r} sent a word count for peer {q!r} that is not a whole number of records of "
                    f"{W} words: {q!r} sent a malformed relay word list or {self.linkage_unit!r} altered it"
                )
            if counts is not None and size // W != counts[q]:
                raise ProtocolError(f"{self.linkage_unit!r} sent a word count for peer {q!r} off its declared records")
            if size // W > top:  # it sizes the peer's permutation and position index
                raise ProtocolError(
                    f"{self.linkage_unit!r} sent a word count for peer {q!r} above {most} records of {W} words"
                )
            checked.append((size // W, check_groups(dict(d), self.linkage_unit, sent=sent, theirs=size)))
        del sent, got  # every entry checked: from here memory is the groups, the orders and one chunk
        d = None  # nor the last entry: relay_candidates frees the peer's rows only if nothing else holds them
        out: dict[str, np.ndarray] = {}
        dummies: dict[str, np.ndarray] = {}
        summary: dict[str, dict[str, Any]] = {}
        for q in formed:
            rows = checked[0][0]
            cfg = self._cfg
            cands, _ = relay_candidates(
                checked.pop(0)[1],  # relay_candidates drops each side of the groups once indexed
                order,
                position_order(secret, q, rows * W),
                width=W,
                bands=J,
                rows=(m, rows),
                min_shared=cfg.min_shared,
                max_block_pairs=cfg.max_block_pairs,
            )
            cands, dummy = pad_candidates(cands, rows=(m, rows), pad=self.pad, rng=rng, sides=(1,))
            key = pair_key(secret, self.names[pair[q][0]], self.names[pair[q][1]], "slots")
            perm = slot_permutation(cands, key)
            slot, dummies[q] = cands[perm], dummy[perm]
            out[q] = sigma[slot[:, 0]]
            await ch.send(q, slot[:, 1].copy(), step="relay-slots")
            summary[q] = {
                "peer": q,
                "count": int(slot.shape[0]),
                "digest": slot_digest(slot[:, 1], key),
                "dummies": np.flatnonzero(dummies[q]).astype(np.int64),
            }
        for q in peers:
            if q in formed:
                continue
            theirs = await ch.recv(q, step="relay-slots")
            if (
                not isinstance(theirs, np.ndarray)
                or theirs.ndim != 1
                or (theirs.size and (theirs.dtype.kind != "i" or theirs.min() < 0 or theirs.max() >= m))
            ):
                raise ProtocolError(f"{q!r} sent malformed relay slots (this party's rows, below {m})")
            key = pair_key(secret, self.names[pair[q][0]], self.names[pair[q][1]], "slots")
            out[q] = sigma[theirs.astype(np.int64)]
            summary[q] = {"peer": q, "count": int(theirs.size), "digest": slot_digest(theirs, key)}
        await ch.send(self.linkage_unit, [summary[q] for q in peers], step="candidates")
        return out, dummies

    async def _resolve_slots(self, ch: Channel, entries: list[dict[str, Any]]) -> None:
        """``blocking="parties"`` or ``"relay"``: this party's record of each accepted slot
        the linkage unit asks for."""
        ask = await ch.recv(self.linkage_unit, step="resolve")
        if not isinstance(ask, list) or len(ask) != len(entries):
            raise ProtocolError(f"{self.linkage_unit!r} sent a malformed resolve message")
        out = []
        for e, sel in zip(entries, ask):
            k = e["own"].shape[0]
            if (
                not isinstance(sel, np.ndarray)
                or sel.ndim != 1
                or (sel.size and (sel.dtype.kind != "i" or sel.min() < 0 or sel.max() >= k))
                or np.any(np.diff(sel) <= 0)
            ):
                raise ProtocolError(f"{self.linkage_unit!r} asked for slots outside the pair's candidates")
            out.append(e["own"][sel])
        await ch.send(self.linkage_unit, out, step="resolved")

    def _check_deals(
        self, deals: Any, me: str, m: int, slots: Mapping[str, np.ndarray] | None = None
    ) -> list[dict[str, Any]]:
        if not isinstance(deals, list):
            raise ProtocolError(f"{self.linkage_unit!r} sent a malformed deal")
        out = []
        for d in deals:
            if not isinstance(d, Mapping) or d.get("peer") not in self.names or d.get("peer") == me:
                raise ProtocolError(f"{self.linkage_unit!r} sent a deal naming an unknown peer")
            if d.get("role") not in ("left", "right") or not isinstance(d.get("seed"), bytes) or len(d["seed"]) != 32:
                raise ProtocolError(f"{self.linkage_unit!r} sent a malformed deal for peer {d['peer']!r}")
            i, j = sorted((self.names.index(me), self.names.index(d["peer"])))
            role = "left" if self.names[pair_roles(i, j)[0]] == me else "right"
            if d["role"] != role:
                raise ProtocolError(
                    f"{self.linkage_unit!r} sent a deal with role {d['role']!r} for peer {d['peer']!r}; the roles are "
                    f"fixed by the party order and this party is {role!r}"
                )
            w = _array(d, "w", self.linkage_unit, kind="u", ndim=1)
            if slots is not None:  # "parties": one share per slot, no record index
                own = slots[d["peer"]]
                if w.shape[0] != own.shape[0]:
                    raise ProtocolError(f"{self.linkage_unit!r} sent {w.shape[0]} shares for {own.shape[0]} slots")
                slot = np.arange(own.shape[0], dtype=np.int64)
                out.append(
                    {
                        "peer": d["peer"],
                        "role": d["role"],
                        "seed": d["seed"],
                        "pairs": np.column_stack([slot, slot]),
                        "w": w,
                        "own": own,
                    }
                )
                continue
            pairs = _array(d, "pairs", self.linkage_unit, kind="i", ndim=2)
            col = 0 if d["role"] == "left" else 1
            if pairs.size and (pairs.shape[1] != 2 or pairs.min() < 0 or pairs[:, col].max() >= m):
                raise ProtocolError(f"{self.linkage_unit!r} sent candidate pairs outside this party's records")
            if w.shape[0] != pairs.shape[0]:
                raise ProtocolError(f"{self.linkage_unit!r} sent {w.shape[0]} shares for {pairs.shape[0]} pairs")
            out.append({"peer": d["peer"], "role": d["role"], "seed": d["seed"], "pairs": pairs.reshape(-1, 2), "w": w})
        expected = [p for p in self.names if p != me]
        if sorted(e["peer"] for e in out) != sorted(expected):
            raise ProtocolError(f"{self.linkage_unit!r} sent deals for {[e['peer'] for e in out]}; expected {expected}")
        return out

    async def _masked_exchange(self, ch: Channel, me: str, e: dict[str, Any], bits: np.ndarray) -> np.ndarray:
        """This party's Beaver shares of ``<a, b>`` for the candidate pairs with ``e["peer"]``.

        Per chunk of :data:`beaver.CHUNK_PAIRS` pairs (message ``"masked"``, then
        ``"masked.<k>"``) each party expands the masks of only its rows in the chunk, sends
        them masked, and turns the peer's masked rows into shares: at most ``2 C L`` mask
        words are held per party (``C = CHUNK_PAIRS``), whatever the record count. The
        parties run their pairs in the deal order, the same at both, so no two wait on
        each other."""
        left = e["role"] == "left"
        pairs, w = e["pairs"], e["w"]
        col = 0 if left else 1
        names = (me, e["peer"]) if left else (e["peer"], me)
        label = ("u/" if left else "v/") + "/".join(names)
        out = np.empty(pairs.shape[0], dtype=np.uint64)
        for k, (lo, hi) in enumerate(beaver.pair_chunks(pairs.shape[0])):
            part = pairs[lo:hi]
            mine, mine_at = np.unique(part[:, col], return_inverse=True)
            mask = beaver.mask_rows(e["seed"], mine, length=self.length, label=label)
            step = _batch_step("masked", k)
            await ch.send(e["peer"], {"rows": mine, "masked": beaver.mask_bits(bits[mine], mask)}, step=step)
            if not left:  # only the left share needs the mask again
                del mask
            got = await ch.recv(e["peer"], step=step)
            rows = _array(got, "rows", e["peer"], kind="i", ndim=1)
            masked = _array(got, "masked", e["peer"], kind="u", ndim=2)
            need, need_at = np.unique(part[:, 1 - col], return_inverse=True)
            if not np.array_equal(rows, need) or masked.shape != (rows.size, self.length):
                raise ProtocolError(f"{e['peer']!r} sent masked filters for other records than the candidate pairs")
            if left:
                local = np.column_stack([mine_at.ravel(), need_at.ravel()])
                out[lo:hi] = beaver.left_share(mask, masked, local, w[lo:hi])
                del mask
            else:
                local = np.column_stack([need_at.ravel(), part[:, col]])
                out[lo:hi] = beaver.right_share(masked, bits, local, w[lo:hi])
            del got, masked
        return out

    async def _share_round(
        self,
        ch: Channel,
        me: str,
        e: dict[str, Any],
        share: np.ndarray,
        pop: np.ndarray,
        sel: np.ndarray | None,
        level: Fraction,
        tag: str,
        pk: Any,
        dpk: Any,
        rng: RandomSource,
    ) -> None:
        """One threshold round of one pair of parties, in batches of at most
        :data:`BATCH_DECISIONS` decisions (bounded memory at every party)."""
        pairs = e["pairs"] if sel is None else e["pairs"][sel]
        ab = share if sel is None else share[sel]
        per = 1 if pk is None else self._layout(pk, _x_bits((level,), self.length))[1]
        pair = (me, e["peer"]) if e["role"] == "left" else (e["peer"], me)
        for k, (lo, hi) in enumerate(_batches(pairs.shape[0], per)):
            if pk is None:
                await self._dealer_batch(ch, e, pair, pairs[lo:hi], ab[lo:hi], pop, level, tag, k, rng)
                continue
            await self._share_batch(ch, e, pairs[lo:hi], ab[lo:hi], pop, level, tag, k, pk, dpk, rng)

    async def _dealer_batch(
        self,
        ch: Channel,
        e: dict[str, Any],
        pair: tuple[str, str],
        pairs: np.ndarray,
        ab: np.ndarray,
        pop: np.ndarray,
        level: Fraction,
        tag: str,
        k: int,
        rng: RandomSource,
    ) -> None:
        """``comparison="dealer"``: this party's share of ``x`` modulo ``2^60`` (left ``2 den
        a_L - num |a|``, right ``2 den a_R - num |b| + 2 num L``) into the circuit of
        :mod:`privreg.crypto.dealer_compare` with the peer, the linkage unit dealing;
        ``|x - c| < 2^b`` for the level's ``b = _x_bits`` (``0 <= x, c <= 2 den L < 2^b``), so
        the circuit compares ``b + 1`` bits and is exact."""
        scale, num, off, c = _level_terms(level, self.length)
        left = e["role"] == "left"
        own = pop[pairs[:, 0 if left else 1]].astype(np.uint64)
        # uint64 arithmetic wraps modulo 2^64, a multiple of 2^60: exact modulo 2^60
        x = np.uint64(scale) * ab.astype(np.uint64) - np.uint64(num) * own + np.uint64(0 if left else off)
        x &= np.uint64((1 << beaver.SHARE_BITS) - 1)
        step = _batch_step(f"cmp-{tag}", k)
        bits, domain = _x_bits((level,), self.length), _domain(pair, step)
        if left:
            await dealer_compare.compare_left(
                ch, peer=e["peer"], dealer=self.linkage_unit, shares=x, threshold=c, bits=bits, step=step,
                domain=domain, rng=rng,
            )  # fmt: skip
        else:
            await dealer_compare.compare_right(
                ch, peer=e["peer"], dealer=self.linkage_unit, shares=x, bits=bits, step=step, domain=domain
            )

    async def _share_batch(
        self,
        ch: Channel,
        e: dict[str, Any],
        pairs: np.ndarray,
        ab: np.ndarray,
        pop: np.ndarray,
        level: Fraction,
        tag: str,
        k: int,
        pk: Any,
        dpk: Any,
        rng: RandomSource,
    ) -> None:
        """The right party sends its packed encrypted shares; the left party adds its own
        and runs the comparison with the linkage unit."""
        count = pairs.shape[0]
        scale, num, off, c = _level_terms(level, self.length)
        mod = 1 << beaver.SHARE_BITS
        bits = _x_bits((level,), self.length)
        s, per = self._layout(pk, bits)
        if e["role"] == "right":
            own = pop[pairs[:, 1]]
            x = [(scale * int(a) - num * int(p) + off) % mod for a, p in zip(ab.tolist(), own.tolist())]
            packed = [
                sum(x[i] << (s * r) for r, i in enumerate(range(b, min(b + per, count)))) for b in range(0, count, per)
            ]
            vec = encrypt(
                pk, packed, bound=(1 << (s * (per - 1) + beaver.SHARE_BITS + 1)), rng=rng, workers=self.workers
            )
            await send_encrypted(
                ch, e["peer"], vec, step=_batch_step(f"shares-{tag}", k), rng=rng, workers=self.workers
            )
            return
        own = pop[pairs[:, 0]]
        x = [((scale * int(a) - num * int(p)) % mod) - mod for a, p in zip(ab.tolist(), own.tolist())]
        packed = [
            sum(x[i] << (s * r) for r, i in enumerate(range(b, min(b + per, count)))) for b in range(0, count, per)
        ]
        got = await recv_encrypted(
            ch, e["peer"], step=_batch_step(f"shares-{tag}", k), public_key=pk, length=len(packed)
        )
        n, n2 = pk.n, pk.n2
        cts = [ct * (1 + (pa % n) * n) % n2 for ct, pa in zip(got.ciphertexts, packed)]
        await threshold_holder(
            ch,
            keyholder=self.linkage_unit,
            ciphertexts=cts,
            public_key=pk,
            dgk_key=dpk,
            wanted=[(i // per, i % per) for i in range(count)],
            bits=bits,
            threshold=c,
            sigma=_SIGMA,
            step=_batch_step(f"cmp-{tag}", k),
            rng=rng,
            workers=self.workers,
        )


def _dummy_slots(x: Any, k: int, frm: str, peer: str) -> np.ndarray:
    """A left party's dummy slot indices for its pair with ``peer``: increasing, in [0, k)."""
    if (
        not isinstance(x, np.ndarray)
        or x.ndim != 1
        or (x.size and (x.dtype.kind != "i" or x.min() < 0 or x.max() >= k or np.any(np.diff(x) <= 0)))
    ):
        raise ProtocolError(f"{frm!r} sent malformed dummy slots for peer {peer!r} (increasing indices below {k})")
    return x.astype(np.int64)


def _batches(count: int, per: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of at most :data:`BATCH_DECISIONS` decisions, whole ciphertexts each."""
    size = per * max(1, BATCH_DECISIONS // per)
    return [(lo, min(lo + size, count)) for lo in range(0, count, size)]


def _batch_step(step: str, k: int) -> str:
    return step if k == 0 else f"{step}.{k}"


def _domain(pair: tuple[str, str], step: str) -> str:
    """The triples' domain of one batch: the party pair, the level and the batch (``step``)."""
    return f"clk-dice/{pair[0]}/{pair[1]}/{step}"


def run_candidates(
    outputs: Mapping[str, Any], names: Sequence[str], linkage_unit: str = LINKAGE_UNIT
) -> dict[tuple[str, str], np.ndarray]:
    """The run's real candidate pairs ``{(left, right): (k, 2) rows}`` (for evaluation,
    where every party's output is at hand): the linkage unit's under
    ``blocking="linkage-unit"``; under ``"parties"`` and ``"relay"``, the join of the two
    parties' records of each slot (no single party knows both) but the dummies (which the
    left party drew under ``"relay"``), sorted."""
    lu = outputs[linkage_unit]
    if lu["candidates"] is not None:
        return dict(lu["candidates"])
    out: dict[tuple[str, str], np.ndarray] = {}
    for i, j in pair_orientation(names):
        left, right = (names[k] for k in pair_roles(i, j))
        pairs = np.column_stack([outputs[left]["slots"][right], outputs[right]["slots"][left]]).astype(np.int64)
        dummy = (outputs[left].get("dummy_slots") or {}).get(right)
        out[(left, right)] = union_pairs(pairs if dummy is None else pairs[~dummy])
    return out
