"""``privreg --version`` and ``privreg --help`` answer without numpy, scipy or the budget
stack (issue #29): a test on imports, not on time (the time is benchmarks/startup.py's).

Each probe runs the console script's entry point in a fresh interpreter, since this test
process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import privreg
import privreg.core
from privreg.budget.filters import FILTERS
from privreg.budget.session import DEFAULT_FILTERS
from privreg.cli.main import main

ROOT = Path(__file__).resolve().parents[1]

# loaded only once a command needs them: numeric stacks, accountants, budgets, plugins
HEAVY = ("numpy", "scipy", "pandas", "dp_accounting", "privreg.accountant", "privreg.budget", "privreg.plugins")

PROBE = """
import json, sys
from privreg.cli.main import main
sys.argv = ["privreg", *json.loads(sys.argv[1])]
try:
    code = main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def probe(*argv: str) -> tuple[str, int, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    report = json.loads(out.stderr.strip().splitlines()[-1])
    return out.stdout, report["code"], set(report["modules"])


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)}


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_numeric_stack(flag):
    out, code, modules = probe(flag)
    assert code == 0
    assert "privreg.cli.main" in modules  # the probe really ran the CLI
    assert heavy(modules) == set()
    assert (f"privreg {privreg.__version__}" in out) if flag == "--version" else ("ledger" in out and "run" in out)


def test_a_command_still_loads_what_it_needs():
    """The probe can see heavy imports: listing the plugins loads them."""
    _, code, modules = probe("plugins")
    assert code == 0
    assert {"numpy", "privreg.plugins.standard.hooks"} <= modules


def test_lazy_core_names_are_exactly_its_all():
    """privreg.core resolves its names on first use: each public name is found, and
    privreg re-exports the same ones."""
    assert sorted(privreg.core._MODULE_OF) == sorted(privreg.core.__all__)
    for name in privreg.core.__all__:
        assert getattr(privreg, name) is getattr(privreg.core, name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = privreg.core.no_such_name


def test_ledger_init_help_and_choices_read_the_filters_lazily(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["ledger", "init", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"one of {', '.join(sorted(FILTERS))};" in out
    assert f"default {', '.join(DEFAULT_FILTERS)}, as BudgetSession uses" in out
    assert main(["ledger", "init", str(tmp_path / "l.sqlite"), "--epsilon", "1", "--filter", "nope"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err and "'basic'" in err
    assert main(["ledger", "init", str(tmp_path / "l.sqlite"), "--epsilon", "1", "--filter", "basic"]) == 0
