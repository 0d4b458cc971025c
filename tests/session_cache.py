"""A deterministic, costly test value built once per pytest session, across xdist workers.

Under ``pytest -n 2`` a module fixture is built by every worker that runs one of the
module's tests; for the few fixtures that run a whole protocol (tens of CPU seconds) that
doubles their cost. :func:`built_once` lets the first worker build the value and pickle it
into the session's shared temporary folder; the others wait on the lock and load it. Only
for values that are a pure function of fixed seeds: every worker would build the same one.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from typing import Any

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[], Any]) -> Any:
    """``build()``, computed by one worker of the session and shared with the others."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build()
    root = tmp_path_factory.getbasetemp().parent  # the folder every worker's basetemp sits in
    path = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                return pickle.loads(path.read_bytes())  # noqa: S301 (written by this session)
            value = build()
            tmp = path.with_suffix(".partial")
            tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            tmp.replace(path)
            return value
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
