"""Differentially private queries over a pandas or Spark DataFrame, with accuracy before release.

A :class:`Query` holds a frame, its privacy unit (a column identifying a person, or
:data:`~privreg.analysis.bounding.ONE_ROW_PER_USER`), the most rows one person may
contribute (``max_rows_per_user``, enforced by keeping a uniformly random ``k`` of each
person's rows) and the charger every release goes through (a budget session). Its methods
build *planned* statistics: nothing is computed from the data and nothing is charged
until :meth:`Planned.release`; :meth:`Planned.accuracy` tells beforehand what the
release will be worth, from the exact law of the noise the registered mechanism draws.

Sensitivities are derived from the declared bounds and ``max_rows_per_user`` (see
:mod:`privreg.analysis.bounding`); neighbouring datasets add or remove one person with
all their rows. Each release charges its mechanisms' events before any noise is drawn
(:meth:`privreg.core.mechanism.Mechanism.release`), so a refused charge releases
nothing; the ledger entry's parameters carry the statistic, column, declared bounds,
rule and contribution bound (never how many values were clipped).

The data are read through a :class:`~privreg.analysis.frames.Frame`: in memory for
pandas, in Spark for a ``pyspark.sql.DataFrame`` (see :class:`Query`).
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from privreg.analysis.accuracy import (
    Accuracy,
    check_level,
    discrete_laplace_accuracy,
    laplace_accuracy,
    ratio_range,
)
from privreg.analysis.bounding import OneRowPerUser, bounding_key, check_bounds, check_impute, check_rule
from privreg.analysis.frames import Frame, Moments, Values, as_frame
from privreg.analysis.noise import (
    NoiseSpec,
    check_noise,
    discrete_gaussian_accuracy,
    gaussian_accuracy,
    gaussian_count,
    gaussian_sum,
    noise_spec,
)
from privreg.analysis.plan import Plan
from privreg.core import validation as v
from privreg.core.charging import Charger, check_charger
from privreg.core.errors import BudgetExceededError, PrivregTypeError, PrivregValueError
from privreg.core.events import Composed, PrivacyEvent
from privreg.core.mechanism import Mechanism
from privreg.core.randomness import RandomSource, resolve_random
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.laplace import LaplaceMechanism, as_global_l1
from privreg.mechanisms.noise_params import float_at_most
from privreg.mechanisms.quantile import ExponentialQuantile, rank_errors
from privreg.mechanisms.thresholding import LaplaceThresholding

__all__ = ["Query", "GroupBy", "Planned", "Result"]


# --- results ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Result:
    """A release: ``value`` (a number, or ``{key: number}`` for histograms and group-bys),
    ``interval`` (``(low, high)`` or ``{key: (low, high)}``; None for quantiles, whose
    bound is in ranks: see ``accuracy.half_width``) holding the true value with probability
    at least ``accuracy.level``, and the ``accuracy`` stated before the release (noise
    scale, mechanism). Counts are post-processed to non-negative integers."""

    statistic: str
    value: Any
    interval: Any
    accuracy: Accuracy

    @property
    def level(self) -> float:
        return self.accuracy.level

    @property
    def noise_scale(self) -> float:
        return self.accuracy.noise_scale

    @property
    def mechanism(self) -> str:
        return self.accuracy.mechanism

    def __str__(self) -> str:
        if isinstance(self.value, Mapping):
            body = ", ".join(f"{k}: {_fmt(x)} {_fmt_iv(self.interval[k])}" for k, x in self.value.items())
            return f"{self.statistic} = {{{body}}} ({self.level:.0%}; {self.mechanism})"
        iv = (
            f"rank error <= {self.accuracy.half_width:.4g}"
            if self.interval is None and self.accuracy.half_width is not None
            else _fmt_iv(self.interval)
        )
        return f"{self.statistic} = {_fmt(self.value)} {iv} ({self.level:.0%}; noise scale {self.noise_scale:.4g})"


def _fmt(x: Any) -> str:
    return str(x) if isinstance(x, int) else f"{float(x):.6g}"


def _fmt_iv(iv: Any) -> str:
    return "" if iv is None else f"[{_fmt(iv[0])}, {_fmt(iv[1])}]"


# --- charging with the query's description ---------------------------------------------------


@attrs.frozen
class _Described:
    """A charger that adds the analysis description to every charge's parameters."""

    charger: Charger
    analysis: Mapping[str, Any]

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
        stated: PrivacyEvent | None = None,
    ) -> None:
        self.charger.charge(
            event,
            mechanism=mechanism,
            parameters={**parameters, "analysis": dict(self.analysis)},
            label=label,
            randomness=randomness,
            **({} if stated is None else {"stated": stated}),
        )


# --- noise laws (privreg.analysis.accuracy) --------------------------------------------------


def _l1(sensitivity: float) -> Any:
    """A derived L1 sensitivity, as the Laplace mechanism takes it."""
    return as_global_l1(sensitivity)


def _split(epsilon: Any, parts: int) -> float:
    """``epsilon`` (validated as every mechanism does) shared equally by ``parts`` releases:
    the largest float ``e <= epsilon / parts`` whose ``parts``-fold sum, added up in
    floating point as the accountants do, is at most ``epsilon`` (the mechanisms charge
    at most the epsilon they are given, :func:`~privreg.mechanisms.noise_params.laplace_scale`)."""
    epsilon = v.check_epsilon("epsilon", epsilon)
    if parts <= 1:
        return epsilon
    each = float_at_most(Fraction(epsilon) / parts)

    def total(e: float) -> float:
        out = 0.0
        for _ in range(parts):
            out += e
        return out

    while each > 0 and total(each) > epsilon:
        each = math.nextafter(each, 0.0)
    if each <= 0:
        raise PrivregValueError(
            f"epsilon={epsilon!r} is too small to share among the {parts} parts of this statistic; "
            "pass a larger epsilon"
        )
    return each


# --- the noise of counts and sums: Laplace (pure DP) or Gaussian (zCDP) ------------------------

_CountMech = DiscreteLaplaceMechanism | DiscreteGaussianMechanism
_SumMech = LaplaceMechanism | GaussianMechanism


