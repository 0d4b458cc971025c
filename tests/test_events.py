"""Privacy events: validation, JSON round trips, traversal and the event_type registry."""

import json
import math

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg import DuplicateNameError, PrivregError, PrivregTypeError, PrivregValueError
from privreg.core import events as ev
from privreg.core.events import (
    EVENT_TYPES,
    EXPONENTIAL_VARIANTS,
    SHUFFLE_BOUNDS,
    ZCDP,
    ApproxDP,
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    LocalDP,
    NoPrivacyLoss,
    PoissonSampled,
    PrivacyEvent,
    PureDP,
    SampledWithoutReplacement,
    SelfComposed,
    Shuffled,
    event_from_dict,
    event_from_json,
    event_type,
    iter_events,
)

# per event type (the tests are parametrized over all of them), so fewer than the default
SETTINGS = settings(max_examples=60)

# --- strategies ---------------------------------------------------------------------

nonneg = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False)
deltas = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
probabilities = st.floats(min_value=0.0, max_value=1.0)
counts = st.integers(min_value=1, max_value=2**70)  # JSON ints are unbounded

local_dp = st.builds(LocalDP, epsilon0=nonneg, randomizer=st.text(max_size=8))

LEAVES = {
    NoPrivacyLoss: st.builds(NoPrivacyLoss, reason=st.text(max_size=10)),
    PureDP: st.builds(PureDP, epsilon=nonneg),
    ApproxDP: st.builds(ApproxDP, epsilon=nonneg, delta=deltas),
    ZCDP: st.builds(ZCDP, rho=nonneg),
    Laplace: st.builds(Laplace, scale=positive, sensitivity=positive),
    Gaussian: st.builds(Gaussian, sigma=positive, sensitivity=positive),
    DiscreteLaplace: st.builds(DiscreteLaplace, scale=positive, sensitivity=counts),
    DiscreteGaussian: st.builds(DiscreteGaussian, sigma=positive, sensitivity=counts, dimension=counts),
    Exponential: st.builds(Exponential, epsilon=positive, variant=st.sampled_from(EXPONENTIAL_VARIANTS)),
    LocalDP: local_dp,
}


def _sampled_without_replacement(child):
    return st.integers(1, 10**9).flatmap(
        lambda n: st.builds(
            SampledWithoutReplacement, source_size=st.just(n), sample_size=st.integers(1, n), event=child
        )
    )


def combinators(child):
    return {
        Composed: st.builds(Composed, events=st.lists(child, max_size=5)),
        SelfComposed: st.builds(SelfComposed, event=child, count=counts),
        PoissonSampled: st.builds(PoissonSampled, sampling_probability=probabilities, event=child),
        SampledWithoutReplacement: _sampled_without_replacement(child),
        Shuffled: st.builds(Shuffled, event=local_dp, num_reports=counts, bound=st.sampled_from(SHUFFLE_BOUNDS)),
    }


any_event = st.recursive(st.one_of(*LEAVES.values()), lambda kids: st.one_of(*combinators(kids).values()), max_leaves=6)
STRATEGIES = {**LEAVES, **combinators(any_event)}
CORE_TYPES = {cls for cls in EVENT_TYPES.values() if cls.__module__ == "privreg.core.events"}


# --- round trips --------------------------------------------------------------------


def test_every_core_event_type_has_a_strategy():
    assert set(STRATEGIES) == CORE_TYPES
    assert {cls.kind for cls in STRATEGIES} == {k for k, c in EVENT_TYPES.items() if c in CORE_TYPES}


@pytest.mark.parametrize("cls", sorted(STRATEGIES, key=lambda c: c.kind), ids=lambda c: c.kind)
@SETTINGS
@given(data=st.data())
def test_each_event_type_round_trips(cls, data):
    event = data.draw(STRATEGIES[cls])
    assert type(event) is cls
    assert event_from_json(event.to_json()) == event
    assert event_from_dict(event.to_dict()) == event
    assert event.to_dict()["kind"] == cls.kind


@settings(max_examples=150)  # nested trees: a much larger space than one event type
@given(any_event)
def test_nested_events_round_trip_and_keep_their_hash(event):
    back = event_from_json(event.to_json())
    assert back == event
    assert hash(back) == hash(event)
    assert back.to_json() == event.to_json()
    assert event_from_dict(event.to_dict()) == event


