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
* ``neighbouring`` -- the item's declared ``neighbouring`` relation is the relation of
  every event it charges (a randomizer charges ``LocalDP``, which holds for replace-one).
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
* ``canonical-order`` (mechanisms taking a mapping) -- keys with *distinct* values (so
  that ties broken by key hide nothing), assigned in several orders and given in shuffled
  input orders, same seed: the output's key order follows neither the input's order nor
  the values.
* ``data-free-errors`` -- error messages compared by difference
  (:mod:`privreg.testing.differential`): inputs reaching each error path (out of range on
  each side, beyond int64/uint64, NaN, infinities, fractions, a wrong length), in pairs
  that differ only in the offending value, its count, its position (index or key) or the
  valid entries around it; both inputs of a pair must raise the same class with the same
  message. This catches ``float.hex(value)``, counts, first indices, orders of magnitude
  and ``got max 3``, whatever the formatting.
* ``exact`` (items that declare ``output_law``, :mod:`privreg.core.laws`) -- the declared
  law matches ``law_samples`` outputs on each declared neighbour (exact Clopper-Pearson
  intervals, false alarm <= ``alpha``), and its exact privacy loss -- the hockey-stick
  divergence at the claimed epsilon (Balle et al. 2018/2020; Zhu-Dong-Wang 2022 for
  privacy-loss distributions; :mod:`privreg.audit.exact`) -- on the declared and the
  extreme neighbours is within the claimed delta: deterministic, no sampling error. A
  Laplace mechanism at 0.8 of its scale, or k-ary randomized response computed with
  ``k - 2`` for ``k - 1``, fails here in well under a second. Every built-in mechanism
  and randomizer declares its law, partition selection (a product over keys of "not
  released" or the noisy total) and the smooth-sensitivity Gaussian (a discrete
  Gaussian whose centre and scale both depend on the input) included.
* ``audit`` -- a :mod:`privreg.audit` run (``audit_samples`` outputs per neighbour, alpha
  1e-6) on the declared neighbours and on those neighbours moved to extreme magnitudes
  (:func:`privreg.audit.extreme.extreme_neighbours`): no lower bound above the claim, no
  release failing after its charge on one neighbour but not alike on the other.
* ``sensitivity``, ``workflow``, ``protocol`` -- the contracts of those kinds (a workflow
  runs its example in a temporary folder and charges as it declares).

**Power of the audit.** An empirical audit can only see overruns its sample size allows.
Each audit states the smallest overrun of the claim it detects with 90% probability
(:mod:`privreg.audit.power`: exact binomial computation for a Laplace-shaped mechanism and
for 4-ary randomized response, claim epsilon 1, alpha 1e-6, assuming the audit's selection
half finds the best event). :func:`check_item` reports it (:attr:`ItemReport.power`).

| audit                     | samples per side | Laplace-shaped | randomized-response-shaped |
|---------------------------|------------------|----------------|----------------------------|
| ``quick`` (the default)   | 2,000            | 73%            | 60%                        |
| ``quick``, extreme pairs  | 1,000            | 118%           | 86%                        |
| (any audit)               | 10,000           | 28%            | 27%                        |
| ``thorough``, extreme     | 20,000           | 19%            | 19%                        |
| ``thorough``              | 100,000          | 8.4%           | 8.4%                       |
| (any audit)               | 1,000,000        | 2.6%           | 2.7%                       |

So the default profile cannot see a 25% overrun (a Laplace mechanism at 0.8 of its scale):
declare the item's law and the ``exact`` check finds it deterministically, or run the
``thorough`` profile (``check_item(item, profile="thorough")``, ``--privreg-profile
thorough``), which detects a 25% overrun of either shape in at least 90% of runs --
measured, in ``tests/test_audit_power.py`` -- within a few seconds of CPU per item.

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
from privreg.testing.differential import ErrorPair, error_pairs
from privreg.testing.inputs import extreme_inputs, fixed_extremes
from privreg.testing.spies import CountingRandom, SpyCharger

__all__ = [
    "CHECKS",
    "ContractError",
    "CountingRandom",
    "ErrorPair",
    "ItemReport",
    "PROFILES",
    "Settings",
    "SpyCharger",
    "applicable_checks",
    "check_item",
    "contract_params",
    "error_pairs",
    "extreme_inputs",
    "fixed_extremes",
    "items_of",
    "run_check",
]

