"""A tokenized corpus split by user into partitions, held in memory or in temporary files.

DPNE makes one pass over the corpus per n-gram length. To keep memory bounded by a
partition rather than by the corpus, :class:`PartitionedCorpus` stores the token ids in
``P`` partitions: every record goes to partition ``tag(user) mod P`` (``tag`` the 64-bit
SipHash of the user id string, :func:`privreg.plugins.ngrams.backends.tokens.string_tags`), so *all*
records of a user land in the same partition whatever the order of the input -- input
grouped by user or not, per-user contribution bounding within a partition is exact, and
a pass processes one partition at a time and merges the per-partition count tables
(exact integer sums). The vocabulary (token id -> string) is the one structure shared by
all partitions; it grows with distinct tokens only.

Layout of a partition (:class:`PartitionArrays`): ``tokens`` (int32 token ids, the record
separator ``-1`` after every record, so an n-gram starting at ``p`` lies inside a record
iff none of ``tokens[p:p+k]`` is ``-1``), ``user`` (int32 dense user index of every slot,
exact: from the user id strings, not from their hashes), ``users`` (the id string of each
dense user: the content the choice of a heavy user's kept keys reads) and ``user_tags``
(uint64 tag of each dense user). Partitions built from a file are written while the file is streamed,
then finalised one at a time into ``.npy`` files; per-pass state (e.g. the positions of
surviving (k-1)-grams) goes to the same directory.
"""

from __future__ import annotations

import math
import os
import shutil
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.files import make_temp_dir, sweep_temp_dirs
from privreg.plugins.ngrams.backends.base import Tokenizer, check_path
from privreg.plugins.ngrams.backends.local import CHUNK_RECORDS, LocalBackend
from privreg.plugins.ngrams.backends.tokens import TokenChunk, TokenCorpus, Vocabulary, string_tags
from privreg.readers import compression

__all__ = ["PartitionArrays", "Partition", "PartitionedCorpus", "SEPARATOR", "PARTITION_BYTES"]

#: Token id marking the end of a record.
SEPARATOR = -1
#: Default input bytes per partition when reading a file (memory per pass scales with it).
PARTITION_BYTES = 8 << 20


@attrs.frozen(kw_only=True)
class PartitionArrays:
    """The records of one partition (see the module docstring)."""

    tokens: np.ndarray
    user: np.ndarray
    users: np.ndarray
    user_tags: np.ndarray


class Partition:
    """One partition: arrays and per-pass state in memory (``directory`` None) or as
    ``.npy`` files in ``directory``."""

    def __init__(
        self, *, index: int, directory: Path | None = None, arrays: PartitionArrays | None = None, tokens: int = 0
    ) -> None:
        if (directory is None) == (arrays is None):
            raise PrivregValueError("a partition lives either in memory (arrays) or on disk (directory)")
        self.index = index
        self.directory = directory
        self.tokens = tokens
        self._arrays = arrays
        self._state: dict[str, dict[str, np.ndarray]] = {}

    def load(self) -> PartitionArrays:
        if self._arrays is not None:
            return self._arrays
        d = self.directory
        if d is None:  # __init__ requires arrays or directory
            raise PrivregValueError("a partition lives either in memory (arrays) or on disk (directory)")
        return PartitionArrays(
            tokens=np.load(d / "tokens.npy"),
            user=np.load(d / "user.npy"),
            users=_load_strings(d / "user_names"),
            user_tags=np.load(d / "user_tags.npy"),
        )

    def save_state(self, name: str, **arrays: np.ndarray) -> None:
        if self.directory is None:
            self._state[name] = dict(arrays)
            return
        for key, arr in arrays.items():
            np.save(self.directory / f"{name}.{key}.npy", arr)

    def load_state(self, name: str, *keys: str) -> tuple[np.ndarray, ...]:
        if self.directory is None:
            if name not in self._state:
                raise PrivregValueError(f"partition {self.index} has no state {name!r}")
            return tuple(self._state[name][k] for k in keys)
        try:
            return tuple(np.load(self.directory / f"{name}.{k}.npy") for k in keys)
        except FileNotFoundError:
            raise PrivregValueError(f"partition {self.index} has no state {name!r}") from None

    def __getstate__(self) -> dict[str, Any]:  # sent to worker processes: disk partitions only
        if self.directory is None:
            raise PrivregValueError("only partitions on disk can be processed in worker processes")
        return self.__dict__


