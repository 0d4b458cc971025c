"""Privacy filters: budgets that hold when the analyst chooses each next release --
mechanism and parameters -- from all earlier outputs, and may stop at any time.

A filter (Rogers-Roth-Ullman-Vadhan 2016, "Privacy Odometers and Filters") keeps running
totals in one currency and grants a release only if the totals *after* it stay within a
budget fixed before the first release. Each rule below is proven for that fully adaptive
setting; the bounds of a sequence fixed in advance (PLD, KOV, RDP with the order chosen
afterwards) are not, and a session uses them only for a declared plan
(:mod:`privreg.budget.session`).

=============  ==========================================================  ===========================================
``basic``      sum eps_i <= eps and sum delta_i <= delta                   RRUV 2016 (simple composition is a filter)
``advanced``   sqrt(2 log(1/d') sum eps_i^2) + sum eps_i^2 / 2 <= eps and  Whitehouse-Ramdas-Rogers-Wu 2023 (ICML),
               sum delta_i <= d'', with d' = d'' = delta / 2               fully adaptive advanced composition
``zcdp``       sum rho_i <= rho, rho the largest with (eps, delta) by the  Feldman-Zrnic 2021 (Rényi filter) at every
               tight conversion                                            order at once: the result is rho-zCDP
``rdp``        some order alpha in :data:`FILTER_ORDERS` keeps             Feldman-Zrnic 2021 per order; Lécuyer 2021;
               conv_alpha(sum r_i(alpha), delta / m) <= eps (m orders)     union bound over the m orders (below)
``gdp``        sum mu_i^2 <= mu^2, mu the largest with (eps, delta)        Smith-Thakurta 2022: fully adaptive GDP
=============  ==========================================================  ===========================================

**Several filters at once** (a session's default): a release is granted when *some*
filter still vouches for the whole interaction. Each filter f is given a share delta_f
of the budget's delta with sum delta_f = delta. On every transcript at least one filter
f kept all releases within its own rule, and on that event the transcript equals the
transcript of the interaction stopped by f alone, which is (eps, delta_f)-DP. So the
hockey-stick divergence of the whole interaction is at most sum delta_f = delta (the
same union argument gives the ``rdp`` filter's delta / m per order). The price of the
choice is that share of delta, paid once.

**Blocks**: one charged event is one release whose parameters are all fixed when it is
charged, so a ``Composed`` or ``SelfComposed`` block may be priced as a single mechanism.
The ``basic`` and ``advanced`` filters price a block that is not purely eps-DP at its
tightest non-adaptive (eps, event_delta) point (PLD, RDP, GDP, zCDP); the others add its
leaves, which is exact in their currency.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from privreg.accountant.base import Accountant
from privreg.accountant.basic import BasicAccountant
from privreg.accountant.blocks import block_pair, unsupported_reason
from privreg.accountant.curves import gaussian_epsilon
from privreg.accountant.gdp import GDPAccountant
from privreg.accountant.rdp import ORDERS, TINY, RDPAccountant, rdp_epsilon
from privreg.accountant.zcdp import ZCDPAccountant, zcdp_epsilon
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError, UnsupportedEventError
from privreg.core.events import PrivacyEvent

__all__ = ["Filter", "FILTERS", "FILTER_ORDERS", "make_filter", "block_pair", "unsupported_reason"]


def _nearest_orders(targets: list[float]) -> NDArray[np.int64]:
    idx = sorted({int(np.argmin(np.abs(ORDERS - t))) for t in targets})
    return np.array(idx, dtype=np.int64)


_FILTER_ORDER_INDEX = _nearest_orders(
    [
        1.25,
        1.5,
        1.75,
        2.0,
        2.5,
        3.0,
        4.0,
        5.0,
        6.0,
        8.0,
        10.0,
        12.0,
        16.0,
        20.0,
        24.0,
        32.0,
        48.0,
        64.0,
        128.0,
        256.0,
        512.0,
        1024.0,
        4096.0,
        10000.0,
    ]
)
#: The Rényi orders the ``rdp`` filter may use, fixed before any release (m = 24).
FILTER_ORDERS = ORDERS[_FILTER_ORDER_INDEX]


class Filter(ABC):
    """A privacy filter with budget (``epsilon``, ``delta``) (its share of a session's).

    :meth:`add` folds one charged event into the totals; :meth:`spent` is the epsilon at
    which the totals sit (inf when the filter cannot vouch). A filter is granted-within
    when ``spent() <= epsilon``; once it could not price an event it stays dead.
    """

    name: ClassVar[str] = ""
    citation: ClassVar[str] = ""

    def __init__(
        self, *, epsilon: float, delta: float, neighbouring: str = "add_remove", event_delta: float | None = None
    ) -> None:
        self.epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
        self.delta = v.check_delta("delta", delta)
        self.neighbouring = v.check_relation("neighbouring", neighbouring)
        self.event_delta = event_delta
        self.dead = ""  # why this filter can no longer vouch ("" while it can)

    @abstractmethod
    def _add(self, event: PrivacyEvent, count: int) -> None:
        """Fold ``count`` separate releases of ``event`` into the totals; raise
        UnsupportedEventError if it cannot."""

    @abstractmethod
    def _spent(self) -> float:
        """Epsilon of the current totals at this filter's delta."""

    def add(self, event: PrivacyEvent, count: int = 1) -> None:
        """Fold ``count`` separate charges of ``event`` into the totals (a filter that
        cannot price it is dead from then on)."""
        if self.dead:
            return
        try:
            self._add(event, count)
        except UnsupportedEventError as exc:
            self.dead = unsupported_reason(exc, event)

    def spent(self) -> float:
        if self.dead:
            return math.inf
        try:
            eps = float(self._spent())
        except (ArithmeticError, ValueError):
            return math.inf
        return eps if eps == eps else math.inf  # NaN cannot vouch

    def vouches(self) -> bool:
        return self.spent() <= self.epsilon

    def copy(self) -> Filter:
        new = object.__new__(type(self))
        for key, value in vars(self).items():
            setattr(new, key, value.copy() if isinstance(value, Accountant) else value)
        return new

    def describe(self) -> str:
        return f"{self.name} ({self.citation})"


class _AccountantFilter(Filter):
    """A filter whose totals are one accountant's state."""

    @abstractmethod
    def _make(self) -> Accountant:
        """A fresh accountant holding this filter's totals."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.acc = self._make()

    def _add(self, event: PrivacyEvent, count: int) -> None:
        self.acc.compose(event, count)


class BasicFilter(_AccountantFilter):
    name = "basic"
    citation = "Rogers-Roth-Ullman-Vadhan 2016: simple composition is a valid privacy filter"
    acc: BasicAccountant

    def _make(self) -> BasicAccountant:
        return BasicAccountant(neighbouring=self.neighbouring)

    def _add(self, event: PrivacyEvent, count: int) -> None:
        left = (self.delta - self.acc.total[1]) / count
        pair = block_pair(event, event_delta=self.event_delta, neighbouring=self.neighbouring, left=left)
        if pair is None:
            raise UnsupportedEventError(event, self.name, "no (epsilon, delta) pair (set event_delta for curve events)")
        self.acc._add(pair, count)

    def _spent(self) -> float:
        return self.acc.epsilon(self.delta)


class AdvancedFilter(Filter):
    """Fully adaptive advanced composition (Whitehouse-Ramdas-Rogers-Wu 2023): with
    delta' = delta'' = delta / 2, the interaction is (eps, delta)-DP while
    sqrt(2 log(1/delta') sum eps_i^2) + sum eps_i^2 / 2 <= eps and sum delta_i <= delta''."""

    name = "advanced"
    citation = "Whitehouse-Ramdas-Rogers-Wu 2023, fully adaptive advanced composition filter"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.sum_sq = 0.0
        self.sum_delta = 0.0

    def _add(self, event: PrivacyEvent, count: int) -> None:
        left = (self.delta / 2 - self.sum_delta) / count
        pair = block_pair(event, event_delta=self.event_delta, neighbouring=self.neighbouring, left=left)
        if pair is None:
            raise UnsupportedEventError(event, self.name, "no (epsilon, delta) pair (set event_delta for curve events)")
        if pair[0] > 0:  # a square that underflows to 0 would claim no privacy loss
            self.sum_sq += count * max(pair[0] * pair[0], TINY)
        self.sum_delta += count * pair[1]

    def _spent(self) -> float:
        if self.sum_delta > self.delta / 2 or self.delta == 0:
            return math.inf if (self.sum_sq > 0 or self.sum_delta > 0) else 0.0
        return math.sqrt(2 * math.log(2 / self.delta) * self.sum_sq) + self.sum_sq / 2


class ZCDPFilter(_AccountantFilter):
    name = "zcdp"
    citation = "Feldman-Zrnic 2021, Rényi filter, at every order: the interaction is rho-zCDP"
    acc: ZCDPAccountant

    def _make(self) -> ZCDPAccountant:
        return ZCDPAccountant(neighbouring=self.neighbouring)

    def _spent(self) -> float:
        return zcdp_epsilon(self.acc.rho, self.delta) if self.delta > 0 or self.acc.rho == 0 else math.inf


class RDPFilter(_AccountantFilter):
    name = "rdp"
    citation = (
        "Feldman-Zrnic 2021, Rényi filter per order, and Lécuyer 2021; union bound over "
        f"the {len(FILTER_ORDERS)} orders fixed in advance"
    )
    acc: RDPAccountant

    def _make(self) -> RDPAccountant:
        return RDPAccountant(neighbouring=self.neighbouring)

    def _spent(self) -> float:
        curve = self.acc.curve()[_FILTER_ORDER_INDEX]
        if self.delta == 0:
            return 0.0 if not np.any(curve) else math.inf
        return rdp_epsilon(FILTER_ORDERS, curve, self.delta / len(FILTER_ORDERS))


class GDPFilter(_AccountantFilter):
    name = "gdp"
    citation = "Smith-Thakurta 2022: mu_i^2 add up under fully adaptive composition"
    acc: GDPAccountant

    def _make(self) -> GDPAccountant:
        return GDPAccountant(neighbouring=self.neighbouring)

    def _spent(self) -> float:
        mu = self.acc.mu
        return gaussian_epsilon(self.delta, mu) if math.isfinite(mu) else math.inf


#: Every filter, by name.
FILTERS: dict[str, type[Filter]] = {
    cls.name: cls for cls in (BasicFilter, AdvancedFilter, ZCDPFilter, RDPFilter, GDPFilter)
}


def make_filter(name: str, **options: Any) -> Filter:
    cls = FILTERS.get(name)
    if cls is None:
        raise PrivregValueError(f"unknown filter {name!r}; choose among {sorted(FILTERS)}")
    return cls(**options)