def _equivalent_inputs(d):
    """The same event data spelled differently: integral floats as ints, numbers as numpy."""
    if isinstance(d, list):
        return [_equivalent_inputs(x) for x in d]
    if isinstance(d, dict):
        return {k: _equivalent_inputs(d[k]) for k in reversed(list(d))}
    if isinstance(d, float):
        return int(d) if d.is_integer() and abs(d) < 2**53 else np.float64(d)
    if isinstance(d, int) and d < 2**62:
        return np.int64(d)
    return d


@SETTINGS
@given(any_event)
def test_to_json_is_canonical(event):
    text = event.to_json()
    same = event_from_dict(_equivalent_inputs(event.to_dict()))
    assert same == event
    assert same.to_json() == text
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize(
    "make",
    [
        lambda z: PureDP(epsilon=z),
        lambda z: ApproxDP(epsilon=1.0, delta=z),
        lambda z: PoissonSampled(sampling_probability=z, event=PureDP(epsilon=1.0)),
    ],
    ids=["epsilon", "delta", "sampling_probability"],
)
def test_negative_zero_serialises_like_zero(make):
    assert make(-0.0) == make(0.0)
    assert make(-0.0).to_json() == make(0.0).to_json()


@pytest.mark.parametrize("variant", EXPONENTIAL_VARIANTS)
def test_every_exponential_variant_round_trips(variant):
    event = Exponential(epsilon=0.5, variant=variant)
    assert event_from_json(event.to_json()) == event
    assert event.bounded_range == (variant in ("exponential", "report_noisy_max_gumbel"))
    others = {Exponential(epsilon=0.5, variant=x) for x in EXPONENTIAL_VARIANTS if x != variant}
    assert event not in others


def test_defaults_and_noise_multipliers():
    assert Laplace(scale=2.0) == Laplace(scale=2, sensitivity=1)
    assert Laplace(scale=3.0, sensitivity=2.0).noise_multiplier == 1.5
    assert Gaussian(sigma=3.0, sensitivity=2.0).noise_multiplier == 1.5
    assert Exponential(epsilon=1.0).variant == "exponential"
    assert event_from_json('{"kind":"gaussian","sigma":2}') == Gaussian(sigma=2.0, sensitivity=1.0)


# --- bad input ----------------------------------------------------------------------

PURE = PureDP(epsilon=1.0)
nan, inf = math.nan, math.inf

BAD = [
    (lambda: PureDP(epsilon=nan), PrivregValueError, "epsilon"),
    (lambda: PureDP(epsilon=inf), PrivregValueError, "epsilon"),
    (lambda: PureDP(epsilon=-inf), PrivregValueError, "epsilon"),
    (lambda: PureDP(epsilon=-0.5), PrivregValueError, "epsilon"),
    (lambda: PureDP(epsilon=True), PrivregTypeError, "epsilon"),
    (lambda: PureDP(epsilon="1"), PrivregTypeError, "epsilon"),
    (lambda: ZCDP(rho=np.float64(nan)), PrivregValueError, "rho"),
    (lambda: LocalDP(epsilon0=-1), PrivregValueError, "epsilon0"),
    (lambda: LocalDP(epsilon0=1, randomizer=3), PrivregTypeError, "randomizer"),
    (lambda: NoPrivacyLoss(reason=None), PrivregTypeError, "reason"),
    (lambda: Exponential(epsilon=0.0), PrivregValueError, "epsilon"),
    (lambda: Exponential(epsilon=1.0, variant="gumbel"), PrivregValueError, "variant"),
    (lambda: ApproxDP(epsilon=1, delta=1), PrivregValueError, "delta"),
    (lambda: ApproxDP(epsilon=1, delta=-0.1), PrivregValueError, "delta"),
    (lambda: ApproxDP(epsilon=1, delta=nan), PrivregValueError, "delta"),
    (lambda: ApproxDP(epsilon=1, delta=False), PrivregTypeError, "delta"),
    (lambda: Laplace(scale=0), PrivregValueError, "scale"),
    (lambda: Gaussian(sigma=1, sensitivity=-1), PrivregValueError, "sensitivity"),
    (lambda: SelfComposed(event=PURE, count=0), PrivregValueError, "count"),
    (lambda: SelfComposed(event=PURE, count=2.0), PrivregTypeError, "count"),
    (lambda: SelfComposed(event=PURE, count=True), PrivregTypeError, "count"),
    (lambda: SelfComposed(event=PURE.to_dict(), count=1), PrivregTypeError, "event"),
    (lambda: PoissonSampled(sampling_probability=1.5, event=PURE), PrivregValueError, "sampling_probability"),
    (lambda: PoissonSampled(sampling_probability=-0.1, event=PURE), PrivregValueError, "sampling_probability"),
    (lambda: SampledWithoutReplacement(source_size=5, sample_size=6, event=PURE), PrivregValueError, "sample_size"),
    (lambda: SampledWithoutReplacement(source_size=0, sample_size=0, event=PURE), PrivregValueError, "source_size"),
    (lambda: Shuffled(event=PURE, num_reports=10), PrivregTypeError, "Shuffled.event"),
    (lambda: Shuffled(event=LocalDP(epsilon0=1), num_reports=0), PrivregValueError, "num_reports"),
    (lambda: Shuffled(event=LocalDP(epsilon0=1), num_reports=5, bound="fmt99"), PrivregValueError, "bound"),
    (lambda: Composed(events=[PURE, "pure_dp"]), PrivregTypeError, "events[1]"),
    (lambda: Composed(events="abc"), PrivregTypeError, "events"),
    (lambda: Composed(events=PURE), PrivregTypeError, "events"),
]


