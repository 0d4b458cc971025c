"""The decoder's contract under hostile input: ``decode`` returns a value or raises
SerializationError, whatever the bytes, and its cost is bounded by their length.

The mutation fuzzer is deterministic (a fixed seed, a fixed corpus) and asserts no
statistical property: its false-alarm rate is zero, and a failure replays exactly. The
hypothesis tests draw their examples as the profile says (derandomized under CI); a
failure there is a real counterexample too. The memory test measures with tracemalloc,
which counts allocations (deterministic), not timings.
"""

from __future__ import annotations

import collections
import contextlib
import tracemalloc

import numpy as np
import pytest
from crypto_keys import cached_keypair
from hypothesis import given, settings
from hypothesis import strategies as st

from privreg.core.errors import SerializationError
from privreg.crypto import FixedPoint, encrypt, pack
from privreg.mpc.wire import decode, encode

# the tag letters of the codec, and bytes that make varints long or lengths extreme
_TAGS = b"NTFIDSBALUMX"
_INTERESTING = bytes([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, 0x41, 0x20]) + _TAGS


class _Ext:
    """A registered type's wire form inside a value tree (encoded as the codec does)."""

    def __init__(self, tag: str, inner: object) -> None:
        self.tag, self.inner = tag, inner


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _encode_tree(x: object) -> bytes:
    """``encode``, except that ``_Ext`` nodes become registered-type records, whatever their content."""
    if isinstance(x, _Ext):
        tag = x.tag.encode("ascii")
        return b"X" + bytes([len(tag)]) + tag + _encode_tree(x.inner)
    if isinstance(x, (list, tuple)):
        return (b"L" if isinstance(x, list) else b"U") + _uvarint(len(x)) + b"".join(_encode_tree(i) for i in x)
    if isinstance(x, dict):
        return b"M" + _uvarint(len(x)) + b"".join(encode(k) + _encode_tree(v) for k, v in x.items())
    return encode(x)


def _trees(kp) -> list[object]:
    """Value trees of every kind of value the codec and the Paillier layer send (under
    ``kp``, a small seeded test key: insecure, tests only)."""
    from privreg.crypto import keys, packing, vector

    pk = kp.public_key
    enc = encrypt(pk, [3, -5, 0, 7], bound=8)
    real = encrypt(pk, [1.5, -0.25], bound=2, codec=FixedPoint(scale=2**8))
    packed = pack(enc).rerandomize()
    key_t = _Ext("privreg.paillier.PublicKey", keys._public_to_wire(pk))
    enc_t = _Ext("privreg.paillier.EncryptedVector", vector._to_wire(enc))
    real_t = _Ext("privreg.paillier.EncryptedVector", vector._to_wire(real))
    packed_t = _Ext("privreg.paillier.PackedCiphertexts", packing._to_wire(packed))
    return [
        None,
        True,
        [0, -1, 127, 128, -129, 2**63, -(2**64), 2**521 - 1, -(2**4000)],
        [1.5, float("nan"), -0.0, float("inf")],
        ["", "héllo \U0001f600", "x" * 300],
        [b"", bytes(range(256))],
        np.arange(6, dtype="<i8").reshape(2, 3),
        np.linspace(0, 1, 24, dtype=">f4").reshape(2, 3, 4),
        np.array([True, False, True]),
        np.zeros((0, 3), dtype="u1"),
        np.array(2.5),
        np.arange(5, dtype="<f2"),
        np.arange(4, dtype=">u2"),
        {"a": [1, (2.5, None), {"b": b"x", 3: [True]}], 7: ((), [])},
        [[[[[[["deep"]]]]]]],
        key_t,
        enc_t,
        real_t,
        packed_t,
        {"key": key_t, "vec": enc_t, "packed": packed_t},
    ]


def _corpus(kp) -> list[bytes]:
    """Valid encodings of the trees."""
    return [_encode_tree(t) for t in _trees(kp)]


# replacements for one node of a tree: extreme ints, other types, odd sizes
_SWAPS: list[object] = [
    *(0, 1, -1, 2, 3, 255, 2**31, 2**62, 2**63 - 1, 2**64, -(2**70), 2**4096 + 1, -(2**20_000)),
    *(None, True, 0.5, float("nan"), "", "x", "x" * 5000, b"", b"\x00" * 7, b"\xff" * 300),
    *([], (), {}, [0] * 20, (1, 2), {"n": 1}, np.zeros(0), np.zeros((0, 2**40), dtype="u1"), np.arange(3)),
]


def _nodes(x: object) -> int:
    if isinstance(x, _Ext):
        return 1 + _nodes(x.inner)
    if isinstance(x, (list, tuple)):
        return 1 + sum(_nodes(i) for i in x)
    if isinstance(x, dict):
        return 1 + sum(_nodes(i) for i in x.values())
    return 1


