"""Fragment extraction with tree-sitter for Python, Java, C and C++."""

from __future__ import annotations

import textwrap

import pytest

from twinspect.code.files import ScanStats
from twinspect.code.fragments import Fragment, extract_fragments, fragment_at, mine
from twinspect.errors import InputError


def frags(src: str, language: str, rel: str = "f", min_lines: int = 1, stats=None):
    return extract_fragments(textwrap.dedent(src), rel, language, min_lines=min_lines, stats=stats)


def spans(fs):
    return [(f.name, f.start_line, f.end_line) for f in fs]


def test_python_functions_methods_nested_and_lambdas():
    src = '''\
    import functools

    class Stack:
        """A LIFO stack."""

        def __init__(self):
            self.items = []

        @functools.lru_cache
        def peek(self):
            return self.items[-1]

        class Node:
            async def visit(self, fn):
                return fn(self)


    def outer(values):
        key = lambda v: -v
        def inner(v):
            return key(v)
        return sorted(values, key=inner)
    '''
    fs = frags(src, "python")
    assert spans(fs) == [
        ("Stack.__init__", 6, 7),
        ("Stack.peek", 10, 11),  # starts at `def`, not at the decorator
        ("Stack.Node.visit", 14, 15),
        ("outer", 18, 22),
        ("outer.inner", 20, 21),
    ]
    assert all(f.language == "python" and f.path == "f" for f in fs)
    # text keeps the indentation of nested definitions and covers exactly the span
    peek = fs[1]
    assert peek.text.splitlines() == ["    def peek(self):", "        return self.items[-1]"]
    assert peek.loc == 2 and peek.key == "f:10-11"


def test_java_methods_constructors_nested_and_anonymous_classes():
    src = """\
    package p;

    public class Shop {
        private final int n;

        public Shop(int n) {
            this.n = n;
        }

        @Override
        public String toString() {
            return "Shop" + n;
        }

        static class Cart {
            int total(int[] xs) {
                java.util.function.IntBinaryOperator add = (a, b) -> a + b;
                int s = 0;
                for (int x : xs) s = add.applyAsInt(s, x);
                return s;
            }
        }

        Runnable task() {
            return new Runnable() {
                public void run() {
                    System.out.println("run");
                }
            };
        }

        record Point(int x, int y) {
            Point {
                if (x < 0) throw new IllegalArgumentException();
            }
        }
    }
    """
    fs = frags(src, "java")
    assert spans(fs) == [
        ("Shop.Shop", 6, 8),
        ("Shop.toString", 10, 13),  # annotations are part of a Java method declaration
        ("Shop.Cart.total", 16, 21),
        ("Shop.task", 24, 30),
        ("Shop.task.run", 26, 28),
        ("Shop.Point.Point", 33, 35),  # compact constructor
    ]


def test_c_functions_with_pointer_and_static_declarators():
    src = """\
    #include <stdlib.h>

    static char *dup_string(const char *s)
    {
        size_t n = strlen(s) + 1;
        char *d = malloc(n);
        return d ? memcpy(d, s, n) : NULL;
    }

    int (*pick(int which))(int)
    {
        return which ? abs : NULL;
    }

    int main(int argc, char **argv) { return 0; }
    """
    assert spans(frags(src, "c")) == [("dup_string", 3, 8), ("pick", 10, 13), ("main", 15, 15)]


def test_cpp_methods_out_of_line_templates_operators_no_lambdas():
    src = """\
    namespace geo {
    class Vec {
    public:
        Vec(double x) : x_(x) {}
        double norm() const {
            return x_ < 0 ? -x_ : x_;
        }
        bool operator==(const Vec &o) const { return x_ == o.x_; }
        ~Vec() {}
        struct Hash { unsigned operator()(const Vec &v) const { return 0; } };
    private:
        double x_;
    };

    Vec Vec::scaled(double k) const {
        auto f = [k](double v) { return v * k; };
        return Vec(f(x_));
    }
    }

    template <typename T>
    T clamp(T v, T lo, T hi) {
        return v < lo ? lo : (v > hi ? hi : v);
    }

    Vec &Vec::operator=(const Vec &o) { x_ = o.x_; return *this; }
    Vec::operator double() const { return x_; }
    """
    assert spans(frags(src, "cpp")) == [
        ("Vec::Vec", 4, 4),
        ("Vec::norm", 5, 7),
        ("Vec::operator==", 8, 8),
        ("Vec::~Vec", 9, 9),
        ("Vec::Hash::operator()", 10, 10),
        ("Vec::scaled", 15, 18),  # out-of-line: name as written; the lambda is not a fragment
        ("clamp", 22, 24),  # the template header line is not part of the span
        ("Vec::operator=", 26, 26),
        ("Vec::operator double", 27, 27),
    ]


