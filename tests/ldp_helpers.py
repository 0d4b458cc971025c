"""Exact arithmetic shared by the local-randomizer tests."""

from decimal import Decimal, localcontext
from fractions import Fraction

from privreg import InsecureReproducibleRandom


def exp_exact(eps: float) -> Fraction:
    """e^eps to 60 significant digits (Decimal.exp is correctly rounded), as a Fraction."""
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(eps).exp())


def at_most_exp(ratio: Fraction, eps: float) -> bool:
    """ratio <= e^eps, certified: the 60-digit value is shrunk by far more than its error."""
    return ratio <= exp_exact(eps) * (1 - Fraction(1, 10**50))


def seeded(seed: int) -> InsecureReproducibleRandom:
    return InsecureReproducibleRandom(seed=seed)
