"""Fragments: functions and methods mined from source files with tree-sitter.

The :class:`Fragment` record is the unit every code-side stage passes around. Besides functions
(the default *granularity*), :func:`mine` can return whole files (``"file"``, as MOSS and JPlag
compare whole programs) or functions plus copied runs of statements (``"block"``, see
:mod:`twinspect.code.blocks`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import tree_sitter

from twinspect.code.comments import blank_ranges
from twinspect.code.files import ScanStats, SourceFile, discover
from twinspect.code.languages import NAME_SEPARATOR, canonical_language, get_error_query, get_parser, get_query
from twinspect.errors import InputError
from twinspect.progress import progress

if TYPE_CHECKING:  # blocks imports this module; fragments imports blocks lazily at run time
    from twinspect.code.blocks import FileStatements
    from twinspect.code.checkpoint import ParseCache
    from twinspect.code.executors import ShardExecutor


@dataclass(frozen=True, slots=True)
class Fragment:
    """One function or method of a source file.

    Attributes:
        path: file path, relative to the scanned root (POSIX separators).
        start_line: first line, 1-based, inclusive.
        end_line: last line, 1-based, inclusive.
        name: function/method name ("" when anonymous), qualified with enclosing classes where known.
        language: a name from :data:`~twinspect.code.languages.LANGUAGES` (``"python"``, ``"go"``...).
        text: the source text of the fragment, comments included.
        code: the same text with comments blanked out (line structure kept), filled at extraction
            from the parse tree; "" when not computed (normalisation then strips comments itself).
        kind: what the fragment is (:data:`FRAGMENT_KINDS`): ``"function"`` (a function or method),
            ``"block"`` (a copied run of statements or tokens, ``granularity="block"``), ``"file"``
            (a whole file) or ``"subfunction"`` (a copied region inside a function, reported at
            function granularity beside the function pairs, :mod:`twinspect.code.subfunction`).
    """

    path: str
    start_line: int
    end_line: int
    name: str
    language: str
    text: str
    code: str = ""
    kind: str = "function"

    @property
    def loc(self) -> int:
        """Number of lines spanned (end_line - start_line + 1)."""
        return self.end_line - self.start_line + 1

    @property
    def key(self) -> str:
        """Stable identifier ``path:start-end`` used in indexes and reports."""
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def to_dict(self, *, with_text: bool = True) -> dict:
        """JSON-ready dict of the fields (``text``/``code`` left out when ``with_text`` is False)."""
        out = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "name": self.name,
            "language": self.language,
            "kind": self.kind,
        }
        if with_text:
            out["text"] = self.text
            out["code"] = self.code
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Fragment:
        """Inverse of :meth:`to_dict` (missing ``text``/``code`` become "", a missing ``kind`` ``"function"``)."""
        text, code = str(data.get("text", "")), str(data.get("code", ""))
        return cls(
            path=str(data["path"]),
            start_line=int(data["start_line"]),
            end_line=int(data["end_line"]),
            name=str(data.get("name", "")),
            language=str(data["language"]),
            text=text,
            code=text if code == text else code,  # one string when no comment was blanked
            kind=str(data.get("kind", "function")),
        )


#: Values of :attr:`Fragment.kind`.
FRAGMENT_KINDS = ("function", "block", "file", "subfunction")


# ----------------------------------------------------------------------------------------------
# Reading and parsing
# ----------------------------------------------------------------------------------------------

#: Bytes inspected for a NUL byte to tell binary files (same heuristic as git and grep).
BINARY_SNIFF_BYTES = 8192


_CODEC_ERRORS = "surrogatepass"


_C1_CONTROLS = re.compile(rb"[\x80-\x9f]")


def _decode_legacy(data: bytes) -> str | None:
    """Windows-1252, else ISO-8859-1 without C1 controls, else None (see :func:`read_source`)."""
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        pass
    if _C1_CONTROLS.search(data):
        return None
    return data.decode("latin-1")


def read_source(sf: SourceFile, stats: ScanStats | None = None) -> str | None:
    """Read and decode one source file, or count why it is skipped.

    UTF-8 first (a leading BOM is dropped); a file that is not UTF-8 is decoded as Windows-1252
    (the usual "Latin-1" of old sources), or as ISO-8859-1 when it holds none of the C1 control
    bytes 0x80–0x9F, and counted in ``files_decoded_fallback``; otherwise it is skipped as
    ``"undecodable"``. Never with replacement characters. CRLF line ends become LF (line numbers
    are unchanged).

    Args:
        sf: the file, as returned by :func:`~twinspect.code.files.discover`.
        stats: counters; the skip reason ``"unreadable"``, ``"binary"`` (NUL byte in the first
            8 KiB) or ``"undecodable"`` (not valid UTF-8) is added when the file is skipped.

    Returns:
        The decoded text, or None when the file is skipped.
    """
    try:
        with open(sf.path, "rb") as fh:
            data = fh.read()
    except OSError:
        if stats is not None:
            stats.skip("unreadable", path=sf.rel)
        return None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        if stats is not None:
            stats.skip("binary", path=sf.rel)
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        fallback = _decode_legacy(data)
        if fallback is None:
            if stats is not None:
                stats.skip("undecodable", path=sf.rel)
            return None
        text = fallback
        if stats is not None:
            stats.files_decoded_fallback += 1
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return text


# C/C++ declarator nodes that hold the declared name directly.
_C_NAME_TYPES = frozenset(
    {
        "identifier",
        "field_identifier",
        "qualified_identifier",
        "destructor_name",
        "operator_name",
        "template_function",
        "template_method",
        "type_identifier",
    }
)
_C_SKIP_CHILDREN = frozenset({"type_qualifier", "attribute_specifier", "attribute_declaration", "ms_call_modifier"})
_WS_RE = re.compile(r"\s+")


def _text(src: bytes, node) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", _CODEC_ERRORS)


def _operator_cast_name(src: bytes, node) -> str:
    typ = node.child_by_field_name("type")
    return "operator " + (_text(src, typ) if typ is not None else "")


def _c_declarator_name(src: bytes, func) -> str:
    """Name declared by a C/C++ ``function_definition`` (``f``, ``A::f``, ``operator==``, ``~A``)."""
    d = func.child_by_field_name("declarator")
    for _ in range(32):
        if d is None:
            return ""
        t = d.type
        if t == "qualified_identifier":
            inner = d.child_by_field_name("name")
            # A::B::operator int  -> scope text as written + the cast operator
            while inner is not None and inner.type == "qualified_identifier":
                inner = inner.child_by_field_name("name")
            if inner is not None and inner.type == "operator_cast":
                head = src[d.start_byte:inner.start_byte].decode("utf-8", _CODEC_ERRORS)
                return _WS_RE.sub("", head) + _operator_cast_name(src, inner)
            return _WS_RE.sub(" ", _text(src, d))
        if t in _C_NAME_TYPES:
            return _WS_RE.sub(" ", _text(src, d))
        if t == "operator_cast":
            return _operator_cast_name(src, d)
        nxt = d.child_by_field_name("declarator")
        if nxt is None:  # reference_declarator, parenthesized_declarator: the declarator is a child
            nxt = next((c for c in d.named_children if c.type not in _C_SKIP_CHILDREN), None)
        d = nxt
    return ""


_MACRO_ARGS_RE = re.compile(r"\(\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s*\)\Z")


def _c_macro_name(src: bytes, func, name: str) -> str:
    """``TEST(Suite, Case)`` for a function defined through a macro call: no return type and a
    parameter list of bare identifiers (GoogleTest's ``TEST``, redis's ``TEST_BEGIN``...); else
    ``name`` unchanged. Without the arguments every such fragment would be named after the macro."""
    if not name or func.child_by_field_name("type") is not None:
        return name
    d = func.child_by_field_name("declarator")
    params = d.child_by_field_name("parameters") if d is not None and d.type == "function_declarator" else None
    if params is None:
        return name
    args = _WS_RE.sub(" ", _text(src, params))
    return name + args if _MACRO_ARGS_RE.match(args) else name


def _plain_name(src: bytes, node) -> str:
    name = node.child_by_field_name("name")
    return "" if name is None else _text(src, name)


#: Name-holding children of grammars without a ``name`` field (Kotlin, Swift's ``init``...).
_NAME_CHILD_TYPES = ("simple_identifier", "identifier", "type_identifier", "property_identifier", "name", "constant")
#: Parents that name an anonymous function: ``const f = () => {}``, ``a.b = function () {}``,
#: ``{key: function () {}}``, ``f := func() {}``, ``$f = function () {}``.
_NAMING_PARENT_FIELDS = {
    "variable_declarator": "name",
    "assignment_expression": "left",
    "pair": "key",
    "field_definition": "property",
    "public_field_definition": "name",
}
_ORIGINAL_LANGUAGES = frozenset({"python", "java", "c", "cpp"})


def _first_of_type(node, node_type: str):
    """The first node of ``node_type`` in ``node``'s subtree (pre-order), or None."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == node_type:
            return n
        stack.extend(reversed(n.named_children))
    return None


