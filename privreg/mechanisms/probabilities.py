"""Certified bounds used to round local-randomizer probabilities conservatively."""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["exp_lower_bound"]

_EXP_CAP = 700.0  # math.exp overflows a little above 709.78


def exp_lower_bound(epsilon: float) -> Fraction:
    """An exact rational ``L`` with ``L <= e^epsilon`` and ``L >= e^min(epsilon, 700) (1 - 2^-50)``.

    ``math.exp`` is accurate to within one ulp (a relative error below ``2^-52``), so
    shrinking its result by the factor ``1 - 2^-50`` (four ulps) gives a certified lower
    bound. Capping the exponent at 700 only lowers the bound further (never above
    ``e^epsilon``), and keeps it finite."""
    x = math.exp(min(epsilon, _EXP_CAP))
    return Fraction(x) * Fraction((1 << 50) - 1, 1 << 50)
