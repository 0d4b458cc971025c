"""Hook implementations of the ``heavy_hitters`` plugin (entry point ``heavy_hitters``)."""

from __future__ import annotations

from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, RegistryItem
from privreg.plugins.heavy_hitters.citations import SUN24_TRIEHH
from privreg.plugins.heavy_hitters.demo import demo_steps
from privreg.plugins.heavy_hitters.workflow import oov_discovery


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="oov-discovery",
            neighbouring="replace_one",  # shuffled local reports: replacing one user's words
            summary="LDP TrieHH discovery of out-of-vocabulary words on a simulated keyboard population",
            citation=SUN24_TRIEHH,
            factory=oov_discovery,
            example=Example(
                params={
                    "users_per_layer": 1500,
                    "depth": 6,
                    "max_prefixes": 60,
                    "passes": 1,
                    "vocabulary": 4000,
                    "known_words": 200,
                    "show": 5,
                }
            ),
        )
    ]


@hookimpl
def privreg_demo_steps():  # type: ignore[no-untyped-def]
    return demo_steps()
