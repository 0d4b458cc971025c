"""Shared timing for the benchmark scripts: wall time, CPU time of this process and its
child processes, and the cores a block ran on, reported as separate labelled columns.

    with timed(cores=2) as t:
        work()
    t.timing.cells()  # ["<wall s>", "<CPU s>", "<CPU s / core>"], see columns()

CPU s counts this process (all its threads, ``RUSAGE_SELF``), the children it reaped
during the block (``RUSAGE_CHILDREN``) and its live descendants, read from
``/proc/PID/stat`` (utime + stime + their reaped children's): worker pools
(multiprocessing, concurrent.futures, the Paillier forkserver) keep their workers
alive between batches, so ``RUSAGE_CHILDREN`` alone would miss them until they are
reaped. A Spark JVM started by pyspark is a child of this process, so its CPU (and its
Python workers') is counted the same way. Processes that leave the tree (daemons that
re-parent themselves to init) are not counted; off Linux only ``getrusage`` is read.

CPU s / core is CPU s divided by the cores the block ran on, as the caller declares them
(1 for single-threaded work; the pool size for a pool), capped at the cores this process
may use. It is a per-core cost, never a wall time on that many cores.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from dataclasses import dataclass

from privreg.timing import descendants_cpu_seconds

START_LOAD = os.getloadavg()  # the scripts import this module first: the load before their work
NOTE = (
    "wall: time.perf_counter; CPU: this process + its child processes (getrusage + /proc of live "
    "workers); CPU / core: CPU divided by the cores the row ran on (a per-core cost, not a wall time)"
)


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def machine() -> str:
    """One line on the machine and its load when the script started."""
    a, b, c = START_LOAD
    return (
        f"machine: {os.cpu_count()} cores (os.cpu_count), {usable_cores()} usable by this process, "
        f"load average {a:.2f} / {b:.2f} / {c:.2f} at start (shared: wall time includes waiting for "
        f"the CPU); Python {platform.python_version()}"
    )


def header(title: str, *, processes: int | str, cores: int | str) -> str:
    """A table's title with the processes and cores its rows used and the machine."""
    return f"{title}\n[processes: {processes}; cores: {cores}; {machine()}]\n[{NOTE}]"


def columns(unit: str = "s") -> list[str]:
    """The three column labels, e.g. ``wall s``, ``CPU s``, ``CPU s / core``."""
    return [f"wall {unit}", f"CPU {unit}", f"CPU {unit} / core"]


@dataclass(frozen=True)
class Timing:
    wall: float  # seconds
    cpu: float  # seconds, this process and its children
    cores: int = 1

    @property
    def cpu_per_core(self) -> float:
        return self.cpu / self.cores

    def __add__(self, other: Timing) -> Timing:
        return Timing(self.wall + other.wall, self.cpu + other.cpu, max(self.cores, other.cores))

    def scaled(self, factor: float) -> Timing:
        """Per-operation figures: ``scaled(1e3 / ops)`` gives milliseconds per operation."""
        return Timing(self.wall * factor, self.cpu * factor, self.cores)

    def cells(self, fmt: str = ".3f") -> list[str]:
        return [format(self.wall, fmt), format(self.cpu, fmt), format(self.cpu_per_core, fmt)]


def _own() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _others() -> float:
    return descendants_cpu_seconds()


def cpu_now() -> float:
    """CPU seconds of this process, its reaped children and its live descendants. A child
    alive at one reading and reaped before the next moves from the /proc term to the
    RUSAGE_CHILDREN term with its whole total, so differences stay right."""
    return _own() + _others()


class timed:
    """Context manager: ``.timing`` holds the block's :class:`Timing` once it exits."""

    def __init__(self, cores: int = 1) -> None:
        self.cores = max(1, min(int(cores), usable_cores()))
        self.timing = Timing(0.0, 0.0, self.cores)

    def __enter__(self) -> timed:
        # the /proc scan costs ~50 us of this process's CPU: read our own CPU after it on
        # entry and before it on exit, so the scan is not billed to the block
        others = _others()
        self._cpu, self._wall = _own() + others, time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall, own = time.perf_counter() - self._wall, _own()
        self.timing = Timing(wall, own + _others() - self._cpu, self.cores)


def measure(fn, *, cores: int = 1):  # type: ignore[no-untyped-def]
    """``(Timing, fn())``."""
    with timed(cores) as t:
        out = fn()
    return t.timing, out
