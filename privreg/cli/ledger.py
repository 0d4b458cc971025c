"""``privreg ledger init|show|verify``: create a ledger holding one budget for many runs,
show it, and verify it (``privreg audit LEDGER`` is kept as an alias of ``verify``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privreg.core import files
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.numtext import parse_float

if TYPE_CHECKING:
    from privreg.budget.session import PrivacyBudget

# The budget package (accountants: numpy, scipy) and the registry are imported by the
# commands, never when the parser is built: 'privreg --help' stays fast (benchmarks/startup.py).

__all__ = [
    "add_parser",
    "add_verify_arguments",
    "cmd_ledger_init",
    "cmd_ledger_grant",
    "cmd_ledger_show",
    "cmd_ledger_verify",
]


def _echo(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- privreg ledger init / show / verify ----------------------------------------------------


def _number(option: str, raw: str) -> float:
    try:
        return parse_float(option, raw)
    except PrivregValueError:
        raise PrivregValueError(f"{option} must be a number; got {raw!r}. Pass e.g. {option} 1.0") from None


class _FilterNames:
    """The names of the privacy filters (``--filter`` choices), read when argparse first
    checks or prints them, not when the parser is built."""

    @staticmethod
    def _names() -> list[str]:
        from privreg.budget.filters import FILTERS

        return sorted(FILTERS)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __len__(self) -> int:
        return len(self._names())


class _DefaultFilters:
    """``BudgetSession``'s default filters as help text, read when the help is printed."""

    def __str__(self) -> str:
        from privreg.budget.session import DEFAULT_FILTERS

        return ", ".join(DEFAULT_FILTERS)


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``ledger init``, ``ledger show`` and ``ledger verify`` to the sub-commands of
    the privreg parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "ledger",
        help="create a ledger holding one budget for many runs ('privreg run ... --ledger PATH'), show it, "
        "or verify it",
    )
    sub = p.add_subparsers(dest="ledger_command", required=True, parser_class=type(p))
    q = sub.add_parser(
        "init",
        help="create a ledger with its budget (once; an existing path is refused)",
        description="Create a privacy ledger holding one budget that several 'privreg run ... --ledger PATH' "
        "runs charge in turn; 'privreg ledger show PATH' lists its runs, 'privreg ledger verify PATH' checks it.",
    )
    q.add_argument(
        "path", help="the new ledger file (e.g. team.sqlite), or a PostgreSQL database (postgresql://HOST/DB#NAME)"
    )
    q.add_argument("--name", metavar="NAME", help="the budget's name in a PostgreSQL database (or URL#NAME)")
    q.add_argument("--epsilon", required=True, metavar="EPS", help="total epsilon of all runs together (> 0)")
    q.add_argument("--delta", default="0", metavar="DELTA", help="total delta, in [0, 1) (default 0)")
    q.add_argument(
        "--neighbouring",
        choices=("add_remove", "replace_one"),
        default="add_remove",
        help="neighbour relation of the budget (default add_remove; replace_one for workflows releasing "
        "local or shuffled reports, see 'privreg describe')",
    )
    action = q.add_argument(
        "--filter",
        dest="filters",
        action="append",
        choices=_FilterNames(),  # a lazy container: argparse only iterates it and tests membership
        metavar="NAME",
        help="a privacy filter keeping the budget, repeatable (one of %(choices)s; "
        "default %(default_filters)s, as BudgetSession uses)",
    )
    # argparse expands %(name)s in a help text from the action's attributes, when printing it
    action.default_filters = _DefaultFilters()  # type: ignore[attr-defined]
    q.add_argument(
        "--event-delta",
        metavar="D",
        help="delta at which curve events (Gaussians, shuffled reports) are priced (default: the budget's "
        "delta, as a single run does; set it to each run's --delta to fit several such runs)",
    )
    q.set_defaults(func=cmd_ledger_init)
    q = sub.add_parser(
        "grant",
        help="print the SQL giving roles their part on a PostgreSQL budget (analysts append, auditors read)",
        description="Print the SQL for a team budget on PostgreSQL: --analyst roles read the ledger and append "
        "only through its append function, --auditor roles read only, --owner roles may create budgets. Run it "
        "as the budget's owner (e.g. 'privreg ledger grant URL#NAME --analyst alice | psql URL').",
    )
    q.add_argument("path", metavar="URL", help="the budget: postgresql://HOST/DB#NAME")
    q.add_argument("--name", metavar="NAME", help="the budget's name (or URL#NAME)")
    q.add_argument("--analyst", action="append", default=[], metavar="ROLE", help="an analyst role, repeatable")
    q.add_argument("--auditor", action="append", default=[], metavar="ROLE", help="an auditor role, repeatable")
    q.add_argument("--owner", action="append", default=[], metavar="ROLE", help="a role that creates budgets")
    q.set_defaults(func=cmd_ledger_grant)
    q = sub.add_parser("show", help="budget, spent, remaining and the runs of a ledger (reads only)")
    q.add_argument("path", help="ledger file")
    q.set_defaults(func=cmd_ledger_show)
    q = sub.add_parser(
        "verify",
        help="verify a ledger: re-derive its decisions, check its hash chain (exit code 3 if anything is flagged)",
        description="Re-account a privacy ledger under the rule that kept it: its releases, runs (partial ones "
        "marked), totals and remaining budget, and flags for anything wrong (exit code 3). 'privreg audit "
        "LEDGER' is the same command.",
    )
    q.add_argument("path", metavar="ledger", help="ledger file (ledger.sqlite in a run's output folder)")
    add_verify_arguments(q)
    q.set_defaults(func=cmd_ledger_verify)
    return p


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``privreg ledger verify`` (and of its alias ``privreg audit``)."""
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE.png", help="draw cumulative epsilon per filter (needs matplotlib)")
    p.add_argument(
        "--expect-head",
        metavar="HEAD",
        help="the 'head' (SEQ:HASH) an earlier verification printed: flags truncation, rollback and rewrites up "
        "to that row",
    )
    p.add_argument(
        "--key-file",
        metavar="PATH",
        help="key of a keyed ledger (the file's exact bytes, at least 16): verifies its HMAC chain",
    )
    p.add_argument(
        "--since",
        metavar="HEAD",
        help="the 'head' (SEQ:HASH) of an earlier verification you trust: checks it is still in the chain, "
        "then re-derives only the releases after the checkpoint before it (incremental)",
    )


def _read_key_file(path: str | None) -> bytes | None:
    """The key of a keyed ledger: the file's bytes exactly as stored (no newline stripped)."""
    if path is None:
        return None
    return files.read_bytes(path, "--key-file")


