"""Budget sessions: refuse overspending, charge before release, survive threads,
processes and crashes."""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest

import privreg
from privreg.budget.ledger import Ledger, LedgerIntegrityError
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core import (
    BudgetExceededError,
    Gaussian,
    Laplace,
    PrivregValueError,
    PureDP,
)
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.testing import CountingRandom

HERE = Path(__file__).parent


def session(tmp_path, eps=1.0, delta=0.0, **kw):
    return BudgetSession(budget=PrivacyBudget(epsilon=eps, delta=delta), ledger=tmp_path / "l.sqlite", **kw)


@pytest.mark.parametrize("eps, delta", [(float("nan"), 0), (-1, 0), (float("inf"), 0), (1, 1.0), (1, -0.1)])
def test_budget_validation(eps, delta):
    with pytest.raises(PrivregValueError):
        PrivacyBudget(epsilon=eps, delta=delta)


def test_refused_release_draws_no_noise_and_charges_nothing(tmp_path):
    s = session(tmp_path, eps=1.0)
    mech = LaplaceMechanism(epsilon=0.4, sensitivity=1.0)
    mech.release(1.0, charger=s)
    mech.release(1.0, charger=s)
    rng = CountingRandom()
    with pytest.raises(BudgetExceededError, match="Nothing was released or charged"):
        mech.release(1.0, charger=s, rng=rng)
    assert rng.draws == 0
    assert s.ledger.head()[0] == 2
    assert s.remaining().epsilon == pytest.approx(0.2)
    assert s.can_afford(Laplace(scale=5.0)) and not s.can_afford(Laplace(scale=4.0))
    assert s.ledger.head()[0] == 2, "can_afford is a dry run"


def test_best_accountant_is_used(tmp_path):
    # 50 Gaussians: basic cannot account them (no event_delta), GDP/PLD can, and tightly
    s = session(tmp_path, eps=4.0, delta=1e-6)
    for _ in range(50):
        s.charge(Gaussian(sigma=10.0), mechanism="g", parameters={})
    spent = s.spent()
    assert spent.by_filter["basic"] is None and "gaussian" in spent.unsupported["basic"]
    assert spent.by_filter["gdp"] <= spent.by_filter["rdp"]
    assert spent.filter == "gdp" and spent.epsilon == spent.by_filter["gdp"]
    assert s.remaining().epsilon == pytest.approx(4.0 - spent.by_filter["gdp"])


def test_event_no_accountant_supports_is_refused(tmp_path):
    @privreg.event_type("test-unsupported")
    @attrs.frozen(kw_only=True)
    class Mystery(privreg.PrivacyEvent):
        x: float = 1.0

    try:
        s = session(tmp_path)
        with pytest.raises(BudgetExceededError, match=r"basic: unsupported \(cannot account for 'test-unsupported'"):
            s.charge(Mystery(), mechanism="m", parameters={})
        assert s.ledger.head()[0] == 0
    finally:
        privreg.core.events.EVENT_TYPES.pop("test-unsupported")


def test_reopen_keeps_the_spend_and_refuses_other_settings(tmp_path):
    s = session(tmp_path, eps=1.0)
    s.charge(PureDP(epsilon=0.75), mechanism="m", parameters={})
    s.close()
    again = BudgetSession.open(tmp_path / "l.sqlite")
    assert again.remaining().epsilon == pytest.approx(0.25)
    with pytest.raises(BudgetExceededError):
        again.charge(PureDP(epsilon=0.5), mechanism="m", parameters={})
    with pytest.raises(PrivregValueError, match="was created with budget"):
        session(tmp_path, eps=2.0)


def test_many_threads_never_overspend(tmp_path):
    s = session(tmp_path, eps=1.0)
    granted, lock = [], threading.Lock()

    def worker():
        for _ in range(20):
            try:
                s.charge(PureDP(epsilon=2**-5), mechanism="t", parameters={})
                with lock:
                    granted.append(1)
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 32  # 32 * 2^-5 = 1 exactly
    assert s.ledger.head()[0] == 32 and s.ledger.verify() == []


@pytest.mark.slow
def test_processes_and_threads_share_one_budget(tmp_path):
    s = session(tmp_path, eps=1.0)
    s.close()
    ctx = mp.get_context("spawn")
    sys.path.insert(0, str(HERE))
    try:
        import budget_worker

        with ctx.Pool(3) as pool:
            results = pool.starmap(budget_worker.spend, [(str(tmp_path / "l.sqlite"), 4, 12, 2**-6)] * 3)
    finally:
        sys.path.remove(str(HERE))
    assert sum(results) == 64, results  # 64 * 2^-6 = 1; 144 attempts in all
    ledger = Ledger(tmp_path / "l.sqlite", create=False)
    assert len(ledger.rows()) == 64 and ledger.verify() == []


