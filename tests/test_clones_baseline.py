"""`twinspect clones --baseline OLD_REPORT` and `--fail-over PCT` (issue 23 item 5): clone checks in CI.

Real scans of the bundled example tree (copied, then edited as a commit would) and of tiny trees
whose duplicated lines are counted by hand.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import run

pytest.importorskip("twinspect.code.encoders.lexical")

WORD_FREQUENCIES_NAME = "word_frequencies"


def _scan_json(capsys, root: Path, out: Path, *extra: object) -> tuple[int, dict, str]:
    code, _, err = run(capsys, "clones", root, "-f", "json", "-o", out, "-q", *extra)
    return code, (json.loads(out.read_text()) if out.exists() else {}), err


def _pair_names(doc: dict) -> set[tuple[tuple[str, str], tuple[str, str]]]:
    frags = doc["fragments"]
    out = set()
    for p in doc["pairs"]:
        a, b = frags[p["a"]], frags[p["b"]]
        out.add(tuple(sorted(((a["path"], a["name"]), (b["path"], b["name"])))))
    return out


def _function_source(path: Path, name: str) -> str:
    """The text of the top-level Python function ``name`` in ``path`` (up to the next top-level line)."""
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {name}("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i][0].isspace()),
               len(lines))
    return "".join(lines[start:end]).rstrip() + "\n"


@pytest.fixture
def tree(tmp_path, examples_dir) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(examples_dir, root, ignore=shutil.ignore_patterns("*.md"))
    return root


@pytest.fixture
def old(capsys, tree, tmp_path) -> tuple[Path, dict]:
    """The baseline: a JSON report of the unedited tree."""
    out = tmp_path / "old.json"
    code, doc, err = _scan_json(capsys, tree, out)
    assert code == 0, err
    return out, doc


def _commit(tree: Path) -> tuple[str, str]:
    """Edit the tree as a commit would: shift the lines of known clones in search.py (three lines
    inserted above them) and add a new copy of a function that had no clone. Returns the new pair's
    two (path, name) sides, sorted."""
    search = tree / "python" / "search.py"
    search.write_text("# moved down by this comment\nimport bisect  # noqa: F401\n\n" + search.read_text())
    body = _function_source(tree / "python" / "text.py", WORD_FREQUENCIES_NAME)
    (tree / "python" / "report_words.py").write_text('"""Report helpers."""\n\nimport re\n\n\n' + body)
    return tuple(sorted((("python/report_words.py", WORD_FREQUENCIES_NAME), ("python/text.py", WORD_FREQUENCIES_NAME))))


def test_json_fragments_carry_a_code_hash_that_ignores_line_numbers(capsys, tree, old, tmp_path):
    _, doc = old
    assert all(len(f["code_hash"]) == 32 for f in doc["fragments"])
    before = {(f["path"], f["name"]): f for f in doc["fragments"]}
    _commit(tree)
    _, new, _ = _scan_json(capsys, tree, tmp_path / "new.json")
    after = {(f["path"], f["name"]): f for f in new["fragments"]}
    key = ("python/search.py", "binary_search")
    assert after[key]["start_line"] == before[key]["start_line"] + 3
    assert after[key]["code_hash"] == before[key]["code_hash"]
    # a T1 copy (comments/layout differ) has the same hash; a T2 copy (renamed) does not
    assert after[("python/legacy_search.py", "binary_search")]["code_hash"] == after[key]["code_hash"]
    assert after[("python/legacy_search.py", "find_position")]["code_hash"] != after[key]["code_hash"]


def test_baseline_reports_only_the_new_pair_and_keeps_shifted_pairs_known(capsys, tree, old, tmp_path):
    base, base_doc = old
    assert (("python/legacy_search.py", "binary_search"), ("python/search.py", "binary_search")) in _pair_names(base_doc)
    new_pair = _commit(tree)

    _, full, _ = _scan_json(capsys, tree, tmp_path / "full.json")
    assert new_pair in _pair_names(full)
    assert _pair_names(full) == _pair_names(base_doc) | {new_pair}  # the commit added exactly one pair

    code, doc, err = _scan_json(capsys, tree, tmp_path / "new.json", "--baseline", base)
    assert code == 0, err
    assert _pair_names(doc) == {new_pair}
    st = doc["stats"]
    assert st["pairs"] == 1 and st["pairs_by_type"]["T1"] == 1
    assert st["baseline_pairs_suppressed"] == len(base_doc["pairs"])
    assert st["baseline_hashed"] is True and st["baseline"] == str(base)
    assert st["classes"] == len(doc["classes"]) == 1
    assert sorted(doc["fragments"][i]["path"] for i in doc["classes"][0]) == ["python/report_words.py", "python/text.py"]

    # the table's summary line says how many known pairs are hidden
    code, out, err = run(capsys, "clones", tree, "--baseline", base)
    assert code == 0, err
    assert f"1 new clone pairs (T1 1, T2 0, T3 0, T4 0) (not shown: {len(base_doc['pairs'])} pairs in the baseline)" in out
    assert "report_words.py" in out and "search.py" not in out

    # SARIF and HTML carry the filtered pairs too
    code, out, _ = run(capsys, "clones", tree, "-f", "sarif", "-q", "--baseline", base)
    assert code == 0 and len(json.loads(out)["runs"][0]["results"]) == 1


def test_baseline_of_the_same_tree_hides_everything(capsys, tree, old, tmp_path):
    base, base_doc = old
    code, doc, _ = _scan_json(capsys, tree, tmp_path / "again.json", "--baseline", base)
    assert code == 0
    assert doc["pairs"] == [] and doc["classes"] == []
    assert doc["stats"]["baseline_pairs_suppressed"] == len(base_doc["pairs"]) > 0
    # the fragments are still all listed (ids unchanged)
    assert len(doc["fragments"]) == len(base_doc["fragments"])


def test_an_edited_fragment_makes_its_pairs_new(capsys, tree, old, tmp_path):
    base, base_doc = old
    text = tree / "python" / "search.py"
    src = text.read_text()
    assert "lo = mid + 1" in src
    text.write_text(src.replace("lo = mid + 1", "lo = mid + 1  # step right\n            steps = 1", 1))
    code, doc, _ = _scan_json(capsys, tree, tmp_path / "new.json", "--baseline", base)
    assert code == 0
    names = _pair_names(doc)
    assert names and all(any(side[0] == "python/search.py" for side in pair) for pair in names)
    assert doc["stats"]["baseline_pairs_suppressed"] == len(base_doc["pairs"]) - len(doc["pairs"]) > 0


def test_a_baseline_without_code_hashes_falls_back_to_line_spans(capsys, tree, old, tmp_path):
    base, base_doc = old
    for f in base_doc["fragments"]:
        del f["code_hash"]
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(base_doc))
    _commit(tree)
    code, doc, _ = _scan_json(capsys, tree, tmp_path / "new.json", "--baseline", legacy)
    assert code == 0
    assert doc["stats"]["baseline_hashed"] is False
    names = _pair_names(doc)
    # the shifted search.py fragments no longer match by lines: their pairs come back; the rest stay hidden
    assert names and all(any(side[0] in ("python/search.py", "python/report_words.py") for side in pair)
                         for pair in names)
    assert not any(pair[0][0].startswith(("c/", "cpp/", "java/")) for pair in names)


@pytest.mark.parametrize("content, what", [
    (None, "does not exist"),
    ("{not json", "not valid JSON"),
    ('{"version": "2.1.0", "runs": []}', "not a twinspect clones JSON report: a SARIF log"),
    ("[1, 2]", "not a twinspect clones JSON report"),
    ('{"fragments": [], "pairs": [{"a": 0, "b": 1}]}', "pair 0 names a fragment id outside"),
    ('{"fragments": [{"path": "a.py"}], "pairs": []}', "fragment 0 lacks path, name"),
    ("DIR", "is a directory"),
])
def test_bad_baseline_files_exit_2_with_one_line(capsys, tree, tmp_path, content, what):
    bad = tmp_path / "bad.json"
    if content == "DIR":
        bad.mkdir()
    elif content is not None:
        bad.write_text(content)
    out = tmp_path / "out.json"
    code, stdout, err = run(capsys, "clones", tree, "--baseline", bad, "-f", "json", "-o", out)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0] and what in lines[0], err
    assert not out.exists() and stdout == ""


def test_the_baseline_file_cannot_be_the_output(capsys, tree, old):
    base, _ = old
    before = base.read_text()
    code, _, err = run(capsys, "clones", tree, "--baseline", base, "-f", "json", "-o", base)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is the --baseline file" in err
    assert base.read_text() == before


# ------------------------------------------------------------------------------ duplicated lines
FUNC = """def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.qty
    if tax:
        total = total * (1 + tax)
    return total
