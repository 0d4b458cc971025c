"""Blocking relayed by the linkage unit on unlinked tokens (``clk-dice`` with
``blocking="relay"``, issue #33).

Each data party sends the linkage unit all of its keyed band and exact-pass tokens (the
words of ``blocking="linkage-unit"``: keyed by the data parties' shared secret, so the
linkage unit cannot invert them) as one flat list of ``m (J + F)`` words, a missing exact
token replaced by a fresh random word (:func:`relay_words`: the count is the same whatever
the data). The list is in an order that links no word to a record or a column: the rows are
first put in a fresh private random order (``sigma``, kept by the party), then the flat
positions are permuted by a permutation keyed by the shared secret and the party's name
(:func:`position_order`), which the other data parties can compute and the linkage unit
cannot.

The linkage unit finds, per pair of data parties, the words both sent (:func:`relay_groups`)
and sends each party of the pair the *groups*: per shared word, the positions of both
parties that carry it, and no word. A data party maps the peer's positions back to (row in
the peer's private order, column) with the peer's keyed permutation, rebuilds the peer's
token matrix wherever it shares a word with its own (:func:`peer_matrix`; every other entry
gets a value absent from its own column, so it matches nothing) and computes the candidate
pairs with the same rule as the other modes (:func:`bands.candidate_pairs`: only tokens the
two share enter it, so both parties obtain exactly the pairs the linkage unit would have).
From there on it is ``blocking="parties"``: the two parties put the pairs in a keyed order
(slots), the linkage unit receives only their count and keyed digest, deals per slot, and
learns the records of the accepted slots only.

What the linkage unit learns: per data party its word count (``m (J + F)``) and, for every
pair of parties, how many positions of each carry each shared word (the sizes of the
collision groups, a histogram of band-value and exact-value frequencies), never which
record or which column a position belongs to. Two records of one party, or a candidate
pair, are never linked by anything it holds: the positions of one record are spread by a
permutation it cannot compute. So the shared-band count, the estimator of
``blocking="linkage-unit"`` (Spearman 0.97-0.98), is not available to it.

What a data party learns: as under ``blocking="parties"``, which of its records share a
band or exact token with which of a peer's rows (in the peer's private order): the peer's
band value, date of birth or id wherever it holds the same itself, a Dice estimate of its
own records against the peer's (the shared count), near-duplicates within the peer, and its
real candidates (membership: it computes them itself). Unlike ``"parties"`` without the
OPRF, it never receives a peer's token, so it cannot invert one by trying all values; unlike
``"parties"`` with the OPRF, no public-key operation is spent per token.

Semi-honest, non-colluding parties, as for the rest of the protocol: a linkage unit that
colluded with a data party would learn the permutations and so the shared-band counts.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from privreg.core.errors import ProtocolError
from privreg.core.randomness import RandomSource
from privreg.plugins.pprl.kdf import derive_key

__all__ = ["relay_words", "position_order", "relay_groups", "check_groups", "peer_matrix", "absent_values"]


def relay_words(tokens: np.ndarray, exact: np.ndarray, rng: RandomSource) -> np.ndarray:
    """``(m, J + F)`` words: the band tokens, then the exact-pass tokens with each missing
    one (0) replaced by a fresh random word (it matches nothing, and the count stays
    ``m (J + F)`` whatever the data)."""
    ex = np.array(exact, dtype=np.uint64, copy=True)
    missing = ex == 0
    if missing.any():
        ex[missing] = np.frombuffer(rng.random_bytes(8 * int(missing.sum())), dtype="<u8")
    return np.concatenate([np.asarray(tokens, dtype=np.uint64), ex], axis=1)


def position_order(secret: bytes, party: str, size: int) -> np.ndarray:
    """The keyed permutation of party ``party``'s ``size`` words: position ``k`` of its
    list holds flat entry ``order[k]`` (row-major over rows in its private order and
    columns). Every data party computes it from the shared secret; the linkage unit cannot,
    so a position tells it neither the row nor the column."""
    key = derive_key(secret, info=f"clk-dice/relay/order/{party}")
    stream = hashlib.shake_256(key + size.to_bytes(8, "big")).digest(8 * size)
    return np.argsort(np.frombuffer(stream, dtype="<u8"), kind="stable").astype(np.int64)


def relay_groups(mine: np.ndarray, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The collision groups of two parties' word lists: ``(k, 2)`` rows ``(group,
    position)`` for each list, sorted, where group ``g`` is the ``g``-th smallest word both
    lists hold (the words themselves are not part of the result)."""
    a = np.asarray(mine, dtype=np.uint64)
    b = np.asarray(theirs, dtype=np.uint64)
    shared = np.intersect1d(a, b)
    out = []
    for w in (a, b):
        pos = np.flatnonzero(np.isin(w, shared))
        group = np.searchsorted(shared, w[pos])
        order = np.lexsort((pos, group))
        out.append(np.column_stack([group[order], pos[order]]).astype(np.int64).reshape(-1, 2))
    return out[0], out[1]


