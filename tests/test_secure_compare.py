"""Reusable sub-protocols (privreg.crypto.compare, privreg.crypto.inner_product): the
DGK comparison over Paillier and the encrypted sign test are correct on edge cases
(equal values, zero, the extremes of the range) for every output mode, and the
transcripts show what each party receives."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregValueError, ProtocolError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import EncryptedVector, FixedPoint, PlaintextOverflowError
from privreg.crypto.compare import OUTPUTS, EncryptedSign, SecureComparison
from privreg.crypto.inner_product import AdditiveShares, EncryptedInnerProduct
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport


@pytest.fixture(scope="module")
def kp():
    return cached_keypair(512, 3)


def edge_pairs(bits):
    top = (1 << bits) - 1
    vals = sorted({0, 1, top - 1, top, top // 2, (top + 1) // 2})
    return [(a, b) for a, b in itertools.product(vals, vals) if 0 <= a <= top and 0 <= b <= top]


def run_comparison(kp, bits, pairs, output, seed=0):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    proto = SecureComparison(
        bits=bits,
        count=len(pairs),
        output=output,
        keypair=kp,
        keyholder_values=a,
        holder_values=b,
        allow_insecure=True,
        rng=InsecureReproducibleRandom(seed=seed),
    )
    return run_protocol(proto, transport=InMemoryTransport())


@pytest.mark.parametrize("bits", [1, 2, 8, 32])
def test_comparison_is_correct_on_edge_cases(kp, bits):
    pairs = edge_pairs(bits)
    res = run_comparison(kp, bits, pairs, "both")
    expected = [int(a < b) for a, b in pairs]
    assert res.outputs["holder"] == expected and res.outputs["keyholder"] == expected


@pytest.mark.parametrize("output", OUTPUTS)
def test_comparison_output_modes(kp, output):
    pairs = edge_pairs(6)
    expected = [int(a < b) for a, b in pairs]
    out = run_comparison(kp, 6, pairs, output, seed=4).outputs
    if output == "shares":
        assert [x ^ y for x, y in zip(out["keyholder"], out["holder"])] == expected
        assert out["keyholder"] != expected and out["holder"] != expected  # shares, not the result
    else:
        learner, other = ("keyholder", "holder") if output == "keyholder" else ("holder", "keyholder")
        assert out[learner] == expected
        assert out[other] == (expected if output == "both" else None)


def test_comparison_transcript_shows_only_ciphertexts_and_blinded_values(kp):
    pairs = edge_pairs(4)
    res = run_comparison(kp, 4, pairs, "holder", seed=7)
    t = res.transcript
    to_keyholder = t.received_by("keyholder")
    assert [m.step for m in to_keyholder] == ["cmp.dgk.blinded"]
    (blinded,) = [m.payload for m in to_keyholder]
    assert isinstance(blinded, EncryptedVector) and len(blinded) == 5 * len(pairs)
    # what the key holder can see after decrypting: per comparison at most one zero, and the
    # nonzero values are blinded to uniform residues (none of the small c_i in the clear)
    sk = kp.private_key
    raw = sk.raw_decrypt(blinded._c, workers=1)
    for k in range(len(pairs)):
        group = raw[5 * k : 5 * k + 5]
        assert sum(1 for m in group if m == 0) <= 1
        assert all(m == 0 or 100 < m < kp.public_key.n - 100 for m in group)
    to_holder = t.received_by("holder")
    assert [m.step for m in to_holder] == ["cmp.public-key", "cmp.dgk.bits", "cmp.share"]
    assert t.per_step()["cmp.dgk.bits"].ciphertexts == 5 * len(pairs)


def test_comparison_validates_inputs(kp):
    with pytest.raises(PrivregValueError, match=r"\[0, 2\^4\)"):
        SecureComparison(bits=4, count=1, keypair=kp, keyholder_values=[16])
    with pytest.raises(PrivregValueError, match="count"):
        SecureComparison(bits=4, count=2, keypair=kp, keyholder_values=[1])
    with pytest.raises(PrivregValueError, match="output"):
        SecureComparison(bits=4, count=1, output="everyone")
    proto = SecureComparison(bits=4, count=1, keypair=kp, keyholder_values=[3])  # holder input missing
    with pytest.raises(ProtocolError, match="holder_values"):
        run_protocol(proto)
    proto = SecureComparison(bits=4, count=1, keypair=kp, keyholder_values=[3], holder_values=[2])
    with pytest.raises(ProtocolError, match="insecure"):
        run_protocol(proto)  # a 512-bit key is refused by the receiving party unless allowed


# ------------------------------------------------------------------ encrypted sign


@pytest.mark.parametrize("bits", [1, 5, 40])
def test_encrypted_sign_edge_cases(kp, bits):
    top = (1 << bits) - 1
    zs = sorted({0, 1, -1, top, -top, top // 2, -(top // 2)})
    X = np.array([[z] for z in zs], dtype=object)
    res = run_protocol(
        EncryptedSign(
            bits=bits,
            rows=len(zs),
            keypair=kp,
            u=[1],
            u_bound=1,
            matrix=X,
            matrix_bound=top,
            allow_insecure=True,
            rng=InsecureReproducibleRandom(seed=bits),
        )
    )
    assert res.outputs["holder"] == [int(z >= 0) for z in zs]
    assert res.outputs["keyholder"] is None
    received = [m.step for m in res.transcript.received_by("keyholder")]
    assert received == ["sign.masked", "sign.dgk.blinded"]  # only ciphertexts reach the key holder


def test_encrypted_sign_of_fixed_point_inner_products(kp):
    codec = FixedPoint(scale=2**12)
    u = np.array([0.5, -1.25, 2.0, 0.0])
    X = np.array([[1, 0, 1, 1], [0, 1, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0], [2, 0, 0, 0], [0, 2, 1, 0]])
    for output in ("holder", "keyholder", "both"):
        res = run_protocol(
            EncryptedSign(
                bits=30,
                rows=len(X),
                output=output,
                codec=codec,
                keypair=kp,
                u=u,
                u_bound=4,
                matrix=X,
                matrix_bound=2,
                allow_insecure=True,
            )
        )
        expected = (X @ u >= 0).astype(int).tolist()  # [1, 0, 0, 1, 1, 1]: includes zero and -0.5
        for party in ("holder", "keyholder"):
            if output in (party, "both"):
                assert res.outputs[party] == expected


def test_encrypted_sign_refuses_too_few_bits_and_too_small_keys(kp):
    X = np.array([[100]])
    with pytest.raises(ProtocolError, match="bits="):
        run_protocol(
            EncryptedSign(bits=6, rows=1, keypair=kp, u=[1], u_bound=1, matrix=X, matrix_bound=100, allow_insecure=True)
        )
    with pytest.raises(ProtocolError, match="PlaintextOverflowError"):
        run_protocol(
            EncryptedSign(
                bits=100,
                rows=1,
                sigma=420,
                keypair=kp,
                u=[1],
                u_bound=1,
                matrix=X,
                matrix_bound=100,
                allow_insecure=True,
            )
        )
    assert issubclass(PlaintextOverflowError, PrivregValueError)


# ------------------------------------------------------------------ inner products


@pytest.mark.parametrize("reveal", ["keyholder", "shares"])
def test_encrypted_inner_product(kp, reveal):
    codec = FixedPoint(scale=2**16)
    u = np.array([0.25, -1.5, 3.0])
    X = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 0.0], [0.0, 0.0, 0.0], [4.0, 4.0, 4.0]])
    res = run_protocol(
        EncryptedInnerProduct(
            rows=4,
            reveal=reveal,
            codec=codec,
            keypair=kp,
            u=u,
            u_bound=4,
            matrix=X,
            matrix_bound=4,
            allow_insecure=True,
            rng=InsecureReproducibleRandom(seed=2),
        )
    )
    out = res.outputs
    if reveal == "keyholder":
        np.testing.assert_allclose(out["keyholder"], X @ u, atol=1e-4)
        assert out["holder"] is None
    else:
        kh, h = out["keyholder"], out["holder"]
        assert isinstance(kh, AdditiveShares) and isinstance(h, AdditiveShares)
        np.testing.assert_allclose(kh.combine(h), X @ u, atol=1e-4)
        # the key holder's share is masked by at least sigma bits beyond the value's bound
        assert all(abs(x) > 2**30 for x in kh.values)
    (result,) = list(res.transcript.received_by("keyholder"))
    assert result.step == "ip.result" and result.ciphertexts == 4


def test_inner_product_needs_matching_rows(kp):
    with pytest.raises(ProtocolError, match="rows"):
        run_protocol(
            EncryptedInnerProduct(
                rows=3,
                keypair=kp,
                u=[1, 2],
                u_bound=2,
                matrix=np.ones((2, 2), dtype=int),
                matrix_bound=1,
                allow_insecure=True,
            )
        )
