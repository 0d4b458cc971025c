"""Accuracy before release: confidence half-widths from the exact noise laws.

Every half-width here is computed from the law of the noise the mechanism actually draws
(its exact scale after any rounding), never from a continuous idealisation:

* discrete Laplace (two-sided geometric) noise ``Z`` with ``P(z) ~ exp(-|z| / s)``:
  ``P(|Z| > t) = 2 p^(t+1) / (1 + p)`` with ``p = exp(-1/s)`` (Ghosh-Roughgarden-
  Sundararajan 2009; the sampler of Canonne-Kamath-Steinke 2020), so the smallest integer
  ``t`` with ``P(|Z| > t) <= 1 - level`` is an exact ``level`` interval;
* the Laplace mechanism on a grid of step ``g`` releases ``(round(x/g) + Z) g``, so
  ``|output - x| <= t g + g / 2`` with at least the same probability;
* the exponential-mechanism quantile: with probability ``>= 1 - beta`` its rank error is
  at most ``OPT + 2 Delta ln(points / beta) / epsilon`` (McSherry-Talwar 2007, Theorem 8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from privreg.core import validation as v

__all__ = ["Accuracy", "check_level", "discrete_laplace_half_width", "discrete_laplace_coverage"]


def check_level(level: Any) -> float:
    """A confidence level in (0, 1)."""
    return v.check_probability("level", level, open_low=True, open_high=True)


def discrete_laplace_coverage(scale: Fraction | float, t: int) -> float:
    """``P(|Z| <= t)`` for discrete Laplace noise of scale ``scale`` (exact law)."""
    p = math.exp(-1.0 / float(scale))
    return 1.0 - 2.0 * p ** (t + 1) / (1.0 + p)


def discrete_laplace_half_width(scale: Fraction | float, level: float) -> int:
    """The smallest integer ``t >= 0`` with ``P(|Z| <= t) >= level`` for discrete Laplace
    noise of scale ``scale`` (in the noise's integer units)."""
    level = check_level(level)
    p = math.exp(-1.0 / float(scale))
    # 2 p^(t+1) / (1 + p) <= 1 - level  <=>  t + 1 >= ln((1 - level)(1 + p) / 2) / ln p
    t = max(0, math.ceil(math.log((1.0 - level) * (1.0 + p) / 2.0) / math.log(p)) - 1) if p > 0 else 0
    while t > 0 and discrete_laplace_coverage(scale, t - 1) >= level:  # float slack: the smallest t
        t -= 1
    while discrete_laplace_coverage(scale, t) < level:
        t += 1
    return t


@attrs.frozen(kw_only=True)
class Accuracy:
    """What a query's release will be worth, known before anything is charged.

    ``half_width``: with probability at least ``level`` the released value is within this
    of the true value (of the contribution-bounded, clipped data), in ``unit``; None when
    it depends on private quantities (a mean's denominator), in which case ``components``
    give the half-widths of the parts and ``note`` says how the interval of the release is
    formed. ``noise_scale`` is the scale of the noise added, in ``unit`` (the rank-error
    bound's own scale ``2 / epsilon`` for quantiles). ``mechanism`` names the registered
    mechanism(s) used."""

    level: float
    half_width: float | None
    unit: str
    noise_scale: float
    mechanism: str
    exact: bool
    note: str = ""
    components: Mapping[str, Accuracy] = attrs.field(factory=dict)

    def __str__(self) -> str:
        width = "depends on the data" if self.half_width is None else f"+-{self.half_width:.6g} {self.unit}"
        kind = "exact" if self.exact else "bound"
        return f"{self.level:.0%} half-width {width} ({kind}; noise scale {self.noise_scale:.4g}, {self.mechanism})"
