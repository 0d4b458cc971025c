"""``privreg ledger init|show|verify``: create a ledger holding one budget for many runs,
show it, and verify it (``privreg audit LEDGER`` is kept as an alias of ``verify``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from privreg.budget.filters import FILTERS
from privreg.budget.runs import SIDE_FILES, require_ledger, unlink_ledger
from privreg.budget.session import DEFAULT_FILTERS, BudgetSession, PrivacyBudget
from privreg.budget.verify import format_report, plot_report, release_table, report_json, verify_ledger
from privreg.core import files
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.core.numtext import parse_float
from privreg.core.registry import default_registry

__all__ = ["add_parser", "add_verify_arguments", "cmd_ledger_init", "cmd_ledger_show", "cmd_ledger_verify"]


def _echo(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- privreg ledger init / show / verify ----------------------------------------------------


def _number(option: str, raw: str) -> float:
    try:
        return parse_float(option, raw)
    except PrivregValueError:
        raise PrivregValueError(f"{option} must be a number; got {raw!r}. Pass e.g. {option} 1.0") from None


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
    q.add_argument("path", help="the new ledger file (e.g. team.sqlite)")
    q.add_argument("--epsilon", required=True, metavar="EPS", help="total epsilon of all runs together (> 0)")
    q.add_argument("--delta", default="0", metavar="DELTA", help="total delta, in [0, 1) (default 0)")
    q.add_argument(
        "--neighbouring",
        choices=("add_remove", "replace_one"),
        default="add_remove",
        help="neighbour relation of the budget (default add_remove; replace_one for workflows releasing "
        "local or shuffled reports, see 'privreg describe')",
    )
    q.add_argument(
        "--filter",
        dest="filters",
        action="append",
        choices=sorted(FILTERS),
        metavar="NAME",
        help=f"a privacy filter keeping the budget, repeatable (one of {', '.join(sorted(FILTERS))}; "
        f"default {', '.join(DEFAULT_FILTERS)}, as BudgetSession uses)",
    )
    q.add_argument(
        "--event-delta",
        metavar="D",
        help="delta at which curve events (Gaussians, shuffled reports) are priced (default: the budget's "
        "delta, as a single run does; set it to each run's --delta to fit several such runs)",
    )
    q.set_defaults(func=cmd_ledger_init)
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


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    """``privreg ledger verify LEDGER`` (alias ``privreg audit LEDGER``): exit 3 if flagged."""
    for failure in default_registry().failures:  # plugins define event types (to decode the ledger) and handlers
        print(f"privreg: warning: {failure}", file=sys.stderr)
    if args.since is not None and args.expect_head is not None:
        raise PrivregValueError("--since already checks its head is in the chain: drop --expect-head")
    report = verify_ledger(args.path, expect_head=args.expect_head, key=_read_key_file(args.key_file), since=args.since)
    print(report_json(report) if args.json else format_report(report))
    if args.plot:
        path = plot_report(report, args.plot)
        if not args.json:
            print(f"\nplot written to {path}")
    return 3 if report.flags else 0


def _init_settings(args: argparse.Namespace) -> tuple[PrivacyBudget, tuple[str, ...], float | None]:
    eps = v.check_epsilon("--epsilon", _number("--epsilon", args.epsilon))
    delta = v.check_delta("--delta", _number("--delta", args.delta))
    event_delta: float | None = delta or None
    if args.event_delta is not None:
        event_delta = v.check_delta("--event-delta", _number("--event-delta", args.event_delta), allow_zero=False)
    filters = tuple(dict.fromkeys(args.filters or DEFAULT_FILTERS))
    return PrivacyBudget(epsilon=eps, delta=delta, neighbouring=args.neighbouring), filters, event_delta


def cmd_ledger_init(args: argparse.Namespace) -> int:
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
