"""Whole-program similitude analysis: load programs, build CFGs, score all pairs, cluster.

:func:`analyze` is the API behind ``twinspect similitude``; its :class:`SimilitudeResult` renders to the
JSON contract of issue 10 with :meth:`SimilitudeResult.to_dict`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from twinspect.code.files import discover, scan_base
from twinspect.code.similitude.cfg import ProgramGraph, load_program, load_program_dir
from twinspect.code.similitude.cluster import agglomerative, best_clusters, silhouette
from twinspect.code.similitude.measures import MEASURES, canonical_measure, similarity_matrix
from twinspect.errors import InputError


@dataclass
class SimilitudeResult:
    """Result of :func:`analyze`.

    Attributes:
        measure: the measure's name.
        graphs: the scored programs' graphs (order of the matrix rows).
        paths: their paths relative to the scan base (POSIX separators).
        labels: per program, its label or None.
        matrix: float64 (N, N) similarity, symmetric, in [0, 1].
        silhouette: over labelled programs on ``1 − matrix``, or None (fewer than two labels).
        clusters: int (N,) agglomerative cluster ids.
        k: number of clusters.
        skipped: ``{"path", "reason"}`` for programs left out (e.g. unparsable files).
        scan: file-discovery counters (:meth:`twinspect.code.files.ScanStats.to_dict`): files not
            considered at all (unsupported extension, too large, binary…) are counted there.
        details: measure-specific facts, e.g. ``{"lav": LavResult.summary()}`` (ε, iteration cap,
            mean and largest iterations, pairs that hit the cap).
    """

    measure: str
    graphs: list[ProgramGraph]
    paths: list[str]
    labels: list[str | None]
    matrix: np.ndarray
    silhouette: float | None
    clusters: np.ndarray
    k: int
    skipped: list[dict] = field(default_factory=list)
    scan: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON contract: measure, programs, matrix, silhouette, clusters, skipped (+ k, scan, details)."""
        return {
            "measure": self.measure,
            "programs": [
                {"id": i, "path": p, "label": lab, "functions": len(g.functions), "nodes": g.n_nodes,
                 "edges": g.n_edges}
                for i, (p, lab, g) in enumerate(zip(self.paths, self.labels, self.graphs))
            ],
            "matrix": np.round(self.matrix, 6).tolist(),
            "silhouette": self.silhouette,
            "clusters": [int(c) for c in self.clusters],
            "k": self.k,
            "skipped": self.skipped,
            "scan": self.scan,
            "details": self.details,
        }


