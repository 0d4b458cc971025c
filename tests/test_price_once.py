"""Price once (#28): a live session, the same ledger reopened and a second process hold the
same state and take the same decisions; verification re-derives every stored price."""

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privreg.budget import session as session_module
from privreg.budget.filters import price_to_json
from privreg.budget.ledger import _row_hash
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import verify_ledger
from privreg.core import BudgetExceededError
from privreg.core.events import (
    ApproxDP,
    Composed,
    DiscreteGaussian,
    Gaussian,
    Laplace,
    PoissonSampled,
    PureDP,
    SelfComposed,
)
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.selection import ReportNoisyMax

WORKER = str(Path(__file__).with_name("price_once_worker.py"))


def random_event(rng):
    """A pure, approximate, block or curve event, with the stated guarantee a mechanism
    would give (or None). Parameters come from small sets, as an analyst's do (and so the
    pricing caches are exercised too)."""
    kind = rng.integers(6)
    pick = lambda values: float(values[rng.integers(len(values))])  # noqa: E731
    if kind == 0:
        return PureDP(epsilon=float(rng.uniform(0.01, 0.3))), None
    if kind == 1:
        return ApproxDP(epsilon=float(rng.uniform(0.01, 0.2)), delta=pick([1e-9, 2e-8])), None
    if kind == 2:
        return Laplace(scale=float(rng.uniform(3, 30))), None
    if kind == 3:  # a block: a Gaussian pair and a pure part, priced as one mechanism
        block = SelfComposed(event=Gaussian(sigma=pick([8.0, 20.0])), count=2)
        return Composed(events=(block, PureDP(epsilon=0.05))), None
    if kind == 4:  # a curve event with the (eps, delta) it was calibrated to
        m = GaussianMechanism(epsilon=pick([0.2, 0.35]), delta=1e-8, sensitivity=1.0)
        return m.privacy_event(), m.stated_guarantee()
    return PoissonSampled(sampling_probability=pick([0.05, 0.1]), event=Gaussian(sigma=2.0)), None


def candidates(seed, n=100):
    """The next 100 candidate releases (the same in every process)."""
    rng = np.random.default_rng(seed + 1000)
    return [random_event(rng) for _ in range(n)]


def state_of(s):
    return {f.name: f.state() for f in s.filters}


def decisions_of(s, cands):
    out = []
    for event, stated in cands:
        q = s.price(event, stated=stated)
        out.append([q.granted, q.filter, None if not math.isfinite(q.epsilon) else q.epsilon])
    return out


@pytest.mark.parametrize(
    "seed, filters",
    [(0, ("basic", "rdp", "gdp")), (1, ("basic", "rdp", "gdp")), (2, ("basic", "rdp", "gdp"))]
    + [(3, ("basic",)), (4, ("advanced", "zcdp"))],
)
def test_live_reopened_and_a_second_process_agree(tmp_path, monkeypatch, seed, filters):
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 7)  # several checkpoints, rows after the last
    path = tmp_path / "l.sqlite"
    rng = np.random.default_rng(seed)
    eps = float(rng.uniform(5, 8))
    live = BudgetSession(budget=PrivacyBudget(epsilon=eps, delta=1e-6), ledger=path, filters=filters, event_delta=1e-8)
    granted = refused = 0
    for _ in range(40):
        if live.remaining().epsilon < 1.0:  # leave room: the candidates get both answers
            break
        event, stated = random_event(rng)
        try:
            live.charge(event, mechanism="m", parameters={}, stated=stated)
            granted += 1
        except BudgetExceededError:
            refused += 1
    assert granted >= 2
    cands = candidates(seed)
    want_state, want = state_of(live), decisions_of(live, cands)
    assert any(d[0] for d in want)

    reopened = BudgetSession.open(path)
    assert state_of(reopened) == want_state
    assert decisions_of(reopened, cands) == want

    out = subprocess.run(
        [sys.executable, WORKER, str(path), str(seed)], capture_output=True, text=True, timeout=120, check=True
    )
    other = json.loads(out.stdout)
    assert other["state"] == json.loads(json.dumps(want_state))
    assert other["decisions"] == json.loads(json.dumps(want))

    report = verify_ledger(path)
    assert report.flags == () and report.integrity == ()
    live.close()
    reopened.close()


