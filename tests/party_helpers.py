"""Helpers of the ``privreg party`` tests: free ports and party processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def free_base_port(count: int) -> int:
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


def spawn_party(config: Path) -> subprocess.Popen[str]:
    """``privreg party run CONFIG`` in a new OS process (this checkout first on the path)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), *sys.path]))
    return subprocess.Popen(
        [sys.executable, "-m", "privreg", "party", "run", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_all(procs: dict[str, subprocess.Popen[str]], timeout: float = 240) -> dict[str, tuple[str, str]]:
    """Wait for every party process; kill any still running after ``timeout`` seconds."""
    outs = {}
    for name, proc in procs.items():
        try:
            outs[name] = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs.values():
                p.kill()
            raise
    return outs
