"""Nothing an analyst sees before (or instead of) a release depends on the data.

The refusal oracle of issue 29: pairs of frames that differ in one person's value -- a
maximum inside vs outside the bounds, a value vs NaN, a value vs +-inf -- run through
every analyst-facing statistic with every rule, on a budget too small for the statistic,
on an exhausted budget and on an ample one. Within each pair, the outcome before any
release (the class and message of an error, the accuracy stated beforehand, what was
charged) must be identical; on the ample budget both release. Also: bounds whose
arithmetic overflows are refused when the statistic is built, and a release never lands
outside its bounds or the float range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privreg.analysis import Query
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom

BOUNDS = (0.0, 100.0)
PERSON = 7  # the person whose first row differs within a pair


def frame(value: float) -> pd.DataFrame:
    """40 persons with two rows each; person ``PERSON``'s first row holds ``value``."""
    gen = np.random.default_rng(0)
    x = gen.integers(10, 90, size=80).astype(float)
    x[2 * PERSON] = value
    return pd.DataFrame({"uid": np.repeat(np.arange(40), 2), "g": np.tile(["a", "b"], 40), "x": x})


PAIRS = {
    "max inside vs outside the bounds": (95.0, 500.0),
    "value vs NaN": (50.0, float("nan")),
    "value vs inf": (50.0, float("inf")),
    "value vs -inf": (50.0, float("-inf")),
    "NaN vs inf": (float("nan"), float("inf")),
}

RULES: dict[str, dict[str, Any]] = {
    "clip": {"rule": "clip"},
    "drop": {"rule": "drop"},
    "impute": {"rule": "impute", "impute": 40.0},
    "clip, missing imputed": {"rule": "clip", "impute": 40.0},
    "drop, missing imputed": {"rule": "drop", "impute": 40.0},
    "error (not a curator query)": {"rule": "error"},
}

Build = Callable[[Query, float, dict[str, Any]], Any]

STATISTICS: dict[str, Build] = {
    "count": lambda q, e, r: q.count(epsilon=e),
    "sum": lambda q, e, r: q.sum("x", bounds=BOUNDS, epsilon=e, **r),
    "mean": lambda q, e, r: q.mean("x", bounds=BOUNDS, epsilon=e, **r),
    "variance": lambda q, e, r: q.variance("x", bounds=BOUNDS, epsilon=e, **r),
    "quantile": lambda q, e, r: q.quantile("x", 0.9, bounds=BOUNDS, grid=101, epsilon=e, **r),
    "median": lambda q, e, r: q.median("x", bounds=BOUNDS, grid=101, epsilon=e, **r),
    "histogram of x": lambda q, e, r: q.histogram("x", categories=[50.0, 95.0, 500.0], epsilon=e),
    "count by public keys": lambda q, e, r: q.groupby("g", keys=["a", "b"]).count(epsilon=e),
    "count by selected keys of x": lambda q, e, r: q.groupby("x").count(epsilon=e, delta=1e-6),
    "sum by public keys": lambda q, e, r: q.groupby("g", keys=["a", "b"]).sum("x", bounds=BOUNDS, epsilon=e, **r),
    "sum by selected keys": lambda q, e, r: q.groupby("g").sum("x", bounds=BOUNDS, epsilon=e, delta=1e-6, **r),
    "mean by public keys": lambda q, e, r: q.groupby("g", keys=["a", "b"]).mean("x", bounds=BOUNDS, epsilon=e, **r),
    "mean by selected keys": lambda q, e, r: q.groupby("g").mean("x", bounds=BOUNDS, epsilon=e, delta=1e-6, **r),
}


def too_small() -> BudgetSession:
    """Epsilon 0.01 for a statistic asking 1000 (the oracle of the issue)."""
    return BudgetSession(budget=PrivacyBudget(epsilon=0.01, delta=1e-6))


