"""JSON lines files: one JSON object per line (any compression of :mod:`.sources`).

A line's keys are its column names. A value reads as the string the caller sees, per
value (so the rows never depend on the chunking): strings as they are, numbers and
booleans by ``str``, null and NaN as missing (None); arrays and objects are refused. A key
absent from a line is missing there; a wanted key absent from every line is an error
naming it and the keys seen. Blank lines are skipped. Errors name the file and the rule,
never a line's content (nor its number, unless the caller asks for it).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from privreg.core import jsontext
from privreg.core.errors import PrivregValueError
from privreg.core.validation import MAX_COLUMNS
from privreg.readers.columns import missing_columns_error
from privreg.readers.sources import check_file, open_text, reading_input

__all__ = [
    "jsonl_line_chunks",
    "jsonl_parse",
    "jsonl_cells",
    "JsonlColumns",
    "jsonl_chunks",
    "jsonl_objects",
    "json_cell",
]

#: The deepest nesting read: an object of arrays or objects (refused as cells, but read
#: whole by callers such as the party inputs).
_DEPTH = 16
#: At most this many distinct keys are kept for the missing-column error.
_KEYS_KEPT = 1000


def json_cell(value: Any, column: str) -> str | None:
    """A JSON value as the string a table cell holds (None: missing)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, dict)):
        raise PrivregValueError(
            f"column {column!r} holds a JSON {'array' if isinstance(value, list) else 'object'}; columns "
            f"must hold strings or numbers (flatten the input first)"
        )
    return str(value)


def jsonl_line_chunks(path: str | Path, rows: int, *, what: str = "input") -> Iterator[tuple[int, list[str]]]:
    """(number of the first line, raw lines), ``rows`` lines at a time: the unparsed
    payload a worker process can parse (:func:`jsonl_parse`)."""
    p = Path(path)
    lineno = 1
    with reading_input(p, what), open_text(p, what) as fh:
        while True:
            lines = list(itertools.islice(fh, rows))
            if not lines:
                return
            yield lineno, lines
            lineno += len(lines)


def _not_object(path: Path, what: str, lineno: int | None) -> PrivregValueError:
    where = f"line {lineno} of {what} {str(path)!r}" if lineno is not None else f"{what} {str(path)!r} has a line that"
    return PrivregValueError(f"{where} is not a JSON object; JSONL input needs one object per line")


_KEY = re.compile(r'"(?:[^"\\]|\\.)*"\s*:')


def _check_fields(line: str, path: Path, what: str) -> None:
    """Refuse a line with more than MAX_COLUMNS keys before it is parsed (a 64 MiB line of
    millions of keys would take gigabytes as a dict). A colon count bounds the keys from
    above; only a line above the cap by that bound has its keys counted, by a regex."""
    if line.count(":") > MAX_COLUMNS and sum(1 for _ in _KEY.finditer(line)) > MAX_COLUMNS:
        raise PrivregValueError(
            f"{what} {str(path)!r} has a line with more than {MAX_COLUMNS} keys, more than a table may have; keep "
            f"only the keys the analysis needs"
        )


def jsonl_parse(lines: list[str], path: Path, what: str = "input") -> list[dict[str, Any]]:
    """The JSON object of each non-blank line, parsed line by line (a whole-chunk parse
    would accept a value split over two lines); the first line that is not an object is
    refused without its number or content."""
    out: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        _check_fields(line, path, what)
        try:
            obj = jsontext.loads(line, f"{what} {str(path)!r}: a line", max_depth=_DEPTH)
        except PrivregValueError:
            raise
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise _not_object(path, what, None)
        out.append(obj)
    return out


class JsonlColumns:
    """The columns some line had, and keys seen (at most 1000), across chunks;
    :meth:`finish` raises the missing-column error (when the file had any line)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.keys: set[str] = set()

    def update(self, seen: Sequence[str], keys: Sequence[str]) -> None:
        self.seen.update(seen)
        for key in keys:  # at most _KEYS_KEPT, however many keys a line has
            if len(self.keys) >= _KEYS_KEPT:
                break
            self.keys.add(key)

    def finish(self, path: Path, wanted: Sequence[str], *, what: str = "input", hint: str = "") -> None:
        missing = [c for c in dict.fromkeys(wanted) if c not in self.seen]
        if self.keys and missing:
            raise missing_columns_error(missing, sorted(self.keys), path, what=what, hint=hint, header_row=False)


def jsonl_cells(
    objs: list[dict[str, Any]], wanted: Sequence[str]
) -> tuple[dict[str, list[str | None]], list[str], list[str]]:
    """``{name: cells}`` of the ``wanted`` keys of ``objs`` (:func:`json_cell`), the
    wanted keys some object has, and some keys seen (for :class:`JsonlColumns`)."""
    cells = {c: [v if type(v) is str else json_cell(v, c) for v in (o.get(c) for o in objs)] for c in wanted}
    seen = [c for c in wanted if any(c in o for o in objs)]
    keys: list[str] = []
    if len(seen) < len(set(wanted)):
        for obj in objs[:100]:
            keys.extend(itertools.islice(obj, _KEYS_KEPT))
    return cells, seen, keys


def jsonl_chunks(
    path: str | Path,
    wanted: Sequence[str] | None = None,
    *,
    rows: int = 10_000,
    what: str = "input",
    hint: str = "",
) -> Iterator[dict[str, list[str | None]]]:
    """The cells of the keys ``wanted`` (default: the keys of the first object),
    ``rows`` lines at a time, as ``{name: [cell or None, ...]}`` (one empty chunk for a
    file without lines, when ``wanted`` is given). Memory: one chunk. A
    wanted key no line has is an error naming it and the keys seen, raised after the
    last chunk."""
    p = check_file(path, what)
    check = JsonlColumns()
    chunks = 0
    for _, lines in jsonl_line_chunks(p, rows, what=what):
        objs = jsonl_parse(lines, p, what)
        if wanted is None:
            if not objs:
                continue
            wanted = list(objs[0])
        cells, seen, keys = jsonl_cells(objs, wanted)
        check.update(seen, keys)
        chunks += 1
        yield cells
    check.finish(p, wanted or [], what=what, hint=hint)
    if not chunks and wanted is not None:  # no line: one empty chunk, as the other formats
        yield {c: [] for c in wanted}


def jsonl_objects(
    path: str | Path, *, what: str = "input", line_numbers: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of ``path``, one at a time. A line
    that is not a JSON object is refused, naming its number only when ``line_numbers``
    (a party's own input file, where the number helps and discloses nothing)."""
    p = check_file(path, what)
    with reading_input(p, what), open_text(p, what) as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            _check_fields(line, p, what)
            try:
                obj = jsontext.loads(line, f"{what} {str(p)!r}: a line", max_depth=_DEPTH)
            except PrivregValueError:
                raise
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                raise _not_object(p, what, no if line_numbers else None)
            yield no, obj
