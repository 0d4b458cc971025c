"""The template plugin's hook implementations."""

from __future__ import annotations

from typing import Annotated

import numpy as np

import privreg
from privreg import POSITIVE, Citation, Example, RegistryItem, Spec, WorkflowContext, WorkflowResult
from privreg.core.accounting import AccountingHandler
from privreg.datasets import load_adult
from privreg_template.event import GeometricHistogram, exact_rho
from privreg_template.mechanism import NoisyHistogram

CITATION = Citation(
    authors="A. Ghosh, T. Roughgarden, M. Sundararajan",
    title="Universally Utility-Maximizing Privacy Mechanisms",
    year=2009,
    venue="STOC",
    where="the geometric mechanism",
)


def histogram_workflow(
    *,
    context: WorkflowContext,
    column: Annotated[str, Spec(doc="categorical Adult column")] = "race",
    epsilon: Annotated[float, Spec(doc="privacy parameter epsilon", **POSITIVE)] = 1.0,
) -> WorkflowResult:
    """Noisy histogram of a categorical column of the bundled UCI Adult slice.

    Guarantee: ``epsilon``-DP (one release of :class:`NoisyHistogram`); the category
    list is public (Adult's documented categories), only the counts are private.
    """
    data = load_adult()
    if column not in data or data[column].dtype.kind != "U":
        raise privreg.PrivregValueError(f"column {column!r} is not a categorical Adult column")
    names, codes = np.unique(data[column], return_inverse=True)
    counts = np.bincount(codes, minlength=names.size)
    release = NoisyHistogram(epsilon=epsilon).release(
        counts, charger=context.charger, rng=context.rng, label=f"histogram({column})"
    )
    lines = [f"{n:<24} {int(c):6d}" for n, c in zip(names, release.output)]
    return WorkflowResult(
        summary="\n".join(lines),
        metrics={str(n): int(c) for n, c in zip(names, release.output)},
    )


@privreg.hookimpl
def privreg_register_mechanisms():
    return [
        RegistryItem(
            name="template-histogram-mechanism",
            summary="integer histogram with two-sided geometric noise (template plugin)",
            citation=CITATION,
            factory=NoisyHistogram,  # its parameters come from its param_field()s
            # neighbouring histograms: one person added to bin 0
            example=Example(params={"epsilon": 1.0}, neighbours=(np.array([3, 5]), np.array([4, 5]))),
        )
    ]


@privreg.hookimpl
def privreg_register_workflows():
    return [
        RegistryItem(
            name="template-histogram",
            summary="noisy histogram of a categorical UCI Adult column (template plugin)",
            citation=CITATION,
            factory=histogram_workflow,  # its parameters come from its signature
            example=Example(params={"column": "sex", "epsilon": 1.0}),
        )
    ]


@privreg.hookimpl
def privreg_register_event_types():
    # so that ledgers holding the template's releases can be decoded
    return [GeometricHistogram]


@privreg.hookimpl
def privreg_register_accountants():
    # zCDP has a tighter bound than the lowered PureDP; every other accountant uses lower()
    return [AccountingHandler(accountant="zcdp", event_type=GeometricHistogram, handler=exact_rho)]
