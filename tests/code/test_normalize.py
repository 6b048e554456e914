"""T1/T2 normalisation, tokenisation and token similarity."""

from __future__ import annotations

import random
import textwrap

import pytest

from twinspect.code.fragments import Fragment, extract_fragments, mine
from twinspect.code.normalize import (
    DEDENT,
    INDENT,
    abstract_lines,
    abstract_tokens,
    lcs_length,
    lex,
    strip_comments,
    t1_key,
    t2_key,
    token_ids,
    token_similarity,
    tokens,
)


def one(src: str, language: str) -> Fragment:
    (f,) = extract_fragments(textwrap.dedent(src), "x", language, min_lines=1)
    return f


# --------------------------------------------------------------------------------------- tokens


def _per_line(code: str, language: str) -> list[tuple[str, ...]]:
    return [tuple(t for t in lex(ln.strip(), language)[1] if t not in (INDENT, DEDENT)) if ln.strip() else ()
            for ln in code.split("\n")]


@pytest.mark.parametrize("language, code", [
    ("python", 'def f(a, b):\n    """Doc of f.\n\n    Returns a+b.\n    """\n    x = a + \\\n        b\n    return (x,\n            1)\n'),
    ("python", "def g():\n    s = '''one\n two''' + 'x'\n    return s\n"),
    ("java", 'String f() {\n  String t = """\n    text block\n    """;\n  return t + "a";\n}\n'),
    ("c", "int f(int a) {\n  return a +\n    1; /* c */\n}\n"),
    ("cpp", 'auto s = R"x(raw\nstring)x";\nint y = 2;\n'),
])
def test_abstract_lines_equal_lexing_each_line_alone(language, code):
    got = abstract_lines(code, language)
    assert len(got) == code.count("\n") + 1
    assert got == _per_line(code, language)


def test_token_ids_map_equal_tokens_to_equal_ids():
    ids, lengths, vocab = token_ids([["b", "a", "b"], [], ["c", "a"]])
    assert lengths.tolist() == [3, 0, 2] and vocab == ["a", "b", "c"]
    assert [vocab[i] for i in ids.tolist()] == ["b", "a", "b", "c", "a"]



def test_python_tokens_strings_are_single_tokens():
    f = one(
        '''\
        def f(a):
            s = rb'\\x00' + f"{a!r} and {a}" + """multi
        line"""
            return s
        ''',
        "python",
    )
    assert tokens(f) == [
        "def", "f", "(", "a", ")", ":", INDENT,
        "s", "=", "rb'\\x00'", "+", 'f"{a!r} and {a}"', "+", '"""multi\nline"""',
        "return", "s",
    ]
    assert abstract_tokens(f) == [
        "def", "ID", "(", "ID", ")", ":", INDENT, "ID", "=", "LIT", "+", "LIT", "+", "LIT", "return", "ID",
    ]


def test_python_indentation_structure_is_kept_but_layout_is_not():
    a = one("def f(x):\n    if x:\n        g()\n    h()\n", "python")
    b = one("def f(x):\n    if x:\n        g()\n        h()\n", "python")
    assert tokens(a) != tokens(b)  # h() moved into the if-block: different program
    assert tokens(a).count(INDENT) == 2 and tokens(a).count(DEDENT) == 1
    # bracket continuation lines, blank lines, comments and deeper indentation do not matter
    c = one(
        "class K:\n  def f(x):\n\n\n      if x:  # c\n          g(\n    )\n      h()\n",
        "python",
    )
    assert tokens(c) == tokens(a)


def test_c_family_tokens():
    f = one(
        """\
        int f(std::vector<std::vector<int>> v) {
            auto r = R"x(a "quoted" )x";
            char c = '\\'';
            long n = 1'000'000ULL;
            return v.size() >> 1 != 0x1Fu ? n : -1.5e-3f;
        }
        """,
        "cpp",
    )
    t = tokens(f)
    assert 'R"x(a "quoted" )x"' in t and "'\\''" in t and "1'000'000ULL" in t
    assert "0x1Fu" in t and "1.5e-3f" in t and "!=" in t
    assert t.count(">") == 4  # '>>' is split (generics and shifts alike)
    a = abstract_tokens(f)
    assert a[:4] == ["int", "ID", "(", "ID"]
    assert a.count("LIT") == 6 and "auto" in a and "char" in a and "long" in a and "return" in a


def test_java_text_block_and_keywords():
    f = one('class A {\n  String f(int n) {\n    var s = """\n      hi\n      """;\n    return null;\n  }\n}\n', "java")
    a = abstract_tokens(f)
    assert a == ["ID", "ID", "(", "int", "ID", ")", "{", "ID", "ID", "=", "LIT", ";", "return", "null", ";", "}"]


def test_tokens_are_fresh_lists():
    f = one("int f() { return 1; }", "c")
    tokens(f).append("junk")
    assert tokens(f)[-1] == "}"


