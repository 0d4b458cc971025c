"""A simulated keyboard population for out-of-vocabulary (OOV) word discovery.

Sun et al. 2024 (arXiv:2404.11607), Section 4, measure LDP TrieHH on real en-US typing:
a known vocabulary V, a target list of words outside it, ``T`` days of contributions per
user, and the *coverage* of the discovered words: the contributions of the discovered
target words divided by the contributions of all target words. This module builds a
synthetic stand-in:

* Word law: real English word frequencies from ``wordfreq`` (Speer 2022), the ``size``
  most frequent words, heavy-tailed (Zipf-like).
* Known vocabulary V: the ``known_words`` most frequent words. The target words are all
  the others, so out-of-vocabulary words exist and follow the law's tail.
* Users: over ``days`` days a user types ``Poisson(days * oov_per_day)`` unknown words. A
  share ``personal_share`` of them are the user's ``personal_words`` own words (typos and
  spellings only that user keeps typing: one random edit of a common word, drawn from a
  pool of ``personal_pool`` strings); the rest are drawn from the law's tail. Personal
  words are bursty -- frequent for their user, rare overall -- which is the regime where
  Section 4 finds RandomSampling beats GreedySampling (GreedySampling spends the bound B
  on the user's most typed words). In-vocabulary words are not simulated: every user
  drops them before anything else (Algorithm 2, line 12).
* Coverage is computed against the law itself, i.e. on an infinitely large test
  population: the share of the tail's probability mass on discovered target words.

Synthetic data only: the population is drawn with numpy's generator, seeded from the
caller's random source. Privacy noise never is (it comes from the randomizer).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.randomness import RandomSource
from privreg.plugins.heavy_hitters.alphabet import Alphabet
from privreg.plugins.heavy_hitters.users import Lexicon, UserWords

__all__ = ["WordLaw", "english_word_law", "english_words_loaded", "PopulationModel"]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: Rounds of edits without a new word after which the pool is taken to be exhausted.
_STALLED_ROUNDS = 64


def _words(xs: Iterable[str]) -> tuple[str, ...]:
    return tuple(xs)


@attrs.frozen(kw_only=True, eq=False)
class WordLaw:
    """Distinct words, most frequent first, with positive relative frequencies."""

    words: tuple[str, ...] = attrs.field(converter=_words)
    frequencies: np.ndarray = attrs.field(converter=lambda x: np.asarray(x, dtype=np.float64))

    def __attrs_post_init__(self) -> None:
        f = self.frequencies
        if f.shape != (len(self.words),) or not np.all(np.isfinite(f)) or (f <= 0).any():
            raise PrivregValueError(f"frequencies must be {len(self.words)} positive numbers")
        if (np.diff(f) > 0).any():
            raise PrivregValueError("words must be sorted from most to least frequent")


def english_word_law(size: int) -> WordLaw:
    """The ``size`` most frequent English words and their frequencies, from ``wordfreq``'s
    ``large`` English list (lower-cased; ties in order of the word). Requires the
    ``wordfreq`` package (data CC BY-SA 4.0, Robyn Speer)."""
    size = v.check_int("size", size, minimum=2)
    ranked = _ranked_english()
    if size > len(ranked):
        raise PrivregValueError(f"size must be at most {len(ranked)} (wordfreq's English list); got {size}")
    return WordLaw(words=[w for w, _ in ranked[:size]], frequencies=[f for _, f in ranked[:size]])


def english_words_loaded() -> bool:
    """Whether this process has loaded wordfreq's English list already (once, about
    85 MB and 4 s)."""
    return _ranked_english.cache_info().currsize > 0


@functools.lru_cache(maxsize=1)
def _ranked_english() -> tuple[tuple[str, float], ...]:
    try:
        import wordfreq
    except ImportError:  # pragma: no cover - exercised only without the dependency
        raise PrivregError("the OOV population needs the wordfreq package: pip install wordfreq") from None
    table = wordfreq.get_frequency_dict("en", wordlist="large")
    return tuple(sorted(table.items(), key=lambda kv: (-kv[1], kv[0])))


def _check_share(x: Any) -> float:
    return v.check_probability("personal_share", x)


@attrs.frozen(kw_only=True, eq=False)
class PopulationModel:
    """The distribution of one simulated user (see the module docstring); users are
    i.i.d., so every call of :meth:`sample` gives fresh, disjoint users."""

    law: WordLaw = attrs.field(validator=attrs.validators.instance_of(WordLaw))
    known_words: int = attrs.field(converter=lambda x: v.check_int("known_words", x, minimum=0))
    days: int = attrs.field(default=60, converter=lambda x: v.check_int("days", x, minimum=1))
    oov_per_day: float = attrs.field(default=0.5, converter=lambda x: v.check_sensitivity("oov_per_day", x))
    personal_words: int = attrs.field(default=2, converter=lambda x: v.check_int("personal_words", x, minimum=0))
    personal_share: float = attrs.field(default=0.5, converter=_check_share)
    personal_pool: int = attrs.field(default=50_000, converter=lambda x: v.check_int("personal_pool", x, minimum=1))
    alphabet: Alphabet = attrs.field(factory=Alphabet)
    depth: int = attrs.field(default=15, converter=lambda x: v.check_int("depth", x, minimum=1))
    seed: int = attrs.field(default=0, converter=lambda x: v.check_int("seed", x, minimum=0))

    def __attrs_post_init__(self) -> None:
        if self.known_words >= len(self.law.words):
            raise PrivregValueError(
                f"known_words ({self.known_words}) must be below the law's {len(self.law.words)} "
                f"words, or no word is out of vocabulary"
            )
        if self.personal_share > 0 and self.personal_words == 0:
            raise PrivregValueError("personal_share > 0 needs personal_words >= 1")

    @property
    def targets(self) -> int:
        """How many target (out-of-vocabulary) words the law has."""
        return len(self.law.words) - self.known_words

    @cached_property
    def personal_strings(self) -> tuple[str, ...]:
        """The pool of personal words: one random edit (insert, delete, substitute a
        letter, or repeat the last letter) of a word drawn by frequency from the law,
        distinct and never a law word. Drawn from ``seed`` alone, so a model always has the
        same pool (part of the model, like the law)."""
        gen = np.random.default_rng(self.seed)
        law_words = set(self.law.words)
        weights = self.law.frequencies / self.law.frequencies.sum()
        pool: dict[str, None] = {}
        stalled = 0  # rounds that found no new word: a small law has only so many edits
        while len(pool) < self.personal_pool:
            if stalled == _STALLED_ROUNDS:
                raise PrivregValueError(
                    f"the law's {len(self.law.words)} words have fewer one-letter edits than the "
                    f"{self.personal_pool} personal words the model draws; use a larger vocabulary (--vocabulary)"
                )
            before = len(pool)
            need = self.personal_pool - len(pool)
            bases = gen.choice(len(self.law.words), size=2 * need, p=weights)
            kinds = gen.integers(0, 4, size=2 * need)
            spots = gen.random(2 * need)
            letters = gen.integers(0, 26, size=2 * need)
            for b, kind, spot, letter in zip(bases, kinds, spots, letters):
                word = _edit(self.law.words[b], int(kind), float(spot), _LETTERS[letter])
                if word and word not in law_words:
                    pool[word] = None
            stalled = stalled + 1 if len(pool) == before else 0
        return tuple(pool)[: self.personal_pool]

    @cached_property
    def lexicon(self) -> Lexicon:
        """Law words (ids ``0 .. len(law) - 1``, by rank) then personal words."""
        words = self.law.words + (self.personal_strings if self.personal_words else ())
        return Lexicon(words=words, alphabet=self.alphabet, depth=self.depth)

    @cached_property
    def known(self) -> np.ndarray:
        """V as a mask over the lexicon: the ``known_words`` most frequent law words."""
        mask = np.zeros(len(self.lexicon), dtype=bool)
        mask[: self.known_words] = True
        return mask

    @cached_property
    def target_weights(self) -> np.ndarray:
        """Each target word's share of all target contributions (sums to 1), by rank."""
        w = self.law.frequencies[self.known_words :]
        return w / w.sum()

    def sample(self, num_users: int, rng: RandomSource) -> UserWords:
        """``num_users`` fresh users' local datasets (vectorised over users and tokens)."""
        num_users = v.check_int("num_users", num_users, minimum=0)
        gen = np.random.default_rng(rng.randbits(128))
        tokens = gen.poisson(self.days * self.oov_per_day, size=num_users)
        personal = gen.binomial(tokens, self.personal_share) if self.personal_words else np.zeros_like(tokens)
        shared = tokens - personal
        owner_shared = np.repeat(np.arange(num_users), shared)
        cdf = np.cumsum(self.target_weights)
        word_shared = self.known_words + np.minimum(
            np.searchsorted(cdf, gen.random(owner_shared.size) * cdf[-1], side="right"), self.targets - 1
        )
        owner_personal = np.repeat(np.arange(num_users), personal)
        own = gen.integers(0, self.personal_pool, size=(num_users, max(self.personal_words, 1)))
        pick = gen.integers(0, max(self.personal_words, 1), size=owner_personal.size)
        word_personal = len(self.law.words) + own[owner_personal, pick]
        return UserWords.from_tokens(
            np.concatenate([owner_shared, owner_personal]), np.concatenate([word_shared, word_personal]), num_users
        )

    def groups(self, group_size: int, count: int, rng: RandomSource) -> Iterator[UserWords]:
        """``count`` groups of ``group_size`` fresh users, drawn lazily (one layer's users
        in memory at a time)."""
        group_size = v.check_int("group_size", group_size, minimum=1)
        for _ in range(v.check_int("count", count, minimum=0)):
            yield self.sample(group_size, rng)

    def coverage(self, words: Iterable[str]) -> float:
        """Section 4's coverage of ``words`` on an infinitely large test population: the
        share of all target-word contributions made by target words in ``words`` (known
        words, personal words and strings nobody types count for nothing)."""
        index = self.lexicon.index
        hit = {index[w] for w in words if w in index}
        ranks = np.array(
            [i - self.known_words for i in hit if self.known_words <= i < len(self.law.words)], dtype=np.int64
        )
        return float(self.target_weights[ranks].sum()) if ranks.size else 0.0


def _edit(word: str, kind: int, spot: float, letter: str) -> str:
    """One typing edit of ``word`` at relative position ``spot``."""
    i = min(int(spot * (len(word) + 1)), len(word))
    if kind == 0:  # insert
        return word[:i] + letter + word[i:]
    if kind == 1 and len(word) > 2:  # delete
        j = min(i, len(word) - 1)
        return word[:j] + word[j + 1 :]
    if kind == 2:  # substitute
        j = min(i, len(word) - 1)
        return word[:j] + letter + word[j + 1 :]
    return word + word[-1] * (1 + int(spot * 3))  # repeat the last letter ("sooo")