def _save_strings(stem: Path, values: Sequence[str]) -> None:
    """Strings as ``<stem>.bin`` (UTF-8, concatenated) and ``<stem>.ends.npy`` (no pickle)."""
    encoded = [x.encode("utf-8", "surrogatepass") for x in values]
    Path(f"{stem}.bin").write_bytes(b"".join(encoded))
    np.save(f"{stem}.ends.npy", np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))))


def _load_strings(stem: Path) -> np.ndarray:
    blob = Path(f"{stem}.bin").read_bytes()
    ends = np.load(f"{stem}.ends.npy").tolist()
    starts = [0, *ends[:-1]]
    return np.array([blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends)], dtype=object)


def _with_separators(tokens: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens with SEPARATOR after each record, and the slot where each record starts."""
    total = int(tokens.size + lengths.size)
    out = np.full(total, SEPARATOR, dtype=np.int32)
    starts = np.cumsum(lengths + 1) - (lengths + 1)
    record = np.repeat(np.arange(lengths.size), lengths)
    within = np.arange(tokens.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[starts[record] + within] = tokens
    return out, starts


class _PartitionWriter:
    """Appends records to one partition's raw files while the input is streamed."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.tokens = 0
        self._tok = open(directory / "tokens.i32", "ab")  # noqa: SIM115 - closed in finish()
        self._ulen = open(directory / "users.len", "ab")  # noqa: SIM115
        self._ubin = open(directory / "users.bin", "ab")  # noqa: SIM115

    def append(self, slots: np.ndarray, users: list[str]) -> None:
        slots.astype(np.int32, copy=False).tofile(self._tok)
        encoded = [u.encode("utf-8", "surrogatepass") for u in users]  # JSON may hold lone surrogates
        np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)).tofile(self._ulen)
        self._ubin.write(b"".join(encoded))
        self.tokens += int(slots.size) - len(users)

    def close(self) -> None:
        for fh in (self._tok, self._ulen, self._ubin):
            fh.close()

    def finish(self, index: int) -> Partition:
        """Close the raw files and convert them to the partition's arrays."""
        import pandas as pd

        self.close()
        d = self.directory
        tokens = np.fromfile(d / "tokens.i32", dtype=np.int32)
        lens = np.fromfile(d / "users.len", dtype=np.int64)
        blob = (d / "users.bin").read_bytes()
        ends = np.cumsum(lens).tolist()
        names = [blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip([0] + ends[:-1], ends)]
        codes, uniques = pd.factorize(np.array(names, dtype=object))
        seps = np.flatnonzero(tokens == SEPARATOR)
        slots_per_record = np.diff(np.r_[-1, seps])
        np.save(d / "tokens.npy", tokens)
        np.save(d / "user.npy", np.repeat(codes.astype(np.int32), slots_per_record))
        np.save(d / "user_tags.npy", string_tags(np.asarray(uniques, dtype=object)))
        for name in ("tokens.i32", "users.len", "users.bin"):
            os.remove(d / name)
        _save_strings(d / "user_names", [str(u) for u in uniques])
        return Partition(index=index, directory=d, tokens=self.tokens)


