"""Type-1/Type-2 normalisation of fragments and token-level similarity.

Clone types follow Roy, Cordy & Koschke ("Comparison and evaluation of code clone detection
techniques and tools: a qualitative approach", Sci. Comput. Program. 2009) as used by BigCloneBench
(Svajlenko et al., ICSME 2014):

* **T1** – identical code except for layout (whitespace, line breaks) and comments.
  :func:`tokens` is the T1 view: the lexical tokens of the comment-free code.
* **T2** – T1 plus renamed identifiers and changed literals (and user type names, which are
  identifiers). :func:`abstract_tokens` is the T2 view: identifiers become ``"ID"`` and
  numeric/string/character literals ``"LIT"``; keywords (including type keywords such as ``int``),
  operators and punctuation are kept, and so are assertion names (:data:`ASSERTION_NAME`:
  ``assertTrue`` and ``assertFalse`` are different tokens).
* **T3** – further statement-level edits, measured by :func:`token_similarity`.

Tokenisation is a per-language regular expression (run by the C regex engine) over
``Fragment.code`` (comments already blanked by the tree-sitter pass). Strings (Python triple-quoted,
prefixed and f-strings, Java text blocks, C/C++ prefixed and raw strings) and character literals are
single tokens. Python's block structure is significant, so Python token lists carry ``"<INDENT>"``
and ``"<DEDENT>"`` tokens computed from the indentation of logical lines (as Python's own tokenizer
does); re-indenting a whole function does not change them. Java, C and C++ tokens are fully
layout-insensitive; ``>>`` is always split into two ``>`` tokens there so that nested generics
(``List<List<T>>`` / ``List<List<T> >``) tokenise alike.

Python soft keywords (``match``, ``case``, ``type``, ``_``) are treated as identifiers, because as
names they are far more common than the statements, and a soft keyword used as a keyword cannot be
confused with any valid identifier use; likewise Java's contextual ``var``, ``record``, ``yield``.
The hard keywords are ``keyword.kwlist`` (Python) and the lists below (Java, C, C++).

Token lists are cached per ``(language, code)`` (bounded LRU), because several pipeline stages
(T1/T2 keys, lexical encoder, T3 verification) ask for them.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rapidfuzz.distance import LCSseq

from twinspect.code import languages as LANG
from twinspect.code.comments import strip_comments_text

if TYPE_CHECKING:  # type-only: fragments imports this module lazily, never the reverse at run time
    import numpy as np

    from twinspect.code.fragments import Fragment

ID = "ID"
LIT = "LIT"
INDENT = "<INDENT>"
DEDENT = "<DEDENT>"

# Keywords and token classes come from the language registry (one row per language).
PYTHON_KEYWORDS = LANG.PYTHON_KEYWORDS
JAVA_KEYWORDS = LANG.JAVA_KEYWORDS
C_KEYWORDS = LANG.C_KEYWORDS
CPP_KEYWORDS = LANG.CPP_KEYWORDS
KEYWORDS: dict[str, frozenset[str]] = LANG.KEYWORDS


def _compose(spec: LANG.LanguageSpec, string: str) -> str:
    """The token regex of a language: literals, numbers, identifiers, (Python: line continuations
    and newline runs,) operators, any other non-space non-word character."""
    layout = r"|(?P<cont>\\\n)|(?P<nl>(?:\n[ \t\f]*)+)" if spec.indentation else ""
    return (
        rf"(?P<str>{string})|(?P<num>{spec.number})|(?P<id>{spec.identifier}){layout}"
        rf"|(?P<op>{spec.operators}|[^\s\w])"
    )


_PATTERNS = {name: _compose(s, s.string) for name, s in LANG.REGISTRY.items()}
_REGEX = {lang: re.compile(p, re.S) for lang, p in _PATTERNS.items()}
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")

#: Maximum number of (language, code) entries kept in the token cache.
TOKEN_CACHE_SIZE = 1 << 16
#: Maximum number of fragments whose tokens a scan primes from its mining workers (prime_tokens).
#: Larger than TOKEN_CACHE_SIZE on purpose: a scan reads every fragment's tokens three or four times
#: (T2 buckets, the encoder, token bags, the verifier), and evicting the primed lists of a 250k-fragment
#: tree made its single main thread lex every fragment again at each of them (about 70 s each on a
#: 9-MLOC tree). Tokens are interned, so the lists cost about 16 bytes per token.
PRIMED_CACHE_SIZE = 1 << 21


def _plain(pattern: str) -> str:
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


# findall() versions without capturing groups; a language whose literals need back-references
# (C++ raw strings, Rust raw strings) uses them only when its ``slow_marker`` occurs in the code
# (the slower finditer path over :data:`_REGEX`).
_FAST = {name: re.compile(_plain(_compose(s, s.fast_string or s.string)), re.S) for name, s in LANG.REGISTRY.items()}
_SLOW_MARKER = {name: s.slow_marker for name, s in LANG.REGISTRY.items() if s.slow_marker}


#: Assertion calls keep their name in the T2 view (``assertTrue`` vs ``assertFalse``, JUnit's
#: ``assertEquals``, GoogleTest's ``EXPECT_EQ``): they state *what* a test checks, so two tests that
#: differ only there are not Type-2 clones.
ASSERTION_NAME = re.compile(r"(?:assert|ASSERT_|EXPECT_|expect)[A-Z_]\w*\Z")


class _Abstraction(dict):
    """token -> T2 token memo for one language; literals are classified but not stored.

    ``literal``/``identifier`` None: the first/last-character rule of Python, Java, C and C++;
    otherwise tokens are classified by a full match of the registry's literal and identifier
    patterns.
    """

    def __init__(self, keywords: frozenset[str], literal: re.Pattern | None = None,
                 identifier: re.Pattern | None = None):
        super().__init__()
        self.keywords = keywords
        self.literal = literal
        self.identifier = identifier

    def __missing__(self, tok: str) -> str:
        if self.literal is not None and self.identifier is not None:
            if self.literal.fullmatch(tok):
                return LIT
            is_id = self.identifier.fullmatch(tok) is not None
        else:
            c = tok[0]
            if c in "\"'" or tok[-1] in "\"'" or c.isdigit() or (c == "." and len(tok) > 1 and tok[1].isdigit()):
                return LIT
            is_id = c == "$" or c == "_" or c.isalpha() or (c > "\x7f" and tok.isidentifier())
        if is_id:
            out = tok if tok in self.keywords or ASSERTION_NAME.match(tok) else ID
        else:
            out = tok
        if len(self) < 1_000_000:
            self[tok] = out
        return out


def _abstraction(s: LANG.LanguageSpec) -> _Abstraction:
    if s.classify == "prefix":
        return _Abstraction(s.keywords)
    return _Abstraction(s.keywords, re.compile(f"(?:{s.string})|(?:{s.number})", re.S), re.compile(s.identifier))


_ABSTRACT = {name: _abstraction(s) for name, s in LANG.REGISTRY.items()}


def _indentation(text: str) -> str:
    """The spaces, tabs and form feeds ``text`` starts with (what a Python newline run holds)."""
    return text[: len(text) - len(text.lstrip(" \t\f"))]


def _python_layout(raw: list[str], first_indent: str) -> list[str]:
    """Turn the newline runs among Python tokens into <INDENT>/<DEDENT> tokens.

    Newlines inside brackets and explicit ``\\`` continuations are dropped; at bracket depth 0 the
    indentation of the next logical line is compared with a stack of open levels, as in Python's
    tokenizer. (A plain loop measured faster here than C-level map/compress/str.count variants.)
    """
    levels = [len(first_indent.expandtabs(8))]
    depth = 0
    out: list[str] = []
    append = out.append
    pending = None
    for tok in raw:
        c = tok[0]
        if c == "\n":
            if not depth:
                pending = tok
            continue
        if pending is not None:
            width = len(pending.rpartition("\n")[2].expandtabs(8))
            pending = None
            if width > levels[-1]:
                levels.append(width)
                append(INDENT)
            else:
                while width < levels[-1] and len(levels) > 1:
                    levels.pop()
                    append(DEDENT)
        if c in "([{":
            if len(tok) == 1:
                depth += 1
        elif c in ")]}":
            if depth and len(tok) == 1:
                depth -= 1
        elif c == "\\" and tok == "\\\n":
            continue  # explicit line continuation
        append(tok)
    return out


def lex(code: str, language: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Tokenise comment-free source code (uncached; see :func:`tokens` for fragments).

    Args:
        code: source text with comments already removed (or without comments).
        language: one of ``"python"``, ``"java"``, ``"c"``, ``"cpp"``.

    Returns:
        ``(t1, t2)``: the lexical tokens and their T2 abstraction, two tuples of equal length.

    Raises:
        KeyError: unknown language (callers validate language names first).
    """
    raw = raw_tokens(code, language)
    if language == "python":
        raw = _python_layout(raw, _indentation(code))
    t1 = tuple(map(sys.intern, raw))
    memo = _ABSTRACT[language]
    t2 = tuple(map(memo.__getitem__, t1))
    return t1, t2


