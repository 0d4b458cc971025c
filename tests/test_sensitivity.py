"""Tests of privreg.core.sensitivity: Global/Local/Smooth sensitivity and require_sensitivity.

The smooth-sensitivity smoothness test uses a toy query with a derived (and separately
brute-force verified) LS^(t): f(x) = max(x) for datasets of n integers in [0, B], where
neighbours differ by substituting one entry with any value in [0, B].

Derivation. Sort x_(1) <= ... <= x_(n) and put x_(j) = 0 for j <= 0.
* LS(y) = max(B - y_(n), y_(n) - y_(n-1)): replacing a non-maximal entry can only raise
  the max (to at most B); replacing the maximal entry by v gives max(y_(n-1), v), anywhere
  in [y_(n-1), B].
* LS^(t)(x) = max over y within t substitutions of LS(y):
  - B - y_(n) is largest when the t largest entries are set to 0: B - x_(n-t);
  - y_(n) - y_(n-1) is largest either by keeping x_(n) on top and zeroing the next t
    largest (gap x_(n) - x_(n-1-t)), or by turning x_(n) into B and zeroing the next t-1
    (gap B - x_(n-t), already counted above).
  So LS^(t)(x) = max(B - x_(n-t), x_(n) - x_(n-1-t)), non-decreasing in t, = B for t >= n.
"""

from __future__ import annotations

import itertools
import math

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.sensitivity import (
    GlobalSensitivity,
    LocalSensitivity,
    Norm,
    Sensitivity,
    SensitivityKind,
    SmoothSensitivity,
    require_sensitivity,
)

VALID_NORMS = "['l0', 'l1', 'l2', 'linf']"

# ----------------------------------------------------------------- GlobalSensitivity


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0, -1e-300, 0.0, 0])
def test_global_rejects_bad_values(value):
    with pytest.raises(PrivregValueError, match="sensitivity"):
        GlobalSensitivity(value=value)


@pytest.mark.parametrize("value", [True, "1.0", None, [1.0]])
def test_global_rejects_non_numbers(value):
    with pytest.raises(PrivregTypeError, match="sensitivity"):
        GlobalSensitivity(value=value)


@pytest.mark.parametrize(
    "norm, expected",
    [("l0", Norm.L0), ("l1", Norm.L1), ("l2", Norm.L2), ("linf", Norm.LINF), (Norm.L2, Norm.L2)],
)
def test_global_accepts_norm_strings(norm, expected):
    s = GlobalSensitivity(value=2, norm=norm)
    assert s.norm is expected
    assert s.value == 2.0 and isinstance(s.value, float)


def test_global_defaults_and_bound():
    s = GlobalSensitivity(value=1.5)
    assert s.norm is Norm.L1
    assert s.kind is SensitivityKind.GLOBAL
    assert s.data_dependent is False
    assert s.bound() == 1.5 and s.bound(data=[1, 2, 3]) == 1.5
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.value = 3.0


@pytest.mark.parametrize("norm", ["l3", "L1", "", "linfinity", None, 1])
def test_global_rejects_bad_norm_listing_choices(norm):
    with pytest.raises(PrivregValueError) as info:
        GlobalSensitivity(value=1.0, norm=norm)
    msg = str(info.value)
    assert "norm must be one of" in msg and VALID_NORMS in msg and repr(norm) in msg


# ----------------------------------------------------------------- LocalSensitivity


def test_local_requires_data():
    s = LocalSensitivity(function=lambda d: float(max(d)))
    assert s.kind is SensitivityKind.LOCAL and s.data_dependent is True
    with pytest.raises(PrivregValueError, match="needs data"):
        s.bound()
    assert s.bound([1, 4, 2]) == 4.0
    assert LocalSensitivity(function=lambda d: 0).bound([0]) == 0.0  # zero is a valid LS


def test_local_validates_function_and_its_output():
    with pytest.raises(PrivregTypeError, match="function must be callable"):
        LocalSensitivity(function=3.0)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(PrivregValueError, match="local sensitivity"):
            LocalSensitivity(function=lambda d, bad=bad: bad).bound([1])
    with pytest.raises(PrivregValueError, match="norm must be one of"):
        LocalSensitivity(function=len, norm="l7")


