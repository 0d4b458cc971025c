"""Binary matrix products with shared partial products (privreg.crypto.binary_dot) and
simultaneous powers (privreg.crypto.modarith.multi_pow):
the same ciphertexts as the row-by-row products, and a plan only where it saves work."""

import gmpy2
import numpy as np
import pytest
import scipy.sparse as sp
from crypto_keys import cached_keypair

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import decrypt, encrypt
from privreg.crypto import vector as vector_module
from privreg.crypto.binary_dot import CsrRows, plan_blocks, shared_binary_dot
from privreg.crypto.modarith import multi_pow, prod_mod


def _matrix(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    """Correlated binary rows (column popularity decays), some empty, like hashed n-grams."""
    gen = np.random.default_rng(seed)  # test data only
    p = 0.6 / (1 + np.arange(cols) / 8)
    m = gen.random((rows, cols)) < p
    m[3] = False  # an empty row
    m[5] = False
    m[5, 7] = True  # a row of one column
    return sp.csr_matrix(m[:, gen.permutation(cols)].astype(np.int64))


def _rows(m: sp.csr_matrix) -> list[list[int]]:
    return [m.indices[m.indptr[i] : m.indptr[i + 1]].tolist() for i in range(m.shape[0])]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_shared_products_are_the_row_products(workers):
    kp = cached_keypair()
    m = _matrix(300, 120, 1)
    rows = _rows(m)
    enc = encrypt(kp.private_key, list(range(120)), bound=120, rng=InsecureReproducibleRandom(seed=2), workers=1)
    plan = plan_blocks(rows, 120)
    assert plan is not None and plan.cost < 0.9 * (m.nnz - sum(1 for r in rows if r))
    n2 = kp.public_key.n2
    got = shared_binary_dot(int(n2), enc.ciphertexts, plan, workers)
    assert got == [prod_mod([enc.ciphertexts[j] for j in r], n2) for r in rows]


def test_dot_uses_the_plan_and_decrypts_to_the_plaintext_product(monkeypatch):
    kp = cached_keypair()
    m = _matrix(200, 150, 3)
    x = np.arange(150) - 75
    enc = encrypt(kp.private_key, x.tolist(), bound=75, rng=InsecureReproducibleRandom(seed=4), workers=1)
    shared = enc.dot(m, bound=1, workers=1)
    monkeypatch.setattr(vector_module, "plan_blocks", lambda rows, ncols: None)
    plain = enc.dot(m, bound=1, workers=1)
    assert shared.ciphertexts == plain.ciphertexts
    np.testing.assert_array_equal(decrypt(kp.private_key, shared), m @ x)


def test_a_plan_from_csr_arrays_is_the_plan_from_row_lists():
    m = _matrix(400, 130, 9)
    lists = plan_blocks(_rows(m), 130)
    arrays = plan_blocks(CsrRows(m.indptr, m.indices), 130)
    assert lists is not None and arrays is not None
    assert (arrays.cost, arrays.width, arrays.blocks) == (lists.cost, lists.width, lists.blocks)
    np.testing.assert_array_equal(arrays.patterns, lists.patterns)
    small = sp.csr_matrix(np.eye(10, dtype=np.int64))
    assert plan_blocks(CsrRows(small.indptr, small.indices), 10) is None


def test_small_or_unshared_products_keep_the_row_products():
    assert plan_blocks([[0, 1, 2]] * 10, 3) is None  # below the size where a plan pays
    # rows with disjoint columns share nothing: no plan saves 10%
    assert plan_blocks([[2 * i, 2 * i + 1] for i in range(3000)], 6000) is None


@pytest.mark.parametrize(
    "exps",
    [[5, -3, 0, 1, -1, 2**24 + 3, -(2**23)], [7], [-9], [0, 0], [1, 1, 1], [-(2**30), 2**30 - 1, 12345]],
)
def test_multi_pow_is_the_product_of_the_powers(exps):
    kp = cached_keypair()
    n2 = kp.public_key.n2
    enc = encrypt(kp.private_key, list(range(len(exps))), bound=64, rng=InsecureReproducibleRandom(seed=5), workers=1)
    bases = enc.ciphertexts
    expected = prod_mod([gmpy2.powmod(c, k, n2) for c, k in zip(bases, exps)], n2)
    assert multi_pow(bases, exps, n2) == expected


def test_a_sparse_matrix_with_repeated_entries_counts_them_all():
    """A CSR matrix holding (row, column) twice means the sum of the entries (here 2)."""
    kp = cached_keypair()
    m = _matrix(600, 150, 7)
    per_row = [np.r_[r, r[:2]] for r in _rows(m)]  # each row's first two columns twice
    indptr = np.r_[0, np.cumsum([r.size for r in per_row])]
    indices = np.concatenate(per_row).astype(np.int64)
    dup = sp.csr_matrix((np.ones(indices.size, np.int64), indices, indptr), shape=m.shape)
    assert not dup.has_canonical_format
    assert plan_blocks([r.tolist() for r in per_row], 150) is not None  # large enough for shared products
    x = np.arange(150)
    enc = encrypt(kp.private_key, x.tolist(), bound=150, rng=InsecureReproducibleRandom(seed=8), workers=1)
    np.testing.assert_array_equal(decrypt(kp.private_key, enc.dot(dup, bound=2, workers=1)), dup.toarray() @ x)