@pytest.mark.parametrize("make, error, argument", BAD)
def test_bad_arguments_are_rejected_naming_the_argument(make, error, argument):
    with pytest.raises(error) as info:
        make()
    assert argument in str(info.value)


def test_argument_errors_are_privreg_errors_and_builtin_errors():
    assert issubclass(PrivregValueError, PrivregError) and issubclass(PrivregValueError, ValueError)
    assert issubclass(PrivregTypeError, PrivregError) and issubclass(PrivregTypeError, TypeError)


def test_sample_size_error_names_both_sizes():
    with pytest.raises(PrivregValueError, match=r"sample_size \(7\).*source_size \(3\)"):
        SampledWithoutReplacement(source_size=3, sample_size=7, event=PURE)


# --- decoding errors ----------------------------------------------------------------


def test_unknown_kind_is_named():
    with pytest.raises(PrivregValueError, match="warp_drive"):
        event_from_dict({"kind": "warp_drive", "epsilon": 1.0})
    with pytest.raises(PrivregValueError, match="None"):
        event_from_dict({"epsilon": 1.0})


def test_unknown_nested_kind_is_named():
    with pytest.raises(PrivregValueError, match="warp_drive"):
        event_from_json('{"kind":"composed","events":[{"kind":"warp_drive"}]}')


def test_unknown_field_is_named():
    with pytest.raises(PrivregValueError, match="sigma"):
        event_from_dict({"kind": "pure_dp", "epsilon": 1.0, "sigma": 2.0})


@pytest.mark.parametrize("data", [[("kind", "pure_dp")], "pure_dp", None, 3])
def test_non_mapping_is_refused(data):
    with pytest.raises(PrivregTypeError, match="mapping"):
        event_from_dict(data)


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '"pure_dp"',
        '{"kind":"self_composed","event":5,"count":1}',
        '{"kind":"composed","events":["pure_dp"]}',
    ],
)
def test_non_mapping_json_is_refused(text):
    with pytest.raises(PrivregTypeError, match="mapping"):
        event_from_json(text)


@pytest.mark.parametrize(
    "text, argument",
    [
        ('{"kind":"pure_dp","epsilon":NaN}', "epsilon"),  # json.loads accepts NaN
        ('{"kind":"pure_dp","epsilon":-1}', "epsilon"),
        ('{"kind":"pure_dp","epsilon":true}', "epsilon"),
        ('{"kind":"shuffled","event":{"kind":"pure_dp","epsilon":1},"num_reports":3}', "Shuffled.event"),
    ],
)
def test_decoding_validates_every_field(text, argument):
    with pytest.raises(PrivregError, match=argument.replace(".", r"\.")):
        event_from_json(text)


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "pure_dp"},  # missing required field: attrs' own 'missing argument' TypeError
        {"kind": ["pure_dp"]},  # unhashable kind: dict lookup fails
        {"kind": "composed", "events": 5},  # not iterable
    ],
    ids=["missing-field", "unhashable-kind", "events-not-a-list"],
)
def test_malformed_event_data_raises_privreg_errors(data):
    with pytest.raises(PrivregError):
        event_from_dict(data)


# --- values, traversal --------------------------------------------------------------


