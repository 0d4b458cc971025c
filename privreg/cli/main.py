"""``privreg``: inspect plugins, describe items, run workflows and the demo.

Bad input -- arguments, files, the environment (permissions, a full disk, existing
paths) -- prints one line (``privreg: error: ...``) and exits 2; an unexpected failure
is a bug: it prints one line saying how to report it and exits 1 (``PRIVREG_DEBUG=1``
shows the traceback). SIGTERM ends a run like Ctrl-C (exit 143), so temporary folders
and worker processes are cleaned up.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import attrs

from privreg import __version__
from privreg.cli import args as cli_args
from privreg.cli import audit as audit_cli
from privreg.cli import format as fmt
from privreg.cli import ledger as ledger_cli
from privreg.cli import party as party_cli
from privreg.core import files
from privreg.core.cost import Limits
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.items import ItemKind
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource, SecureRandom
from privreg.progress import console_reporter
from privreg.timing import PhaseTimer

if TYPE_CHECKING:
    from privreg.budget import runs
    from privreg.budget.session import PrivacyBudget
    from privreg.core.items import RegistryItem
    from privreg.core.registry import Registry
    from privreg.core.workflow import WorkflowContext, WorkflowResult

# The budget package (accountants: numpy, scipy) and the registry (events, plugins) are
# imported by the commands, never at start-up: 'privreg --version' and '--help' answer
# without them (benchmarks/startup.py, tests/test_startup.py).

# One budget for every plugin's demo step; replace-one: it holds shuffled reports
# (add/remove releases are converted by group privacy).
DEMO_EPSILON, DEMO_DELTA, DEMO_NEIGHBOURING = 32.0, 1e-6, "replace_one"


def demo_budget() -> PrivacyBudget:
    """The one budget every step of ``privreg demo`` charges."""
    from privreg.budget.session import PrivacyBudget

    return PrivacyBudget(epsilon=DEMO_EPSILON, delta=DEMO_DELTA, neighbouring=DEMO_NEIGHBOURING)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, cli_args.StoreOnce)  # an option given twice is refused
        self.register("action", "store", cli_args.StoreOnce)

    def error(self, message: str) -> NoReturn:
        raise PrivregValueError(f"{message} (see '{self.prog} --help')")


def _registry() -> Registry:
    from privreg.core.registry import default_registry

    registry = default_registry()
    for failure in registry.failures:
        print(f"privreg: warning: {failure}", file=sys.stderr)
    return registry


def _echo(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_plugins(args: argparse.Namespace) -> int:
    from privreg.core.registry import default_registry

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
_RUN_FLAGS = ("--overwrite", "--allow-large-epsilon")
_LIMITS_USAGE = "[--max-memory-gib G] [--max-seconds S] [--max-input-gib G] [--max-workers N]"


def _split_run_options(args: argparse.Namespace) -> None:
    """Move the run options given after WORKFLOW out of the workflow's parameters."""
    rest: list[str] = []
    given: set[str] = set()
    args.limits = {}
    tokens = list(args.params)
    i = 0
    while i < len(tokens):
        key, eq, raw = tokens[i].partition("=")
        if tokens[i] in _RUN_FLAGS:
            setattr(args, tokens[i][2:].replace("-", "_"), True)
        elif key in _RUN_OPTIONS:
            dest = Limits.OPTIONS.get(key) or ("output" if key == "-o" else key[2:].replace("-", "_"))
            before = key not in Limits.OPTIONS and getattr(args, dest, None) is not None  # before WORKFLOW
            if dest in given or before:
                raise PrivregValueError(f"{key} given twice; give it once")
            given.add(dest)
            if not eq:
                if i + 1 >= len(tokens):
                    raise PrivregValueError(f"{key} needs a value")
                raw = tokens[i + 1]
                i += 1
            if key == "--insecure-seed":
                args.insecure_seed = cli_args.parse_int("--insecure-seed", raw)
            elif key in Limits.OPTIONS:
                args.limits[Limits.OPTIONS[key]] = raw
            elif key.startswith("--budget-"):
                setattr(args, key[2:].replace("-", "_"), cli_args.parse_float(key, raw))
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
    "[--budget-epsilon EPS] [--budget-delta DELTA] [--allow-large-epsilon] [--overwrite] " + _LIMITS_USAGE
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


