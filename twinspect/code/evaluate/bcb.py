"""BigCloneBench (Svajlenko et al., ICSME 2014; typed as in the SSCD paper): labels, scoring, runner.

Per-type recall (T1, T2, ST3 incl. VST3, MT3, WT3/T4) and the false-positive rate on the labelled
non-clone pairs.
"""

from __future__ import annotations

import csv
import gzip
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinspect.code.evaluate.common import Embedder, config_embedder, default_data_dir, require_data_dir
from twinspect.code.evaluate.matching import ReportView, Span, report_view
from twinspect.errors import InputError

#: BigCloneBench type index → name, as in ``clone_labels.csv``.
BCB_TYPES: dict[int, str] = {0: "T1", 1: "T2", 2: "ST3", 3: "MT3", 4: "WT3/T4", 5: "non-clone"}


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

    def __init__(self, pairs: Iterable[tuple[Hashable, Hashable]], classes: Iterable[Iterable[Hashable]] = (),
                 identical_groups: Iterable[Iterable[Hashable]] = (),
                 group_pairs: Iterable[tuple[Iterable[Hashable], Iterable[Hashable]]] = ()):
        self._pairs = {frozenset((a, b)) for a, b in pairs if a != b}
        self.identical_groups = [list(g) for g in identical_groups]
        self.group_pairs = [(list(a), list(b)) for a, b in group_pairs]
        self._sides: dict[Hashable, set[tuple[int, int]]] = defaultdict(set)
        for k, (ga, gb) in enumerate(self.group_pairs):
            for m in ga:
                self._sides[m].add((k, 0))
            for m in gb:
                self._sides[m].add((k, 1))
        self._classes: dict[Hashable, set[int]] = defaultdict(set)
        for c, members in enumerate(classes):
            for m in members:
                self._classes[m].add(c)

    @property
    def pairs(self) -> list[tuple[Hashable, Hashable]]:
        """The reported pairs (without the class-implied ones)."""
        return [tuple(p) for p in self._pairs]  # type: ignore[misc]

    def __call__(self, x: Hashable, y: Hashable) -> bool:
        """True when x != y and (x, y) is a reported pair or x and y share a reported class."""
        if x == y:
            return False
        if frozenset((x, y)) in self._pairs:
            return True
        sx = self._sides.get(x)
        if sx and any((k, 1 - side) in self._sides.get(y, ()) for k, side in sx):
            return True
        cx = self._classes.get(x)
        return bool(cx and cx & self._classes.get(y, set()))

    @classmethod
    def from_view(cls, view: ReportView, item_of: Callable[[Span], Hashable | None]) -> FoundPairs:
        """Lift a fragment-level report to items (e.g. BCB function ids) with ``item_of(span)``.

        Fragments whose item is None are dropped; pairs within one item are ignored. The report's
        identical groups are kept in :attr:`identical_groups` (see :meth:`stated`).
        """
        item = {fid: item_of(span) for fid, span in view.spans.items()}
        pairs = [(item[a], item[b]) for a, b, _ in view.pairs if item[a] is not None and item[b] is not None]
        classes = [{item[m] for m in c if item.get(m) is not None} for c in view.classes]
        groups = [[item[m] for m in g if item.get(m) is not None] for g in view.identical_groups]
        group_pairs = [([item[m] for m in ga if item.get(m) is not None], [item[m] for m in gb if item.get(m) is not None])
                       for ga, gb in view.group_pairs]
        return cls(pairs, classes, groups, group_pairs)

    def stated(self) -> FoundPairs:
        """The pairs the report *states*: listed pairs, every member pair of an identical group
        (exact-duplicate groups too large to list pair by pair) and every pair across a group pair,
        without the clone classes."""
        return FoundPairs(self.pairs, self.identical_groups, group_pairs=self.group_pairs)

    def listed(self) -> FoundPairs:
        """The listed pairs only (no classes, no identical groups)."""
        return FoundPairs(self.pairs)


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


