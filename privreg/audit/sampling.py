"""Drawing the audit's outputs from a mechanism or a randomizer on two neighbours.

The neighbours are synthetic (no real person's data), so the draws are charged to a
throw-away :class:`~privreg.core.charging.EventLog`: the charge is made, as every release
must be, but against no real budget.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from privreg.core import validation as v
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.mechanism import Mechanism
from privreg.core.randomizer import Randomizer
from privreg.core.randomness import RandomSource

__all__ = [
    "AUDIT_BYTES_PER_SAMPLE",
    "AuditInconclusive",
    "MIN_SAMPLES",
    "max_samples",
    "ChargedFailure",
    "check_alpha",
    "check_neighbours",
    "check_samples",
    "draw_mechanism",
    "draw_randomizer",
    "direction_of",
]

#: Fewer samples per side cannot give a useful bound at any sensible alpha.
MIN_SAMPLES = 1000


def check_alpha(alpha: Any) -> float:
    return v.check_probability("alpha", alpha, open_low=True, open_high=True)


#: Memory the audit holds per output and neighbour, at least: measured peaks are 130
#: bytes for scalar outputs (Laplace, randomized response) and 590 for 8-coordinate
#: outputs (unary encoding) -- the outputs, their pooled copy, features and event masks.
#: A count refused by this floor cannot fit, whatever the item.
AUDIT_BYTES_PER_SAMPLE = 128


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return 16 << 30


def max_samples() -> int:
    """The most samples per neighbour this machine can hold:
    ``physical memory / (2 * AUDIT_BYTES_PER_SAMPLE)``."""
    return _physical_memory() // (2 * AUDIT_BYTES_PER_SAMPLE)


def check_samples(samples: Any) -> int:
    """``samples`` as an int in ``[MIN_SAMPLES, max_samples()]``: a count beyond what the
    machine can hold is bad input (refused before anything is drawn), not a violation."""
    n = v.check_int("samples", samples, minimum=MIN_SAMPLES)
    top = max_samples()
    if n > top:
        raise PrivregValueError(
            f"samples={n} needs at least {n * 2 * AUDIT_BYTES_PER_SAMPLE / 2**30:.3g} GiB "
            f"({AUDIT_BYTES_PER_SAMPLE} bytes per output and neighbour), more than this machine's "
            f"{_physical_memory() / 2**30:.3g} GiB of memory; use at most {top} samples"
        )
    return n


class AuditInconclusive(PrivregError):
    """Every neighbour's release failed alike (same exception class and message) after its
    charge: the failure tells the neighbours apart no better than chance, so it is no
    evidence of a violation, and no output could be drawn to audit."""


def check_neighbours(neighbours: Any) -> tuple[Any, Any]:
    if not isinstance(neighbours, (tuple, list)):
        raise PrivregTypeError(f"neighbours must be a tuple of two inputs (first, second); got {neighbours!r}")
    if len(neighbours) != 2:
        raise PrivregValueError(f"neighbours must be a pair of inputs; got {len(neighbours)} items")
    return neighbours[0], neighbours[1]


def direction_of(first: Any, second: Any) -> np.ndarray | None:
    """``second - first`` as a float vector, when both are numeric of one shape."""
    try:
        a = np.asarray(first, dtype=np.float64)
        b = np.asarray(second, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if a.shape != b.shape or not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return None
    return (b - a).reshape(-1)


class ChargedFailure(Exception):
    """A release raised *after* its charge: the failure itself is an output that depends on
    the value (the auditor reports it as a violation, never as bad input). ``error`` is
    the exception the release raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def _charged_call(call: Any, log: EventLog) -> Any:
    """``call()``; an exception raised after ``log`` recorded a charge becomes a
    :class:`ChargedFailure`, one raised before it (validation) propagates unchanged."""
    try:
        return call()
    except Exception as exc:
        if log.charges:
            raise ChargedFailure(exc) from exc
        raise


def draw_mechanism(mechanism: Mechanism, value: Any, *, samples: int, rng: RandomSource) -> Any:
    """``samples`` independent releases of ``value`` (first axis: the repetition). Raises
    :class:`ChargedFailure` if the release fails after it was charged."""
    log = EventLog()
    release = _charged_call(
        lambda: mechanism.release_many(value, samples, charger=log, rng=rng, label="empirical audit"), log
    )
    return _check_count(release.output, samples, mechanism.name or type(mechanism).__name__)


def draw_randomizer(randomizer: Randomizer, value: Any, *, samples: int, rng: RandomSource) -> np.ndarray:
    """The reports of ``samples`` users who all hold the single-user input ``value``
    (:class:`ChargedFailure` if randomizing fails after the charge)."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.shape[0] != 1:
        raise PrivregValueError(
            f"a randomizer's neighbour must be one user's input (first axis of length 1, e.g. "
            f"np.array([3])); got shape {arr.shape}"
        )
    inputs = np.repeat(arr, samples, axis=0)
    log = EventLog()
    reports = _charged_call(
        lambda: randomizer.randomize(inputs, charger=log, rng=rng, label="empirical audit"), log
    ).reports
    return _check_count(reports, samples, randomizer.name or type(randomizer).__name__)


def _check_count(outputs: Any, samples: int, who: str) -> Any:
    if not hasattr(outputs, "__len__") or len(outputs) != samples:
        got = len(outputs) if hasattr(outputs, "__len__") else type(outputs).__name__
        raise PrivregValueError(f"{who} returned {got} outputs for {samples} draws; it must return one per draw")
    return outputs
