"""The examples run as documented."""

import runpy
import sys

from conftest import ROOT


def test_compose_example_releases_under_one_budget_and_audits(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["compose.py"])
    runpy.run_path(str(ROOT / "examples" / "compose.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "refused: one more" in out and "Nothing was released or charged" in out
    assert "4 release(s)" in out and "flags: none" in out
    for label in ("rows", "sum(age)", "sum(hours) by sex", "top occupation"):
        assert label in out
