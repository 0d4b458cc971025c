"""The Adult example of issue #21 in privreg, diffprivlib and OpenDP, side by side: a
count, a mean age, an education histogram and a median age on UCI Adult, under one
budget (epsilon 1, delta 1e-6) split evenly, each library through its own idiomatic API.

    python benchmarks/analysis_peers.py [--data PATH] [--repeats 5] [--out FILE] [--quick]

The peers are benchmark-only (``privreg[bench]``, CONTRIBUTING.md): the real diffprivlib
(``diffprivlib.tools`` with a ``BudgetAccountant``) and the real OpenDP (its Context API
over a Polars LazyFrame, ``opendp[polars]``; the ``contrib`` feature is enabled, as every
OpenDP measurement needs it; ``honest-but-curious`` is not). Each library's snippet is a
generator below: its ``yield`` lines are the user's statements (an assignment in the
README), so the time between two yields is that statement's cost.

Budget split: epsilon 0.25 per statistic in all three. Every statistic here is pure
epsilon-DP in all three (the histogram's categories are the public ADULT_EDUCATION list),
so no delta is spent; the budget holds delta 1e-6 in each library that takes one
(privreg's session, diffprivlib's accountant, OpenDP's context, where it splits into
(0.25, 2.5e-7) per query).

What differs by design (stated, not judged):

* privacy unit: privreg and OpenDP add or remove one person (the count is private);
  diffprivlib's mean divides by the true row count and calibrates to ``(upper - lower) /
  n``, so it treats n as public (its count is a separate, private release);
* accuracy: privreg returns a 95% interval with each release (the median's bound is in
  ranks); OpenDP's ``summarize(alpha=0.05)`` states the 95% accuracy of each noisy
  aggregate before release (the mean's sum and length separately; none for the median);
  diffprivlib states none;
* a wrong bound: each library's mean runs once more, on a copy of the data in which every
  age is 90, with bounds (17, 60): refused, warned, or released near 60 (clipped).

Columns: the released value of the first timed run; the stated interval or accuracy; the
true value; the median ``|error|`` over the runs (the histogram's: its worst category);
wall and CPU seconds, the medians over the runs, from :class:`privreg.timing.PhaseTimer`
(``time.perf_counter``; ``time.process_time``, this process with all its threads: Polars
runs a thread pool, so OpenDP's CPU may exceed its wall time); the lines and statements
of user code from the DataFrame to the four values (non-blank, non-comment lines as
formatted at 120 columns; imports left out). One untimed warm-up run per library comes
first (imports, the Polars plugin). Libraries alternate within each round so the shared
machine's load falls on all three alike. ``--quick``: the bundled 2,000-row slice, 2 runs.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import statistics
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from timing import machine

import privreg
from privreg.analysis import ONE_ROW_PER_USER, Query
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.datasets import ADULT_EDUCATION, load_adult
from privreg.timing import PhaseTimer, process_cpu_seconds


def _sklearn_names_for_diffprivlib() -> None:
    """diffprivlib 0.6.6, the latest, imports ``DOUBLE`` and ``DTYPE`` from
    ``sklearn.tree._tree`` when it is imported (for its random forest); scikit-learn 1.9
    removed both, so ``import diffprivlib`` fails. Define them with their scikit-learn 1.8
    values when missing: the tools used here never read them."""
    try:
        import sklearn.tree._tree as tree
    except ImportError:
        return
    for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
        if not hasattr(tree, name):
            setattr(tree, name, value)


_sklearn_names_for_diffprivlib()
try:
    from diffprivlib import BudgetAccountant, tools
except ImportError:
    tools = None
try:
    import opendp.prelude as dp
    import polars as pl
except ImportError:
    dp = None

STATS = ("count", "mean", "histogram", "median")
Run = dict[str, tuple[Any, float, float]]  # statement -> (output, wall s, CPU s)
FULL = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.data"
WRONG = (17, 60)  # ages go up to 90: a bound that is too narrow
TIED = (37.0, 90.0)  # constant columns: inside the bounds, and at the upper bound


# --- the three snippets (the README shows them with assignments for the yields; ``bounds``
# is the mean's, changed only by the wrong-bound check) ----------------------------------------


def privreg_snippet(df: pd.DataFrame, bounds: tuple[int, int] = (17, 90)) -> Iterator[tuple[str, Any]]:
    q = Query(df, privacy_unit=ONE_ROW_PER_USER, session=BudgetSession(budget=PrivacyBudget(epsilon=1, delta=1e-6)))
    yield "setup", None
    yield "count", q.count(epsilon=0.25).release()
    yield "mean", q.mean("age", bounds=bounds, epsilon=0.25).release()
    yield "histogram", q.histogram("education", categories=ADULT_EDUCATION, epsilon=0.25).release()
    yield "median", q.median("age", bounds=(17, 90), grid=74, epsilon=0.25).release()


def diffprivlib_snippet(df: pd.DataFrame, bounds: tuple[int, int] = (17, 90)) -> Iterator[tuple[str, Any]]:
    acc = BudgetAccountant(epsilon=1, delta=1e-6)
    age = df["age"].to_numpy()
    edu = pd.Categorical(df["education"], categories=ADULT_EDUCATION).codes  # -1: not a listed category
    yield "setup", None
    yield "count", tools.count_nonzero(np.ones_like(age), epsilon=0.25, accountant=acc)
    yield "mean", tools.mean(age, epsilon=0.25, bounds=bounds, accountant=acc)
    yield "histogram", tools.histogram(edu, epsilon=0.25, bins=16, range=(0, 16), accountant=acc)[0]
    yield "median", tools.median(age, epsilon=0.25, bounds=(17, 90), accountant=acc)


def opendp_snippet(df: pd.DataFrame, bounds: tuple[int, int] = (17, 90)) -> Iterator[tuple[str, Any]]:
    dp.enable_features("contrib")
    context = dp.Context.compositor(
        data=pl.from_pandas(df).lazy(),
        privacy_unit=dp.unit_of(contributions=1),
        privacy_loss=dp.loss_of(epsilon=1.0, delta=1e-6),
        split_evenly_over=4,
        margins=[dp.polars.Margin(max_length=100_000)],  # a public bound on the rows, needed by float sums
    )
    yield "setup", None
    count = context.query().select(dp.len(signed=True))
    yield "count accuracy", count.summarize(alpha=0.05)
    yield "count", count.release().collect()
    mean = context.query().select(pl.col("age").dp.mean(bounds))
    yield "mean accuracy", mean.summarize(alpha=0.05)
    yield "mean", mean.release().collect()
    keys = pl.LazyFrame({"education": ADULT_EDUCATION})
    hist = context.query().group_by("education").agg(dp.len(signed=True)).with_keys(keys)
    yield "histogram accuracy", hist.summarize(alpha=0.05)
    yield "histogram", hist.release().collect()
    median = context.query().select(pl.col("age").dp.median([float(a) for a in range(17, 91)]))
    yield "median accuracy", median.summarize(alpha=0.05)
    yield "median", median.release().collect()


SNIPPETS: dict[str, Callable[..., Iterator[tuple[str, Any]]]] = {
    "privreg": privreg_snippet,
    "diffprivlib": diffprivlib_snippet,
    "OpenDP": opendp_snippet,
}


def user_lines(fn: Callable[..., Any]) -> tuple[int, int]:
    """``(lines, statements)`` of ``fn``'s body: non-blank, non-comment lines as formatted
    (ruff, 120 columns) and top-level statements; imports and ``yield "setup"`` left out."""
    source = textwrap.dedent(inspect.getsource(fn))
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    lines = statements = 0
    for node in body:
        text = ast.get_source_segment(source, node) or ""
        if isinstance(node, (ast.Import, ast.ImportFrom)) or text.startswith('yield "setup"'):
            continue
        statements += 1
        lines += sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    return lines, statements


# --- released values in one shape: value, stated interval/accuracy ---------------------------


def _privreg(stat: str, run: dict[str, Any]) -> tuple[Any, str]:
    r = run[stat]
    if stat == "histogram":
        half = r.accuracy.half_width
        return dict(r.value), f"+-{half:g} per category ({r.level:.0%}, each)"
    if stat == "median":
        return r.value, f"rank error <= {r.accuracy.half_width:.1f} ({r.level:.0%})"
    lo, hi = r.interval
    return r.value, f"[{lo:.6g}, {hi:.6g}] ({r.level:.0%})"


def _opendp(stat: str, run: dict[str, Any]) -> tuple[Any, str]:
    frame, summary = run[stat], run[f"{stat} accuracy"]
    acc = {row["aggregate"]: row["accuracy"] for row in summary.iter_rows(named=True)}
    if stat == "histogram":
        value = {row["education"]: row["len"] for row in frame.iter_rows(named=True)}
        return value, f"+-{acc['Frame Length']:.4g} per category (95%, each)"
    value = frame.item()
    if stat == "count":
        return value, f"+-{acc['Frame Length']:.4g} (95%)"
    if stat == "mean":
        return value, f"sum +-{acc['Sum']:.4g}, length +-{acc['Length']:.4g} (95%); none for the mean"
    return value, "none (summarize: accuracy null)"


def _diffprivlib(stat: str, run: dict[str, Any]) -> tuple[Any, str]:
    out = run[stat]
    if stat == "histogram":
        return dict(zip(ADULT_EDUCATION, (int(x) for x in out))), "none"
    return out, "none"


NORMALISE = {"privreg": _privreg, "diffprivlib": _diffprivlib, "OpenDP": _opendp}


def truth(df: pd.DataFrame) -> dict[str, Any]:
    counts = df["education"].value_counts()
    return {
        "count": len(df),
        "mean": float(df["age"].mean()),
        "histogram": {c: int(counts.get(c, 0)) for c in ADULT_EDUCATION},
        "median": float(df["age"].median()),
    }


def error(stat: str, value: Any, true: Any) -> float:
    if stat == "histogram":
        return max(abs(float(value.get(c, 0)) - true[c]) for c in ADULT_EDUCATION)
    return abs(float(value) - float(true))


def show(stat: str, value: Any) -> str:
    if stat == "histogram":
        return f"HS-grad {value['HS-grad']}, Doctorate {value['Doctorate']}, Preschool {value['Preschool']}"
    if stat == "mean":
        return f"{float(value):.4f}"
    return f"{float(value):g}"


# --- running ---------------------------------------------------------------------------------


def run(lib: str, df: pd.DataFrame) -> Run:
    """One run of ``lib``'s snippet: statement -> (output, wall s, CPU s)."""
    timer = PhaseTimer(cpu_clock=process_cpu_seconds)
    steps = SNIPPETS[lib](df)
    out: Run = {}
    while True:
        timer.mark()
        try:
            stat, value = next(steps)
        except StopIteration:
            break
        wall, cpu = timer.lap(stat)
        out[stat] = (value, wall, cpu)
    return out


