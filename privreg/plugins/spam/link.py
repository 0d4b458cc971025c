"""The gradient weight of logistic regression, and the periodic approximation the private
protocol evaluates.

Paper 000 (eq. (1)) updates ``w`` with ``y_i x_i g(y_i w.x_i)``, ``g(z) = 1 / (1 + e^z)``.
Its Section 4.2 computes ``g`` interactively: Bob exponentiates his additive share
``z - r`` and Alice multiplies by ``e^r``. With a mask ``r`` that hides ``z`` (uniform over
``Z_N``, or any range ``2^sigma`` times wider than ``z``) ``e^r`` is astronomically large and
cannot be encrypted; with a small ``r`` it hides nothing (see ``notes/papers.md``, TRAP).
Additive masks cannot pass through ``exp``; they can pass through ``sin`` and ``cos``:

    sin(w (v - r)) = sin(w v) cos(w r) - cos(w v) sin(w r).

So the protocol evaluates a *periodic* function: with ``v = u + r`` and ``r`` uniform
modulo the period (statistically hiding ``u``; :mod:`privreg.plugins.spam.training_protocol`), Bob
returns encryptions of ``sin(k theta)``, ``cos(k theta)`` for his angle ``theta`` and Alice
combines them with coefficients that only she knows. The periodic function used is

    h(z) = 1/2 + sum_{k odd, k <= K} b_k sin(2 pi k z / P),

the truncated Fourier series of the period-``P`` "square wave of logistic steps"
``H(z) = sum_m [g(z - m P) + g(m P + P/2 - z) - 1]``: ``H = g`` up to ``g(P/2 - |z|)`` on
``|z| < P/2`` (it falls like the sigmoid at 0 and rises back at ``+-P/2``). ``H - 1/2`` is
odd and has half-wave symmetry, so only odd sine harmonics occur, and they decay like
``exp(-2 pi^2 k / P)``. Defaults ``P = 32``, ``K = 11`` (6 terms): ``|h - g| < 3e-3`` for
``|z| <= 10`` and below ``4e-4`` for ``|z| <= 6``; training on SpamAssassin with the
paper's settings gives the same test AUC as the exact sigmoid to about 1e-6. Larger
steps (batch sums of 100 messages with ``eta = 3e-4``) push ``|z|`` beyond 10; the workflow
then uses ``P = 64``, ``K = 19`` (10 terms): ``|h - g| < 1.5e-3`` for ``|z| <= 24``. For
``|z| > P/2`` the approximation wraps around (a message far on the correct side is
treated like a misclassified one); ``h`` stays bounded by :meth:`PeriodicSigmoid.bound`,
so no update ever blows up. The plaintext reference can train with ``h`` as well, and
the private protocol then agrees with it up to fixed-point rounding.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError

__all__ = ["sigmoid_weight", "PeriodicSigmoid"]


def sigmoid_weight(z: Any) -> np.ndarray:
    """``g(z) = 1 / (1 + e^z)`` (the weight of ``y x`` in the gradient of eq. (1)), computed
    stably as ``(1 - tanh(z / 2)) / 2``."""
    return 0.5 * (1.0 - np.tanh(np.asarray(z, dtype=np.float64) / 2.0))


def _square_wave(z: np.ndarray, period: float) -> np.ndarray:
    out = np.zeros_like(z)
    for m in range(-6, 7):
        out += sigmoid_weight(z - m * period) + sigmoid_weight(m * period + period / 2 - z) - 1.0
    return out


def _power_of_two(name: str, x: Any) -> float:
    xf = v.check_real(name, x)
    if not xf > 0 or not math.isfinite(xf) or math.frexp(xf)[0] != 0.5:
        raise PrivregValueError(f"{name} must be a power of two (e.g. 16, 32 or 64); got {x!r}.")
    return xf


@attrs.frozen(kw_only=True)
class PeriodicSigmoid:
    """``h(z) = 1/2 + sum_{odd k <= max_harmonic} b_k sin(2 pi k z / period)`` (see the
    module docstring). ``period`` must be a power of two so that it is an exact integer
    in every fixed-point scale of the protocol."""

    period: float = attrs.field(default=32.0, converter=lambda x: _power_of_two("period", x))
    max_harmonic: int = attrs.field(default=11, converter=lambda x: v.check_int("max_harmonic", x, minimum=1))
    _coef: np.ndarray = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.period < 4:
            raise PrivregValueError(f"period must be at least 4; got {self.period}.")
        m = 1 << 16  # midpoint rule: exact for trigonometric polynomials of degree < m
        z = ((np.arange(m) + 0.5) / m - 0.5) * self.period
        h = _square_wave(z, self.period) - 0.5
        coef = np.array([2.0 / m * float(np.sum(h * np.sin(2 * np.pi * k * z / self.period))) for k in self.harmonics])
        object.__setattr__(self, "_coef", coef)

    @property
    def harmonics(self) -> np.ndarray:
        """The odd harmonics ``k = 1, 3, ..., max_harmonic`` used."""
        return np.arange(1, self.max_harmonic + 1, 2)

    @property
    def coefficients(self) -> np.ndarray:
        """``b_k`` for each harmonic (a copy)."""
        return self._coef.copy()

    @property
    def terms(self) -> int:
        """Number of sine terms: Bob encrypts ``2 * terms`` values per message."""
        return int(self.harmonics.size)

    def __call__(self, z: Any) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64)
        w = 2 * np.pi * self.harmonics / self.period
        return 0.5 + np.sin(np.multiply.outer(z, w)) @ self._coef

    def lipschitz(self) -> float:
        """An upper bound on ``|h'|``: ``sum |b_k| 2 pi k / period``."""
        return float(np.sum(np.abs(self._coef) * 2 * np.pi * self.harmonics / self.period))

    def bound(self) -> float:
        """A proven upper bound on ``|h(z)|`` over all real z: the maximum over a grid of
        spacing ``s`` plus ``lipschitz() * s / 2``."""
        m = 1 << 16
        z = (np.arange(m) / m - 0.5) * self.period
        s = self.period / m
        return float(np.max(np.abs(self(z))) + self.lipschitz() * s / 2 + 1e-12)

    def max_error(self, zmax: float) -> float:
        """``max |h(z) - g(z)|`` over a fine grid of ``[-zmax, zmax]``."""
        z = np.linspace(-zmax, zmax, 20001)
        return float(np.max(np.abs(self(z) - sigmoid_weight(z))))
