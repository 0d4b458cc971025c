"""Appends in a turn commit asynchronously on PostgreSQL and are flushed before the charge
returns (privreg.budget.store_postgres), so a server crash can take rows other sessions
already read, though none that was released. These tests make that happen on purpose (a
superuser removes the last rows, as the crash would) and check that no session keeps
counting on rows that are gone, and that a connection lost at the flush charges exactly
once. Needs a server (tests/postgres_helpers.py)."""

import pytest
from postgres_helpers import fresh, server_url, sql

from privreg.budget.session import BudgetSession
from privreg.budget.store_postgres import _Connection, parse_url, schema_of
from privreg.budget.verify import verify_ledger
from privreg.cli.main import main
from privreg.core import PureDP
from privreg.core.errors import BudgetExceededError


@pytest.fixture
def budget():
    server = server_url()
    url = f"{server}#{fresh('lost').replace('_', '-')}"
    assert main(["ledger", "init", url, "--epsilon", "1", "--delta", "0"]) == 0
    return server, url


def charge(session: BudgetSession, epsilon: float, label: str) -> None:
    session.charge(PureDP(epsilon=epsilon), mechanism="laplace", parameters={}, label=label)


def lose_rows_after(server: str, url: str, seq: int) -> None:
    """What a crash does to rows committed but not flushed: they are gone."""
    table = f'"{schema_of(parse_url(url)[1])}".charges'
    sql(
        server,
        f"ALTER TABLE {table} DISABLE TRIGGER append_only",
        f"DELETE FROM {table} WHERE seq > {seq}",
        f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER append_only",
    )


def test_a_session_that_read_rows_a_crash_took_reads_the_ledger_again(budget):
    server, url = budget
    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        charge(a, 0.2, "lost-1")
        charge(a, 0.2, "lost-2")
        assert b.spent().epsilon == pytest.approx(0.4)  # b's filters hold rows 1 and 2
        lose_rows_after(server, url, 0)
        with BudgetSession.open(url) as c:  # others append new rows 1 and 2 in their place
            charge(c, 0.45, "new-1")
            charge(c, 0.45, "new-2")
        # b's head has the same number (2) as the row it read last, another hash: on the rows
        # it knew (0.4 spent) it would grant 0.5 more, 1.4 in all on a budget of 1
        with pytest.raises(BudgetExceededError, match="Nothing was released or charged"):
            charge(b, 0.5, "over")
        assert b.spent().epsilon == pytest.approx(0.9)
        charge(b, 0.1, "fits")  # decided on the ledger as it is, chained on its head
    report = verify_ledger(url)
    assert [row.charge.label for row in report.rows] == ["new-1", "new-2", "fits"]
    assert report.flags == () and report.integrity == ()


def test_a_session_whose_last_rows_are_gone_charges_on_what_is_left(budget):
    server, url = budget
    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        charge(a, 0.3, "kept")
        charge(a, 0.3, "lost-2")
        charge(a, 0.3, "lost-3")
        assert b.spent().epsilon == pytest.approx(0.9)
        lose_rows_after(server, url, 1)  # b read row 3, the ledger now ends at row 1
        charge(b, 0.5, "after")  # 0.3 + 0.5 fit: b no longer counts rows 2 and 3
        assert b.spent().epsilon == pytest.approx(0.8)
    assert [row.charge.label for row in verify_ledger(url).rows] == ["kept", "after"]


def test_a_connection_lost_at_the_flush_after_an_append_in_turn_charges_exactly_once(budget, monkeypatch):
    import psycopg

    _, url = budget
    real, log = _Connection.execute, []

    def execute(self, sql_text, params=(), *, retry=True):
        if sql_text.startswith("SELECT pg_logical_emit_message(") and not log:
            log.append("committed, not flushed")
            self.conn.pgconn.finish()  # the socket closes under psycopg: the connection is lost
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(self, sql_text, params, retry=retry)

    with BudgetSession.open(url) as a, BudgetSession.open(url) as b:
        charge(a, 0.1, "a1")
        charge(b, 0.1, "b1")  # a's next append conflicts: a appends in its turn, asynchronously
        monkeypatch.setattr(_Connection, "execute", execute)
        charge(a, 0.1, "a2")  # returns: the charge stands, once
        assert log == ["committed, not flushed"]
        charge(a, 0.1, "a3")
        charge(b, 0.1, "b2")
    report = verify_ledger(url)
    assert [row.charge.label for row in report.rows] == ["a1", "b1", "a2", "a3", "b2"]
    assert report.flags == ()
