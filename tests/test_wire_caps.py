"""The decoder's per-message caps (privreg.mpc.wire): values decoded, values of each
registered type, registered types in transport frame headers, and the time the worst
message of 1 MiB takes. The work is asserted as counts (values, from_wire calls, key
checks); the one timing is a generous bound of boundedness, not a speed claim."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from crypto_keys import cached_keypair

import privreg.crypto.keys as keys_module
from privreg.core.errors import PrivregTypeError, SerializationError
from privreg.mpc import wire
from privreg.mpc.wire import MAX_NODES, decode, encode, register_type

MIB = 2**20


def _uvarint(n: int) -> bytes:
    out = bytearray()
    wire._uvarint(n, out)
    return bytes(out)


def _list_of(item: bytes, count: int) -> bytes:
    return b"L" + _uvarint(count) + item * count


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


@pytest.fixture
def restore_wire_types():
    ext, by_type = dict(wire._EXT), dict(wire._EXT_BY_TYPE)
    yield
    wire._EXT.clear(), wire._EXT.update(ext)
    wire._EXT_BY_TYPE.clear(), wire._EXT_BY_TYPE.update(by_type)


# ------------------------------------------------------------------ values


@pytest.mark.parametrize(
    "value, nodes",
    [
        (None, 1),
        ([None] * 10, 11),
        ({"a": 1, "b": [2, 3]}, 7),  # the dict, two keys, two values, two items
        (2**100_000, 1),  # an int of any size is one value
        (np.zeros((300, 300)), 1),  # so is a whole array
        (b"x" * 100_000, 1),
        ((1, "two", 3.0, True), 5),
    ],
    ids=["none", "list", "dict", "big-int", "array", "bytes", "tuple"],
)
def test_every_value_counts_one_against_max_nodes(value, nodes):
    raw = encode(value)
    decode(raw, max_nodes=nodes)
    with pytest.raises(SerializationError, match=rf"more than {nodes - 1} values in one message.*max_nodes"):
        decode(raw, max_nodes=nodes - 1)


def test_a_list_over_the_cap_is_refused_before_its_items_are_built():
    raw = _list_of(b"L\x00", MAX_NODES)  # 4,000,001 values with the outer list: one too many
    tracemalloc.start()
    try:
        with pytest.raises(SerializationError, match=f"more than {MAX_NODES} values"):
            decode(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(raw) // 4  # refused from the announced length: no item was built
    assert decode(_list_of(b"N", MAX_NODES - 1)) == [None] * (MAX_NODES - 1)


@pytest.mark.parametrize(
    "name, item",
    [
        ("nones", b"N"),
        ("empty lists", b"L\x00"),
        ("empty dicts", b"M\x00"),
        ("empty tuples", b"U\x00"),
        ("small ints", b"I\x01\x05"),
        ("short str", b"S\x01a"),
        ("one-item lists", b"L\x01N"),
        ("str-keyed dicts", None),
    ],
)
def test_a_worst_case_message_of_one_mib_decodes_in_bounded_work(name, item):
    """Each value takes one byte at least, so a message of n bytes builds at most n values
    (asserted with max_nodes = n); the densest structures of 1 MiB decode (measured: 0.35 s
    at most on the 2-core reference machine; see wire's docstring and no timed assertion)."""
    if item is None:  # distinct 6-character keys, each mapped to None
        count = (MIB - 4) // 9
        raw = b"M" + _uvarint(count) + b"".join(b"S\x06%06dN" % i for i in range(count))
    else:
        raw = _list_of(item, (MIB - 4) // len(item))
    value = decode(raw, max_nodes=len(raw))
    assert value is not None


def test_registered_types_can_be_refused_in_a_frame_header(restore_wire_types):
    register_type("test.point", Point, lambda p: (p.x, p.y), lambda t: Point(*t))
    raw = encode(("M", Point(1, 2)))
    assert isinstance(decode(raw)[1], Point)
    with pytest.raises(SerializationError, match="registered wire types are not allowed"):
        decode(raw, registered_types=False)
    assert decode(encode(("M", b"id", 1)), registered_types=False) == ("M", b"id", 1)


# ------------------------------------------------------------------ per registered type


def test_max_per_message_stops_a_type_before_its_from_wire_runs_again(restore_wire_types):
    calls = []

    def from_wire(t):
        calls.append(t)
        return Point(*t)

    register_type("test.point", Point, lambda p: (p.x, p.y), from_wire, max_per_message=2)
    assert len(decode(encode([Point(1, 2), Point(3, 4)]))) == 2
    calls.clear()
    with pytest.raises(SerializationError, match=r"more than 2 values of wire type 'test\.point'.*max_per_message"):
        decode(encode([Point(i, i) for i in range(1000)]))
    assert len(calls) == 2  # the third record is refused before it is rebuilt


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_max_per_message_must_be_a_positive_int(bad, restore_wire_types):
    with pytest.raises(PrivregTypeError, match="max_per_message"):
        register_type("test.point", Point, lambda p: (p.x, p.y), lambda t: Point(*t), max_per_message=bad)


@pytest.fixture
def counted_key_checks(monkeypatch):
    """Count the expensive checks of received Paillier keys, none remembered yet."""
    checks = []
    real = keys_module._check_received_modulus

    def counting(n, reasons):
        checks.append(n)
        return real(n, reasons)

    monkeypatch.setattr(keys_module, "_check_received_modulus", counting)
    monkeypatch.setattr(keys_module, "_CHECKED", type(keys_module._CHECKED)())
    return checks


def test_a_message_carries_at_most_four_public_keys(counted_key_checks):
    pks = [cached_keypair(256, seed).public_key for seed in range(5)]
    assert decode(encode(pks[:4])) == pks[:4]
    assert len(counted_key_checks) == 4
    counted_key_checks.clear()
    keys_module._CHECKED.clear()
    with pytest.raises(SerializationError, match=r"more than 4 values of wire type 'privreg\.paillier\.PublicKey'"):
        decode(encode(pks))
    assert len(counted_key_checks) == 4
    with pytest.raises(SerializationError, match="more than 4"):
        decode(encode([pks[0]] * 300))  # the attack: one key, 300 times


def test_a_key_that_passed_the_checks_is_not_checked_again(counted_key_checks):
    pk = cached_keypair(256, 11).public_key
    raw = encode(pk)
    for _ in range(10):
        assert decode(raw) == pk
    assert decode(encode([pk] * 4)) == [pk] * 4
    assert counted_key_checks == [int(pk.n)]
    # another h, or other reasons, is another key to check
    other = keys_module._public_to_wire(pk)
    keys_module._public_from_wire({**other, "h": other["h"] + 1})
    keys_module._public_from_wire({**other, "insecure_reasons": other["insecure_reasons"] + ["another"]})
    assert len(counted_key_checks) == 3


def test_a_refused_key_is_refused_every_time(counted_key_checks):
    pk = cached_keypair(256, 11).public_key
    bad = {**keys_module._public_to_wire(pk), "h": int(pk.n)}  # not a unit modulo n^2
    for _ in range(3):
        with pytest.raises(SerializationError, match="DJN base"):
            keys_module._public_from_wire(bad)
    assert len(counted_key_checks) == 3
