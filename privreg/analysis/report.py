"""Noisy numbers as a workflow reports them: value, interval, noise scale and a warning.

A workflow that prints a noisy number builds a :class:`NoisyValue` for it from the
half-width of :mod:`privreg.analysis.accuracy` (the mechanism's noise law at a stated
level), after free post-processing (:func:`count_release`, :func:`clamped_release`: a
function of the release and public parameters only, so it costs no privacy), and shows
:meth:`NoisyValue.line` in its summary and :meth:`NoisyValue.metrics` in its metrics.

When the half-width exceeds the value, noise dominates it: :meth:`NoisyValue.warning`
says so and what would make the half-width at most the value -- the epsilon, or the data
size, solved from the same noise law (:func:`smallest_passing`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Annotated, Any

import attrs

from privreg.core.errors import PrivregError
from privreg.core.params import Spec

__all__ = ["Level", "NoisyValue", "count_release", "clamped_release", "smallest_passing", "needed"]

#: The confidence level of a workflow's intervals (a workflow parameter).
Level = Annotated[
    float,
    Spec(
        doc="confidence level of the printed intervals (post-processing: costs no privacy)", minimum=0.5, maximum=0.999
    ),
]


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:.6g}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@attrs.frozen(kw_only=True)
class NoisyValue:
    """One released number with its interval.

    ``value`` is the post-processed release and ``[low, high]`` holds the true value with
    probability at least ``level`` (the interval of the post-processed value, clamped as
    it is). ``half_width`` is how far the noise alone may move the release at ``level``
    (``inf`` when unbounded); ``noise_scale`` is the scale of the noise drawn, in the
    value's units, or an upper bound on it when ``scale_is_bound`` (the scale used
    depends on the data and is private). ``needed_epsilon`` and ``needed_rows``: the
    smallest total epsilon, and data size, with which the half-width would be at most the
    value (None when none would, or when not meaningful); ``advice`` adds what they
    cannot say."""

    name: str
    value: float
    low: float
    high: float
    level: float
    half_width: float
    noise_scale: float
    noise: str
    scale_is_bound: bool = False
    post_processing: str = ""
    needed_epsilon: float | None = None
    needed_rows: int | None = None
    advice: str = ""

    @property
    def wide(self) -> bool:
        """The half-width exceeds the value: the noise can swamp it."""
        return self.half_width > abs(self.value)

    def _level(self) -> str:
        return f"{100 * self.level:g}%"

    def line(self) -> str:
        """``value  [low, high] 95%, noise scale b``."""
        bound = "<= " if self.scale_is_bound else ""
        return (
            f"{_fmt(self.value)}  [{_fmt(self.low)}, {_fmt(self.high)}] {self._level()}, "
            f"noise scale {bound}{self.noise_scale:.4g}"
        )

    def warning(self) -> str:
        """A line saying the noise swamps the value and what would fix it ('' if not wide)."""
        if not self.wide:
            return ""
        fixes = []
        if self.needed_epsilon is not None:
            fixes.append(f"epsilon >= {self.needed_epsilon:.3g}")
        if self.needed_rows is not None:
            fixes.append(f"at least {self.needed_rows:,} rows")
        fix = f"; {' or '.join(fixes)} would make it at most the value" if fixes else ""
        more = f"; {self.advice}" if self.advice else ""
        return (
            f"WARNING: {self.name}: the {self._level()} half-width {self.half_width:.4g} exceeds the value "
            f"{_fmt(self.value)}, so noise dominates it{fix}{more}"
        )

    def metrics(self) -> dict[str, Any]:
        """The machine-readable form (``half_width`` None when unbounded)."""
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "half_width": _finite(self.half_width),
            "noise_scale": self.noise_scale,
            "noise": self.noise,
            "noise_scale_is_bound": self.scale_is_bound,
            "post_processing": self.post_processing,
            "wide": self.wide,
            "needed_epsilon": self.needed_epsilon if self.wide else None,
            "needed_rows": self.needed_rows if self.wide else None,
            "advice": self.advice if self.wide else "",
        }


def count_release(raw: float, half_width: float, *, upper: int | None = None) -> tuple[int, int, int, int]:
    """Free post-processing of a noisy count of a non-negative integer true value: the
    nearest integer, clamped to ``[0, upper]`` (``upper`` public, e.g. the public number of
    records). If ``|raw - true| <= half_width`` then the rounded value is within
    ``h = floor(half_width + 1/2)`` of it, and clamping keeps the true value in
    ``[max(0, c - h), min(upper, c + h)]``. Returns ``(c, low, high, h)``; never raises."""
    h = math.floor(half_width + 0.5)
    x = raw if math.isfinite(raw) else math.copysign(sys.float_info.max, raw)
    c = max(0, round(x))
    if upper is not None:
        c = min(c, upper)
    high = c + h if upper is None else min(upper, c + h)
    return c, max(0, c - h), high, h


def clamped_release(
    raw: float, half_width: float, *, lower: float | None = None, upper: float | None = None
) -> tuple[float, float, float]:
    """Free post-processing of a noisy real value known to lie in ``[lower, upper]`` (public
    bounds; None: unbounded): the release and its interval ``raw +- half_width`` clamped
    to the bounds. Returns ``(value, low, high)``; never raises, never NaN."""
    lo, hi = -math.inf if lower is None else lower, math.inf if upper is None else upper
    below, above = raw - half_width, raw + half_width
    below = -math.inf if math.isnan(below) else below  # inf - inf: nothing is known
    above = math.inf if math.isnan(above) else above
    return min(hi, max(lo, raw)), min(hi, max(lo, below)), min(hi, max(lo, above))


def smallest_passing(ok: Callable[[float], bool], start: float, *, limit: float, integer: bool = False) -> float | None:
    """The smallest ``x`` in ``[start, limit]`` with ``ok(x)``, for ``ok`` monotone (False,
    then True): exact for integers, else to 3 significant digits rounded up. None if even
    ``ok(limit)`` is False. At most about 80 calls of ``ok``."""
    if ok(start):
        return start
    lo, hi = start, start
    while not ok(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(limit, 2 * hi if hi > 0 else 1.0)
    for _ in range(64):
        if (hi - lo <= 1) if integer else (hi - lo <= 1e-4 * hi):
            break
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    if integer:
        return float(math.ceil(hi))
    # the smallest 3-digit value >= the threshold (which lies in (lo, hi], within 1e-4 of hi):
    # one of the 3-digit values next to hi
    scale = 10.0 ** (2 - math.floor(math.log10(hi)))
    down, up = math.floor(hi * scale) / scale, math.ceil(hi * scale) / scale
    for x in (down, up):
        if x >= start and ok(x):
            return x
    return hi


def needed(
    half_width_at: Callable[[float], float], target: float, start: float, *, limit: float, integer: bool = False
) -> float | None:
    """The smallest parameter (epsilon, or rows with ``integer``) from ``start`` up to
    ``limit`` at which ``half_width_at`` is at most ``target`` (None: none, e.g. a value of
    0). ``half_width_at`` must not increase with the parameter."""
    if not target > 0 or not math.isfinite(target):
        return None

    def ok(x: float) -> bool:
        try:
            return half_width_at(x) <= target
        except (PrivregError, ArithmeticError):  # a parameter the mechanism refuses: not a fix
            return False

    return smallest_passing(ok, start, limit=limit, integer=integer)
