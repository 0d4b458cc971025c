"""Printable text: control characters escaped visibly.

What privreg prints and writes (workflow summaries, word lists) holds no raw control
character: a released string may hold one (e.g. a vertical tab of ``string.printable``
discovered by TrieHH), and a terminal would act on it or a line-based file split on it.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls"]

# Unicode category Cc: C0 (U+0000-U+001F), DEL (U+007F) and C1 (U+0080-U+009F)
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROLS_OR_BACKSLASH = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return "\\\\" if c == "\\" else f"\\x{ord(c):02x}"


def escape_controls(text: str, *, keep: str = "\n", backslash: bool = False) -> str:
    """``text`` with each control character (C0, DEL, C1) not in ``keep`` written as
    ``\\xNN`` (two lower-case hex digits), e.g. a bell as ``\\x07``. With ``backslash``
    a backslash is also written ``\\\\``, so the escaping can be undone (for released
    strings such as discovered words, which may themselves spell ``\\x07``)."""
    pattern = _CONTROLS_OR_BACKSLASH if backslash else _CONTROLS
    return pattern.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
