"""Paper 003 (Okada, Fukuchi, Kakizaki, Sakuma 2015): differentially private analysis of
distance-based outliers -- the outlier count with smooth-sensitivity Gaussian noise and
top-h subspace discovery with the exponential mechanism.

Modules: :mod:`.definitions` (Definitions 7-8), :mod:`.kissing` (Theorem 4, eq. (18)),
:mod:`.seb` and :mod:`.ball_cover` (Algorithm 1 and faster exact methods),
:mod:`.smooth` (Theorems 5-6, Propositions 1-2, Algorithm 2), :mod:`.release`
(Theorem 2 via the standard plugin's smooth Gaussian; Algorithm 3), :mod:`.datasets`,
:mod:`.workflows`, :mod:`.hooks`.
"""

from privreg.plugins.outliers.ball_cover import max_cover
from privreg.plugins.outliers.definitions import OutlierCountQuery, outlier_count, outlier_mask
from privreg.plugins.outliers.kissing import global_sensitivity_lower, global_sensitivity_upper
from privreg.plugins.outliers.release import outlier_count_mechanism, top_h_subspaces
from privreg.plugins.outliers.smooth import OutlierCountSmoothSensitivity, smooth_upper_bound

__all__ = [
    "OutlierCountQuery",
    "OutlierCountSmoothSensitivity",
    "global_sensitivity_lower",
    "global_sensitivity_upper",
    "max_cover",
    "outlier_count",
    "outlier_count_mechanism",
    "outlier_mask",
    "smooth_upper_bound",
    "top_h_subspaces",
]
