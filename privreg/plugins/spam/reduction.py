"""Dimensionality reduction of the sparse binary 4-gram features (paper 000, Section 6.4).

Every reducer maps an ``n x D`` feature matrix to ``n x k``; ``fit`` sees the data only
where the method needs it. In the multi-party setting every party must apply the *same*
reduction to its own messages, so what ``fit`` learns must be public:

- :class:`HashSpace` (fold indices modulo ``k``), :class:`LSH` (random hyperplanes from a
  public seed) and :class:`UniformSampling` (a public random subset of features) are
  data-independent: ``fit`` ignores the data.
- :class:`DocumentFrequency` (keep features seen in at least ``min_df`` messages, or the
  ``k`` most frequent) and :class:`MultinomialSampling` (sample features with probability
  proportional to document frequency) need document frequencies. The paper counts them
  among the data-independent methods; they are not: the frequencies must come from
  public data or be released privately before they can be shared.
- :class:`PCA` is the data-dependent baseline (Table 5): its projection reveals the data.

Public randomness (LSH hyperplanes, feature samples) comes from a seeded numpy generator:
it is a public parameter every party must reproduce, not privacy noise.

LSH: ``k`` hyperplanes through the origin; output bit ``l`` is 1 when a message lies on
the positive side of hyperplane ``l`` (Charikar 2002). With ``D = 10^6`` dense Gaussian
hyperplanes would need ``D k`` numbers (the paper's Table 6: 40 GB), so the hyperplanes
are *very sparse* random projections (Li, Hastie and Church 2006): entries ``+-1`` with
probability ``density / 2`` each (default ``density = 1/sqrt(D)``), which preserve angles
asymptotically like Gaussian ones; ``density=1.0`` gives dense ``+-1`` hyperplanes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, svds

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = [
    "Reducer",
    "HashSpace",
    "LSH",
    "UniformSampling",
    "MultinomialSampling",
    "DocumentFrequency",
    "PCA",
    "REDUCERS",
    "make_reducer",
    "document_frequency",
]


def _csr(X: Any) -> sp.csr_matrix:
    if sp.issparse(X):
        return sp.csr_matrix(X)
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise PrivregValueError(f"X must be a 2-D matrix; got shape {arr.shape}.")
    return sp.csr_matrix(arr)


def _binary(M: sp.spmatrix) -> sp.csr_matrix:
    M = sp.csr_matrix(M)
    M.eliminate_zeros()
    M.data = np.ones_like(M.data, dtype=np.int8)
    return sp.csr_matrix(M, dtype=np.int8)


def document_frequency(X: Any) -> np.ndarray:
    """Number of rows (messages) in which each column (feature) is nonzero."""
    M = _csr(X)
    return np.bincount(M.indices, minlength=M.shape[1]).astype(np.int64)


class Reducer(ABC):
    """``fit(X)`` then ``transform(X)``; ``data_dependent`` says whether ``fit`` reads X."""

    data_dependent: bool = False
    k: int

    def __init__(self) -> None:
        self._D: int | None = None

    def fit(self, X: Any) -> Reducer:
        M = _csr(X)
        self._D = M.shape[1]
        self._fit(M)
        return self

    def _fit(self, X: sp.csr_matrix) -> None:
        """Learn what the reduction needs (data-independent reducers use only the width)."""

    def transform(self, X: Any) -> Any:
        M = _csr(X)
        if self._D is None:
            raise PrivregValueError(f"{type(self).__name__} must be fitted first: call fit(X_train).")
        if M.shape[1] != self._D:
            raise PrivregValueError(f"X has {M.shape[1]} columns; the reducer was fitted on {self._D}.")
        return self._transform(M)

    @abstractmethod
    def _transform(self, X: sp.csr_matrix) -> Any:
        """The reduced matrix."""

    def fit_transform(self, X: Any) -> Any:
        return self.fit(X).transform(X)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k})"


def _k(k: Any) -> int:
    return v.check_int("k", k, minimum=1)


class HashSpace(Reducer):
    """Fold feature ``j`` onto ``j mod k`` (binary OR): a smaller hash space (6.4 item 3)."""

    def __init__(self, *, k: int) -> None:
        super().__init__()
        self.k = _k(k)

    def _transform(self, X: sp.csr_matrix) -> sp.csr_matrix:
        coo = X.tocoo()
        M = sp.csr_matrix((np.ones(coo.nnz, dtype=np.int64), (coo.row, coo.col % self.k)), shape=(X.shape[0], self.k))
        M.sum_duplicates()
        return _binary(M)


class LSH(Reducer):
    """``k`` random hyperplanes (public ``seed``); bit ``l`` = [x . r_l > 0] (6.4 item 2)."""

    def __init__(self, *, k: int, seed: int = 0, density: float | None = None, chunk_rows: int = 512) -> None:
        super().__init__()
        self.k = _k(k)
        self.seed = v.check_int("seed", seed, minimum=0)
        if density is not None:
            density = v.check_probability("density", density, open_low=True)
        self.density = density
        self.chunk_rows = v.check_int("chunk_rows", chunk_rows, minimum=1)
        self.planes: sp.csc_matrix | None = None

    def _fit(self, X: sp.csr_matrix) -> None:
        D = X.shape[1]
        rho = self.density if self.density is not None else min(1.0, 1.0 / np.sqrt(D))
        rng = np.random.default_rng(self.seed)  # public randomness shared by all parties
        per_plane = rng.binomial(D, rho, size=self.k)
        cols = np.repeat(np.arange(self.k), per_plane)
        rows = np.concatenate([rng.choice(D, size=c, replace=False) for c in per_plane]) if cols.size else cols
        signs = rng.choice(np.array([-1, 1], dtype=np.int8), size=cols.size)
        self.planes = sp.csc_matrix((signs.astype(np.int32), (rows, cols)), shape=(D, self.k))

    def _transform(self, X: sp.csr_matrix) -> sp.csr_matrix:
        if self.planes is None:  # transform() checks it first
            raise PrivregValueError(f"{type(self).__name__} must be fitted first: call fit(X_train).")
        blocks = []
        for start in range(0, X.shape[0], self.chunk_rows):
            proj = (X[start : start + self.chunk_rows].astype(np.int32) @ self.planes).toarray()
            blocks.append(sp.csr_matrix((proj > 0).astype(np.int8)))
        return sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, self.k), dtype=np.int8)


class UniformSampling(Reducer):
    """Draw features uniformly until ``k`` distinct ones are chosen (6.4 item 5): a public
    random subset of the columns (``seed``)."""

    def __init__(self, *, k: int, seed: int = 0) -> None:
        super().__init__()
        self.k = _k(k)
        self.seed = v.check_int("seed", seed, minimum=0)
        self.columns: np.ndarray | None = None

    def _fit(self, X: sp.csr_matrix) -> None:
        if self.k > X.shape[1]:
            raise PrivregValueError(f"k={self.k} exceeds the {X.shape[1]} features; choose k <= {X.shape[1]}.")
        rng = np.random.default_rng(self.seed)
        self.columns = np.sort(rng.choice(X.shape[1], size=self.k, replace=False))

    def _transform(self, X: sp.csr_matrix) -> sp.csr_matrix:
        return _binary(X[:, self.columns])


class MultinomialSampling(Reducer):
    """Draw features from the multinomial fitted to document frequencies until ``k``
    distinct ones are chosen (6.4 item 6). Successive draws without replacement with
    probabilities proportional to document frequency, by the Efraimidis-Spirakis keys
    ``u^(1/df)`` (the same distribution as drawing until ``k`` are distinct)."""

    data_dependent = True

    def __init__(self, *, k: int, seed: int = 0) -> None:
        super().__init__()
        self.k = _k(k)
        self.seed = v.check_int("seed", seed, minimum=0)
        self.columns: np.ndarray | None = None

    def _fit(self, X: sp.csr_matrix) -> None:
        df = document_frequency(X).astype(np.float64)
        seen = np.flatnonzero(df > 0)
        rng = np.random.default_rng(self.seed)
        if seen.size <= self.k:
            rest = np.setdiff1d(np.arange(X.shape[1]), seen)
            extra = rng.choice(rest, size=min(self.k - seen.size, rest.size), replace=False)
            self.columns = np.sort(np.concatenate([seen, extra]))
            return
        keys = np.log(rng.random(seen.size)) / df[seen]  # log(u^(1/w)): larger is earlier
        self.columns = np.sort(seen[np.argsort(-keys, kind="stable")[: self.k]])

    def _transform(self, X: sp.csr_matrix) -> sp.csr_matrix:
        return _binary(X[:, self.columns])


class DocumentFrequency(Reducer):
    """Keep features occurring in at least ``min_df`` messages (6.4 item 4); with ``k``,
    the ``k`` most frequent (ties: lower index first)."""

    data_dependent = True

    def __init__(self, *, k: int | None = None, min_df: int = 1) -> None:
        super().__init__()
        self.min_df = v.check_int("min_df", min_df, minimum=1)
        self.k = _k(k) if k is not None else 0
        self.columns: np.ndarray | None = None

    def _fit(self, X: sp.csr_matrix) -> None:
        df = document_frequency(X)
        cols = np.flatnonzero(df >= self.min_df)
        if self.k:
            order = np.lexsort((cols, -df[cols]))
            cols = np.sort(cols[order[: self.k]])
        if cols.size == 0:
            raise PrivregValueError(f"no feature occurs in min_df={self.min_df} messages; lower min_df.")
        self.columns = cols
        if not self.k:
            self.k = int(cols.size)

    def _transform(self, X: sp.csr_matrix) -> sp.csr_matrix:
        return _binary(X[:, self.columns])


class PCA(Reducer):
    """Principal components (the data-dependent baseline, Table 5): the top ``k``
    right singular vectors of the centred training matrix (computed without densifying
    it). Outputs real scores, divided by a scale fitted so that training scores lie in
    [-1, 1] (the private protocol encodes them in fixed point)."""

    data_dependent = True

    def __init__(self, *, k: int, seed: int = 0) -> None:
        super().__init__()
        self.k = _k(k)
        self.seed = v.check_int("seed", seed, minimum=0)
        self.components: np.ndarray | None = None
        self.mean: np.ndarray | None = None
        self.scale = 1.0

    def _fit(self, X: sp.csr_matrix) -> None:
        n, D = X.shape
        if not self.k < min(n, D):
            raise PrivregValueError(f"PCA needs k < min(n, D) = {min(n, D)}; got k={self.k}.")
        Xf = X.astype(np.float64)
        mu = np.asarray(Xf.mean(axis=0)).ravel()
        ones = np.ones(n)
        op = LinearOperator(
            (n, D),
            dtype=np.float64,
            matvec=lambda b: Xf @ np.ravel(b) - ones * (mu @ np.ravel(b)),
            rmatvec=lambda b: Xf.T @ np.ravel(b) - mu * np.ravel(b).sum(),
        )
        v0 = np.random.default_rng(self.seed).standard_normal(min(n, D))  # public start vector
        _, s, vt = svds(op, k=self.k, v0=v0)
        order = np.argsort(-s)
        comps = vt[order]
        signs = np.sign(comps[np.arange(self.k), np.argmax(np.abs(comps), axis=1)])
        self.components = comps * signs[:, None]  # deterministic sign
        self.mean = mu
        scores = Xf @ self.components.T - (mu @ self.components.T)[None, :]
        self.scale = float(np.max(np.abs(scores))) or 1.0

    def _transform(self, X: sp.csr_matrix) -> np.ndarray:
        if self.components is None or self.mean is None:  # transform() checks it first
            raise PrivregValueError(f"{type(self).__name__} must be fitted first: call fit(X_train).")
        Xf = X.astype(np.float64)
        return (Xf @ self.components.T - (self.mean @ self.components.T)[None, :]) / self.scale


REDUCERS = {
    "none": None,
    "hash": HashSpace,
    "lsh": LSH,
    "uniform": UniformSampling,
    "multinomial": MultinomialSampling,
    "df": DocumentFrequency,
    "pca": PCA,
}


def make_reducer(name: str, *, k: int, seed: int = 0) -> Reducer | None:
    """The reducer called ``name`` (see :data:`REDUCERS`) with target dimension ``k``."""
    if not isinstance(name, str):
        raise PrivregTypeError(f"reduction must be a str; got {type(name).__name__}.")
    if name not in REDUCERS:
        raise PrivregValueError(f"reduction must be one of {sorted(REDUCERS)}; got {name!r}.")
    if name == "none":
        return None
    if name == "hash":
        return HashSpace(k=k)
    if name == "df":
        return DocumentFrequency(k=k)
    if name == "lsh":
        return LSH(k=k, seed=seed)
    if name == "uniform":
        return UniformSampling(k=k, seed=seed)
    if name == "multinomial":
        return MultinomialSampling(k=k, seed=seed)
    return PCA(k=k, seed=seed)
