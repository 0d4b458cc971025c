"""Compose two mechanisms by hand under one budget: a noisy count and a noisy sum give a
noisy mean, and the accountants say what the pair cost.

Every release goes through one BudgetSession: it charges the release's privacy event
before noise is drawn and refuses anything over budget. Run:  python examples/compose.py
"""

from __future__ import annotations

import numpy as np

import privreg
from privreg.accountant import make_accountant
from privreg.accountant.budget import BudgetSession, PrivacyBudget
from privreg.datasets import load_adult


def main() -> None:
    registry = privreg.default_registry()  # plugins load here, not at import
    laplace = registry.get("laplace", kind="mechanism")

    hours = load_adult()["hours-per-week"]  # declared domain: [1, 99] hours
    lower, upper = 1.0, 99.0
    assert ((hours >= lower) & (hours <= upper)).all()

    with BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6)) as session:
        count = laplace.create(epsilon=0.5, sensitivity=1.0)
        total = laplace.create(epsilon=0.5, sensitivity=upper)
        n = count.release(float(hours.size), charger=session, label="count").output
        s = total.release(float(hours.sum()), charger=session, label="sum").output
        print(f"mean hours per week: true {hours.mean():.2f}, private {np.clip(s / n, lower, upper):.2f}")
        print(f"remaining budget: epsilon {session.remaining():.6g}")
        try:
            count.release(float(hours.size), charger=session, label="one more")
        except privreg.BudgetExceededError as exc:
            print(f"refused: {exc}")
        events = [row.charge.event for row in session.ledger.rows()]

    composed = privreg.Composed(events=events)
    print("what was released, as one event:", composed.to_json())
    for name in ("basic", "rdp", "pld"):
        acc = make_accountant(name).compose(composed)
        print(f"  {name:>5}: epsilon = {acc.epsilon(1e-6):.6f} at delta = 1e-6")


if __name__ == "__main__":
    main()