def _noise(noise: Any, epsilon: Any, delta: Any) -> Any:
    """What a statistic is built with: ``epsilon`` for Laplace noise (validated where it
    is split), a :class:`~privreg.analysis.noise.NoiseSpec` for the Gaussian."""
    return noise_spec(noise, epsilon, delta) if check_noise(noise) == "gaussian" else epsilon


def _laplace_only_delta(delta: Any) -> None:
    if delta is not None:
        raise PrivregValueError(
            f"delta applies only with noise='gaussian' for this statistic; got delta={delta!r} with Laplace noise "
            f"(pure DP). Leave delta out, or pass noise='gaussian'."
        )


def _spec(epsilon: Any) -> NoiseSpec:
    return epsilon if isinstance(epsilon, NoiseSpec) else NoiseSpec(kind="laplace", epsilon=epsilon)


def _count_mech(spec: NoiseSpec, parts: int, sensitivity: int, dimension: int = 1) -> _CountMech:
    """One of ``parts`` equal parts: discrete Laplace, or the discrete Gaussian."""
    if spec.kind == "gaussian":
        return gaussian_count(spec.part(parts), sensitivity, dimension)
    eps = spec.epsilon if parts == 1 else _split(spec.epsilon, parts)  # one part: the mechanism validates it
    return DiscreteLaplaceMechanism(epsilon=eps, sensitivity=sensitivity, dimension=dimension)


def _sum_mech(spec: NoiseSpec, parts: int, sensitivity: float, dimension: int = 1) -> _SumMech:
    """One of ``parts`` equal parts: Laplace on a grid, or the Gaussian on a grid."""
    if spec.kind == "gaussian":
        return gaussian_sum(spec.part(parts), sensitivity, dimension)
    eps = spec.epsilon if parts == 1 else _split(spec.epsilon, parts)
    return LaplaceMechanism(epsilon=eps, sensitivity=_l1(sensitivity), dimension=dimension)


def _count_acc(mech: _CountMech, level: float) -> tuple[int, Accuracy]:
    if isinstance(mech, DiscreteGaussianMechanism):
        return discrete_gaussian_accuracy(mech, level)
    return discrete_laplace_accuracy(mech, level)


def _sum_acc(mech: _SumMech, level: float, unit: str) -> tuple[float, Accuracy]:
    if isinstance(mech, GaussianMechanism):
        return gaussian_accuracy(mech, level, unit)
    return laplace_accuracy(mech, level, unit)


def _sensitivity(statistic: str, bounds: tuple[float, float], k: int, divisor: float, *, centred: bool) -> float:
    """The L1 sensitivity of a sum over ``bounds`` (``k max(|lower|, |upper|)``), or of a
    sum centred at their midpoint (``k (upper - lower) / 2``), refused when the statistic
    is built if its arithmetic leaves the float range: the midpoint ``(lower + upper) / 2``,
    the sensitivity, or the noise scale ``sensitivity / divisor`` (:func:`_divisor`: the
    part's epsilon, or ``sqrt(2 rho)`` for the Gaussian). Public inputs only, so
    the refusal tells nothing about the data, and nothing after it can overflow to inf."""
    lower, upper = bounds
    fix = "Declare narrower bounds, rescale the column (e.g. to other units), or pass a larger epsilon."
    if centred and not math.isfinite(lower + upper):
        raise PrivregValueError(
            f"bounds={list(bounds)!r}: their midpoint (lower + upper) / 2 overflows the float range, so "
            f"{statistic}'s centred sums cannot be computed; {fix}"
        )
    sens = k * ((upper - lower) / 2 if centred else max(abs(lower), abs(upper)))
    if not (math.isfinite(sens) and math.isfinite(sens / divisor)):
        raise PrivregValueError(
            f"bounds={list(bounds)!r} with max_rows_per_user={k}: {statistic}'s sensitivity or its noise "
            f"scale (sensitivity / {divisor:g}, the part's epsilon or sqrt(2 rho)) overflows the float range; {fix}"
        )
    return sens


def _finite(x: float) -> float:
    """``x`` clamped to the finite floats (post-processing of a release beyond 1.8e308)."""
    return max(-sys.float_info.max, min(sys.float_info.max, x))


def _divisor(spec: NoiseSpec, parts: int) -> float:
    """What a part's sensitivity is divided by to give its noise scale: its epsilon for
    Laplace, ``sqrt(2 rho)`` for the Gaussian (used only to refuse overflowing bounds)."""
    if spec.kind == "gaussian":
        return math.sqrt(2.0 * spec.rho / parts)
    return float(spec.epsilon) if parts == 1 else _split(spec.epsilon, parts)


# --- planned statistics ----------------------------------------------------------------------


