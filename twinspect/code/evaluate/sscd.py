"""SSCD Company-C (Chochlov et al., "Using a Nearest-Neighbour, BERT-Based Approach for Scalable
Clone Detection", ICSME 2022): labels, pair scoring, query mode and the runner.

Recall is over the labelled pairs; precision is over the reported pairs one of whose sides matches a
labelled *private* range (:mod:`~twinspect.code.evaluate.matching`). Query mode: each labelled
private fragment queries the fragments of all other files; recall@k is the fraction of queries whose
labelled original is among the top k, MRR the mean of 1/rank (0 when not retrieved).
"""

from __future__ import annotations

import csv
import time
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.code.evaluate.common import Embedder, config_embedder, default_data_dir, require_data_dir
from twinspect.code.evaluate.matching import (
    MIN_OVERLAP,
    ReportView,
    Span,
    file_equivalence,
    fragment_copies,
    report_view,
    spans_match,
)
from twinspect.code.evaluate.metrics import first_relevant_rank, rank_metrics
from twinspect.errors import InputError


@dataclass(frozen=True, slots=True)
class SSCDLabel:
    """One labelled clone pair of SSCD's Company-C data set.

    Attributes:
        private: the modified copy injected into a private file.
        original: the open-source original.
        granularity: ``"function"`` or ``"block"``.
    """

    private: Span
    original: Span
    granularity: str


def load_sscd_labels(root: str | Path) -> list[SSCDLabel]:
    """Read ``dataset_c.csv`` of the SSCD Company-C data set.

    Args:
        root: the data set folder (holding ``dataset_c.csv`` and ``dataset_c/``).

    Returns:
        The labelled pairs (80 in the published data), paths relative to ``root``.

    Raises:
        InputError: the file is missing or malformed.
    """
    path = Path(root) / "dataset_c.csv"
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        return [
            SSCDLabel(
                Span(r["private_path"], int(r["private_start_line"]), int(r["private_end_line"])),
                Span(r["os_path"], int(r["os_path_start_line"]), int(r["os_path_end_line"])),
                r.get("granularity", "function"),
            )
            for r in rows
        ]
    except OSError as exc:
        raise InputError(f"cannot read SSCD labels: {exc.strerror or exc}", path) from exc
    except (KeyError, ValueError) as exc:
        raise InputError(f"malformed SSCD label file ({exc})", path) from exc


def score_sscd(
    view: ReportView,
    labels: Sequence[SSCDLabel],
    equivalence: Mapping[str, str] | None = None,
    min_overlap: float = MIN_OVERLAP,
    copies: Mapping[Span, Sequence[Span]] | None = None,
) -> dict[str, Any]:
    """Score reported pairs against SSCD's labelled pairs (recall and private-fragment precision).

    A reported pair (x, y) matches label L when x matches L.private and y matches L.original, or the
    other way round (:func:`spans_match`). Recall = labels matched by at least one reported pair / all
    labels. Precision = among reported pairs one of whose sides matches *some* labelled private range,
    the fraction that match a label (i.e. whose other side is the labelled original).

    Args:
        view: the detector's report.
        labels: the labelled pairs.
        equivalence: byte-identical file map from :func:`file_equivalence`.
        min_overlap: the overlap rule's threshold.
        copies: optional map from a reported span to its byte-identical copies (see
            :func:`fragment_copies`); a reported fragment then matches a label when it or one of its
            copies does (copy-aware scoring). None = strict rule.

    Returns:
        ``{"recall", "precision", "found", "labels", "private_pairs", "true_pairs", "reported_pairs",
        "missed": [index of each unmatched label], "false_pairs": [[[path, start, end], [path, start, end]]
        of each reported pair that touches a private range without matching a label, in report order]}``;
        recall/precision are fractions in [0, 1] (precision is NaN when no reported pair touches a
        private range).
    """
    # index labelled ranges by canonical path for speed
    eq = equivalence or {}
    by_path: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for i, lab in enumerate(labels):
        by_path[eq.get(lab.private.path, lab.private.path)].append((i, "p"))
        by_path[eq.get(lab.original.path, lab.original.path)].append((i, "o"))

    def roles(span: Span) -> set[tuple[int, str]]:
        out = set()
        for alt in [span, *((copies or {}).get(span, ()))]:
            for i, role in by_path.get(eq.get(alt.path, alt.path), ()):
                target = labels[i].private if role == "p" else labels[i].original
                if spans_match(alt, target, eq, min_overlap):
                    out.add((i, role))
        return out

    cache: dict[Hashable, set[tuple[int, str]]] = {}

    def roles_of(fid: Hashable) -> set[tuple[int, str]]:
        if fid not in cache:
            cache[fid] = roles(view.spans[fid])
        return cache[fid]

    found: set[int] = set()
    private_pairs = true_pairs = 0
    false_pairs: list[list[list]] = []
    for a, b, _ in view.pairs:
        ra, rb = roles_of(a), roles_of(b)
        hit = {i for i, r in ra if r == "p" and (i, "o") in rb} | {i for i, r in rb if r == "p" and (i, "o") in ra}
        touches_private = any(r == "p" for _, r in ra) or any(r == "p" for _, r in rb)
        if touches_private:
            private_pairs += 1
            if hit:
                true_pairs += 1
            else:
                false_pairs.append([[s.path, s.start_line, s.end_line] for s in (view.spans[a], view.spans[b])])
        found |= hit
    n = len(labels)
    return {
        "recall": len(found) / n if n else float("nan"),
        "precision": true_pairs / private_pairs if private_pairs else float("nan"),
        "found": len(found),
        "labels": n,
        "private_pairs": private_pairs,
        "true_pairs": true_pairs,
        "reported_pairs": len(view.pairs),
        "missed": sorted(set(range(n)) - found),
        "false_pairs": false_pairs,
    }


