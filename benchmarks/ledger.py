"""Privacy ledger speed and writer fairness, in one run.

    python benchmarks/ledger.py [--charges N] [--seconds S] [--sizes 10,1000,100000] [--quick]

Tables:

1. Ledger alone, on a ledger already holding 10, 1,000 and 100,000 rows (built in one
   transaction with Ledger.append, a valid chain): time per Ledger.try_append (one
   fsync'd transaction), head(), reading and verifying the rows after seq n-10, and
   reopening (Ledger(path), Ledger.open_readonly). Each cost should not grow with n.
2. BudgetSession per accountant kind -- basic (filters=("basic",)), rdp (filters=("rdp",))
   and pld (a plan session) -- on the same sizes: time per session.charge and time of
   BudgetSession.open (which catches up with every row). This needs the BudgetSession of
   issue #15 (filters=/plan=); with an older session the table says so and is skipped.
3. Fairness: two processes charging in a tight loop for a few seconds; each one's count
   and maximum wait per charge. Baseline: privreg's own pre-#15 scheme (SQLite's busy
   handler only: BEGIN IMMEDIATE, read the head, insert, COMMIT), re-implemented here on a
   plain SQLite file with the same pragmas and labelled as such (no peer library has a
   budget ledger), measured in the same run.

Times (benchmarks/timing.py): every row has wall, CPU and CPU per core; tables 1 and 2 in
milliseconds per call of one process on one core, table 3 in seconds of the two
charging processes (CPU summed over both, per core over 2). ``--quick``: sizes 10 and
1,000, 10 charges, 0.5 s of fairness per scheme.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from timing import Timing, columns, header, measure, timed

from privreg.budget.ledger import Ledger
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core import Charge, Gaussian, PureDP

META = {"format": 1, "budget": {"epsilon": 10.0, "delta": 1e-6}}
BUDGET = PrivacyBudget(epsilon=10.0, delta=1e-6)


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _charge(event, i: int = 0) -> Charge:
    return Charge(timestamp=time.time(), mechanism="bench", parameters={"i": i}, event=event)


def _fill(path: Path, n: int, event, meta=None) -> None:
    """n valid rows, appended in one transaction (one fsync)."""
    ledger = Ledger(path, meta=meta, create=meta is not None)
    with ledger.transaction():
        for i in range(n):
            ledger.append(_charge(event, i))
    ledger.close()


def _per_op(fn, repeats: int) -> Timing:
    """Milliseconds per call of fn, over ``repeats`` calls."""
    return measure(lambda: [fn() for _ in range(repeats)])[0].scaled(1e3 / repeats)


def ledger_table(root: Path, sizes: list[int], charges: int) -> str:
    rows = [("rows", "operation", *columns("ms/call"))]
    event = PureDP(epsilon=1e-7)
    for n in sizes:
        path = root / f"ledger-{n}.sqlite"
        _fill(path, n, event, META)
        ledger = Ledger(path, create=False)
        seq = ledger.head()[0]

        def append() -> None:
            nonlocal seq
            row = ledger.try_append(_charge(event), expected_seq=seq)
            seq = row.seq

        cost = _per_op(append, charges)
        after = seq - 10
        head = _per_op(ledger.head, 1000)
        tail = _per_op(lambda: ledger.rows(after=after, verify=False), 1000)
        verify = _per_op(lambda: ledger.rows(after=after, verify=True), 1000)
        ledger.close()
        reopen = _per_op(lambda: Ledger(path, create=False).close(), 50)
        reopen_ro = _per_op(lambda: Ledger.open_readonly(path).close(), 50)
        for op, t in (
            ("try_append", cost),
            ("head()", head),
            ("rows(after=n-10)", tail),
            ("rows(after=n-10, verify=True)", verify),
            ("Ledger(path)", reopen),
            ("Ledger.open_readonly", reopen_ro),
        ):
            rows.append((f"{n:,}", op, *t.cells(".4f")))
    return _table(rows)


SESSION_KINDS = {
    # kind: (event charged, session keyword arguments given the number of events planned)
    "basic": (PureDP(epsilon=1e-7), lambda total: {"filters": ("basic",)}),
    "rdp": (Gaussian(sigma=2000.0), lambda total: {"filters": ("rdp",)}),
    "pld (plan)": (Gaussian(sigma=2000.0), lambda total: {"plan": [Gaussian(sigma=2000.0)] * total}),
}


def session_table(root: Path, sizes: list[int], charges: int) -> str:
    rows = [("accountant", "rows", "operation", *columns("ms/call"))]
    for kind, (event, options) in SESSION_KINDS.items():
        for n in sizes:
            path = root / f"session-{kind.split()[0]}-{n}.sqlite"
            try:
                BudgetSession(budget=BUDGET, ledger=path, **options(n + charges)).close()
            except TypeError as exc:
                return f"skipped: this BudgetSession does not take the issue #15 API (filters=/plan=): {exc}"
            _fill(path, n, event)
            opened, session = measure(lambda: BudgetSession.open(path))
            cost = _per_op(lambda: session.charge(event, mechanism="bench", parameters={}), charges)
            session.close()
            rows.append((kind, f"{n:,}", "charge", *cost.cells(".3f")))
            rows.append((kind, f"{n:,}", "BudgetSession.open", *opened.scaled(1e3).cells(".1f")))
    return _table(rows)


# -- fairness --------------------------------------------------------------------------


def _baseline_db(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=600.0, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 600000")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    return db


def _fair_worker(mode: str, path: str, barrier, seconds: float, out) -> None:
    """Charge in a tight loop for ``seconds`` once both workers are ready; report
    (pid, count, max wait in s)."""
    event = PureDP(epsilon=1e-9)
    if mode == "baseline":
        db = _baseline_db(path)

        def charge() -> None:
            db.execute("BEGIN IMMEDIATE")
            (seq,) = db.execute("SELECT coalesce(max(seq), 0) FROM t").fetchone()
            db.execute("INSERT INTO t VALUES (?, ?)", (seq + 1, "x" * 300))
            db.execute("COMMIT")
    elif mode == "ledger":
        ledger = Ledger(path, create=False)
        seen = ledger.head()[0]

        def charge() -> None:
            nonlocal seen
            with ledger.turn():  # catch up and append in one turn: no conflict, no retry
                new = ledger.rows(after=seen)
                seen = new[-1].seq if new else seen
                seen = ledger.try_append(_charge(event), expected_seq=seen).seq
    else:
        session = BudgetSession.open(path)

        def charge() -> None:
            session.charge(event, mechanism="bench", parameters={})

    barrier.wait()
    count, worst, end = 0, 0.0, time.time() + seconds
    with timed(cores=1) as t:
        while time.time() < end:
            t0 = time.perf_counter()
            charge()
            worst = max(worst, time.perf_counter() - t0)
            count += 1
    out.put((os.getpid(), count, worst, t.timing.wall, t.timing.cpu))


def fairness_table(root: Path, seconds: float) -> str:
    rows = [("scheme", "charges A", "charges B", "max wait A (ms)", "max wait B (ms)", *columns("s"))]
    ctx = mp.get_context("spawn")
    schemes = [
        ("baseline: privreg's pre-#15 scheme, SQLite busy handler only (re-implemented, labelled)", "baseline"),
        ("Ledger.try_append + writer queue", "ledger"),
        ("BudgetSession.charge (basic)", "session"),
    ]
    for label, mode in schemes:
        path = str(root / f"fair-{mode}.sqlite")
        if mode == "baseline":
            _baseline_db(path).execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, payload TEXT)")
        elif mode == "ledger":
            _fill(Path(path), 0, None, META)
        else:
            try:
                BudgetSession(budget=BUDGET, ledger=path, filters=("basic",)).close()
            except TypeError:  # the session before issue #15
                BudgetSession(budget=BUDGET, ledger=path, accountants=("basic",)).close()
        out, barrier = ctx.Queue(), ctx.Barrier(2)  # both start once both are set up
        procs = [ctx.Process(target=_fair_worker, args=(mode, path, barrier, seconds, out)) for _ in range(2)]
        for p in procs:
            p.start()
        results = sorted((out.get() for _ in procs), key=lambda r: -r[1])
        for p in procs:
            p.join()
        (_, na, wa, walla, cpua), (_, nb, wb, wallb, cpub) = results
        both = Timing(max(walla, wallb), cpua + cpub, cores=2)
        rows.append((label, str(na), str(nb), f"{1e3 * wa:.1f}", f"{1e3 * wb:.1f}", *both.cells(".2f")))
    return _table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--charges", type=int, default=100, help="charges timed per row (default 100)")
    parser.add_argument("--seconds", type=float, default=5.0, help="fairness run per scheme (default 5)")
    parser.add_argument("--sizes", default="10,1000,100000", help="ledger sizes (default 10,1000,100000)")
    parser.add_argument("--dir", help="where to put the ledgers (default: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help="sizes 10,1000; 10 charges; 0.5 s fairness")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.charges, args.seconds = "10,1000", 10, 0.5
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        print(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; ledgers in {root}\n")
        print(header(f"1. Ledger alone (ms per call; {args.charges} try_append per size)", processes=1, cores=1))
        print(ledger_table(root, sizes, args.charges) + "\n")
        print(header(f"2. BudgetSession (ms per call; {args.charges} charges per row)", processes=1, cores=1))
        print(session_table(root, sizes, args.charges) + "\n")
        print(
            header(
                f"3. Fairness: two processes charging in a tight loop for {args.seconds:g} s each "
                f"(wall: the longer loop; CPU: both loops)",
                processes=2,
                cores=2,
            )
        )
        print(fairness_table(root, args.seconds))


if __name__ == "__main__":
    main()
