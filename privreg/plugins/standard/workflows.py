"""Workflows of the standard plugin."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import numpy as np

from privreg.analysis.frames import clamped_fsum
from privreg.analysis.report import Level
from privreg.core.cost import Cost
from privreg.core.errors import PrivregValueError
from privreg.core.files import write_text
from privreg.core.params import POSITIVE, Spec
from privreg.core.validation import split_columns
from privreg.core.workflow import WorkflowContext, WorkflowResult
from privreg.datasets import load_adult
from privreg.plugins.standard.mean_report import MeanReport, mean_mechanisms
from privreg.readers import numeric_column, read_table

__all__ = ["bounded_mean", "read_column", "estimate_bounded_mean", "count_lines"]

#: The formats bounded-mean reads (a mail archive has no numeric column).
_FORMATS = ("csv", "jsonl", "parquet")


def count_lines(path: Path) -> int:
    """Lines of a file (a final line without a newline counts), read in 1 MiB blocks."""
    lines, last = 0, b"\n"
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def estimate_bounded_mean(path: Path | None) -> Cost:
    """Peak memory and time of :func:`bounded_mean` on ``path`` (default: Adult), from
    its size and its number of lines ``n``: the column's cells as str (<= 50 bytes of object
    plus 8 of list slot each, plus their text, at most the file) and three float64/bool
    arrays of ``n``; reading costs about 1 us per line and 10 ns per byte.
    ``tests/test_cost.py`` holds it within [1, 4] x the measured peak."""
    if path is None:
        size, rows = 300_000, 2_000  # the bundled slice, read whole
        return Cost(memory_bytes=8 * size + 200 * rows, seconds=0.1, basis="the bundled Adult slice")
    if not path.is_file():
        raise PrivregValueError(f"input {str(path)!r} is not a file")
    size, rows = path.stat().st_size, count_lines(path)
    return Cost(
        memory_bytes=(58 + 8 * 3 + 2) * rows + size + (1 << 20),
        seconds=1e-6 * rows + 1e-8 * size,
        basis=f"{rows} lines, {size} bytes of CSV",
    )


def read_column(path: Path | None, column: str, columns: Sequence[str] | None = None) -> np.ndarray:
    """A numeric column of a file (default: bundled Adult slice): CSV with a header row,
    or without one when ``columns`` names its columns; JSONL or Parquet by suffix
    (:func:`privreg.readers.read_table`; any other suffix reads as CSV). Empty and NaN
    cells (and cells missing from a short row) read as NaN. A header row naming a column
    twice or holding an empty name is refused."""
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
    return numeric_column(table[column], column, repr(str(path)))


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
    lower: Annotated[float, Spec(doc="declared lower bound of the column")] = 17.0,
    upper: Annotated[float, Spec(doc="declared upper bound of the column")] = 90.0,
    epsilon: Annotated[float, Spec(doc="total privacy parameter epsilon", **POSITIVE)] = 1.0,
    clip: Annotated[bool, Spec(doc="clip values outside [lower, upper] instead of failing (not missing ones)")] = False,
    drop_missing: Annotated[
        bool, Spec(doc="drop rows whose cell is empty or NaN instead of failing (recorded in run.json)")
    ] = False,
    level: Level = 0.95,
) -> WorkflowResult:
    """Release the count, sum and mean of a bounded numeric column with Laplace noise.

    Guarantee: ``epsilon``-DP under add/remove-one-row neighbours (basic composition of a
    count with sensitivity 1 at epsilon/2 and a sum with sensitivity max(|lower|, |upper|)
    at epsilon/2; the mean is post-processing). Values outside [lower, upper] are an error
    unless ``clip`` is set: the bounds must come from domain knowledge, never from the data.
    Missing cells (empty or NaN) are an error unless ``drop_missing`` is set, which drops
    their rows before anything is released (a row filter: the guarantee is unchanged);
    ``clip`` never turns a missing cell into a value.
    Such an error names the column and the rule, never a row or a value. The sum is exact
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
    if not lower < upper:
        raise PrivregValueError(f"lower ({lower}) must be < upper ({upper})")
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise PrivregValueError(f"lower and upper must be finite; got lower={lower!r}, upper={upper!r}")
    names = split_columns("columns", columns) or None
    context.require("bounded-mean", estimate_bounded_mean(input))
    x = read_column(input, column, names)
    missing = np.isnan(x)
    if missing.any():
        if not drop_missing:
            # the rule and the column only: a row index or a value would be private data
            raise PrivregValueError(
                f"column {column!r} has empty or NaN cells; clean the data, or pass drop_missing=true "
                f"(--drop-missing) to drop those rows (clip does not apply to missing cells)"
            )
        x = x[~missing]
    outside = (x < lower) | (x > upper)
    if outside.any() and not clip:
        raise PrivregValueError(
            f"column {column!r} has values outside the declared bounds [{lower:g}, {upper:g}]; "
            f"widen the bounds or pass clip=true"
        )
    x = np.clip(x, lower, upper)
    half = epsilon / 2
    # both mechanisms and both inputs are ready before the first charge: nothing after it
    # can fail because of the data
    count_mech, sum_mech = mean_mechanisms(epsilon, lower, upper)
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
