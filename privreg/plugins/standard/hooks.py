"""Hook implementations of the ``standard`` plugin (entry point ``standard``)."""

from __future__ import annotations

from typing import Annotated

import numpy as np

from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, RegistryItem
from privreg.core.params import POSITIVE, Spec, params_of
from privreg.core.sensitivity import (
    GlobalSensitivity,
    LocalSensitivity,
    Norm,
    Sensitivity,
)
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.median import (
    MedianSmoothSensitivity,
    median_local_sensitivity,
    median_smooth_sensitivity,
    smooth_median_mechanism,
)
from privreg.mechanisms.quantile import ExponentialQuantile
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.mechanisms.selection import (
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
)
from privreg.mechanisms.subset_selection import SubsetSelection
from privreg.mechanisms.thresholding import (
    GaussianThresholding,
    LaplaceThresholding,
)
from privreg.mechanisms.unary_encoding import OptimizedUnaryEncoding
from privreg.plugins.standard import citations
from privreg.plugins.standard.demo import demo_steps
from privreg.plugins.standard.workflows import bounded_mean

# candidate 0 gains Delta_u while the others lose Delta_u: the worst case for selection
_SELECTION_EXAMPLE = Example(
    params={"epsilon": 1.0, "sensitivity": 1.0},
    neighbours=(np.array([0.0, 5.0, 5.0]), np.array([1.0, 4.0, 4.0])),
)


@hookimpl
def privreg_register_mechanisms() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="laplace",
            summary="Laplace noise on an integer grid, exact CSPRNG sampler (pure epsilon-DP)",
            citation=citations.DMNS06,
            factory=LaplaceMechanism,
            example=Example(params={"epsilon": 1.0, "sensitivity": 1.0}, neighbours=(0.0, 1.0)),
        ),
        RegistryItem(
            name="discrete-laplace",
            summary="two-sided geometric noise on integer queries (counts, histograms), exact CSPRNG sampler",
            citation=citations.GRS09,
            factory=DiscreteLaplaceMechanism,
            example=Example(params={"epsilon": 1.0, "sensitivity": 1}, neighbours=(5, 6)),
        ),
        RegistryItem(
            name="gaussian",
            summary="Gaussian mechanism: exact discrete Gaussian on an integer grid, verified (eps, delta)-DP",
            citation=citations.BW18,
            factory=GaussianMechanism,
            example=Example(params={"epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0}, neighbours=(0.0, 1.0)),
        ),
        RegistryItem(
            name="laplace-thresholding",
            summary="partition selection: discrete Laplace on key totals, keys above tau released; (eps, delta)-DP",
            citation=citations.GOPI20,
            factory=LaplaceThresholding,
            example=Example(
                params={"epsilon": 1.0, "delta": 1e-3, "max_partitions": 2},
                neighbours=({"a": 10.0}, {"a": 11.0, "b": 1.0}),
            ),
        ),
        RegistryItem(
            name="gaussian-thresholding",
            summary="DPSU weighted-Gaussian partition selection with paper 002's threshold rho; (eps, delta)-DP",
            citation=citations.GOPI20,
            factory=GaussianThresholding,
            example=Example(
                params={"epsilon": 1.0, "delta": 1e-3, "max_partitions": 2},
                neighbours=({"a": 10.0}, {"a": 10.0 + 2**-0.5, "b": 2**-0.5}),
            ),
        ),
        RegistryItem(
            name="exponential",
            summary="exponential mechanism: pick a candidate w.p. ~ exp(eps u / 2 Delta_u), exact CSPRNG sampler",
            citation=citations.MT07,
            factory=ExponentialMechanism,
            example=_SELECTION_EXAMPLE,
        ),
        RegistryItem(
            name="report-noisy-max",
            summary="report-noisy-max with Gumbel or exponential noise, sampled exactly from its output law",
            citation=citations.DING21,
            factory=ReportNoisyMax,
            example=_SELECTION_EXAMPLE,
        ),
        RegistryItem(
            name="permute-and-flip",
            summary="permute-and-flip selection: never worse than the exponential mechanism, exact CSPRNG sampler",
            citation=citations.MS20,
            factory=PermuteAndFlip,
            example=_SELECTION_EXAMPLE,
        ),
        RegistryItem(
            name="discrete-gaussian",
            summary="discrete Gaussian noise on integer queries (counts, histograms), exact CSPRNG sampler, zCDP",
            citation=citations.CKS20_GAUSSIAN,
            factory=DiscreteGaussianMechanism,
            example=Example(params={"sigma": 2.0, "sensitivity": 1}, neighbours=(5, 6)),
        ),
        RegistryItem(
            name="exponential-quantile",
            summary="quantile of bounded data: exponential mechanism over a public grid, exact sampler (pure eps-DP)",
            citation=citations.SMITH11,
            factory=ExponentialQuantile,
            example=Example(
                params={"epsilon": 1.0, "quantile": 0.5, "lower": 0.0, "upper": 1.0, "points": 3},
                # replacing one record moves every rank interval by one: the utility's full sensitivity
                neighbours=(np.array([0.0] * 6 + [1.0] * 3), np.array([0.0] * 5 + [1.0] * 4)),
            ),
        ),
        RegistryItem(
            name="smooth-gaussian",
            summary="median of bounded data with Gaussian noise scaled to its smooth sensitivity",
            citation=citations.OKADA15,
            factory=smooth_median_mechanism,
            neighbouring="replace_one",  # a smooth bound is over datasets of one size n
            example=Example(
                params={"epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 1.0},
                # replacing one record moves the median across the whole range
                neighbours=(np.array([0.0] * 5 + [1.0] * 4), np.array([0.0] * 4 + [1.0] * 5)),
            ),
        ),
    ]


@hookimpl
def privreg_register_randomizers() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="randomized-response",
            neighbouring="replace_one",  # charges LocalDP: an eps0-LDP bound compares two inputs of one user
            summary="k-ary randomized response with an unbiased frequency estimator (epsilon-LDP)",
            citation=citations.KOV14,
            factory=RandomizedResponse,
            example=Example(params={"epsilon": 1.0, "k": 4}, neighbours=(np.array([0]), np.array([1]))),
        ),
        RegistryItem(
            name="subset-selection",
            neighbouring="replace_one",  # charges LocalDP: an eps0-LDP bound compares two inputs of one user
            summary="report a random d-subset holding the true item w.p. p, unbiased estimator (eps-LDP)",
            citation=citations.SUN24,
            factory=SubsetSelection,
            example=Example(params={"epsilon": 1.0, "s": 8}, neighbours=(np.array([0]), np.array([1]))),
        ),
        RegistryItem(
            name="optimized-unary-encoding",
            neighbouring="replace_one",  # charges LocalDP: an eps0-LDP bound compares two inputs of one user
            summary="one-hot bits kept w.p. 1/2, others set w.p. 1/(e^eps+1), unbiased estimator (eps-LDP)",
            citation=citations.WBLJ17,
            factory=OptimizedUnaryEncoding,
            example=Example(params={"epsilon": 1.0, "k": 8}, neighbours=(np.array([0]), np.array([1]))),
        ),
    ]


