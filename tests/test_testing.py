"""privreg.testing catches what it claims to: deliberately broken mechanisms, defined here,
fail each check with a message that says what to fix, and their repaired twin passes.

Every draw is seeded (InsecureReproducibleRandom) and hypothesis runs derandomized, so
each test is deterministic. The audits run at alpha = 1e-6: a correct mechanism is flagged
with probability at most 1e-6 per audit.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

import privreg
from privreg import Mechanism, PrivacyEvent, PrivregValueError, RandomSource
from privreg.audit import audit_item, audit_mechanism, extreme_neighbours
from privreg.audit.sampling import AuditInconclusive
from privreg.cli.audit import EXIT_VIOLATION, add_parser
from privreg.core.events import DiscreteLaplace
from privreg.core.hookspecs import hookimpl
from privreg.core.items import Citation, Example, Param, RegistryItem
from privreg.core.randomness import InsecureReproducibleRandom, resolve_random
from privreg.core.workflow import WorkflowResult
from privreg.noise.fast import discrete_laplace_many
from privreg.testing import (
    CHECKS,
    ContractError,
    Settings,
    check_item,
    contract_params,
    error_pairs,
    fixed_extremes,
    items_of,
    run_check,
)

# LeakyCounts also wraps around silently just below 2**63 (numpy warns): part of its brokenness
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in scalar add:RuntimeWarning")

# ---------------------------------------------------------------------------------------
# The mechanisms. GoodCounts is correct; LeakyCounts has the three defects of issue #16;
# the others break one contract each.
# ---------------------------------------------------------------------------------------

MAX_COUNT = 2**62


def _noise(epsilon: float, size: int, rng: RandomSource) -> np.ndarray:
    return discrete_laplace_many(1 / Fraction(epsilon), size, rng)


@attrs.frozen(kw_only=True)
class GoodCounts(Mechanism):
    """Per-key counts with two-sided geometric noise of scale 1/epsilon: epsilon-DP when
    one user changes one count by at most 1. Counts in [0, 2**62] (checked before the
    charge), keys released in sorted order, errors that name the rule, not the data."""

    name: ClassVar[str] = "good-counts"
    epsilon: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=1 / self.epsilon, sensitivity=1)

    def validate_input(self, value: Any) -> dict[Any, int]:
        if not isinstance(value, Mapping):
            raise privreg.PrivregTypeError("value must be a mapping key -> count")
        out = {}
        for key, count in value.items():
            if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or not 0 <= count <= MAX_COUNT:
                raise PrivregValueError("value must map keys to integer counts in [0, 2**62]; some do not")
            out[key] = int(count)
        return dict(sorted(out.items()))

    def _sample(self, value: dict[Any, int], rng: RandomSource, data: Any) -> dict[Any, int]:
        noise = _noise(self.epsilon, len(value), rng)
        return {key: count + int(z) for (key, count), z in zip(value.items(), noise)}


@attrs.frozen(kw_only=True)
class LeakyCounts(GoodCounts):
    """BROKEN on purpose, three ways (issue #16): the noisy count is formed as an int64
    *after* the charge, which raises OverflowError past 2**63; keys come back in the
    caller's order; an invalid count is quoted in the error. Otherwise as GoodCounts."""

    name: ClassVar[str] = "leaky-counts"

    def validate_input(self, value: Any) -> dict[Any, float]:
        if not isinstance(value, Mapping):
            raise privreg.PrivregTypeError(f"value must be a mapping key -> count; got {value!r}")
        for key, count in value.items():
            if not isinstance(count, (int, float, np.integer, np.floating)) or not count >= 0:
                raise PrivregValueError(f"count of {key!r} must be >= 0; got {count!r}")  # quotes the data
        return dict(value)  # the caller's order

    def _sample(self, value: dict[Any, float], rng: RandomSource, data: Any) -> dict[Any, int]:
        noise = _noise(self.epsilon, len(value), rng)
        return {key: int(np.int64(round(count)) + z) for (key, count), z in zip(value.items(), noise)}


@attrs.frozen(kw_only=True)
class DrawsFirst(GoodCounts):
    """BROKEN: draws from the source before the charge."""

    name: ClassVar[str] = "draws-first"

    def release(self, value: Any, *, charger: Any, rng: Any = None, data: Any = None, label: str = "") -> Any:
        rng = resolve_random(rng)
        rng.randbits(8)  # e.g. a random tie-break decided before charging
        return super().release(value, charger=charger, rng=rng, data=data, label=label)


_GLOBAL = np.random.default_rng(1)


@attrs.frozen(kw_only=True)
class IgnoresRng(GoodCounts):
    """BROKEN: noise from a generator of its own, not from the rng it is given."""

    name: ClassVar[str] = "ignores-rng"

    def _sample(self, value: dict[Any, int], rng: RandomSource, data: Any) -> dict[Any, int]:
        return {key: count + int(_GLOBAL.integers(-3, 4)) for key, count in value.items()}


@attrs.frozen(kw_only=True)
class NanParameters(GoodCounts):
    """BROKEN: its ledger parameters are not strict JSON."""

    name: ClassVar[str] = "nan-parameters"

    def parameters(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "bound": math.nan}


@attrs.frozen(kw_only=True)
class Overclaiming(GoodCounts):
    """BROKEN: noise for epsilon 4, charged as epsilon 1."""

    name: ClassVar[str] = "overclaiming"

    def _sample(self, value: dict[Any, int], rng: RandomSource, data: Any) -> dict[Any, int]:
        noise = _noise(4 * self.epsilon, len(value), rng)
        return {key: count + int(z) for (key, count), z in zip(value.items(), noise)}


@attrs.frozen(kw_only=True)
class WrapsAround(Mechanism):
    """BROKEN: a scalar count cast to int64 after the charge (2**64 - 1 becomes -1)."""

    name: ClassVar[str] = "wraps-around"
    epsilon: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=1 / self.epsilon, sensitivity=1)

    def validate_input(self, value: Any) -> Any:
        arr = np.asarray(value)
        if arr.ndim or arr.dtype.kind not in "iu":
            raise PrivregValueError("value must be one integer count")
        return arr

    def _sample(self, value: Any, rng: RandomSource, data: Any) -> int:
        return int(value.astype(np.int64) + _noise(self.epsilon, 1, rng)[0])


