"""Contracts every registered item passes: the built-in registry plus the template plugin,
checked by privreg.testing -- the suite plugin authors run on their own items.

New plugins get these checks for free: the items are enumerated from the registry. The
(item, check) pairs in KNOWN fail today (issue #16) and are strict expected failures: each
must keep failing until its fix lands, and then its marker goes.
"""

import sys

import pytest

import privreg
from privreg import ItemKind
from privreg.testing import CHECKS, applicable_checks, contract_params
from conftest import TEMPLATE

ITEM1 = "issue #16 item 1 (no value-dependent failure after the charge), fixed on branch h-16a"
ITEM2 = "issue #16 item 2 (collections in a canonical order), fixed on branch h-16a"
ITEM3 = "issue #16 item 3 (errors never quote the data), fixed on branch h-16a"

#: What privreg.testing finds on the registered items today.
KNOWN = {
    # int64 overflow after the charge (OverflowError) and wrap-around (2**53 - 1 -> -9e15)
    ("laplace", "no-raise-after-charge"): ITEM1,
    ("laplace", "audit"): ITEM1,
    ("gaussian", "no-raise-after-charge"): ITEM1,
    ("gaussian", "audit"): ITEM1,
    ("laplace-thresholding", "no-raise-after-charge"): ITEM1,
    ("laplace-thresholding", "audit"): ITEM1,
    ("gaussian-thresholding", "no-raise-after-charge"): ITEM1,
    ("gaussian-thresholding", "audit"): ITEM1,
    # integers beyond int64 wrap around (2**64 - 1 -> -1, 2**63 -> -2**63)
    ("discrete-laplace", "no-raise-after-charge"): ITEM1,
    ("discrete-gaussian", "no-raise-after-charge"): ITEM1,
    # released keys in the caller's order
    ("laplace-thresholding", "canonical-order"): ITEM2,
    ("gaussian-thresholding", "canonical-order"): ITEM2,
    # messages quoting the value or the key
    ("laplace-thresholding", "data-free-errors"): ITEM3,
    ("gaussian-thresholding", "data-free-errors"): ITEM3,
    ("smooth-gaussian", "data-free-errors"): ITEM3,
    ("discrete-laplace", "data-free-errors"): ITEM3,
    ("discrete-gaussian", "data-free-errors"): ITEM3,
    ("randomized-response", "data-free-errors"): ITEM3,
    ("optimized-unary-encoding", "data-free-errors"): ITEM3,
    ("subset-selection", "data-free-errors"): ITEM3,
}


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
CASES = contract_params(ITEMS, xfail=KNOWN)


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
