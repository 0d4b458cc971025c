"""The in-process backend: pandas for input, numpy for everything on the hot path.

Input is read in chunks of records (:meth:`LocalBackend.read_record_chunks`: JSONL parsed
line by line, CSV with pandas' chunked reader, Parquet by record batches), so reading
never holds more than one chunk of strings. Text becomes integer token ids with
:class:`Vocabulary` (ids in order of first appearance, the only structure that grows with
the input's distinct tokens): :meth:`LocalBackend.tokenize_file` yields one
:class:`TokenChunk` per input chunk; :meth:`LocalBackend.tokenize` builds an in-memory
:class:`TokenCorpus` (ids renumbered to index the sorted vocabulary) from the same code.
Aggregation (:meth:`LocalBackend.bounded_histogram`) is
:func:`~privreg.plugins.ngrams.backends.bounding.bounded_histogram`; the readers are in
:mod:`~privreg.plugins.ngrams.backends.readers`, the token types in
:mod:`~privreg.plugins.ngrams.backends.tokens`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from privreg.core import validation as v
from privreg.core import workers as lifetime
from privreg.core.errors import PrivregTypeError
from privreg.plugins.ngrams.backends.base import DEFAULT_SCALE, Backend, Histogram, Tokenizer, check_path, detect_format
from privreg.plugins.ngrams.backends.bounding import bounded_histogram
from privreg.plugins.ngrams.backends.readers import (
    ColumnCheck,
    jsonl_payloads,
    jsonl_records,
    record_chunks,
    records_frame,
)
from privreg.plugins.ngrams.backends.tokens import TokenChunk, TokenCorpus, Vocabulary, tokenize_texts

__all__ = ["CHUNK_RECORDS", "LocalBackend"]

#: Records per chunk when reading and tokenizing.
CHUNK_RECORDS = 10_000


def _tokenize_job(
    kind: str, payload: Any, path: Path, user_column: str, text_column: str, tokenizer: Tokenizer
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
    """One chunk, parsed (JSONL lines) and tokenized: (users, lengths, codes, uniques,
    columns seen). Runs in a worker process when tokenizing in parallel."""
    seen = None
    if kind == "jsonl":
        users, texts, seen = jsonl_records(payload[0], payload[1], path, user_column, text_column)
    else:
        users, texts = payload
    lengths, codes, uniques = tokenize_texts(texts, tokenizer)
    return (
        np.array(users, dtype=object),
        lengths,
        codes.astype(np.int32 if len(uniques) < 1 << 31 else np.int64),
        uniques,
        seen,
    )


class LocalBackend(Backend):
    """In-process numpy/pandas backend (the default)."""

    name: ClassVar[str] = "local"

    def read_record_chunks(
        self,
        path: str | Path,
        *,
        user_column: str = "user_id",
        text_column: str = "text",
        format: str | None = None,
        chunk_records: int = CHUNK_RECORDS,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Any]:
        """The (user, text) rows of a CSV (with a header row, or without one when
        ``columns`` names its columns), JSONL or Parquet file (compressed CSV/JSONL
        decompressed as a stream) or a mail archive (ham messages, one user per sender),
        ``chunk_records`` input rows at a time, as DataFrames with string columns ``user``
        and ``text`` (rows missing either are dropped); read by :mod:`privreg.readers`.
        Memory: one chunk. Non-string JSON values read as ``str(value)``, Parquet values by
        Arrow's cast to string: per value, so the rows never depend on the chunking."""
        p = check_path(path)
        fmt = detect_format(p, format)
        rows = v.check_count("chunk_records", chunk_records)
        for name, col in (("user_column", user_column), ("text_column", text_column)):
            if not isinstance(col, str) or not col:
                raise PrivregTypeError(f"{name} must be a non-empty column name; got {col!r}")
        return record_chunks(p, fmt, user_column, text_column, rows, columns)

    def read_records(
        self, path: str | Path, *, user_column: str = "user_id", text_column: str = "text", format: str | None = None
    ) -> Any:
        import pandas as pd

        chunks = list(self.read_record_chunks(path, user_column=user_column, text_column=text_column, format=format))
        if not chunks:
            return records_frame([], [])
        return pd.concat(chunks, ignore_index=True)

    def tokenize_file(
        self,
        path: str | Path,
        *,
        tokenizer: Tokenizer = Tokenizer(),
        vocabulary: Vocabulary,
        user_column: str = "user_id",
        text_column: str = "text",
        format: str | None = None,
        chunk_records: int = CHUNK_RECORDS,
        workers: int = 1,
        columns: Sequence[str] | None = None,
    ) -> Iterator[TokenChunk]:
        """Read and tokenize a file chunk by chunk: the same :class:`TokenChunk` s as
        tokenizing each of ``read_record_chunks(...)``. With ``workers`` > 1, parsing (JSONL)
        and tokenizing run in that many processes, at most two chunks per worker in
        flight (bounded memory); chunks come back in input order and token ids are
        assigned here, in that order, so the result does not depend on ``workers``."""
        if not isinstance(tokenizer, Tokenizer):
            raise PrivregTypeError(f"tokenizer must be a privreg.plugins.ngrams.backends.Tokenizer; got {tokenizer!r}")
        if not isinstance(vocabulary, Vocabulary):
            raise PrivregTypeError(
                f"vocabulary must be a privreg.plugins.ngrams.backends.Vocabulary; got {vocabulary!r}"
            )
        workers = v.check_count("workers", workers)
        p = check_path(path)
        fmt = detect_format(p, format)
        rows = v.check_count("chunk_records", chunk_records)
        if fmt == "jsonl" and columns is None:
            jobs: Iterator[tuple[str, Any]] = (("jsonl", payload) for payload in jsonl_payloads(p, rows))
        else:
            frames = self.read_record_chunks(
                p, user_column=user_column, text_column=text_column, format=fmt, chunk_records=rows, columns=columns
            )
            jobs = (("rows", (df["user"].tolist(), df["text"].tolist())) for df in frames)
        return self._tokenize_jobs(jobs, vocabulary, workers, (p, user_column, text_column, tokenizer))

    @staticmethod
    def _tokenize_jobs(
        jobs: Iterator[tuple[str, Any]], vocabulary: Vocabulary, workers: int, args: tuple[Path, str, str, Tokenizer]
    ) -> Iterator[TokenChunk]:
        check = ColumnCheck()

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
            init, initargs = lifetime.initializer()  # workers die with this process, even on SIGKILL
            with ctx.Pool(workers, initializer=init, initargs=initargs) as pool:
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
            lengths, codes, uniques = tokenize_texts(texts[lo : lo + CHUNK_RECORDS].tolist(), tokenizer)
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
        return TokenCorpus(
            tokens=tokens.astype(np.int32),
            vocab=words[sorted_idx],
            user=np.repeat(rec_user, lengths).astype(np.int32),
            users=users.astype(object),
            record_end=np.repeat(ends, lengths).astype(np.int64),
        )

    def bounded_histogram(
        self, pairs: Any, *, max_keys: int, weighting: str = "sqrt", secret: bytes, scale: int = DEFAULT_SCALE
    ) -> Histogram:
        """See :meth:`Backend.bounded_histogram` and
        :func:`~privreg.plugins.ngrams.backends.bounding.bounded_histogram`, which this is."""
        return bounded_histogram(pairs, max_keys=max_keys, weighting=weighting, secret=secret, scale=scale)
