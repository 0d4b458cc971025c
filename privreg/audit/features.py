"""Features of released outputs: deterministic per-output functions events are built on.

Every feature maps each output, on its own, to a float64 (``NaN`` where the feature is
undefined, e.g. the binary exponent of 0; every comparison with ``NaN`` is false). The
only data-dependent choices -- which coordinates of a vector to look at, the category
table -- use the *selection* halves only, so an event built on features stays a fixed
function of one output once the selection halves are drawn.

Float-grid features (Mironov 2012, "On significance of the least significant bits for
differential privacy"), for real outputs ``x = m * 2**e`` with ``0.5 <= |m| < 1``
(:func:`numpy.frexp`):

* ``sign``: -1, 0 or +1 (``NaN`` for NaN outputs);
* ``exponent`` (the binary exponent ``e``: ``|x|`` lies in ``[2**(e-1), 2**e)``),
  undefined for 0 and non-finite outputs;
* ``trailing``: the number of trailing zero bits of the 52-bit mantissa field of the
  float64 (viewed as ``uint64``; 52 when the field is zero), undefined for 0 and
  non-finite outputs;
* ``valuation``: the largest ``k`` such that ``x`` is a multiple of ``2**k`` (``+inf``
  for 0, undefined for non-finite outputs) -- exponent and trailing bits combined.
"""

from __future__ import annotations

import attrs
import numpy as np

__all__ = ["Feature", "FeatureSet"]


@attrs.frozen(kw_only=True, eq=False)
class Feature:
    """One feature over the pooled outputs. ``kind`` is one of ``value`` (an output, a
    coordinate, a sum or a projection), ``sign``, ``exponent``, ``trailing``,
    ``valuation``, ``category`` (``labels[code]`` names category ``code``) or ``member``
    (1.0 when the integer vector output contains ``label``, else 0.0)."""

    label: str
    kind: str
    values: np.ndarray
    integer: bool = False
    labels: tuple[str, ...] = ()

    def mask(self, op: str, value: float) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            if op == "==":
                return self.values == value
            if op == ">=":
                return self.values >= value
            if op == "<=":
                return self.values <= value
        raise ValueError(f"unknown comparison {op!r}")

    def describe(self, op: str, value: float) -> str:
        return _DESCRIBE[self.kind](self, op, float(value))


@attrs.frozen(kw_only=True)
class FeatureSet:
    """Features for single-feature events, and ``(classes, feature)`` pairs for events
    ``class features == their values and feature <op> value``."""

    singles: tuple[Feature, ...]
    pairs: tuple[tuple[tuple[Feature, ...], Feature], ...]


# --- descriptions ------------------------------------------------------------------------


def _num(feature: Feature, v: float) -> str:
    if feature.integer and float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def _of(feature: Feature) -> str:
    return "" if feature.label == "output" else f" of {feature.label}"


def _describe_value(f: Feature, op: str, v: float) -> str:
    return f"{f.label} {op} {_num(f, v)}"


_SIGN = {
    ("==", -1.0): "{} < 0",
    ("==", 0.0): "{} == 0",
    ("==", 1.0): "{} > 0",
    (">=", -1.0): "{} is not NaN",
    (">=", 0.0): "{} >= 0",
    (">=", 1.0): "{} > 0",
    ("<=", -1.0): "{} < 0",
    ("<=", 0.0): "{} <= 0",
    ("<=", 1.0): "{} is not NaN",
}


def _describe_sign(f: Feature, op: str, v: float) -> str:
    return _SIGN[(op, v)].format(f.label)


def _describe_exponent(f: Feature, op: str, v: float) -> str:
    return f"binary exponent{_of(f)} {op} {int(v)}"


def _describe_trailing(f: Feature, op: str, v: float) -> str:
    return f"trailing zero bits{_of(f)} {op} {int(v)}"


def _describe_valuation(f: Feature, op: str, v: float) -> str:
    if np.isinf(v):
        return f"{f.label} is finite" if op == "<=" else f"{f.label} == 0"
    k = int(v)
    if op == ">=":
        return f"{f.label} is a multiple of 2^{k}"
    if op == "<=":
        return f"{f.label} is not a multiple of 2^{k + 1}"
    return f"{f.label} is an odd multiple of 2^{k}"


def _describe_category(f: Feature, op: str, v: float) -> str:
    return f"{f.label} == {f.labels[int(v)]}"


def _describe_member(f: Feature, op: str, v: float) -> str:
    if (op, v) in (("==", 1.0), (">=", 1.0)):
        return f"{f.label} in output"
    if (op, v) in (("==", 0.0), ("<=", 0.0)):
        return f"{f.label} not in output"
    return "any output"  # ">= 0" or "<= 1"


_DESCRIBE = {
    "value": _describe_value,
    "sign": _describe_sign,
    "exponent": _describe_exponent,
    "trailing": _describe_trailing,
    "valuation": _describe_valuation,
    "category": _describe_category,
    "member": _describe_member,
}
