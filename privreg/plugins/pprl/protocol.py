"""MP-SPPRL as a multi-party protocol (paper 004): data parties ``P1..Pn`` and a linkage
unit ``P(n+1)`` (named ``"linkage_unit"``).

Flow and message steps (transcript step names in quotes):

1. ``"keys"``: the linkage unit generates a Paillier key pair (2048 bits unless
   ``insecure_allow_small_keys``) and sends each party the public key.
2. Suffix length (only when ``blocking.lmin`` is None; Section 4.2.2): ``"dispersion"``:
   each party sends the single-block dispersions of its LSH blocks (formula (1)) and its
   ``bf`` length; the linkage unit averages them (formula (2)), applies formula (3) and
   sends every party the common ``lmin`` (``"lmin"``).
3. ``"signatures"``: each party runs double blocking
   (:func:`~privreg.plugins.pprl.blocking.party_signatures`) and sends its block
   signatures -- record indices, LSH group, keyed LSH token, suffix length, masked
   suffix -- and the length ``L`` of its matching filters. No filter is sent.
4. The linkage unit merges blocks (:func:`~privreg.plugins.pprl.merge.sliding_window_merge`),
   forms the candidate groups (:func:`~privreg.plugins.pprl.merge.candidate_groups`),
   chooses the encrypting party per LSH key
   (:func:`~privreg.plugins.pprl.assignment.assign_encryptors`) and starts a
   :class:`~privreg.plugins.pprl.matching.MatchingSession`. ``"groups"``: it tells each
   party the records it must encrypt, in order (nothing about other parties' records).
5. Rounds ``r1, r2, ...`` and ``completion`` (Algorithm 1; see
   :mod:`~privreg.plugins.pprl.matching`): ``"requests-<round>"``: the linkage unit tells
   every party which encrypted units to send to whom and which pairs to compute
   (encrypted rows of another party against its own record indices); each encrypting
   party sends the requested ciphertexts peer to peer (``"encrypted-filters-<round>"``);
   each comparing party computes the encrypted Hamming distances
   (:func:`privreg.crypto.hamming.hamming_distances`) and sends them, re-randomised, to the
   linkage unit (``"distances-<round>"``), which decrypts them and drops every group with
   a required pair at distance above ``T`` before the next round.
6. ``"result"``: the linkage unit sends each party its linked records and their group
   ids; its own output is the linked groups (one record index per party).

Outputs: the linkage unit returns the linked groups, the candidate groups and final-block
statistics (it knows them), counts and phase timings; each party
returns ``links`` (rows ``(group id, own record index)``), its counts and timings. Parties
learn which of their records were linked and under which group id (so that two parties can
join their linked records out of band), not the other parties' record indices; the paper's
linkage unit outputs the matched groups ``M``, as here.

Cost (``layout="slots"``, the default): about ``L / R`` encryptions per encrypted record
(``R`` filters share a ciphertext, 21 at 2048 bits), one re-randomisation and half a
decryption per result ciphertext (pairs of one comparer record with neighbouring
encrypted records share one). ``layout="bits"`` is the textbook layout (``L``
encryptions per encrypted record, distances packed hundreds per decryption). See
:mod:`privreg.crypto.hamming`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.params import Spec, check_params
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import counting
from privreg.crypto.channel import (
    RoleParty,
    insecure_key_allowed,
    recv_public_key,
    require_input,
    rerandomized,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.hamming import (
    DEFAULT_SIGMA,
    LAYOUTS,
    EncryptedDistances,
    EncryptedFilters,
    check_layout,
    decrypt_distances,
    encrypt_filters,
    hamming_distances,
    slot_layout,
)
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS, MIN_KEY_BITS, PaillierKeypair, generate_paillier_keypair
from privreg.plugins.pprl.assignment import METHODS, assign_encryptors, group_units
from privreg.plugins.pprl.matching import RULES, ComparisonRound, MatchingSession, check_rule
from privreg.plugins.pprl.message_bounds import OVERHEAD, ciphertext_bytes, header_bytes, public_key_bytes, step_kind
from privreg.plugins.pprl.records import EncodedRecords, Signatures, check_party_records
from privreg.timing import PhaseTimer

__all__ = ["PPRLProtocol", "LINKAGE_UNIT", "data_party_names"]

LINKAGE_UNIT = "linkage_unit"

_SIG_FIELDS = {"record": "i", "lsh_group": "i", "lsh_key": "u", "suffix_len": "i", "suffix": "u"}


def data_party_names(parties: Any, linkage_unit: str) -> tuple[str, ...]:
    """``parties`` (a count: ``P1..Pn``; or names) as at least 2 distinct names other than ``linkage_unit``."""
    if isinstance(parties, int) and not isinstance(parties, bool):
        names = tuple(f"P{i + 1}" for i in range(v.check_int("parties", parties, minimum=2)))
    elif isinstance(parties, Sequence) and not isinstance(parties, str):
        names = tuple(v.check_name("party name", p) for p in parties)
    else:
        raise PrivregTypeError(f"parties must be a number of parties (>= 2) or a sequence of names; got {parties!r}.")
    if len(names) < 2 or len(set(names)) != len(names) or linkage_unit in names:
        raise PrivregValueError(
            f"parties must be at least 2 distinct names other than {linkage_unit!r}; got {list(names)}."
        )
    return names


def _array(payload: Mapping[str, Any], key: str, kind: str, frm: str) -> np.ndarray:
    x = payload.get(key)
    if not isinstance(x, np.ndarray) or x.ndim != 1 or (x.size and x.dtype.kind not in kind):
        raise ProtocolError(f"{frm!r} sent a malformed {key!r} (expected a 1-D {kind} array).")
    return x


def _positive_int(payload: Mapping[str, Any], key: str, frm: str) -> int:
    x = payload.get(key)
    if not isinstance(x, int) or isinstance(x, bool) or x < 1:
        raise ProtocolError(f"{frm!r} sent a malformed {key!r} (expected a positive integer).")
    return x


class _Planner:
    """The linkage unit's view of the encrypted sets: where each encrypted record sits
    (row address ``unit * R + slot``) and which units each comparer already holds."""

    def __init__(self, n: int, per_unit: int) -> None:
        self.R = per_unit
        self.rec: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(n)]
        self.row: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(n)]
        self.next_unit = [0] * n
        self.sent: dict[tuple[int, int], set[int]] = {}

    def add(self, p: int, records: np.ndarray) -> int:
        """Place ``records`` (in order) in new units of party ``p``; returns the first unit."""
        first = self.next_unit[p]
        rows = first * self.R + np.arange(records.size, dtype=np.int64)
        self.next_unit[p] = first + -(-records.size // self.R)
        rec = np.concatenate([self.rec[p], records.astype(np.int64)])
        row = np.concatenate([self.row[p], rows])
        order = np.argsort(rec, kind="stable")
        self.rec[p], self.row[p] = rec[order], row[order]
        return first

    def rows(self, p: int, records: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.rec[p], records)
        if records.size and (pos.max() >= self.rec[p].size or np.any(self.rec[p][pos] != records)):
            raise ProtocolError("internal error: a requested record of an encrypting party is not encrypted")
        return self.row[p][pos]


def check_record_counts(counts: Any, names: Sequence[str], max_records: int | None) -> dict[str, int] | None:
    """``counts`` as ``{data party: records}`` for exactly the data parties ``names``, each
    a positive int (at most ``max_records`` when given); None stays None."""
    if counts is None:
        return None
    if not isinstance(counts, Mapping) or set(counts) != set(names):
        raise PrivregValueError(
            f"record_counts must give the record count of every data party {list(names)} and no other; got the "
            f"parties {sorted(map(str, counts)) if isinstance(counts, Mapping) else type(counts).__name__}."
        )
    top = max_records if max_records is not None else None
    out = {}
    for p in names:
        out[p] = v.check_int(f"record_counts[{p!r}]", counts[p], minimum=1)
        if top is not None and out[p] > top:
            raise PrivregValueError(
                f"record_counts[{p!r}] = {out[p]} is above max_records = {top}; raise max_records at every party."
            )
    return out


# the registry's parameters of PPRLProtocol (the other arguments are for Python callers)
_Parties = Annotated[int | Sequence[str], Spec(type=int, minimum=2, doc="number of data parties (P1..Pn)")]
_Threshold = Annotated[int, Spec(minimum=0, doc="T: largest Hamming distance of a match")]
_Rule = Annotated[str, Spec(choices=RULES, doc="star (the paper's verdict) or all (every pair within T)")]
_Layout = Annotated[
    str, Spec(choices=LAYOUTS, doc="ciphertext layout of the filters (slots: many filters per ciphertext)")
]
_KeyBits = Annotated[int, Spec(minimum=MIN_INSECURE_KEY_BITS, doc="Paillier modulus bits of the linkage unit's key")]
_Insecure = Annotated[bool, Spec(doc="allow keys below 2048 bits (INSECURE; tests only)")]


class PPRLProtocol(Protocol):
    """MP-SPPRL between data parties and a linkage unit (see the module docstring).

    Args:
        parties: the number of data parties (named ``P1..Pn``) or their names.
        records: ``{party: EncodedRecords}`` for the parties hosted in this process.
        secret: the data parties' shared secret (blocking tokens, masks, LSH positions);
            never given to the linkage unit.
        blocking: double-blocking and merge parameters (default: the paper's).
        threshold: ``T``; a pair matches iff its Hamming distance is at most ``T`` (3).
        rule: ``"star"`` (the paper's verdict) or ``"all"`` (every pair within ``T``).
        early_rounds: star rounds with early termination before the completion batch.
        layout: ciphertext layout of the filters, ``"slots"`` (default) or ``"bits"``.
        sigma: statistical security of the masked slots (``"slots"``).
        key_bits: Paillier modulus size (2048; smaller only with
            ``insecure_allow_small_keys=True``); ``keypair``: a key to use instead of a
            fresh one (the linkage unit's, e.g. a cached test key).
        speeds: relative encryption speed per party for the assignment (default equal).
        assignment_method, assignment_time_limit: see
            :func:`~privreg.plugins.pprl.assignment.assign_encryptors`.
        max_group_products, max_block_products: guards of
            :func:`~privreg.plugins.pprl.merge.candidate_groups`.
        rng: randomness (key, obfuscators, masks, dispersion sampling); default the OS
            CSPRNG. ``workers``: processes for the Paillier batches (None: automatic).
        max_records, max_filter_bits: public caps on a data party's records and filter
            length; with ``max_records`` the protocol bounds every message
            (:meth:`max_message_bytes`) and the linkage unit refuses signatures beyond it.
        record_counts: ``{data party: records}``, the run's declared record counts (every
            party gives the same); a hosted party must hold exactly that many. They bound
            every message per kind (:meth:`message_bound`, formulas in
            :mod:`~privreg.plugins.pprl.message_bounds`), tighter than ``max_records``.
        progress: a :data:`~privreg.core.progress.ProgressCallback`, where the linkage
            unit runs: phases ``"MP-SPPRL setup"`` (keys, blocking, assignment) and
            ``"matching rounds"`` (Algorithm 1's rounds and the completion batch).
    """

    name = "mp-spprl"
    caveats = (
        "Semi-honest parties, no collusion between the linkage unit and any data party: a comparing party holds "
        "other parties' filters encrypted under the linkage unit's key, and the data parties share the blocking "
        "secret (keyed LSH tokens and suffix masks), so the linkage unit together with one party could decrypt "
        "filters and invert block signatures. The linkage unit learns block signatures (equality of keyed LSH "
        "tokens across parties, masked suffixes hence the XOR of suffixes within a signature list, block sizes "
        "and memberships as record indices), the single-block dispersions when lmin is chosen by the protocol, "
        "the candidate groups and the exact Hamming distances of every compared pair (with layout='slots' also "
        "at most 2^-sigma statistical information per masked slot). Data parties learn the linkage unit's "
        "requests: which of their records are encrypted or compared, how many encrypted rows of which party "
        "they are compared with and which of their records meet the same encrypted row; two colluding comparing "
        "parties can recognise that they received the same encrypted filter. Paillier semantic security rests "
        "on DCR plus the DJN short-exponent assumption (the default DJN encryption). Bloom filter encodings are "
        "deterministic under the shared secret. Not constant-time. Network: between processes run it over "
        "mutual TLS (privreg party; TcpTransport(tls=...)); a network attacker then learns who talks to whom, "
        "when, and every message's size -- hence record counts, block sizes, round counts and how many pairs each "
        "party compares -- but no content; plaintext mode (insecure_plaintext) shows everything. Malicious "
        "parties: the protocol is proven only for semi-honest ones. A data party that deviates can send false "
        "signatures or distances and so corrupt the linkage (undetected), or stop the run; it cannot read another "
        "party's filters without the linkage unit's key. A malicious linkage unit can ask parties to encrypt or "
        "compare any of their records (they comply) and learns the Hamming distances it asks for, and it sees "
        "which record ids each party links. Every received message is type- and range-checked and capped in size "
        "per kind (message_bound: from the declared record counts, filter bits and key size, so a peer can make a "
        "party allocate no more than a legitimate message of the run takes; the declared counts are public to every "
        "party), so a malformed or oversized message stops the run with an error naming the sender."
    )

    @check_params
    def __init__(
        self,
        *,
        parties: _Parties = 3,
        records: Mapping[str, EncodedRecords] | None = None,
        secret: bytes | None = None,
        blocking: Any = None,
        threshold: _Threshold = 3,
        rule: _Rule = "star",
        early_rounds: int | None = None,
        layout: _Layout = "slots",
        sigma: int = DEFAULT_SIGMA,
        key_bits: _KeyBits = MIN_KEY_BITS,
        insecure_allow_small_keys: _Insecure = False,
        keypair: PaillierKeypair | None = None,
        speeds: Mapping[str, float] | None = None,
        assignment_method: str = "auto",
        assignment_time_limit: float = 1.0,
        max_group_products: int | None = None,
        max_block_products: int | None = None,
        rng: RandomSource | None = None,
        workers: int | None = None,
        linkage_unit: str = LINKAGE_UNIT,
        max_records: int | None = None,
        max_filter_bits: int = 4096,
        progress: ProgressCallback | None = None,
        record_counts: Mapping[str, int] | None = None,
    ) -> None:
        from privreg.plugins.pprl.blocking import check_blocking
        from privreg.plugins.pprl.kdf import check_secret

        self.linkage_unit = v.check_name("linkage_unit", linkage_unit)
        self.names = data_party_names(parties, self.linkage_unit)
        n = len(self.names)
        self.records = {} if records is None else check_party_records(records, self.names)
        self.secret = None if secret is None else check_secret(secret)
        self.blocking, self.window = check_blocking(blocking, n)
        self.threshold = v.check_int("threshold", threshold)
        self.rule = check_rule(rule)
        if early_rounds is not None:
            v.check_int("early_rounds", early_rounds, minimum=1)
            if early_rounds > n - 1:
                raise PrivregValueError(f"early_rounds must be between 1 and {n - 1}; got {early_rounds}.")
        self.early_rounds = early_rounds
        self.layout = check_layout(layout)
        self.sigma = v.check_int("sigma", sigma, minimum=1)
        if not isinstance(insecure_allow_small_keys, bool):
            raise PrivregTypeError(
                f"insecure_allow_small_keys must be True or False; got {insecure_allow_small_keys!r}."
            )
        self.insecure = insecure_allow_small_keys
        self.key_bits = v.check_int("key_bits", key_bits)
        if keypair is not None:
            if not isinstance(keypair, PaillierKeypair):
                raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
            self.key_bits = keypair.public_key.n_bits
        if self.key_bits < MIN_KEY_BITS and not self.insecure:
            raise PrivregValueError(
                f"a {self.key_bits}-bit Paillier key is below the {MIN_KEY_BITS}-bit minimum; use key_bits="
                f"{MIN_KEY_BITS} (the default), or pass insecure_allow_small_keys=True for tests only."
            )
        self.keypair = keypair
        if speeds is not None and (not isinstance(speeds, Mapping) or set(speeds) != set(self.names)):
            raise PrivregValueError(f"speeds must map every party {list(self.names)} to a positive number.")
        self.speeds = None if speeds is None else {p: v.check_real(f"speeds[{p!r}]", x) for p, x in speeds.items()}
        if self.speeds is not None and not all(x > 0 for x in self.speeds.values()):
            raise PrivregValueError("speeds must be positive.")
        if assignment_method not in METHODS:
            raise PrivregValueError(f"assignment_method must be one of {METHODS}; got {assignment_method!r}.")
        self.assignment_method = assignment_method
        self.assignment_time_limit = v.check_real("assignment_time_limit", assignment_time_limit)
        self.max_group_products = max_group_products
        self.max_block_products = max_block_products
        self.rng = rng
        if workers is not None:
            v.check_int("workers", workers, minimum=1)
        self.workers = workers
        self.max_records = None if max_records is None else v.check_int("max_records", max_records, minimum=1)
        self.max_filter_bits = v.check_int("max_filter_bits", max_filter_bits, minimum=1)
        self.progress = check_progress("progress", progress)
        self.record_counts = check_record_counts(record_counts, self.names, self.max_records)
        for p, rec in self.records.items():
            if self.record_counts is not None and len(rec) != self.record_counts[p]:
                raise PrivregValueError(
                    f"party {p!r} holds {len(rec)} records but its declared record count is {self.record_counts[p]}; "
                    f"declare {len(rec)} at every party."
                )
            if self.max_records is not None and len(rec) > self.max_records:
                raise PrivregValueError(
                    f"party {p!r} holds {len(rec)} records, above max_records={self.max_records}; raise max_records "
                    f"at every party."
                )
            if rec.match_filters.shape[1] > self.max_filter_bits or rec.block_filters.shape[1] > self.max_filter_bits:
                raise PrivregValueError(
                    f"party {p!r} has filters longer than max_filter_bits={self.max_filter_bits}; raise it at every "
                    f"party."
                )

    def _counts(self) -> dict[str, int] | None:
        """Records per data party that bound the messages: the declared counts, else
        ``max_records`` for every party, else None (no bound)."""
        if self.record_counts is not None:
            return dict(self.record_counts)
        if self.max_records is not None:
            return dict.fromkeys(self.names, self.max_records)
        return None

    def _units(self, m: int) -> int:
        """Ciphertext units of a party of ``m`` records (see message_bounds)."""
        if self.layout == "bits":
            return m
        slot_bits = 8 * -(-(self.max_filter_bits.bit_length() + 1 + self.sigma) // 8)
        per = max(1, (self.key_bits // 2 - 1) // slot_bits)
        return min(m, -(-m // per) + len(self.names) + 1)

    def _kind_bound(self, kind: str, sender: str, receiver: str, counts: Mapping[str, int]) -> int | None:
        n, kb, L = len(self.names), self.key_bits, self.max_filter_bits
        c, h = ciphertext_bytes(kb), header_bytes(kb)
        J, x = self.blocking.lsh_groups, self.blocking.suffix_count
        lu = self.linkage_unit
        if sender == lu and receiver in counts:
            m = counts[receiver]
            q = 2 * self.window * (n + 1) * m
            return {
                "keys": public_key_bytes(kb),
                "lmin": OVERHEAD,
                "groups": 8 * m + OVERHEAD,
                "requests": 8 * m + 8 * (n - 1) * self._units(m) + 16 * q + n * OVERHEAD,
                "result": 16 * m + OVERHEAD,
            }.get(kind, 0)
        if receiver == lu and sender in counts:
            m = counts[sender]
            q = 2 * self.window * (n + 1) * m
            return {
                "dispersion": 8 * J * m + OVERHEAD,
                "signatures": 40 * J * x * m + OVERHEAD,
                "distances": q * (c + 16) + n * (h + OVERHEAD),
            }.get(kind, 0)
        if sender in counts and receiver in counts and kind == "encrypted-filters":
            return self._units(counts[sender]) * (L * c + 16) + h + OVERHEAD
        return 0

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        """The bound of a message of ``step`` from ``sender`` to ``receiver``, from the
        declared record counts (else ``max_records``), ``max_filter_bits``, the key size
        and the blocking parameters: the formulas of
        :mod:`~privreg.plugins.pprl.message_bounds`; 0 for a message the protocol never
        sends (it is refused). None when no record count is known."""
        counts = self._counts()
        if counts is None:
            return None
        kind = step_kind(
            step,
            {"requests-": "requests", "encrypted-filters-": "encrypted-filters", "distances-": "distances"},
        )
        return self._kind_bound(kind, sender, receiver, counts)

    def max_message_bytes(self) -> int | None:
        """The largest :meth:`message_bound` of any message of the run (None without
        declared record counts or ``max_records``)."""
        counts = self._counts()
        if counts is None:
            return None
        kinds = ("keys", "lmin", "groups", "requests", "result", "dispersion", "signatures", "distances")
        everyone = [self.linkage_unit, *self.names]
        return max(
            max(self._kind_bound(k, s, r, counts) or 0 for s in everyone for r in everyone if s != r)
            for k in (*kinds, "encrypted-filters")
        )

    # ------------------------------------------------------------------ Protocol API

    def parties(self) -> Sequence[Party]:
        out: list[Party] = [RoleParty(self.linkage_unit, self._run_linkage_unit)]
        for p in self.names:
            out.append(RoleParty(p, lambda ch, p=p: self._run_party(ch, p)))
        return out

    def learns(self) -> Mapping[str, str]:
        lu = (
            "the public parameters (n, L, T, blocking parameters, layout); every party's block signatures: "
            "record indices, LSH group, keyed LSH token (equal tokens = equal LSH keys; the bits stay hidden), "
            "suffix length and masked suffix (within a signature list: the XOR of two suffixes); single-block "
            "dispersions (if lmin is chosen by the protocol); hence block sizes, final blocks and candidate "
            "groups; the Hamming distance of every compared pair (slots layout: plus at most 2^-sigma "
            "statistical information per masked slot); the linked groups (its output)"
        )
        party = (
            "the linkage unit's public key; lmin; ciphertexts of other parties' matching filters under the "
            "linkage unit's key (semantically secure); the linkage unit's requests: which of its own records "
            "to encrypt and to compare, against how many encrypted rows of which party; and its output: "
            "which of its records were linked, under which group id"
        )
        return {self.linkage_unit: lu, **dict.fromkeys(self.names, party)}

    # ------------------------------------------------------------------ linkage unit

    async def _run_linkage_unit(self, ch: Channel) -> dict[str, Any]:
        from privreg.plugins.pprl.blocking import lmin_from_entropies
        from privreg.plugins.pprl.merge import (
            block_statistics,
            candidate_groups,
            oversized_blocks,
            sliding_window_merge,
        )

        rng = resolve_random(self.rng)
        # wall seconds per phase; parties share one event loop in memory, so a phase of one
        # party's synchronous computation is that party's own time
        timer = PhaseTimer()
        setup = PhaseProgress(self.progress, "MP-SPPRL setup", total=3, unit="step")
        with counting() as ops:
            kp = self.keypair or generate_paillier_keypair(
                n_bits=self.key_bits, insecure_allow_small_keys=self.insecure, rng=rng
            )
            pk, sk = kp.public_key, kp.private_key
            for p in self.names:
                await send_public_key(ch, p, pk, step="keys")
            timer.lap("keys")
            setup.advance()
            # --- blocking: suffix length, signatures, merge, candidate groups
            cfg = self.blocking
            dispersion: dict[str, Any] = {}
            if cfg.lmin is None:
                per, lengths = [], set()
                for p in self.names:
                    msg = await ch.recv(p, step="dispersion")
                    if not isinstance(msg, Mapping):
                        raise ProtocolError(f"{p!r} sent a malformed dispersion message.")
                    per.append(_array(msg, "entropies", "f", p))
                    lengths.add(_positive_int(msg, "filter_length", p))
                if len(lengths) != 1:
                    raise ProtocolError(f"the parties' bf lengths differ: {sorted(lengths)}.")
                choice = lmin_from_entropies(per, config=cfg, filter_length=lengths.pop())
                lmin = choice.lmin
                dispersion = {"hs": choice.hs, "raw": choice.raw, "sampled_blocks": choice.sampled_blocks}
                for p in self.names:
                    await ch.send(p, {"lmin": lmin}, step="lmin")
            else:
                lmin = cfg.lmin
            sigs, lengths = [], set()
            for p in self.names:
                msg = await ch.recv(p, step="signatures")
                if not isinstance(msg, Mapping) or set(msg) != set(_SIG_FIELDS) | {"filter_length"}:
                    raise ProtocolError(f"{p!r} sent malformed signatures.")
                arrays = {k: _array(msg, k, kind, p) for k, kind in _SIG_FIELDS.items()}
                if len({a.size for a in arrays.values()}) != 1:
                    raise ProtocolError(f"{p!r} sent signature arrays of different lengths.")
                lengths.add(_positive_int(msg, "filter_length", p))
                self._check_signature_ranges(arrays, p)
                sigs.append(
                    Signatures(
                        party=p,
                        record=arrays["record"].astype(np.int64),
                        lsh_group=arrays["lsh_group"].astype(np.int64),
                        lsh_key=arrays["lsh_key"].astype(np.uint64),
                        suffix_len=arrays["suffix_len"].astype(np.int64),
                        suffix=arrays["suffix"].astype(np.uint64),
                    )
                )
            if len(lengths) != 1:
                raise ProtocolError(f"the parties' matching filter lengths differ: {sorted(lengths)}.")
            length = lengths.pop()
            if length > self.max_filter_bits:
                raise ProtocolError(f"the parties' matching filters ({length} bits) exceed max_filter_bits.")
            blocks = sliding_window_merge(sigs, window=self.window)
            groups = candidate_groups(
                blocks,
                parties=self.names,
                max_group_products=self.max_group_products,
                max_block_products=self.max_block_products,
            )
            skipped = (
                0
                if self.max_block_products is None
                else int(oversized_blocks(blocks, parties=self.names, limit=self.max_block_products).size)
            )
            timer.lap("blocking")
            setup.advance()
            units = group_units(groups, blocks)
            assignment = assign_encryptors(
                groups, units, speeds=self.speeds, method=self.assignment_method, time_limit=self.assignment_time_limit
            )
            speeds = None if self.speeds is None else [self.speeds[p] for p in self.names]
            session = MatchingSession(
                groups,
                assignment.group_encryptors(units),
                threshold=self.threshold,
                rule=self.rule,
                early_rounds=self.early_rounds,
                speeds=speeds,
            )
            timer.lap("assignment")
            setup.advance()
            # --- matching
            per_unit = 1 if self.layout == "bits" else slot_layout(pk, length=length, sigma=self.sigma)[1]
            planner = _Planner(len(self.names), per_unit)
            sets = session.encrypt_sets()
            for i, p in enumerate(self.names):
                planner.add(i, sets[i])
                await ch.send(p, {"encrypt": sets[i]}, step="groups")
            rounds = PhaseProgress(self.progress, "matching rounds", total=session.stages, unit="round")
            while (plan := session.next_round()) is not None:
                distances = await self._lu_round(ch, plan, planner, pk, sk, length, timer)
                session.submit(plan, distances)
                rounds.update(session.stages_done)
            rounds.finish()
            result = session.result()
            for i, p in enumerate(self.names):
                await ch.send(
                    p,
                    {
                        "kind": "result",
                        "groups": np.arange(result.group_ids.size, dtype=np.int64),
                        "records": result.links[:, i].astype(np.int64),
                    },
                    step="result",
                )
            timer.lap("matching")
        seconds = dict(timer.wall)
        seconds["total"] = timer.elapsed()
        return {
            "links": result.links,
            "parties": self.names,
            "candidates": len(groups),
            "blocks": len(blocks),
            "groups": groups,
            "block_stats": block_statistics(blocks),
            "skipped_blocks": skipped,
            "lmin": lmin,
            "dispersion": dispersion,
            "counts": result.counts,
            "assignment": assignment,
            "layout": self.layout,
            "timings": seconds,
            "ops": ops.as_dict(),
        }

    async def _lu_round(
        self, ch: Channel, plan: ComparisonRound, planner: _Planner, pk: Any, sk: Any, length: int, timer: PhaseTimer
    ) -> np.ndarray:
        """Send one round's requests, collect and decrypt its distances (in plan order)."""
        label = plan.label
        n = len(self.names)
        msgs: list[dict[str, Any]] = [
            {"kind": "round", "label": label, "encrypt": None, "send": {}, "receive": [], "compare": []}
            for _ in range(n)
        ]
        for p, recs in plan.new_encryptions.items():
            first = planner.add(p, recs)
            msgs[p]["encrypt"] = {"records": recs, "first_unit": first}
        rows = np.empty(len(plan), dtype=np.int64)
        for e in range(n):
            sel = plan.enc_party == e
            if sel.any():
                rows[sel] = planner.rows(e, plan.enc_record[sel])
        index: dict[int, list[np.ndarray]] = {}
        for c in range(n):
            for e in range(n):
                sel = np.flatnonzero((plan.cmp_party == c) & (plan.enc_party == e))
                if sel.size == 0:
                    continue
                units = np.unique(rows[sel] // planner.R)
                have = planner.sent.setdefault((e, c), set())
                new = np.array([u for u in units.tolist() if u not in have], dtype=np.int64)
                have.update(new.tolist())
                if new.size:
                    msgs[e]["send"][self.names[c]] = new
                    msgs[c]["receive"].append(self.names[e])
                msgs[c]["compare"].append({"from": self.names[e], "rows": rows[sel], "records": plan.cmp_record[sel]})
                index.setdefault(c, []).append(sel)
        for name, msg in zip(self.names, msgs):
            await ch.send(name, msg, step=f"requests-{label}")
        out = np.full(len(plan), -1, dtype=np.int64)
        for c, sels in index.items():
            payload = await ch.recv(self.names[c], step=f"distances-{label}")
            parts = payload.get("parts") if isinstance(payload, Mapping) else None
            if not isinstance(parts, list) or len(parts) != len(sels):
                raise ProtocolError(f"{self.names[c]!r} sent malformed distances for round {label!r}.")
            with timer.phase("decryption"):
                for sel, part in zip(sels, parts):
                    d = EncryptedDistances.from_payload(part, public_key=pk)
                    if d.count != sel.size or d.length != length or d.layout != self.layout:
                        raise ProtocolError(f"{self.names[c]!r} sent distances that do not match round {label!r}.")
                    out[sel] = decrypt_distances(sk, d, workers=self.workers)
        if np.any(out < 0):
            raise ProtocolError(f"round {label!r} ended with pairs whose distance never arrived.")
        return out

    # ------------------------------------------------------------------ data parties

    async def _run_party(self, ch: Channel, me: str) -> dict[str, Any]:
        from privreg.plugins.pprl.blocking import party_dispersion, party_signatures

        records = require_input(self.records.get(me), f"records[{me!r}]", me)
        secret = require_input(self.secret, "secret", me)
        rng = resolve_random(self.rng)
        lu = self.linkage_unit
        timer = PhaseTimer()  # wall seconds per phase, as the linkage unit's
        filters = np.ascontiguousarray(records.match_filters, dtype=bool)
        with counting() as ops:
            pk = await recv_public_key(ch, lu, step="keys", allow_insecure=insecure_key_allowed(self.insecure, rng))
            timer.mark()
            cfg = self.blocking
            if cfg.lmin is None:
                ent = party_dispersion(records, config=cfg, secret=secret, rng=rng)
                timer.lap("blocking")
                await ch.send(
                    lu,
                    {
                        "entropies": np.asarray(ent, dtype=np.float64),
                        "filter_length": int(records.block_filters.shape[1]),
                    },
                    step="dispersion",
                )
                msg = await ch.recv(lu, step="lmin")
                lmin = msg.get("lmin") if isinstance(msg, Mapping) else None
                if not isinstance(lmin, int) or isinstance(lmin, bool) or lmin < 0:
                    raise ProtocolError("the linkage unit sent a malformed lmin.")
                timer.mark()
            else:
                lmin = cfg.lmin
            sig = party_signatures(records, config=cfg, secret=secret, lmin=lmin, rng=rng)
            timer.lap("blocking")
            await ch.send(
                lu,
                {
                    "record": sig.record,
                    "lsh_group": sig.lsh_group,
                    "lsh_key": sig.lsh_key,
                    "suffix_len": sig.suffix_len,
                    "suffix": sig.suffix,
                    "filter_length": int(filters.shape[1]),
                },
                step="signatures",
            )
            msg = await ch.recv(lu, step="groups")
            enc_records = self._records_field(msg, "encrypt", len(records))
            timer.mark()
            own = encrypt_filters(
                pk, filters[enc_records], layout=self.layout, sigma=self.sigma, rng=rng, workers=self.workers
            )
            encrypted = int(enc_records.size)
            timer.lap("encryption")
            received: dict[str, EncryptedFilters] = {}
            while True:
                msg = await ch.recv(lu)
                if not isinstance(msg, Mapping) or msg.get("kind") not in ("round", "result"):
                    raise ProtocolError("the linkage unit sent a malformed request.")
                if msg["kind"] == "result":
                    recs = self._records_field(msg, "records", len(records))
                    group_ids = _array(msg, "groups", "iu", lu).astype(np.int64)
                    if group_ids.size != recs.size:
                        raise ProtocolError(
                            "the linkage unit sent a result whose group and record lists differ in length."
                        )
                    links = np.stack([group_ids, recs], axis=1)
                    break
                label = msg["label"]
                if msg["encrypt"] is not None:
                    more = self._records_field(msg["encrypt"], "records", len(records))
                    timer.mark()
                    own = own.merged(
                        encrypt_filters(
                            pk,
                            filters[more],
                            layout=self.layout,
                            sigma=self.sigma,
                            first_unit=int(msg["encrypt"]["first_unit"]),
                            rng=rng,
                            workers=self.workers,
                        )
                    )
                    encrypted += int(more.size)
                    timer.lap("encryption")
                for c, units in sorted(msg["send"].items()):
                    await send_encrypted(
                        ch,
                        c,
                        own.select(units).to_payload(),
                        step=f"encrypted-filters-{label}",
                        rng=rng,
                        workers=self.workers,
                    )
                for e in sorted(msg["receive"]):
                    payload = await ch.recv(e, step=f"encrypted-filters-{label}")
                    got = EncryptedFilters.from_payload(
                        payload, public_key=pk, sigma=self.sigma if self.layout == "slots" else None
                    )
                    if got.layout != self.layout or got.length != filters.shape[1]:
                        raise ProtocolError(f"{e!r} sent encrypted filters of another layout or length.")
                    received[e] = received[e].merged(got) if e in received else got
                if msg["compare"]:
                    parts = []
                    timer.mark()
                    for req in msg["compare"]:  # in the linkage unit's order: it maps the parts back
                        e = req.get("from") if isinstance(req, Mapping) else None
                        if e not in received:
                            raise ProtocolError(f"asked to compare with {e!r}, which sent no encrypted filters.")
                        recs = self._records_field(req, "records", len(records))
                        rows = _array(req, "rows", "iu", lu)
                        d = hamming_distances(received[e], rows, filters[recs], rng=rng, workers=self.workers)
                        parts.append(d.to_payload())
                    payload = rerandomized({"parts": parts}, rng=rng, workers=self.workers)
                    timer.lap("distances")
                    await send_encrypted(ch, lu, payload, step=f"distances-{label}", rng=rng, workers=self.workers)
        return {
            "links": links,
            "ids": tuple(records.ids[int(i)] for i in links[:, 1]),
            "encrypted": encrypted,
            "timings": dict(timer.wall),
            "ops": ops.as_dict(),
        }

    def _check_signature_ranges(self, arrays: Mapping[str, np.ndarray], p: str) -> None:
        """Refuse signatures whose fields are out of range, naming the sender ``p``."""
        rec, grp, slen = arrays["record"], arrays["lsh_group"], arrays["suffix_len"]
        if not rec.size:
            return
        counts = self._counts()
        top = counts[p] if counts is not None else np.iinfo(np.int64).max
        if int(rec.min()) < 0 or int(rec.max()) >= top:
            raise ProtocolError(
                f"{p!r} sent signatures of record indices outside 0..{top - 1} (its declared record count)."
            )
        if int(grp.min()) < 0 or int(grp.max()) >= self.blocking.lsh_groups:
            raise ProtocolError(f"{p!r} sent signatures of LSH groups outside 0..{self.blocking.lsh_groups - 1}.")
        if int(slen.min()) < 0 or int(slen.max()) > 64:
            raise ProtocolError(f"{p!r} sent signatures with suffix lengths outside 0..64.")

    @staticmethod
    def _records_field(msg: Any, key: str, count: int) -> np.ndarray:
        if not isinstance(msg, Mapping):
            raise ProtocolError("the linkage unit sent a malformed request.")
        recs = _array(msg, key, "iu", LINKAGE_UNIT).astype(np.int64)
        if recs.size and (recs.min() < 0 or recs.max() >= count):
            raise ProtocolError(f"the linkage unit referred to records outside 0..{count - 1}.")
        return recs
