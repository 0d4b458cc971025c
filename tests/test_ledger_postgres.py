"""The ledger on PostgreSQL (privreg.budget.store_postgres): the same rows, prices,
checkpoints and verification as SQLite, and the trust model enforced by the server:
analysts append only through the append function, auditors read, and no role changes a
row. Needs a server (tests/postgres_helpers.py: skipped loudly without one, failed under
CI=true)."""

import contextlib
import io
import json
import subprocess
import sys

import pytest
from postgres_helpers import as_role, create_roles, fresh, server_url, sql

from privreg.budget import session as session_module
from privreg.budget.ledger import LedgerError
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.store_postgres import (
    _RESULT,
    WITHIN_ARGS,
    PostgresLedger,
    _Connection,
    grant_sql,
    parse_url,
    schema_of,
)
from privreg.budget.verify import verify_ledger
from privreg.cli.main import main
from privreg.core import ApproxDP, PureDP
from privreg.core.errors import BudgetExceededError, PrivregValueError


@pytest.fixture(scope="module")
def server():
    return server_url()


def cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def team(server):
    """Roles owner, alice (analyst), bob (analyst), carol (auditor) and mallory (granted too
    much later), a budget created by the owner, and the grant SQL run as the owner."""
    roles = {r: fresh(r) for r in ("owner", "alice", "bob", "carol", "mallory")}
    create_roles(server, *roles.values())
    budget = fresh("team").replace("_", "-")
    url = f"{server}#{budget}"
    sql(server, cli("ledger", "grant", url, "--owner", roles["owner"]))  # as the database's owner
    owner_url = as_role(url, roles["owner"])
    cli("ledger", "init", as_role(server, roles["owner"]), "--name", budget, "--epsilon", "1", "--delta", "1e-6")
    printed = cli(
        "ledger",
        "grant",
        owner_url,
        "--analyst",
        roles["alice"],
        "--analyst",
        roles["bob"],
        "--auditor",
        roles["carol"],
    )
    sql(owner_url.partition("#")[0], printed)
    return {"url": url, "roles": roles, "as": lambda r: as_role(url, roles[r])}


def charge(session: BudgetSession, n: int, label: str) -> None:
    for i in range(n):
        session.charge(PureDP(epsilon=0.01), mechanism="laplace", parameters={"scale": 100}, label=f"{label}{i}")


def create(url: str, *, key: bytes | None, epsilon: float, delta: float) -> None:
    """Create budget ``url`` with the default rule, keyed with ``key`` (or not)."""
    with BudgetSession(budget=PrivacyBudget(epsilon=epsilon, delta=delta)) as probe:
        meta = {k: probe.ledger.meta[k] for k in ("format", "budget", "rule")}
    PostgresLedger.create(url, meta=meta, key=key).close()


def refused(conninfo: str, statement: str) -> str:
    """The server's SQLSTATE refusing ``statement`` (fails if it was accepted)."""
    import psycopg

    with psycopg.connect(conninfo.partition("#")[0], autocommit=True) as conn, pytest.raises(psycopg.Error) as info:
        conn.execute(statement)
    return str(info.value.sqlstate)


def test_two_analysts_share_one_budget_and_verification_is_clean(team):
    import psycopg

    with BudgetSession(budget=PrivacyBudget(epsilon=1, delta=1e-6), ledger=team["as"]("alice"), event_delta=1e-6) as a:
        charge(a, 3, "alice")
        with BudgetSession.open(team["as"]("bob")) as b:  # the budget and rule read from the server
            charge(b, 2, "bob")
            assert b.ledger.head()[0] == 5
        charge(a, 1, "alice-again")  # alice catches up with bob's rows first
        assert a.ledger.head()[0] == 6
        with BudgetSession.open(team["as"]("bob")) as b:
            charge(b, 1, "bob-again")
        a.ledger.contended = True  # the server admits alice's next one within its room: her grants allow it
        charge(a, 1, "alice-within")
        assert a.ledger.head()[0] == 8
        conninfo, name, _ = parse_url(team["as"]("carol"))
        with psycopg.connect(conninfo) as conn:  # the auditor reads which call wrote which row
            assert conn.execute(f'SELECT seq FROM "{schema_of(name)}".requests').fetchall() == [(8,)]
    report = verify_ledger(team["as"]("carol"))  # the auditor verifies
    assert report.flags == () and report.integrity == ()
    assert [r.charge.label for r in report.rows] == [
        "alice0",
        "alice1",
        "alice2",
        "bob0",
        "bob1",
        "alice-again0",
        "bob-again0",
        "alice-within0",
    ]
    assert report.spent is not None and abs(report.spent - 0.08) < 1e-9


