"""DPNE throughput and peak memory: privreg's local backend against a pure-Python baseline.

    python benchmarks/ngrams.py [--sizes 1e5,1e6,1e7] [--baseline-max 1e6] [--spark-max 1e6]
                                [--explicit-max 1e6] [--files-max 1e6]

Every row runs in a fresh subprocess on the synthetic corpus (Zipf vocabulary, Markov
phrases, heavy-tailed users; privreg.plugins.ngrams.synthetic) at the given number of
tokens, DPNE with the paper's reference settings (T = 9, eps = 4, delta = 1e-7,
Delta = 300, eta = 0.01, both-side pruning), and reports tokens per second (wall and CPU
time of the process), peak traced Python/numpy memory (tracemalloc, during extraction
only; the corpus itself and imported modules are not counted) and the process's peak RSS.
Rows:

* ``local``: privreg's numpy backend, scalable variant (Appendix A), the default.
* ``local-explicit``: Algorithm 1 with the histogram over all of V_k materialised.
* ``local-from-jsonl``: end to end from a JSONL file (pandas read + tokenizer + DPNE).
* ``python-counter``: the named baseline -- the same algorithm written the obvious way
  (per user a Python set of k-gram tuples, ``random.sample`` to bound, a
  ``collections.Counter`` of weights), with the same secure coins for the release.
* ``spark``: the PySpark backend in local mode (``local[2]``), wall time only (the work
  runs in the JVM), measured from a JSONL file including session start.

Target of issue #5: 1e7 tokens end to end in under a minute on 2 cores. On a shared
machine the wall-clock column is noisy; CPU seconds of the Python process are not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter

import numpy as np

from privreg.core import EventLog, InsecureReproducibleRandom
from privreg.plugins.ngrams.synthetic import SyntheticSpec, synthetic_corpus, write_records

SETTINGS = dict(epsilon=4.0, delta=1e-7, max_n=9, max_keys=300, eta=0.01)
TOKENS_PER_USER = 65.6  # mean of the default synthetic activity law


def _corpus(tokens: float):
    return synthetic_corpus(SyntheticSpec(users=max(10, int(tokens / TOKENS_PER_USER)), seed=1))


def python_counter_dpne(corpus, *, rng, epsilon, delta, max_n, max_keys, eta):
    """The baseline: DPNE (both-side pruning, scalable spurious step omitted) with Python
    sets and Counters; the release uses privreg's coins so only aggregation differs."""
    from scipy import special

    from privreg.plugins.ngrams.coins import gaussian_tail_coins
    from privreg.plugins.ngrams.noise_plan import plan_dpne

    plan = plan_dpne(epsilon=epsilon, delta=delta, max_n=max_n, max_keys=(max_keys,) * max_n)
    tokens = corpus.tokens.tolist()
    ends = corpus.record_end.tolist()
    users = corpus.user.tolist()
    by_user: dict[int, list[tuple[int, int]]] = {}
    start = 0
    while start < len(tokens):  # records as (start, end) per user
        by_user.setdefault(users[start], []).append((start, ends[start]))
        start = ends[start]
    py = random.Random(0)
    released: dict[int, set] = {}
    for k in range(1, max_n + 1):
        r = plan.releases[k - 1]
        counter: Counter = Counter()
        for recs in by_user.values():
            grams = set()
            for a, b in recs:
                for p in range(a, b - k + 1):
                    g = tuple(tokens[p:p + k])
                    if k == 1 or (g[:-1] in released[k - 1] and g[1:] in released[k - 1]):
                        grams.add(g)
            if len(grams) > max_keys:
                grams = set(py.sample(sorted(grams), max_keys))
            if grams:
                w = 1 / math.sqrt(len(grams))
                for g in grams:
                    counter[g] += w
        keys = list(counter)
        counts = np.array([int(counter[g] * (1 << 20)) for g in keys], dtype=np.int64)
        if k == 1:
            rho = r.rho
        else:
            s1, prev = len(released[1]), len(released[k - 1])
            valid = s1 * s1 if k == 2 else prev * 4  # rho_k only: spurious step not timed here
            rho = -r.sigma * float(special.ndtri(eta * min(1.0, prev / max(valid, 1))))
        keep = gaussian_tail_coins(counts, scale=1 << 20, rho=rho, sigma=r.sigma, rng=rng)
        released[k] = {g for g, kept in zip(keys, keep) if kept}
        if not released[k]:
            break
    return {k: len(v) for k, v in released.items()}


