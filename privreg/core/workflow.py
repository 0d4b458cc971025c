"""What a workflow receives and returns.

A workflow is an end-to-end pipeline registered by a plugin (``privreg run NAME``). It
receives a :class:`WorkflowContext` holding the charger every release must go through, the
random source, and where to write outputs; it returns a :class:`WorkflowResult`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from privreg.core.charging import Charger, EventLog
from privreg.core.cost import Cost, Limits
from privreg.core.errors import PrivregTypeError
from privreg.core.files import make_dir
from privreg.core.progress import ProgressCallback, check_progress, silent
from privreg.core.randomness import RandomSource, resolve_random
from privreg.core.text import escape_controls

__all__ = ["WorkflowContext", "WorkflowResult", "DemoStep", "Cost", "Limits"]


def _ignore(message: str) -> None:
    """Default sink for progress messages of library callers: they asked for silence."""


def _progress(p: ProgressCallback | None) -> ProgressCallback:
    checked = check_progress("progress", p)
    return silent if checked is None else checked


def _output_dir(p: str | os.PathLike[str] | None) -> Path | None:
    return None if p is None else Path(p)


@attrs.define(kw_only=True)
class WorkflowContext:
    """Per-run services: ``charger`` (every release is charged here), ``rng`` (the OS
    CSPRNG unless a test source was passed explicitly), ``output_dir`` (``None``: write
    nothing), ``echo`` (progress messages for a human), ``progress`` (counts of the long
    phases, a :data:`~privreg.core.progress.ProgressCallback`; default silent, the CLI
    shows them on stderr) and ``limits`` (the memory, time, input and worker limits of
    :mod:`privreg.core.cost`; ``privreg run --max-memory-gib`` and friends).

    Every workflow calls :meth:`require` with its cost estimate after reading and
    validating its inputs and before its first charge; ``estimate`` then holds it."""

    charger: Charger = attrs.field(factory=EventLog)
    rng: RandomSource = attrs.field(default=None, converter=resolve_random)
    output_dir: Path | None = attrs.field(default=None, converter=_output_dir)
    echo: Callable[[str], None] = _ignore
    progress: ProgressCallback = attrs.field(default=silent, converter=_progress)
    limits: Limits = attrs.field(factory=Limits, validator=attrs.validators.instance_of(Limits))
    estimate: Cost | None = attrs.field(default=None, init=False)

    def require(self, workflow: str, cost: Cost) -> Cost:
        """Refuse the run (:class:`~privreg.core.cost.ResourceLimitError`, nothing
        charged) if ``cost`` is above :attr:`limits`; otherwise record it in
        :attr:`estimate` and return it."""
        self.limits.check(workflow, cost)
        self.estimate = cost
        return cost

    def check_workers(self, name: str, workers: int | None) -> int | None:
        """``workers`` if at most ``limits.max_workers`` (``--max-workers``); else refused."""
        return self.limits.check_workers(name, workers)

    def output_path(self, name: str) -> Path | None:
        """``output_dir / name`` (folder created), or ``None`` when outputs are not kept."""
        if self.output_dir is None:
            return None
        make_dir(self.output_dir, "output folder")
        return self.output_dir / name


def _printable(summary: Any) -> Any:
    return escape_controls(summary) if isinstance(summary, str) else summary


@attrs.frozen(kw_only=True)
class WorkflowResult:
    """A workflow's answer: a printable ``summary`` (control characters other than
    newlines escaped as ``\\xNN``), named ``metrics`` and output files."""

    summary: str = attrs.field(converter=_printable)
    metrics: Mapping[str, Any] = attrs.field(factory=dict)
    outputs: Mapping[str, Path] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class DemoStep:
    """One step of ``privreg demo``; plugins contribute steps through a hook.

    ``run(context)`` returns the text to show. ``order`` sorts steps across plugins
    (core tour first, then plugins in the order their papers are numbered).
    """

    title: str
    run: Callable[[WorkflowContext], str]
    order: int = 100

    def __attrs_post_init__(self) -> None:
        if not callable(self.run):
            raise PrivregTypeError(f"DemoStep {self.title!r}: run must be callable")
