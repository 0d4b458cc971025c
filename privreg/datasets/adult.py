"""UCI Adult (census income) loader."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import numpy as np

from privreg.core.errors import PrivregValueError

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
    ``path`` is ``adult.data`` or ``adult.test``; default: the bundled 2,000-row slice."""
    if path is None:
        source = resources.files("privreg.datasets").joinpath("data/adult_sample.csv")
        text = source.read_text(encoding="utf-8")
    else:
        p = Path(path)
        if not p.is_file():
            raise PrivregValueError(f"path {str(p)!r} is not a file; pass the path of adult.data")
        text = p.read_text(encoding="utf-8")
    rows = [[c.strip() for c in row] for row in csv.reader(text.splitlines()) if len(row) == len(ADULT_COLUMNS)]
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
