"""Hook implementations of the ``heavy_hitters`` plugin (entry point ``heavy_hitters``)."""

from __future__ import annotations

from privreg.accountant.shuffle import DEFAULT_SHUFFLE_BOUND, SHUFFLE_BOUNDS
from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, Param, RegistryItem
from privreg.plugins.heavy_hitters.citations import SUN24_TRIEHH
from privreg.plugins.heavy_hitters.demo import demo_steps
from privreg.plugins.heavy_hitters.sampling import SAMPLERS
from privreg.plugins.heavy_hitters.triehh import VOTE_METHODS
from privreg.plugins.heavy_hitters.workflow import oov_discovery

_PARAMS = (
    Param(name="epsilon", type=float, default=10.0, minimum=0, exclusive_minimum=True,
          doc="item-level local epsilon of every Subset Selection report (Theorem 1)"),
    Param(name="delta", type=float, default=1e-10, minimum=0, exclusive_minimum=True, maximum=0.5,
          doc="delta of the central (eps', delta) after shuffling (Theorem 2)"),
    Param(name="users_per_layer", type=int, default=20_000, minimum=1,
          doc="N: fresh users per trie layer (a run uses N * depth * passes users)"),
    Param(name="contribution_bound", type=int, default=2, minimum=1,
          doc="B: reports per user (distinct prefixes, padded with the dummy gamma)"),
    Param(name="max_prefixes", type=int, default=1000, minimum=1,
          doc="eta_max: prefixes kept per layer"),
    Param(name="depth", type=int, default=15, minimum=1, maximum=64,
          doc="D: trie depth (longest word found: D characters)"),
    Param(name="passes", type=int, default=2, minimum=1,
          doc="tries built one after another on disjoint users; earlier words become known"),
    Param(name="sampler", type=str, default="random", choices=SAMPLERS,
          doc="local sampler: greedy (most typed prefixes) or random (uniform distinct prefixes)"),
    Param(name="days", type=int, default=60, minimum=1, doc="T: days of typing per simulated user"),
    Param(name="vocabulary", type=int, default=30_000, minimum=2, maximum=300_000,
          doc="words of the simulated law (the most frequent English words, wordfreq)"),
    Param(name="known_words", type=int, default=1000, minimum=0,
          doc="size of the known vocabulary V (the most frequent words); the rest are targets"),
    Param(name="oov_per_day", type=float, default=0.5, minimum=0, exclusive_minimum=True,
          doc="out-of-vocabulary words a simulated user types per day (Poisson mean)"),
    Param(name="personal_share", type=float, default=0.5, minimum=0, maximum=1,
          doc="share of a user's unknown words that are their own bursty words (typos, names)"),
    Param(name="shuffle_bound", type=str, default=DEFAULT_SHUFFLE_BOUND, choices=SHUFFLE_BOUNDS,
          doc="amplification bound for the central epsilon (fmt21-numerical holds for every randomizer; "
              "fmt23-numerical is refused unless every layer's reports hold one item, d = 1)"),
    Param(name="votes", type=str, default="aggregate", choices=list(VOTE_METHODS),
          doc="aggregate: each layer's vote sum sampled directly (same law up to float rounding); "
              "reports: every report drawn by the exact sampler (slower, O(N B d))"),
    Param(name="show", type=int, default=25, minimum=0, doc="discovered words printed per pass"),
)


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="oov-discovery",
            kind="workflow",
            neighbouring="replace_one",  # shuffled local reports: replacing one user's words
            summary="LDP TrieHH discovery of out-of-vocabulary words on a simulated keyboard population",
            citation=SUN24_TRIEHH,
            factory=oov_discovery,
            example=Example(params={"users_per_layer": 1500, "depth": 6, "max_prefixes": 60, "passes": 1,
                                    "vocabulary": 4000, "known_words": 200, "show": 5}),
            params=_PARAMS,
        )
    ]


@hookimpl
def privreg_demo_steps():  # type: ignore[no-untyped-def]
    return demo_steps()
