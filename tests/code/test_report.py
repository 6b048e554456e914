"""Clone report writers: JSON contract, SARIF 2.1.0 structure, self-contained HTML, terminal table."""

from __future__ import annotations

import dataclasses
import io
import json
import re

import numpy as np
import pytest
from rich.console import Console

from twinspect.code import report as rp
from twinspect.code.clones import DetectConfig, detect
from twinspect.code.fragments import extract_fragments
from twinspect.errors import InputError

# `<`, `>`, `&` and quotes in the code must be escaped in the HTML page.
A_SRC = """def clamp_all(values, lo, hi):
    out = []
    for v in values:
        if v < lo and lo > 0:
            v = lo
        elif v > hi & 0xFF:
            v = hi
        out.append("<" + str(v) + ">")
    return out
"""
B_SRC = A_SRC.replace("clamp_all", "clip_every").replace("values", "xs")
C_SRC = A_SRC.replace("    return out", "    print('done & dusted')\n    return out")
D_SRC = """def unrelated(path):
    with open(path) as fh:
        data = fh.read()
    words = data.split()
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return counts
"""


def make_report():
    frags = []
    for path, src in (("src/a.py", A_SRC), ("src/b.py", B_SRC), ("lib/c.py", C_SRC), ("lib/d.py", D_SRC)):
        frags += extract_fragments(src, path, "python", min_lines=1)
    vecs = np.array([[1, 0.01, 0], [1, 0.02, 0], [1, 0.1, 0], [0, 0, 1]], dtype=np.float32)
    rep = detect(frags, DetectConfig(threshold=0.9), vectors=vecs)
    rep.root = "/tmp/project"
    return rep


@pytest.fixture(scope="module")
def report():
    rep = make_report()
    assert len(rep.pairs) == 3, "fixture: a/b T2, a/c and b/c T3"
    return rep


def test_json_contract(tmp_path, report):
    out = tmp_path / "r.json"
    rp.write_json_report(report, out)
    doc = json.loads(out.read_text())
    assert {"fragments", "pairs", "classes", "stats"} <= set(doc)
    assert doc["version"] and doc["config"]["threshold"] == 0.9
    paths = [f["path"] for f in doc["fragments"]]
    assert paths == ["lib/c.py", "lib/d.py", "src/a.py", "src/b.py"]  # sorted, relative
    for i, f in enumerate(doc["fragments"]):
        assert f["id"] == i
        assert isinstance(f["start_line"], int) and isinstance(f["end_line"], int) and f["start_line"] <= f["end_line"]
        assert isinstance(f["name"], str) and f["language"] == "python"
    types = {}
    for p in doc["pairs"]:
        assert set(p) >= {"a", "b", "similarity", "type", "band", "t3_similarity"}
        assert isinstance(p["a"], int) and isinstance(p["b"], int) and p["a"] < p["b"]
        assert isinstance(p["similarity"], float) and -1 <= p["similarity"] <= 1
        types[(paths[p["a"]], paths[p["b"]])] = p["type"]
    assert types == {("src/a.py", "src/b.py"): "T2", ("lib/c.py", "src/a.py"): "T3", ("lib/c.py", "src/b.py"): "T3"}
    assert doc["classes"] == [[0, 2, 3]]
    assert doc["stats"]["pairs"] == 3 and doc["stats"]["pairs_by_type"]["T2"] == 1


