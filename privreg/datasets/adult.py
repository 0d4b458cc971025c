"""UCI Adult (census income) loader."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from privreg.core.errors import PrivregValueError
from privreg.readers import check_file, csv_rows

__all__ = ["ADULT_COLUMNS", "ADULT_EDUCATION", "ADULT_NUMERIC", "load_adult"]

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
#: The 16 education levels as adult.names documents them: public categories (a histogram's
#: categories must never be read off the data).
ADULT_EDUCATION = (
    "Bachelors",
    "Some-college",
    "11th",
    "HS-grad",
    "Prof-school",
    "Assoc-acdm",
    "Assoc-voc",
    "9th",
    "7th-8th",
    "12th",
    "Masters",
    "1st-4th",
    "10th",
    "Doctorate",
    "5th-6th",
    "Preschool",
)
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def load_adult(path: str | Path | None = None) -> dict[str, np.ndarray]:
    """Columns of Adult as arrays: numeric columns as float64, the others as str
    (``'?'`` kept for missing; the trailing ``'.'`` of ``adult.test`` labels removed).
    ``path`` is ``adult.data`` or ``adult.test`` (comma separated, no header row; rows
    without 15 cells, such as ``adult.test``'s first line, are skipped); default: the
    bundled 2,000-row slice. Read with :func:`privreg.readers.csv_rows`."""
    if path is None:
        with resources.as_file(resources.files("privreg.datasets").joinpath("data/adult_sample.csv")) as p:
            rows = _rows(p)
    else:
        rows = _rows(check_file(path, "path", "pass the path of adult.data"))
    if not rows:
        raise PrivregValueError(f"no Adult rows found in {path or 'the bundled slice'}")
    cols = list(zip(*rows))
    out: dict[str, np.ndarray] = {}
    for name, values in zip(ADULT_COLUMNS, cols):
        if name in ADULT_NUMERIC:
            out[name] = np.asarray(values, dtype=np.float64)
        elif name == "income":
            out[name] = np.asarray([x.rstrip(".") for x in values])
        else:
            out[name] = np.asarray(values)
    return out


def _rows(path: Path) -> list[list[str]]:
    return [[c.strip() for c in row] for row in csv_rows(path, what="path") if len(row) == len(ADULT_COLUMNS)]
