"""Contracts every registered item passes: the built-in registry plus the template plugin.

New plugins get these checks for free: the items are enumerated from the registry.
"""

import json
import sys

import numpy as np
import pytest

import privreg
from privreg import (
    BudgetExceededError,
    EventLog,
    InsecureReproducibleRandom,
    ItemKind,
    Mechanism,
    PrivacyEvent,
    Randomizer,
    Sensitivity,
    WorkflowContext,
    WorkflowResult,
    event_from_json,
)
from conftest import TEMPLATE


def _registry():
    sys.path.insert(0, str(TEMPLATE))
    try:
        from privreg_template import hooks
    finally:
        sys.path.remove(str(TEMPLATE))
    base = privreg.load_registry()
    extra = privreg.load_registry(plugins={"template": hooks}, autoload=False)
    return [*base.items(), *extra.items()]


ITEMS = _registry()


def _of(kind):
    return [pytest.param(i, id=i.name) for i in ITEMS if i.kind is kind]


class CountingRandom(InsecureReproducibleRandom):
    """Counts draws, to prove that the charge happens before any noise is drawn."""

    def __init__(self, seed=0):
        super().__init__(seed=seed)
        self.draws = 0

    def randbits(self, k):
        self.draws += 1
        return super().randbits(k)

    def random_bytes(self, n):
        self.draws += 1
        return super().random_bytes(n)


class SpyCharger(EventLog):
    def __init__(self, rng, refuse=False):
        super().__init__()
        self.rng, self.refuse, self.draws_at_charge = rng, refuse, []

    def charge(self, event, **kwargs):
        self.draws_at_charge.append(self.rng.draws)
        if self.refuse:
            raise BudgetExceededError("refused by test")
        super().charge(event, **kwargs)


def test_registry_is_not_empty():
    kinds = {i.kind for i in ITEMS}
    assert {ItemKind.MECHANISM, ItemKind.RANDOMIZER, ItemKind.SENSITIVITY, ItemKind.WORKFLOW} <= kinds


@pytest.mark.parametrize("item", [pytest.param(i, id=i.name) for i in ITEMS])
def test_item_is_documented_and_cited(item):
    assert item.summary and "\n" not in item.summary
    assert item.citation.authors and item.citation.title and item.citation.year >= 1900
    assert all(p.doc for p in item.params)
    assert item.description, f"{item.name}: the factory's docstring must state its guarantees"
    assert item.plugin


@pytest.mark.parametrize("item", _of(ItemKind.MECHANISM))
def test_mechanism_contract(item):
    mech = item.create(item.example.params)
    assert isinstance(mech, Mechanism)
    event = mech.privacy_event()
    assert isinstance(event, PrivacyEvent) and event == mech.privacy_event()
    assert event_from_json(event.to_json()) == event
    json.dumps(mech.parameters())

    rng = CountingRandom()
    charger = SpyCharger(rng)
    x, y = item.example.neighbours
    release = mech.release(x, charger=charger, rng=rng, label="contract")
    assert charger.draws_at_charge == [0], "noise was drawn before the release was charged"
    assert charger.events == (event,) and release.event == event
    (charge,) = charger.charges
    assert charge.label == "contract" and charge.randomness["reproducible"] is True
    mech.release(y, charger=charger, rng=rng)

    same = [mech.release(x, charger=EventLog(), rng=InsecureReproducibleRandom(seed=5)).output
            for _ in range(2)]
    np.testing.assert_array_equal(same[0], same[1])


def _canonical(output):
    """A value-based key for any output (dicts by sorted items, arrays by their bytes)."""
    if isinstance(output, dict):
        return repr(sorted((repr(k), float(v)) for k, v in output.items()))
    return np.asarray(output, dtype=np.float64).tobytes()


@pytest.mark.parametrize("item", _of(ItemKind.MECHANISM))
def test_release_many_charges_once_before_sampling(item):
    mech = item.create(item.example.params)
    rng = CountingRandom()
    charger = SpyCharger(rng)
    out = mech.release_many(item.example.neighbours[0], 20, charger=charger, rng=rng)
    assert charger.draws_at_charge == [0] and len(out.output) == 20
    assert charger.events == (privreg.SelfComposed(event=mech.privacy_event(), count=20),)
    assert len({_canonical(o) for o in out.output}) > 1, "draws must be independent"