def undocumented(*, epsilon: float) -> GoodCounts:
    return GoodCounts(epsilon=epsilon)


def _factory(cls: type) -> Any:
    def make(*, epsilon: float) -> Any:
        return cls(epsilon=epsilon)

    make.__doc__ = cls.__doc__
    return make


NEIGHBOURS = ({"a": 10, "b": 3}, {"a": 11, "b": 3})
CITE = Citation(authors="Dwork, McSherry, Nissim, Smith", title="Calibrating noise to sensitivity", year=2006)
EPS = (Param(name="epsilon", type=float, doc="privacy parameter", minimum=0, exclusive_minimum=True),)


def _mechanism(name: str, factory: Any, neighbours: Any = NEIGHBOURS) -> RegistryItem:
    return RegistryItem(
        name=name,
        kind="mechanism",
        summary="counts per key (privreg.testing's own tests)",
        citation=CITE,
        factory=factory,
        params=EPS,
        example=Example(params={"epsilon": 1.0}, neighbours=neighbours),
    )


def silent_workflow(*, context: Any) -> WorkflowResult:
    """BROKEN: declared charges=True, releases a count without charging it."""
    return WorkflowResult(summary="count = 42")


def not_a_sensitivity() -> Any:
    """BROKEN: builds a float, not a Sensitivity."""
    return 1.0


def not_a_protocol() -> Any:
    """BROKEN: builds a dict, not a Protocol."""
    return {}


class _Silent(privreg.Party):
    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, channel: Any) -> Any:
        return None


class HiddenParty(privreg.Protocol):
    """BROKEN: learns() says nothing of party b."""

    caveats = "a test protocol"

    def parties(self) -> Any:
        return [_Silent("a"), _Silent("b")]

    def learns(self) -> Any:
        return {"a": "nothing"}