def exhausted() -> BudgetSession:
    """A budget spent to the last epsilon before the statistic is asked for."""
    s = BudgetSession(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    Query(frame(50.0), privacy_unit="uid", max_rows_per_user=2, session=s).count(epsilon=1.0).release()
    return s


BUDGETS: dict[str, tuple[Callable[[], Any], float]] = {
    "too small": (too_small, 1000.0),
    "exhausted": (exhausted, 0.5),
}


def before_release(data: pd.DataFrame, build: Build, rule: dict[str, Any], session: Any, epsilon: float) -> tuple:
    """What an analyst sees before a release: the error (class, message) of building or
    releasing, the accuracy stated beforehand, and how many charges were recorded."""
    q = Query(data, privacy_unit="uid", max_rows_per_user=2, session=session, rng=InsecureReproducibleRandom(seed=1))
    rows = len(session.ledger.rows()) if isinstance(session, BudgetSession) else 0
    seen: list[Any] = []
    try:
        planned = build(q, epsilon, rule)
        seen.append(str(planned.accuracy(0.9)))
        planned.release()
        seen.append("released")
    except Exception as exc:  # noqa: BLE001 -- the class and the message are what is compared
        seen.append((type(exc).__name__, str(exc)))
    charged = len(session.ledger.rows()) - rows if isinstance(session, BudgetSession) else len(session.charges)
    return (*seen, charged)


@pytest.mark.parametrize("budget", list(BUDGETS))
@pytest.mark.parametrize("pair", list(PAIRS))
def test_refusals_before_a_release_are_the_same_for_frames_one_value_apart(pair, budget):
    make, epsilon = BUDGETS[budget]
    a, b = (frame(v) for v in PAIRS[pair])
    refused = 0
    for name, build in STATISTICS.items():
        for rule_name, rule in RULES.items():
            seen_a = before_release(a, build, rule, make(), epsilon)
            seen_b = before_release(b, build, rule, make(), epsilon)
            assert seen_a == seen_b, (name, rule_name)
            assert seen_a[-1] == 0, (name, rule_name)  # nothing was charged
            error = seen_a[-2]
            assert isinstance(error, tuple), (name, rule_name)  # refused, never released
            refused += error[0] == "BudgetExceededError"
    # every statistic whose arguments are valid is refused by the budget, not by its data
    assert refused == len(STATISTICS) * len(RULES) - (len(STATISTICS) - 4)  # rule 'error' needs a curator


@pytest.mark.parametrize("budget", list(BUDGETS))
def test_a_row_without_a_person_is_left_out_and_changes_nothing_before_a_release(budget):
    """A missing privacy-unit id (it used to be refused on pandas at construction and on
    Spark at the first release): the row is left out, on an ample budget too."""
    make, epsilon = BUDGETS[budget]
    a = frame(50.0)
    b = a.assign(uid=a["uid"].astype("Int64").mask(a.index == 2 * PERSON))
    for name, build in STATISTICS.items():
        for rule_name, rule in RULES.items():
            seen_a = before_release(a, build, rule, make(), epsilon)
            seen_b = before_release(b, build, rule, make(), epsilon)
            assert seen_a == seen_b, (name, rule_name)
            assert seen_a[-1] == 0 and isinstance(seen_a[-2], tuple), (name, rule_name)
    ample = BudgetSession(budget=PrivacyBudget(epsilon=100.0, delta=1e-3))
    q = Query(b, privacy_unit="uid", max_rows_per_user=2, session=ample, rng=InsecureReproducibleRandom(seed=1))
    assert len(q.bounded) == len(b) - 1
    assert q.count(epsilon=1.0).release().value >= 0


@pytest.mark.parametrize("pair", list(PAIRS))
def test_on_an_ample_budget_every_statistic_releases_whatever_the_value(pair):
    a, b = (frame(v) for v in PAIRS[pair])
    for name, build in STATISTICS.items():
        for rule_name, rule in RULES.items():
            seen = [before_release(d, build, rule, EventLog(), 1.0) for d in (a, b)]
            assert seen[0] == seen[1], (name, rule_name)
            if rule["rule"] != "error" or name.startswith(("count", "histogram")):
                assert seen[0][-2] == "released", (name, rule_name, seen[0])
            else:
                assert "curator=True" in seen[0][-2][1]


def test_the_curator_rule_refuses_by_the_data_and_says_so():
    """The one documented exception: a curator query's rule='error' refusal depends on
    the data (private against no one who sees it), after the budget check."""
    seen = []
    for value in PAIRS["max inside vs outside the bounds"]:
        q = Query(frame(value), privacy_unit="uid", max_rows_per_user=2, session=EventLog(), curator=True)
        try:
            q.sum("x", bounds=BOUNDS, epsilon=1.0, rule="error").release()
            seen.append("released")
        except PrivregValueError as exc:
            seen.append(str(exc))
    assert seen[0] == "released" and "curator mode" in seen[1]
    q = Query(frame(500.0), privacy_unit="uid", max_rows_per_user=2, session=too_small(), curator=True)
    with pytest.raises(Exception, match="cannot grant") as err:  # the budget is asked before the data
        q.sum("x", bounds=BOUNDS, epsilon=1000.0, rule="error").release()
    assert type(err.value).__name__ == "BudgetExceededError"


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda q: q.mean("x", bounds=(1e308, 1.7e308), epsilon=1.0), "midpoint"),
        (lambda q: q.variance("x", bounds=(1e308, 1.7e308), epsilon=1.0), "midpoint"),
        (lambda q: q.groupby("g", keys=["a"]).mean("x", bounds=(1e308, 1.7e308), epsilon=1.0), "midpoint"),
        (lambda q: q.sum("x", bounds=(0, 1.7e308), epsilon=1e-3), "noise scale"),
        (lambda q: q.mean("x", bounds=(-8e307, 8e307), epsilon=1e-3), "noise scale"),
        (lambda q: q.median("x", bounds=(-1e308, 1e308), epsilon=1.0), "width"),
        (lambda q: q.groupby("g", keys=["a"]).sum("x", bounds=(0, 1e308), epsilon=1e-3), "noise scale"),
    ],
)
def test_bounds_whose_arithmetic_overflows_are_refused_when_built(build, argument):
    for value in (50.0, 1.5e308):
        q = Query(frame(value), privacy_unit="uid", max_rows_per_user=2, session=EventLog())
        with pytest.raises(PrivregValueError, match=rf"bounds=\[.*{argument}.*overflows the float range") as err:
            build(q)
        assert "1.5e+308" not in str(err.value)


