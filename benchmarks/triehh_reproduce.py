"""Reproduce the shape of paper 001's Table 1 and Figure 1 on the simulated population.

    python benchmarks/triehh_reproduce.py [--seeds 3] [--out benchmarks/results] [--quick | --paper-scale]

Sun et al. 2024 (arXiv:2404.11607), Section 4, on Gboard en-US users:

* Table 1 (eps = 10, D = 15, T = 60, 1.5e7 users in all): coverage 77.1% with
  GreedySampling and one pass (N = 1e6), 83.1% with RandomSampling and one pass, 92.1% with
  RandomSampling and two passes (N = 5e5 per pass).
* Figure 1 (GreedySampling, one pass, N = 1e6): coverage grows with the local epsilon and
  is close to the no-LDP coverage from eps = 10 on.

Here, on :class:`~privreg.plugins.heavy_hitters.population.PopulationModel` (wordfreq
English, 30,000 words, the 1,000 most frequent known, 60 days at 0.5 unknown words a day,
half of them the user's own bursty words), at a smaller scale: Table 1 with N = 20,000
(10,000 per pass for two passes), B = 2, eta_max = 1,000, D = 15, mean and standard
deviation over ``--seeds`` runs; Figure 1 with N = 20,000, B = 2, eta_max = 300 (smaller,
so that small epsilons stay affordable: Subset Selection reports hold
``d = ceil(s / (e^eps + 1))`` items), D = 15, eps from 4 to 14, and eps = 40 as the no-LDP
reference (a report then differs from its input with probability below 1e-12).
``--quick``: N = 8,000, eta_max = 400 for Table 1, D = 12, one seed, eps in {4, 6, 10, 14}.
``--paper-scale``: Table 1 only, with the paper's N = 1e6 (5e5 per pass), B = 60 and
eta_max = 1e4 on 100k words (the 5k most frequent known), one seed: about 6 minutes.
The two-pass gain needs the capacity-limited regime (eta_max small against what N users
hold): with eta_max much larger than N can fill, halving N per pass only costs. Coverage is measured
on the simulation's law (an infinitely large test population). Absolute coverages are not
comparable with the paper's (a different population and scale): the orderings are.

Writes ``triehh_table1.md``, ``triehh_figure1.csv`` and ``triehh_figure1.png`` to
``--out``. Takes about 10 minutes on one core (``--quick``: about two). Every row also
reports the time of its runs (benchmarks/timing.py: wall s, CPU s, CPU s / core; one
process, one core). No speed baseline: the rows compare samplers, passes and epsilons
against the paper's published coverages.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from timing import columns, header, timed

from privreg import EventLog, InsecureReproducibleRandom
from privreg.plugins.heavy_hitters.population import PopulationModel, english_word_law
from privreg.plugins.heavy_hitters.triehh import LDPTrieHH

PAPER_TABLE_1 = {"GS, one pass": 77.1, "RS, one pass": 83.1, "RS, two passes": 92.1}
SETTINGS = {"GS, one pass": ("greedy", 1), "RS, one pass": ("random", 1), "RS, two passes": ("random", 2)}
NO_LDP = 40.0


def _model() -> PopulationModel:
    return PopulationModel(
        law=english_word_law(30_000),
        known_words=1000,
        days=60,
        oov_per_day=0.5,
        personal_share=0.5,
        personal_words=2,
        personal_pool=15_000,
        depth=15,
    )


def coverage(
    model: PopulationModel,
    *,
    epsilon: float,
    users: int,
    sampler: str,
    passes: int,
    max_prefixes: int,
    seed: int,
    bound: int = 2,
    depth: int = 15,
) -> float:
    """Coverage of one LDP TrieHH run with ``users`` users in all, split over the passes."""
    per_layer = users // passes
    trie = LDPTrieHH(
        epsilon=epsilon,
        users_per_layer=per_layer,
        contribution_bound=bound,
        max_prefixes=max_prefixes,
        depth=depth,
        sampler=sampler,
        passes=passes,
    )
    rng = InsecureReproducibleRandom(seed=seed)
    result = trie.run(
        model.groups(per_layer, depth * passes, rng), model.lexicon, model.known, charger=EventLog(), rng=rng
    )
    return model.coverage(result.heavy_hitters)


def table_1(
    model: PopulationModel,
    seeds: int,
    users: int,
    eta: int,
    depth: int,
    out: Path,
    *,
    bound: int = 2,
    filename: str = "triehh_table1.md",
    population: str = "",
) -> None:
    rows = [
        "| setting | coverage (this simulation) | paper (Gboard en-US) | "
        + " | ".join(f"all seeds {c}" for c in columns("s"))
        + " |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    means = []
    for name, (sampler, passes) in SETTINGS.items():
        with timed(cores=1) as clock:
            values = [
                100
                * coverage(
                    model,
                    epsilon=10.0,
                    users=users,
                    sampler=sampler,
                    passes=passes,
                    max_prefixes=eta,
                    depth=depth,
                    seed=seed,
                    bound=bound,
                )
                for seed in range(1, seeds + 1)
            ]
        means.append(float(np.mean(values)))
        spread = f" +/- {np.std(values, ddof=1):.1f}" if seeds > 1 else ""
        rows.append(
            f"| {name} | {np.mean(values):.1f}%{spread} | {PAPER_TABLE_1[name]}% | "
            + " | ".join(clock.timing.cells(".1f"))
            + " |"
        )
        print(f"  {name}: {', '.join(f'{x:.1f}%' for x in values)} ({clock.timing.wall:.0f} s wall)", flush=True)
    ordered = means[0] < means[1] < means[2]
    rows.append("")
    rows.append(
        f"eps = 10, D = {depth}, T = 60, B = {bound}, eta_max = {eta}, {users} users per layer in all "
        f"(two passes: {users // 2} each), {seeds} seed(s){population}. Paper's ordering GS one-pass "
        f"< RS one-pass < RS two-pass reproduced: {'yes' if ordered else 'NO'}."
    )
    text = "\n".join(rows)
    (out / filename).write_text(text + "\n", encoding="utf-8")
    print(text)


def figure_1(model: PopulationModel, epsilons: list[float], users: int, depth: int, out: Path) -> None:
    points, times = [], []
    for eps in epsilons + [NO_LDP]:
        with timed(cores=1) as clock:
            c = 100 * coverage(
                model, epsilon=eps, users=users, sampler="greedy", passes=1, max_prefixes=300, depth=depth, seed=1
            )
        points.append((eps, c))
        times.append(clock.timing)
        print(
            f"  eps = {eps:g}: coverage {c:.1f}%, "
            + ", ".join(f"{label} {v}" for label, v in zip(columns("s"), clock.timing.cells(".1f"))),
            flush=True,
        )
    with (out / "triehh_figure1.csv").open("w", encoding="utf-8") as fh:
        fh.write("epsilon,coverage_percent,wall_s,cpu_s,cpu_s_per_core\n")
        fh.writelines(
            f"{e:g},{c:.3f},{t.wall:.3f},{t.cpu:.3f},{t.cpu_per_core:.3f}\n" for (e, c), t in zip(points, times)
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    xs, ys = zip(*points[:-1])
    ax.plot(xs, ys, "o-", color="tab:blue", label="LDP TrieHH (GreedySampling, one pass)")
    ax.axhline(points[-1][1], linestyle=":", color="tab:orange", label="no LDP")
    ax.set_xlabel("local privacy parameter epsilon")
    ax.set_ylabel("estimated coverage (%)")
    ax.set_title(f"Coverage vs epsilon (simulated, N = {users}, eta_max = 300, D = {depth})", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "triehh_figure1.png", dpi=120)
    plt.close(fig)
    print(f"  wrote {out / 'triehh_figure1.png'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    ap.add_argument("--quick", action="store_true", help="one seed, fewer users and epsilons")
    ap.add_argument(
        "--paper-scale",
        action="store_true",
        help="Table 1 only, at the paper's scale: 1e6 users per layer (5e5 per pass with two "
        "passes), B = 60, eta_max = 1e4, 100k words with the 5k most frequent known",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(header("Paper 001, Table 1 and Figure 1 in shape", processes=1, cores=1))
    if args.paper_scale:
        big = PopulationModel(law=english_word_law(100_000), known_words=5000, days=60, depth=15, personal_pool=50_000)
        _ = big.lexicon.codes  # encode the lexicon before timing
        print("Table 1 at the paper's scale (one seed, 15M users per setting)")
        table_1(
            big,
            1,
            1_000_000,
            10_000,
            15,
            args.out,
            bound=60,
            filename="triehh_table1_paper_scale.md",
            population="; population: 100k wordfreq words, the 5k most frequent known",
        )
        return
    model = _model()
    _ = model.lexicon.codes  # encode the lexicon before timing
    if args.quick:
        users, eta, depth, seeds, epsilons = 8000, 400, 12, 1, [4.0, 6.0, 10.0, 14.0]
    else:
        users, eta, depth, seeds, epsilons = 20_000, 1000, 15, args.seeds, [4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0]
    print("Table 1: coverage by local sampler and number of passes")
    table_1(model, seeds, users, eta, depth, args.out)
    print("\nFigure 1: coverage against the local epsilon")
    figure_1(model, epsilons, users, depth, args.out)


if __name__ == "__main__":
    main()
