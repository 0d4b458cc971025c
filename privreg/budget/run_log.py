"""How a run's end is recorded in its ledger, so that the charges of a run that was killed
or failed can be told from those of a finished one.

Each charge of a run records, in its parameters under
:data:`~privreg.budget.verify.RUN_KEY`, the run (id, workflow, start, output folder), its
envelope (the epsilon and delta it declared it may spend, priced before its first charge)
and its release number within the run. Those records are rows of the hash chain. A run's
*end* cannot be a row: a row is a charge, and a zero-cost charge would be a release that
never happened. So the end goes into a small ``runs`` table of the same SQLite file,
written through the ledger's store
(:meth:`~privreg.budget.store.LedgerStore.record_run_end`) when the run returns or fails:
``(id, ended, status, releases)`` with status ``complete`` or ``failed``. A run whose
charges are in the chain but which has no end is *partial*: killed (or still running).

The table is outside the hash chain. What it can change is only how a run is labelled,
never what was spent (every charge stays in the chain and counts): deleting an end makes
a run look partial, and an end whose release count differs from the run's rows in the
chain is reported as inconsistent by verification.
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs

from privreg.budget.store import LedgerStore, is_postgres_url, open_readonly
from privreg.core.errors import PrivregError

__all__ = ["RunEnd", "COMPLETE", "FAILED", "record_end", "read_ends"]

COMPLETE = "complete"
FAILED = "failed"


@attrs.frozen(kw_only=True)
class RunEnd:
    """The end of one run: when, how (:data:`COMPLETE` or :data:`FAILED`) and how many
    releases it charged."""

    id: str
    ended: float
    status: str
    releases: int


def record_end(ledger: LedgerStore, run_id: str, *, status: str, releases: int) -> RunEnd:
    """Record the end of run ``run_id`` in ``ledger`` (in one short write transaction)."""
    end = RunEnd(id=run_id, ended=time.time(), status=status, releases=releases)
    ledger.record_run_end(end.id, ended=end.ended, status=end.status, releases=end.releases)
    return end


def read_ends(path: str | Path) -> dict[str, RunEnd] | None:
    """The recorded ends of the runs of the ledger file at ``path``, by run id (empty if
    none ended yet); None if they cannot be read (the file is opened read-only)."""
    if not is_postgres_url(path) and (str(path) == ":memory:" or not Path(path).is_file()):
        return None
    try:
        with open_readonly(path) as ledger:
            rows = ledger.run_end_rows()
    except PrivregError:
        return None
    return {r[0]: RunEnd(id=r[0], ended=r[1], status=r[2], releases=r[3]) for r in rows}
