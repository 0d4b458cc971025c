"""Exact privacy loss between two declared output laws (:mod:`privreg.core.laws`).

For output laws ``P`` and ``Q`` on two neighbouring inputs, a mechanism is
``(epsilon, delta)``-DP for that pair exactly when the hockey-stick divergence

    H_{e^eps}(P || Q) = sum_o max(0, P(o) - e^eps Q(o))        (or the integral of densities)

and ``H_{e^eps}(Q || P)`` are both at most ``delta`` (Barthe-Olmedo 2013; Balle, Barthe,
Gaboardi, Hsu, Sato 2020, "Hypothesis testing interpretations and Renyi differential
privacy", AISTATS, Section 2; Balle-Wang 2018, "Improving the Gaussian mechanism",
ICML, Theorem 5). For ``delta = 0`` this is the largest privacy loss
``max_o |log P(o) - log Q(o)|`` being at most ``epsilon``. Over independent coordinates
the privacy loss is the sum of the coordinates' losses, so its distribution is the
convolution of theirs: the privacy-loss-distribution view of Sommer-Meiser-Mohammadi
2019 and Zhu-Dong-Wang 2022 ("Optimal accounting of differential privacy via
characteristic function", AISTATS), here with exact atoms instead of a discretisation.

**Bounds, not estimates.** A discrete law lists a window of outcomes and bounds the mass
outside it (``tail``). :func:`exact_loss` returns an interval ``[delta_low, delta_high]``
that contains the true ``max(H(P||Q), H(Q||P))``: ``delta_low`` counts only listed
outcomes of the larger side, with every unlisted outcome of the other side given its
largest possible mass (``tail``); ``delta_high`` adds the unlisted mass. Likewise
``loss_low`` is a lower bound on the largest privacy loss. A verdict of violation uses the
lower bounds only, so it is never a false alarm of the computation (the declared law is
trusted: :mod:`privreg.testing` checks it against the item's outputs separately).
Losses within ``LOSS_TOLERANCE`` of ``epsilon`` count as ``epsilon`` (float rounding of
declared log-probabilities). Density laws are integrated numerically
(``scipy.integrate.quad``, absolute error about 1e-12) and their largest loss is the
maximum over a grid of 20001 points (a lower bound on the supremum).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import numpy as np

from privreg.core.errors import PrivregValueError
from privreg.core.laws import DensityLaw, DiscreteGaussianLaw, DiscreteLaw, OutputLaw, ProductLaw, aligned_factors

__all__ = ["LOSS_TOLERANCE", "MAX_ATOMS", "ExactLoss", "exact_loss", "privacy_loss_atoms"]

#: Privacy losses within this (absolute) distance of epsilon count as epsilon.
LOSS_TOLERANCE = 1e-9
#: Largest number of atoms of a convolved privacy-loss distribution.
MAX_ATOMS = 4_000_000


@attrs.frozen(kw_only=True)
class ExactLoss:
    """The exact privacy loss between two laws at ``epsilon``: the hockey-stick divergence
    (the larger direction) lies in ``[delta_low, delta_high]``; the largest privacy loss
    (either direction) is at least ``loss_low``."""

    epsilon: float
    delta_low: float
    delta_high: float
    loss_low: float


@attrs.frozen(kw_only=True)
class _Atoms:
    """Privacy loss ``log P(o) - log Q(o)`` of each listed outcome ``o`` of ``P``, with
    ``P(o)``: ``low`` uses the largest possible ``Q(o)`` (so the smallest loss), ``high``
    the smallest; ``unlisted`` is P's unlisted mass."""

    loss_low: np.ndarray
    loss_high: np.ndarray
    mass: np.ndarray
    unlisted: float


def _aligned(p: DiscreteLaw, q: DiscreteLaw) -> tuple[np.ndarray, np.ndarray, bool]:
    """Q's codes in P's frame, and whether the two windows can overlap at all."""
    if p.support.size == 0 or q.support.size == 0:
        return q.support, p.support, False
    shift = q.offset - p.offset  # exact for Python ints
    span = float(np.max(np.abs(p.support.astype(np.float64)))) + float(np.max(np.abs(q.support.astype(np.float64))))
    if abs(shift) > span + 1:
        return q.support, p.support, False
    if isinstance(shift, int) and p.support.dtype.kind in "iu" and q.support.dtype.kind in "iu":
        return q.support.astype(np.int64) + np.int64(shift), p.support.astype(np.int64), True
    return q.support.astype(np.float64) + float(shift), p.support.astype(np.float64), True


