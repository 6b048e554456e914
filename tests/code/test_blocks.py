"""Block granularity: copied runs of statements inside or outside functions (twinspect.code.blocks)."""

from __future__ import annotations

import textwrap

import pytest

from twinspect.code import blocks
from twinspect.code.blocks import block_fragments, find_blocks, match_runs, repeated_tokens
from twinspect.code.files import ScanStats
from twinspect.code.fragments import extract_file, extract_fragments, mine
from twinspect.code.normalize import lex, t1_key, t2_key
from twinspect.errors import InputError

# An 8-line run of statements (lines 8-15 of LOADER, 5-12 of STORE) copied with every name and
# literal changed, inside two functions that differ before and after it.
LOADER = '''\
import os


def load_config(path, verbose):
    """Read a config file."""
    if verbose:
        print("loading", path)
    result = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            result[key.strip()] = value.strip()
    total = len(result)
    return result, total
'''

STORE = '''\
class Store:
    def refresh(self, filename):
        self.items = []
        entries = {}  # name -> value
        with open(filename) as stream:
            for row in stream:
                row = row.strip()
                # skip blank lines and comments
                if not row or row.startswith(";"):
                    continue
                name, _, val = row.partition(":")
                entries[name.strip()] = val.strip()
        self.items.append(entries)
        return entries
'''


def spans(fs):
    return [(f.path, f.name, f.start_line, f.end_line) for f in fs]


