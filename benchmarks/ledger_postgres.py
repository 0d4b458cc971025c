"""The ledger on PostgreSQL: the cost of one charge, and many analysts charging one budget.

    python benchmarks/ledger_postgres.py [--url postgresql://.../db] [--charges 400]
                                         [--processes 16] [--budget-charges 4000] [--quick]

Targets (issue #34, item 5): a charge costs <= 5 ms wall on a local server; 16 concurrent
analysts (processes) sustain >= 500 charges per second in total without overspend.

The server: ``--url`` (default ``$PRIVREG_TEST_POSTGRES``), else a throwaway local one
started by ``scripts/postgres-dev`` (a Unix socket, Debian's PostgreSQL, ``fsync`` on:
each charge is one durable commit) and stopped at the end. Each table uses a new budget.

1. One charge: ``BudgetSession.charge(Laplace count)`` from one process with the default
   filters (basic + rdp + gdp), nobody else charging: it reads the head, prices the
   release, and calls the budget's ``append`` function (one transaction). Median over
   blocks of 20 charges, per charge.
2. Analysts together: ``--processes`` processes, each one session, charging identical
   pure-DP releases to one budget that admits ``--budget-charges`` of them, until refused.
   Wall time from the moment all start (each has imported privreg and connected) until the
   last one ends; charges per second is the ledger's rows over that time. The rows must
   equal what the budget admits, and verification must be clean (else the script fails).

CPU is the client processes' own (this process and its children); the server's processes
(started by pg_ctl, not our descendants) are not counted.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import columns, header, timed

from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import verify_ledger
from privreg.cli import format as fmt
from privreg.cli.main import main as privreg_main
from privreg.core import PureDP
from privreg.core.errors import BudgetExceededError

ROOT = Path(__file__).resolve().parents[1]
STEP = 0.001


def new_budget(server: str, epsilon: float, delta: str) -> str:
    url = f"{server}#bench-{uuid.uuid4().hex[:10]}"
    code = privreg_main(["ledger", "init", url, "--epsilon", repr(epsilon), "--delta", delta])
    assert code == 0, "privreg ledger init failed"
    return url


def one_charge(server: str, charges: int) -> list[str]:
    url = new_budget(server, 1e6, "1e-6")
    blocks = []
    with BudgetSession.open(url) as session:
        for _ in range(3):  # warm: connection, caches
            session.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={}, label="warm")
        for _ in range(max(1, charges // 20)):
            with timed() as t:
                for _ in range(20):
                    session.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={}, label="count")
            blocks.append(t.timing.scaled(1e3 / 20))
    wall = statistics.median(b.wall for b in blocks)
    cpu = statistics.median(b.cpu for b in blocks)
    return [f"{wall:.2f}", f"{cpu:.2f}", f"{cpu:.2f}", "<= 5 ms wall", "yes" if wall <= 5 else "NO"]


def worker(url: str) -> None:
    """One analyst: open, say ready, wait for go, charge until refused, report."""
    session = BudgetSession.open(url)
    print("ready", flush=True)
    sys.stdin.readline()
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, n = own.ru_utime + own.ru_stime, 0
    try:
        while True:
            session.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={}, label="analyst")
            n += 1
    except BudgetExceededError:
        pass
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{n} {own.ru_utime + own.ru_stime - cpu0}", flush=True)
    session.close()


def admitted(budget_charges: int) -> int:
    session, n = BudgetSession(budget=PrivacyBudget(epsilon=budget_charges * STEP, delta=0.0)), 0
    try:
        while True:
            session.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={})
            n += 1
    except BudgetExceededError:
        return n


def together(server: str, processes: int, budget_charges: int) -> list[str]:
    url = new_budget(server, budget_charges * STEP, "0")
    expected = admitted(budget_charges)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate()[0].split() for p in procs]
    wall = time.perf_counter() - start
    report = verify_ledger(url)
    rows, cpu = len(report.rows), sum(float(r[1]) for r in results)
    assert sum(int(r[0]) for r in results) == rows
    ok = rows == expected and not report.flags
    rate = rows / wall
    return [
        str(processes),
        f"{rows} of {expected} admitted",
        f"{wall:.2f}",
        f"{cpu:.2f}",
        f"{rate:.0f}",
        "none" if ok else "OVERSPEND OR FLAGS",
        ">= 500 /s",
        "yes" if rate >= 500 and ok else "NO",
    ]


def start_server() -> tuple[str, str]:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres-dev"), "start"], capture_output=True, text=True, check=True
    ).stdout
    env = dict(re.findall(r"export (\w+)='?([^'\n]*)'?", out))
    return env["PRIVREG_TEST_POSTGRES"], env["PRIVREG_POSTGRES_DIR"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("PRIVREG_TEST_POSTGRES"), help="server (no #budget)")
    ap.add_argument("--charges", type=int, default=400)
    ap.add_argument("--processes", type=int, default=16)
    ap.add_argument("--budget-charges", type=int, default=4000)
    ap.add_argument("--quick", action="store_true", help="40 charges; 4 processes on 400")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return 0
    if args.quick:
        args.charges, args.processes, args.budget_charges = 40, 4, 400
    folder = None
    if not args.url:
        args.url, folder = start_server()
    try:
        print(header("1. One charge (ms per charge, median of blocks of 20)", processes=1, cores=1))
        print(fmt.table([["", *columns("ms"), "target", "met"], ["charge", *one_charge(args.url, args.charges)]]))
        print()
        title = "2. Analysts charging one budget together (until it refuses)"
        print(header(title, processes=args.processes, cores=args.processes))
        head = ["processes", "rows", "wall s", "CPU s (clients)", "charges / s", "overspend", "target", "met"]
        print(fmt.table([head, together(args.url, args.processes, args.budget_charges)]))
    finally:
        if folder is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres-dev"), "stop", folder], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
