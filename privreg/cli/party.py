"""``privreg party``: run one party of a multi-party protocol per process.

Sub-commands:

- ``list``: the registered deployments, their parties, inputs and options.
- ``certs DIR PARTY...``: a THROW-AWAY test CA and one certificate per party.
- ``init PROTOCOL DIR``: example inputs, test certificates and one configuration per
  party for a run on this machine; prints the command of every party.
- ``run CONFIG``: run the configured party (mutual TLS unless the file opts out).
- ``simulate CONFIG...``: every party of those configurations in one process, in memory
  (the same outputs as separate processes on the same inputs and seeds).
- ``score CONFIG... --truth FILE``: a finished run's outputs against a truth file
  (evaluation on test data: recall and precision, or accuracy for spam-filter).

Exit codes: 0 done, 2 bad input or configuration, 4 the protocol run failed (a peer
refused, broke off or misbehaved; the message names it).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from privreg.cli import format as fmt
from privreg.cli.args import float_arg, int_arg
from privreg.core.deployment import MAX_TIMEOUT
from privreg.core.errors import DeadlockError, PrivregValueError, ProtocolError
from privreg.core.files import write_text

__all__ = ["add_parser"]

# The registry (and the events it loads) is imported by the commands, not at start-up:
# 'privreg --help' stays fast (benchmarks/startup.py).

RUN_FAILED = 4
#: Seeds: non-negative 64-bit integers.
_SEED_ARG = int_arg("--seed", 0, (1 << 63) - 1)


def _toml_value(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, float)):
        return repr(x)
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_toml_value(i) for i in x) + "]"
    raise PrivregValueError(f"cannot write option value {x!r} to TOML.")


def _rel(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def _parse_options(tokens: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tok in tokens:
        key, sep, raw = tok.partition("=")
        if not sep or not key:
            raise PrivregValueError(f"--option takes KEY=VALUE (a TOML value); got {tok!r}.")
        try:
            out[key] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = raw  # a bare word: a string
    return out


def cmd_list(args: argparse.Namespace) -> int:
    from privreg.core.registry import default_registry

    registry = default_registry()
    deps = registry.deployments()
    if not deps:
        print("no deployments registered")
        return 0
    for dep in deps:
        options = dep.options({})
        print(f"{dep.name}: {dep.summary}")
        for p in dep.parties(options):
            inputs = dep.inputs(p, options)
            desc = "; ".join(f"{k}: {d}" for k, d in inputs.items()) or "no inputs"
            print(f"  party {p}: {desc}")
        print(f"  options (defaults): {json.dumps(options, default=str)}")
    return 0


def cmd_certs(args: argparse.Namespace) -> int:
    from privreg.mpc.certs import create_test_pki

    out = create_test_pki(Path(args.directory), args.parties, days=args.days)
    rows = [("party", "certificate", "key")]
    rows += [(p, str(f["certificate"]), str(f["key"])) for p, f in out.items() if p != "ca"]
    print(f"TEST CA (throw-away, not for production): {out['ca']['certificate']}")
    print(fmt.table(rows))
    return 0


def _own_certificates(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, dict[str, Path]] | None:
    """``--ca`` and ``--certs``: the organisation's CA and every party's ``<party>.pem``
    and ``<party>.key``, each certificate checked to name its party (a SAN URI)."""
    if args.ca is None and args.certs is None:
        return None
    if args.ca is None or args.certs is None:
        raise PrivregValueError("--ca and --certs go together: give your CA file and the folder of party certificates.")
    if args.insecure_plaintext:
        raise PrivregValueError("--insecure-plaintext runs without certificates; drop it or drop --ca and --certs.")
    from privreg.mpc.tls import TlsConfig, san_fix

    ca, folder = Path(args.ca), Path(args.certs)
    if not ca.is_file():
        raise PrivregValueError(f"--ca: no file at {ca}; give your CA's certificate (PEM).")
    out: dict[str, dict[str, Path]] = {"ca": {"certificate": ca}}
    for p in names:
        cert, key = folder / f"{p}.pem", folder / f"{p}.key"
        for f in (cert, key):
            if not f.is_file():
                raise PrivregValueError(
                    f"--certs: no file {f}; give {p}.pem and {p}.key for every party {list(names)}."
                )
        tls = TlsConfig(certificate=cert, key=key, ca=ca)  # checks the files and the key's permissions
        if p not in tls.own_parties():
            raise PrivregValueError(f"--certs: {cert} does not name party {p!r}; {san_fix([p])}.")
        out[p] = {"certificate": cert, "key": key}
    return out


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(\.{_LABEL})*\.?\Z")


def _host_arg(value: str) -> str:
    """``--host``: an IP address or an RFC 1123 host name, checked before a config is
    written (a quote or a newline would otherwise end up inside the TOML)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if value.isascii() and _HOSTNAME.match(value):
        return value
    raise argparse.ArgumentTypeError(
        f"--host must be an IPv4 or IPv6 address or a DNS host name (letters, digits, '-' and '.'); "
        f"got {value!r}, e.g. --host 10.0.0.11 or --host p1.example.org"
    )


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def cmd_init(args: argparse.Namespace) -> int:
    from privreg.core.registry import default_registry

    dep = default_registry().deployment(args.protocol)
    options = dep.options(_parse_options(args.option or []))
    directory = Path(args.directory)
    if directory.exists() and any(directory.iterdir()):
        raise PrivregValueError(f"{directory} is not empty; pass a new folder to privreg party init.")
    names = dep.parties(options)
    if args.base_port + len(names) - 1 > 65535:
        raise PrivregValueError(
            f"--base-port {args.base_port} leaves no port for all {len(names)} parties (ports end at 65535); "
            f"pass --base-port {65536 - len(names)} or lower"
        )
    own = _own_certificates(args, names)  # checked before anything is written
    inputs = dep.example(directory / "inputs", options=options, seed=args.data_seed)
    options = dep.example_options(options, inputs)  # the run's declared sizes (records per party, ...)
    if own is not None:
        pki = own
    elif not args.insecure_plaintext:
        from privreg.mpc.certs import create_test_pki

        pki = create_test_pki(directory / "certs", list(names))
    ports = {p: args.base_port + i for i, p in enumerate(names)}
    commands = []
    for p in names:
        lines = [
            f"# party {p} of {dep.name}: run with  privreg party run {p}.toml",
            f"protocol = {_toml_value(dep.name)}",
            f"party = {_toml_value(p)}",
            f'listen = "{_address(args.host, ports[p])}"',
        ]
        if args.seed is not None:
            lines.append(f"seed = {args.seed}  # TESTS ONLY: reproducible randomness")
        if args.insecure_plaintext:
            lines.append("insecure_plaintext = true  # TESTS ONLY: no TLS")
        else:
            tls_note = (
                "your CA (--ca) and this party's certificate and key (--certs)"
                if own is not None
                else "a throw-away TEST CA made by privreg party init; use your organisation's CA in production"
            )
            lines += [
                "",
                f"[tls]  # {tls_note}",
                f"ca = {_toml_value(_rel(pki['ca']['certificate'], directory))}",
                f"certificate = {_toml_value(_rel(pki[p]['certificate'], directory))}",
                f"key = {_toml_value(_rel(pki[p]['key'], directory))}",
            ]
        lines += ["", "[peers]"]
        lines += [f'{q} = "{_address(args.host, ports[q])}"' for q in names if q != p]
        lines += ["", "[inputs]"]
        lines += [f"{k} = {_toml_value(_rel(path, directory))}" for k, path in inputs.get(p, {}).items()]
        lines += ["", "[outputs]", f"directory = {_toml_value(f'out/{p}')}", "", "[options]"]
        lines += [f"{k} = {_toml_value(x)}" for k, x in options.items() if x is not None]
        lines += ["", "[timeouts]", f"connect = {args.connect_timeout!r}"]
        write_text(directory / f"{p}.toml", "\n".join(lines) + "\n", "party configuration")
        commands.append(f"privreg party run {shlex.quote(str(directory / f'{p}.toml'))}")
    print(f"{dep.name}: {len(names)} parties in {directory}; run each in its own terminal:")
    for c in commands:
        print(f"  {c}")
    return 0


