"""Counts of Paillier operations, per party.

The cost model of paper 000 (Section 5.3: 3n + 2d encryptions and decryptions) is checked
by counting. Counts go to the :class:`OpCounts` installed with :func:`counting` in the
current context; every asyncio task (so every protocol party) has its own context, so
parties running in one event loop count separately.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import attrs

__all__ = ["OpCounts", "add_count", "counting", "current_counts"]


@attrs.define(kw_only=True)
class OpCounts:
    """Operations performed while installed: ciphertexts encrypted, re-randomised,
    decrypted (one per ciphertext, so a packed ciphertext counts once), plaintext values
    recovered, and ciphertexts packed."""

    encryptions: int = 0
    rerandomizations: int = 0
    decryptions: int = 0
    values_decrypted: int = 0
    packed: int = 0

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)


_CURRENT: ContextVar[OpCounts | None] = ContextVar("privreg_paillier_counts", default=None)


@contextlib.contextmanager
def counting(counts: OpCounts | None = None) -> Iterator[OpCounts]:
    """Count Paillier operations of this context into ``counts`` (a new one if None)."""
    counts = OpCounts() if counts is None else counts
    token = _CURRENT.set(counts)
    try:
        yield counts
    finally:
        _CURRENT.reset(token)


def current_counts() -> OpCounts | None:
    """The counts installed in this context, if any."""
    return _CURRENT.get()


def add_count(field: str, k: int) -> None:
    """Add ``k`` to the ``field`` counter (an :class:`OpCounts` attribute) of the counts
    installed in this context; nothing when none is installed. Every module that performs
    Paillier operations reports them here."""
    counts = _CURRENT.get()
    if counts is not None:
        setattr(counts, field, getattr(counts, field) + k)
