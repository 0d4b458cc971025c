"""What full adaptivity costs: the epsilon a filter session grants against the
non-adaptive PLD bound of the same events, on three typical workloads, in one run.

    python benchmarks/adaptive.py [--delta 1e-6]

Workloads (delta 1e-6 unless given):
- 100 Gaussians, sigma 10, sensitivity 1;
- 1000 Poisson-subsampled Gaussians, q = 0.01, sigma 1.1 (one DP-SGD epoch of 100 steps x 10);
- a mix, interleaved: 30 Laplace (scale 20), 30 Gaussians (sigma 20), 30 exponential
  selections (epsilon 0.05).

Columns: the epsilon each filter alone would report with the whole delta (``filters=(f,)``:
valid under fully adaptive use; ``basic`` and ``advanced`` price each curve event at
delta / n, resp. delta / 2n), the default session (basic + rdp + gdp, a third of delta
each, union bound), and the baseline: dp-accounting's PLD on the same sequence (through
``privreg.accountant.pld``, pessimistic), valid only for a sequence fixed in advance --
what a ``plan=`` session charges. Also the time to charge every event through the
default session (CPU per core and wall, both labelled).
"""

from __future__ import annotations

import argparse
import math
import time

from privreg.accountant import make_accountant
from privreg.accountant.budget import DEFAULT_FILTERS, BudgetSession, PrivacyBudget
from privreg.accountant.filters import FILTERS
from privreg.core.errors import BudgetExceededError
from privreg.core.events import Composed, Exponential, Gaussian, Laplace, PoissonSampled, PrivacyEvent


def workloads() -> dict[str, list[PrivacyEvent]]:
    mix: list[PrivacyEvent] = []
    for _ in range(30):
        mix += [Laplace(scale=20.0), Gaussian(sigma=20.0), Exponential(epsilon=0.05)]
    return {
        "100 Gaussians (sigma 10)": [Gaussian(sigma=10.0)] * 100,
        "1000 Poisson-subsampled Gaussians (q 0.01, sigma 1.1)":
            [PoissonSampled(sampling_probability=0.01, event=Gaussian(sigma=1.1))] * 1000,
        "mix: 30 Laplace, 30 Gaussian, 30 exponential": mix,
    }


def filter_epsilon(events: list[PrivacyEvent], filters: tuple[str, ...], delta: float,
                   event_delta: float | None = None) -> tuple[float, float, float]:
    """(epsilon spent, CPU s, wall s) after charging every event to a session with a
    budget too large to refuse anything (inf if some event cannot be accounted)."""
    cpu, wall = time.process_time(), time.perf_counter()
    with BudgetSession(budget=PrivacyBudget(epsilon=1e9, delta=delta), filters=filters,
                       event_delta=event_delta) as s:
        try:
            for e in events:
                s.charge(e, mechanism="bench", parameters={})
            spent = min(s.spent().values(), default=math.inf)
        except BudgetExceededError:
            spent = math.inf
    return spent, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delta", type=float, default=1e-6)
    delta = parser.parse_args().delta
    names = list(FILTERS)
    header = ["workload"] + [f"{n} alone" for n in names] + ["default session", "PLD (fixed in advance)",
                                                              "default / PLD", "charge CPU s/core", "charge wall s"]
    rows = []
    for label, events in workloads().items():
        # basic and advanced price each curve event at event_delta: spread delta over the events
        # (a hair below delta / n, so that n float additions cannot exceed the share)
        per_event = {"basic": delta / len(events) * (1 - 1e-9), "advanced": delta / (2 * len(events)) * (1 - 1e-9)}
        alone = [filter_epsilon(events, (n,), delta, per_event.get(n))[0] for n in names]
        default, cpu, wall = filter_epsilon(events, DEFAULT_FILTERS, delta)
        pld = make_accountant("pld").compose(Composed(events=events)).epsilon(delta)
        rows.append([label] + [f"{x:.4g}" for x in alone]
                    + [f"{default:.4g}", f"{pld:.4g}", f"{default / pld:.3f}", f"{cpu:.2f}", f"{wall:.2f}"])
    print(f"epsilon at delta = {delta:g} (inf: that filter cannot account every event of the workload)\n")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")


if __name__ == "__main__":
    main()
