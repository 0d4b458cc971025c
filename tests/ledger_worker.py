"""Child processes for the ledger tests: hold a lock, or charge in a tight loop.

    python ledger_worker.py PATH hold-sqlite SECONDS   # SQLite's write lock (BEGIN IMMEDIATE)
    python ledger_worker.py PATH hold-turn SECONDS     # a writer turn (Ledger.turn)
    python ledger_worker.py PATH charge TOTAL LABEL    # after "go" on stdin, charge until
                                                       # the ledger holds TOTAL rows
Each prints "ready" once it holds what it should (or is set up), then its result.
"""

import sqlite3
import sys
import time

from privreg.budget.ledger import Ledger
from privreg.core import Charge, PureDP


def charge_until(path: str, total: int, label: str) -> int:
    """Charge in a tight loop, catching up in the writer's turn, until the ledger holds
    ``total`` rows; return how many rows this process appended."""
    ledger = Ledger(path, create=False)
    seen, mine = ledger.head()[0], 0
    print("ready", flush=True)
    sys.stdin.readline()
    while seen < total:
        with ledger.turn():  # in our turn the append cannot conflict (where the queue exists)
            new = ledger.rows(after=seen)
            seen = new[-1].seq if new else seen
            if seen >= total:
                break
            charge = Charge(
                timestamp=time.time(), mechanism="m", parameters={}, event=PureDP(epsilon=1e-6), label=label
            )
            row = ledger.try_append(charge, expected_seq=seen)
            if row is not None:
                seen, mine = row.seq, mine + 1
    ledger.close()
    return mine


if __name__ == "__main__":
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "hold-sqlite":
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE charges SET label = label")  # a write in progress
        print("ready", flush=True)
        time.sleep(float(sys.argv[3]))
        db.execute("ROLLBACK")
    elif mode == "hold-turn":
        ledger = Ledger(path, create=False)
        with ledger.turn():
            print("ready", flush=True)
            time.sleep(float(sys.argv[3]))
    else:
        print(charge_until(path, int(sys.argv[3]), sys.argv[4]), flush=True)
