"""Carol's labels scored against the true labels (``privreg party score``; evaluation only)."""

from __future__ import annotations

import math
from pathlib import Path

from privreg.core.errors import PrivregValueError
from privreg.readers import jsonl_objects, read_table

__all__ = ["score_labels"]

_SPAM = {"spam": True, "ham": False}


def _ratio(a: int, b: int) -> float:
    return a / b if b else math.nan


def read_true_labels(path: Path, *, count: int) -> list[bool]:
    """Whether each message of a labelled JSONL messages file is spam (``"label"``:
    ``"spam"`` or ``"ham"`` on every line, ``count`` lines). Errors name the line, never
    a message's content."""
    out: list[bool] = []
    for no, obj in jsonl_objects(path, what="--truth", line_numbers=True):
        label = obj.get("label")
        if not isinstance(label, str) or label not in _SPAM:
            raise PrivregValueError(
                f'--truth {path}: line {no} has no "label" "spam" or "ham"; give Carol\'s messages with their labels.'
            )
        out.append(_SPAM[label])
    if len(out) != count:
        raise PrivregValueError(
            f"--truth {path} holds {len(out)} messages but the run classified options.test = {count}; "
            f"give the labelled messages of this run."
        )
    return out


def read_labels(path: Path, *, count: int) -> list[bool]:
    """Whether Carol's run flagged each message as spam (``labels.csv``: message, label
    in 1 spam / 0 or -1 ham), in message order."""
    what = "carol's labels.csv"
    if not path.is_file():
        raise PrivregValueError(f"{what}: no file at {path}; score a finished run (privreg party run).")
    table = read_table(path, None, format="csv", what=what)
    if set(table) != {"message", "label"}:
        raise PrivregValueError(f"{what} {path} has the columns {sorted(table)}, not message,label.")
    flags: dict[int, bool] = {}
    for row, (msg, label) in enumerate(zip(table["message"], table["label"]), 2):
        if not (msg and msg.isascii() and msg.isdigit() and int(msg) < count) or int(msg) in flags:
            raise PrivregValueError(f"{what} {path}: line {row} has no new message number 0..{count - 1}.")
        if label not in ("1", "0", "-1"):
            raise PrivregValueError(f"{what} {path}: line {row} has a label other than 1, 0 or -1.")
        flags[int(msg)] = label == "1"
    if len(flags) != count:
        raise PrivregValueError(f"{what} {path} labels {len(flags)} messages, not options.test = {count}.")
    return [flags[i] for i in range(count)]


def score_labels(labels: Path, truth: Path, *, count: int) -> list[tuple[str, float | int]]:
    """Accuracy and the spam class's precision and recall of Carol's labels."""
    got = read_labels(labels, count=count)
    want = read_true_labels(truth, count=count)
    tp = sum(1 for g, w in zip(got, want) if g and w)
    flagged, spam = sum(got), sum(want)
    correct = sum(1 for g, w in zip(got, want) if g == w)
    return [
        ("messages", count),
        ("spam", spam),
        ("flagged spam", flagged),
        ("accuracy", correct / count),
        ("spam precision", _ratio(tp, flagged)),
        ("spam recall", _ratio(tp, spam)),
    ]
