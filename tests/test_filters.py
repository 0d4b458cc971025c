"""Fully adaptive filters and declared plans: which rule guards a session, what each
filter grants, and that nothing non-finite is ever affordable."""

import math
import sqlite3

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpr

from privreg.accountant import make_accountant
from privreg.accountant.blocks import block_pair
from privreg.accountant.curves import gaussian_epsilon
from privreg.accountant.zcdp import zcdp_epsilon
from privreg.budget.filters import FILTER_ORDERS, FILTERS, make_filter
from privreg.budget.ledger import Ledger
from privreg.budget.session import DEFAULT_FILTERS, BudgetSession, PrivacyBudget
from privreg.budget.verify import format_report, verify_ledger
from privreg.cli.main import main
from privreg.core import (
    ApproxDP,
    BudgetExceededError,
    Charge,
    Composed,
    Gaussian,
    Laplace,
    PoissonSampled,
    PrivregValueError,
    PureDP,
    SelfComposed,
)


def session(tmp_path=None, eps=1.0, delta=1e-6, **kw):
    ledger = ":memory:" if tmp_path is None else tmp_path / "l.sqlite"
    return BudgetSession(budget=PrivacyBudget(epsilon=eps, delta=delta), ledger=ledger, **kw)


def test_every_filter_cites_its_proof_and_the_default_splits_delta():
    for cls in FILTERS.values():
        assert cls.citation and any(ch.isdigit() for ch in cls.citation)  # author and year
    s = session(eps=4.0, delta=3e-6)
    assert s.filter_names == DEFAULT_FILTERS and "delta split evenly (1e-06 each)" in s.rule
    for _ in range(10):
        s.charge(Gaussian(sigma=10.0), mechanism="g", parameters={})
    # the gdp filter is exact for Gaussians at its share of delta (Smith-Thakurta 2022)
    assert s.spent().by_filter["gdp"] == pytest.approx(gaussian_epsilon(1e-6, math.sqrt(10) / 10.0), rel=1e-12)


def test_rdp_filter_pays_a_union_bound_over_its_orders():
    f = make_filter("rdp", epsilon=10.0, delta=1e-6)
    for _ in range(20):
        f.add(Gaussian(sigma=5.0))
    curve = make_accountant("rdp").compose(Gaussian(sigma=5.0), count=20).curve()
    idx = np.searchsorted(make_accountant("rdp").orders, FILTER_ORDERS)
    assert f.spent() == pytest.approx(
        float(dpr.compute_epsilon(FILTER_ORDERS, curve[idx], 1e-6 / len(FILTER_ORDERS))[0]), rel=1e-12
    )
    assert f.spent() > make_accountant("rdp").compose(Gaussian(sigma=5.0), count=20).epsilon(1e-6)


def test_zcdp_and_advanced_filters_follow_their_formulas():
    z = make_filter("zcdp", epsilon=10.0, delta=1e-6)
    a = make_filter("advanced", epsilon=10.0, delta=1e-6)
    for _ in range(30):
        z.add(PureDP(epsilon=0.1))
        a.add(PureDP(epsilon=0.1))
    assert z.spent() == pytest.approx(zcdp_epsilon(30 * 0.1**2 / 2, 1e-6), rel=1e-12)
    sum_sq = 30 * 0.1**2
    assert a.spent() == pytest.approx(math.sqrt(2 * math.log(2 / 1e-6) * sum_sq) + sum_sq / 2, rel=1e-12)
    a.add(ApproxDP(epsilon=0.1, delta=6e-7))  # over delta'' = delta / 2: cannot vouch
    assert a.spent() == math.inf


