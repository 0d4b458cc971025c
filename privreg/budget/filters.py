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

**Price once** (what a ledger stores): a filter's state is a few running sums, and each
release moves them by an *increment* -- its price -- computed once, when the release is
decided, from the event, the guarantee the caller stated and the state before it (the
``basic`` and ``advanced`` filters price a block, or a curve release whose delta does not
fit, at no more than the delta they have left then). The ledger stores every filter's
price with the row; reopening, catching up and a second process replay those stored
prices with the same float operations in the same order, so every reader holds bit for
bit the state the live session held and takes the same decisions. Verification
re-derives each price from the rows before it.
"""

from __future__ import annotations

import functools
import math
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray

from privreg.accountant.base import leaves
from privreg.accountant.blocks import block_delta, block_pair, leaf_pair_at, unsupported_reason
from privreg.accountant.curves import gaussian_epsilon
from privreg.accountant.gdp import GDPAccountant
from privreg.accountant.rdp import ORDERS, TINY, RDPAccountant, rdp_epsilon
from privreg.accountant.relations import relate
from privreg.accountant.zcdp import ZCDPAccountant, zcdp_epsilon
from privreg.core import validation as v
from privreg.core.errors import PrivregValueError, UnsupportedEventError
from privreg.core.events import ApproxDP, Composed, PrivacyEvent, SelfComposed

__all__ = [
    "Filter",
    "FILTERS",
    "FILTER_ORDERS",
    "Price",
    "make_filter",
    "price_to_json",
    "price_from_json",
]


def _nearest_orders(targets: list[float]) -> NDArray[np.int64]:
    idx = sorted({int(np.argmin(np.abs(ORDERS - t))) for t in targets})
    return np.array(idx, dtype=np.int64)


_FILTER_ORDER_INDEX = _nearest_orders(
    [1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0]
    + [128.0, 256.0, 512.0, 1024.0, 4096.0, 10000.0]
)
#: The Rényi orders the ``rdp`` filter may use, fixed before any release (m = 24).
FILTER_ORDERS = ORDERS[_FILTER_ORDER_INDEX]

#: A filter's price of one release: the increments of its running sums (a tuple of
#: floats), or the reason it cannot price the release (a str: the filter is dead from
#: then on).
Price = tuple[float, ...] | str


def price_to_json(price: Price) -> Any:
    """JSON form of a price: a list of numbers (``"inf"`` for an infinite one) or
    ``{"unsupported": reason}``."""
    if type(price) is tuple and all(type(x) is float and -math.inf < x < math.inf for x in price):
        return list(price)  # the usual case: finite floats, as they are
    if isinstance(price, str):
        return {"unsupported": price}
    return [x if math.isfinite(x) else ("inf" if x > 0 else "-inf") for x in price]


def price_from_json(data: Any) -> Price:
    """Inverse of :func:`price_to_json` (ValueError on anything else)."""
    if isinstance(data, dict) and set(data) == {"unsupported"} and isinstance(data["unsupported"], str):
        return str(data["unsupported"])
    if type(data) is list and all(type(x) is float for x in data):  # the usual case, fast
        return tuple(data)
    if not isinstance(data, list):
        raise ValueError(f"a price is a list of numbers or {{'unsupported': reason}}; got {type(data).__name__}")
    out = []
    for x in data:
        if x in ("inf", "-inf"):
            out.append(math.inf if x == "inf" else -math.inf)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            out.append(float(x))
        else:
            raise ValueError(f"a price holds numbers only; got {type(x).__name__}")
    return tuple(out)


_R = TypeVar("_R")
#: Prices a state-free filter memoizes (events of a session repeat a few kinds).
_PRICE_MEMO = 4096


def _memo(fn: Callable[..., _R]) -> Callable[..., _R]:
    """``fn`` with an LRU cache of its results (prices depend on the event alone), which
    falls back to calling ``fn`` for an argument that cannot be hashed (a plugin's event
    with a mutable field) instead of failing the charge."""
    cached = functools.lru_cache(maxsize=4096)(fn)

    @functools.wraps(fn)
    def call(*args: Any) -> _R:
        try:
            hash(args)
        except TypeError:
            return fn(*args)
        return cached(*args)

    return call


def _stated_pair(stated: PrivacyEvent | None) -> tuple[float, float] | None:
    """The (epsilon, delta > 0) a caller stated for a release, if any."""
    if isinstance(stated, ApproxDP) and stated.delta > 0:
        return float(stated.epsilon), float(stated.delta)
    return None


@_memo
def _block_pair(
    event: PrivacyEvent, event_delta: float | None, neighbouring: str, left: float | None
) -> tuple[float, float] | None:
    return block_pair(event, event_delta=event_delta, neighbouring=neighbouring, left=left)


@_memo
def _block_delta(event: PrivacyEvent, event_delta: float, neighbouring: str) -> float:
    return block_delta(event, event_delta=event_delta, neighbouring=neighbouring)


def _pair(
    event: PrivacyEvent, event_delta: float | None, neighbouring: str, left: float | None
) -> tuple[float, float] | None:
    """:func:`block_pair`, cached. The delta left changes with every release but changes
    the pair only when it caps the block's delta, so any other value shares one entry
    (else every Gaussian charge would run every block accountant again)."""
    if left is not None and event_delta is not None and not 0.0 < left < _block_delta(event, event_delta, neighbouring):
        left = None
    elif event_delta is None:
        left = None  # block_pair reads left only at an event_delta
    return _block_pair(event, event_delta, neighbouring, left)


@_memo
def _pair_at(event: PrivacyEvent, delta: float, neighbouring: str, target: float) -> tuple[float, float] | None:
    return leaf_pair_at(event, delta=delta, neighbouring=neighbouring, target=target)


def _best_pair(
    event: PrivacyEvent, stated: PrivacyEvent | None, *, event_delta: float | None, neighbouring: str, left: float
) -> tuple[float, float] | None:
    """The (eps, delta) point a pair filter charges: at ``event_delta``, or at the delta
    the caller stated (a Gaussian asked for at (eps, delta) is priced at that point of its
    curve, as proven by the accountants -- never more than it was verified for), whichever
    fits the ``left`` delta with the smaller epsilon; if neither fits, at ``left`` itself.
    The point is fixed at charge time from the event and earlier outputs only, as RRUV
    2016 filters allow."""
    candidates = []
    pair = _pair(event, event_delta, neighbouring, left)
    if pair is not None:
        candidates.append(pair)
    target = _stated_pair(stated)
    if target is not None:
        at = min(target[1], left) if left > 0 else target[1]
        pair = _pair_at(event, at, neighbouring, target[0])
        if pair is not None:
            candidates.append(pair)
    fitting = [p for p in candidates if p[1] <= left]
    if candidates and not fitting and left > 0 and not isinstance(event, (Composed, SelfComposed)):
        # a leaf priced at the delta left, as a block already is (e.g. event_delta is the
        # budget's delta but this filter has a share of it): a valid point, and the filter
        # stays alive
        pair = _pair_at(event, left, neighbouring, math.inf)
        if pair is not None and pair[1] <= left:
            fitting = [pair]
    pool = fitting or candidates
    return min(pool) if pool else None


class Filter(ABC):
    """A privacy filter with budget (``epsilon``, ``delta``) (its share of a session's).

    Its state is :attr:`sums`, a few running totals. :meth:`price` computes what one
    release would add (from the state before it); :meth:`apply` adds a price. A filter is
    granted-within while ``spent() <= epsilon``; once it could not price an event it
    stays dead (:attr:`dead` says why).
    """

    name: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    #: Number of running sums.
    width: ClassVar[int] = 1

    def __init__(
        self, *, epsilon: float, delta: float, neighbouring: str = "add_remove", event_delta: float | None = None
    ) -> None:
        self.epsilon = v.check_epsilon("epsilon", epsilon, allow_zero=True)
        self.delta = v.check_delta("delta", delta)
        self.neighbouring = v.check_relation("neighbouring", neighbouring)
        self.event_delta = event_delta
        self.dead = ""  # why this filter can no longer vouch ("" while it can)
        self.sums: tuple[float, ...] = (0.0,) * self.width
        # spent() of the last totals it was asked about: (those totals, epsilon). One
        # tuple, assigned at once, so a thread never reads one totals' epsilon for others.
        self._spent_memo: tuple[tuple[float, ...] | None, float] = (None, 0.0)
        # prices of state-free filters by (event, stated), of pair filters by (event, stated,
        # delta left); copies share it (same options)
        self._prices: dict[tuple[Any, ...], Price] = {}
        # the last memo hit: (event, stated, delta left, price), matched by identity first.
        # Only a hit is kept, so its event hashed: it is frozen, as the memo needs anyway.
        self._last: tuple[Any, Any, float, Price] | None = None

    # -- what a subclass defines ----------------------------------------------------------

    @abstractmethod
    def _increment(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[float, ...]:
        """The increments of :attr:`sums` for one release of ``event``; raise
        UnsupportedEventError if it cannot price it."""

    @abstractmethod
    def _spent_of(self, sums: tuple[float, ...]) -> float:
        """Epsilon of the totals ``sums`` at this filter's delta."""

    def _add(self, sums: tuple[float, ...], inc: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(map(operator.add, sums, inc))  # the same sums as a + b, elementwise

    # -- pricing and state ----------------------------------------------------------------

    #: True when a price depends on the event and the filter's options only, never on its
    #: totals: :meth:`price` then memoizes it per filter (and its copies).
    state_free: ClassVar[bool] = False

    def price(self, event: PrivacyEvent, stated: PrivacyEvent | None = None) -> Price:
        """What one release of ``event`` adds now (``stated``: the guarantee the caller
        asked for, e.g. ``ApproxDP(eps, delta)`` of a Gaussian), or why it cannot be priced."""
        if self.dead:
            return self.dead
        if not self.state_free:
            return self._price(event, stated)
        last = self._last
        if last is not None and last[0] is event and last[1] is stated:
            return last[3]  # the very objects of the last release (a loop repeats one)
        key = (event, stated)
        try:
            price = self._prices[key]
        except (KeyError, TypeError):
            return self._memoised(key, event, stated)
        self._last = (event, stated, 0.0, price)
        return price

    def _memoised(self, key: tuple[Any, ...], event: PrivacyEvent, stated: PrivacyEvent | None) -> Price:
        """``self._price(event, stated)``, kept under ``key`` (which must determine it)."""
        try:
            return self._prices[key]
        except KeyError:
            pass
        except TypeError:  # an event that cannot be hashed (a plugin's, with a mutable field)
            return self._price(event, stated)
        price = self._price(event, stated)
        if len(self._prices) < _PRICE_MEMO:
            self._prices[key] = price
        return price

    def _price(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> Price:
        try:
            inc = tuple(float(x) for x in self._increment(event, stated))
        except UnsupportedEventError as exc:
            return unsupported_reason(exc, event)
        if len(inc) != self.width or any(x != x or x < 0 for x in inc):
            return f"cannot account for {event.kind!r}: its price is not {self.width} non-negative number(s)"
        return inc

    def apply(self, price: Price) -> None:
        """Add a price from :meth:`price` (or as stored in a ledger) to the totals."""
        self.sums, self.dead = self.after(price)

    def after(self, price: Price) -> tuple[tuple[float, ...], str]:
        """The totals and :attr:`dead` once ``price`` is added, computed as :meth:`apply`
        adds it but leaving the filter as it is (a session decides a release on these, and
        sets them only once its row is stored)."""
        return self.after_state((self.sums, self.dead), price)

    def after_state(self, state: tuple[tuple[float, ...], str], price: Price) -> tuple[tuple[float, ...], str]:
        """:meth:`after` from the totals and dead reason ``state`` instead of the filter's."""
        sums, dead = state
        if dead:
            return sums, dead
        if type(price) is tuple and len(price) == self.width:  # the usual case, first
            return self._add(sums, price), ""
        if isinstance(price, str):
            return sums, price
        if len(price) != self.width:
            raise PrivregValueError(f"a {self.name} filter's price has {self.width} number(s); got {len(price)}")
        return self._add(sums, price), ""

    def add(self, event: PrivacyEvent, count: int = 1, stated: PrivacyEvent | None = None) -> None:
        """Price and apply ``count`` separate releases of ``event``, one after another."""
        for _ in range(v.check_count("count", count)):
            self.apply(self.price(event, stated))

    #: Relative cost of :meth:`spent` (a session asks the cheap filters first whether they
    #: vouch; the answer does not depend on the order).
    spent_cost: ClassVar[int] = 0

    def spent(self) -> float:
        """Epsilon of the totals at this filter's delta (inf once dead, or if not finite).
        Computed once per totals: a session asks for it before and after every release."""
        return self.spent_at(self.sums, self.dead)

    def spent_at(self, sums: tuple[float, ...], dead: str = "") -> float:
        """:meth:`spent` of the totals ``sums`` and dead reason ``dead`` (from
        :meth:`after`), the filter left as it is. Remembered for the latest totals asked
        about, by identity (the memo holds them, so no other tuple can take their id)."""
        if dead:
            return math.inf
        memo_sums, memo = self._spent_memo
        if memo_sums is sums:
            return memo
        try:
            eps = float(self._spent_of(sums))
        except (ArithmeticError, ValueError):
            eps = math.inf
        if eps != eps:  # NaN cannot vouch
            eps = math.inf
        self._spent_memo = (sums, eps)
        return eps

    def vouches(self) -> bool:
        return self.spent() <= self.epsilon

    def vouches_at(self, sums: tuple[float, ...], dead: str = "") -> bool:
        """:meth:`vouches` at the totals and dead reason from :meth:`after`."""
        return self.spent_at(sums, dead) <= self.epsilon

    #: Indexes of the totals a price depends on (a pair filter's: the delta it has left),
    #: so that others' releases leave it as priced when they add nothing there; None when
    #: unknown (then :meth:`room` is not used for this filter's budget).
    price_reads: ClassVar[tuple[int, ...] | None] = None

    def room(self, sums: tuple[float, ...], dead: str = "") -> tuple[float, ...] | None:
        """How much others' releases may add to each total while this filter still vouches
        at ``sums`` (from :meth:`after`) plus their increments: a box ``[0, room]``, grown
        from ``sums`` in proportion (a total at 0 may not grow). Every point of the box
        vouches: its corner does, with a margin of 2e-9 of each total for the rounding of a
        sum of up to 1e6 prices added one by one, and of 1e-9 of epsilon for rounding in
        :meth:`spent_at` (spent is monotone in each total). None if it does not vouch at
        ``sums`` with those margins. A session uses it to let the server admit a release
        on rows it has not read (``PostgresLedger.try_append_within``)."""
        if dead or self.price_reads is None:
            return None
        cap = self.epsilon * (1 - 1e-9)

        def fits(t: float) -> bool:
            corner = tuple((x + x * t) * (1 + 2e-9) for x in sums)
            return self.spent_at(corner) <= cap

        if not fits(0.0):
            return None
        low, high = 0.0, 1.0
        while fits(high):  # spent grows without bound in every total: ends
            low, high = high, high * 16
            if high > 1e15:
                return tuple(x * low for x in sums)
        for _ in range(24):  # room to within 2**-24 of the largest the margins allow
            mid = (low + high) / 2
            low, high = (mid, high) if fits(mid) else (low, mid)
        return tuple(x * low for x in sums)

    def copy(self) -> Filter:
        new = object.__new__(type(self))
        vars(new).update(vars(self))
        return new

    def state(self) -> dict[str, Any]:
        """The totals, as a checkpoint stores them."""
        return self.state_at(self.sums, self.dead)

    def state_at(self, sums: tuple[float, ...], dead: str = "") -> dict[str, Any]:
        """:meth:`state` of the totals and dead reason from :meth:`after`."""
        return {"sums": price_to_json(sums), "dead": dead}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore totals saved by :meth:`state` (ValueError if malformed)."""
        sums = price_from_json(state.get("sums"))
        dead = state.get("dead", "")
        if isinstance(sums, str) or len(sums) != self.width or not isinstance(dead, str):
            raise ValueError(f"not a {self.name} filter state")
        self.sums, self.dead = sums, dead

    def describe(self) -> str:
        return f"{self.name} ({self.citation})"


class _PairFilter(Filter):
    """A filter charging one (eps, delta) pair per release."""

    width = 2
    price_reads = (1,)  # the delta left

    def _delta_left(self) -> float:
        return self.delta - self.sums[1]

    def price(self, event: PrivacyEvent, stated: PrivacyEvent | None = None) -> Price:
        """:meth:`Filter.price`, memoized by ``(event, stated, delta left)``: a pair
        filter's price depends on its totals only through the delta it has left (its
        options are fixed), so a release that leaves delta alone -- every pure-DP one --
        is priced once. (+0.0 and -0.0 left, which share a key, give the same price.)"""
        if self.dead:
            return self.dead
        left = self._delta_left()
        last = self._last
        if last is not None and last[0] is event and last[1] is stated and last[2] == left:
            return last[3]  # the very objects of the last release, the same delta left
        key = (event, stated, left)
        try:
            price = self._prices[key]
        except (KeyError, TypeError):
            return self._memoised(key, event, stated)
        self._last = (event, stated, left, price)
        return price

    def _increment(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[float, ...]:
        pair = _best_pair(
            event, stated, event_delta=self.event_delta, neighbouring=self.neighbouring, left=self._delta_left()
        )
        if pair is None:
            for leaf, _ in leaves(event):  # a leaf with no guarantee for the budget's neighbours: say why
                related, why = relate(leaf, self.neighbouring)
                if related is None:
                    raise UnsupportedEventError(event, self.name, why)
            raise UnsupportedEventError(
                event,
                self.name,
                "no (epsilon, delta) pair: state the release's (epsilon, delta), or set event_delta for curve events",
            )
        return pair


class BasicFilter(_PairFilter):
    name = "basic"
    citation = "Rogers-Roth-Ullman-Vadhan 2016: simple composition is a valid privacy filter"

    def _add(self, sums: tuple[float, ...], inc: tuple[float, ...]) -> tuple[float, ...]:
        return sums[0] + inc[0], min(1.0, sums[1] + inc[1])

    def _spent_of(self, sums: tuple[float, ...]) -> float:
        return sums[0] if self.delta >= sums[1] else math.inf


class AdvancedFilter(_PairFilter):
    """Fully adaptive advanced composition (Whitehouse-Ramdas-Rogers-Wu 2023): with
    delta' = delta'' = delta / 2, the interaction is (eps, delta)-DP while
    sqrt(2 log(1/delta') sum eps_i^2) + sum eps_i^2 / 2 <= eps and sum delta_i <= delta''.
    Its sums are (sum eps_i^2, sum delta_i); its price of a release (eps_i^2, delta_i)."""

    name = "advanced"
    citation = "Whitehouse-Ramdas-Rogers-Wu 2023, fully adaptive advanced composition filter"

    def _delta_left(self) -> float:
        return self.delta / 2 - self.sums[1]

    def _increment(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[float, ...]:
        eps, delta = super()._increment(event, stated)
        return (max(eps * eps, TINY) if eps > 0 else 0.0), delta  # a square that underflows claims no loss

    def _spent_of(self, sums: tuple[float, ...]) -> float:
        sum_sq, sum_delta = sums
        if sum_delta > self.delta / 2 or self.delta == 0:
            return math.inf if (sum_sq > 0 or sum_delta > 0) else 0.0
        return math.sqrt(2 * math.log(2 / self.delta) * sum_sq) + sum_sq / 2


@_memo
def _rho(event: PrivacyEvent, neighbouring: str) -> float:
    return ZCDPAccountant(neighbouring=neighbouring).compose(event).rho


class ZCDPFilter(Filter):
    name = "zcdp"
    state_free = True
    price_reads = ()
    spent_cost = 3  # dp_accounting's conversion over every order
    citation = "Feldman-Zrnic 2021, Rényi filter, at every order: the interaction is rho-zCDP"

    def _increment(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[float, ...]:
        return (_rho(event, self.neighbouring),)

    def _spent_of(self, sums: tuple[float, ...]) -> float:
        rho = sums[0]
        return zcdp_epsilon(rho, self.delta) if self.delta > 0 or rho == 0 else math.inf


@_memo
def _rdp_curve(event: PrivacyEvent, neighbouring: str) -> tuple[float, ...]:
    curve = RDPAccountant(neighbouring=neighbouring).compose(event).curve()[_FILTER_ORDER_INDEX]
    return tuple(float(x) for x in curve)


class RDPFilter(Filter):
    name = "rdp"
    spent_cost = 3  # dp_accounting's conversion over 24 orders
    citation = (
        "Feldman-Zrnic 2021, Rényi filter per order, and Lécuyer 2021; union bound over "
        f"the {len(FILTER_ORDERS)} orders fixed in advance"
    )
    width = len(FILTER_ORDERS)
    state_free = True
    price_reads = ()

    def _increment(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[float, ...]:
        return _rdp_curve(event, self.neighbouring)

    def _spent_of(self, sums: tuple[float, ...]) -> float:
        curve = np.array(sums, dtype=np.float64)
        if self.delta == 0:
            return 0.0 if not np.any(curve) else math.inf
        return rdp_epsilon(FILTER_ORDERS, curve, self.delta / len(FILTER_ORDERS))


@_memo
def _mu_squared(event: PrivacyEvent, neighbouring: str) -> float:
    return GDPAccountant(neighbouring=neighbouring).compose(event).mu ** 2


class GDPFilter(Filter):
    """Sums mu_i^2 (Smith-Thakurta 2022); its price of a release is mu_i^2."""

    name = "gdp"
    state_free = True
    price_reads = ()
    spent_cost = 2  # a root search
    citation = "Smith-Thakurta 2022: mu_i^2 add up under fully adaptive composition"

    def _increment(self, event: PrivacyEvent, stated: PrivacyEvent | None) -> tuple[float, ...]:
        return (_mu_squared(event, self.neighbouring),)

    def _spent_of(self, sums: tuple[float, ...]) -> float:
        mu = math.sqrt(sums[0])
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


def prices_of(filters: Sequence[Filter], event: PrivacyEvent, stated: PrivacyEvent | None = None) -> list[Price]:
    """Each filter's price of one release of ``event`` now."""
    return [f.price(event, stated) for f in filters]
