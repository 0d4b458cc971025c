"""The checks every plugin should carry (run with the plugin installed): privreg's contract
suite on its items, then what is particular to this plugin (its event's accounting)."""

import math

import numpy as np
import pytest
from privreg_template import hooks
from privreg_template.event import GeometricHistogram, exact_rho
from privreg_template.mechanism import NoisyHistogram

import privreg
from privreg import PureDP, UnsupportedEventError
from privreg.accountant import make_accountant
from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options
from privreg.testing import contract_params

EPSILONS = [0.05, 0.5, 1.0, 3.0]
#: The default accountants that can account for the event; gdp refuses it (no handler, and
#: no GDP bound for PureDP either).
ACCOUNTING = [n for n in DEFAULT_ACCOUNTANTS if n != "gdp"]
DELTAS = [1e-9, 1e-6, 1e-3]


@pytest.fixture(autouse=True, scope="module")
def _registered():
    """Load the plugin, which installs its accounting handler (as privreg itself does)."""
    registry = privreg.load_registry(plugins={"template": hooks}, autoload=False)
    assert not registry.failures, registry.failures


def _accountant(name, neighbouring="add_remove"):
    return make_accountant(name, **accountant_options(name, event_delta=1e-7, neighbouring=neighbouring))


@pytest.mark.parametrize("item,check", contract_params({"template": hooks}))
def test_privreg_contract(item, check, privreg_contract):
    """privreg's contract suite (privreg.testing) on every item of the plugin: charge
    before draw, no failure after the charge on extreme inputs, data-free errors, JSON
    events, a short empirical audit, the workflow's charges, ..."""
    privreg_contract(item, check)


def test_event_claims_the_epsilon_of_the_noise_drawn():
    mech = NoisyHistogram(epsilon=0.3)
    assert mech.privacy_event().epsilon >= 1 / mech.noise_scale  # rounded up, never down
    assert mech.privacy_event().epsilon <= 0.3


def test_event_lowers_to_pure_dp():
    event = GeometricHistogram(epsilon=0.7)
    assert event.to_dict() == {"kind": "template_geometric_histogram", "epsilon": 0.7}
    assert event.lower() == PureDP(epsilon=0.7)
    with pytest.raises(privreg.PrivregValueError):
        GeometricHistogram(epsilon=-1.0)


def _renyi(epsilon, alpha):
    """D_alpha between the outputs on counts 0 and 1, summed over the geometric pmf itself."""
    z = np.arange(-int(800 / epsilon), int(800 / epsilon) + 1)
    log_norm = math.log(-math.expm1(-epsilon)) - math.log1p(math.exp(-epsilon))
    log_p, log_q = log_norm - epsilon * np.abs(z), log_norm - epsilon * np.abs(z - 1)
    return float(np.logaddexp.reduce(alpha * log_p + (1 - alpha) * log_q)) / (alpha - 1)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_exact_rho_bounds_every_renyi_divergence_and_is_tight(epsilon):
    rho = exact_rho(None, GeometricHistogram(epsilon=epsilon))
    for alpha in (1.0001, 1.1, 1.5, 2.0, 4.0, 16.0, 256.0):
        assert _renyi(epsilon, alpha) <= rho * alpha * (1 + 1e-9), alpha
    assert _renyi(epsilon, 1.0001) / 1.0001 == pytest.approx(rho, rel=1e-3)  # the KL divergence
    assert rho < epsilon**2 / 2  # tighter than the lowering


@pytest.mark.parametrize("name", DEFAULT_ACCOUNTANTS)
def test_every_default_accountant_accounts_for_the_event_or_refuses_cleanly(name):
    event = GeometricHistogram(epsilon=1.0)
    acc = _accountant(name)
    if name not in ACCOUNTING:
        assert not acc.supports(event)
        with pytest.raises(UnsupportedEventError, match="template_geometric_histogram"):
            acc.compose(event)
        assert acc.compositions == 0
        return
    assert acc.supports(event)
    eps = acc.compose(event, count=3).epsilon(1e-6)
    assert 0 < eps < math.inf
    if name == "basic":
        assert acc.total == (3.0, 0.0)
    if name == "zcdp":
        assert acc.rho == pytest.approx(3 * math.tanh(0.5))  # the handler, not eps^2 / 2


@pytest.mark.parametrize("name", ACCOUNTING)
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_lowered_bound_is_never_tighter_than_the_handler(name, epsilon):
    event = GeometricHistogram(epsilon=epsilon)
    exact, lowered = _accountant(name), _accountant(name)
    exact.compose(event, count=5)
    lowered.compose(event.lower(), count=5)
    for delta in DELTAS:
        assert exact.epsilon(delta) <= lowered.epsilon(delta) * (1 + 1e-12), delta
    if name == "zcdp":
        assert exact.epsilon(1e-6) < lowered.epsilon(1e-6)


def test_replace_one_budget_uses_group_privacy_on_the_lowered_guarantee():
    acc = _accountant("zcdp", neighbouring="replace_one").compose(GeometricHistogram(epsilon=1.0))
    assert acc.rho == pytest.approx(0.5 * 2.0**2)  # PureDP(2 eps), eps^2 / 2
