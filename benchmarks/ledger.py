"""Privacy ledger at production size: reopen, charge and verify at 1e3, 1e5 and 1e6 rows;
then one budget on PostgreSQL beside the SQLite file.

    python benchmarks/ledger.py [--sizes 1000,100000,1000000] [--charges 400] [--quick]
                                [--cache DIR] [--rebuild] [--verify-timeout S] [--results FILE]
                                [--postgres URL | --no-postgres] [--processes 16]
                                [--budget-charges 4000]

Targets (issue #28, item 3): reopening <= 50 ms at 1e6 rows; a charge <= 0.3 ms CPU above
the bare SQLite insert of an equal row, at any size; verification of 1e5 rows <= 10 s,
and incremental verification from a checkpoint. Issue #34, item 5 (tables 4 and 5, from
benchmarks/ledger_postgres.py, which describes them): a charge on PostgreSQL <= 5 ms wall
on a local server; 16 analysts (processes) >= 500 charges per second in total on one
budget, without overspend. The server: ``--postgres`` (default ``$PRIVREG_TEST_POSTGRES``),
else a throwaway one from ``scripts/postgres-dev``; without one the tables say so.

Ledgers. For each size and filter set -- the session's default filters (basic + rdp +
gdp) and the basic filter alone -- a ledger of a realistic mix of releases: Laplace and
discrete Laplace counts and sums, pure-DP selections, (epsilon, delta) releases,
Gaussian and discrete Gaussian releases stating their (epsilon, delta), and a few blocks
(1 in 100). Charging 1e6 rows through ``session.charge`` (one fsync'd transaction each)
would take about an hour, so they are built faithfully but fast: the session's own
filters price each release in memory exactly as ``charge`` does (each release must be
granted), and the rows go in with ``Ledger.append(charge, prices=..., checkpoint=...)``,
every :data:`CHECKPOINT_EVERY` rows with every filter's state, 20,000 rows per
transaction. The script asserts that ``BudgetSession.open`` of the result holds bit for
bit the builder's final state, and reports whether ``verify_ledger`` flags anything.
Builds are cached (``--cache``; default ``<tmp>/privreg-ledger-bench``) under a name
that changes with the ledger format and the pricing code, so a second run starts
measuring at once (``--rebuild`` builds them again).

Tables (times from benchmarks/timing.py; CPU and wall separately, one process on one core):

1. Reopen: ``BudgetSession.open(path)`` on the cached ledger (warm page cache), mean of
   a few opens: it reads the last checkpoint and replays the stored prices of the rows
   after it (shown).
2. Charge: ``session.charge(Laplace(...))`` on a copy of the ledger, against the named
   baseline: a plain ``sqlite3`` ``BEGIN IMMEDIATE; INSERT; COMMIT`` of a row equal to
   the session's last row (same columns and text; next seq, a unique hash) into the
   ``charges`` table of a second copy of the same ledger (same size and indexes), with
   the ledger's pragmas (WAL, ``synchronous=FULL``). The two are timed in alternating
   blocks of 20, so both see the same load; each figure is the median over blocks (the
   machine is shared), and "above bare insert" the median of the paired differences.
3. Verify: ``privreg.budget.verify.verify_ledger(path)`` in a child process stopped
   after ``--verify-timeout`` seconds (CPU and wall of the call itself, measured in the
   child; the script asserts it finds the hash chain intact, and shows how many rows it
   flags), and ``verify_ledger(path, since=HEAD)`` with the ledger's head as an earlier
   verification printed it (incremental: the rows after the last checkpoint), if it takes
   ``since=`` (else the row says so).

``--quick``: 1e3 rows only, 40 charges (a smoke run).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import multiprocessing as mp
import os
import queue
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ledger_postgres
from timing import Timing, columns, header, measure, timed

import privreg
from privreg.accountant.curves import gaussian_epsilon
from privreg.budget import verify as verify_module
from privreg.budget.filters import Filter, price_to_json
from privreg.budget.ledger import Ledger, format_head
from privreg.budget.session import CHECKPOINT_EVERY, LEDGER_FORMAT, BudgetSession, PrivacyBudget
from privreg.core import ApproxDP, Charge, Gaussian, Laplace, PureDP
from privreg.core.events import Composed, DiscreteGaussian, DiscreteLaplace, PrivacyEvent, SelfComposed

#: A budget a million small releases fit in (the basic filter's share of delta is 1e-5 / 3).
BUDGET = PrivacyBudget(epsilon=2000.0, delta=1e-5)
FILTER_SETS = {"basic+rdp+gdp": None, "basic": ("basic",)}
BATCH = 20_000
SEED = 28
TARGETS = {"reopen_ms": 50.0, "charge_ms": 0.3, "verify_s": 10.0}


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- the mix of releases --------------------------------------------------------------


def _gaussian_stated(sigma: float, delta: float) -> ApproxDP:
    """The (epsilon, delta) a Gaussian of ``sigma`` (sensitivity 1) is calibrated to."""
    return ApproxDP(epsilon=gaussian_epsilon(delta, 1.0 / sigma), delta=delta)


Release = tuple[PrivacyEvent, PrivacyEvent | None, str, dict[str, Any], str]


def _palette() -> list[tuple[float, Release]]:
    """(weight, (event, stated, mechanism, parameters, label)): the releases a ledger holds."""
    out: list[tuple[float, Release]] = []
    cols = ("age", "income", "hours", "zip")
    for scale in (1000.0, 2000.0, 5000.0):
        for c in cols:
            release = (Laplace(scale=scale), None, "laplace", {"column": c, "query": "count"}, f"count({c})")
            out.append((35 / 12, release))
    for scale in (1000.0, 4000.0):
        event = DiscreteLaplace(scale=scale, sensitivity=1)
        out.append((5.0, (event, None, "discrete_laplace", {"query": "count"}, "")))
    for eps in (1e-3, 5e-4):
        out.append((5.0, (PureDP(epsilon=eps), None, "report_noisy_max", {"candidates": 12}, "argmax(zip)")))
    out.append((10.0, (ApproxDP(epsilon=1e-3, delta=1e-13), None, "stability_histogram", {"tau": 40}, "hist")))
    for sigma in (2000.0, 5000.0, 10000.0):
        stated = _gaussian_stated(sigma, 1e-12)
        out.append((20 / 3, (Gaussian(sigma=sigma), stated, "gaussian", {"column": "income"}, "sum(income)")))
    for sigma in (2000.0, 5000.0):
        stated = ApproxDP(epsilon=_gaussian_stated(sigma, 1e-12).epsilon * 1.01, delta=1e-12)
        event = DiscreteGaussian(sigma=sigma, sensitivity=1)
        out.append((5.0, (event, stated, "discrete_gaussian", {"query": "count"}, "count(*)")))
    blocks: list[Release] = [
        (Composed(events=(Laplace(scale=2000.0), DiscreteLaplace(scale=2000.0, sensitivity=1))), None, "block", {}, ""),
        (SelfComposed(event=Laplace(scale=5000.0), count=10), None, "histogram", {"bins": 10}, "hist(age)"),
        (
            Composed(events=(Gaussian(sigma=5000.0), Gaussian(sigma=8000.0))),
            ApproxDP(epsilon=0.01, delta=2e-12),
            "gaussian_pair",
            {"columns": ["income", "hours"]},
            "mean(income)",
        ),
    ]
    out.extend((1 / 3, b) for b in blocks)
    return out


def _releases(n: int, seed: int = SEED) -> list[Release]:
    weights, palette = zip(*_palette())
    return random.Random(seed).choices(palette, weights=weights, k=n)


# -- building a ledger fast -----------------------------------------------------------


def _fingerprint() -> str:
    """Changes with the ledger format, the code that prices releases and this mix (after
    other changes to what a ledger holds, pass ``--rebuild``)."""
    text = f"{privreg.__version__}|{SEED}|{BUDGET}|{LEDGER_FORMAT}|{CHECKPOINT_EVERY}|{BATCH}"
    h = hashlib.sha256(text.encode())
    root = Path(privreg.__file__).parent
    for part in ("budget/filters.py", "accountant/blocks.py", "budget/ledger.py"):  # how rows are priced and hashed
        h.update((root / part).read_bytes())
    h.update(repr(_palette()).encode())
    return h.hexdigest()[:12]


def _states(filters: list[Filter]) -> dict[str, Any]:
    return {f.name: f.state() for f in filters}


def build(path: Path, n: int, filters: tuple[str, ...] | None) -> dict[str, Any]:
    """A valid ledger of ``n`` releases at ``path``: priced by the session's filters
    exactly as ``charge`` prices them, appended with their prices and checkpoints. Returns
    the final state of every filter."""
    BudgetSession(budget=BUDGET, ledger=path, filters=filters).close()  # the ledger and its rule
    live = list(BudgetSession(budget=BUDGET, filters=filters).filters)  # fresh filters, as the session splits delta
    ledger = Ledger(path, create=False)
    releases = _releases(n)
    try:
        for start in range(0, n, BATCH):
            with ledger.transaction():
                for seq in range(start + 1, min(n, start + BATCH) + 1):
                    event, stated, mechanism, parameters, label = releases[seq - 1]
                    prices = [f.price(event, stated) for f in live]
                    trial = [f.copy() for f in live]
                    for f, p in zip(trial, prices):
                        f.apply(p)
                    if not any(f.vouches() for f in sorted(trial, key=lambda f: f.spent_cost)):
                        raise AssertionError(f"build: release {seq} ({event.kind}) would be refused")
                    live = trial
                    charge = Charge(
                        timestamp=time.time(),
                        mechanism=mechanism,
                        parameters=parameters,
                        event=event,
                        label=label,
                        stated=stated,
                    )
                    ledger.append(
                        charge,
                        prices={f.name: price_to_json(p) for f, p in zip(live, prices)},
                        checkpoint=_states(live) if seq % CHECKPOINT_EVERY == 0 else None,
                    )
    finally:
        ledger.close()
    return _states(live)


def cached_ledger(cache: Path, n: int, name: str, filters: tuple[str, ...] | None, rebuild: bool) -> tuple[Path, float]:
    """The cached ledger of ``n`` rows (built now if missing) and its build time in s (0 if cached)."""
    path = cache / f"ledger-{name}-{n}-{_fingerprint()}.sqlite"
    state_file = path.with_suffix(".state.json")
    if path.exists() and state_file.exists() and not rebuild:
        return path, 0.0
    tmp = path.with_suffix(".building")
    for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-lock")):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    state = build(tmp, n, filters)
    took = time.perf_counter() - t0
    with sqlite3.connect(tmp) as db:  # fold the WAL into the file: the cached copy is one file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for p in (Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-lock")):
        p.unlink(missing_ok=True)
    tmp.replace(path)
    state_file.write_text(json.dumps(state))
    return path, took


def check_reopened(path: Path, session: BudgetSession) -> None:
    """Assert the reopened session holds, bit for bit, the state the builder ended with."""
    expected = json.loads(path.with_suffix(".state.json").read_text())
    got = {f.name: f.state() for f in session.filters}
    assert json.loads(json.dumps(got)) == expected, f"{path.name}: reopened state differs from the built state"
    seq = session.ledger.head()[0]
    checkpoints = session.ledger.checkpoints()  # each link checked
    assert len(checkpoints) == seq // CHECKPOINT_EVERY, f"{path.name}: {len(checkpoints)} checkpoints for {seq} rows"


# -- 1. reopen ------------------------------------------------------------------------


def reopen_rows(path: Path, n: int, name: str, repeats: int) -> tuple[list[tuple[str, ...]], float]:
    session = BudgetSession.open(path)  # warm the page cache, and check the result
    check_reopened(path, session)
    last = session.ledger.last_checkpoint()
    replayed = n - (last.seq if last is not None else 0)
    session.close()
    total = Timing(0.0, 0.0)
    for _ in range(repeats):
        t, s = measure(lambda: BudgetSession.open(path))
        s.close()
        total = total + t
    per = total.scaled(1e3 / repeats)
    ok = "yes" if per.wall <= TARGETS["reopen_ms"] else "NO"
    return [(f"{n:,}", name, "BudgetSession.open", str(replayed), *per.cells(".2f"), ok)], per.wall


# -- 2. charge ------------------------------------------------------------------------


def _bare(path: Path) -> sqlite3.Connection:
    """A plain connection to a copy of the ledger, with the ledger's pragmas."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    db.execute("PRAGMA busy_timeout = 30000")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    return db


