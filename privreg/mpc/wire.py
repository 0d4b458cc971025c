"""A small, safe binary codec for protocol messages.

Messages between parties are encoded with this codec so that transcripts record real
sizes and so that a party never receives a live object of another party. Unlike pickle,
decoding runs no code: it only rebuilds None, bools, ints of any size, floats, str,
bytes, lists, tuples, str/int-keyed dicts and numeric numpy arrays. Plugins add types
(ciphertexts, say) with :func:`register_type`, mapping them to and from encodable values.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from privreg.core.errors import PrivregError, PrivregTypeError, SerializationError

__all__ = ["encode", "decode", "encoded_size", "register_type"]

_EXT: dict[bytes, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {}
_EXT_BY_TYPE: dict[type, bytes] = {}
_MAX_DEPTH = 64
_MAX_NDIM = 32
_MAX_INTP = 2**63 - 1  # numpy's largest array size in bytes (64-bit platforms)
_MAX_SHARED_HASH = 8
# array dtypes as encode() writes them: byte order, kind, item size ("<i8", "|b1", ">f4")
_DTYPE_FORM = re.compile(rb"[<>|=]?[biuf][0-9]{1,2}")


def register_type(tag: str, cls: type, to_wire: Callable[[Any], Any], from_wire: Callable[[Any], Any]) -> None:
    """Teach the codec a type: ``to_wire(obj)`` returns an encodable value and
    ``from_wire(value)`` rebuilds the object. ``tag`` is a short unique ASCII name.

    ``from_wire`` gets whatever a peer sent: it should check the value and raise a
    privreg error (SerializationError) whose message names the problem but not the data.
    :func:`decode` turns any error it raises into SerializationError naming ``tag``
    (quoting the message of privreg errors only) and chained from the original.
    """
    if not isinstance(tag, str) or not tag.isascii() or not 1 <= len(tag) <= 255:
        raise PrivregTypeError(f"tag must be 1-255 ASCII characters; got {tag!r}")
    key = tag.encode("ascii")
    if key in _EXT and _EXT[key][0] is not cls:
        raise SerializationError(f"wire tag {tag!r} is already used by {_EXT[key][0].__name__}")
    if cls in _EXT_BY_TYPE and _EXT_BY_TYPE[cls] != key:
        raise SerializationError(f"{cls.__name__} is already registered under tag {_EXT_BY_TYPE[cls].decode()!r}")
    _EXT[key] = (cls, to_wire, from_wire)
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
        _enc(_EXT[ext][1](x), out, depth + 1)
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
        out += arr.tobytes()
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
    out = bytearray()
    _enc(value, out, 0)
    return bytes(out)


def encoded_size(value: Any) -> int:
    """Bytes that ``value`` occupies on the wire."""
    return len(encode(value))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n > self.left():
            raise SerializationError("malformed message: truncated")
        chunk = self.data[self.pos : self.pos + n].tobytes()
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift >= 63:
                raise SerializationError("malformed message: length field too long (more than 63 bits)")


def _short(raw: bytes, limit: int) -> str:
    """A field of the format (a dtype, a type tag) for an error message: shown when it
    is short printable ASCII, as the sender wrote it; else not (it may be data)."""
    if len(raw) <= limit and raw.isascii() and raw.decode("ascii").isprintable():
        return repr(raw.decode("ascii"))
    return f"({len(raw)} bytes, not shown)"


def _dec_array(r: _Reader) -> np.ndarray:
    raw_dtype = r.take(r.take(1)[0])
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


def _dec_dict(r: _Reader, depth: int) -> dict[Any, Any]:
    n = r.uvarint()
    if n > r.left() // 2:  # a key and a value take a byte each at least
        raise SerializationError(f"malformed message: a dict of {n} entries in {r.left()} bytes")
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


def _dec_ext(r: _Reader, depth: int) -> Any:
    name = r.take(r.take(1)[0])
    if name not in _EXT:
        raise SerializationError(f"malformed message: unknown wire type {_short(name, 64)}")
    from_wire = _EXT[name][2]
    value = _dec(r, depth + 1)
    tag = name.decode("ascii")
    try:
        return from_wire(value)
    except PrivregError as exc:  # privreg's messages name no data
        raise SerializationError(f"wire type {tag!r} rejected its value: {exc}") from exc
    except (ValueError, TypeError, ArithmeticError, LookupError) as exc:  # others' messages may quote the value
        raise SerializationError(f"wire type {tag!r} rejected its value ({type(exc).__name__})") from exc
    except Exception as exc:
        raise SerializationError(
            f"wire type {tag!r} failed on its value with {type(exc).__name__} (a bug in its from_wire?)"
        ) from exc


def _dec(r: _Reader, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SerializationError(f"malformed message: nests too deeply (more than {_MAX_DEPTH} levels)")
    tag = r.take(1)
    if tag == b"N":
        return None
    if tag == b"T":
        return True
    if tag == b"F":
        return False
    if tag == b"I":
        return int.from_bytes(r.take(r.uvarint()), "big", signed=True)
    if tag == b"D":
        return struct.unpack(">d", r.take(8))[0]
    if tag == b"S":
        try:
            return r.take(r.uvarint()).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerializationError("malformed message: string is not valid UTF-8") from exc
    if tag == b"B":
        return r.take(r.uvarint())
    if tag == b"A":
        return _dec_array(r)
    if tag in (b"L", b"U"):
        n = r.uvarint()
        if n > r.left():  # an item takes a byte at least
            raise SerializationError(f"malformed message: a list of {n} items in {r.left()} bytes")
        items = [_dec(r, depth + 1) for _ in range(n)]
        return items if tag == b"L" else tuple(items)
    if tag == b"M":
        return _dec_dict(r, depth)
    if tag == b"X":
        return _dec_ext(r, depth)
    raise SerializationError(f"malformed message: unknown tag {tag!r} at byte {r.pos - 1}")


def decode(data: bytes) -> Any:
    """Inverse of :func:`encode`. Malformed input of any kind raises SerializationError
    (nothing else), naming the cause; ``data`` that is not bytes-like raises PrivregTypeError.

    Cost: time and memory linear in ``len(data)`` (objects built are at most a few dozen
    times the bytes they come from; arrays, ints, str and bytes about their own size),
    plus what the ``from_wire`` functions of registered types spend on their values.
    """
    try:
        r = _Reader(data)
    except TypeError:
        raise PrivregTypeError(f"data must be bytes; got {type(data).__name__}") from None
    try:
        value = _dec(r, 0)
    except SerializationError:
        raise
    except Exception as exc:  # a safety net; KeyboardInterrupt and the like pass
        raise SerializationError(f"malformed message: decoding raised {type(exc).__name__}") from exc
    if r.left():
        raise SerializationError(f"malformed message: {r.left()} trailing bytes after the message")
    return value
