"""A hostile analyst of a PostgreSQL budget: what the append function lets any analyst
write must not make other analysts' sessions overspend, and errors never quote a URL's
password. Needs a server (tests/postgres_helpers.py: skipped loudly without one, failed
under CI=true)."""

import json
import time

import pytest
from postgres_helpers import TEST_DB, as_role, create_roles, fresh, server_url, sql

from privreg.budget.filters import price_to_json
from privreg.budget.ledger import EncodedPrices, LedgerError
from privreg.budget.session import BudgetSession
from privreg.budget.store_postgres import APPEND_ARGS, PostgresLedger, grant_sql
from privreg.budget.verify import verify_ledger
from privreg.cli.main import main
from privreg.core import PureDP
from privreg.core.charging import Charge
from privreg.core.errors import BudgetExceededError, PrivregValueError


@pytest.fixture(scope="module")
def team():
    server = server_url()
    roles = {r: fresh(r) for r in ("owner", "mallory", "bob")}
    create_roles(server, *roles.values())
    sql(server, f'GRANT CREATE ON DATABASE {TEST_DB} TO "{roles["owner"]}"')
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


def _charged_budget(team, capsys) -> tuple[dict[str, str], str, str]:
    """A budget with two rows, its owner's connection string and its quoted schema."""
    urls = new_budget(team, capsys)
    with BudgetSession.open(urls["bob"]) as bob:
        for label in ("a", "b"):
            bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label=label)
    owner = as_role(team["server"], team["roles"]["owner"])
    return urls, owner, '"privreg_' + urls["bob"].rpartition("#")[2] + '"'


def _deployment_flags(url: str) -> list[str]:
    with PostgresLedger(url, readonly=True) as ledger:
        return ledger.deployment_problems()


# each: a mistake by the owner (or a superuser) that leaves the rows open to change or
# hides them, what it runs ({s}: the schema, {r}: mallory, {o}: the owner), and what
# verification must then say
MISTAKES = {
    "column-insert": (
        "owner",
        ["GRANT INSERT (seq, label) ON {s}.charges TO {r}"],
        "role {m} may INSERT columns label, seq of table charges directly",
    ),
    "member-of-owner": ("server", ["GRANT {o} TO {r}"], "role {m} is a member of the owner"),
    "trigger-narrowed": (
        "owner",
        [
            "DROP TRIGGER append_only ON {s}.charges",
            "CREATE TRIGGER append_only BEFORE TRUNCATE ON {s}.charges FOR EACH STATEMENT "
            "EXECUTE FUNCTION {s}.refuse_change()",
        ],
        "table charges: trigger append_only does not refuse every UPDATE, DELETE and TRUNCATE",
    ),
    "trigger-origin-only": (
        "owner",
        ["ALTER TABLE {s}.charges ENABLE TRIGGER append_only"],
        "table charges: trigger append_only fires only in origin mode",
    ),
    "function-replaced": (
        "owner",
        [
            "CREATE OR REPLACE FUNCTION {s}.refuse_change() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN NULL; END $$"
        ],
        "function refuse_change was changed",
    ),
    "search-path-reset": (
        "owner",
        [f"ALTER FUNCTION {{s}}.append({APPEND_ARGS}) RESET search_path"],
        "function append was changed",
    ),
    "row-security": (
        "owner",
        ["ALTER TABLE {s}.charges ENABLE ROW LEVEL SECURITY", "CREATE POLICY p ON {s}.charges USING (seq <= 1)"],
        "table charges has row-level security",
    ),
    "rule": (
        "owner",
        ["CREATE RULE r AS ON INSERT TO {s}.checkpoints DO INSTEAD NOTHING"],
        "table checkpoints has rule r",
    ),
    "schema-create": ("owner", ["GRANT CREATE ON SCHEMA {s} TO {r}"], "role {m} may CREATE in schema"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_verification_reports_each_deployment_mistake(team, capsys, mistake):
    urls, owner, schema = _charged_budget(team, capsys)
    assert _deployment_flags(urls["bob"]) == []  # clean first
    who, statements, wanted = MISTAKES[mistake]
    mallory, owner_role = team["roles"]["mallory"], team["roles"]["owner"]
    try:
        sql(
            owner if who == "owner" else team["server"],
            *(x.format(s=schema, r=f'"{mallory}"', o=f'"{owner_role}"') for x in statements),
        )
        flags = _deployment_flags(team["server"] + "#" + urls["bob"].rpartition("#")[2])
        assert any(wanted.format(m=mallory) in f for f in flags), flags
    finally:
        if mistake == "member-of-owner":
            sql(team["server"], f'REVOKE "{owner_role}" FROM "{mallory}"')


@pytest.mark.parametrize("option", ["analysts", "auditors", "owners"])
def test_a_role_name_cannot_break_out_of_the_printed_grant_script(option):
    hostile = 'eve\nDROP SCHEMA "privreg_b" CASCADE; --'
    with pytest.raises(PrivregValueError, match="no control characters"):
        grant_sql("postgresql://h/db#b", **{option: (hostile,)})
    assert "DROP" not in grant_sql("postgresql://h/db#b", **{option: ('eve "the analyst"',)})


def test_a_session_whose_server_was_away_too_long_recovers_when_it_is_back(team, capsys, monkeypatch):
    import psycopg

    urls = new_budget(team, capsys)
    with BudgetSession.open(urls["bob"]) as bob:
        bob.ledger.busy_timeout = bob.ledger._pg.busy_timeout = 0.3
        bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label="before")
        pid = bob.ledger._pg.backend[0]
        sql(team["server"], f"SELECT pg_terminate_backend({pid}, 10000)")  # the connection is lost...

        def down(*args, **kwargs):
            raise psycopg.OperationalError("connection refused")

        monkeypatch.setattr(psycopg, "connect", down)  # ...and the server stays away past busy_timeout
        with pytest.raises(LedgerError, match="cannot connect to the PostgreSQL server"):
            bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label="while-down")
        monkeypatch.undo()  # back: the same session charges again, once
        bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label="after")
        assert bob.ledger.head()[0] == 2 and abs(bob.spent().epsilon - 0.2) < 1e-9
    report = verify_ledger(urls["bob"])
    assert report.integrity == () and [r.charge.label for r in report.rows] == ["before", "after"]