class Planned(ABC):
    """A statistic planned on a :class:`Query`: :meth:`accuracy` before, :meth:`release`
    to charge and run it once."""

    statistic: str
    _query: Query
    _epsilon: float  # the epsilon the statistic was planned at (all its parts together)

    def _describe(self) -> dict[str, Any]:
        return {"statistic": self.statistic, **self._query.describe()}

    def accuracy(self, level: float = 0.95, *, rows: int | None = None) -> Accuracy:
        """The accuracy of the release at confidence ``level``, known before it runs (no
        data is read, nothing is charged). ``rows``: a public guess of the number of rows,
        used only to turn a mean's component half-widths into a half-width of the mean."""
        return self._accuracy(check_level(level), None if rows is None else v.check_count("rows", rows))

    def release(self, *, level: float = 0.95, label: str = "") -> Result:
        """Charge and release, with the interval at ``level``.

        Before anything reads the data, the session is asked whether it grants the whole
        statistic (all its parts); if not, :class:`BudgetExceededError` is raised, charging
        and releasing nothing. Every rule but the curator rule 'error' handles any value,
        so nothing before the release (the refusal included) depends on the data: only on
        the query, the declared bounds and the budget state. After the first charge
        nothing raises."""
        level = check_level(level)
        self._affordable(self._budget_parts())
        return self._release(level, label or self.statistic)

    @abstractmethod
    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        """The (name, mechanism) of every release the statistic makes, in order (public:
        built from the query's parameters, never from the data)."""

    @abstractmethod
    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        """The accuracy at a validated ``level``."""

    @abstractmethod
    def mechanisms(self) -> tuple[Mechanism, ...]:
        """The mechanisms a release charges, in order (their events are fixed before any
        data is read: a plan charges them as one block)."""

    @abstractmethod
    def _release(self, level: float, label: str) -> Result:
        """Charge, run and return the result at a validated ``level``."""

    def _charger(self, part: str, extra: Mapping[str, Any] | None = None) -> Charger:
        return _Described(self._query.session, {**self._describe(), "part": part, **(extra or {})})

    def _run(self, mech: Mechanism, value: Any, part: str, label: str, extra: Mapping[str, Any] | None = None) -> Any:
        charger = self._charger(part, extra)
        name = label if part == label else f"{label}: {part}"  # "count", not "count: count"
        return mech.release(value, charger=charger, rng=self._query.rng, label=name).output

    def _affordable(self, parts: Sequence[tuple[str, Mechanism]]) -> None:
        """Refuse, before anything is charged, a statistic whose parts the session cannot
        grant all together (their events composed in order), so that a budget too small
        for the whole statistic is not spent on its first parts. The message is a function
        of the statistic and the session's state only. A charger without ``can_afford``
        (an EventLog) grants everything."""
        session = self._query.session
        can_afford = getattr(session, "can_afford", None)
        if can_afford is None or not parts:
            return
        events = [mech.privacy_event() for _, mech in parts]
        event = events[0] if len(events) == 1 else Composed(events=tuple(events))
        if can_afford(event):
            return
        price = getattr(session, "price", None)
        reason = f" ({price(event).reason})" if price is not None else ""
        names = ", ".join(name for name, _ in parts)
        what = "this statistic" if len(parts) == 1 else f"all {len(parts)} parts of this statistic together"
        raise BudgetExceededError(
            f"{self.statistic}: the session cannot grant {what} ({names}; epsilon {self._epsilon!r} in all)"
            f"{reason}; nothing was released or charged. Pass a smaller epsilon, or use a session with more "
            f"budget left."
        )

    def _run_parts(self, parts: Sequence[tuple[str, Mechanism, Any]], label: str) -> list[Any]:
        """Release the ``parts`` (name, mechanism, exact value) in order, after checking
        every value and that the session grants them all: whatever can fail does so
        before the first charge."""
        for _, mech, value in parts:
            mech.validate_input(value)
        self._affordable([(name, mech) for name, mech, _ in parts])
        return [self._run(mech, value, name, label) for name, mech, value in parts]


class _Count(Planned):
    def __init__(self, query: Query, epsilon: Any) -> None:
        spec = _spec(epsilon)
        self._query, self.statistic, self._epsilon = query, "count", spec.epsilon
        self.mech = _count_mech(spec, 1, query.max_rows_per_user)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self.mech,)

    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        return [("count", self.mech)]

    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        return _count_acc(self.mech, level)[1]

    def _release(self, level: float, label: str) -> Result:
        t, acc = _count_acc(self.mech, level)
        z = int(self._run(self.mech, self._query.data.count(), "count", label))
        return Result(statistic=self.statistic, value=max(0, z), interval=(max(0, z - t), max(0, z + t)), accuracy=acc)


class _Column(Planned):
    """A statistic of one numeric column with declared bounds and rule."""

    def __init__(
        self, query: Query, statistic: str, column: str, bounds: Any, rule: str, impute: Any, epsilon: Any
    ) -> None:
        self._query, self.statistic = query, f"{statistic}({column})"
        # a Gaussian statistic arrives with its validated NoiseSpec
        self._epsilon = epsilon.epsilon if isinstance(epsilon, NoiseSpec) else v.check_epsilon("epsilon", epsilon)
        self.column = query.check_column(column)
        query.source.check_numeric(self.column)
        self.bounds = check_bounds("bounds", bounds, self.column)
        self.rule = check_rule(rule, curator=query.curator)
        self.impute = check_impute(impute, self.rule, self.bounds, self.column)
        self.spec = Values(column=self.column, bounds=self.bounds, rule=self.rule, impute=self.impute)
        self.lower, self.upper = self.bounds
        self.mid = (self.lower + self.upper) / 2  # inf when it overflows: centred statistics refuse it
        self.radius = (self.upper - self.lower) / 2

    def _describe(self) -> dict[str, Any]:
        out = {**super()._describe(), "column": self.column, "bounds": list(self.bounds), "rule": self.rule}
        return out if self.impute is None else {**out, "impute": self.impute}

    def moments(self, centre: float, squares: bool = False) -> Moments:
        """Count and exact sums of the bounded values minus ``centre`` (refused before any
        charge if the rule cannot bound the data)."""
        return self._query.data.moments(self.spec, centre=centre, squares=squares)


class _Sum(_Column):
    def __init__(self, query: Query, column: str, bounds: Any, rule: str, impute: Any, epsilon: Any) -> None:
        super().__init__(query, "sum", column, bounds, rule, impute, epsilon)
        spec = _spec(epsilon)
        k = query.max_rows_per_user
        sens = _sensitivity(self.statistic, self.bounds, k, _divisor(spec, 1), centred=False)
        self.mech = _sum_mech(spec, 1, sens)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self.mech,)

    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        return [("sum", self.mech)]

    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        return _sum_acc(self.mech, level, "data units")[1]

    def _release(self, level: float, label: str) -> Result:
        half, acc = _sum_acc(self.mech, level, "data units")
        z = _finite(float(self._run(self.mech, self.moments(0.0).total, "sum", label)))
        return Result(statistic=self.statistic, value=z, interval=(z - half, z + half), accuracy=acc)


