"""Shuffled reports through accountants and budgets: the event names the bound used."""

import pytest

from privreg.accountant import make_accountant
from privreg.accountant.shuffle import shuffle_epsilon
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core import BudgetExceededError, InsecureReproducibleRandom, LocalDP, Shuffled
from privreg.mechanisms.randomized_response import RandomizedResponse

EN_US = dict(epsilon0=10.0, num_reports=500_000 * 60)


def test_default_bound_is_fmt21_and_is_what_the_accountant_charges():
    event = Shuffled(event=LocalDP(epsilon0=10.0), num_reports=EN_US["num_reports"])
    assert event.bound == "fmt21-numerical"
    acc = make_accountant("basic", event_delta=1e-10, neighbouring="replace_one").compose(event)
    assert acc.epsilon(1e-10) == shuffle_epsilon(**EN_US, delta=1e-10)
    assert acc.epsilon(1e-10) == pytest.approx(0.3075, abs=1e-4)  # paper 001's en-US, exact FMT21


def test_declared_fmt23_is_used_and_recorded(tmp_path):
    event = Shuffled(event=LocalDP(epsilon0=10.0), num_reports=EN_US["num_reports"], bound="fmt23-numerical")
    with BudgetSession(
        budget=PrivacyBudget(epsilon=1.0, delta=1e-10, neighbouring="replace_one"),
        ledger=tmp_path / "l.sqlite",
        filters=("basic",),
        event_delta=1e-10,
    ) as session:
        session.charge(event, mechanism="subset-selection", parameters={})
        assert session.remaining().epsilon == pytest.approx(
            1 - shuffle_epsilon(**EN_US, delta=1e-10, bound="fmt23-numerical")
        )
        (row,) = session.ledger.rows()
    assert row.charge.event.bound == "fmt23-numerical"


def test_shuffled_randomizer_release_is_amplified_in_the_session():
    rr = RandomizedResponse(epsilon=2.0, k=4)
    users = [0, 1, 2, 3] * 25_000
    with BudgetSession(
        budget=PrivacyBudget(epsilon=0.5, delta=1e-8, neighbouring="replace_one"), filters=("basic",), event_delta=1e-8
    ) as session:
        out = rr.randomize(users, charger=session, shuffle=True, rng=InsecureReproducibleRandom(seed=1))
        assert out.event == Shuffled(event=LocalDP(epsilon0=2.0, randomizer="randomized-response"), num_reports=100_000)
        assert 0 < 0.5 - session.remaining().epsilon < 0.1  # amplified far below epsilon0 = 2
    with (
        pytest.raises(BudgetExceededError, match="refused by every filter of the budget"),
        BudgetSession(
            budget=PrivacyBudget(epsilon=0.5, delta=1e-8, neighbouring="replace_one"),
            filters=("basic",),
            event_delta=1e-8,
        ) as s,
    ):
        rr.randomize(users, charger=s, shuffle=False)  # unshuffled: epsilon0 = 2 > 0.5
