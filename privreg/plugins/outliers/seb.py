"""Smallest enclosing ball with certified lower and upper radii.

Welzl's algorithm (1991) with Gaertner's move-to-front heuristic: the ball of a point
set is determined by at most ``d + 1`` support points on its boundary, found
recursively; a point outside the current ball joins the support and is moved to the
front of the list. Written here because ``cyminiball`` (the binding of Gaertner's
Miniball that paper 003 used) does not build against numpy 2.

Floating point can make the support set slightly wrong, so :func:`enclosing_ball`
returns two certified radii instead of one number:

* ``upper`` -- the largest distance from the returned centre to any point: a ball of
  that radius encloses the set, so ``seb <= upper``;
* ``lower`` -- ``sqrt(sum_i w_i ||p_i - c_w||^2)`` for the support's barycentric weights
  ``w`` (clipped to the simplex) and ``c_w = sum_i w_i p_i``. For *any* weights ``w`` in
  the simplex this is at most the radius of every enclosing ball (for the optimal centre
  ``c*``: ``sum w_i ||p_i - c_w||^2 <= sum w_i ||p_i - c*||^2 <= seb^2``), so
  ``lower <= seb``; at the optimum the two coincide.

Callers decide "enclosable in radius r" as ``lower <= r``: never wrong for a set that is
enclosable (safe for upper bounds on the largest coverable subset).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["Ball", "Decision", "enclosing_ball", "fits_in_ball", "fits_in_ball_batch"]

_REL = 1e-12  # relative slack when testing whether a point lies in the current ball
_NO_MARGIN = 1e-12  # "does not fit" needs seb^2 > r^2 (1 + margin): rounding never refuses a fit


@attrs.frozen
class Ball:
    """A ball enclosing a point set: ``centre``, and ``lower <= seb <= upper``."""

    centre: np.ndarray
    lower: float
    upper: float


def _support_ball(pts: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Circumcentre of the support ``pts`` in its affine hull, squared radius, and the
    centre's affine weights over ``pts``."""
    p0 = pts[0]
    if len(pts) == 1:
        return p0.copy(), 0.0, np.ones(1)
    q = pts[1:] - p0
    a = 2.0 * (q @ q.T)
    b = np.einsum("ij,ij->i", q, q)
    try:
        lam = np.linalg.solve(a, b)
        ok = bool(np.all(np.isfinite(lam))) and np.allclose(a @ lam, b, rtol=1e-9, atol=1e-12 * float(b.max()))
    except np.linalg.LinAlgError:
        ok = False
    if not ok:  # degenerate (affinely dependent) support: least squares
        lam = np.linalg.lstsq(a, b, rcond=None)[0]
    c = p0 + lam @ q
    w = np.empty(len(pts))
    w[0], w[1:] = 1.0 - lam.sum(), lam
    return c, float(np.dot(c - p0, c - p0)), w


def _mtf(points: np.ndarray, order: list[int], end: int, support: list[int], dim: int, scale: float):
    """Welzl's recursion with move-to-front over ``order[:end]``, ``support`` on the boundary."""
    if support:
        c, r2, w = _support_ball(points[support])
    else:
        c, r2, w = None, -1.0, np.empty(0)
    sup = list(support)
    if len(support) == dim + 1:
        return c, r2, sup, w
    i = 0
    while i < end:
        if c is not None:  # jump to the first point outside the current ball (vectorised)
            rest = points[order[i:end]] - c
            out = np.flatnonzero(np.einsum("ij,ij->i", rest, rest) > r2 * (1 + _REL) + _REL * scale)
            if out.size == 0:
                break
            i += int(out[0])
        c, r2, sup, w = _mtf(points, order, i, support + [order[i]], dim, scale)
        order.insert(0, order.pop(i))
        i += 1
    return c, r2, sup, w


