"""Plugin ``outliers`` (paper 003): releases, accounting, workflows, demo and data.

Statistical tests are seeded (InsecureReproducibleRandom), hence deterministic. The
empirical audits use alpha = 1e-6: a correct mechanism fails one with probability at
most 1e-6 over the seed. The chi-square test of Algorithm 3's distribution rejects at
p < 1e-4 (its false-alarm rate).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pytest
from scipy import stats

from privreg.audit import audit_mechanism
from privreg.core import EventLog
from privreg.core.errors import BudgetExceededError, PrivregError, PrivregValueError
from privreg.core.events import ApproxDP, Exponential
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.core.registry import load_registry
from privreg.core.sensitivity import Norm, Sensitivity, SensitivityKind
from privreg.core.workflow import WorkflowContext
from privreg.mechanisms.smooth_gaussian import SmoothGaussianMechanism, smooth_gaussian_parameters
from privreg.plugins.outliers import hooks
from privreg.plugins.outliers.datasets import (
    ADULT_OUTLIER_COLUMNS,
    load_adult_outliers,
    load_ionosphere,
    paper_sample,
    read_csv_points,
    standardise,
    synthetic_1,
    synthetic_2,
)
from privreg.plugins.outliers.definitions import OutlierCountQuery, outlier_count
from privreg.plugins.outliers.kissing import global_sensitivity_upper
from privreg.plugins.outliers.release import (
    DEFAULT_STEP,
    all_subspaces,
    outlier_count_mechanism,
    paper_algorithm3_epsilon,
    subspace_utilities,
    top_h_subspaces,
)
from privreg.plugins.outliers.report import count_half_width
from privreg.plugins.outliers.smooth import local_sensitivity_bound, smooth_upper_bound

ROOT = Path(__file__).resolve().parent.parent
IONOSPHERE = ROOT.parent / "shared" / "data" / "ionosphere" / "ionosphere.csv"

# k = 2, r = 1 in the plane (after the sqrt(2) normalisation). X: two records at the origin
# keep the 8 clustered records at degree 3, so one move changes little (LS = 1); in the
# neighbour Y one origin record has left and a second move would flip 9 records (LS = 9).
K, R = 2, 1 / math.sqrt(2)
_RING = [[1, 0], [1, 0], [-1, 0], [-1, 0], [0, 1], [0, 1], [0, -1], [0, -1]]
X = np.array([[0, 0], [0, 0]] + _RING, dtype=float)
Y = X.copy()
Y[1] = [30.0, 30.0]


def _registry():
    return load_registry(plugins={"outliers": hooks}, autoload=False)


def test_audit_pair_has_very_different_local_sensitivities():
    assert local_sensitivity_bound(X, k=K, radius=R) == 1
    assert local_sensitivity_bound(Y, k=K, radius=R) == 9
    sx, sy = (smooth_upper_bound(z, k=K, radius=R, beta=0.05).value for z in (X, Y))
    assert sx >= 9 * math.exp(-0.05) and sx <= math.exp(0.05) * sy


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-6), (0.9, 0.01)])
def test_count_mechanism_passes_the_empirical_audit(epsilon, delta):
    """1e5 releases per neighbour, alpha = 1e-6 (false alarm <= 1e-6 for a correct mechanism)."""
    mech = outlier_count_mechanism(epsilon=epsilon, delta=delta, k=K, radius=R)
    result = audit_mechanism(
        mech,
        neighbours=(X, Y),
        samples=100_000,
        alpha=1e-6,
        claimed_delta=delta,
        rng=InsecureReproducibleRandom(seed=11),
    )
    assert result.claimed_epsilon == pytest.approx(epsilon) and result.passed, result


@attrs.frozen(kw_only=True)
class _LocalAsSmooth(Sensitivity):
    """Broken on purpose: Theorem 5's local bound passed off as a smooth one."""

    kind: ClassVar[SensitivityKind] = SensitivityKind.SMOOTH
    beta: float
    norm: Norm = Norm.L1

    def bound(self, data=None) -> float:
        return float(local_sensitivity_bound(data, k=K, radius=R))