#: Named settings of the checks: ``quick`` (the default) and ``thorough`` (the audit at
#: 100,000 samples per neighbour and 20,000 per extreme pair, 100 hypothesis examples,
#: 20,000 outputs per neighbour in the law test). The power table above says what each sees.
PROFILES: dict[str, dict[str, int]] = {
    "quick": {"max_examples": 20, "audit_samples": 2000, "extreme_samples": 1000, "law_samples": 4000},
    "thorough": {"max_examples": 100, "audit_samples": 100_000, "extreme_samples": 20_000, "law_samples": 20_000},
}


@attrs.frozen(kw_only=True)
class ItemReport:
    """The outcome of :func:`check_item`: the checks run, the failures (by check), and the
    power of its audit (``power``: the smallest overrun detected with 90% probability at
    the profile's sample size; empty when no audit ran)."""

    item: str
    checks: tuple[str, ...]
    failures: Mapping[str, ContractError]
    power: str = ""

    @property
    def passed(self) -> bool:
        return not self.failures


def _settings(
    profile: str,
    rng_seed: int,
    max_examples: int | None,
    audit_samples: int | None,
    extreme_samples: int | None,
    law_samples: int | None = None,
) -> Settings:
    if profile not in PROFILES:
        raise PrivregValueError(f"profile must be one of {list(PROFILES)}; got {profile!r}")
    given = {
        "max_examples": max_examples,
        "audit_samples": audit_samples,
        "extreme_samples": extreme_samples,
        "law_samples": law_samples,
    }
    chosen = {**PROFILES[profile], **{k: v for k, v in given.items() if v is not None}}
    return Settings(rng_seed=rng_seed, **chosen)


def _power(item: RegistryItem, settings: Settings) -> str:
    """What the audit of ``item`` at ``settings`` can see (:mod:`privreg.audit.power`)."""
    from privreg.audit.power import power_of
    from privreg.testing.exact import claims_of

    claims = claims_of(item.create(item.example.params))
    if not claims:
        return ""
    claim = claims[0]
    power = power_of(settings.audit_samples, alpha=settings.alpha, claimed_epsilon=claim.epsilon)
    return f"the audit of {item.name} (claim epsilon {claim.epsilon:.4g}) {power.describe()} per neighbour"


def run_check(
    item: RegistryItem,
    check: str,
    *,
    rng_seed: int = 0,
    profile: str = "quick",
    max_examples: int | None = None,
    audit_samples: int | None = None,
    extreme_samples: int | None = None,
    law_samples: int | None = None,
) -> None:
    """Run one check on ``item``; raises :class:`ContractError` (an AssertionError) saying
    what is wrong and what to fix. ``check`` is a key of :data:`CHECKS` that applies to the
    item (:func:`applicable_checks`). ``profile`` (:data:`PROFILES`) sets the sample sizes;
    the other arguments override it."""
    settings = _settings(profile, rng_seed, max_examples, audit_samples, extreme_samples, law_samples)
    run_one(item, check, settings)


def check_item(
    item: RegistryItem,
    *,
    checks: Iterable[str] | None = None,
    rng_seed: int = 0,
    profile: str = "quick",
    max_examples: int | None = None,
    audit_samples: int | None = None,
    extreme_samples: int | None = None,
    law_samples: int | None = None,
    raise_on_failure: bool = True,
) -> ItemReport:
    """Run every applicable check (or those named in ``checks``) on ``item`` with the
    sample sizes of ``profile`` (:data:`PROFILES`; the other arguments override it).
    Raises one :class:`ContractError` listing every failed check and its fix, and the
    audit's power, unless ``raise_on_failure=False`` (then the :class:`ItemReport` holds
    them)."""
    if not isinstance(item, RegistryItem):
        raise PrivregTypeError(f"item must be a RegistryItem (e.g. registry.get(name)); got {item!r}")
    names = applicable_checks(item) if checks is None else list(checks)
    settings = _settings(profile, rng_seed, max_examples, audit_samples, extreme_samples, law_samples)
    failures: dict[str, ContractError] = {}
    for check in names:
        try:
            run_one(item, check, settings)
        except ContractError as exc:
            failures[check] = exc
    power = _power(item, settings) if "audit" in names else ""
    report = ItemReport(item=item.name, checks=tuple(names), failures=failures, power=power)
    if failures and raise_on_failure:
        first = next(iter(failures.values()))
        text = "\n".join(str(e) for e in failures.values()) + (f"\n(power: {power})" if power else "")
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