def _function_name(src: bytes, node, language: str) -> str:
    """Name of a function node: its ``name`` field; in the languages added through the registry
    also a name-like first child, or for an anonymous function the variable, property or key it
    is assigned to (Go ``f := func() {...}``: the left-hand side)."""
    name = _plain_name(src, node)
    if name and language == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")  # (c *Cart) -> Cart.Method
        rtype = _first_of_type(receiver, "type_identifier") if receiver is not None else None
        return name if rtype is None else _text(src, rtype) + "." + name
    if name or language in _ORIGINAL_LANGUAGES:
        return name
    child = next((c for c in node.named_children if c.type in _NAME_CHILD_TYPES), None)
    if child is not None and node.type not in ("arrow_function", "func_literal", "anonymous_function"):
        return _text(src, child)
    parent = node.parent
    if parent is not None and parent.type == "expression_list":  # Go: x := func() {...}
        parent = parent.parent
        if parent is not None and parent.type in ("short_var_declaration", "assignment_statement"):
            left = parent.child_by_field_name("left")
            return "" if left is None else _WS_RE.sub(" ", _text(src, left))
        return ""
    if parent is not None and parent.type in ("arguments", "argument_list"):  # a callback: it('does x', ...)
        return _callback_name(src, parent)
    field = _NAMING_PARENT_FIELDS.get(parent.type) if parent is not None else None
    target = parent.child_by_field_name(field) if field else None
    if target is None:
        return ""
    return _WS_RE.sub(" ", _text(src, target))[:80]


#: Literal node types that name a callback when they are the call's first argument.
_LABEL_TYPES = frozenset({"string", "template_string", "interpreted_string_literal", "raw_string_literal"})


def _callback_name(src: bytes, args) -> str:
    """Name of a function passed as an argument: the callee, with the call's first argument when it is
    a string (``it('serves files')``, ``t.Run("empty")``); "" when the call has no callee."""
    call = args.parent
    callee = call.child_by_field_name("function") if call is not None else None
    if callee is None:
        return ""
    first = next((c for c in args.named_children if c.type not in ("comment",)), None)
    label = _text(src, first) if first is not None and first.type in _LABEL_TYPES else ""
    return _WS_RE.sub(" ", f"{_text(src, callee)}({label})")[:80]


def _scope_name(src: bytes, node, language: str) -> str:
    name = node.child_by_field_name("name")
    if name is None and language not in _ORIGINAL_LANGUAGES:
        name = node.child_by_field_name("type")  # Rust ``impl Type``
        if name is None:
            name = next((c for c in node.named_children if c.type in _NAME_CHILD_TYPES), None)
    if name is None:
        return ""
    return _WS_RE.sub(" ", _text(src, name)) if language in ("cpp", "rust") else _text(src, name)


#: Parse-error policies of :func:`extract_fragments`.
ERROR_POLICIES = ("lenient", "strict")


