"""Throughput of privreg's secure samplers against named baselines, in one run.

    python benchmarks/samplers.py [--draws N] [--users N] [--quick]

Rows (each timed by benchmarks/timing.py: wall s, CPU s, CPU s / core, one process on
one core):
- exact discrete Laplace (CSPRNG, Canonne-Kamath-Steinke) vs the real peer numpy's
  Laplace (PCG64, insecure: floating-point leak and predictable generator). Not a fair
  fight: the baseline is what privreg refuses to do; the ratio is the price of exactness.
- k-ary randomized response, vectorised exact path vs a per-user Python loop of the same
  exact algorithm. That loop is privreg's own ablation (what the vectorisation saves),
  not a peer baseline: no maintained peer implements exact k-RR.
"""

from __future__ import annotations

import argparse
import secrets
from fractions import Fraction

import numpy as np
from timing import Timing, columns, header, measure

from privreg import EventLog, SecureRandom
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.noise import discrete_laplace


def _rr_loop(x: np.ndarray, rr: RandomizedResponse) -> np.ndarray:
    out = np.empty_like(x)
    threshold = rr.keep_numerator
    for i, v in enumerate(x):
        if secrets.randbelow(1 << 53) < threshold:
            out[i] = v
        else:
            o = secrets.randbelow(rr.k - 1)
            out[i] = o + (o >= v)
    return out


def _row(name: str, what: str, count: int, t: Timing) -> list[str]:
    return [name, what, f"{count:,}", *t.cells(".4f"), f"{count / t.cpu_per_core:,.0f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=20_000)
    ap.add_argument("--users", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: 500 draws, 20,000 users")
    args = ap.parse_args()
    if args.quick:
        args.draws, args.users = 500, 20_000
    rng = SecureRandom()
    scale = Fraction(1024) / Fraction(1.0)

    exact, _ = measure(lambda: [discrete_laplace(scale, rng) for _ in range(args.draws)])
    gen = np.random.default_rng()
    numpy_t, _ = measure(lambda: gen.laplace(size=args.draws * 100))

    rr = RandomizedResponse(epsilon=2.0, k=16)
    users = np.asarray(np.arange(args.users) % 16)
    vec, _ = measure(lambda: rr.randomize(users, charger=EventLog(), rng=rng))
    few = users[: max(1, args.users // 20)]
    loop, _ = measure(lambda: _rr_loop(few, rr))

    rows = [
        ["sampler", "what it is", "count", *columns("s"), "count / (CPU s / core)"],
        _row("discrete Laplace, exact", "privreg", args.draws, exact),
        _row("numpy laplace (insecure)", f"real peer numpy {np.__version__}", args.draws * 100, numpy_t),
        _row("k-RR (k=16), vectorised", "privreg", args.users, vec),
        _row("k-RR (k=16), per-user Python loop", "privreg's own loop (ablation, not a peer)", few.size, loop),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(header("Sampler throughput", processes=1, cores=1))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    rate = {r[0]: float(r[-1].replace(",", "")) for r in rows[1:]}
    print(
        f"\nexact discrete Laplace / numpy laplace (per CPU s / core): "
        f"{rate['discrete Laplace, exact'] / rate['numpy laplace (insecure)']:.4f}"
    )
    print(
        f"k-RR vectorised / per-user loop (per CPU s / core): "
        f"{rate['k-RR (k=16), vectorised'] / rate['k-RR (k=16), per-user Python loop']:.1f}"
    )


if __name__ == "__main__":
    main()
