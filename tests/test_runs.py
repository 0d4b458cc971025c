"""Runs of a workflow under a budget (``privreg.budget.runs.run_workflow``, the one path of
``privreg run``, ``privreg demo`` and Python callers): the run's envelope is priced before
anything is created or charged, a failure after a charge says exactly what was charged, and
``privreg ledger show`` / ``privreg ledger verify`` mark the charges of a killed or failed run
as partial (issue #28)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import attrs
import pytest

import privreg
from privreg.budget import runs
from privreg.budget.ledger import Ledger
from privreg.budget.session import PrivacyBudget
from privreg.budget.verify import RUN_KEY, verify_ledger
from privreg.cli.main import main
from privreg.core.errors import BudgetExceededError, PrivregTypeError, PrivregValueError
from privreg.core.events import ApproxDP, PureDP
from privreg.core.items import Citation, Example, Param, RegistryItem
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.workflow import WorkflowResult

COLUMN = "hours-per-week"


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


def labels(path):
    with Ledger(path, create=False) as ledger:
        return [row.charge.label for row in ledger.rows()]


def mean_item():
    return privreg.default_registry().get("bounded-mean", kind="workflow")


def replace(monkeypatch, name, factory):
    registry = privreg.default_registry()
    item = registry.get(name)
    monkeypatch.setitem(registry._items, name, attrs.evolve(item, factory=factory))


def charge_then(failure, *epsilons):
    """A bounded-mean stand-in charging ``epsilons`` in turn, then raising ``failure``."""

    def workflow(*, context, **params):
        """Charges, then fails."""
        for n, eps in enumerate(epsilons, 1):
            context.charger.charge(PureDP(epsilon=eps), mechanism="laplace", parameters={}, label=f"step {n}")
        raise failure

    return workflow


# -- priced before anything is created or charged ------------------------------------------------


def test_a_run_over_its_own_budget_exits_2_and_leaves_no_ledger(capsys, tmp_path):
    """The issue's must-show: bounded-mean's epsilon (1) is above --budget-epsilon 0.5."""
    out_dir = tmp_path / "X"
    code, out, err = run(capsys, "run", "bounded-mean", "--budget-epsilon", "0.5", "--output", out_dir)
    assert code == 2 and out == ""
    line = err.strip()
    assert line.startswith("privreg: error: run of 'bounded-mean' refused: it may spend epsilon 1 ('epsilon')")
    assert "--budget-epsilon" in line and "--epsilon to at most 0.5" in line and "no ledger was created" in line
    assert not out_dir.exists()  # no folder, so no ledger file and no row

    # the same folder existing beforehand: it is left as it was, empty
    out_dir.mkdir()
    assert run(capsys, "run", "bounded-mean", "--budget-epsilon", "0.5", "--output", out_dir)[0] == 2
    assert list(out_dir.iterdir()) == []
    # and with the workflow's epsilon lowered to fit, the run goes through
    code, out, err = run(capsys, "run", "bounded-mean", "--budget-epsilon", "0.5", "--epsilon", "0.5", "-o", out_dir)
    assert code == 0, err
    assert labels(out_dir / "ledger.sqlite") == ["count(age)", "sum(age)"]


def test_a_delta_over_the_budget_is_refused_before_the_run(capsys, tmp_path):
    code, _out, err = run(capsys, "run", "ngrams", "--budget-delta", "0", "-o", tmp_path / "o")
    assert code == 2 and "delta 1e-07 ('delta')" in err and "its delta to at most 0" in err
    assert not (tmp_path / "o").exists()


def _total_workflow():
    """A workflow whose budget lives in a parameter named ``total``."""

    def factory(*, context, total: float = 1.0, label: str = "x"):
        """Charges ``total`` once (epsilon-DP)."""
        context.charger.charge(PureDP(epsilon=total), mechanism="laplace", parameters={}, label=label)
        return WorkflowResult(summary="done")

    return RegistryItem(
        name="total-spender",
        kind="workflow",
        summary="Spends its total.",
        citation=Citation(authors="A. Author", title="A Title", year=2020),
        factory=factory,
        example=Example(),
        params=(
            Param(name="total", type=float, doc="total privacy parameter epsilon", default=1.0),
            Param(name="label", type=str, doc="label", default="x"),
        ),
        budget_params=("total",),
    )


def test_the_envelope_is_read_from_the_declared_budget_params(tmp_path):
    item = _total_workflow()
    budget, envelope = runs.run_envelope(item, item.bind(total=0.75))
    assert budget == PrivacyBudget(epsilon=0.75) and envelope == PureDP(epsilon=0.75, neighbouring="add_remove")
    done = runs.run_workflow(item, {"total": 0.75})  # default budget: the declared one, in memory
    assert done.releases == 1 and done.budget == PrivacyBudget(epsilon=0.75) and done.ledger is None
    assert done.epsilon_charged == pytest.approx(0.75) and done.epsilon_remaining == pytest.approx(0.0)
    with pytest.raises(BudgetExceededError, match=r"epsilon 2 \('total'\).*--total to at most 1"):
        runs.run_workflow(item, {"total": 2.0}, budget=PrivacyBudget(epsilon=1.0))

    shared = tmp_path / "team.sqlite"
    assert main(["ledger", "init", str(shared), "--epsilon", "1"]) == 0
    with pytest.raises(BudgetExceededError, match=r"epsilon 1.5 \('total'\).*1 left\) grants that.*--total"):
        runs.run_workflow(item, {"total": 1.5}, ledger=shared)
    assert labels(shared) == []

    undeclared = attrs.evolve(item, budget_params=())
    with pytest.raises(PrivregValueError, match=r"states no budget in its parameters.*budget=PrivacyBudget"):
        runs.run_workflow(undeclared, {})
    with pytest.raises(PrivregValueError, match=r"states no budget.*instead of a shared ledger"):
        runs.run_workflow(undeclared, {}, ledger=shared)
    # with an explicit budget it runs (the budget is then its envelope)
    assert runs.run_workflow(undeclared, {"total": 0.5}, budget=PrivacyBudget(epsilon=0.5)).releases == 1


def test_run_workflow_from_python_returns_a_typed_result(tmp_path, data):
    out_dir = tmp_path / "out"
    params = {"input": data, "column": COLUMN, "lower": 1.0, "upper": 99.0, "epsilon": 1.0}
    done = runs.run_workflow(mean_item(), params, output=out_dir, rng=InsecureReproducibleRandom(seed=1))
    assert isinstance(done, runs.RunResult) and isinstance(done.result, WorkflowResult)
    assert done.releases == 2 and [c.label for c in done.charged] == [f"count({COLUMN})", f"sum({COLUMN})"]
    assert [c.epsilon for c in done.charged] == pytest.approx([0.5, 0.5])
    assert done.epsilon_spent == pytest.approx(1.0) and done.epsilon_remaining == pytest.approx(0.0)
    assert done.ledger == out_dir / "ledger.sqlite" and done.output == out_dir and not done.shared
    assert done.randomness["reproducible"] is True and done.seconds >= 0
    meta = json.loads((out_dir / "run.json").read_text())
    assert meta["run"] == done.run_id and meta["ledger"] == str(done.ledger.absolute())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        done.releases = 3

    # the run record of each charge: the run, its envelope and the release's number in it
    with Ledger(done.ledger, create=False) as ledger:
        records = [row.charge.parameters[RUN_KEY] for row in ledger.rows()]
    assert [r["release"] for r in records] == [1, 2]
    assert {r["id"] for r in records} == {done.run_id}
    assert records[0]["envelope"] == {"epsilon": 1.0, "delta": 0.0}


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"budget": PrivacyBudget(epsilon=1.0), "ledger": "x.sqlite"}, PrivregValueError, ["budget=", "ledger="]),
        ({"budget": 1.0}, PrivregTypeError, ["budget must be a privreg.budget.PrivacyBudget"]),
        ({"ledger": 3}, PrivregTypeError, ["ledger must be the path"]),
        ({"ledger": "missing.sqlite"}, PrivregValueError, ["does not exist", "privreg ledger init"]),
        ({"event_delta": 2.0}, PrivregValueError, ["event_delta must be a delta in (0, 1)"]),
        ({"limits": {"max_seconds": 1}}, PrivregTypeError, ["limits must be"]),
    ],
)
def test_run_workflow_refuses_bad_arguments_naming_them(tmp_path, kwargs, error, words):
    with pytest.raises(error) as info:
        runs.run_workflow(mean_item(), {}, output=tmp_path / "o", **kwargs)
    assert all(w in str(info.value) for w in words), info.value
    assert not (tmp_path / "o").exists()


def test_run_workflow_refuses_what_is_not_a_workflow():
    with pytest.raises(PrivregTypeError, match="item must be a workflow"):
        runs.run_workflow("bounded-mean", {})
    with pytest.raises(PrivregValueError, match="unknown parameter"):
        runs.run_workflow(mean_item(), {"epsilonn": 1.0})
    pprl = privreg.default_registry().get("pprl")
    with pytest.raises(PrivregValueError, match=r"releases nothing differentially private.*drop budget="):
        runs.run_workflow(pprl, {}, budget=PrivacyBudget(epsilon=1.0))


# -- a failure after a charge says exactly what was charged --------------------------------------


def test_a_failure_after_a_charge_says_exactly_what_was_charged(capsys, monkeypatch, tmp_path, data):
    replace(monkeypatch, "bounded-mean", charge_then(PrivregValueError("bad column found late"), 0.25, 0.125))
    out_dir = tmp_path / "out"
    code, out, err = run(capsys, *mean_args(data), "-o", out_dir)
    assert code == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and line.startswith("privreg: error: bad column found late.")
    assert (
        f"stopped after 2 release(s) charged to ledger {out_dir / 'ledger.sqlite'}, epsilon 0.375 in all: "
        f"#1 step 1 (epsilon 0.25), #2 step 2 (epsilon 0.125)" in line
    )
    assert "nothing" not in line.lower()
    assert labels(out_dir / "ledger.sqlite") == ["step 1", "step 2"]

    code, out, _ = run(capsys, "ledger", "show", out_dir / "ledger.sqlite")
    assert code == 0 and "runs:      1 (1 partial" in out and "partial (failed after 2 release(s))" in out


def test_a_refusal_after_a_charge_does_not_claim_nothing_was_charged(capsys, monkeypatch, tmp_path, data):
    """The second release is refused by the ledger (another writer spent the budget
    meanwhile): the message keeps the refusal, says the refused release was not made, and
    lists the charge that was."""
    ledger = tmp_path / "team.sqlite"
    assert run(capsys, "ledger", "init", ledger, "--epsilon", "1")[0] == 0

    def workflow(*, context, **params):
        """Charges 0.5, lets another writer spend the rest, then charges 0.5 more."""
        context.charger.charge(PureDP(epsilon=0.5), mechanism="laplace", parameters={}, label="count")
        from privreg.budget.session import BudgetSession

        with BudgetSession.open(ledger) as other:
            other.charge(PureDP(epsilon=0.5), mechanism="laplace", parameters={}, label="someone else")
        context.charger.charge(PureDP(epsilon=0.5), mechanism="laplace", parameters={}, label="sum")
        return WorkflowResult(summary="unreachable")

    replace(monkeypatch, "bounded-mean", workflow)
    code, _out, err = run(capsys, *mean_args(data), "-o", tmp_path / "o", "--ledger", ledger)
    assert code == 2
    assert "Nothing was released or charged" not in err and "That release was not made or charged" in err
    assert f"stopped after 1 release(s) charged to ledger {ledger}, epsilon 0.5 in all: #1 count (epsilon 0.5)" in err
    report = verify_ledger(ledger)
    (summary,) = report.runs()
    assert summary["status"] == "partial" and summary["seqs"] == "1"


def test_a_bug_after_a_charge_is_exit_1_with_a_note_of_the_charges(capsys, monkeypatch, tmp_path, data):
    replace(monkeypatch, "bounded-mean", charge_then(RuntimeError("kaputt"), 0.25))
    code, _out, err = run(capsys, *mean_args(data), "-o", tmp_path / "o")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 2, err
    assert lines[0].startswith("privreg: note: the run of 'bounded-mean'") and "#1 step 1 (epsilon 0.25)" in lines[0]
    assert "internal error: RuntimeError" in lines[1] and "kaputt" not in err


def test_a_run_whose_summary_cannot_be_written_is_partial(monkeypatch, tmp_path):
    """run.json is part of the run: a metric with no JSON form, found after the charges,
    fails the run, which then says what it charged and is recorded as failed."""

    def workflow(*, context, **params):
        """Charges, then returns a metric that JSON cannot hold."""
        context.charger.charge(PureDP(epsilon=0.25), mechanism="laplace", parameters={}, label="only")
        return WorkflowResult(summary="done", metrics={"seen": {1, 2}})

    replace(monkeypatch, "bounded-mean", workflow)
    with pytest.raises(runs.PartialRunError, match=r"metrics.seen is a set.*#1 only \(epsilon 0.25\)"):
        runs.run_workflow(mean_item(), {}, output=tmp_path / "o")
    (summary,) = verify_ledger(tmp_path / "o" / "ledger.sqlite").runs()
    assert (summary["status"], summary["note"]) == ("partial", "failed after 1 release(s)")


def test_python_callers_get_the_charges_with_the_error(monkeypatch):
    replace(monkeypatch, "bounded-mean", charge_then(PrivregValueError("late"), 0.25))
    with pytest.raises(runs.PartialRunError) as info:
        runs.run_workflow(mean_item(), {}, budget=PrivacyBudget(epsilon=1.0))
    exc = info.value
    assert [(c.number, c.label, c.epsilon) for c in exc.charged] == [(1, "step 1", 0.25)]
    assert isinstance(exc.__cause__, PrivregValueError) and "the run's ledger (in memory)" in str(exc)


# -- verification and show mark partial runs -----------------------------------------------------


def test_finished_runs_are_complete_and_verify_is_the_same_as_audit(capsys, tmp_path, data):
    ledger = tmp_path / "team.sqlite"
    assert run(capsys, "ledger", "init", ledger, "--epsilon", "3")[0] == 0
    assert run(capsys, *mean_args(data), "-o", tmp_path / "a", "--ledger", ledger)[0] == 0
    code, verified, _ = run(capsys, "ledger", "verify", ledger)
    (line,) = [line for line in verified.splitlines() if "bounded-mean" in line and str(tmp_path / "a") in line]
    assert code == 0 and " 1-2 " in line and " complete " in line
    assert "partial" not in verified
    assert run(capsys, "audit", ledger) == (0, verified, "")
    code, text, _ = run(capsys, "ledger", "verify", ledger, "--json")
    assert code == 0 and [r["status"] for r in json.loads(text)["runs"]] == ["complete"]
    assert run(capsys, "audit", ledger, "--json")[1] == text
    code, out, _ = run(capsys, "ledger", "show", ledger)
    assert code == 0 and "releases 1-2  complete" in out and "partial" not in out


_PAUSING = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import attrs

    import privreg
    from privreg.cli.main import main

    registry = privreg.default_registry()
    item = registry.get("bounded-mean")
    marker = Path(sys.argv[1])
    real = item.factory


    def paused(*, context, **params):
        '''bounded-mean, pausing after its first charge (the count) until it is killed.'''
        inner = context.charger

        class Pausing:
            def charge(self, event, **kw):
                inner.charge(event, **kw)
                marker.write_text("charged")
                time.sleep(300)

        context.charger = Pausing()
        return real(context=context, **params)


    registry._items["bounded-mean"] = attrs.evolve(item, factory=paused)
    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.slow
def test_a_run_killed_between_its_two_charges_shows_as_partial(capsys, tmp_path, data):
    ledger = tmp_path / "team.sqlite"
    assert run(capsys, "ledger", "init", ledger, "--epsilon", "3")[0] == 0
    assert run(capsys, *mean_args(data), "-o", tmp_path / "done", "--ledger", ledger)[0] == 0
    script, marker = tmp_path / "pausing.py", tmp_path / "charged"
    script.write_text(_PAUSING)
    root = str(Path(privreg.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(marker), *mean_args(data), "-o", str(tmp_path / "killed"), "--ledger"]
        + [str(ledger)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120  # a hang guard only
        while not marker.exists():
            assert proc.poll() is None, "the run ended before its first charge"
            assert time.monotonic() < deadline, "no charge within 120 s"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # between bounded-mean's count and sum
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert labels(ledger) == [f"count({COLUMN})", f"sum({COLUMN})", f"count({COLUMN})"]

    code, out, _ = run(capsys, "ledger", "show", ledger)
    assert code == 0 and "runs:      2 (1 partial" in out
    (done_line,) = [line for line in out.splitlines() if line.endswith(str(tmp_path / "done"))]
    (killed_line,) = [line for line in out.splitlines() if line.endswith(str(tmp_path / "killed"))]
    assert "releases 1-2  complete" in done_line
    assert "releases 3  partial (no end recorded: killed, or still running)" in killed_line

    code, out, _ = run(capsys, "ledger", "verify", ledger)
    assert code == 0 and "1 partial run(s): killed or failed after charging" in out
    assert "partial (no end recorded" in out
    statuses = [r["status"] for r in json.loads(run(capsys, "ledger", "verify", ledger, "--json")[1])["runs"]]
    assert statuses == ["complete", "partial"]


def test_a_shared_ledger_refusing_a_runs_delta_says_to_lower_its_delta(tmp_path):
    """Plenty of epsilon is left, but the run's delta is above what the ledger's filters
    have: the fix to print is the workflow's delta, not its epsilon."""

    def factory(*, context, total: float = 1.0, tdelta: float = 1e-6):
        """Charges (total, tdelta) once."""
        context.charger.charge(ApproxDP(epsilon=total, delta=tdelta), mechanism="m", parameters={}, label="x")
        return WorkflowResult(summary="done")

    item = RegistryItem(
        name="pair-spender",
        kind="workflow",
        summary="Spends its pair.",
        citation=Citation(authors="A. Author", title="A Title", year=2020),
        factory=factory,
        example=Example(),
        params=(
            Param(name="total", type=float, doc="total privacy parameter epsilon", default=1.0),
            Param(name="tdelta", type=float, doc="total privacy parameter delta", default=1e-6),
        ),
        budget_params=("total", "tdelta"),
    )
    shared = tmp_path / "team.sqlite"
    assert main(["ledger", "init", str(shared), "--epsilon", "10", "--delta", "1e-5"]) == 0
    with pytest.raises(BudgetExceededError) as err:
        runs.run_workflow(item, {"total": 1.0, "tdelta": 5e-6}, ledger=shared)
    msg = str(err.value)
    assert "lower the workflow's --tdelta" in msg and "lower the workflow's --total" not in msg
    assert labels(shared) == []
    assert runs.run_workflow(item, {"total": 1.0, "tdelta": 1e-6}, ledger=shared).releases == 1