def test_the_analyst_cannot_update_delete_or_insert(team):
    with BudgetSession.open(team["as"]("alice")) as a:
        charge(a, 1, "before")
    alice = team["as"]("alice")
    schema = '"privreg_' + parse_url(team["url"])[1] + '"'
    assert refused(alice, f"UPDATE {schema}.charges SET label = 'rewritten'") == "42501"  # insufficient_privilege
    assert refused(alice, f"DELETE FROM {schema}.charges") == "42501"
    assert refused(alice, f"DELETE FROM {schema}.checkpoints") == "42501"
    assert refused(alice, f"UPDATE {schema}.meta SET value = value") == "42501"
    row = "(999, 0, 'm', '{}', '{}', '', '{}', 'x', 'forged', '', '{}')"
    assert refused(alice, f"INSERT INTO {schema}.charges VALUES {row}") == "42501"
    assert refused(alice, f"TRUNCATE {schema}.charges") == "42501"
    # the auditor reads and cannot append, not even through the function
    with pytest.raises(LedgerError, match="lacks the right"), BudgetSession.open(team["as"]("carol")) as c:
        charge(c, 1, "auditor")
    assert verify_ledger(team["as"]("carol")).flags == ()


def test_the_trigger_stops_a_role_granted_too_much_and_verification_says_so(team):
    import psycopg

    schema = '"privreg_' + parse_url(team["url"])[1] + '"'
    owner, mallory = team["as"]("owner"), team["as"]("mallory")
    with BudgetSession.open(team["as"]("alice")) as a:
        charge(a, 1, "row")
    sql(owner.partition("#")[0], f'GRANT USAGE ON SCHEMA {schema} TO "{team["roles"]["mallory"]}"')
    sql(owner.partition("#")[0], f'GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO "{team["roles"]["mallory"]}"')
    try:
        for statement in (
            f"UPDATE {schema}.charges SET label = 'rewritten'",
            f"DELETE FROM {schema}.charges WHERE seq = 1",
            f"UPDATE {schema}.meta SET value = '{{\"epsilon\": 100}}' WHERE key = 'budget'",
            f"DELETE FROM {schema}.checkpoints",
            f"TRUNCATE {schema}.charges CASCADE",
        ):
            with (
                psycopg.connect(mallory.partition("#")[0], autocommit=True) as conn,
                pytest.raises(psycopg.errors.RaiseException, match="append-only"),
            ):
                conn.execute(statement)
        flags = verify_ledger(team["as"]("carol")).flags
        for table in ("charges", "checkpoints", "meta", "runs"):
            wanted = f"role {team['roles']['mallory']} may DELETE, INSERT, TRUNCATE, UPDATE table {table} directly"
            assert any(wanted in f for f in flags), flags
        assert verify_ledger(team["as"]("carol")).deployment != ()
    finally:
        sql(owner.partition("#")[0], f'REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM "{team["roles"]["mallory"]}"')
    assert verify_ledger(team["as"]("carol")).flags == ()


