"""The outliers plugin's parameters shared by its factories, each declared once: the
``Annotated`` types of the mechanism, sensitivity and workflow arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from privreg.core.params import OPEN_UNIT, POSITIVE, Spec
from privreg.plugins.outliers.ball_cover import COVER_METHODS
from privreg.plugins.outliers.definitions import MAX_K

__all__ = [
    "Epsilon",
    "Delta",
    "WorkflowDelta",
    "K",
    "Cover",
    "Step",
    "Subspace",
    "Input",
    "Columns",
    "ColumnNames",
    "radius",
]

Epsilon = Annotated[float, Spec(doc="privacy parameter epsilon", **POSITIVE)]
Delta = Annotated[float, Spec(doc="privacy parameter delta, well below 1/n", **OPEN_UNIT)]
# the workflows document a tighter delta than the mechanism accepts
WorkflowDelta = Annotated[
    float, Spec(doc="privacy parameter delta, well below 1/n", minimum=0, exclusive_minimum=True, maximum=0.5)
]
K = Annotated[int, Spec(doc="a record is an outlier with fewer than k neighbours", minimum=1, maximum=MAX_K)]
Cover = Annotated[
    str,
    Spec(
        doc=(
            "max-ball-cover method: exact (exponential worst case for 3+ attributes); truss "
            "(polynomial upper bound, close to exact); core (near-linear, looser); projection"
        ),
        choices=COVER_METHODS,
    ),
]
# a grid far below 2^-30 makes the exact scale's fraction overflow a float, one far above
# 2^20 makes the interval infinite: both found only after the charge, so refused here
Step = Annotated[float, Spec(doc="public output grid of the released count", minimum=2.0**-30, maximum=2.0**20)]
# (the same range as release.STEP_RANGE, which the mechanism checks when built directly)
Subspace = Annotated[str, Spec(doc="comma-separated attribute indices of the subspace S (empty: all attributes)")]
Input = Annotated[
    Path | None,
    Spec(
        doc="CSV (header row unless --column-names), JSONL or Parquet file, a record per row (default: generated data)"
    ),
]
Columns = Annotated[
    str, Spec(doc="comma-separated numeric columns to use (default: all); scale them with public constants")
]
ColumnNames = Annotated[
    str,
    Spec(doc="comma-separated names of the columns of a CSV file without a header row (--columns picks among them)"),
]


def radius(per: str) -> Spec:
    """The neighbourhood radius r, its distance divided by ``sqrt(per)``."""
    return Spec(doc=f"neighbourhood radius r (distance divided by sqrt({per}))", **POSITIVE)