def functionality_groups(labels: Sequence[BCBPair], max_type: int = 4) -> dict[int, int]:
    """A proxy for BigCloneBench's functionalities: connected components of the labelled clone pairs.

    BigCloneBench labels a pair a clone only when both functions implement the same functionality,
    so every component of the clone-pair graph lies inside one functionality (the shared subset
    does not carry the functionality ids; its ``folder`` field is a chunk of 1,000 records).

    Args:
        labels: labelled pairs (only ``is_clone`` pairs of type index ≤ ``max_type`` link functions).
        max_type: the weakest clone type that links two functions: 4 (default, every clone pair,
            WT3/T4 included) or 3 (T1–MT3 only: the disputed WT3/T4 pairs glue most of the subset
            into one component).

    Returns:
        ``{function id: component id}`` for every function in a labelled pair (non-clone-only
        functions are singleton components); component ids are 0..C-1 in order of smallest id.
    """
    from twinspect.code.clones import lowest_id_components

    root = lowest_id_components((x for lab in labels for x in (lab.id1, lab.id2)),
                                ((lab.id1, lab.id2) for lab in labels if lab.is_clone and lab.type_idx <= max_type))
    cid = {r: i for i, r in enumerate(sorted(set(root.values())))}
    return {x: cid[r] for x, r in root.items()}


#: Versions of :func:`bcb_split`.
SPLIT_VERSIONS = (1, 2)


def bcb_split(
    functions: Sequence[dict[str, Any]], labels: Sequence[BCBPair], part: str, seed: int = 0, version: int = 2
) -> tuple[list[dict[str, Any]], list[BCBPair]]:
    """One half of BigCloneBench split by functionality (see :func:`functionality_groups`).

    The components are shuffled with ``seed`` and the components holding clone labels are dealt
    greedily to the half with fewer clone labels so far (big components first), so both halves
    hold about as many clone pairs; a labelled pair belongs to a half when both its functions do
    (pairs across the halves are dropped). Tune on ``"tune"``, report on ``"test"``.

    * ``version=2`` (default, from the near-miss clones work): components link T1–MT3 pairs only,
      and functions in no clone pair (those of the labelled non-clones) go to a half by a seeded
      coin flip. Both halves then hold labelled non-clones (seed 0: tune 7,640, test 2,328) and
      MT3 pairs (10,142 / 9,858); WT3/T4 and non-clone pairs across the halves are dropped.
    * ``version=1`` (the split of earlier results): components link every clone pair, WT3/T4
      included, which glues the tune half into one component, and clone-free functions are dealt
      like the rest; the tune half then holds 18 labelled non-clones, too few to calibrate a
      false-positive rate on.

    Args:
        functions: all function records.
        labels: all labelled pairs.
        part: ``"tune"`` or ``"test"``.
        seed: shuffling seed.
        version: 1 or 2 (see above).

    Returns:
        ``(functions, labels)`` of that half.

    Raises:
        InputError: unknown ``part`` or ``version``.
    """
    if part not in ("tune", "test"):
        raise InputError(f"unknown BigCloneBench split {part!r}", hint="choose tune or test")
    if version not in SPLIT_VERSIONS:
        raise InputError(f"unknown BigCloneBench split version {version!r}", hint="choose 1 or 2")
    comp = functionality_groups(labels, max_type=4 if version == 1 else 3)
    weight: dict[int, int] = defaultdict(int)
    for lab in labels:
        if lab.is_clone:
            weight[comp[lab.id1]] += 1
    rng = np.random.default_rng(seed)
    order = rng.permutation(max(comp.values(), default=-1) + 1)
    half_of: dict[int, int] = {}
    load = [0, 0]
    for c in sorted(order.tolist(), key=lambda c: -weight[c]):  # big components first, ties shuffled
        if version == 2 and not weight[c]:
            h = int(rng.integers(2))
        else:
            h = 0 if load[0] <= load[1] else 1
        half_of[c] = h
        load[h] += weight[c]
    want = 0 if part == "tune" else 1
    kept = [lab for lab in labels if half_of[comp[lab.id1]] == want and half_of[comp[lab.id2]] == want]
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


