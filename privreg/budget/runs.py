"""Runs of a workflow under a budget: :func:`run_workflow`, the one path that ``privreg
run``, ``privreg demo`` and Python callers take.

A run's budget is one of three:

* ``budget=PrivacyBudget(...)``: a ledger of the run's own (``ledger.sqlite`` in the
  ``output`` folder, or in memory without one), kept by the basic filter (curve events at
  the budget's delta unless ``event_delta`` is given);
* ``ledger=PATH``: a ledger shared by many runs (``privreg ledger init PATH --epsilon E``
  creates it with its budget once), whose budget is its own;
* neither: the budget the workflow declares in its parameters
  (:attr:`~privreg.core.items.RegistryItem.budget_params`, e.g. its ``epsilon`` and
  ``delta``), in a ledger of the run's own.

**Priced before the first charge.** A run's *envelope* is what it declares it may spend:
its budget parameters as one ``PureDP``/``ApproxDP`` event (:func:`run_envelope`). In
every mode the ledger must be able to afford the envelope before anything is created or
charged; a run refused there leaves no ledger and no row. On a shared ledger that check
runs under an exclusive lock on ``<ledger>-run-lock`` held for the whole run (runs on one
ledger take turns, so two runs cannot both be admitted on the same remaining budget), and
each release must also fit the run's own envelope. Each release is still checked against
the ledger as it is charged (which alone guards writers that are not runs, e.g. a
:class:`~privreg.budget.session.BudgetSession` of your own: such a writer can still make a
run stop part-way).

**A run's message is the truth.** A failure after the first charge says exactly what was
charged (:class:`PartialRunError`: how many releases, which, and the epsilon each cost),
and the charges stay in the ledger (spent budget is never deleted). Each charge records
its run under :data:`~privreg.budget.verify.RUN_KEY` (workflow, run id, start time, output
folder, envelope, release number), and the run's end is recorded in the ledger's ``runs``
table (:mod:`privreg.budget.run_log`), so ``privreg ledger show`` and verification mark
the charges of a killed or failed run as partial.

Output folders: a run holds a lock on its output folder, so two runs never write to one
folder. A folder left by a failed or killed run never blocks a rerun: its ledger is
removed if it holds no charge, and otherwise kept (spent budget is never deleted) under
a new name, ``ledger-failed-N.sqlite``, with a note saying so.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, SupportsFloat, runtime_checkable

import attrs

from privreg.budget import run_log
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.store import is_postgres_url
from privreg.budget.verify import RUN_KEY
from privreg.core import files
from privreg.core.charging import NoReleases, jsonable
from privreg.core.cost import Limits
from privreg.core.errors import BudgetExceededError, PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.events import ApproxDP, PrivacyEvent, PureDP
from privreg.core.progress import ProgressCallback
from privreg.core.randomness import RandomSource, resolve_random
from privreg.core.workflow import WorkflowContext, WorkflowResult
from privreg.timing import PhaseTimer

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the per-release checks still hold
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LEDGER_NAME",
    "SIDE_FILES",
    "RunnableItem",
    "BudgetCharger",
    "ChargedRelease",
    "PartialRunError",
    "RunResult",
    "run_workflow",
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


# -- the seams: what a run needs of a workflow and of a ledger ---------------------------------


@runtime_checkable
class RunnableItem(Protocol):
    """What a run needs of a workflow: a :class:`~privreg.core.items.RegistryItem` of kind
    workflow is one."""

    @property
    def name(self) -> str: ...

    @property
    def plugin(self) -> str: ...

    @property
    def charges(self) -> bool:
        """False: the workflow releases nothing differentially private (no ledger)."""

    @property
    def neighbouring(self) -> str:
        """The neighbour relation of its guarantee (the relation of its default budget)."""

    @property
    def budget_params(self) -> tuple[str, ...]:
        """The parameters stating its budget: ``(EPSILON,)`` or ``(EPSILON, DELTA)``."""

    def bind(self, values: Mapping[str, Any] | None = None, /) -> dict[str, Any]:
        """Validated parameters, defaults filled in."""

    def budget_of(self, params: Mapping[str, Any]) -> tuple[float, float] | None:
        """``(epsilon, delta)`` the run with ``params`` may spend, or None if not stated."""

    def run(self, context: WorkflowContext, values: Mapping[str, Any] | None = None, /) -> Any:
        """Run the workflow (it returns a :class:`~privreg.core.workflow.WorkflowResult`)."""


class BudgetCharger(Protocol):
    """What a run charges its releases to: a :class:`~privreg.budget.session.BudgetSession`
    is one. ``remaining()`` is the epsilon left (a number, or a value with ``__float__``)."""

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
    ) -> None: ...

    def remaining(self) -> SupportsFloat: ...


# -- what a run tells ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ChargedRelease:
    """One release a run charged: its number in the run, label, mechanism, event, and
    the epsilon it cost under the ledger's rule (the drop of the ledger's remaining
    epsilon)."""

    number: int
    label: str
    mechanism: str
    event: PrivacyEvent
    epsilon: float
    stated: PrivacyEvent | None = None

    def __str__(self) -> str:
        return f"#{self.number} {self.label or self.mechanism} (epsilon {self.epsilon:.6g})"


def describe_charged(charged: tuple[ChargedRelease, ...], where: str) -> str:
    """``2 release(s) charged to WHERE, epsilon E in all: #1 ..., #2 ...``."""
    total = sum(c.epsilon for c in charged)
    return f"{len(charged)} release(s) charged to {where}, epsilon {total:.6g} in all: " + ", ".join(
        str(c) for c in charged
    )