def _extent_doubtful(node) -> bool:
    """True when the node's last-token chain ends in an ERROR or MISSING node (e.g. a missing ``}``),
    i.e. when tree-sitter may have closed the function at the wrong place."""
    n = node
    for _ in range(64):
        count = n.child_count
        if not count:
            return n.is_missing
        n = n.child(count - 1)
        if n.is_error or n.is_missing:
            return True
    return False


def _brace_delimited(node) -> bool:
    """True when the function's extent is fixed by its own braces: its ``body`` child starts with a
    real ``{`` and ends the node with a real ``}``, and no child outside the body (return type,
    declarator, modifiers) contains an error.

    Brace matching does not depend on how tree-sitter recovered from errors elsewhere, so such a
    function keeps its exact lines even when an enclosing ERROR region swallowed it (typically the
    whole file, after a function header split across ``#ifdef``/``#else`` branches). Python bodies
    are indentation-delimited and never qualify.
    """
    body = node.child_by_field_name("body")
    if body is None or body.child_count < 2 or body.end_byte != node.end_byte:
        return False
    first, last = body.child(0), body.child(body.child_count - 1)
    if first.type != "{" or last.type != "}" or first.is_missing or last.is_missing:
        return False
    return not any(
        c.has_error or c.is_missing for c in node.children if c.start_byte < body.start_byte
    )


#: C++ constructs that C has not: a ``.h`` file holding one is C++ (tree-sitter's C grammar would
#: mine a ``namespace``/``class`` body as one function named after it).
CPP_HEADER_MARKERS = re.compile(
    r"^[ \t]*(?:namespace[ \t]+\w+[ \t]*\{|(?:class|struct)[ \t]+\w+[^;(]*:[ \t]*(?:public|private|protected)\b"
    r"|class[ \t]+\w+[^;(]*\{|template[ \t]*<|(?:public|private|protected)[ \t]*:)"
    r"|\w::~?\w",
    re.M,
)


def header_language(rel: str, text: str, language: str) -> str:
    """The language to parse a file as: a ``.h`` file mapped to C that holds C++ (see
    :data:`CPP_HEADER_MARKERS`) is C++; every other file keeps ``language``."""
    if language == "c" and rel.lower().endswith(".h") and CPP_HEADER_MARKERS.search(text):
        return "cpp"
    return language


def _python_docstring(node) -> tuple[int, int] | None:
    """Byte range of a Python function's docstring (first body statement a lone string), or None."""
    body = node.child_by_field_name("body")
    if body is None or not body.named_children:
        return None
    first = body.named_children[0]
    if first.type == "expression_statement" and len(first.named_children) == 1 \
            and first.named_children[0].type in ("string", "concatenated_string"):
        return first.start_byte, first.end_byte
    return None


def code_line_count(code: bytes | str, skip: Sequence[tuple[int, int]] = ()) -> int:
    """Number of lines of ``code`` holding code: not blank once ``skip`` ranges are blanked.

    Args:
        code: comment-blanked source (as in ``Fragment.code``), bytes or str.
        skip: ``(start, end)`` offsets into ``code`` to ignore (e.g. a Python docstring).

    Returns:
        Count of lines with at least one non-whitespace character outside ``skip``.
    """
    if isinstance(code, str):
        code = code.encode("utf-8", "surrogatepass")
    if skip:
        code = blank_ranges(code, skip)
    return sum(1 for line in code.splitlines() if line.strip())


def _end_line(node) -> int:
    sp, ep = node.start_point, node.end_point
    # A node ending at column 0 ends with the previous line's newline.
    return ep.row + 1 if ep.column > 0 or ep.row == sp.row else ep.row


#: Fragment granularities of :func:`mine` and :func:`extract_fragments`.
GRANULARITIES = ("function", "block", "file")


def check_granularity(granularity: str) -> str:
    """Return ``granularity`` when it is one of :data:`GRANULARITIES`.

    Raises:
        InputError: any other value (one line naming the allowed values).
    """
    if granularity not in GRANULARITIES:
        raise InputError(f"unknown granularity {granularity!r}", hint="use 'function', 'block' or 'file'")
    return granularity


def _module_docstring(root) -> tuple[int, int] | None:
    """Byte range of a Python module's docstring (first statement a lone string), or None."""
    first = next((c for c in root.named_children if c.type != "comment"), None)
    if first is not None and first.type == "expression_statement" and len(first.named_children) == 1 \
            and first.named_children[0].type in ("string", "concatenated_string"):
        return first.start_byte, first.end_byte
    return None


def _file_fragment(
    text: str, code_src: bytes, rel: str, language: str, root, min_lines: int, stats: ScanStats, strict: bool
) -> list[Fragment]:
    """The whole file as one fragment (``granularity="file"``), or [] when too short or, under the
    strict policy, when the file has parse errors."""
    if root.has_error:
        stats.files_with_parse_errors += 1
        if strict:
            stats.fragments_skipped_errors += 1
            return []
    doc = _module_docstring(root) if language == "python" else None
    if code_line_count(code_src, [doc] if doc else []) < max(1, min_lines):
        stats.fragments_too_short += 1
        return []
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    stats.fragments += 1
    return [
        Fragment(
            path=rel,
            start_line=1,
            end_line=lines,
            name=PurePosixPath(rel).name,
            language=language,
            text=text,
            code=code_src.decode("utf-8", _CODEC_ERRORS),
            kind="file",
        )
    ]


