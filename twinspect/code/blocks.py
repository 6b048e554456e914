"""Block granularity: maximal runs of statements that have a Type-1/Type-2 copy elsewhere in a scan.

A function-level detector misses code copied *inside* two different larger functions, or in
module-level and class-level code; jscpd (Rabin–Karp windows over tokens) and Baker's dup
(parameterised suffix trees over lines) report such copies. This module does the same over
*statements*:

1. Per file (:func:`collect_statements`, run in the mining worker processes), every *statement
   sequence* is listed: the statements of a module/translation unit, a function, class or
   constructor body, a nested block, a ``case`` arm, an ``#ifdef`` branch (tree-sitter node types in
   :data:`SEQUENCE_TYPES`; statements are their named children that are not fields such as a
   ``case`` value). For each statement: its byte and line span, its number of T2 tokens and a
   64-bit hash of its T2 tokens (the tokens of :func:`twinspect.code.normalize.lex`: identifiers
   and literals abstracted, comments and layout ignored, Python's ``<INDENT>``/``<DEDENT>`` taken
   relative to the statement's first line; the file is lexed once, see :class:`_StatementTokens`).
   Comments, Python docstrings and Java ``case`` labels are not statements
   (:data:`TRANSPARENT_TYPES`); parse-error nodes (:data:`SEPARATOR_TYPES`) end a sequence. A class
   or function definition is a statement of its enclosing sequence like any other, so a run may span
   several definitions (methods of a class, the classes of a module). Two kinds of statements are
   hashed on their T1 tokens (names and literals kept) instead, because after T2 abstraction they
   are alike in almost every file without being copied code: imports, ``package``,
   ``#include``/``#define`` (:data:`IMPORT_TYPES`), and *data* statements (tables, long literal
   lists: at least :data:`DATA_MIN_TOKENS` tokens, more than half of them repeating the pattern
   before them, :func:`repeated_tokens`). A data statement stands in its sequence as several
   statements: its tokens before the first element of its largest literal collection
   (:data:`COLLECTION_TYPES`: a dict, list, tuple, set, adjacent strings, an initializer list), each
   element (a dict entry gives two, its key and its value), and its tokens after the last element.
   So a copied part of a table is found, also when it runs on into the statements after the table
   (jscpd reports windows of a 256-entry codec map, and from the end of one table into the next),
   while two tables of the same shape and other values are not.
2. Globally (:func:`match_runs`, in the main process), as jscpd's Rabin–Karp detector does with
   token windows: for each statement position the shortest window of consecutive statements holding
   at least ``min_tokens`` T2 tokens is hashed; two positions with the same window are a seed,
   extended statement by statement to the left and to the right as far as the hashes agree (a
   *maximal* pair of runs). Windows are counted in tokens, not lines, because tokens do not depend
   on layout: equal statements always give equal windows, so every common run of at least
   ``min_tokens`` tokens is found from its first statement, whatever the line breaks on either
   side. A pair is kept when both runs span at least ``min_lines`` *code lines* (lines on which a
   token starts, docstrings left out: the inside of a multi-line string is one ``LIT``) and less
   than half of its tokens are in statements that repeat an earlier statement of the run (in the
   spirit of CCFinderX's RNR filter: two trivial ``@property`` getters in a row are not a copied
   block).
3. :func:`block_fragments` turns the kept pairs into :class:`~twinspect.code.fragments.Fragment`
   records, one per distinct run: a pair whose two runs lie inside the two runs of a larger pair is
   left out (a copied ``if`` is not reported again as its copied body), as are runs made of a single
   function definition, imports aside (already a function fragment; when two functions are T2-equal,
   their bodies are contained in that pair of definitions, so the bodies are not repeated as blocks
   either), runs made only of imports (in :func:`match_runs`) and runs whose line span equals a
   function fragment's.

``min_tokens`` defaults to ``MIN_TOKENS_PER_LINE * min_lines`` (:func:`default_min_tokens`), as
jscpd asks for both ``minTokens`` and ``minLines``.

Bounds: a window shared by more than :data:`MAX_OCCURRENCES_PER_KEY` positions (a statement
sequence pasted in hundreds of places, such as the preamble of the ``encodings`` codec modules, or an
idiom such as a getter followed by a setter) is paired among its first
:data:`MAX_OCCURRENCES_PER_KEY` occurrences in scan order, and each later occurrence only with the
first :data:`HUB_OCCURRENCES` (so every copy gets its block, the pipeline pairs the identical
fragments, and a window gives ``O(MAX_OCCURRENCES_PER_KEY ** 2 + HUB_OCCURRENCES * occurrences)``
pairs); :attr:`ScanStats.block_keys_capped <twinspect.code.files.ScanStats.block_keys_capped>` counts
such windows. Two copies in the same file, the same function or the same statement sequence are
paired like any others; two runs in the same sequence never overlap (the match is cut where the
second run starts).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import operator
import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import tree_sitter

if TYPE_CHECKING:
    from twinspect.code.token_runs import TokenStream

from twinspect.code.comments import blank_ranges
from twinspect.code.files import ScanStats
from twinspect.code.fragments import Fragment, extract_file
from twinspect.code.languages import COMMENT_TYPES, REGISTRY, canonical_language, get_language
from twinspect.code.normalize import DEDENT, INDENT, lex

#: Node types whose statements form a sequence, per language (from the language registry).
SEQUENCE_TYPES: dict[str, tuple[str, ...]] = {n: s.sequence_types for n, s in REGISTRY.items()}

#: Fields of a sequence node whose children are statements too (a JavaScript ``case`` body);
#: children in any other field (a ``case`` value, a function name) are not statements.
STATEMENT_FIELDS: dict[str, frozenset[str]] = {n: s.statement_fields for n, s in REGISTRY.items()}

#: Children that end a statement sequence (the run before and the run after are separate).
SEPARATOR_TYPES: dict[str, frozenset[str]] = {n: frozenset({"ERROR"}) for n in REGISTRY}

#: Import-like statements: compared on their T1 tokens (names kept; after T2 abstraction every
#: ``import x`` is alike), and a run made only of them is not a block.
IMPORT_TYPES: dict[str, frozenset[str]] = {n: s.import_types for n, s in REGISTRY.items()}

#: Literal collections whose elements a *data* statement is split into (the largest one inside it).
COLLECTION_TYPES: dict[str, frozenset[str]] = {n: s.collection_types for n, s in REGISTRY.items()}

#: Children that are not statements and do not end a sequence (Python docstrings are found apart).
TRANSPARENT_TYPES: dict[str, frozenset[str]] = {
    n: frozenset(COMMENT_TYPES[n]) | s.transparent_types for n, s in REGISTRY.items()
}

#: Statements that are a function definition (a run of exactly one is a function fragment).
DEFINITION_TYPES: dict[str, frozenset[str]] = {n: frozenset(s.function_types) for n, s in REGISTRY.items()}

#: A window key with more occurrences than this is paired among its first occurrences only.
MAX_OCCURRENCES_PER_KEY = 50

#: Each occurrence of a window past the first :data:`MAX_OCCURRENCES_PER_KEY` is still paired with
#: the window's first this many occurrences (so every copy gets a block, in O(occurrences) pairs).
HUB_OCCURRENCES = 1

#: Default ``min_tokens`` is this many T2 tokens per required code line (see :func:`default_min_tokens`).
MIN_TOKENS_PER_LINE = 2

#: A statement of at least this many T2 tokens, more than half of them repeated
#: (:func:`repeated_tokens`), is *data* (a table, an ``__all__`` list): it is compared on its T1
#: tokens, since after abstraction every table of the same length is the same, and split into its
#: elements (see the module docstring).
DATA_MIN_TOKENS = 16

#: Longest repeated token pattern :func:`repeated_tokens` looks for.
MAX_DATA_PERIOD = 8

_CODEC = "surrogatepass"
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_PY_DOC_PARENTS = frozenset({"module", "function_definition", "class_definition"})


def default_min_tokens(min_lines: int) -> int:
    """The T2-token minimum of a block when the caller gives none: ``MIN_TOKENS_PER_LINE * min_lines``
    (at least 1). Like jscpd's ``minTokens`` beside its ``minLines``: it keeps a lone multi-line string
    or comment-like literal (one ``LIT`` token over many lines) from counting as a copied block."""
    return max(1, MIN_TOKENS_PER_LINE * int(min_lines))


@dataclass(frozen=True, slots=True)
class StatementSequence:
    """Consecutive statements of one sequence node (up to a separator), in source order.

    Attributes:
        scope: qualified name of the innermost enclosing function or class (as fragment names are
            qualified: ``Class.method``, ``A::f``), ``""`` at top level.
        hashes: per statement, a 64-bit BLAKE2b hash of its space-joined T2 tokens (T1 tokens for an
            import, and for the parts of a data statement, which count as statements here).
        tokens: per statement, its number of tokens.
        start_byte, end_byte: per statement, its byte range in the UTF-8 (surrogatepass) source.
        start_line, end_line: per statement, its 1-based inclusive line span.
        is_def: per statement, whether it is a function definition (:data:`DEFINITION_TYPES`, also
            behind Python decorators or a C++ ``template <...>``).
        is_import: per statement, whether it is import-like (:data:`IMPORT_TYPES`); empty = none is.
    """

    scope: str
    hashes: tuple[int, ...]
    tokens: tuple[int, ...]
    start_byte: tuple[int, ...]
    end_byte: tuple[int, ...]
    start_line: tuple[int, ...]
    end_line: tuple[int, ...]
    is_def: tuple[bool, ...]
    is_import: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class FileStatements:
    """The statement sequences of one parsed file: what a worker process hands to the global pass.

    Attributes:
        rel: the file's path as in ``Fragment.path``.
        language: the language it was parsed as (a C++ ``.h`` file is ``"cpp"``).
        digest: BLAKE2b-128 hex digest of the decoded text; :func:`block_fragments` checks it when
            it reads the file again to cut the fragments' text.
        comments: byte ranges of the comment nodes (blanked in ``Fragment.code``).
        code_lines: ``code_lines[k]`` = number of code lines among lines 1..k (lines on which a T2
            token starts, Python docstrings left out); ``code_lines[0] == 0``.
        sequences: sequences with enough statements, tokens and code lines to hold a block.
        tokens: the file's :class:`~twinspect.code.token_runs.TokenStream` for the token-run
            matcher (set by :func:`twinspect.code.fragments.mine`; None when not computed).
    """

    rel: str
    language: str
    digest: str
    comments: tuple[tuple[int, int], ...]
    code_lines: array
    sequences: tuple[StatementSequence, ...]
    tokens: TokenStream | None = None


class Run(NamedTuple):
    """Statements ``first..last`` (inclusive indexes) of ``files[file].sequences[seq]``."""

    file: int
    seq: int
    first: int
    last: int


def text_digest(text: str) -> str:
    """BLAKE2b-128 hex digest of a decoded source text (see :attr:`FileStatements.digest`)."""
    return hashlib.blake2b(text.encode("utf-8", _CODEC), digest_size=16).hexdigest()


@functools.cache
def _sequence_query(language: str) -> tree_sitter.Query:
    return tree_sitter.Query(get_language(language), "\n".join(f"({t}) @seq" for t in SEQUENCE_TYPES[language]))


def _statement_hash(toks: Sequence[str]) -> int:
    digest = hashlib.blake2b(" ".join(toks).encode("utf-8", _CODEC), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def repeated_tokens(toks: Sequence[str], max_period: int = MAX_DATA_PERIOD) -> int:
    """Number of tokens that repeat the pattern just before them (after CCFinderX's RNR metric).

    For each period ``p`` in ``1..max_period``, a stretch of tokens each equal to the token ``p``
    before it, at least ``p`` long (the pattern occurs twice or more in a row), counts as repeated;
    the largest count over the periods is returned. ``ID = [ LIT , LIT , LIT , LIT ]`` has 5
    repeated tokens of 11, ``ID = ID . ID ( ID , ID ) + ID [ LIT ]`` none.

    Args:
        toks: a token sequence (T2 tokens here).
        max_period: longest pattern looked for, in tokens.

    Returns:
        A count in ``[0, len(toks)]``.
    """
    best = 0
    for p in range(1, min(max_period, len(toks) // 2) + 1):
        eq = bytes(map(operator.eq, toks[p:], toks))
        best = max(best, sum(len(r) for r in eq.split(b"\x00") if len(r) >= p))
    return best


class _StatementTokens:
    """T2 tokens of any statement of one file, from a single :func:`~twinspect.code.normalize.lex`
    of the whole (comment-blanked) file.

    Each token is given the offset where it starts (found in order with ``str.find``; the text
    between two tokens is only whitespace or a Python line continuation); Python's ``<INDENT>`` and
    ``<DEDENT>`` are placed at the end of the token before them. A statement's tokens are those
    starting inside its range, less trailing ``<INDENT>``/``<DEDENT>`` (a tree-sitter Python block
    may end after a trailing comment): the same as lexing the statement alone from the start of its
    line, which never ends with a layout token (checked on every statement of the Python standard
    library; only statements cut inside a token by a parse error differ). ``pos`` is None when
    the tokens cannot be placed (not expected): the file then gets no statement sequences.

    ``code_lines`` counts the lines on which a token starts, tokens inside the ``uncounted`` byte
    ranges (Python docstrings) left out: the inside of a multi-line string is not code (after T2
    abstraction it is one ``LIT``), and a docstring is documentation, as for function fragments.
    """

    def __init__(self, code_src: bytes, language: str, uncounted: Sequence[tuple[int, int]] = ()):
        code = code_src.decode("utf-8", _CODEC)
        self.t1: tuple[str, ...] = ()
        self.t2: tuple[str, ...] = ()
        self.pos: list[int] | None = None
        self._eq: list[bytes] = []
        self.code_lines = array("l", [0])  # code_lines[k] = lines among 1..k on which a token starts
        # byte offset -> character offset, for files with non-ASCII characters
        self.multi_bytes: list[int] = []
        self.extra: list[int] = []
        if not code_src.isascii():
            extra = 0
            for m in _NON_ASCII.finditer(code):
                extra += len(m.group().encode("utf-8", _CODEC)) - 1
                self.multi_bytes.append(m.start() + 1 + extra)  # byte offset just after the character
                self.extra.append(extra)
        # a leading newline makes lex() measure Python indentation from column 0, not from a first
        # line that is only a blanked comment (lex takes the code's leading blanks as its base)
        t1, t2 = lex("\n" + code if language == "python" else code, language)
        skip = sorted((self._char(a), self._char(b)) for a, b in uncounted)
        skip.append((len(code) + 1, len(code) + 1))
        k = 0
        pos: list[int] = []
        find, count = code.find, code.count
        starts = bytearray(count("\n") + 2)  # starts[k] = 1 when a token starts on line k (1-based)
        at = prev_end = 0
        line = 1
        for tok in t1:
            if tok == INDENT or tok == DEDENT:
                pos.append(prev_end)
                continue
            q = find(tok, at)
            if q < 0:  # pragma: no cover - lex and the source disagree
                return
            line += count("\n", at, q)
            while skip[k][1] <= q:
                k += 1
            if q < skip[k][0]:
                starts[line] = 1
            if "\n" in tok:
                line += tok.count("\n")
            pos.append(q)
            at = prev_end = q + len(tok)
        self.t1, self.t2, self.pos = t1, t2, pos
        self.code_lines = array("l", [0])
        self.code_lines.extend(itertools.accumulate(starts[1:]))

    def _char(self, offset: int) -> int:
        if not self.multi_bytes:
            return offset
        k = bisect.bisect_right(self.multi_bytes, offset)
        return offset - (self.extra[k - 1] if k else 0)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Token indexes ``[a, b)`` of the statement at bytes ``[start, end)``."""
        assert self.pos is not None
        a = bisect.bisect_left(self.pos, self._char(start))
        b = bisect.bisect_left(self.pos, self._char(end), a)
        t2 = self.t2
        while b > a and (t2[b - 1] == DEDENT or t2[b - 1] == INDENT):  # a node may end after a comment
            b -= 1
        return a, b

    def is_data(self, a: int, b: int) -> bool:
        """Whether tokens ``[a, b)`` are *data*: at least :data:`DATA_MIN_TOKENS` tokens, more than
        half of them repeated (:func:`repeated_tokens`, computed from per-file comparison arrays)."""
        n = b - a
        if n < DATA_MIN_TOKENS:
            return False
        if not self._eq:
            t2 = self.t2
            self._eq = [bytes(map(operator.eq, t2[p:], t2)) for p in range(1, MAX_DATA_PERIOD + 1)]
        for p in range(1, min(MAX_DATA_PERIOD, n // 2) + 1):
            eq = self._eq[p - 1][a:b - p]  # eq[i] == (t2[i + p] == t2[i]), both inside [a, b)
            if 2 * eq.count(1) <= n:  # even if every match were in a long stretch
                continue
            if 2 * sum(len(r) for r in eq.split(b"\x00") if len(r) >= p) > n:
                return True
        return False


def _is_docstring(node) -> bool:
    return (
        node.type == "expression_statement"
        and node.named_child_count == 1
        and node.named_children[0].type in ("string", "concatenated_string")
    )


def _is_definition(node, defs: frozenset[str]) -> bool:
    if node.type in defs:
        return True
    if node.type in ("decorated_definition", "template_declaration"):
        return any(c.type in defs for c in node.named_children)
    return False


def _elements(node, collections: frozenset[str], transparent: frozenset[str]) -> list[tree_sitter.Node]:
    """Elements of the literal collection (:data:`COLLECTION_TYPES`) with the most elements inside
    ``node`` (a data statement), comments left out, a Python dict entry as its key and its value;
    ``[]`` when there is no collection with two or more elements."""
    best: list[tree_sitter.Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in collections:
            elements = [c for c in n.named_children if c.type not in transparent]
            if len(elements) > len(best):
                best = elements
        stack.extend(n.named_children)
    if len(best) < 2:
        return []
    # a dict entry is two elements, its key and its value: a copied part of a table may begin or end
    # with a key whose value differs (as jscpd's token windows do)
    return [part for e in best for part in (e.named_children if e.type == "pair" else (e,))]


def _end_line(node) -> int:
    sp, ep = node.start_point, node.end_point
    return ep.row + 1 if ep.column > 0 or ep.row == sp.row else ep.row


def _scope_of(node, names: Mapping[tuple[int, int, str], str]) -> str:
    n = node.parent
    while n is not None:
        name = names.get((n.start_byte, n.end_byte, n.type))
        if name is not None:
            return name
        n = n.parent
    return ""


def collect_statements(
    root,
    code_src: bytes,
    comments: Sequence[tuple[int, int]],
    rel: str,
    language: str,
    names: Mapping[tuple[int, int, str], str],
    *,
    digest: str,
    min_lines: int,
    min_tokens: int | None = None,
    strict: bool = False,
) -> FileStatements:
    """List the statement sequences of one parsed file (step 1 of the module docstring).

    Called by :func:`twinspect.code.fragments.extract_file` on the tree it already parsed, so a file
    is parsed once per scan.

    Args:
        root: the tree-sitter root node of the file's UTF-8 (surrogatepass) bytes.
        code_src: those bytes with comments blanked (same length and lines).
        comments: byte ranges of the comment nodes.
        rel: the file's path as in ``Fragment.path``.
        language: the language the file was parsed as.
        names: ``(start_byte, end_byte, node type) -> qualified name`` of every function and named
            scope of the file (the enclosing-scope names of blocks).
        digest: :func:`text_digest` of the decoded text.
        min_lines: sequences spanning fewer code lines are left out (they cannot hold a block).
        min_tokens: sequences with fewer T2 tokens are left out; None = :func:`default_min_tokens`.
        strict: also end a sequence at every statement containing a parse error (the ``"strict"``
            error policy); otherwise only ERROR nodes themselves end it.

    Returns:
        The file's :class:`FileStatements`.
    """
    language = canonical_language(language)
    min_tokens = default_min_tokens(min_lines) if min_tokens is None else max(1, int(min_tokens))
    separators = SEPARATOR_TYPES[language]
    transparent = TRANSPARENT_TYPES[language]
    defs = DEFINITION_TYPES[language]
    statement_fields = STATEMENT_FIELDS[language]
    python = language == "python"
    nodes = tree_sitter.QueryCursor(_sequence_query(language)).captures(root).get("seq", [])
    nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))

    # statements of each sequence node, split at separators (docstrings and comments skipped)
    segments: list[tuple[tree_sitter.Node, list[tree_sitter.Node]]] = []
    docstrings: list[tuple[int, int]] = []
    for node in nodes:
        current: list[tree_sitter.Node] = []
        first = True
        for i, child in enumerate(node.children):
            if not child.is_named:
                continue
            fname = node.field_name_for_child(i)
            if fname is not None and fname not in statement_fields:
                continue
            t = child.type
            if t in transparent:
                continue
            if python and first and _is_docstring(child) and (
                node.type == "module" or (node.parent is not None and node.parent.type in _PY_DOC_PARENTS)
            ):
                docstrings.append((child.start_byte, child.end_byte))
                first = False
                continue
            first = False
            if t in separators or child.is_missing or (strict and child.has_error):
                if current:
                    segments.append((node, current))
                current = []
                continue
            current.append(child)
        if current:
            segments.append((node, current))

    # non-blank lines: a cheap upper bound of the code lines, to skip sequences before lexing
    cum = array("l", [0])
    cum.extend(itertools.accumulate(1 if line.strip() else 0 for line in code_src.split(b"\n")))

    last_line = len(cum) - 1
    segments = [
        (node, stmts) for node, stmts in segments
        if cum[min(_end_line(stmts[-1]), last_line)] - cum[stmts[0].start_point.row] >= min_lines
    ]
    toks = _StatementTokens(code_src, language, docstrings) if segments else None
    if toks is None or toks.pos is None:
        segments = []
    imports = IMPORT_TYPES[language]
    collections = COLLECTION_TYPES[language]
    sequences: list[StatementSequence] = []
    newlines: list[int] = []

    def line_of(offset: int) -> int:  # 1-based line of a byte offset
        if not newlines:
            newlines.extend(m.start() for m in re.finditer(b"\n", code_src))
            newlines.append(len(code_src) + 1)
        return bisect.bisect_left(newlines, offset) + 1

    # (start_byte, end_byte, start_line, end_line, hash, tokens, is_def, is_import) per statement
    Entry = tuple[int, int, int, int, int, int, bool, bool]

    def emit(node, run: list[Entry]) -> None:
        """Add ``run`` as a sequence if it can hold a block."""
        if not run or sum(r[5] for r in run) < min_tokens:
            return
        assert toks is not None
        lines = toks.code_lines
        if lines[min(run[-1][3], len(lines) - 1)] - lines[run[0][2] - 1] < min_lines:
            return
        sequences.append(
            StatementSequence(
                scope=_scope_of(node, names),
                hashes=tuple(r[4] for r in run),
                tokens=tuple(r[5] for r in run),
                start_byte=tuple(r[0] for r in run),
                end_byte=tuple(r[1] for r in run),
                start_line=tuple(r[2] for r in run),
                end_line=tuple(r[3] for r in run),
                is_def=tuple(r[6] for r in run),
                is_import=tuple(r[7] for r in run) if any(r[7] for r in run) else (),
            )
        )

    def t1_entry(start: int, end: int, is_import: bool = False) -> Entry:
        assert toks is not None
        ta, tb = toks.span(start, end)
        return (start, end, line_of(start), line_of(end - 1), _statement_hash(toks.t1[ta:tb]), tb - ta, False,
                is_import)

    for node, stmts in segments:
        assert toks is not None
        hashed: list[Entry] = []
        for s in stmts:
            a, b = toks.span(s.start_byte, s.end_byte)
            if s.type in imports:  # compared with its names kept
                hashed.append(t1_entry(s.start_byte, s.end_byte, True))
                continue
            if toks.is_data(a, b):
                # compared with its literals kept (a table is copied when its values are), element
                # by element: the tokens before the first element, each element, those after the last
                elements = _elements(s, collections, transparent)
                if not elements:
                    hashed.append(t1_entry(s.start_byte, s.end_byte))
                    continue
                head = elements[0].start_byte
                while head > s.start_byte and code_src[head - 1] in b" \t\r\n\\":
                    head -= 1
                if head > s.start_byte:
                    hashed.append(t1_entry(s.start_byte, head))
                hashed.extend(t1_entry(e.start_byte, e.end_byte) for e in elements)
                tail = elements[-1].end_byte
                while tail < s.end_byte and code_src[tail] in b" \t\r\n\\":
                    tail += 1
                if tail < s.end_byte:
                    hashed.append(t1_entry(tail, s.end_byte))
                continue
            hashed.append((s.start_byte, s.end_byte, s.start_point.row + 1, _end_line(s),
                           _statement_hash(toks.t2[a:b]), b - a, _is_definition(s, defs), False))
        emit(node, hashed)
    return FileStatements(
        rel=rel,
        language=language,
        digest=digest,
        comments=tuple(comments),
        code_lines=toks.code_lines if toks is not None else array("l", [0]),
        sequences=tuple(sequences),
    )


def _repeated_statement_tokens(hashes: Sequence[int], tokens: Sequence[int], first: int, stop: int) -> int:
    """Tokens of the statements of ``first..stop-1`` that repeat an earlier statement of the run."""
    seen: set[int] = set()
    out = 0
    for k in range(first, stop):
        if hashes[k] in seen:
            out += tokens[k]
        else:
            seen.add(hashes[k])
    return out


def _run_code_lines(f: FileStatements, seq: StatementSequence, first: int, last: int) -> int:
    cum = f.code_lines
    return cum[min(seq.end_line[last], len(cum) - 1)] - cum[seq.start_line[first] - 1]


def match_runs(
    files: Sequence[FileStatements],
    *,
    min_lines: int = 6,
    min_tokens: int | None = None,
    max_occurrences: int = MAX_OCCURRENCES_PER_KEY,
    hubs: int = HUB_OCCURRENCES,
    stats: ScanStats | None = None,
) -> list[tuple[Run, Run]]:
    """Maximal pairs of T2-equal statement runs across all files (step 2 of the module docstring).

    Seeds are windows of consecutive statements holding ``min_tokens`` T2 tokens (jscpd's
    Rabin–Karp token windows, over statements); each seed pair is extended both ways while the
    statement hashes agree. A seed whose left neighbours also agree is skipped when that left pair is
    itself paired (it gives the same maximal run), so each maximal pair is found once.

    Args:
        files: the :class:`FileStatements` of every file of the scan, in scan order.
        min_lines: both runs must span at least this many code lines.
        min_tokens: both runs must hold at least this many T2 tokens; None =
            :func:`default_min_tokens`.
        max_occurrences: a window with more occurrences is paired among its first
            ``max_occurrences`` only (counted in ``stats.block_keys_capped``), its later occurrences
            with its first ``hubs`` only.
        hubs: see ``max_occurrences`` (at least 1).
        stats: counters to update (``block_keys_capped``).

    Returns:
        ``(a, b)`` run pairs, ``a`` before ``b`` in scan order, in a deterministic order. The two runs
        have the same number of statements and equal statement hashes; in one sequence they do not
        overlap.
    """
    min_tokens = default_min_tokens(min_lines) if min_tokens is None else max(1, int(min_tokens))
    max_occurrences = max(2, int(max_occurrences))
    hubs = max(1, min(int(hubs), max_occurrences))
    seqs = [(fi, si, seq) for fi, f in enumerate(files) for si, seq in enumerate(f.sequences)]
    groups: dict[int, list[tuple[int, int, int]]] = {}
    for g, (_, _, seq) in enumerate(seqs):
        h, toks = seq.hashes, seq.tokens
        n = len(h)
        j = total = 0
        for i in range(n):
            while j < n and total < min_tokens:
                total += toks[j]
                j += 1
            if total < min_tokens:
                break
            groups.setdefault(hash(h[i:j]), []).append((g, i, j))
            total -= toks[i]

    paired: list[list[tuple[int, int, int]]] = []
    rank: dict[tuple[int, int], int] = {}  # position -> its index among its window's occurrences
    capped = 0
    for occ in groups.values():
        if len(occ) < 2:
            continue
        if len(occ) > max_occurrences:
            capped += 1
        paired.append(occ)
        rank.update(((g, i), r) for r, (g, i, _) in enumerate(occ))
    if stats is not None:
        stats.block_keys_capped += capped

    def checked(p1: tuple[int, int], p2: tuple[int, int]) -> bool:
        """Whether the two positions (of one window) are paired below."""
        r1, r2 = rank.get(p1), rank.get(p2)
        if r1 is None or r2 is None:
            return False
        return max(r1, r2) < max_occurrences or min(r1, r2) < hubs

    out: list[tuple[Run, Run]] = []
    seen: set[tuple[int, int, int, int, int]] = set()
    for occ in paired:
        for x, (g1, i1, j1) in enumerate(occ):
            fi1, si1, s1 = seqs[g1]
            h1 = s1.hashes
            later = occ[x + 1:] if x < hubs else occ[x + 1:max_occurrences]
            for g2, i2, j2 in later:
                fi2, si2, s2 = seqs[g2]
                h2 = s2.hashes
                if j1 - i1 != j2 - i2 or h1[i1:j1] != h2[i2:j2]:
                    continue  # window-hash collision
                if i1 and i2 and h1[i1 - 1] == h2[i2 - 1] and checked((g1, i1 - 1), (g2, i2 - 1)):
                    continue  # the pair one statement to the left gives this maximal run
                a0, b0 = i1, i2
                while a0 and b0 and h1[a0 - 1] == h2[b0 - 1]:
                    a0 -= 1
                    b0 -= 1
                a1, b1 = j1, j2
                n1, n2 = len(h1), len(h2)
                while a1 < n1 and b1 < n2 and h1[a1] == h2[b1]:
                    a1 += 1
                    b1 += 1
                if g1 == g2 and a1 > b0:  # same sequence: the first run ends before the second starts
                    a1, b1 = b0, b1 - (a1 - b0)
                if a1 <= a0:
                    continue
                key = (g1, a0, g2, b0, a1 - a0)
                if key in seen:
                    continue
                seen.add(key)
                total = sum(s1.tokens[a0:a1])
                if total < min_tokens:
                    continue
                if 2 * _repeated_statement_tokens(h1, s1.tokens, a0, a1) >= total:
                    continue
                if s1.is_import and all(s1.is_import[a0:a1]):
                    continue  # only imports
                if _run_code_lines(files[fi1], s1, a0, a1 - 1) < min_lines \
                        or _run_code_lines(files[fi2], s2, b0, b1 - 1) < min_lines:
                    continue
                out.append((Run(fi1, si1, a0, a1 - 1), Run(fi2, si2, b0, b1 - 1)))
    return out


def _single_definition(seq: StatementSequence, first: int, last: int) -> bool:
    """Whether statements ``first..last`` are one function definition, imports aside."""
    rest = [k for k in range(first, last + 1) if not (seq.is_import and seq.is_import[k])]
    return len(rest) == 1 and seq.is_def[rest[0]]


def _span(files: Sequence[FileStatements], run: Run) -> tuple[int, int, int]:
    seq = files[run.file].sequences[run.seq]
    return run.file, seq.start_byte[run.first], seq.end_byte[run.last]


def _inside(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return a[0] == b[0] and b[1] <= a[1] and a[2] <= b[2]


def _contained_pairs(files: Sequence[FileStatements], pairs: Sequence[tuple[Run, Run]]) -> set[int]:
    """Indexes of pairs whose two runs lie inside the two runs of another, larger pair."""
    spans = [(_span(files, a), _span(files, b)) for a, b in pairs]
    by_files: dict[tuple[int, int], list[int]] = {}
    for k, (sa, sb) in enumerate(spans):
        by_files.setdefault((sa[0], sb[0]), []).append(k)
    out: set[int] = set()
    for members in by_files.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda k: -(spans[k][0][2] - spans[k][0][1] + spans[k][1][2] - spans[k][1][1]))
        for x, k in enumerate(members):
            sa, sb = spans[k]
            size = sa[2] - sa[1] + sb[2] - sb[1]
            for q in members[:x]:
                qa, qb = spans[q]
                if qa[2] - qa[1] + qb[2] - qb[1] <= size:
                    continue
                if (_inside(sa, qa) and _inside(sb, qb)) or (_inside(sa, qb) and _inside(sb, qa)):
                    out.add(k)
                    break
    return out


def block_fragments(
    files: Sequence[FileStatements],
    pairs: Sequence[tuple[Run, Run]],
    read_text: Callable[[int], str | None],
    *,
    functions: Sequence[Fragment] = (),
    stats: ScanStats | None = None,
) -> list[Fragment]:
    """Fragments of the runs of :func:`match_runs` (step 3 of the module docstring).

    Args:
        files: as given to :func:`match_runs`.
        pairs: its result.
        read_text: ``file index -> decoded text`` of that file (None when it cannot be read any
            more); a text whose digest differs from :attr:`FileStatements.digest` (the file changed
            since it was parsed) gives no fragment and is counted in ``stats.block_files_changed``.
        functions: the scan's function fragments; a run with the same path and line span as one of
            them is not repeated.
        stats: counters to update (``block_fragments``, ``fragments``, ``block_files_changed``).

    Returns:
        One fragment per distinct run, ordered by file (scan order) then ``(start_line, -end_line)``.
        ``text`` starts at the beginning of the first statement's line when only indentation
        precedes it and ends with the last statement; ``code`` is the same with comments blanked.
        ``name`` is the enclosing function's or class's qualified name (``"<module>"`` at top level)
        followed by ``"[lines START-END]"``; ``language`` is the file's.
    """
    contained = _contained_pairs(files, pairs)
    taken: dict[tuple[int, int, int], Run] = {}
    for k, (a, b) in enumerate(pairs):
        if k in contained:
            continue
        if _single_definition(files[a.file].sequences[a.seq], a.first, a.last):
            continue  # one function definition (and imports): a function fragment already
        for run in (a, b):
            taken.setdefault(_span(files, run), run)
    function_spans = {(f.path, f.start_line, f.end_line) for f in functions}
    by_file: dict[int, list[Run]] = {}
    for run in taken.values():
        by_file.setdefault(run.file, []).append(run)

    out: list[Fragment] = []
    for fi in sorted(by_file):
        f = files[fi]
        runs = []
        for run in by_file[fi]:
            seq = f.sequences[run.seq]
            span = (seq.start_line[run.first], seq.end_line[run.last])
            if (f.rel, *span) not in function_spans:
                runs.append((span, run))
        if not runs:
            continue
        text = read_text(fi)
        if text is None or text_digest(text) != f.digest:
            if stats is not None:
                stats.block_files_changed += 1
            continue
        src = text.encode("utf-8", _CODEC)
        code = blank_ranges(src, f.comments)
        runs.sort(key=lambda r: (r[0][0], -r[0][1], f.sequences[r[1].seq].start_byte[r[1].first]))
        for (start_line, end_line), run in runs:
            seq = f.sequences[run.seq]
            start, end = seq.start_byte[run.first], seq.end_byte[run.last]
            line_start = src.rfind(b"\n", 0, start) + 1
            if line_start < start and src[line_start:start].isspace():
                start = line_start
            out.append(
                Fragment(
                    path=f.rel,
                    start_line=start_line,
                    end_line=end_line,
                    name=f"{seq.scope or '<module>'}[lines {start_line}-{end_line}]",
                    language=f.language,
                    text=src[start:end].decode("utf-8", _CODEC),
                    code=code[start:end].decode("utf-8", _CODEC),
                    kind="block",
                )
            )
    if stats is not None:
        stats.block_fragments += len(out)
        stats.fragments += len(out)
    return out


def find_blocks(
    sources: Sequence[tuple[str, str, str]],
    *,
    min_lines: int = 6,
    min_tokens: int | None = None,
    errors: str = "lenient",
    stats: ScanStats | None = None,
) -> list[Fragment]:
    """Block fragments of in-memory sources: runs of statements with a T2 copy among them.

    The whole pipeline of the module docstring on texts rather than files (what
    :func:`twinspect.code.fragments.mine` does with ``granularity="block"``, minus the function
    fragments, which are only used to leave out runs equal to a function's span).

    Args:
        sources: ``(rel, text, language)`` per file; ``rel`` becomes ``Fragment.path``.
        min_lines: minimum code lines of each run of a pair.
        min_tokens: minimum T2 tokens of a run; None = :func:`default_min_tokens`.
        errors: parse-error policy, ``"lenient"`` or ``"strict"``.
        stats: counters to update (``block_fragments``, ``block_keys_capped``...).

    Returns:
        The block fragments, ordered by source then ``(start_line, -end_line)``.

    Raises:
        InputError: unknown language or error policy.
    """
    stats = stats if stats is not None else ScanStats()
    files: list[FileStatements] = []
    functions: list[Fragment] = []
    texts: list[str] = []
    for rel, text, language in sources:
        frags, statements = extract_file(
            text, rel, language, min_lines=min_lines, stats=stats, errors=errors, granularity="block",
            min_tokens=min_tokens,
        )
        functions.extend(frags)
        if statements is not None:
            files.append(statements)
            texts.append(text)
    pairs = match_runs(files, min_lines=min_lines, min_tokens=min_tokens, stats=stats)
    return block_fragments(files, pairs, texts.__getitem__, functions=functions, stats=stats)


__all__ = [
    "FileStatements",
    "Run",
    "StatementSequence",
    "block_fragments",
    "collect_statements",
    "default_min_tokens",
    "find_blocks",
    "match_runs",
    "text_digest",
]