def test_the_hindsight_example_is_decided_the_same_after_reopening(tmp_path):
    """The issue's example: two Gaussian blocks under the basic filter. Folded into one
    add(event, 2) on reopening they were priced with the delta left at the end; now each
    block keeps the price it was charged live."""
    path = tmp_path / "l.sqlite"
    budget = PrivacyBudget(epsilon=7.0, delta=1e-5)
    live = BudgetSession(budget=budget, ledger=path, filters=("basic",), event_delta=7e-6)
    block = Composed(events=(Gaussian(sigma=2.0), Gaussian(sigma=2.0)))
    for _ in range(2):
        live.charge(block, mechanism="m", parameters={})
    reopened = BudgetSession.open(path)
    assert reopened.spent() == live.spent()
    grid = [Laplace(scale=1 / x) for x in np.linspace(0.01, 1.5, 80)]
    assert [live.can_afford(e) for e in grid] == [reopened.can_afford(e) for e in grid]
    refused = [e for e in grid if not live.can_afford(e)]
    assert refused, "the grid must reach past the budget"


def test_verification_flags_a_row_whose_stored_price_was_altered(tmp_path):
    path = tmp_path / "l.sqlite"
    s = BudgetSession(budget=PrivacyBudget(epsilon=5.0, delta=1e-6), ledger=path)
    for e in (0.5, 0.25, 1.0):
        s.charge(PureDP(epsilon=e), mechanism="m", parameters={}, label=f"r{e}")
    s.close()
    assert verify_ledger(path).flags == ()
    # someone able to write the file lowers row 2's basic price and recomputes the chain
    db = sqlite3.connect(path)
    prices = json.loads(db.execute("SELECT prices FROM charges WHERE seq = 2").fetchone()[0])
    prices["basic"] = price_to_json((0.01, 0.0))
    db.execute("UPDATE charges SET prices = ? WHERE seq = 2", (json.dumps(prices, sort_keys=True),))
    rows = db.execute(
        "SELECT seq, timestamp, mechanism, parameters, event, label, randomness, prev_hash, hash, stated, prices "
        "FROM charges WHERE seq >= 2 ORDER BY seq"
    ).fetchall()
    prev = rows[0][7]
    for r in rows:
        digest = _row_hash(None, prev, *r[:7], *r[9:])
        db.execute("UPDATE charges SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, r[0]))
        prev = digest
    db.commit()
    db.close()
    report = verify_ledger(path)
    assert report.integrity == ()  # the chain is consistent again ...
    (flag,) = report.flags  # ... but the price is not the one the rows before it give
    assert "release #2 (r0.25)" in flag and "filter basic" in flag and "re-derived" in flag
    # a reader replays the stored (altered) price; verification is what catches it
    assert BudgetSession.open(path).spent().by_filter["basic"] == pytest.approx(1.51)


def test_checkpoints_make_reopening_read_only_the_rows_after_the_last(tmp_path, monkeypatch):
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 5)
    path = tmp_path / "l.sqlite"
    s = BudgetSession(budget=PrivacyBudget(epsilon=100.0, delta=1e-6), ledger=path)
    for i in range(12):
        s.charge(PureDP(epsilon=0.1 + i / 100), mechanism="m", parameters={})
    assert [c.seq for c in s.ledger.checkpoints()] == [5, 10]
    reads = []
    original = type(s.ledger)._checked_rows  # what rows() and a session's catch-up read

    def counting(self, after, verify, expect=None):
        reads.append(after)
        return original(self, after, verify, expect)

    monkeypatch.setattr(type(s.ledger), "_checked_rows", counting)
    again = BudgetSession.open(path)
    assert reads == [10] and state_of(again) == state_of(s)
    # verification from an anchor re-derives only the rows after the checkpoint before it
    head = verify_ledger(path).head
    s.charge(PureDP(epsilon=0.3), mechanism="m", parameters={})
    incremental = verify_ledger(path, since=head)
    assert incremental.first_verified == 11 and [r.seq for r in incremental.rows] == [11, 12, 13]
    assert incremental.flags == ()
    # a checkpoint whose state was altered (and re-hashed) is caught by full verification
    db = sqlite3.connect(path)
    db.execute("UPDATE checkpoints SET state = replace(state, '0.', '0.0') WHERE seq = 5")
    db.commit()
    db.close()
    assert any("checkpoint at row 5" in f for f in verify_ledger(path).flags)


