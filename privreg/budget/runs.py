"""Runs of a workflow under a budget: what ``privreg run`` (and Python callers) need to
charge a run's own ledger or a shared one.

One budget across runs: ``privreg ledger init PATH --epsilon E`` creates a ledger with its
budget once; ``privreg run WORKFLOW ... --ledger PATH`` charges it (the budget is the
ledger's: ``--budget-epsilon``/``--budget-delta`` are refused with ``--ledger``). Each
charge records its run (workflow, run id, start time, output folder) in its parameters
under :data:`~privreg.budget.verify.RUN_KEY`, so ``privreg ledger show PATH`` lists the runs.

A run is admitted only if the ledger can still afford the workflow's whole declared
``epsilon`` (and ``delta``), checked under an exclusive lock on ``<ledger>-run-lock``
held for the whole run: runs on one ledger take turns, so a run refused for the budget is
refused before its first release and charges nothing, and two runs cannot both be
admitted on the same remaining budget. Each release is still checked as it is charged,
against the run's declared budget and then the ledger (which alone guards writers that
are not ``privreg run``, e.g. a :class:`~privreg.budget.session.BudgetSession` of your
own: such a writer can still make a run stop part-way).

Output folders: a run holds a lock on its output folder, so two runs never write to one
folder. A folder left by a failed or killed run never blocks a rerun: its ledger is
removed if it holds no charge, and otherwise kept (spent budget is never deleted) under
a new name, ``ledger-failed-N.sqlite``, with a note saying so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import RUN_KEY
from privreg.core.errors import BudgetExceededError, PrivregValueError
from privreg.core.events import ApproxDP, PrivacyEvent, PureDP
from privreg.core.items import RegistryItem

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the per-release checks still hold
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LEDGER_NAME",
    "SIDE_FILES",
    "RunCharger",
    "require_ledger",
    "run_envelope",
    "unlink_ledger",
    "new_run",
    "open_shared",
    "run_lock",
    "folder_lock",
    "clear_failed_run",
]

LEDGER_NAME = "ledger.sqlite"
SIDE_FILES = ("-wal", "-shm", "-journal")


def _echo(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- privreg run --ledger ---------------------------------------------------------------------


def require_ledger(path: str | os.PathLike[str], option: str) -> None:
    p = Path(path)
    if not p.exists():
        raise PrivregValueError(
            f"{option} {str(p)!r} does not exist; create it once with its budget: "
            f"'privreg ledger init {p} --epsilon E [--delta D]'"
        )
    if not p.is_file():
        raise PrivregValueError(
            f"{option} {str(p)!r} is not a file; give the ledger file made by 'privreg ledger init'"
        )


def new_run(workflow: str, output: Path) -> dict[str, str]:
    """What each charge of a run records about it: workflow, run id, start time, output folder."""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "id": f"{started.replace('-', '').replace(':', '')}-{secrets.token_hex(3)}",
        "workflow": workflow,
        "started": started,
        "output": str(output.absolute()),
    }


def run_envelope(item: RegistryItem, params: Mapping[str, Any]) -> tuple[PrivacyBudget, PrivacyEvent]:
    """A run's declared budget (the workflow's epsilon and delta) and the event a ledger
    must still afford to admit it."""
    eps = params.get("epsilon")
    if eps is None:
        raise PrivregValueError(
            f"workflow {item.name!r} has no epsilon parameter, so its cost cannot be checked before it runs; "
            f"run it without --ledger (with --budget-epsilon)"
        )
    delta = float(params.get("delta", 0.0) or 0.0)
    budget = PrivacyBudget(epsilon=eps, delta=delta, neighbouring=item.neighbouring)
    event: PrivacyEvent = (
        ApproxDP(epsilon=eps, delta=delta, neighbouring=item.neighbouring)
        if delta
        else PureDP(epsilon=eps, neighbouring=item.neighbouring)
    )
    return budget, event


def open_shared(path: str, item: RegistryItem, params: Mapping[str, Any]) -> tuple[BudgetSession, BudgetSession]:
    """``(ledger session, run gate)`` for a run of ``item`` charging the ledger at
    ``path``; call under :func:`run_lock`. Refuses (nothing charged) a ledger the run
    cannot use or whose remaining budget cannot afford the run's declared budget. The gate
    is an in-memory session holding the run to that declared budget."""
    require_ledger(path, "--ledger")
    run_budget, envelope = run_envelope(item, params)
    shared = BudgetSession.open(path)
    try:
        ledger_budget = shared.budget
        if item.neighbouring == "replace_one" and ledger_budget.neighbouring != "replace_one":
            raise PrivregValueError(
                f"--ledger {path!r} holds an add_remove budget, but workflow {item.name!r} releases local or "
                f"shuffled reports, which need a replace_one budget; create a ledger for it with "
                f"'privreg ledger init PATH --epsilon E --neighbouring replace_one'"
            )
        if not shared.filter_names:
            raise PrivregValueError(
                f"--ledger {path!r} was created with a declared plan of releases, which 'privreg run' cannot "
                f"follow; create a ledger for runs with 'privreg ledger init'"
            )
        if not shared.can_afford(envelope):
            raise BudgetExceededError(
                f"run of {item.name!r} refused: it may spend epsilon {run_budget.epsilon:g}"
                + (f", delta {run_budget.delta:g}" if run_budget.delta else "")
                + f", but --ledger {path!r} (budget epsilon {ledger_budget.epsilon:g}, delta "
                f"{ledger_budget.delta:g}) has {max(0.0, float(shared.remaining())):.6g} of epsilon left; lower the "
                f"workflow's --epsilon or use another ledger. Nothing was released or charged."
            )
        gate = BudgetSession(budget=run_budget, filters=("basic",), event_delta=run_budget.delta or None)
    except BaseException:
        shared.close()
        raise
    return shared, gate


class RunCharger:
    """Charges a run's releases to ``target`` (its ledger), each recording ``run``; with
    a ``gate``, each release must first fit the run's own declared budget."""

    def __init__(self, target: Any, run: Mapping[str, str], gate: Any = None) -> None:
        self.target, self.run, self.gate = target, dict(run), gate

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
        stated: PrivacyEvent | None = None,
    ) -> None:
        recorded = {**parameters, RUN_KEY: self.run}
        extra = {} if stated is None else {"stated": stated}
        if self.gate is not None:
            self.gate.charge(
                event, mechanism=mechanism, parameters=recorded, label=label, randomness=randomness, **extra
            )
        self.target.charge(event, mechanism=mechanism, parameters=recorded, label=label, randomness=randomness, **extra)


