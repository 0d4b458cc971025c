"""Paper 000 plaintext reference (plugin ``spam``): eq. (1) block gradient ascent with the
corrected regulariser sign, AUC, and the periodic sigmoid approximation of the protocol."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privreg.core.errors import PrivregValueError
from privreg.plugins.spam.link import PeriodicSigmoid, sigmoid_weight
from privreg.plugins.spam.logistic import auc, batches, train_logistic


def _data():
    X = np.array([[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    y = np.array([1, -1, 1, -1, 1])
    return X, y


def test_training_follows_eq1_block_by_block():
    X, y = _data()
    eta, lam, K = 0.3, 0.2, 2
    w = np.zeros(4)
    for s, e in batches(5, K):
        grad = sum(y[i] * X[i] / (1 + np.exp(y[i] * X[i] @ w)) for i in range(s, e))
        w = w + eta * (grad - 2 * lam * w)  # maximise L(w) - lam ||w||^2
    np.testing.assert_allclose(train_logistic(X, y, eta=eta, batch_size=K, lam=lam), w, rtol=1e-12)


def test_regulariser_shrinks_towards_zero():
    """The paper's printed (1 + 2 lambda) w would grow the weights; the corrected update
    (1 - 2 eta lambda) w + eta grad shrinks them."""
    X, y = _data()
    free = train_logistic(X, y, eta=0.5, batch_size=1, epochs=20)
    reg = train_logistic(X, y, eta=0.5, batch_size=1, epochs=20, lam=0.5)
    assert np.linalg.norm(reg) < np.linalg.norm(free)
    one = train_logistic(X[:1], y[:1], eta=0.5, batch_size=1, lam=0.5, w0=np.ones(4))
    g = y[0] * X[0] * sigmoid_weight(y[0] * X[0] @ np.ones(4))
    np.testing.assert_allclose(one, (1 - 2 * 0.5 * 0.5) * np.ones(4) + 0.5 * g)
    with pytest.raises(PrivregValueError):
        train_logistic(X, y, eta=0.5, batch_size=1, lam=1.0)  # 2 eta lam >= 1


def test_auc_is_the_pairwise_probability_with_half_ties():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 40).astype(float)
    y = np.where(rng.random(40) < 0.4, 1, -1)
    pos, neg = s[y == 1], s[y == -1]
    brute = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg)])
    assert auc(s, y) == pytest.approx(brute, abs=1e-12)
    with pytest.raises(PrivregValueError):
        auc([1.0, 2.0], [1, 1])


def test_periodic_sigmoid_accuracy_symmetry_and_bound():
    h = PeriodicSigmoid()  # period 32, harmonics 1..11
    assert h.harmonics.tolist() == [1, 3, 5, 7, 9, 11] and h.terms == 6
    assert h.max_error(6.0) < 4e-4 and h.max_error(10.0) < 3e-3
    z = np.linspace(-40, 40, 4001)
    np.testing.assert_allclose(h(-z), 1 - h(z), atol=1e-12)  # h - 1/2 is odd, like g - 1/2
    np.testing.assert_allclose(h(z + 32), h(z), atol=1e-9)
    assert np.max(np.abs(h(z))) <= h.bound()
    wide = PeriodicSigmoid(period=64.0, max_harmonic=19)
    assert wide.max_error(24.0) < 1.5e-3  # the workflow default: wider range, same ripple
    with pytest.raises(PrivregValueError, match="power of two"):
        PeriodicSigmoid(period=48.0)
