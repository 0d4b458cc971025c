"""Mail archives: raw RFC-822 messages in a tar file, in the SpamAssassin public corpus
layout (``<any>/<folder>/<message>``; ham folders :data:`HAM_FOLDERS`, spam folders
:data:`SPAM_FOLDERS`), read as a stream without extracting anything to disk.

The archive may be plain, gzip, bzip2 or xz (:func:`~privreg.readers.sources.open_binary`,
capped by ``--max-input-gib``); every message is cut to its first ``max_bytes`` bytes.
:func:`mail_messages` yields the raw messages; :func:`mail_chunks` reads the archive as a
table with the columns :data:`MAIL_COLUMNS`: ``name`` (the member), ``folder``, ``label``
(``ham`` or ``spam``), ``user_id`` (a pseudonym of the ``From:`` address, never the
address: ``sender-`` and 12 hex digits of its SHA-256) and ``text`` (the text/plain body,
with quoted ``>`` lines, the signature after ``-- `` and URLs dropped).
"""

from __future__ import annotations

import email
import email.message
import email.policy
import hashlib
import lzma
import re
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.files import file_error
from privreg.readers.columns import require_columns
from privreg.readers.sources import check_file, open_binary

__all__ = [
    "HAM_FOLDERS",
    "SPAM_FOLDERS",
    "MAIL_FOLDERS",
    "MAIL_COLUMNS",
    "MAX_MESSAGE_BYTES",
    "MailMessage",
    "mail_messages",
    "parse_message",
    "message_sender",
    "message_text",
    "mail_chunks",
]

HAM_FOLDERS = ("easy-ham-1", "easy-ham-2", "hard-ham-1")
SPAM_FOLDERS = ("spam-1", "spam-2")
MAIL_FOLDERS = HAM_FOLDERS + SPAM_FOLDERS
#: The columns of a mail archive read as a table.
MAIL_COLUMNS = ("name", "folder", "label", "user_id", "text")
#: Default cut of every message (the largest message of the SpamAssassin corpus is 294 KiB).
MAX_MESSAGE_BYTES = 1 << 20
_URL = re.compile(r"\S*://\S+")
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


@attrs.frozen(kw_only=True)
class MailMessage:
    """One message: its member ``name`` in the archive, its ``folder`` and its first
    ``max_bytes`` bytes ``raw``."""

    name: str
    folder: str
    raw: bytes = attrs.field(repr=False)


def mail_messages(
    path: str | Path,
    *,
    folders: Sequence[str] = MAIL_FOLDERS,
    max_bytes: int = MAX_MESSAGE_BYTES,
    what: str = "input",
    hint: str = "pass a tar archive of mail folders (e.g. spamassassin.tar.gz)",
) -> Iterator[MailMessage]:
    """Every message of the archive at ``path`` whose folder (the member's parent) is in
    ``folders``, in archive order, cut to its first ``max_bytes`` bytes. Memory: one
    message. Nothing is extracted to disk."""
    max_bytes = v.check_int("max_bytes", max_bytes, minimum=1)
    p = check_file(path, what, hint)
    keep = frozenset(folders)
    try:
        with open_binary(p, what) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
            for member in tar:
                parts = member.name.split("/")
                if not member.isfile() or len(parts) < 2 or parts[-2] not in keep:
                    continue
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                yield MailMessage(name=member.name, folder=parts[-2], raw=fh.read(max_bytes))
    except (PermissionError, FileNotFoundError, IsADirectoryError) as exc:  # the file itself, not its format
        raise file_error(exc, p, what) from None
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
        # tarfile's and the decompressors' messages name the rule, not the content
        raise PrivregValueError(f"{what} {str(p)!r} is not a readable tar archive: {exc}") from None


def parse_message(raw: bytes) -> email.message.Message:
    """``raw`` parsed leniently (``compat32``, as the 2002 corpus needs)."""
    return email.message_from_bytes(raw, policy=email.policy.compat32)


def message_sender(msg: email.message.Message) -> str | None:
    """A pseudonym of the message's ``From:`` address (``sender-`` and 12 hex digits of
    the SHA-256 of the lower-cased address), or None without an address."""
    found = _ADDRESS.search(str(msg.get("From", "") or ""))
    if not found:
        return None
    return "sender-" + hashlib.sha256(found.group(0).lower().encode()).hexdigest()[:12]


def message_text(msg: email.message.Message) -> str:
    """The text/plain parts of the message as one line of text: quoted ``>`` lines, the
    signature after ``-- `` and URLs dropped, runs of white space made one space."""
    parts = []
    for part in msg.walk() if msg.is_multipart() else [msg]:
        if part.get_content_type() != "text/plain":
            continue
        try:
            payload = part.get_payload(decode=True) or b""
        except Exception:  # noqa: BLE001, S112 -- skip parts with malformed transfer encodings (2002 corpus)
            continue
        if not isinstance(payload, bytes):  # decode=True gives bytes for a text/plain part
            continue
        parts.append(payload.decode(part.get_content_charset() or "latin-1", errors="replace"))
    lines = []
    for line in "\n".join(parts).splitlines():
        if line.startswith("-- "):
            break  # signature
        if line.lstrip().startswith(">"):
            continue  # quoted text of someone else
        lines.append(_URL.sub(" ", line))
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def _row(m: MailMessage, want: frozenset[str]) -> dict[str, str | None]:
    row: dict[str, str | None] = {
        "name": m.name,
        "folder": m.folder,
        "label": "spam" if m.folder in SPAM_FOLDERS else "ham",
    }
    if "user_id" in want or "text" in want:
        msg = parse_message(m.raw)
        row["user_id"] = message_sender(msg)
        row["text"] = message_text(msg) or None
    return row


def mail_chunks(
    path: str | Path,
    wanted: Sequence[str] | None = None,
    *,
    folders: Sequence[str] = MAIL_FOLDERS,
    max_bytes: int = MAX_MESSAGE_BYTES,
    rows: int = 10_000,
    what: str = "input",
    hint: str = "",
) -> Iterator[dict[str, list[str | None]]]:
    """The archive as a table (:data:`MAIL_COLUMNS`): the cells of the columns
    ``wanted`` (default: all), ``rows`` messages at a time (one empty chunk for an
    archive without messages). A message without a sender
    has no ``user_id``, one without a text/plain body no ``text`` (both None)."""
    p = check_file(path, what)
    want = list(MAIL_COLUMNS if wanted is None else wanted)
    require_columns(want, MAIL_COLUMNS, p, what=what, hint=hint, header_row=False)
    return _chunks(p, want, folders, max_bytes, v.check_count("rows", rows), what)


def _chunks(
    path: Path, want: list[str], folders: Sequence[str], max_bytes: int, rows: int, what: str
) -> Iterator[dict[str, list[str | None]]]:
    fields = list(dict.fromkeys(want))
    cells: dict[str, list[str | None]] = {c: [] for c in fields}
    count, chunks = 0, 0
    for m in mail_messages(path, folders=folders, max_bytes=max_bytes, what=what):
        row = _row(m, frozenset(fields))
        for c in fields:
            cells[c].append(row[c])
        count += 1
        if count == rows:
            yield cells
            cells, count, chunks = {c: [] for c in fields}, 0, chunks + 1
    if count or not chunks:  # no message: one empty chunk, so the caller still learns the columns
        yield cells
