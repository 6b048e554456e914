"""Silhouette on similarity matrices and agglomerative clustering of programs.

Distances are ``1 − similarity`` with a zero diagonal (a program is at distance 0 from itself even
when a raw measure such as node-sym is below 1 on its diagonal). Silhouette is scikit-learn's
``silhouette_score(..., metric="precomputed")`` (Rousseeuw 1987); clusters are scikit-learn's
average-linkage :class:`~sklearn.cluster.AgglomerativeClustering` on the precomputed distances.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from twinspect.errors import InputError


def distances(similarity: np.ndarray) -> np.ndarray:
    """``1 − similarity`` clipped to [0, 1], symmetrised, with a zero diagonal (float64, (N, N))."""
    s = np.asarray(similarity, dtype=float)
    d = np.clip(1.0 - (s + s.T) / 2.0, 0.0, 1.0)
    np.fill_diagonal(d, 0.0)
    return d


def silhouette(similarity: np.ndarray, labels: Sequence[str | None]) -> float | None:
    """Mean silhouette of the labelled programs on distance ``1 − similarity``.

    Args:
        similarity: (N, N) similarity matrix.
        labels: length-N labels; ``None`` entries (unlabelled programs) are left out.

    Returns:
        The silhouette in [−1, 1], or None when fewer than two distinct labels remain or every
        labelled program has its own label (silhouette is undefined).

    Raises:
        InputError: ``labels`` does not match the matrix.
    """
    s = np.asarray(similarity, dtype=float)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or len(labels) != s.shape[0]:
        raise InputError(f"silhouette needs an (N, N) matrix and N labels, got {s.shape} and {len(labels)}")
    keep = [i for i, lab in enumerate(labels) if lab is not None]
    labs = [labels[i] for i in keep]
    n_labels = len(set(labs))
    if n_labels < 2 or n_labels >= len(labs):
        return None
    from sklearn.metrics import silhouette_score

    d = distances(s[np.ix_(keep, keep)])
    return float(silhouette_score(d, labs, metric="precomputed"))


def agglomerative(similarity: np.ndarray, k: int) -> np.ndarray:
    """Average-linkage agglomerative clusters on ``1 − similarity``.

    Args:
        similarity: (N, N) matrix.
        k: number of clusters (1 ≤ k ≤ N).

    Returns:
        int64 array (N,) of cluster ids 0..k−1.

    Raises:
        InputError: ``k`` is out of range.
    """
    n = np.asarray(similarity).shape[0]
    if not 1 <= k <= max(n, 1):
        raise InputError(f"--clusters must be between 1 and the number of programs ({n}), got {k}")
    if n <= 1 or k == 1:
        return np.zeros(n, dtype=np.int64)
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(n_clusters=k, metric="precomputed", linkage="average")
    return model.fit_predict(distances(similarity)).astype(np.int64)


def best_clusters(similarity: np.ndarray, k_min: int = 2, k_max: int = 10) -> tuple[np.ndarray, int, float | None]:
    """Agglomerative clusters with the number of clusters chosen by silhouette.

    Args:
        similarity: (N, N) matrix.
        k_min, k_max: the range of cluster counts tried (clipped to 2..N−1).

    Returns:
        ``(clusters, k, silhouette)``; for N < 3 all programs form one cluster and silhouette is None.
    """
    n = np.asarray(similarity).shape[0]
    hi = min(k_max, n - 1)
    if hi < max(k_min, 2):
        return np.zeros(n, dtype=np.int64), 1, None
    best: tuple[np.ndarray, int, float | None] = (np.zeros(n, dtype=np.int64), 1, None)
    for k in range(max(k_min, 2), hi + 1):
        c = agglomerative(similarity, k)
        score = silhouette(similarity, [str(x) for x in c])
        if score is not None and (best[2] is None or score > best[2]):
            best = (c, k, score)
    return best