def _discrete_atoms(p: DiscreteLaw, q: DiscreteLaw) -> _Atoms:
    q_codes, p_codes, overlap = _aligned(p, q)
    q_log = np.full(p_codes.shape, -np.inf)
    if overlap:
        order = np.argsort(q_codes, kind="stable")
        sorted_q = q_codes[order]
        pos = np.clip(np.searchsorted(sorted_q, p_codes), 0, max(sorted_q.size - 1, 0))
        hit = sorted_q[pos] == p_codes
        q_log[hit] = q.log_pmf[order][pos[hit]]
    listed = np.isfinite(q_log)
    tail_log = math.log(q.tail) if q.tail > 0 else -math.inf
    with np.errstate(invalid="ignore"):
        low = p.log_pmf - np.where(listed, q_log, tail_log)  # an unlisted Q(o) is at most Q's tail
        high = p.log_pmf - np.where(listed, q_log, -np.inf)
    keep = np.isfinite(p.log_pmf)
    low, high, mass = low[keep], high[keep], np.exp(p.log_pmf[keep])
    if p.none_log_pmf > -math.inf:  # "no value": the same outcome in both laws, whatever their offsets
        none = p.none_log_pmf - q.none_log_pmf
        low, high = np.append(low, none), np.append(high, none)
        mass = np.append(mass, math.exp(p.none_log_pmf))
    return _Atoms(loss_low=low, loss_high=high, mass=mass, unlisted=p.tail)


def privacy_loss_atoms(p: DiscreteLaw, q: DiscreteLaw) -> tuple[np.ndarray, np.ndarray]:
    """The privacy loss ``log P(o) - log Q(o)`` (lower bound where ``o`` is unlisted in
    ``Q``) of every listed outcome of ``P``, and ``P(o)``: the atoms of the privacy-loss
    distribution of the pair."""
    atoms = _discrete_atoms(p, q)
    return atoms.loss_low, atoms.mass


def _hockey(loss: np.ndarray, mass: np.ndarray, epsilon: float) -> float:
    """``sum mass * max(0, 1 - e^(eps - loss))``, losses within the tolerance of eps as eps."""
    over = loss > epsilon + LOSS_TOLERANCE
    if not np.any(over):
        return 0.0
    with np.errstate(over="ignore"):
        gain = -np.expm1(epsilon - loss[over])
    return float(np.sum(mass[over] * np.where(np.isfinite(gain), gain, 1.0)))


def _same(p: Any, q: Any) -> bool:
    if isinstance(p, DiscreteLaw) and isinstance(q, DiscreteLaw):
        return (
            p.offset == q.offset
            and p.tail == q.tail
            and p.none_log_pmf == q.none_log_pmf
            and np.array_equal(p.support, q.support)
            and np.array_equal(p.log_pmf, q.log_pmf)
        )
    return p is q


