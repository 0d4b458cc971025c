"""The contract every accountant passes, for every event type (dp_accounting's pattern).

A new accountant or event type is covered by adding it to ACCOUNTANTS/EVENTS below; the
coverage test fails if a core event type is missing from EVENTS.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.accountant import ACCOUNTANTS, make_accountant
from privreg.core import PrivregTypeError, PrivregValueError, UnsupportedEventError
from privreg.core.events import (
    EVENT_TYPES,
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
    PureDP,
    SampledWithoutReplacement,
    SelfComposed,
    Shuffled,
)

EVENTS = [
    NoPrivacyLoss(reason="encrypted intermediate"),
    PureDP(epsilon=0.5),
    ApproxDP(epsilon=0.3, delta=1e-7),
    ZCDP(rho=0.05),
    Laplace(scale=2.0, sensitivity=1.0),
    Gaussian(sigma=3.0, sensitivity=1.5),
    DiscreteLaplace(scale=3.0, sensitivity=2),
    DiscreteGaussian(sigma=4.0, sensitivity=3),
    DiscreteGaussian(sigma=4.0, sensitivity=3, dimension=5),
    DiscreteLaplace(scale=9000.0, sensitivity=5000),  # above the exact-PLD limit
    Exponential(epsilon=0.4),
    Exponential(epsilon=0.4, variant="permute_and_flip"),
    LocalDP(epsilon0=1.0, randomizer="randomized-response"),
    PoissonSampled(sampling_probability=0.1, event=Gaussian(sigma=2.0)),
    PoissonSampled(sampling_probability=0.1, event=Laplace(scale=1.0)),
    PoissonSampled(sampling_probability=0.05, event=PureDP(epsilon=1.0)),
    SampledWithoutReplacement(source_size=1000, sample_size=50, event=Gaussian(sigma=2.0)),
    SampledWithoutReplacement(source_size=1000, sample_size=50, event=PureDP(epsilon=1.0)),
    Shuffled(event=LocalDP(epsilon0=1.0), num_reports=1000),
    Composed(events=[Laplace(scale=2.0), Gaussian(sigma=3.0)]),
    SelfComposed(event=PureDP(epsilon=0.1), count=3),
]

CONFIGS = {
    **{name: {} for name in ACCOUNTANTS},
    "basic-gauss": {"event_delta": 1e-8},
    "advanced-gauss": {"event_delta": 1e-8},
    "optimal-gauss": {"event_delta": 1e-8},
    "basic-subst": {"neighbouring": "substitution"},
    "rdp-subst": {"neighbouring": "substitution"},
}


def fresh(config):
    return make_accountant(config.split("-")[0], **CONFIGS[config])


# PLD composes by FFT: n separate compositions and one n-fold self-composition round
# differently in the last digits; everything else must agree to 1e-9.
def tolerance(config):
    return 1e-6 if config.startswith("pld") else 1e-9


def answers(acc):
    return acc.epsilon(1e-6), acc.delta(1.0)


def assert_close(a, b, rel):
    for x, y in zip(a, b):
        assert x == y or math.isclose(x, y, rel_tol=rel, abs_tol=1e-15), (a, b)


def test_every_core_event_type_is_exercised():
    core = {k for k, cls in EVENT_TYPES.items() if cls.__module__ == "privreg.core.events"}
    assert core <= {e.kind for e in EVENTS}


def test_every_accountant_supports_something_nontrivial():
    for config in CONFIGS:
        assert any(fresh(config).supports(e) for e in EVENTS if not isinstance(e, NoPrivacyLoss))


# PLD compositions by FFT take about a second each: n = 7 is slow for PLD, n = 3 stays fast.
SUPPORTED = [
    pytest.param(
        n,
        config,
        event,
        id=f"{n}-{config}-{i}-{event.kind}",
        marks=pytest.mark.slow if n == 7 and config.startswith("pld") else (),
    )
    for n in (3, 7)
    for config in CONFIGS
    for i, event in enumerate(EVENTS)
    if fresh(config).supports(event)
]


@pytest.mark.parametrize("n, config, event", SUPPORTED)
def test_count_repetition_and_self_composition_agree(config, event, n):
    by_count = fresh(config).compose(event, count=n)
    repeated = fresh(config)
    for _ in range(n):
        repeated.compose(event)
    nested = fresh(config).compose(SelfComposed(event=event, count=n))
    assert_close(answers(by_count), answers(repeated), tolerance(config))
    assert_close(answers(by_count), answers(nested), tolerance(config))
    if not isinstance(event, NoPrivacyLoss):
        single = answers(fresh(config).compose(event))
        assert by_count.epsilon(1e-6) >= single[0], "composition can only cost more"


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_unsupported_events_fail_cleanly_and_change_nothing(config, event):
    acc = fresh(config).compose(PureDP(epsilon=0.1)) if fresh(config).supports(PureDP(epsilon=0.1)) else fresh(config)
    before = answers(acc)
    mixed = Composed(events=[NoPrivacyLoss(), event])
    if acc.supports(mixed):
        return
    with pytest.raises(UnsupportedEventError) as info:
        acc.compose(mixed)
    assert repr(acc.unsupported(mixed).kind) in str(info.value)
    assert answers(acc) == before, "a refused event must not be partly composed"


@pytest.mark.parametrize("config", CONFIGS)
def test_dry_run_changes_nothing_and_fresh_accountant_spent_nothing(config):
    acc = fresh(config)
    assert acc.epsilon(1e-6) == 0.0
    for e in EVENTS:
        acc.supports(e)
    assert acc.epsilon(1e-6) == 0.0 and acc.compositions == 0


@pytest.mark.parametrize("config", CONFIGS)
def test_bad_arguments_are_refused(config):
    acc = fresh(config)
    for delta in (math.nan, 1.0, -0.1, math.inf):
        with pytest.raises(PrivregValueError, match="delta"):
            acc.epsilon(delta)
    for eps in (math.nan, -1.0, math.inf):
        with pytest.raises(PrivregValueError, match="epsilon"):
            acc.delta(eps)
    for count in (0, -1):
        with pytest.raises(PrivregValueError, match="count"):
            acc.compose(PureDP(epsilon=1.0), count=count)
    for count in (1.5, True):
        with pytest.raises(PrivregTypeError, match="count"):
            acc.compose(PureDP(epsilon=1.0), count=count)
    with pytest.raises(PrivregTypeError, match="event"):
        acc.compose("laplace")


def test_unknown_accountant_name():
    with pytest.raises(PrivregValueError, match="unknown accountant 'nope'"):
        make_accountant("nope")


MONOTONE = [e for e in EVENTS if not isinstance(e, (NoPrivacyLoss, SampledWithoutReplacement))]


@settings(max_examples=40)  # two compositions of up to 100 events an example
@given(
    config=st.sampled_from([c for c in CONFIGS if not c.startswith("pld")]),
    event=st.sampled_from(MONOTONE),
    n=st.integers(1, 50),
    extra=st.integers(1, 50),
)
def test_monotone_in_count(config, event, n, extra):
    if not fresh(config).supports(event):
        return
    small = fresh(config).compose(event, count=n)
    large = fresh(config).compose(event, count=n + extra)
    assert small.epsilon(1e-6) <= large.epsilon(1e-6) * (1 + 1e-12)
    assert small.delta(0.5) <= large.delta(0.5) * (1 + 1e-12) + 1e-300


@pytest.mark.slow
@settings(max_examples=8)  # PLD compositions by FFT: seconds an example
@given(
    event=st.sampled_from([e for e in MONOTONE if fresh("pld").supports(e)]),
    n=st.integers(1, 20),
    extra=st.integers(1, 20),
)
def test_pld_monotone_in_count(event, n, extra):
    small = fresh("pld").compose(event, count=n)
    large = fresh("pld").compose(event, count=n + extra)
    assert small.epsilon(1e-6) <= large.epsilon(1e-6) + 1e-9


def test_pld_models_only_one_dimensional_discrete_gaussians():
    one = DiscreteGaussian(sigma=4.0, sensitivity=3)
    many = DiscreteGaussian(sigma=4.0, sensitivity=3, dimension=5)
    pld = fresh("pld")
    assert pld.supports(one) and not pld.supports(many)
    assert fresh("rdp").compose(many).epsilon(1e-6) == fresh("rdp").compose(one).epsilon(1e-6)
