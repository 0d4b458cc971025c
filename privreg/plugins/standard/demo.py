"""The standard plugin's steps of ``privreg demo`` (bundled UCI Adult slice)."""

from __future__ import annotations

import numpy as np

from privreg.core.workflow import DemoStep, WorkflowContext
from privreg.datasets import load_adult
from privreg.mechanisms.laplace import LaplaceMechanism, as_global_l1
from privreg.mechanisms.randomized_response import RandomizedResponse


def _laplace_step(ctx: WorkflowContext) -> str:
    adult = load_adult()
    rich = float(np.sum(adult["income"] == ">50K"))
    mech = LaplaceMechanism(epsilon=0.5, sensitivity=as_global_l1(1.0))
    out = mech.release(rich, charger=ctx.charger, rng=ctx.rng, label="count(income > 50K)")
    return (
        f"Adult slice, {adult['age'].size} rows. People earning >50K: true {rich:.0f}, "
        f"released {out.output:.2f} (Laplace, epsilon 0.5, exact discrete sampler)."
    )


def _rr_step(ctx: WorkflowContext) -> str:
    adult = load_adult()
    races, codes = np.unique(adult["race"], return_inverse=True)
    rr = RandomizedResponse(epsilon=2.0, k=races.size)
    reports = rr.randomize(codes, charger=ctx.charger, rng=ctx.rng, label="race (local)")
    est = rr.estimate(reports.reports)
    truth = np.bincount(codes, minlength=races.size)
    lines = [f"Each of {codes.size} people randomizes their race locally (epsilon0 = 2):"]
    for name, t, e, var in zip(races, truth, est.counts, est.variance):
        lines.append(f"  {name:<20} true {t:5d}   estimate {e:8.1f} +/- {2 * np.sqrt(var):.1f}")
    return "\n".join(lines)


def demo_steps() -> list[DemoStep]:
    return [
        DemoStep(title="Central DP: Laplace count on UCI Adult", run=_laplace_step, order=10),
        DemoStep(title="Local DP: randomized response on UCI Adult", run=_rr_step, order=11),
    ]