def _global_sensitivity(
    *,
    value: Annotated[float, Spec(doc="largest change one individual can cause", **POSITIVE)],
    norm: Annotated[str, Spec(doc="norm of the change", choices=[n.value for n in Norm])] = "l1",
) -> GlobalSensitivity:
    """A declared global sensitivity: no two neighbouring datasets move the query by more
    than ``value`` in ``norm``."""
    return GlobalSensitivity(value=value, norm=norm)


# programmatic users pass their own functions to LocalSensitivity / SmoothSensitivity
_Statistic = Annotated[
    str,
    Spec(
        doc="built-in statistic (programmatic users pass their own functions to LocalSensitivity / SmoothSensitivity)",
        choices=["median"],
    ),
]
_Lower = Annotated[float, params_of(MedianSmoothSensitivity, "lower")]
_Upper = Annotated[float, params_of(MedianSmoothSensitivity, "upper")]


def _local_sensitivity(*, statistic: _Statistic = "median", lower: _Lower, upper: _Upper) -> LocalSensitivity:
    """Local sensitivity of ``statistic`` over replace-one neighbours: the most one record
    can move it at the given dataset. Data-dependent, so mechanisms refuse it; it is the
    input of smooth bounds."""
    return median_local_sensitivity(lower=lower, upper=upper)


def _smooth_sensitivity(
    *,
    statistic: _Statistic = "median",
    lower: _Lower,
    upper: _Upper,
    beta: Annotated[float, params_of(MedianSmoothSensitivity, "beta")],
) -> Sensitivity:
    """beta-smooth upper bound on the local sensitivity of ``statistic`` (NRS 2007,
    Definition 2.2): usable with noise admissible for beta."""
    return median_smooth_sensitivity(lower=lower, upper=upper, beta=beta)


@hookimpl
def privreg_register_sensitivities() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="global-sensitivity",
            summary="declared global sensitivity of a query in an L0, L1, L2 or Linf norm",
            citation=citations.DMNS06,
            factory=_global_sensitivity,
            example=Example(params={"value": 1.0, "norm": "l2"}),
        ),
        RegistryItem(
            name="local-sensitivity",
            summary="local sensitivity of a built-in statistic (data-dependent: feeds smooth bounds)",
            citation=citations.NRS07,
            factory=_local_sensitivity,
            example=Example(params={"statistic": "median", "lower": 0.0, "upper": 1.0}),
        ),
        RegistryItem(
            name="smooth-sensitivity",
            summary="beta-smooth upper bound max_t e^(-t beta) LS^(t) of a built-in statistic",
            citation=citations.NRS07,
            factory=_smooth_sensitivity,
            example=Example(params={"statistic": "median", "lower": 0.0, "upper": 1.0, "beta": 0.05}),
        ),
    ]


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="bounded-mean",
            summary="count, sum and mean of a bounded column (CSV, JSONL or Parquet) with Laplace noise",
            citation=citations.DMNS06,
            factory=bounded_mean,
            example=Example(params={"epsilon": 1.0, "column": "hours-per-week", "lower": 1.0, "upper": 99.0}),
        )
    ]


@hookimpl
def privreg_demo_steps():  # type: ignore[no-untyped-def]
    return demo_steps()
