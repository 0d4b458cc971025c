"""The binary wire codec: round trips, sizes, malformed input and registered types."""

import contextlib
import math
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privreg import PrivregTypeError, SerializationError
from privreg.mpc import wire
from privreg.mpc.wire import decode, encode, encode_buffer, encoded_size, register_type

# encoding is cheap and the value space wide: more examples than the profile default
SETTINGS = settings(max_examples=150)


def same(a, b):
    """Structural equality that also tells list from tuple, bool from int and -0.0 from 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)  # bitwise: NaN, -0.0
    if isinstance(a, np.ndarray):
        return a.dtype.str == b.dtype.str and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items())
        )
    return a == b


def test_same_tells_apart_what_the_codec_must_keep_apart():
    assert not same(0.0, -0.0) and not same([1], (1,)) and not same(True, 1) and same(math.nan, math.nan)


numeric_dtypes = st.one_of(
    hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.floating_dtypes(endianness="?", sizes=(16, 32, 64)),
    hnp.boolean_dtypes(),
)
arrays = hnp.arrays(numeric_dtypes, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))

huge_ints = st.sampled_from([2**4000, -(2**4000), 2**64, -(2**63) - 1, 2**63, -1, 0, 127, -128, 128])
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    huge_ints,
    st.floats(),  # NaN included: same() compares floats bitwise
    st.text(),
    st.binary(),
    arrays,
)
values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), kids, max_size=4),
    ),
    max_leaves=12,
)


@SETTINGS
@given(values)
def test_values_round_trip(value):
    assert same(decode(encode(value)), value)


@SETTINGS
@given(arrays)
def test_arrays_round_trip_with_dtype_shape_and_values(array):
    back = decode(encode(array))
    assert isinstance(back, np.ndarray)
    assert back.dtype == array.dtype and back.dtype.str == array.dtype.str
    assert back.shape == array.shape
    assert back.tobytes() == array.tobytes()
    assert back.flags.writeable


def test_non_contiguous_arrays_round_trip():
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    for view in (base.T, base[:, ::2], base[::-1]):
        back = decode(encode(view))
        assert back.shape == view.shape and np.array_equal(back, view)


def test_zero_dimensional_arrays_keep_their_shape():
    assert decode(encode(np.array(5.0))).shape == ()


@pytest.mark.parametrize("value", [2**4000, -(2**4000), 2**4000 - 1, -(2**4000) + 1])
def test_huge_ints_round_trip(value):
    assert decode(encode(value)) == value


def test_signed_zero_round_trips():
    assert math.copysign(1.0, decode(encode(-0.0))) == -1.0
    assert math.copysign(1.0, decode(encode(0.0))) == 1.0


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.int64(-7), -7),
        (np.uint8(200), 200),
        (np.float32(0.5), 0.5),
        (bytearray(b"ab"), b"ab"),
        ((), ()),
        ({}, {}),
        ("", ""),
        ("héllo \U0001f600", "héllo \U0001f600"),
    ],
)
def test_scalars_decode_to_python_values(value, expected):
    assert same(decode(encode(value)), expected)


@SETTINGS
@given(values)
def test_encoded_size_is_the_encoding_length(value):
    assert encoded_size(value) == len(encode(value))


# --- malformed input ------------------------------------------------------------------


@given(values, st.data())
def test_every_truncation_is_refused(value, data):
    raw = encode(value)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(SerializationError):
        decode(raw[:cut])


@settings(max_examples=50)  # one refusal path: a smaller budget suffices
@given(values, st.binary(min_size=1, max_size=8))
def test_trailing_bytes_are_refused(value, extra):
    with pytest.raises(SerializationError, match="trailing"):
        decode(encode(value) + extra)


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"Z", "unknown tag"),
        (b"L\x02NZ", "unknown tag"),
        (pickle.dumps({"a": 1}), "unknown tag"),
        (b"X\x06nosuchN", "nosuch"),
        (b"A\x02|O\x00", "dtype"),  # object arrays would unpickle/run code
        (b"A\x03<c8\x01\x00", "dtype"),
        (b"A\x05(2,)i\x00", "dtype"),  # a sub-array dtype
        (b"A\x05int64\x00", "dtype"),  # np.dtype would take it; encode never writes it
        (b"S\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", "length"),
    ],
)
def test_malformed_bytes_are_refused(raw, message):
    with pytest.raises(SerializationError, match=message):
        decode(raw)


def test_deep_nesting_is_refused_not_a_recursion_error():
    assert decode(b"L\x01" * 30 + b"N") is not None
    with pytest.raises(SerializationError, match="deep"):
        decode(b"L\x01" * 1000 + b"N")
    deep = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(SerializationError, match="deep"):
        encode(deep)


def _leak(raw, leaked, id):
    """Malformed input that once leaked ``leaked`` instead of SerializationError."""
    return pytest.param(raw, id=id)


@pytest.mark.parametrize(
    "raw",
    [
        _leak(b"S\x01\xff", UnicodeDecodeError, "invalid-utf8-str"),
        _leak(b"A\x01\xff\x00", UnicodeDecodeError, "non-ascii-dtype"),
        _leak(b"A\x02zz\x00", TypeError, "unknown-dtype"),
        _leak(b"M\x01L\x00N", TypeError, "unhashable-dict-key"),
        _leak(b"A\x03<i8\x01" + b"\xff" * 9 + b"\x7f", OverflowError, "dim-over-int64"),
        # shape (2**32, 2**32): np.prod wraps to 0, so 0 bytes are read, then reshape fails
        _leak(b"A\x03<i8\x02\x80\x80\x80\x80\x10\x80\x80\x80\x80\x10", ValueError, "size-wraps"),
        _leak(b"A\x03<i8\x41" + b"\x00" * 65, ValueError, "over-64-dims"),
        _leak(b"A\x03,i8\x00", SyntaxError, "comma-dtype"),  # np.dtype parses comma lists
        # an empty shape whose other dimensions overflow numpy's index type
        _leak(b"A\x03<f2\x03" + b"\xff" * 8 + b"\x3f" + b"\xff" * 8 + b"\x3f\x00", ValueError, "empty-overflows"),
        _leak(b"A\x03<f4\x03\xfa\x03" + b"\xff" * 8 + b"\x2f\x00", ValueError, "empty-overflows-later"),
    ],
)
def test_malformed_fields_raise_serialization_error(raw):
    with pytest.raises(SerializationError, match="malformed message"):
        decode(raw)


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"L\x80\x80\x80\x80\x80\x80\x80\x80\x7fN", "list of"),  # 2^62 items promised, one given
        (b"M\x80\x80\x80\x80\x80\x80\x80\x80\x7fNN", "dict of"),
        (b"M\x02I\x01\x01NI\x01\x01N", "twice"),
        (b"I\x80\x80\x80\x80\x80\x80\x80\x80\x7f\x01", "truncated"),
        (b"B\xff\xff\xff\xff\x0f", "truncated"),
        (b"A\x03<i8\x01\xff\xff\xff\xff\x0f", "bytes left"),
    ],
)
def test_counts_and_lengths_beyond_the_message_are_refused_at_once(raw, words):
    with pytest.raises(SerializationError, match=words):
        decode(raw)


def test_empty_arrays_keep_dtype_and_shape():
    for arr in (np.zeros((0, 3), dtype=">i2"), np.zeros((5, 0, 2**40), dtype="u1")):
        back = decode(encode(arr))
        assert back.shape == arr.shape and back.dtype.str == arr.dtype.str and back.size == 0


def _int_keyed_dict(keys):
    out = bytearray(b"M")
    wire._uvarint(len(keys), out)
    for k in keys:
        out += encode(k) + b"N"
    return bytes(out)


def test_int_dict_keys_chosen_to_share_a_hash_are_refused():
    m = 2**61 - 1  # ints hash to themselves modulo m: these keys all hash to 0
    assert decode(_int_keyed_dict([i * m for i in range(8)])) == dict.fromkeys(i * m for i in range(8))
    flood = _int_keyed_dict([i * m for i in range(20_000)])
    with pytest.raises(SerializationError, match="equal hashes"):
        decode(flood)  # before: 2 s to build the dict, quadratic in the message length


def test_decode_refuses_what_is_not_bytes():
    with pytest.raises(PrivregTypeError, match="bytes"):
        decode("N")
    assert decode(memoryview(b"N")) is None and decode(bytearray(b"T")) is True


@SETTINGS
@given(st.sampled_from([b"S", b"A", b"M", b"L", b"X", b"I", b""]), st.binary(max_size=24))
def test_decoding_arbitrary_bytes_returns_a_value_or_raises_serialization_error(tag, rest):
    with contextlib.suppress(SerializationError):
        decode(tag + rest)


class Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset(),
        Opaque(),
        1 + 2j,
        np.array([1, "a"], dtype=object),
        np.array([1j]),
        np.array(["text"]),
        [1, {2: {3}}],
    ],
)
def test_unsupported_values_are_refused(value):
    with pytest.raises(SerializationError):
        encode(value)
    with pytest.raises(SerializationError):
        encoded_size(value)


@pytest.mark.parametrize("key", [(1, 2), True, None, 1.5, b"k", np.int64(1)])
def test_dict_keys_other_than_str_or_int_are_refused(key):
    with pytest.raises(SerializationError, match="keys"):
        encode({key: 1})


# --- registered types -------------------------------------------------------------------


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)

    __hash__ = None  # unhashable, as __eq__ alone makes it


class OtherPoint(Point):
    pass


@pytest.fixture
def restore_wire_types():
    ext, by_type = dict(wire._EXT), dict(wire._EXT_BY_TYPE)
    yield
    wire._EXT.clear(), wire._EXT.update(ext)
    wire._EXT_BY_TYPE.clear(), wire._EXT_BY_TYPE.update(by_type)


def test_registered_type_round_trips(restore_wire_types):
    with pytest.raises(SerializationError):
        encode(Point(1, 2))
    register_type("test.point", Point, lambda p: (p.x, p.y), lambda t: Point(*t))
    value = {"where": [Point(1, 2**100), Point(-0.5, "y")]}
    back = decode(encode(value))
    assert back == value
    assert encoded_size(Point(1, 2)) == len(encode(Point(1, 2)))
    assert b"test.point" in encode(Point(1, 2))


def test_reusing_a_tag_for_another_class_is_refused(restore_wire_types):
    register_type("test.point", Point, lambda p: [p.x, p.y], lambda t: Point(*t))
    with pytest.raises(SerializationError, match="Point"):
        register_type("test.point", OtherPoint, lambda p: [p.x, p.y], lambda t: OtherPoint(*t))
    assert decode(encode(Point(3, 4))) == Point(3, 4)
    with pytest.raises(SerializationError):
        encode(OtherPoint(3, 4))


@pytest.mark.parametrize("tag", ["", "x" * 256])
def test_bad_tags_are_refused(tag, restore_wire_types):
    with pytest.raises(PrivregTypeError, match="tag"):
        register_type(tag, Point, lambda p: None, lambda v: Point(0, 0))


def test_non_ascii_tag_is_refused_with_privreg_error(restore_wire_types):
    with pytest.raises(PrivregTypeError):
        register_type("pöint", Point, lambda p: None, lambda v: Point(0, 0))


def test_self_referencing_registered_type_is_refused(restore_wire_types):
    register_type("test.loop", Point, lambda p: p, lambda v: v)
    with pytest.raises(SerializationError, match="deep"):
        encode(Point(0, 0))


def _raise(exc):
    raise exc


@pytest.mark.parametrize(
    "from_wire, words, cause",
    [
        (lambda t: Point(*t), "rejected its value (TypeError)", TypeError),
        (lambda t: int(t[0]), "rejected its value (ValueError)", ValueError),
        (lambda t: _raise(PrivregTypeError("x must be a number")), "rejected its value: x must be a number", TypeError),
        (lambda t: _raise(SerializationError("bad layout")), "rejected its value: bad layout", SerializationError),
        (lambda t: 1 // 0, "rejected its value (ZeroDivisionError)", ZeroDivisionError),
        (lambda t: _raise(RuntimeError("oops")), "failed on its value with RuntimeError", RuntimeError),
    ],
)
def test_a_from_wire_failure_names_the_wire_type_and_not_the_data(restore_wire_types, from_wire, words, cause):
    register_type("test.point", Point, lambda p: (p.x, p.y, "secret"), from_wire)
    with pytest.raises(SerializationError, match=r"wire type 'test\.point'") as info:
        decode(encode(Point("data", 2)))
    assert words in str(info.value)
    assert isinstance(info.value.__cause__, cause)  # chained: the details are there for debugging
    assert "secret" not in str(info.value) and "data" not in str(info.value)


def test_a_from_wire_failure_inside_a_message_names_the_wire_type(restore_wire_types):
    register_type("test.point", Point, lambda p: [p.x, p.y], lambda t: Point(*t))
    raw = encode({"points": [Point(1, 2)]}).replace(b"L\x02I\x01\x01I\x01\x02", b"L\x01I\x01\x01")
    with pytest.raises(SerializationError, match=r"'test\.point' rejected its value"):
        decode(raw)


# --- encode_buffer (the transports' encoding, issue #33) ---------------------------------

_ODD_ARRAYS = {
    "0-d": np.array(7, dtype=np.int64),
    "0-d bool": np.array(True),
    "0-d big-endian": np.array(-3, dtype=">i2"),
    "bool": np.array([True, False, True]),
    "big-endian": np.arange(6, dtype=">u4").reshape(2, 3),
    "big-endian transposed": np.arange(6, dtype=">f8").reshape(2, 3).T,
    "non-contiguous": np.arange(20, dtype=np.int32)[::3],
    "negative strides": np.arange(5, dtype=np.int8)[::-1],
    "Fortran order": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
    "empty": np.zeros((0, 3), dtype=np.int32),
    "empty inner": np.zeros((3, 0), dtype=">i8"),
    "float16": np.array([1.5, -0.0, np.inf], dtype=np.float16),
    "read-only": np.frombuffer(b"abcdefgh", dtype=np.uint16),
}


@pytest.mark.parametrize("name", sorted(_ODD_ARRAYS))
def test_encode_buffer_writes_the_c_order_bytes_of_odd_arrays(name):
    """encode_buffer appends an array's memory as bytes (no tobytes copy): for every
    layout it writes exactly encode's bytes, the array's C-order bytes last, and decodes
    to the same dtype (byte order kept), shape and values."""
    x = _ODD_ARRAYS[name]
    buf = encode_buffer(x)
    assert isinstance(buf, bytearray) and bytes(buf) == encode(x)
    if x.size:
        assert bytes(buf[-x.nbytes :]) == x.tobytes(order="C")
    back = decode(buf)
    assert same(back, x.copy(order="C")) and back.flags.writeable and back.flags.c_contiguous


@pytest.mark.parametrize(
    "x",
    [
        np.zeros(2, dtype=[("a", "<i4")]),
        np.array([1, None], dtype=object),
        np.zeros(2, dtype="M8[s]"),
        np.zeros(2, dtype="V4"),
        np.array(["a"]),
    ],
)
def test_encode_buffer_refuses_arrays_that_are_not_numeric(x):
    with pytest.raises(SerializationError, match="only numeric numpy arrays"):
        encode_buffer(x)


def test_a_payload_buffer_is_fresh_and_never_kept_by_the_in_memory_transport(monkeypatch):
    """Each send encodes into a new bytearray; the transport decodes the receiver's copy
    (and the transcript's) at once, so overwriting the buffer after the send, or the sent
    array, changes neither: no payload aliases a buffer another send could reuse."""
    import asyncio

    from privreg.mpc import transport as tr

    assert encode_buffer([1]) is not encode_buffer([1])
    buffers = []

    def keep(value):
        buffers.append(wire.encode_buffer(value))
        return buffers[-1]

    monkeypatch.setattr(tr, "encode_buffer", keep)
    t = tr.InMemoryTransport(keep_payloads=True)
    t.open(["a", "b"])
    sent = np.arange(6, dtype=np.int64)

    async def run():
        await t.send(sender="a", receiver="b", step="s", payload={"x": sent})
        buffers[0][:] = bytes(len(buffers[0]))  # the sender's buffer overwritten
        sent[:] = -1
        return await t.recv(receiver="b", sender="a", step="s")

    got = asyncio.run(run())
    np.testing.assert_array_equal(got["x"], np.arange(6))
    np.testing.assert_array_equal(t.transcript.messages[0].payload["x"], np.arange(6))


def test_array_subclasses_encode_as_before_encode_buffer():
    """A subclass may redefine ``.data`` (a masked array's is its ndarray): encode_buffer
    used to append ``arr.data.cast("B")`` and failed with AttributeError. A subclass is
    encoded as ``tobytes`` writes it, as before (masked entries as their fill value, so
    a masked value is never sent)."""
    masked = np.ma.array([1, 2, 3], mask=[0, 1, 0], fill_value=-9)
    back = decode(encode_buffer(masked))
    assert type(back) is np.ndarray and back.tolist() == [1, -9, 3]
