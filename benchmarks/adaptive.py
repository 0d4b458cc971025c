"""What full adaptivity costs: the epsilon a filter session grants against the
non-adaptive PLD bound of the same events, on three typical workloads, in one run.

    python benchmarks/adaptive.py [--delta 1e-6] [--quick]

Workloads (delta 1e-6 unless given):
- 100 Gaussians, sigma 10, sensitivity 1;
- 1000 Poisson-subsampled Gaussians, q = 0.01, sigma 1.1 (one DP-SGD epoch of 100 steps x 10);
- a mix, interleaved: 30 Laplace (scale 20), 30 Gaussians (sigma 20), 30 exponential
  selections (epsilon 0.05).

Columns: the epsilon each filter alone would report with the whole delta (``filters=(f,)``:
valid under fully adaptive use; ``basic`` and ``advanced`` price each curve event at
delta / n, resp. delta / 2n), the default session (basic + rdp + gdp, a third of delta
each, union bound), and the baseline: the real peer dp-accounting (version printed)'s
PLD on the same sequence (events translated by ``privreg.accountant.pld``, pessimistic),
valid only for a sequence fixed in advance -- what a ``plan=`` session charges. Also the
time to charge every event through the default session and the time of the PLD
composition (benchmarks/timing.py: wall s, CPU s, CPU s / core; one process, one core).
``--quick`` divides every workload's length by 10.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math

from timing import Timing, header, measure, timed

from privreg.accountant import make_accountant
from privreg.budget.filters import FILTERS
from privreg.budget.session import DEFAULT_FILTERS, BudgetSession, PrivacyBudget
from privreg.core.errors import BudgetExceededError
from privreg.core.events import Composed, Exponential, Gaussian, Laplace, PoissonSampled, PrivacyEvent


def workloads(shrink: int = 1) -> dict[str, list[PrivacyEvent]]:
    mix: list[PrivacyEvent] = []
    m, g, p = 30 // shrink, 100 // shrink, 1000 // shrink
    for _ in range(m):
        mix += [Laplace(scale=20.0), Gaussian(sigma=20.0), Exponential(epsilon=0.05)]
    return {
        f"{g} Gaussians (sigma 10)": [Gaussian(sigma=10.0)] * g,
        f"{p} Poisson-subsampled Gaussians (q 0.01, sigma 1.1)": [
            PoissonSampled(sampling_probability=0.01, event=Gaussian(sigma=1.1))
        ]
        * p,
        f"mix: {m} Laplace, {m} Gaussian, {m} exponential": mix,
    }


def filter_epsilon(
    events: list[PrivacyEvent], filters: tuple[str, ...], delta: float, event_delta: float | None = None
) -> tuple[float, Timing]:
    """(epsilon spent, time) after charging every event to a session with a budget too
    large to refuse anything (inf if some event cannot be accounted)."""
    session = BudgetSession(budget=PrivacyBudget(epsilon=1e9, delta=delta), filters=filters, event_delta=event_delta)
    with timed(cores=1) as t, session as s:
        try:
            for e in events:
                s.charge(e, mechanism="bench", parameters={})
            spent = min(s.spent().values(), default=math.inf)
        except BudgetExceededError:
            spent = math.inf
    return spent, t.timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--quick", action="store_true", help="workloads 10 times shorter")
    args = parser.parse_args()
    delta = args.delta
    names = list(FILTERS)
    peer = f"dp-accounting {importlib.metadata.version('dp-accounting')}"
    head = (
        ["workload"]
        + [f"{n} alone" for n in names]
        + ["default session", f"PLD (real peer {peer}, fixed in advance)", "default / PLD"]
        + [f"charge {c}" for c in ("wall s", "CPU s", "CPU s / core")]
        + ["PLD wall s", "PLD CPU s / core"]
    )
    rows = []
    for label, events in workloads(10 if args.quick else 1).items():
        # basic and advanced price each curve event at event_delta: spread delta over the events
        # (a hair below delta / n, so that n float additions cannot exceed the share)
        per_event = {"basic": delta / len(events) * (1 - 1e-9), "advanced": delta / (2 * len(events)) * (1 - 1e-9)}
        alone = [filter_epsilon(events, (n,), delta, per_event.get(n))[0] for n in names]
        default, charge = filter_epsilon(events, DEFAULT_FILTERS, delta)
        pld_t, pld = measure(lambda: make_accountant("pld").compose(Composed(events=events)).epsilon(delta))
        rows.append(
            [label]
            + [f"{x:.4g}" for x in alone]
            + [
                f"{default:.4g}",
                f"{pld:.4g}",
                f"{default / pld:.3f}",
                *charge.cells(".3f"),
                f"{pld_t.wall:.3f}",
                f"{pld_t.cpu_per_core:.3f}",
            ]
        )
    print(
        header(
            f"epsilon at delta = {delta:g} (inf: that filter cannot account every event of the workload)",
            processes=1,
            cores=1,
        )
        + "\n"
    )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")


if __name__ == "__main__":
    main()
