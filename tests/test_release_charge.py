"""``Mechanism.release`` inlines ``_charge`` (the scalar releases' hot path): for every
registered mechanism the ledger row a release writes must be the row ``_charge`` writes
(event, mechanism name, parameters, label, randomness, stated guarantee), so that the two
copies of the charge cannot drift apart."""

from __future__ import annotations

import attrs
import pytest

import privreg
from privreg import EventLog, InsecureReproducibleRandom, ItemKind
from privreg.core.mechanism import Mechanism, Release
from privreg.mechanisms.gaussian import GaussianMechanism

REGISTRY = privreg.load_registry()
MECHANISMS = [pytest.param(i, id=i.name) for i in REGISTRY.items(ItemKind.MECHANISM)]


def _row(log: EventLog) -> dict[str, object]:
    (charge,) = log.charges
    return attrs.asdict(attrs.evolve(charge, timestamp=0.0), recurse=False)


def _rows(mech: Mechanism, value: object) -> tuple[dict[str, object], dict[str, object]]:
    by_release, by_charge = EventLog(), EventLog()
    mech.release(value, charger=by_release, rng=InsecureReproducibleRandom(seed=3), label="row")
    mech._charge(value, mech.privacy_event(), by_charge, InsecureReproducibleRandom(seed=3), "row")
    return _row(by_release), _row(by_charge)


def test_every_mechanism_kind_is_checked():
    assert len(MECHANISMS) >= 10
    assert {"gaussian", "laplace", "discrete-gaussian", "discrete-laplace"} <= {p.values[0].name for p in MECHANISMS}


@pytest.mark.parametrize("item", MECHANISMS)
def test_release_charges_what_charge_charges(item):
    mech = item.create(item.example.params)
    value = item.example.neighbours[0]
    for _ in range(2):  # the first release fills an immutable mechanism's caches; the second reads them
        by_release, by_charge = _rows(mech, value)
        assert by_release == by_charge
        assert by_release["label"] == "row" and by_release["randomness"]["seed"] == 3  # type: ignore[index]
        assert by_release["parameters"] == mech.parameters() and by_release["event"] == mech.privacy_event()


def test_a_stated_guarantee_is_in_both_rows():
    """The Gaussian states the (epsilon, delta) it was asked for: both paths record it."""
    mech = GaussianMechanism(epsilon=1.0, delta=1e-6, sensitivity=1.0)
    by_release, by_charge = _rows(mech, 0.5)
    assert by_release["stated"] == by_charge["stated"] == mech.stated_guarantee() is not None


def test_release_builds_the_attrs_release():
    """release fills Release through its slots: the very object the attrs constructor makes."""
    mech = GaussianMechanism(epsilon=1.0, delta=1e-6, sensitivity=1.0)
    out = mech.release(0.5, charger=EventLog(), rng=InsecureReproducibleRandom(seed=1))
    again = mech.release(0.5, charger=EventLog(), rng=InsecureReproducibleRandom(seed=1))
    assert type(out) is Release and out == again
    assert out == Release(output=again.output, event=again.event, mechanism=again.mechanism)
    assert (out.output, out.event, out.mechanism) == (again.output, mech.privacy_event(), "gaussian")
    assert hash(out) == hash(again) and repr(out) == repr(again)
