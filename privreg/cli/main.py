"""``privreg``: inspect plugins, describe items, run workflows and the demo.

Bad input -- arguments, files, the environment (permissions, a full disk, existing
paths) -- prints one line (``privreg: error: ...``) and exits 2; an unexpected failure
is a bug: it prints one line saying how to report it and exits 1 (``PRIVREG_DEBUG=1``
shows the traceback). SIGTERM ends a run like Ctrl-C (exit 143), so temporary folders
and worker processes are cleaned up.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from privreg import __version__
from privreg.budget import runs
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import format_report, plot_report, report_json, verify_ledger
from privreg.cli import audit as audit_cli
from privreg.cli import format as fmt
from privreg.cli import ledger as ledger_cli
from privreg.cli import party as party_cli
from privreg.core import files
from privreg.core.charging import NoReleases, jsonable
from privreg.core.cost import Limits
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.items import ItemKind, RegistryItem
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource, SecureRandom
from privreg.core.registry import Registry, default_registry
from privreg.core.workflow import WorkflowContext
from privreg.progress import console_reporter
from privreg.timing import PhaseTimer

# One budget for every plugin's demo step; replace-one: it holds shuffled reports
# (add/remove releases are converted by group privacy).
DEMO_BUDGET = PrivacyBudget(epsilon=32.0, delta=1e-6, neighbouring="replace_one")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise PrivregValueError(f"{message} (see '{self.prog} --help')")


def _registry() -> Registry:
    registry = default_registry()
    for failure in registry.failures:
        print(f"privreg: warning: {failure}", file=sys.stderr)
    return registry


def _echo(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = default_registry()
    rows = [("plugin", "version", "distribution", "module", "items")]
    for p in registry.plugins:
        count = sum(1 for i in registry.items() if i.plugin == p.name)
        rows.append((p.name, p.version or "-", p.distribution or "-", p.module, str(count)))
    print(fmt.table(rows) if len(rows) > 1 else "no plugins loaded")
    if registry.failures:
        print("\nfailed to load:")
        for f in registry.failures:
            print(f"  {f}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    print(fmt.items_by_kind(_registry(), args.kind))
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    print(fmt.describe(_registry().get(args.name)))
    return 0


def parse_workflow_args(item: RegistryItem, tokens: Sequence[str]) -> dict[str, Any]:
    """``--name value`` / ``--name=value`` pairs -> validated parameters of ``item``.
    A bool parameter given without a value means true."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":  # noqa: S105 -- a command-line word, not a password
            raise PrivregValueError(f"expected --PARAMETER VALUE, got {token!r}")
        key, eq, raw = token[2:].partition("=")
        name = key.replace("-", "_")
        param = item.param(name)
        if not eq:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if param.type is bool and (nxt is None or nxt.startswith("--")):
                raw = "true"
            elif nxt is None:
                raise PrivregValueError(f"parameter --{key} needs a value")
            else:
                raw = nxt
                i += 1
        if name in values:
            raise PrivregValueError(f"parameter --{key} given twice")
        values[name] = param.parse(raw)
        i += 1
    return item.bind(values)


def _random_source(seed: int | None) -> RandomSource:
    if seed is None:
        return SecureRandom()
    _echo(
        "privreg: NOTE: --insecure-seed makes all noise reproducible from the seed; "
        "the release has NO privacy and the ledger marks it. Use only for tests."
    )
    return InsecureReproducibleRandom(seed=seed)


def _default_output(name: str) -> Path:
    return Path("privreg-out") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


_RUN_OPTIONS = ("--output", "-o", "--ledger", "--insecure-seed", "--budget-epsilon", "--budget-delta", *Limits.OPTIONS)
_LIMITS_USAGE = "[--max-memory-gib G] [--max-seconds S] [--max-input-gib G] [--max-workers N]"


def _split_run_options(args: argparse.Namespace) -> None:
    """Move the run options given after WORKFLOW out of the workflow's parameters."""
    rest: list[str] = []
    args.limits = {}
    tokens = list(args.params)
    i = 0
    while i < len(tokens):
        key, eq, raw = tokens[i].partition("=")
        if key in _RUN_OPTIONS:
            if not eq:
                if i + 1 >= len(tokens):
                    raise PrivregValueError(f"{key} needs a value")
                raw = tokens[i + 1]
                i += 1
            if key == "--insecure-seed":
                try:
                    args.insecure_seed = int(raw)
                except ValueError:
                    raise PrivregValueError(f"--insecure-seed must be an integer; got {raw!r}") from None
            elif key in Limits.OPTIONS:
                args.limits[Limits.OPTIONS[key]] = raw
            elif key.startswith("--budget-"):
                try:
                    setattr(args, key[2:].replace("-", "_"), float(raw))
                except ValueError:
                    raise PrivregValueError(f"{key} must be a number; got {raw!r}") from None
            elif key == "--ledger":
                args.ledger = raw
            else:
                args.output = raw
        else:
            rest.append(tokens[i])
        i += 1
    args.params = rest
    args.limits = Limits(**args.limits)  # refuses a bad limit before anything is opened


