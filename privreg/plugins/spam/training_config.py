"""Public parameters of the private training protocol (paper 000, Section 4.2):
:class:`TrainingConfig`, which both parties build alike, and the reveal modes."""

from __future__ import annotations

import math
from typing import Any

import attrs

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.spam.link import PeriodicSigmoid
from privreg.plugins.spam.training_plan import TrainingPlan

__all__ = ["TrainingConfig", "REVEALS"]

REVEALS = ("final", "every-batch")


def _bits(name: str, x: Any, lo: int, hi: int) -> int:
    x = v.check_int(name, x, minimum=lo)
    if x > hi:
        raise PrivregValueError(f"{name} must be at most {hi}; got {x}.")
    return x


@attrs.frozen(kw_only=True)
class TrainingConfig:
    """Public parameters of the training protocol (both parties use the same).

    Args:
        d: number of features.
        eta: step size (the paper: 0.001); applied to the batch *sum* of gradients.
        lam: L2 regularisation lambda (update ``(1 - 2 eta lam) w + eta grad``).
        batch_size: K, messages per batch (eq. (2)).
        epochs: passes over the training data.
        link: the periodic sigmoid approximation evaluated privately.
        reveal: ``"final"`` (Bob learns only the final w) or ``"every-batch"`` (the paper).
        sigma: statistical security parameter of every mask.
        weight_bits, trig_bits, coef_bits, rate_bits, feature_bits: fixed-point fractional
            bits of weights, Bob's trigonometric values, Alice's coefficients, eta, features.
        feature_bound: public bound on ``|x_ij|`` (1 for binary features; reals are scaled).
        l1_bound: public bound on ``||x_i||_1`` (default ``d * feature_bound``).
        w0_bound: public bound on ``|w0_j|`` (Bob's initial weights; 0 for zeros).
        dp_epsilon, dp_delta: per-run DP of the gradients Bob sees (None: no DP).
        l2_bound: public bound on ``||x_i||_2``, required with DP.
        workers: processes for the Paillier batches (None: automatic).
    """

    d: int = attrs.field(converter=lambda x: v.check_int("d", x, minimum=1))
    eta: float = attrs.field(default=0.001)
    lam: float = attrs.field(default=0.0)
    batch_size: int = attrs.field(default=10, converter=lambda x: v.check_int("batch_size", x, minimum=1))
    epochs: int = attrs.field(default=1, converter=lambda x: v.check_int("epochs", x, minimum=1))
    link: PeriodicSigmoid = attrs.field(factory=PeriodicSigmoid)
    reveal: str = attrs.field(default="final")
    sigma: int = attrs.field(default=40, converter=lambda x: _bits("sigma", x, 20, 256))
    weight_bits: int = attrs.field(default=32, converter=lambda x: _bits("weight_bits", x, 8, 64))
    trig_bits: int = attrs.field(default=24, converter=lambda x: _bits("trig_bits", x, 8, 52))
    coef_bits: int = attrs.field(default=24, converter=lambda x: _bits("coef_bits", x, 8, 52))
    rate_bits: int = attrs.field(default=40, converter=lambda x: _bits("rate_bits", x, 16, 64))
    feature_bits: int = attrs.field(default=0, converter=lambda x: _bits("feature_bits", x, 0, 40))
    feature_bound: int = attrs.field(default=1, converter=lambda x: v.check_int("feature_bound", x, minimum=1))
    l1_bound: int | None = attrs.field(default=None)
    w0_bound: float = attrs.field(default=0.0)
    dp_epsilon: float | None = attrs.field(default=None)
    dp_delta: float | None = attrs.field(default=None)
    l2_bound: float | None = attrs.field(default=None)
    workers: int | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        eta, lam = v.check_real("eta", self.eta), v.check_real("lam", self.lam)
        if not 0 < eta < 1:
            raise PrivregValueError(f"eta must lie in (0, 1); got {self.eta}.")
        if lam < 0 or not 2 * eta * lam < 1:
            raise PrivregValueError(f"lam must satisfy 0 <= 2 eta lam < 1; got lam={self.lam}, eta={self.eta}.")
        if not isinstance(self.link, PeriodicSigmoid):
            raise PrivregTypeError(f"link must be a PeriodicSigmoid; got {type(self.link).__name__}.")
        if self.reveal not in REVEALS:
            raise PrivregValueError(f"reveal must be one of {REVEALS}; got {self.reveal!r}.")
        if self.l1_bound is not None:
            v.check_int("l1_bound", self.l1_bound, minimum=1)
        w0 = v.check_real("w0_bound", self.w0_bound)
        if not (w0 >= 0 and math.isfinite(w0)):
            raise PrivregValueError(f"w0_bound must be a finite number >= 0; got {self.w0_bound}.")
        if (self.dp_epsilon is None) != (self.dp_delta is None):
            raise PrivregValueError("pass both dp_epsilon and dp_delta (or neither, for no DP).")
        if self.dp_epsilon is not None:
            v.check_epsilon("dp_epsilon", self.dp_epsilon)
            v.check_delta("dp_delta", self.dp_delta, allow_zero=False)
            if self.l2_bound is None:
                raise PrivregValueError(
                    "DP needs a public bound on ||x_i||_2: pass l2_bound (binary features capped at "
                    "max_active give l2_bound = sqrt(max_active))."
                )
            v.check_sensitivity("l2_bound", self.l2_bound)
        if self.workers is not None:
            v.check_int("workers", self.workers, minimum=1)
        if int(round(self.eta * 2**self.rate_bits)) < 1:
            raise PrivregValueError(f"eta={self.eta} is below 2^-rate_bits; raise rate_bits.")

    @property
    def dp(self) -> bool:
        return self.dp_epsilon is not None

    def dp_parameters(self) -> tuple[float, float, float]:
        """``(dp_epsilon, dp_delta, l2_bound)``, all set (and checked) when :attr:`dp`."""
        if self.dp_epsilon is None or self.dp_delta is None or self.l2_bound is None:
            raise PrivregValueError("this configuration has no DP: pass dp_epsilon, dp_delta and l2_bound.")
        return self.dp_epsilon, self.dp_delta, self.l2_bound

    @property
    def eta_int(self) -> int:
        return int(round(self.eta * 2**self.rate_bits))

    @property
    def decay_int(self) -> int:
        """``round((1 - 2 eta lam) 2^fe)``."""
        return int(round((1.0 - 2.0 * self.eta_int / 2**self.rate_bits * self.lam) * 2**self.rate_bits))

    @property
    def eta_effective(self) -> float:
        """The step size actually applied (``eta`` rounded to ``2^-rate_bits``)."""
        return self.eta_int / 2**self.rate_bits

    @property
    def lam_effective(self) -> float:
        """The lambda actually applied: ``(1 - decay) / (2 eta)``."""
        return (1.0 - self.decay_int / 2**self.rate_bits) / (2.0 * self.eta_effective)

    def plan(self, n: int) -> TrainingPlan:
        """The derived bounds and sizes for ``n`` training messages."""
        return TrainingPlan.build(self, v.check_int("n", n, minimum=1))
