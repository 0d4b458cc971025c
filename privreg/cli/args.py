"""argparse ``type=`` functions for numbers: ASCII only (:mod:`privreg.core.numtext`),
within stated bounds, finite. A bad value becomes argparse's one-line usage error, which
the CLI prints as ``privreg: error: ...`` with exit 2."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from privreg.core.errors import PrivregValueError
from privreg.core.numtext import parse_float, parse_int
from privreg.core.params import INT_LIMIT

__all__ = ["INF", "SEED", "StoreOnce", "int_arg", "float_arg", "parse_int", "parse_float"]

INF = math.inf


def int_arg(what: str, minimum: int, maximum: int) -> Callable[[str], int]:
    """An integer in ``minimum..maximum``, written in ASCII digits."""

    def parse(text: str) -> int:
        try:
            n = parse_int(what, text)
        except PrivregValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not minimum <= n <= maximum:
            raise argparse.ArgumentTypeError(f"{what} must be an integer in {minimum}..{maximum}; got {text!r}")
        return n

    parse.__name__ = what
    return parse


def float_arg(what: str, minimum: float, maximum: float, *, open_below: bool = False) -> Callable[[str], float]:
    """A finite number in ``[minimum, maximum]`` (``(minimum, maximum]`` with ``open_below``)."""

    def parse(text: str) -> float:
        try:
            x = parse_float(what, text)
        except PrivregValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        low_ok = x > minimum if open_below else x >= minimum
        if not (math.isfinite(x) and low_ok and x <= maximum):
            bound = f"{'>' if open_below else '>='} {minimum:g} and <= {maximum:g}"
            raise argparse.ArgumentTypeError(f"{what} must be a finite number {bound}; got {text!r}")
        return x

    parse.__name__ = what
    return parse


#: ``--insecure-seed``: any 64-bit integer.
SEED = int_arg("--insecure-seed", -INT_LIMIT, INT_LIMIT)


class StoreOnce(argparse._StoreAction):
    """argparse's ``store``, refusing an option given twice: the last one would win
    silently (``ledger init --epsilon 1 ... --epsilon 10`` fixes a budget for good)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._seen: set[int] = set()  # the namespaces this option was stored in

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if option_string is not None and id(namespace) in self._seen:
            raise argparse.ArgumentError(self, "given twice; give it once")
        self._seen.add(id(namespace))
        super().__call__(parser, namespace, values, option_string)