@pytest.mark.parametrize(
    "language, src, comment_words",
    [
        ("python", 'def f(x):\n    # add one\n    y = x + 1  # inline\n    return "# not a comment"\n', ["add one", "inline"]),
        ("java", "class A {\n  int f(int x) {\n    // one\n    /* two\n       lines */ return x; /** doc */\n  }\n}\n", ["one", "two", "lines", "doc"]),
        ("c", "int f(int x)\n{\n    /* multi\n     * line */\n    return x; // é unicode\n}\n", ["multi", "line", "unicode"]),
        ("cpp", 'int f() {\n  // c\n  const char *s = "// kept";\n  return 0; /* z */\n}\n', ["c\n", "z"]),
    ],
)
def test_code_blanks_comments_and_keeps_lines(language, src, comment_words):
    (f,) = frags(src, language)
    assert len(f.code) == len(f.text) or language == "c"  # multibyte chars in comments shrink to spaces
    assert f.code.count("\n") == f.text.count("\n")
    for word in comment_words:
        assert word in f.text
        assert word not in f.code
    # string literals that look like comments are kept
    if language == "python":
        assert '"# not a comment"' in f.code
    if language == "cpp":
        assert '"// kept"' in f.code
    # every non-comment line is unchanged
    for t_line, c_line in zip(f.text.splitlines(), f.code.splitlines()):
        if not any(w.strip() in t_line for w in comment_words) and "/*" not in t_line and "*/" not in t_line:
            assert t_line == c_line


def test_python_docstring_is_kept_in_code():
    (f,) = frags('def f():\n    """Doc."""\n    return 1\n', "python")
    assert '"""Doc."""' in f.code


def test_min_lines_counts_code_lines_only():
    src = ("def a():\n    return 1\n\n\ndef b():\n\n    # c\n\n    return 2\n\n\n"
           "def c(x):\n    \"\"\"A long\n    docstring\n    of\n    five lines.\n    \"\"\"\n    y = x\n    return y\n")
    stats = ScanStats()
    # b spans 5 lines but holds 2 code lines; c spans 8 lines, 3 of them code (docstring left out)
    assert spans(frags(src, "python", min_lines=2, stats=stats)) == [("a", 1, 2), ("b", 5, 9), ("c", 12, 19)]
    stats = ScanStats()
    assert spans(frags(src, "python", min_lines=3, stats=stats)) == [("c", 12, 19)]
    assert stats.fragments == 1 and stats.fragments_too_short == 2 and stats.files_parsed == 1
    assert spans(frags(src, "python", min_lines=4)) == []
    # C: a comment block and blank lines do not count
    c_src = "int f(int a)\n{\n  /* one\n     two */\n\n  return a;\n}\n"
    assert len(extract_fragments(c_src, "x.c", "c", min_lines=4)) == 1  # f(...), {, return, }
    assert extract_fragments(c_src, "x.c", "c", min_lines=5) == []


def test_error_regions_drop_only_affected_functions():
    src = """\
    def good_one(values):
        total = 0
        for v in values:
            total += v
        return total

    def broken(values):
        return sum(values))

    def good_two(values):
        return max(values)
    """
    stats = ScanStats()
    fs = extract_fragments(textwrap.dedent(src), "f", "python", min_lines=1, stats=stats, errors="strict")
    assert [f.name for f in fs] == ["good_one", "good_two"]
    assert stats.files_with_parse_errors == 1
    assert stats.fragments_skipped_errors == 1
    # lenient (default): the local error does not make the function's lines doubtful
    stats = ScanStats()
    assert spans(frags(src, "python", stats=stats)) == [("good_one", 1, 5), ("broken", 7, 8), ("good_two", 10, 11)]
    assert stats.files_with_parse_errors == 1 and stats.fragments_skipped_errors == 0
    java = "class A {\n  void ok() {\n    int x = 1;\n  }\n  void bad() {\n    int y = ;\n  }\n}\n"
    stats = ScanStats()
    fs = extract_fragments(java, "A.java", "java", min_lines=1, stats=stats, errors="strict")
    assert [f.name for f in fs] == ["A.ok"]
    assert stats.fragments_skipped_errors == 1