_RUN_USAGE = (
    "[--PARAMETER VALUE ...] [--output DIR] [--ledger PATH] [--insecure-seed N] "
    "[--budget-epsilon EPS] [--budget-delta DELTA] " + _LIMITS_USAGE
)


def _run_overview(registry: Registry) -> str:
    """``privreg run --help``: the usage and every registered workflow with its summary."""
    rows = [(f"  {w.name}", w.summary) for w in registry.items(ItemKind.WORKFLOW)]
    return (
        f"usage: privreg run WORKFLOW {_RUN_USAGE}\n\n"
        "Run a registered workflow under a privacy budget: a new one per run, written to the output\n"
        "folder's ledger.sqlite (--budget-epsilon/--budget-delta, default the workflow's epsilon and\n"
        "delta), or one shared across runs with --ledger PATH (made by 'privreg ledger init').\n\n"
        "workflows:\n" + (fmt.table(rows) if rows else "  (none registered: see 'privreg plugins')") + "\n\n"
        "'privreg run WORKFLOW --help' lists a workflow's parameters."
    )


def cmd_run(args: argparse.Namespace) -> int:
    if args.workflow is None or args.workflow in ("-h", "--help"):
        if args.help or args.workflow is not None:
            print(_run_overview(_registry()))
            return 0
        raise PrivregValueError("privreg run needs a WORKFLOW; 'privreg run --help' lists them")
    item = _registry().get(args.workflow, kind=ItemKind.WORKFLOW)
    _split_run_options(args)
    if args.help or any(t in ("-h", "--help") for t in args.params):
        print(f"usage: privreg run {item.name} {_RUN_USAGE}\n")
        print(fmt.describe(item))
        return 0
    params = parse_workflow_args(item, args.params)
    budget_flags = args.budget_epsilon is not None or args.budget_delta is not None
    if not item.charges and (budget_flags or args.ledger is not None):
        raise PrivregValueError(
            f"workflow {item.name!r} releases nothing differentially private; drop "
            + ("--ledger" if args.ledger is not None else "--budget-epsilon/--budget-delta")
        )
    if args.ledger is not None and budget_flags:
        raise PrivregValueError(
            f"--budget-epsilon/--budget-delta cannot be combined with --ledger {args.ledger!r}: the budget is "
            f"the ledger's, set by 'privreg ledger init'; drop them (the run may spend its --epsilon)"
        )
    if args.ledger is not None:
        runs.require_ledger(args.ledger, "--ledger")  # before any folder is made
    budget = _run_budget(args, params, item.neighbouring) if item.charges and args.ledger is None else None
    wanted = Path(args.output) if args.output else _default_output(item.name)
    created = not wanted.exists()
    output = files.make_dir(wanted, "--output folder")
    try:
        with runs.folder_lock(output):
            return _run_in(item, args, params, budget, output, created)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                output.rmdir()  # only if empty
        raise


