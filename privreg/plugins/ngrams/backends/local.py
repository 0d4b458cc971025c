"""The in-process backend: pandas for input, numpy for everything on the hot path.

Input is read in chunks of records (:meth:`LocalBackend.read_record_chunks`: JSONL parsed
line by line, CSV with pandas' chunked reader, Parquet by record batches), so reading
never holds more than one chunk of strings. Text becomes integer token ids with
:class:`Vocabulary` (ids in order of first appearance, the only structure that grows with
the input's distinct tokens): :meth:`LocalBackend.tokenize_file` yields one
:class:`TokenChunk` per input chunk; :meth:`LocalBackend.tokenize` builds an in-memory
:class:`TokenCorpus` (ids renumbered to index the sorted vocabulary) from the same code.
Aggregation (:meth:`LocalBackend.bounded_histogram`) is sorting and ``bincount``: no
Python loop over users, keys or n-grams.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg.plugins.ngrams.backends.base import (
    DEFAULT_SCALE,
    Backend,
    Histogram,
    Tokenizer,
    check_columns,
    check_path,
    contribution_weights,
    detect_format,
)
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["LocalBackend", "LocalPairs", "TokenChunk", "TokenCorpus", "Vocabulary", "keyed_rank", "sorted_unique",
           "string_tags", "tokenize_texts"]

#: Records per chunk when reading and tokenizing.
CHUNK_RECORDS = 10_000
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of uint64 with good avalanche)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M2
    x = x ^ (x >> np.uint64(27))
    x = x * _M3
    return x ^ (x >> np.uint64(31))


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, sorted (np.sort plus a run mask: much faster than
    np.unique on large int64 arrays with numpy 2.x)."""
    s = np.sort(x)
    if s.size < 2:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]


def keyed_rank(salt: int, user: np.ndarray, key: np.ndarray) -> np.ndarray:
    """A pseudo-random uint64 rank of each (user tag, key tag) under ``salt``: a function
    of the pair's intrinsic tags and the public salt only."""
    s = np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        h = _mix(user.astype(np.uint64) * _M1 + s)
        return _mix(h ^ (key.astype(np.uint64) * _M2 + _M1))


def string_tags(values: np.ndarray) -> np.ndarray:
    """A fixed 64-bit hash (pandas' SipHash with its default key) of each string: a tag
    that depends on the string alone, unlike its index in a data-dependent sorted list."""
    import pandas as pd

    return pd.util.hash_array(np.asarray(values, dtype=object).astype(str).astype(object))