def test_no_release_lands_outside_its_bounds_or_the_float_range():
    """A mean with no rows charges its two parts once and releases a value inside its
    bounds; a sum near the float range releases a finite value (post-processing)."""
    empty = pd.DataFrame({"uid": np.arange(0), "x": np.zeros(0)})
    log = EventLog()
    q = Query(empty, privacy_unit="uid", session=log, rng=InsecureReproducibleRandom(seed=2))
    r = q.mean("x", bounds=(1e307, 1.6e308), epsilon=1.0).release()
    assert 1e307 <= r.value <= 1.6e308 and len(log.charges) == 2
    big = pd.DataFrame({"uid": np.arange(3), "x": [1.7e308, float("inf"), 1.7e308]})
    for seed in range(20):
        q = Query(big, privacy_unit="uid", session=EventLog(), rng=InsecureReproducibleRandom(seed=seed))
        s = q.sum("x", bounds=(0, 1.7e308), epsilon=1.0).release()
        m = q.mean("x", bounds=(0, 1.7e308), epsilon=1.0).release()
        assert math.isfinite(s.value) and 0 <= m.value <= 1.7e308


# --- the command line: refusals and estimates before a release -------------------------------

CLI_PAIRS = {
    "inside vs outside the bounds": ("045", "450"),
    "value vs NaN": ("045", "nan"),
    "value vs inf": ("045", "inf"),
    "value vs not a number": ("045", "abc"),  # read as missing, never refused
}