def test_a_disabled_trigger_and_an_edit_behind_it_are_reported(server):
    url = f"{server}#{fresh('edit').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "1")
    with BudgetSession.open(url) as s:
        charge(s, 3, "r")
    schema = '"privreg_' + parse_url(url)[1] + '"'
    # a superuser (or the owner) can still disable the trigger: the chain and the check catch it
    sql(
        server,
        f"ALTER TABLE {schema}.charges DISABLE TRIGGER append_only",
        f"UPDATE {schema}.charges SET label = 'edited' WHERE seq = 2",
    )
    report = verify_ledger(url)
    assert report.deployment == ("table charges: trigger append_only is disabled: its rows can be changed",)
    assert report.integrity == ("row 2: contents do not match its hash (edited)",)
    # each under its own heading: the server's rights are not the chain's problems
    assert set(report.flags) == {f"deployment: {report.deployment[0]}", f"hash chain: {report.integrity[0]}"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["ledger", "verify", url]) == 3
    assert "  ! deployment: table charges: trigger append_only is disabled" in out.getvalue()
    assert "hash chain: table" not in out.getvalue()


def test_checkpoints_and_stored_prices_as_on_sqlite(server, monkeypatch):
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 4)
    url = f"{server}#{fresh('cp').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "0.1", "--delta", "1e-6")
    with BudgetSession.open(url) as s:
        charge(s, 9, "c")
        with pytest.raises(BudgetExceededError):
            charge(s, 5, "over")
        granted = s.ledger.head()[0]
    with PostgresLedger(url, readonly=True) as ledger:
        assert [c.seq for c in ledger.checkpoints()] == [4, 8]
        assert all(row.prices for row in ledger.rows())
        assert ledger.verify() == []
    with BudgetSession.open(url) as again:  # replays the stored prices (checkpoints untrusted), decides the same
        assert not again.can_afford(PureDP(epsilon=0.01))
    report = verify_ledger(url)
    assert report.flags == () and len(report.rows) == granted == 10


def test_a_charge_after_others_catches_up_from_its_append_and_decides_as_a_fresh_session(server, monkeypatch):
    """A charge sends its append at once; when others appended since, that call returns
    their rows, the turn's call the rows after them, and the session folds them with no
    other query. Its state is then exactly what a session opened afresh folds."""
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 4)  # a checkpoint among the rows caught up
    url = f"{server}#{fresh('calls').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "1", "--delta", "1e-6")
    real, calls = _Connection.execute, []

    def execute(self, sql_text, params=(), *, retry=True):
        calls.append(sql_text.split("(")[0].removeprefix("SELECT * FROM ").removeprefix("SELECT "))
        return real(self, sql_text, params, retry=retry)

    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        charge(a, 1, "a")
        charge(b, 4, "b")  # rows 2-5, a checkpoint at row 4
        monkeypatch.setattr(_Connection, "execute", execute)
        charge(a, 1, "a-after-b")
        # the first append returned b's rows; the one in the turn committed asynchronously, then flushed
        assert calls == ["append", "wait_turn", "append", "pg_logical_emit_message"]
        calls.clear()
        charge(a, 1, "a-alone")
        assert calls == ["append"]  # nothing new: one round trip
        monkeypatch.setattr(_Connection, "execute", real)
        with BudgetSession.open(url) as fresh_session:
            assert fresh_session.spent() == a.spent() and fresh_session.remaining() == a.remaining()
            assert [f.state() for f in fresh_session.filters] == [f.state() for f in a.filters]
    assert verify_ledger(url).flags == ()


