"""privreg: privacy mechanisms as plugins, with every release accounted for.

The public API lives in :mod:`privreg.core` (interfaces, events, registry) and
:mod:`privreg.accountant`; ``privreg.hookimpl`` marks plugin hook implementations.
Multi-party protocols run with :mod:`privreg.mpc`, on the Paillier layer of
:mod:`privreg.crypto`. Importing privreg loads no plugin and no networking code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from privreg.__about__ import __version__
from privreg.core import __all__ as _core_all

if TYPE_CHECKING:
    from privreg.core import *  # noqa: F403 -- the package re-exports core's written __all__

__all__ = ["__version__", *_core_all]  # noqa: PLE0604 -- a list of str, written in privreg.core


def __getattr__(name: str) -> Any:
    # core's names load on first use, as in privreg.core: 'privreg --version' stays light
    if name in _core_all:
        import privreg.core

        return getattr(privreg.core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