def _check_plot_name(plot: str) -> None:
    """``--plot`` replaces its file with an image, so it must be named as one: a swapped
    argument (``--plot ledger.sqlite``) or a typo never overwrites a ledger or a data file."""
    from privreg.budget.verify import PLOT_FORMATS

    if Path(plot).suffix.lower().lstrip(".") not in PLOT_FORMATS:
        raise PrivregValueError(
            f"--plot {plot!r} must name an image file ending in ."
            + ", .".join(PLOT_FORMATS)
            + " (e.g. --plot cumulative.png)"
        )


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    """``privreg ledger verify LEDGER`` (alias ``privreg audit LEDGER``): exit 3 if flagged."""
    from privreg.budget.verify import format_report, plot_report, report_json, verify_ledger
    from privreg.core.registry import default_registry

    for failure in default_registry().failures:  # plugins define event types (to decode the ledger) and handlers
        print(f"privreg: warning: {failure}", file=sys.stderr)
    if args.since is not None and args.expect_head is not None:
        raise PrivregValueError("--since already checks its head is in the chain: drop --expect-head")
    if args.plot is not None:
        _check_plot_name(args.plot)
    report = verify_ledger(args.path, expect_head=args.expect_head, key=_read_key_file(args.key_file), since=args.since)
    print(report_json(report) if args.json else format_report(report))
    if args.plot is not None:
        path = plot_report(report, args.plot)
        if not args.json:
            print(f"\nplot written to {path}")
    return 3 if report.flags else 0


def _init_settings(args: argparse.Namespace) -> tuple[PrivacyBudget, tuple[str, ...], float | None]:
    from privreg.budget.session import DEFAULT_FILTERS, PrivacyBudget

    eps = v.check_epsilon("--epsilon", _number("--epsilon", args.epsilon))
    delta = v.check_delta("--delta", _number("--delta", args.delta))
    event_delta: float | None = delta or None
    if args.event_delta is not None:
        event_delta = v.check_delta("--event-delta", _number("--event-delta", args.event_delta), allow_zero=False)
    filters = tuple(dict.fromkeys(args.filters or DEFAULT_FILTERS))
    return PrivacyBudget(epsilon=eps, delta=delta, neighbouring=args.neighbouring), filters, event_delta


def _budget_url(args: argparse.Namespace) -> str | None:
    """``URL#NAME`` of a PostgreSQL budget (from the URL's ``#NAME`` or ``--name``), or None
    for a file (where ``--name`` is refused)."""
    from privreg.budget.store import is_postgres_url

    if not is_postgres_url(args.path):
        if args.name is not None:
            raise PrivregValueError(f"--name names a budget in a PostgreSQL database; {args.path!r} is a file")
        return None
    url, _, named = args.path.partition("#")
    if args.name is not None and named and named != args.name:
        raise PrivregValueError(f"--name {args.name!r} differs from the URL's #{named}: give the name once")
    return f"{url}#{args.name or named}"


def cmd_ledger_grant(args: argparse.Namespace) -> int:
    """``privreg ledger grant URL#NAME --analyst ROLE --auditor ROLE``: print the SQL."""
    from privreg.budget.store_postgres import grant_sql

    url = _budget_url(args)
    if url is None:
        raise PrivregValueError(
            f"{args.path!r} is a file: roles exist only on PostgreSQL (privreg ledger grant postgresql://HOST/DB#NAME)"
        )
    if not (args.analyst or args.auditor or args.owner):
        raise PrivregValueError("name at least one role: --analyst ROLE, --auditor ROLE or --owner ROLE")
    sys.stdout.write(
        grant_sql(url, analysts=tuple(args.analyst), auditors=tuple(args.auditor), owners=tuple(args.owner))
    )
    return 0


