"""Key derivation for MP-SPPRL: HKDF (RFC 5869, HMAC-SHA256) and a keyed byte stream.

All parties of a linkage share one secret (the linkage unit P(n+1) never sees it). Every
key the plugin uses -- per-field Bloom-filter keys, the LSH bit positions, the LSH-key
tokens, the suffix masks -- is derived from that secret with :func:`derive_key`, each with
its own ``info`` label, so the keys are independent (HKDF is a PRF in ``info``) and one
key leaking does not give the others.

:func:`hkdf_extract` / :func:`hkdf_expand` / :func:`hkdf` follow RFC 5869 Section 2
literally (checked against the RFC's Appendix A test cases 1-3 in the tests).

The shared secret must be uniformly random key material, not a password: HKDF does no
key stretching, so a guessable passphrase would let anyone holding the public Bloom
filters or tokens test guesses offline. :func:`check_secret` refuses ``str`` passphrases,
secrets shorter than 16 bytes (128 bits) and values that cannot be random (fewer than 8
distinct byte values; only printable ASCII and shorter than 32 bytes). The value of a
secret never appears in an error message. Make one with ``secrets.token_bytes(32)``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "HASH_LEN",
    "MIN_SECRET_BYTES",
    "MIN_SECRET_FILE_BYTES",
    "MAX_SECRET_FILE_BYTES",
    "check_secret_file",
    "hkdf_extract",
    "hkdf_expand",
    "hkdf",
    "check_secret",
    "derive_key",
]

#: Output length of SHA-256 in bytes (RFC 5869 ``HashLen``).
HASH_LEN = 32
#: Minimum length of the shared secret: 16 bytes = 128 bits.
MIN_SECRET_BYTES = 16
#: A secret *file* holds raw random bytes: at least 32 (256 bits), at most 4096.
MIN_SECRET_FILE_BYTES = 32
MAX_SECRET_FILE_BYTES = 4096
_FILE_FIX = "generate one with: head -c 32 /dev/urandom > secret.bin (and share it between the data parties only)"
#: Application salt of the extract step (RFC 5869 Section 3.1: a fixed, public salt is fine).
_SALT = b"privreg.plugins.pprl/hkdf-salt/v1"
_INFO_PREFIX = b"privreg.plugins.pprl/v1/"
_FIX = "make one with secrets.token_bytes(32) and share it between the data parties only"


def _as_bytes(name: str, value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise PrivregTypeError(f"{name} must be bytes; got a value of type {type(value).__name__}")


def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    """RFC 5869 Section 2.2: ``PRK = HMAC-Hash(salt, IKM)``; an empty salt means
    ``HashLen`` zero bytes."""
    salt = _as_bytes("salt", salt)
    ikm = _as_bytes("ikm", ikm)
    if not salt:
        salt = bytes(HASH_LEN)
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 Section 2.3: ``T(i) = HMAC-Hash(PRK, T(i-1) | info | i)``, output the
    first ``length`` bytes of ``T(1) | T(2) | ...`` (``length <= 255 * HashLen``)."""
    prk = _as_bytes("prk", prk)
    info = _as_bytes("info", info)
    length = v.check_int("length", length, minimum=1)
    if length > 255 * HASH_LEN:
        raise PrivregValueError(
            f"length must be <= 255 * {HASH_LEN} = {255 * HASH_LEN} bytes (RFC 5869); got {length}. "
            f"Derive several keys with distinct info labels for longer outputs."
        )
    if len(prk) < HASH_LEN:
        raise PrivregValueError(
            f"prk must have at least {HASH_LEN} bytes (RFC 5869 Section 2.3); got {len(prk)} bytes. "
            f"Pass the output of hkdf_extract."
        )
    out = bytearray()
    block = b""
    counter = 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return bytes(out[:length])


def hkdf(ikm: bytes, *, salt: bytes = b"", info: bytes = b"", length: int = HASH_LEN) -> bytes:
    """RFC 5869 HKDF-SHA256: extract then expand."""
    return hkdf_expand(hkdf_extract(salt, ikm), info, length)


