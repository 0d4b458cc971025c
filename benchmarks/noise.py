"""Secure noise cost per sample at 1e5, 1e6 and 1e7 samples per call, against numpy's
insecure generator (and OpenDP / PyDP where they install), in one run.

    python benchmarks/noise.py [--sizes 1e5,1e6,1e7] [--work 1e7] [--quick]

Every row is timed the same way (benchmarks/timing.py): for each call size ``n`` the row
is called ``ceil(work / n)`` times (1e7 samples in all by default, so small calls are not
one noisy measurement), and the table shows, per sample,

* **wall ns** -- ``time.perf_counter``: elapsed time, which includes waiting for the CPU;
* **CPU ns** -- CPU time of this process and its children, so other processes on a
  shared machine do not distort it;
* **CPU ns / core** -- CPU ns over the cores the row ran on: one (every sampler here is
  single-threaded), so the same figure; the goals below use it.

privreg's rows go through the real mechanisms where named (snap to the grid, integer noise
from the OS CSPRNG, ``release_many``) or call the samplers alone: Laplace (epsilon 1,
sensitivity 1: discrete Laplace of scale 2048 grid units), discrete Laplace (epsilon 1,
sensitivity 1), Gaussian (epsilon 1, delta 1e-5, sensitivity 1: discrete Gaussian of
sigma ~3820 grid units). numpy's rows are the real peer numpy (version printed in the
row), the textbook insecure baseline (PCG64 and a float sample, the Mironov 2012 leak).
The exact paths (one draw at a time, ~2e4 draws/s) are timed the same way in a second
table at 1e3 and 1e4 samples per call: 1e7 would take minutes. OpenDP and PyDP are
measured where they install (pip install opendp python-dp);
they are not privreg dependencies.

Goals checked at the end: the per-sample CPU cost of each privreg sampler at 1e7 samples
per call is within 1.15x of its cost at 1e6 (the samplers draw in cache-sized chunks),
and the Gaussian mechanism's fast path makes at least 1e6 samples/s per core. The
mechanism rows add the mechanism's own result arrays (first-touch page faults of 80 MB
arrays at 1e7, about 10 ns per sample and array), shown for information.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from timing import Timing, columns, header, timed

from privreg import EventLog
from privreg.core.randomness import SecureRandom
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.noise.fast import discrete_laplace_many
from privreg.noise.gaussian import discrete_gaussian_many

Row = tuple[str, Callable[[int], object]]


def _time(fn: Callable[[int], object], n: int, work: float) -> Timing:
    """Nanoseconds per sample over ``ceil(work / n)`` calls of ``fn(n)``, on one core."""
    calls = max(1, math.ceil(work / n))
    total = Timing(0.0, 0.0)
    for _ in range(calls):
        with timed(cores=1) as t:
            fn(n)
        total += t.timing
    return total.scaled(1e9 / (calls * n))


def _opendp(kind: str) -> Callable[[int], object] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    metric = dp.l1_distance(T=float) if kind == "laplace" else dp.l2_distance(T=float)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), metric
    meas = (dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian)(*space, scale=1.0)
    return lambda n: meas([0.0] * n)


def _pydp(kind: str) -> Callable[[int], object] | None:
    try:
        from pydp.algorithms import numerical_mechanisms as nm
    except ImportError:
        return None
    mech = (
        nm.LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
        if kind == "laplace"
        else nm.GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    )
    return lambda n: [mech.add_noise(0.0) for _ in range(n)]


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _size(n: int) -> str:
    k = round(math.log10(n))
    return f"1e{k}" if 10**k == n else str(n)


def _table(rows: list[Row], sizes: list[int], work: float) -> tuple[list[list[str]], dict[str, list[float]]]:
    head = ["ns per sample, at n samples per call"] + [
        f"n={_size(n)} {label}" for n in sizes for label in columns("ns")
    ]
    lines, cpu = [head], {}
    for name, fn in rows:
        cells, costs = [name], []
        for n in sizes:
            t = _time(fn, n, work)
            cells += t.cells(",.0f")
            costs.append(t.cpu_per_core)
        lines.append(cells)
        cpu[name] = costs
        print("  measured:", name, flush=True)
    return lines, cpu


def _print(lines: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    for r in lines:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1e5,1e6,1e7", help="samples per call, comma-separated")
    ap.add_argument("--work", type=float, default=1e7, help="samples timed per row and size")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (1e4,1e5 per call, 1e5 samples per row)")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.work = "1e4,1e5", 1e5
    sizes = [int(float(x)) for x in args.sizes.split(",")]
    secure = SecureRandom()
    laplace = LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    dlap = DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1)
    gauss = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    sigma = float(gauss.sigma_int)
    fast: list[Row] = [
        (
            "privreg laplace mechanism, fast path (release_many)",
            lambda n: laplace.release_many(0.0, n, charger=EventLog(), rng=secure),
        ),
        (
            "privreg discrete-laplace mechanism, fast path",
            lambda n: dlap.release_many(0, n, charger=EventLog(), rng=secure),
        ),
        (
            "privreg discrete_laplace_many alone, scale 2048",
            lambda n: discrete_laplace_many(laplace.noise_scale, n, secure),
        ),
        (
            f"privreg gaussian mechanism, fast path [sigma {sigma:.0f} grid units]",
            lambda n: gauss.release_many(0.0, n, charger=EventLog(), rng=secure),
        ),
    ]
    for s in (1, 100, 10_000):
        fast.append(
            (
                f"privreg discrete_gaussian_many alone, sigma {s}",
                lambda n, s=s: discrete_gaussian_many(Fraction(s) ** 2, n, secure),
            )
        )
    peer = f"real peer numpy {np.__version__}"
    baselines: list[Row] = [
        (f"{peer} laplace (insecure: PCG64, float leak)", lambda n: np.random.default_rng().laplace(size=n)),
        (f"{peer} normal (insecure: PCG64, float leak)", lambda n: np.random.default_rng().normal(size=n)),
    ]
    for kind in ("laplace", "gaussian"):
        for name, fn in (
            (f"real peer OpenDP {_version('opendp')} make_{kind} on a vector", _opendp(kind)),
            (f"real peer PyDP {_version('python-dp')} {kind.capitalize()}Mechanism.add_noise", _pydp(kind)),
        ):
            if fn is not None:
                baselines.append((name, fn))
    exact: list[Row] = [
        (
            "privreg laplace mechanism, exact path",
            lambda n: LaplaceMechanism(epsilon=1.0, sensitivity=1.0, path="exact").release_many(
                0.0, n, charger=EventLog(), rng=secure
            ),
        ),
        (
            "privreg gaussian mechanism, exact path",
            lambda n: GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, path="exact").release_many(
                0.0, n, charger=EventLog(), rng=secure
            ),
        ),
    ]

    lines, cpu = _table(fast + baselines, sizes, args.work)
    exact_lines, _ = _table(exact, [1000, 10_000], 2e4)
    print()
    print(header("Noise cost per sample (every row single-threaded)", processes=1, cores=1))
    _print(lines)
    print()
    print(header("Exact paths, timed the same way at 1e3 and 1e4 samples per call", processes=1, cores=1))
    _print(exact_lines)
    print()
    if 1_000_000 in sizes and 10_000_000 in sizes:
        i6, i7 = sizes.index(1_000_000), sizes.index(10_000_000)
        for name, _ in fast:
            ratio = cpu[name][i7] / cpu[name][i6]
            sampler = "alone" in name  # the goal is the samplers'; mechanisms add their output arrays
            verdict = ("flat" if ratio <= 1.15 else "GROWS") if sampler else "info"
            print(f"{verdict}: {name}: CPU per core at 1e7 / at 1e6 = {ratio:.2f}")
        print(
            "(info: a mechanism's release_many also allocates its result arrays; at 1e7 they are 80 MB "
            "each, fresh pages from the OS, about 10 ns per sample per array)"
        )
    rate = 1e9 / min(cpu[fast[3][0]])
    print(
        f"Gaussian mechanism fast path {'meets' if rate >= 1e6 else 'MISSES'} the 1e6 samples/s per core "
        f"goal ({rate:,.0f}/s per core, from CPU ns / core at the best call size)."
    )


if __name__ == "__main__":
    main()
