"""Scoring clone detectors on real benchmarks: SSCD Company-C, BigCloneBench, POJ-104.

Everything here scores the detector's *output*, read through the ``twinspect clones`` JSON contract::

    {"fragments": [{"id", "path", "start_line", "end_line", "name", "language"}],
     "pairs": [{"a", "b", "similarity", "type"}], "classes": [[id, ...]], "stats": {}}

so any detector that writes that contract can be scored (a :class:`~twinspect.code.clones.CloneReport`
is accepted too, through its ``to_json_dict()``).

Metrics and the papers/benchmarks they follow:

* **Line-range matching** (SSCD, Rahman et al., "SSCD: Scalable Semantic Code Clone Detection",
  industrial Company-C evaluation): a reported fragment matches a labelled fragment when they lie in
  the same file (byte-identical copies of a file count as the same file) and their line ranges
  overlap by at least 70 % of the shorter range. Recall is over the labelled pairs; precision is over
  the reported pairs one of whose sides matches a labelled *private* range.
* **Query mode**: each labelled private fragment queries the fragments of all other files;
  recall@k is the fraction of queries whose labelled original is among the top k, MRR the mean of
  1/rank (0 when not retrieved).
* **BigCloneBench** (Svajlenko et al., ICSME 2014; typed as in the SSCD paper): per-type recall
  (T1, T2, ST3 incl. VST3, MT3, WT3/T4) and the false-positive rate on the labelled non-clone pairs.
  A labelled pair counts as *found* when it is reported as a pair or both functions lie in one
  reported clone class.
* **MAP@R** (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020; CodeXGLUE POJ-104): for
  each query, R = number of other items with the same label; AP@R = (1/R) Σ_{i≤R} P@i·rel_i over
  the top R results; MAP@R is the mean over queries.

The runners at the bottom (:func:`run_sscd`, :func:`run_bcb`, :func:`run_poj104`) load the shared data
sets, run the twinspect detector and return the scores; the CLI (``twinspect clones eval``) and
``benchmarks/clones.py`` call them.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

from twinspect.errors import InputError

#: Minimum overlap (fraction of the shorter line range) for a reported fragment to match a label.
MIN_OVERLAP = 0.7

#: BigCloneBench type index → name, as in ``clone_labels.csv``.
BCB_TYPES: dict[int, str] = {0: "T1", 1: "T2", 2: "ST3", 3: "MT3", 4: "WT3/T4", 5: "non-clone"}


# ----------------------------------------------------------------------------------------------
# Line ranges and files
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """A line range of one file.

    Attributes:
        path: file path (POSIX separators), relative to the data set root.
        start_line: first line, 1-based, inclusive.
        end_line: last line, 1-based, inclusive (``>= start_line``).
    """

    path: str
    start_line: int
    end_line: int

    @property
    def loc(self) -> int:
        """Number of lines spanned."""
        return self.end_line - self.start_line + 1


def overlap_lines(a: Span, b: Span) -> int:
    """Number of lines two ranges share (ignoring their paths); 0 when disjoint."""
    return max(0, min(a.end_line, b.end_line) - max(a.start_line, b.start_line) + 1)


def spans_match(
    reported: Span,
    labelled: Span,
    equivalence: Mapping[str, str] | None = None,
    min_overlap: float = MIN_OVERLAP,
) -> bool:
    """Whether a reported range matches a labelled one (SSCD's line-overlap rule).

    Args:
        reported: the detector's fragment.
        labelled: the ground-truth fragment.
        equivalence: path → canonical path (byte-identical files share one canonical path, see
            :func:`file_equivalence`); paths absent from it stand for themselves.
        min_overlap: required shared lines as a fraction of the shorter range (0.7 = 70 %; the
            boundary itself matches).

    Returns:
        True when both lie in the same (or a byte-identical) file and
        ``overlap >= min_overlap * min(loc_a, loc_b)``.
    """
    eq = equivalence or {}
    if eq.get(reported.path, reported.path) != eq.get(labelled.path, labelled.path):
        return False
    shorter = min(reported.loc, labelled.loc)
    if shorter <= 0:
        return False
    # compare in integers scaled by 1000 so that exactly 70 % is not lost to float rounding
    return overlap_lines(reported, labelled) * 1000 >= round(min_overlap * 1000) * shorter


def file_equivalence(root: str | Path, paths: Iterable[str]) -> dict[str, str]:
    """Group byte-identical files: path → canonical path (the smallest path with the same SHA-256).

    Args:
        root: directory the relative ``paths`` are resolved against.
        paths: relative file paths (POSIX separators).

    Returns:
        A dict mapping every readable path to its canonical representative; unreadable paths map to
        themselves.
    """
    by_hash: dict[str, list[str]] = defaultdict(list)
    out: dict[str, str] = {}
    for rel in sorted(set(paths)):
        try:
            digest = hashlib.sha256((Path(root) / rel).read_bytes()).hexdigest()
        except OSError:
            out[rel] = rel
            continue
        by_hash[digest].append(rel)
    for group in by_hash.values():
        for rel in group:
            out[rel] = group[0]
    return out


def fragment_copies(root: str | Path, spans: Iterable[Span]) -> dict[Span, list[Span]]:
    """Group line ranges whose text is byte-identical: span → the other spans with the same text.

    Function-level counterpart of :func:`file_equivalence`: SSCD's data set reuses open-source files
    across its folders, so a labelled original often has byte-identical copies in other files. Used by
    :func:`score_sscd`'s copy-aware variant.

    Args:
        root: directory the spans' paths are relative to.
        spans: line ranges.

    Returns:
        span → list of the *other* spans with identical text (only spans that have copies appear).
    """
    lines_of: dict[str, list[bytes]] = {}
    groups: dict[str, list[Span]] = defaultdict(list)
    for sp in set(spans):
        if sp.path not in lines_of:
            try:
                lines_of[sp.path] = (Path(root) / sp.path).read_bytes().splitlines()
            except OSError:
                lines_of[sp.path] = []
        body = b"\n".join(lines_of[sp.path][sp.start_line - 1 : sp.end_line])
        if body:
            groups[hashlib.sha256(body).hexdigest()].append(sp)
    out: dict[Span, list[Span]] = {}
    for members in groups.values():
        if len(members) > 1:
            for sp in members:
                out[sp] = [o for o in members if o != sp]
    return out


# ----------------------------------------------------------------------------------------------
# Reading a detector's report through the JSON contract
# ----------------------------------------------------------------------------------------------


@dataclass
class ReportView:
    """The parts of a clone report that scoring needs.

    Attributes:
        spans: fragment id → :class:`Span` (paths as written by the detector, optionally prefixed).
        pairs: reported pairs ``(a, b, similarity)`` of fragment ids.
        classes: reported clone classes, each a list of fragment ids.
    """

    spans: dict[Hashable, Span]
    pairs: list[tuple[Hashable, Hashable, float]]
    classes: list[list[Hashable]] = field(default_factory=list)


def report_view(report: Any, path_prefix: str = "") -> ReportView:
    """Read a clone report (JSON-contract dict, path to a JSON file, or an object with ``to_json_dict()``).

    Args:
        report: the report.
        path_prefix: prepended to every fragment path (e.g. ``"dataset_c/"`` when the detector was run
            on a sub-folder of the data set root); POSIX separators.

    Returns:
        A :class:`ReportView`.

    Raises:
        InputError: the report is not in the JSON contract (missing keys, pair ids that name no
            fragment).
    """
    where = None
    if isinstance(report, (str, Path)):
        where = Path(report)
        try:
            report = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read clone report: {exc}", where) from exc
    elif hasattr(report, "to_json_dict"):
        report = report.to_json_dict()
    try:
        spans = {
            f["id"]: Span(path_prefix + str(f["path"]).replace(os.sep, "/"), int(f["start_line"]), int(f["end_line"]))
            for f in report["fragments"]
        }
        pairs = [(p["a"], p["b"], float(p.get("similarity", 1.0))) for p in report.get("pairs", [])]
        classes = [list(c) for c in report.get("classes", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a twinspect clone report (missing or malformed field: {exc})", where) from exc
    for a, b, _ in pairs:
        if a not in spans or b not in spans:
            raise InputError(f"clone report pair ({a}, {b}) names a fragment id that is not in 'fragments'", where)
    return ReportView(spans, pairs, classes)


# ----------------------------------------------------------------------------------------------
# SSCD Company-C
# ----------------------------------------------------------------------------------------------


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
        "missed": [index of each unmatched label]}``; recall/precision are fractions in [0, 1]
        (precision is NaN when no reported pair touches a private range).
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
    for a, b, _ in view.pairs:
        ra, rb = roles_of(a), roles_of(b)
        hit = {i for i, r in ra if r == "p" and (i, "o") in rb} | {i for i, r in rb if r == "p" and (i, "o") in ra}
        touches_private = any(r == "p" for _, r in ra) or any(r == "p" for _, r in rb)
        if touches_private:
            private_pairs += 1
            if hit:
                true_pairs += 1
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
    }


def rank_metrics(ranks: Sequence[int | None], ks: Sequence[int] = (1, 10)) -> dict[str, float]:
    """Recall@k and mean reciprocal rank from the 1-based rank of each query's first relevant result.

    Args:
        ranks: per query, the 1-based rank of the first relevant result, or None when none was
            retrieved.
        ks: cut-offs for recall@k.

    Returns:
        ``{"recall@k": fraction, ..., "mrr": mean of 1/rank (0 for None), "queries": count}``.
    """
    n = len(ranks)
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall@{k}"] = sum(1 for r in ranks if r is not None and r <= k) / n if n else float("nan")
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n if n else float("nan")
    out["queries"] = n
    return out


def first_relevant_rank(similarities: np.ndarray, relevant: np.ndarray) -> int | None:
    """1-based rank of the best-ranked relevant candidate (ties broken by candidate order).

    Args:
        similarities: float array (M,) of candidate scores (higher = more similar).
        relevant: bool array (M,) marking the relevant candidates.

    Returns:
        The rank, or None when no candidate is relevant.
    """
    if not relevant.any():
        return None
    best = float(similarities[relevant].max())
    first = int(np.flatnonzero(relevant & (similarities == best))[0])
    # candidates strictly better, plus equally good ones that come earlier
    ahead = int((similarities > best).sum()) + int((similarities[:first] == best).sum())
    return ahead + 1


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


# ----------------------------------------------------------------------------------------------
# BigCloneBench
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BCBPair:
    """One labelled BigCloneBench pair (``clone_labels.csv``).

    Attributes:
        id1, id2: function ids (``functions.jsonl.gz`` ``id``).
        is_clone: ground truth.
        type_idx: 0 T1, 1 T2, 2 ST3 (incl. VST3), 3 MT3, 4 WT3/T4, 5 non-clone.
    """

    id1: int
    id2: int
    is_clone: bool
    type_idx: int

    @property
    def type_name(self) -> str:
        """The clone type's name (see :data:`BCB_TYPES`)."""
        return BCB_TYPES.get(self.type_idx, str(self.type_idx))


def load_bcb_functions(root: str | Path) -> list[dict[str, Any]]:
    """Read ``functions.jsonl.gz``: records ``{"id": int, "folder": str, "code": str}``.

    Raises:
        InputError: missing or malformed file.
    """
    path = Path(root) / "functions.jsonl.gz"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            out = [json.loads(line) for line in fh if line.strip()]
        for rec in out:
            rec["id"] = int(rec["id"])
            rec["code"] = str(rec["code"])
        return out
    except OSError as exc:
        raise InputError(f"cannot read BigCloneBench functions: {exc.strerror or exc}", path) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"malformed BigCloneBench function record ({exc})", path) from exc