def write(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path


def test_copied_run_inside_two_different_functions(tmp_path):
    write(tmp_path, {"loader.py": LOADER, "store.py": STORE})
    fs, stats = mine([tmp_path], min_lines=6, granularity="block", workers=1)
    assert spans(fs) == [
        ("loader.py", "load_config", 4, 17),
        ("loader.py", "load_config[lines 8-15]", 8, 15),
        ("store.py", "Store.refresh", 2, 14),
        ("store.py", "Store.refresh[lines 4-12]", 4, 12),
    ]
    a, b = fs[1], fs[3]
    assert t2_key(a) == t2_key(b) and t1_key(a) != t1_key(b)
    assert a.language == b.language == "python"
    assert a.text.splitlines()[0] == "    result = {}"
    assert a.text.splitlines()[-1] == "            result[key.strip()] = value.strip()"
    # comments are kept in text and blanked in code (lines kept)
    assert "# skip blank lines" in b.text and "#" not in b.code.replace('"#"', "")
    assert len(b.code.splitlines()) == b.loc
    assert stats.block_fragments == 2 and stats.fragments == 4 and stats.block_keys_capped == 0
    # the function fragments are exactly those of the function granularity
    funcs, fstats = mine([tmp_path], min_lines=6, workers=1)
    assert [f for f in fs if not f.name.endswith("]")] == funcs
    assert fstats.block_fragments == 0


def test_function_granularity_is_the_default_and_unchanged(tmp_path):
    write(tmp_path, {"loader.py": LOADER, "store.py": STORE})
    default, dstats = mine([tmp_path], min_lines=6, workers=1)
    explicit, estats = mine([tmp_path], min_lines=6, workers=1, granularity="function")
    assert default == explicit and dstats == estats
    assert spans(default) == [("loader.py", "load_config", 4, 17), ("store.py", "Store.refresh", 2, 14)]


def test_min_lines_bounds_the_run(tmp_path):
    write(tmp_path, {"loader.py": LOADER, "store.py": STORE})
    # the common run has 8 code lines (STORE's comment line is not one)
    assert len(find_blocks([("a.py", LOADER, "python"), ("b.py", STORE, "python")], min_lines=8)) == 2
    assert find_blocks([("a.py", LOADER, "python"), ("b.py", STORE, "python")], min_lines=9) == []


def test_module_level_duplicated_code():
    first = '''\
        import sys

        args = sys.argv[1:]
        if not args:
            print("usage: first FILE")
            sys.exit(2)
        with open(args[0]) as fh:
            data = fh.read().split()
        counts = {}
        for word in data:
            counts[word] = counts.get(word, 0) + 1
        print(len(counts))
        '''
    second = '''\
        import sys


        def helper():
            return 1


        params = sys.argv[2:]
        if not params:
            print("usage: second PATH")
            sys.exit(1)
        with open(params[0]) as stream:
            items = stream.read().split()
        seen = {}
        for item in items:
            seen[item] = seen.get(item, 0) + 1
        print(len(seen), helper())
        '''
    stats = ScanStats()
    fs = find_blocks(
        [("first.py", textwrap.dedent(first), "python"), ("second.py", textwrap.dedent(second), "python")],
        min_lines=6,
        stats=stats,
    )
    assert spans(fs) == [
        ("first.py", "<module>[lines 3-11]", 3, 11),
        ("second.py", "<module>[lines 8-16]", 8, 16),
    ]
    assert t2_key(fs[0]) == t2_key(fs[1])
    assert stats.block_fragments == 2


JAVA_A = """\
package shop;

import java.util.List;

public class Orders {
    private int seen;

    public int total(List<Integer> prices, int discount) {
        log("total");
        int sum = 0;
        for (int p : prices) {
            if (p > 100) {
                sum += p - discount;
            } else {
                sum += p;
            }
        }
        return sum;
    }
}
"""

JAVA_B = """\
package billing;

public class Invoice {
    public double compute(List<Integer> amounts, int rebate, boolean audit) {
        if (audit) {
            check(amounts);
        }
        int acc = 0;
        for (int a : amounts) {
            if (a > 250) {
                acc += a - rebate;
            } else {
                acc += a;
            }
        }
        this.last = acc;
        return acc * 1.2;
    }
}
"""


def test_java_copied_run():
    fs = find_blocks([("Orders.java", JAVA_A, "java"), ("Invoice.java", JAVA_B, "java")], min_lines=6)
    assert spans(fs) == [
        ("Orders.java", "Orders.total[lines 10-17]", 10, 17),
        ("Invoice.java", "Invoice.compute[lines 8-15]", 8, 15),
    ]
    assert fs[0].language == "java" and t2_key(fs[0]) == t2_key(fs[1])
    assert fs[0].text.startswith("        int sum = 0;\n")


C_A = """\
#include <stdio.h>

static int checksum(const unsigned char *buf, int len, int seed)
{
    int i;
    printf("checksum\\n");
    unsigned int h = 5381;
    for (i = 0; i < len; i++) {
        h = ((h << 5) + h) + buf[i];
        if (h > 1000000)
            h %= 65521;
    }
    return (int)(h ^ seed);
}

/* module-level table, too short to matter */
static int table[4] = {1, 2, 3, 4};
"""

C_B = """\
#include <string.h>
#define LIMIT 9

int digest(const char *text)
{
    int n = strlen(text);
    int k;
    unsigned int acc = 7;   /* not 5381 */
    for (k = 0; k < n; k++) {
        acc = ((acc << 3) + acc) + text[k];
        /* fold */
        if (acc > 99)
            acc %= 17;
    }
    fputs("done", stderr);
    return acc;
}
"""


def test_c_copied_run_with_comments_between_statements():
    fs = find_blocks([("a.c", C_A, "c"), ("b.c", C_B, "c")], min_lines=6)
    assert spans(fs) == [("a.c", "checksum[lines 7-12]", 7, 12), ("b.c", "digest[lines 8-14]", 8, 14)]
    assert t2_key(fs[0]) == t2_key(fs[1])
    assert "/* fold */" in fs[1].text and "fold" not in fs[1].code


def test_cpp_class_body_run_is_named_by_the_class():
    a = """\
        class Grid {
        public:
            int w, h;
            int area() const { return w * h; }
            bool empty() const { return w == 0 || h == 0; }
            void clear() { w = 0; h = 0; }
            int perimeter() const { return 2 * (w + h); }
        };
        """
    b = """\
        struct Box {
            int x, y;
            int area() const { return x * y; }
            bool empty() const { return x == 0 || y == 0; }
            void clear() { x = 0; y = 0; }
            int perimeter() const { return 2 * (x + y); }
            int z;
        };
        """
    fs = find_blocks([("grid.hpp", textwrap.dedent(a), "cpp"), ("box.hpp", textwrap.dedent(b), "cpp")], min_lines=4)
    assert spans(fs) == [("grid.hpp", "Grid[lines 3-7]", 3, 7), ("box.hpp", "Box[lines 2-6]", 2, 6)]


def test_copied_if_is_reported_once_not_again_as_its_body():
    common = """\
        if (n > 0) {
            int a = n * 2;
            int b = a + 1;
            total += a * b;
            count++;
            last = b;
        }
"""
    a = "void f(int n) {\n    start();\n" + textwrap.indent(textwrap.dedent(common), "    ") + "    stop(1);\n}\n"
    b = "void g(int n, int m) {\n    m++;\n    m--;\n" + textwrap.indent(textwrap.dedent(common), "    ") + "}\n"
    fs = find_blocks([("a.c", a, "c"), ("b.c", b, "c")], min_lines=5)
    assert spans(fs) == [("a.c", "f[lines 3-9]", 3, 9), ("b.c", "g[lines 4-10]", 4, 10)]


def test_t2_equal_functions_give_no_block_for_their_bodies():
    f = "def {name}(x, y):\n    s = x + y\n    d = x - y\n    p = x * y\n    q = s * d\n    r = p - q\n    return r\n"
    stats = ScanStats()
    fs = find_blocks(
        [("a.py", f.format(name="one"), "python"), ("b.py", f.format(name="two"), "python")], min_lines=4, stats=stats
    )
    assert fs == [] and stats.fragments == 2  # the two function fragments only


def test_runs_of_methods_are_blocks_but_a_single_method_is_not():
    methods = '''\
        class {name}:
            {extra}
            def size(self):
                total = 0
                for part in self.parts:
                    total += part.size()
                return total

            def names(self):
                return [p.name for p in self.parts]
        '''
    one_a = "class A:\n    def size(self):\n        total = 0\n        for part in self.parts:\n" \
        "            total += part.size()\n        return total\n\n    x = 1\n"
    one_b = "class B:\n    y = 'b'\n\n    def size(self):\n        n = 0\n        for q in self.qs:\n" \
        "            n += q.size()\n        return n\n"
    fs = find_blocks(
        [("a.py", textwrap.dedent(methods.format(name="P", extra="kind = make()")), "python"),
         ("b.py", textwrap.dedent(methods.format(name="Q", extra="pass")), "python"),
         ("c.py", one_a, "python"), ("d.py", one_b, "python")],
        min_lines=4,
    )
    # P and Q: the run of both methods; c.py / d.py share one method only (a function fragment)
    assert spans(fs) == [("a.py", "P[lines 3-10]", 3, 10), ("b.py", "Q[lines 3-10]", 3, 10)]
    # classes equal up to names: one block, the whole class, not again its methods
    fs = find_blocks(
        [("a.py", textwrap.dedent(methods.format(name="P", extra="pass")), "python"),
         ("b.py", textwrap.dedent(methods.format(name="Q", extra="pass")), "python")],
        min_lines=4,
    )
    assert spans(fs) == [("a.py", "<module>[lines 1-10]", 1, 10), ("b.py", "<module>[lines 1-10]", 1, 10)]


def test_tables_imports_and_repeated_statements_are_not_blocks():
    table_a = "NAMES = [\n" + "".join(f"    'n{i}',\n" for i in range(12)) + "]\n"
    table_b = "CODES = [\n" + "".join(f"    'c{i}',\n" for i in range(12)) + "]\n"
    imports = "import os\nimport re\nimport sys\nimport json\nimport time\nimport math\nimport glob\n"
    props = '''\
        class {name}:
            {extra}
            @property
            def a(self):
                return self._a

            @property
            def b(self):
                return self._b
        '''
    fs = find_blocks(
        [("t1.py", table_a, "python"), ("t2.py", table_b, "python"),
         ("i1.py", imports, "python"), ("i2.py", imports, "python"),
         ("p1.py", textwrap.dedent(props.format(name="P", extra="x = 1")), "python"),
         ("p2.py", textwrap.dedent(props.format(name="Q", extra="y = f()")), "python")],
        min_lines=3,
    )
    assert fs == []


def test_code_lines_leave_out_string_interiors_and_docstrings():
    body = "\n".join(f"    line {i} of {{name}}" for i in range(8))
    text = 'HELP = dedent("""\\\n{body}\n""")\nparser = make_parser(HELP, 2)\n'
    docs = '''\
        class {name}:
            {extra}

            def open(self):
                """Open the {name} device.

                Several lines of documentation
                that do not count as code.
                """
                return self.dev.open()

            def close(self):
                """Close the {name} device."""
                return self.dev.close(0)
        '''
    sources = [
        ("h1.py", text.format(body=body.format(name="a")), "python"),
        ("h2.py", text.format(body=body.format(name="b")), "python"),
        ("d1.py", textwrap.dedent(docs.format(name="tape", extra="x = 1")), "python"),
        ("d2.py", textwrap.dedent(docs.format(name="disk", extra="y = f()")), "python"),
    ]
    # 11 and 12 non-blank lines, but 3 and 4 code lines (6 with the docstrings' first lines)
    assert find_blocks(sources, min_lines=5) == []
    assert spans(find_blocks(sources, min_lines=3)) == [
        ("h1.py", "<module>[lines 1-11]", 1, 11), ("h2.py", "<module>[lines 1-11]", 1, 11),
        ("d1.py", "tape[lines 4-14]", 4, 14), ("d2.py", "disk[lines 4-14]", 4, 14),
    ]


def test_repeated_tokens_counts_patterns():
    assert repeated_tokens(lex("x = [1, 2, 3, 4]", "python")[1]) == 5
    assert repeated_tokens(lex("x = self.f(a, b) + c[1]", "python")[1]) == 0
    assert repeated_tokens(lex("t = ('a' 'b' 'c' 'd' 'e')", "python")[1]) == 4


def test_same_file_copies_and_extract_fragments_block():
    src = textwrap.dedent('''\
        def first(items):
            out = []
            for it in items:
                if it.ok:
                    out.append(it.value * 2)
                else:
                    out.append(1)
            return out


        def second(rows, flag):
            print(flag)
            res = []
            for r in rows:
                if r.ok:
                    res.append(r.value * 3)
                else:
                    res.append(0)
            return res
        ''')
    fs = extract_fragments(src, "m.py", "python", min_lines=5, granularity="block")
    assert spans(fs) == [
        ("m.py", "first", 1, 8),
        ("m.py", "first[lines 2-8]", 2, 8),
        ("m.py", "second", 11, 19),
        ("m.py", "second[lines 13-19]", 13, 19),
    ]


def test_occurrences_are_capped_per_window(tmp_path):
    texts = [(f"m{i}.py", LOADER.replace("load_config", f"load_{i}"), "python") for i in range(5)]
    files = []
    stats = ScanStats()
    for rel, text, lang in texts:
        _, st = extract_file(text, rel, lang, min_lines=6, granularity="block", stats=stats)
        files.append(st)
    pairs = match_runs(files, min_lines=6, max_occurrences=3, hubs=1, stats=stats)
    assert stats.block_keys_capped > 0
    # all pairs among the first 3 occurrences, then each later one with the first only
    assert sorted({(a.file, b.file) for a, b in pairs}) == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2)]
    pairs = match_runs(files, min_lines=6, max_occurrences=3, hubs=2)
    assert sorted({(a.file, b.file) for a, b in pairs}) == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]
    # without the cap, every copy is paired with every other (the function bodies are T2-equal, so
    # the whole functions pair and no block is reported)
    all_pairs = match_runs(files, min_lines=6)
    assert {(a.file, b.file) for a, b in all_pairs} == {(i, j) for i in range(5) for j in range(i + 1, 5)}
    assert block_fragments(files, all_pairs, lambda i: texts[i][1]) == []


