"""Paper 000 features (plugin ``spam``): the SpamAssassin reader and split, hashed binary
character 4-grams (Section 6.2) and the dimensionality reductions of Section 6.4."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from privreg.core.errors import PrivregValueError
from privreg.plugins.spam.corpus import (
    MAX_BYTES,
    build_slice,
    bundled_corpus,
    default_corpus_path,
    labels_of,
    paper_split,
    read_corpus,
)
from privreg.plugins.spam.features import NgramHasher, ngram_codes
from privreg.plugins.spam.reduction import (
    LSH,
    PCA,
    DocumentFrequency,
    HashSpace,
    MultinomialSampling,
    UniformSampling,
    document_frequency,
    make_reducer,
)

SHARED = default_corpus_path()


def _tar(tmp_path: Path, files: dict[str, bytes]) -> Path:
    path = tmp_path / "corpus.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


# ------------------------------------------------------------------ corpus


def test_bundled_slice_has_every_folder_and_both_labels():
    msgs = bundled_corpus()
    assert len(msgs) == 80
    folders = {m.folder for m in msgs}
    assert folders == {"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"}
    y = labels_of(msgs)
    assert (y == 1).sum() == 32 and (y == -1).sum() == 48
    assert all(m.label == (1 if m.folder.startswith("spam") else -1) for m in msgs)
    assert sum(len(m.raw) for m in msgs) < 400_000


def test_reader_keeps_first_35kb_and_ignores_other_folders(tmp_path):
    big = b"x" * (MAX_BYTES + 500)
    path = _tar(tmp_path, {"c/spam-1/a.txt": big, "c/easy-ham-1/b.txt": b"hello", "c/other/c.txt": b"zz"})
    msgs = read_corpus(path)
    assert [m.name for m in msgs] == ["c/easy-ham-1/b.txt", "c/spam-1/a.txt"]
    assert len(msgs[1].raw) == MAX_BYTES and msgs[1].label == 1 and msgs[0].label == -1


def test_reader_errors_name_the_problem(tmp_path):
    with pytest.raises(PrivregValueError, match="not a file"):
        read_corpus(tmp_path / "missing.tar.gz")
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar")
    with pytest.raises(PrivregValueError, match="tar"):
        read_corpus(bad)
    empty = _tar(tmp_path, {"c/other/x.txt": b"x"})
    with pytest.raises(PrivregValueError, match="no message"):
        read_corpus(empty)


def test_split_is_deterministic_disjoint_and_checked():
    msgs = bundled_corpus()
    a_tr, a_te = paper_split(msgs, train=30, test=40)
    b_tr, b_te = paper_split(list(reversed(msgs)), train=30, test=40)
    assert [m.name for m in a_tr] == [m.name for m in b_tr] and [m.name for m in a_te] == [m.name for m in b_te]
    assert not {m.name for m in a_tr} & {m.name for m in a_te}
    with pytest.raises(PrivregValueError, match="exceeds"):
        paper_split(msgs, train=50, test=31)


def test_build_slice_round_trips(tmp_path):
    files = {f"c/{f}/{i}.txt": bytes([65 + i]) * (10 + i) for f in ("spam-1", "easy-ham-2") for i in range(5)}
    src = _tar(tmp_path, files)
    dest = tmp_path / "slice.tar.gz"
    assert build_slice(src, dest, per_folder=2, max_message_bytes=12) == 4
    got = read_corpus(dest)
    assert len(got) == 4 and all(len(m.raw) <= 12 for m in got)


@pytest.mark.skipif(SHARED is None, reason="../shared/data/spamassassin.tar.gz not present")
def test_full_corpus_counts_and_paper_split():
    msgs = read_corpus(SHARED)
    y = labels_of(msgs)
    assert len(msgs) == 6046 and (y == -1).sum() == 4150 and (y == 1).sum() == 1896
    tr, te = paper_split(msgs)
    assert len(tr) == len(te) == 3000


# ------------------------------------------------------------------ features


def test_ngram_codes_are_big_endian_windows():
    codes = ngram_codes(b"abcde")
    assert codes.tolist() == [int.from_bytes(b"abcd", "big"), int.from_bytes(b"bcde", "big")]
    assert ngram_codes(b"abc").size == 0


def test_hasher_is_binary_modulo_and_reads_only_max_bytes():
    h = NgramHasher(space=1000)
    raw = b"spam spam spam and eggs"
    expect = sorted({int.from_bytes(raw[i : i + 4], "big") % 1000 for i in range(len(raw) - 3)})
    assert h.features(raw).tolist() == expect
    X = h.transform([raw, b"eggs"])
    assert X.shape == (2, 1000) and X.dtype == np.int8 and set(X.data.tolist()) == {1}
    assert X[0].nnz == len(expect)  # repeated 4-grams count once
    cut = NgramHasher(space=1000, max_bytes=8)
    assert cut.features(raw).tolist() == cut.features(raw[:8] + b"anything after the cut").tolist()


def test_mix_hash_and_max_active():
    text = b"the quick brown fox jumps over the lazy dog"
    mixed = NgramHasher(space=64, hash="mix").features(text)
    plain = NgramHasher(space=64).features(text)
    assert plain.tolist() == sorted({b % 64 for b in text[3:]})  # modulo 64 keeps only the last byte
    assert mixed.size > plain.size
    raw = bytes(range(200))
    capped = NgramHasher(space=10**6, max_active=5).features(raw)
    first = [int.from_bytes(raw[i : i + 4], "big") % 10**6 for i in range(5)]
    assert capped.tolist() == sorted(first)
    with pytest.raises(PrivregValueError):
        NgramHasher(hash="md5")
    with pytest.raises(PrivregValueError):
        NgramHasher(n=9)


# ------------------------------------------------------------------ reductions


@pytest.fixture(scope="module")
def X():
    return NgramHasher(space=5000).transform(bundled_corpus())


def test_hash_space_folds_modulo_k(X):
    Z = HashSpace(k=97).fit_transform(X)
    dense = X.toarray()
    expect = np.zeros((X.shape[0], 97), dtype=bool)
    for j in range(X.shape[1]):
        expect[:, j % 97] |= dense[:, j] > 0
    assert np.array_equal(Z.toarray() > 0, expect) and set(Z.data.tolist()) == {1}


def test_lsh_bits_are_hyperplane_sides_and_seeded(X):
    r = LSH(k=64, seed=3).fit(X)
    Z = r.transform(X)
    expect = (X.astype(np.int64) @ r.planes).toarray() > 0
    assert np.array_equal(Z.toarray() > 0, expect)
    assert np.array_equal(LSH(k=64, seed=3).fit_transform(X).toarray(), Z.toarray())
    assert not np.array_equal(LSH(k=64, seed=4).fit_transform(X).toarray(), Z.toarray())
    dense = LSH(k=8, seed=0, density=1.0).fit(X)
    assert dense.planes.nnz == X.shape[1] * 8  # every entry +-1


def test_samplers_and_document_frequency(X):
    df = document_frequency(X)
    u = UniformSampling(k=300, seed=1).fit(X)
    assert u.columns.size == 300 and np.unique(u.columns).size == 300
    m = MultinomialSampling(k=300, seed=1).fit(X)
    assert np.all(df[m.columns] > 0)  # zero-frequency features are never drawn
    top = DocumentFrequency(k=50).fit(X)
    assert df[top.columns].min() >= np.sort(df)[::-1][49]
    pruned = DocumentFrequency(min_df=10).fit(X)
    assert np.all(df[pruned.columns] >= 10) and pruned.k == int((df >= 10).sum())
    assert MultinomialSampling.data_dependent and not UniformSampling.data_dependent


def test_pca_matches_dense_svd_subspace(X):
    p = PCA(k=5).fit(X)
    dense = X.toarray().astype(float)
    _, _, vt = np.linalg.svd(dense - dense.mean(0), full_matrices=False)
    overlap = np.abs(p.components @ vt[:5].T)
    np.testing.assert_allclose(np.sort(overlap.max(axis=1)), 1.0, atol=1e-6)
    Z = p.transform(X)
    assert Z.shape == (X.shape[0], 5) and np.max(np.abs(Z)) <= 1.0 + 1e-12


def test_reducers_refuse_misuse(X):
    with pytest.raises(PrivregValueError, match="fitted"):
        HashSpace(k=3).transform(X)
    r = HashSpace(k=3).fit(X)
    with pytest.raises(PrivregValueError, match="columns"):
        r.transform(sp.csr_matrix((2, 7)))
    with pytest.raises(PrivregValueError, match="one of"):
        make_reducer("svd", k=3)
    assert make_reducer("none", k=3) is None