def raw_tokens(code: str, language: str) -> list[str]:
    """The language's regex tokens of ``code``, before any layout handling.

    Python newline runs (``"\\n"`` plus indentation) and line continuations are tokens here; no
    ``<INDENT>``/``<DEDENT>`` is made (see :func:`lex`).

    Args:
        code: source text (comments removed or blanked).
        language: a registered language name.

    Returns:
        The token strings in order (a new list).

    Raises:
        KeyError: unknown language.
    """
    marker = _SLOW_MARKER.get(language)
    if marker and marker in code:
        return [m.group() for m in _REGEX[language].finditer(code)]
    return _FAST[language].findall(code)


_LINE_MARK = "\x01"  # inserted after every newline: a one-character operator token that ends a line


def line_tokens(code: str, language: str) -> tuple[list[list[str]], list[tuple[int, int]]]:
    """The T1 tokens of each source line, every line tokenised as if on its own.

    The code is tokenised once; the lines a token spanning lines touches (a multi-line string, a
    Java text block, a C++ raw string) are tokenised each on its own instead, so that the result is
    always that of lexing each stripped line separately (inside a docstring, its words are tokens).
    Layout is not a token: no Python newline runs or ``<INDENT>``/``<DEDENT>``; a Python explicit
    continuation is the token ``"\\\n"`` at the end of its line.

    Args:
        code: source text with comments removed or blanked.
        language: a registered language name.

    Returns:
        ``(per_line, spans)``: one list of tokens per line of ``code`` (``code.count("\\n") + 1``
        lists; blank lines give empty lists), and the 0-based ``(first, last)`` lines of every token
        that spans lines.

    Raises:
        KeyError: unknown language.
    """
    return _line_pass(code, language, None)