class _Plugin:
    @hookimpl
    def privreg_register_mechanisms(self):  # type: ignore[no-untyped-def]
        return [
            _mechanism("good-counts", _factory(GoodCounts)),
            _mechanism("leaky-counts", _factory(LeakyCounts)),
            _mechanism("draws-first", _factory(DrawsFirst)),
            _mechanism("ignores-rng", _factory(IgnoresRng)),
            _mechanism("nan-parameters", _factory(NanParameters)),
            _mechanism("overclaiming", _factory(Overclaiming)),
            _mechanism("wraps-around", _factory(WrapsAround), neighbours=(5, 6)),
            _mechanism("undocumented", undocumented),
        ]

    @hookimpl
    def privreg_register_sensitivities(self):  # type: ignore[no-untyped-def]
        return [
            RegistryItem(
                name="not-a-sensitivity",
                kind="sensitivity",
                summary="a float",
                citation=CITE,
                factory=not_a_sensitivity,
                example=Example(),
            )
        ]

    @hookimpl
    def privreg_register_protocols(self):  # type: ignore[no-untyped-def]
        return [
            RegistryItem(
                name="hidden-party",
                summary="a party whose view is not documented",
                citation=CITE,
                factory=HiddenParty,
                example=Example(),
            ),
            RegistryItem(
                name="not-a-protocol",
                kind="protocol",
                summary="a dict",
                citation=CITE,
                factory=not_a_protocol,
                example=Example(),
            ),
        ]

    @hookimpl
    def privreg_register_workflows(self):  # type: ignore[no-untyped-def]
        return [
            RegistryItem(
                name="silent-workflow",
                kind="workflow",
                summary="counts without charging",
                citation=CITE,
                factory=silent_workflow,
                example=Example(),
            )
        ]


@pytest.fixture(scope="module")
def registry() -> Any:
    return privreg.load_registry(plugins={"broken": _Plugin()}, autoload=False)


def _fails(item: RegistryItem, check: str) -> ContractError:
    with pytest.raises(ContractError) as info:
        run_check(item, check)
    err = info.value
    assert err.check == check and err.item == item.name
    assert f"fails the {check!r} check" in str(err) and "Fix: " in str(err)
    return err


# ---------------------------------------------------------------------------------------
# The repaired mechanism passes everything: the checks do not fail by themselves.
# ---------------------------------------------------------------------------------------


def test_the_repaired_mechanism_passes_every_check(registry):
    report = check_item(registry.get("good-counts"))
    assert report.passed and set(report.checks) == {
        c for c, (_, k) in CHECKS.items() if privreg.ItemKind.MECHANISM in k
    }


# ---------------------------------------------------------------------------------------
# One test per check: a broken item fails it, and the message says what to fix.
# ---------------------------------------------------------------------------------------


def test_raising_after_the_charge_on_large_values_fails_no_raise_after_charge(registry):
    err = _fails(registry.get("leaky-counts"), "no-raise-after-charge")
    assert "OverflowError" in err.problem and "after the charge" in err.problem
    assert "declared neighbour {'a': 10, 'b': 3} releases normally" in err.problem
    assert "validate_input" in err.fix and "before the charge" in err.fix and "overflow" in err.fix


def test_wrapping_around_fails_no_raise_after_charge(registry):
    err = _fails(registry.get("wraps-around"), "no-raise-after-charge")
    assert "release(18446744073709551615) returned" in err.problem and "opposite sign" in err.problem
    assert "refuse integers beyond int64" in err.fix


def test_keys_in_input_order_fail_canonical_order(registry):
    err = _fails(registry.get("leaky-counts"), "canonical-order")
    assert "different orders" in err.problem and "same seed" in err.problem
    assert "sorted" in err.fix and "caller's order" in err.fix


def test_quoting_the_value_fails_data_free_errors(registry):
    err = _fails(registry.get("leaky-counts"), "data-free-errors")
    assert "differ only in the offending value" in err.problem and "get different errors" in err.problem
    assert "never the value" in err.fix


