"""Paper 002's Table 3 in shape: DPNE against DPSU-all, DPSU-even and DPSU-single, per length.

    python benchmarks/reproduce_table3.py [--users 100000] [--max-n 9] [--delta0 100]
                                          [--epsilon 4] [--spamassassin PATH] [--out FILE.md]
                                          [--quick]

Rows: the number of n-grams each method releases per length k = 1..T at the paper's
Table 3 settings (Delta_0 = 100, eps = 4, delta = 1e-7, eta = 0.01). The baselines are
privreg's implementations of the DPSU baselines of Kim et al. 2021 (paper 002), Section
3.1.2 (labelled as such; no peer code is installable). DPSU-all bounds each
user to T Delta_0 n-grams of all lengths pooled). DPSU-single is a separate full-budget
run per length (so its row has no total, as in the paper). Two corpora: the synthetic
one (Zipf vocabulary, Markov phrases, heavy-tailed users; ``--users`` users, at least
1e5 for the issue's requirement; split into in-memory user partitions of about 2e6
tokens) and real text, SpamAssassin ham with one user per sender (the whole corpus when
``--spamassassin`` points at ``spamassassin.tar.gz``, else the bundled slice), streamed
from a JSONL file into user partitions like any input file. Each method charges its own
event log: the rows are alternatives, not one composed release. The paper's Reddit
numbers are not reproducible offline; the claim checked is the shape: DPNE releases
more long n-grams than every DPSU baseline. ``--out`` also writes the tables, the
command and the machine's state as Markdown. Each method's run is timed
(benchmarks/timing.py: wall s, CPU s, CPU s / core; one process, one core) in the
"time" table under each corpus. ``--quick``: 2,000 users, T = 5.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from timing import Timing, columns, header, timed

from privreg.core import EventLog, InsecureReproducibleRandom
from privreg.plugins.ngrams.dpne import extract_ngrams, table3
from privreg.plugins.ngrams.engines import LocalNgramEngine
from privreg.plugins.ngrams.partitions import PartitionedCorpus
from privreg.plugins.ngrams.spamassassin import bundled_path, ham_records
from privreg.plugins.ngrams.synthetic import SyntheticSpec, synthetic_corpus

PARTITION_TOKENS = 2_000_000


def rows_for(
    corpus: PartitionedCorpus, *, max_n: int, delta0: int, epsilon: float, seed: int, say
) -> tuple[dict[str, dict[int, int]], dict[str, Timing]]:  # type: ignore[no-untyped-def]
    """Counts per length of every method, and its time. One engine serves all runs: its
    exact n-gram id tables (built once, from the data alone, in DPNE's run) are reused by
    every DPSU baseline."""
    settings = dict(epsilon=epsilon, delta=1e-7, max_n=max_n, max_keys=delta0, eta=0.01)
    engine = LocalNgramEngine(corpus)
    rows: dict[str, dict[int, int]] = {}
    times: dict[str, Timing] = {}
    for method, name in (("dpne", "DPNE"), ("dpsu-all", "DPSU-all"), ("dpsu-even", "DPSU-even")):
        with timed(cores=1) as t:
            res = extract_ngrams(
                engine, charger=EventLog(), method=method, rng=InsecureReproducibleRandom(seed=seed), **settings
            )
        rows[name], times[name] = res.counts, t.timing
        say(f"  {name}: " + ", ".join(f"{c} {v}" for c, v in zip(columns("s"), t.timing.cells(".1f"))))
    single: dict[int, int] = {}
    with timed(cores=1) as t:
        for k in range(1, max_n + 1):
            res = extract_ngrams(
                engine,
                charger=EventLog(),
                method="dpsu-single",
                length=k,
                rng=InsecureReproducibleRandom(seed=seed),
                **settings,
            )
            single[k] = res.counts[k]
    rows["DPSU-single"], times[f"DPSU-single (x{max_n})"] = single, t.timing
    say(f"  DPSU-single (x{max_n}): " + ", ".join(f"{c} {v}" for c, v in zip(columns("s"), t.timing.cells(".1f"))))
    engine.close()
    return rows, times


def time_table(times: dict[str, Timing]) -> str:
    """The methods' times, one row each."""
    head = ["method", *columns("s")]
    rows = [head] + [[name, *t.cells(".1f")] for name, t in times.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows
    )


def shape(rows: dict[str, dict[int, int]], max_n: int) -> str:
    """Where DPNE releases more n-grams than each baseline, and the totals of long n-grams."""

    def wins(other: str) -> list[int]:
        return [k for k in range(1, max_n + 1) if rows["DPNE"].get(k, 0) > rows[other].get(k, 0)]

    long_dpne = sum(c for k, c in rows["DPNE"].items() if k >= 3)
    long_best = max(sum(c for k, c in rows[m].items() if k >= 3) for m in ("DPSU-all", "DPSU-even"))
    return (
        f"DPNE releases more than DPSU-all at lengths {wins('DPSU-all') or 'none'}, more than DPSU-even at "
        f"{wins('DPSU-even') or 'none'}, more than DPSU-single (a full budget per length) at "
        f"{wins('DPSU-single') or 'none'}; n-grams of length >= 3: DPNE {long_dpne:,}, best of "
        f"DPSU-all/-even {long_best:,}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--max-n", type=int, default=9)
    parser.add_argument("--delta0", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--spamassassin", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as Markdown here")
    parser.add_argument("--quick", action="store_true", help="2,000 users, T = 5")
    args = parser.parse_args()
    if args.quick:
        args.users, args.max_n = 2000, 5
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M")
    whole = timed(cores=1).__enter__()
    tables = []
    say(header("Paper 002 Table 3 in shape", processes=1, cores=1))

    corpus = synthetic_corpus(SyntheticSpec(users=args.users, seed=args.seed, max_tokens=5_000))
    parts = max(1, math.ceil(corpus.size / PARTITION_TOKENS))
    say(
        f"synthetic corpus: {args.users:,} users, {corpus.size:,} tokens, {parts} user partitions in memory "
        f"(Delta_0 = {args.delta0}, eps = {args.epsilon:g}, delta = 1e-7, eta = 0.01)"
    )
    pc = PartitionedCorpus.from_corpus(corpus, partitions=parts)
    del corpus
    rows, times = rows_for(pc, max_n=args.max_n, delta0=args.delta0, epsilon=args.epsilon, seed=args.seed, say=say)
    tables.append(
        (
            f"Synthetic corpus: {args.users:,} users, {pc.tokens_total:,} tokens",
            table3(rows, args.max_n),
            shape(rows, args.max_n),
            time_table(times),
        )
    )
    say(tables[-1][1])
    say(tables[-1][2])

    with tempfile.TemporaryDirectory(prefix="privreg-table3-") as tmp:
        if args.spamassassin is not None:
            path = Path(tmp) / "ham.jsonl"
            with open(path, "w", encoding="utf-8") as fh:
                for row in ham_records(args.spamassassin):
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            source = "SpamAssassin ham, whole corpus (one user per From: sender)"
        else:
            path = bundled_path()
            source = "SpamAssassin ham, bundled slice (one user per From: sender)"
        with PartitionedCorpus.from_file(path, format="jsonl", directory=tmp) as real:
            senders = sum(int(p.load().user_tags.size) for p in real.partitions)
            say(
                f"\n{source}: {senders:,} senders, {real.tokens_total:,} tokens, "
                f"{len(real.partitions)} partition(s) on disk"
            )
            rows, times = rows_for(
                real, max_n=args.max_n, delta0=args.delta0, epsilon=args.epsilon, seed=args.seed, say=say
            )
    tables.append(
        (
            f"{source}: {senders:,} senders, {real.tokens_total:,} tokens",
            table3(rows, args.max_n),
            shape(rows, args.max_n),
            time_table(times),
        )
    )
    say(tables[-1][1])
    say(tables[-1][2])
    whole.__exit__()
    wall, cpu = whole.timing.wall, whole.timing.cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    say(
        f"\ntotal: {wall:.0f} s wall, {cpu:.0f} s CPU, {whole.timing.cpu_per_core:.0f} s CPU / core (one core), "
        f"peak RSS {rss:,.0f} MB"
    )

    if args.out is not None:
        cmd = "python " + " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:])
        md = [
            "# Paper 002, Table 3 in shape (privreg `ngrams`)",
            "",
            f"Command: `{cmd}`",
            "",
            f"Machine: {os.cpu_count()} cores shared with other jobs (load average {load[0]:.2f} at the start), "
            f"{started}; one process on one core. Total {wall:.0f} s wall, {cpu:.0f} s CPU (= CPU s / core), "
            f"peak RSS {rss:,.0f} MB.",
            "",
            f"Settings: Delta_0 = {args.delta0}, eps = {args.epsilon:g}, delta = 1e-7, eta = 0.01, "
            f"T = {args.max_n}; DPNE = scalable variant "
            "(Appendix A), both-side pruning, equal sigma_k; DPSU-all bounds users to T Delta_0 n-grams; "
            "DPSU-single is one full-budget run per length. Seeded randomness "
            f"(InsecureReproducibleRandom(seed={args.seed})): benchmark only.",
            "",
        ]
        for title, table, verdict, clock in tables:
            md += [
                f"## {title}",
                "",
                "```",
                table,
                "```",
                "",
                verdict,
                "",
                "Time per method:",
                "",
                "```",
                clock,
                "```",
                "",
            ]
        md += ["## Log", "", "```", *lines, "```", ""]
        args.out.write_text("\n".join(md), encoding="utf-8")


if __name__ == "__main__":
    main()
