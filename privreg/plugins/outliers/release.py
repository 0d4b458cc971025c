"""Private releases about outliers: the count (smooth-sensitivity Gaussian) and the top-h
subspaces (exponential mechanism, paper 003 Algorithm 3).

Both reuse the standard plugin's mechanisms: the count goes through
:class:`~privreg.mechanisms.smooth_gaussian.SmoothGaussianMechanism`, each
subspace draw through :class:`~privreg.mechanisms.selection.ExponentialMechanism`,
and both charge before any noise is drawn.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.charging import Charger
from privreg.core.errors import PrivregValueError
from privreg.core.mechanism import Release
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.randomness import RandomSource, resolve_random
from privreg.mechanisms import ExponentialMechanism, SmoothGaussianMechanism, epsilon_spent, smooth_gaussian_parameters
from privreg.plugins.outliers.definitions import OutlierCountQuery, as_dataset, check_subspace, outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper
from privreg.plugins.outliers.smooth import OutlierCountSmoothSensitivity

__all__ = [
    "DEFAULT_STEP",
    "outlier_count_mechanism",
    "all_subspaces",
    "subspace_utilities",
    "SubspaceSelection",
    "top_h_subspaces",
    "select_top_h",
    "paper_algorithm3_epsilon",
]

#: Public output grid of released counts (a count is an integer; 2^-10 keeps the grid
#: far below the noise).
DEFAULT_STEP = 2.0**-10
#: The grid's documented range: far below 2^-30 the exact scale's fraction overflows a
#: float, far above 2^20 the released interval is infinite (both only after the charge).
STEP_RANGE = (2.0**-30, 2.0**20)


def outlier_count_mechanism(
    *,
    epsilon: float,
    delta: float,
    k: int,
    radius: float,
    subspace: Sequence[int] | None = None,
    step: float = DEFAULT_STEP,
    cover: str = "exact",
) -> SmoothGaussianMechanism:
    """The number of ``(k, r)``-outliers in ``subspace`` (Definitions 7-8, eq. (14)),
    released with Gaussian noise of scale ``S(X) / alpha`` where ``S`` is the beta-smooth
    bound of Algorithm 2 (paper 003, Theorems 2, 5, 6; Propositions 1-2).

    Guarantee: (epsilon, delta)-DP for neighbours that replace one of ``n`` records
    (``n`` public); charged as ``ApproxDP(epsilon, delta)``. ``release(dataset)`` takes
    the records (rows; attributes as columns); ``step`` is the public output grid;
    ``cover`` picks the max-ball-cover method (``exact``; or ``projection``, polynomial
    and never smaller, for subspaces of 3+ attributes). Distances are in the data's own
    units divided by ``sqrt(|S|)``: scale attributes with public constants, never with
    statistics of the data (that would change the neighbour relation the proof is about).
    """
    step = v.check_real("step", step)
    if not STEP_RANGE[0] <= step <= STEP_RANGE[1]:
        raise PrivregValueError(
            f"step must lie in [2^-30, 2^20] (the output grid of the released count); got {step!r}; "
            f"pass a grid such as {DEFAULT_STEP!r}"
        )
    _, beta = smooth_gaussian_parameters(epsilon=epsilon, delta=delta)
    query = OutlierCountQuery(k=k, radius=radius, subspace=subspace)
    sensitivity = OutlierCountSmoothSensitivity(
        k=query.k, radius=query.radius, beta=beta, subspace=query.subspace, cover=cover
    )
    return SmoothGaussianMechanism(epsilon=epsilon, delta=delta, query=query, sensitivity=sensitivity, step=step)


def all_subspaces(attributes: int, dimension: int) -> list[tuple[int, ...]]:
    """``F_c``: every subspace of ``dimension`` attributes out of ``attributes``
    (paper 003, Section 5.1)."""
    attributes = v.check_int("attributes", attributes, minimum=1)
    dimension = v.check_int("dimension", dimension, minimum=1)
    if dimension > attributes:
        raise PrivregValueError(
            f"dimension = {dimension} exceeds the number of attributes ({attributes}); "
            f"pick a subspace dimension between 1 and {attributes}"
        )
    return list(itertools.combinations(range(attributes), dimension))


def _candidates(data: np.ndarray, candidates: Any) -> list[tuple[int, ...]]:
    if candidates is None:
        raise PrivregValueError("pass candidates (a list of subspaces), e.g. all_subspaces(d, 1)")
    out = [check_subspace(s, data.shape[1]) for s in candidates]
    if not out:
        raise PrivregValueError("candidates is empty; give at least one subspace")
    if len(set(out)) != len(out):
        raise PrivregValueError("candidates repeats a subspace; list each once")
    return out  # type: ignore[return-value]


def subspace_utilities(
    data: Any,
    *,
    k: int,
    radius: float,
    candidates: Sequence[Sequence[int]],
    progress: ProgressCallback | None = None,
) -> np.ndarray:
    """``u_subspace(X, r, k, S) = q_count(X, k, r, S) / GS_UB(|S|)`` (eq. (51)) for every
    candidate: each changes by at most 1 between neighbours (Theorem 7's proof, with our
    valid upper bound of Theorem 4). Data-dependent: never release it. ``progress`` (a
    :data:`~privreg.core.progress.ProgressCallback`) counts the candidates done, phase
    ``"subspace utilities"``."""
    x = as_dataset(data)
    cands = _candidates(x, candidates)
    n = x.shape[0]
    out = np.empty(len(cands), dtype=np.float64)
    with PhaseProgress(
        check_progress("progress", progress), "subspace utilities", total=len(cands), unit="subspace"
    ) as shown:
        for i, s in enumerate(cands):
            out[i] = outlier_count(x, k=k, radius=radius, subspace=s) / global_sensitivity_upper(n=n, k=k, d=len(s))
            shown.advance()
    return out


@attrs.frozen(kw_only=True)
class SubspaceSelection:
    """The released top-h subspaces, in the order drawn, and each draw's release."""

    subspaces: tuple[tuple[int, ...], ...]
    releases: tuple[Release, ...]


