"""UCI Adult (census income) loader."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import numpy as np

from privreg.core.errors import PrivregValueError

__all__ = ["ADULT_COLUMNS", "ADULT_NUMERIC", "load_adult"]

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
