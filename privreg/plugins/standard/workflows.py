"""Workflows of the standard plugin."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import numpy as np

from privreg.analysis.bounding import RULES, apply_rule
from privreg.analysis.frames import clamped_fsum
from privreg.analysis.report import Level
from privreg.core.cost import Cost
from privreg.core.errors import BudgetExceededError, PrivregValueError
from privreg.core.events import Composed
from privreg.core.files import write_text
from privreg.core.params import POSITIVE, Spec
from privreg.core.validation import split_columns
from privreg.core.workflow import WorkflowContext, WorkflowResult
from privreg.datasets import load_adult
from privreg.plugins.standard.mean_report import MeanReport, mean_mechanisms
from privreg.readers import numeric_column, read_table

__all__ = ["bounded_mean", "read_column", "estimate_bounded_mean", "ADULT_BOUNDS"]

#: The formats bounded-mean reads (a mail archive has no numeric column).
_FORMATS = ("csv", "jsonl", "parquet")

#: Bounds of the bundled Adult slice's columns from the census codebook (ages 17-90 are
#: the survey's range), used only when no --input is given; a user's file needs
#: --lower and --upper.
ADULT_BOUNDS = {"age": (17.0, 90.0)}

#: Each row of an input holds at least this many bytes (a cell and a line end): the
#: input's size bounds its rows without reading it.
_MIN_ROW_BYTES = 2


def estimate_bounded_mean(path: Path | None) -> Cost:
    """Peak memory and time of :func:`bounded_mean` on ``path`` (default: Adult) from
    its size in bytes ``B`` only, which is treated as public (the file system shows it to
    whoever can name the file); its content (rows, lines, values) never enters the
    estimate, so a refusal says nothing about the data. Rows are at most
    ``B / 2`` (a cell and a line end each); per row, the column's cell as str (<= 50
    bytes of object plus 8 of list slot) and three float64/bool arrays, plus the text
    (at most ``B``); reading costs about 1 us per row and 10 ns per byte. It errs high,
    most for files of long rows (``tests/test_cost.py``)."""
    if path is None:
        size, rows = 300_000, 2_000  # the bundled slice, read whole
        return Cost(memory_bytes=8 * size + 200 * rows, seconds=0.1, basis="the bundled Adult slice")
    if not path.is_file():
        raise PrivregValueError(f"input {str(path)!r} is not a file")
    size = path.stat().st_size
    rows = size // _MIN_ROW_BYTES + 1
    return Cost(
        memory_bytes=(58 + 8 * 3 + 2) * rows + size + (1 << 20),
        seconds=1e-6 * rows + 1e-8 * size,
        basis=f"{size} bytes of input (its size only; at most {rows} rows)",
    )


def _lenient(cells: Sequence[str | None], column: str, where: str) -> np.ndarray:
    """``cells`` as float64, a cell that is not a number read as NaN (missing, like an
    empty one): a rule that does not depend on the data, where refusing would."""
    try:
        return numeric_column(cells, column, where)
    except PrivregValueError:
        out = np.full(len(cells), np.nan)
        for i, cell in enumerate(cells):
            with contextlib.suppress(TypeError, ValueError):
                out[i] = float(cell)  # type: ignore[arg-type]  # None: TypeError, stays NaN
        return out


def read_column(
    path: Path | None, column: str, columns: Sequence[str] | None = None, *, lenient: bool = False
) -> np.ndarray:
    """A numeric column of a file (default: bundled Adult slice): CSV with a header row,
    or without one when ``columns`` names its columns; JSONL or Parquet by suffix
    (:func:`privreg.readers.read_table`; any other suffix reads as CSV). Empty and NaN
    cells (and cells missing from a short row) read as NaN; so do cells that are not
    numbers when ``lenient``, which are refused otherwise (an error naming the column,
    never the cell). A header row naming a column twice or holding an empty name is
    refused."""
    if path is None:
        if columns:
            raise PrivregValueError("columns names the columns of an input file; pass input= too, or drop columns")
        data = load_adult()
        if column not in data:
            raise PrivregValueError(f"column {column!r} is not in Adult; columns: {sorted(data)}")
        return numeric_column(data[column].tolist(), column, "Adult")
    table = read_table(
        path,
        [column],
        formats=_FORMATS,
        default_format="csv",
        columns=columns,
        hint="Pick the column with column= (--column)",
    )
    cells = table[column]
    return _lenient(cells, column, repr(str(path))) if lenient else numeric_column(cells, column, repr(str(path)))


def bounded_mean(
    *,
    context: WorkflowContext,
    input: Annotated[
        Path | None,
        Spec(doc="CSV (header row unless --columns), JSONL or Parquet file (default: bundled UCI Adult slice)"),
    ] = None,
    column: Annotated[str, Spec(doc="numeric column to release")] = "age",
    columns: Annotated[
        str, Spec(doc="comma-separated names of the columns of a CSV file without a header row (default: it has one)")
    ] = "",
    lower: Annotated[
        float | None,
        Spec(doc="declared lower bound of the column, from domain knowledge (required with --input)"),
    ] = None,
    upper: Annotated[
        float | None,
        Spec(doc="declared upper bound of the column, from domain knowledge (required with --input)"),
    ] = None,
    epsilon: Annotated[float, Spec(doc="total privacy parameter epsilon", **POSITIVE)] = 1.0,
    rule: Annotated[
        str,
        Spec(
            doc="values outside [--lower, --upper]: clip them to the bounds, drop their rows, or impute --impute",
            choices=list(RULES),
        ),
    ] = "clip",
    impute: Annotated[
        float | None,
        Spec(doc="declared value of empty or NaN cells (and of values outside under --rule impute); default: drop"),
    ] = None,
    curator: Annotated[
        bool,
        Spec(
            doc="the data holder's checks: refuse a column with empty cells (unless --impute) or values outside the "
            "bounds instead of applying --rule; the refusal depends on the data (private against no one who sees it)"
        ),
    ] = False,
    level: Level = 0.95,
) -> WorkflowResult:
    """Release the count, sum and mean of a bounded numeric column with Laplace noise.

    Guarantee: ``epsilon``-DP under add/remove-one-row neighbours (basic composition of a
    count with sensitivity 1 at epsilon/2 and a sum with sensitivity max(|lower|, |upper|)
    at epsilon/2; the mean is post-processing). The bounds are declared (``--lower`` and
    ``--upper``, from domain knowledge, never from the data; required for an ``--input``,
    the bundled Adult slice has its own for ``age``). Values outside them are handled by
    the declared ``--rule`` (clipped, their rows dropped, or replaced by ``--impute``);
    empty or NaN cells, and cells that are not numbers, take ``--impute`` when declared
    and are dropped otherwise. No rule
    refuses because of the data, so nothing shown before the release (errors, the cost
    estimate, which uses the input's size in bytes only) depends on it. ``--curator``
    refuses instead when a cell is empty (and not imputed) or outside the bounds: a check
    for the data holder, private against no one who sees its errors. The sum is exact
    and clamped to the float range (1-Lipschitz), and both releases are prepared before
    the first charge, so nothing can fail between the two charges.

    Output: each number with its ``level`` interval from the Laplace law of the noise
    drawn and the noise scale, after free post-processing: the count rounded to an
    integer >= 0, the sum clamped to the sign the bounds force, the mean (post-processed
    sum over count) clipped to [lower, upper]; a warning where the half-width exceeds the
    value, with the epsilon or rows that would fix it (:class:`.mean_report.MeanReport`).

    Timing: linear in the number of rows (reading the CSV dominates), which is itself
    private under add/remove; the exact-sum fallback runs only when the float sum would
    overflow (bounds near 1e308).
    """
    if (lower is None) != (upper is None):
        raise PrivregValueError("bounded-mean needs both --lower and --upper (or neither, for Adult's age)")
    if lower is None or upper is None:
        default = ADULT_BOUNDS.get(column) if input is None else None
        if default is None:
            where = f"column {column!r} of --input" if input is not None else f"column {column!r} of Adult"
            raise PrivregValueError(
                f"bounded-mean needs declared bounds for {where}: pass --lower and --upper from domain knowledge "
                f"(e.g. --lower 17 --upper 90 for ages), never from the data: the noise is calibrated to them."
            )
        lower, upper = default
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise PrivregValueError(f"--lower and --upper must be finite; got --lower {lower!r} --upper {upper!r}")
    if not lower < upper:
        raise PrivregValueError(f"--lower ({lower:g}) must be < --upper ({upper:g})")
    if rule == "impute" and impute is None:
        raise PrivregValueError("--rule impute needs --impute VALUE (a value inside [--lower, --upper])")
    if impute is not None and not (math.isfinite(impute) and lower <= impute <= upper):
        raise PrivregValueError(
            f"--impute must be a finite value inside [--lower, --upper] = [{lower:g}, {upper:g}]; got {impute!r}"
        )
    names = split_columns("columns", columns) or None
    context.require("bounded-mean", estimate_bounded_mean(input))
    # both mechanisms are public: the budget is asked for them before the data are read
    try:  # each noise scale is computed now, so neither release can fail on it after a charge
        count_mech, sum_mech = mean_mechanisms(epsilon, lower, upper)
        events = (count_mech.privacy_event(), sum_mech.privacy_event())
    except PrivregValueError:  # a noise scale past the sampler's, or epsilon / 2 underflowing to 0
        raise PrivregValueError(
            f"--epsilon {epsilon:g} is too small for the bounds [--lower, --upper] = [{lower:g}, {upper:g}]: the "
            f"noise scales it needs exceed the sampler's 2**40 grid steps; raise --epsilon"
        ) from None
    can_afford = getattr(context.charger, "can_afford", None)
    if can_afford is not None and not can_afford(Composed(events=events)):
        raise BudgetExceededError(
            f"bounded-mean: the budget cannot grant the count and the sum at --epsilon {epsilon:g} together; "
            f"nothing was read, released or charged. Pass a smaller --epsilon, or use a ledger with more left."
        )
    raw = read_column(input, column, names, lenient=not curator)
    try:
        x = apply_rule(raw, (lower, upper), "error" if curator else rule, column, impute)[0]
    except PrivregValueError:
        what = (
            "empty or NaN cells (pass --impute)"
            if np.isnan(raw).any() and impute is None
            else f"values outside [--lower, --upper] = [{lower:g}, {upper:g}] (widen them)"
        )
        raise PrivregValueError(
            f"--curator: column {column!r} has {what}; without --curator they are handled by --rule and --impute"
        ) from None
    half = epsilon / 2
    # both mechanisms and both inputs are ready before the first charge: nothing after it
    # can fail because of the data
    report = MeanReport.prepare(epsilon=epsilon, lower=lower, upper=upper, level=level)
    n, s = float(x.size), clamped_fsum(x.tolist())
    count = count_mech.release(n, charger=context.charger, rng=context.rng, label=f"count({column})")
    total = sum_mech.release(s, charger=context.charger, rng=context.rng, label=f"sum({column})")
    values = report.values(count.output, total.output)
    metrics = {
        "count": values["count"].value,
        "sum": values["sum"].value,
        "mean": values["mean"].value,
        "epsilon": epsilon,
        "level": level,
        "intervals": {name: nv.metrics() for name, nv in values.items()},
        "wide": sorted(name for name, nv in values.items() if nv.wide),
    }
    outputs = {}
    out = context.output_path("result.json")
    if out is not None:
        write_text(out, json.dumps(metrics, indent=2) + "\n", "output")
        outputs["result"] = out
    lines = [
        f"column {column!r} in [{lower:g}, {upper:g}], epsilon = {epsilon:g} (count and sum at {half:g} each)",
        f"  noisy count = {values['count'].line()}",
        f"  noisy sum   = {values['sum'].line()}",
        f"  noisy mean  = {values['mean'].line()}",
        "  post-processing (free): " + "; ".join(nv.post_processing for nv in values.values()),
    ]
    lines += [f"  {nv.warning()}" for nv in values.values() if nv.wide]
    return WorkflowResult(summary="\n".join(lines), metrics=metrics, outputs=outputs)
