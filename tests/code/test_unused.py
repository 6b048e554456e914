"""Unused functions of whole programs (twinspect.code.unused) and their removal at file granularity."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_run import run
from twinspect.code.clones import DetectConfig, scan
from twinspect.code.fragments import Fragment
from twinspect.code.languages import get_parser
from twinspect.code.unused import unused_functions, without_unused

JAVA = """\
import java.util.*;

public class Main {
    static int LIMIT = limit();

    static int limit() { return 10; }

    public static void main(String[] args) {
        FastReader in = new FastReader();
        int n = in.nextInt();
        System.out.println(solve(n));
    }

    static int solve(int n) {
        return gcd(n, 12);
    }

    static int gcd(int a, int b) {
        return b == 0 ? a : gcd(b, a % b);
    }

    static long unusedHelper(long x) {
        return x * x;
    }

    static class FastReader {
        Scanner sc;
        FastReader() { sc = new Scanner(System.in); }
        int nextInt() { return sc.nextInt(); }
        long nextLong() { return sc.nextLong(); }
    }

    static class Pair implements Comparable<Pair> {
        int a;
        public int compareTo(Pair o) { return a - o.a; }
        @Override
        public String describe() { return "" + a; }
    }
}
"""

CPP = """\
#include <bits/stdc++.h>
using namespace std;

struct P {
    int x;
    P(int x) : x(x) {}
    bool operator<(const P& o) const { return x < o.x; }
    ~P() {}
};

template <class T> T sq(T v) { return v * v; }
int twice(int v) { return 2 * v; }
long long modpow(long long b, long long e, long long m) { return e == 0 ? 1 : b * modpow(b, e - 1, m) % m; }
int helper_a(int v) { return v + 1; } int helper_b(int v) { return v - 1; }

int main() {
    P p(3);
    auto f = [](int v) { return twice(v); };
    cout << f(p.x) << helper_a(1) << endl;
}
"""

C = """\
#include <stdio.h>

static int add(int a, int b) { return a + b; }
static int sub(int a, int b) { return a - b; }
static int mul(int a, int b) { return a * b; }
static int (*ops[])(int, int) = { add, sub };

