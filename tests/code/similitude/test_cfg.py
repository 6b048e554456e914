"""CFG shapes per statement kind and language, against hand-drawn expected graphs.

Graphs are compared as multisets of labelled edges ``(label(src), label(dst))``; the snippets use
statements with distinct kinds so each hand-drawn graph is unambiguous.
"""

from __future__ import annotations

import pytest

from twinspect.code.similitude.cfg import program_graph
from twinspect.errors import InputError


def shape(src: str, lang: str, func: int = 0) -> list[tuple[str, str]]:
    cfg = program_graph(src, lang).functions[func]
    lab = cfg.labels
    return sorted((lab[a], lab[b]) for a, b in cfg.edges)


def c_like(body: str, lang: str, params: str = "int x") -> str:
    if lang == "java":
        return f"class A {{ int f({params}) {{ {body} }} }}"
    return f"int f({params}) {{ {body} }}"


C_LIKE = ("c", "cpp", "java")

IF_ELSE = sorted([("entry", "compare+cond"), ("compare+cond", "assign"), ("compare+cond", "call"),
                  ("assign", "return"), ("call", "return"), ("return", "exit")])


@pytest.mark.parametrize("lang", C_LIKE)
def test_if_else_c_like(lang):
    assert shape(c_like("if (x > 0) { y = 1; } else { g(); } return x;", lang), lang) == IF_ELSE


def test_if_else_python():
    src = "def f(x):\n    if x > 0:\n        y = 1\n    else:\n        g()\n    return x\n"
    assert shape(src, "python") == IF_ELSE


IF_ONLY = sorted([("entry", "compare+cond"), ("compare+cond", "assign"), ("compare+cond", "return"),
                  ("assign", "return"), ("return", "exit")])


@pytest.mark.parametrize("lang", C_LIKE)
def test_if_without_else(lang):
    assert shape(c_like("if (x > 0) { y = 1; } return x;", lang), lang) == IF_ONLY


def test_elif_chain_python():
    src = "def f(x):\n    if x > 0:\n        y = 1\n    elif x < 0:\n        g()\n    return x\n"
    # the elif condition is a second cond block on the false branch; both joins contract into return
    assert shape(src, "python") == sorted([
        ("entry", "compare+cond"), ("compare+cond", "assign"), ("compare+cond", "compare+cond"),
        ("compare+cond", "call"), ("compare+cond", "return"), ("assign", "return"), ("call", "return"),
        ("return", "exit")])


# while with break: the loop header has a back edge from the body and a break edge skips to after
WHILE_BREAK = sorted([("entry", "compare+loop"), ("compare+loop", "compare+cond"), ("compare+loop", "return"),
                      ("compare+cond", "return"), ("compare+cond", "arith+assign"),
                      ("arith+assign", "compare+loop"), ("return", "exit")])


@pytest.mark.parametrize("lang", C_LIKE)
def test_while_break_back_edge(lang):
    src = c_like("while (x > 0) { if (x == 3) break; x = x - 1; } return x;", lang)
    assert shape(src, lang) == WHILE_BREAK


def test_while_break_python():
    src = "def f(x):\n    while x > 0:\n        if x == 3:\n            break\n        x = x - 1\n    return x\n"
    assert shape(src, "python") == WHILE_BREAK


@pytest.mark.parametrize("lang", C_LIKE)
def test_for_continue_goes_to_update(lang):
    body = "int s = 0; for (int i = 0; i < x; i++) { if (i == 2) continue; g(i); } return s;"
    assert shape(c_like(body, lang), lang) == sorted([
        ("entry", "assign+decl"), ("assign+decl", "compare+loop"), ("compare+loop", "compare+cond"),
        ("compare+loop", "return"), ("compare+cond", "arith+assign"), ("compare+cond", "call"),
        ("call", "arith+assign"), ("arith+assign", "compare+loop"), ("return", "exit")])