def test_a_gaussian_asked_at_eps_delta_costs_no_more_than_that_by_default():
    """Laplace 0.5 + Gaussian (0.5, 1e-7) + report-noisy-max 0.5 under the default filters:
    the basic filter prices the Gaussian at its stated point, so 1.5 is spent, not more."""
    s = BudgetSession(budget=PrivacyBudget(epsilon=2.0, delta=1e-6))
    LaplaceMechanism(epsilon=0.5, sensitivity=1.0).release(3.0, charger=s)
    gauss = GaussianMechanism(epsilon=0.5, delta=1e-7, sensitivity=1.0)
    quote = s.price(gauss.privacy_event(), stated=gauss.stated_guarantee())
    assert quote.granted and quote.filter == "basic" and quote.by_filter["basic"] <= 0.5
    gauss.release(3.0, charger=s)
    ReportNoisyMax(epsilon=0.5, sensitivity=1.0).release([1.0, 2.0, 3.0], charger=s)
    spent = s.spent()
    assert spent.filter == "basic" and spent.epsilon <= 1.5 and float(spent) == spent.epsilon
    assert spent.epsilon > 1.5 - 1e-4  # the Gaussian's price is its proven epsilon at 1e-7
    assert s.remaining().epsilon == pytest.approx(2.0 - spent.epsilon)
    (_, row, _) = s.ledger.rows()
    assert row.charge.stated == ApproxDP(epsilon=0.5, delta=1e-7)


def test_a_refusal_is_one_line_in_epsilon_without_event_json():
    s = BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    s.charge(PureDP(epsilon=0.9), mechanism="m", parameters={}, label="first")
    with pytest.raises(BudgetExceededError) as err:
        s.charge(DiscreteGaussian(sigma=3.0, sensitivity=1), mechanism="m", parameters={}, label="count")
    msg = str(err.value)
    assert "\n" not in msg and "{" not in msg and msg.startswith("count refused") and msg.count("count refused") == 1
    assert "basic: unsupported" in msg and "rdp: costs epsilon" in msg and "gdp:" in msg
    assert "Nothing was released or charged" in msg


def _forge_checkpoints(path, change):
    """Rewrite every checkpoint's state with ``change`` and recompute the (unkeyed)
    checkpoint chain, as anyone able to write the file can."""
    from privreg.budget.ledger import GENESIS_TAG, _checkpoint_hash, _digest, _dumps

    db = sqlite3.connect(path)
    meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    prev = _digest(None, GENESIS_TAG + _dumps(meta))
    for seq, state, _, _ in db.execute("SELECT * FROM checkpoints ORDER BY seq").fetchall():
        text = _dumps(change(json.loads(state)))
        row_hash = db.execute("SELECT hash FROM charges WHERE seq = ?", (seq,)).fetchone()[0]
        digest = _checkpoint_hash(None, prev, seq, row_hash, text)
        db.execute("UPDATE checkpoints SET state = ?, prev_hash = ?, hash = ? WHERE seq = ?", (text, prev, digest, seq))
        prev = digest
    db.commit()
    db.close()


def test_incremental_verification_catches_a_forged_checkpoint_it_starts_from(tmp_path, monkeypatch):
    """The anchor a `--since` verification trusts must commit to the checkpoint it starts
    from: else resetting the checkpoints (and re-hashing their own chain) lets every reader
    spend the budget again while the incremental verification reports nothing."""
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 5)
    path = tmp_path / "l.sqlite"
    s = BudgetSession(budget=PrivacyBudget(epsilon=2.0, delta=1e-6), ledger=path)
    for _ in range(10):
        s.charge(PureDP(epsilon=0.15), mechanism="m", parameters={})
    s.close()
    head = verify_ledger(path).head  # 10:..., trusted
    assert verify_ledger(path, since=head).flags == ()

    def reset(state):
        for f in state.values():
            f["sums"] = [0.0] * len(f["sums"])
        return state

    _forge_checkpoints(path, reset)
    assert BudgetSession.open(path).spent().epsilon == 0.0  # a reader trusts the last checkpoint
    flags = verify_ledger(path, since=head).flags
    assert flags and any("row 10" in f for f in flags)
    assert verify_ledger(path, expect_head=head).flags  # full verification catches it too


