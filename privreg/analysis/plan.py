"""A plan: several statistics priced, stated and released together as one block.

::

    plan = q.plan(epsilon=1.0, delta=1e-7, noise="gaussian")
    plan.count()
    plan.mean("age", bounds=(17, 90), weight=2)
    plan.median("age", bounds=(17, 90), grid=74)
    print(plan.cost())                        # what the session would charge now
    print(plan.accuracy(0.95, rows=30_000))  # every statistic's half-width, before any release
    count, mean, median = plan.release()     # one charge, results in the plan's order

**Budget split.** The plan's budget is shared by its statistics in proportion to their
``weight`` (1 each: an even split), and each statistic shares its part equally among its
own parts (a mean's count and sum). With ``noise="laplace"`` the budget is pure
``epsilon``, and the shares add up to at most ``epsilon`` (basic composition, Dwork-
McSherry-Nissim-Smith 2006). With ``noise="gaussian"`` it is the largest zCDP ``rho``
implying ``(epsilon, delta)`` (Canonne-Kamath-Steinke 2020, Proposition 12), and the
shares add up to at most ``rho`` (Bun-Steinke 2016, Lemma 2.3): counts, sums, means,
histograms and group-bys draw the discrete Gaussian (:mod:`privreg.analysis.noise`),
variances and quantiles stay pure DP at the epsilon whose zCDP is their share (``eps^2 /
2`` per Laplace part, Bun-Steinke 2016 Prop. 1.4; ``eps^2 / 8`` for the exponential
mechanism, Cesar-Rogers 2021 Lemma 3.2).

**One block.** :meth:`Plan.release` charges the statistics' events as one
:class:`~privreg.core.events.Composed` event (with the pair the plan is calibrated to,
``ApproxDP(epsilon, delta)``, as its stated guarantee for a Gaussian plan), so the
session prices it by the tightest non-adaptive bound of the whole block: valid, because
every event of the block is fixed before it is charged and none depends on another's
output (the block's parameters may depend on earlier releases: the session's filters
are proven for that fully adaptive choice, Rogers-Roth-Ullman-Vadhan 2016, Whitehouse et
al. 2023, Feldman-Zrnic 2021). So an analyst may choose the next plan from this one's
results. Order of a release: the budget is asked whether it grants the block (nothing
read, nothing charged if not); every statistic's inputs are read and validated; the block
is charged; then the noise is drawn -- after the charge nothing raises. Results come out
in the plan's order.

**Before any release** :meth:`Plan.cost` says what the session would charge now (in
epsilon at its delta, per filter) and :meth:`Plan.accuracy` each statistic's half-width:
counts, sums and histograms in the data's units; means in data units given ``rows=``, a
public lower bound on the number of rows (e.g. the low end of a DP count released
earlier); quantiles as a rank error (a fraction ``e / rows`` of the quantile level given
``rows=``) on the grid of the declared step (value units). Nothing of this reads the data.

Partition selection (``groupby(keys=None)``) cannot be in a plan: how many keys it
releases fixes its aggregates' events. Release keys first, then plan with them.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import attrs

from privreg.accountant.plans import plan_bound
from privreg.accountant.zcdp import ZCDPAccountant, zcdp_epsilon
from privreg.analysis.accuracy import Accuracy, check_level
from privreg.analysis.noise import NoiseSpec, check_noise, rho_for
from privreg.budget.session import Quote
from privreg.core import validation as v
from privreg.core.errors import BudgetExceededError, PrivregError, PrivregValueError
from privreg.core.events import ApproxDP, Composed, PrivacyEvent

__all__ = ["Plan", "PlanAccuracy", "PlanCost"]

# The share of one statistic -> the statistic, built on the plan's own view of the query.
_Build = Callable[[Any, Any], Any]


class _Probed(Exception):
    """Raised by the block charger in probe mode: the statistic's inputs were read and
    validated up to its first charge, and nothing was charged or drawn."""


class _Block:
    """The charger the plan's statistics release through. The session charges the whole
    block once; here each part's event must be the next one of the block (else nothing
    more is drawn: a bug, never data-dependent)."""

    def __init__(self) -> None:
        self.mode = "closed"
        self.expected: deque[PrivacyEvent] = deque()

    def can_afford(self, event: PrivacyEvent, *, stated: PrivacyEvent | None = None) -> bool:
        return True  # the plan asked the session for the whole block

    def price(self, event: PrivacyEvent, *, stated: PrivacyEvent | None = None) -> Quote:
        return Quote(granted=True, epsilon=0.0, filter="the plan's block", by_filter={})

    def charge(self, event: PrivacyEvent, **_: Any) -> None:
        if self.mode == "probe":
            raise _Probed
        if self.mode != "paid" or not self.expected or self.expected[0] != event:
            raise PrivregError(f"internal error: a plan's statistic charged {event!r} outside its paid block")
        self.expected.popleft()


@attrs.frozen(kw_only=True)
class PlanCost:
    """What the plan's block would cost now: ``epsilon`` (the rise of the session's
    spent epsilon at its ``delta``; inf if refused), whether it would be ``granted``,
    the ``filter`` that would vouch best (or the non-adaptive accountant for a charger
    without filters), each filter's figure and the reason of a refusal."""

    granted: bool
    epsilon: float
    delta: float
    filter: str
    by_filter: Mapping[str, float | None]
    reason: str = ""

    def __str__(self) -> str:
        if not self.granted:
            return f"refused: {self.reason}"
        detail = ", ".join(f"{k} {'unsupported' if x is None else f'{x:.4g}'}" for k, x in self.by_filter.items())
        return f"epsilon {self.epsilon:.4g} at delta {self.delta:g} ({self.filter}" + (
            f"; {detail})" if detail else ")"
        )


