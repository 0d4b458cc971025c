"""Throughput of privreg's secure samplers against named baselines, in one run.

    python benchmarks/samplers.py [--draws N] [--users N]

Rows:
- exact discrete Laplace (CSPRNG, Canonne-Kamath-Steinke) vs numpy's Laplace (PCG64,
  insecure: floating-point leak and predictable generator). Not a fair fight: the
  baseline is what privreg refuses to do; the ratio is the price of exactness.
- k-ary randomized response, vectorised exact path vs a per-user Python loop of the same
  exact algorithm (the baseline any naive implementation would be).
"""

from __future__ import annotations

import argparse
import secrets
import time
from fractions import Fraction

import numpy as np

from privreg import EventLog, SecureRandom
from privreg.mechanisms.randomized_response import RandomizedResponse
from privreg.noise import discrete_laplace


def _rate(fn, count: int) -> float:
    start = time.perf_counter()
    fn()
    return count / (time.perf_counter() - start)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=20_000)
    ap.add_argument("--users", type=int, default=1_000_000)
    args = ap.parse_args()
    rng = SecureRandom()
    scale = Fraction(1024) / Fraction(1.0)

    exact = _rate(lambda: [discrete_laplace(scale, rng) for _ in range(args.draws)], args.draws)
    gen = np.random.default_rng()
    numpy_rate = _rate(lambda: gen.laplace(size=args.draws * 100), args.draws * 100)

    rr = RandomizedResponse(epsilon=2.0, k=16)
    users = np.asarray(np.arange(args.users) % 16)
    vec = _rate(lambda: rr.randomize(users, charger=EventLog(), rng=rng), args.users)
    few = users[: max(1, args.users // 20)]
    loop = _rate(lambda: _rr_loop(few, rr), few.size)

    rows = [
        ("sampler", "per second", "baseline", "baseline per second", "ratio"),
        ("discrete Laplace, exact", f"{exact:,.0f}", "numpy laplace (insecure)", f"{numpy_rate:,.0f}",
         f"{exact / numpy_rate:.4f}"),
        ("k-RR (k=16), vectorised", f"{vec:,.0f}", "per-user Python loop", f"{loop:,.0f}",
         f"{vec / loop:.1f}"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