def _swap(x: object, i: int, new: object) -> tuple[object, int]:
    """``x`` with its preorder node ``i`` replaced by ``new``; and ``i`` less the nodes passed."""
    if i == 0:
        return new, -1
    i -= 1
    if isinstance(x, _Ext):
        inner, i = _swap(x.inner, i, new)
        return _Ext(x.tag, inner), i
    if isinstance(x, (list, tuple, dict)):
        items = list(x.items()) if isinstance(x, dict) else list(enumerate(x))
        out = []
        for k, item in items:
            kept = item
            if i >= 0:
                kept, i = _swap(item, i, new)
            out.append((k, kept))
        return (dict(out) if isinstance(x, dict) else type(x)(v for _, v in out)), i
    return x, i


def _mutate_tree(tree: object, rng: np.random.Generator) -> bytes:
    """The encoding of ``tree`` with one or two nodes swapped for extreme or ill-typed values."""
    for _ in range(int(rng.integers(1, 3))):
        new = _SWAPS[int(rng.integers(len(_SWAPS)))]
        tree = _swap(tree, int(rng.integers(_nodes(tree))), new)[0]
    return _encode_tree(tree)


def _mutate(data: bytes, corpus: list[bytes], rng: np.random.Generator) -> bytes:
    """``data`` after 1-3 random edits: bit flips, byte sets, insertions, deletions,
    truncations, splices with another encoding, chunk copies and long varints."""
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        op = int(rng.integers(8))
        pos = int(rng.integers(len(buf) + 1))
        if op == 0 and buf:  # flip 1-4 bits
            for _ in range(int(rng.integers(1, 5))):
                i = int(rng.integers(len(buf)))
                buf[i] ^= 1 << int(rng.integers(8))
        elif op == 1 and buf:  # set a byte to an interesting or random value
            i = int(rng.integers(len(buf)))
            pick = _INTERESTING[int(rng.integers(len(_INTERESTING)))]
            buf[i] = pick if rng.random() < 0.5 else int(rng.integers(256))
        elif op == 2:  # insert 1-8 bytes
            buf[pos:pos] = bytes(rng.integers(256, size=int(rng.integers(1, 9)), dtype=np.uint8))
        elif op == 3:  # delete 1-8 bytes
            del buf[pos : pos + int(rng.integers(1, 9))]
        elif op == 4:  # truncate
            del buf[pos:]
        elif op == 5:  # splice: our prefix, another encoding's suffix
            other = corpus[int(rng.integers(len(corpus)))]
            buf = buf[:pos] + other[int(rng.integers(len(other) + 1)) :]
        elif op == 6 and buf:  # copy a chunk elsewhere
            a = int(rng.integers(len(buf)))
            chunk = buf[a : a + int(rng.integers(1, 33))]
            buf[pos:pos] = chunk
        elif op == 7:  # a long varint (a huge length, count or dimension) at pos
            k = int(rng.integers(1, 10))
            buf[pos : pos + int(rng.integers(0, 3))] = b"\xff" * (k - 1) + bytes([int(rng.integers(1, 128))])
    return bytes(buf)


# SerializationErrors that mean a check is missing: the safety net of decode() caught a
# stray exception, or a registered type's from_wire raised something not privreg's own
_NETTED = ("decoding raised", "rejected its value (", "failed on its value")


def fuzz_decode(n_mutations: int, *, seed: int = 12345) -> dict[str, collections.Counter[str]]:
    """Decode ``n_mutations`` mutated encodings. Returns counts, by exception type, of what
    escaped decode ("leaked": anything but SerializationError) and of what its safety nets
    caught ("netted"), and the number of mutations that decoded or were refused ("outcome")."""
    kp = cached_keypair(256, 7)
    trees = _trees(kp)
    corpus = [_encode_tree(t) for t in trees]
    rng = np.random.default_rng(seed)
    found: dict[str, collections.Counter[str]] = {k: collections.Counter() for k in ("leaked", "netted", "outcome")}
    for _ in range(n_mutations):
        pick = int(rng.integers(len(corpus)))
        if rng.random() < 0.25:  # a well-formed message with ill-chosen values
            data = _mutate_tree(trees[pick], rng)
        else:
            data = _mutate(corpus[pick], corpus, rng)
        try:
            decode(data)
            found["outcome"]["decoded"] += 1
        except SerializationError as exc:
            found["outcome"]["refused"] += 1
            if any(words in str(exc) for words in _NETTED):
                found["netted"][type(exc.__cause__).__name__] += 1
        except Exception as exc:  # noqa: BLE001 -- counting what escapes is the point
            found["leaked"][type(exc).__name__] += 1
    return found