class _Mean(_Column):
    """Mean = mid + (noisy centred sum) / (noisy count), each at half of epsilon; the
    interval is the range of that ratio over both components' intervals at level
    ``1 - (1 - level) / 2`` each (a union bound), clipped to the bounds."""

    parts = 2

    def __init__(self, query: Query, column: str, bounds: Any, rule: str, impute: Any, epsilon: Any) -> None:
        super().__init__(query, "mean", column, bounds, rule, impute, epsilon)
        k, spec = query.max_rows_per_user, _spec(epsilon)
        sens = _sensitivity(self.statistic, self.bounds, k, _divisor(spec, self.parts), centred=True)
        self.count = _count_mech(spec, self.parts, k)
        self.sum = _sum_mech(spec, self.parts, sens)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self.count, self.sum)

    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        return [("count", self.count), ("centred_sum", self.sum)]

    def _parts_accuracy(self, level: float) -> tuple[int, float, dict[str, Accuracy]]:
        each = 1 - (1 - level) / self.parts
        t, a_count = _count_acc(self.count, each)
        half, a_sum = _sum_acc(self.sum, each, "data units (centred sum)")
        return t, half, {"count": a_count, "centred_sum": a_sum}

    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        t, half, parts = self._parts_accuracy(level)
        width = None if rows is None or rows <= t else (half + self.radius * t) / (rows - t)
        return Accuracy(
            level=level,
            half_width=width,
            unit="data units",
            noise_scale=parts["centred_sum"].noise_scale,
            mechanism=f"{self.count.name} + {self.sum.name}",
            exact=False,
            note="mean = mid + centred sum / count; interval from both parts' intervals (union bound)"
            + ("" if rows is None else f"; half-width for {rows} rows (worst case over the parts)"),
            components=parts,
        )

    def _release(self, level: float, label: str) -> Result:
        t, half, _ = self._parts_accuracy(level)
        acc = self.accuracy(level)
        m = self.moments(self.mid)
        raw = self._run_parts([("count", self.count, m.count), ("centred_sum", self.sum, m.total)], label)
        # after the charges: only arithmetic that cannot raise (floats overflow to inf)
        n, s = int(raw[0]), _finite(float(raw[1]))
        value = self.mid if n <= 0 else min(self.upper, max(self.lower, self.mid + s / n))
        rng_ = ratio_range((s - half, s + half), (n - t, n + t))
        iv = (self.lower, self.upper) if rng_ is None else self._clip(self.mid + rng_[0], self.mid + rng_[1])
        return Result(statistic=self.statistic, value=value, interval=iv, accuracy=acc)

    def _clip(self, lo: float, hi: float) -> tuple[float, float]:
        return max(self.lower, min(self.upper, lo)), max(self.lower, min(self.upper, hi))


def _g_extreme(a: float, b2: float, n: tuple[float, float], pick: Any) -> float:
    """``pick`` (min or max) of ``a / N - b2 / N^2`` over ``N`` in ``n`` (``n[0] > 0``)."""
    cands = [n[0], n[1]]
    if a > 0 and n[0] < 2 * b2 / a < n[1]:
        cands.append(2 * b2 / a)
    return float(pick(a / m - b2 / (m * m) for m in cands))


class _Variance(_Column):
    """Population variance from three parts at a third of epsilon each: the count, the
    centred sum (sensitivity ``k r``) and the centred sum of squares (``k r^2``), ``r =
    (upper - lower) / 2``; the interval is the range of ``S2 / N - (S1 / N)^2`` over the
    parts' intervals at ``1 - (1 - level) / 3`` each, clipped to ``[0, r^2]``."""

    parts = 3

    def __init__(self, query: Query, column: str, bounds: Any, rule: str, impute: Any, epsilon: float) -> None:
        super().__init__(query, "variance", column, bounds, rule, impute, epsilon)
        k, eps = query.max_rows_per_user, _split(epsilon, self.parts)
        _sensitivity(self.statistic, self.bounds, k, eps, centred=True)
        # every square (v - mid)^2 <= r^2 and the sensitivity k r^2 must be finite floats
        limit = math.sqrt(sys.float_info.max / (4 * k))
        if not self.radius <= limit:
            raise PrivregValueError(
                f"bounds for a variance must satisfy (upper - lower) / 2 <= {limit:.6g} (sqrt(float max / "
                f"(4 max_rows_per_user)), so that squares stay finite); got bounds={list(self.bounds)!r}. "
                f"Declare narrower bounds, or rescale the column (e.g. to other units)."
            )
        self.count = DiscreteLaplaceMechanism(epsilon=eps, sensitivity=k)
        self.sum = LaplaceMechanism(epsilon=eps, sensitivity=_l1(k * self.radius))
        self.squares = LaplaceMechanism(epsilon=eps, sensitivity=_l1(k * self.radius * self.radius))

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self.count, self.sum, self.squares)

    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        return [("count", self.count), ("centred_sum", self.sum), ("centred_sum_of_squares", self.squares)]

    def _parts_accuracy(self, level: float) -> tuple[int, float, float, dict[str, Accuracy]]:
        each = 1 - (1 - level) / self.parts
        t, a_n = discrete_laplace_accuracy(self.count, each)
        h1, a_1 = laplace_accuracy(self.sum, each, "data units (centred sum)")
        h2, a_2 = laplace_accuracy(self.squares, each, "squared data units (centred sum of squares)")
        return t, h1, h2, {"count": a_n, "centred_sum": a_1, "centred_sum_of_squares": a_2}

    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        *_, parts = self._parts_accuracy(level)
        return Accuracy(
            level=level,
            half_width=None,
            unit="squared data units",
            noise_scale=parts["centred_sum_of_squares"].noise_scale,
            mechanism=f"{self.count.name} + {self.sum.name} x2",
            exact=False,
            note="variance = S2/N - (S1/N)^2; the release's interval is its range over the parts' intervals "
            "(union bound)",
            components=parts,
        )

    def _release(self, level: float, label: str) -> Result:
        t, h1, h2, _ = self._parts_accuracy(level)
        acc = self.accuracy(level)
        m = self.moments(self.mid, squares=True)
        raw = self._run_parts(
            [
                ("count", self.count, m.count),
                ("centred_sum", self.sum, m.total),
                ("centred_sum_of_squares", self.squares, m.squares),
            ],
            label,
        )
        # after the charges: only arithmetic that cannot raise (x * x overflows to inf, x ** 2 raises)
        n, s1, s2 = int(raw[0]), _finite(float(raw[1])), _finite(float(raw[2]))
        top = self.radius * self.radius
        value = 0.0 if n <= 0 else min(top, max(0.0, s2 / n - (s1 / n) * (s1 / n)))
        box_n = (n - t, n + t)
        if box_n[0] <= 0:
            iv = (0.0, top)
        else:
            lo1, hi1 = s1 - h1, s1 + h1
            big = max(abs(lo1), abs(hi1)) * max(abs(lo1), abs(hi1))
            small = 0.0 if lo1 <= 0 <= hi1 else min(abs(lo1), abs(hi1)) * min(abs(lo1), abs(hi1))
            lo = _g_extreme(s2 - h2, big, box_n, min)
            hi = _g_extreme(s2 + h2, small, box_n, max)
            iv = (min(top, max(0.0, lo)), min(top, max(0.0, hi)))
        return Result(statistic=self.statistic, value=value, interval=iv, accuracy=acc)


