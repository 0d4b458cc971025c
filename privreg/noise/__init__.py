"""Secure noise samplers shared by every plugin.

All randomness comes from a :class:`privreg.core.RandomSource` (the OS CSPRNG unless a
test explicitly passes :class:`privreg.core.InsecureReproducibleRandom`). Samplers draw
integers only, so the output never reveals the input through the floating-point grid, the
attack of Mironov (2012) on textbook ``x + Laplace(b)``.
"""

from privreg.noise.exact import bernoulli, bernoulli_exp_neg, discrete_laplace
from privreg.noise.grid import Grid, snap_to_grid
from privreg.noise.vector import uniform_below

__all__ = ["bernoulli", "bernoulli_exp_neg", "discrete_laplace", "Grid", "snap_to_grid", "uniform_below"]