def extract_fragments(
    text: str,
    rel: str,
    language: str,
    *,
    min_lines: int = 6,
    stats: ScanStats | None = None,
    errors: str = "lenient",
    granularity: str = "function",
) -> list[Fragment]:
    """Parse one file with tree-sitter and return its functions and methods as fragments.

    One fragment per function/method definition, nested ones included: Python
    ``function_definition`` (``async def`` too; the span starts at ``def``, decorators are not
    part of it), Java ``method_declaration``, ``constructor_declaration`` and
    ``compact_constructor_declaration`` (annotations and modifiers are part of the node), C and C++
    ``function_definition`` (in-class methods, out-of-line ``A::f``, operators, template functions;
    the ``template <...>`` header is not part of the span). Lambdas are never fragments. The other
    languages mine the node types of their registry row
    (:data:`twinspect.code.languages.REGISTRY`: ``function_types``), e.g. Go functions, methods and
    function literals, Rust ``fn`` items, C# methods, constructors, accessors and local functions,
    JavaScript/TypeScript functions, methods, function expressions and arrow functions; an anonymous
    function is named after the variable, property or key it is assigned to, a Go method after its
    receiver type (``Cart.Total``).

    Names are qualified by the enclosing classes and functions: ``Class.method`` and
    ``outer.inner`` (Python, Java), ``A::f`` (C/C++, classes only; in-class methods get their class prefix,
    out-of-line definitions keep the name as written, e.g. ``ns::A::f``); ``""`` when anonymous.

    ``text`` is the source of the fragment's lines (from the start of the first line when only
    indentation precedes the node, so nested code keeps its indentation); ``code`` is the same with
    every comment node replaced by spaces (newlines kept, so line numbers stay valid). Python
    docstrings are string literals and are kept.

    Parse errors (tree-sitter ERROR/MISSING nodes) never stop a file from being mined; functions
    are dropped, and counted in ``fragments_skipped_errors``, according to ``errors``:

    * ``"lenient"`` (default): drop a function only when its extent is doubtful: its last token is
      an ERROR or MISSING node (e.g. an unclosed body), or it lies inside an ERROR region *and*
      contains errors itself *and* is not delimited by its own braces (a body starting with a real
      ``{`` and ending the function with a real ``}``, no error in the signature). A function with
      a local error in its body (typical of C macros that tree-sitter cannot expand, or an
      ``#ifdef`` that cuts a statement) keeps its exact lines and is mined, also when an ERROR
      region covers the whole file (e.g. after a function header split over ``#ifdef``/``#else``).
      On the SSCD Company-C data this also recovers ``proxymain.c:919`` (labelled row 57), which
      the rule without the brace test dropped.
    * ``"strict"``: drop every function that contains an ERROR/MISSING node or lies inside an
      ERROR region.

    A ``.h`` file given as C that holds C++ (``namespace``, ``class``, ``template``, access
    specifiers, ``::``) is parsed as C++ (:func:`header_language`), so class and namespace bodies
    are not mined as functions.

    Then functions with fewer than ``min_lines`` *code lines* are dropped (``fragments_too_short``):
    lines holding code once comments, blank lines and a Python docstring are left out (see
    :func:`code_line_count`), so a two-line body behind a long docstring is not a fragment.

    Other granularities (``granularity``):

    * ``"file"``: the whole file is one fragment: lines 1 to the last line, named after the file's
      base name, ``text`` the whole text, ``code`` the same with comments blanked. A file with fewer
      than ``min_lines`` code lines (at least one; a Python module docstring does not count) is
      dropped and counted in ``fragments_too_short``; under the ``"strict"`` policy a file with
      parse errors is dropped (``fragments_skipped_errors``), under ``"lenient"`` it is kept.
    * ``"block"``: the functions, plus runs of statements that have a T2 copy elsewhere *in this
      file* (:mod:`twinspect.code.blocks`; :func:`mine` finds copies across the whole scan), placed
      among the functions by ``(start_line, -end_line)``.

    Args:
        text: the decoded file content.
        rel: the file's relative path, stored as ``Fragment.path``.
        language: one of :data:`~twinspect.code.languages.LANGUAGES`.
        min_lines: minimum number of code lines of a kept fragment (see above).
        stats: counters updated in place (``files_parsed``, ``fragments``...).
        errors: parse-error policy, ``"lenient"`` or ``"strict"`` (see above).
        granularity: ``"function"`` (default), ``"block"`` or ``"file"`` (see above).

    Returns:
        Fragments in source order (an enclosing function before the functions nested in it).

    Raises:
        InputError: unknown language, error policy or granularity.
    """
    granularity = check_granularity(granularity)
    stats = stats if stats is not None else ScanStats()
    frags, statements = extract_file(
        text, rel, language, min_lines=min_lines, stats=stats, errors=errors, granularity=granularity
    )
    if statements is None:
        return frags
    from twinspect.code.blocks import block_fragments, match_runs

    pairs = match_runs([statements], min_lines=min_lines, stats=stats)
    blocks = block_fragments([statements], pairs, lambda _: text, functions=frags, stats=stats)
    return _merge_blocks([rel], frags, blocks)


def _merge_blocks(order: Sequence[str], functions: Sequence[Fragment], blocks: Sequence[Fragment]) -> list[Fragment]:
    """Fragments of each path of ``order`` in turn: its function fragments in their own order, with
    its block fragments (sorted by ``(start_line, -end_line)``) each placed before the first function
    it sorts before."""
    if not blocks:
        return list(functions)
    funcs_of: dict[str, list[Fragment]] = {}
    blocks_of: dict[str, list[Fragment]] = {}
    for f in functions:
        funcs_of.setdefault(f.path, []).append(f)
    for b in blocks:
        blocks_of.setdefault(b.path, []).append(b)
    out: list[Fragment] = []
    for path in order:
        pending = blocks_of.get(path, [])
        j = 0
        for f in funcs_of.get(path, []):
            while j < len(pending) and (pending[j].start_line, -pending[j].end_line) < (f.start_line, -f.end_line):
                out.append(pending[j])
                j += 1
            out.append(f)
        out.extend(pending[j:])
    return out