def until(lib: str, df: pd.DataFrame, want: str, **kwargs: Any) -> tuple[dict[str, Any], list[str], str]:
    """Run ``lib``'s snippet on ``df`` up to statement ``want``: (outputs so far, the
    warnings raised, the exception type that stopped it or "")."""
    out: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for step, value in SNIPPETS[lib](df, **kwargs):
                out[step] = value
                if step == want:
                    break
        except Exception as e:  # noqa: BLE001 -- a refusal is the finding, whatever its type
            return out, [], type(e).__name__
    return out, [f"{w.category.__name__}: {w.message}" for w in caught], ""


def wrong_bound(lib: str, df: pd.DataFrame) -> str:
    """What ``lib``'s mean does with bounds WRONG when every age is 90: refused, warned,
    or released (near 60: clipped to the bound; near 90: not clipped)."""
    out, said, refused = until(lib, df.assign(age=90.0), "mean", bounds=WRONG)
    if refused:
        return f"refused ({refused})"
    value = float(NORMALISE[lib]("mean", out)[0])
    said = sorted({w.split(":")[0] for w in said if any(x in w.lower() for x in ("bound", "clip", "range"))})
    told = "warns " + ", ".join(said) if said else "no error or warning"
    kind = "clipped" if abs(value - WRONG[1]) < 5 else "not clipped" if abs(value - 90) < 5 else "neither"
    return f"{kind}, {told} (released {value:.1f})"