class PartialRunError(PrivregError):
    """A run failed after it charged releases: :attr:`charged` says exactly which (they
    stay in the ledger; the run is marked partial there). The failure is ``__cause__``."""

    def __init__(self, message: str, *, workflow: str, charged: tuple[ChargedRelease, ...], ledger: str) -> None:
        super().__init__(message)
        self.workflow = workflow
        self.charged = charged
        self.ledger = ledger


@attrs.frozen(kw_only=True)
class RunResult:
    """What :func:`run_workflow` returns.

    ``result`` is the workflow's :class:`~privreg.core.workflow.WorkflowResult`;
    ``run_id`` the id each charge recorded (None for a workflow that charges nothing);
    ``releases`` the releases this run charged and ``epsilon_charged`` their epsilon
    under the ledger's rule; ``epsilon_spent``/``epsilon_remaining`` the ledger's totals
    after the run, of ``budget`` (the ledger's budget); ``ledger`` its path or URL (None: in
    memory, or no ledger); ``output`` the output folder (None: nothing written);
    ``seconds`` the workflow's wall time; ``randomness`` the random source's description;
    ``shared`` whether the ledger is shared by many runs (``ledger=``)."""

    workflow: str
    parameters: Mapping[str, Any]
    result: WorkflowResult
    run_id: str | None
    releases: int
    charged: tuple[ChargedRelease, ...]
    epsilon_charged: float
    epsilon_spent: float | None
    epsilon_remaining: float | None
    budget: PrivacyBudget | None
    ledger: Path | str | None
    shared: bool
    output: Path | None
    seconds: float
    randomness: Mapping[str, Any]


# -- privreg run --ledger ---------------------------------------------------------------------


def require_ledger(path: str | os.PathLike[str], option: str) -> None:
    if is_postgres_url(path):  # a budget on a server: checked when opened
        return
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


def new_run(workflow: str, output: Path | None, envelope: tuple[float, float] | None = None) -> dict[str, Any]:
    """What each charge of a run records about it: workflow, run id, start time, output
    folder (None: none), and its envelope (``{"epsilon", "delta"}``, None if it declared
    none). :class:`RunCharger` adds each release's number in the run."""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "id": f"{started.replace('-', '').replace(':', '')}-{secrets.token_hex(3)}",
        "workflow": workflow,
        "started": started,
        "output": None if output is None else str(output.absolute()),
        "envelope": None if envelope is None else {"epsilon": envelope[0], "delta": envelope[1]},
    }


def _event(epsilon: float, delta: float, neighbouring: str) -> PrivacyEvent:
    if delta:
        return ApproxDP(epsilon=epsilon, delta=delta, neighbouring=neighbouring)
    return PureDP(epsilon=epsilon, neighbouring=neighbouring)


def _declared(item: RunnableItem) -> str:
    return " and ".join(repr(n) for n in item.budget_params) or "none"