def extract_file(
    text: str,
    rel: str,
    language: str,
    *,
    min_lines: int = 6,
    stats: ScanStats | None = None,
    errors: str = "lenient",
    granularity: str = "function",
    min_tokens: int | None = None,
) -> tuple[list[Fragment], FileStatements | None]:
    """:func:`extract_fragments` for one file of a scan, with what the block pass needs.

    Same arguments as :func:`extract_fragments` (``min_tokens``: see
    :func:`twinspect.code.blocks.collect_statements`), except that with ``granularity="block"`` only
    the function fragments are returned, together with the file's
    :class:`~twinspect.code.blocks.FileStatements` (the blocks are found across all files of a scan
    by :func:`twinspect.code.blocks.match_runs`).

    Returns:
        ``(fragments, statements)``; ``statements`` is None unless ``granularity="block"`` (and the
        file parsed).

    Raises:
        InputError: unknown language, error policy or granularity.
    """
    granularity = check_granularity(granularity)
    language = header_language(rel, text, canonical_language(language))
    if errors not in ERROR_POLICIES:
        raise InputError(f"unknown parse-error policy {errors!r}", hint="use 'lenient' or 'strict'")
    strict = errors == "strict"
    stats = stats if stats is not None else ScanStats()
    src = text.encode("utf-8", _CODEC_ERRORS)
    try:
        tree = get_parser(language).parse(src)
    except Exception:  # pragma: no cover - tree-sitter gave no tree (timeout, internal failure)
        tree = None
    if tree is None:  # pragma: no cover
        stats.skip("unparsable", path=rel)
        return [], None
    stats.parsed(language, text.count("\n") + (1 if text and not text.endswith("\n") else 0))
    root = tree.root_node
    caps = tree_sitter.QueryCursor(get_query(language)).captures(root)
    comments = caps.get("comment", [])
    if granularity == "file":
        code_src = blank_ranges(src, ((c.start_byte, c.end_byte) for c in comments))
        return _file_fragment(text, code_src, rel, language, root, min_lines, stats, strict), None
    blocks = granularity == "block"
    funcs = caps.get("function", [])
    if not funcs and not blocks:
        if root.has_error:
            stats.files_with_parse_errors += 1
        return [], None
    scopes = caps.get("scope", [])

    error_ranges: list[tuple[int, int]] = []
    file_has_error = root.has_error
    if file_has_error:
        stats.files_with_parse_errors += 1
        errs = tree_sitter.QueryCursor(get_error_query(language)).captures(root).get("error", [])
        error_ranges = [(n.start_byte, n.end_byte) for n in errs]

    # comments blanked without moving any byte offset or line break, so line numbers and
    # tree-sitter byte ranges stay valid on the blanked text
    code_src = blank_ranges(src, ((c.start_byte, c.end_byte) for c in comments))

    c_like = language in ("c", "cpp")
    sep = NAME_SEPARATOR[language]
    items = [(n.start_byte, -n.end_byte, 1, i, n) for i, n in enumerate(funcs)]
    items += [(n.start_byte, -n.end_byte, 0, i, n) for i, n in enumerate(scopes)]
    items.sort()

    out: list[Fragment] = []
    names: dict[tuple[int, int, str], str] = {}  # block granularity: qualified name of every scope
    stack: list[tuple[int, str]] = []  # (end_byte, name) of enclosing scopes/functions
    for start, neg_end, is_func, _, node in items:
        end = -neg_end
        while stack and stack[-1][0] <= start:
            stack.pop()
        if not is_func:
            own = _scope_name(src, node, language)
            if blocks:
                names[(start, end, node.type)] = sep.join([n for _, n in stack if n] + ([own] if own else []))
            stack.append((end, own))
            continue
        own = _c_macro_name(src, node, _c_declarator_name(src, node)) if c_like else _function_name(src, node, language)
        stack_names = [n for _, n in stack if n]
        if own and stack_names and not (c_like and (sep in own)):
            name = sep.join(stack_names) + sep + own
        else:
            name = own
        if blocks:
            names[(start, end, node.type)] = name
        stack.append((end, "" if c_like else own))  # C/C++ names are not qualified by functions
        if file_has_error:
            has_error = node.has_error
            inside = any(es <= start and end <= ee for es, ee in error_ranges)
            if strict:
                drop = has_error or inside
            else:
                drop = has_error and (
                    _extent_doubtful(node) or (inside and not _brace_delimited(node))
                )
            if drop:
                stats.fragments_skipped_errors += 1
                continue
        start_line = node.start_point.row + 1
        end_line = _end_line(node)
        if end_line - start_line + 1 < min_lines:  # cheap bound: code lines ≤ spanned lines
            stats.fragments_too_short += 1
            continue
        doc = _python_docstring(node) if language == "python" else None
        skip = [(doc[0] - start, doc[1] - start)] if doc else []
        if min_lines > 1 and code_line_count(code_src[start:end], skip) < min_lines:
            stats.fragments_too_short += 1
            continue
        line_start = src.rfind(b"\n", 0, start) + 1
        if line_start < start and src[line_start:start].isspace():
            start = line_start
        frag_text = src[start:end].decode("utf-8", _CODEC_ERRORS)
        frag_code = code_src[start:end]
        out.append(
            Fragment(
                path=rel,
                start_line=start_line,
                end_line=end_line,
                name=name,
                language=language,
                text=frag_text,
                # one string for both when no comment was blanked (halves the text held for such fragments)
                code=frag_text if frag_code == src[start:end] else frag_code.decode("utf-8", _CODEC_ERRORS),
            )
        )
    stats.fragments += len(out)
    if not blocks:
        return out, None
    from twinspect.code.blocks import collect_statements, text_digest

    statements = collect_statements(
        root,
        code_src,
        [(c.start_byte, c.end_byte) for c in comments],
        rel,
        language,
        names,
        digest=text_digest(text),
        min_lines=min_lines,
        min_tokens=min_tokens,
        strict=strict,
    )
    return out, statements


#: Minimum number of files for which :func:`mine` uses worker processes (below, startup costs more).
PARALLEL_MIN_FILES = 64
_FILES_PER_TASK = 16


def _blanked(text: str, st: FileStatements) -> str:
    """The file's text with its comments blanked (same length and lines)."""
    return blank_ranges(text.encode("utf-8", "surrogatepass"), st.comments).decode("utf-8", "surrogatepass")


def _with_token_stream(text: str, st: FileStatements) -> FileStatements:
    """``st`` with the file's :class:`~twinspect.code.token_runs.TokenStream` (block granularity)."""
    from twinspect.code.token_runs import token_stream

    return replace(st, tokens=token_stream(_blanked(text, st), st.language))