def load_bcb_labels(root: str | Path) -> list[BCBPair]:
    """Read ``clone_labels.csv`` (``id1,id2,is_clone,type_idx,type_name``).

    Raises:
        InputError: missing or malformed file.
    """
    path = Path(root) / "clone_labels.csv"
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return [
                BCBPair(int(r["id1"]), int(r["id2"]), r["is_clone"].strip() in ("1", "True", "true"), int(r["type_idx"]))
                for r in csv.DictReader(fh)
            ]
    except OSError as exc:
        raise InputError(f"cannot read BigCloneBench labels: {exc.strerror or exc}", path) from exc
    except (KeyError, ValueError) as exc:
        raise InputError(f"malformed BigCloneBench label file ({exc})", path) from exc


class FoundPairs:
    """Answers "did the detector report x and y as clones?" under the pair-or-same-class rule.

    Args:
        pairs: reported pairs of item ids (unordered).
        classes: reported clone classes, each an iterable of item ids (an item may be in several).
    """

    def __init__(self, pairs: Iterable[tuple[Hashable, Hashable]], classes: Iterable[Iterable[Hashable]] = ()):
        self._pairs = {frozenset((a, b)) for a, b in pairs if a != b}
        self._classes: dict[Hashable, set[int]] = defaultdict(set)
        for c, members in enumerate(classes):
            for m in members:
                self._classes[m].add(c)

    def __call__(self, x: Hashable, y: Hashable) -> bool:
        """True when x != y and (x, y) is a reported pair or x and y share a reported class."""
        if x == y:
            return False
        if frozenset((x, y)) in self._pairs:
            return True
        cx = self._classes.get(x)
        return bool(cx and cx & self._classes.get(y, set()))

    @classmethod
    def from_view(cls, view: ReportView, item_of: Callable[[Span], Hashable | None]) -> "FoundPairs":
        """Lift a fragment-level report to items (e.g. BCB function ids) with ``item_of(span)``.

        Fragments whose item is None are dropped; pairs within one item are ignored.
        """
        item = {fid: item_of(span) for fid, span in view.spans.items()}
        pairs = [(item[a], item[b]) for a, b, _ in view.pairs if item[a] is not None and item[b] is not None]
        classes = [{item[m] for m in c if item.get(m) is not None} for c in view.classes]
        return cls(pairs, classes)


