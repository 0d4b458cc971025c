"""Secure noise per release and per sample, privreg against numpy and the DP peers (OpenDP,
PyDP, diffprivlib, where installed: ``pip install -e '.[bench]'``), in one run.

    python benchmarks/noise.py [--rounds 3] [--quick] [--out FILE]

Rows are call sizes: **x1** is one scalar release per call (privreg's ``release``, numpy's
scalar draw, a peer's scalar measurement), **1e3 / 1e5 / 1e6** are that many samples per
call (privreg's ``release_many``, numpy's ``size=n``, a peer's vector measurement, or its
per-sample loop where it has no vector call). For every mechanism kind -- Laplace, discrete
Laplace, Gaussian, discrete Gaussian, exponential / report-noisy-max (10 candidates) and
k-RR (k = 10) -- the table shows, per system and call size, CPU ns per sample (this process
and its children, so other processes on a shared machine do not distort it; every row is
single-threaded, so it is also the per-core cost), wall ns per sample (which includes
waiting for the CPU), and **CPU x numpy**: the CPU ratio to numpy's row of the same kind
and size, measured in the same run. The targets of issue #32 are such CPU ratios.

Before each cell the garbage collector collects and freezes what exists (``gc.freeze``):
a full collection over earlier cells' objects (privreg's ``EventLog`` holds every charge
of the run) would otherwise land on whichever cell runs (about 50 ms, up to 10 us per x1
release); each cell's own garbage is collected as usual.

Systems are interleaved: each of ``--rounds`` rounds times every (kind, size, system) once,
in turn, and a cell is the median over rounds, so a burst of load hits all systems
alike. To keep a run to minutes on a loaded machine, a cell whose estimated CPU (its cost
per sample at the previous size times ``n``) exceeds ``--once`` seconds is timed in the
first round only (marked ``*``), and one beyond ``--skip`` seconds is not timed (``skip``;
the peers' per-sample loops and OpenDP's list conversion are flat in ``n``, so the 1e5
column shows their cost).

What is compared: privreg's rows are the real mechanisms with their privacy charge (an
``EventLog``), OS CSPRNG noise, exact sampling on an integer grid. numpy's rows are the
textbook *insecure* baseline (PCG64, floating-point samples: the Mironov 2012 leak; for the
discrete kinds, a difference of geometrics and a rounded normal). OpenDP (its Rust
samplers, exact and secure), PyDP (Google's C++ library) and diffprivlib (IBM, floats) are
measured through their public APIs at comparable parameters (epsilon 1, sensitivity 1,
delta 1e-5; discrete Gaussian sigma 10; noisy max scale 2 / sensitivity 1).
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import math
import os
import statistics
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np
from timing import START_LOAD, Timing, header, timed

from privreg import EventLog
from privreg.core.randomness import SecureRandom
from privreg.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from privreg.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from privreg.mechanisms.gaussian import GaussianMechanism
from privreg.mechanisms.laplace import LaplaceMechanism
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.mechanisms.selection import ExponentialMechanism, ReportNoisyMax

Fn = Callable[[int], object]  # fn(n): n samples (n = 1: one scalar release)
SIZES = (1, 1_000, 100_000, 1_000_000)
KINDS = ("laplace", "discrete laplace", "gaussian", "discrete gaussian", "exponential / noisy max", "k-RR (k=10)")
K = 10  # candidates of the selection rows, categories of k-RR
SIGMA_DG = 10.0


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _privreg(secure: SecureRandom) -> dict[str, Fn]:
    log = EventLog()
    lap = LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    dlap = DiscreteLaplaceMechanism(epsilon=1.0, sensitivity=1)
    gauss = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    dg = DiscreteGaussianMechanism(sigma=SIGMA_DG)
    expo = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    rnm = ReportNoisyMax(epsilon=1.0, sensitivity=1.0)
    rr = RandomizedResponse(epsilon=1.0, k=K)
    utilities = [float(i % 3) for i in range(K)]

    def mech(m: object, x: object) -> Fn:
        def run(n: int) -> object:
            if n == 1:
                return m.release(x, charger=log, rng=secure)  # type: ignore[attr-defined]
            return m.release_many(x, n, charger=log, rng=secure)  # type: ignore[attr-defined]

        return run

    inputs = {n: np.full(n, 3, dtype=np.int64) for n in SIZES}
    return {
        "laplace": mech(lap, 0.5),
        "discrete laplace": mech(dlap, 5),
        "gaussian": mech(gauss, 0.5),
        "discrete gaussian": mech(dg, 5),
        "exponential / noisy max": mech(expo, utilities),
        "exponential / noisy max (report-noisy-max)": mech(rnm, utilities),
        "k-RR (k=10)": lambda n: rr.randomize(inputs[n] if n > 1 else [3], charger=log, rng=secure),
    }


def _numpy() -> dict[str, Fn]:
    g = np.random.default_rng()
    p = 1 - math.exp(-1.0)  # discrete Laplace of epsilon 1: difference of two geometrics
    utilities = np.array([float(i % 3) for i in range(K)])

    def pick(n: int) -> object:
        if n == 1:
            return int(np.argmax(utilities + g.gumbel(scale=2.0, size=K)))
        return np.argmax(utilities + g.gumbel(scale=2.0, size=(n, K)), axis=1)

    def krr(n: int) -> object:
        keep_p = math.e / (math.e + K - 1)
        if n == 1:
            return 3 if g.random() < keep_p else int(g.integers(K - 1))
        keep = g.random(n) < keep_p
        return np.where(keep, 3, g.integers(K - 1, size=n))

    return {
        "laplace": lambda n: g.laplace() if n == 1 else g.laplace(size=n),
        "discrete laplace": lambda n: (
            int(g.geometric(p)) - int(g.geometric(p)) if n == 1 else g.geometric(p, n) - g.geometric(p, n)
        ),
        "gaussian": lambda n: g.normal() if n == 1 else g.normal(size=n),
        "discrete gaussian": lambda n: (
            round(g.normal(scale=SIGMA_DG)) if n == 1 else np.rint(g.normal(scale=SIGMA_DG, size=n))
        ),
        "exponential / noisy max": pick,
        "k-RR (k=10)": krr,
    }


def _opendp() -> dict[str, Fn]:
    try:
        import opendp.prelude as dp
    except ImportError:
        return {}
    dp.enable_features("contrib")
    out: dict[str, Fn] = {}
    for kind, make, t in (
        ("laplace", dp.m.make_laplace, float),
        ("discrete laplace", dp.m.make_laplace, int),
        ("gaussian", dp.m.make_gaussian, float),
        ("discrete gaussian", dp.m.make_gaussian, int),
    ):
        atom = dp.atom_domain(T=t, nan=False) if t is float else dp.atom_domain(T=t)
        scale = SIGMA_DG if kind == "discrete gaussian" else 1.0
        one = make(atom, dp.absolute_distance(T=t), scale=scale)
        vec_metric = dp.l1_distance(T=t) if "laplace" in kind else dp.l2_distance(T=t)
        vec = make(dp.vector_domain(atom), vec_metric, scale=scale)
        zero = 0.0 if t is float else 0
        zeros = {n: [zero] * n for n in SIZES}
        out[kind] = lambda n, one=one, vec=vec, zero=zero, zeros=zeros: one(zero) if n == 1 else vec(zeros[n])
    nm = dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float), dp.max_divergence(), scale=2.0
    )
    utilities = [float(i % 3) for i in range(K)]
    out["exponential / noisy max"] = _loop(lambda: nm(utilities))
    rr = dp.m.make_randomized_response(list(range(K)), math.e / (math.e + K - 1))
    out["k-RR (k=10)"] = _loop(lambda: rr(3))
    return out


def _pydp() -> dict[str, Fn]:
    try:
        from pydp.algorithms import numerical_mechanisms as nm
    except ImportError:
        return {}
    lap = nm.LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    gauss = nm.GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    return {"laplace": _loop(lambda: lap.add_noise(0.0)), "gaussian": _loop(lambda: gauss.add_noise(0.0))}


def _diffprivlib() -> dict[str, Fn]:
    try:  # diffprivlib 0.6.6 imports two names scikit-learn 1.9 removed (see analysis_peers.py)
        import sklearn.tree._tree as tree

        for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
            if not hasattr(tree, name):
                setattr(tree, name, value)
    except ImportError:
        pass
    try:
        import diffprivlib.mechanisms as m
    except ImportError:
        return {}
    lap = m.Laplace(epsilon=1.0, sensitivity=1.0)
    geo = m.Geometric(epsilon=1.0, sensitivity=1)
    gauss = m.GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    dg = m.GaussianDiscrete(epsilon=1.0, delta=1e-5, sensitivity=1)
    expo = m.Exponential(epsilon=1.0, sensitivity=1.0, utility=[float(i % 3) for i in range(K)])
    return {
        "laplace": _loop(lambda: lap.randomise(0.0)),
        "discrete laplace": _loop(lambda: geo.randomise(0)),
        "gaussian": _loop(lambda: gauss.randomise(0.0)),
        "discrete gaussian": _loop(lambda: dg.randomise(0)),
        "exponential / noisy max": _loop(expo.randomise),
    }


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _loop(one: Callable[[], object]) -> Fn:
    """A peer without a vector call: ``n`` scalar calls (marked as a loop)."""

    def run(n: int) -> object:
        return [one() for _ in range(n)]

    run.loop = True  # type: ignore[attr-defined]
    return run


def _calls(n: int, quick: bool) -> int:
    """Calls per timed cell: 5e3 scalar releases at x1, 100 calls (1e5 samples) at 1e3 (a
    call's fixed cost is the figure there: ten calls were too few to time it), one beyond."""
    if n == 1:
        return 200 if quick else 5_000
    if n == 1_000:
        return 1 if quick else 100
    return 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median per cell)")
    ap.add_argument("--quick", action="store_true", help="sizes x1 and 1e3 only, few calls")
    ap.add_argument("--once", type=float, default=1.0, help="estimated CPU s above which a cell runs once")
    ap.add_argument("--skip", type=float, default=10.0, help="estimated CPU s above which a cell is skipped")
    args = ap.parse_args()
    sizes = SIZES[:2] if args.quick else SIZES
    secure = SecureRandom()
    systems: list[tuple[str, dict[str, Fn]]] = [
        ("privreg " + _version("privreg"), _privreg(secure)),
        ("numpy " + np.__version__ + " (insecure)", _numpy()),
    ]
    for label, dist, build in (
        ("OpenDP", "opendp", _opendp),
        ("PyDP", "python-dp", _pydp),
        ("diffprivlib", "diffprivlib", _diffprivlib),
    ):
        rows = build()
        if rows:
            systems.append((f"{label} {_version(dist)}", rows))
        else:
            print(f"({label} not installed: its columns are left out)", flush=True)
    # every (kind, row label, fn) in table order
    cells: dict[tuple[str, str, int], list[Timing]] = {}
    order: list[tuple[str, str, Fn]] = []
    for kind in KINDS:
        for sysname, rows in systems:
            for key, fn in rows.items():
                if key == kind or key.startswith(kind + " ("):
                    label = sysname + key[len(kind) :]
                    if getattr(fn, "loop", False):
                        label += " [per-sample loop]"
                    order.append((kind, label, fn))
    for fn in {id(f): f for _, _, f in order}.values():  # warm-up: caches, imports, JIT-free first calls
        fn(1)
        fn(1000)
    estimate: dict[tuple[str, str], float] = {}  # CPU ns per sample at the last size timed
    skipped: set[tuple[str, str, int]] = set()
    once: set[tuple[str, str, int]] = set()
    for r in range(args.rounds):
        for n in sizes:
            for kind, label, fn in order:
                cost = estimate.get((kind, label), 0.0) * n * 1e-9
                if (kind, label, n) in skipped or (r == 0 and n > 1 and cost > args.skip):
                    skipped.add((kind, label, n))
                    continue
                if (kind, label, n) in once or (r == 0 and n > 1 and cost > args.once):
                    once.add((kind, label, n))
                    if r > 0:
                        continue
                calls = _calls(n, args.quick)
                # earlier cells' objects (privreg's EventLog of every release so far) are
                # frozen, so a full collection over them does not land on this cell; this
                # cell's own garbage is still collected within it
                gc.collect()
                gc.freeze()
                with timed(cores=1) as t:
                    for _ in range(calls):
                        fn(n)
                per = t.timing.scaled(1e9 / (calls * n))
                cells.setdefault((kind, label, n), []).append(per)
                if r == 0:
                    estimate[(kind, label)] = per.cpu
        print(f"  round {r + 1} of {args.rounds} done", flush=True)

    def med(kind: str, label: str, n: int) -> tuple[float, float] | None:
        got = cells.get((kind, label, n))
        if not got:
            return None
        return statistics.median(t.cpu for t in got), statistics.median(t.wall for t in got)

    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print()
    print(
        header(
            f"Noise per sample, in ns (CPU, wall; median of {args.rounds} interleaved rounds), "
            f"and CPU x numpy of the same kind and size",
            processes=1,
            cores=1,
        )
    )
    a, b, c = START_LOAD
    print(f"[finished {started}; load average at start {a:.2f} / {b:.2f} / {c:.2f}, at the end {_load()}]")
    print(f"[* timed in round 1 only (estimated over {args.once:g} CPU s); skip: estimated over {args.skip:g} CPU s]")
    for kind in KINDS:
        print()
        head = [f"{kind}: ns per sample"]
        for n in sizes:
            s = "x1" if n == 1 else f"1e{round(math.log10(n))}"
            head += [f"{s} CPU", f"{s} wall", f"{s} CPU x numpy"]
        lines = [head]
        base = next(label for k, label, _ in order if k == kind and label.startswith("numpy"))
        for k, label, _ in order:
            if k != kind:
                continue
            row = [label]
            for n in sizes:
                got, ref = med(kind, label, n), med(kind, base, n)
                if got is None:
                    row += ["skip" if (kind, label, n) in skipped else "-", "-", "-"]
                    continue
                mark = "*" if (kind, label, n) in once else ""
                row += [f"{got[0]:,.0f}{mark}", f"{got[1]:,.0f}{mark}", f"{got[0] / ref[0]:.1f}" if ref else "-"]
            lines.append(row)
        widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
        for r in lines:
            print("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))).rstrip())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
