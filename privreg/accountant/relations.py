"""Neighbour relations: which datasets an event's guarantee compares, and the one
conversion the accountants apply.

* ``add_remove``: a dataset and the same dataset with one user's data added or removed.
* ``replace_one``: a dataset and the same dataset with one user's data replaced.

Every accountant, filter and budget holds one relation; an event holds the relation its
guarantee was proven for (``PrivacyEvent.neighbouring``; None means add/remove, the
library's default, so an event that does not say is never under-charged). Replacing a
user is removing one and adding another, so an add/remove guarantee yields a replace-one
guarantee by group privacy for groups of two, which is the conversion applied here (each
rule is tested in ``tests/test_relations.py``):

=====================  ==================================================================
Laplace, Gaussian,      same noise, sensitivity doubled (the query moves by at most twice
discrete versions       its add/remove sensitivity; triangle inequality)
PureDP(eps)             PureDP(2 eps) (Dwork-Roth 2014, Theorem 2.2)
ApproxDP(eps, delta)    ApproxDP(2 eps, (1 + e^eps) delta) (group privacy, k = 2)
ZCDP(rho)               ZCDP(4 rho) (Bun-Steinke 2016, Proposition 1.9: k^2 rho)
Exponential(eps)        Exponential(2 eps) (the utility sensitivity doubles; eps-bounded
                        range becomes 2 eps-bounded range)
=====================  ==================================================================

The other direction is refused: a replace-one guarantee (local reports, shuffled
reports, sampling without replacement) says nothing about adding a user -- the number of
reports itself reveals it. Poisson subsampling is proven for add/remove only here, so a
Poisson-sampled event under a replace-one budget is refused too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar, cast

import attrs

from privreg.core.errors import PrivregError
from privreg.core.events import (
    ZCDP,
    ApproxDP,
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    PoissonSampled,
    PrivacyEvent,
    PureDP,
    SampledWithoutReplacement,
    SelfComposed,
)

__all__ = ["relate", "to_replace_one"]

# What a doubling rule returns: an event of the class it is registered for.
_Doubled = Laplace | Gaussian | DiscreteLaplace | DiscreteGaussian | PureDP | ApproxDP | ZCDP | Exponential
_D = TypeVar("_D", Laplace, Gaussian, DiscreteLaplace, DiscreteGaussian, PureDP, ApproxDP, ZCDP, Exponential)


def _rule(
    event_type: type[_D], double: Callable[[_D], _D]
) -> tuple[type[PrivacyEvent], Callable[[PrivacyEvent], _Doubled]]:
    """One entry of the table: looked up by class, ``double`` only receives ``event_type``
    events, which a dict literal cannot tell the type checker (hence the cast)."""
    return event_type, cast(Callable[[PrivacyEvent], _Doubled], double)


_DOUBLE: dict[type[PrivacyEvent], Callable[[PrivacyEvent], _Doubled]] = dict(
    [
        _rule(Laplace, lambda e: attrs.evolve(e, sensitivity=2 * e.sensitivity)),
        _rule(Gaussian, lambda e: attrs.evolve(e, sensitivity=2 * e.sensitivity)),
        _rule(DiscreteLaplace, lambda e: attrs.evolve(e, sensitivity=2 * e.sensitivity)),
        _rule(DiscreteGaussian, lambda e: attrs.evolve(e, sensitivity=2 * e.sensitivity)),
        _rule(PureDP, lambda e: attrs.evolve(e, epsilon=2 * e.epsilon)),
        _rule(
            ApproxDP,
            lambda e: attrs.evolve(
                e, epsilon=2 * e.epsilon, delta=min(1.0, e.delta * (1 + math.exp(min(e.epsilon, 700.0))))
            ),
        ),
        _rule(ZCDP, lambda e: attrs.evolve(e, rho=4 * e.rho)),
        _rule(Exponential, lambda e: attrs.evolve(e, epsilon=2 * e.epsilon)),
    ]
)


def to_replace_one(event: PrivacyEvent) -> PrivacyEvent | None:
    """The replace-one guarantee implied by an add/remove ``event`` (module table), or
    None when no rule applies (its ``lower()`` guarantee is tried next)."""
    for cls in type(event).__mro__:
        rule = _DOUBLE.get(cls)
        if rule is not None:
            converted = rule(event)
            return attrs.evolve(converted, neighbouring="replace_one")
    return None


def _tree(event: PrivacyEvent, relation: str) -> tuple[PrivacyEvent | None, str]:
    """Every leaf of ``event`` related to ``relation`` (combinators rebuilt)."""
    if isinstance(event, Composed):
        parts = []
        for e in event.events:
            r, why = _tree(e, relation)
            if r is None:
                return None, why
            parts.append(r)
        return attrs.evolve(event, events=tuple(parts)), ""
    if isinstance(event, SelfComposed):
        r, why = _tree(event.event, relation)
        return (None, why) if r is None else (attrs.evolve(event, event=r), "")
    return relate(event, relation)


def relate(event: PrivacyEvent, relation: str) -> tuple[PrivacyEvent | None, str]:
    """``event`` as a guarantee for ``relation``: ``(event, "")`` when it holds as it
    is, ``(converted, "")`` when the group-privacy rule applies, else ``(None, why)``.
    A sampler's inner events are related to the sampler's own relation first (Poisson
    sampling amplifies add/remove guarantees, sampling without replacement replace-one)."""
    held = event.neighbouring or "add_remove"
    if isinstance(event, (PoissonSampled, SampledWithoutReplacement)):
        inner, why = _tree(event.event, held)
        if inner is None:
            return None, f"inside {event.kind!r}: {why}"
        event = attrs.evolve(event, event=inner) if inner is not event.event else event
    if held == relation:
        return event, ""
    if held == "add_remove" and relation == "replace_one" and isinstance(event, PoissonSampled):
        return None, (
            "Poisson subsampling amplifies add/remove guarantees only; under a replace-one "
            "budget sample without replacement (SampledWithoutReplacement) or open the budget "
            "with neighbouring='add_remove'"
        )
    if held == "add_remove" and relation == "replace_one":
        current: PrivacyEvent | None = event
        while current is not None:
            try:
                converted = to_replace_one(current)
            except PrivregError as exc:  # e.g. group privacy pushes delta to 1, or 2 x sensitivity overflows
                return None, f"group privacy gives no replace-one guarantee for {event.kind!r} ({exc})"
            if converted is not None:
                return converted, ""
            lowered = current.lower()
            current = None if lowered is None or lowered == current else lowered
        return None, (
            f"{event.kind!r} holds for add/remove neighbours and has no replace-one "
            f"conversion; open the budget with neighbouring='add_remove'"
        )
    return None, (
        f"{event.kind!r} holds for replacing one user's data (replace_one), which says "
        f"nothing about adding or removing a user; open the budget with "
        f"neighbouring='replace_one' (add/remove events are then converted by group "
        f"privacy, privreg.accountant.relations)"
    )