def charge_rows(
    src: Path, work: Path, n: int, name: str, charges: int, block: int = 20
) -> tuple[list[tuple[str, ...]], float]:
    shutil.copyfile(src, work)
    bare_copy = work.with_suffix(".bare.sqlite")
    shutil.copyfile(src, bare_copy)
    session = BudgetSession.open(work)
    events = [Laplace(scale=s) for s in (1000.0, 2000.0, 5000.0)]

    def charge(i: int) -> None:
        session.charge(
            events[i % 3], mechanism="laplace", parameters={"column": "age", "query": "count"}, label="count(age)"
        )

    for i in range(5):  # warm: first pricing of each event, the first fsync
        charge(i)
    db = _bare(bare_copy)
    reader = sqlite3.connect(work)
    row = list(reader.execute("SELECT * FROM charges ORDER BY seq DESC LIMIT 1").fetchone())
    reader.close()
    assert len(row) == 11, "the format-3 ledger's charges table has 11 columns"
    (seq,) = db.execute("SELECT max(seq) FROM charges").fetchone()

    def insert() -> None:  # the session's last row again, with the next seq and a unique hash
        nonlocal seq
        seq += 1
        row[0], row[8] = seq, hashlib.sha256(str(seq).encode()).hexdigest()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO charges VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        db.execute("COMMIT")

    for _ in range(5):
        insert()
    pairs: list[tuple[Timing, Timing]] = []  # (session block, bare block), ms per call
    for done in range(0, charges, block):  # alternate blocks, so that both see the same load
        with timed() as t_ses:
            for i in range(block):
                charge(done + i)
        with timed() as t_bare:
            for _ in range(block):
                insert()
        pairs.append((t_ses.timing.scaled(1e3 / block), t_bare.timing.scaled(1e3 / block)))
    db.close()
    session.close()
    bare_copy.unlink()

    def med(values: list[Timing]) -> Timing:  # wall and CPU each the median over blocks
        return Timing(statistics.median(t.wall for t in values), statistics.median(t.cpu for t in values))

    ses, bare = med([a for a, _ in pairs]), med([b for _, b in pairs])
    above = med([Timing(a.wall - b.wall, a.cpu - b.cpu) for a, b in pairs])  # paired: same moment's load
    ok = "yes" if above.cpu <= TARGETS["charge_ms"] else "NO"
    size = f"{n:,}"
    return [
        (size, name, "session.charge(Laplace)", *ses.cells(".3f"), ""),
        (size, name, "baseline: bare sqlite3 INSERT+COMMIT, same row and pragmas", *bare.cells(".3f"), ""),
        (size, name, "charge above bare insert", *above.cells(".3f"), ok),
    ], above.cpu