def _in_flags(exc: PrivregError, item: Any) -> PrivregError:
    """``exc`` (the same object, class and attributes) with its message naming the
    workflow's parameters as flags."""
    from privreg.cli.flags import as_flags

    if exc.args and isinstance(exc.args[0], str):
        exc.args = (as_flags(exc.args[0], [p.name for p in item.params]), *exc.args[1:])
    return exc


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
    try:
        params = parse_workflow_args(item, args.params)
    except PrivregError as exc:
        raise _in_flags(exc, item) from None
    from privreg.budget import run_guards

    run_guards.check_epsilon_ceiling(item, params, args.budget_epsilon, allow=args.allow_large_epsilon)
    run_guards.check_output_folder(args.output, overwrite=args.overwrite)
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
    from privreg.budget import runs

    if args.ledger is not None:
        runs.require_ledger(args.ledger, "--ledger")  # before any folder is made
    budget = _run_budget(args, item, params) if item.charges else None
    output = Path(args.output) if args.output is not None else _default_output(item.name)
    reporter = console_reporter()  # stderr: tqdm bars on a terminal, else plain lines
    try:
        done = runs.run_workflow(
            item,
            params,
            budget=budget,
            ledger=args.ledger,
            output=output,
            progress=reporter,
            echo=reporter.echo,
            rng=_random_source(args.insecure_seed),
            limits=args.limits,
        )
    finally:
        reporter.close()
    try:
        print(done.result.summary)
        print(f"\n{_run_status(done)}   time: {done.seconds:.2f} s")
        written = ["run.json"] + ([runs.LEDGER_NAME] if item.charges and not done.shared else [])
        print(f"outputs: {output}/ (" + ", ".join(written + [p.name for p in done.result.outputs.values()]) + ")")
        if done.ledger is not None:
            print(f"verify:  privreg ledger verify {done.ledger}")
    except (KeyboardInterrupt, _Terminated) as exc:  # the run is complete: say so, not "nothing charged"
        exc.add_note(f"the run is complete; {_run_status(done)}")
        raise
    return 0


def _run_status(done: runs.RunResult) -> str:
    """The line saying what a finished run charged."""
    if done.budget is None:
        return "no differentially private release (nothing charged)"
    total, remaining = done.budget.epsilon, done.epsilon_remaining
    spent = "unsupported" if done.epsilon_spent is None else f"{done.epsilon_spent:.6g}"
    if done.shared:
        return (
            f"releases charged: {done.releases}   ledger {done.ledger}: epsilon spent {spent} of {total:g}, "
            f"remaining {remaining:.6g}"
        )
    return f"releases charged: {done.releases}   epsilon spent: {spent} of {total:g} (delta {done.budget.delta:g})"


def _run_budget(args: argparse.Namespace, item: RegistryItem, params: dict[str, Any]) -> PrivacyBudget | None:
    """--budget-epsilon/--budget-delta, each defaulting to the workflow's stated budget
    (its budget_params); None without either flag (the run then uses the stated budget)."""
    if args.budget_epsilon is None and args.budget_delta is None:
        return None
    stated = item.budget_of(params)
    eps = args.budget_epsilon if args.budget_epsilon is not None else (stated[0] if stated else None)
    if eps is None:
        raise PrivregValueError(f"workflow {item.name!r} states no budget in its parameters: pass --budget-epsilon")
    delta = args.budget_delta if args.budget_delta is not None else (stated[1] if stated else 0.0)
    from privreg.budget.session import PrivacyBudget

    return PrivacyBudget(epsilon=eps, delta=delta, neighbouring=item.neighbouring)


def _core_tour(registry: Registry) -> str:
    counts = {fmt.PLURAL[k]: len(registry.items(k)) for k in ItemKind}
    plugins = ", ".join(p.name for p in registry.plugins) or "none"
    return (
        f"Plugins loaded: {plugins}. Registered items: "
        + ", ".join(f"{k} {n}" for k, n in counts.items())
        + f".\nEvery release below is charged to one budget (epsilon {DEMO_EPSILON:g}, "
        f"delta {DEMO_DELTA:g}, replace-one neighbours: it holds local reports) before any noise "
        f"is drawn, by the basic filter (fully adaptive composition)."
    )


@attrs.frozen
class DemoTour:
    """``privreg demo`` as a workflow for :func:`~privreg.budget.runs.run_workflow`: its
    steps (the core tour, then each plugin's) charge one run under :func:`demo_budget`,
    each printed as it finishes."""

    steps: tuple[tuple[str, Callable[[WorkflowContext], str]], ...]
    close_progress: Callable[[], None]
    name: str = "demo"
    plugin: str = "privreg"
    charges: bool = True
    neighbouring: str = DEMO_NEIGHBOURING
    budget_params: tuple[str, ...] = ()  # its budget is demo_budget(), stated by no parameter

    def bind(self, values: Mapping[str, Any] | None = None, /) -> dict[str, Any]:
        if values:
            raise PrivregValueError(f"the demo takes no parameters; got {sorted(values)}")
        return {}

    def budget_of(self, params: Mapping[str, Any]) -> tuple[float, float] | None:
        return None

    def run(self, context: WorkflowContext, values: Mapping[str, Any] | None = None, /) -> WorkflowResult:
        timer = PhaseTimer()
        for n, (title, run) in enumerate(self.steps, 1):
            try:
                with timer.phase(str(n)):
                    text = run(context)
            finally:
                self.close_progress()
            print(f"== {n}. {title}  ({timer.wall[str(n)]:.2f} s)\n{text}\n", flush=True)
        from privreg.core.workflow import WorkflowResult

        return WorkflowResult(summary="", metrics={"steps": len(self.steps)})


