"""One-fragment queries against a persisted clone index: which fragment, which clones, what schema.

``twinspect clones query DIR FILE[:LINE]`` and the Python API share this module: the queried
fragment is parsed on the fly (:func:`resolve_query_fragment`), its nearest neighbours in a
:class:`~twinspect.code.store.CloneIndex` are typed like the scan's pairs (:func:`query_clones`), and
:func:`query_result` gives the JSON schema written by ``--format json``::

    {"index": str, "query": {"path", "start_line", "end_line", "name", "language"}, "top_k": int,
     "threshold": float, "clones": [{"path", "start_line", "end_line", "name", "language",
     "similarity", "type", "band", "t3_similarity"}]}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinspect.code.clones import DEFAULT_LEXICAL_MIN_T3
from twinspect.errors import InputError


@dataclass(frozen=True)
class CloneHit:
    """One clone of the queried fragment.

    Attributes:
        fragment: the indexed fragment (:class:`~twinspect.code.fragments.Fragment`).
        similarity: embedding cosine similarity in [-1, 1] (float).
        clone_type: its :class:`~twinspect.code.clone_types.CloneType` (type, band, T3 similarity).
    """

    fragment: Any
    similarity: float
    clone_type: Any


def query_clones(store: Any, fragment: Any, top_k: int, threshold: float,
                 lexical_min_t3: float | None = DEFAULT_LEXICAL_MIN_T3) -> list[CloneHit]:
    """The ``top_k`` most similar indexed fragments at or above ``threshold``, typed T1–T4.

    As in :func:`~twinspect.code.clones.detect`, a lexical index never types a pair T4: pairs
    below the MT3 band are weak Type-3 (T3, band WT3); and T2-identical fragments (same
    normalised token sequence) are always returned, whatever their cosine and beyond ``top_k``,
    as ``scan`` reports every pair of a T2 bucket. So every pair ``scan`` reports for an indexed
    fragment is among its query hits; the query lists the k-NN without scan's pair-margin rule.

    The queried fragment itself (and fragments nested in it or containing it) is left out when it
    is indexed.

    Args:
        store: a loaded :class:`~twinspect.code.store.CloneIndex`.
        fragment: the query :class:`~twinspect.code.fragments.Fragment`.
        top_k: maximum number of clones (≥ 1).
        threshold: minimum cosine similarity.
        lexical_min_t3: as :attr:`~twinspect.code.clones.DetectConfig.lexical_min_t3` (a lexical
            index drops Type-3 hits below this abstracted-token similarity; None keeps them;
            default the same as ``scan``'s).

    Returns:
        The T2-identical fragments plus up to ``top_k`` k-NN hits, as :class:`CloneHit`, most
        similar first.

    Raises:
        InputError: ``top_k`` < 1.
    """
    from twinspect.code.clone_types import LEXICAL_ENCODERS, classify_pair, without_semantic_evidence
    from twinspect.code.clones import overlaps

    lexical = getattr(getattr(store, "encoder", None), "name", None) in LEXICAL_ENCODERS

    if top_k < 1:
        raise InputError(f"--top-k must be at least 1, got {top_k}")
    found: dict[tuple[str, int, int], tuple[Any, float]] = {}
    for other, sim in _t2_twins(store, fragment):
        found[(other.path, other.start_line, other.end_line)] = (other, sim)
    n_knn = 0
    for other, sim in store.query(fragment, k=top_k, threshold=threshold):
        if overlaps(fragment, other) or n_knn >= top_k:
            continue
        n_knn += 1
        found.setdefault((other.path, other.start_line, other.end_line), (other, float(sim)))
    hits = []
    for other, sim in sorted(found.values(), key=lambda h: (-h[1], h[0].path, h[0].start_line)):
        ct = classify_pair(fragment, other)
        if lexical:
            ct = without_semantic_evidence(ct)
            if lexical_min_t3 is not None and ct.t3_similarity is not None and ct.t3_similarity < lexical_min_t3:
                continue
        hits.append(CloneHit(other, float(sim), ct))
    return hits


def _t2_twins(store: Any, fragment: Any) -> list[tuple[Any, float]]:
    """Indexed fragments T2-identical to ``fragment`` (same language and T2 key), with their cosine."""
    import numpy as np

    from twinspect.code.clones import overlaps
    from twinspect.code.normalize import t2_key

    key = t2_key(fragment)
    rows = [r for r, g in enumerate(store.fragments)
            if g.language == fragment.language and not overlaps(fragment, g) and t2_key(g) == key]
    if not rows:
        return []
    q = np.asarray(store.embed([fragment])[0], dtype=np.float32)
    m = np.asarray(store.vectors[rows], dtype=np.float32)
    sims = m @ q / np.maximum(np.linalg.norm(m, axis=1) * max(float(np.linalg.norm(q)), 1e-12), 1e-12)
    return [(store.fragments[r], float(s)) for r, s in zip(rows, sims)]


def query_result(index_dir: str | Path, fragment: Any, top_k: int, threshold: float,
                 hits: list[CloneHit]) -> dict[str, Any]:
    """The JSON document of a query (schema in the module docstring)."""
    return {
        "index": str(index_dir),
        "query": {"path": fragment.path, "start_line": fragment.start_line, "end_line": fragment.end_line,
                  "name": fragment.name, "language": fragment.language},
        "top_k": top_k,
        "threshold": threshold,
        "clones": [
            {"path": h.fragment.path, "start_line": h.fragment.start_line, "end_line": h.fragment.end_line,
             "name": h.fragment.name, "language": h.fragment.language, "similarity": round(h.similarity, 6),
             "type": h.clone_type.type, "band": h.clone_type.band,
             "t3_similarity": None if h.clone_type.t3_similarity is None else round(h.clone_type.t3_similarity, 6)}
            for h in hits
        ],
    }


def parse_target(target: str) -> tuple[Path, int | None]:
    """Split ``FILE[:LINE]`` (a file whose own name ends in ``:digits`` is taken whole if it exists)."""
    path = Path(target)
    if not path.exists() and ":" in target:
        head, _, tail = target.rpartition(":")
        if tail.isdigit():
            line = int(tail)
            if line < 1:
                raise InputError(f"line numbers start at 1, got {line}", head)
            return Path(head), line
    return path, None


def resolve_query_fragment(
    target: str, *, language: str | None = None, root: str | Path | None = None
) -> tuple[Any, Path]:
    """Parse ``FILE[:LINE]`` on the fly and pick the fragment to query.

    The innermost fragment containing LINE is chosen; without LINE, the file's first fragment.
    Fragments of any length are considered (no minimum number of lines).

    Args:
        target: ``path/to/file.py`` or ``path/to/file.py:42``.
        language: force the language of the file.
        root: the indexed root; when the file lies under it, the fragment's path is made relative
            to it (so it matches the index's own fragments).

    Returns:
        ``(fragment, file_path)``.

    Raises:
        InputError: the file does not exist or cannot be read, holds no function, or no function
            contains LINE.
    """
    import dataclasses
    import os

    from twinspect._io import require_readable
    from twinspect.code.fragments import fragment_at, mine

    path, line = parse_target(target)
    require_readable(path, "file")
    if path.is_dir():
        raise InputError("is a directory; query takes FILE[:LINE]", path)
    fragments, _ = mine([path], language=language, min_lines=1, respect_gitignore=False, quiet=True)
    if not fragments:
        raise InputError("no function or method found in the file", path,
                         hint="is the language supported? try --language")
    frag = fragment_at(fragments, fragments[0].path, line)
    if root is not None:
        ap, ar = os.path.abspath(path), os.path.abspath(root)
        if os.path.commonpath([ap, ar]) == ar:
            frag = dataclasses.replace(frag, path=Path(os.path.relpath(ap, ar)).as_posix())
        else:  # outside the indexed tree: an absolute path never collides with an indexed one
            frag = dataclasses.replace(frag, path=Path(ap).as_posix())
    return frag, path