@pytest.mark.slow
def test_failing_after_the_charge_fails_the_audit_on_extreme_neighbours(registry):
    err = _fails(registry.get("leaky-counts"), "audit")
    # past 2**63 the int64 sum raises OverflowError or wraps around (numpy's scalar overflow
    # follows the process's warning filters): either way the pair fails
    assert "extreme neighbour pair(s) fail" in err.problem and "(epsilon = inf)" in err.problem
    assert "after its charge" in err.problem and "before the charge" in err.fix


def test_too_little_noise_fails_the_audit_on_declared_neighbours(registry):
    """Noise of epsilon 4 charged as 1; caught with 2000 samples (false alarm <= 1e-6)."""
    err = _fails(registry.get("overclaiming"), "audit")
    assert "declared neighbours" in err.problem and "empirical lower bound" in err.problem
    assert "noise is too small" in err.fix


def test_drawing_before_the_charge_fails_charge_before_draw(registry):
    err = _fails(registry.get("draws-first"), "charge-before-draw")
    assert "before it was charged" in err.problem and "charge before any draw" in err.fix


def test_noise_from_elsewhere_fails_reproducible(registry):
    err = _fails(registry.get("ignores-rng"), "reproducible")
    assert "same seed differ" in err.problem and "rng argument" in err.fix


def test_parameters_that_are_not_json_fail_event_json(registry):
    err = _fails(registry.get("nan-parameters"), "event-json")
    assert "strict JSON" in err.problem and "JSON-safe" in err.fix


def test_a_missing_docstring_fails_documented(registry):
    err = _fails(registry.get("undocumented"), "documented")
    assert "docstring" in err.problem and "guarantee" in err.fix


def test_a_workflow_that_does_not_charge_fails_workflow(registry):
    err = _fails(registry.get("silent-workflow"), "workflow")
    assert "without charging" in err.problem and "context.charger" in err.fix


def test_a_factory_of_the_wrong_type_fails_sensitivity_and_protocol(registry):
    assert "not a Sensitivity" in _fails(registry.get("not-a-sensitivity"), "sensitivity").problem
    assert "not a Protocol" in _fails(registry.get("not-a-protocol"), "protocol").problem


def test_a_protocol_that_hides_what_a_party_learns_fails_protocol(registry):
    err = _fails(registry.get("hidden-party"), "protocol")
    assert "document what every party learns" in err.problem and "unique name" in err.fix


def test_every_check_has_a_failing_test_here():
    tested = {
        "neighbouring",  # tests/test_testing_subtle.py
        "exact",  # tests/test_testing_subtle.py
        "no-raise-after-charge",
        "canonical-order",
        "data-free-errors",
        "audit",
        "charge-before-draw",
        "reproducible",
        "event-json",
        "documented",
        "workflow",
        "sensitivity",
        "protocol",
    }
    assert tested == set(CHECKS)


# ---------------------------------------------------------------------------------------
# check_item, contract_params and the inputs.
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_check_item_reports_every_failure_with_its_fix(registry):
    with pytest.raises(ContractError) as info:
        check_item(registry.get("leaky-counts"), checks=["documented", "canonical-order", "data-free-errors"])
    text = str(info.value)
    assert "2 of 3 checks fail" in text and "Fix: see each check above" in text
    for check in ("canonical-order", "data-free-errors"):
        assert f"fails the {check!r} check" in text and text.count("Fix: ") == 3
    broken = ("no-raise-after-charge", "canonical-order", "data-free-errors", "audit")
    report = check_item(registry.get("leaky-counts"), raise_on_failure=False)
    assert not report.passed and tuple(report.failures) == broken
    assert all(isinstance(e, ContractError) and e.fix for e in report.failures.values())