def test_deployment_problems_come_in_a_canonical_order(team, capsys):
    urls, owner, schema = _charged_budget(team, capsys)
    # each ALTER rewrites the table's catalogue row, so the server's own scan order is
    # the order of these statements, not the names'
    sql(owner, *(f"ALTER TABLE {schema}.{t} ENABLE ROW LEVEL SECURITY" for t in ("meta", "checkpoints", "charges")))
    flags = [f for f in _deployment_flags(team["server"] + "#" + urls["bob"].rpartition("#")[2]) if "row-level" in f]
    assert [f.split()[1] for f in flags] == ["charges", "checkpoints", "meta"]


def test_an_analyst_cannot_rewrite_another_runs_end(team, capsys):
    urls, owner, schema = _charged_budget(team, capsys)
    with PostgresLedger(urls["bob"]) as bob:
        bob.record_run_end("run-b", ended=1.0, status="complete", releases=2)
    with PostgresLedger(urls["mallory"]) as mallory:  # the same id, another status: no change
        mallory.record_run_end("run-b", ended=2.0, status="failed", releases=0)
        assert mallory.run_end_rows() == [("run-b", 1.0, "complete", 2)]
    import psycopg

    for statement in (f"UPDATE {schema}.runs SET status = 'failed'", f"DELETE FROM {schema}.runs"):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            sql(owner, statement)  # not even the owner changes a recorded end
    with PostgresLedger(urls["bob"], readonly=True) as again:
        assert again.run_end_rows() == [("run-b", 1.0, "complete", 2)]
    # a budget whose runs table lost its trigger is reported
    sql(owner, f"DROP TRIGGER append_only ON {schema}.runs")
    flags = _deployment_flags(urls["bob"])
    assert "table runs: trigger append_only is missing: its rows can be changed" in flags


def _row_args(url: str, schema: str, **change) -> tuple[list, str]:
    """The arguments of ``append`` for an honest next row of the budget (its hashes
    computed as a client does), with ``change`` applied before hashing; and its label."""
    from privreg.budget.ledger import GENESIS_TAG, _checkpoint_hash, _dumps, _row_hash

    with PostgresLedger(url, readonly=True) as ledger:
        seq, prev = ledger.head()
        prices = ledger._db.execute("SELECT prices FROM charges ORDER BY seq LIMIT 1").fetchone()[0]
        genesis = ledger.genesis()
        assert genesis == __import__("hashlib").sha256((GENESIS_TAG + _dumps(ledger.meta)).encode()).hexdigest()
    row = {
        "seq": seq + 1,
        "timestamp": time.time(),
        "mechanism": "laplace",
        "parameters": '{"scale":10}',
        "event": PureDP(epsilon=0.1).to_json(),
        "label": "mallory's",
        "randomness": "{}",
        "prev_hash": prev,
        "stated": "",
        "prices": prices,
        "state": None,
        "cp_prev": genesis,
    }
    if "basic" in change:  # the basic filter's price, in the text given; the others' honest
        honest = json.loads(prices)
        basic = change.pop("basic")
        prices = "{" + ",".join(f'"{k}":' + (basic if k == "basic" else json.dumps(honest[k])) for k in honest) + "}"
        row["prices"] = prices
    row.update(change)
    fields = [row[k] for k in ("mechanism", "parameters", "event", "label", "randomness", "stated", "prices")]
    extra = [] if row["state"] is None else [row["state"]]
    digest = change.get("hash") or _row_hash(None, row["prev_hash"], row["seq"], row["timestamp"], *fields, *extra)
    cp_hash = None
    if row["state"] is not None:
        cp_hash = change.get("cp_hash") or _checkpoint_hash(None, row["cp_prev"], row["seq"], digest, row["state"])
    args = [row["seq"], row["timestamp"], *fields[:5], row["prev_hash"], digest, *fields[5:]]
    return args + [row["state"], row["cp_prev"] if row["state"] is not None else None, cp_hash, False], row["label"]


