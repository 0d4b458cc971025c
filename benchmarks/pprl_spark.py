"""Record-linkage blocking at scale: the recommended profile's CLK encoding, keyed band
tokens and candidate pairs for 3 parties, on the local backend and on Spark (local mode).

    python benchmarks/pprl_spark.py [--records 100000] [--backends local,spark] [--master local[2]]
                                    [--shuffle-partitions 8] [--driver-memory 8g] [--out FILE.md] [--quick]

Data: ``synthetic_population(--records)`` (seeded) copied to 3 parties with
``make_parties(overlap=1.0, corruption=0.3, fields=list(FEBRL_SCHEMA.columns))``: every
party holds every entity, 30% of each party's records carry 1-2 FEBRL-style edits. Each
party's records are written to a Parquet file first (not timed), as a party's records
would sit on its storage. One fresh 32-byte secret (``secrets.token_bytes``) for both
backends.

Stages, timed separately for each backend:

* ``session``: starting the SparkSession (Spark only: a JVM, ``--master``);
* ``encode CLKs``: reading the Parquet file and ``encode_clks`` (FEBRL_CLK_SCHEMA,
  L = 1024) -- locally with pandas, on Spark with ``spark_encode_records`` (one pandas
  batch per task, CLKs collected packed, 128 bytes a record);
* ``band tokens``: ``band_tokens`` with ``recommended_bands(filter_length=1024,
  popcount=median popcount of all parties' CLKs)`` (J = 121-ish, K = 16, two shared
  bands) -- ``LocalBlocking`` or ``SparkBlocking`` (row ranges per task);
* ``candidate pairs``: the three party pairs, ``max_block_pairs`` and ``min_shared`` of
  the config -- pandas merge locally, a Spark join on (band, token) on Spark.

Columns: wall s, CPU s (the benchmark process and all its descendants: for Spark the JVM
and its Python workers, which are children of the JVM) and the part of it spent in the
JVM's process tree (``/proc``: the JVM plus the Python workers it starts), CPU s / core
(over the row's cores: 1 locally, the master's cores for Spark), candidate pairs, blocks
skipped by the cap, pair completeness and reduction ratio
(``quality.candidate_pair_quality``). Each backend runs in a fresh subprocess, so its
peak memory is its own: the footer gives the peak RSS of the driver process, the JVM and
the Spark Python workers. The table also says whether the Spark tokens and pairs are
identical to the local ones (SHA-256 of the arrays, in order).

``--quick``: 2,000 records. Full size (3 x 100,000) takes about 10-15 minutes on the shared
2-core machine, most of it in the candidate-pair joins.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from timing import columns, header, timed, usable_cores

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl.bands import BandConfig, recommended_bands
from privreg.plugins.pprl.clk import encode_clks
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.quality import candidate_pair_quality
from privreg.plugins.pprl.schema import FEBRL_SCHEMA
from privreg.timing import child_pids, tree_cpu_seconds

PARTIES = 3
STAGES = ("session", "encode CLKs", "band tokens", "candidate pairs")


# ------------------------------------------------------------------ /proc helpers


def _tree(pid: str) -> list[str]:
    """``pid`` and its live descendants."""
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.append(p)
            todo.extend(child_pids(p))
    return seen


def _jvm_pids() -> list[str]:
    """Live children of this process that are Java (the JVM pyspark started)."""
    out = []
    for pid in child_pids("self"):
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().strip() == "java":
                    out.append(pid)
        except OSError:
            continue
    return out


def jvm_cpu() -> float:
    """CPU seconds so far of the JVM's process tree (utime + stime + reaped children)."""
    return sum(tree_cpu_seconds(jvm) for jvm in _jvm_pids())


def _hwm_mb(pid: str) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


