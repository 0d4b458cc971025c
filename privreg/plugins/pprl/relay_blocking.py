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
shared word, the positions of both parties that carry it, and no word (:func:`relay_entry`:
its own positions as one bit each, from which it rebuilds its side with its own words, and
the peer's as ``(group, position)`` rows). The left party maps
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

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.core.randomness import RandomSource
from privreg.core.validation import check_int, check_real
from privreg.plugins.pprl.bands import EXACT_PAIRS_PER_RECORD
from privreg.plugins.pprl.kdf import derive_key
from privreg.plugins.pprl.party_blocking import fill_missing

__all__ = ["relay_words", "position_order", "relay_groups", "relay_entry", "check_groups", "relay_candidates"]


def relay_words(tokens: np.ndarray, exact: np.ndarray, rng: RandomSource) -> np.ndarray:
    """``(m, J + F)`` words: the band tokens, then the exact-pass tokens with each missing
    one (0) replaced by a fresh random word (it matches nothing, and the count stays
    ``m (J + F)`` whatever the data)."""
    return np.concatenate([np.asarray(tokens, dtype=np.uint64), fill_missing(exact, rng)], axis=1)


def position_order(secret: bytes, party: str, size: int) -> np.ndarray:
    """The keyed permutation of party ``party``'s ``size`` words: position ``k`` of its
    list holds flat entry ``order[k]`` (row-major over rows in its private order and
    columns; :func:`position_dtype`). Every data party computes it from the shared secret;
    the linkage unit cannot, so a position tells it neither the row nor the column."""
    key = derive_key(secret, info=f"clk-dice/relay/order/{party}")
    stream = hashlib.shake_256(key + size.to_bytes(8, "big")).digest(8 * size)
    order = np.argsort(np.frombuffer(stream, dtype="<u8"), kind="stable")
    del stream
    return order.astype(position_dtype(size), copy=False)


#: Passes of :func:`relay_groups` over the word space (words are uniform keyed hashes, so
#: each pass takes about 1/RELAY_PASSES of both lists): they bound its sort's transient.
RELAY_PASSES = 16


def position_dtype(size: int) -> type[np.signedinteger[Any]]:
    """The integer type of positions and rows below ``size``: int32 where it fits (half
    the memory of the largest relay arrays), else int64."""
    return np.int32 if size <= np.iinfo(np.int32).max else np.int64


def relay_groups(mine: np.ndarray, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The collision groups of two parties' word lists: ``(k, 2)`` rows ``(group,
    position)`` for each list, sorted, where group ``g`` is the ``g``-th smallest word both
    lists hold (the words themselves are not part of the result); int32 when the groups and
    positions fit (:func:`position_dtype`). The word space is taken in
    :data:`RELAY_PASSES` equal ranges, one stable sort per list and range (so
    the transient is a range's, not a list's: numpy's hash-based unique is also several
    times slower on 10^7 words); the result alone is held whole."""
    return _groups(mine, theirs, bitmap=False)


def _groups(mine: np.ndarray, theirs: np.ndarray, *, bitmap: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`relay_groups`; with ``bitmap`` the first list's side is a boolean per position
    (in a shared word or not) instead of rows."""
    mine, theirs = np.asarray(mine, dtype=np.uint64), np.asarray(theirs, dtype=np.uint64)
    dt = position_dtype(max(mine.size, theirs.size))
    step = -(-(1 << 64) // RELAY_PASSES)  # the last range ends at 2^64 whatever the pass count
    # each side has at most one row per position: filled in place, then trimmed (ndarray.resize)
    shared = np.zeros(mine.size if bitmap else 0, dtype=bool)
    outs = (np.empty((0 if bitmap else mine.size, 2), dtype=dt), np.empty((theirs.size, 2), dtype=dt))
    filled = [0, 0]
    groups = 0
    for r in range(RELAY_PASSES):
        lists = []
        for w in (mine, theirs):
            inside = w >= np.uint64(r * step)  # two boolean masks, not a shifted copy of the list
            if r + 1 < RELAY_PASSES:
                inside &= w < np.uint64((r + 1) * step)
            at = np.flatnonzero(inside).astype(dt, copy=False)
            del inside
            lists.append((at, *_sorted_words(w[at])))
        (_, ua, _, _), (_, ub, _, _) = lists
        keep = (_members(ua, ub), _members(ub, ua))
        for side, (out, (at, _, order, counts), k) in enumerate(zip(outs, lists, keep)):
            if bitmap and side == 0:
                shared[at[order[np.repeat(k, counts)]]] = True
                continue
            n = counts[k]
            lo, hi = filled[side], filled[side] + int(n.sum())
            out[lo:hi, 0] = np.repeat(np.arange(groups, groups + n.size, dtype=dt), n)
            # positions of one word are ascending (stable sort), and words ascend: rows come sorted
            out[lo:hi, 1] = at[order[np.repeat(k, counts)]]
            filled[side] = hi
        groups += int(np.count_nonzero(keep[0]))
        del lists
    for out, size in zip(outs, filled):
        out.resize((size, 2), refcheck=False)  # shrinks in place: no second copy of the groups
    return (shared if bitmap else outs[0]), outs[1]


def _members(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which of the sorted distinct ``x`` the sorted distinct ``y`` holds."""
    if not y.size:
        return np.zeros(x.size, dtype=bool)
    return y[np.minimum(np.searchsorted(y, x), y.size - 1)] == x


def _sorted_words(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(distinct words ascending, positions by word, how many positions each)``."""
    order = np.argsort(w, kind="stable")
    srt = w[order]
    first = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]]) if srt.size else np.zeros(0, dtype=np.int64)
    return srt[first], order, np.diff(np.r_[first, srt.size])


