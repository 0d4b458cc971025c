"""Errors of the Paillier layer; all derive from privreg's error hierarchy."""

from __future__ import annotations

from privreg.core.errors import PrivregValueError

__all__ = ["PlaintextOverflowError", "WrongKeyError", "ObfuscatorsExhaustedError"]


class PlaintextOverflowError(PrivregValueError, OverflowError):
    """A plaintext is (or could become) too large for the key's plaintext range.

    Raised on encoding, on homomorphic operations whose tracked bound would leave the
    range, and on decryption of a value outside the range: never a silent wrap modulo n.
    """


class WrongKeyError(PrivregValueError):
    """Ciphertexts under one key were combined with, or decrypted by, another key."""


class ObfuscatorsExhaustedError(PrivregValueError):
    """A pool of precomputed one-time obfuscators has none left."""