@pytest.mark.parametrize("keyed", [False, True])
def test_a_turn_reads_seq_hash_and_prices_on_an_unkeyed_chain_and_decides_as_a_fresh_session(
    server, monkeypatch, keyed
):
    """A writer that waits for its turn gets the rows since the newest one it knew. On an
    unkeyed chain (whose hashes, chaining and prices the server checked on append) it reads
    each row's seq, hash and prices, a repeated price text sent once; on a keyed one the
    whole rows, their HMACs checked. Either way its filters then hold exactly what a
    session opened afresh folds, over rows whose prices differ and repeat."""
    key = bytes(range(32)) if keyed else None
    url = f"{server}#{fresh('lean').replace('_', '-')}"
    create(url, key=key, epsilon=50, delta=1e-5)
    real, waits, calls = _Connection.execute, [], []

    def execute(self, sql_text, params=(), *, retry=True):
        calls.append(sql_text.split("(")[0].removeprefix("SELECT * FROM ").removeprefix("SELECT "))
        if "wait_turn" in sql_text:
            found = real(self, sql_text, params, retry=retry).fetchall()
            waits.append((params, found))
            return _Rows(found)
        return real(self, sql_text, params, retry=retry)

    events = [PureDP(epsilon=0.01), PureDP(epsilon=0.01), ApproxDP(epsilon=0.2, delta=1e-7), PureDP(epsilon=0.03)]
    with BudgetSession.open(url, key=key) as a, BudgetSession.open(url, key=key) as b:
        a.charge(PureDP(epsilon=0.5), mechanism="laplace", parameters={}, label="a0")
        for i, ev in enumerate(events * 2):
            b.charge(ev, mechanism="m", parameters={}, label=f"b{i}")
        monkeypatch.setattr(_Connection, "execute", execute)
        a.ledger.contended = True  # straight to its turn: the rows since row 1 come with it
        a.ledger.admits_within = False  # (not first to the server's admission: see the test below)
        a.charge(PureDP(epsilon=0.02), mechanism="laplace", parameters={}, label="a1")
        monkeypatch.setattr(_Connection, "execute", real)
        [(params, found)] = waits
        # caught up from what the turn's call returned alone: no other read
        assert calls == ["wait_turn", "append", "pg_logical_emit_message"]
        assert params == ((1,) if keyed else (1, True)) and [r[1] for r in found] == list(range(1, 10))
        if keyed:  # whole rows
            assert all(r[5] is not None and r[11] is not None for r in found)
        else:  # seq, hash and prices, NULL where the row before's are the same
            assert all(r[5] is None and r[4] is None and r[9] is not None for r in found)
            assert [r[11] is None for r in found] == [False, False, True, False, False, False, True, False, False]
        with BudgetSession.open(url, key=key) as again:
            assert [f.state() for f in again.filters] == [f.state() for f in a.filters]
            assert again.spent() == a.spent()
    assert verify_ledger(url, key=key).flags == ()


def _calls(monkeypatch):
    real, calls = _Connection.execute, []

    def execute(self, sql_text, params=(), *, retry=True):
        calls.append(sql_text.split("(")[0].removeprefix("SELECT * FROM ").removeprefix("SELECT "))
        return real(self, sql_text, params, retry=retry)

    monkeypatch.setattr(_Connection, "execute", execute)
    return calls


def test_a_contended_charge_is_admitted_by_the_server_within_its_room(server, monkeypatch):
    """A writer that others outpace sends its charge with the room its vouching filter
    leaves (append_within): one call and a flush, no turn; the server chains and hashes
    the row after the rows it had not read, and the writer folds them and its own, to
    exactly what a session opened afresh holds. A keyed chain's writer never does (the
    server cannot hash its rows)."""
    url = f"{server}#{fresh('within').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "2", "--delta", "1e-6")
    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        assert a.ledger.admits_within
        charge(a, 1, "a")
        charge(b, 5, "b")
        b.charge(PureDP(epsilon=0.3), mechanism="m", parameters={}, label="other price")
        a.ledger.contended = True
        calls = _calls(monkeypatch)
        charge(a, 1, "a-within")
        assert calls == ["append_within", "pg_logical_emit_message"]
        assert a.ledger.head()[0] == 8 and a.ledger.contended  # others had appended since
        with BudgetSession.open(url) as again:
            assert [f.state() for f in again.filters] == [f.state() for f in a.filters]
        assert [r.charge.label for r in a.ledger.rows()][-1] == "a-within0"
    assert verify_ledger(url).flags == ()
    key = bytes(range(32))
    keyed = f"{server}#{fresh('within-keyed').replace('_', '-')}"
    create(keyed, key=key, epsilon=1, delta=0)
    with BudgetSession.open(keyed, key=key) as k:
        assert not k.ledger.admits_within