int main(void) {
    printf("%d\\n", ops[0](1, 2));
    return 0;
}
"""


def test_java_unused_methods_by_reachability_from_main():
    u = unused_functions(JAVA, "java")
    assert u is not None
    # limit() is called from a field initialiser, FastReader's constructor through `new FastReader`,
    # gcd through solve, compareTo implicitly (Comparable), describe through @Override
    assert u.names == ("unusedHelper", "nextLong")
    lines = JAVA.split("\n")
    assert [lines[a - 1].strip() for a, _ in u.spans] == ["static long unusedHelper(long x) {",
                                                          "long nextLong() { return sc.nextLong(); }"]
    assert u.spans[0][1] - u.spans[0][0] == 2 and u.lines == 4


def test_blanking_keeps_lines_and_the_used_code_and_still_parses():
    frag = Fragment("Main.java", 1, JAVA.count("\n"), "Main.java", "java", JAVA, JAVA, kind="file")
    pruned, u = without_unused(frag)
    assert u is not None and pruned is not frag and pruned.text == JAVA
    assert pruned.code.count("\n") == JAVA.count("\n") and len(pruned.code) == len(JAVA)
    assert "unusedHelper" not in pruned.code and "nextLong" not in pruned.code
    for kept in ("static int solve(int n) {", "return b == 0 ? a : gcd(b, a % b);", "int nextInt() { return sc.nextInt(); }"):
        assert kept in pruned.code
    assert not get_parser("java").parse(pruned.code.encode()).root_node.has_error
    # pruning is idempotent: nothing is unused any more
    again = unused_functions(pruned.code, "java")
    assert again is not None and again.names == ()


def test_cpp_keeps_operators_constructors_destructors_and_lambda_callees():
    u = unused_functions(CPP, "cpp")
    assert u is not None
    assert set(u.names) == {"sq", "modpow", "helper_b"}
    # two functions on one line: only the unused one's characters are blanked
    pruned, _ = without_unused(Fragment("a.cpp", 1, 20, "a.cpp", "cpp", CPP, CPP, kind="file"))
    line = next(ln for ln in pruned.code.split("\n") if "helper_a" in ln)
    assert line.startswith("int helper_a(int v) { return v + 1; }") and "helper_b" not in line
    assert "operator<" in pruned.code and "~P()" in pruned.code and "twice" in pruned.code


def test_c_function_pointers_in_globals_count_as_references():
    u = unused_functions(C, "c")
    assert u is not None and u.names == ("mul",)


def test_a_function_named_only_in_a_macro_body_is_used():
    code = "#define SHOW(x) show_value(#x, x)\nvoid show_value(const char* n, int v) {}\nvoid nothing() {}\n" \
           "int main() { SHOW(3); return 0; }\n"
    for language in ("c", "cpp"):
        u = unused_functions(code, language)
        assert u is not None and u.names == ("nothing",)


def test_programs_that_are_not_pruned():
    library = "public class Util {\n    static int f() { return 1; }\n    static int g() { return f(); }\n}\n"
    assert unused_functions(library, "java") is None  # no entry point: every function may be called
    assert unused_functions("def main():\n    pass\n\ndef f():\n    pass\n", "python") is None
    assert unused_functions("int main( { return 0; }\nint f() { return 1; }\n", "c") is None  # parse error
    frag = Fragment("Util.java", 1, 4, "Util.java", "java", library, library, kind="file")
    assert without_unused(frag) == (frag, None)


def _template_heavy(solution_body: str) -> str:
    helpers = "\n".join(
        f"    static long helper{i}(long a, long b) {{\n        long r = a;\n        for (long k = 0; k < b; k++) {{\n"
        f"            r = (r * {i + 3} + k) % 1000000007L;\n        }}\n        return r;\n    }}\n"
        for i in range(12))
    return f"import java.util.*;\n\npublic class Main {{\n{helpers}\n{solution_body}}}\n"


SOLUTION = """\
    public static void main(String[] args) {
        Scanner sc = new Scanner(System.in);
        int n = sc.nextInt();
        int[] a = new int[n];
        for (int i = 0; i < n; i++) {
            a[i] = sc.nextInt();
        }
        long best = 0, cur = 0;
        for (int i = 0; i < n; i++) {
            cur = Math.max(a[i], cur + a[i]);
            best = Math.max(best, cur);
        }
        System.out.println(best);
    }
"""


def test_file_granularity_links_a_copy_hidden_in_an_unused_template(tmp_path: Path):
    (tmp_path / "A.java").write_text(f"public class Main {{\n{SOLUTION}}}\n")
    (tmp_path / "B.java").write_text(_template_heavy(SOLUTION.replace("best", "answer").replace("cur", "run")))
    dropped = scan([tmp_path], DetectConfig(granularity="file"))
    kept = scan([tmp_path], DetectConfig(granularity="file", unused_code="keep"))
    assert len(dropped.pairs) == 1 and dropped.pairs[0].similarity > 0.9
    assert kept.pairs == []  # the 12 unused helpers outweigh the copied solution
    t = dropped.stats["tiling"]
    assert (t["unused_code"], t["programs_analysed"], t["unused_functions"]) == ("drop", 2, 12) and t["unused_lines"] == 84
    assert kept.stats["tiling"]["programs_analysed"] == 0 and kept.config["unused_code"] == "keep"
    # reported fragments are the files as they are (line numbers of the whole file)
    assert {f.end_line for f in dropped.fragments} == {f.end_line for f in kept.fragments}


def test_cli_unused_code_option(tmp_path: Path, capsys):
    (tmp_path / "A.java").write_text(f"public class Main {{\n{SOLUTION}}}\n")
    code, out, err = run(capsys, "clones", tmp_path, "--granularity", "file", "--unused-code", "maybe")
    assert code == 2 and "--unused-code" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, err = run(capsys, "clones", tmp_path, "--granularity", "file", "--unused-code", "keep", "-f", "json", "-q")
    assert code == 0 and json.loads(out)["stats"]["tiling"]["unused_code"] == "keep"
