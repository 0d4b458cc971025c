"""``privreg party`` with the recommended linkage (clk-dice): the in-memory run of the
configurations links the true groups, every party's links agree with the linkage unit's
groups, and the linkage unit's transcript holds no filter (the runs as separate OS
processes are in test_party_processes.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from party_helpers import free_base_port

from privreg.cli.main import main

PARTIES = ("linkage_unit", "P1", "P2", "P3")


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _init(tmp: Path, *options: str) -> Path:
    run = tmp / "run"
    base = free_base_port(len(PARTIES))
    opts = ["key_bits=512", "insecure_small_keys=true", "max_records=300", *options]
    argv = ["party", "init", "clk-dice", str(run), "--seed", "5", "--base-port", str(base), "--insecure-plaintext"]
    assert main(argv + [x for o in opts for x in ("--option", o)]) == 0
    return run


def test_simulated_clk_dice_run_links_the_true_groups(tmp_path: Path) -> None:
    run = _init(tmp_path)
    assert main(["party", "simulate", *(str(run / f"{p}.toml") for p in PARTIES)]) == 0
    truth = {(r[0], r[1]): r[2] for r in _rows(run / "inputs" / "truth.csv")[1:]}
    ids = {p: [r[0] for r in _rows(run / "inputs" / f"{p}.csv")[1:]] for p in PARTIES[1:]}
    rows = _rows(run / "out" / "linkage_unit" / "groups.csv")
    assert rows[0] == ["group", "party", "record"]
    groups: dict[str, set[tuple[str, str]]] = {}
    for gid, party, rec in rows[1:]:
        groups.setdefault(gid, set()).add((party, ids[party][int(rec)]))
    entities = {}
    for (party, rid), ent in truth.items():
        entities.setdefault(ent, set()).add((party, rid))
    true_groups = [g for g in entities.values() if len(g) >= 2]
    exact = sum(1 for g in groups.values() if g in true_groups)
    assert exact / len(true_groups) >= 0.95  # recall
    assert exact / len(groups) >= 0.95  # precision
    # each data party's links are exactly its records in the linkage unit's groups
    for p in PARTIES[1:]:
        links = _rows(run / "out" / p / "links.csv")
        assert links[0] == ["group", "record"]
        want = sorted((gid, rid) for gid, g in groups.items() for q, rid in g if q == p)
        assert sorted((g, r) for g, r in links[1:]) == want
    view = json.loads((run / "out" / "linkage_unit" / "transcript.json").read_text())
    steps = {m["step"] for m in view["messages"]}
    # the default relay blocking: unlinked words reach it, never a token matrix; masked CLKs
    # travel between data parties only
    assert "relay-tokens" in steps and "tokens" not in steps and "masked" not in steps
    summary = json.loads((run / "out" / "linkage_unit" / "result.json").read_text())
    assert summary["linked_groups"] == len(groups) and summary["decisions"] >= summary["candidates"]


def test_unknown_option_names_the_allowed_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    code = main(["party", "init", "clk-dice", str(run), "--option", "lsh_groups=3"])
    assert code == 2
    assert "the options of clk-dice are: parties, records, threshold" in capsys.readouterr().err
