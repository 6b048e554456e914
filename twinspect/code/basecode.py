"""Base code: passages shared by so many fragments that sharing them is no evidence of copying.

MOSS ignores passages that occur in more than a set number of submissions (its ``-m`` option,
default 10) or in instructor-supplied base code (Aiken, *MOSS: a system for detecting software
plagiarism*; Schleimer, Wilkerson & Aiken, *Winnowing*, SIGMOD 2003): code that everybody has — a
course template, a logging preamble, an instrumentation block pasted into every function — links
unrelated files. A clone detector meets the same: in SSCD's Company-C set every private function
carries the same injected statements (``int add_var_1; char add_var_2; char add_var_3[10]="hello";
add_var_1 = 0; ...``), and an alignment over whole fragments links *different* injected functions
through them.

Here a *base passage* is a run of :data:`PASSAGE_LINES` consecutive non-blank source lines
(comments blanked, whitespace collapsed, identifiers and literals kept) holding at least
:data:`MIN_TOKENS` lexical tokens that occurs in at least ``max(min_fragments, fraction · N)`` of the
N fragments compared (each fragment counted once). Passages, not single lines: a frequent *line*
(``in.close();``, ``return NULL;``, ``} catch (IOException e) {``) is an idiom that real clones share
too — setting lines found in ≥ 1 % of the fragments aside costs BigCloneBench's tune half 31 points of
MT3 recall — while a frequent multi-line passage is pasted code. The share matters as well: chains of
``catch``/``printStackTrace`` clauses are 3-line passages in 1.9 % of the BigCloneBench test half's
fragments (setting them aside there costs 4.7 points of MT3 recall; on the tune half and the Python
standard library no passage reaches 1 %), Company-C's two injected blocks are in 3.4 % and 6.2 % of
its fragments. :data:`FRACTION` (3 %) was set with Company-C in view — it is the only data set here
with pasted base code — and BigCloneBench's held-out numbers are unchanged by it.
:func:`base_lines` returns the lines of the base passages,
:func:`without_base_lines` blanks them out of a fragment (line structure kept). The clone verifier
(:func:`twinspect.code.clones.detect`) accepts a candidate pair holding base lines only when it is
still a clone once they are set aside.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from twinspect.code.fragments import Fragment

#: A passage occurring in at least this many fragments can be base code (MOSS's ``-m`` default).
MIN_FRAGMENTS = 10
#: ... and in at least this share of the fragments compared (see the module doc for how it was set).
FRACTION = 0.03
#: Consecutive non-blank lines in a passage.
PASSAGE_LINES = 3
#: Lexical tokens a passage must hold (shorter runs — ``}``/``else``/``return x;`` — are idiom).
MIN_TOKENS = 15


def line_key(line: str) -> str:
    """A source line as base code compares it: its words joined by single spaces (layout ignored).

    Args:
        line: one line of a fragment's comment-blanked code.

    Returns:
        The line without leading, trailing and repeated whitespace ("" for a blank line).
    """
    return " ".join(line.split())


def _code_lines(fragment: Fragment) -> list[str]:
    return [k for k in map(line_key, (fragment.code or fragment.text).splitlines()) if k]


def _passages(fragment: Fragment, passage_lines: int) -> set[tuple[str, tuple[str, ...]]]:
    """The distinct ``(language, lines)`` passages of ``passage_lines`` consecutive code lines of a fragment."""
    lines = _code_lines(fragment)
    return {(fragment.language, tuple(lines[j:j + passage_lines])) for j in range(len(lines) - passage_lines + 1)}


def base_passages(
    fragments: Sequence[Fragment],
    *,
    min_fragments: int = MIN_FRAGMENTS,
    fraction: float = FRACTION,
    passage_lines: int = PASSAGE_LINES,
    min_tokens: int = MIN_TOKENS,
) -> list[tuple[tuple[str, ...], int]]:
    """The base passages of a set of fragments (see the module doc).

    Args:
        fragments: the N fragments compared (duplicates should be collapsed first: a function
            copied 300 times would otherwise make its own passages frequent).
        min_fragments: a base passage occurs in at least this many fragments ...
        fraction: ... and in at least ``fraction · N`` of them (0 ≤ fraction ≤ 1).
        passage_lines: consecutive non-blank lines per passage (≥ 1).
        min_tokens: passages of fewer lexical tokens are left out.

    Returns:
        ``(lines, fragments holding it)`` per base passage (lines whitespace-collapsed), most
        frequent first.

    Raises:
        ValueError: ``fraction`` outside [0, 1], ``min_fragments`` < 1 or ``passage_lines`` < 1.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    if min_fragments < 1 or passage_lines < 1:
        raise ValueError(f"min_fragments and passage_lines must be ≥ 1, got {min_fragments}, {passage_lines}")
    need = max(min_fragments, fraction * len(fragments))
    if len(fragments) < need:
        return []
    # Two passes, so that only frequent passages are ever held as text. The first counts each
    # fragment's distinct passages by hash in one int64 array; a dict of every distinct passage (its
    # tuple keys holding the lines) was about 4x the fragments' text, over 1 GB on a 13-MLOC tree's
    # representatives. The second counts exactly, by text, the passages whose hash reached `need`:
    # a passage that occurs in `need` fragments has a hash that does, so the result is exact (a
    # colliding hash only adds a candidate, counted by its text).
    hashes = np.fromiter(
        itertools.chain.from_iterable(map(hash, _passages(f, passage_lines)) for f in fragments), dtype=np.int64)
    values, counts = np.unique(hashes, return_counts=True)
    del hashes
    frequent = set(values[counts >= need].tolist())
    del values, counts
    df: dict[tuple[str, tuple[str, ...]], int] = defaultdict(int)
    if frequent:
        for f in fragments:
            for key in _passages(f, passage_lines):
                if hash(key) in frequent:
                    df[key] += 1
    from twinspect.code.normalize import lex

    out = [(passage, n) for (lang, passage), n in df.items()
           if n >= need and sum(len(lex(line, lang)[0]) for line in passage) >= min_tokens]
    out.sort(key=lambda t: (-t[1], t[0]))
    return out


def base_lines(fragments: Sequence[Fragment], **kwargs) -> frozenset[str]:
    """The lines of the base passages of ``fragments`` (keyword arguments as :func:`base_passages`).

    Returns:
        Whitespace-collapsed lines (compare with ``" ".join(line.split())``); empty when there is no
        base passage.

    Raises:
        ValueError: as :func:`base_passages`.
    """
    return frozenset(line for passage, _ in base_passages(fragments, **kwargs) for line in passage)


def without_base_lines(fragment: Fragment, base: frozenset[str]) -> Fragment:
    """A copy of ``fragment`` whose base lines are blank in ``code`` (line numbers unchanged).

    Args:
        fragment: any fragment.
        base: lines from :func:`base_lines`.

    Returns:
        ``fragment`` itself when it holds no base line, else a new :class:`Fragment` with the same
        path, lines and ``text`` and the base lines of ``code`` replaced by empty lines.
    """
    code = fragment.code or fragment.text
    lines = code.splitlines(keepends=True)
    hit = False
    for i, line in enumerate(lines):
        if line_key(line) in base:
            lines[i] = "\n" if line.endswith("\n") else ""
            hit = True
    return dataclasses.replace(fragment, code="".join(lines)) if hit else fragment


def holds_base_lines(fragment: Fragment, base: frozenset[str]) -> bool:
    """Whether any line of ``fragment`` is a base line."""
    return bool(base) and any(k in base for k in _code_lines(fragment))