def test_audit_catches_noise_scaled_to_local_sensitivity():
    """Negative control: the same pair exposes noise calibrated to the (non-smooth) local
    sensitivity -- the audit has power, and smoothing is what makes the release private."""
    _, beta = smooth_gaussian_parameters(epsilon=1.0, delta=1e-6)
    bad = SmoothGaussianMechanism(
        epsilon=1.0,
        delta=1e-6,
        query=OutlierCountQuery(k=K, radius=R),
        sensitivity=_LocalAsSmooth(beta=beta),
        step=2.0**-10,
    )
    result = audit_mechanism(
        bad, neighbours=(X, Y), samples=100_000, alpha=1e-6, claimed_delta=1e-6, rng=InsecureReproducibleRandom(seed=11)
    )
    assert not result.passed and result.epsilon_lower_bound > 3


def test_count_release_charges_first_and_scales_noise_to_the_smooth_bound():
    mech = outlier_count_mechanism(epsilon=0.5, delta=0.01, k=3, radius=1.1)
    data = synthetic_1(0).points
    alpha, beta = smooth_gaussian_parameters(epsilon=0.5, delta=0.01)
    assert mech.sensitivity.beta == beta
    centre, sigma2 = mech.noise_parameters(data)
    assert centre * mech.step == outlier_count(data, k=3, radius=1.1) == 5
    smooth = smooth_upper_bound(data, k=3, radius=1.1, beta=beta).value
    assert math.sqrt(sigma2) * mech.step == pytest.approx((smooth + mech.step) / alpha, rel=1e-6)
    log = EventLog()
    out = mech.release(data, charger=log, rng=InsecureReproducibleRandom(seed=1), label="count")
    assert log.events == (ApproxDP(epsilon=0.5, delta=0.01, neighbouring="replace_one"),)
    assert (out.output / mech.step) == round(out.output / mech.step)  # on the public grid
    with pytest.raises(PrivregError):
        mech.release(np.array([[np.nan, 1.0]]), charger=log)
    assert len(log.events) == 1


def test_a_refused_charge_releases_nothing():
    class Refuse(EventLog):
        def charge(self, event, **kwargs):
            raise BudgetExceededError("no budget left")

    mech = outlier_count_mechanism(epsilon=1.0, delta=1e-6, k=2, radius=1.0)
    with pytest.raises(BudgetExceededError):
        mech.release(X, charger=Refuse())
    with pytest.raises(BudgetExceededError):
        top_h_subspaces(
            synthetic_2(0).points, k=3, radius=0.13, h=2, epsilon=1.0, candidates=all_subspaces(10, 1), charger=Refuse()
        )


# --- top-h subspaces (Algorithm 3) ---------------------------------------------------------


def test_utilities_have_sensitivity_at_most_one():
    gen = np.random.default_rng(2)
    data = gen.normal(size=(25, 3))
    cands = all_subspaces(3, 1) + all_subspaces(3, 2)
    base = subspace_utilities(data, k=2, radius=0.3, candidates=cands)
    for _ in range(60):
        moved = data.copy()
        moved[gen.integers(25)] = gen.normal(size=3) * gen.choice([0.1, 1.0, 5.0])
        assert np.max(np.abs(subspace_utilities(moved, k=2, radius=0.3, candidates=cands) - base)) <= 1.0
    gs = [global_sensitivity_upper(n=25, k=2, d=len(s)) for s in cands]
    assert np.all(base * gs == np.round(base * gs))


def test_top_h_charges_epsilon_over_h_per_draw_and_never_repeats():
    log = EventLog()
    pick = top_h_subspaces(
        synthetic_2(0).points,
        k=3,
        radius=0.13,
        h=3,
        epsilon=1.5,
        candidates=all_subspaces(10, 1),
        charger=log,
        rng=InsecureReproducibleRandom(seed=4),
    )
    assert log.events == (Exponential(epsilon=0.5, neighbouring="replace_one"),) * 3
    assert len(set(pick.subspaces)) == 3 and len(pick.releases) == 3
    assert paper_algorithm3_epsilon(1.5) == 3.0  # the paper's weights exp(eps u / h) spend 2 eps
    with pytest.raises(PrivregValueError, match="exceeds"):
        top_h_subspaces(X, k=2, radius=1.0, h=3, epsilon=1.0, candidates=[(0,), (1,)], charger=EventLog())
    with pytest.raises(PrivregValueError, match="repeats"):
        top_h_subspaces(X, k=2, radius=1.0, h=1, epsilon=1.0, candidates=[(0,), (0,)], charger=EventLog())


