"""Snapping real query answers to an integer grid before integer noise is added.

A real answer ``x`` becomes the integer ``k = round(x / g)`` (computed exactly in rational
arithmetic). If one individual moves ``x`` by at most ``D`` with ``D / g = m`` an integer,
then a scalar ``k`` moves by at most ``m`` (rounding is monotone, and round-half-to-even
commutes with shifts by the even integer ``m``), and a d-dimensional ``k`` moves by at
most ``m + d`` in L1 (each coordinate's rounding adds at most 1). Integer noise calibrated
to that integer sensitivity then gives exactly the target epsilon, and the released value
``(k + z) * g`` is a deterministic function of an integer, so it cannot leak through
floating-point representation.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError

__all__ = ["Grid", "snap_to_grid"]


@attrs.frozen(kw_only=True)
class Grid:
    """A grid of step ``step = sensitivity / multiple`` (``multiple`` a power of two)."""

    step: Fraction
    multiple: int  # sensitivity / step: an even integer (see the module docstring)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.step, Fraction) or self.step <= 0:
            raise PrivregValueError(f"step must be a positive Fraction; got {self.step!r}")
        v.check_int("multiple", self.multiple, minimum=2)
        if self.multiple % 2:
            # round-half-to-even commutes only with even shifts
            raise PrivregValueError(f"multiple must be even; got {self.multiple}")

    @classmethod
    def for_query(cls, *, sensitivity: float, epsilon: float, dimension: int) -> Grid:
        """A grid fine enough that rounding costs < 0.1% of the noise scale and the
        per-coordinate rounding slack (``dimension``) is < 0.1% of the sensitivity."""
        sensitivity = v.check_sensitivity("sensitivity", sensitivity)
        epsilon = v.check_epsilon("epsilon", epsilon)
        dimension = v.check_int("dimension", dimension, minimum=1)
        want = 1024 * dimension * max(Fraction(1), Fraction(epsilon))  # exact: no log2 rounding
        multiple = 2
        while multiple < want:
            multiple *= 2
        return cls(step=Fraction(sensitivity) / multiple, multiple=multiple)

    def integer_sensitivity(self, dimension: int) -> int:
        """L1 sensitivity of the snapped integer vector (see module docstring); a
        dimension of 1 means a scalar."""
        dimension = v.check_int("dimension", dimension, minimum=1)
        return self.multiple if dimension <= 1 else self.multiple + dimension

    def to_float(self, k: int) -> float:
        return float(k * self.step)


def snap_to_grid(x: float, grid: Grid) -> int:
    """``round(x / step)`` computed exactly (ties to even)."""
    return round(Fraction(x) / grid.step)
