"""Paper 000 private evaluation (plugin ``spam``, Section 4.3): Carol learns the label
sign(w . x') through the DGK secure comparison of privreg.crypto; Bob learns nothing.
Edge cases: zero inner product, empty message, weights at the public bound."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import run_protocol
from privreg.plugins.spam.corpus import bundled_corpus, labels_of, paper_split
from privreg.plugins.spam.evaluation import EvaluationConfig, PrivateEvaluation, expected_labels, quantize_weights
from privreg.plugins.spam.features import NgramHasher
from privreg.plugins.spam.logistic import train_logistic

KEY = cached_keypair(512, 3)


def _evaluate(cfg, w, X, seed=5):
    proto = PrivateEvaluation(
        config=cfg,
        count=X.shape[0],
        keypair=KEY,
        w=w,
        X=X,
        allow_insecure=True,
        rng=InsecureReproducibleRandom(seed=seed),
    )
    return run_protocol(proto)


def test_labels_match_the_quantised_model_on_real_messages():
    tr, te = paper_split(bundled_corpus(), train=40, test=12)
    h = NgramHasher(space=300)
    w = train_logistic(h.transform(tr), labels_of(tr), eta=0.01, batch_size=8, epochs=2)
    X = h.transform(te)
    cfg = EvaluationConfig(d=300, w_bound=1.0, workers=1)
    res = _evaluate(cfg, w, X)
    labels = res.outputs["carol"]["labels"]
    np.testing.assert_array_equal(labels, expected_labels(w, X, cfg))
    np.testing.assert_array_equal(labels, np.where(X @ w >= 0, 1, -1))  # no margin this close to 0 here
    assert set(res.outputs["bob"]) == {"timings", "counts"}  # Bob gets no label
    assert cfg.bits == (256 * 300).bit_length() + 1


def test_edge_cases_zero_empty_and_extremes():
    d = 6
    cfg = EvaluationConfig(d=d, w_bound=2.0, weight_bits=4, workers=1)
    top = cfg.w_bound_int / 2**cfg.weight_bits
    X = sp.csr_matrix(
        np.array(
            [
                [0, 0, 0, 0, 0, 0],  # empty message: w.x = 0 -> spam (>= 0)
                [1, 1, 0, 0, 0, 0],  # +top - top = 0 exactly
                [1, 0, 1, 0, 1, 0],  # largest positive sum
                [0, 1, 0, 1, 0, 1],  # largest negative sum
                [1, 1, 1, 1, 1, 1],  # top minus one quantum: just positive
                [0, 0, 0, 0, 0, 1],  # smallest negative: one quantum below zero
            ],
            dtype=np.int8,
        )
    )
    w = np.array([top, -top, top, -top, top, -1 / 2**cfg.weight_bits])
    labels = _evaluate(cfg, w, X).outputs["carol"]["labels"]
    assert labels.tolist() == [1, 1, 1, -1, 1, -1]
    zero = _evaluate(cfg, np.zeros(d), X).outputs["carol"]["labels"]
    assert zero.tolist() == [1] * 6


def test_weights_are_clipped_to_the_public_bound_and_inputs_checked():
    cfg = EvaluationConfig(d=3, w_bound=1.0, weight_bits=2)
    assert quantize_weights([5.0, -5.0, 0.26], cfg) == [4, -4, 1]
    with pytest.raises(PrivregValueError, match="shape"):
        PrivateEvaluation(config=cfg, count=2, X=np.ones((2, 4), dtype=np.int64))
    with pytest.raises(PrivregValueError, match="l1_bound"):
        PrivateEvaluation(config=EvaluationConfig(d=3, l1_bound=2), count=1, X=np.ones((1, 3), dtype=np.int64))