def tokenize_texts(texts: Iterable[str], tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens of each text as ``(lengths, codes, uniques)``: ``lengths[i]`` tokens of text
    ``i``, then all tokens in order as ``uniques[codes]`` (``uniques`` in order of first
    appearance). Exactly :meth:`Tokenizer.tokens` of each text: ``re.findall`` of the
    pattern on the (lower-cased) text."""
    import pandas as pd

    pattern = re.compile(tokenizer.pattern)
    if tokenizer.lowercase:
        texts = [t.lower() for t in texts]
    lists = [pattern.findall(t) for t in texts]
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=object, count=int(lengths.sum()))
    if flat.size == 0:
        return lengths, np.zeros(0, np.int64), np.zeros(0, dtype=object)
    codes, uniques = pd.factorize(flat)
    return lengths, codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object)


class Vocabulary:
    """Token strings to dense int32 ids in order of first appearance. The only state of
    streaming tokenization that lives across chunks (it grows with distinct tokens)."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}

    def ids(self, words: np.ndarray) -> np.ndarray:
        """The id of each of ``words`` (distinct strings), adding the new ones."""
        index = self._index
        return np.fromiter((index.setdefault(w, len(index)) for w in words.tolist()), dtype=np.int32,
                           count=len(words))

    def words(self) -> np.ndarray:
        """All tokens, indexed by id."""
        return np.array(list(self._index), dtype=object)


@attrs.frozen(kw_only=True)
class TokenChunk:
    """One chunk of tokenized records: ``users`` (the user id string of each record),
    ``lengths`` (tokens per record, int64) and ``tokens`` (all tokens in record order as
    int32 ids of a :class:`Vocabulary`)."""

    users: np.ndarray
    lengths: np.ndarray
    tokens: np.ndarray


@attrs.frozen(kw_only=True)
class LocalPairs:
    """(user, key) rows for :meth:`LocalBackend.bounded_histogram`: two aligned 1-d
    integer arrays (users as dense indices 0..U-1, keys as int64).

    The keyed choice of a user's kept keys must depend on that user's own data only, so
    it is computed from *intrinsic* tags: ``user_tags[user]`` (e.g. a hash of the user id
    string; required, since a dense user index shifts when another user is added) and
    ``key_tags[key]`` when keys are dense indices of data-dependent lists (e.g. token ids
    of a vocabulary), else the key itself (keys that mean the same thing whatever other
    users hold, e.g. indices into already released sets)."""

    user: np.ndarray
    key: np.ndarray
    user_tags: np.ndarray
    key_tags: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("user", "key"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
                raise PrivregTypeError(f"{name} must be a 1-d integer numpy array; got {type(arr).__name__}")
        if self.user.shape != self.key.shape:
            raise PrivregValueError(f"user and key must be aligned; got {self.user.size} and {self.key.size} rows")
        for name in ("user_tags", "key_tags"):
            arr = getattr(self, name)
            if arr is not None and (not isinstance(arr, np.ndarray) or arr.dtype != np.uint64):
                raise PrivregTypeError(f"{name} must be a uint64 numpy array of tags")


@attrs.frozen(kw_only=True)
class TokenCorpus:
    """A tokenized multi-user corpus, in memory.

    * ``tokens``: int32 token id per position (index into ``vocab``);
    * ``vocab``: the distinct tokens, sorted by code point (so ids agree with Spark's
      binary string order);
    * ``user``: int32 user index per position (index into ``users``, sorted ids);
    * ``record_end``: int64 per position, the exclusive end of its record: an n-gram of
      length k starts at p only if ``p + k <= record_end[p]`` (n-grams never cross records).
    """

    tokens: np.ndarray
    vocab: np.ndarray
    user: np.ndarray
    users: np.ndarray
    record_end: np.ndarray

    @property
    def size(self) -> int:
        return int(self.tokens.size)

    @property
    def user_tags(self) -> np.ndarray:
        """Intrinsic 64-bit tag of each user (a hash of the user id string)."""
        return string_tags(self.users)

    @property
    def vocab_tags(self) -> np.ndarray:
        """Intrinsic 64-bit tag of each token (a hash of the token string)."""
        return string_tags(self.vocab)

    @classmethod
    def from_arrays(cls, *, tokens: np.ndarray, user: np.ndarray, record_end: np.ndarray,
                    vocab: np.ndarray | None = None, users: np.ndarray | None = None) -> TokenCorpus:
        """Wrap arrays made elsewhere (e.g. the synthetic generator). ``vocab`` defaults to
        ``"w<id>"`` names, ``users`` to ``"u<index>"``; both must be sorted and distinct."""
        tokens = np.asarray(tokens)
        n_vocab = int(tokens.max()) + 1 if tokens.size else 0
        if vocab is None:
            width = len(str(max(n_vocab - 1, 0)))
            vocab = np.array([f"w{i:0{width}d}" for i in range(n_vocab)], dtype=object)
        if users is None:
            n_users = int(np.max(user)) + 1 if np.size(user) else 0
            width = len(str(max(n_users - 1, 0)))
            users = np.array([f"u{i:0{width}d}" for i in range(n_users)], dtype=object)
        return cls(tokens=tokens.astype(np.int32, copy=False), vocab=np.asarray(vocab, dtype=object),
                   user=np.asarray(user).astype(np.int32, copy=False), users=np.asarray(users, dtype=object),
                   record_end=np.asarray(record_end).astype(np.int64, copy=False))

    def decode(self, start: np.ndarray, length: int) -> list[str]:
        """The n-grams of ``length`` starting at positions ``start``, as space-joined strings."""
        idx = start[:, None] + np.arange(length)[None, :]
        words = self.vocab[self.tokens[idx]]
        return [" ".join(row) for row in words]


def _open_text(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _cell(value: Any) -> str | None:
    """A JSON value as the string the pipeline sees (None: missing). Per value, so that
    chunking never changes how a value reads (pandas infers column types per chunk)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _frame(users: list[Any], texts: list[Any]) -> Any:
    import pandas as pd

    return pd.DataFrame({"user": np.array(users, dtype=object), "text": np.array(texts, dtype=object)})


def _parse_lines(lines: list[str], first_line: int, path: Path) -> list[dict[str, Any]]:
    """The JSON object of each non-blank line. One ``json.loads`` of the whole chunk as an
    array when every line is exactly one object (the common case); otherwise line by line,
    naming the first bad line."""
    try:
        objs = json.loads("[" + ",".join(lines) + "]")
        if len(objs) == len(lines) and all(type(o) is dict for o in objs):
            return objs
    except ValueError:
        pass
    objs = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            # the rule only: the line's number or content would be data
            raise PrivregValueError(
                f"{str(path)!r} has a line that is not a JSON object; JSONL input needs one "
                f"object per line") from None
        if not isinstance(obj, dict):
            raise PrivregValueError(f"{str(path)!r} has a line that is not a JSON object; JSONL input "
                                    f"needs one object per line")
        objs.append(obj)
    return objs


def _jsonl_payloads(path: Path, rows: int) -> Iterator[tuple[int, list[str]]]:
    """(number of the first line, raw lines), ``rows`` lines at a time."""
    lineno = 1
    with _open_text(path) as fh:
        while True:
            lines = list(itertools.islice(fh, rows))
            if not lines:
                return
            yield lineno, lines
            lineno += len(lines)


def _jsonl_records(first_line: int, lines: list[str], path: Path, user_column: str,
                   text_column: str) -> tuple[list[str], list[str], tuple[bool, bool, list[str]]]:
    """(users, texts) of the rows holding both, and (whether any row has the user column,
    whether any has the text column, some keys seen) for the missing-column error."""
    objs = _parse_lines(lines, first_line, path)
    has_user = any(user_column in obj for obj in objs)
    has_text = any(text_column in obj for obj in objs)
    keys: list[str] = []
    if not (has_user and has_text):
        for obj in objs[:100]:
            keys.extend(obj)
    users = [o.get(user_column) for o in objs]
    texts = [o.get(text_column) for o in objs]
    users = [_cell(u) for u in users]
    texts = [t if type(t) is str else _cell(t) for t in texts]
    keep = [u is not None and t is not None for u, t in zip(users, texts)]
    if not all(keep):
        users = list(itertools.compress(users, keep))
        texts = list(itertools.compress(texts, keep))
    return users, texts, (has_user, has_text, keys)


class _ColumnCheck:
    """Whether some JSONL row had each column; raises the missing-column error at the end."""

    def __init__(self) -> None:
        self.user = self.text = False
        self.keys: set[str] = set()

    def update(self, seen: tuple[bool, bool, list[str]]) -> None:
        self.user |= seen[0]
        self.text |= seen[1]
        if len(self.keys) < 1000:
            self.keys.update(seen[2])

    def finish(self, path: Path, user_column: str, text_column: str) -> None:
        if self.keys and not (self.user and self.text):
            check_columns(sorted(self.keys), user_column, text_column, path)


def _jsonl_chunks(path: Path, user_column: str, text_column: str, rows: int) -> Iterator[Any]:
    check = _ColumnCheck()
    for first, lines in _jsonl_payloads(path, rows):
        users, texts, seen = _jsonl_records(first, lines, path, user_column, text_column)
        check.update(seen)
        yield _frame(users, texts)
    check.finish(path, user_column, text_column)


def _tokenize_job(kind: str, payload: Any, path: Path, user_column: str, text_column: str,
                  tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
    """One chunk, parsed (JSONL lines) and tokenized: (users, lengths, codes, uniques,
    columns seen). Runs in a worker process when tokenizing in parallel."""
    seen = None
    if kind == "jsonl":
        users, texts, seen = _jsonl_records(payload[0], payload[1], path, user_column, text_column)
    else:
        users, texts = payload
    lengths, codes, uniques = tokenize_texts(texts, tokenizer)
    return (np.array(users, dtype=object), lengths, codes.astype(np.int32 if len(uniques) < 1 << 31 else np.int64),
            uniques, seen)


def _csv_chunks(path: Path, user_column: str, text_column: str, rows: int) -> Iterator[Any]:
    import pandas as pd

    check_columns([str(c) for c in pd.read_csv(path, dtype=str, nrows=0).columns], user_column, text_column, path)
    for df in pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], chunksize=rows,
                          usecols=list(dict.fromkeys([user_column, text_column]))):
        out = df[[user_column, text_column]].dropna()
        yield _frame(out[user_column].tolist(), out[text_column].tolist())


def _parquet_chunks(path: Path, user_column: str, text_column: str, rows: int) -> Iterator[Any]:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise PrivregValueError("reading Parquet needs pyarrow: pip install 'privreg[parquet]'") from None
    pf = pq.ParquetFile(path)
    check_columns(list(pf.schema_arrow.names), user_column, text_column, path)
    for batch in pf.iter_batches(batch_size=rows, columns=list(dict.fromkeys([user_column, text_column]))):
        try:  # arrow's cast is per value (pandas' would depend on the batch's nulls)
            u = pc.cast(batch.column(user_column), pa.string()).to_numpy(zero_copy_only=False)
            t = pc.cast(batch.column(text_column), pa.string()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # arrow's message may quote a value
            raise PrivregValueError(f"{str(path)!r}: columns {user_column!r}/{text_column!r} must hold strings or "
                                    f"numbers") from None
        keep = np.array([a is not None and b is not None for a, b in zip(u.tolist(), t.tolist())], dtype=bool)
        yield _frame(u[keep].tolist(), t[keep].tolist())


class LocalBackend(Backend):
    """In-process numpy/pandas backend (the default)."""

    name: ClassVar[str] = "local"

    def read_record_chunks(self, path: str | Path, *, user_column: str = "user_id", text_column: str = "text",
                           format: str | None = None, chunk_records: int = CHUNK_RECORDS) -> Iterator[Any]:
        """The (user, text) rows of a CSV (with header), JSONL or Parquet file (``.gz`` and
        ``.bz2`` for CSV/JSONL), ``chunk_records`` input rows at a time, as DataFrames with
        string columns ``user`` and ``text`` (rows missing either are dropped). Memory: one
        chunk. Non-string JSON values read as ``str(value)``, Parquet values by Arrow's
        cast to string: per value, so the rows never depend on the chunking."""
        p = check_path(path)
        fmt = detect_format(p, format)
        rows = v.check_count("chunk_records", chunk_records)
        for name, col in (("user_column", user_column), ("text_column", text_column)):
            if not isinstance(col, str) or not col:
                raise PrivregTypeError(f"{name} must be a non-empty column name; got {col!r}")
        if fmt == "jsonl":
            return _jsonl_chunks(p, user_column, text_column, rows)
        if fmt == "csv":
            return _csv_chunks(p, user_column, text_column, rows)
        return _parquet_chunks(p, user_column, text_column, rows)

    def read_records(self, path: str | Path, *, user_column: str = "user_id", text_column: str = "text",
                     format: str | None = None) -> Any:
        import pandas as pd

        chunks = list(self.read_record_chunks(path, user_column=user_column, text_column=text_column, format=format))
        if not chunks:
            return _frame([], [])
        return pd.concat(chunks, ignore_index=True)

    def tokenize_file(self, path: str | Path, *, tokenizer: Tokenizer = Tokenizer(), vocabulary: Vocabulary,
                      user_column: str = "user_id", text_column: str = "text", format: str | None = None,
                      chunk_records: int = CHUNK_RECORDS, workers: int = 1) -> Iterator[TokenChunk]:
        """Read and tokenize a file chunk by chunk: the same :class:`TokenChunk` s as
        tokenizing each of ``read_record_chunks(...)``. With ``workers`` > 1, parsing (JSONL)
        and tokenizing run in that many processes, at most two chunks per worker in
        flight (bounded memory); chunks come back in input order and token ids are
        assigned here, in that order, so the result does not depend on ``workers``."""
        if not isinstance(tokenizer, Tokenizer):
            raise PrivregTypeError(f"tokenizer must be a privreg.plugins.ngrams.backends.Tokenizer; got {tokenizer!r}")
        if not isinstance(vocabulary, Vocabulary):
            raise PrivregTypeError(f"vocabulary must be a privreg.plugins.ngrams.backends.Vocabulary; got {vocabulary!r}")
        workers = v.check_count("workers", workers)
        p = check_path(path)
        fmt = detect_format(p, format)
        rows = v.check_count("chunk_records", chunk_records)
        if fmt == "jsonl":
            jobs: Iterator[tuple[str, Any]] = (("jsonl", payload) for payload in _jsonl_payloads(p, rows))
        else:
            frames = self.read_record_chunks(p, user_column=user_column, text_column=text_column, format=fmt,
                                             chunk_records=rows)
            jobs = (("rows", (df["user"].tolist(), df["text"].tolist())) for df in frames)
        return self._tokenize_jobs(jobs, vocabulary, workers, (p, user_column, text_column, tokenizer))

    @staticmethod
    def _tokenize_jobs(jobs: Iterator[tuple[str, Any]], vocabulary: Vocabulary, workers: int,
                       args: tuple[Path, str, str, Tokenizer]) -> Iterator[TokenChunk]:
        check = _ColumnCheck()

        def finish(out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]) -> TokenChunk:
            users, lengths, codes, uniques, seen = out
            if seen is not None:
                check.update(seen)
            ids = vocabulary.ids(uniques)
            return TokenChunk(users=users, lengths=lengths, tokens=ids[codes])

        if workers == 1:
            for kind, payload in jobs:
                yield finish(_tokenize_job(kind, payload, *args))
        else:
            import multiprocessing as mp
            from collections import deque

            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            with ctx.Pool(workers) as pool:
                pending: deque[Any] = deque()
                for kind, payload in jobs:
                    pending.append(pool.apply_async(_tokenize_job, (kind, payload, *args)))
                    if len(pending) >= 2 * workers:
                        yield finish(pending.popleft().get())
                while pending:
                    yield finish(pending.popleft().get())
        check.finish(*args[:3])

    def tokenize(self, records: Any, tokenizer: Tokenizer = Tokenizer()) -> TokenCorpus:
        """A :class:`TokenCorpus` from (user, text) rows, tokenized ``CHUNK_RECORDS`` rows
        at a time; ids are renumbered at the end so that they index the sorted vocabulary.
        Records are grouped by user (stable)."""
        if not isinstance(tokenizer, Tokenizer):
            raise PrivregTypeError(f"tokenizer must be a privreg.plugins.ngrams.backends.Tokenizer; got {tokenizer!r}")
        users, user_idx = np.unique(records["user"].to_numpy(dtype=object).astype(str), return_inverse=True)
        user_idx = user_idx.reshape(-1)
        order = np.argsort(user_idx, kind="stable")
        texts = records["text"].to_numpy(dtype=object)[order]
        rec_user = user_idx[order]
        vocab = Vocabulary()
        tok_parts, len_parts = [], []
        for lo in range(0, texts.size, CHUNK_RECORDS):
            lengths, codes, uniques = tokenize_texts(texts[lo:lo + CHUNK_RECORDS].tolist(), tokenizer)
            len_parts.append(lengths)
            tok_parts.append(vocab.ids(uniques)[codes])
        lengths = np.concatenate(len_parts) if len_parts else np.zeros(0, np.int64)
        raw = np.concatenate(tok_parts) if tok_parts else np.zeros(0, np.int32)
        words = vocab.words()
        sorted_idx = np.argsort(words.astype(str), kind="stable")
        rank = np.empty(words.size, dtype=np.int32)
        rank[sorted_idx] = np.arange(words.size, dtype=np.int32)
        tokens = rank[raw] if raw.size else raw
        ends = np.cumsum(lengths)
        return TokenCorpus(tokens=tokens.astype(np.int32), vocab=words[sorted_idx],
                           user=np.repeat(rec_user, lengths).astype(np.int32), users=users.astype(object),
                           record_end=np.repeat(ends, lengths).astype(np.int64))

    def bounded_histogram(self, pairs: Any, *, max_keys: int, weighting: str = "sqrt", salt: int,
                          scale: int = DEFAULT_SCALE) -> Histogram:
        """See :meth:`Backend.bounded_histogram`. A user with at most ``max_keys`` distinct
        keys keeps them all (no ranking needed); a user with more keeps the ``max_keys``
        smallest by ``(keyed_rank(salt, user tag, key tag), key tag, key)`` -- the rank is
        a function of the user's own pair and the salt, the tie-breaks matter only when two
        of one user's keys share a 64-bit rank."""
        if not isinstance(pairs, LocalPairs):
            raise PrivregTypeError(f"pairs must be LocalPairs for the local backend; got {type(pairs).__name__}")
        max_keys = v.check_count("max_keys", max_keys)
        weights = contribution_weights(max_keys, weighting=weighting, scale=scale)
        user = pairs.user.astype(np.int64, copy=False)
        key = pairs.key.astype(np.int64, copy=False)
        empty = Histogram(keys=np.zeros(0, np.int64), counts=np.zeros(0, np.int64), scale=scale)
        if user.size == 0:
            return empty
        if user.min() < 0 or user.max() >= 1 << 31:
            raise PrivregValueError("user indices must lie in [0, 2**31)")
        if pairs.user_tags.size <= int(user.max()):
            raise PrivregValueError("user_tags must hold a tag for every user index")
        # Key codes that preserve key order (offsets, or ranks among the distinct keys);
        # (user, code) pairs packed into int64 and sorted with np.sort (much faster than
        # argsort/lexsort).
        kmin = int(key.min())
        if int(key.max()) - kmin < 1 << 40:
            code, uniq = key - kmin, None
        else:
            order = np.argsort(key)
            ordered = key[order]
            new = np.r_[True, ordered[1:] != ordered[:-1]]
            uniq = ordered[new]
            code = np.empty(key.size, dtype=np.int64)
            code[order] = np.cumsum(new) - 1
        kbits = max(1, int(code.max()).bit_length())
        ubits = max(1, int(user.max()).bit_length())
        if ubits + kbits > 62:
            raise PrivregValueError(  # pragma: no cover - 2**31 users and 2**31 distinct keys
                "too many users and distinct keys for the local backend; use backend='spark'")
        pair = sorted_unique((user << kbits) | code)  # distinct (user, key), by user then key
        user, code = pair >> kbits, pair & ((1 << kbits) - 1)
        del pair
        starts = np.flatnonzero(np.r_[True, user[1:] != user[:-1]])
        sizes = np.diff(np.r_[starts, user.size])
        heavy = sizes > max_keys
        t = np.repeat(np.minimum(sizes, max_keys), sizes)
        if heavy.any():
            # only users with more than max_keys keys need the keyed choice
            in_heavy = np.repeat(heavy, sizes)
            kept = self._keep_smallest_ranked(user[in_heavy], code[in_heavy], pairs, uniq, kmin, max_keys, salt)
            light = ~in_heavy
            code = np.concatenate([code[light], kept])
            t = np.concatenate([t[light], np.full(kept.size, max_keys, dtype=np.int64)])
        w = weights[t]
        if w.size and float(w.max()) * w.size >= 2.0**63:
            raise PrivregValueError("histogram totals would overflow int64; lower scale")
        width = int(code.max()) + 1
        if width <= max(1 << 22, 4 * code.size) and int(w.sum()) < 1 << 53:
            # bincount sums in float64: exact, every partial sum is an integer below 2**53
            present = np.bincount(code, minlength=width) > 0
            sums = np.bincount(code, weights=w, minlength=width)
            codes = np.flatnonzero(present)
            counts = sums[codes].astype(np.int64)
        else:
            tbits = max(1, max_keys.bit_length())
            if kbits + tbits <= 62:
                agg = np.sort((code << tbits) | t)
                code, t = agg >> tbits, agg & ((1 << tbits) - 1)
            else:  # pragma: no cover - keys use at most 40 bits above
                order = np.argsort(code, kind="stable")
                code, t = code[order], t[order]
            first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
            counts = np.add.reduceat(weights[t], first)
            codes = code[first]
        keys = codes + kmin if uniq is None else uniq[codes]
        if keys.size == 0:
            return empty  # pragma: no cover - every user keeps at least one key
        return Histogram(keys=keys, counts=counts, scale=scale)

    @staticmethod
    def _keep_smallest_ranked(user: np.ndarray, code: np.ndarray, pairs: LocalPairs, uniq: np.ndarray | None,
                              kmin: int, max_keys: int, salt: int) -> np.ndarray:
        """The codes each user keeps: its ``max_keys`` smallest by (rank, key tag, key).
        ``user``/``code`` are the distinct pairs of users holding more than max_keys keys,
        sorted by user then code."""

        def tags(c: np.ndarray) -> np.ndarray:
            original = c + kmin if uniq is None else uniq[c]
            return original.astype(np.uint64) if pairs.key_tags is None else pairs.key_tags[original]

        rank = keyed_rank(salt, pairs.user_tags[user], tags(code))
        kbits = max(1, int(code.max()).bit_length())
        ubits = max(1, int(user.max()).bit_length())
        rbits = 63 - ubits - kbits
        if rbits >= 8:
            # sort on the top rank bits that fit beside user and key, then re-sort the
            # (rare) runs whose top bits tie by the full (rank, tag, key)
            r = (rank >> np.uint64(64 - rbits)).astype(np.int64)
            packed = np.sort((user << (rbits + kbits)) | (r << kbits) | code)
            user, code = packed >> (rbits + kbits), packed & ((1 << kbits) - 1)
            top = packed >> kbits
            tie = np.flatnonzero(top[1:] == top[:-1])
            if tie.size:
                slots = np.union1d(tie, tie + 1)
                u, c = user[slots], code[slots]
                tag = tags(c)
                order = np.lexsort((c, tag, keyed_rank(salt, pairs.user_tags[u], tag), u))
                user[slots], code[slots] = u[order], c[order]
        else:  # general (slower) ordering by (user, rank, tag, key)
            order = np.lexsort((code, tags(code), rank, user))
            user, code = user[order], code[order]
        starts = np.flatnonzero(np.r_[True, user[1:] != user[:-1]])
        sizes = np.diff(np.r_[starts, user.size])
        position = np.arange(user.size) - np.repeat(starts, sizes)
        return code[position < max_keys]
