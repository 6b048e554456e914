"""Unused functions of whole programs: what a file-level (plagiarism) comparison should leave out.

Competitive-programming and course submissions usually carry a personal *template*: a fast reader,
math helpers, debugging printers, most of which the solution never calls. Two copies of one solution
under two different templates then share a small part of each file, so a whole-program similarity
(JPlag's ``avg``, :mod:`twinspect.code.tiling`) falls far below what the copy deserves: on ConPlag's
raw submissions (version 1, ``benchmarks/plagiarism.py``) a plagiarised pair of 751 and 48 lines has
``avg`` 0.13 while 92 % of the smaller file is tiled. Dead-code elimination is the compiler's answer
and the one used here: a function is *used* when its name occurs in code reachable from the program's
entry point, and the others are blanked before the files are compared. It also undoes a disguise
plagiarists use on purpose: padding a copy with functions that are never called.

Reachability is by name, over the tree-sitter parse (approximate and conservative, like a linker
that keeps every overload of a referenced name):

* the roots are every identifier outside function definitions (field initialisers, globals, static
  blocks, class headers, and every word of a C/C++ macro body) and the bodies of the functions named
  ``main``;
* a function is used when an identifier of a used body or of a root equals its name; its body's
  identifiers then count too (to a fixed point);
* always used, because the language calls them without naming them: Java methods annotated
  ``@Override`` and the usual callback names (:data:`JAVA_IMPLICIT`: ``run``, ``compare``,
  ``compareTo``, ``toString``...); C++ operators, destructors and conversion functions.

Only programs with a ``main`` function in Java, C or C++ are pruned (:data:`LANGUAGES`); any other
file (a library module without an entry point, another language) is returned unchanged, since without
an entry point every function is a possible root. An unused function is blanked character by
character with its line breaks kept, so reported line numbers stay those of the file and code that
shares a line with it stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from twinspect.code.fragments import Fragment

if TYPE_CHECKING:
    from tree_sitter import Node

#: Languages whose programs are pruned (an entry point ``main`` is required).
LANGUAGES = frozenset({"java", "c", "cpp"})
#: Function definition node types, per language.
_FUNCTION_TYPES = {
    "java": ("method_declaration", "constructor_declaration"),
    "c": ("function_definition",),
    "cpp": ("function_definition",),
}
_WORD_RE = re.compile(r"[A-Za-z_]\w*")
_NOT_LINE_BREAK = re.compile(rb"[^\r\n]")
#: Identifier-like leaf node types whose text counts as a reference.
_IDENTIFIER_TYPES = frozenset({"identifier", "type_identifier", "field_identifier", "namespace_identifier"})
#: Java methods the runtime or a library calls without the program naming them (interfaces of
#: ``java.lang``/``java.util``: Runnable, Comparator, Comparable, Object, Iterator, Iterable, Closeable,
#: Callable, the functional interfaces, Thread.UncaughtExceptionHandler).
JAVA_IMPLICIT = frozenset({
    "main", "run", "call", "compare", "compareTo", "toString", "equals", "hashCode", "clone", "finalize",
    "iterator", "hasNext", "next", "remove", "close", "apply", "accept", "test", "get", "uncaughtException",
})


@dataclass(frozen=True)
class UnusedFunctions:
    """The unused functions of one program.

    Attributes:
        names: their names, in source order (an overloaded name once per definition).
        spans: their ``(first, last)`` lines, 1-based, inclusive, relative to the code given (nested
            and overlapping definitions merged).
        byte_ranges: their ``[start, end)`` byte offsets in the UTF-8 encoded code, merged likewise.
        lines: lines the spans cover in all.
    """

    names: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    byte_ranges: tuple[tuple[int, int], ...]
    lines: int


def _text(src: bytes, node) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", errors="replace")


def _function_name(src: bytes, node, language: str) -> str | None:
    """A definition's simple name; None when the language calls it implicitly (C++ operators,
    destructors, conversion functions) or it has no name."""
    if language == "java":
        name = node.child_by_field_name("name")
        return None if name is None else _text(src, name)
    decl = node.child_by_field_name("declarator")
    while decl is not None:
        if decl.type in ("operator_name", "destructor_name", "operator_cast"):
            return None
        if decl.type in _IDENTIFIER_TYPES:
            return _text(src, decl)
        if decl.type in ("qualified_identifier", "template_function"):
            decl = decl.child_by_field_name("name")
            continue
        decl = decl.child_by_field_name("declarator")
    return None


def _is_override(src: bytes, node) -> bool:
    """Java: the method carries ``@Override``."""
    for child in node.children:
        if child.type == "modifiers":
            return any(c.type in ("marker_annotation", "annotation") and _text(src, c).lstrip("@").strip() == "Override"
                       for c in child.children)
    return False


def _identifiers(src: bytes, roots: Iterable, skip: frozenset[int] = frozenset()) -> set[str]:
    """Identifier texts in the subtrees of ``roots``, not descending into nodes whose id is in ``skip``;
    the words of C/C++ macro bodies (``preproc_arg``: unparsed text) count as identifiers."""
    out: set[str] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.id in skip:
            continue
        if n.type in _IDENTIFIER_TYPES:
            out.add(_text(src, n))
        elif n.type == "preproc_arg":
            out.update(_WORD_RE.findall(_text(src, n)))
        else:
            stack.extend(n.children)
    return out


def unused_functions(code: str, language: str) -> UnusedFunctions | None:
    """The functions of a whole program that no code reachable from its ``main`` refers to (see the
    module doc).

    Args:
        code: the program's source (comments may be blanked).
        language: its language name.

    Returns:
        The unused functions (possibly none), or None when the program is not pruned: a language
        outside :data:`LANGUAGES`, no ``main`` function, or a parse tree with errors (a half-parsed
        file could hide references).
    """
    if language not in LANGUAGES:
        return None
    from twinspect.code.languages import get_parser

    src = code.encode("utf-8")
    tree = get_parser(language).parse(src)
    if tree.root_node.has_error:
        return None
    types = _FUNCTION_TYPES[language]
    functions: list[tuple[str | None, Node]] = []  # (name or None when always used, node)
    has_main = False
    stack = [tree.root_node]
    while stack:
        n = stack.pop()
        if n.type in types:
            name = _function_name(src, n, language)
            has_main = has_main or name == "main"
            if name == "main" or (language == "java" and (_is_override(src, n) or name in JAVA_IMPLICIT)):
                name = None
            functions.append((name, n))
        stack.extend(n.children)
    if not has_main:
        return None
    by_name: dict[str, list[Node]] = {}
    for name, n in functions:
        if name is not None:
            by_name.setdefault(name, []).append(n)
    function_ids = frozenset(n.id for _, n in functions)
    referenced = _identifiers(src, [tree.root_node], skip=function_ids)  # everything outside functions
    todo = [n for name, n in functions if name is None]  # main, overrides, operators...
    used: set[str] = set()
    done: set[int] = set()
    while True:
        for name in referenced - used:
            if name in by_name:
                used.add(name)
                todo.extend(by_name[name])
        referenced = set()
        if not todo:
            break
        while todo:
            n = todo.pop()
            if n.id in done:
                continue
            done.add(n.id)
            # nested definitions (a local class's methods) are definitions of their own
            referenced |= _identifiers(src, n.children, skip=function_ids)
    # a named function is unused when its name never became used (every node of a used name was reached)
    dead = sorted(((name, n) for name, n in functions if name is not None and name not in used),
                  key=lambda item: item[1].start_byte)
    names = tuple(name for name, _ in dead)
    # a dead function nested in another dead one is covered by its parent
    spans: list[tuple[int, int]] = []
    ranges: list[tuple[int, int]] = []
    for _, n in dead:
        first, last = n.start_point[0] + 1, n.end_point[0] + 1
        if ranges and n.start_byte < ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], n.end_byte))
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            ranges.append((n.start_byte, n.end_byte))
            spans.append((first, last))
    covered = {line for a, b in spans for line in range(a, b + 1)}
    return UnusedFunctions(names, tuple(spans), tuple(ranges), len(covered))


def without_unused(fragment: Fragment) -> tuple[Fragment, UnusedFunctions | None]:
    """A copy of a whole-program fragment whose unused functions are blank in ``code``.

    Args:
        fragment: a fragment (at file granularity, a whole file).

    Returns:
        ``(fragment', unused)``: ``fragment`` itself with None when it is not pruned (see
        :func:`unused_functions`), or with an empty :class:`UnusedFunctions` when nothing is unused;
        else a new :class:`Fragment` with the same path, lines, name and ``text`` whose ``code`` has
        every character of the unused functions but line breaks replaced by spaces (code sharing a
        line with them stays), and what was removed.
    """
    code = fragment.code or fragment.text
    unused = unused_functions(code, fragment.language)
    if unused is None or not unused.spans:
        return fragment, unused
    buf = bytearray(code.encode("utf-8"))
    for start, end in unused.byte_ranges:
        buf[start:end] = _NOT_LINE_BREAK.sub(b" ", bytes(buf[start:end]))
    # multi-byte characters inside a blanked range become spaces byte by byte: still valid UTF-8
    return replace(fragment, code=buf.decode("utf-8")), unused
