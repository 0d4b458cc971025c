"""Parameter handling shared by the noise-adding mechanisms of the library."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from privreg.core.errors import PrivregValueError
from privreg.core.sensitivity import (
    GlobalSensitivity,
    Norm,
    SensitivityKind,
    require_sensitivity,
)

__all__ = ["PATHS", "check_path", "float_at_most", "as_global", "laplace_scale"]

#: Sampling paths: vectorised exact samplers, or one exact rational draw at a time.
PATHS = ("fast", "exact")


def check_path(x: Any) -> str:
    """Validate a ``path`` parameter."""
    if x not in PATHS:
        raise PrivregValueError(f"path must be one of {PATHS}; got {x!r}")
    return x


def float_at_most(x: Fraction) -> float:
    """The largest float <= x (for scales claimed in events: never more than applied)."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def laplace_scale(sensitivity: int, epsilon: float) -> Fraction:
    """The scale of (discrete) Laplace noise for an integer ``sensitivity`` at ``epsilon``:
    ``sensitivity / epsilon`` exactly, raised (by less than one float ulp) when needed so
    that the event's epsilon as the accountants read it, ``sensitivity / s`` in floating
    point with ``s = float_at_most(scale)``, is at most ``epsilon``. Without it a
    requested epsilon can be charged as one ulp more (e.g. ``8192 / 1489.45...``), and
    parts that split a budget exactly no longer fit it. Only ever more noise."""
    exact = Fraction(sensitivity) / Fraction(epsilon)
    try:
        f = float_at_most(exact)
    except OverflowError:  # beyond the float range: the event cannot be formed either way
        return exact
    try:
        over = f > 0 and sensitivity / f > epsilon
    except OverflowError:  # a scale so small the event's epsilon is not a float: refused downstream
        return exact
    if over:
        # the next float is >= exact, so sensitivity / it <= epsilon in reals, hence in floats
        f = math.nextafter(f, math.inf)
    return max(exact, Fraction(f))


def as_global(x: Any, *, norm: Norm, who: str) -> GlobalSensitivity:
    """Accept a number (taken as a global sensitivity in ``norm``) or a global Sensitivity
    in that norm; refuse local or smooth sensitivities and other norms."""
    if not hasattr(x, "kind"):
        x = GlobalSensitivity(value=x, norm=norm)
    return require_sensitivity(x, kinds=(SensitivityKind.GLOBAL,), norms=(norm,), who=who)  # type: ignore[return-value]
