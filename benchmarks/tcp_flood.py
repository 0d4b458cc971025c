"""The idle-connection flood of tests/test_tcp_adversarial.py, repeated while other
processes load every core: the honest transport's traced peak (tracemalloc) against the
memory bound of privreg.mpc.tcp's module docstring, and whether the real peer got in.

    python benchmarks/tcp_flood.py [--runs 100] [--loaders 2] [--quick]

Baseline: the documented formula itself (a bound, not a peer: no other library states
one). Exit status 1 if any run fails or exceeds the bound."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def _spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--loaders", type=int, default=os.cpu_count() or 2, help="busy processes loading the cores")
    ap.add_argument("--quick", action="store_true", help="5 runs")
    args = ap.parse_args()
    runs = 5 if args.quick else args.runs

    import test_tcp_adversarial as t  # the test's own attack and bound

    from privreg.mpc.certs import create_test_pki

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1000:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4000, hard) if hard != resource.RLIM_INFINITY else 4000, hard))
    pki = create_test_pki(Path(tempfile.mkdtemp()), ["alice", "bob"])
    bound = t._bound(tls=True)
    load0 = os.getloadavg()[0]
    ctx = multiprocessing.get_context("spawn")
    loaders = [ctx.Process(target=_spin, args=(time.monotonic() + 3600,), daemon=True) for _ in range(args.loaders)]
    for p in loaders:
        p.start()
    peaks, failures = [], 0
    started = time.perf_counter()
    try:
        for _ in range(runs):
            socks: list[socket.socket] = []

            def attack(addr, socks=socks):
                for _ in range(300):
                    socks.append(socket.create_connection(addr))
                time.sleep(0.3)
                return len(socks)

            ra, _rb, peak, n = t.attack_then_run(pki, attack, handshake_timeout=5.0)
            for s in socks:
                s.close()
            good = not isinstance(ra, BaseException) and ra.outputs == {"alice": "the real value"} and n == 300
            failures += (not good) or peak >= bound
            peaks.append(peak)
    finally:
        for p in loaders:
            p.terminate()
    wall = time.perf_counter() - started
    peaks.sort()
    mib = 2**20
    print(
        f"# idle-connection flood: {runs} runs, {args.loaders} busy processes, cpu_count {os.cpu_count()}, "
        f"load average {load0:.2f} at start, {wall:.0f} s wall"
    )
    print()
    print("| runs | failed or above bound | median peak MiB | max peak MiB | documented bound MiB |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {runs} | {failures} | {peaks[len(peaks) // 2] / mib:.2f} | {peaks[-1] / mib:.2f} | {bound / mib:.2f} |")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