def score_bcb(found: Callable[[Hashable, Hashable], bool], labels: Sequence[BCBPair]) -> dict[str, Any]:
    """Per-type recall and false-positive rate on BigCloneBench's labelled pairs.

    Args:
        found: predicate "reported as clones" (e.g. a :class:`FoundPairs`).
        labels: labelled pairs.

    Returns:
        ``{"recall": {type name: fraction}, "counts": {type name: (found, total)}, "fp_rate": fraction
        of non-clone pairs found, "fp": count, "negatives": count}``.
    """
    tot: dict[str, int] = defaultdict(int)
    hit: dict[str, int] = defaultdict(int)
    for lab in labels:
        name = BCB_TYPES.get(lab.type_idx, str(lab.type_idx)) if lab.is_clone else "non-clone"
        tot[name] += 1
        if found(lab.id1, lab.id2):
            hit[name] += 1
    recall = {t: hit[t] / tot[t] for t in tot if t != "non-clone"}
    neg = tot.get("non-clone", 0)
    return {
        "recall": recall,
        "counts": {t: (hit[t], tot[t]) for t in tot},
        "fp_rate": hit["non-clone"] / neg if neg else float("nan"),
        "fp": hit["non-clone"],
        "negatives": neg,
    }


# ----------------------------------------------------------------------------------------------
# POJ-104: MAP@R
# ----------------------------------------------------------------------------------------------


