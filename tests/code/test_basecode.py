"""Base code (passages pasted into many fragments): found, blanked, and kept from linking unrelated code."""

from __future__ import annotations

import pytest

from twinspect.code.basecode import base_lines, base_passages, holds_base_lines, without_base_lines
from twinspect.code.clones import DetectConfig, detect
from twinspect.code.fragments import extract_fragments

# the statements SSCD's Company-C set injects into every private function
INJECTED = """    int add_var_1;
    char add_var_2;
    char add_var_3[10]="hello";
    add_var_1 = 0;
    add_var_2 = 'a';
    add_var_3[0] = 'H';
    add_var_3[1] = 'E';
    add_var_3[2] = 'L';
"""

BODIES = {
    "sum_array": "int sum_array(const int *a, int n) {\n    int s = 0;\n    for (int i = 0; i < n; i++) s += a[i];\n    return s;\n}\n",
    "max_of": "int max_of(const int *a, int n) {\n    int m = a[0];\n    for (int i = 1; i < n; i++)\n        if (a[i] > m) m = a[i];\n    return m;\n}\n",
    "reverse": "void reverse(char *s) {\n    size_t n = strlen(s);\n    for (size_t i = 0; i < n / 2; i++) {\n        char t = s[i];\n        s[i] = s[n - 1 - i];\n        s[n - 1 - i] = t;\n    }\n}\n",
    "count_char": "int count_char(const char *s, char c) {\n    int k = 0;\n    while (*s) {\n        if (*s++ == c) k++;\n    }\n    return k;\n}\n",
    "factorial": "long factorial(int n) {\n    long r = 1;\n    while (n > 1) r *= n--;\n    return r;\n}\n",
    "gcd": "int gcd(int a, int b) {\n    while (b != 0) {\n        int t = a % b;\n        a = b;\n        b = t;\n    }\n    return a;\n}\n",
    "is_prime": "int is_prime(int n) {\n    if (n < 2) return 0;\n    for (int d = 2; d * d <= n; d++)\n        if (n % d == 0) return 0;\n    return 1;\n}\n",
    "open_log": "FILE *open_log(const char *dir, const char *name) {\n    char path[512];\n    snprintf(path, sizeof path, \"%s/%s.log\", dir, name);\n    FILE *fp = fopen(path, \"a\");\n    if (!fp) perror(path);\n    return fp;\n}\n",
    "find": "int find(const int *a, int n, int key) {\n    int lo = 0, hi = n - 1;\n    while (lo <= hi) {\n        int mid = (lo + hi) / 2;\n        if (a[mid] == key) return mid;\n        if (a[mid] < key) lo = mid + 1; else hi = mid - 1;\n    }\n    return -1;\n}\n",
    "fib": "long fib(int n) {\n    long a = 0, b = 1;\n    for (int i = 0; i < n; i++) {\n        long t = a + b;\n        a = b;\n        b = t;\n    }\n    return a;\n}\n",
    "ipow": "long ipow(long base, unsigned e) {\n    long r = 1;\n    while (e) {\n        if (e & 1) r *= base;\n        base *= base;\n        e >>= 1;\n    }\n    return r;\n}\n",
    "trim": "char *trim(char *s) {\n    while (isspace((unsigned char)*s)) s++;\n    char *end = s + strlen(s);\n    while (end > s && isspace((unsigned char)end[-1])) end--;\n    *end = '\\0';\n    return s;\n}\n",
}


def inject(src: str) -> str:
    """Paste INJECTED right after the function's opening line, as Company-C does."""
    head, rest = src.split("\n", 1)
    return head + "\n" + INJECTED + rest


def fragments(sources: dict[str, str]):
    out = []
    for name, src in sources.items():
        out += extract_fragments(src, f"{name}.c", "c", min_lines=1)
    return out


def test_base_passages_are_the_pasted_statements_not_frequent_idioms():
    frags = fragments({name: inject(src) for name, src in BODIES.items()})
    passages = base_passages(frags)
    assert passages, "the passage pasted into all 12 functions is base code"
    lines = base_lines(frags)
    assert "char add_var_2;" in lines and "add_var_3[2] = 'L';" in lines
    # lines of the functions' own code are not base code, even frequent one-liners
    assert not any(line.startswith("return") or "for (" in line for line in lines)
    # in fewer than MIN_FRAGMENTS (10) fragments a passage is not base code
    assert base_passages(frags[:9]) == []
    # nor when it is below the share asked for
    plain = fragments({"gcd": BODIES["gcd"]})
    assert base_passages(frags, fraction=1.0) != [] and base_passages(frags + plain, fraction=1.0) == []


def test_without_base_lines_blanks_lines_and_keeps_line_numbers():
    frags = fragments({name: inject(src) for name, src in BODIES.items()})
    base = base_lines(frags)
    f = frags[0]
    g = without_base_lines(f, base)
    assert g is not f and holds_base_lines(f, base) and not holds_base_lines(g, base)
    assert g.code.count("\n") == f.code.count("\n") and (g.start_line, g.end_line) == (f.start_line, f.end_line)
    assert "add_var_3" not in g.code and "add_var_2 =" not in g.code and "for (int i = 0; i < n; i++)" in g.code
    plain = fragments({"gcd": BODIES["gcd"]})[0]
    assert without_base_lines(plain, base) is plain


def test_base_passages_check_arguments():
    with pytest.raises(ValueError, match="fraction"):
        base_passages([], fraction=1.5)
    with pytest.raises(ValueError, match="min_fragments"):
        base_passages([], min_fragments=0)


def _pairs(frags, base_code):
    rep = detect(frags, DetectConfig(base_code=base_code), quiet=True)
    return {frozenset((rep.fragments[p.a].name, rep.fragments[p.b].name)) for p in rep.pairs}, rep.stats


def test_detect_does_not_link_unrelated_functions_through_base_code():
    sources = {name: inject(src) for name, src in BODIES.items()}
    # a real clone that also carries the pasted block: gcd edited (renamed, a guard added)
    sources["gcd_copy"] = inject(BODIES["gcd"].replace("gcd(", "gcd_copy(").replace("int t", "int tmp")
                                 .replace("= t;", "= tmp;").replace("a % b", "a % b /* mod */")
                                 .replace("    return a;", "    if (a < 0) a = -a;\n    return a;"))
    frags = fragments(sources)
    without_rule, _ = _pairs(frags, None)
    unrelated = {p for p in without_rule if p != frozenset(("gcd", "gcd_copy"))}
    assert unrelated, "without the rule the pasted block links unrelated functions (the failure fixed here)"
    with_rule, stats = _pairs(frags, DetectConfig().base_code)
    assert frozenset(("gcd", "gcd_copy")) in with_rule
    # what stays linked is what the functions' own code shares (a swap loop in gcd and fib, ...)
    left = with_rule - {frozenset(("gcd", "gcd_copy"))}
    assert left < unrelated and len(left) <= len(unrelated) // 3, (len(left), len(unrelated))
    assert stats["base_code_rejected"] >= len(unrelated) - len(left)
