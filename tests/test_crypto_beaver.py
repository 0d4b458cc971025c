"""Beaver inner products (crypto: beaver.py): row-wise masks, the chunked dealer, the
shares adding up to ``<a, b>``, and memory that grows with the candidate rows only."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import beaver

SU, SV = bytes(range(32)), bytes(range(1, 33))
L = 64


def test_a_row_mask_depends_only_on_the_seed_label_and_row():
    full = beaver.expand_masks(SU, rows=50, length=L, label="u/A/B")
    rows = np.array([49, 3, 3, 17], dtype=np.int64)
    assert np.array_equal(beaver.mask_rows(SU, rows, length=L, label="u/A/B"), full[rows])
    assert full.max() < 1 << beaver.SHARE_BITS and len({r.tobytes() for r in full}) == 50
    assert not np.array_equal(beaver.mask_rows(SU, rows, length=L, label="v/A/B"), full[rows])
    assert not np.array_equal(beaver.mask_rows(SV, rows, length=L, label="u/A/B"), full[rows])
    with pytest.raises(PrivregValueError, match="rows"):
        beaver.mask_rows(SU, np.array([-1]), length=L, label="u")


@pytest.mark.parametrize("chunk", [1, 7, None])
def test_chunked_dealer_equals_the_full_masks_and_the_shares_add_up(chunk):
    gen = np.random.default_rng(3)
    a, b = gen.random((40, L)) < 0.3, gen.random((30, L)) < 0.3
    pairs = np.column_stack([gen.integers(0, 40, 25), gen.integers(0, 30, 25)])
    u = beaver.expand_masks(SU, rows=40, length=L, label="u/x")
    vm = beaver.expand_masks(SV, rows=30, length=L, label="v/x")
    want = beaver.dealer_shares(u, vm, pairs, rng=InsecureReproducibleRandom(seed=9))
    got = beaver.dealer_shares_from_seeds(
        SU, SV, pairs, length=L, labels=("u/x", "v/x"), rng=InsecureReproducibleRandom(seed=9), chunk=chunk
    )
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    left = beaver.left_share(u, beaver.mask_bits(b, vm), pairs, got[0])
    right = beaver.right_share(beaver.mask_bits(a, u), b, pairs, got[1])
    dots = (a[pairs[:, 0]] & b[pairs[:, 1]]).sum(axis=1)
    assert np.array_equal((left + right) & np.uint64((1 << beaver.SHARE_BITS) - 1), dots.astype(np.uint64))


def test_pair_chunks_cover_the_pairs_once():
    assert beaver.pair_chunks(0) == [(0, 0)]
    assert beaver.pair_chunks(10, 4) == [(0, 4), (4, 8), (8, 10)]


def _dealer_peak(rows: int, pairs: int) -> int:
    gen = np.random.default_rng(5)
    p = np.column_stack([gen.integers(0, rows, pairs), gen.integers(0, rows, pairs)])
    tracemalloc.start()
    try:
        beaver.dealer_shares_from_seeds(SU, SV, p, length=1024, labels=("u/m", "v/m"), chunk=512)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_dealer_memory_grows_with_candidate_rows_not_records():
    # full masks of 10^6 records would take 2 x 8 GiB; the chunked dealer holds the rows of
    # one chunk (2 x 512 x 8 KiB = 8 MiB) plus per-pair arrays
    few_records, many_records = _dealer_peak(1_000, 200), _dealer_peak(1_000_000, 200)
    assert many_records < 8 << 20 and abs(many_records - few_records) < 1 << 20
    # 200 -> 400 pairs (below one chunk): the rows held double
    assert _dealer_peak(1_000_000, 400) > 1.6 * many_records