def test_contract_params_marks_strict_xfails_and_refuses_stale_ones(registry):
    params = contract_params(registry, xfail={("leaky-counts", "audit"): "known"})
    ids = {p.id for p in params}
    assert "leaky-counts:canonical-order" in ids and "wraps-around:canonical-order" not in ids
    (marked,) = [p for p in params if p.id == "leaky-counts:audit"]
    (mark,) = marked.marks
    assert mark.name == "xfail" and mark.kwargs["strict"] is True and mark.kwargs["raises"] is ContractError
    with pytest.raises(PrivregValueError, match="not run"):
        contract_params(registry, xfail={("leaky-counts", "no-such-check"): "typo"})
    with pytest.raises(PrivregValueError, match="unknown checks"):
        contract_params(registry, checks=["audit", "typo"])
    only = contract_params(items_of(registry), checks=["documented"])
    assert {p.id for p in only} == {f"{i.name}:documented" for i in registry.items()}


def test_run_check_refuses_unknown_and_inapplicable_checks(registry):
    with pytest.raises(PrivregValueError, match="check must be one of"):
        run_check(registry.get("good-counts"), "typo")
    with pytest.raises(PrivregValueError, match="does not apply"):
        run_check(registry.get("wraps-around"), "canonical-order")
    with pytest.raises(privreg.PrivregTypeError, match="rng_seed"):
        Settings(rng_seed=-1)


def test_error_pairs_differ_in_one_thing_only():
    """Each pair breaks one rule and differs in the value, the count, the position or the
    valid entries around it; never in the length or the rule."""
    pairs = error_pairs(np.array([3.0, 5.0, 2.0]), np.array([4.0, 5.0, 2.0]))
    assert {p.differs for p in pairs} == {"value", "count", "position", "context"}
    for p in pairs:
        a, b = np.asarray(p.first), np.asarray(p.second)
        assert a.shape == b.shape, p
        if p.differs == "context":  # the offending entry where the neighbours agree
            assert a[0] != b[0] and (a[1] == b[1] or (math.isnan(a[1]) and math.isnan(b[1])))
    assert any(p.rule == "wrong length" for p in pairs)
    keyed = error_pairs({"a": 10, "b": 3}, {"a": 11, "b": 3})
    assert any(p.differs == "position" and set(p.first) != set(p.second) for p in keyed)  # another key
    users = error_pairs(np.array([0]), np.array([1]), population=True)
    assert {p.differs for p in users} == {"value", "count", "position", "context"}
    assert any(p.rule == "beyond uint64" and np.asarray(p.first).dtype == object for p in users)
    assert {p.differs for p in error_pairs(0.0, 1.0)} == {"value"}  # a scalar has no count or position


def test_extreme_inputs_cover_the_edges_of_float_and_int64():
    floats = fixed_extremes(0.0, 1.0)
    for value in (2.0**53, 2.0**63, 1e308, 5e-324, 2.2250738585072014e-308):
        assert value in floats
    assert any(math.copysign(1, x) < 0 and x == 0 for x in floats)  # -0.0
    ints = fixed_extremes(5, 6)
    assert {2**63 - 1, 2**63, 2**64 - 1, -(2**63)} <= set(ints)
    mixed = fixed_extremes(np.zeros(3), np.ones(3))
    assert any(len({float(v) for v in x}) == 3 for x in mixed)  # vectors mixing extremes
    pairs = extreme_neighbours({"a": 10, "b": 3}, {"a": 11, "b": 3, "c": 1})
    assert ({"a": 2**63 - 1, "b": 2**63 - 8}, {"a": 2**63, "b": 2**63 - 8, "c": 1}) in pairs  # "c": one user's


@pytest.mark.slow
def test_hypothesis_is_imported_only_when_the_checks_run():
    code = "import sys, privreg.testing; assert 'hypothesis' not in sys.modules, 'imported eagerly'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ---------------------------------------------------------------------------------------
# privreg audit-mechanism: a value-dependent error is a violation, never a crash.
# ---------------------------------------------------------------------------------------


