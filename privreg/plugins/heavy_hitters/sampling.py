"""Local dataset samplers of LDP TrieHH: GreedySampling and RandomSampling.

Sun et al. 2024 (arXiv:2404.11607), Section 3, "Local dataset sampler": when a user's
valid contributions to a layer (their distinct prefixes in ``Z_i``) exceed the bound
``B``, the user keeps ``B`` of them:

* GreedySampling: the ``B`` prefixes the user contributed most often (here: ties broken
  uniformly at random);
* RandomSampling: a uniformly random ``B``-subset of the distinct prefixes, ignoring
  how often each was contributed.

Either way a user with fewer than ``B`` distinct prefixes is padded with copies of the
dummy element ``gamma``, so every user sends exactly ``B`` reports. Each selected prefix
appears once per user, which is what Theorem 1 (item-level LDP) and Lemma 1 rely on.

Vectorised over all users of a layer: one sort of the (user, prefix) pairs, no per-user
loop. The random tie-break and subset keys come from the caller's
:class:`~privreg.core.randomness.RandomSource` (the device's CSPRNG in production); they
are at least 30 random bits per (user, prefix) pair, so ties among them (then broken by
position, not at random) have probability below ``m^2 2^-31`` for a user with ``m``
distinct prefixes. Privacy does not depend on this randomness: any selection rule that
changes at most one selected prefix when one item changes keeps Theorem 1.
"""

from __future__ import annotations

from typing import Literal, overload

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.mechanisms import uniform_chunked

__all__ = ["SAMPLERS", "contribution_counts", "sample_contributions"]

#: Local samplers by name (Section 3).
SAMPLERS = ("greedy", "random")

# random tie-break bits in the packed sort key; two pairs of one user tie with probability
# 2^-30 at most, and a tie is then broken by position instead of at random
_MIN_RANDOM_BITS = 30
# owner ids per sorted block in _distinct_counts: at least 2^6 (else the global sort),
# at most 2^11 (a block of a layer's pairs then stays in the CPU cache)
_MIN_BLOCK_BITS, _MAX_BLOCK_BITS = 6, 11


def sample_contributions(
    owners: np.ndarray,
    prefixes: np.ndarray,
    weights: np.ndarray,
    *,
    num_users: int,
    bound: int,
    sampler: str,
    dummy: int,
    rng: RandomSource,
) -> np.ndarray:
    """The ``num_users * bound`` reports' inputs of one layer, user by user.

    ``owners[e]`` (a user in ``0 .. num_users-1``) contributed prefix code ``prefixes[e]``
    ``weights[e]`` times; pairs may repeat (several words with one prefix) and are merged
    first. Returns an int64 array whose slots ``j*bound .. (j+1)*bound - 1`` hold user
    ``j``'s selected distinct prefixes followed by ``dummy`` (gamma) padding.
    """
    num_users, bound = _check(owners, prefixes, sampler, num_users, bound, dummy)
    out = np.full(num_users * bound, dummy, dtype=np.int64)
    if owners.size == 0:
        return out
    user, code, rank = _selected(owners, prefixes, weights, num_users=num_users, bound=bound, sampler=sampler, rng=rng)
    out[user * bound + rank] = code
    return out


def contribution_counts(
    owners: np.ndarray,
    prefixes: np.ndarray,
    weights: np.ndarray,
    *,
    num_users: int,
    bound: int,
    sampler: str,
    dummy: int,
    rng: RandomSource,
) -> np.ndarray:
    """``np.bincount(sample_contributions(...), minlength=dummy + 1)`` without forming
    the ``num_users * bound`` inputs: how many reports each prefix code (and, last, the
    dummy gamma) gets. The same selection, from the same random draws."""
    num_users, bound = _check(owners, prefixes, sampler, num_users, bound, dummy)
    counts = np.zeros(dummy + 1, dtype=np.int64)
    if owners.size:
        # users with at most `bound` entries send all their distinct prefixes and draw
        # nothing; only the others go through the sampler (the same draws, in the same order)
        heavy_user = np.bincount(owners, minlength=num_users) > bound
        if heavy_user.any():
            heavy = heavy_user[owners]
            _, code, _ = _selected(
                owners[heavy],
                prefixes[heavy],
                weights[heavy],
                num_users=num_users,
                bound=bound,
                sampler=sampler,
                rng=rng,
                layout=False,
            )
            light = ~heavy
            counts[:dummy] = _distinct_counts(owners[light], prefixes[light], dummy) + np.bincount(
                code, minlength=dummy
            )
        else:
            counts[:dummy] = _distinct_counts(owners, prefixes, dummy)
    counts[dummy] = num_users * bound - counts[:dummy].sum()
    return counts


