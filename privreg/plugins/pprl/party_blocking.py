"""Blocking among the data parties (``clk-dice`` with ``blocking="parties"``, issue #33).

Tokens: each data party first turns its keyed band tokens and exact-pass tokens into
``F_k(column, token)``, the linkage unit's oblivious PRF (:mod:`oprf`, 2HashDH): it sends
the linkage unit one blinded group element per record and band or exact pass
(:func:`oprf_rows`; a missing exact token is replaced by a random input, so the count is
``m (J + F)`` whatever the data) and :data:`CANARIES` check inputs per peer
(:func:`canary_rows`, from the pair key, indistinguishable from the rest), in a private
random order; the linkage unit raises each to its key and sends them back. The linkage unit
sees only uniformly random group elements and their number; a data party learns ``F_k``
on its own inputs only. The two parties of a pair exchange a keyed digest of their check
outputs (:func:`canary_check`) with their pair tokens and stop when they differ (a wrong
or missing evaluation).

Per pair of data parties ``(P, Q)`` (names in the run's order), both derive a pair key
from the shared secret and the two names (HKDF, :func:`kdf.derive_key`, label
``clk-dice/pair/P/Q``), re-key their band tokens and exact-pass tokens with it
(:func:`pair_tokens`, a keyed PRF per band and token, so two party pairs' tokens of one
record differ) and send them to each other in a private random order of their rows
(:func:`private_order`: the peer never sees the row order). Each then computes the same
candidate pairs (:func:`bands.candidate_pairs`, in the two sent orders) and puts them in
the same keyed pseudorandom order (:func:`slot_order`): the *slots* of the pair. The linkage
unit receives, per pair, only the slot count and a keyed digest of the slot list from both
parties (:func:`slot_digest`) and refuses to deal when they differ; it deals the Beaver
masks per slot, so it holds no record index, no pair structure and no per-pair statistic
before the decisions. Afterwards it asks each party for its record of every *accepted*
slot only (to form groups: what the output shows anyway).

Leakage to the data parties (measured in ``benchmarks/pprl_blocking.py``; the attacks are
run on a transcript in ``tests/test_pprl_party_blocking.py``): each receives its peers'
pair tokens. Before the OPRF it could invert every 16-bit band token by trying the
``2^16`` values with the shared secret and read about 85 % of every peer CLK's bits; with
it, it cannot evaluate ``F_k`` on a value it does not hold, so that attack inverts no token.
It still sees which of its records share band tokens (and exact-pass tokens: equal dates
of birth, ids) with which of a peer's rows: the peer's band value wherever it holds the
same value itself, a Dice estimate between its records and the peer's from the shared
count (Spearman 0.955-0.975 on FEBRL 4, as before), and membership (it computes its real
candidates itself, so padding would hide nothing), and which of the peer's rows share
tokens with each other (near-duplicates within the peer). Semi-honest: a party that queried guessed values
in place of its records could invert those (the linkage unit bounds a query to the
declared records times the bands and exact passes, so about ``m (J + F) / 2^16`` bands
in full); a party colluding with the linkage unit gets ``F_k`` anywhere and the attack
back.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from privreg.core.errors import ProtocolError
from privreg.core.randomness import RandomSource
from privreg.plugins.pprl.blocking import prf_words
from privreg.plugins.pprl.kdf import derive_key

__all__ = [
    "CANARIES",
    "pair_key",
    "pair_tokens",
    "private_order",
    "slot_order",
    "slot_permutation",
    "slot_digest",
    "check_pair_tokens",
    "oprf_rows",
    "fill_missing",
    "canary_rows",
    "canary_check",
]

DIGEST_BYTES = 32
#: Check inputs per peer in a party's OPRF query (:func:`canary_rows`).
CANARIES = 4
_CANARY_COLUMN = (1 << 64) - 1  # never a band or exact-pass column


def pair_key(secret: bytes, left: str, right: str, purpose: str) -> bytes:
    """The key of the party pair ``(left, right)`` (run order) for ``purpose``."""
    return derive_key(secret, info=f"clk-dice/pair/{purpose}/{left}/{right}")


def pair_tokens(tokens: np.ndarray, exact: np.ndarray, key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Band tokens and exact-pass tokens re-keyed for one party pair (equality within a
    column is kept; a missing exact token, 0, stays 0)."""
    m, J = tokens.shape
    col = np.broadcast_to(np.arange(J, dtype=np.uint64), (m, J)).reshape(-1)
    tok = prf_words(key, np.stack([col, tokens.reshape(-1)], axis=1)).reshape(m, J) if m * J else tokens.copy()
    F = exact.shape[1]
    ex = np.zeros_like(exact)
    if m * F:
        cols = np.broadcast_to(np.arange(J, J + F, dtype=np.uint64), (m, F)).reshape(-1)
        words = prf_words(key, np.stack([cols, exact.reshape(-1)], axis=1)).reshape(m, F)
        ex = np.where(exact != 0, words | np.uint64(1), np.uint64(0))  # never 0 for a present value
    return tok, ex