def _mine_files(
    files: Sequence[SourceFile], min_lines: int, errors: str, pretokenize: bool, granularity: str = "function"
) -> tuple[list[Fragment], ScanStats, list[tuple[str, ...]] | None, list[list[str]] | None, list[FileStatements]]:
    """Read and parse a run of files (in a worker process): fragments, counters, T1 token lists and
    normalised lines (with ``pretokenize``) and, with ``granularity="block"``, the files' statement
    sequences."""
    stats = ScanStats()
    out: list[Fragment] = []
    statements: list[FileStatements] = []
    for sf in files:
        text = read_source(sf, stats)
        if text is not None:
            frags, st = extract_file(
                text, sf.rel, sf.language, min_lines=min_lines, stats=stats, errors=errors, granularity=granularity
            )
            out.extend(frags)
            if st is not None:
                statements.append(_with_token_stream(text, st))
    toks = lines = None
    if pretokenize:
        from twinspect.code.normalize import lex_with_lines, strip_comments

        both = [lex_with_lines(strip_comments(f), f.language) for f in out]  # one regex pass each
        toks = [t for t, _ in both]
        lines = [ln for _, ln in both]
    return out, stats, toks, lines, statements


def _mine_run(options: tuple[int, str, bool, str], files: Sequence[SourceFile]) -> tuple:
    """One shard of :func:`mine` on a :class:`~twinspect.code.executors.ShardExecutor`: ``options`` are
    ``(min_lines, errors, pretokenize, granularity)``."""
    min_lines, errors, pretokenize, granularity = options
    return _mine_files(files, min_lines, errors, pretokenize, granularity)


def _mine_run_each(options: tuple[int, str, bool, str], files: Sequence[SourceFile]) -> list[tuple]:
    """Like :func:`_mine_run`, one result per file (what the parse cache stores)."""
    min_lines, errors, pretokenize, granularity = options
    out = []
    for sf in files:
        frags, stats, toks, lines, _ = _mine_files([sf], min_lines, errors, pretokenize, granularity)
        out.append((frags, stats, toks, lines))
    return out


def _absorb(stats: ScanStats, fragments: list[Fragment], frags: Sequence[Fragment], part: ScanStats,
            toks: Sequence[Sequence[str]] | None, lines: Sequence[Sequence[str]] | None) -> None:
    """Add one shard's (or one file's) parse result to the scan: its counters (a worker's files_seen is
    0: discovery ran here; listed skipped files included), its fragments, and its lexed tokens to this
    process's caches (:func:`twinspect.code.normalize.prime_tokens`)."""
    from twinspect.code.normalize import prime_tokens

    stats.merge(part)
    fragments.extend(frags)
    if toks is not None and lines is not None:
        for f, t1, ls in zip(frags, toks, lines):
            prime_tokens(f, t1, ls)


