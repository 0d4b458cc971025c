"""Time of the outlier count's smooth-sensitivity bound (paper 003, Algorithm 2) against
the number of records N and the dimension d, in one run with the paper's own method.

    python benchmarks/outliers.py [--sizes 20,50,200,1000,5000] [--dims 2,3,7] [--limit 60]

Rows (beta = 0.0198: epsilon = 0.5, delta = 0.01 by Theorem 2; k = 3):

* ``privreg exact`` -- :func:`~privreg.plugins.outliers.smooth.smooth_upper_bound`:
  Algorithm 2 with Propositions 1-2, covers by the 2-d angular sweep (d = 2) or the
  branch and bound over distinct points (d >= 3).
* ``privreg projection`` -- the same with the polynomial projection bound (d >= 3 only;
  a larger, still valid bound).
* ``paper Algorithm 1`` -- the baseline: the same Algorithm 2 with every cover computed by
  Algorithm 1 as printed (``O(2^|P|)`` smallest-enclosing-ball calls), stopped after
  ``--budget`` ball calls per cover or ``--limit`` seconds.

Data: inliers from N(0, I_d) and 2% outliers from N(20, 100 I_d) (the paper's synthetic
recipe), radius chosen per dimension so that most inliers are inliers. The exact rows
must agree with the baseline wherever it finishes (checked). Times are wall-clock and
depend on the data: the exact method is exponential in the local density of
low-degree points for d >= 3.
"""

from __future__ import annotations

import argparse
import signal
import time

import numpy as np

from privreg.plugins.outliers.ball_cover import BudgetExhausted
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper
from privreg.plugins.outliers.smooth import smooth_upper_bound, smooth_upper_bound_reference

RADIUS = {1: 0.3, 2: 0.5, 3: 0.6, 5: 0.7, 7: 0.8, 10: 0.9}
BETA = 0.5 / (4 * (1 + np.log(2 / 0.01)))


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout


def _timed(fn, limit: float):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.perf_counter()
    try:
        out = fn()
        return out, time.perf_counter() - start, ""
    except _Timeout:
        return None, limit, f"> {limit:g} s"
    except BudgetExhausted:
        return None, time.perf_counter() - start, "budget"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    m = max(1, n // 50)
    return np.vstack([gen.normal(size=(n - m, d)), 20 + 10 * gen.normal(size=(m, d))])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20,50,200,1000,5000")
    ap.add_argument("--dims", default="2,3,7")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds per cell before giving up")
    ap.add_argument("--budget", type=int, default=200_000, help="ball calls per cover for Algorithm 1")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    dims = [int(x) for x in args.dims.split(",")]
    print(f"beta = {BETA:.4f} (epsilon 0.5, delta 0.01), k = 3, limit {args.limit:g} s per cell\n")
    header = (f"{'d':>2} {'N':>5} {'r':>4} {'count':>5} {'S(X)':>7} {'GS_UB':>5} "
              f"{'exact s':>9} {'projection s':>13} {'S proj':>7} {'Algorithm 1 s':>14} {'speed-up':>9}")
    print(header)
    print("-" * len(header))
    for d in dims:
        r = RADIUS.get(d, 0.9)
        for n in sizes:
            x = _data(n, d)
            ours, t_ours, note_ours = _timed(lambda: smooth_upper_bound(x, k=3, radius=r, beta=BETA), args.limit)
            if d >= 3:
                proj, t_proj, note_proj = _timed(
                    lambda: smooth_upper_bound(x, k=3, radius=r, beta=BETA, cover="projection"), args.limit)
            else:
                proj, t_proj, note_proj = ours, t_ours, "(= exact)"
            ref, t_ref, note_ref = _timed(
                lambda: smooth_upper_bound_reference(x, k=3, radius=r, beta=BETA, budget=args.budget), args.limit)
            if ours is not None and ref is not None and ours.value != ref.value:
                raise AssertionError(f"d={d} N={n}: exact {ours.value} != Algorithm 1 {ref.value}")
            speed = f"{t_ref / t_ours:.1f}x" if ours is not None and ref is not None else (
                f">{t_ref / t_ours:.0f}x" if ours is not None else "-")
            s_val = f"{ours.value:7.2f}" if ours is not None else "      -"
            gs = global_sensitivity_upper(n=n, k=3, d=d)
            print(f"{d:>2} {n:>5} {r:>4} {outlier_count(x, k=3, radius=r):>5} {s_val} {gs:>5} "
                  f"{(note_ours or f'{t_ours:.3f}'):>9} {(note_proj or f'{t_proj:.3f}'):>13} "
                  f"{(f'{proj.value:7.2f}' if proj is not None else '      -')} "
                  f"{(note_ref or f'{t_ref:.3f}'):>14} {speed:>9}", flush=True)


if __name__ == "__main__":
    main()
