"""A ledger held in this process's memory: what a session with ``ledger=":memory:"`` uses.

:class:`MemoryLedger` is the SQLite :class:`~privreg.budget.ledger.Ledger` with its
tables replaced by Python lists holding the very tuples SQLite would store (seq,
timestamp, mechanism, parameters JSON, event JSON, label, randomness JSON, prev_hash,
hash, stated, prices; checkpoints as seq, state, prev_hash, hash). Everything else is
the Ledger's own code: the same metadata and genesis, the same row and checkpoint
hashes (SHA-256, or HMAC-SHA256 under a key), the same decoding, the same
:meth:`~privreg.budget.ledger.Ledger.verify`, ``scan``, ``rows`` and anchors. So a
session takes the same decisions on it as on an SQLite ``":memory:"`` database
(``tests/test_memory_store.py``), without an SQL statement per charge.

Like SQLite's ``":memory:"``, it is private to the object that holds it: another
process cannot open it, and it is gone when the process ends. Threads share it through
the Ledger's turn lock; a write inside :meth:`transaction` is undone if the block raises.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from privreg.budget.ledger import (
    Checkpoint,
    Ledger,
    LedgerError,
    LedgerIntegrityError,
    LedgerRow,
)
from privreg.core.charging import Charge

__all__ = ["MemoryLedger", "MEMORY"]

#: The path a memory ledger shows (and the ``ledger`` argument that asks for one).
MEMORY = ":memory:"
#: What ``_sql`` returns: the ledger's steps wrap their statements in it, and there are none here.
_NO_SQL = nullcontext()


class MemoryLedger(Ledger):
    """A new, empty ledger in memory with metadata ``meta`` (which must hold ``format``
    and ``budget``); ``key`` makes its chain keyed, as for :class:`Ledger`."""

    def __init__(self, *, meta: Mapping[str, Any], key: bytes | None = None, busy_timeout: float = 30.0) -> None:
        self._setup(MEMORY, key=key, busy_timeout=busy_timeout, readonly=False)
        full = self._new_meta(meta)
        self._rows: list[tuple[Any, ...]] = []
        self._checkpoint_rows: list[tuple[int, str, str, str]] = []
        self._runs: dict[str, tuple[str, float, str, int]] = {}
        self._open = True
        self._in_tx = 0
        # the metadata goes through JSON as SQLite stores it: the same meta, the same genesis
        self._read_meta([(k, json.dumps(value, allow_nan=False)) for k, value in full.items()])
        self.priced = True

    # -- storage ----------------------------------------------------------------------------

    def _sql(self, doing: str) -> AbstractContextManager[None]:
        return _NO_SQL  # lists, not SQL: nothing to translate

    def _live(self) -> None:
        if not self._open:
            raise LedgerError(f"ledger {self.path!r} is closed; a memory ledger cannot be opened again")

    def close(self) -> None:
        self._open = False

    def head(self) -> tuple[int, str]:
        self._live()
        rows = self._rows
        return (len(rows), rows[-1][8]) if rows else (0, self._genesis)

    def _raw_rows(self, after: int) -> list[tuple[Any, ...]]:
        self._live()
        return self._rows[max(0, after) :]  # seq i sits at index i - 1

    def _seq_of_hash(self, digest: str) -> int | None:
        for r in self._rows:
            if r[8] == digest:
                return int(r[0])
        return None

    def _hash_at(self, seq: int) -> str:
        if not 1 <= seq <= len(self._rows):
            raise LedgerIntegrityError(f"ledger {self.path!r}: row {seq} is missing")
        return str(self._rows[seq - 1][8])

    def _checkpoint_texts(self, after: int) -> dict[int, str]:
        return {seq: state for seq, state, _, _ in self._checkpoint_rows if seq > after}

    def _insert_row(self, values: tuple[Any, ...], state: str | None) -> None:
        self._rows.append(values)
        if state is not None:
            seq, digest = values[0], values[8]
            self._checkpoint_rows.append((seq, state, *self._checkpoint_link(seq, digest, state)))

    def _last_checkpoint_hash(self) -> str | None:
        return self._checkpoint_rows[-1][3] if self._checkpoint_rows else None

    # -- writing ----------------------------------------------------------------------------

    def _in_my_transaction(self) -> bool:
        return self._in_tx > 0 and self._turn_owner == threading.get_ident()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """This writer's turn, as one atomic step: rows and checkpoints appended inside are
        dropped again if the block raises. Yields None (there is no connection)."""
        with self.turn():
            self._live()
            rows, checkpoints = len(self._rows), len(self._checkpoint_rows)
            self._in_tx += 1
            try:
                yield None
            except BaseException:
                del self._rows[rows:], self._checkpoint_rows[checkpoints:]
                raise
            finally:
                self._in_tx -= 1

    def try_append(
        self,
        charge: Charge,
        *,
        expected_seq: int,
        prices: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> LedgerRow | None:
        """:meth:`Ledger.try_append`, under the turn lock alone (there is no file to lock
        and no queue of other processes)."""
        self._check_append(expected_seq)
        if not self._thread_lock.acquire(timeout=self.busy_timeout):
            raise self._busy("another thread of this process holds its turn")
        try:
            self._live()
            rows = self._rows
            if len(rows) != expected_seq:
                return None
            head = (expected_seq, rows[-1][8] if rows else self._genesis)
            return self._append_after(head, charge, prices=prices, checkpoint=checkpoint)
        finally:
            self._thread_lock.release()

    def record_run_end(self, run_id: str, *, ended: float, status: str, releases: int) -> None:
        with self.turn():
            self._live()
            self._runs.setdefault(run_id, (run_id, float(ended), status, int(releases)))  # once, as Ledger

    def run_end_rows(self) -> list[tuple[str, float, str, int]]:
        self._live()
        return [self._runs[k] for k in sorted(self._runs)]

    # -- checkpoints --------------------------------------------------------------------------

    def last_checkpoint(self) -> Checkpoint | None:
        self._live()
        if not self._checkpoint_rows:
            return None
        raw = self._checkpoint_rows[-1]
        seq, state, prev, digest = raw
        expected = self._checkpoint_rows[-2][3] if len(self._checkpoint_rows) > 1 else self._genesis
        row_hash = self._rows[seq - 1][8] if 1 <= seq <= len(self._rows) else None
        problem = self._checkpoint_problem(seq, state, prev, digest, expected, row_hash)
        if problem is not None:
            raise LedgerIntegrityError(f"ledger {self.path!r}: {problem}; verify it with 'privreg ledger verify'")
        return self._decode_checkpoint(raw)

    def checkpoints(self) -> list[Checkpoint]:
        self._live()
        prev, out = self._genesis, []
        for raw in self._checkpoint_rows:
            seq = raw[0]
            row_hash = self._rows[seq - 1][8] if 1 <= seq <= len(self._rows) else None
            problem = self._checkpoint_problem(seq, raw[1], raw[2], raw[3], prev, row_hash)
            if problem is not None:
                raise LedgerIntegrityError(f"ledger {self.path!r}: {problem}")
            out.append(self._decode_checkpoint(raw))
            prev = raw[3]
        return out