def mine(
    paths: Sequence[str | Path],
    *,
    exclude: Sequence[str] = (),
    max_file_bytes: int = 1 << 20,
    respect_gitignore: bool = True,
    language: str | None = None,
    min_lines: int = 6,
    quiet: bool = True,
    errors: str = "lenient",
    workers: int | None = None,
    pretokenize: bool = True,
    granularity: str = "function",
    executor: ShardExecutor | None = None,
    cache: ParseCache | None = None,
    token_copies: list[tuple[tuple[str, int, int], tuple[str, int, int]]] | None = None,
) -> tuple[list[Fragment], ScanStats]:
    """Discover, read and parse source files and return all their fragments.

    With ``workers > 1`` and at least :data:`PARALLEL_MIN_FILES` files, files are parsed in a pool
    of worker processes (``forkserver`` start method where available, else ``spawn``), in runs of
    consecutive files; the result (fragments, their order, the counters) is identical to the
    in-process run.

    Granularity (see :func:`extract_fragments`): ``"function"`` (default) mines functions and
    methods; ``"file"`` makes each file one fragment (as MOSS and JPlag compare whole programs);
    ``"block"`` mines the functions plus the maximal runs of consecutive statements (in or outside
    functions) that have a T2 copy (identifiers and literals abstracted, comments and layout
    ignored) elsewhere in the scanned files, of at least ``min_lines`` code lines: the statement
    sequences are listed per file (in the worker processes), then matched across all files in this
    process (:mod:`twinspect.code.blocks`, after jscpd's Rabin–Karp windows, over statements), and
    the files holding a block are read again to cut its text (a file changed in between gives no
    block; ``stats.block_files_changed``). Copies that do not consist of whole statements (from
    the tail of one method into the next, starting inside a docstring or mid-statement) are found
    as token runs across syntax (:mod:`twinspect.code.token_runs`, jscpd's own windows over the
    files' tokens): each copied region of a file whose span is not already a fragment becomes one
    block fragment too (``stats.token_run_fragments``). Block fragments are named
    ``"<enclosing function or class>[lines START-END]"`` (``"<module>[...]"`` at top level) and
    placed among their file's functions by ``(start_line, -end_line)``; ``stats.block_fragments``
    counts them (they are also in ``stats.fragments``), ``stats.block_keys_capped`` the statement
    windows pasted in more places than :data:`twinspect.code.blocks.MAX_OCCURRENCES_PER_KEY`.

    Args:
        paths: files and/or directories (see :func:`~twinspect.code.files.discover`).
        exclude: gitignore-style globs of files to leave out.
        max_file_bytes: skip larger files (bytes).
        respect_gitignore: honour ``.gitignore`` files.
        language: force a language (see :func:`~twinspect.code.files.discover`).
        min_lines: minimum lines spanned by a fragment (see :func:`extract_fragments`).
        quiet: hide the progress bar (shown on stderr otherwise).
        errors: parse-error policy, ``"lenient"`` or ``"strict"`` (see :func:`extract_fragments`).
        workers: worker processes; None = ``min(2, os.cpu_count())``; 1 = parse in this process.
        pretokenize: with worker processes, also lex every fragment there (tokens and normalised
            lines) and seed this process's caches (:func:`twinspect.code.normalize.prime_tokens`),
            so later stages do not tokenise again.
        granularity: ``"function"``, ``"block"`` or ``"file"`` (see above).
        executor: where the runs of files are parsed (e.g. a Ray cluster,
            :mod:`twinspect.code.executors`); None = ``workers`` local processes as above. The
            result is the same either way.
        cache: a parse checkpoint (:class:`twinspect.code.checkpoint.ParseCache`, function or file
            granularity): files it holds unchanged are read back instead of parsed, the others are
            parsed and stored shard by shard, so an interrupted run resumes and a re-run parses only
            changed files. Same result as without it; ``cache.counters`` counts hits and parses.
        token_copies: with ``granularity="block"``, receives the line spans of every run pair the
            token matcher found, ``((path, first, last), (path, first, last))`` (1-based, inclusive;
            :func:`twinspect.code.token_runs.span_lines`), for
            :func:`twinspect.code.token_runs.add_run_pairs`.

    Returns:
        ``(fragments, stats)``: fragments ordered by file ``rel`` path then source position (with
        ``code`` filled), and the scan counters.

    Raises:
        InputError: a PATH does not exist or cannot be read, the language name, error policy or
            granularity is unknown, or ``workers < 1``.
    """
    granularity = check_granularity(granularity)
    if errors not in ERROR_POLICIES:
        raise InputError(f"unknown parse-error policy {errors!r}", hint="use 'lenient' or 'strict'")
    from twinspect.code.executors import default_workers

    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}")
    files, stats = discover(
        paths,
        exclude=exclude,
        max_file_bytes=max_file_bytes,
        respect_gitignore=respect_gitignore,
        language=language,
    )
    fragments: list[Fragment] = []
    statements: list[FileStatements] = []
    if cache is not None:
        fragments = _mine_cached(files, stats, cache, (min_lines, errors, pretokenize, granularity), workers,
                                 executor, quiet)
        return fragments, stats
    if executor is None and workers > 1 and len(files) >= PARALLEL_MIN_FILES:
        from twinspect.code.executors import LocalPool

        executor = LocalPool(workers)
    with progress("parsing", total=len(files), quiet=quiet) as bar:
        if executor is not None and len(files) >= PARALLEL_MIN_FILES:
            runs = [files[i : i + _FILES_PER_TASK] for i in range(0, len(files), _FILES_PER_TASK)]
            results = executor.map(_mine_run, runs, shared=(min_lines, errors, pretokenize, granularity))
            for run, (frags, part, toks, lines, sts) in zip(runs, results):
                _absorb(stats, fragments, frags, part, toks, lines)
                statements.extend(sts)
                bar.advance(len(run))
        else:
            for sf in files:
                text = read_source(sf, stats)
                if text is not None:
                    frags, st = extract_file(
                        text, sf.rel, sf.language, min_lines=min_lines, stats=stats, errors=errors,
                        granularity=granularity,
                    )
                    fragments.extend(frags)
                    if st is not None:
                        statements.append(_with_token_stream(text, st))
                bar.advance()
    if granularity == "block":
        fragments = _mine_blocks(files, fragments, statements, min_lines, stats, token_copies)
    return fragments, stats


def mine_files(files: Sequence[SourceFile], stats: ScanStats, cache: ParseCache, options: dict[str, Any], *,
               quiet: bool = True) -> list[Fragment]:
    """Fragments of already discovered files through a parse checkpoint (hits read back, misses parsed
    and stored), in file order; their lexed tokens seed this process's caches.

    Used by changed-files checks (:mod:`twinspect.code.incremental`), which parse a few files of a
    tree and read a few others back.

    Args:
        files: the files (from :func:`~twinspect.code.files.discover` of the scan's PATHs).
        stats: scan counters the files' counters are added to.
        cache: the parse checkpoint.
        options: the mining options ``min_lines``, ``errors``, ``pretokenize``, ``granularity``.
        quiet: no progress bar.

    Returns:
        The fragments, ordered by file then source position.
    """
    opts = (int(options["min_lines"]), str(options["errors"]), bool(options["pretokenize"]), str(options["granularity"]))
    return _mine_cached(files, stats, cache, opts, 1, None, quiet)


def _mine_cached(files: Sequence[SourceFile], stats: ScanStats, cache: ParseCache, options: tuple[int, str, bool, str],
                 workers: int, executor: ShardExecutor | None, quiet: bool) -> list[Fragment]:
    """:func:`mine`'s parse stage through a parse cache: hits read back, misses parsed in shards and stored."""
    from twinspect.code.executors import InProcess, LocalPool

    min_lines, errors, pretokenize, granularity = options
    per_file = cache.load(files, {"min_lines": min_lines, "errors": errors, "pretokenize": pretokenize,
                                  "granularity": granularity})
    todo = [i for i, r in enumerate(per_file) if r is None]
    runs = [todo[i:i + _FILES_PER_TASK] for i in range(0, len(todo), _FILES_PER_TASK)]
    if executor is None:
        executor = LocalPool(workers) if workers > 1 and len(todo) >= PARALLEL_MIN_FILES else InProcess()
    fragments: list[Fragment] = []
    absorbed = 0  # per_file[:absorbed] are in fragments (and released: their token lists are large)

    def absorb_ready() -> None:
        nonlocal absorbed
        while absorbed < len(per_file) and (entry := per_file[absorbed]) is not None:
            _absorb(stats, fragments, *entry)
            per_file[absorbed] = None
            absorbed += 1

    with progress("parsing", total=len(files), quiet=quiet) as bar:
        bar.advance(len(files) - len(todo))
        shards = [[files[i] for i in run] for run in runs]
        absorb_ready()
        for run, shard, results in zip(runs, shards, executor.map(_mine_run_each, shards, shared=options)):
            for i, r in zip(run, results):
                per_file[i] = r
            cache.store(list(zip(shard, results)))
            del results
            absorb_ready()
            bar.advance(len(run))
    assert absorbed == len(per_file)
    return fragments


