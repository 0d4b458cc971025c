"""Plugins extend the accountants (privreg_register_accountants): handlers for their event
types, new accountant classes; a failing or duplicate extension fails only its plugin, and
a handler that cannot price an event makes the accountant refuse it, never compose NaN."""

import math
from typing import ClassVar

import attrs
import numpy as np
import pytest

import privreg
from privreg import Composed, Gaussian, PrivacyEvent, PureDP, UnsupportedEventError
from privreg.accountant import ACCOUNTANTS, Accountant, accountant_classes, make_accountant
from privreg.accountant.rdp import ORDERS, pure_dp_rdp
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core import accounting
from privreg.core.accounting import AccountantType, AccountingHandler
from privreg.core.events import EVENT_TYPES


@pytest.fixture(autouse=True)
def _clean_tables():
    """Plugins install into process-wide tables: restore them after each test."""
    saved = dict(accounting._HANDLERS), dict(accounting._ACCOUNTANTS), dict(EVENT_TYPES)
    yield
    for table, before in zip((accounting._HANDLERS, accounting._ACCOUNTANTS, EVENT_TYPES), saved):
        table.clear()
        table.update(before)


@pytest.fixture
def coin():
    """A fresh plugin event type whose lower() guarantee is PureDP(epsilon)."""

    @privreg.event_type("test_ext_coin")
    @attrs.frozen(kw_only=True)
    class Coin(PrivacyEvent):
        epsilon: float = attrs.field()

        def lower(self):
            return PureDP(epsilon=self.epsilon)

    return Coin


class PureSum(Accountant):
    """A plugin accountant: sums the epsilons of pure-DP releases."""

    name = "test_pure_sum"
    handlers: ClassVar[dict] = {PureDP: lambda acc, e: e.epsilon}

    def __init__(self, *, neighbouring="add_remove"):
        super().__init__(neighbouring=neighbouring)
        self.total = 0.0

    def _add(self, cost, count):
        self.total += count * cost

    def _epsilon(self, delta):
        return self.total

    def _delta(self, epsilon):
        return 0.0 if epsilon >= self.total else 1.0


class Plugin:
    """An in-process plugin object registering event types and accounting extensions."""

    def __init__(self, events=(), extensions=()):
        self.events, self.extensions = list(events), list(extensions)

    @privreg.hookimpl
    def privreg_register_event_types(self):
        return self.events

    @privreg.hookimpl
    def privreg_register_accountants(self):
        return self.extensions


def _load(**plugins):
    return privreg.load_registry(plugins=plugins, autoload=False)


def test_plugin_accountant_and_handlers_are_used(coin):
    with pytest.raises(privreg.PrivregValueError, match="unknown accountant 'test_pure_sum'"):
        make_accountant("test_pure_sum")
    registry = _load(
        x=Plugin(
            events=[coin],
            extensions=[
                AccountantType(name="test_pure_sum", factory=PureSum),
                AccountingHandler(accountant="test_pure_sum", event_type=coin, handler=lambda acc, e: e.epsilon / 2),
                AccountingHandler(accountant="basic", event_type=coin, handler=lambda acc, e: (e.epsilon / 4, 0.0)),
            ],
        )
    )
    assert registry.failures == () and registry.event_types == (coin,)
    assert accountant_classes()["test_pure_sum"] is PureSum

    acc = make_accountant("test_pure_sum")
    assert isinstance(acc, PureSum)
    acc.compose(Composed(events=[coin(epsilon=1.0), PureDP(epsilon=0.25)]), count=2)
    assert acc.total == 2 * (0.5 + 0.25)  # the plugin's handler (0.5), not the lowering (1.0)
    assert make_accountant("basic").compose(coin(epsilon=1.0)).total == (0.25, 0.0)
    # no handler for rdp: its lower() guarantee is accounted
    np.testing.assert_array_equal(make_accountant("rdp").compose(coin(epsilon=1.0)).curve(), pure_dp_rdp(1.0, ORDERS))


def test_duplicate_handler_fails_the_second_plugin_only(coin):
    first = AccountingHandler(accountant="basic", event_type=coin, handler=lambda acc, e: (e.epsilon, 0.0))
    second = AccountingHandler(accountant="basic", event_type=coin, handler=lambda acc, e: (0.0, 0.0))
    registry = _load(
        a=Plugin(events=[coin], extensions=[first]),
        b=Plugin(extensions=[AccountantType(name="test_from_b", factory=PureSum), second]),
    )
    assert [p.name for p in registry.plugins] == ["a"]
    (failure,) = registry.failures
    assert failure.name == "b" and failure.stage == "hooks"
    assert "DuplicateNameError" in failure.error and "plugin 'b'" in failure.error
    assert "test_from_b" not in accountant_classes()  # all or nothing
    assert make_accountant("basic").compose(coin(epsilon=0.5)).total == (0.5, 0.0)  # the first one


