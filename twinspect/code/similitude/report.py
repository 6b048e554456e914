"""Rendering of similitude results: JSON, CSV, terminal table and PNG plots (heatmap, PCA scatter)."""

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


def pca_2d(similarity: np.ndarray) -> np.ndarray:
    """2-D coordinates of the programs: classical MDS (PCA of the double-centred ``−½ D²``).

    Args:
        similarity: (N, N) similarity matrix.

    Returns:
        float64 (N, 2) (zeros where fewer than 2 positive components exist).
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


def write_plots(result: SimilitudeResult, directory: str | Path) -> list[Path]:
    """Write ``heatmap.png`` (the matrix) and ``pca.png`` (2-D scatter coloured by label, else cluster).

    Raises:
        InputError: matplotlib is missing or the directory cannot be written.
    """
    from twinspect.reports.plots import heatmap, scatter

    d = Path(directory)
    names = [Path(p).stem for p in result.paths]
    out = [heatmap(result.matrix, d / "heatmap.png", row_labels=names, col_labels=names,
                   title=f"similitude ({result.measure})", vmin=0.0, vmax=1.0)]
    colour = result.labels if any(lab is not None for lab in result.labels) else [f"cluster {c}" for c in result.clusters]
    out.append(scatter(pca_2d(result.matrix), d / "pca.png", labels=colour,
                       title=f"programs, 2-D PCA of 1 − similarity ({result.measure})", xlabel="PC 1", ylabel="PC 2"))
    return out
