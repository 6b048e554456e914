"""Rendering of similitude results: JSON, CSV, terminal table and PNG plots (heatmap, 2-D projection).

The 2-D projection is classical MDS by default (:func:`mds_2d`, distances preserved as well as two
dimensions allow); PCA of the similarity rows (:func:`pca_2d`) is available on request.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from twinspect._io import atomic_write, json_default
from twinspect.code.similitude.analysis import SimilitudeResult
from twinspect.code.similitude.cluster import distances


def to_json(result: SimilitudeResult) -> str:
    """The JSON report (issue 10's contract) as text."""
    return json.dumps(result.to_dict(), indent=2, default=json_default) + "\n"


def to_csv(result: SimilitudeResult) -> str:
    """The matrix as CSV: a header ``path,<path 0>,…`` then one row per program (6 decimals)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["path", *result.paths])
    for p, row in zip(result.paths, result.matrix):
        w.writerow([p, *(f"{v:.6f}" for v in row)])
    return buf.getvalue()


def write_text(text: str, output: str | Path) -> None:
    """Write a rendered report atomically."""
    with atomic_write(output) as fh:
        fh.write(text)


#: 2-D projections of :func:`write_plots` (``--projection``).
PROJECTIONS: tuple[str, ...] = ("mds", "pca")


def mds_2d(similarity: np.ndarray) -> np.ndarray:
    """2-D coordinates of the programs by classical (Torgerson) MDS of ``D = 1 − similarity``.

    The top two eigenvectors of the double-centred ``B = −½ J D² J`` (``J = I − 1/N``), scaled by
    the square roots of their eigenvalues.

    Args:
        similarity: (N, N) similarity matrix.

    Returns:
        float64 (N, 2) (zeros where fewer than 2 positive eigenvalues exist).
    """
    d = distances(similarity)
    n = d.shape[0]
    if n == 0:
        return np.zeros((0, 2))
    j = np.eye(n) - 1.0 / n
    b = -0.5 * j @ (d**2) @ j
    vals, vecs = np.linalg.eigh(b)
    order = np.argsort(vals)[::-1][:2]
    out = np.zeros((n, 2))
    for k, idx in enumerate(order):
        if vals[idx] > 0:
            out[:, k] = vecs[:, idx] * np.sqrt(vals[idx])
    return out


def pca_2d(similarity: np.ndarray) -> np.ndarray:
    """2-D coordinates by PCA (:class:`sklearn.decomposition.PCA`) of the similarity matrix's rows.

    Each program is the vector of its similarities to all compared programs; the rows are centred
    and projected on their first two principal components.

    Args:
        similarity: (N, N) similarity matrix.

    Returns:
        float64 (N, 2) (zero columns where fewer than 2 components exist).
    """
    s = (np.asarray(similarity, dtype=float) + np.asarray(similarity, dtype=float).T) / 2.0
    n = s.shape[0]
    out = np.zeros((n, 2))
    k = min(2, n - 1) if n > 1 else 0
    if k > 0:
        from sklearn.decomposition import PCA

        out[:, :k] = PCA(n_components=k, svd_solver="full").fit_transform(s)
    return out


def write_plots(result: SimilitudeResult, directory: str | Path, projection: str = "mds") -> list[Path]:
    """Write ``heatmap.png`` (the matrix) and ``mds.png`` or ``pca.png`` (2-D scatter coloured by label, else cluster).

    Args:
        result: the analysis.
        directory: output directory (created).
        projection: ``"mds"`` (classical MDS, :func:`mds_2d`) or ``"pca"`` (:func:`pca_2d`).

    Raises:
        InputError: unknown projection, matplotlib is missing or the directory cannot be written.
    """
    from twinspect.errors import InputError
    from twinspect.reports.plots import heatmap, scatter

    if projection not in PROJECTIONS:
        raise InputError(f"unknown projection {projection!r}", hint=f"choose one of: {', '.join(PROJECTIONS)}")
    d = Path(directory)
    names = [Path(p).stem for p in result.paths]
    out = [heatmap(result.matrix, d / "heatmap.png", row_labels=names, col_labels=names,
                   title=f"similitude ({result.measure})", vmin=0.0, vmax=1.0)]
    colour = result.labels if any(lab is not None for lab in result.labels) else [f"cluster {c}" for c in result.clusters]
    if projection == "mds":
        pts, title, axes = mds_2d(result.matrix), "classical MDS of 1 − similarity", ("MDS 1", "MDS 2")
    else:
        pts, title, axes = pca_2d(result.matrix), "PCA of the similarity rows", ("PC 1", "PC 2")
    out.append(scatter(pts, d / f"{projection}.png", labels=colour, title=f"programs, {title} ({result.measure})",
                       xlabel=axes[0], ylabel=axes[1]))
    return out
