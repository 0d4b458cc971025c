"""A PostgreSQL server for the ledger tests: the URL in PRIVREG_TEST_POSTGRES (``.ci/run``
and ``scripts/postgres-dev start`` export it). Without one the tests are skipped with a
loud reason, except under CI=true, where a missing server fails them."""

import os
import subprocess
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_SERVER = (
    "NO POSTGRESQL SERVER: the PostgreSQL ledger tests did not run. Start one with "
    '`eval "$(scripts/postgres-dev start)"` (exports PRIVREG_TEST_POSTGRES)'
)


def server_url() -> str:
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


def restart_server() -> None:
    """Restart the test server (``scripts/postgres-dev restart``); skip without its folder."""
    folder = os.environ.get("PRIVREG_POSTGRES_DIR")
    if not folder:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but PRIVREG_POSTGRES_DIR is not set: .ci/run must export it")
        pytest.skip("PRIVREG_POSTGRES_DIR is not set: cannot restart the server (scripts/postgres-dev start sets it)")
    subprocess.run(["bash", str(ROOT / "scripts" / "postgres-dev"), "restart", folder], check=True, timeout=120)