def test_the_issue_example_is_refused_on_both_branches():
    """Budget (2, 1e-6); PureDP(1), then a Gaussian worth about (1, 1e-6) or ApproxDP(0, 1e-6).
    The interaction as a whole is about (2, 1.27e-6) when both branches are granted."""
    sigma = 4.2247  # gaussian_epsilon(1e-6, 1/sigma) is about 1
    assert 0.95 < gaussian_epsilon(1e-6, 1 / sigma) < 1.05
    for branch in (Gaussian(sigma=sigma), ApproxDP(epsilon=0.0, delta=1e-6)):
        s = session(eps=2.0, delta=1e-6)
        s.charge(PureDP(epsilon=1.0), mechanism="first", parameters={})
        with pytest.raises(BudgetExceededError, match="refused by every filter of the budget"):
            s.charge(branch, mechanism="second", parameters={})


def test_basic_filter_grants_exactly_what_basic_composition_allows():
    s = session(eps=2.0, delta=1e-6, filters=("basic",), event_delta=1e-7)
    s.charge(PureDP(epsilon=1.0), mechanism="m", parameters={})
    s.charge(ApproxDP(epsilon=0.5, delta=8e-7), mechanism="m", parameters={})
    assert not s.can_afford(ApproxDP(epsilon=0.0, delta=3e-7))  # delta would exceed 1e-6
    assert s.can_afford(PureDP(epsilon=0.5)) and not s.can_afford(PureDP(epsilon=0.5000001))


def test_a_block_is_priced_as_one_mechanism_by_the_basic_filter():
    block = SelfComposed(event=Gaussian(sigma=20.0), count=50)
    eps, delta = block_pair(block, event_delta=1e-7, neighbouring="add_remove")
    assert delta == 1e-7
    assert eps == pytest.approx(make_accountant("gdp").compose(block).epsilon(1e-7), rel=1e-6)
    assert eps < 50 * gaussian_epsilon(1e-7 / 50, 1 / 20.0)  # far below 50 separate charges
    pure = Composed(events=[PureDP(epsilon=0.25), Laplace(scale=2.0)])
    assert block_pair(pure, event_delta=1e-7, neighbouring="add_remove") == (0.75, 0.0)


def test_non_finite_is_never_affordable(monkeypatch):
    s = session(eps=5.0, delta=1e-6)
    cls = FILTERS["rdp"]
    monkeypatch.setattr(cls, "_spent_of", lambda self, sums: float("nan"))
    s.charge(Gaussian(sigma=10.0), mechanism="g", parameters={})  # gdp still vouches
    assert "rdp" in s.spent().by_filter and s.spent().by_filter["rdp"] == math.inf
    monkeypatch.setattr(FILTERS["gdp"], "_spent_of", lambda self, sums: float("nan"))
    with pytest.raises(BudgetExceededError):
        s.charge(Gaussian(sigma=10.0), mechanism="g", parameters={})
    assert s.ledger.head()[0] == 1


def test_a_poisson_sample_of_probability_zero_costs_nothing_and_switches_nothing_off():
    s = session(eps=1.0, delta=1e-6)
    s.charge(PoissonSampled(sampling_probability=0.0, event=Gaussian(sigma=1e-300)), mechanism="q0", parameters={})
    assert s.remaining().epsilon == 1.0
    s.charge(PureDP(epsilon=0.9), mechanism="m", parameters={})
    with pytest.raises(BudgetExceededError):
        s.charge(PureDP(epsilon=0.2), mechanism="m", parameters={})


