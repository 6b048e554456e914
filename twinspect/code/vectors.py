"""Fragment embeddings behind one interface: dense (numpy) or sparse (CSR) rows, L2-normalised.

The lexical encoder's hashed TF-IDF vectors have 2,048 columns but about 140 non-zeros per
function (stdlib ``email``: mean 144, p99 374), so a dense float32 matrix spends 8 KB per fragment
where CSR spends about 1.2 KB: on issue 23's 13-MLOC tree the dense matrix alone was several GB.
The clone pipeline keeps the encoder's own form and asks this class for what it needs — dense rows
of a few ids (an index, a block of queries), the cosine of many pairs at once, one cosine — so
neural encoders (dense) and the lexical one (sparse) share the code.

:func:`reduce_dim` gives the low-dimensional dense view an approximate index is built on (truncated
SVD, scikit-learn's randomized solver, fitted on a seeded sample), whose neighbours are then
re-scored with the exact cosine of the full vectors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

#: Pairs whose cosine is computed at once by :meth:`FragmentVectors.pair_cosines` (bounds memory).
_PAIR_CHUNK = 1 << 14  # pairs per sparse row-product call: 1 << 16 held 0.6 GB of gathered rows on a 13-MLOC tree


def _normalised_csr(m: sp.spmatrix) -> sp.csr_matrix:
    m = sp.csr_matrix(m, dtype=np.float32)
    m.sum_duplicates()
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1), dtype=np.float64).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags((1.0 / norms).astype(np.float32)) @ m, dtype=np.float32)


def rowdot(m: sp.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Inner product of rows ``a[i]`` and ``b[i]`` of one sparse matrix, for each i.

    Args:
        m: (N, d) float CSR matrix.
        a, b: int (P,) row ids.

    Returns:
        (P,) array of ``m``'s dtype.
    """
    return np.asarray(m[a].multiply(m[b]).sum(axis=1)).ravel()


