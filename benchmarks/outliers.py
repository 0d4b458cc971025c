"""Time of the outlier count's smooth-sensitivity bound (paper 003, Algorithm 2) against
the number of records N and the dimension d, for every max-ball-cover method, in one run
with the paper's own method.

    python benchmarks/outliers.py [--sizes 20,50,200,1000,5000] [--dims 2,3,7] [--limit 60] [--quick]

Columns (beta = 0.0198: epsilon = 0.5, delta = 0.01 by Theorem 2; k = 3), a time and the
bound ``S(X)`` for each method of :func:`~privreg.plugins.outliers.smooth.smooth_upper_bound`:

* ``exact`` -- exact covers (2-d angular sweep; for d >= 3 branch and bound, tiered: the
  fit-truss bound first, the search only where a term could win, stopped when it meets
  that bound). Exponential worst case for d >= 3.
* ``truss`` -- the fit-truss upper bound on the covers (polynomial, ``O(m D^2)`` per
  structure; equal to ``exact`` for d <= 2). The tight safe bound; ``+x%`` is its excess
  over ``exact`` where both finish.
* ``core`` -- the core bound (degeneracy of the graph of pairs within 2r, plus one;
  near-linear). The fast safe bound, much looser in high dimensions.
* ``projection`` -- the coordinate-plane projection bound (the earlier safe bound).
* ``paper Algorithm 1`` -- the baseline, a faithful implementation of Okada et al. 2015
  (paper 003), Algorithm 1 (labelled; privreg's code): the same Algorithm 2 with every
  cover computed by Algorithm 1 as printed (``O(2^|P|)`` smallest-enclosing-ball calls), stopped after
  ``--budget`` ball calls per cover or ``--limit`` seconds.

Data: inliers from N(0, I_d) and 2% outliers from N(20, 100 I_d) (the paper's synthetic
recipe), radius chosen per dimension so that most inliers are inliers. Checked in the same
run: ``exact`` equals Algorithm 1 wherever both finish, and ``exact <= truss <= core``
(and ``exact <= projection``) wherever they finish. Times (benchmarks/timing.py): wall s
and CPU s / core of each method in each cell, one process on one core (so CPU s equals
CPU s / core); wall time depends on the machine's load (printed on top); the methods
themselves never look at the clock (the wall-clock limit here is the benchmark's, not the
library's). ``--quick``: N in 20, 50; d in 2, 3; a 5 s limit.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
from datetime import UTC, datetime

import numpy as np
import scipy
from timing import header, timed

from privreg.plugins.outliers.cover_algorithm1 import BudgetExhausted
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper
from privreg.plugins.outliers.smooth import smooth_upper_bound, smooth_upper_bound_reference

RADIUS = {1: 0.3, 2: 0.5, 3: 0.6, 5: 0.7, 7: 0.8, 10: 0.9}
BETA = 0.5 / (4 * (1 + np.log(2 / 0.01)))
METHODS = ("exact", "truss", "core", "projection")


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _timed(fn, limit: float):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    clock = timed(cores=1)
    try:
        with clock:
            out = fn()
        return out, clock.timing, ""
    except _Timeout:
        return None, clock.timing, f"> {limit:g} s"
    except BudgetExhausted:
        return None, clock.timing, "budget"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    m = max(1, n // 50)
    return np.vstack([gen.normal(size=(n - m, d)), 20 + 10 * gen.normal(size=(m, d))])


def _cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else what :mod:`platform` knows."""
    fallback = platform.processor() or platform.machine()
    if not os.path.exists("/proc/cpuinfo"):
        return fallback
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), fallback)


def _conditions(argv: list[str]) -> list[str]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    cpu = _cpu_name()
    return [
        f"Command: `python {' '.join(argv)}`",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {cpu}, {os.cpu_count()} cores "
        f"(shared with other jobs), load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at start; "
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}",
        f"beta = {BETA:.4f} (epsilon 0.5, delta 0.01, Theorem 2), k = 3; limit per cell and method as given "
        f"(wall clock); times in seconds, wall and CPU per core.",
        header("", processes=1, cores=1).strip(),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20,50,200,1000,5000")
    ap.add_argument("--dims", default="2,3,7")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds per cell and method before giving up")
    ap.add_argument("--budget", type=int, default=200_000, help="ball calls per cover for Algorithm 1")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--quick", action="store_true", help="N in 20,50; d in 2,3; a 5 s limit")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.dims, args.limit = "20,50", "2,3", 5.0
    sizes = [int(x) for x in args.sizes.split(",")]
    dims = [int(x) for x in args.dims.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    print("\n".join(_conditions(sys.argv)) + "\n")
    head = ["d", "N", "r", "count", "GS_UB"]
    for m in methods:
        head += [f"{m} wall s", f"{m} CPU s / core", f"S {m}"]
    head += ["Algorithm 1 wall s", "Algorithm 1 CPU s / core", "exact vs Alg. 1 (CPU)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for d in dims:
        r = RADIUS.get(d, 0.9)
        for n in sizes:
            x = _data(n, d)
            got = {}
            cells = [
                str(d),
                str(n),
                f"{r:g}",
                str(outlier_count(x, k=3, radius=r)),
                str(global_sensitivity_upper(n=n, k=3, d=d)),
            ]
            for m in methods:
                res, secs, note = _timed(
                    lambda m=m: smooth_upper_bound(x, k=3, radius=r, beta=BETA, cover=m), args.limit
                )
                got[m] = (res, secs)
                value = "-" if res is None else f"{res.value:.2f}"
                if res is not None and m != "exact" and got.get("exact", (None,))[0] is not None:
                    value += f" (+{100 * (res.value / got['exact'][0].value - 1):.0f}%)"
                cells += [note or f"{secs.wall:.3f}", f"{secs.cpu_per_core:.3f}", value]
            ref, t_ref, note_ref = _timed(
                lambda: smooth_upper_bound_reference(x, k=3, radius=r, beta=BETA, budget=args.budget), args.limit
            )
            exact, t_exact = got.get("exact", (None, None))
            if exact is not None and ref is not None and exact.value != ref.value:
                raise AssertionError(f"d={d} N={n}: exact {exact.value} != Algorithm 1 {ref.value}")
            done = [m for m in ("exact", "truss", "core") if got.get(m, (None,))[0] is not None]
            values = [got[m][0].value for m in done]
            if values != sorted(values):
                raise AssertionError(f"d={d} N={n}: expected exact <= truss <= core, got {dict(zip(done, values))}")
            projection = got.get("projection", (None,))[0]
            if exact is not None and projection is not None and projection.value < exact.value:
                raise AssertionError(f"d={d} N={n}: projection below exact")
            if exact is not None:
                ratio = t_ref.cpu_per_core / max(t_exact.cpu_per_core, 1e-9)
                speed = f"{ratio:.1f}x faster" if ref is not None else f">{ratio:.0f}x faster"
            else:
                speed = "-"
            cells += [note_ref or f"{t_ref.wall:.3f}", f"{t_ref.cpu_per_core:.3f}", speed]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