def test_top_h_has_the_distribution_of_algorithm_3():
    """Algorithm 3 redraws until the subspace is new; that is one draw restricted to the
    unchosen subspaces: P(i then j) = w_i / W * w_j / (W - w_i), w = exp(eps u / (2h))."""
    data = np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [10.0, 5.0, 0.0], [15.0, 10.0, 0.0]])
    cands = all_subspaces(3, 1)
    u = subspace_utilities(data, k=1, radius=1.0, candidates=cands)
    w = np.exp(2.0 * u / (2 * 2))
    expected = {}
    for i in range(3):
        for j in range(3):
            if i != j:
                expected[(i, j)] = w[i] / w.sum() * w[j] / (w.sum() - w[i])
    rng = InsecureReproducibleRandom(seed=8)
    runs = 3000
    seen = dict.fromkeys(expected, 0)
    for _ in range(runs):
        got = top_h_subspaces(
            data, k=1, radius=1.0, h=2, epsilon=2.0, candidates=cands, charger=EventLog(), rng=rng
        ).subspaces
        seen[(cands.index(got[0]), cands.index(got[1]))] += 1
    keys = sorted(expected)
    _, p = stats.chisquare([seen[k] for k in keys], [runs * expected[k] for k in keys])
    assert p > 1e-4


# --- registry, workflows, demo ----------------------------------------------------------


def test_plugin_registers_its_items():
    reg = _registry()
    assert not reg.failures
    assert {i.name for i in reg.items()} == {
        "smooth-outlier-count",
        "outlier-count-smooth-sensitivity",
        "outlier-count",
        "outlier-subspaces",
    }
    mech_item = reg.get("smooth-outlier-count")
    a, b = mech_item.example.neighbours
    assert a.shape == b.shape and int(np.sum(np.any(a != b, axis=1))) == 1  # one record replaced
    mech = mech_item.create(mech_item.example.params)
    assert isinstance(mech, SmoothGaussianMechanism) and mech.privacy_event() == ApproxDP(
        epsilon=1.0, delta=1e-6, neighbouring="replace_one"
    )
    sens = reg.get("outlier-count-smooth-sensitivity").create({"k": 3, "radius": 1.0, "beta": 0.1, "subspace": "1, 0"})
    assert sens.subspace == (0, 1) and sens.bound(np.zeros((5, 2))) >= 1
    with pytest.raises(PrivregValueError, match="subspace"):
        mech_item.create({**mech_item.example.params, "subspace": "a,b"})


def test_count_workflow_on_csv(tmp_path):
    data = synthetic_1(3)
    path = tmp_path / "points.csv"
    rows = ["a,b,label"] + [f"{x:.6f},{y:.6f},z" for x, y in data.points]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1), output_dir=tmp_path / "out")
    result = (
        _registry().get("outlier-count").run(ctx, {"input": str(path), "columns": "a,b", "epsilon": 0.5, "delta": 0.01})
    )
    assert ctx.charger.events == (ApproxDP(epsilon=0.5, delta=0.01, neighbouring="replace_one"),)
    assert result.metrics["records"] == 50 and result.metrics["columns"] == ["a", "b"]
    saved = json.loads(result.outputs["result"].read_text())
    assert saved["noisy_count"] == result.metrics["noisy_count"]
    assert "noisy outlier count" in result.summary and "true" not in result.summary.lower()
    with pytest.raises(PrivregValueError, match=r"'label'.*not a number"):
        _registry().get("outlier-count").run(ctx, {"input": str(path)})
    with pytest.raises(PrivregValueError, match="not among"):
        _registry().get("outlier-count").run(ctx, {"input": str(path), "columns": "a,c"})
    with pytest.raises(PrivregValueError, match="needs an input"):
        _registry().get("outlier-count").run(ctx, {"columns": "a"})