def _mine_blocks(
    files: Sequence[SourceFile],
    fragments: list[Fragment],
    statements: Sequence[FileStatements],
    min_lines: int,
    stats: ScanStats,
    token_copies: list[tuple[tuple[str, int, int], tuple[str, int, int]]] | None = None,
) -> list[Fragment]:
    """The global block pass of :func:`mine`: match the statement runs of all files, then the
    token runs across syntax (:mod:`twinspect.code.token_runs`), read the files holding a block
    again, and interleave the block fragments with the function fragments. The line spans of every
    token run pair are appended to ``token_copies`` when given."""
    from twinspect.code.blocks import block_fragments, default_min_tokens, match_runs, text_digest
    from twinspect.code.token_runs import match_token_runs, span_lines, token_run_fragments

    by_rel = {sf.rel: sf for sf in files}

    def read_text(index: int) -> str | None:
        return read_source(by_rel[statements[index].rel])

    pairs = match_runs(statements, min_lines=min_lines, stats=stats)
    blocks = block_fragments(statements, pairs, read_text, functions=fragments, stats=stats)

    # Token runs: copies that start or end inside a statement, or run across definitions. A token
    # pair inside the two runs of a statement pair adds nothing; a span equal to an existing
    # fragment's is that fragment.
    streams = [st.tokens for st in statements]
    tpairs, capped = match_token_runs(streams, min_lines=min_lines, min_t2=default_min_tokens(min_lines))
    stats.token_windows_capped += capped
    stmt_pairs: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
    for a, b in pairs:
        sa, sb = statements[a.file].sequences[a.seq], statements[b.file].sequences[b.seq]
        span = (sa.start_line[a.first], sa.end_line[a.last], sb.start_line[b.first], sb.end_line[b.last])
        stmt_pairs.setdefault((a.file, b.file), []).append(span)
        stmt_pairs.setdefault((b.file, a.file), []).append((span[2], span[3], span[0], span[1]))
    kept = []
    for ta, tb in tpairs:
        sa_, ea = span_lines(streams[ta.file], ta)  # type: ignore[arg-type]
        sb_, eb = span_lines(streams[tb.file], tb)  # type: ignore[arg-type]
        if token_copies is not None:
            token_copies.append(((statements[ta.file].rel, sa_, ea), (statements[tb.file].rel, sb_, eb)))
        if not any(p0 <= sa_ and ea <= p1 and q0 <= sb_ and eb <= q1
                   for p0, p1, q0, q1 in stmt_pairs.get((ta.file, tb.file), ())):
            kept.append((ta, tb))
    existing = {(f.path, f.start_line, f.end_line) for f in (*fragments, *blocks)}
    # named scopes per file: function fragments and the statement sequences of function and class
    # bodies (a sequence too short to hold a block is not listed, the function fragment still is)
    scopes_of: dict[str, list[tuple[int, int, str]]] = {}
    for f in fragments:
        scopes_of.setdefault(f.path, []).append((f.start_line, f.end_line, f.name))
    for st in statements:
        scopes_of.setdefault(st.rel, []).extend(
            (seq.start_line[0], seq.end_line[-1], seq.scope) for seq in st.sequences if seq.start_line)

    def scope(rel: str, start: int, end: int) -> str:
        holding = [(b - a, name) for a, b, name in scopes_of.get(rel, ()) if a <= start and end <= b]
        return min(holding)[1] if holding else ""

    def read_file(index: int) -> tuple[str, str] | None:
        text = read_text(index)
        if text is None or text_digest(text) != statements[index].digest:
            return None
        return text, _blanked(text, statements[index])

    runs, unreadable = token_run_fragments(
        [st.rel for st in statements], [st.language for st in statements], streams, kept, read_file,
        skip=lambda rel, start, end: (rel, start, end) in existing, scope=scope)
    stats.block_files_changed += unreadable
    stats.token_run_fragments += len(runs)
    stats.block_fragments += len(runs)
    stats.fragments += len(runs)
    merged = sorted((*blocks, *runs), key=lambda f: (f.start_line, -f.end_line))
    return _merge_blocks([sf.rel for sf in files], fragments, merged)


def _norm_rel(rel: str) -> str:
    rel = str(rel).replace("\\", "/")
    while rel.startswith("./"):
        rel = rel[2:]
    return rel


def fragment_at(fragments: Sequence[Fragment], rel: str, line: int | None) -> Fragment:
    """The fragment a ``FILE[:LINE]`` reference points to.

    Args:
        fragments: mined fragments.
        rel: the file's path as stored in ``Fragment.path``; when no fragment has exactly this
            path, a unique fragment path that ends with ``/rel`` (or that ``rel`` ends with) is used.
        line: 1-based line inside the wanted function, or None for the file's first fragment.

    Returns:
        The innermost (fewest lines) fragment of the file containing ``line``; for ``line=None``
        the file's only fragment, or its first one in source order.

    Raises:
        InputError: no fragment of that file (or none containing the line, e.g. because the
            function is shorter than ``--min-lines``).
    """
    want = _norm_rel(rel)
    in_file = [f for f in fragments if f.path == want]
    if not in_file:
        paths = {f.path for f in fragments}
        cands = [p for p in paths if p.endswith("/" + want) or want.endswith("/" + p)]
        if len(cands) == 1:
            want = cands[0]
            in_file = [f for f in fragments if f.path == want]
        elif len(cands) > 1:
            raise InputError(
                "file reference is ambiguous", rel, hint=f"matches {', '.join(sorted(cands)[:5])}"
            )
    if not in_file:
        raise InputError("no fragment in this file", rel,
                         hint="check the path (relative to the scanned directory) and --min-lines")
    if line is None:
        return min(in_file, key=lambda f: (f.start_line, -f.end_line))
    containing = [f for f in in_file if f.start_line <= line <= f.end_line]
    if not containing:
        raise InputError(
            f"no fragment contains line {line}", rel,
            hint="the function may be shorter than --min-lines or the line outside any function",
        )
    return min(containing, key=lambda f: (f.loc, f.start_line))