def test_garbage_file_is_counted_not_fatal():
    stats = ScanStats()
    assert frags("}}}} ((( not code at all", "c", stats=stats) == []
    assert stats.files_parsed == 1 and stats.files_with_parse_errors == 1


def test_fragment_at_innermost_and_errors():
    src = "def outer():\n    x = 1\n    def inner():\n        return 2\n    return inner\n"
    fs = frags(src, "python", rel="pkg/m.py")
    assert fragment_at(fs, "pkg/m.py", 4).name == "outer.inner"
    assert fragment_at(fs, "pkg/m.py", 2).name == "outer"
    assert fragment_at(fs, "pkg/m.py", None).name == "outer"
    assert fragment_at(fs, "./pkg/m.py", 5).name == "outer"
    assert fragment_at(fs, "m.py", 4).name == "outer.inner"  # unique suffix
    with pytest.raises(InputError, match="no fragment contains line 9"):
        fragment_at(fs, "pkg/m.py", 9)
    with pytest.raises(InputError, match="no fragment in this file"):
        fragment_at(fs, "other.py", 1)


def test_fragment_dict_roundtrip():
    (f,) = frags("def f():\n    # c\n    return 1\n", "python")
    assert Fragment.from_dict(f.to_dict()) == f
    light = f.to_dict(with_text=False)
    assert "text" not in light and Fragment.from_dict(light).key == f.key


def test_mine_bundled_example(examples_dir):
    fs, stats = mine([examples_dir])
    names = {(f.path, f.name) for f in fs}
    # functions the manifest describes
    for expected in [
        ("python/search.py", "binary_search"),
        ("python/legacy_search.py", "find_position"),
        ("python/stats.py", "median"),
        ("java/Geometry.java", "Geometry.safeMultiply"),
        ("c/config.c", "tokenize"),
        ("cpp/matrix.cpp", "Matrix::operator*"),
        ("cpp/matrix.hpp", "lower_bound_index"),
    ]:
        assert expected in names
    # the half-edited function and the tiny helpers are not mined
    assert ("python/stats.py", "variance") not in names
    assert ("python/search.py", "clamp") not in names
    assert ("c/strutil.c", "is_blank") not in names
    assert stats.files_with_parse_errors == 1 and stats.fragments_skipped_errors == 1
    assert stats.fragments == len(fs) and all(f.loc >= 6 for f in fs)
    assert fs == sorted(fs, key=lambda f: (f.path, f.start_line, -f.end_line))


def test_error_policy_lenient_keeps_local_errors_strict_drops_them():
    # An unexpanded macro used as a statement: tree-sitter reports an error inside the body, but
    # the function's boundaries are exact.
    src = """\
    int count_items(struct list *l)
    {
        int n = 0;
        struct node *it;
        LIST_FOREACH(it, l) n++
        return n;
    }

    int after(int b)
    {
        return b + 1;
    }
    """
    lenient, strict = ScanStats(), ScanStats()
    assert spans(frags(src, "c", stats=lenient)) == [("count_items", 1, 7), ("after", 9, 12)]
    assert lenient.files_with_parse_errors == 1 and lenient.fragments_skipped_errors == 0
    src = textwrap.dedent(src)
    assert spans(extract_fragments(src, "x.c", "c", min_lines=1, stats=strict, errors="strict")) == [("after", 9, 12)]
    assert strict.fragments_skipped_errors == 1
    # a missing closing brace makes the extent doubtful: dropped by both policies
    unclosed = "int f(int a) {\n  return a;\n\nint g(int b) {\n  return b;\n}\n"
    for policy in ("lenient", "strict"):
        stats = ScanStats()
        fs = extract_fragments(unclosed, "u.c", "c", min_lines=1, stats=stats, errors=policy)
        assert spans(fs) == [("g", 4, 6)] and stats.fragments_skipped_errors == 1
    with pytest.raises(InputError, match="parse-error policy"):
        extract_fragments(src, "x.c", "c", errors="ignore")