def run_envelope(item: RunnableItem, params: Mapping[str, Any]) -> tuple[PrivacyBudget, PrivacyEvent]:
    """A run's declared budget (read from the workflow's budget parameters) and its
    envelope: the event a ledger must still afford to admit the run."""
    stated = item.budget_of(params)
    if stated is None:
        raise PrivregValueError(
            f"workflow {item.name!r} states no budget in its parameters (budget_params: {_declared(item)}), so "
            f"its cost cannot be checked before it runs; run it with a budget of its own (budget=PrivacyBudget(...), "
            f"--budget-epsilon) instead of a shared ledger"
        )
    eps, delta = stated
    budget = PrivacyBudget(epsilon=eps, delta=delta, neighbouring=item.neighbouring)
    return budget, _event(budget.epsilon, budget.delta, item.neighbouring)


def _spend_text(item: RunnableItem, budget: PrivacyBudget) -> str:
    names = [f"{budget.epsilon:g} ({item.budget_params[0]!r})"]
    if budget.delta and len(item.budget_params) > 1:
        names.append(f"delta {budget.delta:g} ({item.budget_params[1]!r})")
    return "epsilon " + ", ".join(names)


def open_shared(path: str, item: RunnableItem, params: Mapping[str, Any]) -> tuple[BudgetSession, BudgetSession]:
    """``(ledger session, run gate)`` for a run of ``item`` charging the ledger at
    ``path``; call under :func:`run_lock`. Refuses (nothing charged) a ledger the run
    cannot use or whose remaining budget cannot afford the run's envelope. The gate is an
    in-memory session holding the run to that declared budget."""
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
        quote = shared.price(envelope)
        if not quote.granted:
            fix = item.budget_params[0]
            if run_budget.delta and len(item.budget_params) > 1:
                pure = _event(run_budget.epsilon, 0.0, item.neighbouring)
                if shared.price(pure).granted:  # its epsilon fits: its delta is what does not
                    fix = item.budget_params[1]
            advice = f"lower the workflow's --{fix.replace('_', '-')} or use another ledger"
            if all(x is None for x in quote.by_filter.values()):  # no amount of it can be priced
                advice = (
                    "use a ledger whose filters can price it (e.g. the default basic, rdp and gdp: "
                    "'privreg ledger init PATH --epsilon E')"
                )
            raise BudgetExceededError(
                f"run of {item.name!r} refused: it may spend {_spend_text(item, run_budget)}, but no filter of "
                f"--ledger {path!r} (budget epsilon {ledger_budget.epsilon:g}, delta {ledger_budget.delta:g}, "
                f"{max(0.0, float(shared.remaining())):.6g} left) grants that: {quote.reason}; {advice}. "
                f"Nothing was released or charged."
            )
        gate = BudgetSession(budget=run_budget, filters=("basic",), event_delta=run_budget.delta or None)
    except BaseException:
        shared.close()
        raise
    return shared, gate


def _check_own_budget(
    item: RunnableItem, params: Mapping[str, Any], budget: PrivacyBudget, event_delta: float | None
) -> None:
    """Refuse, before any ledger exists, a run whose envelope its own budget cannot afford."""
    if item.neighbouring == "replace_one" and budget.neighbouring != "replace_one":
        raise PrivregValueError(
            f"workflow {item.name!r} releases local or shuffled reports, whose guarantee is for replace_one "
            f"neighbours, but its budget is for {budget.neighbouring} neighbours; pass "
            f"budget=PrivacyBudget(..., neighbouring='replace_one'). Nothing was released or charged, and no "
            f"ledger was created."
        )
    if item.budget_of(params) is None:
        return  # nothing declared: the budget itself is the envelope
    run_budget, envelope = run_envelope(item, params)
    probe = BudgetSession(budget=budget, filters=("basic",), event_delta=event_delta)
    with probe:
        if probe.can_afford(envelope):
            return
    eps_param = f"--{item.budget_params[0].replace('_', '-')}"
    fix = f"lower the workflow's {eps_param} to at most {budget.epsilon:g}"
    if run_budget.delta > budget.delta:
        fix += f" and its delta to at most {budget.delta:g}"
    raise BudgetExceededError(
        f"run of {item.name!r} refused: it may spend {_spend_text(item, run_budget)}, more than its budget of "
        f"epsilon {budget.epsilon:g}, delta {budget.delta:g} (--budget-epsilon/--budget-delta; budget= in Python); "
        f"{fix}, or raise the budget. Nothing was released or charged, and no ledger was created."
    )


