"""Parameters declared once (issue #17): derived from attrs fields and Annotated
signatures, enforced by the factory and the registry alike; kinds come from the hook."""

import re
from pathlib import Path
from typing import Annotated

import attrs
import numpy as np
import pytest

import privreg
from privreg import (
    OPEN_UNIT,
    POSITIVE,
    Citation,
    Example,
    ItemKind,
    PrivregTypeError,
    PrivregValueError,
    RegistryItem,
    Spec,
    check_params,
    param_field,
    param_fields,
    params_of,
)

CITE = Citation(authors="A", title="T", year=2020)


@attrs.frozen(kw_only=True, field_transformer=param_fields)
class Noise:
    epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)
    delta: float = param_field(default=1e-6, doc="privacy parameter delta", **OPEN_UNIT)
    k: int = param_field(default=2, minimum=2, maximum=9, doc="categories")
    path: str = param_field(default="fast", choices=("fast", "exact"), doc="sampler")
    scale: tuple = param_field(default=1.0, type=float, converter=lambda x: (x,), doc="scale", **POSITIVE)
    note: str = "not a parameter"


def test_class_params_are_its_param_fields():
    params = params_of(Noise)
    assert [p.name for p in params] == ["epsilon", "delta", "k", "path", "scale"]
    eps, delta, k, path, scale = params
    assert eps.required and eps.type is float and eps.constraint_text() == "> 0"
    assert delta.default == 1e-6 and delta.constraint_text() == "> 0, < 1"
    assert k.type is int and k.constraint_text() == ">= 2, <= 9"
    assert path.choices == ("fast", "exact") and scale.type is float
    assert params_of(Noise, "k") is k


def test_the_class_enforces_the_same_limits():
    n = Noise(epsilon=1, k=np.int64(3), scale=2)
    assert n.epsilon == 1.0 and type(n.epsilon) is float and n.k == 3 and type(n.k) is int
    assert n.scale == (2.0,)  # checked as a float, then the field's own converter
    assert Noise(epsilon=1, scale=(5.0,)).scale == ((5.0,),)  # non-numbers go to the converter
    for bad, match in [
        ({"epsilon": 0}, "parameter epsilon must be > 0; got 0"),
        ({"delta": 1.0}, "parameter delta must be > 0, < 1"),
        ({"k": 10}, "parameter k must be >= 2, <= 9"),
        ({"path": "slow"}, "parameter path must be one of"),
        ({"scale": -1.0}, "parameter scale must be > 0"),
    ]:
        with pytest.raises(PrivregValueError, match=match):
            Noise(**{"epsilon": 1.0, **bad})
    with pytest.raises(PrivregTypeError, match="parameter epsilon must be a real number"):
        Noise(epsilon="1")


def test_an_item_derives_its_params_and_checks_them_as_the_class_does():
    item = RegistryItem(
        name="noise", summary="s", citation=CITE, factory=Noise, example=Example(params={"epsilon": 1.0})
    )
    assert item.params == params_of(Noise)
    assert item.bind(epsilon=2)["epsilon"] == 2.0
    with pytest.raises(PrivregValueError, match=re.escape("parameter delta must be > 0, < 1; got 1.0")):
        item.bind(epsilon=1.0, delta=1.0)
    explicit = RegistryItem(name="noise", summary="s", citation=CITE, factory=Noise, example=Example(), params=())
    assert explicit.params == ()


def test_a_class_without_the_transformer_is_refused():
    @attrs.frozen(kw_only=True)
    class Unchecked:
        epsilon: float = param_field(doc="privacy parameter epsilon", **POSITIVE)

    with pytest.raises(PrivregTypeError, match="field_transformer=param_fields"):
        params_of(Unchecked)


def test_unusable_declarations_are_refused():
    with pytest.raises(PrivregTypeError, match="cannot tell the parameter type"):

        @attrs.frozen(kw_only=True, field_transformer=param_fields)
        class Rich:
            sensitivity: object = param_field(doc="sensitivity")

    with pytest.raises(PrivregTypeError, match="plain default"):

        @attrs.frozen(kw_only=True, field_transformer=param_fields)
        class Factory:
            n: int = param_field(factory=int, doc="n")


def run(
    *,
    context,
    epsilon: Annotated[float, Spec(doc="epsilon", **POSITIVE)] = 1.0,
    out: Annotated[Path | None, Spec(doc="output file")] = None,
    n: Annotated[int, params_of(Noise, "k")] = 3,
    rng=None,
):
    return epsilon, out, n


def test_function_params_come_from_the_annotated_signature():
    eps, out, n = params_of(run)  # context and the unannotated rng are not parameters
    assert (eps.name, eps.default, eps.constraint_text()) == ("epsilon", 1.0, "> 0")
    assert out.type is Path and out.default is None
    assert (n.name, n.default, n.constraint_text(), n.doc) == ("n", 3, ">= 2, <= 9", "categories")

    def untyped(*, epsilon):
        return epsilon

    with pytest.raises(PrivregTypeError, match="argument 'epsilon' needs its documentation"):
        params_of(untyped)


def test_check_params_makes_a_function_enforce_its_limits():
    checked = check_params(run)
    assert checked(context=None, epsilon=2, out="x.csv") == (2.0, Path("x.csv"), 3)
    with pytest.raises(PrivregValueError, match="parameter n must be >= 2, <= 9; got 1"):
        checked(context=None, n=1)
    assert params_of(checked) == params_of(run)


class Kinds:
    @privreg.hookimpl
    def privreg_register_randomizers(self):
        return [
            RegistryItem(
                name="rr",
                summary="s",
                citation=CITE,
                factory=Noise,
                example=Example(params={"epsilon": 1.0}, neighbours=(0, 1)),
            )
        ]

    @privreg.hookimpl
    def privreg_register_workflows(self):
        return [RegistryItem(name="w", summary="s", citation=CITE, factory=run, example=Example())]


def test_the_hook_sets_the_kind():
    registry = privreg.load_registry(plugins={"kinds": Kinds()}, autoload=False)
    assert not registry.failures
    assert registry.get("rr").kind is ItemKind.RANDOMIZER
    assert registry.get("w").kind is ItemKind.WORKFLOW
    assert [p.name for p in registry.get("w").params] == ["epsilon", "out", "n"]


def test_a_kind_that_contradicts_its_hook_fails_the_plugin():
    class Wrong:
        @privreg.hookimpl
        def privreg_register_sensitivities(self):
            return [RegistryItem(name="x", kind="workflow", summary="s", citation=CITE, factory=run, example=Example())]

    registry = privreg.load_registry(plugins={"wrong": Wrong()}, autoload=False)
    assert "x" not in registry
    assert "of kind 'workflow'; expected 'sensitivity'. Leave out kind=" in registry.failures[0].error


def test_an_item_outside_a_registry_has_no_kind_yet():
    item = RegistryItem(name="w", summary="s", citation=CITE, factory=run, example=Example())
    assert item.kind is None and item.kind_name == "item"
    with pytest.raises(PrivregTypeError, match="'w' is not registered yet \\(no kind\\), not a workflow"):
        item.run(None)
