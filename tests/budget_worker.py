"""Helpers run in child processes by the budget tests (importable by multiprocessing)."""

import sys
import threading
import time

from privreg.budget.session import BudgetSession
from privreg.core import BudgetExceededError, PureDP


def spend(path, threads, attempts, eps):
    """Try ``threads * attempts`` charges of PureDP(eps); return how many were granted."""
    session = BudgetSession.open(path)
    granted = []

    def worker():
        n = 0
        for _ in range(attempts):
            try:
                session.charge(PureDP(epsilon=eps), mechanism="test", parameters={}, label="w")
                n += 1
            except BudgetExceededError:
                pass
        granted.append(n)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    session.close()
    return sum(granted)


if __name__ == "__main__":  # crash target: charge forever, or block inside a release
    from privreg.mechanisms.laplace import LaplaceMechanism

    path, mode = sys.argv[1], sys.argv[2]
    session = BudgetSession.open(path)
    if mode == "loop":
        print("ready", flush=True)
        while True:
            session.charge(PureDP(epsilon=1e-6), mechanism="loop", parameters={"i": 1}, label="loop")
    else:

        class Stuck(LaplaceMechanism):
            def _sample(self, value, rng, data):
                print("sampling", flush=True)
                time.sleep(600)

        Stuck(epsilon=0.5, sensitivity=1.0).release(1.0, charger=session, label="stuck")
