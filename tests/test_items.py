"""Registry items: typed parameters, citations, examples and binding."""

import math
from pathlib import Path

import numpy as np
import pytest

from privreg import PrivregTypeError, PrivregValueError
from privreg.core.items import REQUIRED, Citation, Example, ItemKind, Param, RegistryItem

CIT = Citation(authors="A. Author", title="A Title", year=2020)


def param(ptype, **kw):
    return Param(name="p", type=ptype, doc="a parameter", **kw)


# --- Param.validate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ptype, value, expected",
    [
        (int, 3, 3),
        (int, np.int64(-3), -3),
        (float, 1, 1.0),
        (float, np.float32(0.5), 0.5),
        (str, "abc", "abc"),
        (bool, True, True),
        (bool, False, False),
        (Path, "a/b", Path("a/b")),
        (Path, Path("/tmp"), Path("/tmp")),
    ],
)
def test_validate_converts_to_the_declared_type(ptype, value, expected):
    result = param(ptype).validate(value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    "ptype, value, error",
    [
        (int, 3.0, PrivregTypeError),
        (int, "3", PrivregTypeError),
        (int, True, PrivregTypeError),
        (float, "1.0", PrivregTypeError),
        (float, True, PrivregTypeError),
        (float, math.nan, PrivregValueError),
        (float, -math.inf, PrivregValueError),
        (str, 1, PrivregTypeError),
        (str, Path("x"), PrivregTypeError),
        (bool, 1, PrivregTypeError),
        (bool, "true", PrivregTypeError),
        (Path, 3, PrivregTypeError),
        (int, None, PrivregTypeError),
        (str, None, PrivregTypeError),
    ],
)
def test_validate_rejects_wrong_values_naming_the_parameter(ptype, value, error):
    with pytest.raises(error) as info:
        Param(name="my_param", type=ptype, doc="d").validate(value)
    assert "parameter my_param" in str(info.value)
    assert repr(value) in str(info.value)


def test_minimum_and_maximum():
    p = param(float, minimum=0, maximum=1)
    assert p.validate(0) == 0.0 and p.validate(1) == 1.0
    with pytest.raises(PrivregValueError, match=r"parameter p must be >= 0, <= 1; got -0\.5"):
        p.validate(-0.5)
    with pytest.raises(PrivregValueError, match="<= 1"):
        p.validate(1.5)


def test_exclusive_minimum():
    p = param(int, minimum=0, exclusive_minimum=True)
    assert p.validate(1) == 1
    with pytest.raises(PrivregValueError, match="> 0; got 0"):
        p.validate(0)
    assert p.constraint_text() == "> 0"


def test_choices():
    p = param(str, choices=["l1", "l2"])
    assert p.validate("l2") == "l2" and p.choices == ("l1", "l2")
    with pytest.raises(PrivregValueError, match=r"one of \['l1', 'l2'\]; got 'linf'"):
        p.validate("linf")


def test_custom_check_receives_the_converted_value():
    seen = []

    def even(x):
        seen.append(x)
        if x % 2:
            raise PrivregValueError(f"parameter p must be even; got {x}")

    p = param(int, check=even)
    assert p.validate(np.int64(4)) == 4
    with pytest.raises(PrivregValueError, match="even"):
        p.validate(3)
    assert seen == [4, 3] and type(seen[0]) is int


def test_none_is_accepted_only_when_the_default_is_none():
    assert param(float, default=None, minimum=0).validate(None) is None
    assert not param(float, default=None).required
    for p in (param(float), param(float, default=1.0)):
        with pytest.raises(PrivregTypeError, match="parameter p"):
            p.validate(None)
    assert param(float).required and param(float).default is REQUIRED


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"type": int, "default": -1, "minimum": 0}, PrivregValueError),
        ({"type": int, "default": "1"}, PrivregTypeError),
        ({"type": float, "default": math.inf}, PrivregValueError),
        ({"type": str, "default": "c", "choices": ["a", "b"]}, PrivregValueError),
        ({"type": int, "default": 3, "check": lambda x: math.sqrt(-x)}, ValueError),
        ({"type": list}, PrivregTypeError),
    ],
)
def test_invalid_declarations_are_refused_at_construction(kwargs, error):
    with pytest.raises(error):
        Param(name="p", doc="d", **kwargs)


