"""How a run's end is recorded in its ledger, so that the charges of a run that was killed
or failed can be told from those of a finished one.

Each charge of a run records, in its parameters under
:data:`~privreg.budget.verify.RUN_KEY`, the run (id, workflow, start, output folder), its
envelope (the epsilon and delta it declared it may spend, priced before its first charge)
and its release number within the run. Those records are rows of the hash chain. A run's
*end* cannot be a row: a row is a charge, and a zero-cost charge would be a release that
never happened. So the end goes into a small ``runs`` table of the same SQLite file,
written through the ledger's own writer turn and transaction
(:meth:`~privreg.budget.ledger.Ledger.transaction`) when the run returns or fails:
``(id, ended, status, releases)`` with status ``complete`` or ``failed``. A run whose
charges are in the chain but which has no end is *partial*: killed (or still running).

The table is outside the hash chain. What it can change is only how a run is labelled,
never what was spent (every charge stays in the chain and counts): deleting an end makes
a run look partial, and an end whose release count differs from the run's rows in the
chain is reported as inconsistent by verification.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

from privreg.budget.ledger import Ledger

__all__ = ["RunEnd", "COMPLETE", "FAILED", "record_end", "read_ends"]

COMPLETE = "complete"
FAILED = "failed"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, ended REAL NOT NULL, status TEXT NOT NULL, "
    "releases INTEGER NOT NULL)"
)


@attrs.frozen(kw_only=True)
class RunEnd:
    """The end of one run: when, how (:data:`COMPLETE` or :data:`FAILED`) and how many
    releases it charged."""

    id: str
    ended: float
    status: str
    releases: int


def record_end(ledger: Ledger, run_id: str, *, status: str, releases: int) -> RunEnd:
    """Record the end of run ``run_id`` in ``ledger`` (in one short write transaction)."""
    end = RunEnd(id=run_id, ended=time.time(), status=status, releases=releases)
    with ledger.transaction() as db:
        db.execute(_SCHEMA)
        db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?)", (end.id, end.ended, end.status, end.releases))
    return end


@contextlib.contextmanager
def _reader(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True, timeout=5.0)
    try:
        yield db
    finally:
        db.close()


def read_ends(path: str | Path) -> dict[str, RunEnd] | None:
    """The recorded ends of the runs of the ledger file at ``path``, by run id (empty if
    none ended yet); None if they cannot be read (the file is opened read-only)."""
    p = Path(path)
    if str(path) == ":memory:" or not p.is_file():
        return None
    try:
        with _reader(p) as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone() is None:
                return {}
            rows = db.execute("SELECT id, ended, status, releases FROM runs").fetchall()
    except sqlite3.Error:
        return None
    return {str(r[0]): RunEnd(id=str(r[0]), ended=float(r[1]), status=str(r[2]), releases=int(r[3])) for r in rows}