def test_lenient_keeps_brace_delimited_function_inside_file_wide_error_region():
    # A function header split over #ifdef/#else makes tree-sitter wrap the whole file in one ERROR
    # node; a later function whose body has a local error (an #ifdef cutting an if/else) is still
    # delimited by its own braces and must keep its exact lines (SSCD Company-C, proxymain.c:919).
    src = """\
    #ifdef _WIN32
    int WINAPI entry(void) {
    #else
    int main(int argc, char **argv) {
    #endif
        return run(argc);
    }

    void init_params(struct srv *srv, struct param *param)
    {
        memset(&param->a, 0, sizeof(param->a));
        param->count = srv->count;
    #ifndef NOIPV6
        if (srv->family == 6) param->b = srv->ext6;
        else
    #endif
            param->b = srv->ext;
    }
    """
    lenient, strict = ScanStats(), ScanStats()
    fs = frags(src, "c", stats=lenient)
    assert ("init_params", 9, 18) in spans(fs)
    assert fs[-1].text.rstrip().endswith("param->b = srv->ext;\n}")
    assert lenient.files_with_parse_errors == 1
    kept_strict = extract_fragments(textwrap.dedent(src), "x.c", "c", min_lines=1, stats=strict, errors="strict")
    assert "init_params" not in [f.name for f in kept_strict]


def test_mine_worker_processes_give_identical_result(tmp_path):
    import twinspect.code.fragments as fragments_mod
    from twinspect.code import normalize

    n_files = fragments_mod.PARALLEL_MIN_FILES + 6
    for i in range(n_files):
        body = "\n".join(f"    x = x * {j} + {i}" for j in range(i % 7 + 2))
        (tmp_path / f"m{i:03d}.py").write_text(f"def f{i}(x):\n{body}\n    return x\n\n\ndef tiny():\n    pass\n")
    (tmp_path / "broken.c").write_text("int f(int a) {\n  return a;\n")
    (tmp_path / "zz_blob.py").write_bytes(b"x = 1\x00\x01")  # skipped (and listed) in a worker
    (tmp_path / "m000_latin.py").write_bytes("# caf\xe9\n".encode("cp1252"))  # decoded as Windows-1252
    seq, seq_stats = mine([tmp_path], min_lines=3, workers=1)
    normalize._primed.clear()
    try:
        par, par_stats = mine([tmp_path], min_lines=3, workers=2)
        assert par == seq and par_stats == seq_stats
        assert len(par) == n_files and all(f.code for f in par)
        assert par_stats.fragments_too_short == n_files and par_stats.files_with_parse_errors == 1
        assert par_stats.skipped_files == [{"path": "zz_blob.py", "reason": "binary"}]
        assert par_stats.files_decoded_fallback == 1
        # the worker processes' token lists were handed over and equal a fresh lexing
        assert len(normalize._primed) == n_files
        assert [tokens_of(f) for f in par] == [normalize.lex(f.code, f.language)[0] for f in par]
    finally:
        normalize._primed.clear()
    with pytest.raises(InputError, match="workers"):
        mine([tmp_path], workers=0)


def tokens_of(f):
    from twinspect.code.normalize import tokens

    return tuple(tokens(f))


def test_cpp_header_is_parsed_as_cpp_and_macro_functions_are_named_by_their_arguments():
    header = textwrap.dedent("""\
        namespace geo {
        class Box {
         public:
          int area() const {
            int w = hi_x - lo_x;
            int h = hi_y - lo_y;
            return w * h;
          }
         private:
          int lo_x, lo_y, hi_x, hi_y;
        };
        }  // namespace geo
        """)
    names = [f.name for f in extract_fragments(header, "box.h", "c", min_lines=1)]
    assert names == ["geo::Box::area"] or names == ["Box::area"], names
    # a plain C header stays C
    c_header = "static int twice(int x)\n{\n    return 2 * x;\n}\n"
    (f,) = extract_fragments(c_header, "t.h", "c", min_lines=1)
    assert f.language == "c" and f.name == "twice"
    # functions written through a test macro are named with the macro's arguments
    tests = "TEST(Strtod, Empty) {\n  CHECK(1);\n}\n\nTEST(Strtod, Digits) {\n  CHECK(2);\n}\n"
    assert [f.name for f in extract_fragments(tests, "t.cc", "cpp", min_lines=1)] == \
        ["TEST(Strtod, Empty)", "TEST(Strtod, Digits)"]


