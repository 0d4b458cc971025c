"""Paper 000 workflow ``spam-filter`` and demo step (plugin ``spam``), loaded through the
registry as an installed plugin would be."""

from __future__ import annotations

import json

import pytest

from privreg.core.charging import EventLog
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.registry import load_registry
from privreg.core.workflow import WorkflowContext
from privreg.plugins.spam import hooks


@pytest.fixture(scope="module")
def registry():
    return load_registry(plugins={"spam": hooks}, autoload=False)


def test_example_runs_charges_and_reports(registry, tmp_path):
    item = registry.get("spam-filter")
    assert item.plugin == "spam" and "Pathak" in str(item.citation)
    log = EventLog()
    ctx = WorkflowContext(charger=log, rng=InsecureReproducibleRandom(seed=2), output_dir=tmp_path)
    res = item.run(ctx, item.example.params)
    assert len(log.charges) == 1  # one epoch of gradient noise, charged through GaussianMechanism
    assert res.metrics["counts"]["predicted_equal"] is True
    assert res.metrics["evaluation"]["agree_with_quantised_model"] == 1.0
    for row in ("2, 3", "4, 5", "9, 10", "12", "Total", "ciphertexts sent", "eq. (2)"):
        assert row in res.summary
    saved = json.loads(res.outputs["metrics"].read_text())
    assert saved["training"]["key_bits"] == 256 and res.outputs["model"].is_file()


def test_private_auc_equals_plaintext_without_dp(registry):
    item = registry.get("spam-filter")
    params = dict(
        item.example.params,
        dp="none",
        private_eval=0,
        space=256,
        hash="modulo",
        batch_size=8,
        eta=0.01,
        epochs=2,
        train=24,
        test=24,
    )
    res = item.run(WorkflowContext(rng=InsecureReproducibleRandom(seed=3)), params)
    a = res.metrics["auc"]
    assert a["private"] == pytest.approx(a["plaintext_link"], abs=1e-9)
    assert round(a["private"], 4) == round(a["plaintext_exact_sigmoid"], 4)
    assert res.metrics["max_weight_difference_vs_link_reference"] < 1e-7


def test_small_keys_need_the_explicit_flag(registry):
    item = registry.get("spam-filter")
    params = dict(item.example.params, insecure_small_keys=False, key_bits=1024)
    with pytest.raises(PrivregValueError, match="insecure_small_keys"):
        item.run(WorkflowContext(), params)
    with pytest.raises(PrivregValueError, match="not both"):
        item.run(WorkflowContext(), dict(item.example.params, input=str(hooks.__file__)))


@pytest.mark.slow
def test_demo_step_runs_with_a_2048_bit_key(registry):
    (step,) = registry.demo_steps()
    text = step.run(WorkflowContext(rng=InsecureReproducibleRandom(seed=4)))
    assert "2048-bit Paillier" in text and "match the prediction: True" in text and "100%" in text


def test_dp_run_fits_its_budget_session(registry):
    from privreg.budget.session import BudgetSession, PrivacyBudget

    item = registry.get("spam-filter")
    params = dict(item.example.params, epochs=2, epsilon=1.0, delta=1e-6, private_eval=0)
    with BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6)) as session:
        item.run(WorkflowContext(charger=session, rng=InsecureReproducibleRandom(seed=5)), params)
        assert len(session.ledger.rows()) == 2  # one charge per epoch, (epsilon/2, delta/2) each
        assert session.remaining().epsilon >= -1e-9


@pytest.mark.parametrize("reduction,k", [("pca", 6), ("lsh", 48)])
def test_reduced_features_through_the_protocol(registry, reduction, k):
    """PCA gives real-valued features (16-bit fixed point in the protocol); LSH bits."""
    item = registry.get("spam-filter")
    params = dict(
        item.example.params,
        dp="none",
        reduction=reduction,
        reduced_dim=k,
        space=1000,
        hash="modulo",
        train=30,
        test=30,
        eta=0.01,
        epochs=2,
        private_eval=3,
    )
    m = item.run(WorkflowContext(rng=InsecureReproducibleRandom(seed=6)), params).metrics
    assert m["data"]["features"] == k
    assert m["max_weight_difference_vs_link_reference"] < 1e-7 and m["counts"]["predicted_equal"]
    assert m["evaluation"]["agree_with_quantised_model"] == 1.0