class _Quantile(_Column):
    def __init__(
        self, query: Query, column: str, q: Any, bounds: Any, rule: str, impute: Any, epsilon: float, grid: Any
    ) -> None:
        q = v.check_probability("q", q)
        super().__init__(query, f"quantile[{q:g}]", column, bounds, rule, impute, epsilon)
        self.q = q
        if isinstance(grid, bool) or not isinstance(grid, int):
            raise PrivregTypeError(
                f"grid must be the number of equally spaced candidate points from lower to upper (an int); got "
                f"{grid!r}. For integer data use grid=upper - lower + 1 (e.g. grid=74 for ages 17..90)."
            )
        # one person's k rows move every rank by up to k: the utility's sensitivity is k
        self.mech = ExponentialQuantile(
            epsilon=epsilon,
            quantile=q,
            lower=self.lower,
            upper=self.upper,
            points=grid,
            sensitivity=query.max_rows_per_user,
        )

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "quantile": self.q}

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self.mech,)

    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        return [("quantile", self.mech)]

    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        bound = self.mech.rank_error_bound(1 - level)
        return Accuracy(
            level=level,
            half_width=bound,
            unit="ranks",
            noise_scale=2 * self.mech.sensitivity / self.mech.epsilon,
            mechanism=self.mech.name,
            exact=False,
            note="rank error beyond the best grid point's, 2 k ln(points / (1 - level)) / epsilon "
            "(McSherry-Talwar 2007, Theorem 8; k = max_rows_per_user); 0 for the best point when the grid "
            "holds a true quantile",
        )

    def rank_error(self, released: float) -> float:
        """The rank error of ``released`` (a point of the grid, as every release is) on
        this query's bounded data, beyond the best grid point's (what the accuracy bound
        is about). Reads the data: for tests and for the data holder, never for release."""
        grid = self.mech.grid
        at = np.flatnonzero(grid == released)
        if at.size == 0:
            raise PrivregValueError(
                f"released must be a point of the quantile grid (as every release is); got {released!r}"
            )
        errs = rank_errors(self._query.data.ranks(self.spec, grid), self.q)
        return float(errs[int(at[0])] - min(errs))

    def _release(self, level: float, label: str) -> Result:
        acc = self._accuracy(level, None)
        ranks = self._query.data.ranks(self.spec, self.mech.grid)
        z = float(self._run(self.mech, ranks, "quantile", label))
        return Result(statistic=self.statistic, value=z, interval=None, accuracy=acc)


# --- histograms and group-bys ----------------------------------------------------------------


def _check_keys(name: str, keys: Any) -> tuple[Hashable, ...]:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence) or not keys:
        raise PrivregTypeError(
            f"{name} must be a non-empty list of public values; got {keys!r}. List the categories from the "
            f"schema or a codebook, never from the data."
        )
    out = tuple(keys)
    if len(set(out)) != len(out):
        raise PrivregValueError(f"{name} lists a value more than once; give each category once")
    return _canonical(out)


def _canonical(keys: Sequence[Hashable]) -> tuple[Hashable, ...]:
    """Keys in a canonical order (by type, then value; by repr where values do not
    compare), so a result never follows the caller's or the data's order."""
    try:
        return tuple(sorted(keys, key=lambda k: (type(k).__name__, k)))
    except TypeError:
        return tuple(sorted(keys, key=repr))