def sscd_query_ranks(
    query_vectors: np.ndarray,
    candidate_spans: Sequence[Span],
    candidate_vectors: np.ndarray,
    labels: Sequence[SSCDLabel],
    equivalence: Mapping[str, str] | None = None,
    min_overlap: float = MIN_OVERLAP,
) -> list[int | None]:
    """Query mode: rank each labelled private fragment against the fragments of all other files.

    Args:
        query_vectors: float32 (Q, d) L2-normalised embeddings of the labelled private ranges, in the
            order of ``labels``.
        candidate_spans: M candidate fragments (the detector's mined fragments).
        candidate_vectors: float32 (M, d) L2-normalised embeddings of the candidates.
        labels: the Q labelled pairs.
        equivalence: byte-identical file map; candidates in a file equivalent to the query's own file
            are excluded.
        min_overlap: overlap threshold deciding which candidate is the labelled original.

    Returns:
        Per label, the 1-based rank of the first candidate matching the labelled original (cosine
        similarity order), or None when no mined fragment matches it.
    """
    eq = equivalence or {}
    canon = np.array([eq.get(s.path, s.path) for s in candidate_spans], dtype=object)
    sims_all = np.asarray(query_vectors, dtype=np.float32) @ np.asarray(candidate_vectors, dtype=np.float32).T
    ranks: list[int | None] = []
    for q, lab in enumerate(labels):
        keep = canon != eq.get(lab.private.path, lab.private.path)
        relevant = np.array([spans_match(s, lab.original, eq, min_overlap) for s in candidate_spans], dtype=bool)
        ranks.append(first_relevant_rank(sims_all[q][keep], relevant[keep]))
    return ranks


def _range_fragment(root: Path, span: Span, language: str) -> Any:
    """A Fragment holding exactly the lines of ``span`` (the query of SSCD's query mode)."""
    from twinspect.code.fragments import Fragment

    path = root / span.path
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    except OSError as exc:
        raise InputError(f"cannot read labelled file: {exc.strerror or exc}", path) from exc
    text = "".join(lines[span.start_line - 1 : span.end_line])
    return Fragment(span.path, span.start_line, span.end_line, "", language, text)


def run_sscd(
    data: str | Path | None = None,
    config: Any = None,
    *,
    embed: Embedder | None = None,
    query: bool = True,
    fragments: Sequence[Any] | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run the detector over SSCD Company-C and score it (pairs and, optionally, query mode).

    Args:
        data: the SSCD folder (``dataset_c.csv`` + ``dataset_c/``); default ``../shared/data/clones/sscd``
            relative to the current directory.
        config: a :class:`~twinspect.code.clones.DetectConfig` (default settings when None).
        embed: override of the embedder (tuning experiments); default :func:`config_embedder`.
        query: also compute query-mode recall@1/@10 and MRR.
        fragments: use these fragments (paths relative to ``data``) instead of mining ``data``.
        quiet: no progress output.

    Returns:
        :func:`score_sscd`'s dict (strict rule) plus ``precision_copies``/``recall_copies``/
        ``true_pairs_copies``/``false_pairs_copies`` (copy-aware rule: a byte-identical copy of a labelled function counts as
        that function),
        ``recall@1``, ``recall@10``, ``mrr`` (query mode), ``fragments``,
        ``seconds`` and the detector ``stats``.

    Raises:
        InputError: missing data or an invalid configuration.
    """
    from twinspect.code.clones import DetectConfig, detect
    from twinspect.code.fragments import mine

    root = require_data_dir(data or default_data_dir("sscd"), "SSCD")
    config = config or DetectConfig()
    t0 = time.perf_counter()
    labels = load_sscd_labels(root)
    if fragments is None:
        frags, _ = mine([root], min_lines=config.min_lines, quiet=quiet)
    else:
        frags = list(fragments)
    queries = [_range_fragment(root, lab.private, "c") for lab in labels] if query else []
    vecs, qvecs = (embed or config_embedder(config))(frags, [frags, queries])
    report = detect(frags, config, vectors=vecs, vectors_encoder=None if embed else config.encoder, quiet=quiet)
    view = report_view(report)
    eq = file_equivalence(root, {s.path for s in view.spans.values()} | {lab.private.path for lab in labels}
                          | {lab.original.path for lab in labels})
    out = score_sscd(view, labels, eq)
    copy_aware = score_sscd(view, labels, eq, copies=fragment_copies(root, view.spans.values()))
    out["precision_copies"] = copy_aware["precision"]
    out["recall_copies"] = copy_aware["recall"]
    out["true_pairs_copies"], out["false_pairs_copies"] = copy_aware["true_pairs"], copy_aware["false_pairs"]
    if query:
        spans = [Span(f.path, f.start_line, f.end_line) for f in frags]
        out.update(rank_metrics(sscd_query_ranks(qvecs, spans, vecs, labels, eq)))
    out["fragments"] = len(frags)
    out["stats"] = {k: report.stats.get(k) for k in ("pairs", "classes", "largest_class", "encoder", "index")}
    out["seconds"] = time.perf_counter() - t0
    return out
