"""The character set ``X`` of LDP TrieHH and the encoding of words as symbol codes.

Sun et al. 2024 (arXiv:2404.11607), Section 2: every contribution is a string over a small
alphabet ``X`` that holds an end-of-word symbol ``⊥``; every word ends with ``⊥``. The
experiments of Section 4 use Python's ``string.printable`` (100 characters). Here the
default alphabet is ``string.printable`` plus ``⊥`` (101 symbols): ``⊥`` must be a symbol
no word contains, and no printable character can serve.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["Alphabet", "END"]

#: Default end-of-word symbol (U+22A5 UP TACK); not in ``string.printable``.
END = "\u22a5"


def _symbols(value: object) -> str:
    if not isinstance(value, str):
        raise PrivregTypeError(f"symbols must be a str of distinct characters; got {value!r}")
    if len(set(value)) != len(value) or not value:
        raise PrivregValueError(
            f"symbols must be a non-empty str of distinct characters; got {len(value)} characters "
            f"with {len(value) - len(set(value))} repeats"
        )
    return value


@attrs.frozen(kw_only=True)
class Alphabet:
    """``X = symbols + end``. Symbol ``symbols[i]`` has code ``i``; ``end`` has code
    ``len(symbols)``, so codes run over ``0 .. size - 1`` with ``size = len(symbols) + 1``."""

    symbols: str = attrs.field(default=string.printable, converter=_symbols)
    end: str = attrs.field(default=END)

    @end.validator
    def _end_is_new(self, attribute: object, value: object) -> None:
        if not isinstance(value, str) or len(value) != 1:
            raise PrivregTypeError(f"end must be a single character; got {value!r}")
        if value in self.symbols:
            raise PrivregValueError(
                f"end symbol {value!r} is also in symbols; choose a character no word contains (default {END!r})"
            )

    @property
    def size(self) -> int:
        """``|X|``, the end symbol included."""
        return len(self.symbols) + 1

    @property
    def end_code(self) -> int:
        return len(self.symbols)

    def lookup(self) -> dict[str, int]:
        """Character -> code (the end symbol included)."""
        out = {c: i for i, c in enumerate(self.symbols)}
        out[self.end] = self.end_code
        return out

    def encode(self, words: Sequence[str], depth: int) -> np.ndarray:
        """An ``(len(words), depth + 1)`` int16 array: row ``w`` holds the codes of
        ``words[w] + end`` and ``-1`` after them. Only the longest prefix made of alphabet
        symbols is encoded: from the first character outside the alphabet on, the row is
        ``-1`` (and the end symbol is not appended), because a prefix holding such a
        character is never a valid contribution (Algorithm 2, line 12) -- a word with one
        can never be discovered. Rows stop after ``depth + 1`` symbols.

        ``depth`` is D: layer ``i`` (1-based) reads column ``i``, the last symbol of a
        length-``i+1`` prefix (Algorithm 2, lines 11-12).
        """
        depth = v.check_int("depth", depth, minimum=1)
        width = depth + 1
        for word in words:
            if not isinstance(word, str) or not word:
                raise PrivregTypeError(
                    f"every word must be a non-empty str; got a {type(word).__name__} or an empty str"
                )
        if not len(words):
            return np.full((0, width), -1, dtype=np.int16)
        # fixed-width UTF-32 view: one uint32 code point per character, 0 as padding
        points = np.array(words, dtype=f"<U{width}").view(np.uint32).reshape(len(words), width)
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        table = np.full(max(int(points.max()), ord(self.end)) + 1, -1, dtype=np.int16)
        for char, code in self.lookup().items():
            table[ord(char)] = code
        if (table[points] == self.end_code).any():
            raise PrivregValueError(f"a word contains the end symbol {self.end!r}; it cannot be encoded")
        out = table[points]
        col = np.arange(width)
        out[col >= np.minimum(lengths, width)[:, None]] = -1  # padding, not characters
        bad = out < 0
        first_bad = np.where(bad.any(axis=1), bad.argmax(axis=1), width)
        out[col >= first_bad[:, None]] = -1
        ends = np.flatnonzero((first_bad >= lengths) & (lengths < width))  # whole word valid
        out[ends, lengths[ends]] = self.end_code
        return out

    def decode(self, codes: Sequence[int]) -> str:
        """The string of a sequence of codes (the end symbol shown as ``end``)."""
        chars = self.symbols + self.end
        return "".join(chars[int(c)] for c in codes)