def _report(run: Any) -> None:
    traffic = run.transcript.per_party().get(run.party, {})
    sent, recv = traffic.get("sent"), traffic.get("received")
    where = f", run {run.run_id[:16]}" if run.run_id else ""
    print(
        f"party {run.party}: done ({run.security}{where}); sent {sent.messages if sent else 0} messages / "
        f"{sent.bytes if sent else 0} bytes, received {recv.messages if recv else 0} / {recv.bytes if recv else 0}; "
        f"{run.seconds.get('protocol_wall', 0.0):.2f} s wall, {run.seconds.get('protocol_cpu', 0.0):.2f} s CPU"
    )
    for name, path in sorted(run.files.items()):
        print(f"  {name}: {path}")


def cmd_run(args: argparse.Namespace) -> int:
    from privreg.core.registry import default_registry
    from privreg.mpc.deployment import run_party
    from privreg.mpc.party_config import load_party_config

    config = load_party_config(args.config)
    dep = default_registry().deployment(config.protocol)
    if config.insecure_plaintext:
        print(f"privreg: warning: party {config.party} runs WITHOUT TLS (insecure_plaintext)", file=sys.stderr)
    try:
        run = run_party(dep, config, echo=lambda line: print(line, file=sys.stderr, flush=True))
    except (ProtocolError, DeadlockError) as exc:
        print(f"privreg: party {config.party} failed: {exc}", file=sys.stderr)
        return RUN_FAILED
    _report(run)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from privreg.core.registry import default_registry
    from privreg.mpc.deployment import simulate
    from privreg.mpc.party_config import load_party_config

    configs = [load_party_config(c) for c in args.configs]
    protocols = {c.protocol for c in configs}
    if len(protocols) != 1:
        raise PrivregValueError(f"the configurations name different protocols {sorted(protocols)}.")
    dep = default_registry().deployment(protocols.pop())
    try:
        runs = simulate(dep, configs)
    except (ProtocolError, DeadlockError) as exc:
        print(f"privreg: the simulated run failed: {exc}", file=sys.stderr)
        return RUN_FAILED
    for run in runs.values():
        _report(run)
    return 0