class FragmentVectors:
    """N fragment vectors of dimension d, each row L2-normalised (a zero row stays zero).

    Args:
        matrix: float (N, d) numpy array or scipy sparse matrix. Rows are re-normalised here; the
            input is not modified. Sparse input is kept as float32 CSR, dense as float32 C-order.

    Raises:
        ValueError: ``matrix`` is not two-dimensional.
    """

    def __init__(self, matrix: Any):
        self._ids: np.ndarray | None = None  # a subset view: position -> row of the shared matrix
        if sp.issparse(matrix):
            self._m: Any = _normalised_csr(matrix)
            self.sparse = True
        else:
            m = np.asarray(matrix, dtype=np.float32)
            if m.ndim != 2:
                raise ValueError(f"vectors must be two-dimensional, got shape {m.shape}")
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            self._m = np.ascontiguousarray(m / norms, dtype=np.float32)
            self.sparse = False
        self.shape: tuple[int, int] = (int(self._m.shape[0]), int(self._m.shape[1]))

    def __len__(self) -> int:
        return self.shape[0]

    def subset(self, ids: Any) -> FragmentVectors:
        """A view of the rows ``ids`` (no copy of the matrix): position i of the view is row ``ids[i]``."""
        ids = np.asarray(ids, dtype=np.int64)
        view = object.__new__(FragmentVectors)
        view._m, view.sparse = self._m, self.sparse
        view._ids = self._matrix_rows(ids)
        view.shape = (len(ids), self.shape[1])
        return view

    def _matrix_rows(self, ids: Any) -> Any:
        """Rows of the shared matrix behind positions ``ids`` (int array or int)."""
        return ids if self._ids is None else self._ids[ids]

    @property
    def dim(self) -> int:
        """Number of columns d."""
        return self.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the matrix (data and, for CSR, its index arrays)."""
        if self.sparse:
            return int(self._m.data.nbytes + self._m.indices.nbytes + self._m.indptr.nbytes)
        return int(self._m.nbytes)

    def rows(self, ids: Any) -> Any:
        """The rows of ``ids`` in their native form: float32 (len(ids), d), CSR when sparse."""
        ids = np.asarray(ids, dtype=np.int64)
        return self._m[self._matrix_rows(ids)]

    def dense(self, ids: Any) -> np.ndarray:
        """The rows of ``ids`` as a dense float32 (len(ids), d) C-order array."""
        r = self.rows(ids)
        return np.ascontiguousarray(r.toarray() if self.sparse else r, dtype=np.float32)

    def cross(self, ids_a: Any, ids_b: Any) -> np.ndarray:
        """Cosines of every row of ``ids_a`` with every row of ``ids_b``: float32 (|a|, |b|)."""
        prod = self.rows(ids_a) @ self.rows(ids_b).T
        return np.asarray(prod.toarray() if sp.issparse(prod) else prod, dtype=np.float32)

    def cross_all(self, ids: Any) -> np.ndarray:
        """Cosines of the rows ``ids`` with every row (position) of these vectors: float32 (len(ids), N).

        Sparse vectors are multiplied as ``matrix @ rows.T`` and transposed back, which transposes
        only the few query rows: ``rows @ matrix.T`` made scipy convert the whole transposed matrix
        to CSR for every call (0.3 GB per 32-query block on issue 23's 13-MLOC tree). Both orders
        sum each cosine's products in ascending column order, so the values are the same bits.
        """
        if self.sparse:
            prod = np.asarray((self._m @ self.rows(ids).T).toarray(), dtype=np.float32).T
        else:
            prod = np.asarray(self.rows(ids) @ self._m.T, dtype=np.float32)
        return np.ascontiguousarray(prod if self._ids is None else prod[:, self._ids])

    def pair_cosines(self, a: Any, b: Any) -> np.ndarray:
        """Cosine of each pair ``(a[i], b[i])``, clipped to [-1, 1].

        Args:
            a, b: int (P,) row ids.

        Returns:
            float32 (P,).
        """
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        out = np.empty(len(a), dtype=np.float32)
        for lo in range(0, len(a), _PAIR_CHUNK):
            ca, cb = a[lo:lo + _PAIR_CHUNK], b[lo:lo + _PAIR_CHUNK]
            if not self.sparse:
                out[lo:lo + len(ca)] = np.einsum("ij,ij->i", self.rows(ca), self.rows(cb))
                continue
            out[lo:lo + len(ca)] = rowdot(self._m, self._matrix_rows(ca), self._matrix_rows(cb))
        return np.clip(out, -1.0, 1.0)

    def cosine(self, a: int, b: int) -> float:
        """Cosine of rows ``a`` and ``b``, clipped to [-1, 1]."""
        a, b = int(self._matrix_rows(a)), int(self._matrix_rows(b))
        if self.sparse:
            v = float(self._m[a].multiply(self._m[b]).sum())
        else:
            v = float(self._m[a] @ self._m[b])
        return max(-1.0, min(1.0, v))


def as_vectors(vecs: Any) -> FragmentVectors:
    """``vecs`` itself when it is a :class:`FragmentVectors`, else one built from the array/matrix."""
    return vecs if isinstance(vecs, FragmentVectors) else FragmentVectors(vecs)


def reduce_dim(vecs: FragmentVectors, ids: Any, dim: int, *, seed: int = 0, sample: int = 20_000,
               chunk: int = 50_000) -> np.ndarray:
    """A low-dimensional dense view of some rows for an approximate index: truncated SVD, rows re-normalised.

    The projection (scikit-learn ``TruncatedSVD``, randomized solver, ``random_state=seed``) is
    fitted on at most ``sample`` rows drawn with ``seed`` and applied to every row in chunks, so
    neither the fit nor the result needs the full dense matrix. Inner products of the results
    approximate the cosines of the full vectors; callers re-score the neighbours they keep with
    :meth:`FragmentVectors.pair_cosines`. :func:`reduce_dim_chunks` gives the same rows a chunk at a
    time (for an index filled chunk by chunk, without the whole result held beside it).

    Args:
        vecs: the full vectors.
        ids: int (n,) rows to project.
        dim: output dimension (≥ 1; when it is not below ``vecs.dim`` the rows are returned dense).
        seed: seed of the sample and of the solver.
        sample: rows the SVD is fitted on.
        chunk: rows projected at once.

    Returns:
        float32 (n, min(dim, d)) C-order array, rows L2-normalised.

    Raises:
        ValueError: ``dim < 1``.
    """
    parts = list(reduce_dim_chunks(vecs, ids, dim, seed=seed, sample=sample, chunk=chunk))  # one at least
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def reduce_dim_chunks(vecs: FragmentVectors, ids: Any, dim: int, *, seed: int = 0, sample: int = 20_000,
                      chunk: int = 50_000) -> Iterator[np.ndarray]:
    """:func:`reduce_dim`'s rows, ``chunk`` rows at a time (same values, same order).

    Args and Raises: as :func:`reduce_dim` (the projection is fitted before the first chunk).

    Yields:
        float32 (≤ chunk, min(dim, d)) C-order arrays, rows L2-normalised.
    """
    from sklearn.decomposition import TruncatedSVD

    if dim < 1:
        raise ValueError(f"the reduced dimension must be at least 1, got {dim}")
    ids = np.asarray(ids, dtype=np.int64)
    if dim >= vecs.dim or len(ids) <= dim:
        yield vecs.dense(ids)
        return
    rng = np.random.default_rng(seed)
    fit_rows = np.sort(rng.choice(ids, size=min(sample, len(ids)), replace=False))
    svd = TruncatedSVD(n_components=dim, algorithm="randomized", random_state=seed)
    svd.fit(vecs.rows(fit_rows))
    comp = np.ascontiguousarray(svd.components_.T, dtype=np.float32)  # (d, dim)
    for lo in range(0, len(ids), chunk):
        out = np.ascontiguousarray(vecs.rows(ids[lo:lo + chunk]) @ comp, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        yield out
