"""Errors in a command-line user's terms: a workflow's parameter named as its flag
(``--count-fraction``), not as its Python name (``count_fraction``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["as_flags"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def as_flags(message: str, names: Iterable[str]) -> str:
    """``message`` with each parameter of ``names`` written as its flag: ``parameter NAME``
    always; a bare ``NAME`` when it holds an underscore (no English word does), as
    ``NAME=`` or ``NAME = ``, or as a quoted list entry; nothing inside other words."""
    for name in sorted(set(names), key=len, reverse=True):  # longest first: max_keys before keys
        flag = _flag(name)
        word = re.escape(name)
        message = re.sub(rf"\bparameter {word}\b", flag, message)
        message = re.sub(rf"(?<![-\w]){word} ?= ?(?=\S)", flag + " ", message)
        if "_" in name:
            message = re.sub(rf"(?<![-\w]){word}\b", flag, message)
    return message