@contextlib.contextmanager
def _flock(path: Path, *, wait: bool, busy: str) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise PrivregValueError(busy) from None
            _echo(f"privreg: {busy}")
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel when its holder exits
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def run_lock(ledger: str) -> Iterator[None]:
    """Held for a whole run on ``ledger``: runs on one ledger take turns (a waiting run
    says so on stderr; Ctrl-C or SIGTERM ends the wait)."""
    require_ledger(ledger, "--ledger")
    lock = Path(f"{ledger}-run-lock")
    try:
        lock.touch(exist_ok=True)
    except OSError as exc:
        raise PrivregValueError(
            f"--ledger {ledger!r}: cannot create its run lock {str(lock)!r} ({exc.strerror}); runs need the "
            f"ledger's folder to be writable"
        ) from None
    with _flock(lock, wait=True, busy=f"waiting for another run charging {ledger} to finish"):
        yield


@contextlib.contextmanager
def folder_lock(output: Path) -> Iterator[None]:
    """Held while a run writes to ``output``: a second run into it is refused."""
    with _flock(
        output,
        wait=False,
        busy=f"another privreg run is writing to --output folder {str(output)!r}; wait for it to finish or "
        f"choose another folder",
    ):
        yield


def unlink_ledger(path: Path) -> None:
    for suffix in ("", *SIDE_FILES, "-lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def _charges_in(path: Path) -> int | None:
    """Charges in the ledger file at ``path`` (0 if it never got a table), or None if it
    cannot be read as a ledger. A writable connection: closing it folds the ``-wal`` file
    into the ledger, so that the file alone then holds every committed charge."""
    try:
        db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        if not db.execute("SELECT name FROM sqlite_master").fetchall():
            count = 0  # killed before its schema was written
        else:
            count = int(db.execute("SELECT count(*) FROM charges").fetchone()[0])
        with contextlib.suppress(sqlite3.Error):
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return count
    except sqlite3.Error:
        return None
    finally:
        db.close()


def clear_failed_run(output: Path) -> None:
    """Make room for a run's ledger in ``output`` (call under :func:`folder_lock`). A
    finished run's ledger (``run.json`` beside it) is refused; a failed or killed run's
    ledger is removed if it holds no charge, and otherwise kept under a new name."""
    ledger = output / LEDGER_NAME
    if not (ledger.exists() or ledger.is_symlink()):
        return
    if (output / "run.json").exists() or not ledger.is_file() or ledger.is_symlink():
        raise PrivregValueError(
            f"{str(ledger)!r} exists already (the ledger of an earlier run); choose a new --output folder"
        )
    charged = _charges_in(ledger)
    if charged == 0:
        unlink_ledger(ledger)
        return
    pending = [s for s in SIDE_FILES if Path(f"{ledger}{s}").is_file() and Path(f"{ledger}{s}").stat().st_size]
    if pending:  # the ledger's latest charges may be there: moving the file alone would lose them
        raise PrivregValueError(
            f"{str(ledger)!r} is left by a failed run and its {', '.join(pending)} file could not be folded "
            f"into it (in use or unreadable); it may hold spent budget: audit it with 'privreg audit "
            f"{ledger}', then move it and its side files away, or choose a new --output folder"
        )
    n = 1
    while any(Path(f"{output / f'ledger-failed-{n}.sqlite'}{s}").exists() for s in ("", *SIDE_FILES)):
        n += 1
    kept = output / f"ledger-failed-{n}.sqlite"
    os.rename(ledger, kept)
    unlink_ledger(ledger)  # its empty side files and its writer queue
    held = f"holds {charged} charge(s) (spent budget)" if charged is not None else "cannot be read as a ledger"
    _echo(f"privreg: note: {LEDGER_NAME} of a failed run in {output} {held}: kept as {kept.name}")