@pytest.mark.parametrize("kwargs", [{"name": "bad name"}, {"name": ""}, {"doc": "  "}])
def test_param_needs_a_name_and_a_doc(kwargs):
    with pytest.raises(PrivregValueError):
        Param(**{"name": "p", "type": int, "doc": "d", **kwargs})


# --- Param.parse --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ptype, text, expected",
    [
        (int, "42", 42),
        (int, "-7", -7),
        (float, "1e-3", 0.001),
        (float, "2", 2.0),
        (str, "hello", "hello"),
        (Path, "out/x.csv", Path("out/x.csv")),
        (bool, "yes", True),
        (bool, " TRUE ", True),
        (bool, "1", True),
        (bool, "off", False),
        (bool, "False", False),
    ],
)
def test_parse(ptype, text, expected):
    result = param(ptype).parse(text)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    "ptype, text",
    [
        (int, "4.2"),
        (int, "four"),
        (float, "abc"),
        (float, "nan"),
        (float, "inf"),
        (bool, "maybe"),
        (bool, ""),
    ],
)
def test_parse_errors_name_the_parameter(ptype, text):
    with pytest.raises(PrivregValueError) as info:
        Param(name="my_param", type=ptype, doc="d").parse(text)
    assert "parameter my_param" in str(info.value)


def test_parse_applies_the_constraints():
    with pytest.raises(PrivregValueError, match=">= 1"):
        param(int, minimum=1).parse("0")
    with pytest.raises(PrivregValueError, match="one of"):
        param(str, choices=["a"]).parse("b")


def test_parse_applies_the_constraints_to_bools():
    p = param(bool, choices=[True])
    with pytest.raises(PrivregValueError):
        p.validate(False)
    with pytest.raises(PrivregValueError):
        p.parse("false")


# --- Citation and Example -----------------------------------------------------------------


@pytest.mark.parametrize("missing", ["authors", "title", "year"])
def test_citation_requires_authors_title_and_year(missing):
    fields = {"authors": "A", "title": "T", "year": 2001}
    del fields[missing]
    with pytest.raises(TypeError, match=missing):
        Citation(**fields)


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("authors", "", PrivregValueError),
        ("title", "   ", PrivregValueError),
        ("authors", None, PrivregTypeError),
        ("year", 1899, PrivregValueError),
        ("year", "2020", PrivregTypeError),
        ("year", 2020.0, PrivregTypeError),
    ],
)
def test_citation_fields_are_validated(field, value, error):
    with pytest.raises(error, match=field):
        Citation(**{"authors": "A", "title": "T", "year": 2001, field: value})


def test_citation_text():
    c = Citation(
        authors=" Dwork et al. ",
        title="Calibrating noise",
        year=np.int64(2006),
        venue="TCC",
        where="Theorem 1",
        url="https://doi.org/x",
    )
    assert c.authors == "Dwork et al." and c.year == 2006
    assert str(c) == "Dwork et al. (2006). Calibrating noise. TCC. [Theorem 1] https://doi.org/x"
    assert str(CIT) == "A. Author (2020). A Title."


def test_example_neighbours_must_be_a_pair():
    assert Example(neighbours=[1, 2]).neighbours == (1, 2)
    with pytest.raises(PrivregValueError, match="pair"):
        Example(neighbours=[1, 2, 3])


# --- RegistryItem ---------------------------------------------------------------------------

PARAMS = (
    Param(name="n", type=int, doc="how many", minimum=1),
    Param(name="scale", type=float, doc="noise scale", default=1.0, minimum=0, exclusive_minimum=True),
    Param(name="mode", type=str, doc="which mode", default="a", choices=["a", "b"]),
)


