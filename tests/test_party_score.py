"""Issue #31, item 6: ``privreg party score`` -- a run's outputs against a truth file.

The figures are checked against an independent count from the same files; bad inputs
are one-line exit-2 refusals that quote no record id."""

from __future__ import annotations

import csv
import itertools
import json
import os
import shutil
from pathlib import Path

import pytest

from privreg.cli.main import main

PARTIES = ("P1", "P2", "P3")
SMALL = ["key_bits=512", "insecure_small_keys=true", "max_records=30", "lsh_groups=6", "lsh_bits=10"]


def _options(opts: list[str]) -> list[str]:
    return [x for o in opts for x in ("--option", o)]


@pytest.fixture(scope="module")
def pprl_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("score") / "run"
    assert main(["party", "init", "mp-spprl", str(run), "--seed", "3", "--insecure-plaintext", *_options(SMALL)]) == 0
    assert main(["party", "simulate", *(str(run / f"{p}.toml") for p in ("linkage_unit", *PARTIES))]) == 0
    return run


@pytest.fixture
def run(pprl_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(pprl_run, copy)
    return copy


def _score(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, str]:
    capsys.readouterr()
    assert main(["party", "score", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    return dict(line.rsplit(None, 1) for line in lines[2:])  # after the title and the table header


def _independent(run: Path, *, full: bool = True) -> dict[str, float]:
    """Group and pair counts straight from the files (paper 004, formulas (4)-(5)); with
    ``full``, a true group is an entity at every party, else at two or more, and a group
    is found exactly when it holds all of its entity's records."""
    with open(run / "inputs" / "truth.csv", newline="") as fh:
        entity = {(r["party"], r["id"]): r["entity"] for r in csv.DictReader(fh)}
    groups: dict[str, dict[str, str]] = {}
    for p in PARTIES:
        with open(run / "out" / p / "links.csv", newline="") as fh:
            for r in csv.DictReader(fh):
                groups.setdefault(r["group"], {})[p] = r["record"]
    held: dict[str, set[str]] = {}
    for (p, _), e in entity.items():
        held.setdefault(e, set()).add(p)
    true_groups = sum(1 for ps in held.values() if (ps == set(PARTIES) if full else len(ps) >= 2))
    exact = 0
    for g in groups.values():
        ents = {entity[(p, r)] for p, r in g.items()}
        exact += len(ents) == 1 and held[next(iter(ents))] == set(g)
    true_pairs = sum(len(ps) * (len(ps) - 1) // 2 for ps in held.values())
    pairs = found = 0
    for g in groups.values():
        for a, b in itertools.combinations(sorted(g), 2):
            pairs += 1
            found += entity[(a, g[a])] == entity[(b, g[b])]
    return {
        "linked groups": len(groups),
        "true groups": true_groups,
        "group recall": exact / true_groups,
        "group precision": exact / len(groups),
        "true pairs": true_pairs,
        "pair recall": found / true_pairs,
        "pair precision": found / pairs,
    }


def test_score_of_a_linkage_run_equals_an_independent_count(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _score(
        capsys,
        *(str(run / f"{p}.toml") for p in ("linkage_unit", *PARTIES)),
        "--truth",
        str(run / "inputs" / "truth.csv"),
    )
    want = _independent(run)
    for name, value in want.items():
        assert float(got[name]) == pytest.approx(value, abs=5e-5), name
    assert want["linked groups"] >= 5 and want["group precision"] == 1.0


def test_score_of_a_clk_dice_run_counts_groups_of_any_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "dice"
    opts = ["key_bits=512", "insecure_small_keys=true", "max_records=30"]
    assert main(["party", "init", "clk-dice", str(run), "--seed", "4", "--insecure-plaintext", *_options(opts)]) == 0
    configs = [str(run / f"{p}.toml") for p in ("linkage_unit", *PARTIES)]
    assert main(["party", "simulate", *configs]) == 0
    got = _score(capsys, *configs, "--truth", str(run / "inputs" / "truth.csv"))
    want = _independent(run, full=False)
    for name, value in want.items():
        assert float(got[name]) == pytest.approx(value, abs=5e-5), name
    assert want["linked groups"] >= 5 and want["pair precision"] > 0.8


def test_score_counts_a_wrong_link(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # swap P1's records of two groups: both groups become wrong, precision drops to (k-2)/k
    links = run / "out" / "P1" / "links.csv"
    rows = links.read_text().splitlines()
    head, first, second, *rest = rows
    g1, r1 = first.split(",")
    g2, r2 = second.split(",")
    links.write_text("\n".join([head, f"{g1},{r2}", f"{g2},{r1}", *rest]) + "\n")
    got = _score(capsys, *(str(run / f"{p}.toml") for p in PARTIES), "--truth", str(run / "inputs" / "truth.csv"))
    want = _independent(run)
    k = want["linked groups"]
    assert float(got["group precision"]) == pytest.approx((k - 2) / k, abs=5e-5)
    assert (
        float(got["pair precision"]) == pytest.approx(want["pair precision"], abs=5e-5) and want["pair precision"] < 1
    )


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(["party", "score", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privreg: error: "), err
    return lines[0]


def _configs(run: Path, parties: tuple[str, ...] = PARTIES) -> list[str]:
    return [str(run / f"{p}.toml") for p in parties]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "--truth: no file at"),
        ("folder", "is a folder; give a file"),
        ("fifo", "FIFO (named pipe), not a regular file"),
        ("device", "device or socket, not a regular file"),
        ("columns", "lacks the columns ['party', 'entity']"),
        ("repeated", "line 3 repeats a record of party 'P1'"),
        ("empty-cell", "line 2 has an empty party, id or entity"),
        ("unknown-record", "line 2 names a record that --truth does not list for party 'P1'"),
        ("bad-group", "line 2 has a group that is not a group id"),
        ("no-links", "party P2's links.csv: no file at"),
        ("one-party", "add the configurations of ['P2', 'P3']"),
        ("other-options", "different [options]"),
        ("twice", "two configurations for party 'P1'"),
    ],
)
def test_party_score_refuses_bad_input_in_one_line(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, expected: str
) -> None:
    truth = run / "inputs" / "truth.csv"
    configs = _configs(run)
    secret_id = "P1-0"
    if case == "missing":
        truth = tmp_path / "nothing.csv"
    elif case == "folder":
        truth = tmp_path
    elif case == "fifo":
        truth = tmp_path / "fifo.csv"
        os.mkfifo(truth)
    elif case == "device":
        truth = Path("/dev/zero")
    elif case == "columns":
        truth = run / "inputs" / "P1.csv"
    elif case == "repeated":
        lines = truth.read_text().splitlines()
        truth.write_text("\n".join([lines[0], lines[1], lines[1], *lines[2:]]) + "\n")
    elif case == "empty-cell":
        _edit(truth, "P1,P1-0,", "P1,,")
    elif case == "unknown-record":
        links = run / "out" / "P1" / "links.csv"
        head, first, *rest = links.read_text().splitlines()
        secret_id = "NOT-A-RECORD-42"
        links.write_text("\n".join([head, f"{first.split(',')[0]},{secret_id}", *rest]) + "\n")
    elif case == "bad-group":
        links = run / "out" / "P1" / "links.csv"
        head, first, *rest = links.read_text().splitlines()
        links.write_text("\n".join([head, f"٣,{first.split(',')[1]}", *rest]) + "\n")
    elif case == "no-links":
        (run / "out" / "P2" / "links.csv").unlink()
    elif case == "one-party":
        configs = _configs(run, ("P1",))
    elif case == "other-options":
        _edit(run / "P2.toml", "lsh_bits = 10", "lsh_bits = 12")
    elif case == "twice":
        configs = [*configs, configs[0]]
    line = _refused(capsys, *configs, "--truth", str(truth))
    assert expected in line, line
    assert secret_id not in line  # a record id is data: never quoted


def test_spam_filter_is_scored_on_carols_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "spam"
    opts = ["key_bits=512", "insecure_small_keys=true", "train=20", "test=6", "space=128", "batch_size=8"]
    assert main(["party", "init", "spam-filter", str(run), "--seed", "5", "--insecure-plaintext", *_options(opts)]) == 0
    configs = [str(run / f"{p}.toml") for p in ("alice", "bob", "carol")]
    assert main(["party", "simulate", *configs]) == 0
    truth = run / "inputs" / "carol.jsonl"
    got = _score(capsys, *configs, "--truth", str(truth))
    want = [json.loads(line)["label"] == "spam" for line in truth.read_text().splitlines()]
    with open(run / "out" / "carol" / "labels.csv", newline="") as fh:
        flagged = [r["label"] == "1" for r in csv.DictReader(fh)]
    accuracy = sum(a == b for a, b in zip(flagged, want)) / len(want)
    assert float(got["accuracy"]) == pytest.approx(accuracy, abs=5e-5)
    assert int(got["spam"]) == sum(want) and int(got["flagged spam"]) == sum(flagged)
    carol = json.loads((run / "out" / "carol" / "result.json").read_text())
    if "accuracy" in carol:  # Carol's own figure, from her labelled input
        assert float(got["accuracy"]) == pytest.approx(carol["accuracy"], abs=5e-5)
    line = _refused(capsys, configs[0], configs[1], "--truth", str(truth))
    assert "add carol's configuration" in line
    line = _refused(capsys, *configs, "--truth", str(run / "inputs" / "alice.jsonl"))
    assert "holds 20 messages but the run classified options.test = 6" in line
