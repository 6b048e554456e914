"""Supported source languages: file-extension mapping and cached tree-sitter parsers and queries.

The grammars come from the single-language wheels ``tree-sitter-python``, ``tree-sitter-java``,
``tree-sitter-c`` and ``tree-sitter-cpp`` (offline; see ``../shared/STACK.md``). Parsers and compiled
queries are built once per process and reused.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import tree_sitter

from twinspect.errors import InputError

#: Languages twinspect can mine fragments from.
LANGUAGES: tuple[str, ...] = ("python", "java", "c", "cpp")

#: File extension (lower case, with the dot) -> language name.
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
}

_GRAMMAR_MODULES = {
    "python": "tree_sitter_python",
    "java": "tree_sitter_java",
    "c": "tree_sitter_c",
    "cpp": "tree_sitter_cpp",
}

#: Common spellings accepted for ``--language`` (mapped to the canonical name).
_ALIASES = {"py": "python", "c++": "cpp", "cxx": "cpp", "cc": "cpp"}


def canonical_language(name: str) -> str:
    """Return the canonical language name for a user-supplied ``--language`` value.

    Args:
        name: ``"python"``, ``"java"``, ``"c"``, ``"cpp"`` (case-insensitive; ``"py"``, ``"c++"``
            and ``"cxx"`` are accepted as aliases).

    Returns:
        One of :data:`LANGUAGES`.

    Raises:
        InputError: the name is not a supported language.
    """
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in LANGUAGES:
        raise InputError(
            f"unknown language {name!r}", hint=f"choose one of: {', '.join(LANGUAGES)}"
        )
    return key


def language_for(path: str | Path, override: str | None = None) -> str | None:
    """Language of a source file, chosen by its extension unless forced.

    Args:
        path: file path (only its suffix is looked at, case-insensitively).
        override: a language name that wins over the extension (``--language``).

    Returns:
        A name from :data:`LANGUAGES`, or None when the extension is unknown and no override is given.

    Raises:
        InputError: ``override`` is not a supported language name.
    """
    if override is not None:
        return canonical_language(override)
    return EXTENSIONS.get(Path(path).suffix.lower())


@functools.cache
def get_language(language: str) -> tree_sitter.Language:
    """The tree-sitter :class:`~tree_sitter.Language` of a supported language (cached).

    Raises:
        InputError: unknown language name.
    """
    language = canonical_language(language)
    module = importlib.import_module(_GRAMMAR_MODULES[language])
    return tree_sitter.Language(module.language())


@functools.cache
def get_parser(language: str) -> tree_sitter.Parser:
    """A tree-sitter parser for ``language``, created once per process.

    Parsers are not thread-safe; use one process per worker (the pipeline is single-threaded).

    Args:
        language: a name from :data:`LANGUAGES`.

    Returns:
        A :class:`tree_sitter.Parser` bound to the language's grammar.

    Raises:
        InputError: unknown language name.
    """
    return tree_sitter.Parser(get_language(language))


# Node types mined as fragments, and the named scopes used to qualify fragment names.
FUNCTION_TYPES: dict[str, tuple[str, ...]] = {
    "python": ("function_definition",),
    "java": ("method_declaration", "constructor_declaration", "compact_constructor_declaration"),
    "c": ("function_definition",),
    "cpp": ("function_definition",),
}
SCOPE_TYPES: dict[str, tuple[str, ...]] = {
    "python": ("class_definition",),
    "java": (
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    ),
    "c": (),
    "cpp": ("class_specifier", "struct_specifier", "union_specifier"),
}
COMMENT_TYPES: dict[str, tuple[str, ...]] = {
    "python": ("comment",),
    "java": ("line_comment", "block_comment"),
    "c": ("comment",),
    "cpp": ("comment",),
}
#: Separator of qualified names (``Class.method`` / ``A::f``).
NAME_SEPARATOR: dict[str, str] = {"python": ".", "java": ".", "c": "::", "cpp": "::"}


@functools.cache
def get_query(language: str) -> tree_sitter.Query:
    """The compiled query capturing ``@function``, ``@scope`` and ``@comment`` nodes (cached).

    One query per language finds every function/method definition, every named scope (class,
    struct...) and every comment in a single C-level pass over the tree.
    """
    language = canonical_language(language)
    patterns = [f"({t}) @function" for t in FUNCTION_TYPES[language]]
    patterns += [f"({t}) @scope" for t in SCOPE_TYPES[language]]
    patterns += [f"({t}) @comment" for t in COMMENT_TYPES[language]]
    return tree_sitter.Query(get_language(language), "\n".join(patterns))


@functools.cache
def get_error_query(language: str) -> tree_sitter.Query:
    """Compiled query capturing every ``ERROR`` node as ``@error`` (cached)."""
    return tree_sitter.Query(get_language(canonical_language(language)), "(ERROR) @error")
