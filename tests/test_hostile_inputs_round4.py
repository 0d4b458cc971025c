"""Issue #31, "cases not listed here will also be tried": hostile inputs, round four.

Cases found by trying the CLI beyond round three (``tests/test_hostile_inputs_round3.py``,
whose helpers these reuse): options given twice, limits so large a byte count overflows,
parameters whose extremes failed only after a charge, names too long for a file, and a
plot that could overwrite a ledger. Each refusal must exit 2 with exactly one
``privreg: error:`` line, no traceback, within 60 s, no ledger row and no partial output.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs_round3 import _ledger_rows, refused, refused_in_child

from privreg.cli.main import main

# -- an option given twice: the last one no longer wins silently ---------------------------


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["run", "bounded-mean", "-o", "A", "--output", "B"], "--output"),
        (["run", "bounded-mean", "--budget-epsilon", "5", "--budget-epsilon", "1", "-o", "A"], "--budget-epsilon"),
        (["run", "--budget-epsilon", "5", "bounded-mean", "--budget-epsilon=1", "-o", "A"], "--budget-epsilon"),
        (["run", "--ledger", "X", "--ledger", "Y", "bounded-mean", "-o", "A"], "--ledger"),
        (["run", "bounded-mean", "--max-workers", "1", "--max-workers=2", "-o", "A"], "--max-workers"),
        (["run", "bounded-mean", "--insecure-seed", "1", "--insecure-seed", "1", "-o", "A"], "--insecure-seed"),
        (["ledger", "init", "L.sqlite", "--epsilon", "1", "--epsilon", "10"], "--epsilon"),
        (["party", "init", "clk-dice", "D", "--base-port", "7200", "--base-port", "7300"], "--base-port"),
        (["audit-mechanism", "laplace", "--samples", "1000", "--samples", "2000"], "--samples"),
    ],
    ids=["output", "budget", "budget-around-workflow", "ledger", "limit", "seed", "ledger-init", "party-init", "audit"],
)
def test_an_option_given_twice_is_refused(capsys, tmp_path, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    line = refused(capsys, *argv)
    assert flag in line and "given twice" in line
    assert not any(tmp_path.iterdir())  # no output folder, ledger or party folder


def test_options_given_once_and_repeatable_options_still_work(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--budget-epsilon", "5", "bounded-mean", "--insecure-seed", "1", "-o", "A"]
    assert main(argv) == 0 and _ledger_rows(tmp_path / "A") == 2
    assert main(["ledger", "init", "L.sqlite", "--epsilon", "1", "--filter", "basic", "--filter", "rdp"]) == 0


# -- limits: a documented maximum, not an OverflowError -------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--max-input-gib", "1e300"),
        ("--max-input-gib", "1e308"),
        ("--max-memory-gib", "1048577"),
        ("--max-seconds", "1e10"),
    ],
)
def test_a_limit_above_its_maximum_is_refused(capsys, tmp_path, flag, value):
    out = tmp_path / "out"
    line = refused(capsys, "run", "bounded-mean", "--input", str(_csv(tmp_path)), "--lower", "0", "--upper", "100",
                   flag, value, "-o", str(out), out=out)  # fmt: skip
    assert flag in line and "at most" in line


def test_the_largest_input_limit_reads_a_file(capsys, tmp_path):
    out = tmp_path / "out"
    argv = ["run", "bounded-mean", "--input", str(_csv(tmp_path)), "--lower", "0", "--upper", "100"]
    assert main([*argv, "--max-input-gib", "1048576", "-o", str(out)]) == 0


def _csv(folder: Path) -> Path:
    path = folder / "ages.csv"
    path.write_text("age\n30\n40\n50\n", encoding="utf-8")
    return path


# -- extremes that failed after a charge: refused before it, or handled ---------------------


@pytest.mark.parametrize("step", ["1e-320", "1e-10", "1e308", "1048577"])
def test_an_outlier_count_grid_out_of_range_is_refused_before_the_charge(capsys, tmp_path, step):
    """A grid of 1e-320 overflowed the exact scale's float, one of 1e308 made the interval
    infinite: both after the count was charged (exit 1, a spent budget)."""
    out = tmp_path / "out"
    line = refused(capsys, "run", "outlier-count", "--step", step, "-o", str(out), out=out)
    assert "--step" in line and "1.04858e+06" in line


@pytest.mark.parametrize("step", [str(2.0**-30), str(2.0**20)])
def test_the_extreme_grids_allowed_release_a_count(capsys, tmp_path, step):
    out = tmp_path / "out"
    assert main(["run", "outlier-count", "--step", step, "-o", str(out)]) == 0
    assert _ledger_rows(out) == 1


def test_a_tiny_outlier_epsilon_is_refused_not_an_overflow(capsys, tmp_path):
    out = tmp_path / "out"
    line = refused(capsys, "run", "outlier-count", "--epsilon", "1e-300", "-o", str(out), out=out)
    assert "cannot be certified" in line


def test_outlier_subspace_counts_are_checked_before_the_selection_charges(capsys, tmp_path):
    """The counts' (epsilon, delta) were refused only after the selection was charged."""
    out = tmp_path / "out"
    argv = ["run", "outlier-subspaces", "--count-fraction", "0.99", "--epsilon", "1e-300"]
    line = refused(capsys, *argv, "-o", str(out), out=out)
    assert "cannot be certified" in line and "stopped after" not in line


