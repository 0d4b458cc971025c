"""Plugin ``pprl`` (paper 004): key derivation, schemas and keyed Bloom-filter encoding.

Deterministic: fixed secrets and data; the one statistical comparison (filters under two
keys look independent) states its false-alarm rate.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.pprl.encoding import (
    encode_records,
    encode_values,
    field_key,
    hamming,
    normalise_values,
    qgram_positions,
    qgrams,
)
from privreg.plugins.pprl.kdf import check_secret, derive_key, hkdf, hkdf_expand, hkdf_extract
from privreg.plugins.pprl.schema import (
    FEBRL_SCHEMA,
    Normalisation,
    parse_schema,
    pseudopeople_schema,
)

SECRET = bytes(range(32))
OTHER = bytes(range(100, 132))


# --- HKDF: RFC 5869 Appendix A, test cases 1-3 (SHA-256) ---------------------------------

RFC_CASES = [
    dict(
        ikm="0b" * 22,
        salt="000102030405060708090a0b0c",
        info="f0f1f2f3f4f5f6f7f8f9",
        length=42,
        prk="077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
        okm="3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    dict(
        ikm=bytes(range(0x50)).hex(),
        salt=bytes(range(0x60, 0xB0)).hex(),
        info=bytes(range(0xB0, 0x100)).hex(),
        length=82,
        prk="06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
        okm="b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
        "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
        "cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    dict(
        ikm="0b" * 22,
        salt="",
        info="",
        length=42,
        prk="19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
        okm="8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
    ),
]


@pytest.mark.parametrize("case", RFC_CASES, ids=["A.1", "A.2", "A.3"])
def test_hkdf_rfc5869_vectors(case):
    ikm, salt, info = (bytes.fromhex(case[k]) for k in ("ikm", "salt", "info"))
    prk = hkdf_extract(salt, ikm)
    assert prk.hex() == case["prk"]
    assert hkdf_expand(prk, info, case["length"]).hex() == case["okm"]
    assert hkdf(ikm, salt=salt, info=info, length=case["length"]).hex() == case["okm"]


def test_hkdf_limits():
    prk = hkdf_extract(b"", b"x" * 32)
    assert len(hkdf_expand(prk, b"", 255 * 32)) == 255 * 32
    with pytest.raises(PrivregValueError, match="255"):
        hkdf_expand(prk, b"", 255 * 32 + 1)
    with pytest.raises(PrivregValueError, match="at least 32"):
        hkdf_expand(b"short", b"", 10)
    with pytest.raises(PrivregTypeError):
        hkdf_extract("salt", b"ikm")


def test_derive_key_is_deterministic_and_label_separated():
    a = derive_key(SECRET, info="bloom/blocking/surname")
    assert a == derive_key(SECRET, info="bloom/blocking/surname")
    assert len(a) == 32 and len(derive_key(SECRET, info="x", length=64)) == 64
    assert a != derive_key(SECRET, info="bloom/matching/surname")
    assert a != derive_key(OTHER, info="bloom/blocking/surname")
    # the documented construction: HKDF with the fixed application salt and prefixed info
    expected = hkdf(
        SECRET,
        salt=b"privreg.plugins.pprl/hkdf-salt/v1",
        info=b"privreg.plugins.pprl/v1/bloom/blocking/surname",
        length=32,
    )
    assert a == expected


@pytest.mark.parametrize(
    "bad, error, words",
    [
        ("correct horse battery staple 2024", PrivregTypeError, "passphrase"),
        (b"\x01" * 15, PrivregValueError, "at least 16 bytes"),
        (bytes(32), PrivregValueError, "distinct byte values"),
        (b"0123456789abcdefXYZ", PrivregValueError, "printable ASCII"),
        (12345, PrivregTypeError, "bytes"),
    ],
)
def test_weak_secrets_are_refused_without_echoing_them(bad, error, words):
    with pytest.raises(error) as info:
        derive_key(bad, info="bloom/blocking/surname")
    message = str(info.value)
    assert words in message
    assert "token_bytes(32)" in message or (error is PrivregTypeError and words == "bytes")
    if isinstance(bad, (bytes, str)):
        shown = bad if isinstance(bad, str) else bad.decode("latin-1")
        assert shown not in message and repr(bad) not in message


def test_strong_secrets_are_accepted():
    assert check_secret(bytearray(SECRET)) == SECRET
    random16 = bytes.fromhex("a31f5c0e77d2946b08e3c1b5f2d94a6e")
    assert check_secret(random16) == random16
    hex_token = b"9f86d081884c7d659a2feaa0c55ad015"  # 32 printable chars: a hex token is fine
    assert check_secret(hex_token) == hex_token


# --- schema ------------------------------------------------------------------------------


def _base() -> dict:
    return {"blocking": {"fields": ["given_name", "surname"]}, "matching": {"fields": ["address_1"]}}


def test_schema_defaults_and_round_trip():
    s = parse_schema(_base())
    assert s.q == 2 and s.padding is True
    assert s.blocking.filter_length == 100 and s.matching.filter_length == 100
    assert s.columns == ("given_name", "surname", "address_1")
    assert parse_schema(s.to_dict()) == s
    assert FEBRL_SCHEMA.blocking.fields == ("given_name", "surname")
    assert FEBRL_SCHEMA.matching.fields == ("address_1", "suburb")
    assert pseudopeople_schema(matching="names").matching.fields == ("first_name", "middle_initial", "last_name")


def test_schema_per_field_normalisation():
    d = _base() | {"normalise": {"lowercase": False}, "fields": {"surname": {"drop_punctuation": False}}}
    s = parse_schema(d)
    assert s.normalisation("given_name") == Normalisation(lowercase=False)
    assert s.normalisation("surname") == Normalisation(lowercase=False, drop_punctuation=False)


@pytest.mark.parametrize("where, key", [((), "hash_size"), (("blocking",), "length"), (("normalise",), "upper")])
def test_schema_unknown_key_names_key_and_allowed(where, key):
    d = _base() | {"normalise": {}}
    target = d
    for w in where:
        target = target[w]
    target[key] = 1
    with pytest.raises(PrivregValueError) as info:
        parse_schema(d)
    assert repr(key) in str(info.value) and "allowed keys are" in str(info.value)


@pytest.mark.parametrize(
    "patch, error",
    [
        ({"q": "2"}, PrivregTypeError),
        ({"q": 0}, PrivregValueError),
        ({"padding": 1}, PrivregTypeError),
        ({"blocking": {"fields": "given_name"}}, PrivregTypeError),
        ({"blocking": {"fields": []}}, PrivregValueError),
        ({"blocking": {"fields": ["a", "a"]}}, PrivregValueError),
        ({"blocking": {"fields": ["a"], "filter_length": 100.0}}, PrivregTypeError),
        ({"blocking": {"fields": ["a"], "hash_count": 0}}, PrivregValueError),
        ({"fields": {"nope": {}}}, PrivregValueError),
        ({"normalise": {"strip": "yes"}}, PrivregTypeError),
    ],
)
def test_schema_bad_values(patch, error):
    with pytest.raises(error):
        parse_schema(_base() | patch)
    with pytest.raises(PrivregTypeError):
        parse_schema(["blocking"])
    with pytest.raises(PrivregValueError, match="'matching'"):
        parse_schema({"blocking": {"fields": ["a"]}})


# --- q-grams and normalisation -----------------------------------------------------------


def test_qgrams_by_hand():
    assert qgrams("anna", q=2, padding=True) == ("_a", "an", "nn", "na", "a_")
    assert qgrams("anna", q=2, padding=False) == ("an", "nn", "na")
    assert qgrams("abab", q=3, padding=False) == ("aba", "bab")
    assert qgrams("ab", q=3, padding=True) == ("__a", "_ab", "ab_", "b__")
    assert qgrams("a", q=3, padding=False) == ("a",)
    assert qgrams("", q=2) == ()


def test_normalisation_by_hand():
    out = normalise_values(["  O'Brien   Smith ", None, np.nan, "A-B_c"], Normalisation())
    assert list(out) == ["obrien smith", "", "", "abc"]
    keep = normalise_values(
        ["  O'Brien "], Normalisation(lowercase=False, drop_punctuation=False, strip=False, collapse_spaces=False)
    )
    assert list(keep) == ["  O'Brien "]


def test_qgram_positions_follow_the_documented_construction():
    key = field_key(SECRET, role="blocking", field="surname")
    assert key == derive_key(SECRET, info="bloom/blocking/surname")
    pos = qgram_positions(["an", "nn"], key=key, filter_length=100, hash_count=3)
    digest = hashlib.blake2b(b"an", key=key, digest_size=24, person=bytes(16)).digest()
    words = [int.from_bytes(digest[8 * i : 8 * i + 8], "little") for i in range(3)]
    assert pos[0].tolist() == [w % 100 for w in words]
    # k > 8 uses a second 64-byte block with person = 1
    pos10 = qgram_positions(["an"], key=key, filter_length=1000, hash_count=10)
    second = hashlib.blake2b(b"an", key=key, digest_size=16, person=(1).to_bytes(16, "big")).digest()
    assert pos10[0, 8:].tolist() == [int.from_bytes(second[i : i + 8], "little") % 1000 for i in (0, 8)]


# --- encoding ----------------------------------------------------------------------------

PEOPLE = pd.DataFrame(
    {
        "given_name": ["jonathan", "jonathon", "mary", "", "peter"],
        "surname": ["smith", "smith", "jones", "brown", "pete"],
        "address_1": ["1 main st", "1 main st", "9 high road", "5 low lane", None],
        "suburb": ["kent", "kent", "york", "hull", "leeds"],
    },
    index=["r0", "r1", "r2", "r3", "r4"],
)


def test_encode_records_shape_and_determinism():
    enc = encode_records(PEOPLE, schema=FEBRL_SCHEMA, secret=SECRET, party="A")
    again = encode_records(
        PEOPLE.to_dict("records"), schema=FEBRL_SCHEMA, secret=SECRET, party="A", ids=list(PEOPLE.index)
    )
    assert enc.ids == ("r0", "r1", "r2", "r3", "r4") and enc.party == "A" and enc.entities is None
    assert enc.block_filters.shape == (5, 100) and enc.block_filters.dtype == bool
    assert enc.match_filters.shape == (5, 100)
    np.testing.assert_array_equal(enc.block_filters, again.block_filters)
    np.testing.assert_array_equal(enc.match_filters, again.match_filters)
    # a record's bf is the OR of its fields' filters, each under its own field key
    s = FEBRL_SCHEMA
    g = encode_values(
        ["jonathan"],
        key=field_key(SECRET, role="blocking", field="given_name"),
        filter_length=100,
        hash_count=s.blocking.hash_count,
    )
    n = encode_values(
        ["smith"],
        key=field_key(SECRET, role="blocking", field="surname"),
        filter_length=100,
        hash_count=s.blocking.hash_count,
    )
    np.testing.assert_array_equal(enc.block_filters[0], (g | n)[0])
    # every q-gram sets exactly its k keyed positions (no other bits)
    grams = qgrams("smith")
    table = qgram_positions(
        list(grams), key=field_key(SECRET, role="blocking", field="surname"), filter_length=100, hash_count=2
    )
    assert set(np.flatnonzero(n[0])) == set(table.ravel().tolist())
    # the missing address leaves only the suburb's bits
    sub = encode_values(
        ["leeds"], key=field_key(SECRET, role="matching", field="suburb"), filter_length=100, hash_count=2
    )
    np.testing.assert_array_equal(enc.match_filters[4], sub[0])


def test_similar_names_are_close_and_the_typo_bound_holds():
    enc = encode_records(PEOPLE, schema=FEBRL_SCHEMA, secret=SECRET, party="A")
    d = hamming(enc.block_filters[0], enc.block_filters[1])  # jonathan/jonathon smith
    # one substitution changes at most 2 bigrams each way -> at most 4 k = 8 bits
    assert 0 < d <= 8
    assert hamming(enc.block_filters[0], enc.block_filters[2]) > d
    np.testing.assert_array_equal(enc.match_filters[0], enc.match_filters[1])


def test_distance_bound_on_many_pairs():
    """Deterministic bound: d(bf(a), bf(b)) <= k * |Q(a) symmetric-difference Q(b)|."""
    names = [
        "christopher",
        "kristopher",
        "catherine",
        "katherine",
        "katharine",
        "jon",
        "john",
        "mohammed",
        "muhammad",
        "stephen",
        "steven",
        "anne",
        "ann",
        "elisabeth",
        "elizabeth",
    ]
    key = field_key(SECRET, role="blocking", field="given_name")
    f = encode_values(names, key=key, filter_length=100, hash_count=3)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            diff = len(set(qgrams(a)) ^ set(qgrams(b)))
            assert hamming(f[i], f[j]) <= 3 * diff


def test_different_keys_give_unrelated_filters():
    """Under two secrets the same record's filters are as far apart as independent random
    filters with the same number of set bits: for sets S1, S2 of sizes s1, s2 placed
    independently, E|S1 xor S2| = s1 + s2 - 2 s1 s2 / L. The observed mean over 600 records
    must lie within 1.5 bits of the prediction (per-record sd ~4 bits, so the mean's sd is
    ~0.17: a 9-sigma tolerance, false-alarm rate < 1e-15); the same-key distance is 0."""
    rng = np.random.default_rng(7)  # simulated names, not privacy noise
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    rows = ["".join(rng.choice(letters, size=rng.integers(4, 9))) for _ in range(1200)]
    frame = pd.DataFrame({"given_name": rows[:600], "surname": rows[600:], "address_1": "x", "suburb": "y"})
    a = encode_records(frame, schema=FEBRL_SCHEMA, secret=SECRET, party="A").block_filters
    b = encode_records(frame, schema=FEBRL_SCHEMA, secret=OTHER, party="A").block_filters
    s1, s2 = a.sum(axis=1), b.sum(axis=1)
    expected = (s1 + s2 - 2 * s1 * s2 / 100).mean()
    observed = hamming(a, b).mean()
    assert abs(observed - expected) < 1.5
    assert expected > 25  # far from the same-key distance
    assert hamming(a, encode_records(frame, schema=FEBRL_SCHEMA, secret=SECRET, party="B").block_filters).max() == 0


def test_encode_records_validation():
    with pytest.raises(PrivregValueError, match="suburb"):
        encode_records(PEOPLE.drop(columns="suburb"), schema=FEBRL_SCHEMA, secret=SECRET, party="A")
    with pytest.raises(PrivregValueError, match="unique"):
        encode_records(PEOPLE, schema=FEBRL_SCHEMA, secret=SECRET, party="A", ids=["x"] * 5)
    with pytest.raises(PrivregValueError, match="one entry per record"):
        encode_records(PEOPLE, schema=FEBRL_SCHEMA, secret=SECRET, party="A", entities=["e"])
    with pytest.raises(PrivregTypeError):
        encode_records("not a frame", schema=FEBRL_SCHEMA, secret=SECRET, party="A")
    with pytest.raises(PrivregValueError):
        encode_records(PEOPLE, schema=FEBRL_SCHEMA, secret=SECRET, party="bad name")
    with pytest.raises(PrivregTypeError, match="passphrase"):
        encode_records(PEOPLE, schema=FEBRL_SCHEMA, secret="hunter2hunter2hunter2", party="A")
    with_entities = PEOPLE.assign(entity=["1", "1", "2", "3", "4"])
    enc = encode_records(with_entities, schema=FEBRL_SCHEMA.to_dict(), secret=SECRET, party="A", entity_column="entity")
    assert enc.entities == ("1", "1", "2", "3", "4")
    empty = encode_records(PEOPLE.iloc[:0], schema=FEBRL_SCHEMA, secret=SECRET, party="A")
    assert len(empty) == 0 and empty.block_filters.shape == (0, 100)
