"""Contract for every registered event type (the built-in plugins' and the template's):
some default accountant accounts for it, and where an accountant has a handler for a type
that also declares a lower() guarantee, the lowered bound is never tighter than the
handler's (the handler is the exact one; the lowering only a fallback).

Instances are built from each type's attrs fields: a required field takes its value from
FIELD_VALUES (by name) or OVERRIDES (by kind), so a new event type with a new field name
fails here until a sample value is added.
"""

import math
import sys

import attrs
import pytest
from conftest import TEMPLATE

import privreg
from privreg import Gaussian, LocalDP, PureDP
from privreg.accountant import make_accountant
from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options
from privreg.core.events import EVENT_TYPES

DELTAS = (1e-9, 1e-6, 1e-3)


def _load():
    """The installed plugins, plus the template plugin (which ships its own event type)."""
    privreg.default_registry()
    sys.path.insert(0, str(TEMPLATE))
    try:
        from privreg_template import hooks
    finally:
        sys.path.remove(str(TEMPLATE))
    registry = privreg.load_registry(plugins={"template": hooks}, autoload=False)
    assert not registry.failures, registry.failures
    return dict(EVENT_TYPES)


TYPES = _load()

#: A sample value for a required field, by field name.
FIELD_VALUES = {
    "epsilon": 0.5,
    "delta": 1e-7,
    "rho": 0.05,
    "scale": 2.0,
    "sigma": 3.0,
    "sensitivity": 1,
    "epsilon0": 1.0,
    "count": 3,
    "sampling_probability": 0.1,
    "source_size": 1000,
    "sample_size": 10,
    "num_reports": 10_000,
    "event": Gaussian(sigma=3.0),
    "events": [PureDP(epsilon=0.25), Gaussian(sigma=3.0)],
}
#: Sample values that depend on the event type, by kind.
OVERRIDES = {
    "shuffled": {"event": LocalDP(epsilon0=1.0)},
    "sampled_without_replacement": {"event": LocalDP(epsilon0=1.0)},
}


def sample(cls):
    kwargs = {}
    for f in attrs.fields(cls):
        if f.default is not attrs.NOTHING:
            continue
        values = {**FIELD_VALUES, **OVERRIDES.get(cls.kind, {})}
        assert f.name in values, f"add a sample value for field {f.name!r} of event kind {cls.kind!r}"
        kwargs[f.name] = values[f.name]
    return cls(**kwargs)


def accountant(name, event):
    """A default accountant for the relation the event's guarantee holds for."""
    relation = event.neighbouring or "add_remove"
    return make_accountant(name, **accountant_options(name, event_delta=1e-6, neighbouring=relation))


def _lowered_pairs():
    """(event type, accountant): the accountant has a handler for the type and can
    account for the type's lower() guarantee."""
    pairs = []
    for kind, cls in sorted(TYPES.items()):
        event = sample(cls)
        lowered = event.lower()
        if lowered is None:
            continue
        for name in DEFAULT_ACCOUNTANTS:
            acc = accountant(name, event)
            if acc.handler(cls) is not None and acc.supports(lowered):
                pairs.append(pytest.param(cls, name, id=f"{kind}-{name}"))
    return pairs


LOWERED = _lowered_pairs()


def test_the_template_event_type_is_covered():
    assert "template_geometric_histogram" in TYPES
    assert "template_geometric_histogram-zcdp" in {p.id for p in LOWERED}


@pytest.mark.parametrize("cls", [pytest.param(c, id=k) for k, c in sorted(TYPES.items())])
def test_some_default_accountant_accounts_for_every_event_type(cls):
    event = sample(cls)
    assert privreg.event_from_json(event.to_json()) == event
    supported = {}
    for name in DEFAULT_ACCOUNTANTS:
        acc = accountant(name, event)
        if acc.supports(event):
            supported[name] = acc.compose(event, count=2).epsilon(1e-5)
    assert supported, f"no default accountant accounts for {event.to_json()}"
    assert any(math.isfinite(eps) for eps in supported.values()), supported


@pytest.mark.parametrize("cls, name", LOWERED)
def test_lowered_bound_is_never_tighter_than_the_handler(cls, name):
    event = sample(cls)
    exact = accountant(name, event).compose(event, count=4)
    lowered = accountant(name, event).compose(event.lower(), count=4)
    for delta in DELTAS:
        assert exact.epsilon(delta) <= lowered.epsilon(delta) * (1 + 1e-12), (
            f"{cls.kind}: its lower() guarantee is tighter than the {name} handler at delta={delta}: "
            f"one of them is wrong"
        )