def load_poj104(root: str | Path, name: str = "dev_81_92.jsonl.gz") -> list[dict[str, Any]]:
    """Read POJ-104 programs: records ``{"label": str, "index": str, "code": str}``.

    Raises:
        InputError: missing or malformed file.
    """
    path = Path(root) / name
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            out = [json.loads(line) for line in fh if line.strip()]
        for rec in out:
            rec["label"], rec["code"] = str(rec["label"]), str(rec["code"])
        return out
    except OSError as exc:
        raise InputError(f"cannot read POJ-104 programs: {exc.strerror or exc}", path) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"malformed POJ-104 record ({exc})", path) from exc


def average_precision_at_r(relevant_in_order: Sequence[bool], r: int) -> float:
    """AP@R of one query: (1/R) Σ_{i≤R} P@i · rel_i over the first R results.

    Args:
        relevant_in_order: relevance of the ranked results (at least the first R are read).
        r: R, the number of relevant items in the collection (> 0).

    Returns:
        AP@R in [0, 1].
    """
    hits = 0
    total = 0.0
    for i, rel in enumerate(relevant_in_order[:r], start=1):
        if rel:
            hits += 1
            total += hits / i
    return total / r


def map_at_r(vectors: np.ndarray, labels: Sequence[Hashable], chunk: int = 512) -> float:
    """MAP@R of every item queried against all the others by cosine similarity (CodeXGLUE POJ-104).

    Args:
        vectors: float (N, d) embeddings (rows L2-normalised for cosine; any rows are ranked by dot
            product).
        labels: N labels; items with the same label are relevant to each other.
        chunk: queries per matrix block (memory ~ chunk × N × 4 bytes).

    Returns:
        MAP@R in [0, 1], averaged over items that have at least one other item with their label.
        Ties are broken by item order (stable sort).
    """
    x = np.asarray(vectors, dtype=np.float32)
    lab_list = list(labels)
    codes = {l: i for i, l in enumerate(dict.fromkeys(lab_list))}
    y = np.array([codes[l] for l in lab_list])
    counts = np.bincount(y)
    n = len(y)
    aps: list[float] = []
    for s in range(0, n, chunk):
        sims = x[s : s + chunk] @ x.T
        for j in range(sims.shape[0]):
            q = s + j
            r = int(counts[y[q]]) - 1
            if r <= 0:
                continue
            row = sims[j].copy()
            row[q] = -np.inf
            order = np.argsort(-row, kind="stable")[:r]
            rel = y[order] == y[q]
            prec = np.cumsum(rel) / np.arange(1, r + 1)
            aps.append(float((prec * rel).sum() / r))
    return float(np.mean(aps)) if aps else float("nan")


