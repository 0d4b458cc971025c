"""Several statistics of UCI Adult under one budget, composed by hand, then audited.

Releases a count and a mean with Laplace noise, a vector of mean hours by sex with the
Gaussian mechanism, and the most common occupation with the exponential mechanism. Every
release goes through one BudgetSession, which charges before noise is drawn and refuses
anything over budget; the ledger is then audited under every accountant.

    python examples/compose.py [path/to/adult.data]

Without a path it reads ../shared/data/adult/adult.data when present, else the 2,000-row
slice bundled with privreg.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import privreg
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import format_report, verify_ledger
from privreg.datasets import load_adult

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "adult" / "adult.data"


def main(path: str | None = None) -> None:
    source = path or (SHARED if SHARED.is_file() else None)
    adult = load_adult(source)
    print(f"UCI Adult: {adult['age'].size} rows ({source or 'bundled slice'})\n")
    reg = privreg.default_registry()  # plugins load here, not at import
    ledger = Path(tempfile.mkdtemp()) / "ledger.sqlite"

    with BudgetSession(budget=PrivacyBudget(epsilon=2.0, delta=1e-6), ledger=ledger) as session:
        n = adult["age"].size
        count = reg.get("laplace").create(epsilon=0.25, sensitivity=1.0)
        noisy_n = count.release(float(n), charger=session, label="rows").output

        age = np.clip(adult["age"], 17, 90)  # declared domain [17, 90]
        total = reg.get("laplace").create(epsilon=0.25, sensitivity=90.0)
        age_sum = total.release(float(age.sum()), charger=session, label="sum(age)").output
        print(f"mean age:          true {age.mean():7.3f}   private {age_sum / noisy_n:7.3f}")

        # mean weekly hours of women and men: one person moves one coordinate of the
        # per-sex sums by at most 99 (declared domain [1, 99]), so L2 sensitivity 99
        hours = adult["hours-per-week"]
        sums = np.array([hours[adult["sex"] == s].sum() for s in ("Female", "Male")], dtype=float)
        sizes = np.array([np.sum(adult["sex"] == s) for s in ("Female", "Male")], dtype=float)
        gauss = reg.get("gaussian").create(epsilon=0.5, delta=5e-7, sensitivity=99.0, dimension=2)
        noisy = gauss.release(sums, charger=session, label="sum(hours) by sex").output
        for i, s in enumerate(("Female", "Male")):
            print(
                f"mean hours {s:<7} true {sums[i] / sizes[i]:7.3f}   private {noisy[i] / sizes[i]:7.3f}"
                "   (group sizes treated as public)"
            )

        # the most common occupation: counts change by 1 per person
        jobs, job_counts = np.unique(adult["occupation"], return_counts=True)
        pick = reg.get("exponential").create(epsilon=0.5, sensitivity=1.0)
        chosen = pick.release(job_counts.astype(float), charger=session, label="top occupation").output
        print(f"top occupation:    true {jobs[np.argmax(job_counts)]}   private {jobs[chosen]}")

        print(f"\nremaining epsilon: {session.remaining().epsilon:.4f}")
        try:  # a count at epsilon 1 cannot fit in what remains
            reg.get("laplace").create(epsilon=1.0, sensitivity=1.0).release(float(n), charger=session, label="one more")
        except privreg.BudgetExceededError as exc:
            print(f"refused: {exc}")

    print("\n" + format_report(verify_ledger(ledger)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
