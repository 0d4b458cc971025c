"""Hook implementations of the ``ngrams`` plugin (entry point ``ngrams``)."""

from __future__ import annotations

from privreg.core.hookspecs import hookimpl
from privreg.core.items import Citation, Example, RegistryItem
from privreg.core.workflow import DemoStep
from privreg.plugins.ngrams.workflow import demo_steps, ngrams_workflow

#: Paper 002.
KGKY21 = Citation(
    authors="Kunho Kim, Sivakanth Gopi, Janardhan Kulkarni, Sergey Yekhanin",
    title="Differentially Private n-gram Extraction",
    year=2021,
    venue="NeurIPS",
    where="Algorithms 1-6, Theorem 2.1, Propositions 2.1-2.2, Table 3",
    url="https://arxiv.org/abs/2108.02831",
)


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="ngrams",
            summary="DP n-gram extraction: DPNE (and DPSU baselines) on (user, text) files, local or Spark",
            citation=KGKY21,
            factory=ngrams_workflow,
            example=Example(params={"epsilon": 4.0, "delta": 1e-7, "max_n": 3, "max_keys": 50}),
        ),
    ]


@hookimpl
def privreg_demo_steps() -> list[DemoStep]:
    return demo_steps()