def test_plan_session_charges_the_plan_bound_and_refuses_anything_else(tmp_path):
    plan = [Gaussian(sigma=10.0)] * 40 + [Laplace(scale=10.0)]
    s = session(tmp_path, eps=3.2, delta=1e-6, plan=plan)
    assert s.plan_accountant in ("pld", "gdp", "rdp") and s.plan_epsilon <= 3.2
    assert "declared plan of 41 release(s)" in s.rule
    with pytest.raises(BudgetExceededError, match="is not release #1"):
        s.charge(Laplace(scale=10.0), mechanism="m", parameters={})
    for e in plan[:40]:
        s.charge(e, mechanism="g", parameters={})
    assert not s.can_afford(Gaussian(sigma=10.0)) and s.can_afford(Laplace(scale=10.0))
    s.charge(Laplace(scale=10.0), mechanism="l", parameters={})
    with pytest.raises(BudgetExceededError, match="the plan is complete"):
        s.charge(Laplace(scale=10.0), mechanism="l", parameters={})
    s.close()
    again = BudgetSession.open(tmp_path / "l.sqlite")
    assert again.plan_epsilon == s.plan_epsilon and again.ledger.head()[0] == 41
    report = verify_ledger(tmp_path / "l.sqlite")
    assert report.flags == () and "declared plan of 41" in report.rule
    # the filters could not have granted this sequence at this budget
    f = session(eps=3.2, delta=1e-6)

    def charge_the_plan():
        for e in plan:
            f.charge(e, mechanism="g", parameters={})

    with pytest.raises(BudgetExceededError):
        charge_the_plan()


def test_a_plan_that_does_not_fit_is_refused_up_front(tmp_path):
    with pytest.raises(BudgetExceededError, match="declared plan of 2 release"):
        session(tmp_path, eps=1.0, plan=[PureDP(epsilon=0.6), PureDP(epsilon=0.6)])
    assert not (tmp_path / "l.sqlite").exists()
    with pytest.raises(PrivregValueError, match="either plan"):
        session(eps=1.0, plan=[PureDP(epsilon=0.1)], filters=("basic",))


def _direct(path, events):
    ledger = Ledger(path, create=False)
    with ledger.transaction():
        for i, e in enumerate(events):
            ledger.append(Charge(timestamp=1.7e9 + i, mechanism="m", parameters={}, event=e, label=f"x{i}"))
    ledger.close()


def test_audit_flags_releases_the_filters_refuse_even_where_pld_allows_them(tmp_path, capsys):
    session(tmp_path, eps=3.0, delta=1e-6).close()
    _direct(tmp_path / "l.sqlite", [Gaussian(sigma=5.0)] * 10)  # written past the session
    report = verify_ledger(tmp_path / "l.sqlite")
    assert report.nonadaptive["pld"] <= 3.0 < report.spent
    flag = [f for f in report.flags if "should have refused" in f]
    assert flag and "would allow it, but only for a sequence fixed in advance" in flag[-1]
    assert main(["audit", str(tmp_path / "l.sqlite")]) == 3
    assert "rule: fully adaptive filters" in capsys.readouterr().out


def test_audit_flags_an_off_plan_row(tmp_path):
    session(tmp_path, eps=2.0, plan=[PureDP(epsilon=0.5)] * 2).close()
    _direct(tmp_path / "l.sqlite", [PureDP(epsilon=0.5), PureDP(epsilon=0.4)])
    report = verify_ledger(tmp_path / "l.sqlite")
    assert any("is not release #2 of the declared plan" in f for f in report.flags)


def test_legacy_hindsight_ledger_is_rechecked_by_the_filters(tmp_path):
    meta = {
        "format": 1,
        "budget": {"epsilon": 2.0, "delta": 1e-6},
        "accountants": ["pld"],
        "event_delta": None,
        "neighbouring": "add_remove",
    }
    Ledger(tmp_path / "l.sqlite", meta=meta).close()
    _direct(tmp_path / "l.sqlite", [PureDP(epsilon=1.0), Gaussian(sigma=4.2247)])
    report = verify_ledger(tmp_path / "l.sqlite")
    assert "format-1 ledger was kept by the old rule" in report.rule
    assert any("should have refused" in f for f in report.flags)
    assert "format-1" in format_report(report)
    reopened = BudgetSession.open(tmp_path / "l.sqlite")
    with pytest.raises(BudgetExceededError):
        reopened.charge(PureDP(epsilon=0.01), mechanism="m", parameters={})


