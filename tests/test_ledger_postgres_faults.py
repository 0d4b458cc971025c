"""The PostgreSQL ledger under faults (privreg.budget.store_postgres): a connection lost
between pricing and commit, a reply lost after the commit, and a client killed inside its
transaction each end with every charge in the ledger exactly once, or not at all and
refused with its cause. Needs a server (tests/postgres_helpers.py)."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_helpers import fresh, server_url, sql

from privreg.budget.ledger import LedgerError
from privreg.budget.session import BudgetSession
from privreg.budget.store_postgres import PostgresLedger, _Connection
from privreg.budget.verify import verify_ledger
from privreg.cli.main import main
from privreg.core import PureDP

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def budget():
    server = server_url()
    url = f"{server}#{fresh('fault').replace('_', '-')}"
    assert main(["ledger", "init", url, "--epsilon", "1"]) == 0
    return server, url


def labels(url: str) -> list[str]:
    return [row.charge.label for row in verify_ledger(url).rows]


def charge(session: BudgetSession, label: str) -> None:
    session.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={}, label=label)


def cut_at_append(monkeypatch, *, after_commit: bool, call: str = "append") -> list[str]:
    """Make the next ``call`` (append or append_within) lose its connection: before the
    statement reaches the server, or after it committed (the reply lost). Returns a log of
    what happened."""
    import psycopg

    real, log = _Connection.execute, []

    def execute(self, sql_text, params=(), *, retry=True):
        if sql_text.startswith(f"SELECT * FROM {call}(") and not log:
            if after_commit:
                real(self, sql_text, params, retry=retry)
                log.append("committed")
            else:
                log.append("not sent")
            self.conn.pgconn.finish()  # the socket closes under psycopg: the connection is lost
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(self, sql_text, params, retry=retry)

    monkeypatch.setattr(_Connection, "execute", execute)
    return log


@pytest.mark.parametrize("after_commit", [False, True], ids=["lost-before-commit", "reply-lost-after-commit"])
def test_a_connection_lost_at_the_append_charges_exactly_once(budget, monkeypatch, after_commit):
    _, url = budget
    with BudgetSession.open(url) as session:
        charge(session, "first")
        log = cut_at_append(monkeypatch, after_commit=after_commit)
        charge(session, "second")  # returns: the charge stands, once
        assert log == ["committed" if after_commit else "not sent"]
        charge(session, "third")
    assert labels(url) == ["first", "second", "third"]
    assert verify_ledger(url).flags == ()


@pytest.mark.parametrize("after_commit", [False, True], ids=["lost-before-commit", "reply-lost-after-commit"])
def test_a_connection_lost_at_the_servers_admission_charges_exactly_once(budget, monkeypatch, after_commit):
    """The same for a charge the server admits within its room (append_within): the
    outcome is read back by the call's request id, after the old server process has ended."""
    _, url = budget
    with BudgetSession.open(url) as session, BudgetSession.open(url) as other:
        charge(session, "first")
        charge(other, "other")
        session.ledger.contended = True  # others charge too: to the server's admission
        log = cut_at_append(monkeypatch, after_commit=after_commit, call="append_within")
        charge(session, "second")  # returns: the charge stands, once
        assert log == ["committed" if after_commit else "not sent"]
        charge(session, "third")
        with BudgetSession.open(url) as again:
            assert [f.state() for f in again.filters] == [f.state() for f in session.filters]
    assert labels(url) == ["first", "other", "second", "third"]
    assert verify_ledger(url).flags == ()


def test_a_connection_dropped_between_pricing_and_commit_is_resumed(budget, monkeypatch):
    server, url = budget
    with BudgetSession.open(url) as session:
        charge(session, "first")
        ledger = session.ledger
        assert isinstance(ledger, PostgresLedger)
        real = PostgresLedger.try_append

        def dropped(self, *args, **kwargs):  # priced already: the server ends this connection now
            sql(server, f"SELECT pg_terminate_backend({self._pg.conn.info.backend_pid}, 10000)")
            monkeypatch.setattr(PostgresLedger, "try_append", real)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(PostgresLedger, "try_append", dropped)
        charge(session, "second")
    assert labels(url) == ["first", "second"]


def test_a_client_killed_inside_its_transaction_leaves_nothing(budget):
    _, url = budget
    worker = subprocess.Popen([sys.executable, "-c", HOLDER, url], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert worker.stdout is not None and worker.stdout.readline().strip() == "appended, not committed"
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    with BudgetSession.open(url) as session:  # waits for the server to roll the dead client back
        charge(session, "after")
    assert labels(url) == ["after"]
    assert verify_ledger(url).flags == ()


HOLDER = """
import sys, time
from privreg.budget.store_postgres import PostgresLedger
from privreg.core import Charge, PureDP
ledger = PostgresLedger(sys.argv[1])
ledger._pg.conn.autocommit = False  # the append runs inside a transaction left open
row = ledger.try_append(
    Charge(timestamp=time.time(), mechanism="m", parameters={}, event=PureDP(epsilon=0.1), label="killed"),
    expected_seq=0,
)
assert row is not None and row.seq == 1
print("appended, not committed", flush=True)
time.sleep(3600)
"""


def test_an_unreachable_server_is_refused_with_its_cause(tmp_path):
    url = f"postgresql:///postgres?host={tmp_path}&port=5432&user=postgres#nowhere"
    with pytest.raises(
        LedgerError, match=r"cannot connect to the PostgreSQL server .*check the URL, that the server runs"
    ):
        BudgetSession.open(url)
