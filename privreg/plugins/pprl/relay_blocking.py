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

What the linkage unit learns: per data party its word count (``m (J + F)``) and how many
of its words repeat (pairs of its records sharing a band or exact value, never which); for
every pair of parties, how many positions of each carry each shared word (the sizes of the
collision groups, a histogram of band-value and exact-value frequencies), never which
record or which column a position belongs to, and the pair's real candidate count (from the
dummy slots). No record of a candidate pair is linked to any word it holds: the positions of
one record are spread by a permutation it cannot compute. So the shared-band count, the
estimator of ``blocking="linkage-unit"`` (Spearman 0.97-0.98), is not available to it per
pair; only its mean over a pair of parties' candidates is (total shared positions over the
candidate count), which pins a single candidate's count when the two parties hold one record
each (``tests/test_pprl_relay_adversary.py``).

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
from privreg.plugins.pprl.party_blocking import fill_missing

__all__ = ["relay_words", "position_order", "relay_groups", "check_groups", "check_group_words", "relay_candidates"]


def relay_words(tokens: np.ndarray, exact: np.ndarray, rng: RandomSource) -> np.ndarray:
    """``(m, J + F)`` words: the band tokens, then the exact-pass tokens with each missing
    one (0) replaced by a fresh random word (it matches nothing, and the count stays
    ``m (J + F)`` whatever the data)."""
    return np.concatenate([np.asarray(tokens, dtype=np.uint64), fill_missing(exact, rng)], axis=1)


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
    lists hold (the words themselves are not part of the result). One stable sort per list
    (numpy's hash-based unique is several times slower on 10^7 words)."""
    lists = [_sorted_words(np.asarray(w, dtype=np.uint64)) for w in (mine, theirs)]
    (ua, _, _), (ub, _, _) = lists
    out = []
    for (_, order, which), keep in zip(lists, (_members(ua, ub), _members(ub, ua))):
        rank = np.cumsum(keep) - 1  # the group of each of this list's distinct words
        sel = keep[which]
        # positions of one word are ascending (stable sort), and words ascend: rows come sorted
        out.append(np.column_stack([rank[which[sel]], order[sel]]).astype(np.int64).reshape(-1, 2))
    return out[0], out[1]


def _members(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which of the sorted distinct ``x`` the sorted distinct ``y`` holds."""
    if not y.size:
        return np.zeros(x.size, dtype=bool)
    return y[np.minimum(np.searchsorted(y, x), y.size - 1)] == x


def _sorted_words(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(distinct words ascending, positions by word, the distinct word of each)``."""
    order = np.argsort(w, kind="stable")
    srt = w[order]
    first = np.r_[True, srt[1:] != srt[:-1]] if srt.size else np.zeros(0, dtype=bool)
    return srt[first], order, np.cumsum(first) - 1


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
    own rows ``chunk`` positions at a time: a pair's shared bands all fall in the chunk
    of its own row, so only its candidates are kept (8 bytes each), and the peer's side is
    indexed once; never the token matrices."""
    mine, theirs = groups
    ma, mb = rows
    # own side: block key (group and column) and row; the peer's side sorted by block key
    f = order[mine[:, 1]]
    ka, ra = mine[:, 0] * width + f % width, f // width
    f = peer_order[theirs[:, 1]]
    kb, rb = theirs[:, 0] * width + f % width, f // width
    del f
    sort_b = np.argsort(kb, kind="stable")
    kb, rb = kb[sort_b], rb[sort_b]
    del sort_b
    ub, start_b, cb = np.unique(kb, return_index=True, return_counts=True)
    del kb
    ua, ca = np.unique(ka, return_counts=True)
    both, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    size = ca[ia] * cb[ib]
    skipped = int((size > max_block_pairs).sum())
    kept = np.zeros(ub.size, dtype=bool)
    kept[ib[size <= max_block_pairs]] = True
    del ua, ca, both, ia, ib, size
    # own entries whose block is kept, by row
    at = np.searchsorted(ub, ka)
    ok = at < ub.size
    ok[ok] = (ub[at[ok]] == ka[ok]) & kept[at[ok]]
    at, ra, col = at[ok], ra[ok], (ka[ok] % width)
    del ka, ok
    by_row = np.argsort(ra, kind="stable")
    at, ra, col = at[by_row], ra[by_row], col[by_row]
    del by_row
    cap = max_pairs_per_record * min(ma, mb)
    found: list[np.ndarray] = []
    exact: dict[int, list[np.ndarray]] = {c: [] for c in range(bands, width)}
    counted = dict.fromkeys(range(bands, width), 0)
    for lo, hi in _row_chunks(ra, chunk):
        n = cb[at[lo:hi]]
        own = np.repeat(np.arange(lo, hi), n)
        k = np.arange(own.size) - np.repeat(np.cumsum(n) - n, n)
        codes = ra[own] * mb + rb[start_b[at[own]] + k]
        cols = col[own]
        del own, k
        got, shared = np.unique(codes[cols < bands], return_counts=True)
        found.append(got[shared >= min_shared])
        for c in exact:
            if counted[c] <= cap:  # a pass past its cap is dropped whole: stop collecting it
                ex = np.unique(codes[cols == c])
                exact[c].append(ex)
                counted[c] += ex.size
    for c in range(bands, width):
        if counted[c] <= cap:
            found.extend(exact[c])
    out = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *found]))
    return np.stack([out // mb, out % mb], axis=1).astype(np.int64).reshape(-1, 2), skipped


def _row_chunks(rows: np.ndarray, chunk: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of the sorted ``rows``, about ``chunk`` entries each, never
    splitting one row."""
    out, lo = [], 0
    while lo < rows.size:
        hi = min(lo + chunk, rows.size)
        if hi < rows.size:
            hi = int(np.searchsorted(rows, rows[hi], side="right"))
        out.append((lo, hi))
        lo = hi
    return out
