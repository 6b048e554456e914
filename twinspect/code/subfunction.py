"""Copied regions inside functions, reported at function granularity (issue 22).

A function-level detector pairs whole functions. A run of statements copied into two functions that
are not similar as wholes — or pasted twice into one function — is no function pair, yet it is what
jscpd, PMD CPD and a reviewer call a clone. At the default function granularity
:func:`twinspect.code.clones.scan` therefore also runs the exact copied-run detector of
``--granularity block`` (:mod:`twinspect.code.token_runs`: jscpd's Karp–Rabin windows over T1 tokens,
comments and layout ignored) over the functions, and reports each copied run that is not already
inside a reported pair as a pair of *sub-function* fragments (``Fragment.kind == "subfunction"``):

1. :func:`candidate_segments`: where a copy can be. Tokens equal over lines ``L1..Lk`` (``k ≥
   min_lines``) laid out alike make the interior lines ``L2..L(k-1)`` equal once whitespace is
   removed, so such a copy holds a window of ``min_lines - 2`` consecutive non-blank lines that
   occurs at least twice in the functions. The comment-blanked lines of every outermost function
   fragment (a nested function is part of its parent's) are hashed without whitespace, and every
   function holding a window seen twice or more is a segment, whole: a copy need not be laid out
   alike over all its length (one copy breaks a call over two lines where the other keeps it on
   one), and the run matcher, not the line windows, finds where it starts and ends. Cheap string
   work; on the Python standard library about a quarter of the functions' lines. A copy laid out
   differently on every line, in functions that share no window, is not found.
2. :func:`segment_streams`: the functions holding a segment are lexed
   (:func:`~twinspect.code.token_runs.token_stream`, lines as in the file), one stream each, so no
   run crosses a function boundary or leaves the functions.
3. :func:`add_subfunction_pairs` (after detection): the run pairs of
   :func:`~twinspect.code.token_runs.match_token_runs` with the block pass's parameters
   (:data:`~twinspect.code.token_runs.WINDOW_TOKENS` tokens per window, both runs on at least
   ``min_lines`` lines and with at least :func:`~twinspect.code.blocks.default_min_tokens` tokens
   outside multi-line strings); a run's lines are those of its first and last token
   (:func:`~twinspect.code.token_runs.span_lines`). A run pair is dropped when the report already
   states it: a reported pair (a listed pair, two members of one ``identical_groups`` entry, or the
   two sides of a ``group_pairs`` entry) of two function fragments that hold one run each. Otherwise
   each run becomes a fragment named ``"<innermost function>[lines START-END]"`` (its text cut from
   the function's), or the function fragment itself when the run spans exactly a function, and the
   pair is reported (two copies of one file whose lines meet, a pattern repeated back to back, each
   keep only the lines they do not share, and at least ``min_lines`` of them), typed by :class:`~twinspect.code.clone_types.TypeClassifier` (T1 as a rule: the
   first and last line may hold tokens before or after the run).

The pairs' ``similarity`` is their abstracted-token similarity (1.0 for T1/T2 pairs): no embedding is
computed for them. They form clone classes of their own by complete linkage (two groups merge only
when every pair across them is a reported sub-function pair, or two copies the report states through
their functions); a fragment that is already in a function class (a function the run spans exactly)
is left out of them. BigCloneBench and SSCD evaluate function pairs through :func:`~twinspect.code.fragments.mine`
and :func:`~twinspect.code.clones.detect`, which this pass does not change.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from twinspect.code.fragments import Fragment

if TYPE_CHECKING:
    from twinspect.code.clones import CloneReport
    from twinspect.code.token_runs import TokenStream

#: :attr:`Fragment.kind` of a copied region inside a function.
KIND = "subfunction"


def outermost(fragments: Sequence[Fragment]) -> list[int]:
    """Indexes of the function fragments that lie inside no other function fragment of their file.

    Args:
        fragments: fragments in any order (only ``kind == "function"`` ones take part).

    Returns:
        Indexes into ``fragments``, by path then start line.
    """
    order = sorted((i for i, f in enumerate(fragments) if f.kind == "function"),
                   key=lambda i: (fragments[i].path, fragments[i].start_line, -fragments[i].end_line))
    out: list[int] = []
    path, end = None, 0
    for i in order:
        f = fragments[i]
        if f.path == path and f.end_line <= end:
            continue
        out.append(i)
        path, end = f.path, f.end_line
    return out


def _code(fragment: Fragment) -> str:
    """The fragment's comment-blanked text (``code``; stripped from ``text`` when not filled)."""
    if fragment.code:
        return fragment.code
    from twinspect.code.normalize import strip_comments

    return strip_comments(fragment)


