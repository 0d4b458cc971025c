"""The ``outliers`` plugin's step of ``privreg demo`` (generated data, a few seconds)."""

from __future__ import annotations

from privreg.accountant.calibration import calibrate_gaussian_sigma
from privreg.core.workflow import DemoStep, WorkflowContext
from privreg.plugins.outliers.datasets import synthetic_1, synthetic_2
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper
from privreg.plugins.outliers.release import all_subspaces, outlier_count_mechanism, top_h_subspaces


def _outlier_step(ctx: WorkflowContext) -> str:
    one = synthetic_1(0)
    eps, delta = 1.0, 1e-7
    mech = outlier_count_mechanism(epsilon=eps, delta=delta, k=3, radius=1.1)
    count = mech.release(one.points, charger=ctx.charger, rng=ctx.rng, label="outlier count (Synthetic 1)")
    # shown only because the data are generated: on real data both are private
    truth = outlier_count(one.points, k=3, radius=1.1)
    smooth_sd = (mech.sensitivity.bound(one.points) + mech.step) / mech.alpha
    gs = global_sensitivity_upper(n=one.n, k=3, d=2)
    global_sd = calibrate_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=gs)
    two = synthetic_2(0)
    pick = top_h_subspaces(
        two.points,
        k=3,
        radius=0.13,
        h=2,
        epsilon=4.0,
        candidates=all_subspaces(10, 1),
        charger=ctx.charger,
        rng=ctx.rng,
        label="top-2 subspaces (Synthetic 2)",
    )
    found = ", ".join(f"{{x{s[0]}}}" for s in pick.subspaces)
    return (
        f"Synthetic 1 (50 generated records, k = 3, r = 1.1): noisy outlier count {count.output:.1f}\n"
        f"  (true {truth}; smooth-sensitivity Gaussian at (epsilon, delta) = (1, 1e-7), noise sd\n"
        f"  {smooth_sd:.0f}; the Gaussian at the global bound GS = {gs} would need sd {global_sd:.0f}:\n"
        f"  with 50 records in 2-d the smooth bound does not pay off -- see benchmarks/outliers_reproduce.py).\n"
        f"Synthetic 2 (500 records, outliers planted in x0 and x1): the exponential mechanism\n"
        f"  picks the 1-attribute subspaces {found} (epsilon 4, two draws at 2 each)."
    )


def demo_steps() -> list[DemoStep]:
    return [
        DemoStep(
            title="Outliers (paper 003): smooth-sensitivity count and top-h subspaces", run=_outlier_step, order=30
        )
    ]
