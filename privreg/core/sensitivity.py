"""Sensitivity: how much one individual can move a query's answer.

Three kinds, one interface (:class:`Sensitivity`):

* :class:`GlobalSensitivity` -- a declared worst case over all neighbouring datasets; the
  only kind that can calibrate plain Laplace/Gaussian noise.
* :class:`LocalSensitivity` -- the worst case over neighbours of *this* dataset. It depends
  on the data, so noise scaled to it is NOT differentially private (Nissim-Raskhodnikova-
  Smith 2007, Section 1.2); mechanisms refuse it. It feeds smooth sensitivity.
* :class:`SmoothSensitivity` -- a beta-smooth upper bound on local sensitivity,
  ``S*(x) = max_t exp(-t beta) LS^(t)(x)`` (NRS 2007, Definition 2.2), usable with noise
  distributions admissible for beta (e.g. the Gaussian of Okada et al. 2015, Theorem 2).
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "Norm",
    "SensitivityKind",
    "Sensitivity",
    "GlobalSensitivity",
    "LocalSensitivity",
    "SmoothSensitivity",
    "require_sensitivity",
]


class Norm(str, enum.Enum):
    """The norm in which a vector query's change is measured."""

    L0 = "l0"  # number of coordinates that change (partition selection)
    L1 = "l1"
    L2 = "l2"
    LINF = "linf"


class SensitivityKind(str, enum.Enum):
    GLOBAL = "global"
    LOCAL = "local"
    SMOOTH = "smooth"


def _norm(x: Any) -> Norm:
    try:
        return Norm(x)
    except ValueError:
        raise PrivregValueError(f"norm must be one of {[n.value for n in Norm]}; got {x!r}") from None


class Sensitivity(ABC):
    """An upper bound on how far one individual can move a query, in ``norm``."""

    kind: ClassVar[SensitivityKind]
    norm: Norm

    @abstractmethod
    def bound(self, data: Any = None) -> float:
        """The sensitivity at ``data`` (ignored by data-independent kinds): finite, >= 0."""

    @property
    def data_dependent(self) -> bool:
        return self.kind is not SensitivityKind.GLOBAL


# Named converters throughout: mypy's attrs plugin types __init__ from a named function's
# parameter, but not from a lambda or from a call such as _callable("function").
def _value(x: object) -> float:
    return v.check_sensitivity("sensitivity", x)


@attrs.frozen(kw_only=True)
class GlobalSensitivity(Sensitivity):
    """A declared global sensitivity: for all neighbours x ~ x', ||f(x) - f(x')|| <= value."""

    kind: ClassVar[SensitivityKind] = SensitivityKind.GLOBAL
    value: float = attrs.field(converter=_value)
    norm: Norm = attrs.field(default=Norm.L1, converter=_norm)

    def bound(self, data: Any = None) -> float:
        return self.value


def _callable(name: str) -> Callable[[object], Callable[..., Any]]:
    def convert(f: object) -> Callable[..., Any]:
        if not callable(f):
            raise PrivregTypeError(f"{name} must be callable; got {f!r}")
        return f

    return convert


def _function(f: object) -> Callable[[Any], float]:
    return _callable("function")(f)


@attrs.frozen(kw_only=True)
class LocalSensitivity(Sensitivity):
    """``function(data)`` = max over neighbours x' of data of ||f(data) - f(x')||.

    Data-dependent: never calibrate noise to it directly (it leaks ``data``).
    """

    kind: ClassVar[SensitivityKind] = SensitivityKind.LOCAL
    function: Callable[[Any], float] = attrs.field(converter=_function)
    norm: Norm = attrs.field(default=Norm.L1, converter=_norm)

    def bound(self, data: Any = None) -> float:
        if data is None:
            raise PrivregValueError("LocalSensitivity.bound needs data: pass bound(data)")
        return v.check_sensitivity("local sensitivity", self.function(data), allow_zero=True)


