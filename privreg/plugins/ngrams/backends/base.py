"""The backend interface: where per-user data is read, tokenized and aggregated.

A privacy pipeline has two halves. The *aggregation* half touches every record: read
(user, text) rows, split text into tokens, bound each user's contribution and sum the
contributions per key. It must scale, so it runs on a backend: in-process numpy/pandas
(:class:`~privreg.plugins.ngrams.backends.local.LocalBackend`) or Apache Spark
(:class:`~privreg.plugins.ngrams.backends.spark.SparkBackend`). The *release* half --
noise, thresholds, accounting -- runs on the driver, on the aggregated histogram only,
with privreg's secure samplers; it never depends on the backend.

What every backend guarantees for :meth:`Backend.bounded_histogram` (the contract the
privacy analysis relies on):

* each user contributes to at most ``max_keys`` *distinct* keys: a user with more keeps
  the ``max_keys`` with the smallest tags ``HMAC-SHA256(secret, (user, key))``, the one
  selection rule of :mod:`privreg.analysis.selection` that every backend implements
  identically (so under one seed all backends keep the same keys and release the same
  n-grams). It depends only on that user's own data and the secret, so adding or
  removing another user never changes it, and it is a uniformly random subset of the
  user's keys, independent of what they are (the tags are pseudorandom);
* a user keeping ``t`` keys adds the integer ``W_t`` to each (:func:`contribution_weights`);
  with ``weighting="sqrt"`` ``W_t = floor(scale / sqrt(t))``, so the user's vector has L2
  norm ``sqrt(t) W_t <= scale`` and each weight is at most ``scale / sqrt(t)`` -- the
  weighted Gaussian policy of DPSU (Gopi et al. 2020, Section 5; Kim et al. 2021,
  Algorithm 6) in exact integer arithmetic; with ``weighting="unit"`` ``W_t = 1`` (L1
  norm <= ``max_keys``, L_inf = 1);
* sums are exact integers (no floating-point accumulation that could depend on other users).

Other plugins reuse this interface: anything that releases a set of keys or a histogram
with per-user contribution bounds (set union, heavy hitters, partition selection).
"""

from __future__ import annotations

import importlib
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg import readers
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "Backend",
    "Histogram",
    "Tokenizer",
    "WEIGHTINGS",
    "DEFAULT_SCALE",
    "contribution_weights",
    "detect_format",
    "INPUT_FORMATS",
]

#: Ends a missing-column error: the parameters that pick the columns.
COLUMN_HINT = "Pass user_column=/text_column= (CLI: --user-column/--text-column)"
#: Weighting policies of :meth:`Backend.bounded_histogram`.
WEIGHTINGS = ("sqrt", "unit")
#: Integer weights are in units of 1/DEFAULT_SCALE (a power of two: h / scale is exact).
DEFAULT_SCALE = 1 << 20
#: Input formats (:mod:`privreg.readers`); ``mail`` (a mail archive) on the local backend only.
INPUT_FORMATS = ("csv", "jsonl", "parquet", "mail")


def detect_format(path: str | Path, format: str | None = None) -> str:
    """``format`` if given, else from the suffix (``.gz``/``.bz2``/``.xz`` ignored): csv,
    jsonl (``.jsonl``, ``.json``, ``.ndjson``: one JSON object per line), parquet, or mail
    (``.tar``, ``.tgz``, ``.tar.gz``, ...: a mail archive); :func:`privreg.readers.detect_format`."""
    return readers.detect_format(path, format, formats=INPUT_FORMATS)


