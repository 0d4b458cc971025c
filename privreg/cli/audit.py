"""``privreg audit-mechanism NAME``: the empirical privacy audit from the command line.

Exit codes: 0 when no violation is found, 3 when the empirical lower bound exceeds the
claimed epsilon or a release raised after its charge on one neighbour and not alike on
the other (a value-dependent error: reported with the pair of inputs that triggers it,
never as a crash); bad input -- a sample count beyond the machine's memory included --
and a release failing alike on both neighbours after its charge raise a
:class:`~privreg.core.errors.PrivregError`, which the main CLI prints as one line (exit 2).
Every result prints its power: the smallest overrun of the claim it detects with 90%
probability at its sample size (:mod:`privreg.audit.power`).

``--extreme`` also audits the declared neighbours moved to extreme magnitudes (2**53,
2**63, 2**64, 1e300, 1e308; :mod:`privreg.audit.extreme`); ``--neighbours FIRST SECOND``
audits a pair of your own, each a JSON value (a number, a list: an array, an object).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from privreg.cli import format as fmt
from privreg.cli.args import float_arg, int_arg
from privreg.core import jsontext
from privreg.core.errors import PrivregValueError
from privreg.core.items import ItemKind
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource, SecureRandom
from privreg.progress import console_reporter

# The auditor (numpy, scipy) and the registry are imported when an audit runs, not at
# start-up: 'privreg --help' stays fast (benchmarks/startup.py).
if TYPE_CHECKING:
    from privreg.audit.empirical import AuditResult

__all__ = ["add_parser", "cmd_audit_mechanism", "format_result", "EXIT_VIOLATION"]

#: Exit code when the audit finds a lower bound above the claim.
EXIT_VIOLATION = 3


#: The most outputs drawn on each neighbour (--samples): a billion is hours for any mechanism.
MAX_SAMPLES = 10**9


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``audit-mechanism`` to the sub-commands of the privreg parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "audit-mechanism",
        help="empirical privacy audit of a mechanism or randomizer (exit code 3 on a violation)",
        description="Draw outputs of a registered mechanism or randomizer on its example "
        "neighbours and compute a lower bound on its epsilon that is wrong with "
        "probability at most ALPHA; a bound above the claimed epsilon is a violation.",
    )
    p.add_argument("name", help="mechanism or randomizer name (see 'privreg list')")
    p.add_argument(
        "--samples",
        type=int_arg("--samples", 1, MAX_SAMPLES),
        default=100_000,
        metavar="N",
        help=f"outputs drawn on each neighbour (default 100000, at least 1000, at most {MAX_SAMPLES:.0e})",
    )
    p.add_argument(
        "--alpha",
        type=float_arg("--alpha", 0.0, 1.0),
        default=1e-6,
        metavar="A",
        help="false-alarm probability of the audit, in (0, 1) (default 1e-6)",
    )
    p.add_argument(
        "--insecure-seed",
        type=int_arg("--insecure-seed", 0, (1 << 63) - 1),
        metavar="N",
        help="reproducible noise from a seed (the audit draws on synthetic inputs only)",
    )
    p.add_argument(
        "--extreme",
        action="store_true",
        help="also audit the example neighbours moved to 2**53, 2**63, 2**64, 1e300 and 1e308",
    )
    p.add_argument(
        "--neighbours",
        nargs=2,
        metavar=("FIRST", "SECOND"),
        help="audit this pair instead of the example's: two JSON values, e.g. 0 1, "
        "'[0, 5]' '[1, 4]' or '{\"a\": 10}' '{\"a\": 11}'",
    )
    p.set_defaults(func=cmd_audit_mechanism)
    return p


def _random_source(seed: int | None) -> RandomSource:
    if seed is None:
        return SecureRandom()
    if seed < 0:
        raise PrivregValueError(f"--insecure-seed must be >= 0; got {seed}")
    return InsecureReproducibleRandom(seed=seed)


def _g(x: float) -> str:
    return f"{x:.6g}"


def format_result(result: AuditResult, *, kind: str = "") -> str:
    """The audit as a small two-column table and a verdict line."""
    verdict = (
        "PASS: no violation found (this is not a proof of privacy)"
        if result.passed
        else f"FAIL: the lower bound exceeds the claimed epsilon (false-alarm probability <= {result.alpha:g})"
    )
    if result.failure:
        verdict = "FAIL: a release raised after its charge (a value-dependent error; no sampling needed)"
    rows = [
        ("audit", f"{kind + ' ' if kind else ''}{result.subject}"),
        ("neighbours", f"{result.neighbours[0]} and {result.neighbours[1]}"),
        (
            "claimed epsilon",
            f"{_g(result.claimed_epsilon)} at delta {result.claimed_delta:g} ({result.claim_accountant})",
        ),
        (
            "empirical lower bound",
            f"{_g(result.epsilon_lower_bound)} (alpha {result.alpha:g}, {result.samples} samples per neighbour)",
        ),
        (
            "power",
            result.power.describe() if result.power is not None else "(no finite claim: nothing to detect)",
        ),
        ("winning event", result.event),
        (
            "estimation counts",
            f"{result.count_first} on the first, {result.count_second} on the second "
            f"neighbour (of {result.estimation_samples} each)",
        ),
        ("verdict", verdict),
    ]
    if result.failure:
        rows.insert(-1, ("failure", result.failure))
    return fmt.table([("", "")] + rows).split("\n", 1)[1]


def cmd_audit_mechanism(args: argparse.Namespace) -> int:
    """Run the audit of ``args.name``; 0 if it passed, 3 if it found a violation."""
    from privreg.audit.empirical import audit_extreme_neighbours, audit_item
    from privreg.core.registry import default_registry

    registry = default_registry()
    item = registry.get(args.name)
    if item.kind not in (ItemKind.MECHANISM, ItemKind.RANDOMIZER):
        raise PrivregValueError(
            f"{args.name!r} is a {item.kind_name}; audit-mechanism audits mechanisms and randomizers"
        )
    rng = _random_source(args.insecure_seed)
    if args.insecure_seed is not None:
        print("privreg: NOTE: --insecure-seed makes the audit's noise reproducible from the seed", file=sys.stderr)
    neighbours = _parse_pair(args.neighbours) if args.neighbours else None
    reporter = console_reporter()  # stderr: the results go to stdout
    try:
        result = audit_item(
            item, samples=args.samples, alpha=args.alpha, rng=rng, neighbours=neighbours, progress=reporter
        )
    finally:
        reporter.close()
    print(format_result(result, kind=item.kind.value))
    passed = result.passed
    if args.extreme:
        try:
            extreme = audit_extreme_neighbours(item, samples=args.samples, alpha=args.alpha, rng=rng, progress=reporter)
        finally:
            reporter.close()
        for moved in extreme.results:
            print("\n" + format_result(moved, kind=item.kind.value))
        for first, second, error in extreme.refused:
            print(f"\nrefused before the charge (validation, nothing released): {first} and {second}: {error}")
        for first, second, error in extreme.alike:
            print(f"\nfailed alike on both neighbours (no evidence either way): {first} and {second}: {error}")
        print(
            f"\nextreme neighbours: {len(extreme.results)} pair(s) audited, {len(extreme.failures)} "
            f"violation(s), {len(extreme.refused)} refused before the charge"
        )
        passed = passed and extreme.passed
    return 0 if passed else EXIT_VIOLATION


def _parse_value(text: str, which: str) -> Any:
    try:
        value = jsontext.loads(text, f"--neighbours {which}", max_depth=_NEIGHBOUR_DEPTH)
    except PrivregValueError:
        raise
    except ValueError as exc:  # not JSON, or an integer longer than Python reads (4300 digits)
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number with too many digits"
        shown = text if len(text) <= 80 else text[:80] + "..."
        raise PrivregValueError(
            f'--neighbours {which} must be a JSON value (e.g. 0.5, [1, 2] or {{"a": 3}}); got {shown!r}: {why}'
        ) from None
    if isinstance(value, list):
        import numpy as np

        return np.asarray(value)
    return value


#: The deepest --neighbours value: numpy arrays have at most 32 dimensions.
_NEIGHBOUR_DEPTH = 32


def _parse_pair(texts: list[str]) -> tuple[Any, Any]:
    return _parse_value(texts[0], "FIRST"), _parse_value(texts[1], "SECOND")