def test_a_finished_run_whose_end_cannot_be_recorded_is_not_reported_as_stopped(monkeypatch, tmp_path):
    """run.json is written and every release made; only recording the run's end fails
    (the ledger busy past its timeout). The run did not stop part-way: it returns, and
    says that the ledger will list it as partial."""
    from privreg.budget import run_log
    from privreg.budget.ledger import LedgerBusyError

    def workflow(*, context, **params):
        """Charges once and finishes."""
        context.charger.charge(PureDP(epsilon=0.25), mechanism="laplace", parameters={}, label="only")
        return WorkflowResult(summary="done")

    replace(monkeypatch, "bounded-mean", workflow)
    original = run_log.record_end

    def busy(ledger, run_id, *, status, releases):
        if status == run_log.COMPLETE:
            raise LedgerBusyError("ledger 'x': another process held its write lock")
        return original(ledger, run_id, status=status, releases=releases)

    monkeypatch.setattr(run_log, "record_end", busy)
    said = []
    done = runs.run_workflow(mean_item(), {}, output=tmp_path / "o", echo=said.append)
    assert done.releases == 1 and (tmp_path / "o" / "run.json").exists()
    assert any("end could not be recorded" in s and "partial" in s for s in said), said
    (summary,) = verify_ledger(tmp_path / "o" / "ledger.sqlite").runs()
    assert summary["status"] == "partial"  # no end recorded: what the note warned of


