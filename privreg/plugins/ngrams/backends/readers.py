"""The local backend's file readers: (user, text) rows of JSONL, CSV and Parquet files,
a chunk of records at a time (``.gz`` and ``.bz2`` for JSONL and CSV).

Each reader yields DataFrames with string columns ``user`` and ``text`` (rows missing
either dropped) and never holds more than one chunk of strings. Values are read as
strings per value (JSON: ``str(value)``; Parquet: Arrow's cast), so the rows never depend
on the chunking. Errors name the file and the rule, never a line's number or content.
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import io
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from privreg.core.cost import capped_reader
from privreg.core.errors import PrivregValueError
from privreg.core.files import reading
from privreg.core.validation import check_header
from privreg.plugins.ngrams.backends.base import check_columns

__all__ = [
    "ColumnCheck",
    "csv_chunks",
    "jsonl_chunks",
    "jsonl_payloads",
    "jsonl_records",
    "parquet_chunks",
    "records_frame",
]


def _open_binary(path: Path) -> Any:
    """A binary stream of ``path``'s content: ``.gz``/``.bz2`` decompressed as a stream,
    refused once it expands past ``--max-input-gib`` (:func:`~privreg.core.cost.capped_reader`)."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return capped_reader(gzip.open(path, "rb"), repr(str(path)))
    if suffix == ".bz2":
        return capped_reader(bz2.open(path, "rb"), repr(str(path)))
    return open(path, "rb")


def _open_text(path: Path) -> Any:
    return io.TextIOWrapper(_open_binary(path), encoding="utf-8")


def _cell(value: Any, column_kind: str = "column") -> str | None:
    """A JSON value as the string the pipeline sees (None: missing). Per value, so that
    chunking never changes how a value reads (pandas infers column types per chunk)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, dict)):
        raise PrivregValueError(
            f"column {column_kind} holds a JSON {'array' if isinstance(value, list) else 'object'}; the user "
            f"and text columns must hold strings or numbers (flatten the input first)"
        )
    return str(value)


def records_frame(users: list[Any], texts: list[Any]) -> Any:
    import pandas as pd

    return pd.DataFrame({"user": np.array(users, dtype=object), "text": np.array(texts, dtype=object)})


def _parse_lines(lines: list[str], first_line: int, path: Path) -> list[dict[str, Any]]:
    """The JSON object of each non-blank line. One ``json.loads`` of the whole chunk as an
    array when every line is exactly one object (the common case); otherwise line by line,
    naming the first bad line."""
    with contextlib.suppress(ValueError):  # some line is not one object: line by line below
        objs = json.loads("[" + ",".join(lines) + "]")
        if len(objs) == len(lines) and all(type(o) is dict for o in objs):
            return objs
    objs = []
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            # the rule only: the line's number or content would be data
            raise PrivregValueError(
                f"{str(path)!r} has a line that is not a JSON object; JSONL input needs one object per line"
            ) from None
        if not isinstance(obj, dict):
            raise PrivregValueError(
                f"{str(path)!r} has a line that is not a JSON object; JSONL input needs one object per line"
            )
        objs.append(obj)
    return objs


def jsonl_payloads(path: Path, rows: int) -> Iterator[tuple[int, list[str]]]:
    """(number of the first line, raw lines), ``rows`` lines at a time."""
    lineno = 1
    with reading(path, "input"), _open_text(path) as fh:  # not UTF-8, unreadable: one-line errors
        while True:
            lines = list(itertools.islice(fh, rows))
            if not lines:
                return
            yield lineno, lines
            lineno += len(lines)


def jsonl_records(
    first_line: int, lines: list[str], path: Path, user_column: str, text_column: str
) -> tuple[list[str], list[str], tuple[bool, bool, list[str]]]:
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
    users = [_cell(u, repr(user_column)) for u in users]
    texts = [t if type(t) is str else _cell(t, repr(text_column)) for t in texts]
    kept = [(u, t) for u, t in zip(users, texts) if u is not None and t is not None]
    return [u for u, _ in kept], [t for _, t in kept], (has_user, has_text, keys)


class ColumnCheck:
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


def jsonl_chunks(path: Path, user_column: str, text_column: str, rows: int) -> Iterator[Any]:
    check = ColumnCheck()
    for first, lines in jsonl_payloads(path, rows):
        users, texts, seen = jsonl_records(first, lines, path, user_column, text_column)
        check.update(seen)
        yield records_frame(users, texts)
    check.finish(path, user_column, text_column)


def csv_chunks(path: Path, user_column: str, text_column: str, rows: int) -> Iterator[Any]:
    import pandas as pd

    with reading(path, "input"):  # not UTF-8, unreadable: one-line errors
        with _open_binary(path) as fh:
            header = next(csv.reader(io.TextIOWrapper(fh, encoding="utf-8", newline="")), [])
        check_columns(check_header(header, repr(str(path))), user_column, text_column, path)
        with _open_binary(path) as fh:
            for df in pd.read_csv(
                fh,
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                chunksize=rows,
                usecols=list(dict.fromkeys([user_column, text_column])),
            ):
                out = df[[user_column, text_column]].dropna()
                yield records_frame(out[user_column].tolist(), out[text_column].tolist())


def parquet_chunks(path: Path, user_column: str, text_column: str, rows: int) -> Iterator[Any]:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise PrivregValueError("reading Parquet needs pyarrow: pip install 'privreg[parquet]'") from None
    try:
        with reading(path, "input"):
            pf = pq.ParquetFile(path)
    except pa.ArrowInvalid:  # arrow's message may quote bytes of the file
        raise PrivregValueError(f"input {str(path)!r} is not a Parquet file; check the file or pass --format") from None
    check_columns(list(pf.schema_arrow.names), user_column, text_column, path)
    for batch in pf.iter_batches(batch_size=rows, columns=list(dict.fromkeys([user_column, text_column]))):
        try:  # arrow's cast is per value (pandas' would depend on the batch's nulls)
            u = pc.cast(batch.column(user_column), pa.string()).to_numpy(zero_copy_only=False)
            t = pc.cast(batch.column(text_column), pa.string()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # arrow's message may quote a value
            raise PrivregValueError(
                f"{str(path)!r}: columns {user_column!r}/{text_column!r} must hold strings or numbers"
            ) from None
        keep = np.array([a is not None and b is not None for a, b in zip(u.tolist(), t.tolist())], dtype=bool)
        yield records_frame(u[keep].tolist(), t[keep].tolist())