# ----------------------------------------------------------------------------------------------
# Runners: data set → twinspect detector → scores
# ----------------------------------------------------------------------------------------------

#: An embedder: ``embed(fit_on, batches) -> [vectors per batch]``; it is fitted on ``fit_on`` (the
#: mined corpus) and returns float32 (len(batch), d) L2-normalised rows for every batch.
Embedder = Callable[[Sequence[Any], Sequence[Sequence[Any]]], list[np.ndarray]]


def config_embedder(config: Any) -> Embedder:
    """The embedder the detector itself would use for ``config`` (``make_encoder`` + ``fit`` + ``encode``).

    Args:
        config: a :class:`~twinspect.code.clones.DetectConfig`.

    Returns:
        An :data:`Embedder`.
    """

    def embed(fit_on: Sequence[Any], batches: Sequence[Sequence[Any]]) -> list[np.ndarray]:
        from twinspect.code.encoders import make_encoder

        encoder = make_encoder(config.encoder, **config.encoder_params)
        fit = getattr(encoder, "fit", None)
        if callable(fit):
            fit(list(fit_on))
        return [np.asarray(encoder.encode(list(b)), dtype=np.float32) for b in batches]

    return embed


def _default_data(name: str) -> Path:
    return Path.cwd() / ".." / "shared" / "data" / "clones" / name


