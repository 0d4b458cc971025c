"""LDP TrieHH speed (paper 001): users simulated per second against per-user loops, and
the wall time of the paper's production configuration, in one run.

    python benchmarks/triehh.py [--users N] [--report-users N] [--baseline-users N]
                                [--production sample|full|skip] [--quick]

Throughput rows, at eps = 10 and B = 60 reports per user (the en-US bound), for the two
layer shapes of a run: layer 1 (|Z_1| = 100 * 101 candidates, d = 1) and a deep layer
(|Z_i| = eta_max |X| = 10^4 * 101, d = 46). One "user" is the whole on-device step
(GreedySampling of the user's prefixes, 60 Subset Selection reports) plus its share of the
server's vote aggregation. Rows:

- privreg, aggregate votes (the default of ``LDPTrieHH``): ``contribution_counts`` (the
  on-device selection, as counts per prefix) + ``SubsetSelection.vote_counts_from_histogram``
  (the layer's vote sum sampled directly; the same law as the reports' up to float rounding);
- privreg, every report drawn (``votes="reports"``): ``sample_contributions`` +
  ``layer_votes`` (the standard plugin's exact CSPRNG sampler, vectorised over reports);
- per-user loop, privreg: the same SubsetSelection called once per user (B reports); an
  ablation (what vectorising over users saves), not a peer;
- per-user loop, multi-freq-ldpy: the real peer (version printed), its numba
  ``SS_Client`` once per report (pip install multi-freq-ldpy; numpy's insecure
  generator, and sub_k rounded with rint, not ceil).

Per-user loops stop after 5 s (at least one user) and report the rate they reached.
Every row reports wall s, CPU s and CPU s / core (benchmarks/timing.py; one process on
one core) and the rates per wall second and per CPU second per core.

Production configuration (Section 4.1): N = 5e5 users per layer, B = 60, eta_max = 1e4,
D = 15, two passes, 15M simulated users (wordfreq English, 100k words, the top 5k known,
T = 60 days). ``full`` (default) runs the 30 layers for real; ``sample`` runs every kind
of layer once at full size -- the population draw of a layer, layer 1 and layer 2 (whose
candidates already number eta_max |X|, like every later layer) -- and adds up
2 x (layer 1 + 14 x layer 2) + 30 population draws. Either way a table gives every layer's
own time (LDPTrieHH's layer timer, which starts when the layer's users arrive) and users
per CPU second. Targets: >= 5e5 users/s per core in every layer (issues #6, #32),
production under 5 minutes (wall) on 2 cores; the production run uses one process on
one core. ``--quick``: 20,000 users, 2,000 in the per-report row, loops of at
most 50 users or 1 s, no production run.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import time

import numpy as np
from timing import Timing, columns, header, timed

from privreg import EventLog
from privreg.core.randomness import SecureRandom
from privreg.mechanisms.subset_selection import SubsetSelection
from privreg.plugins.heavy_hitters.population import PopulationModel, english_word_law
from privreg.plugins.heavy_hitters.sampling import contribution_counts, sample_contributions
from privreg.plugins.heavy_hitters.triehh import LDPTrieHH, layer_votes

EPS, B, ETA, ALPHABET = 10.0, 60, 10_000, 101
_LOOP_SECONDS = 5.0
SHAPES = {"layer 1": (ALPHABET - 1) * ALPHABET, "deep layer": ETA * ALPHABET}


def _model() -> PopulationModel:
    return PopulationModel(law=english_word_law(100_000), known_words=5000, days=60, depth=15, personal_pool=50_000)


def _layer_inputs(model: PopulationModel, users: int, candidates: int, rng) -> np.ndarray:
    """One layer's report inputs: the users' words mapped to candidate prefix codes by a
    fixed scramble (the cost does not depend on which codes they are), GreedySampling."""
    group = model.sample(users, rng)
    codes = (group.words * 7919) % candidates
    return sample_contributions(
        group.owners, codes, group.counts, num_users=users, bound=B, sampler="greedy", dummy=candidates, rng=rng
    ), group


def _aggregate(model, users, candidates, rng) -> tuple[int, Timing]:
    """The default path: selection counts, then the layer's vote sum sampled directly.
    (users, time)."""
    group = model.sample(users, rng)  # not timed: the population is the simulation's input
    ss = SubsetSelection(epsilon=EPS, s=candidates + 1)
    with timed(cores=1) as clock:
        codes = (group.words * 7919) % candidates
        counts = contribution_counts(
            group.owners, codes, group.counts, num_users=users, bound=B, sampler="greedy", dummy=candidates, rng=rng
        )
        ss.vote_counts_from_histogram(counts, charger=EventLog(), rng=rng)
    return users, clock.timing


def _vectorised(model, users, candidates, rng) -> tuple[int, Timing]:
    """``votes="reports"``: every report drawn by the exact sampler, chunk by chunk."""
    group = model.sample(users, rng)
    ss = SubsetSelection(epsilon=EPS, s=candidates + 1)
    with timed(cores=1) as clock:
        codes = (group.words * 7919) % candidates
        inputs = sample_contributions(
            group.owners, codes, group.counts, num_users=users, bound=B, sampler="greedy", dummy=candidates, rng=rng
        )
        layer_votes(ss, inputs, charger=EventLog(), rng=rng, chunk_size=1 << 16)
    return users, clock.timing


def _timed_loop(users: int, step) -> tuple[int, Timing]:
    """(users done, time) of ``step(j)`` over at most ``users`` users, stopping after
    ``_LOOP_SECONDS`` (at least one user): the slow baselines are time-boxed."""
    done = 0
    with timed(cores=1) as clock:
        start = time.perf_counter()
        while done < users and (done == 0 or time.perf_counter() - start < _LOOP_SECONDS):
            step(done)
            done += 1
    return done, clock.timing


def _loop_privreg(model, users, candidates, rng) -> tuple[int, Timing]:
    inputs, _ = _layer_inputs(model, users, candidates, rng)
    ss = SubsetSelection(epsilon=EPS, s=candidates + 1)
    votes = np.zeros(ss.s, dtype=np.int64)
    log = EventLog()

    def user(j):
        out = ss.randomize(inputs[j * B : (j + 1) * B], charger=log, rng=rng)
        np.add.at(votes, out.reports.ravel(), 1)

    return _timed_loop(users, user)


def _loop_multi_freq(model, users, candidates, rng) -> tuple[int, Timing] | None:
    try:
        from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Client
    except ImportError:
        return None
    inputs, _ = _layer_inputs(model, users, candidates, rng)
    k = candidates + 1
    SS_Client(0, k, EPS)  # numba compilation, not timed
    votes = np.zeros(k, dtype=np.int64)

    def user(j):
        for x in inputs[j * B : (j + 1) * B]:
            votes[SS_Client(int(x), k, EPS)] += 1

    return _timed_loop(users, user)


def throughput(users: int, report_users: int, baseline_users: int) -> None:
    model, rng = _model(), SecureRandom()
    _ = model.lexicon.codes  # encode the lexicon before timing
    print(
        header(
            f"Users simulated per second at eps = {EPS:g}, B = {B} reports per user ({users} users per layer "
            f"for the aggregate row, {report_users} for the per-report row)",
            processes=1,
            cores=1,
        )
    )
    try:
        peer = f"real peer multi-freq-ldpy {importlib.metadata.version('multi-freq-ldpy')}"
    except importlib.metadata.PackageNotFoundError:
        peer = "real peer multi-freq-ldpy"
    wall_s, cpu_s, per_core = columns("s")
    print(
        f"{'layer':<11} {'|Z_i|':>9} {'d':>3} {'method':<58} {'users':>7} {wall_s:>8} {cpu_s:>8} {per_core:>13} "
        f"{'users/wall s':>12} {'users/(CPU s/core)':>19} {'vs loop':>8}"
    )
    for name, candidates in SHAPES.items():
        d = SubsetSelection(epsilon=EPS, s=candidates + 1).subset_size
        loop = _loop_privreg(model, baseline_users, candidates, rng)
        loop_rate = loop[0] / loop[1].cpu_per_core
        rows = [
            ("privreg, aggregate votes (default)", _aggregate(model, users, candidates, rng)),
            ("privreg, every report drawn (votes=reports)", _vectorised(model, report_users, candidates, rng)),
            ("ablation: per-user loop of privreg SubsetSelection", loop),
            (f"{peer}: SS_Client per report", _loop_multi_freq(model, baseline_users, candidates, rng)),
        ]
        for method, got in rows:
            if got is None:
                print(f"{name:<11} {candidates:>9} {d:>3} {method:<58} {'not installed':>10}")
                continue
            done, t = got
            rate = done / t.cpu_per_core
            print(
                f"{name:<11} {candidates:>9} {d:>3} {method:<58} {done:>7} {t.wall:>8.3f} {t.cpu:>8.3f} "
                f"{t.cpu_per_core:>13.3f} {done / t.wall:>12.4g} {rate:>19.4g} {rate / loop_rate:>7.3g}x"
            )
    print("target: >= 5e5 users per CPU second per core ('vs loop': that rate over the per-user loop's)\n")


def production(mode: str) -> None:
    model, rng = _model(), SecureRandom()
    _ = model.lexicon.codes  # encode the lexicon before timing
    n = 500_000
    print(
        f"Production configuration: N = {n} per layer, B = {B}, eta_max = {ETA}, D = 15, two passes, 15M users ({mode})"
    )
    print(header("Production run", processes=1, cores=1))
    whole = timed(cores=1).__enter__()
    if mode == "full":
        trie = LDPTrieHH(
            epsilon=EPS,
            users_per_layer=n,
            contribution_bound=B,
            max_prefixes=ETA,
            depth=15,
            passes=2,
            sampler="greedy",
            chunk_size=1 << 16,
        )
        split = _CpuSplit()
        result = trie.run(
            split.groups(model.groups(n, 30, rng)),
            model.lexicon,
            model.known,
            charger=EventLog(),
            rng=rng,
            echo=split.echo,
        )
        whole.__exit__()
        _layer_table(result.layers, split)
        t = whole.timing
        print(
            f"measured: {t.wall:.0f} s wall, {t.cpu:.0f} s CPU, {t.cpu_per_core:.0f} s CPU / core (one core) for "
            f"{result.users} users ({len(result.heavy_hitters)} words; load average {os.getloadavg()[0]:.1f})"
        )
        return
    with timed(cores=1) as clock:
        group = model.sample(n, rng)
    population, population_cpu = clock.timing.wall, clock.timing.cpu
    trie = LDPTrieHH(
        epsilon=EPS,
        users_per_layer=n,
        contribution_bound=B,
        max_prefixes=ETA,
        depth=2,
        passes=1,
        sampler="greedy",
        chunk_size=1 << 16,
    )
    split = _CpuSplit()
    result = trie.run(
        split.groups(iter([group, model.sample(n, rng)])),
        model.lexicon,
        model.known,
        charger=EventLog(),
        rng=rng,
        echo=split.echo,
    )
    _layer_table(result.layers, split)
    first, deep = result.layers
    wall = 2 * (first.seconds + 14 * deep.seconds) + 30 * population
    cpu_total = 2 * (first.cpu_seconds + 14 * deep.cpu_seconds) + 30 * population_cpu
    whole.__exit__()
    # LDPTrieHH's own layer timers: wall and CPU of this process, one core (CPU = CPU / core)
    print(f"{'step':<46} " + " ".join(f"{c:>12}" for c in columns("s")))
    for label, w, c in (
        ("population draw of one layer (5e5 users)", population, population_cpu),
        ("layer 1 (|Z_1| = 10100, d = 1)", first.seconds, first.cpu_seconds),
        (f"layer 2 (|Z_2| = {deep.candidates}, d = {deep.subset_size})", deep.seconds, deep.cpu_seconds),
        ("production total, 2 x (1 + 14 x 2) + 30 draws", wall, cpu_total),
    ):
        print(f"{label:<46} " + " ".join(f"{x:>12.1f}" for x in (w, c, c)))
    t = whole.timing
    print(
        f"(this measurement: {t.wall:.0f} s wall, {t.cpu:.0f} s CPU, {t.cpu_per_core:.0f} s CPU / core; "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    print("target: under 5 minutes wall on 2 cores; the estimate above is of one process on one core")


class _CpuSplit:
    """User and system CPU seconds of each layer (``os.times``), read when LDPTrieHH takes
    the layer's group (its layer timer starts right after) and when it reports the layer
    (right after the timer stops): the system part is mostly the kernel handing the layer
    fresh memory pages, the term that varies most between runs."""

    def __init__(self) -> None:
        self.starts: list[os.times_result] = []
        self.ends: list[os.times_result] = []

    def groups(self, groups):
        for group in groups:
            self.starts.append(os.times())
            yield group

    def echo(self, message: str) -> None:
        self.ends.append(os.times())
        print(message)

    def layer(self, k: int) -> tuple[float, float]:
        a, b = self.starts[k], self.ends[k]
        return b.user - a.user, b.system - a.system


def _layer_table(layers, split: _CpuSplit) -> None:
    """Every layer's own time (LDPTrieHH's timer: from the arrival of its group, so the
    population draw is not in it), its CPU split into user and system time (os.times,
    10 ms ticks) and users per CPU second (one core)."""
    wall_s, cpu_s, _ = columns("s")
    print(
        f"{'pass':>4} {'layer':>5} {'|Z_i|':>9} {'d':>3} {'users':>7} {wall_s:>8} {cpu_s:>8} {'user s':>7} "
        f"{'sys s':>6} {'users/CPU s':>12}"
    )
    for k, s in enumerate(layers):
        user, system = split.layer(k)
        print(
            f"{s.pass_index:>4} {s.layer:>5} {s.candidates:>9} {s.subset_size:>3} {s.users:>7} {s.seconds:>8.3f} "
            f"{s.cpu_seconds:>8.3f} {user:>7.2f} {system:>6.2f} {s.users / s.cpu_seconds:>12.4g}"
        )
    slowest = min(layers, key=lambda s: s.users / s.cpu_seconds)
    print(
        f"slowest layer: pass {slowest.pass_index} layer {slowest.layer}, "
        f"{slowest.users / slowest.cpu_seconds:.3g} users per CPU s (target >= 5e5 in every layer; "
        f"load average {os.getloadavg()[0]:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--users", type=int, default=500_000, help="users per layer in the aggregate row (default: the paper's N)"
    )
    ap.add_argument("--report-users", type=int, default=20_000, help="users in the votes=reports row")
    ap.add_argument(
        "--baseline-users",
        type=int,
        default=2000,
        help="most users per per-user-loop row (each row also stops after 5 s)",
    )
    ap.add_argument("--production", choices=["sample", "full", "skip"], default="full")
    ap.add_argument(
        "--quick", action="store_true", help="20,000 users, loops of at most 50 users or 1 s, no production run"
    )
    args = ap.parse_args()
    if args.quick:
        global _LOOP_SECONDS
        args.users, args.report_users, args.baseline_users, args.production = 20_000, 2000, 50, "skip"
        _LOOP_SECONDS = 1.0
    throughput(args.users, args.report_users, args.baseline_users)
    if args.production != "skip":
        production(args.production)


if __name__ == "__main__":
    main()