def _distinct_counts(owners: np.ndarray, prefixes: np.ndarray, size: int) -> np.ndarray:
    """How many distinct owners contributed each prefix code (length ``size``): the
    histogram of the distinct (owner, prefix) pairs. Owners in non-decreasing order (a
    layer's users in CSR order) only need sorting within blocks of ``2^k`` consecutive
    owner ids, by a key narrow enough for int32 where the codes allow (about half the
    cost of one global int64 sort); other inputs take the global sort."""
    if owners.size == 0:
        return np.zeros(size, dtype=np.int64)
    code_bits = max(size - 1, 1).bit_length()
    if owners.size < 2 or code_bits > 62 - _MIN_BLOCK_BITS or not bool((owners[1:] >= owners[:-1]).all()):
        _, code, _ = _merge_pairs(owners, prefixes, None)
        return np.bincount(code, minlength=size)
    narrow = code_bits <= 31 - _MIN_BLOCK_BITS and int(owners[-1]) < 1 << 31
    word, dtype = (31, np.int32) if narrow else (63, np.int64)
    block_bits = min(word - code_bits, _MAX_BLOCK_BITS)
    span = 1 << block_bits
    lowest = int(owners[0]) - int(owners[0]) % span
    starts = np.searchsorted(owners, np.arange(lowest, int(owners[-1]) + 1, span)).tolist()
    keys: np.ndarray = owners.astype(dtype)  # the owner's place in its block, then the code (in place)
    np.bitwise_and(keys, span - 1, out=keys)
    np.left_shift(keys, code_bits, out=keys)
    np.bitwise_or(keys, prefixes, out=keys, casting="unsafe")  # prefixes < 2^code_bits
    for a, b in zip(starts, [*starts[1:], keys.size]):
        keys[a:b].sort()
    repeat = np.zeros(keys.size, dtype=bool)
    np.equal(keys[1:], keys[:-1], out=repeat[1:])
    repeat[starts] = False  # a block's first pair is another owner's than the previous block's
    counts = np.bincount(prefixes, minlength=size)
    if repeat.any():
        counts -= np.bincount(keys[repeat] & ((1 << code_bits) - 1), minlength=size)
    return counts


def _check(
    owners: np.ndarray, prefixes: np.ndarray, sampler: str, num_users: int, bound: int, dummy: int
) -> tuple[int, int]:
    """Validated ``(num_users, bound)``; raise on a bad sampler or pair outside the layer."""
    if sampler not in SAMPLERS:
        raise PrivregValueError(f"sampler must be one of {SAMPLERS}; got {sampler!r}")
    num_users = v.check_int("num_users", num_users, minimum=0)
    bound = v.check_int("bound", bound, minimum=1)
    if owners.size == 0:
        return num_users, bound
    if prefixes.min() < 0 or prefixes.max() >= dummy:
        raise PrivregValueError(f"prefix codes must be in [0, {dummy}) (the dummy gamma is {dummy})")
    if owners.min() < 0 or owners.max() >= num_users:
        raise PrivregValueError(f"owners must be in [0, {num_users})")
    return num_users, bound


