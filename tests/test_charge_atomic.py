"""A charge is all or nothing. The session decides a release on each filter's totals
after it (``Filter.after``) without changing the filters, and sets them only once the
row is stored: a refusal, a failing price, a failing append or an append that lost the
race to another writer leaves every filter exactly as it was. And the text a row stores
for its parameters is the text of the parameters as they are at that charge, however the
caller's dict changed since an earlier one."""

import math

import pytest

from privreg.budget.ledger import LedgerError, _dumps
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core import BudgetExceededError, Gaussian, PureDP
from privreg.core.charging import jsonable
from privreg.core.errors import PrivregTypeError, PrivregValueError


def _states(s: BudgetSession):
    """Every filter's totals, dead reason and epsilon, as the session holds them."""
    return [(f.name, f.sums, f.dead, f.spent()) for f in s._filters]


def _session(**kw) -> BudgetSession:
    return BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), **kw)


def test_a_refused_release_leaves_the_first_filter_unchanged():
    s, twin = _session(), _session()
    for x in (s, twin):
        x.charge(PureDP(epsilon=0.6), mechanism="m", parameters={})
    before = _states(s)
    assert s.filter_names[0] == "basic" and before[0][1][0] == 0.6
    # basic, the first filter, would hold 1.2 after it; rdp and gdp refuse it too
    with pytest.raises(BudgetExceededError, match="refused by every filter"):
        s.charge(PureDP(epsilon=0.6), mechanism="m", parameters={})
    assert _states(s) == before
    # a release the first filter cannot price (a Gaussian without event_delta) would kill
    # it; rdp and gdp refuse it as too large, so it must stay alive
    with pytest.raises(BudgetExceededError):
        s.charge(Gaussian(sigma=0.05), mechanism="m", parameters={})
    assert _states(s) == before and s._filters[0].dead == ""
    # and the session goes on exactly as one that never saw the refusals
    for x in (s, twin):
        x.charge(PureDP(epsilon=0.3), mechanism="m", parameters={})
    assert _states(s) == _states(twin)
    assert s.ledger.head()[0] == 2 and s.ledger.verify() == []


def test_a_failure_after_the_first_filter_is_priced_leaves_it_unchanged(monkeypatch):
    s = _session()
    s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={})
    before, head = _states(s), s.ledger.head()
    third = s._filters[2]

    def broken(event, stated=None):
        raise RuntimeError("the third filter cannot price it")

    with monkeypatch.context() as m:  # the third filter fails after the first two priced it
        m.setattr(third, "price", broken)
        with pytest.raises(RuntimeError):
            s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={})
    assert _states(s) == before and s.ledger.head() == head

    def refused_write(*args, **kwargs):
        raise LedgerError("the disk is full")

    with monkeypatch.context() as m:  # granted by every filter, then the append fails
        m.setattr(s.ledger, "try_append", refused_write)
        with pytest.raises(LedgerError):
            s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={})
    assert _states(s) == before and s.ledger.head() == head


def test_an_append_that_lost_the_race_is_decided_again_and_counted_once(monkeypatch):
    s, twin = _session(), _session()
    for x in (s, twin):
        x.charge(PureDP(epsilon=0.1), mechanism="m", parameters={})
        x.charge(PureDP(epsilon=0.2), mechanism="m", parameters={})
    real, calls = s.ledger.try_append, []

    def late(charge, **kwargs):  # the first attempt finds another writer ahead of it
        calls.append(kwargs["expected_seq"])
        return None if len(calls) == 1 else real(charge, **kwargs)

    monkeypatch.setattr(s.ledger, "try_append", late)
    s.charge(PureDP(epsilon=0.2), mechanism="m", parameters={})
    assert calls == [2, 2], "the lost append must be retried from the same state"
    twin.charge(PureDP(epsilon=0.2), mechanism="m", parameters={})
    basic = s._filters[0].sums[0]
    assert math.isclose(basic, 0.5) and _states(s) == _states(twin)


def test_a_mutated_parameters_dict_is_encoded_again():
    s = BudgetSession(budget=PrivacyBudget(epsilon=10.0, delta=1e-6))
    params = {"epsilon": 1.0, "sensitivity": {"value": 1.0, "norm": "l1"}, "dimension": 1}
    seen = []
    for change in (
        lambda p: None,
        lambda p: p["sensitivity"].update(value=2.0),  # nested, in place
        lambda p: p.update(epsilon=1),  # equal (1 == 1.0), but an int
        lambda p: p.update(epsilon=0.0),
        lambda p: p.update(epsilon=-0.0),  # equal to 0.0, another text
        lambda p: p.update(dimension=True),  # equal to 1, another text
        lambda p: p["sensitivity"].update(extra={"deep": [1, 2]}),  # not a plain key: computed
    ):
        change(params)
        seen.append(_dumps(jsonable(params)))
        s.charge(PureDP(epsilon=0.1), mechanism="m", parameters=params)
    stored = [r[3] for r in s.ledger._raw_rows(0)]
    assert stored == seen and len(set(seen)) == len(seen)
    assert '"epsilon":-0.0' in stored[4] and '"dimension":true' in stored[5]


@pytest.mark.parametrize(
    ("label", "error", "match"),
    [
        (5, PrivregTypeError, "label must be a str; got 'int'"),
        ("night\x00run", PrivregValueError, "label contains a NUL character"),
        ("night\ud800run", PrivregValueError, "label contains a lone surrogate"),
    ],
)
def test_a_label_no_ledger_can_store_is_refused_before_the_charge(label, error, match):
    """PostgreSQL's text refuses NUL, UTF-8 a lone surrogate: every store refuses them
    alike, naming the argument, never quoting it, and nothing is charged."""
    s = BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    with pytest.raises(error, match=match) as err:
        s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={}, label=label)
    assert "night" not in str(err.value)
    assert s.ledger.head()[0] == 0
    with pytest.raises(PrivregValueError, match="mechanism contains a NUL"):
        s.charge(PureDP(epsilon=0.1), mechanism="m\x00", parameters={})
    s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={}, label="night run ü")
    assert s.ledger.head()[0] == 1
