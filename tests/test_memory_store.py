"""The in-memory ledger behind ``BudgetSession(ledger=":memory:")`` (MemoryLedger) against
the SQLite ledger it replaced: on a random adversarial sequence of events under a seed,
both take the same decision on every charge, hold the same spending, and write the same
rows, prices, checkpoints and hash chain; and the memory ledger keeps the SQLite
ledger's audit trail (verification, tamper detection, atomic transactions)."""

import math
import random

import pytest

import privreg.budget.filters as filters_module
import privreg.budget.ledger as ledger_module
import privreg.budget.session as session_module
from privreg.budget.filters import price_to_json
from privreg.budget.ledger import Ledger, LedgerError, _dumps
from privreg.budget.memory_store import MemoryLedger
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core import (
    ApproxDP,
    BudgetExceededError,
    Charge,
    Composed,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    PoissonSampled,
    PureDP,
    SelfComposed,
)
from privreg.core.charging import jsonable
from privreg.core.events import ZCDP

FILTER_SETS = [("basic",), None, ("basic", "advanced", "zcdp", "rdp", "gdp"), ("rdp",)]


def _random_event(r: random.Random, f: float):
    """One event of an adversary's mix at strength ``f``: repeated kinds (so memoised
    prices are reused), fresh parameters, blocks, and events some filters cannot price."""
    kind = r.randrange(9)
    if kind == 0:
        return PureDP(epsilon=r.choice([0.01, 0.05, 0.2]) * f)
    if kind == 1:
        return PureDP(epsilon=r.uniform(1e-4, 0.3) * f)
    if kind == 2:
        return ApproxDP(epsilon=r.choice([0.0, 0.1, 0.3]) * f, delta=r.choice([1e-9, 1e-8, 2e-7]))
    if kind == 3:
        return Gaussian(sigma=r.choice([3.0, 8.0, 20.0]) / f)
    if kind == 4:
        return Laplace(scale=r.uniform(5.0, 50.0) / f)
    if kind == 5:
        return DiscreteLaplace(scale=r.choice([10.0, 40.0]) / f, sensitivity=r.choice([1, 2]))
    if kind == 6:
        return SelfComposed(event=PureDP(epsilon=0.01 * f), count=r.randrange(1, 5))
    if kind == 7:
        return Composed(events=(PureDP(epsilon=0.02 * f), Gaussian(sigma=r.choice([10.0, 30.0]) / f)))
    return r.choice(
        [ZCDP(rho=r.choice([1e-4, 1e-3]) * f), PoissonSampled(sampling_probability=0.1, event=Gaussian(sigma=2.0 / f))]
    )


def _sqlite_twin(memory: BudgetSession) -> BudgetSession:
    """A session with the same settings on the SQLite ledger ``Ledger(":memory:")`` (the
    store ``":memory:"`` meant before MemoryLedger)."""
    meta = {k: v for k, v in memory.ledger.meta.items() if k not in ("chain", "meta_mac")}
    return BudgetSession(
        budget=memory.budget,
        ledger=Ledger(":memory:", meta=meta),
        filters=memory.filter_names,
        event_delta=memory.event_delta,
    )


def _charge(s: BudgetSession, event, stated, i):
    try:
        s.charge(event, mechanism=f"m{i % 3}", parameters={"i": i % 5, "nested": {"x": 1.5}}, stated=stated)
        return "granted"
    except BudgetExceededError as exc:
        return str(exc)


def _stored(row):
    c = row.charge
    return (row.seq, c.mechanism, c.parameters, c.event, c.label, c.randomness, c.stated, row.prices, row.hash)


def _play(s: BudgetSession, seed: int):
    """An adaptive adversary: it asks for more after a grant and less after a refusal, so
    the sequence keeps probing the boundary of every filter. Returns every decision with
    the spending after it (equal decisions give equal sequences)."""
    r = random.Random(seed)
    out, strength = [], 1.0
    for i in range(160):
        event = _random_event(r, strength if r.random() < 0.8 else 1.0)
        stated = ApproxDP(epsilon=0.05, delta=1e-9) if isinstance(event, Gaussian) and r.random() < 0.5 else None
        decision = _charge(s, event, stated, i)
        out.append((event, decision, s.spent()))
        strength = strength * 1.5 if decision == "granted" else strength / 3
    return out


def _on_copies(self, charge, event, stated, what):
    """A charge decided on copies of the filters, which replace them once the row is
    stored (the session's way before it decided on ``Filter.after``)."""
    trial, prices = self._trial(event, stated, what)
    row = self._append(charge, trial, prices)
    if row is not None:
        self._filters = trial
    return row


def _without_memos(monkeypatch):
    """Price every release afresh, decide it on copies of the filters, and encode every
    row's prices and parameters again, as the session did before its memos and
    ``Filter.after``: the reference decisions and texts."""
    monkeypatch.setattr(filters_module, "_PRICE_MEMO", 0)
    monkeypatch.setattr(BudgetSession, "_charge_once", _on_copies)
    monkeypatch.setattr(
        BudgetSession, "_encoded", lambda self, fs, prices: {f.name: price_to_json(p) for f, p in zip(fs, prices)}
    )
    monkeypatch.setattr(ledger_module, "_parameters_json", lambda parameters: _dumps(jsonable(parameters)))


