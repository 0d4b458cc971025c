"""The contract suite for plugin authors: every check privreg's own items pass.

Run it on your items in your own tests::

    import pytest
    from privreg.testing import contract_params, run_check
    from myplugin import hooks

    @pytest.mark.parametrize("item,check", contract_params({"myplugin": hooks}))
    def test_privreg_contract(item, check):
        run_check(item, check)

or on one item at once: ``check_item(item)`` runs every applicable check and raises one
:class:`ContractError` listing each failure with what to fix (``raise_on_failure=False``
returns the :class:`ItemReport` instead). The checks (:data:`CHECKS`):

* ``documented`` -- one-line summary, citation, documented parameters, a factory docstring.
* ``charge-before-draw`` -- ``release``/``release_many``/``randomize`` charge the item's
  event exactly once before any draw from ``rng``; a refusing charger stops the release
  with nothing drawn; invalid input (NaN) is refused with a PrivregError, uncharged; a
  charger is required.
* ``reproducible`` -- the same seed gives the same output; repetitions are independent.
* ``event-json`` -- the events round-trip through JSON, and so do the ledger entries.
* ``no-raise-after-charge`` -- for extreme finite inputs (near 2**53, 2**63, 2**64, 1e308,
  -0.0, subnormals, and vectors or mappings mixing them: fixed ones, then
  ``max_examples`` from a hypothesis strategy), a release either refuses the input before
  the charge or returns normally -- it never raises after the charge, and a value far
  beyond the noise never comes back with the opposite sign (int64 wrap-around).
* ``canonical-order`` (mechanisms taking a mapping) -- permuting the input's keys does
  not change the order of the output's keys (same seed).
* ``data-free-errors`` -- inputs carrying a sentinel value (31337.625, key ``key-31337``)
  next to a NaN, a negative, huge or fractional value: no error message quotes it.
* ``audit`` -- a short :mod:`privreg.audit` run (``audit_samples`` outputs per
  neighbour, alpha 1e-6) on the declared neighbours and on those neighbours moved to
  extreme magnitudes (:func:`privreg.audit.extreme.extreme_neighbours`): no lower bound
  above the claim, no release failing after its charge.
* ``sensitivity``, ``workflow``, ``protocol`` -- the contracts of those kinds (a workflow
  runs its example in a temporary folder and charges as it declares).

Every draw is seeded (``rng_seed``) and hypothesis runs with ``derandomize=True``, so a
run is deterministic. Over all of privreg's built-in items the suite takes about a minute
on one core with the defaults.

**hypothesis** is imported lazily, only when the extreme-input check runs: ``import
privreg.testing`` needs nothing beyond privreg, and plugins install the checks'
dependencies with ``pip install 'privreg[testing]'`` (pytest and hypothesis).

A pytest plugin is included: ``pytest_plugins = ["privreg.testing.pytest_plugin"]`` in
your top-level ``conftest.py`` gives the fixture ``privreg_contract`` and the options
``--privreg-seed``, ``--privreg-max-examples`` and ``--privreg-audit-samples``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.items import RegistryItem
from privreg.testing.checks import CHECKS, ContractError, Settings, applicable_checks, run_one
from privreg.testing.inputs import SENTINEL, SENTINEL_KEY, extreme_inputs, fixed_extremes, sentinel_inputs
from privreg.testing.spies import CountingRandom, SpyCharger

__all__ = [
    "CHECKS",
    "ContractError",
    "CountingRandom",
    "ItemReport",
    "SENTINEL",
    "SENTINEL_KEY",
    "Settings",
    "SpyCharger",
    "applicable_checks",
    "check_item",
    "contract_params",
    "extreme_inputs",
    "fixed_extremes",
    "items_of",
    "run_check",
    "sentinel_inputs",
]


@attrs.frozen(kw_only=True)
class ItemReport:
    """The outcome of :func:`check_item`: the checks run, and the failures (by check)."""

    item: str
    checks: tuple[str, ...]
    failures: Mapping[str, ContractError]

    @property
    def passed(self) -> bool:
        return not self.failures


def _settings(rng_seed: int, max_examples: int, audit_samples: int, extreme_samples: int) -> Settings:
    return Settings(
        rng_seed=rng_seed, max_examples=max_examples, audit_samples=audit_samples, extreme_samples=extreme_samples
    )


def run_check(
    item: RegistryItem,
    check: str,
    *,
    rng_seed: int = 0,
    max_examples: int = 20,
    audit_samples: int = 2000,
    extreme_samples: int = 1000,
) -> None:
    """Run one check on ``item``; raises :class:`ContractError` (an AssertionError) saying
    what is wrong and what to fix. ``check`` is a key of :data:`CHECKS` that applies to the
    item (:func:`applicable_checks`)."""
    run_one(item, check, _settings(rng_seed, max_examples, audit_samples, extreme_samples))


def check_item(
    item: RegistryItem,
    *,
    checks: Iterable[str] | None = None,
    rng_seed: int = 0,
    max_examples: int = 20,
    audit_samples: int = 2000,
    extreme_samples: int = 1000,
    raise_on_failure: bool = True,
) -> ItemReport:
    """Run every applicable check (or those named in ``checks``) on ``item``. Raises one
    :class:`ContractError` listing every failed check and its fix, unless
    ``raise_on_failure=False`` (then the :class:`ItemReport` holds them)."""
    if not isinstance(item, RegistryItem):
        raise PrivregTypeError(f"item must be a RegistryItem (e.g. registry.get(name)); got {item!r}")
    names = applicable_checks(item) if checks is None else list(checks)
    settings = _settings(rng_seed, max_examples, audit_samples, extreme_samples)
    failures: dict[str, ContractError] = {}
    for check in names:
        try:
            run_one(item, check, settings)
        except ContractError as exc:
            failures[check] = exc
    report = ItemReport(item=item.name, checks=tuple(names), failures=failures)
    if failures and raise_on_failure:
        first = next(iter(failures.values()))
        text = "\n".join(str(e) for e in failures.values())
        raise ContractError(
            item,
            ", ".join(failures),
            f"{len(failures)} of {len(names)} checks fail:\n{text}",
            first.fix if len(failures) == 1 else "see each check above",
        )
    return report


def items_of(source: Any) -> list[RegistryItem]:
    """The items of ``source``: a Registry, an iterable of RegistryItems, a mapping
    ``{plugin name: hooks module}`` (loaded with ``privreg.load_registry(plugins=...,
    autoload=False)``, which also installs their accounting handlers), or one hooks module."""
    from privreg.core.registry import Registry, load_registry

    if isinstance(source, Registry):
        return list(source.items())
    if isinstance(source, Mapping):
        registry = load_registry(plugins=dict(source), autoload=False)
        if registry.failures:
            raise PrivregValueError(f"plugins failed to load: {[str(f) for f in registry.failures]}")
        return list(registry.items())
    if hasattr(source, "__name__") and not isinstance(source, (list, tuple)):
        return items_of({source.__name__.rsplit(".", 1)[0]: source})
    items = list(source)
    for item in items:
        if not isinstance(item, RegistryItem):
            raise PrivregTypeError(f"items must be RegistryItems; got {item!r}")
    return items


def contract_params(
    source: Any, *, checks: Iterable[str] | None = None, xfail: Mapping[tuple[str, str], str] | None = None
) -> list[Any]:
    """``pytest.param(item, check)`` for every item of ``source`` (see :func:`items_of`) and
    every check that applies to it, with ids ``"name:check"``, for
    ``@pytest.mark.parametrize("item,check", ...)``.

    ``xfail``: ``{(item name, check): reason}`` marks those pairs as strict expected
    failures (a ContractError must be raised; a pass fails the test, so the marker goes
    when the defect is fixed). A pair that does not exist is an error."""
    import pytest

    wanted = None if checks is None else set(checks)
    unknown = sorted((wanted or set()) - set(CHECKS))
    if unknown:
        raise PrivregValueError(f"unknown checks {unknown}; the checks are {list(CHECKS)}")
    marks = dict(xfail or {})
    params, pairs = [], set()
    for item in items_of(source):
        for check in applicable_checks(item):
            if wanted is not None and check not in wanted:
                continue
            pairs.add((item.name, check))
            mark = (
                [pytest.mark.xfail(strict=True, raises=ContractError, reason=marks[(item.name, check)])]
                if (item.name, check) in marks
                else []
            )
            params.append(pytest.param(item, check, id=f"{item.name}:{check}", marks=mark))
    stale = sorted(set(marks) - pairs)
    if stale:
        raise PrivregValueError(f"xfail names (item, check) pairs that are not run: {stale}; remove them")
    return params