class RunCharger:
    """Charges a run's releases to ``target`` (its ledger), each recording ``run`` and its
    number in the run; with a ``gate``, each release must first fit the run's own declared
    budget. :attr:`charged` lists what was charged (a failed run says it)."""

    def __init__(self, target: BudgetCharger, run: Mapping[str, Any], gate: BudgetCharger | None = None) -> None:
        self.target, self.run, self.gate = target, dict(run), gate
        self._charged: list[ChargedRelease] = []
        self._remaining = float(target.remaining())

    @property
    def charged(self) -> tuple[ChargedRelease, ...]:
        return tuple(self._charged)

    def can_afford(self, event: PrivacyEvent) -> bool:
        """Whether the run's gate and its ledger would both grant ``event`` now (a dry run:
        nothing is charged), so a workflow can refuse before it reads its data. A charger
        without ``can_afford`` is taken to grant it (its charge decides)."""
        return all(getattr(c, "can_afford", lambda _e: True)(event) for c in (self.gate, self.target) if c is not None)

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
        number = len(self._charged) + 1
        recorded = {**parameters, RUN_KEY: {**self.run, "release": number}}
        extra: dict[str, Any] = {} if stated is None else {"stated": stated}
        if self.gate is not None:
            self.gate.charge(
                event, mechanism=mechanism, parameters=recorded, label=label, randomness=randomness, **extra
            )
        self.target.charge(event, mechanism=mechanism, parameters=recorded, label=label, randomness=randomness, **extra)
        before, self._remaining = self._remaining, float(self.target.remaining())
        self._charged.append(
            ChargedRelease(
                number=number,
                label=label,
                mechanism=mechanism,
                event=event,
                epsilon=before - self._remaining,
                stated=stated,
            )
        )


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
    says so on stderr; Ctrl-C or SIGTERM ends the wait). On PostgreSQL, where any role
    that may connect could hold the lock, the wait ends after
    :data:`~privreg.budget.store_postgres.RUN_WAIT` seconds with LedgerBusyError."""
    require_ledger(ledger, "--ledger")
    if is_postgres_url(ledger):
        from privreg.budget.store_postgres import run_turn

        with run_turn(ledger, waiting=f"waiting for another run charging {ledger} to finish"):
            yield
        return
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
            f"into it (in use or unreadable); it may hold spent budget: verify it with 'privreg ledger verify "
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


# -- run_workflow ---------------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    """``value`` (made of JSON types) with each non-finite float as the string ``"inf"``,
    ``"-inf"`` or ``"nan"``: JSON has no such numbers, and run.json is plain JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(x) for k, x in value.items()}
    if isinstance(value, list):
        return [_finite(x) for x in value]
    return value


def _remove_debris(output: Path | None, *, created: bool, ledger: Path | None) -> None:
    """After a failed run: remove the ledger it created if nothing was charged to it (and
    its side files), and the output folder if the run created it and it is empty."""
    if ledger is not None:
        unlink_ledger(ledger)
    if created and output is not None:
        with contextlib.suppress(OSError):
            output.rmdir()  # only if empty


def _check_args(
    item: object,
    params: object,
    budget: object,
    ledger: object,
    event_delta: object,
    limits: object,
) -> None:
    if not isinstance(item, RunnableItem):
        raise PrivregTypeError(
            f"item must be a workflow (privreg.default_registry().get(NAME, kind='workflow')); got {item!r}"
        )
    if params is not None and not isinstance(params, Mapping):
        raise PrivregTypeError(f"params must be a mapping of parameter names to values; got {params!r}")
    if budget is not None and not isinstance(budget, PrivacyBudget):
        raise PrivregTypeError(
            f"budget must be a privreg.budget.PrivacyBudget (e.g. PrivacyBudget(epsilon=1.0)); got {budget!r}"
        )
    if ledger is not None and not isinstance(ledger, (str, os.PathLike)):
        raise PrivregTypeError(f"ledger must be the path of a ledger made by 'privreg ledger init'; got {ledger!r}")
    if budget is not None and ledger is not None:
        raise PrivregValueError(
            "pass budget= (a ledger of the run's own) or ledger= (a shared ledger, whose budget is its own, set by "
            "'privreg ledger init'), not both"
        )
    if event_delta is not None and ledger is not None:
        raise PrivregValueError(
            "event_delta= applies to a ledger of the run's own; a shared ledger keeps the event_delta it was "
            "created with: drop event_delta="
        )
    if limits is not None and not isinstance(limits, Limits):
        raise PrivregTypeError(f"limits must be a privreg.core.cost.Limits; got {limits!r}")
    if not item.charges and (budget is not None or ledger is not None):
        raise PrivregValueError(
            f"workflow {item.name!r} releases nothing differentially private (charges=False); drop "
            + ("ledger=" if ledger is not None else "budget=")
        )