def test_a_row_the_session_cannot_read_after_the_servers_admission_leaves_its_filters_whole(server, monkeypatch):
    """After append_within stored the charge, the session folds the rows since and its
    own all or nothing: a row it cannot read raises (nothing is released) and its filters
    stay as they were, so its next charge catches up from the row it last held."""
    from privreg.budget.ledger import LedgerIntegrityError

    url = f"{server}#{fresh('within-fold').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "2")
    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        charge(a, 1, "a")
        charge(b, 3, "b")
        before = [f.state() for f in a.filters]
        real, seen = BudgetSession._text_prices, []

        def unreadable(self, text, seq, stored=None):
            seen.append(seq)
            if len(seen) == 3:
                raise LedgerIntegrityError("row cannot be decoded")
            return real(self, text, seq, stored)

        monkeypatch.setattr(BudgetSession, "_text_prices", unreadable)
        a.ledger.contended = True
        with pytest.raises(LedgerIntegrityError):
            charge(a, 1, "a-within")
        assert [f.state() for f in a.filters] == before
        monkeypatch.setattr(BudgetSession, "_text_prices", real)
        charge(a, 1, "a-next")
        with BudgetSession.open(url) as again:
            assert [f.state() for f in again.filters] == [f.state() for f in a.filters]
    assert verify_ledger(url).flags == ()


def test_a_budget_created_before_the_servers_admission_is_charged_through_whole_row_turns(server):
    """A budget whose schema predates append_within and the lean turn (wait_turn(bigint)
    alone) is still charged by this client, contended writers included: through turns that
    read whole rows, as it was created to be."""
    url = f"{server}#{fresh('older').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "2")
    schema = f'"{schema_of(parse_url(url)[1])}"'
    sql(
        server,
        f"DROP FUNCTION {schema}.append_within({WITHIN_ARGS})",
        f"ALTER FUNCTION {schema}.wait_turn(bigint, boolean) RENAME TO wait_turn_now",
        f"CREATE FUNCTION {schema}.wait_turn(p_after bigint) RETURNS TABLE ({_RESULT}) LANGUAGE sql "
        f"AS 'SELECT * FROM {schema}.wait_turn_now(p_after, false)'",
    )
    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        assert not a.ledger.admits_within
        charge(a, 1, "a")
        charge(b, 3, "b")
        a.ledger.contended = True
        calls = []
        real = _Connection.execute

        def execute(self, sql_text, params=(), *, retry=True):
            calls.append((sql_text.split("(")[0].removeprefix("SELECT * FROM "), len(params)))
            return real(self, sql_text, params, retry=retry)

        _Connection.execute = execute
        try:
            charge(a, 1, "a-late")
        finally:
            _Connection.execute = real
        assert calls[0] == ("wait_turn", 1)
        with BudgetSession.open(url) as again:
            assert [f.state() for f in again.filters] == [f.state() for f in a.filters]
    assert [r.charge.label for r in verify_ledger(url).rows] == ["a0", "b0", "b1", "b2", "a-late0"]


