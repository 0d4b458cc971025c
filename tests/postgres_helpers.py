"""A PostgreSQL server for the ledger tests: the URL in PRIVREG_TEST_POSTGRES (``.ci/run``
and ``scripts/postgres-dev start`` export it). Without one the tests are skipped with a
loud reason, except under CI=true, where a missing server fails them."""

import contextlib
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_SERVER = (
    "NO POSTGRESQL SERVER: the PostgreSQL ledger tests did not run. Start one with "
    '`eval "$(scripts/postgres-dev start)"` (exports PRIVREG_TEST_POSTGRES)'
)


#: The tests' database: PUBLIC may not connect (else every budget's verification reports
#: it), so each role a test makes is granted CONNECT (:func:`create_roles`).
TEST_DB = "privreg_tests"


def server_url() -> str:
    """The URL of the tests' database on the test server (made on first use, as the
    server's superuser), or skip (fail under CI=true) without one or without psycopg."""
    return closed_database(_server())


def closed_database(url: str) -> str:
    """``url`` (a superuser's) on database :data:`TEST_DB`, which only roles granted
    CONNECT may connect to; made if missing (any test process may be first)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (TEST_DB,)).fetchone() is None:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                conn.execute(f'CREATE DATABASE "{TEST_DB}" TEMPLATE template0')
        conn.execute(f'REVOKE CONNECT ON DATABASE "{TEST_DB}" FROM PUBLIC')
    return re.sub(r"^(postgresql://[^/?#]*)/[^?#]*", rf"\1/{TEST_DB}", url, count=1)


def create_roles(url: str, *names: str) -> None:
    """Login roles ``names``, which may connect to the tests' database."""
    sql(
        url,
        *(f'CREATE ROLE "{n}" LOGIN' for n in names),
        *(f'GRANT CONNECT ON DATABASE "{TEST_DB}" TO "{n}"' for n in names),
    )


def _server() -> str:
    """The test server's URL, or skip (fail under CI=true) without one or without psycopg."""
    url = os.environ.get("PRIVREG_TEST_POSTGRES", "")
    ci = os.environ.get("CI") == "true"
    if not url:
        if ci:
            pytest.fail("CI=true but PRIVREG_TEST_POSTGRES is not set: .ci/run must start a PostgreSQL server")
        pytest.skip(NO_SERVER)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if ci:
            pytest.fail("CI=true but psycopg is not installed: pip install -e '.[dev]' installs it")
        pytest.skip("psycopg is not installed: pip install -e '.[postgres]'")
    return url


def as_role(url: str, role: str) -> str:
    """``url`` connecting as ``role`` (the test cluster trusts local connections)."""
    return url.replace("user=postgres", f"user={role}")


def fresh(prefix: str) -> str:
    """A name no other test (or earlier run on the same server) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def sql(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


@contextlib.contextmanager
def private_server() -> Iterator[tuple[str, str]]:
    """``(url, folder)`` of a server of this test's own (``scripts/postgres-dev start``),
    which it may restart without disturbing tests running beside it; stopped at the end.
    Needs the same as :func:`server_url` (a server is available) and Debian's PostgreSQL."""
    _server()
    script = str(ROOT / "scripts" / "postgres-dev")
    started = subprocess.run(["bash", script, "start"], capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        pytest.fail(f"scripts/postgres-dev start failed: {started.stderr.strip()}")
    env = dict(re.findall(r"export (\w+)='?([^'\n]*)'?", started.stdout))
    try:
        yield closed_database(env["PRIVREG_TEST_POSTGRES"]), env["PRIVREG_POSTGRES_DIR"]
    finally:
        subprocess.run(["bash", script, "stop", env["PRIVREG_POSTGRES_DIR"]], timeout=120)


def restart_server(folder: str) -> None:
    """Restart the server in ``folder`` (``scripts/postgres-dev restart``)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "postgres-dev"), "restart", folder], check=True, timeout=120)
