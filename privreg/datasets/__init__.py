"""Loaders for the real data sets used by tests, examples and the demo.

Every loader takes an optional path to the full data; without one it reads the small
slice shipped with privreg (licences and sources in ``privreg/datasets/data/NOTICE``), so
the demo runs on a fresh clone without downloads.
"""

from privreg.datasets.adult import ADULT_COLUMNS, ADULT_EDUCATION, ADULT_NUMERIC, load_adult

__all__ = ["ADULT_COLUMNS", "ADULT_EDUCATION", "ADULT_NUMERIC", "load_adult"]