def test_subspace_workflow_composes_selection_and_counts():
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=2))
    item = _registry().get("outlier-subspaces")
    result = item.run(ctx, {"epsilon": 3.0, "count_fraction": 1 / 3, "h": 2, "delta": 1e-6})
    assert (
        ctx.charger.events
        == (Exponential(epsilon=1.0, neighbouring="replace_one"),) * 2
        + (ApproxDP(epsilon=0.5, delta=5e-7, neighbouring="replace_one"),) * 2
    )
    assert len(result.metrics["subspaces"]) == 2 and len(result.metrics["noisy_counts"]) == 2
    ctx2 = WorkflowContext(rng=InsecureReproducibleRandom(seed=2))
    item.run(ctx2, {"epsilon": 2.0, "dimension": 2, "h": 1, "radius": 0.3})
    assert ctx2.charger.events == (Exponential(epsilon=2.0, neighbouring="replace_one"),)
    with pytest.raises(PrivregValueError, match="count_fraction"):
        item.run(ctx2, {"epsilon": 2.0, "count_fraction": 0.995})


def test_demo_step_prints_the_post_processed_count_with_an_informative_interval():
    (step,) = _registry().demo_steps()
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=3))
    text = step.run(ctx)
    assert ctx.charger.events == (
        ApproxDP(epsilon=4.0, delta=1e-8, neighbouring="replace_one"),
        Exponential(epsilon=4.0, neighbouring="replace_one"),
    )
    # outlier-count's defaults at the demo's delta: interval at the public bound G = 7
    found = re.search(r"noisy outlier count = (\d+)  \[(\d+), (\d+)\] 95%, noise scale <= ([\d.]+) ", text)
    assert found is not None, text
    value, low, high = (int(found[i]) for i in (1, 2, 3))
    half = count_half_width(epsilon=4.0, delta=1e-8, step=DEFAULT_STEP, bound=7, level=0.95)
    assert (low, high) == (value - half, value + half) and value > half
    alpha = smooth_gaussian_parameters(epsilon=4.0, delta=1e-8)[0]
    assert float(found[4]) == pytest.approx((7 + DEFAULT_STEP) / alpha, abs=0.01)
    true = outlier_count(load_adult_outliers(columns=("age", "hours-per-week")).points, k=1, radius=0.5)
    assert 2 * half < true and f"true count {true}" in text and "WARNING" not in text
    assert "top 1 by the exponential mechanism (epsilon 4)" in text and "noise scale 1.5 outliers" in text


# --- data ------------------------------------------------------------------------------


def test_synthetic_data_follow_tables_1_and_2():
    one, two = synthetic_1(0), synthetic_2(0)
    assert one.points.shape == (50, 2) and one.is_outlier.sum() == 5
    assert two.points.shape == (500, 10) and two.is_outlier.sum() == 10
    np.testing.assert_array_equal(synthetic_1(0).points, one.points)
    assert np.all(np.abs(two.points[two.is_outlier][:, 2:]).max() < 6)  # outliers only in x0, x1
    assert outlier_count(one.points, k=3, radius=1.1) == 5  # Table 1's r finds the 5 planted outliers


def test_adult_loader_uses_seven_numeric_attributes():
    adult = load_adult_outliers()
    assert adult.points.shape == (2000, 7) and adult.columns == ADULT_OUTLIER_COLUMNS
    assert set(np.unique(adult.points[:, 5])) <= {0.0, 1.0} and 0 < adult.is_outlier.mean() < 0.5
    mix = paper_sample(adult, inliers=45, outliers=5, seed=1)
    assert mix.n == 50 and mix.is_outlier.sum() == 5
    z = standardise(mix.points)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-12)
    with pytest.raises(PrivregValueError, match="categorical"):
        load_adult_outliers(columns=("age", "occupation"))
    with pytest.raises(PrivregValueError, match="asked for"):
        paper_sample(mix, inliers=46, outliers=1)


@pytest.mark.skipif(not IONOSPHERE.is_file(), reason="needs ../shared/data/ionosphere")
def test_ionosphere_loader():
    iono = load_ionosphere(IONOSPHERE)
    assert iono.points.shape == (351, 34) and iono.is_outlier.sum() == 126


def test_loaders_refuse_missing_files(tmp_path):
    with pytest.raises(PrivregValueError, match="not a file"):
        load_ionosphere(tmp_path / "nope.csv")
    with pytest.raises(PrivregValueError, match="not a file"):
        read_csv_points(tmp_path / "nope.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(PrivregValueError, match="no records"):
        read_csv_points(empty)