def test_concurrent_writer_makes_the_session_recompute(tmp_path):
    a = session(tmp_path, eps=1.0, delta=0.0)
    b = BudgetSession.open(tmp_path / "l.sqlite")
    a.charge(PureDP(epsilon=0.6), mechanism="a", parameters={})
    with pytest.raises(BudgetExceededError):
        b.charge(PureDP(epsilon=0.6), mechanism="b", parameters={})  # b catches up first
    b.charge(PureDP(epsilon=0.4), mechanism="b", parameters={})
    assert a.remaining().epsilon == pytest.approx(0.0) and a.ledger.verify() == []
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("SELECT COUNT(*) FROM charges").fetchone()[0] == 2


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_reopening_folds_runs_of_identical_events_exactly_as_one_by_one(tmp_path, name):
    approx = ApproxDP(epsilon=0.02, delta=1e-9) if name in ("basic", "advanced") else Gaussian(sigma=30.0)
    first = Gaussian(sigma=20.0) if name == "gdp" else PureDP(epsilon=0.01)
    events = [first] * 30 + [approx] * 5 + [first] * 7
    live = session(tmp_path, eps=50.0, delta=1e-6, filters=(name,), event_delta=1e-8)
    for e in events:
        live.charge(e, mechanism="m", parameters={})
    again = BudgetSession.open(tmp_path / "l.sqlite")
    assert again.spent() == live.spent()  # the stored prices, replayed: bit for bit
    one_by_one = make_filter(name, epsilon=50.0, delta=1e-6, event_delta=1e-8)
    for e in events:
        one_by_one.add(e)
    assert one_by_one.spent() == pytest.approx(again.spent().by_filter.get(name, math.inf), rel=1e-12)


def test_a_block_calibrated_to_the_whole_delta_fits_a_budget_of_that_delta():
    """ngrams' plan: Gaussians plus ApproxDP(0, delta/2), calibrated by PLD to exactly
    (eps, delta). Priced at event_delta + delta/2 it could never fit; priced at the delta
    the filter has left, it does, and the ledger holds no more than the budget."""
    delta = 1e-7
    block = Composed(events=(Gaussian(sigma=4.0), Gaussian(sigma=4.0), ApproxDP(epsilon=0.0, delta=delta / 2)))
    eps = make_accountant("pld").compose(block).epsilon(delta)
    for name in ("basic", "advanced"):
        budget_eps = eps if name == "basic" else 10 * eps
        s = session(
            eps=budget_eps * (1 + 1e-9),
            delta=delta if name == "basic" else 2 * delta,
            filters=(name,),
            event_delta=delta,
        )
        s.charge(block, mechanism="plan", parameters={})
        assert not s.can_afford(ApproxDP(epsilon=0.0, delta=1e-12))  # all of delta went to the block
    pair = block_pair(block, event_delta=delta, neighbouring="add_remove", left=delta)
    assert pair is not None and pair[1] == delta and pair[0] == pytest.approx(eps, rel=1e-6)
    unbounded = block_pair(block, event_delta=delta, neighbouring="add_remove")
    assert unbounded is not None and unbounded[1] == pytest.approx(1.5 * delta)


