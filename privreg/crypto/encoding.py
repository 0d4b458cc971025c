"""Plaintext encoding: integers, and reals in fixed point with one public scale.

A real ``x`` is encoded as the integer ``round(x * scale**power)``: ``scale`` is fixed
per codec and public, and ``power`` is the number of fixed-point factors a value has
been through (1 after encoding, 2 after a product with an encoded real, ...). ``power``
depends only on the sequence of operations, never on the values, so unlike
python-paillier's per-value floating exponent no ciphertext's metadata says anything
about its plaintext. Negative integers are represented modulo n as ``n - |v|``
(paper 000, Section 4.1).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["FixedPoint", "as_int_list", "as_real_array", "decode_scaled"]


def _is_int_like(x: Any) -> bool:
    return (isinstance(x, numbers.Integral) and not isinstance(x, bool)) or isinstance(x, (bool, np.bool_))


def as_int_list(name: str, values: Any) -> list[int]:
    """``values`` (an int, a sequence of ints, or an integer/bool numpy array) as Python ints."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "biu":
            return [int(x) for x in values.reshape(-1).tolist()]
        if values.dtype.kind == "O" and all(_is_int_like(x) for x in values.reshape(-1)):
            return [int(x) for x in values.reshape(-1)]
        raise PrivregTypeError(
            f"{name} must hold integers; got a numpy array of dtype {values.dtype}. "
            f"Encode reals with a FixedPoint codec (codec=FixedPoint(scale=2**32)) instead."
        )
    if _is_int_like(values):
        return [int(values)]
    if isinstance(values, Iterable) and not isinstance(values, (str, bytes)):
        out = list(values)
        if all(_is_int_like(x) for x in out):
            return [int(x) for x in out]
    raise PrivregTypeError(
        f"{name} must be an integer or a sequence/array of integers; got {type(values).__name__}. "
        f"Encode reals with a FixedPoint codec instead."
    )


def as_real_array(name: str, values: Any) -> np.ndarray:
    """``values`` as a finite float64 1-D array."""
    try:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PrivregTypeError(f"{name} must be real numbers; got {type(values).__name__}.") from None
    if not np.all(np.isfinite(arr)):
        raise PrivregValueError(f"{name} must be finite; got NaN or infinity. Remove or clip them before encoding.")
    return arr


@attrs.frozen(kw_only=True)
class FixedPoint:
    """Fixed-point codec with one public ``scale`` (an integer >= 2).

    ``encode(x, power)`` gives ``round(x * scale**power)`` (round half to even), exact
    for float64 ``x`` when ``scale`` is a power of two. The rounding error of one
    encoded value is at most ``0.5 / scale**power``.
    """

    scale: int = attrs.field(default=2**32)

    @scale.validator
    def _check(self, attribute: Any, value: Any) -> None:
        v.check_int("scale", value, minimum=2)

    def encode(self, values: Any, *, power: int = 1) -> list[int]:
        """Scaled integers of the real ``values`` (a scalar or array)."""
        arr = as_real_array("values", values)
        factor = self.scale ** v.check_int("power", power, minimum=0)
        if factor.bit_length() > 1000:
            raise PrivregValueError(
                f"scale**power = {self.scale}**{power} is too large to encode floats; use a smaller scale"
            )
        return [int(x) for x in np.rint(arr * float(factor)).tolist()]

    def decode(self, ints: Iterable[int], *, power: int) -> np.ndarray:
        """Reals from scaled integers (correctly rounded division)."""
        d = self.scale ** v.check_int("power", power, minimum=0)
        return np.array([int(x) / d for x in ints], dtype=np.float64)


def decode_scaled(ints: list[int], scale: int, power: int) -> np.ndarray:
    """Decrypted scaled integers as values: floats ``x / scale**power`` when ``power > 0``
    (fixed point), else integers (int64, or object dtype beyond int64)."""
    if power > 0:
        d = scale**power
        return np.array([x / d for x in ints], dtype=np.float64)
    if all(-(2**63) <= x < 2**63 for x in ints):
        return np.array(ints, dtype=np.int64)
    return np.array(ints, dtype=object)
