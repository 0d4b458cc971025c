"""The examples run as documented."""

import runpy
import sys

import pytest
from conftest import ROOT


def test_compose_example_releases_under_one_budget_and_audits(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["compose.py"])
    runpy.run_path(str(ROOT / "examples" / "compose.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "refused: one more" in out and "Nothing was released or charged" in out
    assert "4 release(s)" in out and "flags: none" in out
    for label in ("rows", "sum(age)", "sum(hours) by sex", "top occupation"):
        assert label in out


@pytest.mark.slow
def test_analysis_plan_example_prints_cost_and_accuracy_before_the_releases(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["analysis_plan.py"])
    runpy.run_path(str(ROOT / "examples" / "analysis_plan.py"), run_name="__main__")
    out = capsys.readouterr().out
    first_release = out.index("\nmean(age) = ")
    before, after = out[:first_release], out[first_release:]
    for noise in ("laplace", "gaussian"):
        assert f"{noise} plan: cost epsilon 1 at delta 1e-06" in before
    assert before.count("mean(age)  ") == 2 and before.count(" data units") >= 4  # the table, in data units
    assert "between the true 0.4" in before and "quantiles" in before  # the median, in value units
    results = [line.split(" = ")[0] for line in after.strip().splitlines() if " = " in line]
    assert results == ["mean(age)", "quantile[0.5](age)", "count by education", "count by sex", "sum(hours-per-week)"]
    assert "spent: epsilon 1.1 at delta 1e-06" in out  # the pilot count's 0.1 and the plan's 1