def _require_dir(path: str | Path, what: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{what} data folder not found", p, hint="pass --data DIR (see benchmarks/README.md)")
    return p


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
        :func:`score_sscd`'s dict (strict rule) plus ``precision_copies``/``recall_copies`` (copy-aware
        rule: a byte-identical copy of a labelled function counts as that function),
        ``recall@1``, ``recall@10``, ``mrr`` (query mode), ``fragments``,
        ``seconds`` and the detector ``stats``.

    Raises:
        InputError: missing data or an invalid configuration.
    """
    from twinspect.code.clones import DetectConfig, detect
    from twinspect.code.fragments import mine

    root = _require_dir(data or _default_data("sscd"), "SSCD")
    config = config or DetectConfig()
    t0 = time.perf_counter()
    labels = load_sscd_labels(root)
    if fragments is None:
        frags, _ = mine([root], min_lines=config.min_lines, quiet=quiet)
    else:
        frags = list(fragments)
    queries = [_range_fragment(root, lab.private, "c") for lab in labels] if query else []
    vecs, qvecs = (embed or config_embedder(config))(frags, [frags, queries])
    report = detect(frags, config, vectors=vecs, quiet=quiet)
    view = report_view(report)
    eq = file_equivalence(root, {s.path for s in view.spans.values()} | {lab.private.path for lab in labels}
                          | {lab.original.path for lab in labels})
    out = score_sscd(view, labels, eq)
    copy_aware = score_sscd(view, labels, eq, copies=fragment_copies(root, view.spans.values()))
    out["precision_copies"] = copy_aware["precision"]
    out["recall_copies"] = copy_aware["recall"]
    if query:
        spans = [Span(f.path, f.start_line, f.end_line) for f in frags]
        out.update(rank_metrics(sscd_query_ranks(qvecs, spans, vecs, labels, eq)))
    out["fragments"] = len(frags)
    out["stats"] = {k: report.stats.get(k) for k in ("pairs", "classes", "largest_class", "encoder", "index")}
    out["seconds"] = time.perf_counter() - t0
    return out


def bcb_subset(
    functions: Sequence[dict[str, Any]], labels: Sequence[BCBPair], fraction: float, seed: int = 0
) -> tuple[list[dict[str, Any]], list[BCBPair]]:
    """A reproducible subsample of BigCloneBench: ``fraction`` of the labelled pairs of each type and
    the functions they involve (scores on it are optimistic: fewer distractors).

    Args:
        functions: all function records.
        labels: all labelled pairs.
        fraction: share of each type's pairs kept, in (0, 1].
        seed: random seed.

    Returns:
        ``(functions, labels)`` of the subset.
    """
    rng = np.random.default_rng(seed)
    by_type: dict[int, list[BCBPair]] = defaultdict(list)
    for lab in labels:
        by_type[lab.type_idx].append(lab)
    kept: list[BCBPair] = []
    for t in sorted(by_type):
        group = by_type[t]
        n = max(1, int(round(len(group) * fraction)))
        kept += [group[i] for i in sorted(rng.choice(len(group), size=n, replace=False))]
    ids = {lab.id1 for lab in kept} | {lab.id2 for lab in kept}
    return [f for f in functions if f["id"] in ids], kept


def bcb_fragments(functions: Sequence[dict[str, Any]], directory: str | Path, min_lines: int = 6,
                  quiet: bool = True) -> list[Any]:
    """Write each BigCloneBench function to ``<directory>/<folder>/<id>.java`` and mine them.

    Returns:
        The mined fragments (paths ``<folder>/<id>.java``; the function id is the file stem).
    """
    from twinspect.code.fragments import mine

    d = Path(directory)
    for rec in functions:
        sub = d / str(rec.get("folder", "functions"))
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{rec['id']}.java").write_text(rec["code"], encoding="utf-8")
    frags, _ = mine([d], min_lines=min_lines, language="java", quiet=quiet, respect_gitignore=False)
    return frags


def _bcb_item(span: Span) -> int | None:
    stem = span.path.rsplit("/", 1)[-1].split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def run_bcb(
    data: str | Path | None = None,
    config: Any = None,
    *,
    embed: Embedder | None = None,
    fraction: float = 1.0,
    seed: int = 0,
    fragments: Sequence[Any] | None = None,
    min_lines: int | None = 1,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run the detector over the BigCloneBench typed subset and score per-type recall and FP rate.

    Every function is written to its own file in a temporary folder and mined as Java; a labelled
    pair is *found* when reported as a pair or when both functions share a reported clone class.

    Args:
        data: the BCB folder (``functions.jsonl.gz`` + ``clone_labels.csv``); default
            ``../shared/data/clones/bigclonebench``.
        config: a :class:`~twinspect.code.clones.DetectConfig` (default settings when None).
        embed: override of the embedder (tuning); default :func:`config_embedder`.
        fraction: < 1 scores a reproducible per-type subsample of the labels (see :func:`bcb_subset`).
        seed: subsampling seed.
        fragments: reuse already-mined fragments (tuning loops); must cover the (sub)set's functions.
        min_lines: minimum lines of a mined method. Default 1: BigCloneBench's functions are the
            benchmark's units, already filtered by its own size rule (≥ 6 pretty-printed lines), and
            about 14 % of them span fewer than 6 raw lines; None uses ``config.min_lines``.
        quiet: no progress output.

    Returns:
        :func:`score_bcb`'s dict plus ``functions``, ``fragments``, ``unmined`` (functions that gave
        no fragment), ``pairs``, ``classes``, ``largest_class`` and ``seconds``.
    """
    from twinspect.code.clones import DetectConfig, detect

    root = _require_dir(data or _default_data("bigclonebench"), "BigCloneBench")
    config = config or DetectConfig()
    t0 = time.perf_counter()
    functions = load_bcb_functions(root)
    labels = load_bcb_labels(root)
    if fraction < 1.0:
        functions, labels = bcb_subset(functions, labels, fraction, seed)
    if fragments is None:
        with tempfile.TemporaryDirectory(prefix="twinspect-bcb-") as tmp:
            frags = bcb_fragments(functions, tmp, config.min_lines if min_lines is None else min_lines, quiet)
    else:
        wanted = {f["id"] for f in functions}
        frags = [f for f in fragments if _bcb_item(Span(f.path, f.start_line, f.end_line)) in wanted]
    (vecs,) = (embed or config_embedder(config))(frags, [frags])
    report = detect(frags, config, vectors=vecs, quiet=quiet)
    view = report_view(report)
    out = score_bcb(FoundPairs.from_view(view, _bcb_item), labels)
    mined = {_bcb_item(s) for s in view.spans.values()}
    out.update(
        functions=len(functions),
        fragments=len(frags),
        unmined=sum(1 for f in functions if f["id"] not in mined),
        pairs=len(report.pairs),
        classes=len(report.classes),
        largest_class=report.stats.get("largest_class", 0),
        seconds=time.perf_counter() - t0,
    )
    return out


