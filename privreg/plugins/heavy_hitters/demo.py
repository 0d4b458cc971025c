"""The ``heavy_hitters`` plugin's step of ``privreg demo``: a small LDP TrieHH run."""

from __future__ import annotations

from privreg.accountant.shuffle import DEFAULT_SHUFFLE_BOUND
from privreg.core.events import LocalDP, Shuffled
from privreg.core.workflow import DemoStep, WorkflowContext
from privreg.plugins.heavy_hitters.privacy import central_epsilon
from privreg.plugins.heavy_hitters.workflow import oov_discovery

__all__ = ["demo_steps", "DEMO_DELTA"]

#: The delta the demo's central epsilon is stated at: the ``event_delta`` at which the demo's
#: budget session must account shuffled events (a tenth of its delta of 1e-6, leaving the rest
#: to other steps' approximate-DP events).
DEMO_DELTA = 1e-7


def _triehh_step(ctx: WorkflowContext) -> str:
    quiet = WorkflowContext(charger=ctx.charger, rng=ctx.rng)  # no progress bar, no files
    result = oov_discovery(
        context=quiet,
        epsilon=5.0,
        delta=DEMO_DELTA,
        users_per_layer=10_000,
        contribution_bound=2,
        max_prefixes=100,
        depth=10,
        passes=1,
        sampler="random",
        days=60,
        vocabulary=10_000,
        known_words=300,
        oov_per_day=0.5,
        personal_share=0.5,
        shuffle_bound=DEFAULT_SHUFFLE_BOUND,
        show=12,
    )
    m = result.metrics
    paper = central_epsilon(
        Shuffled(event=LocalDP(epsilon0=10.0, randomizer="subset-selection"), num_reports=500_000 * 60), 1e-10
    )
    words = result.summary.splitlines()[1].split(": ", 2)[-1]
    return (
        f"{m['users']} simulated users (wordfreq English, the 300 most frequent words known) each send "
        f"2 Subset Selection reports (eps0 = 5, item level) in one of 10 trie layers.\n"
        f"Discovered {m['heavy_hitters']} out-of-vocabulary words: {words}\n"
        f"Coverage of out-of-vocabulary typing: {100 * m['coverage']:.1f}%. After shuffling the "
        f"{m['num_reports_per_layer']} reports of a layer: central eps' = {m['central_epsilon']:.3f} at "
        f"delta = {DEMO_DELTA:g} (one charge for the run).\n"
        f"The paper's en-US run (eps0 = 10, N*B = 5e5 * 60 reports) gets eps' = {paper:.4f} at "
        f"delta = 1e-10 from the same accountant (paper: 0.315)."
    )


def demo_steps() -> list[DemoStep]:
    # last: once a session holds a Shuffled event only the (eps, delta) accountants can
    # account it, so the PLD/RDP accountants stop for the steps that follow
    return [
        DemoStep(title="Federated OOV discovery: LDP TrieHH with shuffling (paper 001)", run=_triehh_step, order=90)
    ]