def test_audit_reports_a_release_failing_after_its_charge_with_the_pair():
    mech = LeakyCounts(epsilon=1.0)
    result = audit_mechanism(
        mech, neighbours=({"a": 10}, {"a": 1e300}), samples=1000, rng=InsecureReproducibleRandom(seed=1)
    )
    assert not result.passed and result.epsilon_lower_bound == math.inf
    assert result.neighbours == ("{'a': 10}", "{'a': 1e+300}")
    assert "OverflowError" in result.failure and "second neighbour ({'a': 1e+300})" in result.failure
    assert "the first released normally" in result.failure
    with pytest.raises(PrivregValueError, match="must be >= 0"):  # refused before the charge: bad input
        audit_mechanism(mech, neighbours=({"a": 10}, {"a": -1}), samples=1000)


def test_audit_item_on_given_neighbours(registry):
    item = registry.get("leaky-counts")
    assert audit_item(item, samples=2000, rng=InsecureReproducibleRandom(seed=2)).passed
    # the same error on both neighbours tells them apart no better than chance: inconclusive
    with pytest.raises(AuditInconclusive, match="failed alike on both neighbours"):
        audit_item(item, samples=1000, neighbours=({"a": 2.0**63}, {"a": 2.0**63 + 4096}))
    moved = audit_item(item, samples=1000, neighbours=({"a": 2.0**63 - 4096}, {"a": 2.0**63}))
    assert moved.failure and "second neighbour" in moved.failure and "first released normally" in moved.failure


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="privreg")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.mark.slow
def test_cli_reports_a_value_dependent_error_as_a_violation(capsys, monkeypatch, registry):
    monkeypatch.setattr("privreg.core.registry.default_registry", lambda: registry)
    code = _cli("audit-mechanism", "leaky-counts", "--samples", "1000", "--insecure-seed", "3", "--extreme")
    out, _ = capsys.readouterr()
    assert code == EXIT_VIOLATION
    # one pair raises on one side only (a violation), one raises alike on both (no evidence
    # either way); a third may wrap around instead of passing, as numpy's scalar overflow
    # follows the process's warning filters
    assert out.count("FAIL: a release raised after its charge") >= 1
    assert "failed alike on both neighbours (no evidence either way)" in out
    assert "1 violation(s)" in out or "2 violation(s)" in out
    # the pair that triggers it is named: 2**63 raises (2**63 - 1 may wrap around first)
    assert "9223372036854775808" in out and "after its charge on the" in out
    code = _cli("audit-mechanism", "leaky-counts", "--samples", "1000", "--neighbours", '{"a": 10}', '{"a": 1e300}')
    out, _ = capsys.readouterr()
    assert code == EXIT_VIOLATION and "FAIL: a release raised after its charge" in out
    assert "{'a': 10} and {'a': 1e+300}" in out


def test_cli_neighbours_must_be_json(monkeypatch, registry):
    monkeypatch.setattr("privreg.core.registry.default_registry", lambda: registry)
    with pytest.raises(PrivregValueError, match="--neighbours FIRST must be a JSON value"):
        _cli("audit-mechanism", "good-counts", "--neighbours", "{a: 1}", "{}")
    assert _cli("audit-mechanism", "good-counts", "--samples", "1000", "--insecure-seed", "1", "--extreme") == 0


def test_audit_reports_a_randomizer_failing_after_its_charge():
    from privreg.audit import audit_randomizer
    from privreg.mechanisms.randomized_response import RandomizedResponse

    @attrs.frozen(kw_only=True)
    class FailsOnThree(RandomizedResponse):
        """BROKEN: randomizing category 3 raises after the charge."""

        def _randomize(self, inputs: np.ndarray, rng: RandomSource) -> np.ndarray:
            if (inputs == 3).any():
                raise ZeroDivisionError("category 3 has no alternative")
            return super()._randomize(inputs, rng)

    result = audit_randomizer(
        FailsOnThree(epsilon=1.0, k=4),
        neighbours=(np.array([0]), np.array([3])),
        samples=1000,
        rng=InsecureReproducibleRandom(seed=4),
    )
    assert not result.passed and "ZeroDivisionError" in result.failure
    assert (
        "second neighbour (array([3], dtype=int64))" in result.failure and "first released normally" in result.failure
    )
