"""Hook implementations of the ``standard`` plugin (entry point ``standard``)."""

from __future__ import annotations

from pathlib import Path

from privreg.core.hookspecs import hookimpl
import numpy as np

from privreg.core.items import Example, Param, RegistryItem
from privreg.core.sensitivity import GlobalSensitivity, LocalSensitivity, Norm, Sensitivity
from privreg.plugins.standard import citations
from privreg.plugins.standard.demo import demo_steps
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.median import (
    median_local_sensitivity,
    median_smooth_sensitivity,
    smooth_median_mechanism,
)
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.mechanisms.selection import ExponentialMechanism, PermuteAndFlip, ReportNoisyMax
from privreg.mechanisms.subset_selection import SubsetSelection
from privreg.mechanisms.thresholding import GaussianThresholding, LaplaceThresholding
from privreg.mechanisms.unary_encoding import OptimizedUnaryEncoding
from privreg.plugins.standard.workflows import bounded_mean

_EPSILON = Param(name="epsilon", type=float, doc="privacy parameter epsilon", minimum=0,
                 exclusive_minimum=True)
_UTILITY_SENSITIVITY = Param(
    name="sensitivity", type=float, minimum=0, exclusive_minimum=True,
    doc="utility sensitivity Delta_u: the most any one candidate's utility can change between neighbours")
