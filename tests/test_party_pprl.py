"""``privreg party`` with MP-SPPRL: configs, the in-memory run, and four OS processes over TLS."""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from privreg.cli.main import main

OPTIONS = [
    "--option",
    "key_bits=512",
    "--option",
    "insecure_small_keys=true",
    "--option",
    "lsh_groups=6",
    "--option",
    "lsh_bits=10",
    "--option",
    "max_records=300",
]
PARTIES = ("linkage_unit", "P1", "P2", "P3")


def _free_base_port(count: int) -> int:
    """A port p such that p .. p + count - 1 are free now (bound and released)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count >= 65536:
            continue
        socks = []
        try:
            for i in range(count):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no free port range")


def _init(tmp: Path, *extra: str) -> Path:
    run = tmp / "run"
    base = _free_base_port(len(PARTIES))
    code = main(["party", "init", "mp-spprl", str(run), "--seed", "11", "--base-port", str(base), *OPTIONS, *extra])
    assert code == 0
    return run


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _truth(run: Path) -> dict[tuple[str, str], str]:
    return {(r[0], r[1]): r[2] for r in _rows(run / "inputs" / "truth.csv")[1:]}


def _ids(run: Path, party: str) -> list[str]:
    return [r[0] for r in _rows(run / "inputs" / f"{party}.csv")[1:]]


def test_simulated_run_links_true_groups_and_parties_agree(tmp_path: Path) -> None:
    run = _init(tmp_path, "--insecure-plaintext")
    assert main(["party", "simulate", *(str(run / f"{p}.toml") for p in PARTIES)]) == 0
    groups = _rows(run / "out" / "linkage_unit" / "groups.csv")
    assert groups[0] == ["group", "P1", "P2", "P3"]
    truth = _truth(run)
    ids = {p: _ids(run, p) for p in ("P1", "P2", "P3")}
    correct = 0
    for row in groups[1:]:
        entities = {truth[(p, ids[p][int(i)])] for p, i in zip(("P1", "P2", "P3"), row[1:])}
        correct += len(entities) == 1
    true_groups = len(set.intersection(*({truth[(p, i)] for i in ids[p]} for p in ids)))
    assert len(groups) > 1
    assert correct / (len(groups) - 1) >= 0.9  # precision
    assert correct / true_groups >= 0.5  # recall at the paper's T = 3 with 30 % corruption
    # each data party's links are exactly its column of the linkage unit's groups
    for k, p in enumerate(("P1", "P2", "P3"), start=1):
        links = _rows(run / "out" / p / "links.csv")
        assert links[0] == ["group", "record"]
        expect = sorted((int(r[0]), ids[p][int(r[k])]) for r in groups[1:])
        assert [(int(g), rid) for g, rid in links[1:]] == expect
    record = json.loads((run / "out" / "P1" / "run.json").read_text())
    assert record["security"] == "in-process" and record["reproducible_seed"] is True
    view = json.loads((run / "out" / "P1" / "transcript.json").read_text())
    assert view["messages"] and all(m["peer"] != "P1" for m in view["messages"])
    assert {m["step"] for m in view["messages"]} >= {"deployment.options", "keys", "signatures"}


def test_mismatched_options_stop_the_run_naming_the_party(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _init(tmp_path, "--insecure-plaintext")
    cfg = run / "P2.toml"
    cfg.write_text(cfg.read_text().replace("threshold = 3", "threshold = 4"))
    assert main(["party", "simulate", *(str(run / f"{p}.toml") for p in PARTIES)]) == 4
    err = capsys.readouterr().err
    assert "other public options" in err and "'P2'" in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace("[tls]", "[tlsx]"), "unknown keys"),
        (lambda s: s.replace('party = "P1"', 'party = "P9"'), "not a party"),
        (lambda s: s.replace('records = "inputs/P1.csv"', 'records = "inputs/missing.csv"'), "no file"),
        (lambda s: s.replace("max_records = 300", "max_records = 0"), "max_records"),
    ],
)
def test_bad_configuration_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit, message) -> None:
    run = _init(tmp_path)
    cfg = run / "P1.toml"
    cfg.write_text(edit(cfg.read_text()))
    assert main(["party", "run", str(cfg)]) == 2
    assert message in capsys.readouterr().err


def test_config_without_tls_or_insecure_flag_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _init(tmp_path)
    cfg = run / "P1.toml"
    text = cfg.read_text()
    start = text.index("[tls]")
    cfg.write_text(text[:start] + text[text.index("[peers]") :])
    assert main(["party", "run", str(cfg)]) == 2
    assert "insecure_plaintext = true" in capsys.readouterr().err


def _spawn(config: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), *sys.path]))
    return subprocess.Popen(
        [sys.executable, "-m", "privreg", "party", "run", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_four_processes_over_mutual_tls_equal_the_in_process_run(tmp_path: Path) -> None:
    run = _init(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    procs = {p: _spawn(run / f"{p}.toml") for p in PARTIES}
    outs = {}
    for p, proc in procs.items():
        try:
            outs[p] = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, f"{p}: {outs[p][1][-2000:]}"
    assert main(["party", "simulate", *(str(copy / f"{p}.toml") for p in PARTIES)]) == 0
    for p, name in [("linkage_unit", "groups.csv"), ("P1", "links.csv"), ("P2", "links.csv"), ("P3", "links.csv")]:
        assert (run / "out" / p / name).read_bytes() == (copy / "out" / p / name).read_bytes()
    run_ids = set()
    for p in PARTIES:
        record = json.loads((run / "out" / p / "run.json").read_text())
        assert record["security"] == "mtls" and record["insecure_plaintext"] is False
        assert set(record["peer_identities"]) == set(PARTIES) - {p}
        run_ids.add(record["run_id"])
        # message for message, the same transcript as in memory (sizes included)
        net = json.loads((run / "out" / p / "transcript.json").read_text())["messages"]
        mem = json.loads((copy / "out" / p / "transcript.json").read_text())["messages"]
        key = lambda m: (m["direction"], m["peer"], m["step"])  # noqa: E731
        assert sorted(map(key, net)) == sorted(map(key, mem))
        assert sum(m["size_bytes"] for m in net) == sum(m["size_bytes"] for m in mem)
    assert len(run_ids) == 1 and None not in run_ids