"""  # 7 lines
OTHER = """def parse_config(path):
    with open(path) as fh:
        lines = fh.readlines()
    out = {}
    for ln in lines:
        k, v = ln.split('=', 1)
        out[k.strip()] = v.strip()
    return out
"""  # 8 lines, no clone


@pytest.fixture
def two_files(tmp_path) -> Path:
    """a.py: 3 header lines, FUNC at lines 4-10, a blank line, OTHER at 12-19 (19 lines).
    b.py: a comment and a blank line, then a layout-changed copy of FUNC at lines 3-10 (10 lines)."""
    root = tmp_path / "two"
    root.mkdir()
    (root / "a.py").write_text('"""Shop."""\n\n\n' + FUNC + "\n" + OTHER)
    copy = FUNC.replace("    total = 0\n", "    total = 0  # start\n\n")  # one blank line more: 8 lines
    (root / "b.py").write_text("# copied\n\n" + copy)
    return root


def test_duplicated_lines_match_a_hand_count(capsys, two_files, tmp_path):
    assert len((two_files / "a.py").read_text().splitlines()) == 19
    assert len((two_files / "b.py").read_text().splitlines()) == 10
    code, doc, err = _scan_json(capsys, two_files, tmp_path / "r.json")
    assert code == 0, err
    assert _pair_names(doc) == {(("a.py", "total_price"), ("b.py", "total_price"))}
    st = doc["stats"]
    # total: every physical line of both files (jscpd's "lines"), 19 + 10
    assert st["total_lines"] == 29
    # duplicated: the copy's lines, b.py 3-10 (the first fragment, a.py 4-10, is the original), as jscpd
    assert st["duplicated_lines"] == 8
    assert st["duplicated_lines_pct"] == pytest.approx(100 * 8 / 29, abs=1e-4)
    # both fragments' lines
    assert st["lines_in_clones"] == 7 + 8
    code, out, _ = run(capsys, "clones", two_files)
    assert code == 0 and "duplicated lines 27.6 % (8 of 29)" in out


NEAR_MISS = OTHER.replace("    for ln in lines:\n", "    for ln in lines:\n"
                          "        if not ln.strip() or ln.startswith('#'):\n            continue\n")  # 10 lines


@pytest.fixture
def with_near_miss(two_files) -> Path:
    """two_files plus c.py: OTHER with a statement added (a Type-3 clone of a.py's, lines 1-10)."""
    (two_files / "c.py").write_text(NEAR_MISS)
    return two_files


def test_near_miss_lines_count_apart_from_copies(capsys, with_near_miss, tmp_path):
    code, doc, err = _scan_json(capsys, with_near_miss, tmp_path / "r.json")
    assert code == 0, err
    types = {(doc["fragments"][p["a"]]["path"], doc["fragments"][p["b"]]["path"]): p["type"] for p in doc["pairs"]}
    assert {(Path(a).name, Path(b).name): t for (a, b), t in types.items()} == {("a.py", "b.py"): "T1",
                                                                               ("a.py", "c.py"): "T3"}
    st = doc["stats"]
    assert st["total_lines"] == 29 + 10
    assert st["duplicated_lines"] == 8 + 10  # b.py's copy and c.py's near-miss
    assert st["copied_lines"] == 8  # the T1/T2 pairs only: b.py's copy
    assert st["copied_lines_pct"] == pytest.approx(100 * 8 / 39, abs=1e-4)
    assert "duplicated_types" not in st
    code, out, _ = run(capsys, "clones", with_near_miss)
    assert code == 0 and "duplicated lines 46.2 % (18 of 39; T1/T2 copies 20.5 %)" in out


def test_fail_over_types_counts_only_those_types(capsys, with_near_miss, tmp_path):
    out = tmp_path / "r.json"
    assert run(capsys, "clones", with_near_miss, "-q", "--fail-over", "30")[0] == 1  # 46.2 % over all types
    code, _, err = run(capsys, "clones", with_near_miss, "-f", "json", "-o", out, "-q", "--fail-over", "30",
                       "--fail-over-types", "t2,T1")
    assert code == 0 and err == ""  # 20.5 % over the copies
    st = json.loads(out.read_text())["stats"]
    assert st["duplicated_types"] == ["T1", "T2"] and st["duplicated_lines"] == 8
    code, _, err = run(capsys, "clones", with_near_miss, "-q", "--fail-over", "10", "--fail-over-types", "T1,T2")
    assert code == 1 and err.strip() == "duplicated lines (T1/T2 pairs) 20.5 % > --fail-over 10 %"
    code, _, err = run(capsys, "clones", with_near_miss, "-f", "json", "-o", out, "-q", "--fail-over", "50",
                       "--fail-over-types", "T3")
    assert code == 0 and json.loads(out.read_text())["stats"]["duplicated_lines"] == 10  # c.py's lines


@pytest.mark.parametrize("extra", [("--fail-over", "10", "--fail-over-types", "T1,T5"),
                                   ("--fail-over", "10", "--fail-over-types", ","),
                                   ("--fail-over-types", "T1,T2")])
def test_fail_over_types_bad_input_exits_2(capsys, two_files, tmp_path, extra):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "clones", two_files, "-f", "json", "-o", out, *extra)
    assert code == 2 and err.startswith("error: --fail-over") and "Traceback" not in err
    assert not out.exists()