def _merge(loss: np.ndarray, mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Atoms with equal loss (to 12 decimals) merged; rounding moves no loss by more than 5e-13."""
    with np.errstate(over="ignore", invalid="ignore"):
        key = np.round(loss, 12)
    uniq, inverse = np.unique(key, return_inverse=True)
    return uniq, np.bincount(inverse, weights=mass, minlength=uniq.size)


def _convolve(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    loss, mass = np.zeros(1), np.ones(1)
    for raw_loss, raw_mass in parts:
        part_loss, part_mass = _merge(np.nan_to_num(raw_loss, nan=-np.inf), raw_mass)
        if loss.size * part_loss.size > MAX_ATOMS:
            raise PrivregValueError(
                f"the product law's privacy-loss distribution has more than {MAX_ATOMS} atoms; declare "
                f"fewer differing coordinates (neighbours that differ in one coordinate) or no law"
            )
        with np.errstate(invalid="ignore"):
            total = (loss[:, None] + part_loss[None, :]).ravel()
        loss, mass = _merge(np.nan_to_num(total, nan=-np.inf), (mass[:, None] * part_mass[None, :]).ravel())
    return loss, mass


def _one_direction(p: OutputLaw, q: OutputLaw, epsilon: float) -> tuple[float, float, float]:
    """(H lower bound, H upper bound, largest-loss lower bound) of P against Q."""
    if isinstance(p, ProductLaw) and isinstance(q, ProductLaw):
        pairs = aligned_factors(p, q)
        if pairs is None:
            return 1.0, 1.0, math.inf  # different numbers of coordinates: told apart surely
        lows, highs, unlisted, max_loss = [], [], 0.0, 0.0
        for _, fp, fq in pairs:
            if _same(fp, fq):
                continue
            if not (isinstance(fp, DiscreteLaw) and isinstance(fq, DiscreteLaw)):
                h_lo, _, l_lo = _one_direction(fp, fq, epsilon)
                if h_lo > 0 or l_lo > 0:
                    raise PrivregValueError("product laws with differing density factors are not supported")
                continue
            atoms = _discrete_atoms(fp, fq)
            lows.append((atoms.loss_low, atoms.mass))
            highs.append((atoms.loss_high, atoms.mass))
            unlisted += atoms.unlisted
            max_loss += float(np.max(atoms.loss_low)) if atoms.loss_low.size else 0.0
        if not lows:
            return 0.0, 0.0, 0.0
        lo = _hockey(*_convolve(lows), epsilon)
        hi = _hockey(*_convolve(highs), epsilon) + unlisted
        return lo, min(1.0, hi), max_loss
    if isinstance(p, DiscreteLaw) and isinstance(q, DiscreteLaw):
        atoms = _discrete_atoms(p, q)
        lo = _hockey(atoms.loss_low, atoms.mass, epsilon)
        hi = _hockey(atoms.loss_high, atoms.mass, epsilon) + atoms.unlisted
        return lo, min(1.0, hi), float(np.max(atoms.loss_low)) if atoms.loss_low.size else 0.0
    if isinstance(p, DensityLaw) and isinstance(q, DensityLaw):
        return _density_direction(p.distribution, q.distribution, epsilon)
    if isinstance(p, DiscreteGaussianLaw) or isinstance(q, DiscreteGaussianLaw):
        return _gaussian_direction(p, q, epsilon)
    raise PrivregValueError(
        f"the laws on the two neighbours are of different forms ({type(p).__name__}, {type(q).__name__}); "
        f"declare the same form on every input"
    )


def _density_direction(p: Any, q: Any, epsilon: float) -> tuple[float, float, float]:
    from scipy import integrate

    edge = 1e-15
    lo = float(min(p.ppf(edge), q.ppf(edge)))
    hi = float(max(p.ppf(1 - edge), q.ppf(1 - edge)))
    grid = np.linspace(lo, hi, 20001)
    with np.errstate(invalid="ignore", over="ignore"):
        loss = np.asarray(p.logpdf(grid), dtype=np.float64) - np.asarray(q.logpdf(grid), dtype=np.float64)
    loss = np.nan_to_num(loss, nan=-np.inf)
    scale = math.exp(epsilon)

    def gap(x: float) -> float:
        return max(0.0, math.exp(float(p.logpdf(x))) - scale * math.exp(float(q.logpdf(x))))

    points = sorted({float(p.ppf(0.5)), float(q.ppf(0.5))})
    value, error = integrate.quad(gap, lo, hi, points=points, limit=400, epsabs=1e-13)
    outside = 2 * edge
    return max(0.0, value - error), min(1.0, value + error + outside), float(np.max(loss))


#: Discrete Gaussians with at most this many listed outcomes are compared outcome by outcome.
_LISTED_GAUSSIAN = 400_001


def _gaussian_direction(p: Any, q: Any, epsilon: float) -> tuple[float, float, float]:
    """Two discrete Gaussians (a listed :class:`DiscreteLaw` on one side is refused unless
    the other can be listed too). Small scales are listed and compared atom by atom;
    larger ones (both sigma >= 10) analytically: with ``u = z - c_P``, ``d = c_Q - c_P``,
    the loss ``L(u) = -u^2 / 2a + (u - d)^2 / 2b + ln(sigma_Q / sigma_P)`` is a quadratic,
    so ``{L > eps}`` is one integer interval or two rays, found from the roots and
    settled integer by integer next to them; ``H = P(R) - e^eps Q(R)`` with each mass
    within its law's ``mass_error``. A boundary integer whose loss is within 1e-9 of eps
    changes H by at most 2e-9 of its mass (counted in ``delta_high``)."""
    listed: list[Any] = []
    for law in (p, q):
        if isinstance(law, DiscreteGaussianLaw):
            listed.append(law.window(_LISTED_GAUSSIAN) if law.sigma < 1e4 else None)
        else:
            listed.append(law)
    if all(isinstance(x, DiscreteLaw) for x in listed):
        return _one_direction(listed[0], listed[1], epsilon)
    if not (isinstance(p, DiscreteGaussianLaw) and isinstance(q, DiscreteGaussianLaw)):
        raise PrivregValueError(
            "a discrete Gaussian law of a large scale cannot be compared with a listed law; declare "
            "DiscreteGaussianLaw on every input"
        )
    if min(p.sigma, q.sigma) < DiscreteGaussianLaw.MIN_SIGMA:
        raise PrivregValueError("discrete Gaussian laws with sigma < 10 and sigma > 1e4 on two neighbours")
    a, b = float(p.sigma2), float(q.sigma2)
    d = float(q.center - p.center)  # exact integer difference, then one rounding
    k = 0.5 * math.log(b / a)

    def loss(u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        return -(u * u) / (2 * a) + (u - d) ** 2 / (2 * b) + k

    # L(u) - eps = A u^2 + B u + C
    big_a, big_b, big_c = (a - b) / (2 * a * b), -d / b, d * d / (2 * b) + k - epsilon
    roots: list[float] = []
    if big_a == 0.0:
        if big_b != 0.0:
            roots = [-big_c / big_b]
    else:
        disc = big_b * big_b - 4 * big_a * big_c
        if disc >= 0:
            r = math.sqrt(disc)
            roots = sorted(((-big_b - r) / (2 * big_a), (-big_b + r) / (2 * big_a)))
    # intervals [lo, hi] of integers u with L(u) > eps: cut the line at the roots, settle
    # the integers next to each root by evaluating L there
    cuts = sorted({math.floor(x) + j for x in roots for j in (-1, 0, 1, 2)})
    edges = [-math.inf, *cuts, math.inf]
    intervals: list[tuple[float, float]] = []

    def add(lo: float, hi: float) -> None:
        if intervals and intervals[-1][1] == lo - 1:
            intervals[-1] = (intervals[-1][0], hi)
        else:
            intervals.append((lo, hi))

    for left, right in itertools.pairwise(edges):
        if math.isinf(left) or math.isinf(right) or right - left > 1:
            lo = left + 1 if math.isfinite(left) else -math.inf
            hi = right - 1 if math.isfinite(right) else math.inf
            if lo > hi:
                continue
            if math.isfinite(lo) and math.isfinite(hi):
                mid = (lo + hi) / 2
            elif math.isfinite(hi) or math.isfinite(lo):
                mid = hi - 1 if math.isfinite(hi) else lo + 1
            else:
                mid = 0.0  # no root: one sign on the whole line
            if float(loss(np.array([mid]))[0]) > epsilon:  # no root inside: one sign throughout
                add(lo, hi)
        if math.isfinite(right) and float(loss(np.array([right]))[0]) > epsilon:
            add(right, right)
    p_mass = sum(p.mass(lo, hi) for lo, hi in intervals)
    q_mass = sum(q.mass(lo - d, hi - d) for lo, hi in intervals)
    scale = math.exp(epsilon)
    value = p_mass - scale * q_mass
    err = p.mass_error + scale * q.mass_error
    near = 4 * 2e-9 / (math.sqrt(2 * math.pi) * p.sigma)
    # largest loss over the integers within 12 sigma of either centre (a lower bound on the supremum)
    span = 12 * max(p.sigma, q.sigma)
    grid = np.unique(np.round(np.concatenate([np.linspace(-span, span, 2001), np.linspace(d - span, d + span, 2001)])))
    top = float(np.max(loss(grid)))
    return max(0.0, value - err), min(1.0, max(0.0, value) + err + near), top


def exact_loss(p: OutputLaw, q: OutputLaw, *, epsilon: float) -> ExactLoss:
    """The hockey-stick divergence at ``epsilon`` between the laws ``p`` and ``q`` of two
    neighbours, in both directions, as bounds (module docstring): the pair is
    ``(epsilon, delta)``-DP exactly when ``delta >= max(H(P||Q), H(Q||P))``, which lies in
    ``[delta_low, delta_high]``."""
    a = _one_direction(p, q, epsilon)
    b = _one_direction(q, p, epsilon)
    return ExactLoss(epsilon=epsilon, delta_low=max(a[0], b[0]), delta_high=max(a[1], b[1]), loss_low=max(a[2], b[2]))