def test_for_continue_python():
    src = "def f(n):\n    for i in range(n):\n        if i == 2:\n            continue\n        g(i)\n    return n\n"
    assert shape(src, "python") == sorted([
        ("entry", "assign+call+loop"), ("assign+call+loop", "compare+cond"), ("assign+call+loop", "return"),
        ("compare+cond", "assign+call+loop"), ("compare+cond", "call"), ("call", "assign+call+loop"),
        ("return", "exit")])


def test_python_loop_else_skipped_by_break():
    src = "def f(x):\n    while x:\n        break\n    else:\n        g()\n    return x\n"
    assert shape(src, "python") == sorted([
        ("entry", "loop"), ("loop", "return"), ("loop", "call"), ("call", "return"), ("return", "exit")])


@pytest.mark.parametrize("lang", C_LIKE)
def test_do_while(lang):
    assert shape(c_like("do { x = x - 1; } while (x > 0); return x;", lang), lang) == sorted([
        ("entry", "arith+assign"), ("arith+assign", "compare+loop"), ("compare+loop", "arith+assign"),
        ("compare+loop", "return"), ("return", "exit")])


@pytest.mark.parametrize("lang", ("cpp", "java"))
def test_range_for(lang):
    body = "for (int v : xs) { g(v); } return 0;" if lang == "java" else "for (auto v : xs) { g(v); } return 0;"
    assert shape(c_like(body, lang), lang) == sorted([
        ("entry", "assign+loop"), ("assign+loop", "call"), ("assign+loop", "return"), ("call", "assign+loop"),
        ("return", "exit")])


@pytest.mark.parametrize("lang", C_LIKE)
def test_early_return_and_dead_code(lang):
    src = c_like("if (x > 0) return 1; g(); return 0; h();", lang)
    assert shape(src, lang) == sorted([
        ("entry", "compare+cond"), ("compare+cond", "return"), ("compare+cond", "call+return"),
        ("return", "exit"), ("call+return", "exit")])  # h() after the last return is unreachable: dropped


SWITCH = sorted([("entry", "switch"), ("switch", "assign+case"), ("switch", "call+case"),
                 ("switch", "array+assign+case"), ("assign+case", "return"), ("call+case", "array+assign+case"),
                 ("array+assign+case", "return"), ("return", "exit")])


@pytest.mark.parametrize("lang", C_LIKE)
def test_switch_fallthrough_and_break(lang):
    body = "switch (x) { case 1: y = 1; break; case 2: g(); default: z[0] = 1; } return x;"
    assert shape(c_like(body, lang), lang) == SWITCH


@pytest.mark.parametrize("lang", C_LIKE)
def test_switch_without_default_reaches_after(lang):
    assert shape(c_like("switch (x) { case 1: g(); } return x;", lang), lang) == sorted([
        ("entry", "switch"), ("switch", "call+case"), ("switch", "return"), ("call+case", "return"),
        ("return", "exit")])


def test_java_switch_rules_do_not_fall_through():
    src = c_like("switch (x) { case 1 -> g(); default -> y = 1; } return x;", "java")
    assert shape(src, "java") == sorted([
        ("entry", "switch"), ("switch", "call+case"), ("switch", "assign+case"), ("call+case", "return"),
        ("assign+case", "return"), ("return", "exit")])


def test_python_match():
    src = "def f(x):\n    match x:\n        case 1:\n            g()\n        case _:\n            y = 1\n    return x\n"
    assert shape(src, "python") == sorted([
        ("entry", "switch"), ("switch", "call+case"), ("switch", "assign+case"), ("switch", "return"),
        ("call+case", "return"), ("assign+case", "return"), ("return", "exit")])


TRY = sorted([("entry", "call"), ("call", "assign+catch"), ("call", "return"), ("assign+catch", "return"),
              ("return", "exit")])


@pytest.mark.parametrize("lang,body", [
    ("cpp", "try { g(); } catch (int e) { y = 1; } return x;"),
    ("java", "try { g(); } catch (Exception e) { y = 1; } return x;"),
])
def test_try_catch(lang, body):
    assert shape(c_like(body, lang), lang) == TRY


