"""privreg: privacy mechanisms as plugins, with every release accounted for.

The public API lives in :mod:`privreg.core` (interfaces, events, registry) and
:mod:`privreg.accountant`; ``privreg.hookimpl`` marks plugin hook implementations.
Multi-party protocols run with :mod:`privreg.mpc`, on the Paillier layer of
:mod:`privreg.crypto`. Importing privreg loads no plugin and no networking code.
"""

from privreg.__about__ import __version__
from privreg.core import *  # noqa: F403 -- the package re-exports core's written __all__
from privreg.core import __all__ as _core_all

__all__ = ["__version__", *_core_all]  # noqa: PLE0604 -- a list of str, written in privreg.core
