"""First-come, first-served turns among the writers of one ledger, across processes.

SQLite's own busy handler is not fair: a waiting writer sleeps and retries, so a process
that commits and begins again in a tight loop keeps winning (one writer waited 30 s for
one charge while another made 608). Writers therefore queue here before they ask SQLite
for its write lock; SQLite's lock still provides the mutual exclusion, the queue only
decides the order.

A ticket lock on a sidecar file (``<ledger>-lock``) with Linux open-file-description
(OFD) byte-range locks:

- bytes 0..7 hold a counter; a writer locks them for a few microseconds, takes ticket
  ``t = counter``, stores ``t + 1`` and write-locks byte ``BASE + t`` (its place in line);
- it then waits until no byte in ``[BASE, BASE + t)`` is locked, i.e. every writer that
  took a ticket before it has finished, died (the kernel drops a dead process's locks)
  or given up;
- it unlocks ``BASE + t`` when its turn ends.

So a writer waits at most for the writers ahead of it, each for one turn, and a process
that charges in a tight loop takes a new ticket behind everyone already waiting. The
wait for a turn is a blocking lock request (the kernel wakes the writer as soon as the
turn is free) made by a helper thread, so that the writer can give up at a deadline;
the counter, held for microseconds, is polled. A writer that gave up or died only
leaves the line: it never lets anyone pass a live writer ahead of it. Locks belong to
an open file description, so two Ledgers on one file in one process queue like two
processes; threads sharing one Ledger are serialised by the Ledger itself.

Where OFD locks are missing (not Linux), :func:`open_queue` returns None and writers fall
back to SQLite's busy handler: correct, but not fair. Never delete a ledger's ``-lock``
file while writers have it open: writers on the old and new files would not see each
other in line (SQLite would still keep them from writing at the same time).
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
from typing import cast

try:
    import fcntl
except ImportError:  # Windows: no fcntl, no queue
    fcntl = None  # type: ignore[assignment]

__all__ = ["WriterQueue", "QueueTimeout", "open_queue"]

_BASE = 4096  # ticket t is byte _BASE + t; bytes 0..7 are the counter
_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None) if fcntl is not None else None
_OFD_SETLKW: int | None = getattr(fcntl, "F_OFD_SETLKW", None) if fcntl is not None else None
_FLOCK = "@hhqqi"
_FLOCK_PAD = -struct.calcsize(_FLOCK) % struct.calcsize("@P")


class QueueTimeout(Exception):
    """The deadline passed before this writer's turn came (the Ledger turns this into
    LedgerBusyError)."""


class WriterQueue:
    """The writer queue of one ledger, through one open file description of its
    sidecar file."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def close(self) -> None:
        os.close(self._fd)

    def _lock(self, kind: int, start: int, length: int, *, wait: bool = False, fd: int | None = None) -> bool:
        """Set (or, with F_UNLCK, clear) a lock; False on a conflict. With ``wait``, block
        until it can be set instead."""
        arg = struct.pack(_FLOCK, kind, os.SEEK_SET, start, length, 0) + b"\0" * _FLOCK_PAD
        command = cast(int, _OFD_SETLKW if wait else _OFD_SETLK)  # open_queue makes no queue without OFD locks
        try:
            fcntl.fcntl(self._fd if fd is None else fd, command, arg)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def _wait_for_earlier(self, ticket: int, deadline: float) -> bool:
        """Wait until no ticket below ``ticket`` is held; False at the deadline."""
        # A read lock on the range of earlier tickets can be set once none is held (length
        # 0 would mean "to the end of the file": ticket 0 has nobody to wait for). It is
        # only a probe, released at once: no writer ever locks those bytes again.
        if ticket == 0 or self._lock(fcntl.F_RDLCK, _BASE, ticket):
            if ticket:
                self._lock(fcntl.F_UNLCK, _BASE, ticket)
            return True
        done, failure = threading.Event(), []
        # The helper gets its own descriptor of the same open file description (same
        # locks), so if it outlives a timed-out wait and the Ledger closes, it never
        # touches a reused descriptor number.
        fd = os.dup(self._fd)

        def waiter() -> None:  # blocks in the kernel; outlives a timed-out wait harmlessly
            try:
                self._lock(fcntl.F_RDLCK, _BASE, ticket, wait=True, fd=fd)
                self._lock(fcntl.F_UNLCK, _BASE, ticket, fd=fd)
            except OSError as exc:
                failure.append(exc)
            finally:
                os.close(fd)
            done.set()

        threading.Thread(target=waiter, name="privreg-ledger-turn", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            return False
        if failure:
            raise failure[0]
        return True

    def enter(self, deadline: float) -> int:
        """Take a ticket and wait for its turn; returns the ticket. Raises QueueTimeout
        (holding nothing) if the turn has not come by ``deadline`` (time.monotonic)."""
        delay = 1e-5
        while not self._lock(fcntl.F_WRLCK, 0, 8):  # held by a writer for microseconds
            if time.monotonic() > deadline:
                raise QueueTimeout("timed out taking a ticket")
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)
        try:
            raw = os.pread(self._fd, 8, 0)
            ticket = int.from_bytes(raw.ljust(8, b"\0"), "little")
            os.pwrite(self._fd, (ticket + 1).to_bytes(8, "little"), 0)
            if not self._lock(fcntl.F_WRLCK, _BASE + ticket, 1):
                raise OSError(errno.EAGAIN, f"ticket {ticket} of the writer queue is already taken")
        finally:
            self._lock(fcntl.F_UNLCK, 0, 8)
        try:
            ready = self._wait_for_earlier(ticket, deadline)
        except BaseException:
            self.leave(ticket)
            raise
        if not ready:
            self.leave(ticket)
            raise QueueTimeout(f"ticket {ticket}: the writers ahead did not finish in time")
        return ticket

    def leave(self, ticket: int) -> None:
        """End the turn of ``ticket`` (the next writer in line may go)."""
        self._lock(fcntl.F_UNLCK, _BASE + ticket, 1)


def open_queue(ledger_path: str) -> WriterQueue | None:
    """The queue of the ledger at ``ledger_path`` (creating ``<path>-lock``), or None
    where OFD locks do not exist. OSError if the sidecar file cannot be opened."""
    if _OFD_SETLK is None or _OFD_SETLKW is None:
        return None
    fd = os.open(ledger_path + "-lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    queue = WriterQueue(fd)
    try:
        queue._lock(fcntl.F_UNLCK, 0, 8)  # probes support: EINVAL on kernels before 3.15
    except OSError as exc:
        queue.close()
        if exc.errno == errno.EINVAL:
            return None
        raise
    return queue