def make_item(**kw):
    fields = dict(
        name="demo",
        kind="sensitivity",
        summary="A demo item.",
        citation=CIT,
        factory=lambda **kwargs: kwargs,
        example=Example(params={"n": 2}),
        params=PARAMS,
    )
    fields.update(kw)
    return RegistryItem(**fields)


def test_bind_fills_defaults_and_converts():
    item = make_item()
    assert item.bind(n=3) == {"n": 3, "scale": 1.0, "mode": "a"}
    bound = item.bind({"n": np.int64(3), "mode": "b"}, scale=2)
    assert bound == {"n": 3, "scale": 2.0, "mode": "b"} and type(bound["scale"]) is float


def test_bind_rejects_unknown_parameters_listing_the_known_ones():
    with pytest.raises(PrivregValueError) as info:
        make_item().bind(n=3, sigma=1.0)
    message = str(info.value)
    assert "'sigma'" in message and "['mode', 'n', 'scale']" in message and "'demo'" in message


def test_bind_rejects_missing_required_parameters():
    with pytest.raises(PrivregValueError, match=r"needs parameter 'n' \(how many\)"):
        make_item().bind(scale=2.0)


def test_bind_validates_values():
    with pytest.raises(PrivregValueError, match="parameter scale"):
        make_item().bind(n=1, scale=0)
    with pytest.raises(PrivregTypeError, match="parameter n"):
        make_item().bind(n=1.5)


def test_bind_converts_defaults_too():
    item = make_item(params=(Param(name="out", type=Path, doc="where", default="out"),), example=Example())
    assert item.bind() == {"out": Path("out")}


@pytest.mark.parametrize("params", [{"n": 0}, {"n": 2, "sigma": 1}, {}, {"n": 2, "mode": "c"}])
def test_example_params_must_be_valid_for_the_item(params):
    with pytest.raises(PrivregValueError):
        make_item(example=Example(params=params))


@pytest.mark.parametrize("kind", ["mechanism", "randomizer"])
def test_mechanisms_and_randomizers_need_example_neighbours(kind):
    with pytest.raises(PrivregValueError, match="neighbours"):
        make_item(kind=kind)
    item = make_item(kind=kind, example=Example(params={"n": 2}, neighbours=(0, 1)))
    assert item.kind is ItemKind(kind)


@pytest.mark.parametrize("kind", ["sensitivity", "protocol", "workflow"])
def test_other_kinds_need_no_neighbours(kind):
    assert make_item(kind=kind).example.neighbours is None


@pytest.mark.parametrize("summary", ["", "   ", "two\nlines", "x" * 121, "trailing\n", "a\rb"])
def test_summary_must_be_one_short_line(summary):
    with pytest.raises(PrivregValueError, match="summary"):
        make_item(summary=summary)


def test_summary_must_be_a_str():
    with pytest.raises(PrivregTypeError, match="summary"):
        make_item(summary=None)


def test_summary_of_120_characters_is_accepted():
    assert make_item(summary="x" * 120).summary == "x" * 120


def test_create_binds_then_calls_the_factory():
    calls = []
    item = make_item(factory=lambda **kw: calls.append(kw) or "built")
    assert item.create({"n": 4}, mode="b") == "built"
    assert calls[-1] == {"n": 4, "scale": 1.0, "mode": "b"}
    with pytest.raises(PrivregValueError):
        item.create(n=0)
    assert len(calls) == 1  # the factory is not called with invalid parameters


def test_create_refuses_workflows_and_run_refuses_the_rest():
    calls = []
    workflow = make_item(kind="workflow", factory=lambda **kw: calls.append(kw) or "ran")
    with pytest.raises(PrivregTypeError, match="run"):
        workflow.create(n=1)
    assert workflow.run("ctx", n=5) == "ran"
    assert calls == [{"context": "ctx", "n": 5, "scale": 1.0, "mode": "a"}]
    with pytest.raises(PrivregTypeError, match="not a workflow"):
        make_item().run("ctx", n=5)


