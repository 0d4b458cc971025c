"""The local backend's (user, text) records, read by :mod:`privreg.readers`: CSV (with a
header row, or named by ``columns``), JSONL, Parquet or a mail archive (its ham
messages, one user per sender), a chunk of records at a time.

Each chunk is a DataFrame with string columns ``user`` and ``text`` (rows missing either
dropped), so reading never holds more than one chunk of strings. Values read as strings
per value (:mod:`privreg.readers`), so the rows never depend on the chunking. JSONL
lines can also be handed out unparsed (:func:`jsonl_payloads`) and parsed in a worker
(:func:`jsonl_records`). Errors name the file and the rule, never a line's number or
content.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privreg.core.errors import PrivregValueError
from privreg.plugins.ngrams.backends.base import COLUMN_HINT
from privreg.readers import (
    HAM_FOLDERS,
    Cells,
    JsonlColumns,
    jsonl_cells,
    jsonl_line_chunks,
    jsonl_parse,
    mail_chunks,
    read_chunks,
)

__all__ = ["ColumnCheck", "jsonl_payloads", "jsonl_records", "record_chunks", "records_frame"]


def records_frame(users: list[Any], texts: list[Any]) -> Any:
    """A DataFrame with object columns ``user`` and ``text``."""
    import pandas as pd

    return pd.DataFrame({"user": np.array(users, dtype=object), "text": np.array(texts, dtype=object)})


def _pairs(cells: Cells, user_column: str, text_column: str) -> tuple[list[Any], list[Any]]:
    users, texts = cells[user_column], cells[text_column]
    if None not in users and None not in texts:  # the common case: nothing to drop
        return users, texts
    kept = [(u, t) for u, t in zip(users, texts) if u is not None and t is not None]
    return [u for u, _ in kept], [t for _, t in kept]


def record_chunks(
    path: Path, fmt: str, user_column: str, text_column: str, rows: int, columns: Sequence[str] | None = None
) -> Iterator[Any]:
    """(user, text) DataFrames of the file at ``path`` in format ``fmt``, ``rows`` input
    records at a time; a mail archive gives its ham folders' messages. A missing column is
    refused before any record is read (after the last for JSONL, whose lines name their own)."""
    wanted = [user_column, text_column]
    if fmt == "mail":
        if columns is not None:
            raise PrivregValueError("columns= names the columns of a CSV file without a header row; drop it for mail")
        chunks = mail_chunks(path, wanted, folders=HAM_FOLDERS, rows=rows, hint=COLUMN_HINT)
    else:
        chunks = read_chunks(path, wanted, format=fmt, columns=columns, rows=rows, hint=COLUMN_HINT)
    return (records_frame(*_pairs(c, user_column, text_column)) for c in chunks)


def jsonl_payloads(path: Path, rows: int) -> Iterator[tuple[int, list[str]]]:
    """(number of the first line, raw lines), ``rows`` lines at a time."""
    return jsonl_line_chunks(path, rows)


def jsonl_records(
    first_line: int, lines: list[str], path: Path, user_column: str, text_column: str
) -> tuple[list[str], list[str], tuple[list[str], list[str]]]:
    """(users, texts) of the rows holding both, and (the columns some row has, some keys
    seen) for :class:`ColumnCheck`."""
    cells, seen, keys = jsonl_cells(jsonl_parse(lines, path), [user_column, text_column])
    users, texts = _pairs(cells, user_column, text_column)
    return users, texts, (seen, keys)


class ColumnCheck:
    """Whether some JSONL row had each column; raises the missing-column error at the end."""

    def __init__(self) -> None:
        self.columns = JsonlColumns()

    def update(self, seen: tuple[list[str], list[str]]) -> None:
        self.columns.update(*seen)

    def finish(self, path: Path, user_column: str, text_column: str) -> None:
        self.columns.finish(path, [user_column, text_column], hint=COLUMN_HINT)