def test_changed_file_gives_no_block():
    texts = [("a.py", LOADER), ("b.py", STORE)]
    files = [extract_file(t, rel, "python", min_lines=6, granularity="block")[1] for rel, t in texts]
    pairs = match_runs(files, min_lines=6)
    assert block_fragments(files, pairs, lambda i: texts[i][1]) != []
    stats = ScanStats()
    out = block_fragments(files, pairs, lambda i: texts[i][1] + ("# edited\n" if i == 1 else ""), stats=stats)
    assert spans(out) == [("a.py", "load_config[lines 8-15]", 8, 15)]
    assert stats.block_files_changed == 1 and stats.block_fragments == 1


def test_unknown_granularity_raises_input_error(tmp_path):
    write(tmp_path, {"a.py": LOADER})
    for call in (
        lambda: mine([tmp_path], granularity="statement"),
        lambda: extract_fragments(LOADER, "a.py", "python", granularity="Function"),
    ):
        with pytest.raises(InputError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and all(g in msg for g in ("'function'", "'block'", "'file'"))


def test_worker_processes_give_the_same_blocks(tmp_path, monkeypatch):
    import twinspect.code.fragments as fragments_mod
    from twinspect.code import normalize

    monkeypatch.setattr(fragments_mod, "PARALLEL_MIN_FILES", 4)
    # 40 files: runs of 16 files per task, so copies are found across tasks
    for i in range(20):
        (tmp_path / f"l{i:02d}.py").write_text(LOADER.replace("load_config", f"load_{i}").replace('"#"', f'"{i}"'))
        (tmp_path / f"s{i:02d}.py").write_text(STORE.replace("Store", f"Store{i}") if i % 2 else "x = 1\n")
    (tmp_path / "w.java").write_text(JAVA_A)
    (tmp_path / "z.java").write_text(JAVA_B)
    seq, seq_stats = mine([tmp_path], min_lines=6, granularity="block", workers=1)
    normalize._primed.clear()
    try:
        par, par_stats = mine([tmp_path], min_lines=6, granularity="block", workers=2)
    finally:
        normalize._primed.clear()
    assert par == seq and par_stats == seq_stats
    names = [f.name for f in seq if f.name.endswith("]")]
    assert "Orders.total[lines 10-17]" in names and "Invoice.compute[lines 8-15]" in names
    # the loaders are T2-equal functions, and the Store classes T2-equal classes (one block each,
    # the whole class); the run inside refresh pairs with the run inside every loader
    assert [f.name for f in seq if f.path == "s01.py"] == [
        "<module>[lines 1-14]", "Store1.refresh", "Store1.refresh[lines 4-12]"
    ]
    assert sum(n.startswith("load_") for n in names) == 20
    assert names.count("<module>[lines 1-14]") == 10
    assert seq_stats.block_fragments == len(names) == 20 + 10 + 10 + 2


def test_module_constants_are_public():
    assert blocks.MAX_OCCURRENCES_PER_KEY >= 2 and blocks.default_min_tokens(6) == 12


def test_identical_parts_of_tables_are_blocks_matched_with_their_literals():
    shared = "".join(f"    0x{i:04x}: 0x{(i * 7) % 256:04x},  # entry {i}\n" for i in range(40, 52))
    a = "MAP = {\n    0x0001: 0x0002,\n    0x0003: 0x0004,\n" + shared + "    0x0100: 0x0200,\n}\n"
    b = "OTHER = {\n    0x0009: 0x0008,\n" + shared + "    0x0300: 0x0400,\n    0x0500: 0x0600,\n}\n"
    # the same shape, other values: no block (the elements are compared with their literals)
    c = "MAP = {\n" + "".join(f"    0x{i:04x}: 0x{(i * 5) % 256:04x},\n" for i in range(40, 56)) + "}\n"
    fs = find_blocks([("a.py", a, "python"), ("b.py", b, "python"), ("c.py", c, "python")], min_lines=6)
    assert spans(fs) == [("a.py", "<module>[lines 4-15]", 4, 15), ("b.py", "<module>[lines 3-14]", 3, 14)]
    # the copy may end with a key whose value differs (a dict entry is two elements)
    e = "OTHER = {\n    0x0009: 0x0008,\n" + shared + "    0x0100: 0x0999,\n}\n"
    fs = find_blocks([("a.py", a, "python"), ("e.py", e, "python")], min_lines=6)
    assert spans(fs) == [("a.py", "<module>[lines 4-16]", 4, 16), ("e.py", "<module>[lines 3-15]", 3, 15)]
    # a whole table copied with the code after it: one run of statements (not again its elements)
    code = "\nfor key in MAP:\n    check(key)\n    record(key, MAP[key])\n"
    fs = find_blocks([("a.py", a + code, "python"), ("d.py", "x = 1\n" + a + code, "python")], min_lines=6)
    assert spans(fs) == [("a.py", "<module>[lines 1-21]", 1, 21), ("d.py", "<module>[lines 2-22]", 2, 22)]


def test_runs_span_imports_and_definitions_of_a_module():
    codec = textwrap.dedent('''\
        """Codec {name}."""

        import codecs

        class Codec(codecs.Codec):
            def encode(self, input, errors="strict"):
                return codecs.charmap_encode(input, errors, encoding_map)

        class IncrementalEncoder(codecs.IncrementalEncoder):
            def encode(self, input, final=False):
                return codecs.charmap_encode(input, self.errors, encoding_map)[0]

        def getregentry():
            return codecs.CodecInfo(name="{name}", encode=Codec().encode)
        ''')
    fs = find_blocks(
        [("cp1.py", codec.format(name="cp1"), "python"), ("cp2.py", codec.format(name="cp2"), "python")], min_lines=6
    )
    assert spans(fs) == [("cp1.py", "<module>[lines 3-14]", 3, 14), ("cp2.py", "<module>[lines 3-14]", 3, 14)]
    # an import and one function: the function fragment already, no block
    func = "import os\n\n\ndef {name}(a, b):\n    s = a + b\n    d = a - b\n    p = s * d\n    q = p - a\n" \
        "    return q\n"
    fs = find_blocks(
        [("f.py", func.format(name="f"), "python"), ("g.py", func.format(name="g"), "python")], min_lines=5
    )
    assert fs == []


def test_two_copies_inside_one_function():
    src = textwrap.dedent('''\
        def walk(self, pathname, flag):
            if flag:
                for name in listdir(pathname):
                    path = join(pathname, name)
                    if self.debug:
                        print("skip", path)
                        continue
                    fname, arcname = self.codename(path, name)
                    self.write(fname, arcname)
            else:
                print("top level", pathname)
                for name in sorted(listdir(pathname)):
                    path = join(pathname, name)
                    if self.debug:
                        print("skip", path)
                        continue
                    fname, arcname = self.codename(path, name)
                    self.write(fname, arcname)
        ''')
    fs = find_blocks([("w.py", src, "python")], min_lines=5)
    assert spans(fs) == [("w.py", "walk[lines 4-9]", 4, 9), ("w.py", "walk[lines 13-18]", 13, 18)]


def test_a_copy_runs_from_the_end_of_one_table_into_the_next_statements():
    # the last entries of a map, the map's end, and the start of the next table: one run, as jscpd's
    # token windows find it (a data statement is its head, its elements and its tail)
    tail = "".join(f"    0x{i:04x}: 0x{i + 7:04x},\n" for i in range(200, 206))
    rows = "".join(f"    '\\x{i:02x}'\n" for i in range(14))
    a = "m.update({\n    0x0001: 0x0002,\n" + tail + "})\n\ntable = (\n" + rows + ")\n"
    b = "m.update({\n    0x0009: 0x0003,\n    0x0004: 0x0005,\n" + tail + "})\n\ntable = (\n" + rows \
        + "    '\\xff'\n)\n"
    fs = find_blocks([("a.py", a, "python"), ("b.py", b, "python")], min_lines=6)
    assert spans(fs) == [("a.py", "<module>[lines 3-25]", 3, 25), ("b.py", "<module>[lines 4-26]", 4, 26)]
    assert fs[0].text.startswith("    0x00c8: 0x00cf,") and fs[0].text.endswith("'\\x0d'")
