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

import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.plugins.standard.subset_selection import uniform_chunked

__all__ = ["SAMPLERS", "sample_contributions"]

#: Local samplers by name (Section 3).
SAMPLERS = ("greedy", "random")

# random tie-break bits in the packed sort key; two pairs of one user tie with probability
# 2^-30 at most, and a tie is then broken by position instead of at random
_MIN_RANDOM_BITS = 30


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
    if sampler not in SAMPLERS:
        raise PrivregValueError(f"sampler must be one of {SAMPLERS}; got {sampler!r}")
    num_users = v.check_int("num_users", num_users, minimum=0)
    bound = v.check_int("bound", bound, minimum=1)
    out = np.full(num_users * bound, dummy, dtype=np.int64)
    if owners.size == 0:
        return out
    if prefixes.min() < 0 or prefixes.max() >= dummy:
        raise PrivregValueError(f"prefix codes must be in [0, {dummy}) (the dummy gamma is {dummy})")
    if owners.min() < 0 or owners.max() >= num_users:
        raise PrivregValueError(f"owners must be in [0, {num_users})")
    # merge repeated (user, prefix) pairs, summing how often each was contributed
    keys = owners * dummy + prefixes
    order = np.argsort(keys)
    keys = keys[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    user, code = keys[starts] // dummy, keys[starts] % dummy
    # one sort by a packed key: user, then (greedy) most contributed first, then random
    user_bits = max(num_users - 1, 1).bit_length()
    if sampler == "greedy":
        total = np.add.reduceat(weights[order], starts)
        rest = int(total.max()) - total  # larger totals first
        rest_bits = max(int(rest.max()), 1).bit_length()
    else:
        rest, rest_bits = np.zeros_like(user), 0
    random_bits = 63 - user_bits - rest_bits
    if random_bits >= _MIN_RANDOM_BITS:
        packed = (user << (rest_bits + random_bits)) | (rest << random_bits)
        packed |= uniform_chunked(1 << random_bits, user.size, rng)
        pick = np.argsort(packed)
    else:  # too many users or counts to pack: random order, then a stable sort
        shuffled = np.argsort(uniform_chunked(1 << 62, user.size, rng))
        pick = shuffled[np.lexsort((rest[shuffled], user[shuffled]))]
    user, code = user[pick], code[pick]
    first = np.zeros(num_users + 1, dtype=np.int64)
    np.cumsum(np.bincount(user, minlength=num_users), out=first[1:])
    rank = np.arange(user.size) - first[user]
    chosen = rank < bound
    out[user[chosen] * bound + rank[chosen]] = code[chosen]
    return out