class PartitionedCorpus:
    """Token ids of a multi-user corpus in user partitions (see the module docstring).

    ``vocab[id]`` is the token string of id ``id``;
    ``partitions`` hold the records. Use as a context manager (or call :meth:`close`) to
    delete the temporary directory of a corpus built from a file."""

    def __init__(self, *, vocab: np.ndarray, partitions: list[Partition], tmp: Path | None = None) -> None:
        self.vocab = np.asarray(vocab, dtype=object)
        self.partitions = partitions
        self.tokens_total = int(sum(p.tokens for p in partitions))
        # temporary files go when the corpus is closed, collected or the interpreter exits
        self._cleanup = weakref.finalize(self, shutil.rmtree, tmp, True) if tmp is not None else None

    @property
    def on_disk(self) -> bool:
        return any(p.directory is not None for p in self.partitions)

    def close(self) -> None:
        """Delete the temporary files (a no-op for a corpus in memory)."""
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None

    def __enter__(self) -> PartitionedCorpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_corpus(cls, corpus: TokenCorpus, *, partitions: int = 1) -> PartitionedCorpus:
        """An in-memory TokenCorpus, split into ``partitions`` user partitions in memory
        (more partitions: smaller working arrays per pass)."""
        if not isinstance(corpus, TokenCorpus):
            raise PrivregTypeError(f"corpus must be a TokenCorpus; got {type(corpus).__name__}")
        n_parts = v.check_count("partitions", partitions)
        tags = corpus.user_tags
        part_of_user = (tags % np.uint64(n_parts)).astype(np.int64)
        n = corpus.size
        is_last = np.zeros(n, dtype=bool)
        if n:
            is_last[corpus.record_end[corpus.record_end > 0] - 1] = True
        part_of_token = part_of_user[corpus.user]
        out = []
        for index in range(n_parts):
            idx = np.flatnonzero(part_of_token == index) if n_parts > 1 else np.arange(n)
            users, local = np.unique(corpus.user[idx], return_inverse=True)
            last = is_last[idx]
            at = np.arange(idx.size) + np.cumsum(last) - last  # slot of each token
            tokens = np.full(idx.size + int(last.sum()), SEPARATOR, dtype=np.int32)
            tokens[at] = corpus.tokens[idx]
            user = np.empty(tokens.size, dtype=np.int32)
            user[at] = local
            user[at[last] + 1] = local[last]
            arrays = PartitionArrays(tokens=tokens, user=user, users=corpus.users[users], user_tags=tags[users])
            out.append(Partition(index=index, arrays=arrays, tokens=int(idx.size)))
        return cls(vocab=corpus.vocab, partitions=out)

    @classmethod
    def from_chunks(
        cls,
        chunks: Iterable[TokenChunk],
        vocabulary: Vocabulary,
        *,
        partitions: int,
        directory: str | Path | None = None,
    ) -> PartitionedCorpus:
        """Stream tokenized chunks into ``partitions`` partitions on disk (under a new
        temporary directory ``privreg-ngrams.<pid>.*`` inside ``directory``, default the
        system's; folders left there by killed runs are swept first). Memory: one chunk
        plus the vocabulary."""
        n_parts = v.check_count("partitions", partitions)
        sweep_temp_dirs(directory)  # folders of runs that were killed
        tmp = make_temp_dir("ngrams", directory)
        writers: list[_PartitionWriter] = []
        try:
            writers = [_PartitionWriter(tmp / f"part-{i:04d}") for i in range(n_parts)]
            for chunk in chunks:
                if chunk.lengths.size == 0:
                    continue
                slots, starts = _with_separators(chunk.tokens, chunk.lengths)
                part = (string_tags(chunk.users) % np.uint64(n_parts)).astype(np.int64)
                order = np.argsort(part, kind="stable")
                seg = chunk.lengths[order] + 1
                gather = np.repeat(starts[order] - (np.cumsum(seg) - seg), seg) + np.arange(int(seg.sum()))
                ordered = slots[gather]
                per_part = np.bincount(part, minlength=n_parts)
                rec_bounds = np.r_[0, np.cumsum(per_part)]
                slot_bounds = np.r_[0, np.cumsum(seg)][rec_bounds]
                users = chunk.users[order].tolist()
                for i in np.flatnonzero(per_part).tolist():
                    writers[i].append(
                        ordered[slot_bounds[i] : slot_bounds[i + 1]], users[rec_bounds[i] : rec_bounds[i + 1]]
                    )
            parts = [w.finish(i) for i, w in enumerate(writers)]
        except BaseException:
            for w in writers:
                w.close()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls(vocab=vocabulary.words(), partitions=parts, tmp=tmp)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        tokenizer: Tokenizer = Tokenizer(),
        user_column: str = "user_id",
        text_column: str = "text",
        format: str | None = None,
        partitions: int | None = None,
        partition_bytes: int = PARTITION_BYTES,
        chunk_records: int = CHUNK_RECORDS,
        workers: int = 1,
        directory: str | Path | None = None,
        backend: LocalBackend | None = None,
        columns: Sequence[str] | None = None,
    ) -> PartitionedCorpus:
        """Read, tokenize and partition a CSV/JSONL/Parquet file or mail archive of
        (user, text) rows in one streaming pass (:meth:`LocalBackend.tokenize_file`;
        ``workers`` processes parse and tokenize; ``columns`` names the columns of a CSV
        file without a header row). ``partitions`` defaults to ``ceil(input bytes /
        partition_bytes)`` (compressed input counted four times its size), so memory per
        pass is about that of one ``partition_bytes`` of text whatever the file's size."""
        p = check_path(path)
        be = backend or LocalBackend()
        if partitions is None:
            size = p.stat().st_size * (4 if compression(p) else 1)
            partitions = max(1, math.ceil(size / v.check_count("partition_bytes", partition_bytes)))
        vocabulary = Vocabulary()
        chunks = be.tokenize_file(
            p,
            tokenizer=tokenizer,
            vocabulary=vocabulary,
            user_column=user_column,
            text_column=text_column,
            format=format,
            chunk_records=chunk_records,
            workers=workers,
            columns=columns,
        )
        return cls.from_chunks(chunks, vocabulary, partitions=partitions, directory=directory)