@pytest.mark.parametrize(
    "kw, error",
    [
        ({"factory": "not callable"}, PrivregTypeError),
        ({"citation": "Dwork 2006"}, TypeError),
        ({"example": {"n": 2}}, TypeError),
        ({"name": "two words"}, PrivregValueError),
        ({"params": PARAMS + (Param(name="n", type=int, doc="again"),)}, PrivregValueError),
        ({"params": ("n",)}, PrivregTypeError),
    ],
)
def test_invalid_items_are_refused(kw, error):
    with pytest.raises(error):
        make_item(**kw)


def test_param_lookup_and_description():
    def factory(**kw):
        """Builds the thing.

        It is epsilon-DP."""

    item = make_item(factory=factory)
    assert item.param("scale") is PARAMS[1]
    with pytest.raises(PrivregValueError, match=r"'sigma'.*\['n', 'scale', 'mode'\]"):
        item.param("sigma")
    assert item.description == "Builds the thing.\n\nIt is epsilon-DP."


def test_unknown_kind_raises_a_privreg_error():
    with pytest.raises(PrivregValueError):
        make_item(kind="estimator")


# --- budget_params ---------------------------------------------------------------------------

BUDGET = (
    Param(name="epsilon", type=float, doc="total epsilon", default=1.0),
    Param(name="delta", type=float, doc="total delta", default=1e-6),
    Param(name="eps_total", type=float, doc="another name for the total", default=2.0),
)


def workflow(params, **kw):
    return make_item(kind="workflow", params=params, example=Example(), **kw)


def test_budget_params_default_to_epsilon_and_delta_where_the_item_has_them():
    assert workflow(BUDGET).budget_params == ("epsilon", "delta")
    assert workflow(BUDGET[:1]).budget_params == ("epsilon",)
    assert workflow(BUDGET[1:]).budget_params == ()  # a delta alone states no budget
    assert workflow(BUDGET, charges=False).budget_params == ()
    assert workflow(BUDGET).budget_of({"epsilon": 0.5, "delta": 1e-7}) == (0.5, 1e-7)
    assert workflow(BUDGET[:1]).budget_of({"epsilon": 0.5}) == (0.5, 0.0)
    assert workflow(BUDGET[1:]).budget_of({"delta": 1e-7}) is None


def test_a_declared_budget_is_read_from_the_named_parameters():
    item = workflow(BUDGET, budget_params=("eps_total",))
    assert item.budget_params == ("eps_total",)
    assert item.budget_of(item.bind()) == (2.0, 0.0)
    assert workflow(BUDGET, budget_params=["eps_total", "delta"]).budget_of({"eps_total": 3, "delta": 0.1}) == (3, 0.1)


@pytest.mark.parametrize(
    "declared, error, words",
    [
        (("sigma",), PrivregValueError, ["'sigma'", "not among its parameters", "budget_params"]),
        (("epsilon", "epsilon"), PrivregValueError, ["each once"]),
        (("epsilon", "delta", "eps_total"), PrivregValueError, ["(EPSILON, DELTA)"]),
        ("epsilon", PrivregTypeError, ["tuple of parameter names"]),
    ],
)
def test_budget_params_are_checked_at_registration(declared, error, words):
    with pytest.raises(error) as info:
        workflow(BUDGET, budget_params=declared)
    assert all(w in str(info.value) for w in words), info.value


def test_a_workflow_charging_nothing_declares_no_budget():
    with pytest.raises(PrivregValueError, match=r"charges=False.*drop budget_params"):
        workflow(BUDGET, charges=False, budget_params=("epsilon",))


def test_every_builtin_charging_workflow_states_its_budget():
    """What ``privreg run`` prices a run by before its first charge: every built-in
    workflow that charges names an epsilon parameter whose documentation says it is the
    privacy parameter of the run."""
    import privreg

    for item in privreg.default_registry().items("workflow"):
        if not item.charges:
            assert item.budget_params == ()
            continue
        assert item.budget_params, item.name
        assert "epsilon" in item.param(item.budget_params[0]).doc, item.name