def test_three_copies_count_two(capsys, two_files, tmp_path):
    (two_files / "c.py").write_text(FUNC)  # lines 1-7 of a 7-line file
    code, doc, _ = _scan_json(capsys, two_files, tmp_path / "r.json")
    assert code == 0 and doc["stats"]["pairs"] == 3
    assert doc["stats"]["total_lines"] == 29 + 7
    assert doc["stats"]["duplicated_lines"] == 8 + 7  # b.py's and c.py's copies; a.py's is the original


def test_fail_over_exits_1_above_and_0_below(capsys, two_files, tmp_path):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "clones", two_files, "-f", "json", "-o", out, "-q", "--fail-over", "20")
    assert code == 1
    assert err.strip() == "duplicated lines 27.6 % > --fail-over 20 %"
    assert json.loads(out.read_text())["stats"]["duplicated_lines_pct"] > 20  # the report is still written
    code, _, err = run(capsys, "clones", two_files, "-f", "json", "-o", out, "-q", "--fail-over", "30")
    assert code == 0 and err == ""
    code, _, _ = run(capsys, "clones", two_files, "-q", "--fail-over", "100")
    assert code == 0


def test_fail_over_counts_the_whole_tree_with_a_baseline(capsys, two_files, tmp_path):
    base = tmp_path / "base.json"
    assert _scan_json(capsys, two_files, base)[0] == 0
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "clones", two_files, "-f", "json", "-o", out, "-q", "--baseline", base,
                       "--fail-over", "20")
    doc = json.loads(out.read_text())
    assert doc["pairs"] == [] and doc["stats"]["baseline_pairs_suppressed"] == 1
    assert code == 1 and "27.6 % > --fail-over 20 %" in err