# ----------------------------------------------------------------- SmoothSensitivity: brute force


def brute_smooth(ls: list[float], beta: float, global_bound: float | None) -> float:
    """max_{t=0..M} exp(-t beta) LS(t), plus the tail exp(-(M+1) beta) G when G is given."""
    best = max(math.exp(-t * beta) * x for t, x in enumerate(ls))
    if global_bound is not None:
        best = max(best, math.exp(-len(ls) * beta) * global_bound)
    return best


@st.composite
def ls_tables(draw):
    g = draw(st.floats(min_value=0.01, max_value=100.0))
    m = draw(st.integers(min_value=0, max_value=30))
    frac = st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 1.0]))
    ls = [g * draw(frac) for _ in range(m + 1)]
    if draw(st.booleans()):
        ls.sort()  # the documented shape: non-decreasing in t
    ls = [min(x, g) for x in ls]
    return g, ls


@settings(max_examples=400)  # cheap examples; the early exit is hit only by some tables
@given(table=ls_tables(), beta=st.floats(min_value=1e-3, max_value=5.0), with_global=st.booleans())
def test_smooth_equals_brute_force(table, beta, with_global):
    """The early exit (stop once exp(-t beta) * global_bound <= best) must not change the result."""
    g, ls = table
    calls = []

    def local_at_distance(data, t):
        assert data == "dataset"
        calls.append(t)
        return ls[t]

    s = SmoothSensitivity(
        local_at_distance=local_at_distance,
        beta=beta,
        max_distance=len(ls) - 1,
        global_bound=g if with_global else None,
    )
    result = s.bound("dataset")
    assert result == brute_smooth(ls, beta, g if with_global else None)
    assert result >= ls[0]  # S*(x) >= LS(x) = LS^(0)(x)
    assert calls == list(range(len(calls)))  # t = 0, 1, 2, ... in order, none skipped
    if not with_global:
        assert len(calls) == len(ls)  # no global bound: every term is evaluated


def test_smooth_early_exit_case_and_tail_term():
    # LS saturates at G immediately: the loop may stop at once, result is G
    s = SmoothSensitivity(local_at_distance=lambda d, t: 5.0, beta=0.5, max_distance=1000, global_bound=5.0)
    assert s.bound([0]) == 5.0
    # LS = 0 everywhere evaluated: only the tail exp(-(M+1) beta) G is left
    s = SmoothSensitivity(local_at_distance=lambda d, t: 0.0, beta=0.5, max_distance=3, global_bound=8.0)
    assert s.bound([0]) == math.exp(-4 * 0.5) * 8.0
    # same without a global bound: no tail, S* = 0
    s = SmoothSensitivity(local_at_distance=lambda d, t: 0.0, beta=0.5, max_distance=3)
    assert s.bound([0]) == 0.0


def test_smooth_late_large_term_wins():
    ls = [1.0, 1.0, 1.0, 50.0]
    s = SmoothSensitivity(local_at_distance=lambda d, t: ls[t], beta=0.1, max_distance=3, global_bound=50.0)
    assert s.bound("x") == math.exp(-0.3) * 50.0
    assert s.bound("x") == brute_smooth(ls, 0.1, 50.0)


def test_smooth_local_bound_exceeding_global_bound_is_refused_when_evaluated():
    # The early exit trusts the documented contract LS^(t) <= global_bound; any evaluated
    # term that breaks it must be refused, not silently used or dropped.
    ls = [5.0, 1.0]
    s = SmoothSensitivity(local_at_distance=lambda d, t: ls[t], beta=1.0, max_distance=1, global_bound=1.0)
    with pytest.raises(PrivregValueError, match="exceeds global_bound"):
        s.bound("x")