def run_workflow(
    item: RunnableItem,
    params: Mapping[str, Any] | None = None,
    *,
    budget: PrivacyBudget | None = None,
    ledger: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    rng: RandomSource | None = None,
    limits: Limits | None = None,
    echo: Callable[[str], None] | None = None,
    event_delta: float | None = None,
) -> RunResult:
    """Run workflow ``item`` with ``params`` under a budget, and return a :class:`RunResult`.

    ``budget``: a :class:`~privreg.budget.session.PrivacyBudget` for a ledger of the
    run's own (``ledger.sqlite`` in ``output``; in memory without ``output``), kept by the
    basic filter with curve events priced at ``event_delta`` (default: the budget's
    delta). ``ledger``: the path of a shared ledger (``privreg ledger init``), whose
    budget is its own. Neither: the budget the workflow states in its
    :attr:`~RunnableItem.budget_params`. In every case the run's envelope must fit before
    anything is created or charged (see the module docstring); a refusal raises
    :class:`~privreg.core.errors.BudgetExceededError` and leaves nothing behind.

    ``output``: the folder for ``run.json`` and the workflow's outputs (created if
    missing, locked while the run writes to it); None writes nothing. ``progress``
    receives counts of the long phases, ``echo`` messages for a human (both silent by
    default); ``rng`` is the random source (default: the OS CSPRNG); ``limits`` the
    resource limits of :mod:`privreg.core.cost`.

    A failure after the first charge raises :class:`PartialRunError` (for a privreg
    error; other exceptions keep their type and get a note, also passed to ``echo``)
    saying exactly what was charged; the run is recorded as failed in the ledger.
    """
    _check_args(item, params, budget, ledger, event_delta, limits)
    bound = item.bind(params or {})
    source = resolve_random(rng)
    say = echo if echo is not None else (lambda message: None)
    if event_delta is not None and not (isinstance(event_delta, (int, float)) and 0 < event_delta < 1):
        raise PrivregValueError(
            f"event_delta must be a delta in (0, 1) (or None: the budget's delta); got {event_delta!r}"
        )
    shared = ledger is not None
    if item.charges and not shared:
        if budget is None:
            stated = item.budget_of(bound)
            if stated is None:
                raise PrivregValueError(
                    f"workflow {item.name!r} states no budget in its parameters (budget_params: {_declared(item)}); "
                    f"pass budget=PrivacyBudget(epsilon=...) (privreg run: --budget-epsilon) or ledger=PATH"
                )
            budget = PrivacyBudget(epsilon=stated[0], delta=stated[1], neighbouring=item.neighbouring)
        if event_delta is None:
            event_delta = budget.delta or None
        _check_own_budget(item, bound, budget, event_delta)  # before any folder or ledger exists
    if shared:
        require_ledger(str(ledger), "ledger")
    out = None if output is None else Path(output)
    created = out is not None and not out.exists()
    if out is not None:
        out = files.make_dir(out, "--output folder")
    try:
        with folder_lock(out) if out is not None else contextlib.nullcontext():
            return _run_in(
                item,
                bound,
                budget,
                None if ledger is None else str(ledger),
                out,
                source,
                progress,
                limits,
                say,
                event_delta,
            )
    except BaseException:
        if created and out is not None:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty
        raise


