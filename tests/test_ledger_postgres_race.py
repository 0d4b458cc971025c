"""Many processes charging one PostgreSQL budget, with SIGKILLs and a server restart in
the middle: the ledger ends with exactly the releases the budget admits (no overspend),
no charge twice (every label once) and none lost (every charge a process saw return is
in the ledger), and verification is clean. Needs a server (tests/postgres_helpers.py)."""

import contextlib
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from postgres_helpers import fresh, private_server, restart_server

from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.store_postgres import PostgresLedger, parse_url, schema_of
from privreg.budget.verify import verify_ledger
from privreg.cli.main import main
from privreg.core import PureDP
from privreg.core.errors import BudgetExceededError

OUTPUT: dict[int, tuple[list[str], threading.Thread]] = {}  # each worker's stdout lines, by pid
WORKER = Path(__file__).with_name("ledger_postgres_worker.py")
ROOT = Path(__file__).resolve().parents[1]
EPSILON, STEP = 10.0, 0.01  # pure DP, delta 0: about 1,000 releases fit


def admitted() -> int:
    """How many releases of STEP the budget admits, charged one after another in memory
    (identical releases: the order of the processes cannot change it)."""
    session, n = BudgetSession(budget=PrivacyBudget(epsilon=EPSILON, delta=0.0)), 0
    try:
        while True:
            session.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={})
            n += 1
    except BudgetExceededError:
        return n


def head(url: str) -> int:
    with PostgresLedger(url, readonly=True) as ledger:
        return ledger.head()[0]


class Freezer:
    """One connection that takes and releases the lock every append takes (as a
    superuser): while it is held, all appends wait."""

    def __init__(self, url: str) -> None:
        import psycopg

        conninfo, name, _ = parse_url(url)
        self._conn = psycopg.connect(conninfo)
        self._lock = f'LOCK TABLE "{schema_of(name)}".charges IN SHARE ROW EXCLUSIVE MODE'

    def freeze(self) -> None:
        self._conn.execute(self._lock)  # starts a transaction that holds the lock

    def thaw(self) -> None:
        self._conn.commit()

    def close(self) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error):
            self._conn.close()

    def until(self, url: str, rows: int, procs: list[subprocess.Popen[str]]) -> None:
        """Frozen, with the ledger holding at least ``rows`` rows: it lets the appends run
        a few milliseconds at a time and reads the head only while frozen (a state, not a
        time: however fast the server commits, the run cannot end in between)."""
        deadline = time.monotonic() + 300
        self.freeze()
        while head(url) < rows:
            assert time.monotonic() < deadline, f"the ledger never reached {rows} rows"
            assert any(p.poll() is None for p in procs), "every worker ended early"
            self.thaw()
            time.sleep(0.005)
            self.freeze()


def start(url: str, *names: str) -> list[subprocess.Popen[str]]:
    """Workers, started together once all are ready."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, name, str(STEP)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for name in names
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.close()
        proc.stdin = None
        lines: list[str] = []
        drain = threading.Thread(target=lines.extend, args=(proc.stdout,), daemon=True)  # reads the pipe
        drain.start()
        OUTPUT[proc.pid] = (lines, drain)
    return procs


@pytest.mark.slow
def test_8_processes_x_2_pools_with_sigkills_and_a_server_restart_never_overspend():
    with private_server() as (server, folder):  # restarted: a server of its own
        race(server, folder)


def race(server: str, folder: str) -> None:
    url = f"{server}#{fresh('race').replace('_', '-')}"
    assert main(["ledger", "init", url, "--epsilon", str(EPSILON), "--delta", "0"]) == 0
    expected = admitted()
    names = [f"w{i}" for i in range(8)]
    freezer = Freezer(url)
    freezer.freeze()  # the workers start against a held lock
    procs = dict(zip(names, start(url, *names)))
    killed = ["w1", "w4", "w6"]
    freezer.until(url, expected // 8, list(procs.values()))  # every append waits: the run cannot end
    assert head(url) < expected
    for name in killed:
        assert procs[name].poll() is None  # still charging (or waiting inside an append) when killed
        procs[name].send_signal(signal.SIGKILL)
    for name in killed:
        procs[name].wait()
    spares = [f"{name}b" for name in killed]  # replacements keep the load
    procs.update(zip(spares, start(url, *spares)))
    freezer.until(url, expected // 3, list(procs.values()))
    before = head(url)
    assert before < expected  # the restart lands mid-run, appends waiting in their transactions
    restart_server(folder)  # ends every connection, the lock's too
    freezer.close()
    print(f"server restarted at row {before} of {expected}")
    procs["w7"].send_signal(signal.SIGKILL)  # and a kill while the sessions reconnect
    outputs = {}
    for name, proc in procs.items():
        proc.wait(timeout=600)
        lines, drain = OUTPUT[proc.pid]
        drain.join(timeout=60)  # it ends at the pipe's end
        outputs[name] = [line.strip() for line in lines]
        if name not in (*killed, "w7"):
            assert proc.returncode == 0 and outputs[name][-1] == "done", outputs[name][-5:]
    errors = [line for out in outputs.values() for line in out if line.startswith("error ")]
    print(f"{len(errors)} charge(s) failed and were retried, e.g. {errors[:1]}")
    report = verify_ledger(url)
    labels = [row.charge.label for row in report.rows]
    returned = {line.split()[1] for out in outputs.values() for line in out if line.startswith("ok ")}
    assert report.flags == () and report.integrity == ()
    assert len(labels) == expected  # the budget's admissions, exactly: none over, none wasted
    assert len(set(labels)) == len(labels)  # no charge twice
    assert returned <= set(labels)  # no charge a process saw succeed is lost
    import psycopg

    conninfo, name, _ = parse_url(url)
    with psycopg.connect(conninfo) as conn:
        within = conn.execute(f'SELECT count(*) FROM "{schema_of(name)}".requests').fetchone()[0]
    print(f"{within} of {len(labels)} charges admitted by the server within a filter's room")
    assert 0 < within < len(labels)  # both paths ran: the server's admission and the turn