@attrs.frozen(kw_only=True)
class PlanAccuracy:
    """The plan's accuracy table: one row per statistic, in the plan's order
    (``statistics``, ``shares``: the epsilon or zCDP rho each was given, ``accuracies``,
    and ``widths``: each half-width in words, a quantile's in value units through its
    grid)."""

    level: float
    rows: int | None
    noise: str
    statistics: tuple[str, ...]
    shares: tuple[float, ...]
    accuracies: tuple[Accuracy, ...]
    widths: tuple[str, ...]

    def __iter__(self) -> Any:
        return iter(zip(self.statistics, self.accuracies, strict=True))

    def __str__(self) -> str:
        share = "epsilon" if self.noise == "laplace" else "rho"
        head = f"{'statistic':<34} {share:>9}  {self.level:.0%} half-width"
        lines = [head, "-" * len(head)]
        for name, sh, width in zip(self.statistics, self.shares, self.widths, strict=True):
            lines.append(f"{name:<34} {sh:>9.4g}  {width}")
        return "\n".join(lines)


def _width(st: Any, acc: Accuracy, rows: int | None) -> str:
    """A half-width in words; a quantile's rank error ``e`` in value units through its
    grid: the release is a grid point whose rank error exceeds the best grid point's by
    at most ``e`` (McSherry-Talwar 2007, Theorem 8), so when the grid holds a true
    quantile (integer data on an integer grid) it lies between the true ``q -+ e / rows``
    quantiles; otherwise add the best grid point's rank error."""
    if acc.half_width is None:
        return "depends on the data" + (" (pass rows=)" if rows is None else " (per-key counts are private)")
    if acc.unit != "ranks":
        return f"+-{acc.half_width:.4g} {acc.unit}"
    grid = st.mech.grid
    step = float(grid[1] - grid[0]) if len(grid) > 1 else 0.0
    if rows is None:
        return f"+-{acc.half_width:.4g} ranks (pass rows= for quantile levels); grid step {step:.4g}"
    q, e = st.q, acc.half_width / rows
    return (
        f"between the true {max(0.0, q - e):.4g} and {min(1.0, q + e):.4g} quantiles, if the grid (step "
        f"{step:.4g}) holds a true quantile"
    )


def _weight(weight: Any) -> float:
    w = v.check_sensitivity("weight", weight)
    return w


