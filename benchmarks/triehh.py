"""LDP TrieHH speed (paper 001): users simulated per second against per-user loops, and
the wall time of the paper's production configuration, in one run.

    python benchmarks/triehh.py [--users N] [--report-users N] [--baseline-users N]
                                [--production sample|full|skip]

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
- per-user loop, privreg: the same SubsetSelection called once per user (B reports);
- per-user loop, multi-freq-ldpy: its numba ``SS_Client`` once per report (pip install
  multi-freq-ldpy; numpy's insecure generator, and sub_k rounded with rint, not ceil).

Per-user loops stop after 5 s (at least one user) and report the rate they reached.

Production configuration (Section 4.1): N = 5e5 users per layer, B = 60, eta_max = 1e4,
D = 15, two passes, 15M simulated users (wordfreq English, 100k words, the top 5k known,
T = 60 days). ``full`` (default) runs the 30 layers for real; ``sample`` runs every kind of layer once at full size -- the
population draw of a layer, layer 1 and layer 2 (whose candidates already number
eta_max |X|, like every later layer) -- and adds up 2 x (layer 1 + 14 x layer 2) + 30
population draws. Target (issue #6): >= 5e5 users/s
per core, production under 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from privreg import EventLog
from privreg.core.randomness import SecureRandom
from privreg.plugins.heavy_hitters.population import PopulationModel, english_word_law
from privreg.plugins.heavy_hitters.sampling import contribution_counts, sample_contributions
from privreg.plugins.heavy_hitters.triehh import LDPTrieHH, layer_votes
from privreg.mechanisms.subset_selection import SubsetSelection

EPS, B, ETA, ALPHABET = 10.0, 60, 10_000, 101
_LOOP_SECONDS = 5.0
SHAPES = {"layer 1": (ALPHABET - 1) * ALPHABET, "deep layer": ETA * ALPHABET}


def _model() -> PopulationModel:
    return PopulationModel(law=english_word_law(100_000), known_words=5000, days=60, depth=15,
                           personal_pool=50_000)


def _layer_inputs(model: PopulationModel, users: int, candidates: int, rng) -> np.ndarray:
    """One layer's report inputs: the users' words mapped to candidate prefix codes by a
    fixed scramble (the cost does not depend on which codes they are), GreedySampling."""
    group = model.sample(users, rng)
    codes = (group.words * 7919) % candidates
    return sample_contributions(group.owners, codes, group.counts, num_users=users, bound=B, sampler="greedy",
                                dummy=candidates, rng=rng), group


def _aggregate(model, users, candidates, rng) -> tuple[float, float]:
    """The default path: selection counts, then the layer's vote sum sampled directly.
    (users per wall second, users per CPU second)."""
    group = model.sample(users, rng)  # not timed: the population is the simulation's input
    ss = SubsetSelection(epsilon=EPS, s=candidates + 1)
    start, cpu = time.perf_counter(), time.process_time()
    codes = (group.words * 7919) % candidates
    counts = contribution_counts(group.owners, codes, group.counts, num_users=users, bound=B, sampler="greedy",
                                 dummy=candidates, rng=rng)
    ss.vote_counts_from_histogram(counts, charger=EventLog(), rng=rng)
    return users / (time.perf_counter() - start), users / (time.process_time() - cpu)


def _vectorised(model, users, candidates, rng) -> tuple[float, float]:
    """``votes="reports"``: every report drawn by the exact sampler, chunk by chunk."""
    group = model.sample(users, rng)
    ss = SubsetSelection(epsilon=EPS, s=candidates + 1)
    start, cpu = time.perf_counter(), time.process_time()
    codes = (group.words * 7919) % candidates
    inputs = sample_contributions(group.owners, codes, group.counts, num_users=users, bound=B,
                                  sampler="greedy", dummy=candidates, rng=rng)
    layer_votes(ss, inputs, charger=EventLog(), rng=rng, chunk_size=1 << 16)
    return users / (time.perf_counter() - start), users / (time.process_time() - cpu)


def _timed_loop(users: int, step) -> tuple[float, float]:
    """(users per wall second, per CPU second) of ``step(j)`` over at most ``users`` users,
    stopping after ``_LOOP_SECONDS`` (at least one user): the slow baselines are time-boxed."""
    start, cpu = time.perf_counter(), time.process_time()
    done = 0
    while done < users and (done == 0 or time.perf_counter() - start < _LOOP_SECONDS):
        step(done)
        done += 1
    return done / (time.perf_counter() - start), done / (time.process_time() - cpu)


def _loop_privreg(model, users, candidates, rng) -> tuple[float, float]:
    inputs, _ = _layer_inputs(model, users, candidates, rng)
    ss = SubsetSelection(epsilon=EPS, s=candidates + 1)
    votes = np.zeros(ss.s, dtype=np.int64)
    log = EventLog()

    def user(j):
        out = ss.randomize(inputs[j * B:(j + 1) * B], charger=log, rng=rng)
        np.add.at(votes, out.reports.ravel(), 1)

    return _timed_loop(users, user)


def _loop_multi_freq(model, users, candidates, rng) -> tuple[float, float] | None:
    try:
        from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Client
    except ImportError:
        return None
    inputs, _ = _layer_inputs(model, users, candidates, rng)
    k = candidates + 1
    SS_Client(0, k, EPS)  # numba compilation, not timed
    votes = np.zeros(k, dtype=np.int64)

    def user(j):
        for x in inputs[j * B:(j + 1) * B]:
            votes[SS_Client(int(x), k, EPS)] += 1

    return _timed_loop(users, user)


def throughput(users: int, report_users: int, baseline_users: int) -> None:
    model, rng = _model(), SecureRandom()
    model.lexicon.codes
    print(f"Users simulated per second at eps = {EPS:g}, B = {B} reports per user (one process; "
          f"{users} users per layer for the aggregate row, {report_users} for the per-report row)")
    print(f"{'layer':<11} {'|Z_i|':>9} {'d':>3} {'method':<44} {'users/s':>10} {'users/CPU-s':>12} "
          f"{'reports/CPU-s':>13} {'vs loop':>8}")
    for name, candidates in SHAPES.items():
        d = SubsetSelection(epsilon=EPS, s=candidates + 1).subset_size
        loop = _loop_privreg(model, baseline_users, candidates, rng)
        rows = [("privreg, aggregate votes (default)", _aggregate(model, users, candidates, rng)),
                ("privreg, every report drawn (votes=reports)", _vectorised(model, report_users, candidates, rng)),
                ("per-user loop, privreg SubsetSelection", loop),
                ("per-user loop, multi-freq-ldpy SS_Client", _loop_multi_freq(model, baseline_users, candidates, rng))]
        for method, rate in rows:
            if rate is None:
                print(f"{name:<11} {candidates:>9} {d:>3} {method:<44} {'not installed':>10}")
                continue
            print(f"{name:<11} {candidates:>9} {d:>3} {method:<44} {rate[0]:>10.4g} {rate[1]:>12.4g} "
                  f"{rate[1] * B:>13.3g} {rate[1] / loop[1]:>7.3g}x")
    print(f"target: >= 5e5 users/s per core ('vs loop': CPU-time rate over the privreg per-user loop; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)\n")


def production(mode: str) -> None:
    model, rng = _model(), SecureRandom()
    model.lexicon.codes
    n = 500_000
    print(f"Production configuration: N = {n} per layer, B = {B}, eta_max = {ETA}, D = 15, two passes, "
          f"15M users ({mode})")
    started = time.perf_counter()
    cpu = time.process_time()
    if mode == "full":
        trie = LDPTrieHH(epsilon=EPS, users_per_layer=n, contribution_bound=B, max_prefixes=ETA, depth=15,
                         passes=2, sampler="greedy", chunk_size=1 << 16)
        result = trie.run(model.groups(n, 30, rng), model.lexicon, model.known, charger=EventLog(), rng=rng,
                          echo=print)
        wall = time.perf_counter() - started
        print(f"measured: {wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU for {result.users} users "
              f"({len(result.heavy_hitters)} words; load average {os.getloadavg()[0]:.1f})")
        return
    t0, c0 = time.perf_counter(), time.process_time()
    group = model.sample(n, rng)
    population, population_cpu = time.perf_counter() - t0, time.process_time() - c0
    trie = LDPTrieHH(epsilon=EPS, users_per_layer=n, contribution_bound=B, max_prefixes=ETA, depth=2,
                     passes=1, sampler="greedy", chunk_size=1 << 16)
    result = trie.run(iter([group, model.sample(n, rng)]), model.lexicon, model.known, charger=EventLog(),
                      rng=rng, echo=print)
    first, deep = result.layers
    wall = 2 * (first.seconds + 14 * deep.seconds) + 30 * population
    cpu_total = 2 * (first.cpu_seconds + 14 * deep.cpu_seconds) + 30 * population_cpu
    print(f"{'step':<46} {'wall s':>8} {'CPU s':>8}")
    print(f"{'population draw of one layer (5e5 users)':<46} {population:>8.1f} {population_cpu:>8.1f}")
    print(f"{'layer 1 (|Z_1| = 10100, d = 1)':<46} {first.seconds:>8.1f} {first.cpu_seconds:>8.1f}")
    print(f"{f'layer 2 (|Z_2| = {deep.candidates}, d = {deep.subset_size})':<46} "
          f"{deep.seconds:>8.1f} {deep.cpu_seconds:>8.1f}")
    print(f"{'production total, 2 x (1 + 14 x 2) + 30 draws':<46} {wall:>8.0f} {cpu_total:>8.0f}  "
          f"(CPU: {cpu_total / 60:.1f} min on one core, {cpu_total / 120:.1f} min if split over 2)")
    print(f"(this measurement: {time.perf_counter() - started:.0f} s wall, "
          f"{time.process_time() - cpu:.0f} s CPU; load average {os.getloadavg()[0]:.1f})")
    print("target: under 5 minutes on 2 cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=500_000,
                    help="users per layer in the aggregate row (default: the paper's N)")
    ap.add_argument("--report-users", type=int, default=20_000, help="users in the votes=reports row")
    ap.add_argument("--baseline-users", type=int, default=2000,
                    help="most users per per-user-loop row (each row also stops after 5 s)")
    ap.add_argument("--production", choices=["sample", "full", "skip"], default="full")
    args = ap.parse_args()
    throughput(args.users, args.report_users, args.baseline_users)
    if args.production != "skip":
        production(args.production)


if __name__ == "__main__":
    main()