_THRESHOLD_PARAMS = (
    _EPSILON,
    Param(name="delta", type=float, minimum=0, exclusive_minimum=True, maximum=0.5,
          doc="privacy parameter delta (bounds the release of keys held by one user)"),
    Param(name="max_partitions", type=int, minimum=1,
          doc="Delta_0: the most keys one user contributes to (bounded by the caller)"),
)
_MONOTONIC = Param(
    name="monotonic", type=bool, default=False,
    doc="true only if all utilities always move in the same direction between neighbours (eps/Delta scaling)")
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
            kind="mechanism",
            summary="Laplace noise on an integer grid, exact CSPRNG sampler (pure epsilon-DP)",
            citation=citations.DMNS06,
            factory=LaplaceMechanism,
            example=Example(params={"epsilon": 1.0, "sensitivity": 1.0}, neighbours=(0.0, 1.0)),
            params=(
                _EPSILON,
                Param(name="sensitivity", type=float, doc="global L1 sensitivity of the query",
                      minimum=0, exclusive_minimum=True),
                Param(name="dimension", type=int, default=1, minimum=1,
                      doc="number of coordinates of the query (1: a scalar)"),
                Param(name="path", type=str, default="fast", choices=["fast", "exact"],
                      doc="vectorised sampler, or one exact rational draw at a time"),
            ),
        ),
        RegistryItem(
            name="discrete-laplace",
            kind="mechanism",
            summary="two-sided geometric noise on integer queries (counts, histograms), exact CSPRNG sampler",
            citation=citations.GRS09,
            factory=DiscreteLaplaceMechanism,
            example=Example(params={"epsilon": 1.0, "sensitivity": 1}, neighbours=(5, 6)),
            params=(
                _EPSILON,
                Param(name="sensitivity", type=int, minimum=1, doc="integer L1 sensitivity of the query"),
                Param(name="dimension", type=int, default=1, minimum=1,
                      doc="number of coordinates of the query (1: a scalar)"),
                Param(name="path", type=str, default="fast", choices=["fast", "exact"],
                      doc="vectorised sampler, or one exact rational draw at a time"),
            ),
        ),
        RegistryItem(
            name="gaussian",
            kind="mechanism",
            summary="Gaussian mechanism: exact discrete Gaussian on an integer grid, verified (eps, delta)-DP",
            citation=citations.BW18,
            factory=GaussianMechanism,
            example=Example(params={"epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0}, neighbours=(0.0, 1.0)),
            params=(
                _EPSILON,
                Param(name="delta", type=float, minimum=0, exclusive_minimum=True, maximum=0.5,
                      doc="privacy parameter delta, well below 1/n"),
                Param(name="sensitivity", type=float, minimum=0, exclusive_minimum=True,
                      doc="global L2 sensitivity of the query"),
                Param(name="dimension", type=int, default=1, minimum=1,
                      doc="number of coordinates of the query (1: a scalar)"),
                Param(name="calibration", type=str, default="analytic", choices=["analytic", "classic"],
                      doc="analytic (Balle-Wang 2018), or classic sqrt(2 ln(1.25/delta))/eps for eps < 1"),
                Param(name="path", type=str, default="fast", choices=["fast", "exact"],
                      doc="vectorised exact sampler, or one exact rational draw at a time"),
            ),
        ),
        RegistryItem(
            name="laplace-thresholding",
            kind="mechanism",
            summary="partition selection: discrete Laplace on key totals, keys above tau released; (eps, delta)-DP",
            citation=citations.GOPI20,
            factory=LaplaceThresholding,
            example=Example(params={"epsilon": 1.0, "delta": 1e-3, "max_partitions": 2},
                            neighbours=({"a": 10.0}, {"a": 11.0, "b": 1.0})),
            params=_THRESHOLD_PARAMS + (
                Param(name="max_contribution", type=float, default=1.0, minimum=0, exclusive_minimum=True,
                      doc="Delta_inf: the largest weight one user puts on one key"),
            ),
        ),
        RegistryItem(
            name="gaussian-thresholding",
            kind="mechanism",
            summary="DPSU weighted-Gaussian partition selection with paper 002's threshold rho; (eps, delta)-DP",
            citation=citations.GOPI20,
            factory=GaussianThresholding,
            example=Example(params={"epsilon": 1.0, "delta": 1e-3, "max_partitions": 2},
                            neighbours=({"a": 10.0}, {"a": 10.0 + 2 ** -0.5, "b": 2 ** -0.5})),
            params=_THRESHOLD_PARAMS + (
                Param(name="sensitivity", type=float, default=1.0, minimum=0, exclusive_minimum=True,
                      doc="Delta_2: a user with t keys puts weight <= sensitivity/sqrt(t) on each"),
            ),
        ),
        RegistryItem(
            name="exponential",
            kind="mechanism",
            summary="exponential mechanism: pick a candidate w.p. ~ exp(eps u / 2 Delta_u), exact CSPRNG sampler",
            citation=citations.MT07,
            factory=ExponentialMechanism,
            example=_SELECTION_EXAMPLE,
            params=(_EPSILON, _UTILITY_SENSITIVITY, _MONOTONIC),
        ),
        RegistryItem(
            name="report-noisy-max",
            kind="mechanism",
            summary="report-noisy-max with Gumbel or exponential noise, sampled exactly from its output law",
            citation=citations.DING21,
            factory=ReportNoisyMax,
            example=_SELECTION_EXAMPLE,
            params=(
                _EPSILON, _UTILITY_SENSITIVITY, _MONOTONIC,
                Param(name="noise", type=str, default="gumbel", choices=["gumbel", "exponential"],
                      doc="gumbel (= exponential mechanism) or exponential (= permute-and-flip)"),
            ),
        ),
        RegistryItem(
            name="permute-and-flip",
            kind="mechanism",
            summary="permute-and-flip selection: never worse than the exponential mechanism, exact CSPRNG sampler",
            citation=citations.MS20,
            factory=PermuteAndFlip,
            example=_SELECTION_EXAMPLE,
            params=(_EPSILON, _UTILITY_SENSITIVITY, _MONOTONIC),
        ),
        RegistryItem(
            name="discrete-gaussian",
            kind="mechanism",
            summary="discrete Gaussian noise on integer queries (counts, histograms), exact CSPRNG sampler, zCDP",
            citation=citations.CKS20_GAUSSIAN,
            factory=DiscreteGaussianMechanism,
            example=Example(params={"sigma": 2.0, "sensitivity": 1}, neighbours=(5, 6)),
            params=(
                Param(name="sigma", type=float, minimum=0, exclusive_minimum=True,
                      doc="noise standard-deviation parameter, in the query's integer units"),
                Param(name="sensitivity", type=int, default=1, minimum=1,
                      doc="integer L2 sensitivity of the query"),
                Param(name="dimension", type=int, default=1, minimum=1,
                      doc="number of coordinates of the query (1: a scalar)"),
                Param(name="path", type=str, default="fast", choices=["fast", "exact"],
                      doc="vectorised exact sampler, or one exact rational draw at a time"),
            ),
        ),
        RegistryItem(
            name="smooth-gaussian",
            kind="mechanism",
            summary="median of bounded data with Gaussian noise scaled to its smooth sensitivity",
            citation=citations.OKADA15,
            factory=smooth_median_mechanism,
            example=Example(
                params={"epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 1.0},
                # replacing one record moves the median across the whole range
                neighbours=(np.array([0.0] * 5 + [1.0] * 4), np.array([0.0] * 4 + [1.0] * 5)),
            ),
            params=(
                _EPSILON,
                Param(name="delta", type=float, minimum=0, exclusive_minimum=True, maximum=0.5,
                      doc="privacy parameter delta"),
                Param(name="lower", type=float, doc="declared lower bound of the data"),
                Param(name="upper", type=float, doc="declared upper bound of the data"),
                Param(name="step", type=float, default=None, minimum=0, exclusive_minimum=True,
                      doc="public output grid (default (upper - lower) / 2^20)"),
            ),
        ),
    ]


@hookimpl
def privreg_register_randomizers() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="randomized-response",
            kind="randomizer",
            summary="k-ary randomized response with an unbiased frequency estimator (epsilon-LDP)",
            citation=citations.KOV14,
            factory=RandomizedResponse,
            example=Example(params={"epsilon": 1.0, "k": 4}, neighbours=(np.array([0]), np.array([1]))),
            params=(_EPSILON, Param(name="k", type=int, doc="number of categories", minimum=2)),
        ),
        RegistryItem(
            name="subset-selection",
            kind="randomizer",
            summary="report a random d-subset holding the true item w.p. p, unbiased estimator (eps-LDP)",
            citation=citations.SUN24,
            factory=SubsetSelection,
            example=Example(params={"epsilon": 1.0, "s": 8}, neighbours=(np.array([0]), np.array([1]))),
            params=(
                _EPSILON,
                Param(name="s", type=int, minimum=2, maximum=2**62,
                      doc="domain size: items are coded 0..s-1 (reports hold d = ceil(s/(e^eps+1)) items)"),
            ),
        ),
        RegistryItem(
            name="optimized-unary-encoding",
            kind="randomizer",
            summary="one-hot bits kept w.p. 1/2, others set w.p. 1/(e^eps+1), unbiased estimator (eps-LDP)",
            citation=citations.WBLJ17,
            factory=OptimizedUnaryEncoding,
            example=Example(params={"epsilon": 1.0, "k": 8}, neighbours=(np.array([0]), np.array([1]))),
            params=(_EPSILON, Param(name="k", type=int, doc="number of categories (report length in bits)",
                                    minimum=2)),
        ),
    ]