def bcb_function_id(span: Span) -> int | None:
    """The BigCloneBench function id of a fragment mined by :func:`bcb_fragments` (its file stem), or None."""
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
    split: str | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Run the detector over the BigCloneBench typed subset and score per-type recall and FP rate.

    Every function is written to its own file in a temporary folder and mined as Java. Three scores
    are returned, with false positives counted the same way in each: *class-implied* (top level: a
    labelled pair is found when reported as a pair or when both functions share a reported clone
    class), *pair* (``out["pair"]``: found when the report states the pair — listed in ``pairs``, or
    both functions in one of the report's ``identical_groups``, exact-duplicate groups whose member
    pairs are all T1/T2 clones but too many to list) and *listed* (``out["listed"]``: listed pairs
    only).

    Args:
        data: the BCB folder (``functions.jsonl.gz`` + ``clone_labels.csv``); default
            ``../shared/data/clones/bigclonebench``.
        config: a :class:`~twinspect.code.clones.DetectConfig` (default settings when None).
        embed: override of the embedder (tuning); default :func:`config_embedder`.
        fraction: < 1 scores a reproducible per-type subsample of the labels (see :func:`bcb_subset`).
        seed: subsampling seed.
        fragments: reuse already-mined fragments (tuning loops); must cover the (sub)set's functions.
        split: None (all labels), or ``"tune"`` / ``"test"``: one half split by functionality
            (:func:`bcb_split`, seed ``seed``) — tune settings on one, report the other.
        min_lines: minimum lines of a mined method. Default 1: BigCloneBench's functions are the
            benchmark's units, already filtered by its own size rule (≥ 6 pretty-printed lines), and
            about 14 % of them span fewer than 6 raw lines; None uses ``config.min_lines``.
        quiet: no progress output.

    Returns:
        :func:`score_bcb`'s dict (class-implied) plus ``pair`` (:func:`score_bcb` on the stated
        pairs), ``listed`` (on listed pairs only), ``split``, ``functions``, ``fragments``, ``unmined`` (functions that gave
        no fragment), ``pairs``, ``classes``, ``identical_groups``, ``largest_class`` and ``seconds``.
    """
    from twinspect.code.clones import DetectConfig, detect

    root = require_data_dir(data or default_data_dir("bigclonebench"), "BigCloneBench")
    config = config or DetectConfig()
    t0 = time.perf_counter()
    functions = load_bcb_functions(root)
    labels = load_bcb_labels(root)
    if split is not None:
        functions, labels = bcb_split(functions, labels, split, seed)
    if fraction < 1.0:
        functions, labels = bcb_subset(functions, labels, fraction, seed)
    if fragments is None:
        with tempfile.TemporaryDirectory(prefix="twinspect-bcb-") as tmp:
            frags = bcb_fragments(functions, tmp, config.min_lines if min_lines is None else min_lines, quiet)
    else:
        wanted = {f["id"] for f in functions}
        frags = [f for f in fragments if bcb_function_id(Span(f.path, f.start_line, f.end_line)) in wanted]
    (vecs,) = (embed or config_embedder(config))(frags, [frags])
    report = detect(frags, config, vectors=vecs, vectors_encoder=None if embed else config.encoder, quiet=quiet)
    view = report_view(report)
    found = FoundPairs.from_view(view, bcb_function_id)
    out = score_bcb(found, labels)
    out["pair"] = score_bcb(found.stated(), labels)
    out["listed"] = score_bcb(found.listed(), labels)
    out["split"] = split
    mined = {bcb_function_id(s) for s in view.spans.values()}
    out.update(
        functions=len(functions),
        fragments=len(frags),
        unmined=sum(1 for f in functions if f["id"] not in mined),
        pairs=len(report.pairs),
        classes=len(report.classes),
        identical_groups=len(report.identical_groups),
        largest_class=report.stats.get("largest_class", 0),
        seconds=time.perf_counter() - t0,
    )
    return out
