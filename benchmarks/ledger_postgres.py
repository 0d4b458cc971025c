"""The ledger on PostgreSQL beside the SQLite file: the cost of one charge, and many
analysts charging one budget. ``python benchmarks/ledger.py`` prints these as tables 4
and 5 after its own; this script prints them alone:

    python benchmarks/ledger_postgres.py [--url postgresql://.../db] [--server-dir DIR]
                                         [--charges 400] [--processes 16]
                                         [--budget-charges 4000] [--quick]

Targets (issue #34, item 5): a charge costs <= 5 ms wall on a local server; 16 concurrent
analysts (processes) sustain >= 500 charges per second in total without overspend.

The server: ``--url`` (default ``$PRIVREG_TEST_POSTGRES``), else a throwaway local one
started by ``scripts/postgres-dev`` (Debian's PostgreSQL on a Unix socket) and stopped at
the end. Its durability settings (``fsync``, ``synchronous_commit``, ``wal_sync_method``,
read from the server) are printed in the headers: each charge is one durable commit. Each
row uses a new budget; the SQLite rows a new ledger file in the temporary folder, with
the same filters and releases.

4. One charge: ``BudgetSession.charge(PureDP)`` from one process with the default filters
   (basic + rdp + gdp), nobody else charging; blocks of 20 charges alternate between the
   PostgreSQL budget and the SQLite file, so both see the same load. Wall: median and
   95th percentile over blocks, per charge; client CPU: median over blocks; server CPU:
   its total over the PostgreSQL blocks over their charges.
5. Analysts together: ``--processes`` processes, each one session, charging identical
   pure-DP releases to one budget that admits ``--budget-charges`` of them, until refused.
   Wall time from the moment all start (each has imported privreg and connected) until the
   last one's last charge is decided (refused); charges per second is the ledger's rows over
   that time (the clock is CLOCK_MONOTONIC, one for every process). "until exit s" runs on
   until the last process has exited (closing its session and tearing down its interpreter:
   not charging; earlier versions of this script counted it, about 2 s of 16 processes
   exiting together on 2 cores). The rows must
   equal what the budget admits, and verification must be clean (else the script fails).

CPU (clients) is this process and its children (the analysts). CPU (server) is the
PostgreSQL server's processes, read from ``/proc`` (the postmaster's own and reaped
children's time, plus its live children's): measured when the script started the server
or ``--server-dir`` (default ``$PRIVREG_POSTGRES_DIR``) names its folder, else "-".
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import Timing, header, timed

from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import verify_ledger
from privreg.cli import format as fmt
from privreg.cli.main import main as privreg_main
from privreg.core import PureDP
from privreg.core.errors import BudgetExceededError

ROOT = Path(__file__).resolve().parents[1]
STEP = 0.001
BLOCK = 20


def new_budget(where: str, epsilon: float, delta: str) -> str:
    """A new budget: on the server ``where`` (``postgresql://...``), or a new ledger file
    in the folder ``where``."""
    name = f"bench-{uuid.uuid4().hex[:10]}"
    target = f"{where}#{name}" if where.startswith("postgres") else str(Path(where) / f"{name}.sqlite")
    code = privreg_main(["ledger", "init", target, "--epsilon", repr(epsilon), "--delta", delta])
    assert code == 0, "privreg ledger init failed"
    return target


def server_cpu(folder: str | None) -> float | None:
    """CPU seconds the server in ``folder`` used so far: the postmaster's own and its
    reaped children's, plus its live children's (backends, WAL writer, checkpointer)."""
    if folder is None or not (Path(folder) / "data" / "postmaster.pid").exists():
        return None
    pm = int((Path(folder) / "data" / "postmaster.pid").read_text().split()[0])
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pm:
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        elif int(fields[1]) == pm:
            total += int(fields[11]) + int(fields[12])
    return total / tick


@contextmanager
def server_timed(folder: str | None) -> Iterator[list[float | None]]:
    """The server's CPU seconds over the block, in the list yielded (None if unknown)."""
    out: list[float | None] = [None]
    before = server_cpu(folder)
    yield out
    time.sleep(0.2)  # ended sessions' backends exit and are reaped
    after = server_cpu(folder)
    out[0] = None if before is None or after is None else after - before


def settings(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        got = [f"{k}={conn.execute(f'SHOW {k}').fetchone()[0]}" for k in ("fsync", "synchronous_commit")]
        got.append(f"wal_sync_method={conn.execute('SHOW wal_sync_method').fetchone()[0]}")
        version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    return f"PostgreSQL {version} on a Unix socket, {', '.join(got)}; SQLite: WAL, synchronous=FULL"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_charge(server: str, folder: str | None, tmp: str, charges: int) -> list[list[str]]:
    """Table 4's rows: a charge on PostgreSQL and on SQLite, in alternating blocks."""
    urls = {"PostgreSQL": new_budget(server, 1e6, "1e-6"), "SQLite file": new_budget(tmp, 1e6, "1e-6")}
    blocks: dict[str, list[Timing]] = {k: [] for k in urls}
    served = [0.0, 0.0]  # the server's CPU seconds over the PostgreSQL blocks, and their charges
    sessions = {k: BudgetSession.open(u) for k, u in urls.items()}
    try:
        for s in sessions.values():
            for _ in range(3):  # warm: connection, caches
                s.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={}, label="warm")
        for _ in range(max(1, charges // BLOCK)):
            for kind, s in sessions.items():
                before = server_cpu(folder) if kind == "PostgreSQL" else None
                with timed() as t:
                    for _ in range(BLOCK):
                        s.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={}, label="count")
                blocks[kind].append(t.timing.scaled(1e3 / BLOCK))
                after = server_cpu(folder) if before is not None else None
                if before is not None and after is not None:  # summed: one block is a few clock ticks
                    served[0] += after - before
                    served[1] += BLOCK
    finally:
        for s in sessions.values():
            s.close()
    rows = []
    for kind, got in blocks.items():
        wall = [b.wall for b in got]
        p50, p95, cpu = _pct(wall, 0.5), _pct(wall, 0.95), _pct([b.cpu for b in got], 0.5)
        server_ms = f"{served[0] * 1e3 / served[1]:.2f}" if kind == "PostgreSQL" and served[1] else "-"
        met = ("yes" if p50 <= 5 else "NO") if kind == "PostgreSQL" else "(baseline)"
        rows.append([kind, f"{p50:.2f}", f"{p95:.2f}", f"{cpu:.2f}", server_ms, "<= 5 ms wall", met])
    return rows


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
    done = time.monotonic()  # its last charge decided (refused): what follows is not charging
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{n} {own.ru_utime + own.ru_stime - cpu0} {done!r}", flush=True)
    session.close()


def admitted(budget_charges: int) -> int:
    session, n = BudgetSession(budget=PrivacyBudget(epsilon=budget_charges * STEP, delta=0.0)), 0
    try:
        while True:
            session.charge(PureDP(epsilon=STEP), mechanism="laplace", parameters={})
            n += 1
    except BudgetExceededError:
        return n


def together(where: str, folder: str | None, processes: int, budget_charges: int) -> list[str]:
    """A row of table 5: ``processes`` analysts charging one budget at ``where``."""
    url = new_budget(where, budget_charges * STEP, "0")
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
    with server_timed(folder if where.startswith("postgres") else None) as served:
        start, begun = time.perf_counter(), time.monotonic()  # CLOCK_MONOTONIC: one clock for all processes
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.communicate()[0].split() for p in procs]
        exited = time.perf_counter() - start
    wall = max(float(r[2]) for r in results) - begun
    report = verify_ledger(url)
    rows, cpu = len(report.rows), sum(float(r[1]) for r in results)
    counts = sorted(int(r[0]) for r in results)
    assert sum(counts) == rows
    # the dev server lets PUBLIC connect (a deployment problem, not an overspend or a broken chain)
    ok = rows == expected and len(report.flags) == len(report.deployment)
    rate = rows / wall
    server_ms = "-" if served[0] is None else f"{served[0] * 1e3 / rows:.2f}"
    kind = "PostgreSQL" if where.startswith("postgres") else "SQLite file"
    return [
        kind,
        str(processes),
        f"{rows} of {expected}",
        f"{counts[0]}-{counts[-1]}",
        f"{wall:.2f}",
        f"{exited:.2f}",
        f"{cpu * 1e3 / rows:.2f}",
        server_ms,
        f"{rate:.0f}",
        "none" if ok else "OVERSPEND OR FLAGS",
        ">= 500 /s",
        ("yes" if rate >= 500 and ok else "NO") if kind == "PostgreSQL" else "(baseline)",
    ]


def start_server() -> tuple[str, str]:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres-dev"), "start"], capture_output=True, text=True, check=True
    ).stdout
    env = dict(re.findall(r"export (\w+)='?([^'\n]*)'?", out))
    return env["PRIVREG_TEST_POSTGRES"], env["PRIVREG_POSTGRES_DIR"]


