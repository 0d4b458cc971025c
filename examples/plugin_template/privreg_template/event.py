"""The template's own privacy event: what one release did, its core guarantee, its exact cost.

A plugin defines an event type when no core event describes its mechanism exactly. It
then gives the event a ``lower()`` guarantee stated as a core event, so that every
accountant can account for it, and registers a handler for each accountant where it
knows a tighter bound (``hooks.py`` registers both).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs

from privreg import PrivacyEvent, PureDP, event_type
from privreg.core.validation import check_epsilon


@event_type("template_geometric_histogram")
@attrs.frozen(kw_only=True)
class GeometricHistogram(PrivacyEvent):
    """One release of ``NoisyHistogram``: two-sided geometric noise, P(z) proportional to
    exp(-epsilon |z|), added to every count of a histogram in which adding or removing one
    person changes one count by 1.

    Its privacy loss is that of binary randomized response with ratio e^epsilon: for
    counts c and c + 1 the output probabilities differ by the factor e^epsilon on outputs
    <= c and e^-epsilon above, and outputs <= c have probability e^epsilon / (1 + e^epsilon)
    (Ghosh-Roughgarden-Sundararajan 2009). The other counts do not change.
    """

    #: The guarantee holds for adding or removing one person (a replace-one budget
    #: converts the lowered guarantee by group privacy).
    neighbouring: ClassVar[str] = "add_remove"

    epsilon: float = attrs.field(converter=lambda x: check_epsilon("epsilon", x))

    def lower(self) -> PrivacyEvent:
        """``epsilon``-DP. Randomized response is the worst case of every epsilon-DP
        mechanism, so this is exact for the basic, advanced, optimal, rdp and pld
        accountants; only zCDP has a tighter bound (:func:`exact_rho`)."""
        return PureDP(epsilon=self.epsilon)


def exact_rho(accountant: Any, event: GeometricHistogram) -> float:
    """The smallest rho for which the release is rho-zCDP: ``epsilon tanh(epsilon / 2)``
    (below the ``epsilon**2 / 2`` of Bun-Steinke 2016, Prop. 1.4, that the lowering gives).

    Derivation. With privacy loss L = +-epsilon as above, E[e^{(alpha-1) L}] =
    cosh((alpha - 1/2) epsilon) / cosh(epsilon / 2), so with g = log cosh, u = epsilon / 2
    and h = (alpha - 1) epsilon the Renyi divergence is
    D_alpha = (g(u + h) - g(u)) / (alpha - 1). As g' = tanh is concave on [0, inf),
    g(u + h) - g(u) <= h tanh(u) + h^2 sech^2(u) / 2, and sech^2(u) <= tanh(u) / u (that is
    2u <= sinh 2u), so D_alpha <= alpha epsilon tanh(epsilon / 2) for every alpha > 1, with
    equality as alpha -> 1 (the KL divergence). Cf. Harrison-Manurangsi 2025 (arXiv
    2510.25746), exact zCDP of the discrete Laplace mechanism.
    """
    return event.epsilon * math.tanh(event.epsilon / 2)