@pytest.mark.parametrize("filters", FILTER_SETS, ids=lambda f: "default" if f is None else "+".join(f))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_memory_and_sqlite_sessions_decide_and_record_alike(filters, seed, monkeypatch):
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 7)  # many checkpoints, replayed below
    monkeypatch.setattr(session_module.time, "time", lambda: 1.7e9)  # same timestamps: same hashes
    memory = BudgetSession(budget=PrivacyBudget(epsilon=3.0, delta=1e-6), filters=filters, event_delta=1e-7)
    sqlite = _sqlite_twin(memory)
    assert type(memory.ledger) is MemoryLedger and type(sqlite.ledger) is Ledger
    got = _play(memory, seed)
    assert _play(sqlite, seed) == got
    with monkeypatch.context() as m:
        _without_memos(m)
        reference = _sqlite_twin(memory)
        assert _play(reference, seed) == got, "the memoised prices must take the decisions fresh prices take"
    granted = sum(d == "granted" for _, d, _ in got)
    assert 30 < granted < len(got) - 30, "the sequence must both grant and refuse (else the check is vacuous)"
    # the same rows, prices, checkpoints and hash chain: a head commits to all of them
    assert memory.ledger.head() == sqlite.ledger.head() == reference.ledger.head()
    assert [_stored(x) for x in memory.ledger.rows()] == [_stored(x) for x in sqlite.ledger.rows()]
    assert memory.ledger.checkpoints() == sqlite.ledger.checkpoints() != []
    assert memory.ledger.verify() == [] == sqlite.ledger.verify()
    # a second session on the same memory ledger starts from its last checkpoint and the
    # stored prices after it, and holds the same state
    again = BudgetSession(budget=memory.budget, ledger=memory.ledger, filters=filters, event_delta=1e-7)
    assert again.spent() == memory.spent()
    assert again.price(PureDP(epsilon=0.1)) == memory.price(PureDP(epsilon=0.1)) == sqlite.price(PureDP(epsilon=0.1))


def test_the_default_ledger_is_the_memory_store_with_the_sqlite_genesis():
    s = BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    assert isinstance(s.ledger, MemoryLedger) and s.ledger.path == ":memory:"
    assert s.ledger.genesis() == _sqlite_twin(s).ledger.genesis()
    keyed = BudgetSession(budget=PrivacyBudget(epsilon=1.0), key=b"k" * 16)
    keyed.charge(PureDP(epsilon=0.1), mechanism="m", parameters={})
    assert keyed.ledger.chain == "hmac-sha256" and keyed.ledger.verify() == []


def _charged(n=5):
    s = BudgetSession(budget=PrivacyBudget(epsilon=10.0, delta=1e-6))
    for i in range(n):
        s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={"i": i})
    return s


def test_verify_detects_an_edited_row_and_an_anchor_after_truncation():
    s = _charged()
    ledger = s.ledger
    anchor = f"{ledger.head()[0]}:{ledger.head()[1]}"
    assert ledger.verify(expect_head=anchor) == []
    row = list(ledger._rows[2])
    row[3] = row[3].replace('"i":2', '"i":7')
    ledger._rows[2] = tuple(row)
    assert any("row 3: contents do not match" in p for p in ledger.verify())
    with pytest.raises(LedgerError, match="row 3"):
        ledger.rows()
    del ledger._rows[4]
    assert any("gone" in p or "removed" in p for p in ledger.verify(expect_head=anchor))


def test_a_transaction_that_raises_leaves_nothing():
    s = _charged(2)
    ledger = s.ledger
    head = ledger.head()
    charge = Charge(timestamp=1.0, mechanism="m", parameters={}, event=PureDP(epsilon=0.1))
    seen = []

    def abandon():
        with ledger.transaction():
            ledger.append(charge, prices={"basic": [0.1, 0.0]})
            seen.append(ledger.head()[0])
            raise RuntimeError("abandon")

    with pytest.raises(RuntimeError):
        abandon()
    assert seen == [3]
    assert ledger.head() == head and ledger.verify() == []
    with pytest.raises(LedgerError, match="inside transaction"):
        ledger.append(charge)
    assert ledger.try_append(charge, expected_seq=1) is None  # a stale head appends nothing
    assert ledger.try_append(charge, expected_seq=2).seq == 3


def test_a_closed_memory_ledger_refuses_and_run_ends_are_kept():
    s = _charged(1)
    s.ledger.record_run_end("b", ended=2.0, status="ok", releases=1)
    s.ledger.record_run_end("a", ended=1.0, status="failed", releases=0)
    assert s.ledger.run_end_rows() == [("a", 1.0, "failed", 0), ("b", 2.0, "ok", 1)]
    s.close()
    with pytest.raises(LedgerError, match="closed"):
        s.charge(PureDP(epsilon=0.1), mechanism="m", parameters={})


def test_refusals_charge_nothing_and_spending_is_finite():
    s = BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    s.charge(PureDP(epsilon=0.9), mechanism="m", parameters={})
    with pytest.raises(BudgetExceededError):
        s.charge(PureDP(epsilon=0.2), mechanism="m", parameters={})
    assert s.ledger.head()[0] == 1 and math.isclose(float(s.spent()), 0.9)


def test_encoded_prices_are_read_only_and_equal_to_their_dict():
    from privreg.budget.ledger import EncodedPrices

    s = _charged(1)
    data = {"basic": [0.1, 0.0], "gdp": {"unsupported": "why"}}
    encoded = EncodedPrices(data)
    row = s.ledger.try_append(
        Charge(timestamp=1.0, mechanism="m", parameters={}, event=PureDP(epsilon=0.1)), expected_seq=1, prices=encoded
    )
    assert row.prices == data and row.prices is encoded and encoded.text == _dumps(data)
    row.prices["basic"].append(9.0)  # a copy: the encoded value and the stored text stay
    assert encoded == data and s.ledger.rows()[-1].prices == data
    with pytest.raises(TypeError):
        hash(encoded)
