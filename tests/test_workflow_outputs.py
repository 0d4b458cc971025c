"""What the workflows print beside each noisy number: interval, noise scale, free
post-processing and the warning when noise dominates (issue #21, item 3), and the outlier
workflows' defaults.

Seeded (InsecureReproducibleRandom), hence deterministic. The coverage test rejects when
more intervals miss than a correct 95% interval misses with probability 1e-6 (its
false-alarm rate); everything else is exact.
"""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest
from scipy import stats

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.registry import load_registry
from privreg.core.workflow import WorkflowContext
from privreg.mechanisms.smooth_gaussian import certifies, smooth_gaussian_parameters
from privreg.plugins.outliers import hooks as outlier_hooks
from privreg.plugins.outliers.datasets import load_adult_outliers, synthetic_1, synthetic_2
from privreg.plugins.outliers.definitions import outlier_count
from privreg.plugins.outliers.release import outlier_count_mechanism, subspace_utilities
from privreg.plugins.outliers.report import count_bound, count_half_width
from privreg.plugins.outliers.workflows import COUNT_COLUMNS, outlier_count_workflow, outlier_subspaces_workflow
from privreg.plugins.standard import hooks as standard_hooks
from privreg.plugins.standard.mean_report import MeanReport

REGISTRY = load_registry(plugins={"standard": standard_hooks, "outliers": outlier_hooks}, autoload=False)


def _run(name: str, seed: int, params: dict, tmp_path=None):
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=seed), output_dir=tmp_path)
    return REGISTRY.get(name).run(ctx, params)


def _csv(path, rows: list[str], header: str = "x"):
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _warned(summary: str, name: str) -> bool:
    return f"WARNING: {name}:" in summary


# --- bounded-mean ------------------------------------------------------------------------


def test_bounded_mean_prints_and_records_interval_and_noise_scale(tmp_path):
    path = _csv(tmp_path / "d.csv", [str(i % 10) for i in range(1000)])
    result = _run("bounded-mean", 4, {"input": path, "column": "x", "lower": 0, "upper": 9}, tmp_path / "out")
    iv = result.metrics["intervals"]
    assert iv["count"]["noise_scale"] == pytest.approx(2.0, rel=1e-9)  # 1 / (epsilon / 2)
    assert iv["sum"]["noise_scale"] == pytest.approx(18.0, rel=1e-9)  # 9 / (epsilon / 2)
    for name, label in (("count", "noisy count = "), ("sum", "noisy sum   = "), ("mean", "noisy mean  = ")):
        m = iv[name]
        assert m["level"] == 0.95 and m["low"] <= m["value"] <= m["high"] and not m["wide"]
        assert result.metrics[name] == m["value"]
        fmt = str if name == "count" else "{:.6g}".format
        line = f"{label}{fmt(m['value'])}  [{fmt(m['low'])}, {fmt(m['high'])}] 95%, noise scale {m['noise_scale']:.4g}"
        assert line in result.summary
    assert isinstance(result.metrics["count"], int)
    assert "post-processing (free)" in result.summary and "WARNING" not in result.summary
    assert json.loads(result.outputs["result"].read_text()) == result.metrics
    # the level is a parameter: a wider level gives a wider interval
    wider = _run("bounded-mean", 4, {"input": path, "column": "x", "lower": 0, "upper": 9, "level": 0.999})
    assert wider.metrics["intervals"]["sum"]["half_width"] > iv["sum"]["half_width"]
    assert "99.9%" in wider.summary


def test_bounded_mean_intervals_cover_the_true_values(tmp_path):
    """200 seeded runs: each interval must miss the truth at most as often as a correct
    95% interval does with probability 1 - 1e-6."""
    values = [i % 10 for i in range(50)]
    path = _csv(tmp_path / "d.csv", [str(x) for x in values])
    truth = {"count": 50, "sum": float(sum(values)), "mean": float(np.mean(values))}
    runs = 200
    misses = dict.fromkeys(truth, 0)
    for seed in range(runs):
        iv = _run("bounded-mean", seed, {"input": path, "column": "x", "lower": 0, "upper": 9, "epsilon": 0.5})
        for name, t in truth.items():
            m = iv.metrics["intervals"][name]
            misses[name] += not m["low"] <= t <= m["high"]
    allowed = stats.binom.isf(1e-6, runs, 0.05)
    assert all(v <= allowed for v in misses.values()), misses


