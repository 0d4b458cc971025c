"""CPU per charge into a budget session, by store and filter set (issue #32, item 2).

    python benchmarks/charges.py [--rounds 5] [--charges 2000] [--quick]

Target: a charge into an in-memory session costs <= 50 us of CPU for pure events with the
default filters (basic + rdp + gdp), the RDP vector update included.

Rows. Stores: **memory** is what ``BudgetSession(budget=...)`` uses by default
(``ledger=":memory:"``: :class:`privreg.budget.memory_store.MemoryLedger` where it
exists, else -- a privreg from before it -- SQLite's ``":memory:"``; the row says which);
**sqlite :memory:** an explicit ``Ledger(":memory:", meta=...)`` (SQLite in memory, no
file); **sqlite file** a ledger file in a temporary directory (WAL, ``synchronous=FULL``:
one fsync'd transaction per charge, so its wall time depends on the disk; it is timed on
1/20 of the charges). Filters: the
basic filter alone, and the default filters. Events: ``PureDP(epsilon=1e-6)`` with a
Laplace mechanism's parameters (the ``parameters`` a release records), and the event a
``LaplaceMechanism(epsilon=1, sensitivity=1)`` release charges (``DiscreteLaplace``, a
pure-DP event), both repeated (a loop of small releases). Each charge is a full
``session.charge``: validation, catch-up, every filter's price and the granted check, the
ledger row with its prices and hash, and a checkpoint every 512 rows. The last column is
a whole ``LaplaceMechanism.release`` (x1) into the same session.

Cells are microseconds of CPU (this process) and wall per charge, the median over
``--rounds`` interleaved rounds of ``--charges`` charges each (rows take turns, so a
burst of load hits all of them alike). Budgets are large enough that nothing is refused.
Before each cell the garbage collector collects and freezes what exists (``gc.freeze``),
so a full collection over the rows of every earlier cell (the in-memory ledgers hold them
all) does not land on whichever cell runs; a cell's own garbage is collected within it.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from timing import START_LOAD, header, timed

from privreg.budget.ledger import Ledger
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.events import PureDP
from privreg.core.randomness import SecureRandom
from privreg.mechanisms.laplace import LaplaceMechanism

FILTER_SETS = {"basic": ("basic",), "default (basic, rdp, gdp)": None}
BUDGET = PrivacyBudget(epsilon=1e9, delta=1e-6)


def _memory_kind() -> str:
    s = BudgetSession(budget=BUDGET)
    kind = type(s.ledger).__name__
    s.close()
    return "MemoryLedger" if kind == "MemoryLedger" else "SQLite :memory:"


def _session(store: str, filters: tuple[str, ...] | None, tmp: Path) -> BudgetSession:
    if store == "memory":
        return BudgetSession(budget=BUDGET, filters=filters)
    probe = BudgetSession(budget=BUDGET, filters=filters)  # the metadata this rule stores
    meta = {k: v for k, v in probe.ledger.meta.items() if k not in ("chain", "meta_mac")}
    probe.close()
    if store == "sqlite :memory:":
        return BudgetSession(budget=BUDGET, filters=filters, ledger=Ledger(":memory:", meta=meta))
    path = tmp / f"ledger-{len(list(tmp.iterdir()))}.sqlite"
    return BudgetSession(budget=BUDGET, filters=filters, ledger=str(path))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median per cell)")
    ap.add_argument("--charges", type=int, default=2000, help="charges per cell and round")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 200 charges")
    args = ap.parse_args()
    rounds, n = (2, 200) if args.quick else (args.rounds, args.charges)
    mech = LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    params = mech.parameters()
    pure = PureDP(epsilon=1e-6)
    secure = SecureRandom()
    stores = ["memory", "sqlite :memory:", "sqlite file"]
    columns: dict[str, Callable[[BudgetSession], None]] = {
        "PureDP charge": lambda s: s.charge(pure, mechanism="laplace", parameters=params),
        "Laplace event charge": lambda s: s.charge(
            mech.privacy_event(), mechanism="laplace", parameters=params, stated=mech.stated_guarantee()
        ),
        "Laplace release x1": lambda s: mech.release(0.5, charger=s, rng=secure),
    }
    cells: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        sessions = {(st, f): _session(st, fs, tmp) for st in stores for f, fs in FILTER_SETS.items()}
        for s in sessions.values():  # warm-up: caches, memoised prices, the first rows
            for fn in columns.values():
                for _ in range(20):
                    fn(s)
        for _ in range(rounds):
            for (st, f), s in sessions.items():
                k = n if st != "sqlite file" else max(10, n // 20)  # fsync'd: milliseconds each
                for col, fn in columns.items():
                    gc.collect()  # as benchmarks/noise.py: earlier cells' rows are frozen, so a
                    gc.freeze()  # full collection over them does not land on this cell
                    with timed(cores=1) as t:
                        for _ in range(k):
                            fn(s)
                    per = t.timing.scaled(1e6 / k)
                    cells.setdefault((st, f, col), []).append((per.cpu, per.wall))
        for s in sessions.values():
            s.close()
    print()
    print(header("CPU and wall us per charge (median of interleaved rounds)", processes=1, cores=1))
    a, b, c = START_LOAD
    end = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"[load average at start {a:.2f} / {b:.2f} / {c:.2f}, at the end {end}]")
    print(f"[memory = BudgetSession's default ledger, here {_memory_kind()}; {rounds} rounds x {n} charges]")
    head = ["store", "filters"] + [f"{col} {k}" for col in columns for k in ("CPU us", "wall us")]
    lines = [head]
    for st in stores:
        for f in FILTER_SETS:
            row = [st, f]
            for col in columns:
                got = cells[(st, f, col)]
                row += [f"{statistics.median(x[0] for x in got):.1f}", f"{statistics.median(x[1] for x in got):.1f}"]
            lines.append(row)
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    for r in lines:
        print("  ".join(x.rjust(w) if i > 1 else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))).rstrip())


if __name__ == "__main__":
    main()
