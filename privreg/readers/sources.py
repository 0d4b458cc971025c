"""Input files: the path check, the format rule and decompressed streams.

A file's format is the ``format`` given, else its suffix (:data:`FORMAT_SUFFIXES`, a
compression suffix ignored), else the caller's ``default``; an unknown suffix without a
default is an error, never a guess. Compression is read from the file's first bytes, not
its name: gzip, bzip2 and xz are decompressed as a stream, refused once they expand past
``--max-input-gib`` (:func:`~privreg.core.cost.capped_reader`).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import stat
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from privreg.core.cost import capped_reader
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.files import file_error, regular_file_error

__all__ = [
    "FORMATS",
    "FORMAT_SUFFIXES",
    "COMPRESSION_SUFFIXES",
    "check_file",
    "detect_format",
    "compression",
    "reading_input",
    "open_binary",
    "open_text",
]

#: Every format the readers know: CSV, JSON lines, Parquet and mail archives (tar).
FORMATS = ("csv", "jsonl", "parquet", "mail")
#: Suffix -> format (after dropping a compression suffix: ``x.jsonl.gz`` is JSONL).
FORMAT_SUFFIXES = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".tar": "mail",
    ".tgz": "mail",
    ".tbz2": "mail",
    ".txz": "mail",
}
#: Suffixes of compressed files (ignored by :func:`detect_format`).
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")


def check_file(path: Any, what: str = "input", hint: str = "") -> Path:
    """``path`` as an existing regular file, or an error naming ``what`` and the path (and
    ``hint``, the fix); a FIFO, a device or a socket is refused by its type."""
    if not isinstance(path, (str, os.PathLike)):
        raise PrivregTypeError(f"{what} must be a str or Path; got {type(path).__name__}")
    p = Path(path)
    if not p.is_file():  # by type, before any read: a FIFO would block, a device never end
        try:
            mode: int | None = os.stat(p).st_mode
        except (OSError, ValueError):
            mode = None
        wrong = None if mode is None or stat.S_ISDIR(mode) else regular_file_error(p, what, mode)
        if wrong is not None:
            raise PrivregValueError(str(wrong) + (f"; {hint}" if hint else ""))
        raise PrivregValueError(f"{what} {str(p)!r} is not a file" + (f"; {hint}" if hint else ""))
    return p


def detect_format(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    formats: Sequence[str] = FORMATS,
    default: str | None = None,
) -> str:
    """``format`` if given (one of ``formats``), else the format of ``path``'s suffix
    (:data:`FORMAT_SUFFIXES`; ``.gz``, ``.bz2`` and ``.xz`` ignored), else ``default``.
    A suffix naming a format outside ``formats``, or an unknown suffix without a
    ``default``, is an error."""
    allowed = tuple(formats)
    if format is not None:
        if format not in allowed:
            raise PrivregValueError(f"format must be one of {allowed}; got {format!r}")
        return format
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    found = FORMAT_SUFFIXES.get(suffixes[-1]) if suffixes else None
    if found in allowed:
        return found
    if found is None and default is not None:
        return default
    known = sorted(s for s, f in FORMAT_SUFFIXES.items() if f in allowed)
    what = f"is a {found} file by its suffix, which this does not read" if found else "has no known suffix"
    raise PrivregValueError(
        f"cannot tell the format of {str(path)!r} from its suffix: it {what}; name it {', '.join(known)}, "
        f"or pass format= one of {allowed}"
    )


@contextlib.contextmanager
def reading_input(path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Errors raised while the block reads ``path`` -- missing, a folder, no permission,
    not UTF-8, truncated or damaged compression -- become one line naming ``what`` and
    the path, never the content."""
    try:
        yield
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise file_error(exc, path, what, doing="read") from None
    except (zlib.error, lzma.LZMAError):
        raise PrivregValueError(
            f"{what} {str(path)!r} is damaged (its compressed data do not decompress); check the file or copy it again"
        ) from None


_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
)


def compression(path: str | os.PathLike[str], what: str = "input") -> str | None:
    """``"gzip"``, ``"bz2"`` or ``"xz"`` from the file's first bytes; None for anything
    else. bzip2 needs its whole 10-byte signature, so a text file starting with "BZh"
    still reads as text. An unreadable file is a one-line error naming ``what``."""
    with reading_input(path, what), open(path, "rb") as fh:
        head = fh.read(10)
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    level_ok = head[3:4] in (b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9")
    # then a block, or the end of an empty stream
    if head[:3] == b"BZh" and level_ok and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bz2"
    return None


def open_binary(path: str | os.PathLike[str], what: str = "input", *, lines: bool = False) -> IO[bytes]:
    """A binary stream of ``path``'s content, decompressed (:func:`compression`) through
    :func:`~privreg.core.cost.capped_reader`; ``lines`` (text): with its line cap and
    row count too, also for a plain file. Use inside :func:`reading_input` (with the
    same ``what``)."""
    kind = compression(path, what)
    name = repr(os.fspath(path))
    if kind == "gzip":
        return capped_reader(gzip.open(path, "rb"), name, lines=lines)
    if kind == "bz2":
        return capped_reader(bz2.open(path, "rb"), name, lines=lines)
    if kind == "xz":
        return capped_reader(lzma.open(path, "rb"), name, lines=lines)
    if lines:
        return capped_reader(open(path, "rb"), name, lines=True, compressed=False)
    return open(path, "rb")


def open_text(path: str | os.PathLike[str], what: str = "input", *, newline: str | None = None) -> IO[str]:
    """A UTF-8 text stream of ``path``'s (decompressed) content, a leading byte-order
    mark dropped (spreadsheets write one; it is not part of the first name); ``newline``
    as :func:`open` (``""`` for CSV). Lines are capped and counted (:func:`open_binary`
    with ``lines``). Use inside :func:`reading_input` (same ``what``)."""
    return io.TextIOWrapper(open_binary(path, what, lines=True), encoding="utf-8-sig", newline=newline)