def test_bounded_mean_count_is_a_non_negative_integer_when_the_truth_is_zero(tmp_path):
    path = _csv(tmp_path / "empty.csv", [])  # a header and no rows: true count 0
    clamped = 0
    for seed in range(20):
        r = _run("bounded-mean", seed, {"input": path, "column": "x", "lower": 0, "upper": 9, "epsilon": 0.02})
        c = r.metrics["intervals"]["count"]
        assert isinstance(r.metrics["count"], int) and r.metrics["count"] >= 0
        assert 0 <= c["low"] <= c["value"] <= c["high"] and c["low"] == max(0, c["value"] - c["half_width"])
        assert r.metrics["sum"] >= 0  # lower >= 0: the sum is clamped at 0 too
        assert f"noisy count = {c['value']}  [" in r.summary
        clamped += c["value"] == 0
    assert clamped >= 1  # the noise (scale 100) was negative in some runs and was clamped


def test_bounded_mean_warns_exactly_when_the_half_width_exceeds_the_value(tmp_path):
    path = _csv(tmp_path / "d.csv", [str(i % 10) for i in range(60)])
    seen = set()
    for seed, eps in enumerate((0.01, 0.03, 0.1, 0.3, 1.0, 3.0) * 3):
        r = _run("bounded-mean", seed, {"input": path, "column": "x", "lower": 0, "upper": 9, "epsilon": eps})
        for name, m in r.metrics["intervals"].items():
            half = math.inf if m["half_width"] is None else m["half_width"]
            wide = half > abs(m["value"])
            assert m["wide"] == wide == _warned(r.summary, name) == (name in r.metrics["wide"])
            seen.add(wide)
            if wide and m["needed_epsilon"] is not None and name == "sum":
                # the stated epsilon is the smallest (to 3 digits) that brings the half-width to the value
                assert MeanReport.prepare(epsilon=m["needed_epsilon"], lower=0, upper=9, level=0.95).sum_half <= abs(
                    m["value"]
                )
                e = m["needed_epsilon"]
                smaller = e - 10.0 ** (math.floor(math.log10(e)) - 2)  # one step down in the 3rd digit
                assert MeanReport.prepare(epsilon=smaller, lower=0, upper=9, level=0.95).sum_half > abs(m["value"])
                assert f"epsilon >= {m['needed_epsilon']:.3g}" in r.summary
    assert seen == {True, False}


# --- outlier-count -----------------------------------------------------------------------


def test_outlier_count_is_a_non_negative_integer_in_range_when_the_truth_is_zero(tmp_path):
    rng = np.random.default_rng(5)  # generated data, not privacy noise
    pts = rng.normal(scale=0.01, size=(30, 2))  # one tight cluster: no outliers at k = 3, r = 1.1
    assert outlier_count(pts, k=3, radius=1.1) == 0
    path = _csv(tmp_path / "p.csv", [f"{a:.6f},{b:.6f}" for a, b in pts], header="a,b")
    for seed in range(20):
        r = _run("outlier-count", seed, {"input": path, "k": 3, "radius": 1.1, "epsilon": 1.0})
        m = r.metrics["interval"]
        assert isinstance(r.metrics["noisy_count"], int) and 0 <= m["low"] <= m["value"] <= m["high"] <= 30
        assert m["noise_scale_is_bound"] and m["wide"] and r.metrics["wide"]
        assert f"noisy outlier count = {m['value']}  [{m['low']}, {m['high']}] 95%, noise scale <= " in r.summary
        assert f"{m['noise_scale']:.4g}" in r.summary and _warned(r.summary, "outlier count")
        if m["needed_epsilon"] is not None:  # none for a count of 0
            # a half-width of 1003 at epsilon 1 against a count <= 30: epsilon about 33
            assert not certifies(epsilon=m["needed_epsilon"], delta=1e-6)
            assert "certifies no such epsilon" in r.summary
        assert "true" not in r.summary.lower()


def test_outlier_count_warns_exactly_when_noise_dominates(tmp_path):
    # 2000 records 10 apart in one column: all are (1, 1)-outliers, GS_UB = 3
    path = _csv(tmp_path / "line.csv", [str(10.0 * i) for i in range(2000)])
    seen = set()
    for seed, eps in enumerate((0.05, 0.1, 1.0, 4.0) * 2):
        r = _run("outlier-count", seed, {"input": path, "k": 1, "radius": 1.0, "epsilon": eps, "cover": "core"})
        m = r.metrics["interval"]
        assert m["wide"] == (m["half_width"] > m["value"]) == _warned(r.summary, "outlier count")
        assert m["low"] <= 2000 <= m["high"] or m["wide"]
        seen.add(m["wide"])
    assert seen == {True, False}


def _count_defaults() -> dict:
    return {n: p.default for n, p in inspect.signature(outlier_count_workflow).parameters.items()}


