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
   run crosses a function boundary or leaves the functions; in shards on the scan's executor when it
   has one (:mod:`twinspect.code.executors`).
3. :func:`add_subfunction_pairs` (after detection; its reporting step, :func:`state_copies`, also states
   the block pass's run pairs at ``--granularity block``): the run pairs of
   :func:`~twinspect.code.token_runs.match_token_runs` with the block pass's parameters
   (:data:`~twinspect.code.token_runs.WINDOW_TOKENS` tokens per window, both runs on at least
   ``min_lines`` lines and with at least :func:`~twinspect.code.blocks.default_min_tokens` tokens
   outside multi-line strings); a run's lines are those of its first and last token
   (:func:`~twinspect.code.token_runs.span_lines`). A run pair is dropped when the report already
   states it: a reported pair (a listed pair, two members of one ``identical_groups`` entry, or the
   two sides of a ``group_pairs`` entry) of two function fragments that hold one run each. Otherwise
   each run becomes a fragment named ``"<innermost function>[lines START-END]"`` (its text cut from
   the function's), or the function fragment itself when the run spans exactly a function, and the
   pair is reported (two copies of one file whose lines meet, a pattern repeated back to back, are
   cut into two sides that are line-for-line copies and do not overlap, each of at least
   ``min_lines`` lines: see :func:`state_copies`), typed by :class:`~twinspect.code.clone_types.TypeClassifier` (T1 as a rule: the
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
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from twinspect.code.fragments import Fragment

if TYPE_CHECKING:
    from twinspect.code.clones import ClonePair, CloneReport
    from twinspect.code.executors import ShardExecutor
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


#: One side of a copy: ``(path, first line, last line)``, 1-based and inclusive, ``path`` as in
#: :attr:`Fragment.path <twinspect.code.fragments.Fragment.path>`.
Span = tuple[str, int, int]


@dataclass(slots=True)
class StatedCopies:
    """What :func:`state_copies` did.

    Attributes:
        report: the new report (fragments, pairs, classes and pair/class counters updated).
        fragments: fragments added (copies whose span was no fragment yet).
        pairs: the pairs added (ids into ``report.fragments``).
        covered: copies already stated by the report (a reported pair of two fragments holding one
            side each).
        unplaced: copies with a side that no fragment of the report holds (no text to cut it from),
            left out.
    """

    report: CloneReport
    fragments: int
    pairs: list[ClonePair]
    covered: int
    unplaced: int


#: Fragments whose candidate segments one shard of :func:`add_subfunction_pairs` lexes (with an executor).
_STREAM_SHARD = 2048


def _streams_shard(shared: None, shard: list[tuple[Fragment, list[tuple[int, int]]]]) -> list[TokenStream]:
    """:func:`segment_streams` of each (fragment, spans) of a shard, concatenated (an executor stage)."""
    return [stream for fragment, spans in shard for stream in segment_streams(fragment, spans)]


def add_subfunction_pairs(report: CloneReport, *, min_lines: int = 6,
                          executor: ShardExecutor | None = None) -> CloneReport:
    """Add the copied regions inside functions to a function-granularity report (steps 1–3 of the module doc).

    Args:
        report: a report of :func:`twinspect.code.clones.detect` over function fragments, their
            ``code`` filled (as :func:`twinspect.code.fragments.mine` fills it).
        min_lines: both runs of a copy must hold tokens on at least this many lines.
        executor: where the candidate segments are lexed, :data:`_STREAM_SHARD` fragments a shard
            (:mod:`twinspect.code.executors`; on a 13-MLOC tree about half a minute in one process);
            None = this process. The same report either way.

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
    from twinspect.code.clone_types import TYPES
    from twinspect.code.token_runs import WINDOW_TOKENS, match_token_runs, span_lines

    t0 = time.perf_counter()
    frags = report.fragments
    segments = candidate_segments(frags, min_lines)
    work = [(frags[i], [(first, last) for _, first, last in group])
            for i, group in itertools.groupby(segments, key=lambda seg: seg[0])]
    shards = [work[lo:lo + _STREAM_SHARD] for lo in range(0, len(work), _STREAM_SHARD)]
    del work
    stream_list: list[TokenStream] = []
    for streams in (executor.map(_streams_shard, shards) if executor is not None and len(shards) > 1
                    else (_streams_shard(None, shard) for shard in shards)):
        stream_list.extend(streams)
    del shards
    runs, _ = match_token_runs(stream_list, min_lines=min_lines, min_tokens=WINDOW_TOKENS,
                               min_t2=default_min_tokens(min_lines), consume=True)  # span_lines reads lines only
    copies = [((frags[segments[ta.file][0]].path, *span_lines(stream_list[ta.file], ta)),
               (frags[segments[tb.file][0]].path, *span_lines(stream_list[tb.file], tb))) for ta, tb in runs]
    out = state_copies(report, copies, kind=KIND, min_lines=min_lines, touching=False)
    stats = out.report.stats
    stats["subfunction_fragments"] = out.fragments
    stats["subfunction_pairs"] = len(out.pairs)
    stats["subfunction_pairs_by_type"] = {ty: sum(1 for p in out.pairs if p.type == ty) for ty in TYPES}
    stats["subfunction_segments"] = len(segments)
    stats["subfunction_segment_lines"] = sum(last - first + 1 for _, first, last in segments)
    stats["subfunction_runs"] = len(runs)
    stats["subfunction_runs_covered"] = out.covered
    stats["timings"] = {**stats.get("timings", {}), "subfunction": round(time.perf_counter() - t0, 4)}
    return out.report


def state_copies(report: CloneReport, copies: Sequence[tuple[Span, Span]], *, kind: str, min_lines: int,
                 touching: bool) -> StatedCopies:
    """State exact copies found by a run matcher as pairs of a report, unless the report already does.

    The reporting step of :func:`add_subfunction_pairs` (step 3 of the module doc), shared with
    ``--granularity block`` (:func:`twinspect.code.token_runs.add_run_pairs`). A fragment *holds* a
    side when the side's lines lie within the fragment's. A copy is already stated when a reported
    pair (a listed pair, two members of one ``identical_groups`` entry, or the two sides of a
    ``group_pairs`` entry) joins a fragment holding one side with a fragment holding the other. Any
    other copy is stated as a pair of fragments with exactly its two spans: the report's fragment
    with that span, or a new fragment of kind ``kind`` named ``"<name>[lines START-END]"`` after the
    innermost fragment holding it (its own ``[lines ...]`` suffix left out), its text and code cut
    from the outermost one. Two sides in one file whose lines meet (a pattern repeated back to back,
    the second side the first shifted by ``s`` lines: sides ``[sa, ea]`` and ``[sb, eb]``, ``s = sb -
    sa``, sharing ``o`` lines) are cut so that they are line for line copies again and do not
    overlap: when lines ``sa`` and ``sb`` look alike (equal once every word is one placeholder: a
    pattern repeated whole), into ``[sa, sb - 1]`` and ``[sb, sb + s - 1]``; otherwise each leaves
    out the shared lines and their counterparts on the other side, ``[sa + o, sb - 1]`` and ``[sb +
    o, sb + s - 1]``; each keeps at least ``min_lines`` lines; with
    ``touching``, two sides that share only the line where one ends and the other starts (the last
    tokens of one copy and the first of the next, as jscpd reports them) keep their spans, and their
    pair is stated although the fragments overlap on that line. The pairs are typed by
    :class:`~twinspect.code.clone_types.TypeClassifier` (a T4 pair is left out), their ``similarity``
    is their abstracted-token similarity (1.0 for T1/T2), and they form classes of their own by
    complete linkage, leaving out fragments already in a class of the report.

    Args:
        report: a report of :func:`twinspect.code.clones.detect` (``code`` of its fragments filled);
            consumed: the new report takes over its pair objects, renumbered in place.
        copies: pairs of copied spans (in the files the report's fragments come from).
        kind: :attr:`Fragment.kind` of the fragments added.
        min_lines: a side trimmed of the lines it shares with the other keeps at least this many.
        touching: keep two sides that share one boundary line as they are (see above).

    Returns:
        A :class:`StatedCopies`: the new report (fragments sorted by path, lines and name, as
        :func:`~twinspect.code.clones.detect` sorts, ids renumbered in the pairs, classes,
        ``identical_groups`` and ``group_pairs``; ``stats["fragments"]`` and the pair and class
        counters of :func:`~twinspect.code.clones.pair_stats` updated over all pairs) and the counts.
    """
    import bisect

    from twinspect.code.clone_types import TypeClassifier
    from twinspect.code.clones import ClonePair, CloneReport, overlaps, pair_stats

    frags = report.fragments
    in_file: dict[str, list[int]] = {}  # per path, fragment indexes by start line
    for i in sorted(range(len(frags)), key=lambda i: (frags[i].path, frags[i].start_line)):
        in_file.setdefault(frags[i].path, []).append(i)
    starts_of = {path: [frags[i].start_line for i in ids] for path, ids in in_file.items()}

    def holders(path: str, start: int, end: int) -> list[int]:
        """Fragments holding lines ``start..end``, innermost (fewest lines) first."""
        ids = in_file.get(path, [])
        found = [i for i in ids[:bisect.bisect_right(starts_of.get(path, []), start)] if end <= frags[i].end_line]
        return sorted(found, key=lambda i: (frags[i].loc, i))

    listed = {(p.a, p.b) for p in report.pairs}
    group_of = {m: g for g, grp in enumerate(report.identical_groups) for m in grp["members"]}
    side_of: dict[int, set[tuple[int, int]]] = {}
    for g, gp in enumerate(report.group_pairs):
        for side, field in ((0, "a"), (1, "b")):
            for m in gp[field]:
                side_of.setdefault(m, set()).add((g, side))

    def stated(x: int, y: int) -> bool:
        if x == y:  # two copies inside one fragment: no pair of the fragment holds them
            return False
        if (min(x, y), max(x, y)) in listed:
            return True
        if x in group_of and group_of[x] == group_of.get(y):
            return True
        sy = side_of.get(y, ())
        return any((g, 1 - side) in sy for g, side in side_of.get(x, ()))

    by_span = {(f.path, f.start_line, f.end_line): i for i, f in enumerate(frags)}
    new: list[Fragment] = []
    new_at: dict[Span, int] = {}  # span -> index into frags + new

    def fragment_of(span: Span, holding: list[int]) -> int:
        if span in by_span:
            return by_span[span]
        if span not in new_at:
            inner, outer = frags[holding[0]], frags[holding[-1]]
            name = (inner.name if inner.kind == "function" else inner.name.rsplit("[lines ", 1)[0]) or "<anonymous>"
            first, n = span[1] - outer.start_line, span[2] - span[1] + 1
            new.append(Fragment(
                path=outer.path, start_line=span[1], end_line=span[2], name=f"{name}[lines {span[1]}-{span[2]}]",
                language=outer.language, text="\n".join(outer.text.split("\n")[first:first + n]),
                code="\n".join(_code(outer).split("\n")[first:first + n]), kind=kind))
            new_at[span] = len(frags) + len(new) - 1
        return new_at[span]

    def touch(a: Span | Fragment, b: Span | Fragment) -> bool:
        """Whether two spans of one file share only the line where the first ends and the second starts."""
        (pa, sa, ea), (pb, sb, eb) = (_span(a), _span(b)) if _span(a)[1] <= _span(b)[1] else (_span(b), _span(a))
        return touching and pa == pb and sa < sb and ea == sb and ea < eb

    def line_shape(path: str, line: int) -> str:
        """The code of one line with every string literal (its prefix too: ``b"..."``, ``f'...'``) as
        ``s``, every other word (name, keyword, number) as ``w``, and no spaces: equal for two lines of
        one pattern whose names or literals differ."""
        held = holders(path, line, line)
        if not held:
            return f"<{line}>"
        outer = frags[held[-1]]
        rows = _code(outer).split("\n")
        row = rows[line - outer.start_line] if 0 <= line - outer.start_line < len(rows) else ""
        row = _STRING_LITERAL.sub("s", row)
        return re.sub(r"\s+", "", re.sub(r"\w+", "w", row)) or f"<{line}>"

    covered = unplaced = 0
    found: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for a_span, b_span in copies:
        ha, hb = holders(*a_span), holders(*b_span)
        if any(stated(x, y) for x in ha for y in hb):
            covered += 1
            continue
        (pa, sa, ea), (pb, sb, eb) = a_span, b_span
        if pa == pb and sa <= eb and sb <= ea and not touch(a_span, b_span):
            # one copy runs on where the other starts (a pattern repeated back to back): the lines they
            # share hold the end of one and the start of the other; each side leaves out the shared
            # lines and their counterparts on the other side, so the two sides stay line for line
            # copies of each other (the second copy is the first shifted by ``shift`` lines)
            if sa > sb:
                sa, ea, sb, eb = sb, eb, sa, ea
            shift, shared = sb - sa, min(ea, eb) - sb + 1
            if line_shape(pa, sa) == line_shape(pa, sb):
                # the two first lines look alike (a pattern repeated whole): the shared line starts the
                # second side, the first side ends before it
                sa, ea, sb, eb = sa, sb - 1, sb, min(eb, sb + shift - 1)
            else:
                sa, ea, sb, eb = sa + shared, sb - 1, sb + shared, min(eb, sb + shift - 1)
            if ea - sa + 1 < min_lines or eb - sb + 1 < min_lines:
                continue
            a_span, b_span = (pa, sa, ea), (pb, sb, eb)
            ha, hb = holders(*a_span), holders(*b_span)
        if not ha or not hb:
            unplaced += 1
            continue
        a, b = fragment_of(a_span, ha), fragment_of(b_span, hb)
        key = (min(a, b), max(a, b))
        if a != b and key not in seen:
            seen.add(key)
            found.append(key)

    # classes of the added pairs (ids into frags + new): two copies already stated through the fragments
    # holding them (one copy in each of two fragments of a reported pair) count as linked
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

    # renumber: the added fragments among the others, in detect's order
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
        if overlaps(out_frags[x], out_frags[y]) and not touch(out_frags[x], out_frags[y]):
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
    code_hashes = None
    if report.code_hashes is not None:  # the known ones follow their fragments; the added ones are not known
        import numpy as np

        code_hashes = np.zeros(len(out_frags), dtype=report.code_hashes.dtype)
        code_hashes[np.asarray(new_id[:len(frags)], dtype=np.int64)] = report.code_hashes
    return StatedCopies(
        report=CloneReport(root=report.root, fragments=out_frags, pairs=all_pairs, classes=classes, stats=stats,
                           config=report.config, identical_groups=groups, group_pairs=group_pairs,
                           code_hashes=code_hashes),
        fragments=len(new), pairs=sub_pairs, covered=covered, unplaced=unplaced)


#: A one-line string literal with its prefix letters (``b"\\0"``, ``r'x'``), for ``line_shape`` in
#: :func:`state_copies`.
_STRING_LITERAL = re.compile(r"""\b\w*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")


def _span(x: Span | Fragment) -> Span:
    return (x.path, x.start_line, x.end_line) if isinstance(x, Fragment) else x


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


__all__ = ["KIND", "Span", "StatedCopies", "add_subfunction_pairs", "candidate_segments", "outermost", "segment_streams",
           "state_copies"]
