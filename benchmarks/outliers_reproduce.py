"""Reproduce paper 003's Figures 3-4 (noise of the outlier count, smooth vs global) and
Figure 5 (precision and recall of top-h subspace discovery on Synthetic 2).

    python benchmarks/outliers_reproduce.py [--out benchmarks/results] [--runs 1000] [--quick]

Okada et al. 2015 (paper 003), Section 6:

* Figures 3-4 (Table 1: N = 50, k = 3, delta = 0.01, eps = 0.1..0.9; Synthetic 1 in 2-d,
  r = 1.1; Adult 1 in 7-d, r = 0.35): the standard deviation of the smooth-sensitivity
  Gaussian (Theorem 2, ``S(X) / alpha``) against the global-sensitivity Gaussian of
  Theorem 1 (``GS sqrt(2 ln(2/delta)) / eps``) at eq. (18)'s *lower* bound; the paper
  reports the global one 10-30 times larger, and the smooth one below 7 for eps >= 0.7.
  We also show Theorem 1 at the valid upper bound ``GS_UB = min(N, k K_d + 1)`` and the
  exact analytic Gaussian at ``GS_UB`` (Balle-Wang 2018), the only calibrations that are
  private. Means over ``--datasets`` draws of each data set.
* Figure 5 (Table 2: Synthetic 2, N = 500, d = 10, k = 3, r = 0.13; 1-attribute
  subspaces, the outliers live in attributes 0 and 1): precision and recall of top-h for
  eps from 0.2 to 3.2, averaged over ``--runs`` runs (``--datasets`` data sets, runs
  split evenly). Two rows per setting: ``privreg`` (draws at eps/h with weights
  ``exp(eps u / 2h)``: eps-DP, as charged) and ``paper weights`` (``exp(eps u / h)``, what
  Algorithm 3 prints: it spends 2 eps).

Data choices (see :mod:`privreg.plugins.outliers.datasets`): synthetic data unscaled (their
inliers are already standard normal); Adult standardised with the mean and deviation of
the full ``adult.data`` when ``../shared/data/adult`` exists (public constants, not the
sample's), else of the bundled slice. A scale-up table (Adult with N = 500 and 2,000)
shows where the smooth bound beats the global one. Writes
``outliers_figures34.{md,csv,png}``, ``outliers_scale.{md,csv}`` and
``outliers_figure5.{md,csv,png}`` to ``--out``. A few minutes (``--quick``: seconds).
Every table row also reports the time of its own computation (benchmarks/timing.py:
wall s, CPU s, CPU s / core; one process, one core). No speed baseline: the rows compare
calibrations (Theorem 1, Theorem 2, the analytic Gaussian) and selection weights.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np
from timing import Timing, columns, header, timed

from privreg import EventLog, InsecureReproducibleRandom
from privreg.accountant.calibration import calibrate_gaussian_sigma
from privreg.mechanisms.smooth_gaussian import smooth_gaussian_parameters
from privreg.plugins.outliers.datasets import load_adult_outliers, paper_sample, synthetic_1, synthetic_2
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper, paper_lower_bound
from privreg.plugins.outliers.release import all_subspaces, select_top_h, subspace_utilities
from privreg.plugins.outliers.smooth import smooth_upper_bound

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT.parent / "shared" / "data" / "adult" / "adult.data"
DELTA = 0.01
EPS_34 = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
EPS_5 = [0.2, 0.4, 0.8, 1.6, 3.2]
HS = [1, 2, 3, 4]
TIME_KEYS = ("wall_s", "cpu_s", "cpu_s_per_core")


def _times(t: Timing) -> dict:
    return dict(zip(TIME_KEYS, (t.wall, t.cpu, t.cpu_per_core)))


def _time_cells(r: dict) -> str:
    return " | ".join(f"{r[k]:.2f}" for k in TIME_KEYS)


def _adult_sets(count: int) -> tuple[list[np.ndarray], str]:
    full = load_adult_outliers(ADULT if ADULT.is_file() else None)
    mu, sd = full.points.mean(axis=0), full.points.std(axis=0)
    source = "adult.data" if ADULT.is_file() else "bundled 2,000-row slice"
    return [(paper_sample(full, inliers=45, outliers=5, seed=s).points - mu) / sd for s in range(count)], source


def figures_34(datasets: int) -> tuple[list[dict], str]:
    adult, source = _adult_sets(datasets)
    sets = {"Synthetic 1": ([synthetic_1(s).points for s in range(datasets)], 1.1), "Adult 1": (adult, 0.35)}
    rows = []
    for name, (xs, r) in sets.items():
        n, d = xs[0].shape
        gs_lo, gs_up = paper_lower_bound(n=n, k=3, d=d), global_sensitivity_upper(n=n, k=3, d=d)
        counts = np.mean([outlier_count(x, k=3, radius=r) for x in xs])
        for eps in EPS_34:
            alpha, beta = smooth_gaussian_parameters(epsilon=eps, delta=DELTA)
            with timed(cores=1) as clock:
                smooth = float(np.mean([smooth_upper_bound(x, k=3, radius=r, beta=beta).value for x in xs]))
            factor = math.sqrt(2 * math.log(2 / DELTA)) / eps  # Theorem 1
            rows.append(
                {
                    "data": name,
                    "d": d,
                    "r": r,
                    "epsilon": eps,
                    "true_count": counts,
                    "smooth_bound": smooth,
                    "sigma_smooth": smooth / alpha,
                    "GS_lower": gs_lo,
                    "sigma_global_lower": gs_lo * factor,
                    "GS_upper": gs_up,
                    "sigma_global_upper": gs_up * factor,
                    "sigma_analytic_upper": calibrate_gaussian_sigma(epsilon=eps, delta=DELTA, sensitivity=gs_up),
                    **_times(clock.timing),
                }
            )
    return rows, source


def scale_up() -> list[dict]:
    """Where the smooth bound pays off: Adult in 7-d with more records (one sample each):
    ``GS_UB = min(N, k K_7 + 1) = 403`` stops growing while ``S(X)`` stays small."""
    full = load_adult_outliers(ADULT if ADULT.is_file() else None)
    mu, sd = full.points.mean(axis=0), full.points.std(axis=0)
    rows = []
    # N = 2,000 at eps = 0.5 takes ~15 minutes (Algorithm 2 walks ~100 distances), so only 0.9
    for inl, out, epsilons in ((475, 25, (0.5, 0.9)), (1900, 100, (0.9,))):
        if inl + out > full.n:
            continue
        x = (paper_sample(full, inliers=inl, outliers=out, seed=0).points - mu) / sd
        gs_up = global_sensitivity_upper(n=x.shape[0], k=3, d=7)
        for eps in epsilons:
            alpha, beta = smooth_gaussian_parameters(epsilon=eps, delta=DELTA)
            with timed(cores=1) as clock:
                smooth = smooth_upper_bound(x, k=3, radius=0.35, beta=beta).value
            rows.append(
                {
                    "N": x.shape[0],
                    "epsilon": eps,
                    "true_count": outlier_count(x, k=3, radius=0.35),
                    "smooth_bound": smooth,
                    "sigma_smooth": smooth / alpha,
                    "GS_upper": gs_up,
                    "sigma_global_upper": gs_up * math.sqrt(2 * math.log(2 / DELTA)) / eps,
                    "sigma_analytic_upper": calibrate_gaussian_sigma(epsilon=eps, delta=DELTA, sensitivity=gs_up),
                    **_times(clock.timing),
                }
            )
    return rows


def _table_scale(rows: list[dict]) -> str:
    out = [
        "Scale-up: Adult, 7 attributes, 5% outliers, r = 0.35, delta = 0.01 (one sample per N)",
        "",
        "| N | eps | true count | S(X) | sd smooth | sd global @ GS_UB (Thm 1) | sd analytic @ GS_UB "
        "| ratio analytic/smooth | " + " | ".join(f"S(X) {c}" for c in columns("s")) + " |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['N']} | {r['epsilon']} | {r['true_count']} | {r['smooth_bound']:.2f} | "
            f"{r['sigma_smooth']:.0f} | {r['sigma_global_upper']:.0f} (GS {r['GS_upper']}) | "
            f"{r['sigma_analytic_upper']:.0f} | {r['sigma_analytic_upper'] / r['sigma_smooth']:.2f} | "
            f"{_time_cells(r)} |"
        )
    return "\n".join(out)


def figure_5(runs: int, datasets: int) -> list[dict]:
    cands = all_subspaces(10, 1)
    truth = {(0,), (1,)}
    utilities = [subspace_utilities(synthetic_2(s).points, k=3, radius=0.13, candidates=cands) for s in range(datasets)]
    rng = InsecureReproducibleRandom(seed=5)
    per_set = max(1, runs // datasets)
    rows = []
    for variant, scale in (("privreg", 1.0), ("paper weights", 2.0)):
        for h in HS:
            for eps in EPS_5:
                tp = 0
                with timed(cores=1) as clock:
                    for u in utilities:
                        for _ in range(per_set):
                            picks, _ = select_top_h(u, h=h, epsilon=scale * eps, charger=EventLog(), rng=rng)
                            tp += sum(cands[i] in truth for i in picks)
                total = per_set * len(utilities)
                rows.append(
                    {
                        "variant": variant,
                        "h": h,
                        "epsilon": eps,
                        "epsilon_spent": scale * eps,
                        "precision": tp / (total * h),
                        "recall": tp / (total * len(truth)),
                        "runs": total,
                        **_times(clock.timing),
                    }
                )
    return rows


def _write(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _table_34(rows: list[dict], source: str) -> str:
    out = [
        f"Figures 3-4: noise standard deviation of the outlier count (delta = {DELTA}, k = 3, N = 50; "
        f"means over the data sets; Adult scaled with {source} constants)",
        "",
        "| data | eps | true count | S(X) | sd smooth (Thm 2) | sd global @ eq.(18) LB | ratio LB/smooth "
        "| sd global @ GS_UB (Thm 1) | sd analytic @ GS_UB | ratio UB/smooth | "
        + " | ".join(f"S(X) {c}" for c in columns("s"))
        + " |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['data']} (d={r['d']}, r={r['r']}) | {r['epsilon']:.1f} | {r['true_count']:.1f} | "
            f"{r['smooth_bound']:.2f} | {r['sigma_smooth']:.1f} | {r['sigma_global_lower']:.1f} "
            f"(GS {r['GS_lower']}) | {r['sigma_global_lower'] / r['sigma_smooth']:.2f} | "
            f"{r['sigma_global_upper']:.1f} (GS {r['GS_upper']}) | {r['sigma_analytic_upper']:.1f} | "
            f"{r['sigma_global_upper'] / r['sigma_smooth']:.2f} | {_time_cells(r)} |"
        )
    return "\n".join(out)


def _table_5(rows: list[dict]) -> str:
    out = [
        "Figure 5: top-h subspace discovery on Synthetic 2 (true subspaces {x0}, {x1}; "
        f"{rows[0]['runs']} runs per cell)",
        "",
        "| variant | h | "
        + " | ".join(f"eps {e:g}" for e in EPS_5)
        + " | "
        + " | ".join(f"all eps {c}" for c in columns("s"))
        + " |",
        "|---|---|" + "---|" * (len(EPS_5) + 3),
    ]
    for variant in ("privreg", "paper weights"):
        for h in HS:
            cells = [r for r in rows if r["variant"] == variant and r["h"] == h]
            spent = {k: sum(c[k] for c in cells) for k in TIME_KEYS}
            out.append(
                f"| {variant} | {h} | "
                + " | ".join(f"P {c['precision']:.2f} / R {c['recall']:.2f}" for c in cells)
                + f" | {_time_cells(spent)} |"
            )
    out.append("\n'paper weights' at eps really spends 2 eps (Theorem 3/7 trap); privreg at eps spends eps.")
    return "\n".join(out)


def _plot_34(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, name in zip(axes, ("Synthetic 1", "Adult 1")):
        rs = [r for r in rows if r["data"] == name]
        eps = [r["epsilon"] for r in rs]
        ax.plot(eps, [r["sigma_smooth"] for r in rs], "o-", label="smooth (Thm 2)")
        ax.plot(eps, [r["sigma_global_lower"] for r in rs], "s--", label="global, eq.(18) lower bound")
        ax.plot(eps, [r["sigma_global_upper"] for r in rs], "^-", label="global, GS_UB (Thm 1)")
        ax.plot(eps, [r["sigma_analytic_upper"] for r in rs], "v:", label="analytic Gaussian, GS_UB")
        ax.set_yscale("log")
        ax.set_title(f"{name} (d = {rs[0]['d']}, true count {rs[0]['true_count']:.1f})")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("noise standard deviation")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_5(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric in zip(axes, ("precision", "recall")):
        for colour, h in enumerate(HS):
            for variant, style in (("privreg", "-"), ("paper weights", "--")):
                rs = [r for r in rows if r["variant"] == variant and r["h"] == h]
                ax.plot(
                    [r["epsilon"] for r in rs],
                    [r[metric] for r in rs],
                    style,
                    marker="o",
                    color=f"C{colour}",
                    label=f"h={h} ({variant})",
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(EPS_5, [f"{e:g}" for e in EPS_5])
        ax.set_xlabel("epsilon (claimed)")
        ax.set_ylabel(metric)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("Synthetic 2: top-h subspaces (solid: eps-DP as charged; dashed: paper's weights, 2 eps)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--datasets", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 data sets, 150 runs, no scale-up table")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.datasets = 150, 3
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(header("Paper 003, Figures 3-5 (time columns: each row's own computation)", processes=1, cores=1) + "\n")
    rows34, source = figures_34(args.datasets)
    text34 = _table_34(rows34, source)
    print(text34, "\n")
    if not args.quick:
        rows_scale = scale_up()
        text_scale = _table_scale(rows_scale)
        print(text_scale, "\n")
        _write(rows_scale, args.out / "outliers_scale.csv")
        (args.out / "outliers_scale.md").write_text(text_scale + "\n", encoding="utf-8")
    rows5 = figure_5(args.runs, args.datasets)
    text5 = _table_5(rows5)
    print(text5)
    for rows, text, stem, plot in (
        (rows34, text34, "outliers_figures34", _plot_34),
        (rows5, text5, "outliers_figure5", _plot_5),
    ):
        _write(rows, args.out / f"{stem}.csv")
        (args.out / f"{stem}.md").write_text(text + "\n", encoding="utf-8")
        plot(rows, args.out / f"{stem}.png")
    print(f"\nwrote outliers_figures34.* and outliers_figure5.* to {args.out} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