def test_the_valid_count_estimate_stays_finite_at_a_tiny_rate():
    """ngrams --valid-count estimate --sample-rate 1e-320: count / p was infinite, an
    OverflowError after the extraction was charged; the estimate is at most the number of
    candidates."""
    import numpy as np

    from privreg.core.randomness import InsecureReproducibleRandom
    from privreg.plugins.ngrams.levels import Level, estimate_valid_count

    level = Level.build(np.arange(400, dtype=np.int64), Level.unigrams(50))  # S_2: 400 of the 2,500 bigrams
    rng = InsecureReproducibleRandom(seed=1)
    total = level.n1 * level.size
    # pruning single: every drawn pair is valid, so the one draw counts 1 and 1 / p is inf
    assert estimate_valid_count(level, pruning="single", rate=1e-320, rng=rng) == total
    assert estimate_valid_count(level, pruning="single", rate=1.0, rng=rng) == total


# -- names and files -----------------------------------------------------------------------


def test_a_party_name_too_long_for_a_file_is_refused(capsys, tmp_path):
    """300 characters: ENAMETOOLONG from the file system (exit 1) before."""
    line = refused(capsys, "party", "certs", str(tmp_path / "certs"), "p" * 300)
    assert "at most 63 characters" in line and "p" * 30 not in line
    assert main(["party", "certs", str(tmp_path / "ok"), "p" * 63]) == 0


@pytest.mark.parametrize("name", ["ledger", "data.csv", ""])
def test_a_plot_that_is_not_an_image_name_is_refused_before_anything_is_written(capsys, tmp_path, name):
    """``--plot ledger.sqlite`` replaced the ledger with a PNG (and ``--plot ""`` drew nothing)."""
    assert main(["run", "bounded-mean", "-o", str(tmp_path / "run")]) == 0
    ledger = tmp_path / "run" / "ledger.sqlite"
    data = tmp_path / "data.csv"
    data.write_text("age\n30\n", encoding="utf-8")
    target = {"ledger": str(ledger), "data.csv": str(data), "": ""}[name]
    before = ledger.read_bytes(), data.read_bytes()
    line = refused(capsys, "ledger", "verify", str(ledger), "--plot", target)
    assert "--plot" in line and ".png" in line
    assert (ledger.read_bytes(), data.read_bytes()) == before


def test_ngrams_refuses_one_column_as_both_user_and_text(capsys, tmp_path):
    """Each text would count as its own user: the per-user bound would bound nothing."""
    data = tmp_path / "t.csv"
    data.write_text("user_id,text\n1,hello world\n2,hello there\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["run", "ngrams", "--input", str(data), "--user-column", "text", "--text-column", "text"]
    line = refused(capsys, *argv, "-o", str(out), out=out)
    assert "user_column and text_column both name column 'text'" in line


def test_audit_mechanism_refuses_a_neighbour_with_too_many_digits(capsys):
    """5,000 digits: past Python's 4,300-digit limit, a plain ValueError (exit 1) before."""
    line = refused(capsys, "audit-mechanism", "laplace", "--samples", "1000", "--neighbours", "9" * 5000, "1")
    assert "--neighbours FIRST" in line and "too many digits" in line and len(line) < 300


@pytest.mark.parametrize("epsilon", ["1e-300", "5e-324", "1e-9"])
def test_bounded_mean_names_the_flag_when_epsilon_is_too_small(capsys, tmp_path, epsilon):
    """The refusal said "use path='exact' on the mechanisms" (a Python remedy), or "epsilon
    must be > 0; got 0.0" for 5e-324 (epsilon / 2 underflowed)."""
    out = tmp_path / "out"
    line = refused(capsys, "run", "bounded-mean", "--epsilon", epsilon, "-o", str(out), out=out)
    assert "is too small for the bounds" in line and "raise --epsilon" in line and "path=" not in line


@pytest.mark.parametrize("vocabulary", ["2", "6"])
def test_oov_discovery_with_too_small_a_vocabulary_is_refused_not_a_hang(tmp_path, vocabulary):
    """A law of a few short words has fewer one-letter edits than the 1,000 personal words
    drawn: the draw looped (over 180 s). In a child under 1 GiB and 60 s: a hang fails."""
    out = tmp_path / "out"
    argv = ["run", "oov-discovery", "--vocabulary", vocabulary, "--known-words", "0", "--users-per-layer", "10"]
    line = refused_in_child(*argv, "--depth", "8", "--passes", "1", "-o", str(out), cwd=tmp_path, out=out)
    assert "--vocabulary" in line and "one-letter edits" in line


# -- party init --host: an address or a host name, never text spliced into a config ----------


@pytest.mark.parametrize("host", ["", "not a host!", "a\nb", 'x"y', "a..b", "-a.example", "a" * 64, "é.example"])
def test_party_init_refuses_a_host_that_is_no_address_or_name(capsys, tmp_path, host):
    line = refused(capsys, "party", "init", "clk-dice", str(tmp_path / "run"), f"--host={host}")
    assert "--host" in line and "IPv4 or IPv6 address or a DNS host name" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("host, listen", [("::1", '"[::1]:7100"'), ("p1.example.org", '"p1.example.org:7100"')])
def test_party_init_writes_ipv6_and_host_names_as_addresses_party_run_reads(tmp_path, host, listen):
    from privreg.mpc.party_config import load_party_config

    run = tmp_path / "run"
    assert main(["party", "init", "clk-dice", str(run), f"--host={host}", "--insecure-plaintext"]) == 0
    text = (run / "linkage_unit.toml").read_text(encoding="utf-8")
    assert f"listen = {listen}" in text
    assert load_party_config(run / "linkage_unit.toml").listen == (host, 7100)


def test_a_one_class_test_split_names_its_flag_before_training(capsys, tmp_path):
    """Four test messages of the bundled slice are all ham: the AUC cannot be computed,
    which was an error without a flag, after the training had run."""
    out = tmp_path / "out"
    line = refused(capsys, "run", "spam-filter", "--bundled", "--train", "4", "--test", "4", "-o", str(out), out=out)
    assert "only one class" in line and "--test" in line