@pytest.mark.parametrize("item", _of(ItemKind.MECHANISM))
def test_refused_charge_releases_nothing(item):
    mech = item.create(item.example.params)
    rng = CountingRandom()
    charger = SpyCharger(rng, refuse=True)
    with pytest.raises(BudgetExceededError):
        mech.release(item.example.neighbours[0], charger=charger, rng=rng)
    assert rng.draws == 0


@pytest.mark.parametrize("item", _of(ItemKind.MECHANISM))
def test_invalid_input_is_refused_before_charging(item):
    mech = item.create(item.example.params)
    log = EventLog()
    with pytest.raises(privreg.PrivregError):
        mech.release(np.array([np.nan]), charger=log)
    assert log.charges == ()


@pytest.mark.parametrize("item", _of(ItemKind.MECHANISM) + _of(ItemKind.RANDOMIZER))
def test_charger_must_be_given(item):
    obj = item.create(item.example.params)
    call = obj.release if isinstance(obj, Mechanism) else obj.randomize
    with pytest.raises(TypeError):
        call(item.example.neighbours[0])  # no charger: refuse, never release unaccounted
    with pytest.raises(privreg.PrivregTypeError):
        call(item.example.neighbours[0], charger=object())


@pytest.mark.parametrize("item", _of(ItemKind.RANDOMIZER))
def test_randomizer_contract(item):
    rz = item.create(item.example.params)
    assert isinstance(rz, Randomizer) and rz.epsilon0 > 0
    x, y = item.example.neighbours
    population = np.concatenate([np.asarray(x)] * 5000 + [np.asarray(y)] * 5000)
    rng = CountingRandom()
    charger = SpyCharger(rng)
    out = rz.randomize(population, charger=charger, rng=rng)
    assert charger.draws_at_charge == [0]
    assert len(out.reports) == len(population)
    assert out.event == privreg.LocalDP(epsilon0=rz.epsilon0, randomizer=rz.name)

    shuffled = rz.randomize(population, charger=charger, rng=rng, shuffle=True)
    assert shuffled.event == privreg.Shuffled(event=out.event, num_reports=len(population))
    assert charger.events[-1] == shuffled.event

    refusing = SpyCharger(rng := CountingRandom(), refuse=True)
    with pytest.raises(BudgetExceededError):
        rz.randomize(population, charger=refusing, rng=rng)
    assert rng.draws == 0
    if rz.has_estimator:
        est = rz.estimate(out.reports)
        assert est.counts.shape == est.variance.shape and (est.variance >= 0).all()


@pytest.mark.parametrize("item", _of(ItemKind.SENSITIVITY))
def test_sensitivity_contract(item):
    sens = item.create(item.example.params)
    assert isinstance(sens, Sensitivity)
    if not sens.data_dependent:
        assert np.isfinite(sens.bound()) and sens.bound() > 0


@pytest.mark.parametrize("item", _of(ItemKind.WORKFLOW))
def test_workflow_contract(item, tmp_path, template_on_path):
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1), output_dir=tmp_path)
    result = item.run(ctx, item.example.params)
    assert isinstance(result, WorkflowResult) and result.summary
    if item.charges:
        assert ctx.charger.charges, "a workflow that releases must charge its releases"
    else:
        assert not ctx.charger.charges, "a workflow declared charges=False must not charge"
    assert all(isinstance(c.event, PrivacyEvent) for c in ctx.charger.charges)
    for path in result.outputs.values():
        assert path.is_file() and tmp_path in path.parents


@pytest.mark.parametrize("item", _of(ItemKind.PROTOCOL))
def test_protocol_contract(item):
    from privreg.core.protocol import Protocol

    proto = item.create(item.example.params)
    assert isinstance(proto, Protocol) and proto.caveats.strip()
    names = [p.name for p in proto.parties()]
    assert len(set(names)) == len(names) and set(proto.learns()) == set(names)
    assert all(text.strip() for text in proto.learns().values())