def cmd_demo(args: argparse.Namespace) -> int:
    from privreg.budget import runs
    from privreg.budget.verify import format_report, stated_text, verify_ledger

    registry = _registry()
    started = time.perf_counter()
    steps: list[tuple[str, Callable[[WorkflowContext], str]]] = [("The registry", lambda c: _core_tour(registry))]
    steps += [(s.title, s.run) for s in registry.demo_steps()]
    reporter = console_reporter()
    tour = DemoTour(steps=tuple(steps), close_progress=reporter.close)
    try:
        # the basic filter alone: a few large releases, each step calibrated to its own (eps, delta)
        done = runs.run_workflow(
            tour,
            budget=demo_budget(),
            output=args.output,
            progress=reporter,
            echo=reporter.echo,
            rng=_random_source(args.insecure_seed),
            event_delta=DEMO_DELTA / 10,
        )
    finally:
        reporter.close()
    if done.ledger is not None:
        print("== Verification of this demo's ledger\n" + format_report(verify_ledger(done.ledger)))
    else:
        rows = [("#", "release", "mechanism", "as stated", "epsilon charged")]
        rows += [
            (str(c.number), c.label or "-", c.mechanism, stated_text(c.stated, c.event), f"{c.epsilon:.6g}")
            for c in done.charged
        ]
        print("== Privacy ledger of this demo\n" + (fmt.table(rows) if done.charged else "no releases were charged"))
        print(
            f"\nspent {done.epsilon_spent:.6g} of epsilon {DEMO_EPSILON:g} at delta {DEMO_DELTA:g} "
            f"(basic filter, fully adaptive; noise: "
            f"{'REPRODUCIBLE, test only' if done.randomness.get('reproducible') else 'csprng'})"
        )
    print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
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
        "--insecure-seed",
        type=cli_args.SEED,
        metavar="N",
        help="reproducible noise for tests: NO privacy, marked in the ledger",
    )
    p.add_argument(
        "--budget-epsilon",
        type=cli_args.float_arg("--budget-epsilon", 0.0, cli_args.INF),
        metavar="EPS",
        help="total epsilon the run may spend (default: the workflow's epsilon)",
    )
    p.add_argument(
        "--budget-delta",
        type=cli_args.float_arg("--budget-delta", 0.0, 1.0),
        metavar="DELTA",
        help="total delta (default: the workflow's delta, or 0)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of a workflow in --output")
    p.add_argument("--allow-large-epsilon", action="store_true", help="allow an epsilon above the workflow's largest")
    p.add_argument("params", nargs=argparse.REMAINDER, help="workflow parameters")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "audit",
        help="the same as 'privreg ledger verify' (kept as an alias; 'audit-mechanism' is the empirical auditor)",
    )
    p.add_argument("path", metavar="ledger", help="ledger file (ledger.sqlite in a run's output folder)")
    ledger_cli.add_verify_arguments(p)
    p.set_defaults(func=ledger_cli.cmd_ledger_verify)

    audit_cli.add_parser(sub)
    ledger_cli.add_parser(sub)
    party_cli.add_parser(sub)

    p = sub.add_parser("demo", help="a short end-to-end tour on real data (< 2 minutes)")
    p.add_argument("--output", "-o", metavar="DIR", help="keep the demo's ledger here and verify it")
    p.add_argument(
        "--insecure-seed",
        type=cli_args.SEED,
        metavar="N",
        help="reproducible noise for tests: NO privacy, marked in the ledger",
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
    except _Terminated as exc:
        print(f"privreg: terminated{_charged_note(exc, _command(argv))}", file=sys.stderr)
        return 143
    except BrokenPipeError:  # output piped into e.g. head: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- silence the flush at exit
        return 0
    except KeyboardInterrupt as exc:
        print(f"privreg: interrupted{_charged_note(exc, _command(argv))}", file=sys.stderr)
        return 130
    except OSError as exc:
        mapped = environment_error(exc, argv)
        if mapped is None:
            return _internal_error(exc)
        print(f"privreg: error: {_one_line(str(mapped))}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- top level: a bug, not bad input; one line, traceback on request
        return _internal_error(exc)


def _command(argv: Sequence[str]) -> str | None:
    """The sub-command of ``argv`` (its first word not starting with ``-``), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def _charged_note(exc: BaseException, command: str | None) -> str:
    """What an interrupted run had charged, for the one line of the interrupt: the note
    the run added to the exception, else (``privreg run``) that nothing was charged."""
    notes = [n for n in getattr(exc, "__notes__", ()) if n]
    if notes:
        return ": " + _one_line(notes[-1])
    return ": nothing was charged" if command == "run" else ""


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
