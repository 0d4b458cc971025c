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
and sends the pair's *left* party (dice_protocol's alternating rule) the *groups*: per
shared word, the positions of both parties that carry it, and no word. The left party maps
the peer's positions back to (row in the peer's private order, column) with the peer's keyed
permutation and computes the candidate pairs from the groups alone
(:func:`relay_candidates`: exactly :func:`bands.candidate_pairs` on the full token matrices,
since only blocks of a shared word enter it), pads the right party's records that have no
candidate with dummies (:mod:`padding`), puts the pairs in the pair's keyed order (slots)
and sends the right party its row of each slot. From there on it is
``blocking="parties"``: the linkage unit receives only the slot count, a keyed digest and
the dummy slots, deals per slot, and learns the records of the accepted real slots only.

What the linkage unit learns: per data party its word count (``m (J + F)``) and, for every
pair of parties, how many positions of each carry each shared word (the sizes of the
collision groups, a histogram of band-value and exact-value frequencies), never which
record or which column a position belongs to. Two records of one party, or a candidate
pair, are never linked by anything it holds: the positions of one record are spread by a
permutation it cannot compute. So the shared-band count, the estimator of
``blocking="linkage-unit"`` (Spearman 0.97-0.98), is not available to it.

What a data party learns, as the left party of a pair: as under ``blocking="parties"``,
which of its records share a band or exact token with which of the peer's rows (in the
peer's private order): the peer's band value, date of birth or id wherever it holds the
same itself, a Dice estimate of its own records against the peer's (the shared count),
near-duplicates within the peer, and its real candidates (membership: it computes them).
Unlike ``"parties"`` without the OPRF, it never receives a peer's token, so it cannot invert
one by trying all values; unlike ``"parties"`` with the OPRF, no public-key operation is
spent per token. As the right party: only its own row of each slot, real or dummy, so at
``pad = 1`` whether a record has a candidate says nothing (as under
``blocking="linkage-unit"``). Left and right alternate, so each data party is left of about
half of its peers.

Semi-honest, non-colluding parties, as for the rest of the protocol: a linkage unit that
colluded with a data party would learn the permutations and so the shared-band counts.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from privreg.core.errors import ProtocolError
from privreg.core.randomness import RandomSource
from privreg.plugins.pprl.bands import EXACT_PAIRS_PER_RECORD
from privreg.plugins.pprl.kdf import derive_key

__all__ = ["relay_words", "position_order", "relay_groups", "check_groups", "check_group_words", "relay_candidates"]


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
    return np.argsort(np.frombuffer(stream, dtype="<u8"), kind="stable").astype(np.int64, copy=False)


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
        x = np.asarray(x, dtype=np.int64)
        if x.size and (x[:, 1].min() < 0 or x[:, 1].max() >= size or x[:, 0].min() < 0):
            raise ProtocolError(f"{frm!r} sent {name!r} groups with positions outside the {size} words sent")
        if x.shape[0] > 1:
            step = np.diff(x, axis=0)
            if np.any((step[:, 0] < 0) | ((step[:, 0] == 0) & (step[:, 1] <= 0))):
                raise ProtocolError(f"{frm!r} sent {name!r} groups out of order or with a repeated position")
        seen = np.zeros(size, dtype=bool)
        seen[x[:, 1]] = True
        if int(np.count_nonzero(seen)) != x.shape[0]:
            raise ProtocolError(f"{frm!r} sent {name!r} groups naming a position twice")
        got.append(x)
    a, b = got
    ga, gb = (x[np.r_[True, x[1:, 0] != x[:-1, 0]], 0] if x.size else x[:, 0] for x in (a, b))  # sorted
    if not np.array_equal(ga, gb) or not np.array_equal(ga, np.arange(ga.size)):
        raise ProtocolError(f"{frm!r} sent groups that are not shared by both parties or not numbered 0..G-1")
    return a, b


def check_group_words(sent: np.ndarray, mine: np.ndarray, frm: str) -> None:
    """Every group must name positions of one word of this party's list ``sent``."""
    w = sent[mine[:, 1]]
    first = np.r_[True, mine[1:, 0] != mine[:-1, 0]] if mine.size else np.zeros(0, dtype=bool)
    if np.any(w != np.repeat(w[first], np.diff(np.r_[np.flatnonzero(first), mine.shape[0]]))):
        raise ProtocolError(f"{frm!r} put positions of different words in one group")


