"""Any input file as a table of string cells, whatever its format.

:func:`read_chunks` streams the cells of the wanted columns a chunk of records at a time;
:func:`read_table` collects them. The format comes from ``format``, the file's suffix or
the caller's default (:func:`~privreg.readers.sources.detect_format`); ``columns`` names
the columns of a CSV file without a header row (:mod:`.csv_tables`) and is refused for
the other formats, which name their own columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.readers.columns import names_option
from privreg.readers.csv_tables import csv_chunks
from privreg.readers.jsonl_tables import jsonl_chunks
from privreg.readers.mail import mail_chunks
from privreg.readers.parquet_tables import parquet_chunks
from privreg.readers.sources import FORMATS, check_file, detect_format

__all__ = ["CHUNK_ROWS", "Cells", "read_chunks", "read_table"]

#: Records per chunk by default.
CHUNK_ROWS = 10_000
#: A chunk: column name -> its cells (None: missing), all of one length.
Cells = dict[str, list[str | None]]


def read_chunks(
    path: str | Path,
    wanted: Sequence[str] | None = None,
    *,
    format: str | None = None,
    formats: Sequence[str] = FORMATS,
    default_format: str | None = None,
    columns: Sequence[str] | None = None,
    rows: int = CHUNK_ROWS,
    what: str = "input",
    hint: str = "",
    param: str = "columns",
) -> Iterator[Cells]:
    """The cells of the columns ``wanted`` (default: all) of the file at ``path``, ``rows``
    records at a time; a file without records gives one empty chunk (so the columns are
    known), except a JSONL file without lines when ``wanted`` is None. Memory: one chunk.
    ``formats`` are those the caller accepts; ``hint`` ends a missing-column error (the
    parameter that picks the columns); ``param`` is the caller's name for ``columns``."""
    p = check_file(path, what)
    fmt = detect_format(p, format, formats=formats, default=default_format)
    rows = v.check_count("rows", rows)
    if columns is not None and fmt != "csv":
        raise PrivregValueError(
            f"{names_option(param)} names the columns of a CSV file without a header row; {what} {str(p)!r} is "
            f"{fmt}, whose columns are named in the file: drop {param}"
        )
    if fmt == "csv":
        return csv_chunks(p, wanted, columns=columns, rows=rows, what=what, hint=hint, param=param)
    if fmt == "jsonl":
        return jsonl_chunks(p, wanted, rows=rows, what=what, hint=hint)
    if fmt == "parquet":
        return parquet_chunks(p, wanted, rows=rows, what=what, hint=hint)
    return mail_chunks(p, wanted, rows=rows, what=what, hint=hint)


def read_table(
    path: str | Path,
    wanted: Sequence[str] | None = None,
    *,
    format: str | None = None,
    formats: Sequence[str] = FORMATS,
    default_format: str | None = None,
    columns: Sequence[str] | None = None,
    what: str = "input",
    hint: str = "",
    param: str = "columns",
) -> Cells:
    """All cells of the columns ``wanted`` (default: all) as one :data:`Cells` (empty
    lists for a file without records; an empty dict when ``wanted`` is None and a
    JSONL file has no line to name its columns). See :func:`read_chunks`."""
    out: Cells = {}
    for chunk in read_chunks(
        path,
        wanted,
        format=format,
        formats=formats,
        default_format=default_format,
        columns=columns,
        what=what,
        hint=hint,
        param=param,
    ):
        for name, cells in chunk.items():
            out.setdefault(name, []).extend(cells)
    return out
