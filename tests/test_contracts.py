"""Contracts every registered item passes: the built-in registry plus the template plugin,
checked by privreg.testing -- the suite plugin authors run on their own items.

New plugins get these checks for free: the items are enumerated from the registry. Every
(item, check) pair passes: the defects the suite found (issue #16: failures after the
charge, keys in the caller's order, messages quoting data) are fixed, and
tests/test_testing.py shows a broken mechanism failing each check.
"""

import sys

import pytest
from conftest import TEMPLATE

import privreg
from privreg import ItemKind
from privreg.testing import CHECKS, applicable_checks, contract_params


def _registry():
    sys.path.insert(0, str(TEMPLATE))
    try:
        from privreg_template import hooks
    finally:
        sys.path.remove(str(TEMPLATE))
    base = privreg.load_registry()
    extra = privreg.load_registry(plugins={"template": hooks}, autoload=False)
    return [*base.items(), *extra.items()]


ITEMS = _registry()
CASES = contract_params(ITEMS)


def test_registry_is_not_empty():
    kinds = {i.kind for i in ITEMS}
    assert {ItemKind.MECHANISM, ItemKind.RANDOMIZER, ItemKind.SENSITIVITY, ItemKind.WORKFLOW} <= kinds


def test_every_item_gets_every_check_of_its_kind():
    ran = {(p.values[0].name, p.values[1]) for p in CASES}
    for item in ITEMS:
        kinds = [c for c, (_, k) in CHECKS.items() if item.kind in k and c != "canonical-order"]
        assert set(kinds) <= {c for n, c in ran if n == item.name}, item.name
    assert ("laplace-thresholding", "canonical-order") in ran and ("laplace", "canonical-order") not in ran
    assert applicable_checks(ITEMS[0])[0] == "documented"


@pytest.mark.parametrize("item,check", CASES)
def test_contract(item, check, privreg_contract, template_on_path):
    privreg_contract(item, check)
