"""The ``outliers`` plugin's step of ``privreg demo``: both workflows at their defaults
(bundled Adult slice, generated Synthetic 2; a few seconds)."""

from __future__ import annotations

from privreg.accountant.calibration import calibrate_gaussian_sigma
from privreg.core.workflow import DemoStep, WorkflowContext
from privreg.plugins.outliers.datasets import load_adult_outliers
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.report import count_bound
from privreg.plugins.outliers.workflows import COUNT_COLUMNS, outlier_count_workflow, outlier_subspaces_workflow

__all__ = ["demo_steps", "DEMO_DELTA"]

#: The count's delta in the demo. The demo's budget is replace-one and the count is charged
#: as an add/remove event, which group privacy turns into (2 eps, (1 + e^eps) delta): at
#: eps = 4 that is 5.6e-7 of the budget's delta of 1e-6, next to the other steps' 3e-7.
DEMO_DELTA = 1e-8


def _outlier_step(ctx: WorkflowContext) -> str:
    quiet = WorkflowContext(charger=ctx.charger, rng=ctx.rng)  # no progress line, no files
    # the workflows' defaults, informative on their default data; the count at the demo's delta
    count = outlier_count_workflow(context=quiet, delta=DEMO_DELTA)
    m = count.metrics
    # shown only because the bundled slice is public: on private data it is never shown
    truth = outlier_count(load_adult_outliers(columns=COUNT_COLUMNS).points, k=m["k"], radius=m["radius"])
    gs = count_bound(n=m["records"], k=m["k"], dimension=len(m["columns"]))
    global_sd = calibrate_gaussian_sigma(epsilon=m["epsilon"], delta=DEMO_DELTA, sensitivity=gs)
    subspaces = outlier_subspaces_workflow(context=quiet)
    return (
        f"privreg run outlier-count --delta {DEMO_DELTA:g}\n{count.summary}\n"
        f"  (true count {truth}, shown only because the bundled slice is public. The Gaussian at the\n"
        f"  global bound GS_UB = {gs} would need sd {global_sd:.1f}, below the smooth one's (noise line):\n"
        f"  with so small a GS_UB the smooth bound does not pay off -- benchmarks/outliers_reproduce.py.)\n"
        f"privreg run outlier-subspaces (outliers planted in x0 and x1)\n{subspaces.summary}"
    )


def demo_steps() -> list[DemoStep]:
    return [
        DemoStep(
            title="Outliers (paper 003): smooth-sensitivity count and top-h subspaces", run=_outlier_step, order=30
        )
    ]
