"""privreg: privacy mechanisms as plugins, with every release accounted for.

The public API lives in :mod:`privreg.core` (interfaces, events, registry) and
:mod:`privreg.accountant`; ``privreg.hookimpl`` marks plugin hook implementations.
Importing privreg loads no plugin.
"""

from privreg.__about__ import __version__
from privreg.core import *  # noqa: F403
from privreg.core import __all__ as _core_all

__all__ = ["__version__", *_core_all]  # noqa: PLE0604 -- strs, computed by privreg.core
