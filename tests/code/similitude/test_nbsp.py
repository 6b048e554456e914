"""No-break spaces (U+00A0) where indentation should be: parsed as spaces, same CFG as the plain twin.

Code copied from competitive-programming web pages (the seed's SimCorp corpus: 335 of its 581 Codeforces C++ files)
has U+00A0 in its indentation and on its "blank" lines; tree-sitter rejects the character, so those
programs used to be skipped as syntax errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from twinspect.code.languages import get_parser
from twinspect.code.similitude.analysis import analyze
from twinspect.code.similitude.cfg import load_program, program_graph

NBSP = "\u00a0"

# A small complete program per language (count the odd numbers among n read values, print the largest
# odd one); the string literal holds a no-break space of its own, which must not matter either.
PROGRAMS = {
    "cpp": """#include <bits/stdc++.h>
using namespace std;

int main() {
    int n, best = -1, odd = 0;
    cin >> n;
    for (int i = 0; i < n; i++) {
        int x;
        cin >> x;
        if (x % 2 != 0) {
            odd++;
            best = max(best, x);
        }
    }
    cout << odd << "\u00a0" << best << endl;
    return 0;
}
""",
    "c": """#include <stdio.h>

int main(void) {
    int n, best = -1, odd = 0;
    scanf("%d", &n);
    for (int i = 0; i < n; i++) {
        int x;
        scanf("%d", &x);
        if (x % 2 != 0) {
            odd++;
            if (x > best) best = x;
        }
    }
    printf("%d\u00a0%d\\n", odd, best);
    return 0;
}
""",
    "java": """import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(), best = -1, odd = 0;
        for (int i = 0; i < n; i++) {
            int x = in.nextInt();
            if (x % 2 != 0) {
                odd++;
                best = Math.max(best, x);
            }
        }
        System.out.println(odd + "\u00a0" + best);
    }
}
""",
    "python": """def main():
    n = int(input())
    best, odd = -1, 0
    for _ in range(n):
        x = int(input())
        if x % 2 != 0:
            odd += 1
            best = max(best, x)
    print(odd, "\u00a0", best)


main()
""",
}
EXT = {"cpp": ".cpp", "c": ".c", "java": ".java", "python": ".py"}


def with_nbsp(src: str) -> str:
    """The web-page copy of ``src``: every indenting space a U+00A0, blank lines a lone U+00A0."""
    out = []
    for line in src.split("\n"):
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        out.append(NBSP * indent + body if body else NBSP)
    return "\n".join(out)


def signature(src: str | bytes, lang: str) -> tuple:
    g = program_graph(src, lang)
    return (g.labels, g.edges, g.call_edges, g.tokens, [(f.name, f.labels, f.edges) for f in g.functions])


@pytest.mark.parametrize("lang", sorted(PROGRAMS))
def test_nbsp_indentation_parses_to_the_plain_twin(lang: str) -> None:
    plain = PROGRAMS[lang]
    nbsp = with_nbsp(plain)
    assert nbsp.count(NBSP) > 20 and nbsp != plain
    # tree-sitter itself rejects the no-break spaces: without the replacement this program was skipped
    assert get_parser(lang).parse(nbsp.encode("utf-8")).root_node.has_error
    assert not get_parser(lang).parse(plain.encode("utf-8")).root_node.has_error
    assert signature(nbsp, lang) == signature(plain, lang)
    assert signature(nbsp.encode("utf-8"), lang) == signature(plain, lang)
    assert program_graph(plain, lang).n_nodes >= 5


def test_nbsp_files_are_scored_not_skipped(tmp_path: Path) -> None:
    for lang, src in PROGRAMS.items():
        (tmp_path / f"plain{EXT[lang]}").write_text(src, encoding="utf-8")
        (tmp_path / f"web{EXT[lang]}").write_text(with_nbsp(src), encoding="utf-8")
    web = load_program(tmp_path / "web.cpp")
    assert web.labels == load_program(tmp_path / "plain.cpp").labels
    r = analyze([tmp_path], measure="wl-tokens")
    assert r.skipped == []
    names = [Path(p).name for p in r.paths]
    assert len(names) == 8
    for lang in PROGRAMS:
        i, j = names.index(f"plain{EXT[lang]}"), names.index(f"web{EXT[lang]}")
        assert r.matrix[i, j] == pytest.approx(1.0)