def test_smooth_validation():
    ok = dict(local_at_distance=lambda d, t: 1.0, beta=0.1, max_distance=3)
    SmoothSensitivity(**ok)
    for beta in (0.0, -0.1, math.nan, math.inf):
        with pytest.raises(PrivregValueError, match="beta"):
            SmoothSensitivity(**{**ok, "beta": beta})
    with pytest.raises(PrivregValueError, match="max_distance"):
        SmoothSensitivity(**{**ok, "max_distance": -1})
    with pytest.raises(PrivregTypeError, match="max_distance"):
        SmoothSensitivity(**{**ok, "max_distance": 2.0})
    for gb in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(PrivregValueError, match="global_bound"):
            SmoothSensitivity(**{**ok, "global_bound": gb})
    with pytest.raises(PrivregTypeError, match="local_at_distance must be callable"):
        SmoothSensitivity(**{**ok, "local_at_distance": 1.0})
    s = SmoothSensitivity(**ok)
    assert s.kind is SensitivityKind.SMOOTH and s.data_dependent and s.norm is Norm.L1
    with pytest.raises(PrivregValueError, match="needs data"):
        s.bound()
    for bad in (-1.0, math.nan):
        bad_s = SmoothSensitivity(**{**ok, "local_at_distance": lambda d, t, bad=bad: bad if t == 2 else 1.0})
        with pytest.raises(PrivregValueError, match=r"local_at_distance\(data, 2\)"):
            bad_s.bound([1])


# ----------------------------------------------------------------- smoothness on a toy family

B = 10


def ls_max_at_distance(x, t: int, b: int = B) -> float:
    """LS^(t) of f = max on [0, b]^n under substitution (derived in the module docstring)."""
    s = sorted(x)
    n = len(s)

    def order(j):  # x_(j), 1-based, 0 for j <= 0
        return s[j - 1] if j >= 1 else 0

    return float(max(b - order(n - t), order(n) - order(n - 1 - t)))


def _brute_ls_tables(n: int, b: int) -> dict[tuple[int, ...], list[int]]:
    """Exact LS^(t), t = 0..n, for every multiset in [0, b]^n by dynamic programming."""
    states = list(itertools.combinations_with_replacement(range(b + 1), n))

    def neighbours(x):
        for i in range(n):
            for v in range(b + 1):
                yield tuple(sorted(x[:i] + (v,) + x[i + 1 :]))

    nb = {x: set(neighbours(x)) for x in states}
    layer = {x: max(abs(max(x) - max(y)) for y in nb[x]) for x in states}
    tables = {x: [layer[x]] for x in states}
    for _ in range(n):
        layer = {x: max([layer[x]] + [layer[y] for y in nb[x]]) for x in states}
        for x in states:
            tables[x].append(layer[x])
    return tables


@pytest.mark.parametrize("n, b", [(1, 10), (2, 10), (3, 10), (4, 10), (5, 6)])
def test_ls_at_distance_formula_matches_brute_force(n, b):
    """Validates the derivation used by the smoothness test below, exhaustively."""
    for x, table in _brute_ls_tables(n, b).items():
        for t, expected in enumerate(table):
            assert ls_max_at_distance(x, t, b) == expected, (x, t)
        assert table[-1] == b  # at distance n anything is reachable


def smooth_for_max(beta: float, n: int, max_distance: int | None = None) -> SmoothSensitivity:
    if max_distance is None or max_distance >= n:
        return SmoothSensitivity(local_at_distance=ls_max_at_distance, beta=beta, max_distance=n)
    return SmoothSensitivity(local_at_distance=ls_max_at_distance, beta=beta, max_distance=max_distance, global_bound=B)


@settings(max_examples=400)  # cheap examples over many neighbour pairs
@given(
    data=st.data(),
    x=st.lists(st.integers(0, B), min_size=1, max_size=8),
    beta=st.floats(min_value=0.01, max_value=3.0),
)
def test_smooth_sensitivity_is_beta_smooth_for_max(data, x, beta):
    """S*(x) <= e^beta S*(y) and S*(y) <= e^beta S*(x) for substitution neighbours x, y
    (up to 1e-12 relative float slack; a real violation is a factor, not an ulp)."""
    n = len(x)
    i = data.draw(st.integers(0, n - 1), label="i")
    y = list(x)
    y[i] = data.draw(st.integers(0, B), label="v")
    md = data.draw(st.one_of(st.none(), st.integers(0, n)), label="max_distance")
    s = smooth_for_max(beta, n, md)
    sx, sy = s.bound(x), s.bound(y)
    slack = 1 + 1e-12
    assert sx <= math.exp(beta) * sy * slack
    assert sy <= math.exp(beta) * sx * slack
    assert sx >= ls_max_at_distance(x, 0)  # dominates the local sensitivity
    assert sx <= B  # never worse than the global sensitivity


