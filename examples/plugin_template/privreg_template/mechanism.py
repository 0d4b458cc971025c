"""A geometric-noise histogram: the template's example of a privreg Mechanism."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from privreg import POSITIVE, Mechanism, PrivacyEvent, PrivregValueError, RandomSource, param_field, param_fields
from privreg.noise.fast import discrete_laplace_many, fast_scale
from privreg_template.event import GeometricHistogram

#: The largest count accepted (public): count + noise cannot leave int64 (see NoisyHistogram).
MAX_COUNT = 2**62


# param_fields: the field declares its limit once, for the class and the registry alike
@attrs.frozen(kw_only=True, field_transformer=param_fields)
class NoisyHistogram(Mechanism):
    """Adds two-sided geometric noise of scale ``1/epsilon`` to every bin of a histogram.

    Guarantee: ``epsilon``-DP when one person changes one bin by at most 1 (add/remove
    neighbours; L1 sensitivity 1). Counts are integers, so the exact discrete Laplace
    sampler applies without any grid (Dwork et al. 2006; Ghosh-Roughgarden-Sundararajan
    2009 for the geometric mechanism).

    Input range: counts in ``[0, 2**62]``, checked before the charge, so ``count + noise``
    stays within int64 unless the noise exceeds 2**62 in magnitude (probability below
    ``exp(-2**22)`` for every epsilon the sampler accepts): no release fails or wraps
    around after its charge. Errors name the rule, never the counts.
    """

    name: ClassVar[str] = "template-histogram-mechanism"
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)

    @property
    def noise_scale(self) -> Fraction:
        """Scale of the noise actually drawn: 1/epsilon, rounded up if ever needed."""
        return fast_scale(1 / Fraction(self.epsilon))

    def privacy_event(self) -> PrivacyEvent:
        # the template's own event, with the epsilon of the noise actually drawn
        epsilon = 1 / self.noise_scale
        claimed = float(epsilon)
        if Fraction(claimed) < epsilon:
            claimed = math.nextafter(claimed, math.inf)  # round up: never claim less loss
        return GeometricHistogram(epsilon=claimed)

    def validate_input(self, value: Any) -> np.ndarray:
        # messages state the rule, never a value, a count or the dtype (numpy makes an array
        # of ints float64 or object by their magnitude): an error is an output too, and
        # nothing has been charged yet
        counts = np.asarray(value)
        refused = PrivregValueError(
            "value must be a 1-d array of integer counts in [0, 2**62]; some entries are not. "
            "Pass e.g. np.array([3, 5]) and check how the histogram was counted."
        )
        if counts.ndim != 1 or counts.dtype.kind not in "iu":
            raise refused
        if (counts < 0).any() or (counts > MAX_COUNT).any():
            raise refused
        return counts.astype(np.int64)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> np.ndarray:
        return value + discrete_laplace_many(self.noise_scale, value.size, rng)