def _shown(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def cmd_score(args: argparse.Namespace) -> int:
    from privreg.core.files import regular_file_error
    from privreg.core.registry import default_registry
    from privreg.mpc.deployment import options_digest
    from privreg.mpc.party_config import load_party_config

    truth = Path(args.truth)
    if not truth.exists():
        raise PrivregValueError(f"--truth: no file at {truth}; give the run's truth file (e.g. inputs/truth.csv).")
    err = regular_file_error(truth, "--truth", truth.stat().st_mode)
    if err is not None:
        raise err
    configs = [load_party_config(c) for c in args.configs]
    protocols = sorted({c.protocol for c in configs})
    if len(protocols) != 1:
        raise PrivregValueError(f"the configurations name different protocols {protocols}; give those of one run.")
    dep = default_registry().deployment(protocols[0])
    outputs: dict[str, Path] = {}
    digests = set()
    options: dict[str, Any] = {}
    for c in configs:
        if c.party in outputs:
            raise PrivregValueError(f"two configurations for party {c.party!r}; give each party's once.")
        outputs[c.party] = c.output_directory
        options = dep.options(c.options)
        digests.add(options_digest(dep, options))
    if len(digests) != 1:
        raise PrivregValueError("the configurations give different [options]; give those of one run.")
    rows = dep.score(outputs=outputs, truth=truth, options=options)
    print(f"{dep.name}: {', '.join(sorted(outputs))} against {truth}")
    print(fmt.table([("measure", "value"), *((name, _shown(value)) for name, value in rows)]))
    return 0


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``party`` and its sub-commands to the privreg parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "party",
        help="run one party of a multi-party protocol per process (mutual TLS)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    sub = p.add_subparsers(dest="party_command", required=True, parser_class=type(p))

    q = sub.add_parser("list", help="registered deployments: parties, inputs, options")
    q.set_defaults(func=cmd_list)

    q = sub.add_parser("certs", help="a THROW-AWAY test CA and party certificates (not for production)")
    q.add_argument("directory", help="new folder for ca.pem and PARTY.pem / PARTY.key")
    q.add_argument("parties", nargs="+", help="party names")
    q.add_argument("--days", type=int_arg("--days", 1, 36500), default=7, help="validity in days (default 7)")
    q.set_defaults(func=cmd_certs)

    q = sub.add_parser("init", help="example inputs, test certificates and configs for a run on this machine")
    q.add_argument("protocol", help="deployment name (privreg party list)")
    q.add_argument("directory", help="new folder for the run")
    q.add_argument(
        "--host",
        type=_host_arg,
        default="127.0.0.1",
        help="address every party listens on: an IPv4 or IPv6 address or a DNS name (default 127.0.0.1)",
    )
    q.add_argument(
        "--base-port",
        type=int_arg("--base-port", 1, 65535),
        default=7100,
        help="first port, 1..65535; one per party (default 7100)",
    )
    q.add_argument("--option", action="append", metavar="KEY=VALUE", help="a public option (repeatable)")
    q.add_argument(
        "--data-seed",
        type=int_arg("--data-seed", 0, (1 << 63) - 1),
        default=1,
        help="seed of the example data (default 1)",
    )
    q.add_argument("--seed", type=_SEED_ARG, help="TESTS ONLY: reproducible protocol randomness in every config")
    q.add_argument("--insecure-plaintext", action="store_true", help="TESTS ONLY: configs without TLS")
    q.add_argument("--ca", help="your organisation's CA certificate (PEM) instead of a throw-away test CA")
    q.add_argument("--certs", help="with --ca: the folder of every party's PARTY.pem and PARTY.key (docs/deploy.md)")
    q.add_argument(
        "--connect-timeout",
        type=float_arg("--connect-timeout", 0.0, MAX_TIMEOUT, open_below=True),
        default=300.0,
        help=f"seconds to wait for peers, at most {MAX_TIMEOUT:g} (default 300)",
    )
    q.set_defaults(func=cmd_init)

    q = sub.add_parser("run", help="run the party a configuration file describes")
    q.add_argument("config", help="the party's TOML configuration")
    q.set_defaults(func=cmd_run)

    q = sub.add_parser("simulate", help="run every party of these configurations in one process (in memory)")
    q.add_argument("configs", nargs="+", help="one TOML configuration per party")
    q.set_defaults(func=cmd_simulate)

    q = sub.add_parser("score", help="score a finished run's outputs against a truth file (test data only)")
    q.add_argument("configs", nargs="+", help="the configurations of the parties whose outputs are scored")
    q.add_argument(
        "--truth",
        required=True,
        help="linkage: CSV party,id,entity (party init writes inputs/truth.csv); spam-filter: carol's labelled JSONL",
    )
    q.set_defaults(func=cmd_score)
    return p
