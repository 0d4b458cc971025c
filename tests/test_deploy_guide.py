"""Issue #31, item 6: the deployment guide (docs/deploy.md), followed from scratch.

The page's boxes marked ``<!-- deploy-test: script -->`` run, in order, as one shell
script in an empty folder: a fresh OpenSSL CA, the party certificates, the shared secret
and ``privreg party init`` for the three deployments. The box marked ``processes`` then
starts its four ``privreg party run`` lines as four OS processes (mutual TLS on
127.0.0.1), and the box marked ``score`` scores the run against ``truth.csv``. The test
changes two values of the page's mp-spprl command, and says so: a free port instead of
7100, and 30 example records instead of 200 (speed); everything else is the page's text.

The run is checked against the same configurations simulated in one process (identical
links) and against the truth (recall and precision figures). Skipped only when openssl
is missing, and never under ``CI=true``.
"""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from party_helpers import free_base_port, wait_all

from privreg.cli.main import main

pytestmark = pytest.mark.slow  # openssl and four interpreters: ~20-40 s

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "deploy.md"
MARKED = re.compile(r"<!-- deploy-test: (\w+) -->\n```sh\n(.*?)```", re.S)
INIT = "privreg party init mp-spprl run1 --ca ca/ca.pem --certs certs --base-port 7100 \\\n  --option max_records=200"


def _openssl() -> str:
    found = shutil.which("openssl")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("openssl is missing on CI: the deployment guide cannot be followed")
        pytest.skip("openssl is not installed")
    return found


def _env(tmp_path: Path) -> dict[str, str]:
    """``privreg`` on PATH: this checkout, run by this interpreter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "privreg"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m privreg "$@"\n')
    shim.chmod(0o755)
    return dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]),
        PRIVREG_PROGRESS="off",
    )


def _groups_in_inputs(inputs: Path) -> tuple[int, int]:
    """Entities held by all three data parties, and those among them whose three
    records are identical (from the example's files and truth)."""
    with open(inputs / "truth.csv", newline="") as fh:
        entity = {(r["party"], r["id"]): r["entity"] for r in csv.DictReader(fh)}
    held: dict[str, dict[str, tuple[str, ...]]] = {}
    for p in ("P1", "P2", "P3"):
        with open(inputs / f"{p}.csv", newline="") as fh:
            for r in csv.DictReader(fh):
                rid = r.pop("id")
                held.setdefault(entity[(p, rid)], {})[p] = tuple(r.values())
    full = [v for v in held.values() if len(v) == 3]
    return len(full), sum(1 for v in full if len(set(v.values())) == 1)


def _table(out: str) -> dict[str, float]:
    rows = out.strip().splitlines()
    assert rows[1].split() == ["measure", "value"], out
    return {name: float(value) for name, value in (line.rsplit(None, 1) for line in rows[2:])}


def test_the_deployment_guide_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _openssl()
    blocks = MARKED.findall(GUIDE.read_text())
    kinds = [kind for kind, _ in blocks]
    assert kinds[-2:] == ["processes", "score"] and set(kinds[:-2]) == {"script"}, kinds
    script = "\n".join(code for kind, code in blocks if kind == "script")
    assert script.count(INIT) == 1, "the guide's mp-spprl command changed: update INIT"
    base = free_base_port(4)
    script = script.replace(INIT, INIT.replace("7100", str(base)).replace("max_records=200", "max_records=30"))
    work = tmp_path / "org"
    work.mkdir()
    env = _env(tmp_path)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # the guide's own check: the certificate names its party
    assert "URI:urn:privreg:party:P1" in done.stdout
    for run in ("run1", "run2", "run3"):
        assert (work / run).is_dir(), run
    assert 'ca = "' in (work / "run1" / "P1.toml").read_text()
    assert not (work / "run1" / "certs").exists()  # the organisation's CA, not a test one
    assert (work / "run1" / "inputs" / "secret.bin").read_bytes() == (work / "secret.bin").read_bytes()

    sim = tmp_path / "sim"
    shutil.copytree(work / "run1", sim)  # configs name the certificates by absolute path

    (_, code), (_, score) = blocks[-2], blocks[-1]
    lines = [shlex.split(line) for line in code.strip().splitlines()]
    assert len(lines) == 4 and all(a[:3] == ["privreg", "party", "run"] for a in lines)
    procs = {
        a[3]: subprocess.Popen(
            [sys.executable, "-m", "privreg", *a[1:]],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for a in lines
    }
    outs = wait_all(procs, timeout=300)
    for name, proc in procs.items():
        assert proc.returncode == 0, f"{name}: {outs[name][1][-3000:]}"
        assert "done (mtls, run " in outs[name][0], outs[name]

    argv = shlex.split(score.strip())
    assert argv[:3] == ["privreg", "party", "score"]
    monkeypatch.chdir(work)
    capsys.readouterr()
    assert main(argv[1:]) == 0, capsys.readouterr().err
    got = _table(capsys.readouterr().out)
    # 30 people, half of them held by all three parties, 30 % of records corrupted. An
    # entity whose records are identical at every party is always linked (whatever the
    # secret: identical records share every block and match exactly); a false group would
    # need similar records of three different people, which the example does not hold.
    full, identical = _groups_in_inputs(work / "run1" / "inputs")
    assert got["true groups"] == full == 15
    assert got["true groups linked"] >= identical >= 3
    assert got["group recall"] == pytest.approx(got["true groups linked"] / full, abs=5e-5)
    assert got["group precision"] == 1.0 and got["pair precision"] == 1.0
    assert got["pairs linked"] == 3 * got["linked groups"] and got["pair recall"] > 0

    # the four processes linked exactly what the same parties link in one process
    assert main(["party", "simulate", *(str(sim / f"{p}.toml") for p in ("linkage_unit", "P1", "P2", "P3"))]) == 0
    for p, name in [("linkage_unit", "groups.csv"), ("P1", "links.csv"), ("P2", "links.csv"), ("P3", "links.csv")]:
        assert (work / "run1" / "out" / p / name).read_bytes() == (sim / "out" / p / name).read_bytes(), p
