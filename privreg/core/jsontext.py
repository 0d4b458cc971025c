"""JSON text read with a bounded nesting depth.

Python's ``json`` parses nested arrays and objects by recursion and raises
``RecursionError`` past the interpreter's stack (about 1000 levels): a line of 100,000
``[`` would end a run as an internal error. :func:`loads` refuses such text in one line,
and refuses values nested deeper than ``max_depth`` (checked without recursion, in time
linear in the value's size).
"""

from __future__ import annotations

import json
from typing import Any

from privreg.core.errors import PrivregValueError

__all__ = ["MAX_JSON_DEPTH", "loads", "depth_of"]

#: The deepest nesting of arrays and objects read by default.
MAX_JSON_DEPTH = 64


def depth_of(value: Any, limit: int) -> int:
    """The nesting depth of ``value`` (a scalar: 0, ``[1]``: 1), counted up to ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            depth += 1
            if depth > limit:
                return depth
            deepest = max(deepest, depth)
            stack.extend((x, depth) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


def loads(text: str | bytes, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``; a ``ValueError`` for text that is not JSON (as ``json``), and
    a one-line :class:`~privreg.core.errors.PrivregValueError` naming ``what`` for
    arrays or objects nested deeper than ``max_depth``."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        too_deep = True
    else:
        too_deep = depth_of(value, max_depth) > max_depth
    if too_deep:
        raise PrivregValueError(f"{what} nests JSON arrays or objects more than {max_depth} levels deep; flatten it")
    return value
