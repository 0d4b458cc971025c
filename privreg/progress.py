"""Progress reporters for a person watching: tqdm bars on a terminal, plain lines in a log.

Each reporter is a :data:`~privreg.core.progress.ProgressCallback` (pass it as
``WorkflowContext(progress=...)`` or as a protocol's ``progress=``) that writes to one
stream, by default standard error -- never standard output, which carries results --
and has :meth:`Reporter.echo` (a message that does not break a bar) and
:meth:`Reporter.close` (ends the bars still open).

:func:`console_reporter` chooses one (the CLI's choice): tqdm bars when standard error is
a terminal and tqdm is installed (``pip install 'privreg[progress]'``); otherwise plain
lines, also on a terminal without tqdm and always in a file or a pipe, where redrawn
bars would leave one line per redraw. ``PRIVREG_PROGRESS=plain`` forces plain lines,
``PRIVREG_PROGRESS=off`` silences progress (messages are still shown).

A report with ``done == 0`` starts its phase anew (a phase that stopped on an error
never finished). Plain lines come at a bounded rate: a phase's first and last report always print, and
in between a line prints only if ``interval`` seconds (5) have passed since the phase's
previous line and either a further tenth of the total is done or ``heartbeat`` seconds
(60) have passed -- at most about a dozen lines per phase plus one a minute.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from privreg.core.errors import PrivregValueError

__all__ = ["Reporter", "PlainReporter", "TqdmReporter", "console_reporter", "MODES", "ENVIRONMENT_VARIABLE"]

#: ``console_reporter(mode=...)`` and ``PRIVREG_PROGRESS`` values.
MODES = ("auto", "plain", "off")
#: The environment variable :func:`console_reporter` reads when no mode is given.
ENVIRONMENT_VARIABLE = "PRIVREG_PROGRESS"


class Reporter:
    """Reports nothing; :meth:`echo` prints a message to ``stream`` (default stderr)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream: IO[str] = stream if stream is not None else sys.stderr

    def __call__(self, phase: str, done: int, total: int | None, unit: str) -> None:
        """A report (see :mod:`privreg.core.progress`); this one is silent."""

    def echo(self, message: str) -> None:
        """Print ``message`` on its own line."""
        print(message, file=self.stream, flush=True)

    def close(self) -> None:
        """End what is still shown (nothing here)."""


def _plural(unit: str, count: int | None) -> str:
    if count == 1:
        return unit
    if unit.endswith("y") and unit[-2:-1] not in ("a", "e", "i", "o", "u"):
        return unit[:-1] + "ies"  # party -> parties
    return unit + ("es" if unit.endswith(("s", "x", "ch", "sh")) else "s")


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class PlainReporter(Reporter):
    """One line per report, rate-limited as the module docstring says, written as
    ``progress: PHASE: DONE/TOTAL UNITs (P%), elapsed M:SS, about M:SS left``.
    ``clock`` (seconds, monotonic) is for tests."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        interval: float = 5.0,
        heartbeat: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(stream)
        self.interval, self.heartbeat, self.clock = float(interval), float(heartbeat), clock
        # phase -> (start time, time of its last line, tenths of the total done at that line)
        self._phases: dict[str, tuple[float, float, int]] = {}

    def __call__(self, phase: str, done: int, total: int | None, unit: str) -> None:
        now = self.clock()
        finished = total is not None and done >= total
        tenths = 10 * done // total if total else 0
        state = None if done == 0 else self._phases.get(phase)  # done = 0: the phase (re)starts
        if state is None:
            start, due = now, True
        else:
            start, last, shown = state
            quiet = now - last
            due = finished or (quiet >= self.interval and (total is None or tenths > shown or quiet >= self.heartbeat))
        if not due:
            return
        self._line(phase, done, total, unit, now - start)
        if finished:
            self._phases.pop(phase, None)
        else:
            self._phases[phase] = (start, now, tenths)

    def _line(self, phase: str, done: int, total: int | None, unit: str, elapsed: float) -> None:
        if total is None:
            text = f"{done:,} {_plural(unit, done)}"
        else:
            pct = 100 if total == 0 else 100 * done // total
            text = f"{done:,}/{total:,} {_plural(unit, total)} ({pct}%)"
        if elapsed >= 1:
            text += f", elapsed {_clock(elapsed)}"
            if total is not None and 0 < done < total:
                text += f", about {_clock(elapsed * (total - done) / done)} left"
        self.echo(f"progress: {phase}: {text}")

    def close(self) -> None:
        self._phases.clear()


class TqdmReporter(Reporter):
    """One tqdm bar per open phase on ``stream``; a bar disappears when its phase ends
    (results stay readable). Needs tqdm (``pip install 'privreg[progress]'``)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        from tqdm import tqdm

        super().__init__(stream)
        self._tqdm = tqdm
        self._bars: dict[str, Any] = {}

    def __call__(self, phase: str, done: int, total: int | None, unit: str) -> None:
        bar = self._bars.get(phase)
        if bar is not None and done == 0:  # the phase starts again (an earlier run of it stopped)
            self._bars.pop(phase).close()
            bar = None
        if bar is None:
            bar = self._bars[phase] = self._tqdm(
                total=total, unit=unit, desc=phase, file=self.stream, leave=False, dynamic_ncols=True
            )
        if total is not None and bar.total != total:
            bar.total = total
        if done > bar.n:
            bar.update(done - bar.n)
        if total is not None and done >= total:
            self._bars.pop(phase).close()

    def echo(self, message: str) -> None:
        self._tqdm.write(message, file=self.stream)

    def close(self) -> None:
        while self._bars:
            self._bars.popitem()[1].close()


def _tqdm_available() -> bool:
    try:
        import tqdm  # noqa: F401 -- only whether it imports
    except ImportError:
        return False
    return True


def console_reporter(stream: IO[str] | None = None, *, mode: str | None = None) -> Reporter:
    """The reporter for ``stream`` (default stderr): ``mode`` ``"auto"`` (tqdm bars on a
    terminal when tqdm is installed, else plain lines), ``"plain"`` or ``"off"``; ``None``
    reads ``PRIVREG_PROGRESS`` (unset: ``"auto"``)."""
    source = "mode"
    if mode is None:
        mode, source = os.environ.get(ENVIRONMENT_VARIABLE) or "auto", ENVIRONMENT_VARIABLE
    if mode not in MODES:
        raise PrivregValueError(f"{source} must be one of {', '.join(MODES)}; got {mode!r}")
    out = stream if stream is not None else sys.stderr
    if mode == "off":
        return Reporter(out)
    isatty = getattr(out, "isatty", None)
    if mode == "auto" and callable(isatty) and isatty() and _tqdm_available():
        return TqdmReporter(out)
    return PlainReporter(out)