def test_events_are_frozen():
    event = SelfComposed(event=PURE, count=2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.count = 3
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        PURE.epsilon = 2.0
    assert event.count == 2 and PURE.epsilon == 1.0


def test_events_are_hashable_values():
    a = Composed(events=[PureDP(epsilon=1), Gaussian(sigma=2)])
    b = Composed(events=(PureDP(epsilon=1.0), Gaussian(sigma=2.0, sensitivity=1.0)))
    assert a == b and hash(a) == hash(b)
    assert len({a, b, Composed(events=[Gaussian(sigma=2), PureDP(epsilon=1)])}) == 2
    assert isinstance(a.events, tuple)


def test_iter_events_is_depth_first_preorder():
    a, b, c = PureDP(epsilon=1), LocalDP(epsilon0=2), Gaussian(sigma=3)
    shuffled = Shuffled(event=b, num_reports=10)
    sampled = PoissonSampled(sampling_probability=0.1, event=shuffled)
    inner = SelfComposed(event=a, count=3)
    root = Composed(events=[inner, sampled, c])
    assert list(iter_events(root)) == [root, inner, a, sampled, shuffled, b, c]
    assert list(iter_events(a)) == [a]


def test_children():
    a, b = PureDP(epsilon=1), ZCDP(rho=0.5)
    assert Composed(events=[a, b, a]).children() == (a, b, a)
    assert Composed(events=[]).children() == ()
    assert SelfComposed(event=a, count=4).children() == (a,)
    swr = SampledWithoutReplacement(source_size=10, sample_size=2, event=b)
    assert swr.children() == (b,)
    assert a.children() == () and NoPrivacyLoss().children() == ()


# --- the event_type registry ----------------------------------------------------------


@pytest.fixture
def clean_event_types():
    """Remove the kinds a test registers, so EVENT_TYPES is unchanged for other tests."""
    before = dict(EVENT_TYPES)
    yield
    for kind in set(EVENT_TYPES) - set(before):
        del EVENT_TYPES[kind]
    assert before == EVENT_TYPES


def test_event_type_registers_a_round_trippable_kind(clean_event_types):
    @event_type("test.rounds")
    @attrs.frozen(kw_only=True)
    class Rounds(PrivacyEvent):
        rounds: int = attrs.field()

    assert EVENT_TYPES["test.rounds"] is Rounds and Rounds.kind == "test.rounds"
    event = Composed(events=[Rounds(rounds=3), PURE])
    assert event_from_json(event.to_json()) == event
    assert event_type("test.rounds")(Rounds) is Rounds  # re-registering the same class is fine


def test_duplicate_kind_names_both_classes(clean_event_types):
    @event_type("test.dup")
    @attrs.frozen(kw_only=True)
    class First(PrivacyEvent):
        pass

    @attrs.frozen(kw_only=True)
    class Second(PrivacyEvent):
        pass

    with pytest.raises(DuplicateNameError) as info:
        event_type("test.dup")(Second)
    assert f"{__name__}.{First.__qualname__}" in str(info.value)
    assert f"{__name__}.{Second.__qualname__}" in str(info.value)
    assert EVENT_TYPES["test.dup"] is First
    assert Second.kind == ""


def test_reimported_module_redefines_its_kind(clean_event_types):
    def define():  # the same source executed twice, as when a plugin module is re-imported
        @event_type("test.reimported")
        @attrs.frozen(kw_only=True)
        class Again(PrivacyEvent):
            x: float = 0.0

        return Again

    first, second = define(), define()
    assert first is not second and EVENT_TYPES["test.reimported"] is second
    assert event_from_json(second(x=1.0).to_json()) == second(x=1.0)


def test_core_kinds_cannot_be_taken_over(clean_event_types):
    @attrs.frozen(kw_only=True)
    class Impostor(PrivacyEvent):
        epsilon: float = 0.0

    with pytest.raises(DuplicateNameError, match=r"privreg\.core\.events\.PureDP.*Impostor"):
        event_type("pure_dp")(Impostor)
    assert EVENT_TYPES["pure_dp"] is PureDP


def test_event_type_refuses_bad_kinds_and_classes(clean_event_types):
    with pytest.raises(PrivregValueError, match="kind"):
        event_type("has space")
    with pytest.raises(PrivregTypeError, match="PrivacyEvent"):
        event_type("test.plain")(type("Plain", (), {}))
    with pytest.raises(PrivregTypeError, match="attrs"):
        event_type("test.noattrs")(type("NoAttrs", (PrivacyEvent,), {}))
    assert "test.plain" not in EVENT_TYPES and "test.noattrs" not in EVENT_TYPES


def test_module_exports_every_core_type():
    assert {getattr(ev, cls.__name__) for cls in CORE_TYPES} == CORE_TYPES
    assert {cls.__name__ for cls in CORE_TYPES} <= set(ev.__all__)