def test_the_corpus_decodes():
    kp = cached_keypair(256, 7)
    for data in _corpus(kp):
        decode(data)
    # the trees encode as the codec encodes the values they stand for
    pk = kp.public_key
    assert _encode_tree(_trees(kp)[-1]).count(encode(pk)) == 1
    assert all(_encode_tree(t) == encode(t) for t in _trees(kp)[:15])


def _check(found: dict[str, collections.Counter[str]]) -> None:
    assert not found["leaked"], f"exceptions other than SerializationError escaped decode: {dict(found['leaked'])}"
    assert not found["netted"], f"stray exceptions reached the safety nets: {dict(found['netted'])}"
    # some mutations still decode: the fuzzer reaches past the first checks
    assert found["outcome"]["decoded"] > 0 and found["outcome"]["refused"] > 0


def test_mutated_encodings_raise_only_serialization_error():
    # 100,000 mutations, about 5 s. Before the fix 45 escaped decode (24 SyntaxError and
    # 16 ValueError from np.dtype and reshape, 5 OverflowError from a packed layout)
    _check(fuzz_decode(100_000))


def _list_of(n: int, item: bytes) -> bytes:
    return b"L" + _uvarint(n) + item * n


@pytest.mark.parametrize(
    "data",
    [
        _list_of(20_000, b"N"),
        _list_of(20_000, b"L\x00"),  # the most memory per byte: an empty list for 2 bytes
        _list_of(20_000, b"M\x00"),
        _list_of(20_000, encode(1.5)),
        _list_of(20_000, encode(np.zeros(0, dtype="u1"))),
        _list_of(20_000, encode(np.array(1, dtype="u1"))),
        _list_of(2_000, encode(np.empty((2**59, 0)))),  # empty, whatever its shape says
        b"M" + _uvarint(20_000) + b"".join(encode(i) + b"N" for i in range(20_000)),
        encode("x" * 100_000),
        encode(np.zeros(100_000)),
        encode(2**800_000),
        b"L" + _uvarint(2**40) + b"N" * 1000,  # refused at once: the count exceeds the bytes
        b"A\x03<f8\x01" + _uvarint(2**62) + b"\x00" * 64,
    ],
    ids=[
        "nones",
        "empty-lists",
        "empty-dicts",
        "floats",
        "empty-arrays",
        "0d-arrays",
        "huge-empty-arrays",
        "int-keyed-dict",
        "str",
        "array",
        "int",
        "count-beyond-message",
        "dimension-beyond-message",
    ],
)
def test_decoding_memory_is_bounded_by_the_message_length(data):
    """Peak memory (deterministic, by tracemalloc) at most 48 times the message, plus 64 KiB."""
    tracemalloc.start()
    try:
        with contextlib.suppress(SerializationError):
            decode(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 48 * len(data) + 65_536


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_serialization_error(data):
    with contextlib.suppress(SerializationError):
        decode(data)


# bytes that look like messages: tags, long varints and short chunks, in any order
_pieces = st.one_of(
    st.sampled_from([bytes([t]) for t in _TAGS]),
    st.sampled_from([b"\x03<i8", b"\x03>f4", b"\x03|b1", b"\x02|O", b"\x05(2,)i", b"\xff" * 9 + b"\x7f", b"\x00"]),
    st.binary(max_size=6),
)


@settings(max_examples=500)
@given(st.lists(_pieces, max_size=12).map(b"".join))
def test_message_like_bytes_decode_or_raise_serialization_error(data):
    with contextlib.suppress(SerializationError):
        decode(data)


@pytest.mark.parametrize("kind", ["vector", "packed"])
def test_a_received_fixed_point_power_beyond_the_key_is_refused(kind):
    """A peer must not make the receiver compute scale ** power for an absurd power."""
    from privreg.crypto import packing, vector

    kp = cached_keypair(256)
    real = encrypt(kp.public_key, [1.5, -0.25], bound=2, codec=FixedPoint(scale=2**8))
    if kind == "vector":
        t = list(vector._to_wire(real))
        t[2] = 2**40  # power
        tag = "privreg.paillier.EncryptedVector"
    else:
        t = list(packing._to_wire(pack(real).rerandomize()))
        t[8] = 2**40
        tag = "privreg.paillier.PackedCiphertexts"
    data = encode(kp.public_key) + b""  # the key must be known to the receiver
    assert decode(data) == kp.public_key
    with pytest.raises(SerializationError, match="rejected its value"):
        decode(_encode_tree(_Ext(tag, tuple(t))))
    t[8 if kind == "packed" else 2] = 1
    decode(_encode_tree(_Ext(tag, tuple(t))))  # the genuine power still decodes
