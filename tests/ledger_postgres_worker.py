"""A child process charging one PostgreSQL budget from two sessions (two connections) in
two threads, until the budget refuses:

    python ledger_postgres_worker.py URL WORKER EPSILON

Prints "ready" once both sessions are open, and starts on a line on stdin; then prints
"ok LABEL" after each charge returns (the release would happen only then), "error LABEL
MESSAGE" for a charge that failed (retried with the same label: a label twice in the
ledger is a double charge), and "done" when both sessions were refused.
"""

import sys
import threading

from privreg.budget.session import BudgetSession
from privreg.core import PureDP
from privreg.core.errors import BudgetExceededError, PrivregError

LOCK = threading.Lock()


def say(line: str) -> None:
    with LOCK:
        print(line, flush=True)


def charge_until_refused(session: BudgetSession, name: str, epsilon: float) -> None:
    i = 0
    while True:
        label = f"{name}-{i}"
        try:
            session.charge(PureDP(epsilon=epsilon), mechanism="laplace", parameters={}, label=label)
        except BudgetExceededError:
            return
        except PrivregError as exc:  # e.g. the server restarting for longer than busy_timeout
            say(f"error {label} {exc}")
            continue
        say(f"ok {label}")
        i += 1


if __name__ == "__main__":
    url, worker, epsilon = sys.argv[1], sys.argv[2], float(sys.argv[3])
    sessions = [BudgetSession.open(url) for _ in range(2)]
    say("ready")
    sys.stdin.readline()
    threads = [
        threading.Thread(target=charge_until_refused, args=(s, f"{worker}.{k}", epsilon))
        for k, s in enumerate(sessions)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in sessions:
        s.close()
    say("done")