def _init_postgres(url: str, args: argparse.Namespace) -> int:
    from privreg.budget.session import BudgetSession
    from privreg.budget.store_postgres import PostgresLedger, parse_url

    shown = parse_url(url, "URL")[2]  # checked before anything is created
    budget, filters, event_delta = _init_settings(args)
    with BudgetSession(budget=budget, filters=filters, event_delta=event_delta) as probe:  # the meta a session keeps
        meta = {k: probe.ledger.meta[k] for k in ("format", "budget", "rule")}
    PostgresLedger.create(url, meta=meta).close()
    print(
        f"created budget {shown}: epsilon {budget.epsilon:g}, delta {budget.delta:g} "
        f"({budget.neighbouring}), filters {', '.join(filters)}"
        + (f", curve events at delta {event_delta:g}" if event_delta is not None else "")
    )
    print(
        f"give roles:  privreg ledger grant {shown} --analyst ROLE --auditor ROLE\n"
        f"charge it:   privreg run WORKFLOW ... --ledger {shown}\nverify it:   privreg ledger verify {shown}"
    )
    return 0


def cmd_ledger_init(args: argparse.Namespace) -> int:
    from privreg.budget.runs import SIDE_FILES, unlink_ledger
    from privreg.budget.session import BudgetSession

    url = _budget_url(args)
    if url is not None:
        return _init_postgres(url, args)
    budget, filters, event_delta = _init_settings(args)  # every value checked before the file exists
    path = Path(args.path)
    for suffix in ("", *SIDE_FILES):
        taken = Path(f"{path}{suffix}")
        if taken.exists() or taken.is_symlink():
            what = "a ledger or file" if not suffix else f"a side file of an earlier ledger ({taken.name})"
            raise PrivregValueError(
                f"ledger {str(taken)!r} exists already ({what}); a ledger is created once: choose a new "
                f"path, or charge the existing ledger with 'privreg run WORKFLOW ... --ledger {path}'"
            )
    if not path.parent.is_dir():  # a typo in the path must not make folders
        raise PrivregValueError(
            f"ledger {str(path)!r}: its folder {str(path.parent)!r} does not exist (or is not a folder); "
            f"create it first (mkdir -p), or check the path"
        )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # claims the path: one init wins
    except FileExistsError:
        raise PrivregValueError(f"ledger {str(path)!r} exists already; choose a new path") from None
    except OSError as exc:
        raise files.file_error(exc, path, "ledger", doing="created") from None
    os.close(fd)
    try:
        BudgetSession(budget=budget, ledger=path, filters=filters, event_delta=event_delta).close()
    except BaseException:
        unlink_ledger(path)  # brand new and never charged
        raise
    print(
        f"created ledger {path}: budget epsilon {budget.epsilon:g}, delta {budget.delta:g} "
        f"({budget.neighbouring}), filters {', '.join(filters)}"
        + (f", curve events at delta {event_delta:g}" if event_delta is not None else "")
    )
    print(f"charge it:  privreg run WORKFLOW ... --ledger {path}\nverify it:  privreg ledger verify {path}")
    return 0


def cmd_ledger_show(args: argparse.Namespace) -> int:
    from privreg.budget.runs import require_ledger
    from privreg.budget.store import is_postgres_url
    from privreg.budget.verify import release_table, verify_ledger

    if not is_postgres_url(args.path):
        require_ledger(args.path, "ledger")
    report = verify_ledger(args.path)
    runs = report.runs()
    partial = sum(1 for run in runs if run["status"] == "partial")
    print(
        f"ledger {args.path}\n"
        f"  budget:    epsilon {report.budget_epsilon:g}, delta {report.budget_delta:g} ({report.neighbouring})\n"
        f"  rule:      {report.rule}\n"
        f"  spent:     epsilon {_fmt(report.spent)} in {len(report.rows)} release(s)\n"
        f"  remaining: epsilon {_fmt(report.remaining)}\n"
        f"  runs:      {len(runs)}" + (f" ({partial} partial: killed or failed after charging)" if partial else "")
    )
    for run in runs:
        status = f"{run['status']} ({run['note']})" if run["note"] else run["status"]
        line = f"    {run['id']}  {run['workflow']}  {run['started']}  releases {run['seqs']}"
        print(f"{line}  {status}  -> {run['output']}")
    if report.rows:
        print("  releases:\n" + "\n".join("    " + line for line in release_table(report).splitlines()))
    if report.flags:
        print(f"  flags:     {len(report.flags)}: run 'privreg ledger verify {args.path}'")
    return 3 if report.flags else 0


def _fmt(x: float | None) -> str:
    """As ``privreg ledger verify`` prints it: None (no filter of the rule supports some event)
    as ``unsupported``."""
    return "unsupported" if x is None else f"{x:.6g}"