def private_order(m: int, rng: RandomSource) -> np.ndarray:
    """A uniformly random permutation of ``range(m)`` (row ``k`` sent is record ``perm[k]``)."""
    keys = np.frombuffer(rng.random_bytes(8 * m), dtype="<u8")
    return np.argsort(keys, kind="stable").astype(np.int64)


def slot_permutation(pairs: np.ndarray, key: bytes) -> np.ndarray:
    """The indices that put ``pairs`` in :func:`slot_order`."""
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not p.size:
        return np.zeros(0, dtype=np.int64)
    score = prf_words(key, p.astype(np.uint64))
    return np.lexsort((p[:, 1], p[:, 0], score)).astype(np.int64)


def slot_order(pairs: np.ndarray, key: bytes) -> np.ndarray:
    """The pairs in a keyed pseudorandom order both parties compute alike: a slot's position
    tells the linkage unit nothing about its records."""
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return p[slot_permutation(p, key)]


def slot_digest(slots: np.ndarray, key: bytes) -> bytes:
    """A keyed digest of the slot list (the linkage unit compares the two parties' digests
    and cannot test a guessed list without the key)."""
    data = np.ascontiguousarray(np.asarray(slots, dtype="<i8")).tobytes()
    return hashlib.blake2b(data, key=key[:64], digest_size=DIGEST_BYTES).digest()


def check_pair_tokens(msg: Any, frm: str, *, bands: int, exact: int, rows: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A peer's ``{"tokens", "exact"}`` message, checked against this party's shapes."""
    got = []
    for name, width in (("tokens", bands), ("exact", exact)):
        x = msg.get(name) if isinstance(msg, dict) else None
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != width or (x.size and x.dtype.kind != "u"):
            raise ProtocolError(f"{frm!r} sent malformed {name!r} (expected (records, {width}) unsigned words)")
        got.append(x)
    tok, ex = got
    if tok.shape[0] != ex.shape[0] or (rows is not None and tok.shape[0] != rows):
        raise ProtocolError(f"{frm!r} sent tokens for another number of records than it declared")
    return tok.astype(np.uint64), ex.astype(np.uint64)


def fill_missing(exact: np.ndarray, rng: RandomSource) -> np.ndarray:
    """A copy of the exact-pass tokens with each missing one (0) replaced by a fresh random
    word: it matches nothing, and the count of words stays the same whatever the data."""
    ex = np.array(exact, dtype=np.uint64, copy=True)
    missing = ex == 0
    if missing.any():
        ex[missing] = np.frombuffer(rng.random_bytes(8 * int(missing.sum())), dtype="<u8")
    return ex


def oprf_rows(tokens: np.ndarray, exact: np.ndarray, rng: RandomSource) -> np.ndarray:
    """The OPRF inputs ``(column, token)`` of every record and band (record-major), then
    of every record and exact pass: ``m (J + F)`` rows, whatever the data (a missing exact
    token, 0, is replaced by a fresh random word, so the count tells the linkage unit
    nothing; its output is discarded)."""
    m, J = tokens.shape
    F = exact.shape[1]
    ex = fill_missing(exact, rng)
    cols = np.concatenate(
        [
            np.broadcast_to(np.arange(J, dtype=np.uint64), (m, J)).reshape(-1),
            np.broadcast_to(np.arange(J, J + F, dtype=np.uint64), (m, F)).reshape(-1),
        ]
    )
    return np.stack([cols, np.concatenate([tokens.reshape(-1), ex.reshape(-1)])], axis=1)


def canary_rows(key: bytes) -> np.ndarray:
    """:data:`CANARIES` OPRF inputs both parties of a pair derive from their pair key: the
    linkage unit cannot tell them from record inputs (all are blinded), so if it evaluates
    some elements with another key, or one party's with another key, the pair's
    :func:`canary_check` values differ with probability at least the corrupted share."""
    idx = np.arange(CANARIES, dtype=np.uint64)[:, None]
    return np.column_stack([np.full(CANARIES, _CANARY_COLUMN, dtype=np.uint64), prf_words(key, idx)])


def canary_check(words: np.ndarray, key: bytes) -> bytes:
    """A keyed digest of the pair's canary outputs, sent to the peer with the pair tokens."""
    data = np.ascontiguousarray(np.asarray(words, dtype="<u8")).tobytes()
    return hashlib.blake2b(data, key=key[:64], digest_size=DIGEST_BYTES).digest()
