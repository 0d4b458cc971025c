"""A small, safe binary codec for protocol messages.

Messages between parties are encoded with this codec so that transcripts record real
sizes and so that a party never receives a live object of another party. Unlike pickle,
decoding runs no code: it only rebuilds None, bools, ints of any size, floats, str,
bytes, lists, tuples, str/int-keyed dicts and numeric numpy arrays. Plugins add types
(ciphertexts, say) with :func:`register_type`, mapping them to and from encodable values.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from privreg.core.errors import PrivregTypeError, SerializationError

__all__ = ["encode", "decode", "encoded_size", "register_type"]

_EXT: dict[bytes, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {}
_EXT_BY_TYPE: dict[type, bytes] = {}
_MAX_DEPTH = 64
_MAX_NDIM = 32


def register_type(tag: str, cls: type, to_wire: Callable[[Any], Any], from_wire: Callable[[Any], Any]) -> None:
    """Teach the codec a type: ``to_wire(obj)`` returns an encodable value and
    ``from_wire(value)`` rebuilds the object. ``tag`` is a short unique ASCII name."""
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

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise SerializationError("truncated message")
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
                raise SerializationError("length field too long")


def _dec(r: _Reader, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SerializationError("message nests too deeply")
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
        except UnicodeDecodeError:
            raise SerializationError("string is not valid UTF-8") from None
    if tag == b"B":
        return r.take(r.uvarint())
    if tag == b"A":
        raw_dtype = r.take(r.take(1)[0])
        try:
            dt = np.dtype(raw_dtype.decode("ascii"))
        except (UnicodeDecodeError, TypeError, ValueError):
            raise SerializationError(f"invalid array dtype {raw_dtype!r}") from None
        if dt.kind not in "biuf":
            raise SerializationError(f"refusing array of dtype {dt}")
        ndim = r.uvarint()
        if ndim > _MAX_NDIM:
            raise SerializationError(f"array has {ndim} dimensions; at most {_MAX_NDIM} are allowed")
        shape = tuple(r.uvarint() for _ in range(ndim))
        count = 1
        for dim in shape:  # Python ints: no silent int64 wrap-around
            count *= dim
        nbytes = count * dt.itemsize
        if nbytes > len(r.data) - r.pos:
            raise SerializationError(f"array of shape {shape} needs {nbytes} bytes; message is shorter")
        return np.frombuffer(r.take(nbytes), dtype=dt).reshape(shape).copy()
    if tag in (b"L", b"U"):
        items = [_dec(r, depth + 1) for _ in range(r.uvarint())]
        return items if tag == b"L" else tuple(items)
    if tag == b"M":
        out = {}
        for _ in range(r.uvarint()):
            k = _dec(r, depth + 1)
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise SerializationError(f"dict keys must be str or int; got {type(k).__name__}")
            out[k] = _dec(r, depth + 1)
        return out
    if tag == b"X":
        name = r.take(r.take(1)[0])
        if name not in _EXT:
            raise SerializationError(f"unknown wire type {name!r}")
        return _EXT[name][2](_dec(r, depth + 1))
    raise SerializationError(f"unknown tag {tag!r} at byte {r.pos - 1}")


def decode(data: bytes) -> Any:
    """Inverse of :func:`encode`; raises SerializationError on malformed input."""
    r = _Reader(data)
    value = _dec(r, 0)
    if r.pos != len(r.data):
        raise SerializationError(f"{len(r.data) - r.pos} trailing bytes after message")
    return value