def poj104_fragments(programs: Sequence[dict[str, Any]]) -> list[Any]:
    """Each POJ-104 program as one whole-file Fragment (language ``"cpp"``, path ``<label>/<index>.cpp``)."""
    from twinspect.code.fragments import Fragment

    out = []
    for rec in programs:
        code = rec["code"]
        n = max(1, code.count("\n") + (0 if code.endswith("\n") else 1))
        out.append(Fragment(f"{rec['label']}/{rec.get('index', len(out))}.cpp", 1, n, "", "cpp", code))
    return out


def run_poj104(
    data: str | Path | None = None,
    config: Any = None,
    *,
    embed: Embedder | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """MAP@R of the configured encoder on POJ-104 (each program against all the others).

    Args:
        data: the POJ-104 folder (``dev_81_92.jsonl.gz``); default ``../shared/data/clones/poj104``.
        config: a :class:`~twinspect.code.clones.DetectConfig` (its ``encoder``/``encoder_params``).
        embed: override of the embedder (tuning).
        limit: score a reproducible random subset of this many programs (quick runs).
        seed: subsampling seed.

    Returns:
        ``{"map_at_r": fraction, "programs", "labels", "seconds"}``.
    """
    from twinspect.code.clones import DetectConfig

    root = _require_dir(data or _default_data("poj104"), "POJ-104")
    config = config or DetectConfig()
    t0 = time.perf_counter()
    programs = load_poj104(root)
    if limit is not None and limit < len(programs):
        idx = np.random.default_rng(seed).choice(len(programs), size=limit, replace=False)
        programs = [programs[i] for i in sorted(idx)]
    frags = poj104_fragments(programs)
    (vecs,) = (embed or config_embedder(config))(frags, [frags])
    score = map_at_r(vecs, [p["label"] for p in programs])
    return {
        "map_at_r": score,
        "programs": len(programs),
        "labels": len({p["label"] for p in programs}),
        "seconds": time.perf_counter() - t0,
    }