def test_the_public_scale_bound_holds_and_is_nearly_tight():
    """S(X) <= G = min(n, GS_UB) (the reported bound) and S(X) >= G e^(-beta (G - 1)), on
    Synthetic 1 and on outlier-count's default data and parameters."""
    d = _count_defaults()
    adult = load_adult_outliers(columns=COUNT_COLUMNS).points
    cases = [(synthetic_1(0).points, k, 1.1, 1.0) for k in (1, 3)] + [(adult, d["k"], d["radius"], d["epsilon"])]
    for pts, k, r, eps in cases:
        mech = outlier_count_mechanism(epsilon=eps, delta=1e-6, k=k, radius=r)
        g = count_bound(n=pts.shape[0], k=k, dimension=2)
        beta = smooth_gaussian_parameters(epsilon=eps, delta=1e-6)[1]
        s = mech.sensitivity.bound(pts)
        assert g * math.exp(-beta * (g - 1)) <= s <= g


def test_outlier_count_defaults_are_informative_on_the_bundled_adult_slice():
    """From the exact law: at the defaults the 95% half-width at the public scale bound is
    at most a quarter of the true count (computed here without privacy), so the warning
    (released count below the half-width) needs a draw more than 3 half-widths below the
    truth: at most exp(-z^2 / 2) < 1e-8 at the bound's sd (subgaussian tail). The
    certified epsilon and the sample-unique reading of r are checked too."""
    d = _count_defaults()
    assert (d["data"], d["input"], d["columns"]) == ("adult", None, "")
    pts = load_adult_outliers(columns=COUNT_COLUMNS).points
    true = outlier_count(pts, k=d["k"], radius=d["radius"])
    _, counts = np.unique(pts, axis=0, return_counts=True)
    assert true == int((counts == 1).sum()) == 381  # k = 1, r < 1/sqrt(2): records with a unique pair
    g = count_bound(n=pts.shape[0], k=d["k"], dimension=len(COUNT_COLUMNS))
    half = count_half_width(epsilon=d["epsilon"], delta=d["delta"], step=d["step"], bound=g, level=d["level"])
    assert g == 7 and 4 * half <= true
    sd = (g + d["step"]) / smooth_gaussian_parameters(epsilon=d["epsilon"], delta=d["delta"])[0]
    assert math.exp(-(((true - half) / sd) ** 2) / 2) < 1e-8
    assert certifies(epsilon=d["epsilon"], delta=d["delta"])
    # a whole epsilon below would not meet the quarter
    assert 4 * count_half_width(epsilon=d["epsilon"] - 1, delta=d["delta"], step=d["step"], bound=g, level=0.95) > true


def test_outlier_count_runs_informatively_at_its_defaults():
    """20 seeded runs without arguments: none warns (the law above bounds the chance of
    a warning by 1e-8 a run), each reporting the half-width of that law."""
    for seed in range(20):
        r = _run("outlier-count", seed, {})
        m = r.metrics["interval"]
        assert not m["wide"] and not r.metrics["wide"] and "WARNING" not in r.summary
        assert m["half_width"] == 92 and m["low"] == m["value"] - 92 and m["high"] == m["value"] + 92
        assert r.metrics["records"] == 2000 and r.metrics["columns"] == list(COUNT_COLUMNS)
        assert r.summary.startswith("bundled UCI Adult slice: 2000 records, columns age, hours-per-week")
        assert f"noisy outlier count = {m['value']}  [{m['low']}, {m['high']}] 95%, noise scale <= 47.14" in r.summary
        assert "true" not in r.summary.lower()


def test_outlier_count_reaches_table_1_by_flags(tmp_path):
    table_1 = {"data": "synthetic-1", "k": 3, "radius": 1.1, "epsilon": 1.0}
    r = _run("outlier-count", 0, table_1)
    assert r.metrics["records"] == 50 and r.metrics["source"] == "generated synthetic_1 (paper 003), seed 0"
    assert r.metrics["interval"]["half_width"] == 1003 and r.metrics["wide"]
    path = _csv(tmp_path / "p.csv", ["1", "2"])
    with pytest.raises(PrivregValueError, match="parameter data = 'synthetic-1' applies only without input"):
        _run("outlier-count", 0, {**table_1, "input": path})
    with pytest.raises(PrivregValueError, match="columns needs an input file"):
        _run("outlier-count", 0, {"columns": "age"})


