"""benchmarks/ledger.py --quick runs end to end and prints its tables (4-5 with a PostgreSQL server)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # about 12 s (+15 s with PostgreSQL): a 1,000-row build, charges, a verification in a child process
def test_ledger_benchmark_quick_prints_its_tables(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ledger.py"), "--quick", "--cache", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for title in ("1. Reopen", "2. Charge", "3. Verify"):
        assert title in out
    assert "BudgetSession.open" in out
    assert "baseline: bare sqlite3 INSERT+COMMIT" in out
    assert "charge above bare insert" in out
    assert "verify_ledger(path)" in out
    assert "1,000" in out and "100,000" not in out  # --quick: 1e3 rows only
    assert "load average at end" in out
    # tables 4-5 (PostgreSQL beside SQLite) when a server is there or can be started
    if "PostgreSQL tables skipped" not in out:
        assert "4. One charge" in out and "5. Analysts charging one budget together" in out
        assert "synchronous_commit=on" in out and "SQLite file" in out
        admitted = re.findall(r"\s(\d+) of (\d+)\s", out)
        assert len(admitted) == 2 and all(a == b for a, b in admitted) and "OVERSPEND" not in out