@pytest.mark.parametrize("pct", ["101", "-1", "nan"])
def test_fail_over_outside_0_100_exits_2(capsys, two_files, tmp_path, pct):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "clones", two_files, "-f", "json", "-o", out, "--fail-over", pct)
    assert code == 2 and err.startswith("error: --fail-over must be a percentage in [0, 100]")
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_large_exact_duplicate_groups(capsys, tmp_path):
    """A group of more than 20 identical functions is reported as an identical group plus a star of
    pairs; a copy added to it is new, the known members' mutual pairs are not."""
    root = tmp_path / "many"
    root.mkdir()
    for i in range(21):
        (root / f"m{i:02d}.py").write_text(FUNC)
    base = tmp_path / "base.json"
    code, base_doc, _ = _scan_json(capsys, root, base)
    assert code == 0 and len(base_doc["identical_groups"]) == 1 and len(base_doc["identical_groups"][0]["members"]) == 21

    code, doc, _ = _scan_json(capsys, root, tmp_path / "same.json", "--baseline", base)
    assert code == 0 and doc["pairs"] == [] and doc["identical_groups"] == []
    assert doc["stats"]["baseline_groups_suppressed"] == 1

    (root / "m21.py").write_text("\n\n" + FUNC)
    code, doc, _ = _scan_json(capsys, root, tmp_path / "grown.json", "--baseline", base)
    assert code == 0
    [group] = doc["identical_groups"]
    frags = doc["fragments"]
    new_id = next(i for i, f in enumerate(frags) if f["path"] == "m21.py")
    assert len(group["members"]) == 22 and sorted(group["baseline_members"]) == sorted(set(group["members"]) - {new_id})
    assert doc["pairs"] and all(new_id in (p["a"], p["b"]) for p in doc["pairs"])


