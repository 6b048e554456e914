"""`twinspect similitude`: JSON contract, formats, plots, labels and every bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import silhouette_score

from tests.cli_run import run

EXAMPLES = Path(__file__).resolve().parents[3] / "twinspect" / "examples" / "similitude"




@pytest.fixture
def corpus(tmp_path) -> Path:
    """Two labelled folders (sorts, scans) of C programs plus one file that does not parse."""
    for label, names in {"sorts": ["bubble_sort", "gnome_sort", "quick_sort"],
                         "scans": ["min", "max", "sum"]}.items():
        (tmp_path / label).mkdir()
        for n in names:
            shutil.copy(EXAMPLES / "c" / f"{n}.c", tmp_path / label / f"{n}.c")
    (tmp_path / "scans" / "broken.c").write_text("int f( {\n")
    return tmp_path


def test_json_contract(capsys, corpus):
    code, out, _ = run(capsys, "similitude", corpus, "--labels", "dirs", "--format", "json", "-q",
                       "--measure", "normalized-node-sym")
    assert code == 0
    rep = json.loads(out)
    assert set(rep) >= {"measure", "programs", "matrix", "silhouette", "clusters", "skipped"}
    assert rep["measure"] == "normalized-node-sym"
    assert [p["path"] for p in rep["programs"]] == [
        "scans/max.c", "scans/min.c", "scans/sum.c", "sorts/bubble_sort.c", "sorts/gnome_sort.c",
        "sorts/quick_sort.c"]
    for p in rep["programs"]:
        assert set(p) >= {"id", "path", "label", "functions", "nodes", "edges"}
        assert p["label"] == p["path"].split("/")[0] and p["nodes"] >= 2
    m = np.array(rep["matrix"])
    assert m.shape == (6, 6) and np.allclose(m, m.T) and m.min() >= 0 and m.max() <= 1
    # silhouette as scikit-learn computes it on 1 - matrix
    d = 1 - m
    np.fill_diagonal(d, 0)
    expected = silhouette_score(d, [p["label"] for p in rep["programs"]], metric="precomputed")
    assert rep["silhouette"] == pytest.approx(expected, abs=1e-5)
    assert len(rep["clusters"]) == 6
    # the unparsable file is reported, not scored
    assert rep["skipped"] == [{"path": "scans/broken.c", "reason": rep["skipped"][0]["reason"]}]
    assert "does not parse" in rep["skipped"][0]["reason"]


def test_csv_output_file_clusters_and_plots(capsys, corpus, tmp_path):
    out_file = tmp_path / "out" / "m.csv"
    code, out, _ = run(capsys, "similitude", corpus / "sorts", "-f", "csv", "-o", out_file, "--clusters", "2",
                       "--plots", tmp_path / "plots", "-q")
    assert code == 0 and out == ""
    lines = out_file.read_text().splitlines()
    assert lines[0] == "path,bubble_sort.c,gnome_sort.c,quick_sort.c" and len(lines) == 4
    assert (tmp_path / "plots" / "heatmap.png").stat().st_size > 0
    assert (tmp_path / "plots" / "mds.png").stat().st_size > 0
    assert not (tmp_path / "plots" / "pca.png").exists()
    code, _, _ = run(capsys, "similitude", corpus / "sorts", "-f", "csv", "-o", out_file, "--plots",
                     tmp_path / "plots", "--projection", "pca", "-q")
    assert code == 0 and (tmp_path / "plots" / "pca.png").stat().st_size > 0


def test_output_and_plots_are_named_on_stderr_unless_quiet(capsys, corpus, tmp_path):
    out_file = tmp_path / "m.json"
    code, out, err = run(capsys, "similitude", corpus / "sorts", "-f", "json", "-o", out_file, "--plots", tmp_path / "p")
    assert code == 0 and out == ""
    assert f"wrote {out_file} (3 programs, json)" in err and f"wrote 2 plots to {tmp_path / 'p'}" in err


def test_unwritable_output_fails_before_scoring(capsys, corpus, tmp_path, monkeypatch):
    import twinspect.code.similitude.analysis as analysis

    monkeypatch.setattr(analysis, "analyze", lambda *a, **k: pytest.fail("scored before checking -o"))
    (tmp_path / "file").write_text("x")
    code, out, err = run(capsys, "similitude", corpus / "sorts", "-o", tmp_path / "file" / "r.json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "report file" in err


def test_lav_reports_iterations_and_runs_in_workers(capsys, corpus):
    code, out, _ = run(capsys, "similitude", corpus / "sorts", "--measure", "lav", "--workers", "2", "-f", "json", "-q")
    rep = json.loads(out)
    d = rep["details"]["lav"]
    assert code == 0 and d["eps"] == 1e-4 and d["pairs"] == 3 and d["unconverged_pairs"] == 0
    assert 1 <= d["iterations_mean"] <= d["iterations_max"] < d["max_iter"]
    code, out1, _ = run(capsys, "similitude", corpus / "sorts", "--measure", "lav", "-j", "1", "-f", "json", "-q")
    assert json.loads(out1)["matrix"] == rep["matrix"]
    code, out, _ = run(capsys, "similitude", corpus / "sorts", "--measure", "lav")
    assert code == 0 and "LAV iterations to eps 0.0001" in out
    code, out, _ = run(capsys, "similitude", corpus / "sorts", "--measure", "lav", "-q")  # quiet: no table
    assert code == 0 and out == ""


def test_fewer_than_two_labels_gives_null_silhouette(capsys, corpus):
    code, out, _ = run(capsys, "similitude", corpus / "sorts", "--labels", "dirs", "-f", "json", "-q")
    rep = json.loads(out)
    assert code == 0 and rep["silhouette"] is None and len(rep["matrix"]) == 3


def test_labels_csv(capsys, corpus, tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("path,label\nsorts/bubble_sort.c,swap\nsorts/gnome_sort.c,swap\nscans/min.c,scan\n"
                      "scans/max.c,scan\n")
    code, out, _ = run(capsys, "similitude", corpus / "sorts", corpus / "scans", "--labels", labels, "-f", "json", "-q")
    rep = json.loads(out)
    assert code == 0
    by = {p["path"]: p["label"] for p in rep["programs"]}
    assert by["sorts/bubble_sort.c"] == "swap" and by["scans/sum.c"] is None
    assert rep["silhouette"] is not None


def test_program_per_dir(capsys, corpus):
    (corpus / "scans" / "broken.c").unlink()
    code, out, _ = run(capsys, "similitude", corpus, "--program-per-dir", "-f", "json", "-q")
    rep = json.loads(out)
    assert code == 0 and [p["path"] for p in rep["programs"]] == ["scans", "sorts"]
    assert rep["programs"][1]["functions"] == 2 + 2 + 3  # bubble+main, gnome+main, partition+quick_sort+main


@pytest.mark.parametrize("args,message", [
    (["missing_dir"], "does not exist"),
    (["{corpus}", "--measure", "bogus"], "unknown measure"),
    (["{corpus}", "--labels", "{labels}"], "not among the programs"),
    (["{corpus}", "--format", "xml"], "unknown format"),
    (["{corpus}", "--projection", "tsne"], "unknown projection"),
    (["{corpus}", "--measure", "lav", "--workers", "0"], "--workers must be at least 1"),
])
def test_bad_input_exits_2_with_one_line(capsys, corpus, tmp_path, args, message):
    labels = tmp_path / "labels.csv"
    labels.write_text("sorts/nowhere.c,x\n")
    args = [a.format(corpus=corpus, labels=labels) for a in args]
    code, out, err = run(capsys, "similitude", *args, "-q")
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_table_output(capsys, corpus):
    code, out, _ = run(capsys, "similitude", corpus / "scans")
    assert code == 0 and "silhouette n/a" in out and "skipped broken.c" in out


def test_table_report_to_a_file_is_the_table_not_json(capsys, corpus, tmp_path):
    """`-o FILE` with the default `-f table` writes the tables as text (docs/CLI.md), nothing on stdout."""
    out_file = tmp_path / "sim.txt"
    code, out, _ = run(capsys, "similitude", corpus / "scans", "-o", out_file, "-q")
    text = out_file.read_text()
    assert code == 0 and out == ""
    assert "silhouette n/a" in text and "skipped broken.c" in text and not text.lstrip().startswith("{")
