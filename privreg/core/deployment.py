"""Deployment: how each party of a protocol runs as its own process (``privreg party``).

A :class:`Deployment` turns one party's configuration -- its own private inputs (files
only it holds) and the run's public options (the same at every party) -- into a
:class:`~privreg.core.protocol.Protocol` instance that holds that party's inputs and
nothing else, and writes that party's outputs. The runtime
(:mod:`privreg.mpc.deployment`) runs the instance's party over an authenticated
transport, or runs every party's instance together in memory: both give the same
outputs on the same inputs and seeds, because every party draws from its own random
source and reads only its own inputs in either mode.

Plugins register deployments through the ``privreg_register_deployments`` hook.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from privreg.core.errors import PrivregValueError
from privreg.core.protocol import Protocol
from privreg.core.randomness import RandomSource

__all__ = ["Deployment", "MAX_TIMEOUT"]

#: The longest wait a party's configuration may set (``[timeouts]``, ``party init
#: --connect-timeout``), in seconds: a day. A longer wait is a hang, not a timeout.
MAX_TIMEOUT = 86400.0


class Deployment(ABC):
    """One protocol's parties as separate processes.

    Class attributes: ``name`` (what a party's config file gives as ``protocol``),
    ``summary`` (one line for ``privreg party list``).
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    @abstractmethod
    def options(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The run's public options, validated and completed with defaults. Every party
        must be given the same options; raises a ``PrivregError`` naming a bad option."""

    @abstractmethod
    def parties(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The party names of a run with ``options``."""

    @abstractmethod
    def inputs(self, party: str, options: Mapping[str, Any]) -> Mapping[str, str]:
        """The input files ``party`` must be given: ``{input name: what it holds}``."""

    @abstractmethod
    def protocol(
        self, *, party: str, inputs: Mapping[str, Path], options: Mapping[str, Any], rng: RandomSource
    ) -> Protocol:
        """A protocol instance holding ``party``'s inputs only, drawing from ``rng``."""

    @abstractmethod
    def write_outputs(self, *, party: str, output: Any, directory: Path) -> dict[str, Path]:
        """Write ``party``'s output (what its role returned) under ``directory``;
        returns ``{name: path}`` of the files written. Writes nothing about other parties
        that the party did not learn."""

    def example_options(self, options: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Path]]) -> dict[str, Any]:
        """``options`` completed with the sizes a run on the example ``inputs`` (from
        :meth:`example`) declares, for ``privreg party init`` to write. Default: unchanged."""
        return dict(options)

    def example(self, directory: Path, *, options: Mapping[str, Any], seed: int) -> dict[str, dict[str, Path]]:
        """Write example inputs for every party under ``directory`` (``privreg party
        init``); returns ``{party: {input name: path}}``. Default: none are offered."""
        raise PrivregValueError(f"deployment {self.name!r} offers no example inputs; write the input files yourself.")

    def score(
        self, *, outputs: Mapping[str, Path], truth: Path, options: Mapping[str, Any]
    ) -> list[tuple[str, float | int]]:
        """Score a finished run against a truth file (``privreg party score``, for
        evaluation on test data only): ``outputs`` is ``{party: its output folder}`` for the
        parties given; returns ``(measure, value)`` rows in a fixed order. Default: no
        scoring is offered."""
        raise PrivregValueError(f"deployment {self.name!r} offers no scoring against a truth file.")
