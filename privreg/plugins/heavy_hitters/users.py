"""Users' local datasets and the word list they index, as flat numpy arrays.

A group of users is stored like a sparse matrix in CSR form: user ``j`` typed word
``words[e]`` exactly ``counts[e]`` times, for ``e`` in ``offsets[j] .. offsets[j+1] - 1``,
over the whole collection period (Sun et al. 2024, Section 2: ``S_j`` is the multiset of a
user's contributions over ``T`` days). Word ids index a :class:`Lexicon`. Every operation
here is vectorised over users: no per-user Python loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.mechanisms import uniform_chunked
from privreg.plugins.heavy_hitters.alphabet import Alphabet

__all__ = ["Lexicon", "UserWords"]


def _int_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise PrivregValueError(f"{name} must be a 1-d array; got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise PrivregTypeError(f"{name} must hold integers; got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _words(xs: Iterable[str]) -> tuple[str, ...]:
    return tuple(xs)


@attrs.frozen(kw_only=True, eq=False)
class Lexicon:
    """Every distinct word of a simulation, by id, and its symbol codes for LDP TrieHH.

    ``codes`` is ``alphabet.encode(words, depth)``: row ``w`` is word ``w`` followed by the
    end symbol, ``-1`` where it stops (see :meth:`Alphabet.encode`).
    """

    words: tuple[str, ...] = attrs.field(converter=_words)
    alphabet: Alphabet = attrs.field(factory=Alphabet)
    depth: int = attrs.field(default=15, converter=lambda x: v.check_int("depth", x, minimum=1))

    def __attrs_post_init__(self) -> None:
        if len(set(self.words)) != len(self.words):
            raise PrivregValueError("words must be distinct: a lexicon gives each word one id")

    @cached_property
    def codes(self) -> np.ndarray:
        return self.alphabet.encode(self.words, self.depth)

    @cached_property
    def index(self) -> dict[str, int]:
        """Word -> id."""
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, words: Sequence[str]) -> np.ndarray:
        """Ids of the given words that are in the lexicon (others are skipped)."""
        idx = self.index
        return np.array([idx[w] for w in words if w in idx], dtype=np.int64)


@attrs.frozen(kw_only=True, eq=False)
class UserWords:
    """The local datasets of ``num_users`` users in CSR form (see the module docstring).

    Each (user, word) pair appears at most once, with ``counts >= 1``.
    """

    offsets: np.ndarray = attrs.field(converter=lambda x: _int_array("offsets", x))
    words: np.ndarray = attrs.field(converter=lambda x: _int_array("words", x))
    counts: np.ndarray = attrs.field(converter=lambda x: _int_array("counts", x))

    def __attrs_post_init__(self) -> None:
        o = self.offsets
        if o.size < 1 or o[0] != 0 or (np.diff(o) < 0).any() or o[-1] != self.words.size:
            raise PrivregValueError("offsets must start at 0, never decrease and end at len(words)")
        if self.counts.shape != self.words.shape:
            raise PrivregValueError("counts and words must have the same length (one count per word)")
        if (self.counts < 1).any() or (self.words < 0).any():
            raise PrivregValueError("counts must be >= 1 and word ids >= 0")

    @property
    def num_users(self) -> int:
        return self.offsets.size - 1

    @property
    def owners(self) -> np.ndarray:
        """The user (0-based, within this group) of every entry."""
        return np.repeat(np.arange(self.num_users, dtype=np.int64), np.diff(self.offsets))

    @classmethod
    def from_tokens(cls, users: np.ndarray, words: np.ndarray, num_users: int) -> UserWords:
        """Group token-level data (one row per typed word: its user and word id) into
        distinct (user, word) pairs with counts."""
        users = _int_array("users", users)
        words = _int_array("words", words)
        num_users = v.check_int("num_users", num_users, minimum=0)
        if users.shape != words.shape:
            raise PrivregValueError("users and words must have the same length")
        if users.size and (users.min() < 0 or users.max() >= num_users):
            raise PrivregValueError(f"user ids must be in [0, {num_users})")
        if not users.size:
            return cls(offsets=np.zeros(num_users + 1, np.int64), words=users, counts=users)
        width = int(words.max()) + 1
        keys, counts = np.unique(users * width + words, return_counts=True)
        owner = keys // width
        offsets = np.zeros(num_users + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=num_users), out=offsets[1:])
        return cls(offsets=offsets, words=keys % width, counts=counts)

    @classmethod
    def from_mappings(cls, datasets: Sequence[Mapping[int, int]]) -> UserWords:
        """Small explicit populations (tests, examples): one ``{word id: count}`` per user."""
        lengths = [len(d) for d in datasets]
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        words = [w for d in datasets for w in d]
        counts = [c for d in datasets for c in d.values()]
        return cls(offsets=offsets, words=np.array(words, np.int64), counts=np.array(counts, np.int64))

    def take(self, users: Any) -> UserWords:
        """The users at the given positions, in that order (a vectorised gather)."""
        users = _int_array("users", users)
        if users.size and (users.min() < 0 or users.max() >= self.num_users):
            raise PrivregValueError(f"user positions must be in [0, {self.num_users})")
        starts = self.offsets[users]
        lengths = self.offsets[users + 1] - starts
        offsets = np.zeros(users.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        entries = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return UserWords(offsets=offsets, words=self.words[entries], counts=self.counts[entries])

    def partition(self, group_size: int, groups: int, rng: RandomSource) -> list[UserWords]:
        """``groups`` disjoint groups of ``group_size`` users, drawn uniformly at random
        without replacement (Algorithm 2, line 7: users that have not participated
        before). The assignment sorts independent uniform 62-bit keys; it is uniform up
        to key ties, which occur with probability below ``num_users^2 / 2^63``."""
        group_size = v.check_int("group_size", group_size, minimum=1)
        groups = v.check_int("groups", groups, minimum=1)
        if group_size * groups > self.num_users:
            raise PrivregValueError(
                f"{groups} disjoint groups of {group_size} users need {group_size * groups} users; "
                f"the population has {self.num_users}"
            )
        order = np.argsort(uniform_chunked(1 << 62, self.num_users, rng), kind="stable")
        return [self.take(order[g * group_size : (g + 1) * group_size]) for g in range(groups)]

    def word_totals(self, num_words: int) -> np.ndarray:
        """How many times each word id was typed in this group (int64, length ``num_words``)."""
        return np.bincount(self.words, weights=self.counts, minlength=num_words).astype(np.int64)