def _cli(capsys, *argv: Any) -> tuple[int, str]:
    from privreg.cli.main import main

    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def _ages(path: Any, cell: str) -> Any:
    """A CSV of 300 ages whose 8th row is ``cell`` (every variant of the same byte size:
    the size is the public fact the cost estimate reads)."""
    rows = [f"{20 + i % 60:03d}" for i in range(300)]
    rows[7] = cell
    path.write_text("age\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("pair", list(CLI_PAIRS))
def test_cli_refusals_and_estimates_are_the_same_for_files_one_row_apart(capsys, tmp_path, pair):
    bounds = ["--lower", "17", "--upper", "90"]
    seen: dict[str, list[Any]] = {}
    for i, cell in enumerate(CLI_PAIRS[pair]):
        path = _ages(tmp_path / f"{i}.csv", cell)
        ledger = tmp_path / f"ledger-{i}.sqlite"
        assert _cli(capsys, "ledger", "init", ledger, "--epsilon", "1")[0] == 0
        for rule in ("clip", "drop", "impute"):
            extra = ["--rule", rule] + (["--impute", "50"] if rule == "impute" else [])
            runs = [
                ["--max-memory-gib", "1e-6"],  # the cost estimate refuses
                ["--max-seconds", "1e-9"],
                ["--epsilon", "2", "--budget-epsilon", "1"],  # the run's own budget refuses
                ["--ledger", ledger],  # spends the shared ledger whole ...
                ["--ledger", ledger],  # ... which then refuses
            ]
            for n, options in enumerate(runs):
                out = tmp_path / f"out-{i}-{rule}-{n}"
                code, err = _cli(capsys, "run", "bounded-mean", "--input", path, *bounds, *extra, *options, "-o", out)
                err = err.replace(str(tmp_path), "TMP").replace(f"ledger-{i}", "ledger-I").replace(f"out-{i}", "out-I")
                seen.setdefault(f"{rule} {options[0]} run {n}", []).append((code, err))
            # the ledger is spent by the first "--ledger" run of this rule: a new one per rule
            ledger.unlink()
            assert _cli(capsys, "ledger", "init", ledger, "--epsilon", "1")[0] == 0
    for what, (a, b) in seen.items():
        assert a == b, what
    assert {code for code, _ in (v[0] for v in seen.values())} == {0, 2}
    # the spent ledger refuses the run before the workflow starts
    assert all("Nothing was released or charged" in seen[f"{r} --ledger run 4"][0][1] for r in ("clip", "drop"))


def test_bounded_mean_asks_the_budget_before_reading_its_input(tmp_path):
    """From Python, with a session as the charger: a budget that cannot grant both
    releases refuses before the file is read (a curator run would refuse this file)."""
    from privreg.core.errors import BudgetExceededError
    from privreg.core.workflow import WorkflowContext
    from privreg.plugins.standard.workflows import bounded_mean

    path = _ages(tmp_path / "ages.csv", "abc")
    session = BudgetSession(budget=PrivacyBudget(epsilon=0.5, delta=1e-6))
    ctx = WorkflowContext(charger=session)
    with pytest.raises(BudgetExceededError, match="nothing was read, released or charged"):
        bounded_mean(context=ctx, input=path, lower=17, upper=90, epsilon=1.0, curator=True)
    assert session.ledger.rows() == []
    with pytest.raises(PrivregValueError, match="is not numeric"):  # the budget grants it: the data decide
        bounded_mean(context=ctx, input=path, lower=17, upper=90, epsilon=0.5, curator=True)


def test_cli_bounded_mean_needs_declared_bounds_for_a_users_file(capsys, tmp_path):
    path = _ages(tmp_path / "ages.csv", "045")
    code, err = _cli(capsys, "run", "bounded-mean", "--input", path, "-o", tmp_path / "out")
    assert code == 2 and "--lower and --upper" in err and "lower=" not in err
    assert not (tmp_path / "out" / "ledger.sqlite").exists()  # nothing was charged
    code, err = _cli(capsys, "run", "bounded-mean", "--input", path, "--upper", "90", "-o", tmp_path / "o2")
    assert code == 2 and "needs both --lower and --upper" in err
    # only the data holder's --curator run refuses a cell that is not a number
    path = _ages(tmp_path / "text.csv", "abc")
    code, err = _cli(
        capsys,
        "run",
        "bounded-mean",
        "--input",
        path,
        "--lower",
        "17",
        "--upper",
        "90",
        "--curator",
        "-o",
        tmp_path / "c",
    )
    assert code == 2 and "is not numeric" in err and "abc" not in err
    # the bundled Adult slice keeps its own (census) bounds for age
    assert _cli(capsys, "run", "bounded-mean", "-o", tmp_path / "adult")[0] == 0


def test_ngrams_prints_the_exact_token_count_only_for_a_curator(tmp_path):
    """Two corpora of the same size in bytes, one user's text tokenized differently (120
    vs 118 tokens): without --curator the messages before the release are the same and
    neither count appears anywhere; with --curator the exact count is shown and marked."""
    from privreg.core.workflow import WorkflowContext
    from privreg.plugins.ngrams.workflow import ngrams_workflow

    def corpus(name: str, row7: str) -> Any:
        rows = [f"u{i % 7},alpha beta gamma {i:02d}" for i in range(30)]
        rows[7] = row7
        path = tmp_path / name
        path.write_text("user_id,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return path

    paths = [corpus("a.csv", "u0,alpha beta gamma 07"), corpus("b.csv", "u0,alphaXbetaXgamma 07")]
    echoed = []
    for path in paths:
        lines: list[str] = []
        ctx = WorkflowContext(charger=EventLog(), rng=InsecureReproducibleRandom(seed=4), echo=lines.append)
        res = ngrams_workflow(context=ctx, input=path, max_n=2, max_keys=10)
        text = "\n".join(lines) + res.summary + repr(res.metrics)
        assert "120" not in text and "118" not in text and "tokens" not in res.metrics
        echoed.append([line.replace(path.name, "X") for line in lines])
    assert echoed[0] == echoed[1]
    lines = []
    ctx = WorkflowContext(charger=EventLog(), rng=InsecureReproducibleRandom(seed=4), echo=lines.append)
    res = ngrams_workflow(context=ctx, input=paths[1], max_n=2, max_keys=10, curator=True)
    assert res.metrics["tokens"] == 118 and "118 tokens (--curator: exact, not private)" in res.summary


def _points(path: Any, spread: bool) -> Any:
    """200 records in two columns of the same byte size: clustered (every record within
    2r of many) or spread out (no neighbours): neighbourhood sizes a data-based estimate
    would read."""
    rows = [(f"{(i * 7) % 100:03d}", f"{(i * 13) % 100:03d}") if spread else ("050", "050") for i in range(200)]
    path.write_text("a,b\n" + "".join(f"{x},{y}\n" for x, y in rows), encoding="utf-8")
    return path


def test_outlier_resource_refusals_depend_only_on_public_sizes_without_curator(capsys, tmp_path):
    """outlier-count's memory and time estimate takes the neighbourhood size's public
    worst case unless --curator: clustered and spread files of the same size refuse (or
    pass) alike; with --curator the estimate reads the data and the two differ."""
    seen = {}
    for spread in (False, True):
        path = _points(tmp_path / f"{spread}.csv", spread)
        for limit in (["--max-seconds", "0.05"], ["--max-memory-gib", "0.0012"]):
            for curator in ([], ["--curator"]):
                argv = ["run", "outlier-count", "--input", path, "--columns", "a,b", *limit, *curator]
                code, err = _cli(capsys, *argv, "-o", tmp_path / f"o-{spread}-{limit[0]}-{bool(curator)}")
                err = err.replace(str(tmp_path), "TMP").replace(f"{spread}", "S")
                seen.setdefault((limit[0], bool(curator)), []).append((code, err.splitlines()[:1]))
    for limit in ("--max-seconds", "--max-memory-gib"):
        public_a, public_b = seen[(limit, False)]
        assert public_a == public_b, limit
        assert public_a[0] == 2  # the worst case is refused at these limits
        curator_a, curator_b = seen[(limit, True)]
        assert curator_a[0] != curator_b[0], limit  # the curator's estimate reads the data
