"""Data for the outlier experiments of paper 003 (Section 6.1, Tables 1-2).

* :func:`synthetic_1` -- 45 inliers from ``N(0, I_2)`` and 5 outliers from
  ``N((20, 20), diag(100, 100))`` (Table 1).
* :func:`synthetic_2` -- 490 inliers from ``N(0, I_10)`` and 10 outliers from
  ``N(mu, Sigma)`` with ``mu = (20, 20, 0, ..., 0)``, ``Sigma = diag(100, 100, 1, ..., 1)``
  (Table 2): the outliers stand out only in attributes 0 and 1.
* :func:`load_adult_outliers` -- UCI Adult, 7 numeric attributes (below), label ``>50K``
  as the outlier class; the bundled 2,000-row slice unless a path is given.
* :func:`load_ionosphere` -- UCI Ionosphere (34 attributes, ``bad`` as the outlier class);
  needs the path of ``ionosphere.csv`` (header ``V1..V34,Class``; not bundled).
* :func:`paper_sample` draws the paper's inlier/outlier mixes from a labelled set and
  :func:`standardise` scales attributes to mean 0, variance 1 as the paper did.

The generators use numpy's seeded generator: they simulate *data*, not privacy noise.

Choices the paper leaves open (documented, adjustable by argument):
Adult has six numeric attributes and the paper drops ``fnlwgt``, yet Tables 1-2 say
``d = 7``; we use the five remaining numeric attributes plus ``sex`` (Male = 1) and
``race`` (White = 1). The paper calls the "positive" class inliers without naming it; we
take ``<=50K`` (the majority) as inliers. Table 2's Adult 2 lists 369 inliers while the
text says 490; use :func:`paper_sample` with the mix you want.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.datasets import load_adult
from privreg.readers import check_file, csv_names, numeric_column, read_table

__all__ = [
    "OutlierData",
    "ADULT_OUTLIER_COLUMNS",
    "synthetic_1",
    "synthetic_2",
    "load_adult_outliers",
    "load_ionosphere",
    "paper_sample",
    "standardise",
    "read_csv_points",
]

#: The formats the outlier workflows read (a mail archive has no numeric column).
_FORMATS = ("csv", "jsonl", "parquet")

#: The 7 Adult attributes used (see the module docstring).
ADULT_OUTLIER_COLUMNS = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week", "sex", "race")
_ADULT_CODES = {"sex": "Male", "race": "White"}


@attrs.frozen(kw_only=True)
class OutlierData:
    """Records (rows) with ground-truth outlier labels and attribute names."""

    points: np.ndarray
    is_outlier: np.ndarray
    columns: tuple[str, ...]

    @property
    def n(self) -> int:
        return int(self.points.shape[0])


def _mixture(n_in: int, n_out: int, dim: int, seed: int) -> OutlierData:
    gen = np.random.default_rng(v.check_int("seed", seed, minimum=0))
    inliers = gen.normal(size=(n_in, dim))
    mu = np.zeros(dim)
    mu[:2] = 20.0
    scale = np.ones(dim)
    scale[:2] = 10.0  # Sigma_11 = Sigma_22 = 100
    outliers = mu + scale * gen.normal(size=(n_out, dim))
    return OutlierData(
        points=np.vstack([inliers, outliers]),
        is_outlier=np.r_[np.zeros(n_in, bool), np.ones(n_out, bool)],
        columns=tuple(f"x{i}" for i in range(dim)),
    )


def synthetic_1(seed: int = 0) -> OutlierData:
    """Paper 003's Synthetic 1: 50 records in 2-d (45 inliers, 5 outliers); Table 1
    uses ``k = 3``, ``r = 1.1``."""
    return _mixture(45, 5, 2, seed)


def synthetic_2(seed: int = 0) -> OutlierData:
    """Paper 003's Synthetic 2: 500 records in 10-d (490 inliers, 10 outliers in
    attributes 0 and 1); Table 2 uses ``k = 3``, ``r = 0.13``."""
    return _mixture(490, 10, 10, seed)


def load_adult_outliers(
    path: str | Path | None = None, *, columns: Sequence[str] = ADULT_OUTLIER_COLUMNS, outlier_label: str = ">50K"
) -> OutlierData:
    """UCI Adult as numeric records: numeric columns as they are, ``sex`` and ``race`` as
    0/1 codes (Male, White = 1). ``path``: ``adult.data`` or ``adult.test`` (default: the
    bundled 2,000-row slice, :func:`privreg.datasets.load_adult`)."""
    table = load_adult(path)
    cols = []
    for name in columns:
        if name not in table:
            raise PrivregValueError(f"column {name!r} is not in Adult; columns: {sorted(table)}")
        col = table[name]
        if name in _ADULT_CODES:
            col = (col == _ADULT_CODES[name]).astype(np.float64)
        elif col.dtype.kind not in "fi":
            raise PrivregValueError(f"Adult column {name!r} is categorical; pick numeric columns or sex/race")
        cols.append(np.asarray(col, dtype=np.float64))
    return OutlierData(
        points=np.column_stack(cols), is_outlier=table["income"] == outlier_label, columns=tuple(columns)
    )


def load_ionosphere(path: str | Path) -> OutlierData:
    """UCI Ionosphere from ``path`` (CSV with header ``V1..V34,Class``; ``bad`` is the
    outlier class)."""
    p = check_file(path, "path", "pass the path of ionosphere.csv (UCI Ionosphere, CC BY 4.0)")
    header = csv_names(p, what="path")
    if header[-1].lower() != "class":
        raise PrivregValueError(f"{str(p)!r}: the last column must be 'Class'; got {header[-1]!r}")
    table = read_table(p, header, format="csv", what="path")
    points = np.column_stack([numeric_column(table[c], c, repr(str(p))) for c in header[:-1]])
    labels = np.array([(x or "").strip() for x in table[header[-1]]])
    return OutlierData(points=points, is_outlier=labels == "bad", columns=tuple(header[:-1]))


def paper_sample(data: OutlierData, *, inliers: int, outliers: int, seed: int = 0) -> OutlierData:
    """``inliers`` records of the inlier class and ``outliers`` of the outlier class,
    drawn without replacement (seeded), inliers first -- the mixes of Tables 1-2."""
    gen = np.random.default_rng(v.check_int("seed", seed, minimum=0))
    idx_in, idx_out = np.flatnonzero(~data.is_outlier), np.flatnonzero(data.is_outlier)
    if inliers > idx_in.size or outliers > idx_out.size:
        raise PrivregValueError(
            f"asked for {inliers} inliers and {outliers} outliers; the data hold {idx_in.size} and {idx_out.size}"
        )
    pick = np.r_[gen.choice(idx_in, inliers, replace=False), gen.choice(idx_out, outliers, replace=False)]
    return OutlierData(points=data.points[pick], is_outlier=data.is_outlier[pick], columns=data.columns)


def standardise(points: np.ndarray) -> np.ndarray:
    """Each attribute scaled to mean 0 and variance 1 (constant attributes to 0), as the
    paper's experiments do. For evaluation only: scaling by statistics of the private data
    makes the distance itself depend on every record, which the sensitivity analysis of
    Theorems 4-6 does not cover. A release must scale with public constants."""
    x = np.asarray(points, dtype=np.float64)
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def read_csv_points(
    path: Path, columns: Sequence[str] | None = None, *, column_names: Sequence[str] | None = None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """The numeric columns ``columns`` (default: all) of a file, as a float64 matrix: a
    CSV file with a header row, or without one when ``column_names`` names its columns; JSONL or
    Parquet by suffix (:func:`privreg.readers.read_table`; any other suffix reads as CSV).
    Empty, NaN or non-numeric cells are an error naming the column (never the cell or its
    row: they are data); so is a header row with an empty or repeated name."""
    p = check_file(path, "input", "pass a CSV, JSONL or Parquet file")
    table = read_table(
        p,
        list(columns) if columns else None,
        formats=_FORMATS,
        default_format="csv",
        columns=column_names,
        hint="Pick numeric columns with columns= (--columns)",
        param="column_names",
    )
    picked = tuple(table)
    out = np.empty((len(table[picked[0]]) if picked else 0, len(picked)))
    for j, name in enumerate(picked):
        try:
            col: np.ndarray | None = numeric_column(table[name], name, repr(str(p)))
        except PrivregValueError:
            col = None
        if col is None or np.isnan(col).any():
            # the rule and the column (public schema), never the cell or its row
            raise PrivregValueError(
                f"{str(p)!r}: column {name!r} has a cell that is empty, NaN or not a number; "
                f"every cell of the chosen columns must be a number. Clean the data or "
                f"pick numeric columns with columns=..."
            )
        out[:, j] = col
    if not out.shape[0]:
        raise PrivregValueError(f"{str(p)!r} has no records")
    return out, picked