def test_sarif_structure(tmp_path, report):
    out = tmp_path / "r.sarif"
    rp.write_sarif(report, out)
    log = json.loads(out.read_text())
    assert log["version"] == "2.1.0" and "sarif" in log["$schema"]
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "twinspect" and driver["version"]
    rule_ids = [r["id"] for r in driver["rules"]]
    assert rule_ids == ["T1", "T2", "T3", "T4"]
    for r in driver["rules"]:
        assert r["shortDescription"]["text"] and r["fullDescription"]["text"]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file:///") and \
        run["originalUriBaseIds"]["SRCROOT"]["uri"].endswith("/")
    assert len(run["results"]) == len(report.pairs)
    for res, pair in zip(run["results"], report.pairs):
        assert res["ruleId"] == pair.type and rule_ids[res["ruleIndex"]] == pair.type
        assert res["level"] == "note"
        fa, fb = report.fragments[pair.a], report.fragments[pair.b]
        assert fb.path in res["message"]["text"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == fa.path and loc["artifactLocation"]["uriBaseId"] == "SRCROOT"
        assert loc["region"] == {"startLine": fa.start_line, "endLine": fa.end_line}
        rel = res["relatedLocations"][0]["physicalLocation"]
        assert rel["artifactLocation"]["uri"] == fb.path
        assert rel["region"] == {"startLine": fb.start_line, "endLine": fb.end_line}
        assert not rel["artifactLocation"]["uri"].startswith("/")


def test_sarif_uri_is_percent_encoded():
    rep = make_report()
    rep.fragments[0] = dataclasses.replace(rep.fragments[0], path="dir with space/c#.py")
    results = rp.to_sarif(rep)["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert "dir%20with%20space/c%23.py" in uris


def test_html_self_contained_and_escaped(tmp_path, report):
    out = tmp_path / "r.html"
    rp.write_html(report, out)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    # both sides of a pair are shown, escaped
    assert "clamp_all" in page and "clip_every" in page
    assert "if v &lt; lo and lo &gt; 0:" in page
    assert "v &gt; hi &amp; 0xFF" in page
    assert "if v < lo" not in page
    assert page.count('<div class="side">') == 2 * len(report.pairs)
    for t in ("T2", "T3"):
        assert f'class="badge {t}"' in page


def test_html_caps_side_by_side(report):
    page = rp.to_html(report, max_side_by_side=1)
    assert page.count('<div class="side">') == 2
    assert "Only the 1 most similar pairs are shown side by side" in page


def test_terminal_table_and_summary(report):
    buf = io.StringIO()
    rp.print_terminal(report, Console(file=buf, width=250), limit=2)
    text = buf.getvalue()
    assert "src/a.py:1-9" in text and "clip_every" in text
    assert "showing 2 of 3 pairs" in text
    line = rp.summary_line(report)
    assert line.startswith("4 fragments") and "3 clone pairs" in line and "T2 1" in line and "T3 2" in line


def test_write_report_dispatch(tmp_path, report, capsys):
    buf = io.StringIO()
    rp.write_report(report, "json", None, quiet=True, stdout=buf)
    assert json.loads(buf.getvalue())["pairs"]
    rp.write_report(report, "sarif", tmp_path / "x.sarif", quiet=True)
    assert json.loads((tmp_path / "x.sarif").read_text())["version"] == "2.1.0"
    rp.write_report(report, "table", tmp_path / "x.txt", quiet=True)
    assert "clone pairs" in (tmp_path / "x.txt").read_text()
    with pytest.raises(InputError):
        rp.write_report(report, "html", None)
    with pytest.raises(InputError):
        rp.write_report(report, "xml", tmp_path / "x.xml")
    quiet_buf = io.StringIO()
    rp.write_report(report, "table", None, quiet=True, stdout=quiet_buf)
    assert quiet_buf.getvalue() == ""


def test_interrupted_write_leaves_old_file(tmp_path, report, monkeypatch):
    out = tmp_path / "r.html"
    out.write_text("previous report")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "to_html", boom)
    with pytest.raises(KeyboardInterrupt):
        rp.write_html(report, out)
    assert out.read_text() == "previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_empty_report_renders(tmp_path):
    rep = detect([], DetectConfig())
    page = rp.to_html(rep)
    assert "No clone pairs." in page
    assert rp.to_sarif(rep)["runs"][0]["results"] == []
    assert json.loads(rp.to_json(rep))["pairs"] == []


def test_sarif_rule_texts_and_partial_fingerprints(report):
    run = rp.to_sarif(report)["runs"][0]
    texts = [r["shortDescription"]["text"] for r in run["tool"]["driver"]["rules"]]
    assert texts == ["Type-1 code clone", "Type-2 code clone", "Type-3 code clone", "Type-4 code clone"]
    fps = [r["partialFingerprints"]["cloneFragments/v1"] for r in run["results"]]
    assert len(set(fps)) == len(fps) and all(re.fullmatch(r"[0-9a-f]{32}", f) for f in fps)
    # moving both fragments down the file (an edit above them) keeps the fingerprints
    shifted = make_report()
    shifted.fragments = [dataclasses.replace(f, start_line=f.start_line + 5, end_line=f.end_line + 5)
                         for f in shifted.fragments]
    assert [r["partialFingerprints"] for r in rp.to_sarif(shifted)["runs"][0]["results"]] == \
        [r["partialFingerprints"] for r in run["results"]]


def test_rich_markup_in_paths_is_shown_as_is():
    frags = []
    for path, src in (("[red]x[/red].py", A_SRC), ("[bold]b.py", B_SRC)):
        frags += extract_fragments(src, path, "python", min_lines=1)
    rep = detect(frags, DetectConfig(threshold=0.9), vectors=np.array([[1, 0], [1, 0.01]], dtype=np.float32))
    buf = io.StringIO()
    rp.print_terminal(rep, Console(file=buf, width=250))
    assert "[red]x[/red].py:1-9" in buf.getvalue() and "[bold]b.py" in buf.getvalue()


def test_output_that_is_a_directory_is_one_input_error(tmp_path, report):
    for fmt in ("json", "sarif", "table", "html"):
        with pytest.raises(InputError, match="is a directory"):
            rp.write_report(report, fmt, tmp_path, quiet=True)
    assert list(tmp_path.iterdir()) == []


def test_summary_gives_class_sizes(report):
    line = rp.summary_line(report)
    assert f"{len(report.classes)} clone classes" in line
    if report.classes:
        assert "largest" in line


def _two_fragment_report(src_a, src_b, path_a="src/a.py", path_b="src/b.py"):
    frags = extract_fragments(src_a, path_a, "python", min_lines=1) + extract_fragments(src_b, path_b, "python", min_lines=1)
    assert len(frags) == 2
    return detect(frags, DetectConfig(threshold=0.9), vectors=np.array([[1, 0], [1, 0.01]], dtype=np.float32))


def _sides(page):
    """The two <pre> blocks of each side-by-side pair."""
    return re.findall(r'<div class="side">.*?<pre><code>(.*?)</code></pre></div>', page, re.S)


def test_html_highlights_exactly_the_differing_line_on_each_side():
    # B differs from A in one line (the comparison); trailing blanks on another line are no difference
    b_src = A_SRC.replace("if v < lo and lo > 0:", "if v <= lo:").replace("    out = []\n", "    out = []   \n")
    rep = _two_fragment_report(A_SRC, b_src)
    assert len(rep.pairs) == 1
    side_a, side_b = _sides(rp.to_html(rep))
    marked = r'<span class="d"><span class="ln">(\d+)</span>(.*?)</span>'
    assert re.findall(marked, side_a) == [("4", "        if v &lt; lo and lo &gt; 0:")]
    assert re.findall(marked, side_b) == [("4", "        if v &lt;= lo:")]
    assert side_a.count('class="d"') == side_b.count('class="d"') == 1
    # identical fragments: nothing is marked
    page = rp.to_html(_two_fragment_report(A_SRC, A_SRC))
    assert 'class="d">' not in "".join(_sides(page))


def test_differing_lines_ignores_whitespace():
    a = ["def f(x):", "    y = x + 1", "    return y"]
    b = ["def f(x):", "  y = x + 1   ", "    y += 2", "    return y"]
    assert rp.differing_lines(a, b) == (set(), {2})
    assert rp.differing_lines(a, ["def g(x):", *a[1:]]) == ({0}, {0})


def test_html_pairs_start_collapsed(report):
    page = rp.to_html(report)
    assert page.count("<details") == len(report.pairs) == 3
    assert not re.search(r"<details[^>]*\bopen\b", page)


def test_html_escapes_script_in_code_and_paths():
    evil = A_SRC.replace('out.append("<" + str(v) + ">")', 'out.append("<script>alert(1)</script>")')
    rep = _two_fragment_report(A_SRC, evil, path_b="src/<script>x</script>.py")
    page = rp.to_html(rep)
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "src/&lt;script&gt;x&lt;/script&gt;.py" in page
    # the differing line is marked and still escaped
    assert '<span class="ln">8</span>        out.append(&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;)</span>' in page
    assert page.count('<span class="d">') == 3  # that line on each side, and the legend


def test_html_max_pairs_through_write_report(tmp_path, report):
    out = tmp_path / "r.html"
    rp.write_report(report, "html", out, quiet=True, html_max_pairs=1)
    page = out.read_text()
    assert page.count('<div class="side">') == 2 and page.count("<details") == 1
    rp.write_report(report, "html", out, quiet=True, html_max_pairs=0)
    assert "<details" not in out.read_text() and "Side by side (0 of 3 pairs)" in out.read_text()
    rp.write_report(report, "html", out, quiet=True)  # default: every pair of this small report
    assert out.read_text().count("<details") == 3


def test_streamed_json_equals_the_report_dict_and_lists_one_entry_per_line(tmp_path, report):
    from twinspect.code.baseline import HASH_FIELD, add_json_fields, code_hash

    out = tmp_path / "r.json"
    rp.write_json_report(report, out)
    text = out.read_text()
    want = json.loads(json.dumps(add_json_fields(report.to_json_dict(), report), default=int))
    assert json.loads(text) == want
    assert json.loads(rp.to_json(report)) == want
    assert [e[HASH_FIELD] for e in want["fragments"]] == [code_hash(f) for f in report.fragments]
    pair_lines = [ln for ln in text.splitlines() if ln.startswith('    {"a": ')]
    assert [json.loads(ln.rstrip(",")) for ln in pair_lines] == want["pairs"]  # one pair per line
    buf = io.StringIO()
    rp.write_report(report, "json", None, stdout=buf, quiet=True)
    assert json.loads(buf.getvalue()) == want
