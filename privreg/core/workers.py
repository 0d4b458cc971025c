"""Worker processes that die with the process that started them.

Every pool of worker processes privreg starts (:mod:`privreg.crypto.parallel`, the
ngrams plugin's tokenizer and partition passes) passes :func:`initializer` to its pool,
so each worker runs :func:`bind_to_parent` first:

* Linux fast path: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (through ``ctypes``), so the
  kernel kills the worker as soon as its direct parent exits -- the owner itself for
  ``fork``/``spawn`` pools, the forkserver (which exits when its owner does) for
  ``forkserver`` pools. It is set only when the pool is made on the owner's main thread
  (the signal follows the thread that forked, not the process).
* Portable fallback, always on: a daemon thread in the worker checks every
  :data:`POLL_SECONDS` that the owner pid is still running (not a zombie) and that the
  worker's parent pid has not changed, and otherwise ends the worker with ``os._exit``.

So a ``SIGKILL`` of the owner (which runs no Python code) leaves no worker behind for
longer than a poll. Workers also stay in the owner's process group (no ``setsid``), so a
signal to the group (Ctrl-C in a terminal, ``kill -- -PGID``) reaches them directly.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from privreg.core.files import pid_running

__all__ = ["POLL_SECONDS", "initializer", "bind_to_parent", "WORKER_EXIT_CODE"]

#: How often a worker checks that its owner is alive.
POLL_SECONDS = 0.25

#: Exit status of a worker that found its owner gone.
WORKER_EXIT_CODE = 70

_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc prctl: the watchdog alone
        return False


def _watch(owner: int, parent: int) -> None:
    while True:
        if os.getppid() != parent or not pid_running(owner):
            os._exit(WORKER_EXIT_CODE)
        time.sleep(POLL_SECONDS)


def bind_to_parent(owner: int, fast_path: bool = True) -> None:
    """Run in a new worker process: end it when process ``owner`` ends (module docstring).
    ``fast_path``: also ask Linux to kill it when its direct parent exits."""
    if fast_path:
        _set_parent_death_signal()
    parent = os.getppid()
    if not pid_running(owner):  # the owner died while this worker started
        os._exit(WORKER_EXIT_CODE)
    threading.Thread(target=_watch, args=(owner, parent), name="privreg-owner-watchdog", daemon=True).start()


def initializer() -> tuple[Callable[..., None], tuple[Any, ...]]:
    """``(initializer, initargs)`` for a process pool made now by this process: its
    workers end with this process (:func:`bind_to_parent`)."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    return bind_to_parent, (os.getpid(), on_main_thread)