def test_a_ledger_without_price_columns_is_charged_as_it_is_reopened(tmp_path):
    """A format-2 ledger stores neither prices nor the stated guarantee: the live session
    must price each release as a reader will re-price it (without what it cannot store),
    else the live session and the reopened ledger hold different states and decide
    differently."""
    path = tmp_path / "l.sqlite"
    BudgetSession(budget=PrivacyBudget(epsilon=1.45, delta=1e-6), ledger=path).close()
    db = sqlite3.connect(path)  # the format before prices: no stated/prices columns, no checkpoints
    db.execute("ALTER TABLE charges DROP COLUMN stated")
    db.execute("ALTER TABLE charges DROP COLUMN prices")
    db.execute("DROP TABLE checkpoints")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
    db.commit()
    db.close()
    live = BudgetSession.open(path)
    assert not live.ledger.priced
    gauss = GaussianMechanism(epsilon=0.5, delta=1e-7, sensitivity=1.0)
    live.charge(gauss.privacy_event(), mechanism="g", parameters={}, stated=gauss.stated_guarantee())
    reopened = BudgetSession.open(path)
    assert state_of(reopened) == state_of(live)
    nxt = PureDP(epsilon=0.9)
    assert live.can_afford(nxt) == reopened.can_afford(nxt)
    assert verify_ledger(path).flags == ()


def test_a_stated_guarantee_the_event_does_not_imply_is_never_trusted():
    """A caller (or a lying mechanism) states (0.01, 1e-5) for a Gaussian of sigma 1: the
    stated point only chooses the delta; the epsilon charged is what the accountants prove
    there, never the stated one."""
    from privreg.accountant.curves import gaussian_epsilon

    s = BudgetSession(budget=PrivacyBudget(epsilon=20.0, delta=3e-4))  # 1e-4 per filter
    lie = ApproxDP(epsilon=0.01, delta=1e-5)
    quote = s.price(Gaussian(sigma=1.0), stated=lie)
    true_eps = gaussian_epsilon(1e-5, 1.0)
    assert quote.granted and quote.by_filter["basic"] >= true_eps * (1 - 1e-9) > 4.0
    s.charge(Gaussian(sigma=1.0), mechanism="m", parameters={}, stated=lie)
    assert s.spent().by_filter["basic"] >= true_eps * (1 - 1e-9)
    # a stated delta above what the filter has left is priced at the delta left
    big = ApproxDP(epsilon=0.01, delta=0.5)
    basic = s.filters[0]
    s.charge(Gaussian(sigma=1.0), mechanism="m", parameters={}, stated=big)
    assert s.filters[0].sums[1] == pytest.approx(basic.delta) and s.filters[0].sums[1] <= basic.delta
    assert s.filters[0].vouches()


def test_a_refusal_by_group_privacy_names_the_neighbour_relation():
    """An add/remove (eps, delta) release under a replace-one budget is charged by group
    privacy: (2 eps, (1 + e^eps) delta). Refused for that, the one-line reason must say so,
    not only that a delta "would be exhausted"."""
    s = BudgetSession(budget=PrivacyBudget(epsilon=10.0, delta=1e-6, neighbouring="replace_one"))
    with pytest.raises(BudgetExceededError) as err:
        s.charge(ApproxDP(epsilon=4.0, delta=1e-7), mechanism="m", parameters={}, label="ngrams")
    msg = str(err.value)
    assert "\n" not in msg and "add_remove" in msg and "replace_one" in msg and "group privacy" in msg
    assert "add_remove" in s.price(ApproxDP(epsilon=4.0, delta=1e-7)).reason
    # the same release stated for replace-one neighbours fits, and its refusal-free quote says nothing of it
    assert s.price(ApproxDP(epsilon=4.0, delta=1e-7, neighbouring="replace_one")).granted


def test_a_pair_filter_refusing_by_neighbour_relation_says_so():
    """The basic filter cannot relate these releases to a replace-one budget; its reason
    must say why (group privacy, Poisson subsampling), not ask for an (epsilon, delta) the
    release already states."""
    s = BudgetSession(budget=PrivacyBudget(epsilon=100.0, delta=1e-6, neighbouring="replace_one"))
    reason = s.price(ApproxDP(epsilon=30.0, delta=0.1)).reason
    basic = reason.split("; ")[0]
    assert basic.startswith("basic: unsupported") and "group privacy" in basic and "state the" not in basic
    sampled = PoissonSampled(sampling_probability=0.1, event=Gaussian(sigma=2.0))
    basic = s.price(sampled).reason.split("; ")[0]
    assert "Poisson subsampling amplifies add/remove guarantees only" in basic and "state the" not in basic
    # a curve release without a delta to price it at still gets the advice to state one
    plain = BudgetSession(budget=PrivacyBudget(epsilon=100.0, delta=1e-6), filters=("basic",))
    assert "state the release's (epsilon, delta)" in plain.price(Gaussian(sigma=2.0)).reason
