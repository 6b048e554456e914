"""PNG figures shared by every capability: matrix heatmaps, labelled 2-D scatters and curves.

matplotlib (the ``plots`` extra) is imported inside each function with the non-interactive ``Agg``
backend, so importing this module is cheap and works without a display. Every figure is written
atomically (:func:`twinspect._io.atomic_path`): a failed plot never leaves a half-written PNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from twinspect._io import atomic_path
from twinspect.errors import InputError


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise InputError("plots need matplotlib: pip install 'twinspect[plots]'") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def heatmap(
    matrix: np.ndarray,
    path: str | Path,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    annotate: bool | None = None,
) -> Path:
    """Write a matrix as a heatmap PNG.

    Args:
        matrix: float array (R, C); NaN cells (a measure that does not apply) are drawn blank.
        path: output ``.png`` file (parent directories are created).
        row_labels / col_labels: tick labels, length R / C (ticks are hidden beyond 60 labels).
        title: figure title.
        vmin, vmax: colour range (default: the finite data range).
        cmap: a matplotlib colour map name.
        annotate: write each value in its cell (default: only when R, C ≤ 12).

    Returns:
        The path written.

    Raises:
        InputError: ``matrix`` is not 2-D, or labels do not match its shape.
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise InputError(f"heatmap needs a 2-D matrix, got shape {m.shape}", path)
    r, c = m.shape
    if (row_labels is not None and len(row_labels) != r) or (col_labels is not None and len(col_labels) != c):
        raise InputError("heatmap labels do not match the matrix shape", path)
    plt = _pyplot()
    side = max(4.0, min(16.0, 0.45 * max(r, c) + 2.5))
    fig, ax = plt.subplots(figsize=(side + 1.2, side))
    try:
        im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                       interpolation="nearest")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        if row_labels is not None and r <= 60:
            ax.set_yticks(range(r), labels=list(row_labels), fontsize=8)
        if col_labels is not None and c <= 60:
            ax.set_xticks(range(c), labels=list(col_labels), fontsize=8, rotation=60, ha="right")
        if annotate if annotate is not None else max(r, c) <= 12:
            for i in range(r):
                for j in range(c):
                    if np.isfinite(m[i, j]):
                        ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7, color="w")
        if title:
            ax.set_title(title)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def scatter(
    points: np.ndarray,
    path: str | Path,
    labels: Sequence[Any] | None = None,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
) -> Path:
    """Write a 2-D scatter PNG, one colour per distinct label (with a legend up to 20 labels).

    Args:
        points: float array (N, 2).
        path: output ``.png`` file.
        labels: length-N labels (any hashable; ``None`` entries drawn grey), or ``None``.
        title, xlabel, ylabel: texts.

    Returns:
        The path written.

    Raises:
        InputError: ``points`` is not (N, 2) or ``labels`` has another length.
    """
    p = np.asarray(points, dtype=float)
    if p.ndim != 2 or p.shape[1] != 2:
        raise InputError(f"scatter needs (N, 2) points, got shape {p.shape}", path)
    if labels is not None and len(labels) != len(p):
        raise InputError("scatter labels do not match the number of points", path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 6))
    try:
        if labels is None:
            ax.scatter(p[:, 0], p[:, 1], s=12)
        else:
            lab = np.array([str(v) if v is not None else "" for v in labels], dtype=object)
            uniq = sorted(set(lab.tolist()))
            cmap = plt.get_cmap("tab20", max(len(uniq), 1))
            for k, name in enumerate(uniq):
                sel = lab == name
                ax.scatter(p[sel, 0], p[sel, 1], s=12, color="0.6" if name == "" else cmap(k), label=name or "(none)")
            if len(uniq) <= 20:
                ax.legend(fontsize=7, markerscale=1.5, loc="best")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def curves(
    x: Sequence[float],
    series: dict[str, Sequence[float]],
    path: str | Path,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
) -> Path:
    """Write line plots of several series over a shared x axis (e.g. coverage over time) as a PNG.

    Args:
        x: length-T x values.
        series: name → length-T y values.
        path: output ``.png`` file.
        title, xlabel, ylabel: texts.

    Returns:
        The path written.

    Raises:
        InputError: a series has a length other than ``len(x)``.
    """
    for name, ys in series.items():
        if len(ys) != len(x):
            raise InputError(f"series {name!r} has {len(ys)} values for {len(x)} x values", path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        for name, ys in series.items():
            ax.plot(list(x), list(ys), label=name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if series:
            ax.legend(fontsize=8)
        if title:
            ax.set_title(title)
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    return path
