"""The floating-point grid features of Mironov 2012 (see :mod:`privreg.audit.features`)."""

from __future__ import annotations

import numpy as np

from privreg.audit.features import Feature

__all__ = ["grid_features", "grid_pairs"]

_MANTISSA = np.uint64((1 << 52) - 1)


def grid_features(x: np.ndarray, label: str) -> tuple[Feature, Feature, Feature, Feature]:
    """Sign, binary exponent, trailing mantissa zero bits and 2-adic valuation of the
    float64 values ``x`` (integers are converted; exact below 2**53)."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    nonzero = finite & (x != 0.0)
    sign = np.sign(x)  # NaN stays NaN
    m, e = np.frexp(np.where(nonzero, x, 1.0))
    exponent = np.where(nonzero, e.astype(np.float64), np.nan)
    field = x.view(np.uint64) & _MANTISSA
    lowest = field & (~field + np.uint64(1))  # lowest set bit (0 when field == 0)
    tz_field = np.frexp(lowest.astype(np.float64))[1].astype(np.float64) - 1.0
    trailing = np.where(nonzero, np.where(field == 0, 52.0, tz_field), np.nan)
    significand = (np.abs(m) * 2.0**53).astype(np.int64)  # exact: m has 53 significant bits
    low_sig = significand & (-significand)
    tz_sig = np.frexp(low_sig.astype(np.float64))[1].astype(np.float64) - 1.0
    valuation = np.where(nonzero, e - 53.0 + tz_sig, np.where(x == 0.0, np.inf, np.nan))
    return (
        Feature(label=label, kind="sign", values=sign),
        Feature(label=label, kind="exponent", values=exponent),
        Feature(label=label, kind="trailing", values=trailing),
        Feature(label=label, kind="valuation", values=valuation),
    )


def grid_pairs(sign: Feature, exponent: Feature, trailing: Feature, valuation: Feature):  # type: ignore[no-untyped-def]
    return (
        ((sign,), exponent),
        ((sign,), trailing),
        ((sign,), valuation),
        ((exponent,), trailing),
        ((trailing,), exponent),
        ((sign, exponent), trailing),
    )