def _call_append(url: str, schema: str, args: list, *settings: str) -> None:
    import psycopg

    with psycopg.connect(url.partition("#")[0], autocommit=True) as conn:
        for setting in settings:
            conn.execute(setting)
        conn.execute(f"SELECT * FROM {schema}.append({', '.join(['%s'] * len(args))})", args).fetchall()


SECRET = "s3cret-value"
# each: what mallory changes in an otherwise honest row (hashed after the change, so the
# server's only reason to refuse is the one named), and the cause the refusal names
MALFORMED = {
    "parameters-not-json": ({"parameters": '{"' + SECRET + '":'}, "its parameters is not valid JSON"),
    "parameters-a-list": ({"parameters": f'["{SECRET}"]'}, "its parameters are not a JSON object"),
    "randomness-not-json": ({"randomness": SECRET}, "its randomness is not valid JSON"),
    "event-not-an-event": ({"event": f'{{"{SECRET}":1}}'}, "its event is not an event"),
    "stated-not-json": ({"stated": SECRET}, "its stated event is not valid JSON"),
    "prices-not-json": ({"prices": SECRET}, "its prices is not valid JSON"),
    "prices-missing-a-filter": ({"prices": '{"zzz":[0.1]}'}, "its price for filter basic is missing or not a price"),
    "price-too-short": ({"basic": "[0.1]"}, "its price for filter basic is missing or not a price"),
    "price-negative": ({"basic": "[-1.0,0.0]"}, "its price for filter basic is missing or not a price"),
    "price-a-string": ({"basic": f'["{SECRET}",0.0]'}, "its price for filter basic is missing or not a price"),
    "price-unsupported-not-text": ({"basic": '{"unsupported":1}'}, "its price for filter basic is missing or not a"),
    "price-out-of-range": ({"basic": "[1e1000000,0.0]"}, "its prices is not valid JSON"),
    "state-not-json": ({"state": SECRET}, "its checkpoint state is not valid JSON"),
    "prev-hash-format": ({"prev_hash": SECRET}, "its prev_hash is not 64 lowercase hex digits"),
    "hash-format": ({"hash": SECRET.upper()}, "its hash is not 64 lowercase hex digits"),
    "hash-not-of-contents": ({"hash": "ab" * 32}, "its hash is not the hash of its contents"),
    "checkpoint-hash-format": ({"state": "{}", "cp_hash": "AB" * 32}, "checkpoint's hash is not 64 lowercase"),
    "checkpoint-hash-wrong": ({"state": "{}", "cp_hash": "ab" * 32}, "checkpoint's hash is not the hash of its"),
    "checkpoint-not-after-genesis": ({"state": "{}", "cp_prev": "ab" * 32}, "checkpoint's prev_hash is not the budg"),
    "timestamp-not-a-time": ({"timestamp": 1e300}, "its timestamp is not a time"),
    "timestamp-nan": ({"timestamp": float("nan")}, "its timestamp is not a time"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_append_refuses_a_row_no_session_could_read_back(team, capsys, case):
    """Before, any of these rows (appended by one analyst) made every session refuse
    until the owner repaired the budget; now the server refuses it, naming the cause and
    not quoting the data, and the budget goes on."""
    import psycopg

    urls, _, schema = _charged_budget(team, capsys)
    change, cause = MALFORMED[case]
    args, _ = _row_args(urls["bob"], schema, **change)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="row 3 refused: ") as info:
        _call_append(urls["mallory"], schema, args)
    assert cause in str(info.value) and SECRET not in str(info.value) and SECRET.upper() not in str(info.value)
    with BudgetSession.open(urls["bob"]) as bob:  # nothing was written: the budget goes on
        assert bob.ledger.head()[0] == 2
        bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label="c")
    assert verify_ledger(urls["bob"]).flags == ()