def _run_in(
    item: RunnableItem,
    params: dict[str, Any],
    budget: PrivacyBudget | None,
    shared_path: str | None,
    output: Path | None,
    rng: RandomSource,
    progress: ProgressCallback | None,
    limits: Limits | None,
    echo: Callable[[str], None],
    event_delta: float | None,
) -> RunResult:
    """The run itself, holding the lock of its output folder."""
    envelope = item.budget_of(params) if item.charges else None
    run = new_run(item.name, output, envelope)
    ctx = WorkflowContext(
        charger=NoReleases(item.name),
        rng=rng,
        output_dir=output,
        echo=echo,
        progress=progress,
        limits=limits if limits is not None else Limits(),
    )
    ledger_path: Path | str | None = None  # str: a budget on PostgreSQL
    fresh_ledger = False  # a ledger this run created and charged nothing to: removed if the run fails
    charger: RunCharger | None = None
    try:
        if not item.charges:  # a cryptographic protocol: no ledger, any charge fails
            result, elapsed = _execute(item, ctx, params)
            return _finish(item, params, result, elapsed, rng, run_id=None, output=output)
        if shared_path is None:  # a ledger of its own in the output folder (or in memory)
            if budget is None:  # run_workflow resolved it
                raise PrivregValueError(f"a run of {item.name!r} needs a budget: pass budget= or ledger=")
            if output is not None:
                clear_failed_run(output)  # a failed run's ledger never blocks a rerun
                if (output / "run.json").exists():
                    raise PrivregValueError(
                        f"--output folder {str(output)!r} holds an earlier run (run.json); choose a new --output folder"
                    )
                ledger_path = output / LEDGER_NAME
            fresh_ledger = ledger_path is not None
            # the basic filter alone, so a workflow calibrated to its whole (eps, delta) fits; a curve
            # event (shuffled reports, a block of Gaussians) is priced at event_delta
            session = BudgetSession(
                budget=budget,
                ledger=ledger_path if ledger_path is not None else ":memory:",
                filters=("basic",),
                event_delta=event_delta,
            )
            with session:
                own, own_charger, own_budget = session, RunCharger(session, run), budget
                charger = ctx.charger = own_charger

                finish = _finisher(item, params, rng, run, output, own_charger, own, own_budget, ledger_path, False)
                done = _run_charged(item, ctx, params, own, own_charger, run, ledger_path, echo, finish)
                fresh_ledger = False
            return done
        if output is not None and (output / "run.json").exists():
            raise PrivregValueError(
                f"--output folder {str(output)!r} holds an earlier run (run.json); choose a new --output folder"
            )
        ledger_path = shared_path if is_postgres_url(shared_path) else Path(shared_path)
        with run_lock(shared_path):
            shared, gate = open_shared(shared_path, item, params)  # refuses what cannot fit
            with shared, gate:
                shared_charger = RunCharger(shared, run, gate)
                charger = ctx.charger = shared_charger

                finish = _finisher(
                    item, params, rng, run, output, shared_charger, shared, shared.budget, ledger_path, True
                )
                return _run_charged(item, ctx, params, shared, shared_charger, run, ledger_path, echo, finish)
    except BaseException:
        if charger is not None and charger.charged:
            fresh_ledger = False
        _remove_debris(
            output, created=False, ledger=ledger_path if fresh_ledger and isinstance(ledger_path, Path) else None
        )
        raise


def _execute(item: RunnableItem, ctx: WorkflowContext, params: dict[str, Any]) -> tuple[WorkflowResult, float]:
    """Run the workflow: ``(result, wall seconds)``."""
    timer = PhaseTimer()
    with timer.phase("run"):
        result = item.run(ctx, params)
    if not isinstance(result, WorkflowResult):
        raise PrivregTypeError(
            f"workflow {item.name!r} returned {type(result).__name__}, not a privreg WorkflowResult; its factory "
            f"must return WorkflowResult(summary=..., metrics=..., outputs=...)"
        )
    return result, timer.wall["run"]


