"""Numbers written on a command line or in a configuration: ASCII only, one spelling.

Python's ``int`` and ``float`` accept any Unicode decimal digit (a full-width one, an
Arabic-Indic three) and underscores between digits (``1_0``); a number a person cannot
read back as typed is refused here instead. Accepted: an optional sign, ASCII digits, for
a float an optional fraction and exponent, and ``inf``/``nan`` (the caller decides whether
those are in range). Integers are refused above :data:`INT_DIGITS` digits, so a huge
number costs nothing to reject.
"""

from __future__ import annotations

import re

from privreg.core.errors import PrivregValueError

__all__ = ["INT_DIGITS", "parse_int", "parse_float"]

#: The most digits an integer may have (a 64-bit integer has at most 19).
INT_DIGITS = 19

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.ASCII | re.I)


def _text(what: str, text: object, kind: str) -> str:
    if not isinstance(text, str):
        raise PrivregValueError(f"{what} must be {kind}; got {text!r}")
    return text.strip(" \t")


def parse_int(what: str, text: object) -> int:
    """``text`` as an integer written with ASCII digits (optional sign, no underscores),
    or a one-line error naming ``what`` (e.g. ``"--base-port"``)."""
    s = _text(what, text, "an integer")
    if not _INT.fullmatch(s):
        raise PrivregValueError(f"{what} must be an integer written with the digits 0-9; got {text!r}")
    if len(s.lstrip("+-")) > INT_DIGITS:
        raise PrivregValueError(f"{what} must be an integer of at most {INT_DIGITS} digits; got {text!r}")
    return int(s)


def parse_float(what: str, text: object) -> float:
    """``text`` as a number written in ASCII (``3``, ``-0.5``, ``1e-6``, ``inf``, ``nan``;
    no underscores), or a one-line error naming ``what`` (e.g. ``"--epsilon"``)."""
    s = _text(what, text, "a number")
    if not _FLOAT.fullmatch(s):
        raise PrivregValueError(f"{what} must be a number written in ASCII (e.g. 0.5 or 1e-6); got {text!r}")
    return float(s)
