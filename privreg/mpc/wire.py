"""A small, safe binary codec for protocol messages.

Messages between parties are encoded with this codec so that transcripts record real
sizes and so that a party never receives a live object of another party. Unlike pickle,
decoding runs no code: it only rebuilds None, bools, ints of any size, floats, str,
bytes, lists, tuples, str/int-keyed dicts and numeric numpy arrays. Plugins add types
(ciphertexts, say) with :func:`register_type`, mapping them to and from encodable values.

Decoding cost under hostile input: a peer chooses the bytes, so :func:`decode` caps the
work one message can cause, whatever its length:

- values: at most :data:`MAX_NODES` (1,000,000) per message; every value counts one (a
  None, an int of any size, a str, a bytes, a whole numpy array, a list, a registered
  type's record and the value inside it), and a list or dict is refused as soon as its
  announced length would pass the cap. The protocols of the tree send at most a few
  hundred values per message in the test suite (arrays and ciphertext blobs carry the
  bulk; a list of ints, such as comparison result shares, has one value per item): the
  cap is for hostile input.
- registered types: at most ``max_per_message`` values of each type per message (see
  :func:`register_type`; a Paillier public key, whose checks take a modular
  exponentiation, at most 4).
- nesting: at most 64 levels; lengths and counts beyond the bytes left are refused
  before anything is allocated for them.

Measured worst case (CPython 3.11, one core of the 2-core reference machine, every
dense structure benchmarked): small containers are the costliest per byte, about 0.35
us per byte (a list of one-item lists or one-entry dicts: 0.35 s for 1 MiB; 0.5-0.55 s
for the 1.4-1.9 MiB of empty or one-item lists and dicts that reach the value cap);
lists of None, small ints or short str about 0.15-0.2 us per byte; Paillier ciphertext
records under a known key about 0.1 us per byte. A message over a cap is refused in
microseconds, before the values over it are built. Registered types add the cost of
their ``from_wire``: four 8192-bit keys take about 0.35-1.2 s (0.1-0.3 s each, by
machine), a key already checked microseconds. So any one message decodes or is refused
within about 2 s of CPU on that machine, and the objects it builds take at most about
72 bytes per value (70 MiB at the value cap, measured with tracemalloc) besides arrays,
ints, str and bytes (about their own size).
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from privreg.core.errors import PrivregError, PrivregTypeError, SerializationError

__all__ = ["MAX_NODES", "MAX_PER_MESSAGE", "decode", "encode", "encode_buffer", "encoded_size", "register_type"]


class _Ext(NamedTuple):
    cls: type
    to_wire: Callable[[Any], Any]
    from_wire: Callable[[Any], Any]
    max_per_message: int


_EXT: dict[bytes, _Ext] = {}
_EXT_BY_TYPE: dict[type, bytes] = {}
_MAX_DEPTH = 64
_TOO_DEEP = f"malformed message: nests too deeply (more than {_MAX_DEPTH} levels)"
_MAX_NDIM = 32
_MAX_INTP = 2**63 - 1  # numpy's largest array size in bytes (64-bit platforms)
_MAX_SHARED_HASH = 8
_DOUBLE = struct.Struct(">d")
# array dtypes as encode() writes them: byte order, kind, item size ("<i8", "|b1", ">f4")
_DTYPE_FORM = re.compile(rb"[<>|=]?[biuf][0-9]{1,2}")

#: Default cap on the values decoded from one message (:func:`decode`'s ``max_nodes``).
MAX_NODES = 1_000_000
#: Default cap on the values of one registered type in one message (``max_per_message``).
MAX_PER_MESSAGE = MAX_NODES


def register_type(
    tag: str,
    cls: type,
    to_wire: Callable[[Any], Any],
    from_wire: Callable[[Any], Any],
    *,
    max_per_message: int = MAX_PER_MESSAGE,
) -> None:
    """Teach the codec a type: ``to_wire(obj)`` returns an encodable value and
    ``from_wire(value)`` rebuilds the object. ``tag`` is a short unique ASCII name.

    ``from_wire`` gets whatever a peer sent: it should check the value and raise a
    privreg error (SerializationError) whose message names the problem but not the data.
    :func:`decode` turns any error it raises into SerializationError naming ``tag``
    (quoting the message of privreg errors only) and chained from the original.

    ``max_per_message``: :func:`decode` refuses a message with more values of this type
    (before rebuilding the one over the cap). Give a small cap to a type whose
    ``from_wire`` is expensive (a key whose checks take a modular exponentiation), so
    that one message cannot make a receiver spend more than the cap times that cost.
    """
    if not isinstance(tag, str) or not tag.isascii() or not 1 <= len(tag) <= 255:
        raise PrivregTypeError(f"tag must be 1-255 ASCII characters; got {tag!r}")
    if isinstance(max_per_message, bool) or not isinstance(max_per_message, int) or max_per_message < 1:
        raise PrivregTypeError(f"max_per_message must be a positive int; got {max_per_message!r}")
    key = tag.encode("ascii")
    if key in _EXT and _EXT[key].cls is not cls:
        raise SerializationError(f"wire tag {tag!r} is already used by {_EXT[key].cls.__name__}")
    if cls in _EXT_BY_TYPE and _EXT_BY_TYPE[cls] != key:
        raise SerializationError(f"{cls.__name__} is already registered under tag {_EXT_BY_TYPE[cls].decode()!r}")
    _EXT[key] = _Ext(cls, to_wire, from_wire, max_per_message)
    _EXT_BY_TYPE[cls] = key


def _uvarint(n: int, out: bytearray) -> None:
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _int_bytes(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 8) // 8 or 1, "big", signed=True)


def _enc(x: Any, out: bytearray, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise SerializationError("value nests too deeply to encode")
    ext = _EXT_BY_TYPE.get(type(x))
    if ext is not None:
        out += b"X"
        out.append(len(ext))
        out += ext
        _enc(_EXT[ext].to_wire(x), out, depth + 1)
    elif x is None:
        out += b"N"
    elif isinstance(x, (bool, np.bool_)):
        out += b"T" if x else b"F"
    elif isinstance(x, (int, np.integer)):
        raw = _int_bytes(int(x))
        out += b"I"
        _uvarint(len(raw), out)
        out += raw
    elif isinstance(x, (float, np.floating)):
        out += b"D" + struct.pack(">d", float(x))
    elif isinstance(x, str):
        raw = x.encode("utf-8")
        out += b"S"
        _uvarint(len(raw), out)
        out += raw
    elif isinstance(x, (bytes, bytearray)):
        out += b"B"
        _uvarint(len(x), out)
        out += bytes(x)
    elif isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise SerializationError(f"only numeric numpy arrays can be sent; got dtype {x.dtype}")
        arr = np.require(x, requirements="C")  # keeps 0-d arrays 0-d
        dt = arr.dtype.str.encode("ascii")
        out += b"A"
        out.append(len(dt))
        out += dt
        _uvarint(arr.ndim, out)
        for s in arr.shape:
            _uvarint(s, out)
        if type(arr) is not np.ndarray:  # a subclass may redefine .data (a masked array's): its tobytes
            out += arr.tobytes()
        elif arr.size:
            out += arr.data.cast("B")  # no temporary bytes copy of a large array
    elif isinstance(x, (list, tuple)):
        out += b"L" if isinstance(x, list) else b"U"
        _uvarint(len(x), out)
        for item in x:
            _enc(item, out, depth + 1)
    elif isinstance(x, dict):
        out += b"M"
        _uvarint(len(x), out)
        for k, val in x.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise SerializationError(f"dict keys must be str or int to be sent; got {k!r}")
            _enc(k, out, depth + 1)
            _enc(val, out, depth + 1)
    else:
        raise SerializationError(f"cannot send a {type(x).__name__}; register it with privreg.mpc.wire.register_type")


def encode(value: Any) -> bytes:
    """Encode ``value`` to bytes (raises SerializationError for unsupported types)."""
    return bytes(encode_buffer(value))


def encode_buffer(value: Any) -> bytearray:
    """:func:`encode` without its final copy, for the transports: a large message (the
    relay's groups, gigabytes at scale) is then held once encoded, not twice."""
    out = bytearray()
    _enc(value, out, 0)
    return out


def encoded_size(value: Any) -> int:
    """Bytes that ``value`` occupies on the wire."""
    return len(encode(value))


class _Decoder:
    """One decoding: the input, the position, and the work done so far (values built,
    registered types rebuilt) against the per-message caps."""

    __slots__ = ("data", "end", "max_nodes", "nodes", "per_type", "pos", "registered")

    def __init__(self, data: Any, max_nodes: int, registered: bool) -> None:
        self.data = memoryview(data).cast("B")  # TypeError if not bytes-like
        self.pos = 0
        self.end = len(self.data)
        self.nodes = 0
        self.max_nodes = max_nodes
        self.registered = registered
        self.per_type: dict[bytes, int] = {}

    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> memoryview:
        pos = self.pos
        if n > self.end - pos:
            raise SerializationError("malformed message: truncated")
        self.pos = pos + n
        return self.data[pos : pos + n]

    def byte(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise SerializationError("malformed message: truncated")
        self.pos = pos + 1
        return self.data[pos]

    def uvarint(self) -> int:
        b = self.byte()
        if b < 0x80:
            return b
        result, shift = b & 0x7F, 7
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift >= 63:
                raise SerializationError("malformed message: length field too long (more than 63 bits)")

    def count(self, n: int) -> None:
        """Account for ``n`` more values before building them."""
        self.nodes += n
        if self.nodes > self.max_nodes:
            raise SerializationError(
                f"malformed message: more than {self.max_nodes} values in one message (the decoder's max_nodes)"
            )


def _short(raw: bytes, limit: int) -> str:
    """A field of the format (a dtype, a type tag) for an error message: shown when it
    is short printable ASCII, as the sender wrote it; else not (it may be data)."""
    if len(raw) <= limit and raw.isascii() and raw.decode("ascii").isprintable():
        return repr(raw.decode("ascii"))
    return f"({len(raw)} bytes, not shown)"


def _dec_array(r: _Decoder) -> np.ndarray:
    raw_dtype = r.take(r.byte()).tobytes()
    # only the forms encode() writes (byte order, kind, size): np.dtype parses much more
    # (comma lists, shapes, field names) and fails on it with SyntaxError and others
    if not _DTYPE_FORM.fullmatch(raw_dtype):
        raise SerializationError(f"malformed message: invalid array dtype {_short(raw_dtype, 8)}")
    try:
        dt = np.dtype(raw_dtype.decode("ascii"))
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"malformed message: invalid array dtype {_short(raw_dtype, 8)}") from exc
    if dt.kind not in "biuf" or dt.itemsize < 1:
        raise SerializationError(f"malformed message: refusing array of dtype {dt}")
    ndim = r.uvarint()
    if ndim > _MAX_NDIM:
        raise SerializationError(f"malformed message: array has {ndim} dimensions; at most {_MAX_NDIM} are allowed")
    shape = tuple(r.uvarint() for _ in range(ndim))
    count = math.prod(shape)  # Python ints: no silent int64 wrap-around
    if count == 0:
        # numpy refuses an empty shape whose other dimensions overflow its index type
        if math.prod(d for d in shape if d) * dt.itemsize > _MAX_INTP:
            raise SerializationError(f"malformed message: empty array of {ndim} dimensions too large for numpy")
        return np.empty(shape, dtype=dt)
    if count > r.left() // dt.itemsize:
        raise SerializationError(
            f"malformed message: array of {ndim} dimensions needs more than the {r.left()} bytes left in the message"
        )
    return np.frombuffer(r.take(count * dt.itemsize), dtype=dt).reshape(shape).copy()


def _dec_dict(r: _Decoder, depth: int) -> dict[Any, Any]:
    n = r.uvarint()
    if not n:
        return {}
    if depth >= _MAX_DEPTH:
        raise SerializationError(_TOO_DEEP)
    if n > r.left() // 2:  # a key and a value take a byte each at least
        raise SerializationError(f"malformed message: a dict of {n} entries in {r.left()} bytes")
    r.count(2 * n)
    out: dict[Any, Any] = {}
    # ints hash to themselves modulo 2^61 - 1: keys chosen to share a hash would make
    # building the dict quadratic, so a hash may be shared by a few keys only
    int_hashes: dict[int, int] = {}
    for _ in range(n):
        k = _dec(r, depth + 1)
        if not isinstance(k, (str, int)) or isinstance(k, bool):
            raise SerializationError(f"malformed message: dict keys must be str or int; got {type(k).__name__}")
        if isinstance(k, int):
            h = hash(k)
            int_hashes[h] = int_hashes.get(h, 0) + 1
            if int_hashes[h] > _MAX_SHARED_HASH:
                raise SerializationError(
                    f"malformed message: more than {_MAX_SHARED_HASH} int dict keys with equal hashes"
                )
        if k in out:
            raise SerializationError("malformed message: a dict key appears twice")
        out[k] = _dec(r, depth + 1)
    return out


def _dec_ext(r: _Decoder, depth: int) -> Any:
    name = r.take(r.byte()).tobytes()
    if not r.registered:
        raise SerializationError("malformed message: registered wire types are not allowed here")
    ext = _EXT.get(name)
    if ext is None:
        raise SerializationError(f"malformed message: unknown wire type {_short(name, 64)}")
    tag = name.decode("ascii")
    seen = r.per_type.get(name, 0) + 1
    if seen > ext.max_per_message:
        raise SerializationError(
            f"malformed message: more than {ext.max_per_message} values of wire type {tag!r} in one message "
            f"(its max_per_message)"
        )
    r.per_type[name] = seen
    r.count(1)
    value = _dec(r, depth + 1)
    try:
        return ext.from_wire(value)
    except PrivregError as exc:  # privreg's messages name no data
        raise SerializationError(f"wire type {tag!r} rejected its value: {exc}") from exc
    except (ValueError, TypeError, ArithmeticError, LookupError) as exc:  # others' messages may quote the value
        raise SerializationError(f"wire type {tag!r} rejected its value ({type(exc).__name__})") from exc
    except Exception as exc:
        raise SerializationError(
            f"wire type {tag!r} failed on its value with {type(exc).__name__} (a bug in its from_wire?)"
        ) from exc


def _dec(r: _Decoder, depth: int) -> Any:
    """One value; the caller has counted it (:meth:`_Decoder.count`)."""
    tag = r.byte()
    if tag == 0x4E:  # N
        return None
    if tag == 0x49:  # I
        return int.from_bytes(r.take(r.uvarint()), "big", signed=True)
    if tag == 0x4C or tag == 0x55:  # L, U
        n = r.uvarint()
        if not n:
            return [] if tag == 0x4C else ()
        if depth >= _MAX_DEPTH:
            raise SerializationError(_TOO_DEEP)
        if n > r.left():  # an item takes a byte at least
            raise SerializationError(f"malformed message: a list of {n} items in {r.left()} bytes")
        r.count(n)
        items = []
        for _ in range(n):
            items.append(_dec(r, depth + 1))
        return items if tag == 0x4C else tuple(items)
    if tag == 0x54:  # T
        return True
    if tag == 0x46:  # F
        return False
    if tag == 0x44:  # D
        return _DOUBLE.unpack(r.take(8))[0]
    if tag == 0x53:  # S
        try:
            return str(r.take(r.uvarint()), "utf-8")
        except UnicodeDecodeError as exc:
            raise SerializationError("malformed message: string is not valid UTF-8") from exc
    if tag == 0x42:  # B
        return r.take(r.uvarint()).tobytes()
    if tag == 0x41:  # A
        return _dec_array(r)
    if tag == 0x4D:  # M
        return _dec_dict(r, depth)
    if tag == 0x58:  # X
        if depth >= _MAX_DEPTH:
            raise SerializationError(_TOO_DEEP)
        return _dec_ext(r, depth)
    raise SerializationError(f"malformed message: unknown tag {bytes([tag])!r} at byte {r.pos - 1}")


def decode(data: bytes | bytearray, *, max_nodes: int | None = None, registered_types: bool = True) -> Any:
    """Inverse of :func:`encode`. Malformed input of any kind raises SerializationError
    (nothing else), naming the cause; ``data`` that is not bytes-like raises PrivregTypeError.

    Per-message caps (module docstring): at most ``max_nodes`` values (default
    :data:`MAX_NODES`), and at most ``max_per_message`` values of each registered type;
    a message over a cap is refused with SerializationError naming the cap.
    ``registered_types=False`` refuses every registered type (for transport frame
    headers, which never carry one and must stay cheap to decode).

    Cost: time and memory linear in ``len(data)`` and in the values built (module
    docstring: about 0.35 us per byte at worst, at most :data:`MAX_NODES` values), plus
    what the ``from_wire`` functions of registered types spend on their values.
    """
    limit = MAX_NODES if max_nodes is None else max_nodes
    try:
        r = _Decoder(data, limit, registered_types)
    except (TypeError, ValueError):
        raise PrivregTypeError(f"data must be bytes; got {type(data).__name__}") from None
    try:
        r.count(1)
        value = _dec(r, 0)
    except SerializationError:
        raise
    except Exception as exc:  # a safety net; KeyboardInterrupt and the like pass
        raise SerializationError(f"malformed message: decoding raised {type(exc).__name__}") from exc
    if r.left():
        raise SerializationError(f"malformed message: {r.left()} trailing bytes after the message")
    return value
