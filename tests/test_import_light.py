"""``import privreg`` stays light: no networking code, no protocol runtime (issue #17).

Each check runs in a fresh interpreter, since this test process has long imported
everything.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def modules_after(statement: str) -> set[str]:
    code = f"{statement}; import sys; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("statement", ["import privreg", "import privreg.core"])
def test_core_import_loads_no_networking_or_runtime(statement):
    loaded = modules_after(statement)
    assert "privreg.core" in loaded  # the probe really imported privreg
    assert not {"asyncio", "socket", "privreg.mpc"} & loaded


def test_mpc_import_loads_the_runtime():
    loaded = modules_after("import privreg.mpc")
    assert {"asyncio", "socket", "privreg.mpc.runtime", "privreg.mpc.tcp"} <= loaded
