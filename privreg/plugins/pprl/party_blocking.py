"""Blocking among the data parties (``clk-dice`` with ``blocking="parties"``, issue #33).

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

Leakage to the data parties (measured in ``benchmarks/pprl_blocking.py``; the inversion is
run on a transcript in ``tests/test_pprl_party_blocking.py``): each receives
its peers' keyed tokens. It holds the secret, so it can invert a 16-bit band token by
trying the ``2^16`` band values and read about 85 % of every peer CLK's bits, estimate the
Dice of every pair of its and the peer's records (Spearman 0.97-0.98 on FEBRL 4 like the
linkage unit's under ``blocking="linkage-unit"``), find near-duplicates within the peer,
and test a guessed identity against the peer's records (a dictionary attack). It computes
its real candidates itself, so membership padding hides nothing from it.
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
    "slot_digest",
    "check_pair_tokens",
    "oprf_rows",
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


def slot_order(pairs: np.ndarray, key: bytes) -> np.ndarray:
    """The pairs in a keyed pseudorandom order both parties compute alike: a slot's position
    tells the linkage unit nothing about its records."""
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not p.size:
        return p
    score = prf_words(key, p.astype(np.uint64))
    order = np.lexsort((p[:, 1], p[:, 0], score))
    return p[order]


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


def oprf_rows(tokens: np.ndarray, exact: np.ndarray, rng: RandomSource) -> np.ndarray:
    """The OPRF inputs ``(column, token)`` of every record and band (record-major), then
    of every record and exact pass: ``m (J + F)`` rows, whatever the data (a missing exact
    token, 0, is replaced by a fresh random word, so the count tells the linkage unit
    nothing; its output is discarded)."""
    m, J = tokens.shape
    F = exact.shape[1]
    ex = exact.copy()
    missing = ex == 0
    if missing.any():
        ex[missing] = np.frombuffer(rng.random_bytes(8 * int(missing.sum())), dtype="<u8")
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