def test_a_curve_release_over_the_delta_left_keeps_the_basic_filter_alive(tmp_path):
    """`ledger init --delta D` prices curve events at D, but each of the three default
    filters has D/3: a Gaussian priced at D never fits the basic filter. Priced instead at
    the delta the filter has left (as a block is), it fits, and the basic filter stays
    alive for the pure releases after it instead of being switched off for good."""
    path = tmp_path / "team.sqlite"
    assert main(["ledger", "init", str(path), "--epsilon", "10", "--delta", "1e-6"]) == 0
    s = BudgetSession.open(path)
    s.charge(Gaussian(sigma=5.0), mechanism="gaussian", parameters={})
    basic = s.filters[0]
    assert basic.name == "basic" and basic.vouches() and basic.sums[1] <= basic.delta
    assert basic.sums[0] == pytest.approx(gaussian_epsilon(basic.delta, 1 / 5.0))
    quote = s.price(PureDP(epsilon=1.0))
    assert quote.granted and quote.by_filter["basic"] == pytest.approx(1.0)
    s.charge(PureDP(epsilon=1.0), mechanism="m", parameters={})
    assert BudgetSession.open(path).spent() == s.spent()
    assert verify_ledger(path).flags == ()


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_memoized_prices_are_the_computed_ones(name):
    """A state-free filter memoizes its price per event (shared with its copies); the
    memoized price is the one a fresh filter computes. A pair filter (basic, advanced),
    whose price depends on its totals through the delta it has left, reuses a price only
    while that delta is unchanged (a pure-DP release) and computes it again otherwise."""
    from privreg.core.events import DiscreteGaussian, PureDP

    f = make_filter(name, epsilon=10.0, delta=1e-6, event_delta=1e-7)
    for event in (PureDP(epsilon=0.5), DiscreteGaussian(sigma=3.0, sensitivity=1)):
        first = f.price(event)
        if isinstance(first, str):  # a filter that cannot price it (gdp and pure DP)
            continue
        for _ in range(3):
            f.apply(first)
        fresh = make_filter(name, epsilon=10.0, delta=1e-6, event_delta=1e-7)
        assert f.copy().price(event) == fresh.price(event) == f.price(event)
        pair = name in ("basic", "advanced")
        assert (f.price(event) is first) == (FILTERS[name].state_free or (pair and first[1] == 0.0))
        if pair and first[1] > 0:  # its delta left moves: priced afresh, as a fresh filter with it would
            g = make_filter(name, epsilon=10.0, delta=2.1e-6 if name == "advanced" else 1.05e-6, event_delta=1e-7)
            start = g.price(event)
            while g._delta_left() >= start[1]:
                g.apply(g.price(event))
            twin = make_filter(name, epsilon=10.0, delta=g.delta, event_delta=1e-7)
            twin.sums = g.sums
            assert twin.price(event) == g.price(event) != start  # now priced at the delta left (5e-8)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_room_is_a_box_every_point_of_which_vouches_when_added_one_release_at_a_time(name):
    """Filter.room: increments up to the room, added one release at a time after the
    filter's totals (in any order, as a replay adds them), leave it vouching; a room that
    grows a total left at 0 is refused; no room where it does not vouch. The margins (2e-9
    of each total, 1e-9 of epsilon) cover the rounding; this draws corners and random points
    of the box, split into up to 50 releases, under a fixed seed (no false alarm: a point
    outside the box is never drawn)."""
    rng = np.random.default_rng(5)
    events = [PureDP(epsilon=0.05), ApproxDP(epsilon=0.1, delta=1e-8), Gaussian(sigma=3.0)]
    checked = 0
    for budget in (0.5, 2.0, 8.0):
        f = make_filter(name, epsilon=budget, delta=1e-6, event_delta=1e-7)
        for step in range(60):
            price = f.price(events[step % len(events)])
            if isinstance(price, str):
                continue
            sums, dead = f.after(price)
            room = f.room(sums, dead)
            if room is None:
                assert f.price_reads is None or not f.vouches_at(sums, dead) or f.spent_at(sums) > budget * 0.99
                break
            assert all(r >= 0 and (r == 0 or s > 0) for r, s in zip(room, sums))
            for corner in (True, False, False):
                total = np.array(room) * (1.0 if corner else rng.random(len(room)))
                parts = rng.dirichlet(np.ones(int(rng.integers(1, 50))), size=1)[0]
                replay = list(sums)
                for share in parts:  # added one release at a time, as a replay adds them
                    replay = [a + float(x * share) for a, x in zip(replay, total)]
                assert f.vouches_at(tuple(replay)), (name, budget, step)
                checked += 1
            f.apply(price)
    assert checked >= 12