def test_strip_comments_without_precomputed_code():
    f = one("int f() {\n  // note\n  return 1; /* x */\n}\n", "c")
    bare = Fragment(f.path, f.start_line, f.end_line, f.name, f.language, f.text)
    assert bare.code == ""
    assert strip_comments(bare) == f.code
    assert tokens(bare) == tokens(f)


# ------------------------------------------------------------------------------------ T1 / T2

JAVA_ORIG = """\
class A {
    /** Sum of squares. */
    static long sumSquares(int[] values) {
        long total = 0;
        for (int v : values) {
            total += (long) v * v;   // widen first
        }
        return total;
    }
}
"""
JAVA_REFORMATTED = """\
class A
{
    static long sumSquares(int[] values)
    {
        /* accumulate */ long total = 0;
        for (int v : values) { total += (long) v * v; }
        return total;
    }
}
"""
JAVA_RENAMED = """\
class B {
    static long squareSum(int[] xs) {
        long acc = 10;
        for (int x : xs) {
            acc += (long) x * x;
        }
        return acc;
    }
}
"""
JAVA_RETYPED = JAVA_RENAMED.replace("long acc", "int acc")  # keyword change: not T2
JAVA_EDITED = """\
class B {
    static long squareSum(int[] xs) {
        long acc = 0;
        for (int x : xs) {
            if (x < 0) continue;
            acc += (long) x * x;
        }
        return acc;
    }
}
"""


def test_t1_keys_equal_after_reformatting_and_comment_changes():
    a, b = one(JAVA_ORIG, "java"), one(JAVA_REFORMATTED, "java")
    assert a.text != b.text
    assert t1_key(a) == t1_key(b) and t2_key(a) == t2_key(b)


def test_t2_keys_equal_after_renaming_and_literal_changes_only():
    a, r = one(JAVA_ORIG, "java"), one(JAVA_RENAMED, "java")
    assert t1_key(a) != t1_key(r)
    assert t2_key(a) == t2_key(r)
    assert t2_key(a) != t2_key(one(JAVA_RETYPED, "java"))
    assert t2_key(a) != t2_key(one(JAVA_EDITED, "java"))


def test_python_renamed_function_is_t2():
    a = one("def area(w, h):\n    return w * h * 0.5\n", "python")
    b = one("def tri(base, height):\n    return base * height * 2\n", "python")
    c = one("def tri(base, height):\n    return base + height * 2\n", "python")
    assert t1_key(a) != t1_key(b) and t2_key(a) == t2_key(b)
    assert t2_key(a) != t2_key(c)
    assert len(t1_key(a)) == 32 and int(t1_key(a), 16) >= 0


def test_assertion_names_are_not_abstracted():
    t = one("def test_a(self):\n    x = make(1)\n    self.assertTrue(x.ok)\n", "python")
    f = one("def test_b(self):\n    y = make(2)\n    self.assertFalse(y.ok)\n", "python")
    r = one("def test_c(self):\n    z = build(3)\n    self.assertTrue(z.done)\n", "python")
    assert t2_key(t) != t2_key(f) and t2_key(t) == t2_key(r)
    assert "assertTrue" in abstract_tokens(t) and "make" not in abstract_tokens(t)
    j = one("void t() { assertEquals(1, f()); EXPECT_EQ(a, b); }", "java")
    assert {"assertEquals", "EXPECT_EQ"} <= set(abstract_tokens(j))


def test_bundled_example_manifest_pairs(examples_dir):
    fs, _ = mine([examples_dir])
    by = {(f.path, f.name): f for f in fs}

    def get(ref):
        path, name = ref.split(":", 1)
        return by[(path, name)]

    t1 = [
        ("python/search.py:binary_search", "python/legacy_search.py:binary_search"),
        ("java/MatrixOps.java:MatrixOps.transpose", "java/Geometry.java:Geometry.transpose"),
        ("c/strutil.c:str_trim", "c/config.c:str_trim"),
        ("cpp/matrix.cpp:split", "cpp/algorithms.cpp:split"),
    ]
    t2 = [
        ("python/search.py:binary_search", "python/legacy_search.py:find_position"),
        ("java/MatrixOps.java:MatrixOps.multiply", "java/Geometry.java:Geometry.product"),
        ("c/strutil.c:split_fields", "c/config.c:tokenize"),
        ("cpp/matrix.hpp:lower_bound_index", "cpp/algorithms.cpp:first_not_less"),
    ]
    t3 = [
        ("python/search.py:lower_bound", "python/legacy_search.py:bisect_left_checked"),
        ("java/MatrixOps.java:MatrixOps.multiply", "java/Geometry.java:Geometry.safeMultiply"),
        ("c/strutil.c:str_trim", "c/config.c:trim_copy"),
        ("cpp/matrix.cpp:Matrix::operator*", "cpp/algorithms.cpp:multiply"),
    ]
    for x, y in t1:
        a, b = get(x), get(y)
        assert a.text != b.text and t1_key(a) == t1_key(b), (x, y)
    for x, y in t2:
        a, b = get(x), get(y)
        assert t1_key(a) != t1_key(b) and t2_key(a) == t2_key(b), (x, y)
    for x, y in t3:
        a, b = get(x), get(y)
        assert t2_key(a) != t2_key(b), (x, y)
        assert 0.6 <= token_similarity(abstract_tokens(a), abstract_tokens(b)) < 1.0, (x, y)
    # a clear non-clone pair is far below the T3 pairs
    csv, parse_int = get("python/text.py:parse_csv_line"), get("python/search.py:binary_search")
    assert token_similarity(abstract_tokens(csv), abstract_tokens(parse_int)) < 0.5