def check_secret(secret: Any, *, name: str = "secret") -> bytes:
    """Return ``secret`` as bytes if it can be a shared linkage key; otherwise raise.

    Refused: ``str`` (a passphrase; :class:`PrivregTypeError`), fewer than
    :data:`MIN_SECRET_BYTES` bytes, fewer than 8 distinct byte values, or only printable
    ASCII and shorter than 32 bytes (an encoded passphrase; :class:`PrivregValueError`).
    A 16-byte uniformly random secret is refused by the last rule with probability
    ``(95/256)**16 < 2e-7``. The check cannot measure entropy; it catches mistakes."""
    if isinstance(secret, str):
        raise PrivregTypeError(
            f"{name} must be random bytes, not a str passphrase (HKDF does no key stretching, "
            f"so a guessable passphrase can be brute-forced offline from the Bloom filters); "
            f"{_FIX}"
        )
    data = _as_bytes(name, secret)
    if len(data) < MIN_SECRET_BYTES:
        raise PrivregValueError(
            f"{name} must have at least {MIN_SECRET_BYTES} bytes (128 bits); got {len(data)} bytes; {_FIX}"
        )
    if len(set(data)) < 8:
        raise PrivregValueError(
            f"{name} has only {len(set(data))} distinct byte values in {len(data)} bytes, so it "
            f"is not random key material; {_FIX}"
        )
    if len(data) < 32 and all(0x20 <= b <= 0x7E for b in data):
        raise PrivregValueError(
            f"{name} ({len(data)} bytes) consists of printable ASCII only, like an encoded "
            f"passphrase; pass at least 32 bytes if it is a hex/base64 token, otherwise {_FIX}"
        )
    return data


def _looks_like_text(data: bytes) -> bool:
    """Valid UTF-8 made only of printable characters and whitespace (a CSV, a note, a
    passphrase, a hex or base64 token): 32 random bytes are that with probability < 1e-20."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\n\r" for c in text)


def check_secret_file(data: bytes, *, name: str = "secret_file") -> bytes:
    """The content of a secret file if it can be key material; otherwise raise.

    The rule: between :data:`MIN_SECRET_FILE_BYTES` (32) and :data:`MAX_SECRET_FILE_BYTES`
    (4096) bytes, not text (UTF-8 holding only printable characters and whitespace: a CSV,
    a note or a typed passphrase is not random key material, and a hex/base64 token in a
    file is refused too: store the raw bytes), and :func:`check_secret`'s rules. The error
    never quotes the content."""
    data = _as_bytes(name, data)
    if len(data) < MIN_SECRET_FILE_BYTES:
        raise PrivregValueError(
            f"{name} holds {len(data)} bytes; a secret file needs at least {MIN_SECRET_FILE_BYTES} random bytes; "
            f"{_FILE_FIX}"
        )
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise PrivregValueError(
            f"{name} holds {len(data)} bytes, more than the {MAX_SECRET_FILE_BYTES} a key file needs (is it a "
            f"data file?); {_FILE_FIX}"
        )
    if _looks_like_text(data):
        raise PrivregValueError(f"{name} is text, not random key material; {_FILE_FIX}")
    return check_secret(data, name=name)


def derive_key(secret: bytes, *, info: str, length: int = HASH_LEN) -> bytes:
    """A ``length``-byte key for purpose ``info`` from the shared ``secret`` (HKDF-SHA256
    with a fixed application salt; the info is ``privreg.plugins.pprl/v1/`` + ``info``).

    Deterministic: every party derives the same key from the same secret and label;
    different labels give independent keys."""
    data = check_secret(secret)
    if not isinstance(info, str):
        raise PrivregTypeError(f"info must be a str label such as 'bloom/blocking/surname'; got {info!r}")
    if not info:
        raise PrivregValueError("info must be a non-empty label such as 'bloom/blocking/surname'; got ''")
    length = v.check_int("length", length, minimum=16)
    return hkdf(data, salt=_SALT, info=_INFO_PREFIX + info.encode("utf-8"), length=length)