def test_no_certified_epsilon_makes_the_synthetic_1_count_informative():
    """Why outlier-count's default data are not Synthetic 1: at r = 1.1 and every k <= 3,
    the half-width at the largest epsilon the mechanism certifies at delta = 1e-6 exceeds
    the true count, at the public scale bound and even at the scale actually used."""
    pts = synthetic_1(0).points
    eps = max(float(e) for e in np.arange(0.5, 40.0, 0.25) if certifies(epsilon=float(e), delta=1e-6))
    assert not certifies(epsilon=eps + 0.25, delta=1e-6)
    for k in (1, 2, 3):
        true = outlier_count(pts, k=k, radius=1.1)
        used = outlier_count_mechanism(epsilon=eps, delta=1e-6, k=k, radius=1.1).sensitivity.bound(pts)
        for bound in (count_bound(n=50, k=k, dimension=2), used):
            assert count_half_width(epsilon=eps, delta=1e-6, step=2.0**-10, bound=bound, level=0.95) > true


# --- outlier-subspaces -------------------------------------------------------------------


def _p_all_planted(u: np.ndarray, eps: float, h: int, planted: set[int]) -> float:
    """Exact probability that h sequential exponential-mechanism draws at eps / h each
    (weights exp(eps u / (2 h)), without replacement) all land in ``planted``."""

    def rec(rem: list[int], depth: int) -> float:
        if depth == h:
            return 1.0
        w = np.exp(eps / h * u[rem] / 2)
        return sum(w[i] / w.sum() * rec(rem[:i] + rem[i + 1 :], depth + 1) for i, j in enumerate(rem) if j in planted)

    return rec(list(range(u.size)), 0)


def test_outlier_subspaces_defaults_are_informative_on_synthetic_2():
    """Informative: with probability >= 0.95 (exact law of the selection on the true
    utilities of the bundled Synthetic 2) every drawn subspace is one where outliers were
    planted, x0 or x1. Table 2's k = 3, h = 2, epsilon = 2 were at about chance."""
    d = {n: p.default for n, p in inspect.signature(outlier_subspaces_workflow).parameters.items()}
    data = synthetic_2(0)
    cands = [(j,) for j in range(10)]
    u = subspace_utilities(data.points, k=d["k"], radius=d["radius"], candidates=cands)
    assert d["dimension"] == 1 and d["count_fraction"] == 0
    assert _p_all_planted(u, d["epsilon"], d["h"], {0, 1}) >= 0.95
    old = subspace_utilities(data.points, k=3, radius=0.13, candidates=cands)
    assert _p_all_planted(old, 2.0, 2, {0, 1}) < 0.1


def test_outlier_subspaces_reports_the_selection_scale_and_count_intervals():
    r = _run("outlier-subspaces", 3, {})
    sel = r.metrics["selection"]
    assert sel["gs_ub"] == 3 and sel["noise_scale_outliers"] == pytest.approx(1.5)  # 2 GS_UB / epsilon
    assert sel["loss_bound_outliers"] == pytest.approx(3 * 2 * math.log(10 / 0.05) / 4.0)
    assert "noise scale 1.5 outliers per draw" in r.summary and f"{sel['loss_bound_outliers']:.4g}" in r.summary
    assert r.metrics["noisy_counts"] == [] and r.metrics["intervals"] == []
    r = _run("outlier-subspaces", 3, {"count_fraction": 0.5, "h": 2})
    assert len(r.metrics["intervals"]) == 2
    for label, m, value in zip(r.metrics["subspaces"], r.metrics["intervals"], r.metrics["noisy_counts"]):
        assert isinstance(value, int) and 0 <= m["low"] <= value == m["value"] <= m["high"] <= 500
        assert m["noise_scale_is_bound"] and f"{label}   noisy outlier count {value}  [" in r.summary
        assert m["wide"] == (m["half_width"] > value) == _warned(r.summary, f"outlier count in {label}")


def test_bounded_mean_parts_never_exceed_the_epsilon_they_split():
    """For every epsilon scanned, the count's and the sum's events as charged add up, in
    floating point as the basic filter adds them, to at most the total epsilon (before
    the fix 8192 / 1489.4545... = 5.500000000000001 refused the sum at epsilon 11)."""
    from privreg.budget.session import BudgetSession, PrivacyBudget
    from privreg.plugins.standard.mean_report import mean_mechanisms

    scan = [float(x) for x in range(1, 400)] + [x / 100 for x in range(1, 300)] + [10.0**k for k in range(-6, 16)]
    for eps in scan:
        count, total = mean_mechanisms(eps, 17, 90)
        assert count.privacy_event().epsilon + total.privacy_event().epsilon <= eps, eps
    count, total = mean_mechanisms(11.0, 17, 90)
    session = BudgetSession(budget=PrivacyBudget(epsilon=11.0), filters=("basic",))
    count.release(5.0, charger=session)
    total.release(17.0, charger=session)
    assert len(session.ledger.rows()) == 2
