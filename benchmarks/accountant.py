"""Accountant speed against Google's dp-accounting (and the published shuffle script's
method), on the same computations, in one run.

    python benchmarks/accountant.py [--repeats N]

Rows:
- PLD composition of 1000 mixed Gaussian and Laplace events (10 distinct parameters each,
  random order): privreg's PLDAccountant vs dp_accounting's PLDAccountant, both at
  value_discretization_interval 1e-4; epsilon at delta 1e-6 shown for both.
- Shuffle amplification bound per call at n = 1e6, 1e8, 1e9 (eps0 = 10, delta = 1e-10),
  for each numerical bound of privreg.accountant.shuffle. Baseline for the FMT21 bound:
  the authors' published procedure (privreg.accountant.shuffle_reference: coarse
  intervals, a Python loop over them, 10 bisection steps), which is also looser -- and at
  n = 1e6 prints an epsilon that does not hold (see privreg.accountant.shuffle_reference).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from dp_accounting import dp_event as dpe
from dp_accounting.pld import pld_privacy_accountant as google_pld

from privreg.accountant.pld import PLDAccountant
from privreg.accountant.shuffle import shuffle_epsilon
from privreg.accountant.shuffle_reference import fmt21_tool_epsilon
from privreg.core.events import Composed, Gaussian, Laplace


def _time(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def pld_rows(repeats: int) -> list[tuple[str, ...]]:
    rng = np.random.default_rng(0)
    events = [Gaussian(sigma=float(s)) for s in rng.choice(np.linspace(20, 60, 10), 500)]
    events += [Laplace(scale=float(s)) for s in rng.choice(np.linspace(50, 150, 10), 500)]
    rng.shuffle(events)
    translated = [
        dpe.GaussianDpEvent(e.noise_multiplier) if isinstance(e, Gaussian) else dpe.LaplaceDpEvent(e.noise_multiplier)
        for e in events
    ]
    ours, acc = _time(lambda: PLDAccountant().compose(Composed(events=events)), repeats)
    base, gacc = _time(
        lambda: google_pld.PLDAccountant(value_discretization_interval=1e-4).compose(dpe.ComposedDpEvent(translated)),
        repeats,
    )
    return [(
        "PLD, 1000 mixed Gaussian+Laplace", f"{ours:.3f} s", "dp-accounting PLDAccountant", f"{base:.3f} s",
        f"{base / ours:.1f}x", f"eps {acc.epsilon(1e-6):.6f} vs {gacc.get_epsilon(1e-6):.6f}",
    )]


def shuffle_rows(repeats: int) -> list[tuple[str, ...]]:
    eps0, delta = 10.0, 1e-10
    rows = []
    for n in (10**6, 10**8, 10**9):
        for bound in ("fmt21-numerical", "fmt23-numerical"):
            t, eps = _time(lambda: shuffle_epsilon(epsilon0=eps0, num_reports=n, delta=delta, bound=bound), repeats)
            if bound == "fmt21-numerical":  # the published script computes this bound
                tb, eb = _time(lambda: fmt21_tool_epsilon(n, eps0, delta), 1)
                rows.append((f"shuffle {bound}, n={n:.0e}", f"{t * 1e3:.0f} ms", "FMT21 published procedure",
                             f"{tb * 1e3:.0f} ms", f"{tb / t:.1f}x", f"eps {eps:.4f} vs {eb:.4f}"))
            else:
                rows.append((f"shuffle {bound}, n={n:.0e}", f"{t * 1e3:.0f} ms", "(no published script)", "-", "-",
                             f"eps {eps:.4f}"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = [("computation", "privreg", "baseline", "baseline time", "speed-up", "result")]
    rows += pld_rows(args.repeats) + shuffle_rows(args.repeats)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


if __name__ == "__main__":
    main()