def paper_algorithm3_epsilon(epsilon: float) -> float:
    """What paper 003's Algorithm 3 really spends when it claims ``epsilon``: ``h`` draws
    with weights ``exp((epsilon/h) u)`` and ``Delta_u = 1`` are each ``2 epsilon / h``-DP
    (McSherry-Talwar 2007), so ``2 epsilon`` in all (the trap of Theorems 3 and 7)."""
    return epsilon_spent(weight_exponent=v.check_epsilon("epsilon", epsilon), sensitivity=1.0)


def top_h_subspaces(
    data: Any,
    *,
    k: int,
    radius: float,
    h: int,
    epsilon: float,
    candidates: Sequence[Sequence[int]],
    charger: Charger,
    rng: RandomSource | None = None,
    label: str = "top-h subspaces",
    progress: ProgressCallback | None = None,
) -> SubspaceSelection:
    """Paper 003, Algorithm 3: ``h`` distinct subspaces with many outliers, drawn one at a
    time by the exponential mechanism on ``u_subspace`` (eq. (51), ``Delta_u <= 1``).

    Guarantee: ``epsilon``-DP for neighbours that replace one of ``n`` records: each draw
    is :class:`ExponentialMechanism` at ``epsilon / h`` (weights
    ``exp(epsilon u / (2 h))``), charged ``Exponential(epsilon / h)`` before it is drawn;
    basic composition gives ``epsilon``. Algorithm 3 redraws until it gets a subspace not
    yet chosen; that has exactly the distribution of one draw restricted to the
    subspaces not yet chosen, which is what is sampled (no loop over rejected draws).
    The paper's weights ``exp(epsilon u / h)`` would spend ``2 epsilon``
    (:func:`paper_algorithm3_epsilon`). ``progress``: see :func:`subspace_utilities`.
    """
    x = as_dataset(data)
    cands = _candidates(x, candidates)
    h = v.check_int("h", h, minimum=1)
    if h > len(cands):
        raise PrivregValueError(f"h = {h} exceeds the {len(cands)} candidate subspaces; pick h <= {len(cands)}")
    epsilon = v.check_epsilon("epsilon", epsilon)
    utilities = subspace_utilities(x, k=k, radius=radius, candidates=cands, progress=progress)
    picks, releases = select_top_h(utilities, h=h, epsilon=epsilon, charger=charger, rng=rng, label=label)
    return SubspaceSelection(subspaces=tuple(cands[i] for i in picks), releases=releases)


def select_top_h(
    utilities: Any, *, h: int, epsilon: float, charger: Charger, rng: RandomSource | None = None, label: str = "top-h"
) -> tuple[tuple[int, ...], tuple[Release, ...]]:
    """The selection step of Algorithm 3 on a utility vector whose entries each move by
    at most 1 between neighbours: ``h`` distinct indices, each drawn by
    :class:`ExponentialMechanism` at ``epsilon / h`` among those not yet drawn, each
    charged ``Exponential(epsilon / h)`` before it is drawn (``epsilon``-DP in all)."""
    h = v.check_int("h", h, minimum=1)
    epsilon = v.check_epsilon("epsilon", epsilon)
    u = np.asarray(utilities, dtype=np.float64)
    if h > u.size:
        raise PrivregValueError(f"h = {h} exceeds the {u.size} candidates; pick h <= {u.size}")
    rng = resolve_random(rng)
    mechanism = ExponentialMechanism(epsilon=epsilon / h, sensitivity=1.0, neighbouring="replace_one")
    remaining = list(range(u.size))
    picks: list[int] = []
    releases: list[Release] = []
    for draw in range(h):
        out = mechanism.release(u[remaining], charger=charger, rng=rng, label=f"{label} (draw {draw + 1}/{h})")
        picks.append(remaining.pop(int(out.output)))
        releases.append(out)
    return tuple(picks), tuple(releases)