def test_a_shared_ledger_that_cannot_price_the_run_does_not_say_lower_its_epsilon(tmp_path):
    """A --filter gdp ledger cannot price a pure epsilon-DP run at all: lowering the
    workflow's epsilon cannot help, and the message must not suggest it."""
    shared = tmp_path / "gdp.sqlite"
    assert main(["ledger", "init", str(shared), "--epsilon", "20", "--delta", "1e-6", "--filter", "gdp"]) == 0
    with pytest.raises(BudgetExceededError) as err:
        runs.run_workflow(_total_workflow(), {"total": 1.0}, ledger=shared)
    msg = str(err.value)
    assert "gdp: unsupported" in msg and "lower the workflow's" not in msg
    assert "use a ledger whose filters can price it" in msg and "\n" not in msg
    assert labels(shared) == []


def test_a_replace_one_workflow_under_an_add_remove_budget_is_refused_for_that(tmp_path):
    """outlier-count's guarantee (epsilon 4) is for replace-one neighbours; a budget of
    epsilon 5 for add/remove neighbours cannot hold it. The refusal must say so, not ask
    to lower --epsilon "to at most 5" when it is 4 already."""
    item = privreg.default_registry().get("outlier-count", kind="workflow")
    with pytest.raises(PrivregValueError) as err:
        runs.run_workflow(item, {}, budget=PrivacyBudget(epsilon=5.0, delta=1e-5), output=tmp_path / "o")
    msg = str(err.value)
    assert "replace_one" in msg and "neighbouring='replace_one'" in msg and "at most 5" not in msg
    assert "Nothing was released or charged" in msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_a_run_end_is_recorded_once(tmp_path, store):
    """A second end for the same run (a retry, or another writer's) never replaces the
    first, as on PostgreSQL (tests/test_ledger_postgres_hostile.py)."""
    from privreg.budget.memory_store import MemoryLedger

    meta = {"format": 3, "budget": {"epsilon": 1.0, "delta": 0.0}}
    ledger = Ledger(tmp_path / "l.sqlite", meta=meta) if store == "sqlite" else MemoryLedger(meta=meta)
    ledger.record_run_end("r1", ended=1.0, status="complete", releases=3)
    ledger.record_run_end("r1", ended=2.0, status="failed", releases=0)
    ledger.record_run_end("r0", ended=3.0, status="failed", releases=1)
    assert ledger.run_end_rows() == [("r0", 3.0, "failed", 1), ("r1", 1.0, "complete", 3)]