def contribution_weights(max_keys: int, *, weighting: str = "sqrt", scale: int = DEFAULT_SCALE) -> np.ndarray:
    """``W[t]`` for ``t = 0..max_keys``: the integer weight a user keeping ``t`` keys adds
    to each. ``"sqrt"``: ``W_t = floor(scale / sqrt(t)) = isqrt(scale^2 // t)`` (exact
    integer arithmetic), hence ``t W_t^2 <= scale^2``; ``"unit"``: ``W_t = 1``."""
    max_keys = v.check_count("max_keys", max_keys)
    scale = v.check_count("scale", scale)
    if weighting not in WEIGHTINGS:
        raise PrivregValueError(f"weighting must be one of {WEIGHTINGS}; got {weighting!r}")
    w = np.zeros(max_keys + 1, dtype=np.int64)
    if weighting == "unit":
        w[1:] = 1
    else:
        w[1:] = [math.isqrt(scale * scale // t) for t in range(1, max_keys + 1)]
    return w


_PROBES = ("", " ", "a", "ab", "a b", "a'b c.", "A1 b_2, c-d!", "\t\n", "\u00e9t\u00e9 \u4e2d")


def _min_width(pattern: str) -> int | None:
    """The fewest characters a match of ``pattern`` holds, from the regex parser (a
    lookahead such as ``(?=x)`` matches only the empty string, whatever the text; no
    probe text can show it for every such pattern); None if this Python's parser is not
    the one of 3.11-3.13."""
    try:
        sre = importlib.import_module("re._parser")  # private, but the parser re itself runs
        return int(sre.parse(pattern).getwidth()[0])
    except (ImportError, AttributeError, re.error, TypeError):
        return None


@attrs.frozen(kw_only=True)
class Tokenizer:
    """Splits text into tokens: every match of the regular expression ``pattern``
    (Python ``re`` syntax and Unicode semantics), lower-cased first (``str.lower``) when
    ``lowercase``. The default keeps words with inner apostrophes. :meth:`token_lists` is
    the one definition every backend runs (Spark runs it on its executors), so a text
    has the same tokens on every backend: Java's regex and lower-casing differ from
    Python's (e.g. ``\\w`` matches superscript digits and fractions in Python only,
    combining marks in Java only)."""

    pattern: str = attrs.field(default=r"[\w']+")
    lowercase: bool = attrs.field(default=True)

    @pattern.validator
    def _compiles(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, str) or not value:
            raise PrivregTypeError(f"pattern must be a non-empty regular expression string; got {value!r}")
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise PrivregValueError(f"pattern {value!r} is not a valid regular expression: {exc}") from None
        if compiled.groups:
            raise PrivregValueError(
                f"pattern {value!r} has capturing groups; use (?:...) so that every match is one token"
            )
        for probe in _PROBES:
            if _min_width(value) == 0 or any(m.end() == m.start() for m in compiled.finditer(probe)):
                raise PrivregValueError(
                    f"pattern {value!r} can match the empty string (an empty token); use a pattern whose "
                    f"every match holds at least one character, e.g. [\\w']+"
                )

    def token_lists(self, texts: Iterable[str]) -> list[list[str]]:
        """The tokens of each text: ``re.findall`` of the pattern on the text, lower-cased
        first when ``lowercase``."""
        findall = re.compile(self.pattern).findall
        if self.lowercase:
            return [findall(t.lower()) for t in texts]
        return [findall(t) for t in texts]

    def tokens(self, text: str) -> list[str]:
        """The tokens of one text."""
        return self.token_lists([text])[0]


@attrs.frozen(kw_only=True)
class Histogram:
    """An aggregated, contribution-bounded histogram, held on the driver.

    ``keys`` (distinct, sorted; int64, or str objects) and ``counts`` (int64, > 0) are
    aligned; a key's total is ``counts[i] / scale`` in the policy's units."""

    keys: np.ndarray
    counts: np.ndarray
    scale: int

    def __attrs_post_init__(self) -> None:
        if self.keys.shape != self.counts.shape or self.keys.ndim != 1:
            raise PrivregValueError(
                f"keys and counts must be aligned 1-d arrays; got shapes {self.keys.shape} and {self.counts.shape}"
            )

    def __len__(self) -> int:
        return int(self.keys.size)

    def total(self) -> int:
        return int(self.counts.sum())


class Backend(ABC):
    """Where the aggregation half runs. Backends are context managers (``close`` frees
    a Spark session they started; the local backend holds nothing)."""

    name: ClassVar[str] = ""

    @abstractmethod
    def read_records(
        self, path: str | Path, *, user_column: str = "user_id", text_column: str = "text", format: str | None = None
    ) -> Any:
        """The (user, text) rows of a CSV (with header), JSONL or Parquet file, as the
        backend's table type with columns ``user`` and ``text`` (both strings; rows with a
        missing user or text are dropped)."""

    @abstractmethod
    def bounded_histogram(
        self, pairs: Any, *, max_keys: int, weighting: str = "sqrt", secret: bytes, scale: int = DEFAULT_SCALE
    ) -> Histogram:
        """Sum of bounded per-user contributions per key (see the module docstring for the
        guarantees). ``pairs`` holds (user, key) rows in the backend's table type,
        duplicates allowed (a user counts each key once). ``secret``: 32 random bytes of
        the session's random source, the key of the choice of kept keys."""

    def close(self) -> None:
        """Release resources (default: nothing to release)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_path(path: Any) -> Path:
    """``path`` as an existing file, or a PrivregValueError naming it."""
    return readers.check_file(path, "input", "pass a CSV, JSONL or Parquet file, or a mail archive")


def check_columns(found: list[str], user_column: str, text_column: str, path: Path) -> None:
    """Refuse a user or text column missing from ``found``, naming the file's columns."""
    readers.require_columns([user_column, text_column], found, path, hint=COLUMN_HINT)
