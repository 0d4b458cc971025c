"""One budget across runs: ``privreg ledger init``, ``privreg run ... --ledger``, reruns
into the folder of a failed run, and ``privreg run --help``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import privreg
from privreg.budget import runs
from privreg.budget.ledger import Ledger
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import RUN_KEY
from privreg.cli.main import main
from privreg.core.errors import PrivregValueError
from privreg.core.events import PureDP

COLUMN = "hours-per-week"  # the bounded-mean registry example's column and bounds


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "hours.csv"
    path.write_text(COLUMN + "\n" + "".join(f"{1 + (7 * i) % 98}\n" for i in range(300)), encoding="utf-8")
    return path


def mean_args(data, epsilon="1"):
    return ["run", "bounded-mean", "--input", str(data), "--column", COLUMN, "--lower", "1", "--upper", "99"] + [
        "--epsilon",
        epsilon,
    ]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("privreg: error: "), err
    return lines[0]


def stored(path):
    with Ledger(path, create=False) as ledger:
        return [(row.seq, row.hash, row.charge) for row in ledger.rows()]


@pytest.fixture
def ledger(tmp_path, capsys):
    path = tmp_path / "team.sqlite"
    code, out, err = run(capsys, "ledger", "init", path, "--epsilon", "2.5")
    assert code == 0, err
    assert "created ledger" in out and "--ledger" in out
    return path


def test_two_runs_share_one_budget_and_a_third_is_refused(capsys, tmp_path, data, ledger):
    for name in ("first", "second"):
        code, out, err = run(capsys, *mean_args(data), "-o", tmp_path / name, "--ledger", ledger)
        assert code == 0, err
        assert "releases charged: 2" in out and "of 2.5" in out
        assert not (tmp_path / name / "ledger.sqlite").exists()  # the output folder holds no ledger
    assert "remaining 0.5" in out
    ids = [json.loads((tmp_path / n / "run.json").read_text())["run"] for n in ("first", "second")]
    assert ids[0] != ids[1]

    code, out, err = run(capsys, "audit", ledger)
    assert code == 0, err
    assert "4 release(s); budget epsilon = 2.5" in out and "2 run(s) under this budget" in out
    for run_id, name, rows in zip(ids, ("first", "second"), ("1-2", "3-4")):
        line = next(line for line in out.splitlines() if line.startswith(run_id))
        assert "bounded-mean" in line and rows in line and str(tmp_path / name) in line
    assert "spent (under the rule): 2   remaining: 0.5" in out
    report = json.loads(run(capsys, "audit", ledger, "--json")[1])
    assert [r["seqs"] for r in report["runs"]] == ["1-2", "3-4"]

    before = stored(ledger)
    code, _out, err = run(capsys, *mean_args(data), "-o", tmp_path / "third", "--ledger", ledger)
    assert code == 2
    line = error_line(err)
    assert "refused" in line and "0.5 left" in line and "Nothing was released or charged" in line
    assert stored(ledger) == before
    assert not (tmp_path / "third").exists()

    # a run that fits the remainder is admitted
    code, _out, err = run(capsys, *mean_args(data, epsilon="0.5"), "-o", tmp_path / "fourth", "--ledger", ledger)
    assert code == 0, err
    code, out, _ = run(capsys, "ledger", "show", ledger)
    assert code == 0
    assert "spent:     epsilon 2.5 in 6 release(s)" in out and "remaining: epsilon 0" in out
    assert "runs:      3" in out


def test_each_charge_records_its_run(capsys, tmp_path, data, ledger):
    assert run(capsys, *mean_args(data), "-o", tmp_path / "out", "--ledger", ledger)[0] == 0
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert meta["ledger"] == str(ledger.absolute())
    for _seq, _hash, charge in stored(ledger):
        run_info = charge.parameters[RUN_KEY]
        assert run_info["id"] == meta["run"] and run_info["workflow"] == "bounded-mean"
        assert run_info["output"] == str((tmp_path / "out").absolute()) and run_info["started"].endswith("Z")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--epsilon", "nan"], ["--epsilon", "finite", "nan"]),
        (["--epsilon", "inf"], ["--epsilon", "finite", "inf"]),
        (["--epsilon", "-1"], ["--epsilon", "> 0", "-1", "--epsilon=1.0"]),
        (["--epsilon", "0"], ["--epsilon", "> 0"]),
        (["--epsilon", "abc"], ["--epsilon must be a number", "'abc'"]),
        (["--epsilon", "1", "--delta", "1"], ["--delta", "[0, 1)", "1.0", "--delta=1e-6"]),
        (["--epsilon", "1", "--delta", "-0.1"], ["--delta", "[0, 1)", "-0.1"]),
        (["--epsilon", "1", "--delta", "nan"], ["--delta", "finite"]),
        (["--epsilon", "1", "--event-delta", "0"], ["--event-delta", "(0, 1)"]),
        (["--epsilon", "1", "--filter", "pld"], ["invalid choice", "pld"]),
        ([], ["--epsilon", "required"]),
    ],
)
def test_init_refuses_bad_budgets_and_creates_nothing(capsys, tmp_path, argv, words):
    path = tmp_path / "new.sqlite"
    code, _out, err = run(capsys, "ledger", "init", path, *argv)
    assert code == 2
    line = error_line(err)
    for word in words:
        assert word in line, line
    assert not path.exists()


def test_init_refuses_an_existing_path_and_keeps_it(capsys, tmp_path, ledger):
    before = ledger.read_bytes()
    code, _out, err = run(capsys, "ledger", "init", ledger, "--epsilon", "9")
    assert code == 2 and "exists already" in error_line(err) and "--ledger" in err
    assert ledger.read_bytes() == before
    stale = tmp_path / "old.sqlite"
    (tmp_path / "old.sqlite-wal").write_bytes(b"left over")
    code, _out, err = run(capsys, "ledger", "init", stale, "--epsilon", "1")
    assert code == 2 and "old.sqlite-wal" in error_line(err) and not stale.exists()


def test_init_stores_the_settings_the_runs_use(capsys, tmp_path):
    path = tmp_path / "sub" / "ldp.sqlite"
    path.parent.mkdir()  # ledger init makes no folders (#31)
    argv = ["ledger", "init", path, "--epsilon", "4", "--delta", "1e-6", "--neighbouring", "replace_one"]
    code, _out, err = run(capsys, *argv, "--filter", "basic", "--filter", "rdp", "--event-delta", "1e-7")
    assert code == 0, err
    session = BudgetSession.open(path)
    try:
        assert session.budget == PrivacyBudget(epsilon=4, delta=1e-6, neighbouring="replace_one")
        assert session.filter_names == ("basic", "rdp") and session.event_delta == 1e-7
    finally:
        session.close()


def test_run_ledger_refusals_name_the_fix(capsys, tmp_path, data, ledger):
    code, _out, err = run(capsys, *mean_args(data), "-o", tmp_path / "a", "--ledger", tmp_path / "missing.sqlite")
    line = error_line(err)
    assert code == 2 and "does not exist" in line and "privreg ledger init" in line
    assert not (tmp_path / "a").exists()
    code, _out, err = run(capsys, *mean_args(data), "--ledger", ledger, "--budget-epsilon", "2", "-o", tmp_path / "b")
    line = error_line(err)
    assert code == 2 and "--budget-epsilon" in line and "cannot be combined with --ledger" in line
    code, _out, err = run(capsys, "run", "oov-discovery", "-o", tmp_path / "c", "--ledger", ledger)
    line = error_line(err)
    assert code == 2 and "replace_one" in line and "--neighbouring replace_one" in line
    # a finished run's folder is not overwritten
    assert run(capsys, *mean_args(data, "0.5"), "-o", tmp_path / "d", "--ledger", ledger)[0] == 0
    code, _out, err = run(capsys, *mean_args(data, "0.5"), "-o", tmp_path / "d", "--ledger", ledger)
    assert code == 2 and "run.json" in error_line(err)
    assert len(stored(ledger)) == 2


def test_run_help_lists_the_workflows(capsys):
    code, out, err = run(capsys, "run", "--help")
    assert code == 0, err
    assert "usage: privreg run WORKFLOW" in out and "--ledger PATH" in out
    registry = privreg.default_registry()
    for item in registry.items("workflow"):
        line = next(line for line in out.splitlines() if line.strip().startswith(item.name + " "))
        assert item.summary in line
    assert run(capsys, "run", "-h")[0] == 0
    code, _out, err = run(capsys, "run")
    assert code == 2 and "run --help" in error_line(err)


def _charge_then_fail(registry, monkeypatch):
    """Make bounded-mean charge one release and then fail (bad input found too late)."""
    item = registry.get("bounded-mean")

    def charge_then_fail(*, context, **params):
        """Charges once, then fails."""
        context.charger.charge(PureDP(epsilon=0.25), mechanism="test", parameters={}, label="spent")
        raise PrivregValueError("failed after a charge")

    monkeypatch.setitem(registry._items, "bounded-mean", attrs.evolve(item, factory=charge_then_fail))
    return item


def test_rerun_after_a_charged_failure_keeps_the_spent_ledger(capsys, monkeypatch, tmp_path, data):
    out_dir = tmp_path / "out"
    registry = privreg.default_registry()
    original = _charge_then_fail(registry, monkeypatch)
    code, _out, err = run(capsys, *mean_args(data), "-o", out_dir)
    assert code == 2 and "failed after a charge" in err
    assert [c.label for _s, _h, c in stored(out_dir / "ledger.sqlite")] == ["spent"]  # spent budget is kept
    monkeypatch.setitem(registry._items, "bounded-mean", original)

    code, _out, err = run(capsys, *mean_args(data), "-o", out_dir)
    assert code == 0, err
    assert "kept as ledger-failed-1.sqlite" in err and "1 charge(s)" in err
    assert [c.label for _s, _h, c in stored(out_dir / "ledger-failed-1.sqlite")] == ["spent"]
    assert [c.label for _s, _h, c in stored(out_dir / "ledger.sqlite")] == [f"count({COLUMN})", f"sum({COLUMN})"]
    assert not (out_dir / "ledger.sqlite-wal").exists() or (out_dir / "ledger.sqlite-wal").stat().st_size == 0
    # a finished run's folder is still refused, its ledger unchanged
    before = stored(out_dir / "ledger.sqlite")
    code, _out, err = run(capsys, *mean_args(data), "-o", out_dir)
    assert code == 2 and "exists already" in error_line(err)
    assert stored(out_dir / "ledger.sqlite") == before


def test_rerun_after_a_charged_failure_on_a_shared_ledger(capsys, monkeypatch, tmp_path, data, ledger):
    registry = privreg.default_registry()
    original = _charge_then_fail(registry, monkeypatch)
    assert run(capsys, *mean_args(data), "-o", tmp_path / "out", "--ledger", ledger)[0] == 2
    assert [c.label for _s, _h, c in stored(ledger)] == ["spent"]  # the shared ledger keeps the charge
    monkeypatch.setitem(registry._items, "bounded-mean", original)
    code, _out, err = run(capsys, *mean_args(data), "-o", tmp_path / "out", "--ledger", ledger)
    assert code == 0, err
    assert len(stored(ledger)) == 3 and not (tmp_path / "out" / "ledger.sqlite").exists()


@pytest.mark.parametrize("empty_file", [False, True], ids=["no-charges", "no-schema"])
def test_rerun_after_a_killed_run_with_nothing_charged(capsys, tmp_path, data, empty_file):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    debris = out_dir / "ledger.sqlite"
    if empty_file:  # killed before the schema was written
        debris.write_bytes(b"")
    else:
        BudgetSession(budget=PrivacyBudget(epsilon=1.0), ledger=debris).close()
    (out_dir / "ledger.sqlite-lock").write_bytes(b"")
    code, _out, err = run(capsys, *mean_args(data), "-o", out_dir)
    assert code == 0, err
    assert len(stored(debris)) == 2 and "ledger-failed" not in err
    assert sorted(p.name for p in out_dir.iterdir() if p.name.startswith("ledger-failed")) == []


def test_a_second_run_into_a_busy_folder_is_refused(capsys, tmp_path, data):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with runs.folder_lock(out_dir):
        code, _out, err = run(capsys, *mean_args(data), "-o", out_dir)
    assert code == 2 and "another privreg run is writing" in error_line(err)
    assert not (out_dir / "ledger.sqlite").exists()
    assert run(capsys, *mean_args(data), "-o", out_dir)[0] == 0


def test_concurrent_runs_on_one_ledger_do_not_double_spend(capsys, tmp_path, data):
    path = tmp_path / "team.sqlite"
    assert run(capsys, "ledger", "init", path, "--epsilon", "1.5")[0] == 0
    root = str(Path(privreg.__file__).resolve().parents[1])  # this checkout, not an installed privreg
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "privreg", *mean_args(data), "-o", str(tmp_path / f"out{i}"), "--ledger", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)  # a hang guard only, not a timing assertion
        results.append((p.returncode, out, err))
    codes = sorted(code for code, _o, _e in results)
    assert codes == [0, 2], results
    refused = next(err for code, _o, err in results if code == 2)
    assert "refused" in refused and "Nothing was released or charged" in refused
    rows = stored(path)
    assert len(rows) == 2 and len({c.parameters[RUN_KEY]["id"] for _s, _h, c in rows}) == 1
    code, out, _ = run(capsys, "audit", path)
    assert code == 0 and "flags: none" in out and "1 run(s)" in out