def _run_in(
    item: RegistryItem,
    args: argparse.Namespace,
    params: dict[str, Any],
    budget: PrivacyBudget | None,
    output: Path,
    created: bool,
) -> int:
    """The run itself, holding the lock of its output folder."""
    run = runs.new_run(item.name, output)
    ledger_path = Path(args.ledger) if args.ledger is not None else output / runs.LEDGER_NAME
    fresh_ledger = False  # a ledger this run created and charged nothing to: removed if the run fails
    try:
        if not item.charges:  # a cryptographic protocol: no ledger, any charge fails
            result, elapsed, rng = _execute(item, args, params, output, NoReleases(item.name))
            status = "no differentially private release (nothing charged)"
            written = ["run.json"]
        elif budget is not None:  # a ledger of its own in the output folder
            runs.clear_failed_run(output)  # a failed run's ledger never blocks a rerun
            fresh_ledger = True
            # the basic filter alone, so a workflow calibrated to its whole (eps, delta) fits; a curve
            # event (shuffled reports, a block of Gaussians) is priced at the budget's delta
            with BudgetSession(
                budget=budget, ledger=ledger_path, filters=("basic",), event_delta=budget.delta or None
            ) as session:
                try:
                    charger = runs.RunCharger(session, run)
                    result, elapsed, rng = _execute(item, args, params, output, charger)  # charges are committed
                except BaseException:
                    fresh_ledger = session.ledger.head()[0] == 0  # a charge is kept: it was spent
                    raise
                fresh_ledger = False
                charged, spent = session.ledger.head()[0], budget.epsilon - float(session.remaining())
            status = (
                f"releases charged: {charged}   epsilon spent: {spent:.6g} of {budget.epsilon:g} "
                f"(delta {budget.delta:g})"
            )
            written = ["run.json", runs.LEDGER_NAME]
        else:  # --ledger: a shared ledger and its budget
            if (output / "run.json").exists():
                raise PrivregValueError(
                    f"--output folder {str(output)!r} holds an earlier run (run.json); choose a new --output folder"
                )
            with runs.run_lock(args.ledger):
                shared, gate = runs.open_shared(args.ledger, item, params)  # refuses what cannot fit
                with shared, gate:
                    before = shared.ledger.head()[0]
                    charger = runs.RunCharger(shared, run, gate)
                    result, elapsed, rng = _execute(item, args, params, output, charger)
                    charged = shared.ledger.head()[0] - before
                    total, remaining = shared.budget.epsilon, float(shared.remaining())
            status = (
                f"releases charged: {charged}   ledger {ledger_path}: epsilon spent {total - remaining:.6g} "
                f"of {total:g}, remaining {remaining:.6g}"
            )
            written = ["run.json"]
    except BaseException:
        _remove_debris(output, created=created, ledger=ledger_path if fresh_ledger else None)
        raise
    summary = {
        "workflow": item.name,
        "plugin": item.plugin,
        "parameters": jsonable(params, name="parameters"),
        "metrics": jsonable(dict(result.metrics), name="metrics"),
        "seconds": elapsed,
        "randomness": rng.describe(),
    }
    if item.charges:
        summary["run"] = run["id"]
        summary["ledger"] = str(ledger_path.absolute())
    text = json.dumps(_finite(summary), indent=2, allow_nan=False)
    files.write_text(output / "run.json", text + "\n", "run summary")
    print(result.summary)
    print(f"\n{status}   time: {elapsed:.2f} s")
    print(f"outputs: {output}/ (" + ", ".join(written + [p.name for p in result.outputs.values()]) + ")")
    if item.charges:
        print(f"audit:   privreg audit {ledger_path}")
    return 0


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