@pytest.mark.parametrize("case", ["delta-spent", "checkpoint-due", "beyond-room"])
def test_the_server_admits_within_room_only_where_a_session_that_read_every_row_would(server, monkeypatch, case):
    """append_within writes nothing, and the writer decides in its turn, when the rows since
    its state change a price it computed (a pair filter's delta left), when a checkpoint
    is due, or when they use more than the room; the grants are then those a single
    session makes. Each release here is priced as the turn prices it."""
    monkeypatch.setattr(session_module, "CHECKPOINT_EVERY", 6 if case == "checkpoint-due" else 512)
    url = f"{server}#{fresh('within-no').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "1", "--delta", "1e-6")
    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        charge(a, 1, "a")
        if case == "delta-spent":
            b.charge(ApproxDP(epsilon=0.01, delta=1e-9), mechanism="m", parameters={}, label="b")
        elif case == "checkpoint-due":
            charge(b, 4, "b")  # the next row is row 6
        else:  # a's state: 0.02 of 1 spent (room ~0.97 under basic); b spends 0.99 more
            b.charge(PureDP(epsilon=0.99), mechanism="m", parameters={}, label="b")
        a.ledger.contended = True
        calls = _calls(monkeypatch)
        if case == "beyond-room":
            with pytest.raises(BudgetExceededError):
                charge(a, 1, "a-late")
        else:
            charge(a, 1, "a-late")
        assert calls[:2] == ["append_within", "wait_turn"]
    with BudgetSession.open(url) as again, PostgresLedger(url, readonly=True) as ledger:
        if case == "checkpoint-due":
            assert [c.seq for c in ledger.checkpoints()] == [6]
        assert ledger.head()[0] == (2 if case == "beyond-room" else 3 if case == "delta-spent" else 6)
        assert again.spent().epsilon <= 1.0
    assert verify_ledger(url).flags == ()


def test_append_within_writes_nothing_for_a_missing_or_unknown_argument(server):
    """The server's admission refuses (writes nothing, returns false) when an argument is
    NULL or names no live filter, or the row it chains on is not the caller's: SQL's NULL
    never admits."""
    import psycopg

    url = f"{server}#{fresh('within-null').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "2")
    with BudgetSession.open(url) as s:
        charge(s, 2, "a")
        seq, digest = s.ledger.head()
    conninfo, name, _ = parse_url(url)
    good = [seq, digest, 1e9, "m", "{}", '{"kind": "pure_dp", "epsilon": 0.01}', "x", "{}", "", "{}", "basic"]
    cases = {
        "room NULL": (*good, None, '{"basic": [1]}', 512),
        "room empty": (*good, [], '{"basic": [1]}', 512),
        "fixed NULL": (*good, ["1.0", "0"], None, 512),
        "filter not live": (*good, ["1.0", "0"], '{"rdp": []}', 512),
        "every NULL": (*good, ["1.0", "0"], '{"basic": [1]}', None),
        "every 0": (*good, ["1.0", "0"], '{"basic": [1]}', 0),
        "another head": (seq, "0" * 64, *good[2:], ["1.0", "0"], '{"basic": [1]}', 512),
    }
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for why, args in cases.items():
            got = conn.execute(
                f'SELECT * FROM "{schema_of(name)}".append_within(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '
                f"%s::text[], %s::jsonb, %s, 'req')",
                args,
            ).fetchall()
            assert got == [(False, None, None, None)], why
        with PostgresLedger(url, readonly=True) as ledger:
            assert ledger.head()[0] == 2
            prices = ledger.rows()[-1].prices
        control = (*good[:9], json.dumps(dict(prices), sort_keys=True, separators=(",", ":")), "basic")
        got = conn.execute(
            f'SELECT * FROM "{schema_of(name)}".append_within(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '
            f"%s::text[], %s::jsonb, %s, 'req')",
            (*control, ["1.0", "0"], '{"basic": [1]}', 512),
        ).fetchall()
        assert [r[:2] for r in got] == [(True, 3)]  # the same call, its arguments whole: admitted
    assert verify_ledger(url).flags == ()


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchall(self):
        return self.rows

    def fetchone(self):
        return self.rows[0] if self.rows else None


def test_urls_and_missing_budgets_are_refused_clearly(server, capsys):
    with pytest.raises(PrivregValueError, match="names no budget: add #NAME"):
        PostgresLedger(server)
    with pytest.raises(PrivregValueError, match="there is no budget 'nope-"):
        BudgetSession.open(f"{server}#{fresh('nope').replace('_', '-')}")
    url = f"{server}#{fresh('twice').replace('_', '-')}"
    cli("ledger", "init", url, "--epsilon", "1")
    capsys.readouterr()
    assert main(["ledger", "init", url, "--epsilon", "1"]) != 0
    assert f"budget {parse_url(url)[1]!r} exists already at {server}#" in capsys.readouterr().err


