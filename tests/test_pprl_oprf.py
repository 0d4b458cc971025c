"""The 2HashDH oblivious PRF of pprl.oprf: correctness, blinding, refusals.

Deterministic: seeded sources (tests only). The one statistical check (bit balance of the
key holder's view) states its false-alarm rate where it is made."""

from __future__ import annotations

import numpy as np
import pytest

from privreg.core.errors import ProtocolError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl.oprf import ELEMENT_BYTES, OprfKey, blind, finalize, hash_to_group


def _eval(key: OprfKey, x: np.ndarray, seed: int) -> np.ndarray:
    rng = InsecureReproducibleRandom(seed=seed)
    b, inv = blind(x, rng)
    return finalize(x, key.evaluate(b, count=len(x), sender="P1"), inv, sender="LU")


def test_the_output_depends_on_the_input_and_key_not_on_the_blinding():
    x = np.array([[0, 7], [1, 7], [0, 7], [0, 8]], dtype=np.uint64)
    k = OprfKey(rng=InsecureReproducibleRandom(seed=1))
    a, b = _eval(k, x, 2), _eval(k, x, 3)
    np.testing.assert_array_equal(a, b)  # two parties with fresh blindings get the same words
    assert a[0] == a[2] and len(set(a[[0, 1, 3]].tolist())) == 3
    other = _eval(OprfKey(rng=InsecureReproducibleRandom(seed=4)), x, 2)
    assert not np.any(other == a)  # another key: unrelated words


def test_the_key_holder_sees_fresh_uniform_elements():
    # 400 copies of one input: the blinded elements are all distinct and their bits balanced
    x = np.zeros((400, 2), dtype=np.uint64)
    blinded, _ = blind(x, InsecureReproducibleRandom(seed=5))
    assert blinded.shape == (400, ELEMENT_BYTES) and len({bytes(r) for r in blinded}) == 400
    # the low 248 bits of an encoding are (nearly) uniform: over 400 x 248 bits the share of ones
    # has sd 0.0016, so |share - 0.5| > 0.01 has a false-alarm rate below 1e-9
    bits = np.unpackbits(blinded[:, :31], axis=1)
    assert abs(bits.mean() - 0.5) < 0.01
    # unblinded they would all be H1(x): the blinding is what hides equality
    assert len({bytes(p) for p in hash_to_group(x)}) == 1


def test_malformed_or_off_group_elements_are_refused():
    k = OprfKey(rng=InsecureReproducibleRandom(seed=1))
    x = np.array([[1, 2], [3, 4]], dtype=np.uint64)
    b, inv = blind(x, InsecureReproducibleRandom(seed=2))
    with pytest.raises(ProtocolError, match=r"'P1' sent malformed blinded elements \(expected 3 group"):
        k.evaluate(b, count=3, sender="P1")
    with pytest.raises(ProtocolError, match="'P1' sent malformed"):
        k.evaluate(b.astype(np.int64), count=2, sender="P1")
    torsion = b.copy()
    torsion[1] = np.frombuffer((2**255 - 20).to_bytes(32, "little"), dtype=np.uint8)  # order 2: (0, -1)
    with pytest.raises(ProtocolError, match="'P1' sent a blinded element that is not in the prime-order group"):
        k.evaluate(torsion, count=2, sender="P1")
    e = k.evaluate(b, count=2, sender="P1")
    with pytest.raises(ProtocolError, match="'LU' sent malformed evaluated elements"):
        finalize(x, e[:1], inv, sender="LU")
    bad = e.copy()
    bad[0] = 0  # the identity's neighbour y = 0 is not a point of the subgroup
    with pytest.raises(ProtocolError, match="'LU' sent an evaluated element that is not in the prime-order group"):
        finalize(x, bad, inv, sender="LU")