def _child(path, mode):
    return subprocess.Popen(
        [sys.executable, str(HERE / "budget_worker.py"), str(path), mode], stdout=subprocess.PIPE, text=True
    )


def test_kill_during_release_leaves_the_charge_and_an_intact_chain(tmp_path):
    session(tmp_path, eps=1.0).close()
    child = _child(tmp_path / "l.sqlite", "stuck")
    assert child.stdout.readline().strip() == "sampling"  # charged, now inside _sample
    child.send_signal(signal.SIGKILL)
    child.wait()
    reopened = BudgetSession.open(tmp_path / "l.sqlite")
    assert reopened.ledger.verify() == []
    assert [r.charge.label for r in reopened.ledger.rows()] == ["stuck"]
    assert reopened.remaining().epsilon == pytest.approx(0.5)


@pytest.mark.slow
def test_kill_at_random_points_never_corrupts_the_ledger(tmp_path):
    session(tmp_path, eps=1.0).close()
    seen = 0
    for delay in (0.05, 0.2, 0.35, 0.5):
        child = _child(tmp_path / "l.sqlite", "loop")
        assert child.stdout.readline().strip() == "ready"
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        ledger = Ledger(tmp_path / "l.sqlite", create=False)
        assert ledger.verify() == []
        rows = ledger.rows()
        assert len(rows) >= seen and [r.seq for r in rows] == list(range(1, len(rows) + 1))
        seen = len(rows)
        ledger.close()
    assert seen > 0
    assert BudgetSession.open(tmp_path / "l.sqlite").remaining().epsilon == pytest.approx(1 - seen * 1e-6)


def test_tampered_ledger_is_detected(tmp_path):
    import sqlite3

    s = session(tmp_path, eps=5.0)
    for i in range(4):
        s.charge(PureDP(epsilon=1.0), mechanism="m", parameters={"i": i}, label=f"r{i}")
    s.close()
    db = sqlite3.connect(tmp_path / "l.sqlite")
    db.execute("""UPDATE charges SET event = '{"epsilon":0.1,"kind":"pure_dp"}' WHERE seq = 2""")
    db.commit()
    db.close()
    ledger = Ledger(tmp_path / "l.sqlite", create=False)
    assert ledger.verify() == ["row 2: contents do not match its hash (edited)"]
    with pytest.raises(LedgerIntegrityError, match="row 2"):
        BudgetSession.open(tmp_path / "l.sqlite")


def test_deleted_row_and_changed_budget_are_detected(tmp_path):
    import sqlite3

    s = session(tmp_path, eps=5.0)
    for _ in range(3):
        s.charge(PureDP(epsilon=1.0), mechanism="m", parameters={})
    s.close()
    db = sqlite3.connect(tmp_path / "l.sqlite")
    db.execute("DELETE FROM charges WHERE seq = 2")
    db.execute("""UPDATE meta SET value = '{"delta":0.0,"epsilon":50.0}' WHERE key = 'budget'""")
    db.commit()
    db.close()
    problems = Ledger(tmp_path / "l.sqlite", create=False).verify()
    assert any("row 1: prev_hash" in p for p in problems)  # budget edit breaks the genesis link
    assert any("row 2 is missing" in p for p in problems)


def test_reordered_rows_are_detected(tmp_path):
    import sqlite3

    s = session(tmp_path, eps=5.0)
    for i in range(3):
        s.charge(PureDP(epsilon=0.5 + i), mechanism="m", parameters={}, label=f"r{i}")
    s.close()
    db = sqlite3.connect(tmp_path / "l.sqlite")
    rows = db.execute("SELECT seq, event, label FROM charges WHERE seq IN (1, 2) ORDER BY seq").fetchall()
    for (seq, _, _), (_, event, label) in zip(rows, reversed(rows)):  # swap rows 1 and 2
        db.execute("UPDATE charges SET event = ?, label = ? WHERE seq = ?", (event, label, seq))
    db.commit()
    db.close()
    problems = Ledger(tmp_path / "l.sqlite", create=False).verify()
    assert "row 1: contents do not match its hash (edited)" in problems
    assert "row 2: contents do not match its hash (edited)" in problems
