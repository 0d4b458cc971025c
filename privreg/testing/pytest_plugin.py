"""pytest plugin of :mod:`privreg.testing`: the ``privreg_contract`` fixture and options.

Enable it in your top-level ``conftest.py``::

    pytest_plugins = ["privreg.testing.pytest_plugin"]

then ``privreg_contract(item, check)`` runs one check (``privreg_contract(item)``: every
applicable check) with the settings given on the command line:

* ``--privreg-seed N`` -- seed of every draw and of hypothesis (default 0);
* ``--privreg-profile NAME`` -- ``quick`` (default) or ``thorough`` sample sizes
  (:data:`privreg.testing.PROFILES`; the power table of :mod:`privreg.testing` says what
  each detects);
* ``--privreg-max-examples N`` -- random extreme inputs per item (default: the profile's);
* ``--privreg-audit-samples N`` -- outputs per neighbour in the audit (default: the
  profile's, 2000 for ``quick``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from privreg.core.items import RegistryItem


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("privreg", "privreg.testing contract checks")
    group.addoption(
        "--privreg-seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the contract checks' draws and hypothesis (default 0)",
    )
    group.addoption(
        "--privreg-profile",
        default="quick",
        choices=["quick", "thorough"],
        help="sample sizes of the contract checks (default quick; thorough sees a 25%% overrun)",
    )
    group.addoption(
        "--privreg-max-examples",
        type=int,
        default=None,
        metavar="N",
        help="random extreme inputs per item in the contract checks (default: the profile's, 20 for quick)",
    )
    group.addoption(
        "--privreg-audit-samples",
        type=int,
        default=None,
        metavar="N",
        help="outputs per neighbour in the contract checks' audit (default: the profile's, 2000 for quick)",
    )


@pytest.fixture
def privreg_contract(request: Any) -> Callable[..., Any]:
    """``privreg_contract(item, check=None)``: run one contract check (or all that apply)
    on ``item`` with the command line's settings; raises ContractError on failure."""
    from privreg.testing import check_item, run_check

    opts = {
        "rng_seed": request.config.getoption("--privreg-seed"),
        "profile": request.config.getoption("--privreg-profile"),
        "max_examples": request.config.getoption("--privreg-max-examples"),
        "audit_samples": request.config.getoption("--privreg-audit-samples"),
    }

    def run(item: RegistryItem, check: str | None = None) -> Any:
        if check is None:
            return check_item(item, **opts)
        return run_check(item, check, **opts)

    return run
