"""Workflows of the ``outliers`` plugin: ``privreg run outlier-count`` and
``privreg run outlier-subspaces`` on a CSV file (default: the bundled Adult slice for the
count, generated paper data for the subspaces)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import numpy as np
from scipy.spatial import cKDTree

from privreg.analysis.report import Level
from privreg.core.cost import Cost
from privreg.core.errors import PrivregValueError
from privreg.core.files import write_text
from privreg.core.params import POSITIVE, Spec
from privreg.core.validation import split_columns
from privreg.core.workflow import WorkflowContext, WorkflowResult
from privreg.plugins.outliers.datasets import (
    OutlierData,
    load_adult_outliers,
    read_csv_points,
    synthetic_1,
    synthetic_2,
)
from privreg.plugins.outliers.definitions import as_dataset
from privreg.plugins.outliers.params import ColumnNames, Columns, Cover, Epsilon, Input, K, Step, WorkflowDelta
from privreg.plugins.outliers.params import radius as radius_spec
from privreg.plugins.outliers.release import DEFAULT_STEP, all_subspaces, outlier_count_mechanism, top_h_subspaces
from privreg.plugins.outliers.report import report_count, selection_report

__all__ = ["COUNT_COLUMNS", "outlier_count_workflow", "outlier_subspaces_workflow", "estimate_outliers"]

#: outlier-count's columns of the bundled Adult slice without --input (years, hours)
COUNT_COLUMNS = ("age", "hours-per-week")


def _columns(text: str) -> list[str] | None:
    return split_columns("columns", text) or None


def estimate_outliers(
    points: np.ndarray, radius: float, cover: str, covers: int = 1, *, from_data: bool = False
) -> Cost:
    """Peak memory and time of the smooth bound of ``covers`` subspaces of ``points``
    (``m`` records, ``d`` columns), with ``c`` the most records within ``2 radius`` of one
    record (one KD-tree query): memory for the pairs within ``2r`` (``m c`` of 48 bytes) and
    the KD-trees; time ``1 us`` per pair and record for ``d <= 2``; for ``d >= 3``
    ``0.2 us * m c^3`` for truss/core/projection, and for ``exact`` the branch and
    bound's worst case, ``1 us * m 2^c`` ball tests (usually far fewer: pass ``--cover
    truss``, polynomial and close to exact, or raise ``--max-seconds``).

    ``c`` is a statistic of the data: unless ``from_data`` (a curator's own check, or
    public bundled data), the estimate takes its public worst case ``c = m`` (every record
    within ``2 radius`` of every other), so that the estimate -- and a refusal by the run
    limits -- depends only on the public sizes ``m`` and ``d`` (the number of records is
    public under these workflows' replace-one guarantee). Caveat: the running time itself
    depends on the data."""
    m, d = points.shape
    if from_data:
        scaled = points / math.sqrt(d)
        c = int(cKDTree(scaled).query_ball_point(scaled, 2 * radius, return_length=True).max()) if m else 0
    else:
        c = m
    memory = 48 * m * c + 200 * m * d + (1 << 20)
    if d <= 2:
        seconds = 1e-6 * m * (c + 1) * max(1.0, math.log2(c + 1))
    elif cover == "exact":
        seconds = 1e-6 * m * 2.0 ** min(c, 1000)
    else:
        seconds = 2e-7 * m * (c + 1) ** 3
    how = (
        "from the data's neighbourhood sizes"
        if from_data
        else "at the worst case of every record near every other (public sizes only; --curator estimates from "
        "the data's neighbourhoods, a check private against no one who sees it)"
    )
    basis = f"{m} records x {d} column(s), cover {cover}, {how}" + (f", {covers} subspaces" if covers > 1 else "")
    return Cost(memory_bytes=memory, seconds=covers * seconds, basis=basis)


def _default_data(name: str) -> tuple[OutlierData, str]:
    """The data used without an input file, and how the summary names them."""
    if name == "adult":
        return load_adult_outliers(columns=COUNT_COLUMNS), "bundled UCI Adult slice"
    make = synthetic_1 if name == "synthetic-1" else synthetic_2
    return make(0), f"generated {make.__name__} (paper 003), seed 0"


def _load(input: Path | None, columns: str, column_names: str, default: str) -> tuple[np.ndarray, tuple[str, ...], str]:
    given = split_columns("column_names", column_names) or None
    if input is None:
        if _columns(columns) or given:
            which = "columns" if _columns(columns) else "column_names"
            raise PrivregValueError(f"{which} needs an input file; without one the workflow uses its {default} data")
        data, source = _default_data(default)
        return data.points, data.columns, source
    points, picked = read_csv_points(input, _columns(columns), column_names=given)
    # the range rule before the cost estimate, whose KD-tree overflows past it
    return as_dataset(points, "the records of --input"), picked, str(input)


def _write(context: WorkflowContext, metrics: dict) -> dict[str, Path]:
    out = context.output_path("result.json")
    if out is None:
        return {}
    write_text(out, json.dumps(metrics, indent=2) + "\n", "output")
    return {"result": out}


def outlier_count_workflow(
    *,
    context: WorkflowContext,
    input: Input = None,
    columns: Columns = "",
    column_names: ColumnNames = "",
    data: Annotated[
        str,
        Spec(
            doc="data without --input: adult (bundled UCI slice, age and hours-per-week) or synthetic-1 (Table 1)",
            choices=("adult", "synthetic-1"),
        ),
    ] = "adult",
    k: K = 1,
    radius: Annotated[float, radius_spec("#columns")] = 0.5,
    epsilon: Epsilon = 4.0,
    delta: WorkflowDelta = 1e-6,
    step: Step = DEFAULT_STEP,
    cover: Cover = "exact",
    curator: Annotated[
        bool,
        Spec(
            doc="the data holder's resource check: estimate memory and time from the data's neighbourhood sizes "
            "instead of their public worst case (the estimate and a refusal then depend on the data: private "
            "against no one who sees them)"
        ),
    ] = False,
    level: Level = 0.95,
) -> WorkflowResult:
    """Release the number of distance-based outliers among the records of a CSV file
    (fewer than ``k`` other records within ``radius``; distance over the chosen columns
    divided by ``sqrt(#columns)``), with Gaussian noise scaled to the smooth upper bound
    of Algorithm 2 (paper 003, Theorems 2, 5-6).

    Guarantee: (epsilon, delta)-DP for neighbours that replace one record (the number of
    records is treated as public). Only the noisy count is reported: the true count and
    the data-dependent noise scale are never shown. Scale columns with public constants
    beforehand if needed. Without ``input``: ``data``, the bundled 2,000-record UCI Adult
    slice's age and hours-per-week (default) or Synthetic 1 (50 generated records).

    Output: the count rounded to an integer in [0, #records] (free post-processing) with
    its ``level`` interval and noise sd taken at the public bound ``G = min(n, GS_UB)`` on
    the smooth sensitivity (the sd used is private and at least ``e^(-beta (G - 1))`` of
    it: :mod:`.report`), and a warning when the half-width exceeds the count, with the
    epsilon that would fix it (or that none the mechanism certifies would).

    Defaults, from the noise law and the bundled data. For every dataset the 95%
    half-width is about ``1.96 x 26.9 G / epsilon = 52.8 G / epsilon`` at delta = 1e-6,
    ``GS_UB = k K_d + 1`` (``2k + 1`` in one column, ``6k + 1`` in two, ``12k + 1`` in
    three): a count is informative only with many outliers per unit of ``G / epsilon``.
    Age (years) and hours-per-week (hours) are integers in public units (no scaling);
    below a raw distance of 1 only identical pairs are neighbours, so r = 0.5 (raw 0.71,
    inside [0, 1/sqrt(2))) with k = 1 makes the outliers the records whose (age, hours)
    pair no other record shares -- sample uniques, 381 of the 2,000, at G = 7: the most
    of any pair of the paper's seven Adult attributes. Larger k finds more but fewer per
    unit of G (589 at k = 2, G = 13; 778 at k = 3, G = 19); no one attribute alone has
    more than 24 (half-width 40 at G = 3, epsilon 4); a third column (879 with
    education-num, G = 13) needs the exact 3-d cover, whose estimate the default run
    limits refuse. epsilon = 4 is the smallest whole epsilon with the half-width (92) at
    most a quarter of 381: the warning then needs a draw more than 3 half-widths (over
    6 sd) below the truth, probability below 1e-8 (subgaussian tail). The mechanism
    certifies epsilon up to about 16.7 at delta = 1e-6.

    Table 1 of paper 003 (the previous defaults): ``--data synthetic-1 --k 3 --radius 1.1
    --epsilon 1`` (the paper's delta: ``--delta 0.01``). Its half-width, 1003 at delta =
    1e-6, exceeds the 5 outliers at every epsilon the mechanism certifies;
    ``benchmarks/outliers_reproduce.py`` reproduces Figures 3-4.

    Input range and errors as ``smooth-outlier-count`` (coordinates within [-1e100, 1e100];
    errors name the column and the rule, never a cell or a row). Timing depends on the
    data as there (measured 2x for 200 records in 2 columns, 60-110x for 60 records in 3
    columns with the exact cover, ``benchmarks/data_timing.py``).
    """
    if input is not None and data != "adult":
        raise PrivregValueError(f"parameter data = {data!r} applies only without input; drop data or input")
    points, names, source = _load(input, columns, column_names, data)
    public = input is None  # the bundled or generated data are public: their estimate reveals nothing
    context.require("outlier-count", estimate_outliers(points, radius, cover, from_data=curator or public))
    mech = outlier_count_mechanism(epsilon=epsilon, delta=delta, k=k, radius=radius, step=step, cover=cover)
    context.echo(f"computing the smooth sensitivity bound over {points.shape[0]} records ...")
    out = mech.release(
        points,
        charger=context.charger,
        rng=context.rng,
        label=f"outlier count (k={k}, r={radius:g}, {len(names)} columns)",
    )
    value = report_count(
        out.output, name="outlier count", mech=mech, n=int(points.shape[0]), k=k, dimension=len(names), level=level
    )
    metrics = {
        "noisy_count": value.value,
        "records": int(points.shape[0]),
        "columns": list(names),
        "k": k,
        "radius": radius,
        "epsilon": epsilon,
        "delta": delta,
        "level": level,
        "interval": value.metrics(),
        "wide": value.wide,
        "source": source,
    }
    lines = [
        f"{source}: {points.shape[0]} records, columns {', '.join(names)}",
        f"  outliers: {'no other record' if k == 1 else f'fewer than {k} other records'} within {radius:g} "
        f"(distance / sqrt({len(names)}))",
        f"  noisy outlier count = {value.line()}   ((epsilon, delta) = ({epsilon:g}, {delta:g}), "
        f"smooth-sensitivity Gaussian)",
        f"  noise: {value.noise}",
        f"  post-processing (free): {value.post_processing}",
    ]
    if value.wide:
        lines.append(f"  {value.warning()}")
    return WorkflowResult(summary="\n".join(lines), metrics=metrics, outputs=_write(context, metrics))


def outlier_subspaces_workflow(
    *,
    context: WorkflowContext,
    input: Input = None,
    columns: Columns = "",
    column_names: ColumnNames = "",
    dimension: Annotated[int, Spec(doc="columns per candidate subspace", minimum=1, maximum=64)] = 1,
    h: Annotated[int, Spec(doc="number of subspaces to find", minimum=1, maximum=10_000)] = 1,
    k: K = 1,
    radius: Annotated[float, radius_spec("dimension")] = 0.13,
    epsilon: Annotated[float, Spec(doc="total privacy parameter epsilon (selection and counts)", **POSITIVE)] = 4.0,
    count_fraction: Annotated[
        float, Spec(doc="share of epsilon spent on the h found subspaces' counts (0: none)", minimum=0, maximum=0.99)
    ] = 0.0,
    delta: WorkflowDelta = 1e-6,
    cover: Cover = "exact",
    curator: Annotated[
        bool,
        Spec(
            doc="the data holder's resource check: estimate memory and time from the data's neighbourhood sizes "
            "instead of their public worst case (the estimate and a refusal then depend on the data: private "
            "against no one who sees them)"
        ),
    ] = False,
    level: Level = 0.95,
) -> WorkflowResult:
    """Find ``h`` subspaces of ``dimension`` columns holding many outliers with the
    exponential mechanism (paper 003, Algorithm 3, utility ``q_count / GS_UB``), and
    optionally release each one's outlier count (Scenario 2).

    Guarantee: ``(epsilon, delta)``-DP in all for neighbours that replace one record
    (``epsilon``-DP without counts). The selection spends ``(1 - count_fraction) epsilon``
    in ``h`` exponential-mechanism draws, each charged as spent (weights
    ``exp(eps' u / 2)`` at ``eps'`` per draw; the paper's ``exp(eps' u)`` would spend
    ``2 eps'``); with ``count_fraction > 0`` each of the ``h`` counts is released at
    ``(count_fraction epsilon / h, delta / h)``; basic composition. Default input:
    Synthetic 2 (500 generated records, Table 2).

    Timing depends on the data: the utilities count outliers in every candidate subspace
    (KD-trees), the selection is a rejection sampler (about 8x between utility vectors,
    see ``exponential``) and each count's smooth bound behaves as ``smooth-outlier-count``.
    The subspaces are listed in the order drawn (the mechanism's output), never in an
    order taken from the data.

    Output: the selection's noise scale ``2 GS_UB h / epsilon`` in outliers and the
    McSherry-Talwar bound on the outliers a draw may miss against the best subspace not
    yet drawn, at ``level`` over all draws; each released count as in ``outlier-count``
    (integer in [0, n], interval at the public scale bound, warning when noise dominates).

    Defaults, from the noise law and Synthetic 2 (10 one-column candidates; 10 outliers
    planted in x0 and x1 with sd 10, 490 N(0, 1) inliers). A draw at ``epsilon'`` weighs a
    subspace by ``exp(epsilon' q / (2 GS_UB))``, ``GS_UB = 2k + 1`` in one column, so
    k = 1 makes the divisor 3 (7 at Table 2's k = 3). At r = 0.13 (Table 2) a planted
    outlier has another within r with probability about 9 x 0.26 x 0.028 = 0.07, so a
    planted column holds about 10 isolated records against about 2 isolated tail inliers
    in every column: a gap of about 8. h = 1 puts all of epsilon in one draw; an unplanted
    column is then drawn with probability about ``8 / (8 + 2 exp(8 epsilon / 6))``, at
    most 5% from epsilon = 3.3, and epsilon = 4 leaves room for data where fewer planted
    outliers are isolated. Table 2's h = 2, k = 3, epsilon = 2 find both planted columns
    with probability about 0.07 (0.02 by chance), and even k = 1 needs epsilon = 8 for
    0.9. Counts stay off (count_fraction 0): at this size no count is informative (see
    ``outlier-count``).
    """
    points, names, source = _load(input, columns, column_names, "synthetic-2")
    if dimension > points.shape[1]:
        raise PrivregValueError(
            f"parameter dimension = {dimension} exceeds the {points.shape[1]} column(s) of the data; lower it"
        )
    n_candidates = math.comb(points.shape[1], dimension)
    if h > n_candidates:
        raise PrivregValueError(f"h = {h} exceeds the {n_candidates} subspaces of {dimension} column(s)")
    if not 0.0 <= count_fraction < 1.0:
        raise PrivregValueError(
            f"count_fraction must lie in [0, 1); got {count_fraction}. Use 0 to release only the "
            f"subspaces, e.g. 0.5 to spend half of epsilon on their counts"
        )
    if count_fraction == 0 and (cover != "exact" or delta != 1e-6):
        which = "cover" if cover != "exact" else "delta"
        raise PrivregValueError(
            f"parameter {which} applies only to the counts: pass count_fraction > 0 with it, or drop {which}"
        )
    select_eps, count_eps = epsilon * (1.0 - count_fraction), epsilon * count_fraction
    # the selection counts outliers in every candidate (KD-trees); the counts need h smooth bounds
    first = points[:, :dimension]
    from_data = curator or input is None  # the generated data are public
    select = estimate_outliers(first, radius, "core", from_data=from_data)
    counted = estimate_outliers(first, radius, cover, covers=h, from_data=from_data) if count_eps > 0 else None
    m = points.shape[0]
    context.require(
        "outlier-subspaces",
        Cost(
            memory_bytes=select.memory_bytes + (counted.memory_bytes if counted else 0) + 64 * n_candidates,
            seconds=n_candidates * 1e-6 * m * (1 + math.log2(m + 1)) + (counted.seconds if counted else 0.0),
            basis=f"{n_candidates} candidate subspaces of {m} records; " + (counted.basis if counted else select.basis),
        ),
    )
    candidates = all_subspaces(points.shape[1], dimension)
    if count_eps > 0:  # the counts' (epsilon, delta) are refused, if at all, before the selection charges
        outlier_count_mechanism(
            epsilon=count_eps / h, delta=delta / h, k=k, radius=radius, subspace=candidates[0], cover=cover
        )
    chosen = top_h_subspaces(
        points,
        k=k,
        radius=radius,
        h=h,
        epsilon=select_eps,
        candidates=candidates,
        charger=context.charger,
        rng=context.rng,
        label="outlier subspaces",
        progress=context.progress,
    )
    labels = ["{" + ", ".join(names[i] for i in s) + "}" for s in chosen.subspaces]
    counts = []
    if count_eps > 0:
        for s, label in zip(chosen.subspaces, labels):
            mech = outlier_count_mechanism(
                epsilon=count_eps / h, delta=delta / h, k=k, radius=radius, subspace=s, cover=cover
            )
            raw = mech.release(points, charger=context.charger, rng=context.rng, label=f"outlier count in {label}")
            counts.append(
                report_count(
                    raw.output,
                    name=f"outlier count in {label}",
                    mech=mech,
                    n=m,
                    k=k,
                    dimension=dimension,
                    level=level,
                    epsilon_share=count_fraction / h,
                )
            )
    selection = selection_report(
        epsilon=select_eps, h=h, candidates=len(candidates), n=m, k=k, dimension=dimension, level=level
    )
    metrics = {
        "subspaces": labels,
        "noisy_counts": [c.value for c in counts],
        "epsilon": epsilon,
        "selection_epsilon": select_eps,
        "count_epsilon": count_eps,
        "delta": delta if counts else 0.0,
        "h": h,
        "dimension": dimension,
        "k": k,
        "radius": radius,
        "level": level,
        "selection": selection,
        "intervals": [c.metrics() for c in counts],
        "wide": [c.wide for c in counts],
        "source": source,
    }
    lines = [
        f"{source}: {points.shape[0]} records, {len(candidates)} candidate subspaces of "
        f"{dimension} column(s); top {h} by the exponential mechanism (epsilon {select_eps:g}):"
    ]
    for i, label in enumerate(labels):
        extra = f"   noisy outlier count {counts[i].line()}" if counts else ""
        lines.append(f"  {i + 1}. {label}{extra}")
    lines.append(
        f"  selection: noise scale {selection['noise_scale_outliers']:.4g} outliers per draw (2 GS_UB / "
        f"epsilon', GS_UB = {selection['gs_ub']}); with probability >= {100 * level:g}% every drawn subspace "
        f"holds at most {selection['loss_bound_outliers']:.4g} fewer outliers than the best not yet drawn "
        f"(McSherry-Talwar)"
    )
    if counts:
        lines.append(f"  counts: {counts[0].noise}; {counts[0].post_processing} (free post-processing)")
    lines += [f"  {c.warning()}" for c in counts if c.wide]
    return WorkflowResult(summary="\n".join(lines), metrics=metrics, outputs=_write(context, metrics))