# -- without a server --------------------------------------------------------------------


def test_urls_are_checked_and_shown_without_their_password():
    with pytest.raises(PrivregValueError, match="budget name 'Bad Name!'"):
        parse_url("postgresql:///db#Bad Name!")
    with pytest.raises(PrivregValueError, match="names no budget: add #NAME"):
        parse_url("postgresql://ann:secret@db.example/prod")
    shown = parse_url("postgresql://ann:secret@db.example/prod?password=secret2&sslmode=require#b")[2]
    assert shown == "postgresql://ann@db.example/prod?sslmode=require#b"


def test_grant_prints_the_roles_rights():
    text = grant_sql("postgresql://db.example/prod#b", analysts=("ann",), auditors=("cy",), owners=("o",))
    assert 'GRANT CREATE ON DATABASE "prod" TO "o";' in text
    assert 'GRANT EXECUTE ON FUNCTION "privreg_b".append(' in text and ') TO "ann";' in text
    assert 'GRANT EXECUTE ON FUNCTION "privreg_b".wait_turn(bigint, boolean) TO "ann";' in text
    assert text.count('GRANT SELECT ON ALL TABLES IN SCHEMA "privreg_b"') == 2
    assert '"cy"' not in text.split("-- auditor")[0]  # the auditor gets no EXECUTE
    assert "UPDATE" not in text and "DELETE" not in text and "INSERT" not in text
    # advice, as comments (the database's owner runs it once): only the budget's roles connect
    advice = text.split("let only the roles connect:\n")[1].splitlines()
    assert advice == [
        '--   REVOKE CONNECT ON DATABASE "prod" FROM PUBLIC;',
        *(f'--   GRANT CONNECT ON DATABASE "prod" TO "{r}";' for r in ("o", "ann", "cy")),
    ]
    with pytest.raises(PrivregValueError, match="--analyst '' is not a role name"):
        grant_sql("postgresql://db.example/prod#b", analysts=("",))


def test_psycopg_is_imported_only_by_a_postgres_ledger_and_its_absence_names_the_extra():
    code = (
        "import sys; import privreg.budget, privreg.budget.verify, privreg.cli.ledger; "
        "assert 'psycopg' not in sys.modules; sys.modules['psycopg'] = None\n"
        "from privreg.budget.session import BudgetSession\n"
        "try:\n    BudgetSession.open('postgresql:///db#b')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == (
        "PrivregError a ledger on PostgreSQL needs psycopg 3, which is not installed: pip install 'privreg[postgres]'"
    )


def test_two_analysts_run_workflows_on_one_budget_from_the_cli(team, tmp_path, capsys):
    for who in ("alice", "bob"):
        out = tmp_path / who
        assert main(["run", "bounded-mean", "--epsilon", "0.1", "-o", str(out), "--ledger", team["as"](who)]) == 0
    capsys.readouterr()
    assert main(["ledger", "show", team["as"]("carol")]) == 0
    shown = capsys.readouterr().out
    assert "runs:      2" in shown and shown.count("complete") == 2
    assert str(tmp_path / "alice") in shown and str(tmp_path / "bob") in shown
    assert main(["ledger", "verify", team["as"]("carol")]) == 0  # exit 3 if anything were flagged


def test_a_keyed_budget_needs_its_key_as_on_sqlite(server):
    key = bytes(range(32))
    url = f"{server}#{fresh('keyed').replace('_', '-')}"
    create(url, key=key, epsilon=1, delta=0)
    with BudgetSession.open(url, key=key) as s:
        charge(s, 2, "k")
    with pytest.raises(LedgerError, match="is keyed"):
        BudgetSession.open(url)  # a writer without the key is refused
    assert verify_ledger(url, key=key).flags == ()
    assert any("is keyed" in f for f in verify_ledger(url).flags)  # never reported intact without it