class _PlanGroupBy:
    """Aggregates per key of a plan's group-by (public keys only)."""

    def __init__(self, plan: Plan, column: str, keys: Sequence[Hashable]) -> None:
        self._plan, self._column, self._keys = plan, column, keys

    def count(self, *, weight: float = 1.0) -> Plan:
        col, keys = self._column, self._keys
        return self._plan._add(lambda q, s: q.groupby(col, keys=keys).count(epsilon=s), weight)

    def sum(
        self, column: str, *, bounds: Any, rule: str = "clip", impute: float | None = None, weight: float = 1.0
    ) -> Plan:
        col, keys = self._column, self._keys
        return self._plan._add(
            lambda q, s: q.groupby(col, keys=keys).sum(column, bounds=bounds, epsilon=s, rule=rule, impute=impute),
            weight,
        )

    def mean(
        self, column: str, *, bounds: Any, rule: str = "clip", impute: float | None = None, weight: float = 1.0
    ) -> Plan:
        col, keys = self._column, self._keys
        return self._plan._add(
            lambda q, s: q.groupby(col, keys=keys).mean(column, bounds=bounds, epsilon=s, rule=rule, impute=impute),
            weight,
        )


class Plan:
    """Several statistics of one :class:`~privreg.analysis.query.Query`, priced and
    released as one block (module docstring). Build it with :meth:`Query.plan`; add
    statistics (each returns the plan, ``weight`` their share of the budget); then
    :meth:`cost`, :meth:`accuracy` and :meth:`release`.

    ``epsilon``: the plan's total. ``noise``: ``"laplace"`` (pure DP; ``delta`` not
    used) or ``"gaussian"`` (zCDP; ``delta`` defaults, on a budget session, to the share
    of the budget's delta each of its filters holds, at which the session prices it)."""

    def __init__(self, query: Any, *, epsilon: float, delta: float | None = None, noise: str = "laplace") -> None:
        self._query = query
        self.epsilon = v.check_epsilon("epsilon", epsilon)
        self.noise = check_noise(noise)
        if self.noise == "laplace":
            if delta is not None:
                raise PrivregValueError(
                    f"delta applies only to a plan with noise='gaussian'; got delta={delta!r} with Laplace noise "
                    f"(pure DP). Leave delta out, or pass noise='gaussian'."
                )
            self.delta = 0.0
        else:
            self.delta = self._default_delta() if delta is None else v.check_delta("delta", delta, allow_zero=False)
            self.rho = rho_for(self.epsilon, self.delta)
        self._entries: list[tuple[_Build, float, float]] = []
        self._built: tuple[list[Any], list[float]] | None = None
        self._view = copy.copy(query)  # the query as the plan's statistics see it: charging the block
        self._block = _Block()
        self._view.session = self._block

    def _default_delta(self) -> float:
        budget = getattr(self._query.session, "budget", None)
        filters = getattr(self._query.session, "filter_names", ())
        if budget is None or not filters or not budget.delta > 0:
            raise PrivregValueError(
                "delta is required for a plan with noise='gaussian' unless the session is a BudgetSession with "
                "filters and a positive delta; got None. Pass delta=1e-7 (well below 1 / number of persons)."
            )
        return float(budget.delta) / len(filters)

    # -- statistics -----------------------------------------------------------------------

    def _add(self, build: _Build, weight: Any, pure: float = 0.0) -> Plan:
        """Add a statistic; ``pure``: for a pure-DP one in a Gaussian plan, ``c`` with its
        zCDP ``eps^2 / c`` (2 per Laplace part, so 6 for a variance's 3; 8 for the
        exponential mechanism)."""
        w = _weight(weight)
        build(self._query, 1.0).mechanisms()  # bad columns, bounds, keys fail now (nominal epsilon 1)
        self._entries.append((build, w, pure))
        self._built = None
        return self

    def count(self, *, weight: float = 1.0) -> Plan:
        """Number of rows (:meth:`Query.count`)."""
        return self._add(lambda q, s: q.count(epsilon=s), weight)

    def sum(
        self, column: str, *, bounds: Any, rule: str = "clip", impute: float | None = None, weight: float = 1.0
    ) -> Plan:
        """Sum of ``column`` within ``bounds`` (:meth:`Query.sum`)."""
        return self._add(lambda q, s: q.sum(column, bounds=bounds, epsilon=s, rule=rule, impute=impute), weight)

    def mean(
        self, column: str, *, bounds: Any, rule: str = "clip", impute: float | None = None, weight: float = 1.0
    ) -> Plan:
        """Mean of ``column`` within ``bounds`` (:meth:`Query.mean`)."""
        return self._add(lambda q, s: q.mean(column, bounds=bounds, epsilon=s, rule=rule, impute=impute), weight)

    def variance(
        self, column: str, *, bounds: Any, rule: str = "clip", impute: float | None = None, weight: float = 1.0
    ) -> Plan:
        """Variance of ``column`` within ``bounds`` (:meth:`Query.variance`; Laplace)."""
        return self._add(
            lambda q, s: q.variance(column, bounds=bounds, epsilon=s, rule=rule, impute=impute), weight, 6.0
        )

    def quantile(
        self,
        column: str,
        q: float,
        *,
        bounds: Any,
        grid: int = 1025,
        rule: str = "clip",
        impute: float | None = None,
        weight: float = 1.0,
    ) -> Plan:
        """The ``q``-quantile of ``column`` (:meth:`Query.quantile`; exponential mechanism)."""
        return self._add(
            lambda qq, s: qq.quantile(column, q, bounds=bounds, epsilon=s, grid=grid, rule=rule, impute=impute),
            weight,
            8.0,
        )

    def median(
        self,
        column: str,
        *,
        bounds: Any,
        grid: int = 1025,
        rule: str = "clip",
        impute: float | None = None,
        weight: float = 1.0,
    ) -> Plan:
        """:meth:`quantile` at ``q = 0.5``."""
        return self.quantile(column, 0.5, bounds=bounds, grid=grid, rule=rule, impute=impute, weight=weight)

    def histogram(self, column: str, *, categories: Sequence[Hashable], weight: float = 1.0) -> Plan:
        """Rows per declared category of ``column`` (:meth:`Query.histogram`)."""
        return self._add(lambda q, s: q.histogram(column, categories=categories, epsilon=s), weight)

    def groupby(self, column: str, *, keys: Sequence[Hashable]) -> _PlanGroupBy:
        """Aggregates per public key of ``column``; each adds one statistic to the plan."""
        if keys is None:
            raise PrivregValueError(
                f"a plan's group-by needs public keys; got keys=None for {column!r}. Partition selection's "
                f"released keys fix its aggregates' events, so release them first (query.groupby({column!r}, "
                f"keys=None) on its own), then plan with keys=[...]"
            )
        return _PlanGroupBy(self, column, keys)

    # -- shares and the block -------------------------------------------------------------

    def _shares(self, scale: float) -> list[float]:
        total = math.fsum(w for _, w, _ in self._entries)
        budget = self.epsilon if self.noise == "laplace" else self.rho
        return [budget * scale * w / total for _, w, _ in self._entries]

    def _make(self, build: _Build, share: float, pure: float) -> Any:
        """The statistic at its share: Laplace ``epsilon``; or Gaussian ``rho``, where a
        pure-DP statistic (variance, quantile) gets the epsilon ``pure`` whose zCDP is
        that share."""
        if self.noise == "laplace":
            return build(self._view, share)
        if pure:
            return build(self._view, math.sqrt(pure * share))
        return build(
            self._view, NoiseSpec(kind="gaussian", epsilon=zcdp_epsilon(share, self.delta), rho=share, delta=self.delta)
        )

    def _build(self) -> tuple[list[Any], list[float]]:
        if not self._entries:
            raise PrivregValueError("the plan has no statistic; add some (plan.count(), plan.mean(...), ...)")
        if self._built is not None:
            return self._built
        scale = 1.0
        for _ in range(8):  # rounding of the Gaussians' grids may overshoot by ~1e-3: shrink and rebuild
            shares = self._shares(scale)
            stats = [self._make(build, s, pure) for (build, _, pure), s in zip(self._entries, shares, strict=True)]
            over = self._overshoot(self._events(stats))
            if over <= 1.0:
                self._built = (stats, shares)
                return self._built
            scale /= over * (1 + 1e-9)
        raise PrivregError("internal error: the plan's shares did not fit its budget")  # pragma: no cover

    @staticmethod
    def _events(stats: Sequence[Any]) -> tuple[PrivacyEvent, ...]:
        return tuple(m.privacy_event() for st in stats for m in st.mechanisms())

    def _overshoot(self, events: tuple[PrivacyEvent, ...]) -> float:
        """How far the block exceeds the plan's epsilon (Laplace, basic composition as the
        session adds it) or rho (Gaussian, zCDP): <= 1 when within."""
        if self.noise == "laplace":
            total = 0.0
            for e in events:  # added as the basic filter adds them
                total += float(getattr(e, "epsilon", math.inf))
            return total / self.epsilon
        acc = ZCDPAccountant().compose(Composed(events=events))
        return acc.rho / self.rho

    def _stated(self) -> PrivacyEvent | None:
        return ApproxDP(epsilon=self.epsilon, delta=self.delta) if self.noise == "gaussian" else None

    def block(self) -> Composed:
        """The block the release charges: every statistic's events, in order (no data read)."""
        return Composed(events=self._events(self._build()[0]))

    @property
    def statistics(self) -> tuple[str, ...]:
        return tuple(st.statistic for st in self._build()[0])

    # -- before any release ---------------------------------------------------------------

    def cost(self) -> PlanCost:
        """What the session would charge for the block now (nothing is charged or read):
        its quote under the session's filters, or, for a charger without them (an
        EventLog), the tightest non-adaptive bound at the plan's delta."""
        block, stated, session = self.block(), self._stated(), self._query.session
        price = getattr(session, "price", None)
        if price is None:
            eps, name = plan_bound(list(block.events), delta=self.delta, neighbouring="add_remove")
            return PlanCost(granted=True, epsilon=eps, delta=self.delta, filter=f"plan:{name}", by_filter={name: eps})
        q = price(block, stated=stated)
        return PlanCost(
            granted=q.granted,
            epsilon=q.epsilon,
            delta=float(session.budget.delta),
            filter=q.filter,
            by_filter=dict(q.by_filter),
            reason=q.reason,
        )

    def accuracy(self, level: float = 0.95, *, rows: int | None = None) -> PlanAccuracy:
        """Every statistic's accuracy at ``level``, in the plan's order (nothing is read or
        charged). ``rows``: a public lower bound on the number of rows, which turns means'
        half-widths into data units and quantiles' rank errors into quantile levels."""
        level = check_level(level)
        rows = None if rows is None else v.check_count("rows", rows)
        stats, shares = self._build()
        accs = [st.accuracy(level, rows=rows) for st in stats]
        return PlanAccuracy(
            level=level,
            rows=rows,
            noise=self.noise,
            statistics=tuple(st.statistic for st in stats),
            shares=tuple(shares),
            accuracies=tuple(accs),
            widths=tuple(_width(st, acc, rows) for st, acc in zip(stats, accs, strict=True)),
        )

    # -- the release ----------------------------------------------------------------------

    def release(self, *, level: float = 0.95, label: str = "plan") -> tuple[Any, ...]:
        """Charge the block once and release every statistic, in the plan's order, with
        intervals at ``level``. Raises (charging and releasing nothing) when the session
        refuses the block -- asked before any data is read -- or the data break a
        declared rule."""
        level = check_level(level)
        stats, shares = self._build()
        block, stated, session = Composed(events=self._events(stats)), self._stated(), self._query.session
        label = str(label)
        can_afford = getattr(session, "can_afford", None)
        if can_afford is not None and not can_afford(block, stated=stated):
            raise BudgetExceededError(
                f"{label}: the session cannot grant the plan's {len(stats)} statistics ({self.cost().reason}); "
                f"nothing was read, released or charged. Pass a smaller epsilon, or use a session with more left."
            )
        self._view._bounded = self._query.data  # one contribution bounding for the query and its plans
        self._block.mode = "probe"
        try:
            for st in stats:  # read and validate every input: whatever can fail does so now
                with contextlib.suppress(_Probed):
                    st.release(level=level)
            session.charge(
                block,
                mechanism="plan",
                parameters={
                    "noise": self.noise,
                    "epsilon": self.epsilon,
                    "delta": self.delta,
                    "shares": list(shares),
                    "statistics": [st._describe() for st in stats],
                },
                label=label,
                randomness=self._query.rng.describe(),
                **({} if stated is None else {"stated": stated}),
            )
            self._block.mode, self._block.expected = "paid", deque(block.events)
            return tuple(st.release(level=level, label=f"{label}: {st.statistic}") for st in stats)
        finally:
            self._block.mode, self._block.expected = "closed", deque()
