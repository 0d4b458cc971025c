"""An append-only, tamper-evident privacy ledger in SQLite.

One row per charged release: time, mechanism, parameters, event JSON, caller label and
the randomness used. Rows form a hash chain: ``hash = sha256(prev_hash + canonical row)``,
the first ``prev_hash`` being a hash of the ledger's metadata (budget included), so editing,
reordering or deleting a row, or changing the budget, breaks the chain at that row.

Durability: WAL journal with ``synchronous=FULL``; a charge is one transaction, so a crash
leaves either the whole row or nothing. Concurrency: writers serialise through SQLite's
lock (``BEGIN IMMEDIATE``), across threads and processes.

Caveat: a hash chain cannot reveal that the *last* rows were removed. Keep :meth:`Ledger.head`
(seq and hash of the last row) somewhere the ledger's writer cannot change, and compare.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from privreg.accountant.base import Accountant
from privreg.core.charging import Charge, jsonable
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.events import event_from_json

__all__ = ["Ledger", "LedgerRow", "LedgerIntegrityError", "GENESIS_TAG"]

GENESIS_TAG = "privreg-ledger-v1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY,
    timestamp REAL NOT NULL,
    mechanism TEXT NOT NULL,
    parameters TEXT NOT NULL,
    event TEXT NOT NULL,
    label TEXT NOT NULL,
    randomness TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE
);
"""


class LedgerIntegrityError(PrivregError):
    """The ledger's hash chain is broken or a row cannot be decoded."""


def _dumps(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _row_hash(prev_hash: str, seq: int, timestamp: float, mechanism: str, parameters: str,
              event: str, label: str, randomness: str) -> str:
    body = _dumps([seq, repr(timestamp), mechanism, parameters, event, label, randomness])
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


@attrs.frozen(kw_only=True)
class LedgerRow:
    """A stored charge with its position and hashes."""

    seq: int
    charge: Charge
    prev_hash: str
    hash: str


class Ledger:
    """The SQLite ledger at ``path`` (``":memory:"`` for a private, unpersisted one)."""

    def __init__(self, path: str | Path, *, meta: Mapping[str, Any] | None = None, create: bool = True) -> None:
        self.path = str(path)
        if self.path != ":memory:" and not create and not Path(self.path).is_file():
            raise PrivregValueError(f"ledger {self.path!r} does not exist")
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout = 60000")
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        with self.transaction():
            for stmt in filter(str.strip, _SCHEMA.split(";")):
                self._db.execute(stmt)
            stored = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            if not stored:
                if meta is None:
                    raise PrivregValueError(f"ledger {self.path!r} is new: pass its metadata (budget)")
                for key, value in meta.items():
                    self._db.execute("INSERT INTO meta VALUES (?, ?)", (key, _dumps(value)))
        self.meta = {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: the caller holds the write lock until it ends."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def genesis(self) -> str:
        """The prev_hash of the first row: a hash of the metadata."""
        return hashlib.sha256((GENESIS_TAG + _dumps(self.meta)).encode("utf-8")).hexdigest()

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row; (0, genesis) when empty."""
        row = self._db.execute("SELECT seq, hash FROM charges ORDER BY seq DESC LIMIT 1").fetchone()
        return (0, self.genesis()) if row is None else (int(row[0]), str(row[1]))

    def append(self, charge: Charge) -> LedgerRow:
        """Append a charge. Call inside :meth:`transaction` so the check that preceded it
        and the append are one atomic step."""
        seq, prev = self.head()
        fields = (
            float(charge.timestamp), charge.mechanism, _dumps(jsonable(charge.parameters)),
            charge.event.to_json(), charge.label, _dumps(jsonable(charge.randomness)),
        )
        digest = _row_hash(prev, seq + 1, *fields)
        self._db.execute("INSERT INTO charges VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (seq + 1, *fields, prev, digest))
        return LedgerRow(seq=seq + 1, charge=charge, prev_hash=prev, hash=digest)

    def try_append(self, charge: Charge, *, expected_seq: int) -> LedgerRow | None:
        """Append ``charge`` if the head is still row ``expected_seq``; None otherwise."""
        with self.transaction():
            if self.head()[0] != expected_seq:
                return None
            return self.append(charge)

    def rows(self, *, after: int = 0, verify: bool = True) -> list[LedgerRow]:
        """Rows with seq > ``after``, in order. With ``verify``, a broken chain raises."""
        cur = self._db.execute("SELECT * FROM charges WHERE seq > ? ORDER BY seq", (after,))
        raw = cur.fetchall()
        if verify:
            prev = self.genesis() if after == 0 else self._hash_at(after)
            problems = self._check(raw, prev, after)
            if problems:
                raise LedgerIntegrityError(f"ledger {self.path!r}: {problems[0]}")
        return [self._decode(r) for r in raw]

    def replay(self, accountant: Accountant) -> Accountant:
        """Compose every charged event, in order, into ``accountant`` (after verifying the
        chain); returns it. Raises UnsupportedEventError if it cannot take some event."""
        for row in self.rows():
            accountant.compose(row.charge.event)
        return accountant

    def _hash_at(self, seq: int) -> str:
        row = self._db.execute("SELECT hash FROM charges WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            raise LedgerIntegrityError(f"ledger {self.path!r}: row {seq} is missing")
        return str(row[0])

    @staticmethod
    def _check(raw: list[tuple[Any, ...]], prev: str, after: int) -> list[str]:
        problems = []
        expected_seq = after
        for seq, ts, mech, params, event, label, rnd, prev_hash, digest in raw:
            expected_seq += 1
            if seq != expected_seq:
                problems.append(f"row {expected_seq} is missing (next row is {seq})")
                expected_seq = seq
            if prev_hash != prev:
                problems.append(f"row {seq}: prev_hash does not match the previous row's hash")
            if _row_hash(prev_hash, seq, ts, mech, params, event, label, rnd) != digest:
                problems.append(f"row {seq}: contents do not match its hash (edited)")
            prev = digest
        return problems

    def verify(self) -> list[str]:
        """Every integrity problem found (empty list: the chain is intact)."""
        raw = self._db.execute("SELECT * FROM charges ORDER BY seq").fetchall()
        return self._check(raw, self.genesis(), 0)

    def _decode(self, r: tuple[Any, ...]) -> LedgerRow:
        seq, ts, mech, params, event, label, rnd, prev_hash, digest = r
        try:
            charge = Charge(timestamp=ts, mechanism=mech, parameters=json.loads(params),
                            event=event_from_json(event), label=label, randomness=json.loads(rnd))
        except (ValueError, TypeError) as exc:
            raise LedgerIntegrityError(f"ledger {self.path!r}: row {seq} cannot be decoded: {exc}") from exc
        return LedgerRow(seq=seq, charge=charge, prev_hash=prev_hash, hash=digest)
