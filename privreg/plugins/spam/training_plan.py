"""The plan of a private training run: every bound and size both parties derive from
the public :class:`~privreg.plugins.spam.training_config.TrainingConfig` and ``n``, and
the Gaussian mechanism of the gradient noise (with DP)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

from privreg.core.errors import PrivregValueError
from privreg.plugins.spam.logistic import batches

if TYPE_CHECKING:  # the config builds plans: a runtime import would be circular
    from privreg.plugins.spam.training_config import TrainingConfig

__all__ = ["TrainingPlan", "gradient_mechanism", "mech_step_int"]


def _dyadic_at_least(x: float) -> float:
    """The smallest power of two >= x."""
    return 2.0 ** math.ceil(math.log2(x))


@attrs.frozen(kw_only=True)
class TrainingPlan:
    """Everything both parties derive from the public configuration and ``n``."""

    config: TrainingConfig
    n: int
    batch_bounds: tuple[tuple[int, int], ...]
    fg: int  # fractional bits of T (trig * coefficient)
    period_int: int  # the period P in inner-product units
    t_bound: int  # |T_i|
    g_bound: int  # |G_j| per batch (without noise)
    w_bound: int  # |W_j| (weights, scaled) at every point of the run
    u_bound: int  # |U_i|
    mask_bits: int  # inner-product masks
    noise_bound: int  # |noise + dither| per gradient coordinate (scaled), 0 without DP
    gmask_bits: int  # gradient masks (reveal="final"), 0 otherwise
    share_bound: int  # |W_B| (Bob's share)
    dp_sensitivity: float  # declared L2 sensitivity of a batch gradient (power of two), 0 without DP

    @property
    def steps(self) -> int:
        return len(self.batch_bounds) * self.config.epochs

    @classmethod
    def build(cls, c: TrainingConfig, n: int) -> TrainingPlan:
        bb = tuple(batches(n, c.batch_size))
        steps = len(bb) * c.epochs
        fx = c.feature_bits
        fg = c.trig_bits + c.coef_bits
        coef = c.link.coefficients
        slack = sum(2**c.trig_bits + abs(b) * 2**c.coef_bits + 1 for b in coef)
        t_bound = math.ceil(c.link.bound() * 2**fg) + math.ceil(slack)
        kmax = max(e - s for s, e in bb)
        g_bound = kmax * c.feature_bound * t_bound  # scale 2^(fg + fx)
        l1 = c.l1_bound if c.l1_bound is not None else c.d * c.feature_bound
        dp_sens = 0.0
        noise_bound = 0
        if c.dp:
            q_l2 = float(c.dp_parameters()[2]) + (math.sqrt(c.d) * 2.0 ** -(fx + 1) if fx else 0.0)
            dp_sens = _dyadic_at_least(2.0 * q_l2 * t_bound / 2**fg)
            mech = gradient_mechanism(c, len(bb), dp_sens)
            step_int = mech_step_int(mech, fg + fx)
            # |noise| <= 10 sigma_int grid units except with probability < 1e-22 per coordinate
            noise_bound = step_int * (10 * math.ceil(float(mech.sigma_int)) + 1)
        # each step moves a weight by at most eta (|G| + |noise|) / 2^(fg + fx), rounding 1 ulp
        per_step = c.eta_int * (g_bound + noise_bound) * 2**c.weight_bits
        per_step = -(-per_step // 2 ** (c.rate_bits + fg + fx)) + 1
        w_bound = math.ceil(c.w0_bound * 2**c.weight_bits) + steps * per_step
        u_bound = w_bound * l1
        mask_bits = u_bound.bit_length() + 1 + c.sigma
        period_int = int(c.link.period) * 2 ** (c.weight_bits + fx)
        if period_int > 2**mask_bits:  # R mod P' must be uniform, so P' must divide 2^mask_bits
            raise PrivregValueError(
                f"the link period in fixed point (2^{period_int.bit_length() - 1}) exceeds the inner-product masks "
                f"(2^{mask_bits}); raise sigma or lower weight_bits"
            )
        gmask_bits = (g_bound + noise_bound).bit_length() + 1 + c.sigma if c.reveal == "final" else 0
        share_step = -(-(c.eta_int * (2**gmask_bits) * 2**c.weight_bits) // 2 ** (c.rate_bits + fg + fx)) + 1
        share_bound = w_bound + (steps * share_step if c.reveal == "final" else 0)
        return cls(
            config=c,
            n=n,
            batch_bounds=bb,
            fg=fg,
            period_int=period_int,
            t_bound=t_bound,
            g_bound=g_bound,
            w_bound=w_bound,
            u_bound=u_bound,
            mask_bits=mask_bits,
            noise_bound=noise_bound,
            gmask_bits=gmask_bits,
            share_bound=share_bound,
            dp_sensitivity=dp_sens,
        )

    def describe(self) -> str:
        c = self.config
        return (
            f"n={self.n}, d={c.d}, K={c.batch_size}, {len(self.batch_bounds)} batches x {c.epochs} epoch(s); "
            f"masks: inner products {self.mask_bits} bits (|U| < 2^{self.u_bound.bit_length()}, sigma={c.sigma})"
            + (f", gradients {self.gmask_bits} bits" if self.gmask_bits else "")
            + f"; |w| <= {self.w_bound / 2**c.weight_bits:.4g} (public bound)"
        )


def gradient_mechanism(c: TrainingConfig, n_batches: int, sensitivity: float) -> Any:
    """The Gaussian mechanism of one epoch's gradient noise: ``(epsilon/E, delta/E)`` over
    ``n_batches * d`` coordinates of L2 sensitivity ``sensitivity``."""
    from privreg.mechanisms import GaussianMechanism, as_global_l2

    epsilon, delta, _ = c.dp_parameters()
    return GaussianMechanism(
        epsilon=epsilon / c.epochs,
        delta=delta / c.epochs,
        sensitivity=as_global_l2(sensitivity),
        dimension=n_batches * c.d,
    )


def mech_step_int(mech: Any, frac_bits: int) -> int:
    """The mechanism's grid step in units of ``2^-frac_bits`` (it must be a whole number)."""
    step = mech.grid.step * 2**frac_bits
    if step.denominator != 1 or step.numerator & (step.numerator - 1):
        raise PrivregValueError(
            f"the DP noise grid step {mech.grid.step} is not a power of two at least 2^-{frac_bits} (the "
            f"fixed-point grid); raise trig_bits/coef_bits"
        )
    return int(step)
