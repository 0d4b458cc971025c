"""Compose two mechanisms by hand: a noisy count and a noisy sum give a noisy mean.

Every release goes through one charger (here an EventLog, which records and refuses
nothing); the privacy events it collects describe what happened, and their composition
is one Composed event. Run:  python examples/compose.py
"""

from __future__ import annotations

import numpy as np

import privreg
from privreg.datasets import load_adult


def main() -> None:
    registry = privreg.default_registry()  # plugins load here, not at import
    laplace = registry.get("laplace", kind="mechanism")

    hours = load_adult()["hours-per-week"]  # declared domain: [1, 99] hours
    lower, upper = 1.0, 99.0
    assert ((hours >= lower) & (hours <= upper)).all()

    log = privreg.EventLog()
    count = laplace.create(epsilon=0.5, sensitivity=1.0)
    total = laplace.create(epsilon=0.5, sensitivity=upper)
    n = count.release(float(hours.size), charger=log, label="count").output
    s = total.release(float(hours.sum()), charger=log, label="sum").output
    print(f"mean hours per week: true {hours.mean():.2f}, private {np.clip(s / n, lower, upper):.2f}")

    composed = privreg.Composed(events=log.events)
    print("what was released, as one event:", composed.to_json())
    # Basic composition of pure-DP Laplace events: epsilon adds up (sensitivity / scale each).
    # privreg.accountant does this, and tighter accounting, for any event tree.
    by_hand = sum(e.sensitivity / e.scale for e in composed.events)
    print(f"basic composition by hand: epsilon = {by_hand:g}")


if __name__ == "__main__":
    main()
