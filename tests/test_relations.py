"""Neighbour relations: events, accountants and budgets carry theirs; replace-one is
reached from add/remove by group privacy only, and the reverse is refused."""

import math

import pytest

from privreg.accountant import make_accountant
from privreg.accountant.relations import relate, to_replace_one
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.cli.main import main
from privreg.core import (
    ZCDP,
    ApproxDP,
    BudgetExceededError,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    PoissonSampled,
    PrivregValueError,
    PureDP,
    SampledWithoutReplacement,
    Shuffled,
    UnsupportedEventError,
    event_from_json,
)

RULES = [
    (Gaussian(sigma=3.0, sensitivity=1.5), Gaussian(sigma=3.0, sensitivity=3.0, neighbouring="replace_one")),
    (Laplace(scale=2.0, sensitivity=0.5), Laplace(scale=2.0, sensitivity=1.0, neighbouring="replace_one")),
    (DiscreteLaplace(scale=4.0, sensitivity=3), DiscreteLaplace(scale=4.0, sensitivity=6, neighbouring="replace_one")),
    (
        DiscreteGaussian(sigma=4.0, sensitivity=2, dimension=3),
        DiscreteGaussian(sigma=4.0, sensitivity=4, dimension=3, neighbouring="replace_one"),
    ),
    (PureDP(epsilon=0.7), PureDP(epsilon=1.4, neighbouring="replace_one")),
    (
        ApproxDP(epsilon=0.5, delta=1e-7),
        ApproxDP(epsilon=1.0, delta=1e-7 * (1 + math.exp(0.5)), neighbouring="replace_one"),
    ),
    (ZCDP(rho=0.05), ZCDP(rho=0.2, neighbouring="replace_one")),
    (
        Exponential(epsilon=0.3, variant="permute_and_flip"),
        Exponential(epsilon=0.6, variant="permute_and_flip", neighbouring="replace_one"),
    ),
]


@pytest.mark.parametrize("event, converted", RULES, ids=lambda e: getattr(e, "kind", ""))
def test_group_privacy_rule_per_event(event, converted):
    assert to_replace_one(event) == converted
    assert relate(event, "replace_one") == (converted, "")
    assert relate(event, "add_remove") == (event, "")  # None means add/remove: no change


def test_replace_one_gaussian_costs_the_doubled_sensitivity_and_nothing_more():
    replace = make_accountant("gdp", neighbouring="replace_one").compose(Gaussian(sigma=4.0))
    doubled = make_accountant("gdp").compose(Gaussian(sigma=4.0, sensitivity=2.0))
    assert replace.epsilon(1e-6) == doubled.epsilon(1e-6)
    declared = make_accountant("gdp", neighbouring="replace_one").compose(
        Gaussian(sigma=4.0, neighbouring="replace_one")
    )
    assert declared.epsilon(1e-6) == make_accountant("gdp").compose(Gaussian(sigma=4.0)).epsilon(1e-6)


@pytest.mark.parametrize(
    "event",
    [
        LocalDP(epsilon0=1.0),
        Shuffled(event=LocalDP(epsilon0=1.0), num_reports=1000),
        SampledWithoutReplacement(source_size=100, sample_size=10, event=PureDP(epsilon=1.0)),
        Gaussian(sigma=1.0, neighbouring="replace_one"),
    ],
    ids=lambda e: e.kind,
)
@pytest.mark.parametrize("name", ["basic", "rdp", "zcdp", "pld", "optimal"])
def test_replace_one_guarantees_are_refused_under_add_remove(event, name):
    acc = make_accountant(name, **({"event_delta": 1e-6} if name in ("basic", "optimal") else {}))
    assert not acc.supports(event)
    with pytest.raises(UnsupportedEventError, match=r"replace_one|replacing one user"):
        acc.compose(event)


def test_poisson_sampling_is_refused_under_replace_one_with_the_fix():
    event = PoissonSampled(sampling_probability=0.01, event=Gaussian(sigma=1.0))
    for name in ("basic", "rdp", "pld"):
        acc = make_accountant(name, neighbouring="replace_one")
        with pytest.raises(UnsupportedEventError, match="SampledWithoutReplacement"):
            acc.compose(event)


def test_sampling_without_replacement_relates_its_inner_event():
    inner_default = SampledWithoutReplacement(source_size=1000, sample_size=50, event=Gaussian(sigma=2.0))
    inner_declared = SampledWithoutReplacement(
        source_size=1000, sample_size=50, event=Gaussian(sigma=2.0, sensitivity=2.0, neighbouring="replace_one")
    )
    a = make_accountant("rdp", neighbouring="replace_one").compose(inner_default).epsilon(1e-6)
    b = make_accountant("rdp", neighbouring="replace_one").compose(inner_declared).epsilon(1e-6)
    assert a == b  # the add/remove Gaussian is doubled before sampling is accounted


def test_local_reports_need_a_replace_one_budget():
    with BudgetSession(budget=PrivacyBudget(epsilon=5.0)) as s:
        with pytest.raises(BudgetExceededError, match="neighbouring='replace_one'"):
            s.charge(LocalDP(epsilon0=1.0), mechanism="rr", parameters={})
        assert s.ledger.head()[0] == 0
    with BudgetSession(budget=PrivacyBudget(epsilon=5.0, neighbouring="replace_one")) as s:
        s.charge(LocalDP(epsilon0=1.0), mechanism="rr", parameters={})
        s.charge(Laplace(scale=2.0), mechanism="laplace", parameters={})  # add/remove: doubled
        assert s.spent().by_filter["basic"] == pytest.approx(2.0)


def test_relation_is_validated_and_round_trips():
    with pytest.raises(PrivregValueError, match="neighbouring must be one of"):
        Gaussian(sigma=1.0, neighbouring="swap")
    with pytest.raises(PrivregValueError, match="neighbouring must be one of"):
        PrivacyBudget(epsilon=1.0, neighbouring="everyone")
    assert Gaussian(sigma=1.0).to_json() == '{"kind":"gaussian","sensitivity":1.0,"sigma":1.0}'
    e = Gaussian(sigma=1.0, neighbouring="replace_one")
    assert event_from_json(e.to_json()) == e
    assert Gaussian(sigma=1.0, neighbouring="substitution").neighbouring == "replace_one"  # legacy name


def test_describe_states_the_relation_of_a_workflow(capsys):
    assert main(["describe", "oov-discovery"]) == 0
    out = capsys.readouterr().out
    assert "replace_one" in out and "neighbours: replace one user's data" in out
    assert main(["describe", "bounded-mean"]) == 0
    assert "neighbours: add or remove one user's data (add_remove)" in capsys.readouterr().out