def test_smooth_sensitivity_exact_values_for_max():
    beta = 0.7
    # x = [10, 10]: LS = 0 (one substitution leaves a 10, and nothing exceeds B = 10), yet
    # its neighbour [10, 0] has LS = 10; so S*([10, 10]) = exp(-beta) * 10
    s = smooth_for_max(beta, 2)
    assert ls_max_at_distance([10, 10], 0) == 0.0
    assert ls_max_at_distance([10, 0], 0) == 10.0
    assert s.bound([10, 10]) == pytest.approx(10 * math.exp(-beta), rel=1e-15)
    # the local sensitivity itself is not smooth: 0 vs 10 on neighbours
    assert s.bound([10, 0]) == 10.0
    # [5, 5, 5]: LS = max(10-5, 0) = 5, LS^(1) = 5, LS^(2) = max(10-5, 5-0) = 5, LS^(3) = 10
    s3 = smooth_for_max(beta, 3)
    assert s3.bound([5, 5, 5]) == pytest.approx(max(5.0, 10 * math.exp(-3 * beta)), rel=1e-15)
    assert smooth_for_max(0.1, 3).bound([5, 5, 5]) == pytest.approx(10 * math.exp(-0.3), rel=1e-15)


# ----------------------------------------------------------------- require_sensitivity


class _Custom(Sensitivity):
    kind = SensitivityKind.GLOBAL
    norm = Norm.L2

    def bound(self, data=None):
        return 1.0


def test_require_sensitivity_accepts_matching_and_returns_it():
    g = GlobalSensitivity(value=1.0, norm="l2")
    assert require_sensitivity(g, kinds=(SensitivityKind.GLOBAL,), norms=(Norm.L1, Norm.L2), who="m") is g
    c = _Custom()
    assert require_sensitivity(c, kinds=(SensitivityKind.GLOBAL,), norms=(Norm.L2,), who="m") is c
    sm = SmoothSensitivity(local_at_distance=lambda d, t: 1.0, beta=0.1, max_distance=2)
    kinds = (SensitivityKind.GLOBAL, SensitivityKind.SMOOTH)
    assert require_sensitivity(sm, kinds=kinds, norms=(Norm.L1,), who="m") is sm


@pytest.mark.parametrize("kinds", [(SensitivityKind.GLOBAL,), (SensitivityKind.GLOBAL, SensitivityKind.SMOOTH)])
def test_require_sensitivity_refuses_local_with_smooth_hint(kinds):
    local = LocalSensitivity(function=lambda d: 1.0)
    with pytest.raises(PrivregValueError) as info:
        require_sensitivity(local, kinds=kinds, norms=(Norm.L1,), who="laplace")
    msg = str(info.value)
    assert "laplace" in msg and "'local'" in msg
    assert "SmoothSensitivity" in msg and "leaks" in msg


def test_require_sensitivity_refuses_smooth_without_local_hint():
    sm = SmoothSensitivity(local_at_distance=lambda d, t: 1.0, beta=0.1, max_distance=2)
    with pytest.raises(PrivregValueError) as info:
        require_sensitivity(sm, kinds=(SensitivityKind.GLOBAL,), norms=(Norm.L1,), who="laplace")
    msg = str(info.value)
    assert "'smooth'" in msg and "['global']" in msg and "leaks" not in msg


def test_require_sensitivity_refuses_wrong_norm():
    g = GlobalSensitivity(value=1.0, norm="l2")
    with pytest.raises(PrivregValueError) as info:
        require_sensitivity(g, kinds=(SensitivityKind.GLOBAL,), norms=(Norm.L1,), who="laplace")
    msg = str(info.value)
    assert "laplace" in msg and "['l1']" in msg and "'l2'" in msg


@pytest.mark.parametrize("obj", [1.0, "l1", None, {"value": 1.0, "norm": "l1"}, Norm.L1])
def test_require_sensitivity_refuses_non_sensitivity(obj):
    with pytest.raises(PrivregTypeError, match="must be a privreg Sensitivity"):
        require_sensitivity(obj, kinds=tuple(SensitivityKind), norms=tuple(Norm), who="m")