class _Grouped(Planned):
    """Count, sum or mean per key of a column. Keys are public (``keys``) or found by
    partition selection: Laplace thresholding (Korolova et al. 2009; Gopi et al. 2020) on
    the number of distinct persons per key, with a share ``1 / (parts + 1)`` of epsilon
    and all of ``delta``, after which the aggregate runs on the released keys only (fresh
    noise, so its intervals are not biased by the selection)."""

    def __init__(
        self,
        query: Query,
        by: str,
        keys: tuple[Hashable, ...] | None,
        what: str,
        epsilon: Any,
        delta: float | None,
        column: str | None = None,
        bounds: Any = None,
        rule: str = "clip",
        impute: Any = None,
    ) -> None:
        self._query, self.by, self.keys, self.what = query, query.check_column(by), keys, what
        query.source.check_key_column(self.by)
        self.statistic = f"{what}({column}) by {by}" if column else f"count by {by}"
        self.parts = {"count": 1, "sum": 1, "mean": 2}[what]
        self.noise = _spec(epsilon)
        eps = self._epsilon = self.noise.epsilon
        self.selector: LaplaceThresholding | None = None
        if keys is None and self.noise.kind == "gaussian":
            raise PrivregValueError(
                f"noise='gaussian' needs public keys for {by!r}; got keys=None. List keys=[...] (from a schema, or "
                f"found by an earlier release with Laplace noise), so that the Gaussian's events are fixed."
            )
        if keys is None:
            if delta is None:
                raise PrivregValueError(
                    f"delta is required to find the keys of {by!r} (partition selection is (epsilon, delta)-DP); "
                    f"got None. Pass delta=1e-6 (well below 1 / number of persons), or list keys=[...] if public."
                )
            eps = _split(epsilon, self.parts + 1)
            self.selector = LaplaceThresholding(
                epsilon=eps, delta=delta, max_partitions=query.max_rows_per_user, max_contribution=1.0
            )
        elif delta is not None and self.noise.kind == "laplace":
            raise PrivregValueError(
                f"delta applies only when keys are found by partition selection (keys=None); got delta={delta!r} "
                f"with public keys. Leave delta out."
            )
        self.eps_each = _split(eps, self.parts) if self.selector is None else eps
        self.column, self.bounds, self.rule = column, None, check_rule(rule, curator=query.curator)
        self.spec: Values | None = None
        self.impute: float | None = None
        if column is not None:
            self.column = query.check_column(column)
            query.source.check_numeric(self.column)
            self.bounds = check_bounds("bounds", bounds, self.column)
            self.impute = check_impute(impute, self.rule, self.bounds, self.column)
            self.spec = Values(column=self.column, bounds=self.bounds, rule=self.rule, impute=self.impute)
            _sensitivity(self.statistic, self.bounds, query.max_rows_per_user, self.eps_each, centred=what == "mean")
        # build the aggregate's mechanisms once (for the declared keys) so bad parameters fail now
        self._mechanisms(len(keys) if keys is not None else 1)

    def _describe(self) -> dict[str, Any]:
        out = {**super()._describe(), "by": self.by, "keys": "public" if self.keys is not None else "selected"}
        if self.column is not None and self.bounds is not None:
            out.update(column=self.column, bounds=list(self.bounds), rule=self.rule)
            if self.impute is not None:
                out.update(impute=self.impute)
        return out

    def _mechanisms(self, size: int) -> tuple[_CountMech | None, _SumMech | None]:
        """(count mechanism, sum mechanism) for ``size`` keys; None where not used. A
        person's ``k`` rows change the count vector by at most ``k`` in L1 and so in L2."""
        k = self._query.max_rows_per_user
        count: _CountMech | None = None
        summ: _SumMech | None = None
        gaussian = self.noise.kind == "gaussian"
        if self.what in ("count", "mean"):
            count = (
                gaussian_count(self.noise.part(self.parts), k, size)
                if gaussian
                else DiscreteLaplaceMechanism(epsilon=self.eps_each, sensitivity=k, dimension=size)
            )
        if self.what in ("sum", "mean") and self.bounds is not None:
            lo, hi = self.bounds
            sens = k * max(abs(lo), abs(hi)) if self.what == "sum" else k * (hi - lo) / 2
            summ = (
                gaussian_sum(self.noise.part(self.parts), sens, size)
                if gaussian
                else LaplaceMechanism(epsilon=self.eps_each, sensitivity=_l1(sens), dimension=size)
            )
        return count, summ

    def mechanisms(self) -> tuple[Mechanism, ...]:
        if self.keys is None:
            raise PrivregValueError(
                f"{self.statistic}: its keys are found by partition selection, so the events of its aggregates "
                f"depend on how many are released and cannot be fixed in advance; release the keys first "
                f"(groupby(..., keys=None) on its own), then list them: groupby({self.by!r}, keys=[...])"
            )
        return tuple(m for _, m in self._parts(*self._mechanisms(len(self.keys))))

    def _accuracy(self, level: float, rows: int | None) -> Accuracy:
        count, summ = self._mechanisms(len(self.keys) if self.keys is not None else 1)
        each = 1 - (1 - level) / self.parts
        comps: dict[str, Accuracy] = {}
        if count is not None:
            comps["count"] = _count_acc(count, each)[1]
        if summ is not None:
            comps["sum"] = _sum_acc(summ, each, "data units")[1]
        main = comps["sum" if self.what == "sum" else "count"]
        note = "per key (marginal, not simultaneous over keys)"
        if self.selector is not None:
            note += f"; keys found by Laplace thresholding (a key needs about {self.selector.threshold:.4g} persons)"
        if self.what == "mean":
            return attrs.evolve(
                main, level=level, half_width=None, unit="data units", note=note, components=comps, exact=False
            )
        if self.parts == 1:
            return attrs.evolve(main, note=note, components=comps)
        return attrs.evolve(main, level=level, note=note, components=comps)

    def _select(self, frame: Frame, label: str) -> tuple[Hashable, ...]:
        if self.selector is None:
            assert self.keys is not None  # noqa: S101 -- the constructor sets one of the two
            return self.keys
        persons = frame.key_persons(self.by, self.spec)
        released = self._run(self.selector, {k: float(c) for k, c in persons.items()}, "selection", label)
        return _canonical(tuple(released))

    def _parts(self, count: Mechanism | None, summ: Mechanism | None) -> list[tuple[str, Mechanism]]:
        named = [("count", count), ("sum", summ)]
        return [(name, mech) for name, mech in named if mech is not None]

    def _budget_parts(self) -> list[tuple[str, Mechanism]]:
        # with keys found by selection, the aggregates' events do not depend on how many
        # keys are selected (pure DP at their epsilon): one key stands for them all
        if self.selector is None:
            assert self.keys is not None  # noqa: S101 -- the constructor sets one of the two
            return self._parts(*self._mechanisms(len(self.keys)))
        return [("selection", self.selector), *self._parts(*self._mechanisms(1))]

    def _release(self, level: float, label: str) -> Result:
        acc = self._accuracy(level, None)
        each = 1 - (1 - level) / self.parts
        frame = self._query.data
        keys = self._select(frame, label)
        count, summ = self._mechanisms(max(1, len(keys)))
        if not keys:
            return Result(statistic=self.statistic, value={}, interval={}, accuracy=acc)
        lo, hi = self.bounds if self.bounds is not None else (0.0, 0.0)
        mid = (lo + hi) / 2 if self.what == "mean" else 0.0
        agg = frame.key_aggregates(self.by, keys, self.spec, centre=mid)
        t = _count_acc(count, each)[0] if count is not None else 0
        half = _sum_acc(summ, each, "data units")[0] if summ is not None else 0.0
        values = {"count": agg.counts, "sum": agg.totals}
        raw = dict(
            zip(
                [name for name, _ in self._parts(count, summ)],
                self._run_parts([(name, mech, values[name]) for name, mech in self._parts(count, summ)], label),
                strict=True,
            )
        )
        # after the charges: only arithmetic that cannot raise
        out_v: dict[Hashable, Any] = {}
        out_i: dict[Hashable, Any] = {}
        counts = None if "count" not in raw else np.asarray(raw["count"]).reshape(-1)
        if "sum" in raw:
            noisy = np.asarray(raw["sum"], dtype=np.float64).reshape(-1)
            for i, key in enumerate(keys):
                if self.what == "sum":
                    z = _finite(float(noisy[i]))  # Python floats: inf - inf is nan, never a warning
                    out_v[key], out_i[key] = z, (z - half, z + half)
                    continue
                assert counts is not None  # noqa: S101 -- a mean has both parts
                n, s = int(counts[i]), _finite(float(noisy[i]))
                out_v[key] = mid if n <= 0 else min(hi, max(lo, mid + s / n))
                r = ratio_range((s - half, s + half), (n - t, n + t))
                out_i[key] = (lo, hi) if r is None else (max(lo, min(hi, mid + r[0])), max(lo, min(hi, mid + r[1])))
        elif counts is not None:
            for i, key in enumerate(keys):
                z = int(counts[i])
                out_v[key], out_i[key] = max(0, z), (max(0, z - t), max(0, z + t))
        return Result(statistic=self.statistic, value=out_v, interval=out_i, accuracy=acc)