# --------------------------------------------------------------------------------- similarity


def _lcs_dp(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_token_similarity_known_values():
    assert token_similarity(list("abcd"), list("abxd")) == pytest.approx(0.75)
    # LCS("ABCBDAB", "BDCABA") = 4 (the textbook example)
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    assert token_similarity(list("ABCBDAB"), list("BDCABA")) == pytest.approx(4 / 7)
    assert token_similarity(list("ABCBDAB"), list("BDCABA"), method="dice") == pytest.approx(8 / 13)
    # a fragment inside a longer one: min-ratio is the shared fraction of the longer
    assert token_similarity(["a", "b"], ["x", "a", "y", "b", "z"]) == pytest.approx(2 / 5)
    assert token_similarity([], []) == 1.0
    assert token_similarity(["a"], []) == 0.0
    assert token_similarity(["a", "b"], ["b", "a"]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        token_similarity(["a"], ["a"], method="cosine")


def test_lcs_matches_dynamic_programming_on_random_sequences():
    rng = random.Random(7)
    for _ in range(200):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 90))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 90))]
        assert lcs_length(a, b) == _lcs_dp(a, b)
        s = token_similarity(a, b)
        assert 0.0 <= s <= 1.0 and s == token_similarity(b, a)


def test_prime_tokens_seeds_cache_with_same_views():
    from twinspect.code import normalize

    src = "int twice(int a)\n{\n    return a * 2; /* double */\n}\n"
    (f,) = extract_fragments(src, "p.c", "c", min_lines=1)
    want_t1, want_t2 = tokens(f), abstract_tokens(f)
    normalize.prime_tokens(f, list(want_t1))
    try:
        assert (normalize.strip_comments(f), "c") in normalize._primed
        assert tokens(f) == want_t1 and abstract_tokens(f) == want_t2
        assert want_t2 == ["int", "ID", "(", "int", "ID", ")", "{", "return", "ID", "*", "LIT", ";", "}"]
    finally:
        normalize._primed.clear()


_TRICKY = {
    "python": (
        "def f(a,\n      b):  \n    x = [1,\n         2]\n\n    \n    y = a + \\\n        b\n"
        "    s = '''doc\n  more\n'''\n    if x:\n\tpass\n    return (x,\n            y)\n"
    ),
    "cpp": 'int g() {\n  auto s = R"x(line one\n  line "two")x";\n  return 1; }\n',
    "javascript": "function h() {\n  const t = `a\n  ${b}\n  c`;\n  return t;\n}\n",
    "java": 'int k() {\n  String t = """\n    text\n    """;\n  return 0;\n}\n',
}


@pytest.mark.parametrize("language", sorted(_TRICKY))
def test_lex_with_lines_equals_lex_and_normalized_lines_on_tricky_code(language):
    from twinspect.code.fragments import Fragment
    from twinspect.code.normalize import lex, lex_with_lines, normalized_lines

    code = _TRICKY[language]
    frag = Fragment("x", 1, code.count("\n") + 1, "f", language, code)
    t1, lines = lex_with_lines(code, language)
    assert t1 == lex(code, language)[0]
    assert lines == normalized_lines(frag)
    assert len(lines) >= 3


def test_lex_with_lines_equals_lex_and_normalized_lines_on_real_functions(email_frags):
    from twinspect.code import normalize
    from twinspect.code.normalize import lex, lex_with_lines, normalized_lines, strip_comments

    normalize._primed_lines.clear()  # normalized_lines must lex here, not read mining's results
    for frag in email_frags:
        code = strip_comments(frag)
        assert lex_with_lines(code, frag.language) == (lex(code, frag.language)[0], normalized_lines(frag))


def test_release_token_caches_drops_primed_lists_and_tokens_are_the_same_after():
    from twinspect.code import normalize

    src = "int twice(int a)\n{\n    return a * 2; /* double */\n}\n"
    (f,) = extract_fragments(src, "p.c", "c", min_lines=1)
    want_t1, want_t2 = tokens(f), abstract_tokens(f)
    normalize.prime_tokens(f, list(want_t1), ["int ID ( int ID )", "return ID * LIT ;"])
    try:
        assert normalize.release_token_caches() >= 1
        assert not normalize._primed and not normalize._primed_lines
        assert tokens(f) == want_t1 and abstract_tokens(f) == want_t2  # lexed again, same views
    finally:
        normalize._primed.clear()
        normalize._primed_lines.clear()