# -- 3. verify ------------------------------------------------------------------------


def _verify_child(path: str, since: str | None, out: Any) -> None:
    try:
        kwargs: dict[str, Any] = {} if since is None else {"since": since}
        with timed() as t:
            report = verify_module.verify_ledger(path, **kwargs)
        out.put(("ok", t.timing.wall, t.timing.cpu, list(report.flags), list(report.integrity)))
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, which prints it
        out.put(("error", 0.0, 0.0, [f"{type(exc).__name__}: {exc}"], []))


def _verify_once(path: Path, since: str | None, timeout: float) -> tuple[str, Timing | None, list[str]]:
    """(status, timing of the call, flags); asserts the hash chain (and checkpoints) passed."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_verify_child, args=(str(path), since, out))
    proc.start()
    try:
        status, wall, cpu, flags, integrity = out.get(timeout=timeout + 30)  # + the child's start-up
    except queue.Empty:  # still running
        proc.kill()
        proc.join()
        return f"not finished in {timeout:g} s (stopped)", None, []
    proc.join()
    if status != "ok":
        return f"failed: {flags[0][:80]}", None, flags
    assert not integrity, f"{path.name}: verification rejects the built ledger's chain: {integrity[0]}"
    return "ok", Timing(wall, cpu), flags


def _flags(flags: list[str]) -> str:
    return "no flags" if not flags else f"{len(flags):,} flag(s), first: {flags[0][:60]}..."


def verify_rows(path: Path, n: int, name: str, timeout: float) -> tuple[list[tuple[str, ...]], float | None]:
    rows: list[tuple[str, ...]] = []
    size = f"{n:,}"
    status, t, flags = _verify_once(path, None, timeout)
    target = n == 100_000
    if t is None:
        rows.append((size, name, "verify_ledger(path)", "-", "-", "-", status, "NO" if target else ""))
    else:
        ok = ("yes" if t.wall <= TARGETS["verify_s"] else "NO") if target else ""
        rows.append((size, name, "verify_ledger(path)", *t.cells(".2f"), f"chain intact; {_flags(flags)}", ok))
    if "since" in inspect.signature(verify_module.verify_ledger).parameters:
        with Ledger.open_readonly(path) as ledger:  # the head an earlier verification printed
            since = format_head(ledger.head())
            cp = ledger.last_checkpoint()
        label = f"verify_ledger(path, since=HEAD) from row {cp.seq if cp is not None else 0}"
        status, t2, flags = _verify_once(path, since, timeout)
        if t2 is None:
            rows.append((size, name, label, "-", "-", "-", status, ""))
        else:
            rows.append((size, name, label, *t2.cells(".2f"), _flags(flags), ""))
    else:
        rows.append(
            (size, name, "verify_ledger(path, since=...)", "-", "-", "-", "skipped: verify_ledger has no since=", "")
        )
    return rows, (None if t is None else t.wall)


# -- main -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,100000,1000000", help="ledger sizes (default 1000,100000,1000000)")
    parser.add_argument("--charges", type=int, default=400, help="charges timed per ledger (default 400)")
    parser.add_argument("--reopens", type=int, default=10, help="opens timed per ledger (default 10)")
    parser.add_argument("--cache", help="where built ledgers are kept (default <tmp>/privreg-ledger-bench)")
    parser.add_argument("--rebuild", action="store_true", help="build the ledgers again")
    parser.add_argument("--verify-timeout", type=float, default=60.0, help="stop a verification after S s")
    parser.add_argument("--results", help="also write the tables to this Markdown file")
    parser.add_argument("--quick", action="store_true", help="1e3 rows only, 40 charges (smoke run)")
    parser.add_argument("--postgres", default=os.environ.get("PRIVREG_TEST_POSTGRES"), help="server for tables 4-5")
    parser.add_argument("--no-postgres", action="store_true", help="skip tables 4 and 5")
    parser.add_argument("--processes", type=int, default=16, help="analysts in table 5 (default 16)")
    parser.add_argument("--budget-charges", type=int, default=4000, help="charges table 5's budget admits")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.charges, args.reopens = "1000", 40, 5
        args.processes, args.budget_charges = 4, 400
    sizes = [int(s) for s in args.sizes.split(",")]
    cache = Path(args.cache) if args.cache else Path(tempfile.gettempdir()) / "privreg-ledger-bench"
    cache.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        out.append(text)

    say(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; built ledgers cached in {cache}")
    say(f"budget {BUDGET.epsilon:g} epsilon, delta {BUDGET.delta:g}; checkpoint every {CHECKPOINT_EVERY} rows")
    built: dict[tuple[int, str], Path] = {}
    for n in sizes:
        for name, filters in FILTER_SETS.items():
            path, took = cached_ledger(cache, n, name, filters, args.rebuild)
            built[n, name] = path
            mb = path.stat().st_size / 1e6
            how = f"built in {took:.1f} s wall" if took else "cached"
            say(f"ledger {n:,} rows, filters {name}: {path.name} ({mb:.0f} MB, {how})")
    say()

    say(header(f"1. Reopen: BudgetSession.open(path), ms per open (mean of {args.reopens})", processes=1, cores=1))
    rows = [("rows", "filters", "operation", "rows replayed", *columns("ms"), "<= 50 ms")]
    for n in sizes:
        for name in FILTER_SETS:
            rows += reopen_rows(built[n, name], n, name, args.reopens)[0]
    say(_table(rows) + "\n")

    blocks = f"median of {args.charges // 20} blocks of 20, alternating with the baseline"
    say(header(f"2. Charge: ms per charge ({blocks})", processes=1, cores=1))
    rows = [("rows", "filters", "operation", *columns("ms"), "<= 0.3 ms CPU")]
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        for n in sizes:
            for name in FILTER_SETS:
                rows += charge_rows(built[n, name], Path(tmp) / f"work-{name}-{n}.sqlite", n, name, args.charges)[0]
    say(_table(rows) + "\n")

    say(header("3. Verify: verify_ledger, s per call (in a child process)", processes=1, cores=1))
    rows = [("rows", "filters", "call", *columns("s"), "result", "<= 10 s at 1e5")]
    for n in sizes:
        rows += verify_rows(built[n, "basic+rdp+gdp"], n, "basic+rdp+gdp", args.verify_timeout)[0]
    say(_table(rows) + "\n")
    if not args.no_postgres:
        ledger_postgres.tables(
            say,
            url=args.postgres,
            server_dir=os.environ.get("PRIVREG_POSTGRES_DIR"),
            charges=args.charges,
            processes=args.processes,
            budget_charges=args.budget_charges,
        )
    a, b, c = os.getloadavg()
    say(f"load average at end: {a:.2f} / {b:.2f} / {c:.2f} (1, 5, 15 min)")
    if args.results:
        Path(args.results).write_text(
            f"# benchmarks/ledger.py\n\n`python benchmarks/ledger.py {' '.join(sys.argv[1:])}` started {started} "
            f"on the shared 2-core development machine (load averages in the headers and at the end).\n\n"
            "```\n" + "\n".join(out) + "\n```\n"
        )


if __name__ == "__main__":
    main()
