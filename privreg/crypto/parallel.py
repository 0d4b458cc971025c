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

**Pluggable chunk executors.** :func:`use_executor` (or :func:`set_executor` /
:func:`reset_executor`) sends the chunks of :func:`run_chunks` to a
:class:`ChunkExecutor` instead of the process pool -- for instance the pprl plugin's
``SparkChunkExecutor``, which runs each chunk as one Spark task. The executor is a
:class:`contextvars.ContextVar`, so it follows the current thread or asyncio task: two
parties run in one process (tests, the in-memory transport) can use different executors.
With an executor set and ``workers=None``, a large batch is cut into
``ChunkExecutor.parallelism`` chunks (not this machine's core count); ``workers=1`` and
small batches still stay in this process. With no executor set nothing changes.

What a chunk carries, and so where an executor may run it:

* the data parties' chunks (encryption, re-randomisation, inner products, packing,
  blinding): ciphertexts, **public** keys, and the party's own values and random
  exponents -- data the party may hand to a cluster it runs itself;
* the **key holder's** chunks (decryption, ``zero_mod_p``, the CRT variants of
  re-randomisation, reductions modulo a prime factor): the **PRIVATE key factors** p and
  q as plain integers, next to the ciphertexts. **An executor that runs the key holder's
  chunks must be the key holder's own machines (its own Spark cluster, never a shared or
  another party's one): every executor process, its task serialisation and its spill
  files see the private key.**

Randomness is drawn in this process before chunking in every case, so results do not
depend on the executor.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import contextvars
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from privreg.core import validation as v
from privreg.core import workers as lifetime
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "PARALLEL_MIN_BATCH",
    "ChunkExecutor",
    "usable_cores",
    "resolve_workers",
    "split",
    "run_chunks",
    "shutdown",
    "use_executor",
    "set_executor",
    "reset_executor",
    "current_executor",
]

#: Batches smaller than this run in-process when ``workers`` is None.
PARALLEL_MIN_BATCH = 256

T = TypeVar("T")

_executor: ProcessPoolExecutor | None = None
_executor_workers = 0


class ChunkExecutor(abc.ABC):
    """Runs the chunks of :func:`run_chunks` somewhere other than the process pool.

    ``map_chunks(fn, chunks)`` returns ``[fn(*chunk) for chunk in chunks]`` -- one list
    per chunk, **in the order of** ``chunks`` -- wherever it likes; ``fn`` is a
    module-level function of privreg (importable where the chunks run) and every chunk a
    tuple of plain integers, gmpy2 integers and lists of them. ``parallelism`` is how
    many chunks a large batch is cut into when ``workers`` is None. See the module
    docstring for what the chunks carry: the key holder's carry its private key."""

    @property
    @abc.abstractmethod
    def parallelism(self) -> int:
        """How many chunks to cut a large batch into (``workers=None``)."""

    @abc.abstractmethod
    def map_chunks(self, fn: Callable[..., list[Any]], chunks: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
        """``[fn(*chunk) for chunk in chunks]``, in order."""


_chunk_executor: contextvars.ContextVar[ChunkExecutor | None] = contextvars.ContextVar(
    "privreg_chunk_executor", default=None
)


def current_executor() -> ChunkExecutor | None:
    """The :class:`ChunkExecutor` set in this context, or None (the process pool)."""
    return _chunk_executor.get()


def set_executor(executor: ChunkExecutor | None) -> contextvars.Token[ChunkExecutor | None]:
    """Send :func:`run_chunks` to ``executor`` (None: back to the process pool) in this
    context; returns the token :func:`reset_executor` takes to undo it."""
    if executor is not None and not isinstance(executor, ChunkExecutor):
        raise PrivregTypeError(
            f"executor must be a privreg.crypto.parallel.ChunkExecutor or None; got {type(executor).__name__}: "
            "subclass ChunkExecutor (parallelism, map_chunks) or use the pprl plugin's SparkChunkExecutor"
        )
    return _chunk_executor.set(executor)


def reset_executor(token: contextvars.Token[ChunkExecutor | None]) -> None:
    """Undo the :func:`set_executor` call that returned ``token``."""
    _chunk_executor.reset(token)


@contextlib.contextmanager
def use_executor(executor: ChunkExecutor | None) -> Iterator[ChunkExecutor | None]:
    """``with use_executor(ex): ...`` -- :func:`run_chunks` in the block (this thread or
    task, and tasks it starts) sends its chunks to ``ex``; restored on exit."""
    token = set_executor(executor)
    try:
        yield executor
    finally:
        reset_executor(token)


def _executor_parallelism(executor: ChunkExecutor) -> int:
    k = executor.parallelism
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise PrivregValueError(
            f"{type(executor).__name__}.parallelism must be an int >= 1; got {k!r}: return the number of "
            "chunks a large batch should be cut into"
        )
    return k


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def resolve_workers(n_items: int, workers: int | None) -> int:
    """How many processes (or, with a :class:`ChunkExecutor` set, chunks) a batch of
    ``n_items`` uses (1 means in-process)."""
    if workers is None:
        if n_items < PARALLEL_MIN_BATCH:
            return 1
        executor = _chunk_executor.get()
        cores = usable_cores() if executor is None else _executor_parallelism(executor)
        return max(1, min(cores, n_items // 32))
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
    ``workers > 1`` (``fn`` must be a module-level function returning a list), or on the
    :class:`ChunkExecutor` set by :func:`use_executor`."""
    if workers <= 1 or len(chunks) <= 1:
        out: list[Any] = []
        for chunk in chunks:
            out.extend(fn(*chunk))
        return out
    chunk_executor = _chunk_executor.get()
    if chunk_executor is not None:
        results = chunk_executor.map_chunks(fn, chunks)
        if len(results) != len(chunks):
            raise PrivregValueError(
                f"{type(chunk_executor).__name__}.map_chunks returned {len(results)} results for {len(chunks)} "
                "chunks; it must return one list per chunk, in order"
            )
        out = []
        for part in results:
            out.extend(part)
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