def enclosing_ball(points: np.ndarray) -> Ball:
    """The smallest enclosing ball of the rows of ``points`` (at least one row), with
    certified radius bounds ``lower <= seb <= upper`` (module docstring). Expected time
    linear in the number of points for fixed dimension (Welzl 1991)."""
    pts = np.asarray(points, dtype=np.float64)
    n, dim = pts.shape
    if n == 1:
        return Ball(pts[0].copy(), 0.0, 0.0)
    scale = float(np.max(np.abs(pts - pts[0]))) ** 2 + 1e-300
    c, _, sup, w = _mtf(pts, list(range(n)), n, [], dim, scale)
    upper = math.sqrt(float(np.max(np.einsum("ij,ij->i", pts - c, pts - c))))
    w = np.clip(w, 0.0, None)
    if w.sum() <= 0:
        return Ball(c, 0.0, upper)
    w = w / w.sum()
    sp = pts[sup]
    cw = w @ sp
    lower = math.sqrt(max(0.0, float(w @ np.einsum("ij,ij->i", sp - cw, sp - cw))))
    return Ball(c, min(lower, upper), upper)


@attrs.frozen
class Decision:
    """Whether a point set fits in a ball of the given radius, with the evidence:
    ``centre`` and ``upper`` (a ball of radius ``upper`` about ``centre`` encloses the set)
    and ``lower`` (no enclosing ball is smaller)."""

    fits: bool
    centre: np.ndarray
    lower: float
    upper: float


def fits_in_ball(points: np.ndarray, radius: float, *, max_iterations: int = 4000) -> Decision:
    """Decide ``seb(points) <= radius``, never answering "no" for a set that fits.

    Frank-Wolfe with away steps on the dual of the smallest-enclosing-ball problem
    (Badoiu-Clarkson 2003; Yildirim 2008, Algorithm 2: linear convergence), stopped as
    soon as the certified bounds decide: ``upper <= radius`` (fits) or ``lower > radius``
    (does not). Every iterate's bounds are certified (module docstring), so solver
    accuracy only affects *when* it decides. If the iteration budget runs out first,
    Welzl's exact algorithm (:func:`enclosing_ball`) decides; if even its bounds straddle
    ``radius`` (a set whose radius equals ``radius`` to ~1e-15), the answer is "fits".
    """
    pts = np.asarray(points, dtype=np.float64)
    n = pts.shape[0]
    if n == 1:
        return Decision(True, pts[0].copy(), 0.0, 0.0)
    a = int(np.argmax(np.einsum("ij,ij->i", pts - pts[0], pts - pts[0])))
    b = int(np.argmax(np.einsum("ij,ij->i", pts - pts[a], pts - pts[a])))
    lam = np.zeros(n)
    lam[a] += 0.5
    lam[b] += 0.5
    r2 = radius * radius
    for _ in range(max_iterations):
        c = lam @ pts
        diff = pts - c
        dist2 = np.einsum("ij,ij->i", diff, diff)
        f = float(lam @ dist2)  # = sum_i lam_i ||p_i - c_lam||^2 <= seb^2 (no cancellation)
        j = int(np.argmax(dist2))
        if dist2[j] <= r2:
            return Decision(True, c, math.sqrt(f), math.sqrt(float(dist2[j])))
        if f > r2 * (1 + _NO_MARGIN):
            return Decision(False, c, math.sqrt(f), math.sqrt(float(dist2[j])))
        if f <= 0.0:  # all weight on coincident points: move toward the farthest point
            step = 0.5
            lam *= 1 - step
            lam[j] += step
            continue
        support = np.flatnonzero(lam > 0)
        kk = int(support[np.argmin(dist2[support])])
        if dist2[j] / f - 1.0 >= 1.0 - dist2[kk] / f:  # toward step
            step = (dist2[j] - f) / (2.0 * dist2[j])
            lam *= 1 - step
            lam[j] += step
        else:  # away step, at most dropping kk from the support
            cap = lam[kk] / (1.0 - lam[kk]) if lam[kk] < 1 else math.inf
            step = min(cap, (f - dist2[kk]) / (2.0 * dist2[kk])) if dist2[kk] > 0 else cap
            lam *= 1 + step
            lam[kk] -= step
            if step == cap:
                lam[kk] = 0.0
            lam = np.clip(lam, 0.0, None)
            lam /= lam.sum()
    ball = enclosing_ball(pts)
    fits = ball.lower <= radius * (1 + _NO_MARGIN)
    return Decision(fits, ball.centre, ball.lower, ball.upper)


