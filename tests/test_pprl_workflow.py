"""The pprl workflow end to end (paper 004), its CLI path without a budget, and the
``charges=False`` declaration that path relies on."""

from __future__ import annotations

import json

import pytest

from privreg.cli.main import main
from privreg.core.charging import NoReleases
from privreg.core.errors import BudgetExceededError
from privreg.core.events import PureDP
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.registry import default_registry
from privreg.core.workflow import WorkflowContext
from privreg.plugins.pprl import workflow as pprl_workflow_module
from privreg.plugins.pprl.schema import PSEUDOPEOPLE_NAMES_SCHEMA
from privreg.plugins.pprl.workflow import pprl_workflow, prepare_parties

SMALL = dict(
    profile="paper",
    data="synthetic",
    parties=3,
    records=80,
    lsh_groups=8,
    lsh_bits=10,
    key_bits=512,
    insecure_small_keys=True,
    workers=1,
)


def test_workflow_links_generated_parties_and_reports_quality():
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=5))
    res = pprl_workflow(context=ctx, **SMALL)
    m = res.metrics
    assert m["parties"] == ["P1", "P2", "P3"] and m["true_groups"] == 40  # overlap 0.5 of 80 entities
    assert 0 < m["linked_groups"] <= m["candidates"]
    assert m["correct"] <= m["linked_groups"] and m["correct"] <= m["true_groups"]
    assert m["recall"] == pytest.approx(m["correct"] / m["true_groups"])
    assert m["precision"] == pytest.approx(m["correct"] / m["linked_groups"])
    assert m["error_rate"] == pytest.approx(1 - m["precision"])
    assert m["comparisons"] <= m["required_pairs"]
    assert m["recall"] <= m["pair_completeness"] <= 1 and 0 < m["reduction_ratio"] < 1
    assert m["block_size"]["min"] >= 3 and m["block_size"]["max"] >= m["block_size"]["median"]
    assert "recall" in res.summary and "distances-r1" in res.summary
    assert m["profile"] == "paper" and 0 <= m["pairwise_recall"] <= 1
    assert not ctx.charger.charges


def test_pseudopeople_parties_are_matched_on_names(monkeypatch):
    """--data pseudopeople pairs its samples with the names schema (SSA has no address)."""
    loaded = object()
    monkeypatch.setattr(pprl_workflow_module, "load_pseudopeople", lambda: loaded)
    linkage, schema = prepare_parties(data="pseudopeople", parties=3, records=10, corruption=0.0, rng=None)
    assert linkage is loaded
    assert schema == PSEUDOPEOPLE_NAMES_SCHEMA


def test_small_keys_need_the_insecure_flag():
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=5))
    with pytest.raises(ValueError, match="insecure_small_keys"):
        pprl_workflow(context=ctx, **{**SMALL, "insecure_small_keys": False})


def test_weak_secret_file_is_refused(tmp_path):
    weak = tmp_path / "secret"
    weak.write_bytes(b"password")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=5))
    with pytest.raises(ValueError, match="secret_file"):
        pprl_workflow(context=ctx, **SMALL, secret_file=weak)


def test_registered_with_charges_false():
    item = default_registry().get("pprl")
    assert item.plugin == "pprl" and item.charges is False


def test_no_releases_charger_refuses_any_charge():
    charger = NoReleases("pprl")
    with pytest.raises(BudgetExceededError, match="charges=False"):
        charger.charge(PureDP(epsilon=1.0), mechanism="laplace", parameters={})
    assert charger.charges == ()


def test_cli_runs_without_a_budget_and_refuses_one(capsys, tmp_path):
    argv = [
        "run",
        "pprl",
        "--profile",
        "paper",
        "--records",
        "60",
        "--lsh-groups",
        "8",
        "--lsh-bits",
        "10",
        "--key-bits",
        "512",
        "--insecure-small-keys",
        "true",
        "--workers",
        "1",
        "--output",
        str(tmp_path / "a"),
        "--insecure-seed",
        "3",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "nothing charged" in out and "recall" in out
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["workflow"] == "pprl" and not (tmp_path / "a" / "ledger.sqlite").exists()
    argv[-3] = str(tmp_path / "b")
    assert main([*argv, "--budget-epsilon", "1"]) == 2
    assert "releases nothing differentially private" in capsys.readouterr().err


def test_recommended_profile_is_the_default_and_states_its_leakage():
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=7))
    res = pprl_workflow(context=ctx, data="synthetic", records=60, key_bits=512, insecure_small_keys=True, workers=1)
    m = res.metrics
    assert m["profile"] == "recommended" and m["dice_threshold"] == 0.75
    assert m["true_groups"] > 0 and m["correct"] <= m["linked_groups"]
    assert m["recall"] == pytest.approx(m["correct"] / m["true_groups"])
    assert m["precision"] == pytest.approx(m["correct"] / m["linked_groups"])
    assert m["pairwise_recall"] <= m["pair_completeness"] + 1e-12
    assert m["decisions"] >= m["candidates"] > 0 and 0 < m["reduction_ratio"] < 1
    # the default blocking="relay": the linkage unit's view as learns() states it
    assert "in an order it cannot map to records or bands" in res.summary and "cmp-base" in res.summary
    assert "estimates their Dice similarity" not in res.summary
    assert not ctx.charger.charges


def test_the_workflow_keeps_traffic_sizes_but_not_payloads(monkeypatch):
    """A second decoded copy of every message grew without bound at 3 x 100,000."""
    transcripts = []
    run = pprl_workflow_module.run_protocol

    def spy(proto, **kw):
        res = run(proto, **kw)
        transcripts.append(res.transcript)
        return res

    monkeypatch.setattr(pprl_workflow_module, "run_protocol", spy)
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=7))
    pprl_workflow(context=ctx, data="synthetic", records=30, key_bits=512, insecure_small_keys=True, workers=1)
    (transcript,) = transcripts
    # the default comparison="dealer" sends no ciphertext: sizes and step names are kept
    assert transcript.total().bytes > 0 and any(m.step.endswith(".out") for m in transcript.messages)
    assert all(m.payload is None for m in transcript.messages)


@pytest.mark.parametrize("param", ["lsh_groups", "threshold", "rule", "max_block_products"])
def test_paper_parameters_do_not_apply_to_the_recommended_profile(param):
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=7))
    value = {"lsh_groups": 4, "threshold": 3, "rule": "all", "max_block_products": 10}[param]
    with pytest.raises(ValueError, match=f"{param}.*apply only to --profile paper"):
        pprl_workflow(context=ctx, records=60, key_bits=512, insecure_small_keys=True, **{param: value})
