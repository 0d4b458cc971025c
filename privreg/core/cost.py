"""What a workflow will cost, estimated before it charges anything, and the limits it must fit.

One design for every workflow (``privreg run``, and Python callers through
:class:`~privreg.core.workflow.WorkflowContext`):

* A workflow reads and validates its inputs, then computes a :class:`Cost` -- peak memory
  and seconds, from its parameters and the input's size -- with its own estimate function,
  and calls :meth:`WorkflowContext.require(cost) <privreg.core.workflow.WorkflowContext.require>`
  *before* its first charge. Above a limit it is refused with :class:`ResourceLimitError`
  (exit 2 on the command line): the estimate, what it was computed from, the limit and the
  flag that raises it. Nothing has been charged.
* :class:`Limits` holds the four limits, each with its ``privreg run`` option:
  ``--max-memory-gib`` (default 8), ``--max-seconds`` (default 3600), ``--max-input-gib``
  (expanded bytes of a compressed input, default 1) and ``--max-workers`` (default: the
  machine's CPU count, ``os.cpu_count()``).
* Compressed inputs are decompressed as a stream through :func:`capped_reader`, which
  refuses an input as soon as it expands past ``--max-input-gib`` (a few MB of gzip can
  expand to GBs): the cap applies while reading, before anything is charged.

Estimates are deliberately simple (a few constants per workflow, each measured and stated
next to its formula) and err high; ``tests/test_cost.py`` holds two of them to their
measured peak memory.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import attrs

from privreg.core.errors import PrivregValueError
from privreg.core.numtext import parse_float, parse_int

__all__ = [
    "GIB",
    "MAX_GIB",
    "MAX_SECONDS",
    "MAX_WORKERS",
    "MAX_LINE_BYTES",
    "ROW_BYTES",
    "Cost",
    "Limits",
    "ResourceLimitError",
    "capped_reader",
    "current_limits",
    "use_limits",
    "format_bytes",
    "format_seconds",
]

GIB = 1 << 30
#: The longest line of a text input read, in bytes (64 MiB, also the longest CSV cell).
MAX_LINE_BYTES = 1 << 26
#: What each line of a compressed text input counts against ``--max-input-gib``, beyond
#: its bytes: about what a row costs to hold as Python objects.
ROW_BYTES = 64
#: The largest ``--max-workers``: worker processes beyond this are never useful on one machine.
MAX_WORKERS = 1024


class ResourceLimitError(PrivregValueError):
    """A workflow's estimated memory, time, input or worker count is above its limit;
    nothing was charged. The message names the limit's flag."""


def format_bytes(n: float) -> str:
    """``n`` bytes as e.g. ``512 MiB`` or ``2.73 TiB``."""
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def format_seconds(s: float) -> str:
    """``s`` seconds as e.g. ``45 s``, ``3.2 h`` or ``1.5e+09 years``."""
    if s < 120:
        return f"{s:.3g} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    if s < 86400 * 365:
        return f"{s / 3600:.3g} h"
    return f"{s / (86400 * 365):.3g} years"


def _finite(x: Any) -> float:
    y = float(x)
    if math.isnan(y) or y < 0:
        raise PrivregValueError(f"a cost must be a number >= 0; got {y!r}")
    return y


@attrs.frozen(kw_only=True)
class Cost:
    """An estimate of a workflow run: ``memory_bytes`` (peak memory above the Python
    process at rest), ``seconds`` (wall time on one core of a 2020s machine) and
    ``basis``, what it was computed from (e.g. ``"400 records x 6 columns"``), shown when
    the run is refused. Either may be ``inf`` (the run cannot finish)."""

    memory_bytes: float = attrs.field(converter=_finite)
    seconds: float = attrs.field(converter=_finite)
    basis: str

    def describe(self) -> str:
        return f"about {format_bytes(self.memory_bytes)} of memory and {format_seconds(self.seconds)}"


#: The largest ``--max-memory-gib`` and ``--max-input-gib`` (1 PiB): a byte count above it
#: overflows the integer sizes a read takes.
MAX_GIB = float(1 << 20)
#: The largest ``--max-seconds`` (about 32 years).
MAX_SECONDS = 1e9


def _positive(name: str, x: Any, maximum: float) -> float:
    if isinstance(x, str):
        y = parse_float(f"--{name}", x)
    else:
        try:
            y = float(x)
        except (TypeError, ValueError):
            raise PrivregValueError(f"--{name} must be a number; got {x!r}") from None
    if not math.isfinite(y) or y <= 0 or y > maximum:
        raise PrivregValueError(f"--{name} must be a finite number > 0 and at most {maximum:.12g}; got {x!r}")
    return y


def _memory_gib(x: Any) -> float:
    return _positive("max-memory-gib", x, MAX_GIB)


def _seconds(x: Any) -> float:
    return _positive("max-seconds", x, MAX_SECONDS)


def _input_gib(x: Any) -> float:
    return _positive("max-input-gib", x, MAX_GIB)


def _workers(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, str)):
        raise PrivregValueError(f"--max-workers must be an integer >= 1; got {x!r}")
    n = parse_int("--max-workers", x) if isinstance(x, str) else int(x)
    if not 1 <= n <= MAX_WORKERS:
        raise PrivregValueError(f"--max-workers must be an integer in 1..{MAX_WORKERS}; got {x!r}")
    return n


def _cpu_count() -> int:
    return os.cpu_count() or 1


def _default_workers() -> int:
    return min(_cpu_count(), MAX_WORKERS)