def _line_pass(code: str, language: str, raw: list[str] | None
               ) -> tuple[list[list[str]], list[tuple[int, int]]]:
    """:func:`line_tokens`; with a list ``raw``, also fills it with :func:`raw_tokens` of ``code``
    as the same regex pass gives them (a Python newline run stands as ``"\n"`` plus the next
    line's indentation, one per line break: all :func:`_python_layout` reads of it)."""
    per_line: list[list[str]] = [[]]
    cur = per_line[0]
    spans: list[tuple[int, int]] = []
    rows: list[str] | None = None
    after_newline = False  # the token before a line mark was a newline run (not a continuation)
    for tok in raw_tokens(code.replace("\n", "\n" + _LINE_MARK), language):
        if tok == _LINE_MARK:
            cur = []
            per_line.append(cur)
            if after_newline and raw is not None:
                if rows is None:
                    rows = code.split("\n")
                raw.append("\n" + _indentation(rows[len(per_line) - 1]))
            after_newline = False
        elif tok[0] == "\n":
            after_newline = True
        elif _LINE_MARK in tok:
            k = tok.count(_LINE_MARK)
            spans.append((len(per_line) - 1, len(per_line) - 1 + k))
            per_line.extend([] for _ in range(k))
            cur = per_line[-1]
            if raw is not None:
                raw.append(tok.replace(_LINE_MARK, ""))
        else:
            cur.append(tok)
            if raw is not None:
                raw.append(tok)
    if spans:  # lines a multi-line token touches are lexed each on its own
        source = code.split("\n")
        for lo, hi in spans:
            for i in range(lo, hi + 1):
                line = source[i].strip()
                per_line[i] = raw_tokens(line, language) if line else []
    return per_line, spans


def lex_with_lines(code: str, language: str) -> tuple[tuple[str, ...], list[str]]:
    """``lex(code, language)[0]`` and the normalised lines of ``code`` from one pass of the regex.

    What mining computes for every fragment (:func:`twinspect.code.fragments.mine`): the T1
    tokens (:func:`lex`) and the abstracted, non-brace lines (:func:`normalized_lines`), which
    otherwise lex the code twice. Tested equal to the two on every fragment of the stdlib and of
    trees in every registered language.

    Args:
        code: source text with comments removed.
        language: a registered language name.

    Returns:
        ``(t1, lines)``: the interned T1 tokens, and the normalised lines in order.

    Raises:
        KeyError: unknown language.
    """
    raw: list[str] = []
    per_line, _ = _line_pass(code, language, raw)
    if language == "python":
        raw = _python_layout(raw, _indentation(code))
    return tuple(map(sys.intern, raw)), _joined_lines(per_line, language)


