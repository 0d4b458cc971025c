"""The reusable mechanisms library: noise-adding mechanisms, local randomizers,
sensitivities and selection, for every plugin to build on.

Nothing here registers itself: the ``standard`` plugin (:mod:`privreg.plugins.standard`)
puts these classes into the registry, and paper plugins import them from here, never from
another plugin. Modules, by what they hold:

* :mod:`~privreg.mechanisms.grid_mechanism`, :mod:`~privreg.mechanisms.noise_params`:
  releases of real-valued queries as integer noise on a grid, and parameter handling;
* :mod:`~privreg.mechanisms.laplace`, :mod:`~privreg.mechanisms.gaussian`,
  :mod:`~privreg.mechanisms.discrete_laplace`, :mod:`~privreg.mechanisms.discrete_gaussian`:
  additive noise;
* :mod:`~privreg.mechanisms.smooth_gaussian`, :mod:`~privreg.mechanisms.median`: noise
  scaled to smooth sensitivity, and the median's sensitivities;
* :mod:`~privreg.mechanisms.selection`: exponential mechanism, report-noisy-max,
  permute-and-flip; :mod:`~privreg.mechanisms.quantile`: quantiles by the exponential
  mechanism over a public grid;
* :mod:`~privreg.mechanisms.thresholding`, :mod:`~privreg.mechanisms.dpsu_threshold`: key
  thresholding (partition selection, DPSU) and DPSU's Gaussian threshold rho;
* :mod:`~privreg.mechanisms.randomized_response`, :mod:`~privreg.mechanisms.unary_encoding`,
  :mod:`~privreg.mechanisms.subset_selection`, :mod:`~privreg.mechanisms.subset_histogram`:
  local randomizers and their aggregate samplers;
* :mod:`~privreg.mechanisms.probabilities`: certified bounds for randomizer probabilities.
"""

from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.dpsu_threshold import dpsu_threshold, dpsu_threshold_ok
from privreg.mechanisms.gaussian import (
    CALIBRATIONS,
    GaussianMechanism,
    as_global_l2,
    classic_gaussian_ratio,
)
from privreg.mechanisms.grid_mechanism import GridMechanism, IntegerNoiseMechanism
from privreg.mechanisms.laplace import LaplaceMechanism, as_global_l1
from privreg.mechanisms.median import (
    MedianQuery,
    MedianSmoothSensitivity,
    median_local_sensitivity,
    median_smooth_sensitivity,
    smooth_median_mechanism,
)
from privreg.mechanisms.noise_params import PATHS
from privreg.mechanisms.quantile import ExponentialQuantile, GridRanks, grid_ranks, quantile_rank_errors
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.mechanisms.selection import (
    NOISE_KINDS,
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    epsilon_spent,
    utility_array,
)
from privreg.mechanisms.smooth_gaussian import (
    SmoothGaussianMechanism,
    privacy_loss_bound,
    smooth_gaussian_parameters,
)
from privreg.mechanisms.subset_histogram import subset_histogram
from privreg.mechanisms.subset_selection import (
    SubsetSelection,
    uniform_chunked,
    uniform_subsets,
)
from privreg.mechanisms.thresholding import (
    GaussianThresholding,
    KeyCounts,
    LaplaceThresholding,
    validate_key_counts,
)
from privreg.mechanisms.unary_encoding import OptimizedUnaryEncoding, bernoulli_dyadic

__all__ = [
    "CALIBRATIONS",
    "NOISE_KINDS",
    "PATHS",
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "ExponentialMechanism",
    "ExponentialQuantile",
    "GaussianMechanism",
    "GaussianThresholding",
    "GridMechanism",
    "GridRanks",
    "IntegerNoiseMechanism",
    "KeyCounts",
    "LaplaceMechanism",
    "LaplaceThresholding",
    "MedianQuery",
    "MedianSmoothSensitivity",
    "OptimizedUnaryEncoding",
    "PermuteAndFlip",
    "RandomizedResponse",
    "ReportNoisyMax",
    "SmoothGaussianMechanism",
    "SubsetSelection",
    "as_global_l1",
    "as_global_l2",
    "bernoulli_dyadic",
    "classic_gaussian_ratio",
    "dpsu_threshold",
    "dpsu_threshold_ok",
    "epsilon_spent",
    "grid_ranks",
    "median_local_sensitivity",
    "median_smooth_sensitivity",
    "privacy_loss_bound",
    "quantile_rank_errors",
    "smooth_gaussian_parameters",
    "smooth_median_mechanism",
    "subset_histogram",
    "uniform_chunked",
    "uniform_subsets",
    "utility_array",
    "validate_key_counts",
]
