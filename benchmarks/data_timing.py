"""How much a release's running time depends on the data: for each registered item whose
time varies with its input, the fastest and slowest of a few inputs of the same public
size, under the same parameters. An observer who can time a release learns which kind of
input it was given, so these factors are stated in each item's guarantees text
(``privreg describe NAME``) and in the README.

    python benchmarks/data_timing.py [--repeat 7] [--only NAME,...] [--quick]

Each row is, for one input, the sample with the median CPU time among ``--repeat``
samples; a sample is the mean time of one release (wall, CPU and CPU per core, from
benchmarks/timing.py; one process, one core), averaged over enough releases to last
about 50 ms, with fresh OS-CSPRNG noise, charged to an EventLog. The factor is slowest /
fastest in CPU per core; "fastest / slowest" is its inverse (the issue quotes 0.4x for
smooth-gaussian in that form). No baseline: the rows compare inputs, not implementations.
``--quick``: 2 samples of about 10 ms each.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import Timing, columns, header, measure

import privreg
from privreg import EventLog


def _time(release: Callable[[], Any], repeat: int, sample: float) -> Timing:
    """The sample of median CPU time among ``repeat`` samples of the mean time of one
    release; each sample averages enough releases to last about ``sample`` seconds
    (samplers draw a random number of trials, so single releases vary a lot)."""
    first, _ = measure(release)  # also warms caches (calibration, tables)
    batch = max(1, int(sample / max(first.cpu, 1e-6)))
    times = []
    for _ in range(repeat):
        t, _ = measure(lambda: [release() for _ in range(batch)])
        times.append(t.scaled(1 / batch))
    return sorted(times, key=lambda t: t.cpu)[len(times) // 2]


def cases() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """item name (a trailing space: a second configuration) -> (parameters, {input label: input})."""
    rng = np.random.default_rng(0)
    n = 1001
    spread = np.sort(rng.uniform(0, 100, n))
    k = 100
    return {
        "smooth-gaussian": (
            {"epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 100.0},
            {
                "uniform on [0, 100]": spread,
                "normal(50, 12) clipped": np.clip(rng.normal(50, 12, n), 0, 100),
                "all equal (50)": np.full(n, 50.0),
                "half at 0, half at 100": np.r_[np.zeros(n // 2 + 1), np.full(n // 2, 100.0)],
            },
        ),
        "smooth-outlier-count": (
            {"epsilon": 1.0, "delta": 1e-6, "k": 3, "radius": 1.0},
            {
                "200 points uniform in [0, 10]^2": rng.uniform(0, 10, (200, 2)),
                "200 points in one cluster": rng.normal(5, 0.2, (200, 2)),
                "200 points, all far apart": np.c_[np.arange(200) * 3.0, np.zeros(200)],
                "200 points on a 1-d line, spacing 0.5": np.c_[np.arange(200) * 0.5, np.zeros(200)],
            },
        ),
        "smooth-outlier-count ": (
            {"epsilon": 1.0, "delta": 1e-6, "k": 3, "radius": 1.0, "subspace": "0,1,2"},
            {
                "60 points uniform in [0, 5]^3": rng.uniform(0, 5, (60, 3)),
                "60 points in one cluster (3-d)": rng.normal(2, 0.2, (60, 3)),
                "60 points, all far apart (3-d)": np.c_[np.arange(60) * 3.0, np.zeros((60, 2))],
            },
        ),
        "exponential": (
            {"epsilon": 1.0, "sensitivity": 1.0},
            {
                f"{k} equal utilities": np.zeros(k),
                f"{k} utilities spread over [0, 10]": np.linspace(0, 10, k),
                f"one leader, {k - 1} at -100": np.r_[0.0, np.full(k - 1, -100.0)],
            },
        ),
        "report-noisy-max": (
            {"epsilon": 1.0, "sensitivity": 1.0, "noise": "exponential"},
            {
                f"{k} equal utilities": np.zeros(k),
                f"{k} utilities spread over [0, 10]": np.linspace(0, 10, k),
                f"one leader, {k - 1} at -100": np.r_[0.0, np.full(k - 1, -100.0)],
            },
        ),
        "permute-and-flip": (
            {"epsilon": 1.0, "sensitivity": 1.0},
            {
                f"{k} equal utilities": np.zeros(k),
                f"{k} utilities spread over [0, 10]": np.linspace(0, 10, k),
                f"one leader, {k - 1} at -100": np.r_[0.0, np.full(k - 1, -100.0)],
            },
        ),
        "laplace": (
            {"epsilon": 1.0, "sensitivity": 1.0, "dimension": 1000},
            {
                "1000 values in [0, 1]": rng.uniform(0, 1, 1000),
                "1000 values near 1e15": rng.uniform(1e15, 2e15, 1000),
                "1000 values near 1e300": rng.uniform(1e300, 2e300, 1000),
            },
        ),
        "gaussian": (
            {"epsilon": 1.0, "delta": 1e-6, "sensitivity": 1.0, "dimension": 1000},
            {
                "1000 values in [0, 1]": rng.uniform(0, 1, 1000),
                "1000 values near 1e15": rng.uniform(1e15, 2e15, 1000),
                "1000 values near 1e300": rng.uniform(1e300, 2e300, 1000),
            },
        ),
        "laplace-thresholding": (
            {"epsilon": 1.0, "delta": 1e-6, "max_partitions": 1},
            {
                "1000 keys, totals in [0, 100]": {i: float(c) for i, c in enumerate(rng.uniform(0, 100, 1000))},
                "1000 keys, totals near 1e15": {i: float(c) for i, c in enumerate(rng.uniform(1e15, 2e15, 1000))},
                "1000 keys, totals near 1e300": {i: float(c) for i, c in enumerate(rng.uniform(1e300, 2e300, 1000))},
            },
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated item names")
    parser.add_argument("--quick", action="store_true", help="2 samples of about 10 ms each")
    args = parser.parse_args()
    repeat, sample = (2, 0.01) if args.quick else (args.repeat, 0.05)
    registry = privreg.default_registry()
    only = {s for s in args.only.split(",") if s}
    print(header("Time of one release by input", processes=1, cores=1))
    print(f"{'item':<22} {'input':<40}" + "".join(f"{c:>24}" for c in columns("s/release")))
    for name, (params, inputs) in cases().items():
        if only and name not in only:
            continue
        mech = registry.get(name.strip()).create(params)
        times = {}
        for label, value in inputs.items():
            t = _time(lambda: mech.release(value, charger=EventLog()), repeat, sample)
            times[label] = t.cpu_per_core
            print(f"{name:<22} {label:<40}" + "".join(f"{c:>24}" for c in t.cells(".5f")))
        lo, hi = min(times.values()), max(times.values())
        print(
            f"{name:<22} {'slowest / fastest (CPU / core)':<40} {hi / lo:>23.1f}x   (fastest / slowest {lo / hi:.2f}x)"
        )


if __name__ == "__main__":
    main()
