"""``privreg``: inspect plugins, describe items, run workflows and the demo.

Bad input prints one line (``privreg: error: ...``) and exits 2; an unexpected failure
prints one line and exits 1 (``PRIVREG_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from privreg import __version__
from privreg.cli import format as fmt
from privreg.core.charging import EventLog, jsonable
from privreg.core.errors import PrivregError, PrivregValueError
from privreg.core.items import ItemKind, RegistryItem
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource, SecureRandom
from privreg.core.registry import Registry, default_registry
from privreg.core.workflow import WorkflowContext

DEMO_BUDGET_SECONDS = 120


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
        if not token.startswith("--") or token == "--":
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


def _split_run_options(args: argparse.Namespace) -> None:
    """Move --output/-o and --insecure-seed given after WORKFLOW out of its parameters."""
    rest: list[str] = []
    tokens = list(args.params)
    i = 0
    while i < len(tokens):
        key, eq, raw = tokens[i].partition("=")
        if key in ("--output", "-o", "--insecure-seed"):
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
            else:
                args.output = raw
        else:
            rest.append(tokens[i])
        i += 1
    args.params = rest


def cmd_run(args: argparse.Namespace) -> int:
    item = _registry().get(args.workflow, kind=ItemKind.WORKFLOW)
    _split_run_options(args)
    if any(t in ("-h", "--help") for t in args.params):
        print(f"usage: privreg run {item.name} [--PARAMETER VALUE ...] [--output DIR] "
              f"[--insecure-seed N]\n")
        print(fmt.describe(item))
        return 0
    params = parse_workflow_args(item, args.params)
    output = Path(args.output) if args.output else _default_output(item.name)
    log = EventLog()
    ctx = WorkflowContext(charger=log, rng=_random_source(args.insecure_seed),
                          output_dir=output, echo=_echo)
    started = time.perf_counter()
    try:
        result = item.run(ctx, params)
    finally:  # whatever was charged stays on record, even if the workflow failed
        output.mkdir(parents=True, exist_ok=True)
        log.write_jsonl(output / "ledger.jsonl")
    elapsed = time.perf_counter() - started
    (output / "run.json").write_text(json.dumps({
        "workflow": item.name, "plugin": item.plugin, "parameters": jsonable(params),
        "metrics": jsonable(dict(result.metrics)), "seconds": elapsed,
        "randomness": ctx.rng.describe(),
    }, indent=2) + "\n", encoding="utf-8")
    print(result.summary)
    print(f"\nreleases charged: {len(log.charges)}   time: {elapsed:.2f} s")
    print(f"outputs: {output}/ (run.json, ledger.jsonl"
          + "".join(f", {p.name}" for p in result.outputs.values()) + ")")
    return 0


def _core_tour(registry: Registry) -> str:
    counts = {fmt.PLURAL[k]: len(registry.items(k)) for k in ItemKind}
    plugins = ", ".join(p.name for p in registry.plugins) or "none"
    return (f"Plugins loaded: {plugins}. Registered items: "
            + ", ".join(f"{k} {n}" for k, n in counts.items())
            + ".\nEvery release below is charged to one event log before noise is drawn.")


def cmd_demo(args: argparse.Namespace) -> int:
    registry = _registry()
    log = EventLog()
    ctx = WorkflowContext(charger=log, rng=_random_source(args.insecure_seed),
                          output_dir=args.output, echo=_echo)
    steps = [("The registry", lambda c: _core_tour(registry))]
    steps += [(s.title, s.run) for s in registry.demo_steps()]
    started = time.perf_counter()
    for n, (title, run) in enumerate(steps, 1):
        t0 = time.perf_counter()
        text = run(ctx)
        print(f"== {n}. {title}  ({time.perf_counter() - t0:.2f} s)\n{text}\n")
    print("== Privacy ledger of this demo\n" + fmt.charges(log.charges))
    if args.output:
        Path(args.output).mkdir(parents=True, exist_ok=True)
        print(f"\nledger written to {log.write_jsonl(Path(args.output) / 'ledger.jsonl')}")
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
        "run", help="run a workflow; 'privreg run NAME --help' lists its parameters",
        add_help=False,
        usage="privreg run WORKFLOW [--PARAMETER VALUE ...] [--output DIR] [--insecure-seed N]",
    )
    p.add_argument("workflow", help="workflow name")
    p.add_argument("--output", "-o", metavar="DIR", help="output folder (default privreg-out/NAME-TIME)")
    p.add_argument("--insecure-seed", type=int, metavar="N",
                   help="reproducible noise for tests: NO privacy, marked in the ledger")
    p.add_argument("params", nargs=argparse.REMAINDER, help="workflow parameters")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="a short end-to-end tour on real data (< 2 minutes)")
    p.add_argument("--output", "-o", metavar="DIR", help="also write the demo's ledger here")
    p.add_argument("--insecure-seed", type=int, metavar="N",
                   help="reproducible noise for tests: NO privacy, marked in the ledger")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except PrivregError as exc:
        print(f"privreg: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. head: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- silence the flush at exit
        return 0
    except KeyboardInterrupt:
        print("privreg: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: one line, traceback on request
        if os.environ.get("PRIVREG_DEBUG"):
            traceback.print_exc()
        print(f"privreg: internal error: {type(exc).__name__}: {exc} "
              f"(set PRIVREG_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