def test_file_granularity_one_fragment_per_file(tmp_path, monkeypatch):
    import twinspect.code.fragments as fragments_mod

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        '"""Module doc.\n\nMore doc.\n"""\n# a comment\nimport os\n\nX = 1\n\n\ndef f():\n    return os.sep\n'
    )
    (tmp_path / "main.c").write_text("/* header */\nint main(void)\n{\n    return 0; // ok\n}")
    (tmp_path / "tiny.py").write_text('"""Only a docstring,\nover three\nlines."""\n# and a comment\n')
    (tmp_path / "broken.java").write_text("class A {\n  void f() {\n    int x = ;\n  }\n}\n")
    fs, stats = mine([tmp_path], min_lines=2, granularity="file", workers=1)
    assert [(f.path, f.name, f.start_line, f.end_line, f.language) for f in fs] == [
        ("broken.java", "broken.java", 1, 5, "java"),
        ("main.c", "main.c", 1, 5, "c"),  # no final newline: the last line still counts
        ("pkg/mod.py", "mod.py", 1, 12, "python"),
    ]
    c_file = fs[1]
    assert c_file.text == (tmp_path / "main.c").read_text()
    assert "header" not in c_file.code and "// ok" not in c_file.code and len(c_file.code) == len(c_file.text)
    assert c_file.code.splitlines()[3] == "    return 0;      "
    assert stats.fragments == 3 and stats.fragments_too_short == 1 and stats.files_with_parse_errors == 1
    # the strict error policy drops the file with a parse error
    strict, sstats = mine([tmp_path], min_lines=2, granularity="file", workers=1, errors="strict")
    assert [f.path for f in strict] == ["main.c", "pkg/mod.py"] and sstats.fragments_skipped_errors == 1
    # code lines: the module docstring and comments do not count (mod.py 4, main.c 4, broken.java 5)
    assert [f.path for f in mine([tmp_path], min_lines=4, granularity="file", workers=1)[0]] == \
        ["broken.java", "main.c", "pkg/mod.py"]
    assert [f.path for f in mine([tmp_path], min_lines=5, granularity="file", workers=1)[0]] == ["broken.java"]
    # extract_fragments gives the same fragment; worker processes the same result
    text = (tmp_path / "pkg" / "mod.py").read_text()
    assert extract_fragments(text, "pkg/mod.py", "python", min_lines=2, granularity="file") == [fs[2]]
    monkeypatch.setattr(fragments_mod, "PARALLEL_MIN_FILES", 2)
    par, pstats = mine([tmp_path], min_lines=2, granularity="file", workers=2)
    assert par == fs and pstats == stats


def test_callbacks_and_anonymous_functions_are_named_after_their_call_or_variable():
    js = (
        "describe('res.render', function () {\n"
        "  it('should expose app.locals', function (done) {\n"
        "    request(app).get('/').expect('<p>tobi</p>', done);\n"
        "  })\n"
        "})\n"
        "res.json = function (obj) {\n  return obj;\n};\n"
        "const handler = async (req) => {\n  return req;\n};\n"
    )
    frags = extract_fragments(js, "t.js", "javascript", min_lines=1)
    assert [(f.name, f.start_line, f.end_line) for f in frags] == [
        ("describe('res.render')", 1, 5),
        ("describe('res.render').it('should expose app.locals')", 2, 4),
        ("res.json", 6, 8),
        ("handler", 9, 11),
    ]
    go = 'package m\n\nfunc TestX(t *testing.T) {\n\tt.Run("empty", func(t *testing.T) {\n\t\tx := 1\n\t\t_ = x\n\t})\n}\n'
    assert [f.name for f in extract_fragments(go, "x_test.go", "go", min_lines=1)] == ["TestX", 'TestX.t.Run("empty")']