def candidate_segments(fragments: Sequence[Fragment], min_lines: int = 6) -> list[tuple[int, int, int]]:
    """The outermost functions that may hold a copied run (step 1 of the module doc).

    Args:
        fragments: fragments (only ``kind == "function"`` ones are read, their ``code``).
        min_lines: the copies' minimum lines.

    Returns:
        ``(fragment index, first line, last line)``: the index and file lines (inclusive) of each
        outermost function holding a window of ``min_lines - 2`` non-blank lines (whitespace
        removed) that occurs twice or more among them, in :func:`outermost` order.
    """
    import numpy as np

    window = max(1, min_lines - 2)
    outer = outermost(fragments)
    rows: list[str] = []  # the non-blank lines of every outer function, whitespace removed
    owner: list[int] = []  # their function (position in outer)
    for o, i in enumerate(outer):
        for text in _code(fragments[i]).replace(" ", "").replace("\t", "").split("\n"):
            if text:
                rows.append(text)
                owner.append(o)
    n = len(rows) - window + 1
    if n < 2:
        return []
    h = np.fromiter(map(hash, rows), dtype=np.int64, count=len(rows)).view(np.uint64)
    fid = np.asarray(owner, dtype=np.int64)
    key = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for t in range(window):  # polynomial hash of rows j..j+window-1
            key *= np.uint64(0x100000001B3)
            key += h[t:t + n]
    valid = fid[:n] == fid[window - 1:]
    _, inverse, counts = np.unique(key[valid], return_inverse=True, return_counts=True)
    starts = np.flatnonzero(valid)[counts[inverse] > 1]
    rows_of = np.bincount(fid, minlength=len(outer))  # a run of min_lines code lines needs as many rows
    return [(outer[o], fragments[outer[o]].start_line, fragments[outer[o]].end_line)
            for o in np.unique(fid[starts]).tolist() if rows_of[o] >= min_lines]


#: Per language, the delimiters that open a string able to span lines (Python: the triple quotes,
#: counted for parity; elsewhere any occurrence counts); a language not listed is lexed whole.
_STRING_MARKERS: dict[str, tuple[str, ...]] = {
    "python": ('"""', "'''"),
    "javascript": ("`",), "typescript": ("`",), "tsx": ("`",), "go": ("`",),
    "java": ('"""',), "kotlin": ('"""',), "scala": ('"""',), "swift": ('"""',), "csharp": ('"""', '@"', '$@"'),
    "c": ('R"',), "cpp": ('R"',),
}


def _may_open(text: str, markers: tuple[str, ...]) -> bool:
    """Whether a multi-line string may be open at the end of ``text`` (see :data:`_STRING_MARKERS`)."""
    if markers == _STRING_MARKERS["python"]:
        return (text.count(markers[0]) + text.count(markers[1])) % 2 == 1
    return any(m in text for m in markers)


