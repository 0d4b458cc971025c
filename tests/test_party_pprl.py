"""``privreg party`` with MP-SPPRL: configurations, refusals and the in-memory run (the
runs as separate OS processes are in test_party_processes.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from party_helpers import free_base_port

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


def _init(tmp: Path, *extra: str) -> Path:
    run = tmp / "run"
    base = free_base_port(len(PARTIES))
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


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("record", -1, "record indices"), ("lsh_group", -5, "LSH groups"), ("lsh_group", 2**62, "LSH groups")],
)
def test_out_of_range_signatures_are_refused_naming_the_sender(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], field, value, message
) -> None:
    """A deviating data party's block signatures are range-checked by the linkage unit."""
    import privreg.plugins.pprl.blocking as blocking

    original = blocking.party_signatures

    def tampered(records, **kw):
        sig = original(records, **kw)
        if records.party == "P3":
            getattr(sig, field)[:1] = value
        return sig

    monkeypatch.setattr(blocking, "party_signatures", tampered)
    run = _init(tmp_path, "--insecure-plaintext")
    assert main(["party", "simulate", *(str(run / f"{p}.toml") for p in PARTIES)]) == 4
    err = capsys.readouterr().err
    assert "'P3' sent signatures of " + message in err


def test_a_listen_port_in_use_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    run = _init(tmp_path)
    cfg = run / "P1.toml"
    port = int(cfg.read_text().split('listen = "127.0.0.1:')[1].split('"')[0])
    with socket.create_server(("127.0.0.1", port)):
        assert main(["party", "run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}: cannot listen on 127.0.0.1:{port}" in err and "listening on" not in err


def test_an_input_folder_or_a_readable_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _init(tmp_path)
    cfg = run / "P1.toml"
    text = cfg.read_text()
    cfg.write_text(text.replace('records = "inputs/P1.csv"', 'records = "inputs"'))
    assert main(["party", "run", str(cfg)]) == 2
    assert "is a folder" in capsys.readouterr().err
    cfg.write_text(text)
    (run / "certs" / "P1.key").chmod(0o644)
    assert main(["party", "run", str(cfg)]) == 2
    assert "chmod 600" in capsys.readouterr().err


def test_a_text_secret_is_refused_as_in_the_workflow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _init(tmp_path)
    (run / "inputs" / "secret.bin").write_text("a typed passphrase is not random key material\n")
    assert main(["party", "run", str(run / "P1.toml")]) == 2
    err = capsys.readouterr().err
    assert "inputs.secret" in err and "passphrase" not in err