def _global_sensitivity(*, value: float, norm: str) -> GlobalSensitivity:
    """A declared global sensitivity: no two neighbouring datasets move the query by more
    than ``value`` in ``norm``."""
    return GlobalSensitivity(value=value, norm=norm)


_STATISTIC_PARAMS = (
    Param(name="statistic", type=str, default="median", choices=["median"],
          doc="built-in statistic (programmatic users pass their own functions to "
              "LocalSensitivity / SmoothSensitivity)"),
    Param(name="lower", type=float, doc="declared lower bound of the data"),
    Param(name="upper", type=float, doc="declared upper bound of the data"),
)


def _local_sensitivity(*, statistic: str, lower: float, upper: float) -> LocalSensitivity:
    """Local sensitivity of ``statistic`` over replace-one neighbours: the most one record
    can move it at the given dataset. Data-dependent, so mechanisms refuse it; it is the
    input of smooth bounds."""
    return median_local_sensitivity(lower=lower, upper=upper)


def _smooth_sensitivity(*, statistic: str, lower: float, upper: float, beta: float) -> Sensitivity:
    """beta-smooth upper bound on the local sensitivity of ``statistic`` (NRS 2007,
    Definition 2.2): usable with noise admissible for beta."""
    return median_smooth_sensitivity(lower=lower, upper=upper, beta=beta)


@hookimpl
def privreg_register_sensitivities() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="global-sensitivity",
            kind="sensitivity",
            summary="declared global sensitivity of a query in an L0, L1, L2 or Linf norm",
            citation=citations.DMNS06,
            factory=_global_sensitivity,
            example=Example(params={"value": 1.0, "norm": "l2"}),
            params=(
                Param(name="value", type=float, doc="largest change one individual can cause",
                      minimum=0, exclusive_minimum=True),
                Param(name="norm", type=str, doc="norm of the change", default="l1",
                      choices=[n.value for n in Norm]),
            ),
        ),
        RegistryItem(
            name="local-sensitivity",
            kind="sensitivity",
            summary="local sensitivity of a built-in statistic (data-dependent: feeds smooth bounds)",
            citation=citations.NRS07,
            factory=_local_sensitivity,
            example=Example(params={"statistic": "median", "lower": 0.0, "upper": 1.0}),
            params=_STATISTIC_PARAMS,
        ),
        RegistryItem(
            name="smooth-sensitivity",
            kind="sensitivity",
            summary="beta-smooth upper bound max_t e^(-t beta) LS^(t) of a built-in statistic",
            citation=citations.NRS07,
            factory=_smooth_sensitivity,
            example=Example(params={"statistic": "median", "lower": 0.0, "upper": 1.0, "beta": 0.05}),
            params=(*_STATISTIC_PARAMS,
                    Param(name="beta", type=float, minimum=0, exclusive_minimum=True,
                          doc="smoothness parameter beta (e.g. from smooth_gaussian_parameters)")),
        ),
    ]


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="bounded-mean",
            kind="workflow",
            summary="count, sum and mean of a bounded CSV column with Laplace noise",
            citation=citations.DMNS06,
            factory=bounded_mean,
            example=Example(params={"epsilon": 1.0, "column": "hours-per-week", "lower": 1.0,
                                    "upper": 99.0}),
            params=(
                Param(name="input", type=Path, default=None,
                      doc="CSV file with a header row (default: bundled UCI Adult slice)"),
                Param(name="column", type=str, default="age", doc="numeric column to release"),
                Param(name="lower", type=float, default=17.0, doc="declared lower bound of the column"),
                Param(name="upper", type=float, default=90.0, doc="declared upper bound of the column"),
                Param(name="epsilon", type=float, default=1.0, doc="total privacy parameter epsilon",
                      minimum=0, exclusive_minimum=True),
                Param(name="clip", type=bool, default=False,
                      doc="clip values outside [lower, upper] instead of failing"),
            ),
        )
    ]


@hookimpl
def privreg_demo_steps():  # type: ignore[no-untyped-def]
    return demo_steps()
