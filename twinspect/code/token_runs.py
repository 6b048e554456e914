"""Copied token runs across syntax: jscpd's Karp–Rabin detector over whole files, for ``--granularity block``.

The statement miner (:mod:`twinspect.code.blocks`) finds copied runs of whole statements. A copy
that starts or ends inside a statement, runs from the tail of one method into the head of the next,
or begins in a docstring is not a run of whole statements, and jscpd — which hashes windows of
tokens with no regard for syntax (Karp–Rabin, as PMD CPD and jscpd do) — reports it. This module
does the same, and its runs become block fragments beside the statement blocks:

1. Per file (:func:`token_stream`, in the mining worker processes): the T1 tokens of the
   comment-blanked text, layout ignored (no Python ``<INDENT>``/``<DEDENT>``), each with the line
   it starts on. A token spanning lines (a docstring, a multi-line string) is split into the tokens
   of each of its lines, each line lexed on its own (as jscpd compares the words of a docstring):
   a copy that starts inside a docstring is still found. Each token is kept as a 64-bit BLAKE2b
   hash (equal in every process).
2. Globally (:func:`match_token_runs`): every window of ``min_tokens`` consecutive tokens of one
   file is hashed (a polynomial rolling hash over the token hashes, modulo 2^64); two positions with
   the same window hash are a seed; seeds on one diagonal (``(p, q)``, ``(p + 1, q + 1)``...) are
   one maximal run, checked token by token (no hash collision survives). A run pair is kept when both
   runs hold tokens on at least ``min_lines`` lines and at least ``min_t2`` tokens outside
   multi-line strings (two copied docstrings alone are not a code clone, and would all look alike
   after T2 abstraction). Two runs in one file never overlap (the run is cut where the second
   starts). A window found in more than ``max_occurrences`` places is paired among its first
   ``max_occurrences`` occurrences, every later one with the first ``hub_occurrences`` (as in
   :mod:`twinspect.code.blocks`); a run is then grown token by token to either side as far as its
   two sides agree (a capped window leaves a gap in its seeds, which would cut the run short of the
   copy). A pair whose two runs lie inside the two runs of a larger pair is left out.
3. :func:`token_run_fragments` cuts whole lines: a run spans the lines of its first and last
   token, widened to the whole of a multi-line string it starts or ends in (a fragment never
   starts inside a string literal, so it lexes as code); runs of one file that mostly cover the same
   lines are merged into one fragment (a copied region, whatever the exact extent of each copy).
4. :func:`add_run_pairs` (after detection, in :func:`twinspect.code.clones.scan`): the nearest-neighbour
   detector does not pair every two fragments holding a run pair (a test set-up pasted into dozens of
   tests: the neighbour search and the verifier keep some of its pairs only), and it leaves out
   candidate pairs of overlapping fragments (:func:`twinspect.code.clones.overlaps`: a pattern
   repeated back to back, whose copies share the line where one ends and the next starts). Every run
   pair that no reported pair holds is stated as a pair of fragments with the runs' own line spans
   (:func:`twinspect.code.subfunction.state_copies`, the reporting step of the sub-function pass at
   function granularity): the fragment of that span, or a new block fragment cut from the fragment
   holding it. Two runs sharing only their boundary line keep it both, as jscpd reports them.

Parameters are jscpd's (``minTokens`` and ``minLines``): ``min_tokens`` defaults to
:data:`WINDOW_TOKENS`, chosen on the Python standard library's agreement with jscpd 5.3.3 (see
``benchmarks/clones_speed_jscpd.py``) and reported on other trees too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from twinspect.code.fragments import Fragment
from twinspect.code.normalize import blake64

if TYPE_CHECKING:
    import numpy as np

    from twinspect.code.clones import CloneReport
    from twinspect.code.subfunction import Span

#: Tokens in a Karp–Rabin window (jscpd's ``minTokens``, 50 by default, counts its own tokens).
#: Chosen on the Python standard library against jscpd 5.3.3 with a prototype of the runs alone
#: (before the pipeline): 50 → 65 %, 40 → 68 %, 30 → 70 % of jscpd's clones inside a run pair, at
#: 1.3× / 1.9× the runs of 50 for 40 / 30. Tuned on the stdlib; the language trees of
#: ``benchmarks/clones_languages_jscpd.py`` were not looked at for it.
WINDOW_TOKENS = 40

#: A window key with more occurrences than this is paired among its first occurrences only.
MAX_OCCURRENCES = 20

#: Each later occurrence of such a window is paired with the window's first this many occurrences.
HUB_OCCURRENCES = 1

#: Two runs of one file whose line spans overlap by at least this share of their union are one
#: region (one fragment), see :func:`token_run_fragments`.
REGION_OVERLAP = 0.5

_BASE = 1099511628211  # multiplier of the rolling window hash (odd, 64-bit)
_RUN_CHUNK = 1 << 16  # diagonal runs turned into Python ints at once (a memory bound)


@dataclass(frozen=True, slots=True)
class TokenStream:
    """The tokens of one file for the run matcher (computed where the file is parsed).

    Attributes:
        hashes: uint64 (T,) BLAKE2b-64 hashes of the T1 tokens, in order.
        lines: int32 (T,) 1-based line each token starts on.
        in_string: bool (T,) whether the token comes from inside a multi-line string (its words).
        strings: ``(first_line, last_line)`` of every multi-line string token.
    """

    hashes: np.ndarray
    lines: np.ndarray
    in_string: np.ndarray
    strings: tuple[tuple[int, int], ...]


class TokenSpan(NamedTuple):
    """Tokens ``first..last`` (inclusive indexes) of file ``file``'s :class:`TokenStream`."""

    file: int
    first: int
    last: int