def read_labels_csv(path: str | Path) -> dict[str, str]:
    """Read a labels CSV: rows ``path,label`` (a header row ``path,label`` is allowed).

    Raises:
        InputError: unreadable file or a row without two columns.
    """
    p = Path(path)
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise InputError(f"cannot read labels file: {exc.strerror or exc}", p) from exc
    except UnicodeDecodeError as exc:
        raise InputError("labels file is not UTF-8 text", p) from exc
    out: dict[str, str] = {}
    for n, row in enumerate(rows, 1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < 2:
            raise InputError(f"line {n}: expected 'path,label'", p)
        if n == 1 and row[0].strip().lower() == "path" and row[1].strip().lower() == "label":
            continue
        out[row[0].strip()] = row[1].strip()
    return out


def analyze(
    paths: Sequence[str | Path],
    measure: str = "wl-tokens",
    labels: str | None = None,
    program_per_dir: bool = False,
    clusters: int | None = None,
    language: str | None = None,
    verbose: int = 0,
    workers: int | None = None,
) -> SimilitudeResult:
    """Score every pair of programs under ``paths`` and cluster them.

    Args:
        paths: files and directories (discovered as by ``twinspect clones``); one program per file,
            or per directory holding source files with ``program_per_dir``.
        measure: one of :data:`~twinspect.code.similitude.measures.MEASURES`.
        labels: ``"dirs"`` (label = the program's parent directory name), a CSV file of
            ``path,label`` rows (paths relative to the scan base, as reported, or as given), or None.
        program_per_dir: group the files of each directory into one program.
        clusters: number of agglomerative clusters, or None to choose 2..10 by silhouette.
        language: force a language for every file.
        verbose: > 0 shows progress on stderr.
        workers: worker processes for LAV (None = :func:`~twinspect.code.similitude.lav.default_workers`);
            the other measures run in this process.

    Returns:
        A :class:`SimilitudeResult`. Files that do not parse are in ``skipped`` and not scored.

    Raises:
        InputError: a missing path, an unknown measure, ``workers < 1``, a labels CSV naming
            unknown files, or fewer than two programs to compare (an empty tree, or all but one
            file unparsable).
    """
    measure = canonical_measure(measure)
    if measure not in MEASURES:
        raise InputError(f"unknown measure {measure!r}", hint=f"choose one of: {', '.join(MEASURES)}")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    label_map = None
    if labels is not None and labels != "dirs":
        label_map = read_labels_csv(labels)
    files, stats = discover(paths, language=language)
    base = scan_base(paths)
    units: list[tuple[str, Path, list[tuple[Path, str]]]] = []
    if program_per_dir:
        groups: dict[str, list[tuple[Path, str]]] = {}
        for f in files:
            groups.setdefault(os.path.dirname(f.rel) or ".", []).append((f.path, f.language))
        for rel, fs in sorted(groups.items()):
            units.append((rel, Path(base) / rel, fs))
    else:
        units = [(f.rel, f.path, [(f.path, f.language)]) for f in files]
    graphs: list[ProgramGraph] = []
    rels: list[str] = []
    skipped: list[dict] = []
    for rel, full, fs in units:
        try:
            g = load_program_dir(full, fs) if program_per_dir else load_program(fs[0][0], fs[0][1])
        except InputError as exc:
            skipped.append({"path": rel, "reason": exc.message})
            continue
        graphs.append(g)
        rels.append(rel)
    if len(graphs) < 2:
        where = ", ".join(str(p) for p in paths)
        if not units:
            raise InputError("no source file to compare (similitude needs at least two programs)", where)
        raise InputError(f"{len(graphs)} program parsed ({len(skipped)} skipped): similitude needs at least two",
                         where, hint=(f"first skipped: {skipped[0]['path']}: {skipped[0]['reason']}"
                                      if skipped else None))
    labs: list[str | None]
    if labels == "dirs":
        labs = [Path(full_rel).parent.name or Path(base).name for full_rel in
                ((Path(base) / r).as_posix() for r in rels)]
    elif label_map is not None:
        known = {r for r, _, _ in units}
        resolved: dict[str, str] = {}
        for key, lab in label_map.items():
            rel = key.replace(os.sep, "/")
            if rel not in known:
                ap = os.path.abspath(key)
                rel = os.path.relpath(ap, base).replace(os.sep, "/") if os.path.isabs(key) or os.path.exists(ap) else rel
            if rel not in known:
                raise InputError(f"labels file names {key!r}, which is not among the programs", labels)
            resolved[rel] = lab
        labs = [resolved.get(r) for r in rels]
    else:
        labs = [None] * len(rels)
    details: dict = {}
    if measure == "lav":
        from twinspect.code.similitude.lav import lav

        res = lav(graphs, workers=workers, verbose=verbose)
        matrix, details = res.matrix, {"lav": res.summary()}
    else:
        matrix = similarity_matrix(graphs, measure, verbose=verbose)
    sil = silhouette(matrix, labs) if graphs else None
    if clusters is not None:
        cl = agglomerative(matrix, clusters) if graphs else np.zeros(0, dtype=np.int64)
        k = clusters
    else:
        cl, k, _ = best_clusters(matrix)
    return SimilitudeResult(measure=measure, graphs=graphs, paths=rels, labels=labs, matrix=matrix,
                            silhouette=sil, clusters=cl, k=k, skipped=skipped,
                            scan=stats.to_dict(), details=details)
