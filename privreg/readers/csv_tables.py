"""CSV files, read as a stream of rows (any compression of :mod:`.sources`).

The header rule, never a guess: without ``columns`` the first row is the header and
names the columns; with ``columns`` (CLI ``--columns a,b,c``) the file has no header
row, every row is a record and ``columns`` names its cells in order -- and a first row
equal to ``columns`` is refused (the file has a header after all).

Cells are strings as written (not stripped); an empty cell, or a cell missing from a
short row, is missing (None). A row longer than the names is refused unless its extra
cells are empty (trailing commas). Lines without any cell are skipped. Errors name the
file and the rule, never a row's content or number.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path

from privreg.core.errors import PrivregValueError
from privreg.readers.columns import check_columns_given, header_names, names_option, require_columns
from privreg.readers.sources import check_file, open_text, reading_input

__all__ = ["FIELD_LIMIT", "csv_rows", "csv_names", "csv_chunks"]

#: The longest cell read, in characters (Python's csv module refuses longer ones).
FIELD_LIMIT = 1 << 26


@contextlib.contextmanager
def _reader(path: Path, what: str) -> Iterator[Iterator[list[str]]]:
    """``csv.reader`` over ``path``; in the block, unreadable files and malformed CSV
    become one-line errors naming ``what`` and the path."""
    # the default limit, 128 KiB a cell, is below some texts; one chunk still bounds memory
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))
    with reading_input(path, what), open_text(path, what, newline="") as fh:
        try:
            yield csv.reader(fh, strict=True)  # an unterminated quote is an error, not the rest of the file
        except csv.Error as exc:  # e.g. "line contains NUL": the rule, not the content
            raise PrivregValueError(
                f"{what} {str(path)!r} is not a readable CSV file ({exc}); check the file"
            ) from None


def csv_rows(path: str | Path, *, what: str = "input") -> Generator[list[str], None, None]:
    """Every row of the CSV file at ``path`` as a list of strings, one at a time (the
    header too); unreadable files and malformed CSV give one-line errors naming
    ``what`` and the path."""
    with _reader(Path(path), what) as rows:
        yield from rows


def csv_names(
    path: str | Path, *, columns: Sequence[str] | None = None, what: str = "input", param: str = "columns"
) -> list[str]:
    """The column names of ``path``: its header row, or ``columns`` for a file without one
    (``param``: the caller's name for ``columns``, for messages)."""
    p = check_file(path, what)
    if columns is not None:
        return check_columns_given(columns, param=param)
    rows = csv_rows(p, what=what)
    try:
        return _header(next(rows, None), p, what, param)
    finally:
        rows.close()


def _header(first: list[str] | None, path: Path, what: str, param: str) -> list[str]:
    if first is None:
        raise PrivregValueError(
            f"{what} {str(path)!r} is empty; it needs a header row naming its columns, or records and "
            f"{names_option(param)} naming them"
        )
    return header_names(first, path, what, param=param)


def csv_chunks(
    path: str | Path,
    wanted: Sequence[str] | None = None,
    *,
    columns: Sequence[str] | None = None,
    rows: int = 10_000,
    what: str = "input",
    hint: str = "",
    param: str = "columns",
) -> Iterator[dict[str, list[str | None]]]:
    """The cells of the columns ``wanted`` (default: all), ``rows`` records at a time, as
    ``{name: [cell or None, ...]}`` in ``wanted``'s order (one empty chunk for a file
    without records). Memory: one chunk. A wanted column the file lacks is an error
    naming it and the file's columns (and ``hint``) before any row is read. ``param`` is
    the caller's name for ``columns``, for messages."""
    p = check_file(path, what)
    stack = contextlib.ExitStack()
    try:
        it = stack.enter_context(_reader(p, what))
        if columns is None:
            names = _header(next(it, None), p, what, param)
        else:
            names = check_columns_given(columns, param=param)
        want = list(names if wanted is None else wanted)
        require_columns(want, names, p, what=what, hint=hint, param=param)
    except BaseException as exc:  # through the reader's exit: a read error becomes one line
        stack.__exit__(type(exc), exc, exc.__traceback__)
        raise
    return _chunks(stack, it, names, want, param if columns is not None else None, rows, p, what)


def _chunks(
    stack: contextlib.ExitStack,
    it: Iterator[list[str]],
    names: list[str],
    want: list[str],
    given: str | None,
    rows: int,
    path: Path,
    what: str,
) -> Iterator[dict[str, list[str | None]]]:
    with stack:  # the file's errors, raised while reading, become one-line errors
        yield from _blocks(it, names, want, given, rows, path, what)


def _blocks(
    it: Iterator[list[str]], names: list[str], want: list[str], given: str | None, rows: int, path: Path, what: str
) -> Iterator[dict[str, list[str | None]]]:
    position = {c: j for j, c in enumerate(names)}  # a dict, not names.index: linear in wide files
    idx = [position[c] for c in want]
    width = len(names)
    first = True
    while True:
        block = list(itertools.islice(it, rows))
        if not block:
            if first:  # no record: one empty chunk, so the caller still learns the columns
                yield {c: [] for c in want}
            return
        if first and given and [c.strip() for c in block[0]] == names:
            raise PrivregValueError(
                f"{what} {str(path)!r} starts with a header row naming the columns given; "
                f"{names_option(given)} is for files without one: drop it"
            )
        first = False
        records = [row for row in block if row]
        if set(map(len, records)) - {width}:  # ragged rows: the slow path
            for row in records:
                if len(row) > width and any(c.strip() for c in row[width:]):
                    names_of = f"the names of {given}=" if given else "its header row"
                    raise PrivregValueError(
                        f"{what} {str(path)!r} has a row with more cells than the {width} of {names_of}; "
                        f"quote cells holding commas, or name every column"
                    )
            records = [row if len(row) >= width else row + [""] * (width - len(row)) for row in records]
        cells = [[row[j] or None for row in records] for j in idx]
        yield dict(zip(want, cells))