def tables(
    say: Callable[[str], None],
    *,
    url: str | None,
    server_dir: str | None,
    charges: int,
    processes: int,
    budget_charges: int,
) -> None:
    """Print tables 4 and 5 through ``say``; start a throwaway server when ``url`` is None
    (and say so, not fail, when none can be started)."""
    started = None
    if not url:
        try:
            url, started = start_server()
        except (OSError, subprocess.CalledProcessError) as exc:
            say(f"PostgreSQL tables skipped: no server given and none could be started ({exc})")
            return
        server_dir = started
    try:
        with tempfile.TemporaryDirectory() as tmp:
            where = settings(url)
            say(header(f"4. One charge, ms per charge (blocks of {BLOCK}, alternating)", processes=1, cores=1))
            say(f"[{where}]")
            head = ["ledger", "wall ms p50", "wall ms p95", "CPU ms (client)", "CPU ms (server)", "target", "met"]
            say(fmt.table([head, *one_charge(url, server_dir, tmp, charges)]) + "\n")
            say(header("5. Analysts charging one budget together (until it refuses)", processes=processes, cores=2))
            say(f"[{where}; CPU ms: per charge, all analysts together / the server's processes]")
            head = ["ledger", "processes", "rows admitted", "per analyst", "wall s", "until exit s", "CPU ms (clients)"]
            head += ["CPU ms (server)", "charges / s", "overspend", "target", "met"]
            got = [together(url, server_dir, processes, budget_charges), together(tmp, None, processes, budget_charges)]
            say(fmt.table([head, *got]))
            a, b, c = os.getloadavg()
            say(f"load average after table 5: {a:.2f} / {b:.2f} / {c:.2f} (1, 5, 15 min)\n")
    finally:
        if started is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres-dev"), "stop", started], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("PRIVREG_TEST_POSTGRES"), help="server (no #budget)")
    ap.add_argument("--server-dir", default=os.environ.get("PRIVREG_POSTGRES_DIR"), help="its folder, for its CPU")
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
    tables(
        lambda text: print(text, flush=True),
        url=args.url,
        server_dir=args.server_dir,
        charges=args.charges,
        processes=args.processes,
        budget_charges=args.budget_charges,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