def _run_charged(
    item: RunnableItem,
    ctx: WorkflowContext,
    params: dict[str, Any],
    session: BudgetSession,
    charger: RunCharger,
    run: Mapping[str, Any],
    ledger_path: Path | str | None,
    echo: Callable[[str], None],
    finish: Callable[[WorkflowResult, float], RunResult],
) -> RunResult:
    """Run the workflow charging ``charger``, ``finish`` it (``run.json``), and record the
    run's end in the ledger: complete, or failed (then say exactly what was charged)."""
    try:
        result, elapsed = _execute(item, ctx, params)
        done = finish(result, elapsed)
    except BaseException as exc:
        charged = charger.charged
        if not charged:
            raise
        with contextlib.suppress(PrivregError, sqlite3.Error, OSError):
            run_log.record_end(session.ledger, run["id"], status=run_log.FAILED, releases=len(charged))
        where = f"ledger {ledger_path}" if ledger_path is not None else "the run's ledger (in memory)"
        what = (
            f"the run of {item.name!r} ({run['id']}) stopped after {describe_charged(charged, where)}; that "
            f"budget is spent (the ledger keeps it, marked as a partial run)"
        )
        if isinstance(exc, PrivregError):
            cause = str(exc).replace("Nothing was released or charged.", "That release was not made or charged.")
            raise PartialRunError(
                f"{cause.rstrip('. ')}. {what}", workflow=item.name, charged=charged, ledger=str(ledger_path)
            ) from exc
        if isinstance(exc, Exception):  # an interrupt (Ctrl-C, SIGTERM) says it in its own one line
            echo(f"privreg: note: {what}")
        if hasattr(exc, "add_note"):  # Python >= 3.11
            exc.add_note(what)
        raise
    try:  # the run is complete (run.json written): failing to record its end does not undo that
        run_log.record_end(session.ledger, run["id"], status=run_log.COMPLETE, releases=len(charger.charged))
    except (PrivregError, sqlite3.Error, OSError) as exc:
        echo(
            f"privreg: note: the run of {item.name!r} ({run['id']}) is complete, but its end could not be "
            f"recorded in the ledger ({exc}); 'privreg ledger show' will list it as partial"
        )
    return done


def _finisher(
    item: RunnableItem,
    params: Mapping[str, Any],
    rng: RandomSource,
    run: Mapping[str, Any],
    output: Path | None,
    charger: RunCharger,
    session: BudgetSession,
    budget: PrivacyBudget,
    ledger: Path | str | None,
    shared: bool,
) -> Callable[[WorkflowResult, float], RunResult]:
    """What ends a charged run once the workflow returned: :func:`_finish` with the run's
    ledger, charger and what remains of its budget then."""

    def finish(result: WorkflowResult, elapsed: float) -> RunResult:
        return _finish(
            item,
            params,
            result,
            elapsed,
            rng,
            run_id=run["id"],
            output=output,
            charger=charger,
            budget=budget,
            remaining=float(session.remaining()),
            ledger=ledger,
            shared=shared,
        )

    return finish


def _finish(
    item: RunnableItem,
    params: Mapping[str, Any],
    result: WorkflowResult,
    elapsed: float,
    rng: RandomSource,
    *,
    run_id: str | None,
    output: Path | None,
    charger: RunCharger | None = None,
    budget: PrivacyBudget | None = None,
    remaining: float | None = None,
    ledger: Path | str | None = None,
    shared: bool = False,
) -> RunResult:
    """Write ``run.json`` (with ``output``) and build the result."""
    charged = charger.charged if charger is not None else ()
    summary: dict[str, Any] = {
        "workflow": item.name,
        "plugin": item.plugin,
        "parameters": jsonable(params, name="parameters"),
        "metrics": jsonable(dict(result.metrics), name="metrics"),
        "seconds": elapsed,
        "randomness": rng.describe(),
    }
    if item.charges:
        summary["run"] = run_id
        summary["ledger"] = str(ledger.absolute()) if isinstance(ledger, Path) else ledger
    if output is not None:
        text = json.dumps(_finite(summary), indent=2, allow_nan=False)
        files.write_text(output / "run.json", text + "\n", "run summary")
    return RunResult(
        workflow=item.name,
        parameters=params,
        result=result,
        run_id=run_id,
        releases=len(charged),
        charged=charged,
        epsilon_charged=sum(c.epsilon for c in charged),
        epsilon_spent=None if budget is None or remaining is None else budget.epsilon - remaining,
        epsilon_remaining=remaining,
        budget=budget,
        ledger=ledger,
        shared=shared,
        output=output,
        seconds=elapsed,
        randomness=rng.describe(),
    )