class GroupBy:
    """Aggregates per key of column ``by``: :meth:`count`, :meth:`sum`, :meth:`mean`."""

    def __init__(self, query: Query, by: str, keys: Sequence[Hashable] | None) -> None:
        self._query, self.by = query, query.check_column(by)
        query.source.check_key_column(self.by)
        self.keys = None if keys is None else _check_keys("keys", keys)

    def count(self, *, epsilon: float, delta: float | None = None, noise: str = "laplace") -> Planned:
        """Rows per key (L1 and L2 sensitivity ``k``: a person's ``k`` rows). ``noise``:
        see :meth:`Query.count` (the Gaussian needs public keys; ``delta`` is then its own)."""
        return _Grouped(self._query, self.by, self.keys, "count", _noise(noise, epsilon, delta), delta)

    def sum(
        self,
        column: str,
        *,
        bounds: Any,
        epsilon: float,
        delta: float | None = None,
        rule: str = "clip",
        impute: float | None = None,
        noise: str = "laplace",
    ) -> Planned:
        """Sum of ``column`` per key (L1 and L2 sensitivity ``k max(|lower|, |upper|)``);
        ``rule`` and ``impute`` as in :meth:`Query.sum`, ``noise`` as in :meth:`Query.count`."""
        spec = _noise(noise, epsilon, delta)
        return _Grouped(self._query, self.by, self.keys, "sum", spec, delta, column, bounds, rule, impute)

    def mean(
        self,
        column: str,
        *,
        bounds: Any,
        epsilon: float,
        delta: float | None = None,
        rule: str = "clip",
        impute: float | None = None,
        noise: str = "laplace",
    ) -> Planned:
        """Mean of ``column`` per key: count and centred sum per key at half the budget each."""
        spec = _noise(noise, epsilon, delta)
        return _Grouped(self._query, self.by, self.keys, "mean", spec, delta, column, bounds, rule, impute)


# --- the query -------------------------------------------------------------------------------


