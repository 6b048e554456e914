"""Line-range matching of reported fragments against labelled ones, and reading a detector's report.

A reported fragment matches a labelled fragment when they lie in the same file (byte-identical
copies of a file count as the same file) and their line ranges overlap by at least
:data:`MIN_OVERLAP` of the shorter range (the rule of the SSCD evaluation, Chochlov et al., ICSME
2022). Reports are read through the ``twinspect clones`` JSON contract (:func:`report_view`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinspect.errors import InputError

#: Minimum overlap (fraction of the shorter line range) for a reported fragment to match a label.
MIN_OVERLAP = 0.7


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


@dataclass
class ReportView:
    """The parts of a clone report that scoring needs.

    Attributes:
        spans: fragment id → :class:`Span` (paths as written by the detector, optionally prefixed).
        pairs: reported pairs ``(a, b, similarity)`` of fragment ids.
        classes: reported clone classes, each a list of fragment ids.
        identical_groups: groups of fragment ids the report states as pairwise T1/T2 clones without
            listing their pairs (``identical_groups`` of the JSON report; empty when absent).
        group_pairs: ``(a, b)`` lists of fragment ids such that the report states every a × b pair
            (``group_pairs`` of the JSON report; empty when absent).
    """

    spans: dict[Hashable, Span]
    pairs: list[tuple[Hashable, Hashable, float]]
    classes: list[list[Hashable]] = field(default_factory=list)
    identical_groups: list[list[Hashable]] = field(default_factory=list)
    group_pairs: list[tuple[list[Hashable], list[Hashable]]] = field(default_factory=list)


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
        groups = [list(g["members"]) for g in report.get("identical_groups", [])]
        group_pairs = [(list(g["a"]), list(g["b"])) for g in report.get("group_pairs", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a twinspect clone report (missing or malformed field: {exc})", where) from exc
    for a, b, _ in pairs:
        if a not in spans or b not in spans:
            raise InputError(f"clone report pair ({a}, {b}) names a fragment id that is not in 'fragments'", where)
    for g in groups:
        if any(m not in spans for m in g):
            raise InputError("clone report identical group names a fragment id that is not in 'fragments'", where)
    for ga, gb in group_pairs:
        if any(m not in spans for m in (*ga, *gb)):
            raise InputError("clone report group pair names a fragment id that is not in 'fragments'", where)
    return ReportView(spans, pairs, classes, groups, group_pairs)
