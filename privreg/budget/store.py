"""What a budget session needs from the storage behind its ledger.

:class:`LedgerStore` is the whole seam: the session and the filters touch nothing else,
so a server database can stand behind a session without changing either.
:class:`privreg.budget.ledger.Ledger` (SQLite) is the built-in store. A store keeps rows
append-only and hash-chained, each with the prices every filter charged for it, plus
chained checkpoints of every filter's state; it appends a row only if its head is still
the row the caller last read, atomically with the row's checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from privreg.budget.ledger import Checkpoint, Ledger, LedgerRow
from privreg.core.charging import Charge

__all__ = ["LedgerStore", "POSTGRES_SCHEMES", "is_postgres_url", "open_readonly"]

#: How a ledger URL on PostgreSQL starts (:mod:`privreg.budget.store_postgres`).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(ledger: object) -> bool:
    """Whether ``ledger`` names a PostgreSQL ledger (``postgresql://...#budget``), not a file."""
    return isinstance(ledger, str) and ledger.startswith(POSTGRES_SCHEMES)


def open_readonly(ledger: str | Path, *, key: bytes | None = None) -> Ledger:
    """The ledger file or PostgreSQL budget ``ledger``, opened to read only (no lock, nothing
    written; on PostgreSQL, one snapshot)."""
    if is_postgres_url(ledger):
        from privreg.budget.store_postgres import PostgresLedger

        return PostgresLedger(str(ledger), key=key, readonly=True)
    return Ledger.open_readonly(ledger, key=key)


@runtime_checkable
class LedgerStore(Protocol):
    """The storage of one ledger."""

    #: Where the ledger lives, as shown in messages (a path, a URL without secrets).
    path: str
    #: The ledger's metadata: ``format``, ``budget``, ``rule`` and the chain kind.
    meta: dict[str, Any]

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row; (0, genesis hash) when empty."""

    def rows(self, *, after: int = 0, verify: bool = True) -> list[LedgerRow]:
        """Rows with seq > ``after`` in order, their chain checked when ``verify``."""

    def try_append(
        self,
        charge: Charge,
        *,
        expected_seq: int,
        prices: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> LedgerRow | None:
        """Append ``charge`` with its prices (and a checkpoint of the state after it) if
        the head is still row ``expected_seq``, atomically; None (nothing written) if not."""

    def turn(self) -> AbstractContextManager[None]:
        """This writer's turn among all writers (first come, first served)."""

    def last_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint, its links checked; None if there is none."""

    def record_run_end(self, run_id: str, *, ended: float, status: str, releases: int) -> None:
        """Record that a run ended (outside the chain; :mod:`privreg.budget.run_log`)."""

    def run_end_rows(self) -> list[tuple[str, float, str, int]]:
        """``(id, ended, status, releases)`` of every recorded run end."""

    def close(self) -> None:
        """Release the connection."""