@functools.lru_cache(maxsize=1 << 18)
def _token_hash(tok: str) -> int:
    return blake64(tok)


def token_stream(code: str, language: str) -> TokenStream:
    """The :class:`TokenStream` of one file's comment-blanked text (step 1 of the module doc).

    Args:
        code: the file's text with comments blanked (same lines as the file).
        language: a registered language name.

    Returns:
        The file's tokens, hashed, with their lines.

    Raises:
        KeyError: unknown language (callers validate language names first).
    """
    import numpy as np

    from twinspect.code.normalize import line_tokens

    per_line, spans = line_tokens(code, language)
    per_line = [[t for t in toks if t != "\\\n"] for toks in per_line]  # a continuation is layout
    inside = np.zeros(len(per_line), dtype=bool)
    for lo, hi in spans:
        inside[lo:hi + 1] = True
    counts = np.fromiter(map(len, per_line), dtype=np.int64, count=len(per_line))
    hashes = np.fromiter((_token_hash(t) for toks in per_line for t in toks), dtype=np.uint64, count=int(counts.sum()))
    lines = np.repeat(np.arange(1, len(per_line) + 1, dtype=np.int32), counts)
    return TokenStream(hashes=hashes, lines=lines, in_string=np.repeat(inside, counts),
                       strings=tuple((lo + 1, hi + 1) for lo, hi in spans))