@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
def test_plugin_accountant_cannot_take_a_builtin_name(name):
    assert set(ACCOUNTANTS) == accounting.BUILTIN_ACCOUNTANTS
    registry = _load(x=Plugin(extensions=[AccountantType(name=name, factory=PureSum)]))
    (failure,) = registry.failures
    assert failure.name == "x" and f"an accountant named {name!r} exists already" in failure.error
    assert accountant_classes()[name] is ACCOUNTANTS[name]


def test_wrong_extension_values_fail_the_plugin():
    registry = _load(x=Plugin(extensions=[PureDP(epsilon=1.0)]))
    assert "not an AccountingHandler or AccountantType" in registry.failures[0].error
    with pytest.raises(privreg.PrivregTypeError):
        AccountingHandler(accountant="basic", event_type=PureDP(epsilon=1.0), handler=len)
    with pytest.raises(privreg.PrivregTypeError):
        AccountingHandler(accountant="basic", event_type=PureDP, handler="not callable")


def _boom(exc):
    def handler(acc, event):
        raise exc

    return handler


BAD_HANDLERS = [
    pytest.param("basic", lambda acc, e: (math.nan, 0.0), "not finite", id="basic-nan"),
    pytest.param("basic", lambda acc, e: (1.0, math.inf), "not finite", id="basic-inf-delta"),
    pytest.param("basic", lambda acc, e: (-1.0, 0.0), "not finite", id="basic-negative"),
    pytest.param("basic", lambda acc, e: 0.5, "not finite", id="basic-not-a-pair"),
    pytest.param("optimal", lambda acc, e: (0.5, 0.0, 1.0), "not finite", id="optimal-triple"),
    pytest.param("zcdp", lambda acc, e: math.nan, "not finite", id="zcdp-nan"),
    pytest.param("zcdp", lambda acc, e: (0.1, 0.0), "not finite", id="zcdp-not-a-number"),
    pytest.param("gdp", lambda acc, e: "0.5", "not finite", id="gdp-string"),
    pytest.param("rdp", lambda acc, e: np.full(ORDERS.size, math.nan), "not finite", id="rdp-nan"),
    pytest.param("rdp", lambda acc, e: np.ones(3), "not finite", id="rdp-wrong-length"),
    pytest.param("pld", lambda acc, e: 0.5, "not finite", id="pld-not-a-pld"),
    pytest.param("basic", lambda acc, e: None, "no bound", id="basic-none"),
    pytest.param("basic", _boom(ZeroDivisionError("float division by zero")), "ZeroDivisionError", id="raises-arith"),
    pytest.param("zcdp", _boom(ValueError("math domain error")), "ValueError", id="raises-value"),
    pytest.param("rdp", _boom(KeyError("sigma")), "KeyError", id="raises-plugin-bug"),
]


@pytest.mark.parametrize("name, handler, why", BAD_HANDLERS)
def test_handler_that_cannot_price_makes_the_accountant_refuse(coin, name, handler, why):
    registry = _load(
        x=Plugin(events=[coin], extensions=[AccountingHandler(accountant=name, event_type=coin, handler=handler)])
    )
    assert registry.failures == ()
    acc = make_accountant(name)
    good = Gaussian(sigma=2.0) if name == "gdp" else PureDP(epsilon=0.5)  # a leaf it supports
    event = Composed(events=[good, coin(epsilon=1.0)])
    assert not acc.supports(event) and acc.unsupported(event) == coin(epsilon=1.0)
    with pytest.raises(UnsupportedEventError, match=why) as info:
        acc.compose(event)
    assert "test_ext_coin" in str(info.value)
    assert acc.compositions == 0 and acc.epsilon(0.5) == make_accountant(name).epsilon(0.5)  # nothing added
    acc.compose(good)  # still usable


def test_session_refuses_a_release_no_filter_can_price(coin):
    _load(
        x=Plugin(
            events=[coin],
            extensions=[AccountingHandler(accountant="basic", event_type=coin, handler=lambda acc, e: (math.nan, 0.0))],
        )
    )
    session = BudgetSession(budget=PrivacyBudget(epsilon=10.0), filters=("basic",))
    with pytest.raises(privreg.BudgetExceededError, match="cannot account for 'test_ext_coin'"):
        session.charge(coin(epsilon=1.0), mechanism="coin", parameters={})
    assert session.ledger.head()[0] == 0 and session.remaining().epsilon == 10.0
