"""The ngrams plugin's backends for the aggregation half of its pipeline (see
:mod:`privreg.plugins.ngrams.backends.base`). They serve paper 002's n-gram extraction
only (token pairs, per-user key bounding), so they live in the plugin.

``local`` (numpy/pandas, in-process, the default) and ``spark`` (PySpark DataFrame API,
optional dependency) implement the same :class:`Backend` interface; the release half
(noise, thresholds, accounting) runs on the driver on the aggregated histogram only.
"""

from __future__ import annotations

from typing import Any

from privreg.core.errors import PrivregValueError
from privreg.plugins.ngrams.backends.base import (
    DEFAULT_SCALE,
    INPUT_FORMATS,
    WEIGHTINGS,
    Backend,
    Histogram,
    Tokenizer,
    contribution_weights,
    detect_format,
)
from privreg.plugins.ngrams.backends.local import LocalBackend
from privreg.plugins.ngrams.backends.tokens import LocalPairs, TokenCorpus

__all__ = [
    "BACKENDS",
    "Backend",
    "DEFAULT_SCALE",
    "Histogram",
    "INPUT_FORMATS",
    "LocalBackend",
    "LocalPairs",
    "TokenCorpus",
    "Tokenizer",
    "WEIGHTINGS",
    "contribution_weights",
    "detect_format",
    "make_backend",
]

#: Backend names accepted by :func:`make_backend`.
BACKENDS = ("local", "spark")


def make_backend(name: str, **options: Any) -> Backend:
    """A backend by name: ``"local"`` or ``"spark"`` (options go to its constructor)."""
    if name == "local":
        return LocalBackend(**options)
    if name == "spark":
        from privreg.plugins.ngrams.backends.spark import SparkBackend

        return SparkBackend(**options)
    raise PrivregValueError(f"backend must be one of {BACKENDS}; got {name!r}")