def match_token_runs(
    streams: Sequence[TokenStream | None],
    *,
    min_lines: int,
    min_tokens: int = WINDOW_TOKENS,
    min_t2: int = 1,
    max_occurrences: int = MAX_OCCURRENCES,
    hub_occurrences: int = HUB_OCCURRENCES,
    consume: bool = False,
) -> tuple[list[tuple[TokenSpan, TokenSpan]], int]:
    """Maximal pairs of equal token runs across and within files (step 2 of the module doc).

    Args:
        streams: one :class:`TokenStream` per file (None: the file takes no part).
        min_lines: both runs must hold tokens on at least this many lines.
        min_tokens: tokens per window (the shortest run found).
        min_t2: both runs must hold at least this many tokens outside multi-line strings.
        max_occurrences, hub_occurrences: the bound on windows pasted in many places (see the
            module doc).
        consume: once their arrays are concatenated, replace each stream of ``streams`` (a list) by
            one holding only its ``lines`` and ``strings`` (what :func:`span_lines` reads), so that
            the caller's copies of the hashes are freed during the match (a memory bound: about 9
            bytes a token, 250 MB on a 13-MLOC tree's sub-function pass). Same result either way.

    Returns:
        ``(pairs, capped)``: run pairs ``(a, b)`` with ``a`` before ``b`` in scan order, none
        inside another pair, in a deterministic order; and the number of window keys capped.

    Raises:
        ValueError: ``min_tokens`` or ``min_lines`` below 1.
    """
    import numpy as np

    from twinspect._arrays import index_dtype

    if min_tokens < 1 or min_lines < 1:
        raise ValueError(f"min_tokens and min_lines must be at least 1, got {min_tokens} and {min_lines}")
    present = [(i, s) for i, s in enumerate(streams) if s is not None and len(s.hashes) >= min_tokens]
    if not present:
        return [], 0
    h = np.concatenate([s.hashes for _, s in present])
    lines = np.concatenate([s.lines for _, s in present])
    in_string = np.concatenate([s.in_string for _, s in present])
    sizes = np.asarray([len(s.hashes) for _, s in present], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    present_ids = [i for i, _ in present]
    if consume:
        empty_h, empty_s = np.zeros(0, np.uint64), np.zeros(0, bool)
        for at, s in present:
            streams[at] = TokenStream(hashes=empty_h, lines=s.lines, in_string=empty_s,  # type: ignore[index]
                                      strings=s.strings)
    del present
    n = len(h) - min_tokens + 1
    if n < 2:
        return [], 0

    def file_of(pos: np.ndarray) -> np.ndarray:
        """File (index into the present streams) of each token position (no per-token file array:
        4 bytes a token)."""
        return np.searchsorted(offset, pos, side="right") - 1
    window = np.zeros(n, dtype=np.uint64)
    base = np.uint64(_BASE)
    with np.errstate(over="ignore"):
        for k in range(min_tokens):
            window *= base
            window += h[k:k + n]
    # windows inside one file, grouped by hash (only keys seen twice or more are kept): the windows
    # that start in one file and end in the next (its last min_tokens - 1 starts; every present
    # file has at least min_tokens tokens, so these ranges are disjoint) are blanked
    for end in (offset[1:]).tolist():
        window[end - min_tokens + 1:end] = 0
    keep = window != 0
    order = np.argsort(window, kind="stable")
    order = order[keep[order]]
    del keep
    keys = window[order]
    del window
    dup = np.r_[False, keys[1:] == keys[:-1]]
    dup[:-1] |= dup[1:]
    sorted_pos, keys = order[dup], keys[dup]
    del order, dup
    cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts, ends = np.r_[0, cut], np.r_[cut, len(sorted_pos)]
    del keys
    size = ends - starts
    # positions as int32 where they fit (index_dtype): the window pairs below are tens of millions on a
    # 13-MLOC tree, at the subfunction pass's memory peak
    sorted_pos = sorted_pos.astype(index_dtype(len(h)), copy=False)
    two = starts[size == 2]  # most keys occur twice: their one pair each, at once
    capped = 0
    pa_parts, pb_parts = [sorted_pos[two]], [sorted_pos[two + 1]]
    # keys seen 3..max_occurrences times: every pair of their occurrences, one array step per group size
    # (a loop over the groups took most of this function on trees of generated code)
    for k in np.unique(size[(size > 2) & (size <= max_occurrences)]).tolist():
        occ = sorted_pos[starts[size == k][:, None] + np.arange(k)]  # (groups, k), ascending positions
        i, j = np.triu_indices(k, k=1)
        pa_parts.append(occ[:, i].ravel())
        pb_parts.append(occ[:, j].ravel())
    for g in np.flatnonzero(size > max_occurrences).tolist():
        occ = sorted_pos[starts[g]:ends[g]]  # ascending positions (stable sort of ascending pos)
        head = occ[:max_occurrences]
        i, j = np.triu_indices(len(head), k=1)
        pa_parts.append(head[i])
        pb_parts.append(head[j])
        capped += 1
        tail = occ[max_occurrences:]
        for first in occ[:hub_occurrences]:
            pa_parts.append(np.full(len(tail), first, dtype=sorted_pos.dtype))
            pb_parts.append(tail)
    pa, pb = np.concatenate(pa_parts), np.concatenate(pb_parts)
    del pa_parts, pb_parts, sorted_pos, starts, ends, size, cut, two
    if not len(pa):
        return [], capped
    d = pb - pa
    o = np.lexsort((pa, d))
    # reordered one array at a time: each old array is freed before the next copy is made
    pa = pa[o]
    pb = pb[o]
    d = d[o]
    del o
    first_idx = np.flatnonzero(np.r_[True, (d[1:] != d[:-1]) | (pa[1:] != pa[:-1] + 1)])
    del d
    last_idx = np.r_[first_idx[1:], len(pa)] - 1
    a0, b0 = pa[first_idx], pb[first_idx]
    length = pa[last_idx] - a0 + min_tokens
    del pa, pb, first_idx, last_idx
    fa0, fb0 = file_of(a0), file_of(b0)  # each run's two files
    length = np.where(fa0 == fb0, np.minimum(length, b0 - a0), length)  # runs in one file never overlap
    code_lines = np.r_[0, np.cumsum(np.diff(lines) != 0, dtype=np.int32)]  # distinct-line counter
    t2 = np.r_[0, np.cumsum(~in_string, dtype=np.int32)]
    found: list[tuple[int, int, int, int, int]] = []
    file_end, starts_at = (offset + sizes).tolist(), offset.tolist()
    # diagonal runs (and their files) as Python ints a chunk at a time: tens of millions on a 13-MLOC
    # tree, about 1 GB of int objects at the scan's memory peak as one list each; so was the file id of
    # every token as a list
    for x, y, m, fx, fy in (run for lo in range(0, len(a0), _RUN_CHUNK) for run in zip(
            a0[lo:lo + _RUN_CHUNK].tolist(), b0[lo:lo + _RUN_CHUNK].tolist(), length[lo:lo + _RUN_CHUNK].tolist(),
            fa0[lo:lo + _RUN_CHUNK].tolist(), fb0[lo:lo + _RUN_CHUNK].tolist())):
        if m < min_tokens:
            continue
        x, y, m = _extend(h, x, y, m, starts_at[fx], starts_at[fy], file_end[fx], file_end[fy])
        if code_lines[x + m - 1] - code_lines[x] + 1 < min_lines or code_lines[y + m - 1] - code_lines[y] + 1 < min_lines:
            continue
        if t2[x + m] - t2[x] < min_t2 or t2[y + m] - t2[y] < min_t2:
            continue
        if not np.array_equal(h[x:x + m], h[y:y + m]):  # a window-hash collision, not a copy
            continue
        found.append((x, y, m, fx, fy))  # a run grows inside its files: they stay fx, fy
    # a pair inside a larger pair (both runs inside its runs, same offset or not) is left out
    found.sort(key=lambda r: (-r[2], r[0], r[1]))
    kept: list[tuple[int, int, int, int, int]] = []
    by_files: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for x, y, m, fx, fy in found:
        key = (fx, fy)
        if any(px <= x and x + m <= px + pm and py <= y and y + m <= py + pm for px, py, pm in by_files.get(key, ())):
            continue
        by_files.setdefault(key, []).append((x, y, m))
        kept.append((x, y, m, fx, fy))
    kept.sort()
    out = []
    for x, y, m, fa, fb in kept:
        out.append((TokenSpan(present_ids[fa], x - starts_at[fa], x - starts_at[fa] + m - 1),
                    TokenSpan(present_ids[fb], y - starts_at[fb], y - starts_at[fb] + m - 1)))
    return out, capped


def _extend(h: np.ndarray, x: int, y: int, m: int, x0: int, y0: int, x1: int, y1: int) -> tuple[int, int, int]:
    """Run ``(x, y, m)`` (``m`` tokens at ``x`` equal to those at ``y``, ``x < y``) grown token by token to
    the right and to the left as far as the two sides agree, inside their files (``[x0, x1)`` and
    ``[y0, y1)``) and, in one file, never into the other side. The seeds of a run miss where a window
    of it was capped (:data:`MAX_OCCURRENCES`: the two positions were not paired), which cut the run
    short of the copy."""
    same = x0 == y0
    while x + m < x1 and y + m < y1 and (not same or x + m < y) and h[x + m] == h[y + m]:
        m += 1
    while x > x0 and y > y0 and (not same or x + m < y) and h[x - 1] == h[y - 1]:
        x, y, m = x - 1, y - 1, m + 1
    return x, y, m


def span_lines(stream: TokenStream, span: TokenSpan) -> tuple[int, int]:
    """1-based inclusive line span of a run's fragment: its first and last token's lines, widened to
    the whole of a multi-line string the run starts or ends inside (step 3 of the module doc)."""
    start, end = int(stream.lines[span.first]), int(stream.lines[span.last])
    for lo, hi in stream.strings:
        if lo < start <= hi:
            start = lo
        if lo <= end < hi:
            end = hi
    return start, end


def token_run_fragments(
    rels: Sequence[str],
    languages: Sequence[str],
    streams: Sequence[TokenStream | None],
    pairs: Sequence[tuple[TokenSpan, TokenSpan]],
    read_file: Callable[[int], tuple[str, str] | None],
    *,
    skip: Callable[[str, int, int], bool] = lambda rel, start, end: False,
    scope: Callable[[str, int, int], str] = lambda rel, start, end: "",
) -> tuple[list[Fragment], int]:
    """Fragments of the runs of :func:`match_token_runs`, one per copied region of a file.

    The runs of one file whose line spans overlap by at least :data:`REGION_OVERLAP` of their union
    are merged into one region first: a table or preamble shared with many files, each copy in a
    slightly different extent, is one fragment.

    Args:
        rels, languages, streams: per file index, its ``Fragment.path``, language and stream.
        pairs: run pairs from :func:`match_token_runs`.
        read_file: ``file index -> (text, comment-blanked code)`` of the file as it was parsed, or
            None when it changed or cannot be read any more (its runs give no fragment).
        skip: ``(rel, start_line, end_line) -> True`` for a span that needs no fragment of its own
            (a function or statement block with that span, or a pair already reported inside one).
        scope: ``(rel, start_line, end_line) -> qualified name`` of the innermost function holding
            the span (``""``: none).

    Returns:
        ``(fragments, unreadable)``: fragments ordered by file then ``(start_line, -end_line)``,
        named ``"<scope>[lines START-END]"`` (``"<module>"`` outside functions); and the number of
        files whose runs gave no fragment because they could not be read again as parsed.
    """
    runs_of: dict[int, list[tuple[int, int]]] = {}
    for a, b in pairs:
        for run in (a, b):
            stream = streams[run.file]
            assert stream is not None
            runs_of.setdefault(run.file, []).append(span_lines(stream, run))
    # Runs of one file that mostly cover the same lines are one copied region (a table shared with
    # many files, each copy in a slightly different extent): one fragment per region, not per run.
    # Runs that only partly overlap stay apart (a 10-line copy inside a 36-line one keeps its own
    # fragment, else it would be compared with the 36 lines).
    spans: dict[int, set[tuple[int, int]]] = {}
    for fi, found in runs_of.items():
        merged: list[list[int]] = []
        for start, end in sorted(set(found), key=lambda r: (r[0], -r[1])):
            for region in merged:
                inter = min(end, region[1]) - max(start, region[0]) + 1
                union = max(end, region[1]) - min(start, region[0]) + 1
                if inter > 0 and inter >= REGION_OVERLAP * union:
                    region[0], region[1] = min(start, region[0]), max(end, region[1])
                    break
            else:
                merged.append([start, end])
        for start, end in merged:
            if not skip(rels[fi], start, end):
                spans.setdefault(fi, set()).add((start, end))
    out: list[Fragment] = []
    unreadable = 0
    for fi in sorted(spans):
        got = read_file(fi)
        if got is None:
            unreadable += 1
            continue
        text_lines = got[0].split("\n")
        code_lines = got[1].split("\n")
        for start, end in sorted(spans[fi], key=lambda s: (s[0], -s[1])):
            name = scope(rels[fi], start, end) or "<module>"
            out.append(Fragment(
                path=rels[fi], start_line=start, end_line=end, name=f"{name}[lines {start}-{end}]",
                language=languages[fi], text="\n".join(text_lines[start - 1:end]),
                code="\n".join(code_lines[start - 1:end]), kind="block",
            ))
    return out, unreadable


def add_run_pairs(report: CloneReport, copies: Sequence[tuple[Span, Span]], *, min_lines: int = 6) -> CloneReport:
    """State the run pairs of the block pass that detection did not pair (``--granularity block``, step 4 of
    the module doc).

    Args:
        report: the report of :func:`twinspect.code.clones.detect` over the block-granularity fragments
            of :func:`twinspect.code.fragments.mine` (consumed: the new report takes over its pairs).
        copies: the line spans of the run pairs :func:`match_token_runs` found while mining
            (``mine(..., token_copies=...)``, :func:`span_lines` of each run).
        min_lines: ``--min-lines`` (a side trimmed of lines it shares with the other keeps as many).

    Returns:
        The new report (:func:`twinspect.code.subfunction.state_copies` with ``kind="block"`` and
        ``touching``), its stats with ``token_run_pairs`` (pairs added), ``token_run_pairs_by_type``,
        ``token_run_pair_fragments`` (block fragments added for them), ``token_runs_matched`` (run pairs
        found), ``token_runs_covered`` (of which already stated by detection) and
        ``timings["token_run_pairs"]`` (seconds).
    """
    import time

    from twinspect.code.clone_types import TYPES
    from twinspect.code.subfunction import state_copies

    t0 = time.perf_counter()
    out = state_copies(report, copies, kind="block", min_lines=min_lines, touching=True)
    stats = out.report.stats
    stats["token_run_pairs"] = len(out.pairs)
    stats["token_run_pairs_by_type"] = {ty: sum(1 for p in out.pairs if p.type == ty) for ty in TYPES}
    stats["token_run_pair_fragments"] = out.fragments
    stats["token_runs_matched"] = len(copies)
    stats["token_runs_covered"] = out.covered
    stats["timings"] = {**stats.get("timings", {}), "token_run_pairs": round(time.perf_counter() - t0, 4)}
    return out.report


__all__ = [
    "HUB_OCCURRENCES",
    "MAX_OCCURRENCES",
    "REGION_OVERLAP",
    "WINDOW_TOKENS",
    "TokenSpan",
    "TokenStream",
    "add_run_pairs",
    "match_token_runs",
    "span_lines",
    "token_run_fragments",
    "token_stream",
]
