"""Privacy accounting: how privacy events add up.

Accountants consume :mod:`privreg.core.events` in one traversal (``supports`` for a dry
run, ``compose`` to add) and answer ``epsilon(delta)`` and ``delta(epsilon)``:

=============  ==========================================================================
``basic``      sums of epsilons and deltas (pure and approximate DP)
``advanced``   Dwork-Rothblum-Vadhan advanced composition
``optimal``    Kairouz-Oh-Viswanath optimal composition
``rdp``        Renyi DP (dp-accounting), tight RDP -> (eps, delta) conversion
``zcdp``       zero-concentrated DP
``gdp``        Gaussian DP, exact for Gaussian mechanisms
``pld``        privacy loss distributions (dp-accounting), pessimistic discretisation
=============  ==========================================================================
"""

from __future__ import annotations

from typing import Any

from privreg.accountant.advanced import DRVAccountant, KOVAccountant
from privreg.accountant.base import Accountant
from privreg.accountant.basic import BasicAccountant
from privreg.accountant.gdp import GDPAccountant
from privreg.accountant.pld import PLDAccountant
from privreg.accountant.rdp import RDPAccountant
from privreg.accountant.zcdp import ZCDPAccountant
from privreg.core import accounting
from privreg.core.errors import PrivregValueError

__all__ = [
    "Accountant",
    "ACCOUNTANTS",
    "BasicAccountant",
    "DRVAccountant",
    "KOVAccountant",
    "RDPAccountant",
    "ZCDPAccountant",
    "GDPAccountant",
    "PLDAccountant",
    "accountant_classes",
    "make_accountant",
]

#: Every accountant, by name.
ACCOUNTANTS: dict[str, type[Accountant]] = {
    cls.name: cls
    for cls in (
        BasicAccountant,
        DRVAccountant,
        KOVAccountant,
        RDPAccountant,
        ZCDPAccountant,
        GDPAccountant,
        PLDAccountant,
    )
}


def accountant_classes() -> dict[str, type[Accountant]]:
    """Every accountant: the built-in ones and those plugins registered (through
    ``privreg_register_accountants``; load the registry first)."""
    return {**accounting.accountant_types(), **ACCOUNTANTS}


def make_accountant(name: str, **options: Any) -> Accountant:
    """A fresh accountant by name (see :data:`ACCOUNTANTS` and :func:`accountant_classes`)."""
    known = accountant_classes()
    cls = known.get(name)
    if cls is None:
        raise PrivregValueError(f"unknown accountant {name!r}; choose one of {sorted(known)}")
    return cls(**options)