def tied_median(lib: str, df: pd.DataFrame, age: float) -> str:
    """``lib``'s median when every age is ``age`` (the true median)."""
    out, _, refused = until(lib, df.assign(age=age), "median")
    if refused:
        return f"raised {refused}"
    return f"{float(NORMALISE[lib]('median', out)[0]):.4g}"


def privreg_error_rule(df: pd.DataFrame) -> str:
    """privreg's mean with the wrong bounds and ``rule='error'`` (a curator query: the
    refusal depends on the data, so only the data holder may ask for it)."""
    session = BudgetSession(budget=PrivacyBudget(epsilon=1))
    q = Query(df.assign(age=90.0), privacy_unit=ONE_ROW_PER_USER, session=session, curator=True)
    try:
        q.mean("age", bounds=WRONG, epsilon=0.25, rule="error").release()
    except Exception as e:  # noqa: BLE001 -- the type is reported
        spent = max(session.spent().values(), default=0.0)
        return f"with rule='error': refused ({type(e).__name__}; epsilon spent {spent:g})"
    return "with rule='error': released"


def version(dist: str) -> str:
    if dist == "privreg":
        return privreg.__version__
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _outputs(run: Run) -> dict[str, Any]:
    return {step: out for step, (out, _, _) in run.items()}


def _median(runs: list[Run], step: str, k: int) -> float:
    """Median wall (``k=1``) or CPU (``k=2``) seconds of ``step`` (0 where it is absent)."""
    return statistics.median(r[step][k] if step in r else 0.0 for r in runs)