def test_try_except_python():
    src = "def f(x):\n    try:\n        g()\n    except ValueError:\n        y = 1\n    return x\n"
    assert shape(src, "python") == TRY


def test_try_finally_java_and_python():
    java = c_like("try { g(); } catch (Exception e) { y = 1; } finally { z[0] = 2; } return x;", "java")
    py = ("def f(x):\n    try:\n        g()\n    except E:\n        y = 1\n    finally:\n        z[0] = 2\n"
          "    return x\n")
    expected = sorted([("entry", "call"), ("call", "assign+catch"), ("call", "array+assign"),
                       ("assign+catch", "array+assign"), ("array+assign", "return"), ("return", "exit")])
    assert shape(java, "java") == expected
    assert shape(py, "python") == expected


def test_throw_goes_to_handler_or_exit():
    src = c_like("try { if (x > 0) throw 1; } catch (int e) { y = 1; } return x;", "cpp")
    assert shape(src, "cpp") == sorted([
        ("entry", "compare+cond"), ("compare+cond", "throw"), ("compare+cond", "return"),
        ("compare+cond", "assign+catch"), ("throw", "assign+catch"), ("assign+catch", "return"),
        ("return", "exit")])
    assert shape("def f(x):\n    raise ValueError(x)\n", "python") == sorted([("entry", "call+throw"), ("call+throw", "exit")])


@pytest.mark.parametrize("src,lang", [
    ("void f() {}", "c"), ("void f() {}", "cpp"), ("class A { void f() {} }", "java"),
    ("def f():\n    pass\n", "python"),
])
def test_empty_function_is_entry_to_exit(src, lang):
    assert shape(src, lang) == [("entry", "exit")]


def test_straight_line_program_without_control_flow():
    assert shape("int f(int x) { x = x + 1; return x; }", "c") == [
        ("arith+assign+return", "exit"), ("entry", "arith+assign+return")]


@pytest.mark.parametrize("src,lang,label", [
    ('int f(int x) { printf("%d", x); }', "c", "io"),
    ("int f(int x) { cin >> x; }", "cpp", "io"),
    ("int f(int x) { std::cout << x << std::endl; }", "cpp", "io"),
    ("def f(x):\n    print(x)\n", "python", "io"),
    ("class A { void f(int x) { System.out.println(x); } }", "java", "io"),
    ("int f(int x) { int a; }", "c", "decl"),
    ("int f(int x) { y = a[x] * 2; }", "c", "arith+array+assign"),
    ("int f(int x) { y = x > 1 && x < 5; }", "c", "assign+compare+logic"),
])
def test_node_labels_by_statement_kinds(src, lang, label):
    cfg = program_graph(src, lang).functions[0]
    assert cfg.labels == ["entry", "exit", label]


def test_calls_link_functions():
    src = "int g(int x) { return x; }\nint main() { int y = g(1); return y; }\n"
    prog = program_graph(src, "c")
    assert [f.name for f in prog.functions] == ["g", "main"]
    lab = prog.labels
    edges = sorted((lab[a], lab[b]) for a, b in prog.edges)
    assert ("assign+call+decl+return", "entry") in edges and ("exit", "assign+call+decl+return") in edges
    assert prog.call_edges == 2
    # the call edge goes to g's entry (node 0), the return edge comes from g's exit (node 1)
    caller = lab.index("assign+call+decl+return")
    assert (caller, 0) in prog.edges and (1, caller) in prog.edges


def test_python_module_code_is_a_function():
    prog = program_graph("def f():\n    return 1\n\nprint(f())\n", "python")
    assert [f.name for f in prog.functions] == ["f", "<module>"]
    assert prog.call_edges == 2


def test_syntax_error_raises_input_error():
    with pytest.raises(InputError, match="line 2"):
        program_graph("int f() {\n  if (x { }\n}\n", "c", path="bad.c")