def run_one(kind: str, tokens: float) -> dict:
    """One measurement (runs inside the child process)."""
    from privreg.plugins.ngrams.dpne import extract_ngrams
    from privreg.plugins.ngrams.engines import LocalNgramEngine

    rng = InsecureReproducibleRandom(seed=1)
    corpus = _corpus(tokens)
    path = None
    if kind in ("local-from-jsonl", "spark"):
        path = os.path.join(tempfile.mkdtemp(), "records.jsonl")
        write_records(corpus, path)
    n_tokens = corpus.size
    import pandas  # noqa: F401 - imported before tracing: module code is not working memory

    corpus.user_tags, corpus.vocab_tags  # noqa: B018 - warm the hash code path outside the trace
    tracemalloc.start()
    tracemalloc.reset_peak()
    wall, cpu = time.perf_counter(), time.process_time()
    if kind == "python-counter":
        counts = python_counter_dpne(corpus, rng=rng, **SETTINGS)
    elif kind in ("local", "local-explicit"):
        res = extract_ngrams(LocalNgramEngine(corpus), charger=EventLog(), rng=rng,
                             variant="explicit" if kind == "local-explicit" else "scalable",
                             explicit_limit=50_000_000, **SETTINGS)
        counts = res.counts
    else:
        from privreg.backends import Tokenizer, make_backend
        from privreg.plugins.ngrams.engines import SparkNgramEngine

        del corpus
        backend = make_backend("local" if kind == "local-from-jsonl" else "spark")
        records = backend.read_records(path)
        tok = backend.tokenize(records, Tokenizer())
        engine = LocalNgramEngine(tok, backend) if kind == "local-from-jsonl" else SparkNgramEngine(backend, tok)
        res = extract_ngrams(engine, charger=EventLog(), rng=rng, **SETTINGS)
        counts = res.counts
        engine.close()
        backend.close()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"kind": kind, "tokens": n_tokens, "wall": wall, "cpu": cpu, "peak": peak, "rss": rss,
            "released": sum(counts.values()), "counts": {str(k): c for k, c in counts.items()}}


def _child(kind: str, tokens: float) -> dict | str:
    proc = subprocess.run([sys.executable, __file__, "--one", kind, str(tokens)], capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1][:80]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7")
    parser.add_argument("--baseline-max", type=float, default=1e6)
    parser.add_argument("--spark-max", type=float, default=1e6)
    parser.add_argument("--explicit-max", type=float, default=1e6)
    parser.add_argument("--files-max", type=float, default=1e7)
    parser.add_argument("--one", nargs=2, metavar=("KIND", "TOKENS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], float(args.one[1]))))
        return
    sizes = [float(s) for s in args.sizes.split(",")]
    try:
        import pyspark  # noqa: F401
        have_spark = True
    except ImportError:
        have_spark = False
    plan = []
    for size in sizes:
        plan.append(("local", size))
        if size <= args.explicit_max:
            plan.append(("local-explicit", size))
        if size <= args.files_max:
            plan.append(("local-from-jsonl", size))
        if size <= args.baseline_max:
            plan.append(("python-counter", size))
        if have_spark and size <= args.spark_max:
            plan.append(("spark", size))
    head = f"{'backend':<18}{'tokens':>11}{'wall s':>9}{'cpu s':>9}{'tokens/s (cpu)':>16}{'peak MB':>9}" \
           f"{'RSS MB':>8}{'released':>10}"
    print(f"DPNE, T=9, eps=4, delta=1e-7, Delta=300, eta=0.01; synthetic corpus; {os.cpu_count()} cores\n{head}")
    rows = {}
    for kind, size in plan:
        out = _child(kind, size)
        if isinstance(out, str):
            print(f"{kind:<18}{int(size):>11,}  failed: {out}")
            continue
        rows[(kind, size)] = out
        cpu_rate = out["tokens"] / out["cpu"] if kind != "spark" else out["tokens"] / out["wall"]
        print(f"{kind:<18}{out['tokens']:>11,}{out['wall']:>9.2f}{out['cpu']:>9.2f}{cpu_rate:>16,.0f}"
              f"{out['peak'] / 2**20:>9.1f}{out['rss'] / 2**20:>8.0f}{out['released']:>10,}", flush=True)
    for size in sizes:
        a, b = rows.get(("local", size)), rows.get(("python-counter", size))
        if a and b:
            print(f"speed-up of the local backend over python-counter at {int(size):,} tokens: "
                  f"{b['cpu'] / a['cpu']:.1f}x (CPU), {b['wall'] / a['wall']:.1f}x (wall)")


if __name__ == "__main__":
    main()
