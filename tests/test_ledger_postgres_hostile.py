"""A hostile analyst of a PostgreSQL budget: what the append function lets any analyst
write must not make other analysts' sessions overspend, and errors never quote a URL's
password. Needs a server (tests/postgres_helpers.py: skipped loudly without one, failed
under CI=true)."""

import time

import pytest
from postgres_helpers import as_role, fresh, server_url, sql

from privreg.budget.filters import price_to_json
from privreg.budget.ledger import EncodedPrices
from privreg.budget.session import BudgetSession
from privreg.budget.store_postgres import PostgresLedger
from privreg.budget.verify import verify_ledger
from privreg.cli.main import main
from privreg.core import PureDP
from privreg.core.charging import Charge
from privreg.core.errors import BudgetExceededError, PrivregValueError


@pytest.fixture(scope="module")
def team():
    server = server_url()
    roles = {r: fresh(r) for r in ("owner", "mallory", "bob")}
    sql(server, *(f'CREATE ROLE "{name}" LOGIN' for name in roles.values()))
    sql(server, f'GRANT CREATE ON DATABASE postgres TO "{roles["owner"]}"')
    return {"server": server, "roles": roles}


def new_budget(team, capsys) -> dict[str, str]:
    """A budget (epsilon 1) created by the owner, mallory and bob its analysts."""
    name = fresh("hostile").replace("_", "-")
    owner = as_role(team["server"], team["roles"]["owner"])
    assert main(["ledger", "init", owner, "--name", name, "--epsilon", "1", "--delta", "1e-6"]) == 0
    capsys.readouterr()
    roles = team["roles"]
    assert main(["ledger", "grant", f"{owner}#{name}", "--analyst", roles["mallory"], "--analyst", roles["bob"]]) == 0
    sql(owner, capsys.readouterr().out)
    return {r: as_role(f"{team['server']}#{name}", roles[r]) for r in ("mallory", "bob")}


def grants(session: BudgetSession, label: str) -> int:
    """How many releases of epsilon 0.1 the session grants before it refuses."""
    for n in range(100):
        try:
            session.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label=label)
        except BudgetExceededError:
            return n
    raise AssertionError("the session granted 100 releases of epsilon 0.1 on a budget of 1")


def test_a_checkpoint_forged_through_append_does_not_reset_the_budget(team, capsys):
    urls = new_budget(team, capsys)
    with BudgetSession.open(urls["bob"]) as bob:
        assert grants(bob, "honest") == 10  # the whole budget, spent honestly
        fresh_state = {f.name: f.state() for f in bob._fresh_filters()}
        zero = EncodedPrices({f.name: price_to_json(f.price(PureDP(epsilon=1e-300), None)) for f in bob._filters})
    # mallory calls append (as her role may) with a tiny row of her own whose checkpoint
    # claims that nothing was spent
    ledger = PostgresLedger(urls["mallory"])
    head = ledger.head()[0]
    tiny = Charge(
        timestamp=time.time(), mechanism="m", parameters={}, event=PureDP(epsilon=1e-300), label="", randomness={}
    )
    assert ledger.try_append(tiny, expected_seq=head, prices=zero, checkpoint=fresh_state) is not None
    ledger.close()
    with BudgetSession.open(urls["bob"]) as again:  # reopened: the budget is still spent
        assert again.spent().epsilon >= 1.0 - 1e-9
        assert grants(again, "after") == 0
    assert any("checkpoint at row 11" in f for f in verify_ledger(urls["bob"]).flags)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://alice:s3cr%ZZet@localhost:1/db#b",  # a password libpq cannot decode
        "postgresql://alice:s3cret@localhost:1/db?PASSWORD=s3cret#b",  # an option libpq does not know
    ],
)
def test_a_url_libpq_refuses_is_an_error_without_its_password(url):
    with pytest.raises(PrivregValueError, match="is not a valid PostgreSQL URL") as info:
        PostgresLedger(url, busy_timeout=0)
    assert "s3cr" not in str(info.value)
    assert main(["ledger", "verify", url]) == 2  # a clear error, not an internal one
