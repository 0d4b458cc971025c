"""Multiprocessing for large batches of Paillier operations.

Heavy batch operations (encryption, re-randomisation, decryption, inner products,
packing, blinding) take ``workers``: ``None`` runs small batches (fewer than
:data:`PARALLEL_MIN_BATCH` items) in this process and spreads larger ones over all
usable cores; ``1`` always stays in this process; ``k`` uses at most ``k`` processes.
Worker processes come from one shared :class:`concurrent.futures.ProcessPoolExecutor`
(start method ``forkserver`` where available, so that forking never copies a running
event loop or threads); each task carries plain integers only. Workers end with this
process, even when it is killed with SIGKILL (:mod:`privreg.core.workers`: a parent-death
signal on Linux and an owner watchdog in every worker; they stay in its process group).

Randomness never comes from a worker: the parent draws every random exponent or unit
from its ``rng`` and ships it, so a run is the same whatever ``workers`` is, and a
reproducible test source stays reproducible. Private keys are shipped to workers (the
factors p and q, as integers) when decryption is parallel: the workers are children of
this process, reached through pipes of this user.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from privreg.core import validation as v
from privreg.core import workers as lifetime

__all__ = ["PARALLEL_MIN_BATCH", "usable_cores", "resolve_workers", "split", "run_chunks", "shutdown"]

#: Batches smaller than this run in-process when ``workers`` is None.
PARALLEL_MIN_BATCH = 256

T = TypeVar("T")

_executor: ProcessPoolExecutor | None = None
_executor_workers = 0


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def resolve_workers(n_items: int, workers: int | None) -> int:
    """How many processes a batch of ``n_items`` uses (1 means in-process)."""
    if workers is None:
        if n_items < PARALLEL_MIN_BATCH:
            return 1
        return max(1, min(usable_cores(), n_items // 32))
    workers = v.check_int("workers", workers, minimum=1)
    return max(1, min(workers, n_items))


def split(items: Sequence[T], k: int) -> list[Sequence[T]]:
    """``items`` in ``k`` contiguous chunks of near-equal size (none empty if possible)."""
    k = max(1, min(k, len(items)))
    q, r = divmod(len(items), k)
    out, start = [], 0
    for i in range(k):
        end = start + q + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return out


def _get_executor(workers: int) -> ProcessPoolExecutor:
    global _executor, _executor_workers
    if _executor is None or _executor_workers < workers:
        if _executor is not None:
            _executor.shutdown(wait=True)
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        init, initargs = lifetime.initializer()  # workers die with this process, even on SIGKILL
        _executor = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=init, initargs=initargs)
        _executor_workers = workers
    return _executor


def run_chunks(fn: Callable[..., list[Any]], chunks: Sequence[tuple[Any, ...]], workers: int) -> list[Any]:
    """``fn(*chunk)`` for every chunk, concatenated in order; in worker processes when
    ``workers > 1`` (``fn`` must be a module-level function returning a list)."""
    if workers <= 1 or len(chunks) <= 1:
        out: list[Any] = []
        for chunk in chunks:
            out.extend(fn(*chunk))
        return out
    ex = _get_executor(workers)
    futures = [ex.submit(fn, *chunk) for chunk in chunks]
    out = []
    for f in futures:
        out.extend(f.result())
    return out


def shutdown() -> None:
    """Stop the worker processes (they restart on the next parallel batch)."""
    global _executor, _executor_workers
    if _executor is not None:
        _executor.shutdown(wait=True)
    _executor, _executor_workers = None, 0


atexit.register(shutdown)