@overload
def _selected(
    owners: np.ndarray,
    prefixes: np.ndarray,
    weights: np.ndarray,
    *,
    num_users: int,
    bound: int,
    sampler: str,
    rng: RandomSource,
    layout: Literal[True] = ...,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


@overload
def _selected(
    owners: np.ndarray,
    prefixes: np.ndarray,
    weights: np.ndarray,
    *,
    num_users: int,
    bound: int,
    sampler: str,
    rng: RandomSource,
    layout: Literal[False],
) -> tuple[None, np.ndarray, None]: ...


def _selected(
    owners: np.ndarray,
    prefixes: np.ndarray,
    weights: np.ndarray,
    *,
    num_users: int,
    bound: int,
    sampler: str,
    rng: RandomSource,
    layout: bool = True,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None]:
    """The distinct (user, prefix) pairs a user sends (``user, code, rank``: rank in the
    user's preference order, below ``bound``); with ``layout=False`` only their codes.
    Users with at most ``bound`` entries cannot have more than ``bound`` distinct
    prefixes: they send all of them, and their pairs only need a value sort to merge
    repeats. The others are merged with their weights and ranked by the sampler where
    they do have more than ``bound``."""
    heavy = (np.bincount(owners, minlength=num_users) > bound)[owners]
    some_heavy = bool(heavy.any())
    parts = []
    if not some_heavy or not heavy.all():
        light = ~heavy if some_heavy else slice(None)
        user, code, _ = _merge_pairs(owners[light], prefixes[light], None)
        parts.append((user, code, _rank_in_runs(user, num_users)) if layout else (None, code, None))
    if some_heavy:
        user, code, total = _merge_pairs(
            owners[heavy], prefixes[heavy], weights[heavy] if sampler == "greedy" else None
        )
        rank = _rank_in_runs(user, num_users)
        over = np.bincount(user, minlength=num_users) > bound  # users who must choose
        if over.any():
            mine = np.flatnonzero(over[user])
            sub_user = user[mine]
            order = _selection_order(sub_user, total[mine] if total is not None else None, num_users, rng)
            mine = mine[order]  # still grouped by user (the order sorts by user first)
            rank[mine] = _rank_in_runs(user[mine], num_users)
        keep = rank < bound
        parts.append((user[keep], code[keep], rank[keep]) if layout else (None, code[keep], None))
    if len(parts) == 1:
        return parts[0]
    (u1, c1, r1), (u2, c2, r2) = parts
    if not layout:
        return None, np.concatenate([c1, c2]), None
    return np.concatenate([u1, u2]), np.concatenate([c1, c2]), np.concatenate([r1, r2])


def _rank_in_runs(user: np.ndarray, num_users: int) -> np.ndarray:
    """Position of each entry within its user's run (``user`` grouped, runs in order)."""
    first = np.zeros(num_users + 1, dtype=np.int64)
    np.cumsum(np.bincount(user, minlength=num_users), out=first[1:])
    return np.arange(user.size) - first[user]


def _merge_pairs(
    owners: np.ndarray, prefixes: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The distinct (user, prefix) pairs, sorted by user then prefix, and (given
    ``weights``) how often each was contributed. One value sort when user, prefix and
    weight pack into 63 bits (the weight in the low bits, summed over repeats after the
    sort); else a lexicographic sort of the pairs."""
    shift = int(prefixes.max()).bit_length()
    w = weights.astype(np.int64) if weights is not None else None
    w_bits = max(int(w.max()), 1).bit_length() if w is not None else 0
    if int(owners.max()).bit_length() + shift + w_bits <= 63:
        keys = (owners.astype(np.int64) << shift) | prefixes
        if w is not None:
            packed = np.sort((keys << w_bits) | w)
            keys = packed >> w_bits
        else:
            keys.sort()
        first = np.empty(keys.size, dtype=bool)
        first[:1] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        total = np.add.reduceat(packed & ((1 << w_bits) - 1), np.flatnonzero(first)) if w is not None else None
        keys = keys[first]
        return keys >> shift, keys & ((1 << shift) - 1), total
    order = np.lexsort((prefixes, owners))
    o, p = owners[order], prefixes[order]
    starts = np.flatnonzero(np.concatenate(([True], (o[1:] != o[:-1]) | (p[1:] != p[:-1]))))
    total = np.add.reduceat(w[order], starts) if w is not None else None
    return o[starts].astype(np.int64), p[starts].astype(np.int64), total


def _selection_order(user: np.ndarray, total: np.ndarray | None, num_users: int, rng: RandomSource) -> np.ndarray:
    """A permutation of the pairs that sorts them by user, then (greedy) by decreasing
    total, with uniformly random order among ties (random order only for RandomSampling):
    one sort by a packed key, or a random shuffle then a stable sort when it does not fit."""
    user_bits = max(num_users - 1, 1).bit_length()
    if total is not None:
        rest = int(total.max()) - total  # larger totals first
        rest_bits = max(int(rest.max()), 1).bit_length()
    else:
        rest, rest_bits = np.zeros_like(user), 0
    random_bits = 63 - user_bits - rest_bits
    if random_bits >= _MIN_RANDOM_BITS:
        packed = (user << (rest_bits + random_bits)) | (rest << random_bits)
        packed |= uniform_chunked(1 << random_bits, user.size, rng)
        return np.argsort(packed)
    shuffled = np.argsort(uniform_chunked(1 << 62, user.size, rng))  # too wide to pack
    return shuffled[np.lexsort((rest[shuffled], user[shuffled]))]
