"""Conformance suite: every language of the registry passes the same checks on a small real program.

Per language, one source file holds a method inside a class / impl / namespace / object (C: a plain
function next to a struct) and a function with a nested function (C++: a lambda, which is never a
fragment; C: none). From it the test derives, by text substitution:

* a *renamed* copy (identifiers renamed, literals changed): a Type-2 clone of the method;
* an *edited* copy (one statement added): a Type-3 clone, reported by the detector, whose copied
  statements are a block pair at block granularity;
* a *commented* copy (line and block comments added): the same T1 tokens as the original.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

import pytest

from twinspect.code.clones import DetectConfig, scan
from twinspect.code.files import ScanStats
from twinspect.code.fragments import Fragment, extract_fragments
from twinspect.code.languages import LANGUAGES, REGISTRY
from twinspect.code.normalize import abstract_tokens, t1_key, t2_key, token_similarity

MARK = "@@"  # a whole line: removed (original), an extra statement (edited) or comments (commented)


@dataclass(frozen=True)
class Case:
    ext: str
    source: str
    method: str  # expected (qualified) name of the method in its class / impl / namespace
    outer: str  # expected name of the function holding a nested function
    inner: str | None  # expected qualified name of the nested function (None: a lambda, not mined)
    extra: str  # the statement the edited copy adds at MARK
    comments: tuple[str, ...]  # lines the commented copy adds at MARK (a line and a block comment)


CASES: dict[str, Case] = {
    "python": Case(".py", """
        class Cart:
            def compute_total(self, items, limit):
                total = 0
                count = 0
                for item in items:
                    if item.price > limit:
                        total += item.price * 2
                    else:
                        total += item.price
                    count += 1
                @@
                print("done", count)
                return total


        def outer(values):
            def inner(value):
                result = value * 3
                result = result + 1
                if result > 10:
                    return result
                return 0
            return [inner(v) for v in values]
        """, "Cart.compute_total", "outer", "outer.inner", "total = total - count",
        ("# a line comment", "# another comment line")),
    "java": Case(".java", """
        package shop;

        public class Cart {
            public int computeTotal(List<Item> items, int limit) {
                int total = 0;
                int count = 0;
                for (Item item : items) {
                    if (item.price > limit) {
                        total += item.price * 2;
                    } else {
                        total += item.price;
                    }
                    count += 1;
                }
                @@
                System.out.println("done" + count);
                return total;
            }

            public int outer(int value) {
                Runnable inner = new Runnable() {
                    public void run() {
                        int result = value * 3;
                        result = result + 1;
                        if (result > 10) {
                            System.out.println(result);
                        }
                    }
                };
                inner.run();
                return value;
            }
        }
        """, "Cart.computeTotal", "Cart.outer", "Cart.outer.run", "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "c": Case(".c", """
        struct item { int price; };

        int compute_total(struct item *items, int n, int limit) {
            int total = 0;
            int count = 0;
            for (int i = 0; i < n; i++) {
                if (items[i].price > limit) {
                    total += items[i].price * 2;
                } else {
                    total += items[i].price;
                }
                count += 1;
            }
            @@
            printf("done %d", count);
            return total;
        }

        int outer(int value) {
            int result = value * 3;
            result = result + 1;
            if (result > 10) {
                return result;
            }
            return 0;
        }
        """, "compute_total", "outer", None, "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "cpp": Case(".cpp", """
        namespace shop {
        class Cart {
        public:
            int computeTotal(const std::vector<Item>& items, int limit) {
                int total = 0;
                int count = 0;
                for (const auto& item : items) {
                    if (item.price > limit) {
                        total += item.price * 2;
                    } else {
                        total += item.price;
                    }
                    count += 1;
                }
                @@
                std::cout << "done" << count;
                return total;
            }
        };
        }

        int outer(int value) {
            auto inner = [](int v) {
                int result = v * 3;
                result = result + 1;
                return result > 10 ? result : 0;
            };
            return inner(value);
        }
        """, "Cart::computeTotal", "outer", None, "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "javascript": Case(".js", """
        class Cart {
          computeTotal(items, limit) {
            let total = 0;
            let count = 0;
            for (const item of items) {
              if (item.price > limit) {
                total += item.price * 2;
              } else {
                total += item.price;
              }
              count += 1;
            }
            @@
            console.log(`done ${count}`);
            return total;
          }
        }

        function outer(values) {
          function inner(value) {
            let result = value * 3;
            result = result + 1;
            if (result > 10) {
              return result;
            }
            return 0;
          }
          return values.map(inner);
        }
        """, "Cart.computeTotal", "outer", "outer.inner", "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "typescript": Case(".ts", """
        namespace Shop {
          export class Cart {
            computeTotal(items: Item[], limit: number): number {
              let total: number = 0;
              let count: number = 0;
              for (const item of items) {
                if (item.price > limit) {
                  total += item.price * 2;
                } else {
                  total += item.price;
                }
                count += 1;
              }
              @@
              console.log("done", count);
              return total;
            }
          }
        }

        const outer = (values: number[]): number[] => {
          const inner = (value: number): number => {
            let result = value * 3;
            result = result + 1;
            if (result > 10) {
              return result;
            }
            return 0;
          };
          return values.map(inner);
        };
        """, "Shop.Cart.computeTotal", "outer", "outer.inner", "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "tsx": Case(".tsx", """
        namespace Shop {
          export class Cart {
            computeTotal(items: Item[], limit: number): number {
              let total: number = 0;
              let count: number = 0;
              for (const item of items) {
                if (item.price > limit) {
                  total += item.price * 2;
                } else {
                  total += item.price;
                }
                count += 1;
              }
              @@
              console.log("done", count);
              return total;
            }
          }
        }

        function Outer(props: Props) {
          function inner(value: number) {
            let result = value * 3;
            result = result + 1;
            if (result > 10) {
              return <b>{result}</b>;
            }
            return <i>none</i>;
          }
          return <div>{props.values.map(inner)}</div>;
        }
        """, "Shop.Cart.computeTotal", "Outer", "Outer.inner", "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "go": Case(".go", """
        package shop

        type Cart struct{}

        func (c *Cart) ComputeTotal(items []Item, limit int) int {
        \ttotal := 0
        \tcount := 0
        \tfor _, item := range items {
        \t\tif item.Price > limit {
        \t\t\ttotal += item.Price * 2
        \t\t} else {
        \t\t\ttotal += item.Price
        \t\t}
        \t\tcount += 1
        \t}
        \t@@
        \tfmt.Println("done", count)
        \treturn total
        }

        func outer(values []int) []int {
        \tinner := func(value int) int {
        \t\tresult := value * 3
        \t\tresult = result + 1
        \t\tif result > 10 {
        \t\t\treturn result
        \t\t}
        \t\treturn 0
        \t}
        \tout := []int{}
        \tfor _, v := range values {
        \t\tout = append(out, inner(v))
        \t}
        \treturn out
        }
        """, "Cart.ComputeTotal", "outer", "outer.inner", "total = total - count",
        ("// a line comment", "/* a block", "   comment */")),
    "rust": Case(".rs", """
        struct Cart;

        impl Cart {
            fn compute_total(&self, items: &[Item], limit: i32) -> i32 {
                let mut total = 0;
                let mut count = 0;
                for item in items {
                    if item.price > limit {
                        total += item.price * 2;
                    } else {
                        total += item.price;
                    }
                    count += 1;
                }
                @@
                println!("done {}", count);
                total
            }
        }

        fn outer(values: &[i32]) -> Vec<i32> {
            fn inner(value: i32) -> i32 {
                let mut result = value * 3;
                result = result + 1;
                if result > 10 {
                    return result;
                }
                0
            }
            values.iter().map(|v| inner(*v)).collect()
        }
        """, "Cart::compute_total", "outer", "outer::inner", "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "csharp": Case(".cs", """
        namespace Shop
        {
            public class Cart
            {
                public int ComputeTotal(List<Item> items, int limit)
                {
                    int total = 0;
                    int count = 0;
                    foreach (var item in items)
                    {
                        if (item.Price > limit)
                        {
                            total += item.Price * 2;
                        }
                        else
                        {
                            total += item.Price;
                        }
                        count += 1;
                    }
                    @@
                    Console.WriteLine("done", count);
                    return total;
                }

                public List<int> Outer(List<int> values)
                {
                    int Inner(int value)
                    {
                        int result = value * 3;
                        result = result + 1;
                        if (result > 10)
                        {
                            return result;
                        }
                        return 0;
                    }
                    return values.Select(Inner).ToList();
                }
            }
        }
        """, "Shop.Cart.ComputeTotal", "Shop.Cart.Outer", "Shop.Cart.Outer.Inner", "total = total - count;",
        ("// a line comment", "/* a block", "   comment */")),
    "kotlin": Case(".kt", """
        package shop

        class Cart {
            fun computeTotal(items: List<Item>, limit: Int): Int {
                var total = 0
                var count = 0
                for (item in items) {
                    if (item.price > limit) {
                        total += item.price * 2
                    } else {
                        total += item.price
                    }
                    count += 1
                }
                @@
                println("done " + count)
                return total
            }
        }

        object Registry {
            fun outer(values: List<Int>): List<Int> {
                fun inner(value: Int): Int {
                    var result = value * 3
                    result = result + 1
                    if (result > 10) {
                        return result
                    }
                    return 0
                }
                return values.map { inner(it) }
            }
        }
        """, "Cart.computeTotal", "Registry.outer", "Registry.outer.inner", "total = total - count",
        ("// a line comment", "/* a block", "   comment */")),
    "swift": Case(".swift", """
        class Cart {
            func computeTotal(items: [Item], limit: Int) -> Int {
                var total = 0
                var count = 0
                for item in items {
                    if item.price > limit {
                        total += item.price * 2
                    } else {
                        total += item.price
                    }
                    count += 1
                }
                @@
                print("done", count)
                return total
            }
        }

        struct Registry {
            func outer(values: [Int]) -> [Int] {
                func inner(value: Int) -> Int {
                    var result = value * 3
                    result = result + 1
                    if result > 10 {
                        return result
                    }
                    return 0
                }
                return values.map(inner)
            }
        }
        """, "Cart.computeTotal", "Registry.outer", "Registry.outer.inner", "total = total - count",
        ("// a line comment", "/* a block", "   comment */")),
    "ruby": Case(".rb", """
        module Shop
          class Cart
            def compute_total(items, limit)
              total = 0
              count = 0
              items.each do |item|
                if item.price > limit
                  total += item.price * 2
                else
                  total += item.price
                end
                count += 1
              end
              @@
              puts "done", count
              total
            end
          end
        end

        def outer(values)
          def inner(value)
            result = value * 3
            result = result + 1
            return result if result > 10
            0
          end
          values.map { |v| inner(v) }
        end
        """, "Shop.Cart.compute_total", "outer", "outer.inner", "total = total - count",
        ("# a line comment", "=begin", "a block comment", "=end")),
    "php": Case(".php", """
        <?php
        namespace Shop;

        class Cart
        {
            public function computeTotal($items, $limit)
            {
                $total = 0;
                $count = 0;
                foreach ($items as $item) {
                    if ($item->price > $limit) {
                        $total += $item->price * 2;
                    } else {
                        $total += $item->price;
                    }
                    $count += 1;
                }
                @@
                echo "done", $count;
                return $total;
            }
        }

        function outer($values)
        {
            $inner = function ($value) {
                $result = $value * 3;
                $result = $result + 1;
                if ($result > 10) {
                    return $result;
                }
                return 0;
            };
            return array_map($inner, $values);
        }
        """, "Cart::computeTotal", "outer", "outer::$inner", "$total = $total - $count;",
        ("// a line comment", "# a hash comment", "/* a block", "   comment */")),
    "scala": Case(".scala", """
        package shop

        class Cart {
          def computeTotal(items: List[Item], limit: Int): Int = {
            var total = 0
            var count = 0
            for (item <- items) {
              if (item.price > limit) {
                total += item.price * 2
              } else {
                total += item.price
              }
              count += 1
            }
            @@
            println("done " + count)
            total
          }
        }

        object Registry {
          def outer(values: List[Int]): List[Int] = {
            def inner(value: Int): Int = {
              var result = value * 3
              result = result + 1
              if (result > 10) {
                return result
              }
              0
            }
            values.map(inner)
          }
        }
        """, "Cart.computeTotal", "Registry.outer", "Registry.outer.inner", "total = total - count",
        ("// a line comment", "/* a block", "   comment */")),
}

RENAMES = {
    "compute_total": "sum_all", "computeTotal": "sumAll", "ComputeTotal": "SumAll", "items": "things",
    "limit": "cap", "total": "acc", "count": "seen", "item": "thing", "price": "cost", "Price": "Cost",
}
LITERALS = {"0": "7", "2": "5", "done": "finished"}


def _variant(case: Case, kind: str) -> str:
    """The case's source with the MARK line removed (``original``), replaced by the extra statement
    (``edited``) or by comment lines (``commented``); ``renamed``: the original, identifiers
    renamed and literals changed (whole words)."""
    src = textwrap.dedent(case.source).lstrip("\n")
    lines = []
    for line in src.split("\n"):
        if line.strip() != MARK:
            lines.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if kind == "edited":
            lines.append(indent + case.extra)
        elif kind == "commented":
            lines.extend(c if c in ("=begin", "=end") or c.startswith("a block comment") else indent + c
                         for c in case.comments)
    out = "\n".join(lines)
    if kind == "renamed":
        for table in (RENAMES, LITERALS):
            out = re.sub(r"\b(" + "|".join(map(re.escape, table)) + r")\b", lambda m, t=table: t[m.group()], out)
    return out


def _fragments(case: Case, lang: str, kind: str = "original") -> list[Fragment]:
    stats = ScanStats()
    frags = extract_fragments(_variant(case, kind), "f" + case.ext, lang, min_lines=1, stats=stats)
    assert stats.files_with_parse_errors == 0, f"{lang} {kind}: the snippet does not parse cleanly"
    return frags


def _method(frags: list[Fragment], name: str) -> Fragment:
    found = [f for f in frags if f.name == name]
    assert len(found) == 1, f"no single fragment named {name!r}: {[f.name for f in frags]}"
    return found[0]


def _renamed_name(name: str) -> str:
    return re.sub(r"\b(" + "|".join(map(re.escape, RENAMES)) + r")\b", lambda m: RENAMES[m.group()], name)


def test_every_registered_language_has_a_case_and_at_least_14_languages():
    assert set(CASES) == set(LANGUAGES)
    assert len(LANGUAGES) >= 14
    for lang, case in CASES.items():
        assert case.ext in REGISTRY[lang].extensions


@pytest.mark.parametrize("lang", LANGUAGES)
def test_method_inside_class_impl_namespace_or_object_is_found(lang):
    case = CASES[lang]
    frag = _method(_fragments(case, lang), case.method)
    assert frag.loc >= 11 and "total" in frag.code and "count" in frag.code
    # the fragment ends where the method ends: its last code line closes it or returns
    assert frag.text.rstrip().splitlines()[-1].strip() in ("}", "end", "total", "return total")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_nested_function_is_its_own_fragment_inside_the_outer_one(lang):
    case = CASES[lang]
    frags = _fragments(case, lang)
    outer = _method(frags, case.outer)
    assert "result + 1" in outer.code  # the nested function's body is part of the outer fragment
    if case.inner is None:  # a lambda: never a fragment
        assert not any(f is not outer and outer.start_line <= f.start_line <= outer.end_line for f in frags)
        return
    inner = _method(frags, case.inner)
    assert outer.start_line < inner.start_line and inner.end_line < outer.end_line
    assert "result + 1" in inner.code and "values" not in inner.code


@pytest.mark.parametrize("lang", LANGUAGES)
def test_renamed_copy_is_type_2_and_commented_copy_type_1(lang):
    case = CASES[lang]
    orig = _method(_fragments(case, lang), case.method)
    renamed = _method(_fragments(case, lang, "renamed"), _renamed_name(case.method))
    commented = _method(_fragments(case, lang, "commented"), case.method)
    assert t2_key(renamed) == t2_key(orig) and t1_key(renamed) != t1_key(orig)
    assert t1_key(commented) == t1_key(orig)  # comments ignored
    assert commented.text != orig.text and commented.loc > orig.loc
    edited = _method(_fragments(case, lang, "edited"), case.method)
    assert t2_key(edited) != t2_key(orig)
    assert 0.85 <= token_similarity(abstract_tokens(edited), abstract_tokens(orig)) < 1.0


@pytest.mark.parametrize("lang", LANGUAGES)
def test_detector_reports_renamed_copy_as_t2_and_edited_copy_as_t3(lang, tmp_path):
    case = CASES[lang]
    for stem, kind in (("a", "original"), ("b", "renamed"), ("c", "edited")):
        (tmp_path / (stem + case.ext)).write_text(_variant(case, kind), encoding="utf-8")
    report = scan([tmp_path], DetectConfig())
    st = report.stats
    assert st["files_parsed"] == 3 and st["files_by_language"] == {lang: 3}
    pairs = {}
    for p in report.pairs:
        fa, fb = report.fragments[p.a], report.fragments[p.b]
        pairs[frozenset({(fa.path[0], fa.name), (fb.path[0], fb.name)})] = p.type
    t2 = frozenset({("a", case.method), ("b", _renamed_name(case.method))})
    t3 = frozenset({("a", case.method), ("c", case.method)})
    assert pairs.get(t2) == "T2", pairs
    assert pairs.get(t3) == "T3", pairs


@pytest.mark.parametrize("lang", LANGUAGES)
def test_block_granularity_finds_the_copied_statements_of_the_edited_method(lang, tmp_path):
    from twinspect.code.fragments import mine

    case = CASES[lang]
    (tmp_path / ("a" + case.ext)).write_text(_variant(case, "original"), encoding="utf-8")
    # the edited copy with a different tail: the two methods differ, their leading statements do not
    edited = _variant(case, "edited").replace(case.extra, case.extra + "\n" + case.extra.replace("count", "total"))
    (tmp_path / ("c" + case.ext)).write_text(edited, encoding="utf-8")
    frags, stats = mine([tmp_path], granularity="block", min_lines=6, workers=1)
    method = _method(_fragments(case, lang), case.method)  # the block lies inside the method
    # (the two files also share copied token runs across the method's bounds: token-run fragments
    # of their own, see test_token_runs.py)
    blocks = [f for f in frags if "[lines " in f.name and "count" in f.code
              and method.start_line < f.start_line and f.end_line < method.end_line]
    by_file = {f.path: f for f in blocks}
    assert sorted(by_file) == ["a" + case.ext, "c" + case.ext] and len(blocks) == 2, [f.name for f in frags]
    a, c = by_file["a" + case.ext], by_file["c" + case.ext]
    assert a.loc >= 6 and t2_key(a) == t2_key(c)
    assert stats.block_fragments >= 2