def test_large_group_pairs(capsys, tmp_path):
    """Two groups of more than 20 identical functions that are Type-3 clones of each other are one
    group pair: known when both groups are, new when one side gains a copy."""
    variant = FUNC.replace("    return total\n", "    print('total', total)\n    return total\n")
    root = tmp_path / "groups"
    root.mkdir()
    for i in range(21):
        (root / f"a{i:02d}.py").write_text(FUNC)
        (root / f"b{i:02d}.py").write_text(variant)
    base = tmp_path / "base.json"
    code, base_doc, _ = _scan_json(capsys, root, base)
    assert code == 0 and len(base_doc["group_pairs"]) == 1 and len(base_doc["identical_groups"]) == 2

    code, doc, _ = _scan_json(capsys, root, tmp_path / "same.json", "--baseline", base)
    assert code == 0 and doc["pairs"] == [] and doc["group_pairs"] == [] and doc["identical_groups"] == []
    assert doc["stats"]["baseline_groups_suppressed"] == 3

    (root / "b21.py").write_text(variant)
    code, doc, _ = _scan_json(capsys, root, tmp_path / "grown.json", "--baseline", base)
    assert code == 0
    new_id = next(i for i, f in enumerate(doc["fragments"]) if f["path"] == "b21.py")
    [gp] = doc["group_pairs"]
    assert new_id in gp["a"] + gp["b"] and len(gp["a"]) + len(gp["b"]) == 43
    [group] = doc["identical_groups"]  # the a-group is unchanged, so known
    assert new_id in group["members"]
    assert doc["pairs"] and all(new_id in (p["a"], p["b"]) for p in doc["pairs"])


def test_fail_on_new_exits_1_only_for_pairs_not_in_the_baseline(capsys, tree, old, tmp_path):
    base, base_doc = old
    code, _, err = run(capsys, "clones", tree, "-q", "--fail-on-new")
    assert code == 1 and err.strip() == f"{len(base_doc['pairs'])} clone pairs (--fail-on-new)"
    code, _, err = run(capsys, "clones", tree, "-q", "--fail-on-new", "--baseline", base)
    assert code == 0 and err == ""
    _commit(tree)
    out = tmp_path / "new.json"
    code, _, err = run(capsys, "clones", tree, "-q", "--fail-on-new", "--baseline", base, "-f", "json", "-o", out)
    assert code == 1 and err.strip() == f"1 new clone pair not in the baseline {base} (--fail-on-new)"
    assert len(json.loads(out.read_text())["pairs"]) == 1  # the report is written before the exit


def test_fail_on_new_and_fail_over_both_say_why(capsys, two_files):
    code, _, err = run(capsys, "clones", two_files, "-q", "--fail-on-new", "--fail-over", "10")
    assert code == 1
    assert err.strip().splitlines() == ["1 clone pair (--fail-on-new)", "duplicated lines 27.6 % > --fail-over 10 %"]


# ------------------------------------------------------------------------------------ docs/CI.md
CI_DOC = Path(__file__).resolve().parents[1] / "docs" / "CI.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", CI_DOC.read_text(encoding="utf-8"), re.S)


def test_ci_doc_commands_run_on_the_example_tree(tree):
    """Every line of docs/CI.md's bash blocks, in order, in a copy of the example tree, exits 0
    (an unedited tree: no new pairs, 25 % duplicated lines, under the --fail-over 30 shown)."""
    lines = [ln for block in _blocks("bash") for ln in block.splitlines() if ln.strip()]
    assert any("--baseline" in ln for ln in lines) and any("--update" in ln for ln in lines)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for line in lines:
        done = subprocess.run(["bash", "-c", line], cwd=tree, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    assert (tree / ".twinspect-clones.json").is_file() and (tree / ".twinspect-index").is_dir()


def test_ci_doc_yaml_and_the_hook_manifest_parse():
    yaml = pytest.importorskip("yaml")
    docs = [yaml.safe_load(b) for b in _blocks("yaml")]
    assert len(docs) == 4
    [hook] = yaml.safe_load((CI_DOC.parents[1] / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "twinspect-clones" and hook["entry"] == "twinspect clones"
    assert hook["pass_filenames"] is False and "--fail-on-new" in hook["args"]
    assert docs[0]["repos"][0]["hooks"][0]["id"] == hook["id"]