def fits_in_ball_batch(
    base: np.ndarray,
    extras: np.ndarray,
    radius: float,
    *,
    start: np.ndarray | None = None,
    max_iterations: int = 2000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every row ``y`` of ``extras``: does ``base + [y]`` fit in a ball of ``radius``?

    The Frank-Wolfe iteration of :func:`fits_in_ball`, run on all the sets at once
    (vectorised over the batch), with the same certified stopping rules; ``start``
    (weights over ``base``, e.g. from an earlier decision) warm-starts it. Sets still
    undecided after ``max_iterations`` go to :func:`fits_in_ball`. Returns
    ``(fits, weights, upper)``: per set the verdict, the final weights over
    ``base + [y]`` and the radius of a ball about ``weights @ points`` that encloses it.
    Never answers "no" for a set that fits.
    """
    base = np.asarray(base, dtype=np.float64)
    extras = np.asarray(extras, dtype=np.float64)
    s, dim = base.shape
    c = extras.shape[0]
    pts = np.concatenate([np.broadcast_to(base, (c, s, dim)), extras[:, None, :]], axis=1)
    lam = np.zeros((c, s + 1))
    if start is None:
        lam[:, :s] = 1.0 / s
    else:
        lam[:, :s] = np.asarray(start, dtype=np.float64) / float(np.sum(start))
    fits = np.zeros(c, dtype=bool)
    upper = np.full(c, math.inf)
    active = np.arange(c)
    r2 = radius * radius
    rows = np.arange(c)
    for _ in range(max_iterations):
        if active.size == 0:
            break
        p, w = pts[active], lam[active]
        centre = np.einsum("ij,ijk->ik", w, p)
        diff = p - centre[:, None, :]
        dist2 = np.einsum("ijk,ijk->ij", diff, diff)
        f = np.einsum("ij,ij->i", w, dist2)
        r = rows[: active.size]
        j = np.argmax(dist2, axis=1)
        dmax = dist2[r, j]
        yes = dmax <= r2
        no = f > r2 * (1 + _NO_MARGIN)
        fits[active[yes]] = True
        upper[active[yes]] = np.sqrt(dmax[yes])
        keep = ~(yes | no)
        active, w, dist2, f, j, dmax = active[keep], w[keep], dist2[keep], f[keep], j[keep], dmax[keep]
        if active.size == 0:
            break
        r = rows[: active.size]
        in_support = w > 0
        kk = np.argmin(np.where(in_support, dist2, np.inf), axis=1)
        dk = dist2[r, kk]
        wk = w[r, kk]
        fpos = np.where(f > 0, f, 1.0)
        toward = (f <= 0) | (dmax / fpos - 1.0 >= 1.0 - dk / fpos)
        step_t = np.where(f > 0, (dmax - f) / (2.0 * np.where(dmax > 0, dmax, 1.0)), 0.5)
        cap = np.where(wk < 1, wk / np.where(wk < 1, 1.0 - wk, 1.0), np.inf)
        step_a = np.minimum(cap, np.where(dk > 0, (f - dk) / (2.0 * np.where(dk > 0, dk, 1.0)), np.inf))
        new = w.copy()
        t_rows = np.flatnonzero(toward)
        new[t_rows] *= (1.0 - step_t[t_rows])[:, None]
        new[t_rows, j[t_rows]] += step_t[t_rows]
        a_rows = np.flatnonzero(~toward)
        new[a_rows] *= (1.0 + step_a[a_rows])[:, None]
        new[a_rows, kk[a_rows]] -= step_a[a_rows]
        new = np.clip(new, 0.0, None)
        lam[active] = new / new.sum(axis=1, keepdims=True)
    for i in active.tolist():  # undecided after the budget: the exact fallback
        dec = fits_in_ball(pts[i], radius)
        fits[i] = dec.fits
        upper[i] = dec.upper
    return fits, lam, upper
