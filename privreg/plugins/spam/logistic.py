"""Plaintext logistic regression: the reference the private protocol is compared with.

Paper 000, Section 3.1, eq. (1): gradient ascent on the log-likelihood
``L(w) = -sum_i log(1 + exp(-y_i w.x_i))`` with labels ``y_i`` in {-1, +1}:

    w <- w + eta * sum_{i in block} y_i x_i g(y_i w.x_i),   g(z) = 1 / (1 + e^z),

over blocks of ``batch_size`` messages (online: blocks in order; one pass per epoch).

Regulariser (Section 4.2, "Training a regularized classifier"). The paper prints
``w(t+1) = w(t) + eta grad L + 2 lambda w(t)``, i.e. ``E[w]^(1 + 2 lambda)``. That grows
``w`` (and drops ``eta`` from the penalty). Maximising the penalised objective
``L(w) - lambda ||w||^2`` needs ``grad L - 2 lambda w``, so the correct update is

    w(t+1) = (1 - 2 eta lambda) w(t) + eta grad L(w(t)),

which is what :func:`train_logistic` and the private protocol use (``lam`` = lambda).

``link`` selects ``g``: the exact sigmoid weight (default) or any callable, e.g. the
:class:`~privreg.plugins.spam.link.PeriodicSigmoid` the private protocol evaluates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.plugins.spam.link import sigmoid_weight

__all__ = ["train_logistic", "auc", "check_labels", "batches"]


def check_labels(y: Any, n: int | None = None) -> np.ndarray:
    """``y`` as an int64 array of +-1 (of length ``n`` if given)."""
    arr = np.asarray(y)
    if arr.ndim != 1 or not np.all(np.isin(arr, (-1, 1))):
        raise PrivregValueError("labels must be a 1-D array of -1 (ham) and +1 (spam).")
    if n is not None and arr.size != n:
        raise PrivregValueError(f"got {arr.size} labels for {n} messages.")
    return arr.astype(np.int64)


def batches(n: int, batch_size: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of the consecutive blocks of ``batch_size`` (the last may be shorter)."""
    return [(s, min(s + batch_size, n)) for s in range(0, n, batch_size)]


def train_logistic(
    X: Any,
    y: Any,
    *,
    eta: float,
    batch_size: int,
    epochs: int = 1,
    lam: float = 0.0,
    w0: Any = None,
    link: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Weights after ``epochs`` passes of block gradient ascent (module docstring).

    ``w0`` defaults to zeros (the paper's "uniformly initialized" weight vector).
    """
    M = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    n, d = M.shape
    y = check_labels(y, n)
    eta = v.check_real("eta", eta)
    lam = v.check_real("lam", lam)
    if not eta > 0:
        raise PrivregValueError(f"eta must be > 0; got {eta}.")
    if lam < 0 or 2 * eta * lam >= 1:
        raise PrivregValueError(f"lam must satisfy 0 <= 2 eta lam < 1; got lam={lam} with eta={eta}.")
    batch_size = v.check_int("batch_size", batch_size, minimum=1)
    epochs = v.check_int("epochs", epochs, minimum=1)
    g = link or sigmoid_weight
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=np.float64)
    if w.shape != (d,):
        raise PrivregValueError(f"w0 must have {d} entries; got shape {w.shape}.")
    for _ in range(epochs):
        for s, e in batches(n, batch_size):
            Xb, yb = M[s:e], y[s:e]
            z = yb * np.asarray(Xb @ w).ravel()
            grad = np.asarray(Xb.T @ (yb * g(z))).ravel()
            w = (1.0 - 2.0 * eta * lam) * w + eta * grad
    return w


def auc(scores: Any, y: Any) -> float:
    """Area under the ROC curve of ``scores`` for labels ``y`` (+1 positive), ties
    counted one half (Mann-Whitney U)."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = check_labels(y, s.size)
    pos = y == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        raise PrivregValueError("AUC needs both classes among the labels.")
    r = rankdata(s)
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