def segment_streams(fragment: Fragment, spans: Sequence[tuple[int, int]]) -> list[TokenStream]:
    """The :class:`~twinspect.code.token_runs.TokenStream` of each of some line spans of a fragment.

    The fragment's lines from the first span to the last are lexed, then cut to each span's lines;
    from the fragment's first line (or to its last) when a multi-line string may be open where the
    lexed text would start (or end), so that such a string is still one string as the block pass
    sees it (:data:`_STRING_MARKERS`; a language without markers is lexed whole).

    Args:
        fragment: a function fragment (its comment-blanked ``code`` is lexed).
        spans: ``(first, last)`` file lines inside the fragment, inclusive.

    Returns:
        One stream per span: the tokens starting on its lines, their 1-based file lines, and the file
        lines of the multi-line strings that reach into it.
    """
    import numpy as np

    from twinspect.code.token_runs import TokenStream, token_stream

    rows = _code(fragment).split("\n")
    first, last = spans[0][0] - fragment.start_line, spans[-1][1] - fragment.start_line + 1
    markers = _STRING_MARKERS.get(fragment.language)
    if markers is None or _may_open("\n".join(rows[:first]), markers):
        first = 0
    if markers is None or _may_open("\n".join(rows[first:last]), markers):
        last = len(rows)
    whole = token_stream("\n".join(rows[first:last]), fragment.language)
    shift = fragment.start_line + first - 1
    lines = whole.lines + shift
    strings = [(lo + shift, hi + shift) for lo, hi in whole.strings]
    out = []
    for first, last in spans:
        lo, hi = np.searchsorted(lines, first, "left"), np.searchsorted(lines, last, "right")
        out.append(TokenStream(hashes=whole.hashes[lo:hi], lines=lines[lo:hi], in_string=whole.in_string[lo:hi],
                               strings=tuple((a, b) for a, b in strings if a <= last and first <= b)))
    return out


