"""Every Param's documented range is exactly what its factory accepts (issue #17).

For every registered item (all built-in plugins and the template) and every numeric
parameter with a limit, the values just inside each limit are accepted and the values just
outside (``math.nextafter`` across a float bound, bound +- 1 for an int) are refused with
PrivregValueError -- by the registry (``item.bind``) and by the factory called directly,
so the two can never drift apart. Workflows are checked at the registry only: their
factory is the function whose signature declares the parameters, and running one costs
seconds to minutes.
"""

import math
import sys

import pytest
from conftest import TEMPLATE

import privreg
from privreg import ItemKind, PrivregError, PrivregValueError


def _items():
    sys.path.insert(0, str(TEMPLATE))
    try:
        from privreg_template import hooks
    finally:
        sys.path.remove(str(TEMPLATE))
    base = privreg.load_registry()
    extra = privreg.load_registry(plugins={"template": hooks}, autoload=False)
    assert not base.failures and not extra.failures, [*base.failures, *extra.failures]
    return [*base.items(), *extra.items()]


def _across(p, bound, inclusive, outward):
    """(inside, outside) of ``bound``; ``outward`` is the direction that leaves the range."""
    if p.type is int:
        assert bound == int(bound), f"{p.name}: an int parameter needs an integer limit"
        inside = int(bound) if inclusive else int(bound) - outward
        return inside, inside + outward
    bound = float(bound)
    inside = bound if inclusive else math.nextafter(bound, -outward * math.inf)
    return inside, math.nextafter(inside, outward * math.inf)


def _cases():
    out = []
    for item in _items():
        for p in item.params:
            if p.type not in (int, float):
                continue
            if p.minimum is not None:
                inside, outside = _across(p, p.minimum, not p.exclusive_minimum, -1)
                out += [(item, p, inside, True, "min"), (item, p, outside, False, "min")]
            if p.maximum is not None:
                inside, outside = _across(p, p.maximum, not p.exclusive_maximum, +1)
                out += [(item, p, inside, True, "max"), (item, p, outside, False, "max")]
    return [
        pytest.param(i, p, x, ok, id=f"{i.name}:{p.name}:{end}:{'in' if ok else 'out'}") for i, p, x, ok, end in out
    ]


CASES = _cases()


def test_limits_are_found():
    names = {(c.values[0].name, c.values[1].name) for c in CASES}
    assert ("laplace", "epsilon") in names and ("spam-filter", "sigma") in names
    assert ("template-histogram-mechanism", "epsilon") in names


def test_boundary_values_sit_on_the_right_side():
    p = privreg.Param(name="x", type=float, doc="x", minimum=0, exclusive_minimum=True, maximum=1)
    assert _across(p, 0, False, -1) == (5e-324, 0.0)
    assert _across(p, 1, True, +1) == (1.0, math.nextafter(1.0, 2))
    q = privreg.Param(name="n", type=int, doc="n", minimum=2, maximum=9)
    assert _across(q, 2, True, -1) == (2, 1) and _across(q, 9, True, +1) == (9, 10)


@pytest.mark.parametrize("item,param,value,ok", CASES)
def test_registry_accepts_exactly_the_documented_range(item, param, value, ok):
    values = {**item.example.params, param.name: value}
    if ok:
        assert item.bind(values)[param.name] == value
    else:
        with pytest.raises(PrivregValueError, match=param.name):
            item.bind(values)


def _factory_cases():
    out = []
    for c in CASES:
        item, param, value, ok = c.values
        if item.kind is ItemKind.WORKFLOW:
            continue
        out.append(pytest.param(item, param, value, ok, id=c.id))
    return out


@pytest.mark.parametrize("item,param,value,ok", _factory_cases())
def test_factory_accepts_exactly_the_documented_range(item, param, value, ok):
    kwargs = {**item.bind(item.example.params), param.name: value}  # bypass the registry's check
    if not ok:
        with pytest.raises(PrivregValueError):
            item.factory(**kwargs)
        return
    try:
        item.factory(**kwargs)
    except PrivregError as exc:
        # a value inside the range may still be refused for a reason the range cannot
        # state (e.g. epsilon too small for k categories at 53-bit precision), never by
        # a tighter limit on this very parameter
        assert f"parameter {param.name} must be" not in str(exc) or f"got {value!r}" not in str(exc), exc  # noqa: PT017 -- raising is allowed here, not required
