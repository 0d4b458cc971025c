"""Progress of long computations: the callback type and a helper that reports one phase.

A progress callback is called as ``callback(phase, done, total, unit)``: ``phase`` is a
short fixed name of a step of the computation (``"private evaluation"``), ``done`` how
many units of it are finished, ``total`` how many there are (``None`` while unknown) and
``unit`` what is counted, in the singular (``"message"``, ``"decision"``). Within one
phase ``done`` never decreases; the first report has ``done == 0`` and the last has
``done == total`` (a phase of unknown length ends with ``total`` set to its final count).

Guarantees of every report made through :class:`PhaseProgress`: it carries counts only,
never a record, a value or a result; it draws no randomness, so a run gives the same
outputs with and without a callback; and an exception raised by the callback becomes one
``RuntimeWarning`` and ends that phase's reports, so a faulty display can neither abort a
run after its budget was charged nor change its result.

Reporters for a terminal or a log (tqdm bars, plain lines on stderr) are in
:mod:`privreg.progress`; the CLI installs one in
:attr:`~privreg.core.workflow.WorkflowContext.progress`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from privreg.core.errors import PrivregTypeError

__all__ = ["ProgressCallback", "PhaseProgress", "silent", "check_progress"]

#: ``callback(phase, done, total, unit)``; see the module docstring.
ProgressCallback = Callable[[str, int, int | None, str], None]


def silent(phase: str, done: int, total: int | None, unit: str) -> None:
    """The default callback of library callers: they asked for no progress."""


def check_progress(name: str, progress: Any) -> ProgressCallback | None:
    """``progress`` if it is ``None`` or callable; else :class:`PrivregTypeError`."""
    if progress is not None and not callable(progress):
        raise PrivregTypeError(
            f"{name} must be None or a callable (phase, done, total, unit); got {type(progress).__name__}"
        )
    checked: ProgressCallback | None = progress
    return checked


class PhaseProgress:
    """The reports of one phase to ``progress`` (nothing when it is ``None``).

    Creating it reports ``done = 0``; :meth:`advance` and :meth:`update` report larger
    counts (a smaller one is ignored, a count above ``total`` is reported as ``total``);
    :meth:`finish` reports the end. Used as a context manager it finishes when the block
    ends normally (after an error it does not claim the phase was completed)."""

    def __init__(self, progress: ProgressCallback | None, phase: str, *, total: int | None, unit: str) -> None:
        self._callback = check_progress("progress", progress)
        self.phase, self.unit = phase, unit
        self.total = None if total is None else max(0, int(total))
        self.done = 0
        self._finished = False
        self._report()

    def __enter__(self) -> PhaseProgress:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.finish()

    def advance(self, count: int = 1) -> None:
        """``count`` more units are finished."""
        self.update(self.done + count)

    def update(self, done: int) -> None:
        """``done`` units are finished in all."""
        done = int(done) if self.total is None else min(int(done), self.total)
        if done > self.done and not self._finished:
            self.done = done
            self._report()

    def finish(self) -> None:
        """The phase is complete: ``done = total`` (an unknown total becomes ``done``)."""
        if self._finished:
            return
        if self.total is None:
            self.total = self.done
            self._report()
        else:
            self.update(self.total)
        self._finished = True

    def _report(self) -> None:
        if self._callback is None:
            return
        try:
            self._callback(self.phase, self.done, self.total, self.unit)
        except Exception as exc:  # noqa: BLE001 -- progress is advisory: it must not end a run
            self._callback = None
            warnings.warn(
                f"the progress callback raised {type(exc).__name__}; phase {self.phase!r} is no longer reported",
                RuntimeWarning,
                stacklevel=3,
            )
