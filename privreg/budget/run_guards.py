"""Checks ``privreg run`` makes before a run opens anything: its epsilon ceiling and its
output folder.

* A workflow's epsilon (the budget it states, or ``--budget-epsilon``) above its
  ``max_epsilon`` (:data:`~privreg.core.items.DEFAULT_MAX_EPSILON` unless it declares
  another) is refused unless the caller passes ``--allow-large-epsilon``.
* ``--output`` must name a folder (not ``""``), and a folder already holding files is
  refused unless ``--overwrite``: a workflow's outputs are written after its charges, so
  the refusal must come first. The run's own bookkeeping (a failed run's ledger, its side
  files) is judged by the run itself (:func:`~privreg.budget.runs.clear_failed_run`), and
  so is a folder holding an earlier run's ``run.json``, which no flag overwrites.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privreg.core.errors import PrivregValueError
from privreg.core.items import DEFAULT_MAX_EPSILON

__all__ = ["check_epsilon_ceiling", "check_output_folder"]

# the run's own files in its output folder: the ledger, a failed run's kept ledger, their
# SQLite side files and lock, and atomic writes in flight
_OWN = re.compile(r"^(?:ledger(?:-failed-\d+)?\.sqlite(?:-wal|-shm|-journal|-lock)?|\..*\.privreg-tmp\..*)$")


def check_epsilon_ceiling(item: Any, params: Mapping[str, Any], budget_epsilon: float | None, *, allow: bool) -> None:
    """Refuse a run of ``item`` whose stated epsilon or ``budget_epsilon`` is above the
    workflow's ``max_epsilon``, unless ``allow`` (``--allow-large-epsilon``)."""
    if allow or not getattr(item, "charges", False):
        return
    ceiling = float(getattr(item, "max_epsilon", DEFAULT_MAX_EPSILON))
    stated = item.budget_of(params)
    checks = []
    if stated is not None:
        checks.append((f"--{item.budget_params[0].replace('_', '-')}", stated[0]))
    if budget_epsilon is not None:
        checks.append(("--budget-epsilon", float(budget_epsilon)))
    for flag, eps in checks:
        if eps > ceiling:
            raise PrivregValueError(
                f"{flag} {eps:g} is above {ceiling:g}, the largest epsilon workflow {item.name!r} spends by default "
                f"(a guarantee that weak protects little); lower it, or pass --allow-large-epsilon if you mean it"
            )


def check_output_folder(output: str | None, *, overwrite: bool) -> None:
    """Refuse ``--output ""``, and an existing folder holding files (other than the run's
    own bookkeeping) unless ``overwrite``; ``None`` (the default folder) passes."""
    if output is None:
        return
    if not output.strip():
        raise PrivregValueError(f"--output must name a folder; got {output!r}")
    folder = Path(output)
    if overwrite or not folder.is_dir() or (folder / "run.json").exists():
        return  # a file there, or an earlier run: refused with their own messages
    try:
        with os.scandir(folder) as entries:
            found = next((e.name for e in entries if not _OWN.match(e.name)), None)
    except OSError:
        return  # unreadable: making the run's files there fails with its own message
    if found is not None:
        raise PrivregValueError(
            f"--output folder {output!r} holds files already (e.g. {found!r}); pass --overwrite to replace a "
            f"workflow's outputs there, or choose a new --output folder"
        )