@attrs.frozen(kw_only=True)
class Limits:
    """The limits a workflow run must fit (see the module docstring); each field is the
    ``privreg run`` option of the same name (``max_memory_gib`` is ``--max-memory-gib``)."""

    max_memory_gib: float = attrs.field(default=8.0, converter=_memory_gib)
    max_seconds: float = attrs.field(default=3600.0, converter=_seconds)
    max_input_gib: float = attrs.field(default=1.0, converter=_input_gib)
    max_workers: int = attrs.field(factory=_default_workers, converter=_workers)

    #: ``privreg run`` options, and the field each sets.
    OPTIONS: ClassVar[Mapping[str, str]] = {
        "--max-memory-gib": "max_memory_gib",
        "--max-seconds": "max_seconds",
        "--max-input-gib": "max_input_gib",
        "--max-workers": "max_workers",
    }

    @property
    def max_input_bytes(self) -> int:
        return int(self.max_input_gib * GIB)

    def check(self, workflow: str, cost: Cost) -> None:
        """Refuse ``cost`` (:class:`ResourceLimitError`) if it is above a limit."""
        if cost.memory_bytes > self.max_memory_gib * GIB:
            need = max(1, math.ceil(min(cost.memory_bytes, 1e30) / GIB))
            raise ResourceLimitError(
                f"{workflow}: estimated peak memory {format_bytes(cost.memory_bytes)} ({cost.basis}) is above "
                f"--max-memory-gib {self.max_memory_gib:g}; lower those parameters, or pass --max-memory-gib "
                f"{need:g} if the machine has that much"
            )
        if cost.seconds > self.max_seconds:
            need = math.ceil(min(cost.seconds, 1e30))
            raise ResourceLimitError(
                f"{workflow}: estimated run time {format_seconds(cost.seconds)} ({cost.basis}) is above "
                f"--max-seconds {self.max_seconds:g}; lower those parameters, or pass --max-seconds {need:g} "
                f"to allow it"
            )

    def check_workers(self, name: str, workers: int | None) -> int | None:
        """``workers`` if at most ``max_workers`` (default: the CPU count); else refused."""
        if workers is not None and workers > self.max_workers:
            raise ResourceLimitError(
                f"parameter {name} = {workers} is above --max-workers {self.max_workers} (this machine has "
                f"{_cpu_count()} CPUs); pass {name} <= {self.max_workers}, or --max-workers {workers} to force it"
            )
        return workers


_LIMITS: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("privreg_limits", default=None)


def current_limits() -> Limits:
    """The limits of the workflow running in this context (default :class:`Limits`)."""
    return _LIMITS.get() or Limits()


@contextlib.contextmanager
def use_limits(limits: Limits | None) -> Iterator[Limits]:
    """Make ``limits`` the :func:`current_limits` inside the block (``None``: defaults)."""
    token = _LIMITS.set(limits or Limits())
    try:
        yield _LIMITS.get() or Limits()
    finally:
        _LIMITS.reset(token)


class _Capped(io.RawIOBase):
    """A read-only binary stream that refuses to yield more than ``cap`` bytes (None: no
    cap), counting ``row_bytes`` more for each line (``\n``), and refuses a line longer
    than ``line_cap`` bytes (None: no line cap). Each check costs a scan of the chunk in C."""

    def __init__(
        self, inner: Any, cap_gib: float | None, what: str, *, line_cap: int | None = None, row_bytes: int = 0
    ) -> None:
        self._inner, self._what, self._seen = inner, what, 0
        self._cap_gib = cap_gib
        self._cap = None if cap_gib is None else int(cap_gib * GIB)
        self._line_cap, self._row_bytes, self._line = line_cap, row_bytes, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._inner.read(len(view))
        n = len(data)
        if self._cap is not None:
            self._seen += n + (self._row_bytes * data.count(b"\n") if self._row_bytes else 0)
            if self._seen > self._cap:
                rows = f" (counting {self._row_bytes} bytes a line)" if self._row_bytes else ""
                raise ResourceLimitError(
                    f"{self._what} expands to more than {format_bytes(self._cap)}{rows} when decompressed, above "
                    f"--max-input-gib {self._cap_gib:g}; pass a larger --max-input-gib if the input is that large"
                )
        if self._line_cap is not None:
            last = max(data.rfind(b"\n"), data.rfind(b"\r"))
            self._line = self._line + n if last < 0 else n - last - 1
            if self._line > self._line_cap:
                raise ResourceLimitError(
                    f"{self._what} has a line longer than {format_bytes(self._line_cap)}, the longest line privreg "
                    f"reads; check the file (is it text with line breaks?)"
                )
        view[:n] = data
        return n

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._inner.close()
        super().close()


def capped_reader(
    inner: Any, what: str, cap_gib: float | None = None, *, lines: bool = False, compressed: bool = True
) -> io.BufferedReader:
    """``inner`` (a decompressing binary stream, e.g. ``gzip.open(path, "rb")``) wrapped so
    that reading past ``cap_gib`` GiB of expanded bytes (default: :func:`current_limits`'
    ``--max-input-gib``) raises :class:`ResourceLimitError` naming ``what`` (a path, never
    the content). Closing the result closes ``inner``.

    ``lines`` (a text input): a line longer than :data:`MAX_LINE_BYTES` (or the cap) is
    refused, and each line counts :data:`ROW_BYTES` more against the cap, so that millions
    of tiny rows -- each costing far more to parse and hold than its bytes -- are refused
    as quickly as a large expansion. ``compressed=False`` (a plain file, whose size is
    public and judged by the workflow's estimate): the line cap alone."""
    limit = current_limits().max_input_gib if cap_gib is None else float(cap_gib)
    line_cap = min(MAX_LINE_BYTES, int(limit * GIB)) if lines else None
    raw = _Capped(inner, limit if compressed else None, what, line_cap=line_cap, row_bytes=ROW_BYTES if lines else 0)
    return io.BufferedReader(raw, buffer_size=1 << 16)
