"""Secure noise throughput against numpy's insecure generator, OpenDP and PyDP, in one run.

    python benchmarks/noise.py [--samples N]

Each row is noise samples per second on one core, for Laplace noise (epsilon 1,
sensitivity 1) and Gaussian noise (epsilon 1, delta 1e-5, sensitivity 1). privreg's rows go through the real mechanism (snap to the grid, integer
noise from the OS CSPRNG, release_many); numpy's row is the textbook insecure baseline
(PCG64 and a float sample, the Mironov 2012 leak). OpenDP and PyDP are measured where they
install (pip install opendp python-dp); they are not privreg dependencies.
Goal for privreg's fast path: at least 1e6 samples/s per core.

Laplace rows are wall-clock rates. Gaussian rows are CPU-time rates (time.process_time of
this process), so other processes on a shared machine do not distort the per-core figure;
extra Gaussian rows time the exact sampler discrete_gaussian_many alone at sigma = 1, 10,
100, 1e4 grid units. The headline is the mechanism's own sigma: GaussianMechanism(epsilon=1,
delta=1e-5, sensitivity=1) adds discrete Gaussian noise of sigma_int ~ 3820 grid units.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np

from privreg import EventLog
from privreg.core.randomness import SecureRandom
from privreg.noise.gaussian import discrete_gaussian_many
from privreg.plugins.standard.gaussian import GaussianMechanism
from privreg.plugins.standard.laplace import LaplaceMechanism


def _rate(fn, count: int, clock=time.perf_counter) -> float:
    start = clock()
    fn()
    return count / (clock() - start)


def _cpu_rate(fn, count: int, repeat: int = 1) -> float:
    """CPU-time rate, best of ``repeat`` runs (the first also warms per-sigma caches)."""
    return max(_rate(fn, count, time.process_time) for _ in range(repeat))


def _opendp(n: int, kind: str, rate=_rate) -> float | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    metric = dp.l1_distance(T=float) if kind == "laplace" else dp.l2_distance(T=float)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), metric
    maker = dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian
    meas = maker(*space, scale=1.0)
    data = [0.0] * n
    return rate(lambda: meas(data), n)


def _pydp(n: int, kind: str, rate=_rate) -> float | None:
    try:
        from pydp.algorithms import numerical_mechanisms as nm
    except ImportError:
        return None
    if kind == "laplace":
        mech = nm.LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    else:
        mech = nm.GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    return rate(lambda: [mech.add_noise(0.0) for _ in range(n)], n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=2_000_000)
    n = ap.parse_args().samples
    rows = [("sampler", "samples/s", "vs privreg fast path")]
    mechanisms = {
        "laplace": (LaplaceMechanism(epsilon=1.0, sensitivity=1.0),
                    LaplaceMechanism(epsilon=1.0, sensitivity=1.0, path="exact"),
                    lambda size: np.random.default_rng().laplace(size=size)),
        "gaussian": (GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0),
                     GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, path="exact"),
                     lambda size: np.random.default_rng().normal(size=size)),
    }
    for kind, (fast, exact, insecure) in mechanisms.items():
        rate = _rate if kind == "laplace" else _cpu_rate  # see the module docstring
        best = {} if kind == "laplace" else {"repeat": 3}  # fast rows only: baselines are slow
        fast_rate = rate(lambda: fast.release_many(0.0, n, charger=EventLog()), n, **best)
        clock = "" if kind == "laplace" else ", CPU time"
        fast_name = f"privreg {kind}, fast path (secure, exact distribution{clock})"
        if kind == "gaussian":
            fast_name += f" [sigma {float(fast.sigma_int):.1f} grid units]"
        results = [
            (fast_name, fast_rate),
            (f"privreg {kind}, exact path (secure, one draw at a time)",
             rate(lambda: exact.release_many(0.0, n // 200, charger=EventLog()), n // 200)),
            (f"numpy {kind} (insecure: PCG64, float leak)", rate(lambda: insecure(n), n, **best)),
            (f"OpenDP make_{kind} on a vector (0.16)", _opendp(n // 10, kind, rate)),
            (f"PyDP {kind.capitalize()}Mechanism.add_noise (1.1)", _pydp(n // 20, kind, rate)),
        ]
        if kind == "gaussian":
            secure = SecureRandom()
            for sigma in (1, 10, 100, 10_000):
                draw = lambda: discrete_gaussian_many(Fraction(sigma) ** 2, n, secure)  # noqa: E731
                results.append((f"privreg discrete_gaussian_many alone, sigma {sigma} (CPU time)",
                                rate(draw, n, **best)))
            gaussian_headline = fast_rate
        for name, rate in results:
            rows.append((name, "not installed" if rate is None else f"{rate:,.0f}",
                         "-" if rate is None else f"{rate / fast_rate:.3g}x"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    verdict = "meets" if gaussian_headline >= 1e6 else "MISSES"
    print(f"Gaussian fast path {verdict} the 1e6 samples/s per core goal (CPU time, default mechanism).")


if __name__ == "__main__":
    main()