def test_append_takes_an_honest_row_written_by_hand_and_any_label(team, capsys):
    """The server's checks refuse nothing a client writes: the same row made by hand as
    the cases above make theirs, and labels and parameters with every kind of character
    (JSON escapes, DEL, non-ASCII, beyond the BMP) through a session."""
    urls, _, schema = _charged_budget(team, capsys)
    args, _ = _row_args(urls["bob"], schema, label="h\xe9 \U0001d518")  # (checkpoints: the forged-checkpoint test)
    # settings a caller may change that would change the server's text of the row
    _call_append(urls["mallory"], schema, args, "SET extra_float_digits = -15", "SET standard_conforming_strings = off")
    nasty = 'q"\\/\b\f\n\r\t\x01\x1f\x7f \xe9 \u2713 \U0001d518 \u2028 end'
    with BudgetSession.open(urls["bob"]) as bob:
        assert bob.ledger.head()[0] == 3
        bob.charge(PureDP(epsilon=0.1), mechanism=nasty, parameters={nasty: [nasty, -0.0, 1e-7]}, label=nasty)
    report = verify_ledger(urls["bob"])
    assert report.flags == () and report.rows[-1].charge.label == nasty


def test_a_row_one_for_row_one_must_follow_the_genesis(team, capsys):
    import psycopg

    urls = new_budget(team, capsys)
    schema = '"privreg_' + urls["bob"].rpartition("#")[2] + '"'
    with BudgetSession.open(urls["bob"]) as bob:  # an honest first row, for its stored prices
        bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label="a")
    other = new_budget(team, capsys)  # an empty budget of the same rule
    other_schema = '"privreg_' + other["bob"].rpartition("#")[2] + '"'
    args, _ = _row_args(urls["bob"], schema, seq=1, prev_hash="ab" * 32)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="row 1 refused: its prev_hash is not the budget"):
        _call_append(other["mallory"], other_schema, args)


def test_a_refused_row_is_a_clear_ledger_error(team, capsys):
    urls = _charged_budget(team, capsys)[0]
    with PostgresLedger(urls["mallory"]) as ledger:
        far = Charge(timestamp=1e300, mechanism="m", parameters={}, event=PureDP(epsilon=0.1), label="", randomness={})
        with pytest.raises(LedgerError, match=r"the server refused appending a charge: .*row 3 refused: its timestamp"):
            ledger.try_append(far, expected_seq=2, prices=None)
        assert ledger.head()[0] == 2


def _hold(url: str, what: str):
    """A connection of ``url``'s role holding budget ``url``'s advisory lock ``what``, as any
    role that may connect can (no right on the budget needed)."""
    import psycopg

    from privreg.budget.store_postgres import _lock_id, schema_of

    conn = psycopg.connect(url.partition("#")[0], autocommit=True)
    key = _lock_id(schema_of(url.rpartition("#")[2]), what)
    assert conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
    return conn


def test_waits_for_a_lock_any_connecting_role_can_hold_are_bounded(team, capsys):
    from privreg.budget.ledger import LedgerBusyError
    from privreg.budget.store_postgres import run_turn

    urls = _charged_budget(team, capsys)[0]
    outsider = fresh("outsider")
    create_roles(team["server"], outsider)  # may connect; no right on the budget
    stranger = as_role(urls["bob"], outsider)
    # bounded: each wait ends in LedgerBusyError naming its timeout (unbounded, the test would hang)
    with _hold(stranger, "run"):
        with (
            pytest.raises(LedgerBusyError, match=r"waited 0\.5 s for the budget's run lock") as info,
            run_turn(urls["bob"], waiting="waiting", timeout=0.5),
        ):
            pass
        assert "privreg ledger grant" in str(info.value)
    with _hold(stranger, "turn"), PostgresLedger(urls["bob"], busy_timeout=0.5) as bob:
        bob.head()
        with (
            pytest.raises(LedgerBusyError, match=r"more than 0\.5 s while waiting for the budget's writers' turn"),
            bob.turn(),
        ):
            pass
    with run_turn(urls["bob"], waiting="waiting", timeout=0.5), BudgetSession.open(urls["bob"]) as bob:
        bob.charge(PureDP(epsilon=0.1), mechanism="laplace", parameters={"scale": 10}, label="c")  # released


def test_verification_reports_a_database_public_may_connect_to(team, capsys):
    server = team["server"].replace(f"/{TEST_DB}?", "/postgres?")  # the default: PUBLIC may connect
    url = f"{server}#{fresh('open').replace('_', '-')}"
    assert main(["ledger", "init", url, "--epsilon", "1"]) == 0
    capsys.readouterr()
    flags = _deployment_flags(url)
    assert [f for f in flags if f.startswith("PUBLIC may connect")] == [
        "PUBLIC may connect to database postgres: any role may hold the budget's writers' turn and run lock, and "
        "every writer waits and refuses (REVOKE CONNECT ON DATABASE ... FROM PUBLIC: 'privreg ledger grant')"
    ]
    urls = _charged_budget(team, capsys)[0]
    assert _deployment_flags(urls["bob"]) == []  # the tests' database: only granted roles connect
