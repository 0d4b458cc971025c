"""Phase timing: wall-clock and CPU seconds per named phase of a computation.

Units: every figure is in seconds (a float). *Wall* seconds come from
:func:`time.perf_counter` (monotonic; they include waiting and, on a loaded machine,
other users' work). *CPU* seconds come from the timer's CPU clock, one of

* :func:`process_cpu_seconds` -- this process, all threads (:func:`time.process_time`);
* :func:`process_tree_cpu_seconds` -- this process plus its children: the reaped ones and
  the live descendants (e.g. the Paillier worker pool), read from ``/proc`` on Linux.

A CPU figure is the difference of two readings of that clock; a child reaped between
the readings still counts with its whole total (:func:`descendants_cpu_seconds`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from privreg.core.errors import PrivregTypeError

__all__ = [
    "PhaseTimer",
    "child_pids",
    "descendants_cpu_seconds",
    "process_cpu_seconds",
    "process_tree_cpu_seconds",
    "tree_cpu_seconds",
]


def process_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, all threads."""
    return time.process_time()


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def child_pids(pid: str) -> list[str]:
    """The live children of process ``pid`` (``"self"`` for this one), from ``/proc`` (Linux)."""
    out: list[str] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(fh.read().split())
        except OSError:
            continue
    return out


def _reaped_children_cpu() -> float:
    try:
        import resource
    except ImportError:  # Windows keeps no record of reaped children
        return 0.0
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return reaped.ru_utime + reaped.ru_stime


def descendants_cpu_seconds() -> float:
    """CPU seconds so far of this process's children: those it reaped
    (``RUSAGE_CHILDREN``; not on Windows) and its live descendants with the children they
    reaped, read from ``/proc`` on Linux. A child alive at one reading and reaped before
    the next moves from the ``/proc`` term to the reaped term with its whole total, so
    differences between two readings stay right."""
    return _reaped_children_cpu() + sum(tree_cpu_seconds(pid) for pid in child_pids("self"))


def tree_cpu_seconds(pid: str) -> float:
    """CPU seconds so far of process ``pid`` and its live descendants, each with the
    children it reaped (utime + stime + cutime + cstime from ``/proc``; 0 off Linux)."""
    total = 0.0
    todo = [pid]
    seen: set[str] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / _TICKS  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            continue
        todo.extend(child_pids(p))
    return total


def process_tree_cpu_seconds() -> float:
    """CPU seconds of this process plus its children and live descendants (the Paillier
    worker pool, started through a forkserver; see :func:`descendants_cpu_seconds`). On a
    loaded machine CPU time is the fair measure: wall time also counts other users' work."""
    return time.process_time() + descendants_cpu_seconds()


class PhaseTimer:
    """Wall seconds (:attr:`wall`) and CPU seconds (:attr:`cpu`, by ``cpu_clock``) per
    named phase, summed over every interval charged to the phase.

    Two ways to charge an interval:

    * ``with timer.phase(name): ...`` -- the block's duration;
    * :meth:`lap` -- the time since the previous :meth:`lap`, :meth:`mark` or the timer's
      creation, for phases that follow one another (an ``await`` between them is charged
      too; :meth:`mark` first to leave out a wait).

    ``phases`` lists phases reported even when never charged (0.0); others appear in the
    order they are first charged.
    """

    def __init__(self, phases: Iterable[str] = (), *, cpu_clock: Callable[[], float] = process_cpu_seconds) -> None:
        if not callable(cpu_clock):
            raise PrivregTypeError(
                f"cpu_clock must be a function returning CPU seconds; got {cpu_clock!r}. Pass "
                f"process_cpu_seconds or process_tree_cpu_seconds from privreg.timing."
            )
        #: wall-clock seconds per phase
        self.wall: dict[str, float] = {}
        #: CPU seconds per phase (by ``cpu_clock``)
        self.cpu: dict[str, float] = {}
        for name in phases:
            self._charge(name, 0.0, 0.0)
        self._cpu_clock = cpu_clock
        self._started = self._mark_wall = time.perf_counter()
        self._mark_cpu = cpu_clock()

    def _charge(self, name: str, wall: float, cpu: float) -> None:
        if not isinstance(name, str):
            raise PrivregTypeError(f"a phase name must be a str; got {name!r}. Name phases by strings.")
        self.wall[name] = self.wall.get(name, 0.0) + wall
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the duration of the ``with`` block to ``name`` (also when it raises)."""
        w0, c0 = time.perf_counter(), self._cpu_clock()
        try:
            yield
        finally:
            self._charge(name, time.perf_counter() - w0, self._cpu_clock() - c0)

    def mark(self) -> None:
        """Start the next :meth:`lap` now."""
        self._mark_wall, self._mark_cpu = time.perf_counter(), self._cpu_clock()

    def lap(self, name: str) -> tuple[float, float]:
        """Charge the time since the last mark to ``name``, mark now, and return the lap's
        ``(wall seconds, CPU seconds)``."""
        now_wall, now_cpu = time.perf_counter(), self._cpu_clock()
        wall, cpu = now_wall - self._mark_wall, now_cpu - self._mark_cpu
        self._charge(name, wall, cpu)
        self._mark_wall, self._mark_cpu = now_wall, now_cpu
        return wall, cpu

    def elapsed(self) -> float:
        """Wall seconds since the timer was created."""
        return time.perf_counter() - self._started