def table(libs: list[str], runs: dict[str, list[Run]], df: pd.DataFrame) -> list[str]:
    """The markdown table: per library a setup row, one row per statistic (its release
    statement; OpenDP's ``summarize`` statement in the accuracy column's seconds) and a
    total."""
    true = truth(df)
    wrong = {lib: wrong_bound(lib, df) for lib in libs}
    if "privreg" in wrong:
        wrong["privreg"] += "; " + privreg_error_rule(df)
    names = {
        "privreg": f"privreg {version('privreg')}",
        "diffprivlib": f"diffprivlib {version('diffprivlib')}",
        "OpenDP": f"OpenDP {version('opendp')} (Polars {version('polars')})",
    }
    n = len(next(iter(runs.values())))
    cols = [
        "library",
        "statistic",
        "released (first run)",
        "stated 95% interval / accuracy",
        "true",
        f"median abs error ({n} runs)",
        "wall s",
        "CPU s",
        "lines (statements)",
        "wrong bound: mean with bounds (17, 60), every age 90",
    ]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def secs(lib: str, step: str) -> list[str]:
        cells = [f"{_median(runs[lib], step, k):.3f}" for k in (1, 2)]
        extra = f"{step} accuracy"
        if any(extra in r for r in runs[lib]):  # OpenDP: summarize() is its own statement
            cells = [f"{c} + {_median(runs[lib], extra, k):.3f}" for c, k in zip(cells, (1, 2))]
        return cells

    for lib in libs:
        cells = [
            names[lib],
            "setup",
            "",
            "",
            "",
            "",
            *secs(lib, "setup"),
            "{} ({})".format(*user_lines(SNIPPETS[lib])),
            wrong[lib],
        ]
        out.append("| " + " | ".join(cells) + " |")
        for stat in STATS:
            value, stated = NORMALISE[lib](stat, _outputs(runs[lib][0]))
            errs = [error(stat, NORMALISE[lib](stat, _outputs(r))[0], true[stat]) for r in runs[lib]]
            cells = [
                "",
                stat,
                show(stat, value),
                stated,
                show(stat, true[stat]),
                f"{statistics.median(errs):.3g}",
                *secs(lib, stat),
                "",
                "",
            ]
            out.append("| " + " | ".join(cells) + " |")
        steps = set().union(*runs[lib])
        wall = sum(_median(runs[lib], s, 1) for s in steps)
        cpu = sum(_median(runs[lib], s, 2) for s in steps)
        out.append(f"| | **all** | | | | | **{wall:.3f}** | **{cpu:.3f}** | | |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="adult.data (default: ../shared/data/adult when present)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per library (default 5)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    ap.add_argument("--quick", action="store_true", help="the bundled 2,000-row slice, 2 runs")
    args = ap.parse_args(argv)
    path = None if args.quick else (args.data or (FULL if FULL.is_file() else None))
    repeats = 2 if args.quick else max(1, args.repeats)
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.perf_counter()
    df = pd.DataFrame(load_adult(path))
    there = {"privreg": True, "diffprivlib": tools is not None, "OpenDP": dp is not None}
    libs = [lib for lib in SNIPPETS if there[lib]]
    missing = sorted(set(SNIPPETS) - set(libs))
    for lib in libs:  # warm-up: imports, the Polars plugin, first-call caches
        run(lib, df)
    runs: dict[str, list[Run]] = {lib: [] for lib in libs}
    for _ in range(repeats):
        for lib in libs:
            runs[lib].append(run(lib, df))
    rows = table(libs, runs, df)
    tied = ["| library | " + " | ".join(f"every age {a:g}" for a in TIED) + " |", "|---|" + "---|" * len(TIED)]
    tied += ["| " + " | ".join([lib, *(tied_median(lib, df, a) for a in TIED)]) + " |" for lib in libs]
    src = str(path) if path else "the bundled 2,000-row slice"
    title = (
        f"Adult, {len(df)} rows from {src}: four statistics at epsilon 0.25 each "
        f"(budget epsilon 1, delta 1e-6; no delta spent)"
    )
    cmd = " ".join(["python benchmarks/analysis_peers.py", *(sys.argv[1:] if argv is None else argv)])
    text = "\n".join(
        [
            "# benchmarks/analysis_peers.py",
            "",
            f"`{cmd}` started {started}; {time.perf_counter() - t0:.0f} s in all.",
            "",
            "```",
            title,
            f"[processes: 1; threads: 1, plus Polars's pool for OpenDP; {machine()}]",
            "[wall: time.perf_counter; CPU: time.process_time (this process, all threads), "
            "via privreg.timing.PhaseTimer; medians over the runs]",
            "```",
            "",
            *rows,
            "",
            "wall s / CPU s: the statement that releases the value; OpenDP's `+` adds its "
            "`summarize(alpha=0.05)` statement, which states the accuracy. setup: the Query, the accountant "
            "and columns, or the Context (with its budget split and the pandas-to-Polars conversion). "
            "lines (statements): the snippet's code from the DataFrame to the four values, as formatted at "
            "120 columns, imports left out.",
            "",
            f"Median on a constant column ({len(df)} rows; the true median is the constant; each one run):",
            "",
            *tied,
            *([f"Not installed, left out: {', '.join(missing)} (pip install 'privreg[bench]')."] if missing else []),
            "",
        ]
    )
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