def peak_memory() -> dict[str, float]:
    """Peak RSS (MB) of this process, the JVM, and the sum over the JVM's live Python workers."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    jvm = workers = 0.0
    for pid in _jvm_pids():
        jvm += _hwm_mb(pid)
        workers += sum(_hwm_mb(p) for p in _tree(pid)[1:])
    return {"driver": own, "jvm": jvm, "workers": workers}


# ------------------------------------------------------------------ one backend (subprocess)


class Stage:
    """Times a stage: wall, CPU of the whole tree, CPU of the JVM tree."""

    def __init__(self, name: str, cores: int, out: dict[str, Any]) -> None:
        self.name, self.cores, self.out = name, cores, out

    def __enter__(self) -> Stage:
        self._jvm = jvm_cpu()
        self._clock = timed(cores=self.cores).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._clock.__exit__(*exc)
        t = self._clock.timing
        self.out[self.name] = {"wall": t.wall, "cpu": t.cpu, "jvm": jvm_cpu() - self._jvm, "cores": t.cores}


def _digest(arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _config(filters: list[np.ndarray]) -> BandConfig:
    pop = float(np.median(np.concatenate([f.sum(axis=1) for f in filters])))
    return recommended_bands(filter_length=filters[0].shape[1], popcount=pop)


def run_one(backend: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    import pandas as pd

    from privreg.plugins.pprl.spark import LocalBlocking, SparkBlocking, spark_encode_records

    secret = (workdir / "secret.bin").read_bytes()
    names = [f"P{i + 1}" for i in range(PARTIES)]
    paths = {p: workdir / f"{p}.parquet" for p in names}
    stages: dict[str, Any] = {}
    cores = 1 if backend == "local" else _master_cores(args.master)
    blocking: Any
    if backend == "local":
        blocking = LocalBlocking()
        with Stage("encode CLKs", cores, stages):
            records = {
                p: encode_clks(
                    pd.read_parquet(paths[p]).set_index("rec_id"), secret=secret, party=p, entity_column=ENTITY
                )
                for p in names
            }
    else:
        with Stage("session", cores, stages):
            blocking = SparkBlocking(
                master=args.master, shuffle_partitions=args.shuffle_partitions, driver_memory=args.driver_memory
            )
            blocking.spark.sparkContext.setLogLevel("ERROR")
        with Stage("encode CLKs", cores, stages):
            records = {
                p: spark_encode_records(
                    blocking.spark.read.parquet(str(paths[p])),
                    secret=secret,
                    party=p,
                    id_column="rec_id",
                    entity_column=ENTITY,
                )
                for p in names
            }
    config = _config([records[p].match_filters for p in names])
    with Stage("band tokens", cores, stages):
        tokens = [blocking.band_tokens(records[p].match_filters, config=config, secret=secret) for p in names]
    candidates: dict[tuple[int, int], np.ndarray] = {}
    skipped = 0
    with Stage("candidate pairs", cores, stages):
        for i in range(PARTIES):
            for j in range(i + 1, PARTIES):
                pairs, s = blocking.candidate_pairs(
                    tokens[i], tokens[j], max_block_pairs=config.max_block_pairs, min_shared=config.min_shared
                )
                candidates[(i, j)] = pairs
                skipped += s
    quality = candidate_pair_quality(candidates, entities={p: records[p].entities for p in names}, parties=names)
    memory = peak_memory()
    blocking.close()
    return {
        "backend": backend,
        "master": args.master if backend == "spark" else "in-process",
        "cores": cores,
        "records": {p: len(records[p]) for p in names},
        "config": {"bands": config.bands, "bits": config.bits, "min_shared": config.min_shared},
        "stages": stages,
        "candidates": int(sum(c.shape[0] for c in candidates.values())),
        "skipped": skipped,
        "pc": quality.recall,
        "rr": quality.reduction_ratio,
        "true_pairs": quality.true_pairs,
        "ids": _digest([np.array(records[p].ids, dtype=object).astype(str) for p in names]),
        "clks": _digest([records[p].match_filters for p in names]),
        "tokens": _digest(tokens),
        "pairs": _digest([candidates[k] for k in sorted(candidates)]),
        "memory": memory,
    }


def _master_cores(master: str) -> int:
    if master.startswith("local[") and master.endswith("]"):
        inner = master[len("local[") : -1]
        return usable_cores() if inner == "*" else max(1, min(int(inner), usable_cores()))
    return usable_cores() if master == "local" else 1


# ------------------------------------------------------------------ driver


def write_data(workdir: Path, records: int, seed: int) -> float:
    t0 = time.perf_counter()
    pop = synthetic_population(records, rng=InsecureReproducibleRandom(seed=seed))
    data = make_parties(
        pop,
        parties=PARTIES,
        corruption=0.3,
        overlap=1.0,
        rng=InsecureReproducibleRandom(seed=seed + 1),
        fields=list(FEBRL_SCHEMA.columns),
    )
    for p in data.parties:
        data.frames[p].reset_index().to_parquet(workdir / f"{p}.parquet", index=False)
    secret_path = workdir / "secret.bin"
    secret_path.touch(mode=0o600)
    secret_path.write_bytes(secrets.token_bytes(32))
    return time.perf_counter() - t0


def spawn(backend: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        backend,
        str(workdir),
        "--master",
        args.master,
        "--shuffle-partitions",
        str(args.shuffle_partitions),
        "--driver-memory",
        args.driver_memory,
    ]
    log = workdir / f"{backend}.log"
    with log.open("w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, check=False)
    if proc.returncode != 0:
        tail = log.read_text()[-4000:]
        raise SystemExit(f"the {backend} run failed (exit {proc.returncode}); end of its log:\n{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(results: list[dict[str, Any]], args: argparse.Namespace, data_s: float) -> str:
    lines = [
        f"# python benchmarks/pprl_spark.py --records {args.records} --backends {args.backends} "
        f"--master {args.master} --shuffle-partitions {args.shuffle_partitions} --driver-memory {args.driver_memory}",
        f"# {platform.platform()}, Python {platform.python_version()}",
        "",
        header(
            f"pprl blocking, {PARTIES} parties x {args.records} synthetic records (overlap 1.0, 30% corrupted)",
            processes="1 per backend (a fresh subprocess); Spark: + the JVM and its Python workers",
            cores="1 for local; the master's cores for Spark",
        ),
        f"data generation and Parquet files: {data_s:.1f} s (not timed below)",
    ]
    if results:
        c = results[0]["config"]
        lines.append(
            f"bands: J = {c['bands']}, K = {c['bits']}, min_shared = {c['min_shared']} "
            f"(recommended_bands at the median popcount); records per party {results[0]['records']}"
        )
    head = ["backend", "stage", *columns("s"), "of which JVM tree CPU s", "candidates", "skipped", "PC", "RR"]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        total = {"wall": 0.0, "cpu": 0.0, "jvm": 0.0}
        for stage in STAGES:
            s = r["stages"].get(stage)
            if s is None:
                continue
            for k in total:
                total[k] += s[k]
            lines.append(_row(r, stage, s, ""))
        lines.append(_row(r, "**total**", {**total, "cores": r["cores"]}, "final"))
    lines.append("")
    for r in results:
        m = r["memory"]
        mem = f"driver {m['driver']:.0f} MB"
        if r["backend"] == "spark":
            mem += f", JVM {m['jvm']:.0f} MB, Spark Python workers {m['workers']:.0f} MB (sum of peaks of live workers)"
        lines.append(
            f"{r['backend']} ({r['master']}): peak RSS {mem}; true pairs {r['true_pairs']}; "
            f"digests ids {r['ids']} CLKs {r['clks']} tokens {r['tokens']} pairs {r['pairs']}"
        )
    by = {r["backend"]: r for r in results}
    if "local" in by and "spark" in by:
        same = {k: by["local"][k] == by["spark"][k] for k in ("ids", "clks", "tokens", "pairs")}
        lines.append("Spark identical to local: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items()))
    return "\n".join(lines)


def _row(r: dict[str, Any], stage: str, s: dict[str, Any], final: str) -> str:
    cpu_core = s["cpu"] / max(1, s["cores"])
    cells = [
        f"{r['backend']} ({r['master']})",
        stage,
        f"{s['wall']:.1f}",
        f"{s['cpu']:.1f}",
        f"{cpu_core:.1f}",
        f"{s['jvm']:.1f}" if r["backend"] == "spark" else "-",
        f"{r['candidates']}" if final else "",
        f"{r['skipped']}" if final else "",
        f"{r['pc']:.4f}" if final else "",
        f"{r['rr']:.6f}" if final else "",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000, help="synthetic entities; every party holds them all")
    ap.add_argument("--backends", default="local,spark", help="comma-separated among local, spark")
    ap.add_argument("--master", default="local[2]", help="Spark master for the spark backend")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="8g", help="Spark driver memory (local mode: the executors too)")
    ap.add_argument("--seed", type=int, default=1, help="seeds the benchmark data only")
    ap.add_argument("--out", type=Path, default=None, help="also write the report as Markdown here")
    ap.add_argument("--quick", action="store_true", help="2,000 records")
    ap.add_argument("--one", nargs=2, metavar=("BACKEND", "WORKDIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], Path(args.one[1]), args)))
        return
    if args.quick:
        args.records = 2_000
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - {"local", "spark"})
    if unknown or not backends:
        raise SystemExit(f"--backends must list local and/or spark; got {args.backends!r}")
    with tempfile.TemporaryDirectory(prefix="pprl_spark_") as tmp:
        workdir = Path(tmp)
        data_s = write_data(workdir, args.records, args.seed)
        results = []
        for b in backends:
            print(f"running {b} ...", file=sys.stderr, flush=True)
            results.append(spawn(b, workdir, args))
    text = report(results, args, data_s)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