def _local_at_distance(f: object) -> Callable[[Any, int], float]:
    return _callable("local_at_distance")(f)


def _beta(x: object) -> float:
    return v.check_epsilon("beta", x)


def _max_distance(x: object) -> int:
    return v.check_int("max_distance", x, minimum=0)


def _global_bound(x: object) -> float | None:
    return None if x is None else v.check_sensitivity("global_bound", x)


@attrs.frozen(kw_only=True)
class SmoothSensitivity(Sensitivity):
    """The beta-smooth upper bound ``S*(x) = max_{t>=0} exp(-t beta) LS^(t)(x)``.

    ``local_at_distance(data, t)`` must return an upper bound on the local sensitivity of
    any dataset within distance ``t`` of ``data``, non-decreasing in ``t``. Terms for
    ``t <= max_distance`` are evaluated; the tail ``t > max_distance`` is covered by
    ``exp(-(max_distance+1) beta) * global_bound`` when ``global_bound`` is given.
    Leave ``global_bound`` unset only when no dataset lies farther than ``max_distance``
    (e.g. ``max_distance = n`` for substitution neighbours on ``n`` records).
    Guarantee: the result is beta-smooth and >= the local sensitivity (NRS 2007, Lemma 2.3)
    provided ``local_at_distance`` is a valid bound.
    """

    kind: ClassVar[SensitivityKind] = SensitivityKind.SMOOTH
    local_at_distance: Callable[[Any, int], float] = attrs.field(converter=_local_at_distance)
    beta: float = attrs.field(converter=_beta)
    max_distance: int = attrs.field(converter=_max_distance)
    global_bound: float | None = attrs.field(default=None, converter=_global_bound)
    norm: Norm = attrs.field(default=Norm.L1, converter=_norm)

    def bound(self, data: Any = None) -> float:
        if data is None:
            raise PrivregValueError("SmoothSensitivity.bound needs data: pass bound(data)")
        best = 0.0
        for t in range(self.max_distance + 1):
            weight = math.exp(-t * self.beta)
            if self.global_bound is not None and weight * self.global_bound <= best:
                break  # no later term can exceed best: LS^(t) <= global_bound
            ls = v.check_sensitivity(f"local_at_distance(data, {t})", self.local_at_distance(data, t), allow_zero=True)
            if self.global_bound is not None and ls > self.global_bound:
                raise PrivregValueError(
                    f"local_at_distance(data, {t}) = {ls} exceeds global_bound = "
                    f"{self.global_bound}; one of them is wrong"
                )
            best = max(best, weight * ls)
        if self.global_bound is not None:
            best = max(best, math.exp(-(self.max_distance + 1) * self.beta) * self.global_bound)
        return best


def require_sensitivity(
    sensitivity: Any, *, kinds: tuple[SensitivityKind, ...], norms: tuple[Norm, ...], who: str
) -> Sensitivity:
    """Check that ``sensitivity`` is a Sensitivity of an accepted kind and norm for ``who``."""
    if not isinstance(sensitivity, Sensitivity):
        raise PrivregTypeError(
            f"sensitivity must be a privreg Sensitivity (e.g. GlobalSensitivity(value=1.0, "
            f"norm='l1')); got {sensitivity!r}"
        )
    if sensitivity.kind not in kinds:
        hint = (
            " Local sensitivity leaks the data; use SmoothSensitivity with a smooth-"
            "sensitivity mechanism, or a GlobalSensitivity."
            if sensitivity.kind is SensitivityKind.LOCAL
            else ""
        )
        raise PrivregValueError(
            f"{who} accepts {[k.value for k in kinds]} sensitivity; got {sensitivity.kind.value!r}.{hint}"
        )
    if sensitivity.norm not in norms:
        raise PrivregValueError(
            f"{who} needs sensitivity in norm {[n.value for n in norms]}; got "
            f"{sensitivity.norm.value!r}. Bound the query in the right norm."
        )
    return sensitivity
