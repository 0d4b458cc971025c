"""The selection rule of :mod:`privreg.analysis.selection`, built from Spark built-ins.

Every piece is the same function as its Python twin, computed in the JVM (no Python
worker): :func:`field` is :func:`~privreg.analysis.selection.field` for a column of a
given Spark type, :func:`message` is :func:`~privreg.analysis.selection.row_message`
and :func:`tag` is ``HMAC-SHA256`` (RFC 2104) from ``sha2``:
``H((K xor opad) || unhex(H((K xor ipad) || m)))``, returned as lowercase hex (whose
string order is the bytewise order of the tags). A float's exact value ``M 2^E`` is
computed arithmetically (Spark has no access to a double's bits): ``m = |x| / 2^s`` with
``s = max(floor(log2|x|) - 54, -1074)`` is an exact integer below ``2^56`` even when
``log2`` is off by one near a power of two (a division by a power of two is exact), and
``M = m >> t``, ``E = s + t``, ``t`` the trailing zeros of ``m`` (``round(log2(m & -m))``,
exact for a power of two below ``2^56``). Every branch is guarded, so no row raises
under ANSI mode.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from privreg.analysis.selection import ROW_CONTEXT

__all__ = ["field", "framed", "list_field", "message", "number", "tag"]

_INT_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_COMPLEX = (T.ArrayType, T.MapType, T.StructType)


def framed(kind: str, payload: Column) -> Column:
    """``<kind><UTF-8 bytes of payload>:<payload>``."""
    return F.concat(F.lit(kind), F.octet_length(payload).cast("string"), F.lit(":"), payload)


def number(x: Column) -> Column:
    """The number payload of a double column (null for null or NaN)."""
    x = x.cast("double")
    finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) < F.lit(float("inf")))
    integral = finite & (x >= F.lit(-(2.0**63))) & (x < F.lit(2.0**63)) & (x % F.lit(1.0) == F.lit(0.0))
    as_int = F.when(integral, x).cast("long").cast("string")
    a = F.when(finite & ~integral, F.abs(x))  # null elsewhere: nothing below can fail
    s = F.greatest(F.floor(F.log2(a)) - F.lit(54), F.lit(-1074)).cast("int")
    m = (a / F.pow(F.lit(2.0), s)).cast("long")
    t = F.round(F.log2(m.bitwiseAND(-m))).cast("int")
    exact = F.concat(
        F.when(x < 0, F.lit("-")).otherwise(F.lit("")),
        F.call_function("shiftright", m, t).cast("string"),
        F.lit("p"),
        (s + t).cast("string"),
    )
    infinite = F.when(x > 0, F.lit("inf")).otherwise(F.lit("-inf"))
    return (
        F.when(x.isNull() | F.isnan(x), F.lit(None).cast("string"))
        .when(integral, as_int)
        .when(finite, exact)
        .otherwise(infinite)
    )


def field(c: Column, dtype: T.DataType) -> Column:
    """The field of every value of a column of Spark type ``dtype``."""
    if isinstance(dtype, T.BooleanType):
        body = F.when(c, F.lit("b1:1")).otherwise(F.lit("b1:0"))
    elif isinstance(dtype, _INT_TYPES):
        body = framed("n", c.cast("string"))
    elif isinstance(dtype, (T.FloatType, T.DoubleType)):
        payload = number(c)
        return F.when(payload.isNull(), F.lit("N")).otherwise(framed("n", payload))
    elif isinstance(dtype, (T.StringType, T.VarcharType, T.CharType)):
        body = framed("s", c.cast("string"))
    elif isinstance(dtype, T.DateType):
        body = framed("d", F.date_format(c, "yyyy-MM-dd"))
    elif isinstance(dtype, T.TimestampType):
        body = framed("t", F.unix_micros(c).cast("string"))
    elif isinstance(dtype, _COMPLEX):
        body = framed("x", F.to_json(c))
    elif isinstance(dtype, T.BinaryType):
        body = framed("x", F.hex(c))
    else:
        body = framed("x", c.cast("string"))
    return F.when(c.isNull(), F.lit("N")).otherwise(body)


def list_field(items: Column) -> Column:
    """An array of strings as one ``l`` field (:func:`~privreg.analysis.selection.list_field`)."""
    parts = F.transform(items, lambda t: F.when(t.isNull(), F.lit("N")).otherwise(framed("s", t)))
    return F.concat(F.lit("l"), F.size(items).cast("string"), F.lit(":"), F.array_join(parts, ""))


def message(fields: list[Column], position: Column, context: str = ROW_CONTEXT) -> Column:
    """A row's message (a string; its UTF-8 bytes are the message)."""
    head = f"s{len(context.encode('utf-8'))}:{context}"
    return F.concat(F.lit(head), *fields, framed("n", position.cast("string")))


def tag(key: bytes, msg: Column) -> Column:
    """``HMAC-SHA256(key, msg)`` as 64 lowercase hex digits (``msg`` a string column)."""
    key = bytes(key)
    if len(key) > 64:
        import hashlib

        key = hashlib.sha256(key).digest()
    padded = key.ljust(64, b"\x00")
    ipad = F.lit(bytearray(b ^ 0x36 for b in padded))
    opad = F.lit(bytearray(b ^ 0x5C for b in padded))
    inner = F.sha2(F.concat(ipad, F.encode(msg, "UTF-8")), 256)
    return F.sha2(F.concat(opad, F.unhex(inner)), 256)