def abstract_lines(code: str, language: str) -> list[tuple[str, ...]]:
    """The T2-abstracted tokens of each source line, every line tokenised as if on its own
    (:func:`line_tokens`, then abstracted; a Python continuation is a lone ``"\\"``).

    Args:
        code: source text with comments removed.
        language: a registered language name.

    Returns:
        One tuple of abstracted tokens per line of ``code`` (``code.count("\\n") + 1`` tuples;
        blank lines give empty tuples).

    Raises:
        KeyError: unknown language.
    """
    return _abstracted(line_tokens(code, language)[0], language)


def _abstracted(per_line: Sequence[Sequence[str]], language: str) -> list[tuple[str, ...]]:
    """Each line's tokens T2-abstracted; a Python explicit line continuation becomes a lone ``"\\"``."""
    memo = _ABSTRACT[language]
    return [tuple("\\" if t == "\\\n" else memo[t] for t in toks) for toks in per_line]


@functools.lru_cache(maxsize=TOKEN_CACHE_SIZE)
def _lex_cached(code: str, language: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return lex(code, language)


# Token lists computed elsewhere (mining worker processes), see prime_tokens(); bounded by PRIMED_CACHE_SIZE.
_primed: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _lex_fragment(fragment: Fragment) -> tuple[tuple[str, ...], tuple[str, ...]]:
    code = strip_comments(fragment)
    if _primed:
        hit = _primed.get((code, fragment.language))
        if hit is not None:
            return hit
    return _lex_cached(code, fragment.language)


def prime_tokens(fragment: Fragment, t1: Sequence[str], lines: Sequence[str] | None = None) -> None:
    """Seed the token caches with the T1 tokens (and normalised lines) of a fragment lexed in another process.

    Used by :func:`twinspect.code.fragments.mine` with worker processes, so that the parent does
    not lex every fragment again. The T2 view is derived here (a per-token dictionary look-up).

    Args:
        fragment: the fragment (its ``code``/``language`` are the cache key).
        t1: exactly ``lex(strip_comments(fragment), fragment.language)[0]``.
        lines: exactly ``normalized_lines(fragment)``, or None.
    """
    language = fragment.language
    if len(_primed) >= PRIMED_CACHE_SIZE:
        _primed.clear()
    if len(_primed_lines) >= PRIMED_CACHE_SIZE:
        _primed_lines.clear()
    t1 = tuple(map(sys.intern, t1))
    key = (strip_comments(fragment), language)
    _primed[key] = (t1, tuple(map(_ABSTRACT[language].__getitem__, t1)))
    if lines is not None:
        # interned: abstracted lines repeat across a tree (2.4 MLOC of Python and C: 1.33 M lines,
        # 166 k distinct; 91 MiB of strings as received, 14 MiB interned)
        _primed_lines[key] = tuple(map(sys.intern, lines))


# Normalised lines computed in the mining worker processes (see prime_tokens); bounded by PRIMED_CACHE_SIZE.
_primed_lines: dict[tuple[str, str], tuple[str, ...]] = {}


def release_token_caches() -> int:
    """Empty the token caches (:func:`prime_tokens`'s and the lexing cache); later look-ups lex again.

    For a scan that is done with most fragments' tokens (once its candidates are verified, and again
    after detection): on a 10-MLOC tree the primed lists are about 700 MB. Results do not change; a
    later :func:`tokens`, :func:`t1_key`... of a released fragment costs one lexing.

    Returns:
        The number of fragments whose primed tokens were dropped.
    """
    dropped = len(_primed)
    _primed.clear()
    _primed_lines.clear()
    _lex_cached.cache_clear()
    return dropped


#: Lines made only of these (after abstraction) are layout, not code: where a brace goes.
BRACE_LINES = frozenset(("{", "}", "};", "} ;", "( ) ;", ") ;"))


def normalized_lines(fragment: Fragment) -> list[str]:
    """The fragment's non-blank code lines, each as its abstracted tokens joined by spaces.

    Lines of only braces (:data:`BRACE_LINES`) are dropped (where a brace goes is layout). The
    fragment is tokenised once (:func:`abstract_lines`): a token belongs to the line it starts on,
    so a string spanning lines is part of its first line; Python's indentation tokens are not part
    of a line. Fragments mined in worker processes come with their lines computed there
    (:func:`prime_tokens`). These lines are what NiCad-style line alignment compares (the
    verifier's ``line_lcs`` feature, :mod:`twinspect.code.verify`).

    Args:
        fragment: a fragment (its ``code``, comments blanked, is read).

    Returns:
        The normalised lines in order (a new list).
    """
    code = strip_comments(fragment)
    if _primed_lines:
        hit = _primed_lines.get((code, fragment.language))
        if hit is not None:
            return list(hit)
    return _joined_lines(line_tokens(code, fragment.language)[0], fragment.language)


def _joined_lines(per_line: Sequence[Sequence[str]], language: str) -> list[str]:
    """Each non-blank line's abstracted tokens (:func:`_abstracted`) joined by spaces, brace-only
    lines dropped."""
    out = []
    for toks in _abstracted(per_line, language):
        if toks:
            key = " ".join(toks)
            if key not in BRACE_LINES:
                out.append(key)
    return out


def token_ids(lists: Sequence[Sequence[str]], dtype: Any = "int64") -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Integer ids of the tokens of many token lists (equal tokens, equal ids).

    Ids follow the sorted order of the distinct tokens, so they do not depend on list order.

    Args:
        lists: N token lists.
        dtype: integer dtype of the ids (``"int32"`` halves the one entry per token of a large
            corpus; it must hold the number of distinct tokens, else ``ValueError``).

    Returns:
        ``(ids, lengths, vocab)``: (T,) ids of ``dtype`` of all tokens in order, int64 (N,)
        per-list lengths, and the sorted distinct tokens.
    """
    ids, lengths, vocab = token_ids_by_chunk(lists, dtype)
    return ids(0, len(lists)), lengths, vocab


def token_ids_by_chunk(
    lists: Sequence[Sequence[str]], dtype: Any = "int64",
) -> tuple[Callable[[int, int], np.ndarray], np.ndarray, list[str]]:
    """:func:`token_ids`' numbering, made on demand a range of lists at a time.

    For passes over a chunk of lists at a time that would otherwise hold the ids of every token at
    once (35 M on a 13-MLOC tree).

    Args:
        lists: N token lists (sliceable).
        dtype: integer dtype of the ids, as in :func:`token_ids`.

    Returns:
        ``(ids, lengths, vocab)``: ``ids(r0, r1)`` gives the ids of ``dtype`` of lists ``r0`` to
        ``r1 - 1`` concatenated (the values :func:`token_ids` gives them), int64 (N,) list lengths
        and the sorted distinct tokens.

    Raises:
        ValueError: ``dtype`` cannot hold the number of distinct tokens.
    """
    import itertools

    import numpy as np

    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    vocab = sorted(set(itertools.chain.from_iterable(lists)))
    if len(vocab) and len(vocab) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"{len(vocab)} distinct tokens do not fit in {np.dtype(dtype).name} ids")
    index = {t: i for i, t in enumerate(vocab)}

    def ids(r0: int, r1: int) -> np.ndarray:
        return np.fromiter(map(index.__getitem__, itertools.chain.from_iterable(lists[r0:r1])), dtype=dtype,
                           count=int(lengths[r0:r1].sum()))

    return ids, lengths, vocab


def strip_comments(fragment: Fragment) -> str:
    """The fragment's code with comments blanked (line structure kept).

    Returns ``fragment.code`` when extraction filled it; otherwise the fragment's text is parsed
    with tree-sitter and its comment nodes are replaced by spaces.

    Args:
        fragment: a fragment of a supported language.

    Returns:
        Text of the same number of lines as ``fragment.text``.
    """
    if fragment.code or not fragment.text:
        return fragment.code
    return strip_comments_text(fragment.text, fragment.language)


def tokens(fragment: Fragment) -> list[str]:
    """T1 view: lexical tokens of the comment-free code (layout-insensitive; see module doc).

    Args:
        fragment: any fragment.

    Returns:
        A new list of token strings (Python lists include ``"<INDENT>"``/``"<DEDENT>"``).
    """
    return list(_lex_fragment(fragment)[0])


def token_views(fragment: Fragment) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The T1 and T2 views (:func:`tokens`, :func:`abstract_tokens`) as the cached, interned tuples.

    No copy is made: on a 13-MLOC tree one list copy of every representative's tokens is about
    280 MB, so read-only consumers (the token-overlap index, the verifier, the type classifier)
    take these.

    Returns:
        ``(t1, t2)``, two tuples of equal length (do not modify; they are shared).
    """
    return _lex_fragment(fragment)


def abstract_tokens(fragment: Fragment) -> list[str]:
    """T2 view: :func:`tokens` with identifiers -> ``"ID"`` and literals -> ``"LIT"``.

    Keywords (``if``, ``int``, ``None``, ``true``...), operators and punctuation are kept. Function
    names in signatures are identifiers too, so a renamed copy of a function is a T2 clone.

    Returns:
        A new list, as long as ``tokens(fragment)``.
    """
    return list(_lex_fragment(fragment)[1])


def blake64(text: str) -> int:
    """A 64-bit BLAKE2b hash of a string (UTF-8, lone surrogates kept), as an unsigned int.

    Stable across processes and machines, unlike ``hash()``; the token hash of the lexical encoder's
    features, of the token-run matcher's windows and of a saved scan state's items.

    Returns:
        An int in [0, 2**64).
    """
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _digest(toks: Sequence[str]) -> str:
    return hashlib.blake2b(" ".join(toks).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def t1_key(fragment: Fragment) -> str:
    """Hash (32 hex digits, BLAKE2b-128) of ``" ".join(tokens(fragment))``.

    Two fragments have the same key exactly when they are identical after layout and comment
    normalisation (Type-1 clones), up to hash collisions (probability ~2^-128).
    """
    return _digest(_lex_fragment(fragment)[0])


def t2_key(fragment: Fragment) -> str:
    """Hash (32 hex digits, BLAKE2b-128) of ``" ".join(abstract_tokens(fragment))``.

    Equal keys mean a Type-1 or Type-2 clone (same token structure after identifier and literal
    abstraction).
    """
    return _digest(_lex_fragment(fragment)[1])


def lcs_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common subsequence of two sequences of hashable items.

    Computed by ``rapidfuzz.distance.LCSseq.similarity``: the bit-parallel algorithm of Allison &
    Dix (1986) in Hyyrö's formulation ("Bit-parallel LCS-length computation revisited", AWOCA
    2004), O(|a|·|b|/64) word operations in C++.

    Args:
        a, b: sequences (lists/tuples of tokens, strings...).

    Returns:
        The exact LCS length, 0 <= L <= min(len(a), len(b)).
    """
    if not a or not b:
        return 0
    return int(LCSseq.similarity(a, b))


def token_similarity(a: Sequence[str], b: Sequence[str], *, method: str = "min") -> float:
    """Syntactic similarity of two token sequences in [0, 1] (T3 measure).

    With ``M`` the length of the longest common subsequence of ``a`` and ``b`` (the tokens a diff
    would keep; exact, see :func:`lcs_length`):

    * ``method="min"`` (default): ``M / max(|a|, |b|)`` = the *smaller* of the two shared fractions
      ``M/|a|`` and ``M/|b|``. This is BigCloneBench's "syntactical similarity" (Svajlenko et al.,
      "Towards a Big Data Curated Benchmark of Inter-Project Code Clones", ICSME 2014: minimum ratio
      of the code one fragment shares with the other, measured by diff after normalisation), here
      applied to tokens instead of pretty-printed lines. BigCloneBench's bands: VST3 >= 0.9,
      ST3 0.7–0.9, MT3 0.5–0.7, WT3/T4 < 0.5.
    * ``method="dice"``: ``2M / (|a| + |b|)`` (difflib's ``ratio`` with an exact LCS).

    Args:
        a, b: token sequences (e.g. :func:`abstract_tokens` of two fragments).
        method: ``"min"`` or ``"dice"``.

    Returns:
        1.0 for two empty sequences, 0.0 when exactly one is empty.

    Raises:
        ValueError: unknown ``method``.
    """
    if method not in ("min", "dice"):
        raise ValueError(f"unknown similarity method {method!r} (use 'min' or 'dice')")
    na, nb = len(a), len(b)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    m = lcs_length(a, b)
    if method == "min":
        return m / max(na, nb)
    return 2.0 * m / (na + nb)