def add_subfunction_pairs(report: CloneReport, *, min_lines: int = 6) -> CloneReport:
    """Add the copied regions inside functions to a function-granularity report (steps 1–3 of the module doc).

    Args:
        report: a report of :func:`twinspect.code.clones.detect` over function fragments, their
            ``code`` filled (as :func:`twinspect.code.fragments.mine` fills it).
        min_lines: both runs of a copy must hold tokens on at least this many lines.

    Returns:
        A new report (it takes over ``report``'s pair objects, renumbered in place; ``report`` is
        consumed): the fragments with the sub-function fragments among them (sorted by path, lines
        and name, as :func:`~twinspect.code.clones.detect` sorts; ids renumbered in the pairs,
        classes, ``identical_groups`` and ``group_pairs``), the sub-function pairs added to
        ``pairs`` and their classes to ``classes``, and the stats updated: ``fragments``, the pair
        and class counters (:func:`~twinspect.code.clones.pair_stats`, over all pairs),
        ``subfunction_fragments``, ``subfunction_pairs``, ``subfunction_pairs_by_type``,
        ``subfunction_segments`` and ``subfunction_segment_lines`` (step 1), ``subfunction_runs`` (run
        pairs found), ``subfunction_runs_covered`` (of which already inside a reported pair) and
        ``timings["subfunction"]`` (seconds).
    """
    from twinspect.code.blocks import default_min_tokens
    from twinspect.code.clone_types import TYPES, TypeClassifier
    from twinspect.code.clones import ClonePair, CloneReport, overlaps, pair_stats
    from twinspect.code.token_runs import WINDOW_TOKENS, match_token_runs, span_lines

    t0 = time.perf_counter()
    frags = report.fragments
    segments = candidate_segments(frags, min_lines)
    stream_list: list[TokenStream] = []
    for i, group in itertools.groupby(segments, key=lambda seg: seg[0]):
        stream_list.extend(segment_streams(frags[i], [(first, last) for _, first, last in group]))
    runs, _ = match_token_runs(stream_list, min_lines=min_lines, min_tokens=WINDOW_TOKENS,
                               min_t2=default_min_tokens(min_lines))

    functions_of: dict[str, list[int]] = {}
    for i, f in enumerate(frags):
        if f.kind == "function":
            functions_of.setdefault(f.path, []).append(i)

    def holders(path: str, start: int, end: int) -> list[int]:
        """Function fragments holding lines ``start..end``, innermost (fewest lines) first."""
        found = [i for i in functions_of.get(path, ()) if frags[i].start_line <= start and end <= frags[i].end_line]
        return sorted(found, key=lambda i: (frags[i].loc, i))

    listed = {(p.a, p.b) for p in report.pairs}
    group_of = {m: g for g, grp in enumerate(report.identical_groups) for m in grp["members"]}
    side_of: dict[int, set[tuple[int, int]]] = {}
    for g, gp in enumerate(report.group_pairs):
        for side, field in ((0, "a"), (1, "b")):
            for m in gp[field]:
                side_of.setdefault(m, set()).add((g, side))

    def stated(x: int, y: int) -> bool:
        if x == y:  # two copies inside one function: no pair of the function holds them
            return False
        if (min(x, y), max(x, y)) in listed:
            return True
        if x in group_of and group_of[x] == group_of.get(y):
            return True
        sy = side_of.get(y, ())
        return any((g, 1 - side) in sy for g, side in side_of.get(x, ()))

    by_span = {(f.path, f.start_line, f.end_line): i for i, f in enumerate(frags) if f.kind == "function"}
    new: list[Fragment] = []
    new_at: dict[tuple[str, int, int], int] = {}  # span -> index into frags + new

    def fragment_of(outer: int, start: int, end: int, holding: list[int]) -> int:
        f = frags[outer]
        span = (f.path, start, end)
        if span in by_span:
            return by_span[span]
        if span not in new_at:
            first = start - f.start_line
            name = frags[holding[0]].name or "<anonymous>"
            new.append(Fragment(
                path=f.path, start_line=start, end_line=end, name=f"{name}[lines {start}-{end}]", language=f.language,
                text="\n".join(f.text.split("\n")[first:first + end - start + 1]),
                code="\n".join(_code(f).split("\n")[first:first + end - start + 1]), kind=KIND))
            new_at[span] = len(frags) + len(new) - 1
        return new_at[span]

    covered = 0
    found: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for ta, tb in runs:
        fa, fb = frags[segments[ta.file][0]], frags[segments[tb.file][0]]
        sa, ea = span_lines(stream_list[ta.file], ta)
        sb, eb = span_lines(stream_list[tb.file], tb)
        ha, hb = holders(fa.path, sa, ea), holders(fb.path, sb, eb)
        if any(stated(x, y) for x in ha for y in hb):
            covered += 1
            continue
        if fa.path == fb.path and sa <= eb and sb <= ea:
            # one copy runs on where the other starts (a pattern repeated back to back): the lines they
            # share hold the end of one and the start of the other; each keeps its own lines only
            if sa > sb:
                ta, tb, sa, ea, sb, eb = tb, ta, sb, eb, sa, ea
            ea, sb = min(ea, sb - 1), max(sb, ea + 1)
            if ea - sa + 1 < min_lines or eb - sb + 1 < min_lines:
                continue
            ha, hb = holders(fa.path, sa, ea), holders(fb.path, sb, eb)
        a, b = fragment_of(segments[ta.file][0], sa, ea, ha), fragment_of(segments[tb.file][0], sb, eb, hb)
        key = (min(a, b), max(a, b))
        if a != b and key not in seen:
            seen.add(key)
            found.append(key)

    # classes of the sub-function pairs (ids into frags + new): two copies already stated through their
    # functions (one copy in each of two functions of a reported pair) count as linked
    every = [*frags, *new]
    spans = [holders(f.path, f.start_line, f.end_line) for f in new]

    def linked(x: int, y: int) -> bool:
        if (min(x, y), max(x, y)) in seen:
            return True
        hx = spans[x - len(frags)] if x >= len(frags) else [x]
        hy = spans[y - len(frags)] if y >= len(frags) else [y]
        return any(stated(u, v) for u in hx for v in hy)

    in_class = {m for c in report.classes for m in c}
    sub_classes = _complete_linkage([p for p in found if p[0] not in in_class and p[1] not in in_class], linked)

    # renumber: the sub-function fragments among the others, in detect's order
    order = sorted(range(len(every)), key=lambda i: (every[i].path, every[i].start_line, every[i].end_line,
                                                     every[i].name))
    new_id = [0] * len(every)
    for pos, i in enumerate(order):
        new_id[i] = pos
    out_frags = [every[i] for i in order]
    clf = TypeClassifier(out_frags)
    sub_pairs: list[ClonePair] = []
    for a, b in found:
        x, y = sorted((new_id[a], new_id[b]))
        if overlaps(out_frags[x], out_frags[y]):
            continue
        ct = clf.classify(x, y)
        if ct.type == "T4":  # not a copy once cut to whole lines (never seen; kept out all the same)
            continue
        sim = 1.0 if ct.t3_similarity is None else ct.t3_similarity
        sub_pairs.append(ClonePair(x, y, sim, ct.type, ct.t3_similarity, ct.band))

    pairs = report.pairs
    for p in pairs:  # renumbered in place: a copy of every pair doubled the memory of a multi-million-pair report
        p.a, p.b = sorted((new_id[p.a], new_id[p.b]))
    kept = {(p.a, p.b) for p in sub_pairs}
    classes = [sorted(new_id[m] for m in c) for c in report.classes]
    for c in sub_classes:  # a pair dropped above (overlapping, T4) leaves its fragments out
        members = sorted(new_id[m] for m in c)
        members = [m for m in members if any((min(m, o), max(m, o)) in kept for o in members if o != m)]
        if len(members) > 1:
            classes.append(members)
    classes.sort(key=lambda c: (-len(c), c[0]))
    all_pairs = sorted([*pairs, *sub_pairs], key=lambda p: (p.a, p.b))
    groups = [{**g, "members": sorted(new_id[m] for m in g["members"])} for g in report.identical_groups]
    group_pairs = [{**g, "a": sorted(new_id[m] for m in g["a"]), "b": sorted(new_id[m] for m in g["b"])}
                   for g in report.group_pairs]
    stats = {**report.stats, **pair_stats(all_pairs, classes)}
    stats["fragments"] = len(out_frags)
    stats["subfunction_fragments"] = len(new)
    stats["subfunction_pairs"] = len(sub_pairs)
    stats["subfunction_pairs_by_type"] = {ty: sum(1 for p in sub_pairs if p.type == ty) for ty in TYPES}
    stats["subfunction_segments"] = len(segments)
    stats["subfunction_segment_lines"] = sum(last - first + 1 for _, first, last in segments)
    stats["subfunction_runs"] = len(runs)
    stats["subfunction_runs_covered"] = covered
    stats["timings"] = {**stats.get("timings", {}), "subfunction": round(time.perf_counter() - t0, 4)}
    return CloneReport(root=report.root, fragments=out_frags, pairs=all_pairs, classes=classes, stats=stats,
                       config=report.config, identical_groups=groups, group_pairs=group_pairs)


def _complete_linkage(pairs: Sequence[tuple[int, int]], linked: Callable[[int, int], bool]) -> list[list[int]]:
    """Classes of the sub-function pairs: cliques grown pair by pair, in order (complete linkage: two
    groups merge only when ``linked`` holds for every pair across them); classes of two or more."""
    group: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for a, b in pairs:
        ga, gb = group.setdefault(a, a), group.setdefault(b, b)
        members.setdefault(ga, [a])
        members.setdefault(gb, [b])
        if ga == gb:
            continue
        if all(linked(x, y) for x in members[ga] for y in members[gb]):
            for m in members[gb]:
                group[m] = ga
            members[ga].extend(members.pop(gb))
    return [sorted(m) for m in members.values() if len(m) > 1]


__all__ = ["KIND", "add_subfunction_pairs", "candidate_segments", "outermost", "segment_streams"]
