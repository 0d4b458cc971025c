"""Parquet files, read by record batches with pyarrow (the optional extra ``parquet``).

Values read as strings by Arrow's cast, per value (numbers in their shortest round-trip
form), so the rows never depend on the batching; nulls are missing (None). Errors name
the file and the rule: Arrow's own messages may quote bytes of the file, so they are
never shown.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from privreg.core.errors import PrivregValueError
from privreg.readers.columns import require_columns
from privreg.readers.sources import check_file, reading_input

__all__ = ["PARQUET_INSTALL", "require_pyarrow", "parquet_names", "parquet_chunks"]

#: How to install what Parquet needs.
PARQUET_INSTALL = "pip install 'privreg[parquet]'"


def require_pyarrow() -> tuple[Any, Any, Any]:
    """``(pyarrow, pyarrow.compute, pyarrow.parquet)``, or an error saying how to install them."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise PrivregValueError(f"reading Parquet needs pyarrow: {PARQUET_INSTALL}") from None
    return pa, pc, pq


def _open(path: Path, what: str) -> Any:
    pa, _, pq = require_pyarrow()
    try:
        with reading_input(path, what):
            return pq.ParquetFile(path)
    except pa.ArrowInvalid:  # arrow's message may quote bytes of the file
        raise PrivregValueError(f"{what} {str(path)!r} is not a Parquet file; check the file or its format") from None


def parquet_names(path: str | Path, *, what: str = "input") -> list[str]:
    """The column names of the Parquet file at ``path`` (its schema)."""
    p = check_file(path, what)
    return list(_open(p, what).schema_arrow.names)


def parquet_chunks(
    path: str | Path,
    wanted: Sequence[str] | None = None,
    *,
    rows: int = 10_000,
    what: str = "input",
    hint: str = "",
) -> Iterator[dict[str, list[str | None]]]:
    """The cells of the columns ``wanted`` (default: all), ``rows`` records at a time, as
    ``{name: [cell or None, ...]}`` (one empty chunk for a file without records). Memory:
    one record batch. A wanted column the schema
    lacks is an error naming it and the schema's columns, before any row is read."""
    p = check_file(path, what)
    pa, pc, _ = require_pyarrow()
    pf = _open(p, what)
    names = list(pf.schema_arrow.names)
    want = list(names if wanted is None else wanted)
    require_columns(want, names, p, what=what, hint=hint, header_row=False)
    return _batches(pf, want, rows, p, what, pa, pc)


def _batches(
    pf: Any, want: list[str], rows: int, path: Path, what: str, pa: Any, pc: Any
) -> Iterator[dict[str, list[str | None]]]:
    distinct = list(dict.fromkeys(want))
    batches = pf.iter_batches(batch_size=rows, columns=distinct)
    first = True
    while True:
        try:
            with reading_input(path, what):
                batch = next(batches, None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise PrivregValueError(f"{what} {str(path)!r} is a damaged Parquet file; check the file") from None
        if batch is None:
            if first:  # no record: one empty chunk, so the caller still learns the columns
                yield {c: [] for c in want}
            return
        first = False
        out: dict[str, list[str | None]] = {}
        for name in distinct:
            try:  # arrow's cast is per value (pandas' would depend on the batch's nulls)
                out[name] = pc.cast(batch.column(name), pa.string()).to_pylist()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # arrow's message may quote a value
                raise PrivregValueError(f"{what} {str(path)!r}: column {name!r} must hold strings or numbers") from None
        yield {c: out[c] for c in want}