class Query:
    """Differentially private statistics of a pandas or Spark ``frame``.

    ``privacy_unit``: the column identifying a person (their rows are bounded together;
    rows whose id is missing belong to no one and are left out, on every backend), or
    ``ONE_ROW_PER_USER``. ``max_rows_per_user`` (``k``): each person's rows beyond
    ``k`` are left out, the kept ones chosen uniformly at random (from a 256-bit key drawn
    from ``rng`` at the first release; 1 with ``ONE_ROW_PER_USER``, which needs no
    bounding). ``session``: the charger of every release (a
    :class:`~privreg.budget.session.BudgetSession`, or an
    :class:`~privreg.core.charging.EventLog` for dry runs). ``rng``: the random source of
    the bounding and the noise (the OS CSPRNG by default).

    Guarantee: each release is differentially private for neighbouring frames that add or
    remove one person with all their rows, at the epsilon (and delta) it is given; the
    session composes them. Methods return planned statistics (:class:`Planned`).

    **Spark.** ``frame`` may be a ``pyspark.sql.DataFrame`` (pyspark is imported only
    then). Spark computes the contribution bounding and every exact aggregate: row counts,
    exact sums of the clipped, centred values and of their squares, quantile-grid rank
    counts, per-key counts and sums, distinct persons per candidate key, and whether the
    rule refuses the data (:mod:`privreg.analysis.spark_frame`). Only those aggregates are
    collected; the driver adds the noise, draws the partition selection and forms the
    intervals exactly as for pandas. With the same ``rng`` and rows (and bounding that
    drops nothing), a Spark frame gives the same releases as its pandas copy. The frame
    must be deterministic (each release re-reads it) and quantiles run numpy on the
    executors. A missing id in the privacy-unit column is found at the first release,
    before any charge (at construction for pandas). Running time, and the number and
    size of Spark jobs, depend on the data (rows, users, keys, value magnitudes): run
    releases where their timing is not observable.

    **Nothing before a release depends on the data.** A statistic's parameters (bounds,
    rule, ``impute``, epsilon, arithmetic that would overflow) are checked when it is
    built; at release the session is asked for the whole statistic before the data are
    read; values outside the bounds and missing values are handled by the declared rule
    (:meth:`sum`), which never refuses. So every error, refusal and estimate an analyst
    sees before or instead of a release is a function of the query, the declared bounds
    and sizes and the budget state. ``curator=True`` is the data holder's own mode: it
    also accepts ``rule='error'``, which refuses a statistic whose values are missing or
    outside the bounds; that refusal depends on the data, so a curator query is private
    against no one who sees its errors (its ledger entries say ``curator``).
    """

    def __init__(
        self,
        frame: Any,
        *,
        privacy_unit: Hashable | OneRowPerUser | None = None,
        max_rows_per_user: int = 1,
        session: Any = None,
        rng: RandomSource | None = None,
        curator: bool = False,
    ) -> None:
        if privacy_unit is None:
            raise PrivregValueError(
                "privacy_unit is required; got None. Pass privacy_unit='user_id' (the column identifying a "
                "person, so that all their rows are bounded together) or privacy_unit=ONE_ROW_PER_USER if "
                "every row is a different person."
            )
        self.privacy_unit = privacy_unit
        self.max_rows_per_user = v.check_count("max_rows_per_user", max_rows_per_user)
        if isinstance(privacy_unit, OneRowPerUser) and self.max_rows_per_user != 1:
            raise PrivregValueError(
                f"max_rows_per_user must be 1 with privacy_unit=ONE_ROW_PER_USER; got {max_rows_per_user!r}. "
                f"Name the column identifying a person to allow several rows each."
            )
        if session is None:
            raise PrivregValueError(
                "session is required; got None. Pass session=BudgetSession(budget=PrivacyBudget(epsilon=1, "
                "delta=1e-6)) (or an EventLog for a dry run): every release is charged to it."
            )
        self.session = check_charger(session)
        self.rng = resolve_random(rng)
        if not isinstance(curator, bool):
            raise PrivregTypeError(
                f"curator must be True or False; got {curator!r}. Leave it out (False) unless you hold the data "
                f"and want its data-dependent checks (rule='error')."
            )
        self.curator = curator
        # validates the frame's type and the unit column (schema only)
        self.source: Frame = as_frame(frame, privacy_unit)
        self.frame = self.source.native
        self._bounded: Frame | None = None

    def describe(self) -> dict[str, Any]:
        """The public description recorded with every charge."""
        unit = "one_row_per_user" if isinstance(self.privacy_unit, OneRowPerUser) else str(self.privacy_unit)
        out: dict[str, Any] = {"privacy_unit": unit, "max_rows_per_user": self.max_rows_per_user}
        return {**out, "curator": True} if self.curator else out

    @property
    def data(self) -> Frame:
        """The frame with at most ``max_rows_per_user`` rows per person (drawn once, at
        the first release)."""
        if self._bounded is None:
            if isinstance(self.privacy_unit, OneRowPerUser):
                self._bounded = self.source
            else:
                self._bounded = self.source.bound(self.max_rows_per_user, bounding_key(self.rng))
        return self._bounded

    @property
    def bounded(self) -> Any:
        """:attr:`data` as a DataFrame of the kind given (pandas or Spark)."""
        return self.data.native

    def check_column(self, column: Any) -> str:
        return self.source.check_column(column)

    def count(self, *, epsilon: float, delta: float | None = None, noise: str = "laplace") -> Planned:
        """Number of rows (after contribution bounding): discrete Laplace, sensitivity ``k``.
        ``noise="gaussian"`` with ``delta``: the exact discrete Gaussian at the largest
        zCDP rho that implies (epsilon, delta) (:mod:`privreg.analysis.noise`)."""
        if noise == "laplace":
            _laplace_only_delta(delta)
        return _Count(self, _noise(noise, epsilon, delta))

    def sum(
        self,
        column: str,
        *,
        bounds: Any = None,
        epsilon: float,
        rule: str = "clip",
        impute: float | None = None,
        delta: float | None = None,
        noise: str = "laplace",
    ) -> Planned:
        """Sum of ``column`` within ``bounds``: Laplace (or with ``noise="gaussian"`` the
        Gaussian, see :meth:`count`), sensitivity ``k max(|lower|, |upper|)``.

        ``rule`` (:data:`~privreg.analysis.bounding.RULES`): values outside the bounds
        (+-inf too) are clipped to them ('clip'), their rows left out ('drop') or replaced
        by ``impute`` ('impute'). Missing values (NaN, null) take ``impute`` when it is
        declared (a value inside the bounds) and leave their rows out otherwise, under
        every rule. No rule refuses a statistic because of the data, except 'error' on a
        curator query. The same ``rule`` and ``impute`` apply to every numeric statistic."""
        if noise == "laplace":
            _laplace_only_delta(delta)
        return _Sum(self, column, bounds, rule, impute, _noise(noise, epsilon, delta))

    def mean(
        self,
        column: str,
        *,
        bounds: Any = None,
        epsilon: float,
        rule: str = "clip",
        impute: float | None = None,
        delta: float | None = None,
        noise: str = "laplace",
    ) -> Planned:
        """Mean of ``column`` within ``bounds`` (count and centred sum, half the budget
        each: epsilon / 2, or rho / 2 with ``noise="gaussian"``, see :meth:`count`)."""
        if noise == "laplace":
            _laplace_only_delta(delta)
        return _Mean(self, column, bounds, rule, impute, _noise(noise, epsilon, delta))

    def variance(
        self, column: str, *, bounds: Any = None, epsilon: float, rule: str = "clip", impute: float | None = None
    ) -> Planned:
        """Population variance of ``column`` within ``bounds`` (three parts, epsilon / 3 each)."""
        return _Variance(self, column, bounds, rule, impute, epsilon)

    def quantile(
        self,
        column: str,
        q: float,
        *,
        bounds: Any = None,
        epsilon: float,
        grid: int = 1025,
        rule: str = "clip",
        impute: float | None = None,
    ) -> Planned:
        """The ``q``-quantile of ``column``: the exponential mechanism over ``grid`` equally
        spaced points of ``bounds`` (pure DP; ``exponential-quantile``), its rank utility at
        sensitivity ``k`` (a person's ``k`` rows move every rank by up to ``k``)."""
        return _Quantile(self, column, q, bounds, rule, impute, epsilon, grid)

    def median(
        self,
        column: str,
        *,
        bounds: Any = None,
        epsilon: float,
        grid: int = 1025,
        rule: str = "clip",
        impute: float | None = None,
    ) -> Planned:
        """:meth:`quantile` at ``q = 0.5``."""
        return self.quantile(column, 0.5, bounds=bounds, epsilon=epsilon, grid=grid, rule=rule, impute=impute)

    def histogram(
        self,
        column: str,
        *,
        categories: Sequence[Hashable],
        epsilon: float,
        delta: float | None = None,
        noise: str = "laplace",
    ) -> Planned:
        """Rows per declared category of ``column`` (others are not counted): discrete
        Laplace on every category, L1 sensitivity ``k`` (or the discrete Gaussian, L2
        sensitivity ``k``, with ``noise="gaussian"``, see :meth:`count`)."""
        if noise == "laplace":
            _laplace_only_delta(delta)
        keys = _check_keys("categories", categories)
        return _Grouped(self, column, keys, "count", _noise(noise, epsilon, delta), delta)

    def groupby(self, column: str, *, keys: Sequence[Hashable] | None = None) -> GroupBy:
        """Aggregates per key of ``column``; ``keys=None`` finds them by partition selection."""
        return GroupBy(self, column, keys)

    def plan(self, *, epsilon: float, delta: float | None = None, noise: str = "laplace") -> Plan:
        """A plan of several statistics sharing ``epsilon`` (:class:`~privreg.analysis.plan.Plan`):
        cost and accuracy before any release, then one charge for all of them."""
        return Plan(self, epsilon=epsilon, delta=delta, noise=noise)