def _remove_debris(output: Path, *, created: bool, ledger: Path | None) -> None:
    """After a failed run: remove the ledger it created if nothing was charged to it (and
    its side files), and the output folder if the run created it and it is empty."""
    if ledger is not None:
        for suffix in ("", "-lock", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{ledger}{suffix}")
    if created:
        with contextlib.suppress(OSError):
            output.rmdir()  # only if empty


def _execute(
    item: Any, args: argparse.Namespace, params: dict[str, Any], output: Path, charger: Any
) -> tuple[Any, float, Any]:
    """Run the workflow with ``charger``: ``(result, seconds, random source)``."""
    rng = _random_source(args.insecure_seed)
    reporter = console_reporter()  # stderr: tqdm bars on a terminal, else plain lines
    ctx = WorkflowContext(
        charger=charger, rng=rng, output_dir=output, echo=reporter.echo, progress=reporter, limits=args.limits
    )
    timer = PhaseTimer()
    try:
        with timer.phase("run"):
            result = item.run(ctx, params)
    finally:
        reporter.close()
    return result, timer.wall["run"], rng


def _run_budget(args: argparse.Namespace, params: dict[str, Any], neighbouring: str) -> PrivacyBudget:
    """--budget-epsilon/--budget-delta, defaulting to the workflow's epsilon and delta."""
    eps = args.budget_epsilon if args.budget_epsilon is not None else params.get("epsilon")
    if eps is None:
        raise PrivregValueError("this workflow has no epsilon parameter: pass --budget-epsilon")
    delta = args.budget_delta if args.budget_delta is not None else params.get("delta", 0.0)
    return PrivacyBudget(epsilon=eps, delta=delta, neighbouring=neighbouring)


def _read_key_file(path: str | None) -> bytes | None:
    """The key of a keyed ledger: the file's bytes exactly as stored (no newline stripped)."""
    if path is None:
        return None
    return files.read_bytes(path, "--key-file")


def cmd_audit(args: argparse.Namespace) -> int:
    _registry()  # plugins define event types (to decode the ledger) and their accounting handlers
    report = verify_ledger(args.ledger, expect_head=args.expect_head, key=_read_key_file(args.key_file))
    print(report_json(report) if args.json else format_report(report))
    if args.plot:
        path = plot_report(report, args.plot)
        if not args.json:
            print(f"\nplot written to {path}")
    return 3 if report.flags else 0


def _core_tour(registry: Registry) -> str:
    counts = {fmt.PLURAL[k]: len(registry.items(k)) for k in ItemKind}
    plugins = ", ".join(p.name for p in registry.plugins) or "none"
    return (
        f"Plugins loaded: {plugins}. Registered items: "
        + ", ".join(f"{k} {n}" for k, n in counts.items())
        + f".\nEvery release below is charged to one budget (epsilon {DEMO_BUDGET.epsilon:g}, "
        f"delta {DEMO_BUDGET.delta:g}, replace-one neighbours: it holds local reports) before any noise "
        f"is drawn, by the basic filter (fully adaptive composition)."
    )


def cmd_demo(args: argparse.Namespace) -> int:
    registry = _registry()
    if args.output:
        files.make_dir(args.output, "--output folder")
    ledger = Path(args.output) / "ledger.sqlite" if args.output else ":memory:"
    # the basic filter alone: a few large releases, each step calibrated to its own (eps, delta)
    session = BudgetSession(budget=DEMO_BUDGET, ledger=ledger, filters=("basic",), event_delta=DEMO_BUDGET.delta / 10)
    reporter = console_reporter()
    ctx = WorkflowContext(
        charger=session,
        rng=_random_source(args.insecure_seed),
        output_dir=args.output,
        echo=reporter.echo,
        progress=reporter,
    )
    steps: list[tuple[str, Callable[[WorkflowContext], str]]] = [("The registry", lambda c: _core_tour(registry))]
    steps += [(s.title, s.run) for s in registry.demo_steps()]
    timer = PhaseTimer()
    for n, (title, run) in enumerate(steps, 1):
        try:
            with timer.phase(str(n)):
                text = run(ctx)
        finally:
            reporter.close()
        print(f"== {n}. {title}  ({timer.wall[str(n)]:.2f} s)\n{text}\n")
    if args.output:
        session.close()
        print("== Audit of this demo's ledger\n" + format_report(verify_ledger(ledger)))
    else:
        print("== Privacy ledger of this demo\n" + fmt.charges(r.charge for r in session.ledger.rows()))
        print(
            f"\nspent {DEMO_BUDGET.epsilon - float(session.remaining()):.6g} of epsilon "
            f"{DEMO_BUDGET.epsilon:g} at delta {DEMO_BUDGET.delta:g} ({session.rule})"
        )
        session.close()
    print(f"\ndemo finished in {timer.elapsed():.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="privreg", description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"privreg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("plugins", help="list loaded plugins and any that failed to load")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("list", help="list registered items, grouped by kind")
    p.add_argument("--kind", choices=[k.value for k in ItemKind], help="only this kind")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("describe", help="parameters, defaults, citation and guarantees of an item")
    p.add_argument("name", help="item name (see 'privreg list')")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser(
        "run",
        help="run a workflow; 'privreg run --help' lists them, 'privreg run NAME --help' its parameters",
        add_help=False,
        usage="privreg run WORKFLOW " + _RUN_USAGE,
    )
    p.add_argument("workflow", nargs="?", help="workflow name")
    p.add_argument("-h", "--help", action="store_true", help="list the workflows (or a workflow's parameters)")
    p.add_argument("--output", "-o", metavar="DIR", help="output folder (default privreg-out/NAME-TIME)")
    p.add_argument(
        "--ledger",
        metavar="PATH",
        help="charge this shared ledger (made by 'privreg ledger init'): its budget, not --budget-*",
    )
    p.add_argument(
        "--insecure-seed", type=int, metavar="N", help="reproducible noise for tests: NO privacy, marked in the ledger"
    )
    p.add_argument(
        "--budget-epsilon",
        type=float,
        metavar="EPS",
        help="total epsilon the run may spend (default: the workflow's epsilon)",
    )
    p.add_argument(
        "--budget-delta", type=float, metavar="DELTA", help="total delta (default: the workflow's delta, or 0)"
    )
    p.add_argument("params", nargs=argparse.REMAINDER, help="workflow parameters")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("audit", help="audit a privacy ledger (exit code 3 if anything is flagged)")
    p.add_argument("ledger", help="ledger file (ledger.sqlite in a run's output folder)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE.png", help="draw cumulative epsilon per accountant (needs matplotlib)")
    p.add_argument(
        "--expect-head",
        metavar="HEAD",
        help="the 'head' (SEQ:HASH) an earlier audit printed: flags truncation, rollback and rewrites up to that row",
    )
    p.add_argument(
        "--key-file",
        metavar="PATH",
        help="key of a keyed ledger (the file's exact bytes, at least 16): verifies its HMAC chain",
    )
    p.set_defaults(func=cmd_audit)

    audit_cli.add_parser(sub)
    ledger_cli.add_parser(sub)
    party_cli.add_parser(sub)

    p = sub.add_parser("demo", help="a short end-to-end tour on real data (< 2 minutes)")
    p.add_argument("--output", "-o", metavar="DIR", help="keep the demo's ledger here and audit it")
    p.add_argument(
        "--insecure-seed", type=int, metavar="N", help="reproducible noise for tests: NO privacy, marked in the ledger"
    )
    p.set_defaults(func=cmd_demo)
    return parser


#: errno values that blame the environment wherever they arise (disk, quota, mount)
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EROFS}
#: errno values that blame the user when they name a path the user gave (or one inside it)
_PATH_ERRNOS = {errno.EACCES, errno.EPERM, errno.EEXIST, errno.ENOENT, errno.EISDIR, errno.ENOTDIR}


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _is_user_path(filename: object, argv: Sequence[str]) -> bool:
    """Whether ``filename`` is a path given on the command line, or inside one."""
    if not isinstance(filename, (str, bytes, os.PathLike)):
        return False
    name = os.path.abspath(os.fsdecode(filename))
    for token in argv:
        value = token.partition("=")[2] if token.startswith("--") and "=" in token else token
        if not value or value.startswith("-"):
            continue
        given = os.path.abspath(value)
        if name == given or name.startswith(given.rstrip(os.sep) + os.sep):
            return True
    return False


def environment_error(exc: OSError, argv: Sequence[str]) -> PrivregValueError | None:
    """The one-line error of an ``OSError`` the environment or a user-given path caused
    (the last resort behind the file helpers of :mod:`privreg.core.files`), or ``None``
    when it may be a bug (and must stay an internal error)."""
    if exc.errno in _ENVIRONMENT_ERRNOS:
        if exc.filename is None:
            return PrivregValueError(
                f"cannot write ({exc.strerror or 'no space left'}); free some space or choose an --output "
                f"folder on another disk"
            )
        return files.file_error(exc, os.fsdecode(exc.filename), "file", doing="written")
    if exc.errno in _PATH_ERRNOS and _is_user_path(exc.filename, argv):
        return files.file_error(exc, os.fsdecode(exc.filename), "file", doing="used")
    return None


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanups run."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def _where(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return "unknown place"
    code = last.tb_frame.f_code
    return f"{os.path.basename(code.co_filename)}:{last.tb_lineno} in {code.co_name}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command in ("run", "demo"):
            files.sweep_temp_dirs()  # temporary folders of runs that were killed
        return int(args.func(args))
    except PrivregError as exc:
        print(f"privreg: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except _Terminated:
        print("privreg: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:  # output piped into e.g. head: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- silence the flush at exit
        return 0
    except KeyboardInterrupt:
        print("privreg: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        mapped = environment_error(exc, argv)
        if mapped is None:
            return _internal_error(exc)
        print(f"privreg: error: {_one_line(str(mapped))}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- top level: a bug, not bad input; one line, traceback on request
        return _internal_error(exc)


def _internal_error(exc: BaseException) -> int:
    """A bug: one line saying where and how to report it (the message itself may hold
    data, so it is shown only in the PRIVREG_DEBUG=1 traceback)."""
    if os.environ.get("PRIVREG_DEBUG"):
        traceback.print_exception(exc)
    print(
        f"privreg: internal error: {type(exc).__name__} at {_where(exc)}. This is a bug in privreg: please "
        f"report it as CONTRIBUTING.md says ('Reporting a bug'), with the output of the same command "
        f"run with PRIVREG_DEBUG=1",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