def check_groups(entry: Any, frm: str, *, mine: int, theirs: int) -> tuple[np.ndarray, np.ndarray]:
    """A ``relay-groups`` entry for one peer: ``mine`` and ``theirs`` must be ``(k, 2)``
    integer rows ``(group, position)`` sorted by group then position, positions within the
    two lists (``mine`` and ``theirs`` words), each at most once, and every group present
    on both sides with groups numbered ``0..G-1``."""
    got = []
    for name, size in (("mine", mine), ("theirs", theirs)):
        x = entry.get(name) if isinstance(entry, dict) else None
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != 2 or (x.size and x.dtype.kind != "i"):
            raise ProtocolError(f"{frm!r} sent malformed {name!r} groups (expected (k, 2) integer rows)")
        x = x.astype(np.int64)
        if x.size and (x[:, 1].min() < 0 or x[:, 1].max() >= size or x[:, 0].min() < 0):
            raise ProtocolError(f"{frm!r} sent {name!r} groups with positions outside the {size} words sent")
        if x.shape[0] > 1:
            step = np.diff(x, axis=0)
            if np.any((step[:, 0] < 0) | ((step[:, 0] == 0) & (step[:, 1] <= 0))):
                raise ProtocolError(f"{frm!r} sent {name!r} groups out of order or with a repeated position")
        if np.unique(x[:, 1]).size != x.shape[0]:
            raise ProtocolError(f"{frm!r} sent {name!r} groups naming a position twice")
        got.append(x)
    a, b = got
    ga, gb = np.unique(a[:, 0]), np.unique(b[:, 0])
    if not np.array_equal(ga, gb) or not np.array_equal(ga, np.arange(ga.size)):
        raise ProtocolError(f"{frm!r} sent groups that are not shared by both parties or not numbered 0..G-1")
    return a, b


def absent_values(matrix: np.ndarray) -> np.ndarray:
    """Per column of ``matrix``, a word that column does not hold (0 unless it holds 0)."""
    m = np.asarray(matrix, dtype=np.uint64)
    fill = np.zeros(m.shape[1], dtype=np.uint64)
    for c in np.flatnonzero((m == 0).any(axis=0)) if m.size else ():
        candidates = np.arange(m.shape[0] + 1, dtype=np.uint64)
        fill[c] = candidates[~np.isin(candidates, m[:, c])][0]
    return fill


def peer_matrix(
    words: np.ndarray,
    order: np.ndarray,
    groups: tuple[np.ndarray, np.ndarray],
    peer_order: np.ndarray,
    *,
    peer_rows: int,
    bands: int,
    frm: str,
) -> np.ndarray:
    """The peer's ``(peer_rows, W)`` word matrix (rows in its private order) as far as this
    party can know it: the shared word at every peer entry in a collision group; elsewhere a
    word absent from this party's band column, or 0 (missing) in an exact-pass column, so it
    matches nothing of this party's. ``words`` is this party's ``(m, W)`` matrix (the first
    ``bands`` columns band tokens), ``order`` and ``peer_order`` the two keyed position
    orders, ``groups`` the checked ``(mine, theirs)`` rows."""
    W = words.shape[1]
    mine, theirs = groups
    flat = words.reshape(-1)[order[mine[:, 1]]]
    value = np.zeros(int(mine[:, 0].max()) + 1 if mine.size else 0, dtype=np.uint64)
    value[mine[:, 0]] = flat
    if mine.size and np.any(value[mine[:, 0]] != flat):
        raise ProtocolError(f"{frm!r} put positions of different words in one group")
    fill = absent_values(words)
    fill[bands:] = 0
    out = np.broadcast_to(fill, (peer_rows, W)).copy()
    at = peer_order[theirs[:, 1]]
    out.reshape(-1)[at] = value[theirs[:, 0]]
    return out
