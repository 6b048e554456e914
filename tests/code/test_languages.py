"""Language detection and tree-sitter parser/query caching."""

from __future__ import annotations

import pytest

from twinspect.code.languages import (
    EXTENSIONS,
    LANGUAGES,
    canonical_language,
    get_parser,
    get_query,
    language_for,
)
from twinspect.errors import InputError


@pytest.mark.parametrize(
    "name, expected",
    [
        ("a.py", "python"),
        ("pkg/Mod.java", "java"),
        ("x.c", "c"),
        ("x.h", "c"),
        ("x.cc", "cpp"),
        ("x.cpp", "cpp"),
        ("x.CXX", "cpp"),
        ("x.hpp", "cpp"),
        ("x.hh", "cpp"),
        ("x.hxx", "cpp"),
        ("README.md", None),
        ("Makefile", None),
    ],
)
def test_language_for_extension(name, expected):
    assert language_for(name) == expected


def test_override_wins_and_is_validated():
    assert language_for("x.h", override="cpp") == "cpp"
    assert language_for("notes.txt", override="C++") == "cpp"
    assert language_for("x.c", override="Python") == "python"
    assert language_for("x.rs", override="Rust") == "rust"  # parsed since the registry (issue 22)
    with pytest.raises(InputError, match="unknown language 'cobol'"):
        language_for("x.cob", override="cobol")


def test_extension_table_only_maps_to_supported_languages():
    assert set(EXTENSIONS.values()) == set(LANGUAGES)
    assert canonical_language("py") == "python"


@pytest.mark.parametrize("language", LANGUAGES)
def test_parser_is_cached_and_parses(language):
    parser = get_parser(language)
    assert get_parser(language) is parser
    snippet = {
        "python": b"def f(x):\n    return x\n",
        "java": b"class A { int f(int x) { return x; } }",
        "c": b"int f(int x) { return x; }",
        "cpp": b"int f(int x) { return x; }",
        "javascript": b"function f(x) { return x; }",
        "typescript": b"function f(x: number): number { return x; }",
        "tsx": b"function F(p: P) { return <div>{p.x}</div>; }",
        "go": b"package m\nfunc f(x int) int { return x }\n",
        "rust": b"fn f(x: i32) -> i32 { x }",
        "csharp": b"class A { int F(int x) { return x; } }",
        "kotlin": b"fun f(x: Int): Int { return x }",
        "swift": b"func f(x: Int) -> Int { return x }",
        "ruby": b"def f(x)\n  x\nend\n",
        "php": b"<?php function f($x) { return $x; }",
        "scala": b"object O { def f(x: Int): Int = x }",
    }[language]
    tree = parser.parse(snippet)
    assert not tree.root_node.has_error
    assert get_query(language) is get_query(language)
