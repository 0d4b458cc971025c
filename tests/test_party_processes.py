"""Each party in its own OS process, started from its own configuration through the CLI,
over mutual TLS on 127.0.0.1: the results equal the in-process run of the same configs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from party_helpers import free_base_port, spawn_party, wait_all

from privreg.cli.main import main

pytestmark = pytest.mark.slow  # separate interpreters and key generation: ~10-30 s each


def _run_both(run: Path, tmp_path: Path, parties: tuple[str, ...]) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    procs = {p: spawn_party(run / f"{p}.toml") for p in parties}
    outs = wait_all(procs)
    for p, proc in procs.items():
        assert proc.returncode == 0, f"{p}: {outs[p][1][-3000:]}"
        assert "done (mtls, run " in outs[p][0]
    assert main(["party", "simulate", *(str(copy / f"{p}.toml") for p in parties)]) == 0
    run_ids = set()
    for p in parties:
        record = json.loads((run / "out" / p / "run.json").read_text())
        assert record["security"] == "mtls" and record["insecure_plaintext"] is False
        assert set(record["peer_identities"]) == set(parties) - {p}
        assert all(record["peer_identities"].values())  # certificate fingerprints
        run_ids.add(record["run_id"])
        # message for message, the same transcript as in memory, sizes included (the
        # interleaving of different peers' messages may differ between the modes)
        net = json.loads((run / "out" / p / "transcript.json").read_text())["messages"]
        mem = json.loads((copy / "out" / p / "transcript.json").read_text())["messages"]
        assert sorted(net, key=json.dumps) == sorted(mem, key=json.dumps)
    assert len(run_ids) == 1 and None not in run_ids
    return copy


def test_pprl_four_processes_over_mutual_tls_equal_the_in_process_run(tmp_path: Path) -> None:
    parties = ("linkage_unit", "P1", "P2", "P3")
    run = tmp_path / "run"
    base = free_base_port(len(parties))
    options = ["key_bits=512", "insecure_small_keys=true", "lsh_groups=6", "lsh_bits=10", "max_records=300"]
    argv = ["party", "init", "mp-spprl", str(run), "--seed", "11", "--base-port", str(base)]
    assert main(argv + [x for o in options for x in ("--option", o)]) == 0
    copy = _run_both(run, tmp_path, parties)
    for p, name in [("linkage_unit", "groups.csv"), ("P1", "links.csv"), ("P2", "links.csv"), ("P3", "links.csv")]:
        assert (run / "out" / p / name).read_bytes() == (copy / "out" / p / name).read_bytes()
    assert len((run / "out" / "linkage_unit" / "groups.csv").read_text().splitlines()) > 10


def test_spam_filter_three_processes_over_mutual_tls_equal_the_in_process_run(tmp_path: Path) -> None:
    parties = ("alice", "bob", "carol")
    run = tmp_path / "run"
    base = free_base_port(len(parties))
    options = ["key_bits=512", "insecure_small_keys=true", "train=20", "test=6", "space=128", "batch_size=8"]
    argv = ["party", "init", "spam-filter", str(run), "--seed", "5", "--base-port", str(base)]
    assert main(argv + [x for o in options for x in ("--option", o)]) == 0
    copy = _run_both(run, tmp_path, parties)
    net = json.loads((run / "out" / "bob" / "model.json").read_text())
    mem = json.loads((copy / "out" / "bob" / "model.json").read_text())
    assert net["w"] == mem["w"]
    assert (run / "out" / "carol" / "labels.csv").read_bytes() == (copy / "out" / "carol" / "labels.csv").read_bytes()


def test_clk_dice_four_processes_over_mutual_tls_equal_the_in_process_run(tmp_path: Path) -> None:
    parties = ("linkage_unit", "P1", "P2", "P3")
    run = tmp_path / "run"
    base = free_base_port(len(parties))
    options = ["key_bits=512", "insecure_small_keys=true", "max_records=300"]
    argv = ["party", "init", "clk-dice", str(run), "--seed", "13", "--base-port", str(base)]
    assert main(argv + [x for o in options for x in ("--option", o)]) == 0
    copy = _run_both(run, tmp_path, parties)
    for p, name in [("linkage_unit", "groups.csv"), ("P1", "links.csv"), ("P2", "links.csv"), ("P3", "links.csv")]:
        assert (run / "out" / p / name).read_bytes() == (copy / "out" / p / name).read_bytes()
    assert len((run / "out" / "linkage_unit" / "groups.csv").read_text().splitlines()) > 100