#: Rows of a groups entry checked at a time (bounds the checks' temporaries).
CHECK_ROWS = 1 << 22
_NUMBERING = "sent groups that are not shared by both parties or not numbered 0..G-1"


def relay_entry(mine: np.ndarray, theirs: np.ndarray) -> dict[str, np.ndarray]:
    """What the linkage unit sends the left party of two word lists: ``shared``, which of
    the left party's positions carry a word both lists hold (one bit per position, packed
    big-endian into ``ceil(len(mine) / 8)`` bytes), and ``theirs``, the peer's ``(group,
    position)`` rows (:func:`relay_groups`). The left party rebuilds its own rows from its
    words (:func:`check_groups`), so they are not sent: 1 bit per position, not 8 bytes."""
    shared, b = _groups(mine, theirs, bitmap=True)
    return {"shared": np.packbits(shared), "theirs": b}


def check_groups(entry: Any, frm: str, *, sent: np.ndarray, theirs: int) -> tuple[np.ndarray, np.ndarray]:
    """This party's and the peer's ``(group, position)`` rows from a ``relay-groups`` entry
    (:func:`relay_entry`), checked. ``shared`` must be ``ceil(len(sent) / 8)`` bytes with no
    bit past the list; this party's rows are its positions in ``shared``, group ``g`` the
    ``g``-th smallest of their words (the linkage unit's numbering, so every group holds one
    word by construction). ``theirs`` must be ``(k, 2)`` integer rows (kept in the type
    sent) sorted by group then position, positions within the peer's ``theirs`` words, each
    at most once, groups numbered ``0..G-1`` with the same ``G`` as this party's. Checked
    :data:`CHECK_ROWS` rows at a time."""
    bits = entry.get("shared") if isinstance(entry, dict) else None
    size = sent.size
    if not isinstance(bits, np.ndarray) or bits.dtype != np.uint8 or bits.shape != (-(-size // 8),):
        raise ProtocolError(f"{frm!r} sent a malformed 'shared' bitmap (expected {-(-size // 8)} bytes)")
    if size % 8 and int(bits[-1]) & ((1 << (8 - size % 8)) - 1):
        raise ProtocolError(f"{frm!r} sent a 'shared' bitmap with bits past the {size} words sent")
    mine = _own_rows(sent, _set_bits(bits, size))
    x = entry.get("theirs")
    if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != 2 or (x.size and x.dtype.kind != "i"):
        raise ProtocolError(f"{frm!r} sent malformed 'theirs' groups (expected (k, 2) integer rows)")
    if not x.size:
        x = np.zeros((0, 2), dtype=np.int64)
    if x.size and (x[:, 1].min() < 0 or x[:, 1].max() >= theirs):
        raise ProtocolError(f"{frm!r} sent 'theirs' groups with positions outside the {theirs} words sent")
    if x.size and x[0, 0] != 0:
        raise ProtocolError(f"{frm!r} {_NUMBERING}")
    for lo in range(0, x.shape[0], CHECK_ROWS):
        g, p = x[lo : lo + CHECK_ROWS + 1, 0], x[lo : lo + CHECK_ROWS + 1, 1]  # one row of overlap
        step = g[1:] - g[:-1]
        if np.any((step < 0) | ((step == 0) & (p[1:] <= p[:-1]))):
            raise ProtocolError(f"{frm!r} sent 'theirs' groups out of order or with a repeated position")
        if np.any(step > 1):
            raise ProtocolError(f"{frm!r} {_NUMBERING}")
    seen = np.zeros(theirs, dtype=bool)
    seen[x[:, 1]] = True
    if int(np.count_nonzero(seen)) != x.shape[0]:
        raise ProtocolError(f"{frm!r} sent 'theirs' groups naming a position twice")
    del seen
    # each side runs 0, 1, ..., its last group without a gap: the same last group, the same groups
    if (mine.shape[0] == 0) != (x.shape[0] == 0) or (x.size and mine[-1, 0] != x[-1, 0]):
        raise ProtocolError(f"{frm!r} {_NUMBERING}")
    return mine, x


def _set_bits(bits: np.ndarray, size: int) -> np.ndarray:
    """The positions whose bit is set in the packed ``bits`` (ascending, :func:`position_dtype`),
    a slice of :data:`CHECK_ROWS` positions at a time (no 8-byte index of every position)."""
    dt = position_dtype(size)
    parts = []
    step = max(8, CHECK_ROWS // 8 * 8)  # slices start on a byte
    for lo in range(0, size, step):
        hi = min(lo + step, size)
        parts.append((np.flatnonzero(np.unpackbits(bits[lo // 8 : -(-hi // 8)], count=hi - lo)) + lo).astype(dt))
    return np.concatenate([np.zeros(0, dtype=dt), *parts])


def _own_rows(sent: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``(group, position)`` rows of the positions ``pos`` (ascending) of ``sent``, group
    ``g`` the ``g``-th smallest of their distinct words; sorted by group then position.
    Each temporary is dropped as soon as the next is made (memory: the checks' peak)."""
    words = sent[pos]
    order = np.argsort(words, kind="stable").astype(pos.dtype)  # positions of one word stay ascending
    words = words[order]
    starts = np.zeros(pos.size, dtype=bool)
    np.not_equal(words[1:], words[:-1], out=starts[1:])
    del words
    rows = np.empty((pos.size, 2), dtype=pos.dtype)
    np.cumsum(starts, dtype=pos.dtype, out=rows[:, 0])
    del starts
    rows[:, 1] = pos[order]
    return rows


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
    the smaller party's rows (:func:`bands.exact_pairs`). Memory: the peer's side is
    indexed once (its rows by block, 4 bytes per position, and per block 24 bytes), then
    each side of ``groups`` is dropped (pass them on, as the protocol does); the own side is
    indexed ``chunk`` positions at a time (8 bytes per position) and the pairs are formed
    own rows about ``chunk`` pairs at a time: a pair's shared bands all fall in the chunk of
    its own row, so only its candidates are kept (8 bytes each); never the token matrices."""
    chunk = check_int("chunk", chunk, minimum=1)  # else range() fails or skips the own index
    per_record = check_real("max_pairs_per_record", max_pairs_per_record)
    if not per_record > 0:  # as bands.exact_pairs
        raise PrivregValueError(f"max_pairs_per_record must be positive; got {max_pairs_per_record!r}")
    mine, theirs = groups
    del groups  # each side is dropped once indexed (the caller passes them on)
    ma, mb = rows
    # the peer's side: its rows sorted by block key (group * width + column), and per block
    # of the peer its key, first entry and size
    kb, rb = _block_keys(theirs, peer_order, width)
    rb = rb.astype(position_dtype(mb), copy=False)
    del theirs
    sort_b = np.argsort(kb, kind="stable")
    kb = kb[sort_b]
    rb = rb[sort_b]
    del sort_b
    pb = position_dtype(kb.size)
    start_b = np.flatnonzero(np.r_[True, kb[1:] != kb[:-1]]).astype(pb) if kb.size else np.zeros(0, dtype=pb)
    ub, cb = kb[start_b], np.diff(np.r_[start_b, kb.size]).astype(pb)
    del kb
    # own side, a slice at a time: each entry's block among the peer's (its index in ub,
    # ub.size if none) and row
    dt = position_dtype(ub.size)
    at = np.empty(mine.shape[0], dtype=dt)
    ra = np.empty(mine.shape[0], dtype=position_dtype(ma))
    for lo in range(0, mine.shape[0], chunk):
        hi = min(lo + chunk, mine.shape[0])
        at[lo:hi], ra[lo:hi] = _own_blocks(mine[lo:hi], order, ub, width)
    del mine
    # own entries per block of the peer (the sentinel ub.size counts in a last bin, dropped)
    ca = np.bincount(at, minlength=ub.size + 1)[: ub.size]
    big = ca * cb > max_block_pairs  # a block of more pairs is skipped
    skipped = int(np.count_nonzero(big & (ca > 0)))
    del ca
    ok = ~np.r_[big, True][at]  # neither skipped nor missing at the peer
    del big
    at = at[ok]
    ra = ra[ok]
    del ok
    by_row = np.argsort(ra, kind="stable")
    at = at[by_row]
    ra = ra[by_row]
    del by_row
    cap = per_record * min(ma, mb)
    found: list[np.ndarray] = []
    exact: dict[int, list[np.ndarray]] = {c: [] for c in range(bands, width)}
    counted = dict.fromkeys(range(bands, width), 0)
    for lo, hi in _row_chunks(ra, cb[at], chunk):
        block = at[lo:hi]
        n = cb[block]
        own = np.repeat(np.arange(hi - lo), n)
        k = np.arange(own.size) - np.repeat(np.cumsum(n) - n, n)
        codes = ra[lo:hi][own].astype(np.int64) * mb + rb[start_b[block[own]] + k]
        cols = ub[block[own]] % width
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


def _block_keys(rows: np.ndarray, order: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``(group, position)`` rows: each entry's block key ``group * width + column``
    (int64) and its row, ``order`` mapping a position to ``row * width + column``."""
    f = order[rows[:, 1]]
    return rows[:, 0].astype(np.int64) * width + f % width, f // width


def _own_blocks(part: np.ndarray, order: np.ndarray, ub: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """For own group rows ``part``: each entry's block among the peer's sorted block keys
    ``ub`` (its index, ``ub.size`` if the peer has no such block) and its row."""
    key, row = _block_keys(part, order, width)
    i = np.searchsorted(ub, key)
    hit = i < ub.size
    hit[hit] = ub[i[hit]] == key[hit]
    i[~hit] = ub.size
    return i, row


def _row_chunks(rows: np.ndarray, pairs: np.ndarray, chunk: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of the sorted ``rows`` of about ``chunk`` pairs each (``pairs``:
    the peer entries each own entry meets), never splitting one row: a chunk's transient
    follows its pairs, which grow faster than the entries with the records. Cut on blocks of
    up to 4,096 entries (their pair sums, not a running sum per entry: memory), then moved
    to the end of a row; a chunk holds at most ``chunk`` pairs plus one block's and one
    row's."""
    n = rows.size
    if not n:
        return []
    block = max(1, min(4096, chunk // 64))
    ends = np.cumsum(np.add.reduceat(pairs, np.arange(0, n, block), dtype=np.int64))
    cuts = (np.searchsorted(ends, np.arange(chunk, int(ends[-1]), chunk), side="left") + 1) * block
    out, lo = [], 0
    for cut in [*cuts.tolist(), n]:
        hi = n if cut >= n else int(np.searchsorted(rows, rows[cut - 1], side="right"))
        if hi > lo:
            out.append((lo, hi))
            lo = hi
    return out