def relay_candidates(
    groups: tuple[np.ndarray, np.ndarray],
    order: np.ndarray,
    peer_order: np.ndarray,
    *,
    width: int,
    bands: int,
    rows: tuple[int, int],
    min_shared: int,
    max_block_pairs: int,
    max_pairs_per_record: float = EXACT_PAIRS_PER_RECORD,
    chunk: int = 1 << 22,
) -> tuple[np.ndarray, int]:
    """The candidate pairs ``(own row, peer row)`` (rows in the two private orders; ``(k, 2)``
    int64, unique, sorted) and the number of skipped blocks, from the checked collision
    ``groups`` alone: exactly :func:`bands.candidate_pairs` with its exact passes on the
    two parties' full token matrices, since only blocks of a shared word enter it.

    A block is a group and a column (``order`` and ``peer_order`` map positions to
    ``row * width + column``; a word is keyed with its column, so a group spans one column
    but for a 2^-64 accident, which the column key keeps apart). Band blocks (columns below
    ``bands``) of more than ``max_block_pairs`` pairs are skipped, the rest give one shared
    band per pair, and a pair is a candidate from ``min_shared`` of them; an exact pass
    (each later column) gives its pairs unless they exceed ``max_pairs_per_record`` times
    the smaller party's rows (:func:`bands.exact_pairs`). Memory: the groups are taken
    ``chunk`` positions at a time (whole groups), each chunk's pairs reduced to distinct
    pairs with their shared-band counts before the next; never the token matrices."""
    mine, theirs = groups
    ma, mb = rows
    band_codes: list[np.ndarray] = []
    band_counts: list[np.ndarray] = []
    exact: dict[int, list[np.ndarray]] = {c: [] for c in range(bands, width)}
    skipped = 0
    for (a0, a1), (b0, b1) in _group_chunks(mine[:, 0], theirs[:, 0], chunk):
        fa, fb = order[mine[a0:a1, 1]], peer_order[theirs[b0:b1, 1]]
        ka = mine[a0:a1, 0] * width + fa % width  # block key: group and column
        kb = theirs[b0:b1, 0] * width + fb % width
        ua, ca = np.unique(ka, return_counts=True)
        ub, cb = np.unique(kb, return_counts=True)
        both, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
        size = ca[ia] * cb[ib]
        skipped += int((size > max_block_pairs).sum())
        codes, keys = _block_pairs(ka, fa // width, kb, fb // width, both[size <= max_block_pairs], mb)
        del fa, fb, ka, kb
        cols = keys % width
        got, n = np.unique(codes[cols < bands], return_counts=True)
        band_codes.append(got)
        band_counts.append(n)
        for c in exact:
            exact[c].append(np.unique(codes[cols == c]))
    codes, inverse = np.unique(np.concatenate([np.zeros(0, np.int64), *band_codes]), return_inverse=True)
    shared = np.bincount(inverse.reshape(-1), weights=np.concatenate([np.zeros(0, np.int64), *band_counts]))
    parts = [codes[shared >= min_shared]]
    for c in range(bands, width):
        ex = np.unique(np.concatenate([np.zeros(0, np.int64), *exact[c]]))
        if ex.size <= max_pairs_per_record * min(ma, mb):
            parts.append(ex)
    out = np.unique(np.concatenate(parts))
    return np.stack([out // mb, out % mb], axis=1).astype(np.int64).reshape(-1, 2), skipped


def _group_chunks(ga: np.ndarray, gb: np.ndarray, chunk: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Row ranges of the two sorted group columns, whole groups per range, about ``chunk``
    rows of ``ga`` each (a block never straddles two ranges)."""
    if not ga.size:
        return []
    cuts = [0]
    while cuts[-1] < ga.size:
        nxt = min(cuts[-1] + chunk, ga.size)
        if nxt < ga.size:  # end at a group boundary
            nxt = int(np.searchsorted(ga, ga[nxt], side="left"))
            nxt = nxt if nxt > cuts[-1] else int(np.searchsorted(ga, ga[cuts[-1]], side="right"))
        cuts.append(nxt)
    bounds = [int(ga[c]) for c in cuts[:-1]] + [int(ga[-1]) + 1]
    at = np.searchsorted(gb, bounds, side="left")
    return [((cuts[k], cuts[k + 1]), (int(at[k]), int(at[k + 1]))) for k in range(len(cuts) - 1)]


def _block_pairs(
    ka: np.ndarray, ra: np.ndarray, kb: np.ndarray, rb: np.ndarray, keep: np.ndarray, mb: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every (own row, peer row) pair of the blocks ``keep`` (sorted keys both sides hold)
    as codes ``ra * mb + rb``, with its block key."""
    sa, sb = np.isin(ka, keep), np.isin(kb, keep)
    ka, ra, kb, rb = ka[sa], ra[sa], kb[sb], rb[sb]
    ia, ib = np.argsort(ka, kind="stable"), np.argsort(kb, kind="stable")
    ra, rb = ra[ia], rb[ib]
    # both sides hold exactly the blocks of keep, in sorted order
    cnt_a = np.bincount(np.searchsorted(keep, ka), minlength=keep.size)
    cnt_b = np.bincount(np.searchsorted(keep, kb), minlength=keep.size)
    start_a, start_b = np.cumsum(cnt_a) - cnt_a, np.cumsum(cnt_b) - cnt_b
    per = cnt_a * cnt_b
    block = np.repeat(np.arange(keep.size), per)
    within = np.arange(block.size) - np.repeat(np.cumsum(per) - per, per)
    i = start_a[block] + within // cnt_b[block]
    j = start_b[block] + within % cnt_b[block]
    return ra[i] * mb + rb[j], keep[block]
