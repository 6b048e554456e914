"""Bad inputs of train, compress, repair, models compare, deviate report, the error path and the API
(issue 17): one stderr line naming the file or value, exit code 2, no traceback, nothing written, and
the failure comes before the slow work (the slow function is replaced by one that fails the test).

The models and runs here are stand-ins (a few bytes, a hand-written results.jsonl): every check
under test happens before a model is loaded, so no model is trained or loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.cli_run import run

UNWRITABLE = "/proc/twinspect-test-output"  # a virtual file system: nothing can be created there




def one_line_error(code: int, err: str, *needles: str) -> str:
    """The bad-input contract: exit 2, a single stderr line starting ``error:`` holding ``needles``."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def forbid(monkeypatch, module: str, name: str) -> None:
    """Replace ``module.name`` (the slow step) by a function that fails the test when called."""
    import importlib

    def called(*args, **kwargs):
        pytest.fail(f"{module}.{name} ran although the input was invalid")

    monkeypatch.setattr(importlib.import_module(module), name, called)


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --------------------------------------------------------------------------------------- train
@pytest.mark.parametrize("output, needle", [(UNWRITABLE + ".pt", "cannot write"),
                                            ("{tmp}/blocker/model.pt", "not a directory")])
def test_train_checks_the_output_before_training(capsys, tmp_path, monkeypatch, output, needle):
    pytest.importorskip("torch")
    forbid(monkeypatch, "twinspect.dl.train", "train_model")
    (tmp_path / "blocker").write_text("x")
    target = output.format(tmp=tmp_path)
    code, _, err = run(capsys, "train", "lenet1", "-o", target, "-q")
    one_line_error(code, err, target, needle)
    assert entries(tmp_path) == ["blocker"]


# ------------------------------------------------------------------------------------ compress
@pytest.mark.parametrize("method", ["quantize", "prune", "distill"])
def test_compress_checks_the_output_before_loading_data(capsys, tmp_path, monkeypatch, method):
    pytest.importorskip("torch")
    forbid(monkeypatch, "twinspect.dl.compress", "load_images")
    model = tmp_path / "m.pt"
    model.write_bytes(b"not loaded")
    out = UNWRITABLE + ".pt"
    code, _, err = run(capsys, "compress", model, "-m", method, "-o", out, "-q")
    one_line_error(code, err, out, "cannot write")
    code, _, err = run(capsys, "compress", model, "-m", method, "-o", tmp_path / "m.onnx", "-q")
    one_line_error(code, err, "m.onnx", "TorchScript file")
    (tmp_path / "dir.pt").mkdir()
    code, _, err = run(capsys, "compress", model, "-m", method, "-o", tmp_path / "dir.pt", "-q")
    one_line_error(code, err, "dir.pt", "is a directory")
    assert entries(tmp_path) == ["dir.pt", "m.pt"] and entries(tmp_path / "dir.pt") == []


# -------------------------------------------------------------------------------------- repair
@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A directory standing for a deviation run (the output checks come before it is read)."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text("{}\n")
    (d / "results.jsonl").write_text("")
    return d


def test_repair_output_in_proc_fails_before_any_work(capsys, run_dir, monkeypatch):
    pytest.importorskip("sklearn")
    forbid(monkeypatch, "twinspect.dl.deviate.repair", "collect_inputs")
    code, _, err = run(capsys, "repair", run_dir, "-o", UNWRITABLE)
    one_line_error(code, err, UNWRITABLE, "cannot write")


def test_repair_output_that_is_a_file_is_refused_and_kept(capsys, tmp_path, run_dir, monkeypatch):
    pytest.importorskip("sklearn")
    forbid(monkeypatch, "twinspect.dl.deviate.repair", "collect_inputs")
    existing = tmp_path / "notes.txt"
    existing.write_text("mine\n")
    code, _, err = run(capsys, "repair", run_dir, "-o", existing)
    one_line_error(code, err, str(existing), "not a directory")
    assert existing.read_text() == "mine\n"


@pytest.mark.parametrize("which", ["unrelated", "the run itself"])
def test_repair_never_writes_into_a_foreign_directory(capsys, tmp_path, run_dir, monkeypatch, which):
    pytest.importorskip("sklearn")
    forbid(monkeypatch, "twinspect.dl.deviate.repair", "collect_inputs")
    target = run_dir
    if which == "unrelated":
        target = tmp_path / "photos"
        target.mkdir()
        (target / "cat.jpg").write_bytes(b"\xff\xd8")
    before = entries(target)
    code, _, err = run(capsys, "repair", run_dir, "-o", target)
    one_line_error(code, err, str(target))
    assert entries(target) == before


# ------------------------------------------------------------------------------ models compare
@pytest.fixture
def fake_models(tmp_path, monkeypatch) -> list[Path]:
    """Two model files that must never be loaded: compare_models fails the test when called."""
    pytest.importorskip("torch")
    forbid(monkeypatch, "twinspect.dl.modelclones.compare", "compare_models")
    paths = [tmp_path / "a.onnx", tmp_path / "b.onnx"]
    for p in paths:
        p.write_bytes(b"never loaded")
    return paths


@pytest.mark.parametrize("value", ["7", "-0.1", "nan"])
def test_models_compare_threshold_outside_0_1(capsys, fake_models, value):
    code, _, err = run(capsys, "models", "compare", *fake_models, "--threshold", value)
    one_line_error(code, err, "--threshold", "[0, 1]")


@pytest.mark.parametrize("data, needle", [("foo", "'foo'"), ("{tmp}/missing.npz", "missing.npz"),
                                          ("{tmp}/junk.npz", "junk.npz")])
def test_models_compare_bad_data_fails_before_loading_models(capsys, tmp_path, fake_models, data, needle):
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive")
    code, _, err = run(capsys, "models", "compare", *fake_models, "--data", data.format(tmp=tmp_path))
    one_line_error(code, err, needle)


def test_models_compare_unwritable_plots_leave_no_report(capsys, tmp_path, fake_models):
    report = tmp_path / "report.json"
    code, _, err = run(capsys, "models", "compare", *fake_models, "-f", "json", "-o", report, "--plots", UNWRITABLE)
    one_line_error(code, err, UNWRITABLE, "plots")
    assert not report.exists()


def test_models_compare_unwritable_output(capsys, tmp_path, fake_models):
    code, _, err = run(capsys, "models", "compare", *fake_models, "-f", "json", "-o", UNWRITABLE)
    one_line_error(code, err, UNWRITABLE, "cannot write")
    blocker = tmp_path / "plots"
    blocker.write_text("a file\n")
    code, _, err = run(capsys, "models", "compare", *fake_models, "--plots", blocker)
    one_line_error(code, err, str(blocker), "not a directory")


def test_models_compare_missing_model_and_unknown_student(capsys, tmp_path, fake_models):
    code, _, err = run(capsys, "models", "compare", fake_models[0], tmp_path / "gone.onnx")
    one_line_error(code, err, "gone.onnx", "does not exist")
    code, _, err = run(capsys, "models", "compare", *fake_models, "--distill", "lenet99")
    one_line_error(code, err, "lenet99")


# ------------------------------------------------------------------------------ deviate report
def _run_with_trigger(tmp_path: Path, size: int | None) -> Path:
    """A run directory with one trigger file, cut to ``size`` bytes (None: complete)."""
    run_dir = tmp_path / "run"
    (run_dir / "triggers").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"algorithm": "margin", "dataset": "mnist", "seed_indices": [3]}))
    rec = {"seed_index": 3, "true_label": 1, "status": "found", "success": True, "queries": 5, "time_s": 0.1,
           "orig_label": 1, "comp_label": 7, "trigger": "triggers/3.npz"}
    (run_dir / "results.jsonl").write_text(json.dumps(rec) + "\n")
    rng = np.random.default_rng(0)
    npz = run_dir / "triggers" / "3.npz"
    np.savez_compressed(npz, seed=rng.uniform(0, 255, (28, 28, 1)).astype(np.float32),
                        trigger=rng.uniform(0, 255, (28, 28, 1)).astype(np.float32),
                        orig_probs=np.full(10, 0.1), comp_probs=np.full(10, 0.1))
    if size is not None:
        data = npz.read_bytes()
        npz.write_bytes(data[: size if size >= 0 else len(data) + size])
    return run_dir


def test_deviate_report_of_a_complete_run_works(capsys, tmp_path):
    run_dir = _run_with_trigger(tmp_path, None)
    code, _, err = run(capsys, "deviate", "report", run_dir, "--format", "html")
    assert code == 0, err
    assert (run_dir / "report.html").read_text().count("<div class='card'>") == 1


@pytest.mark.parametrize("size", [0, 20, 300, 2000, -30])
def test_deviate_report_with_a_truncated_trigger_is_one_line(capsys, tmp_path, size):
    run_dir = _run_with_trigger(tmp_path, size)
    code, _, err = run(capsys, "deviate", "report", run_dir, "--format", "html")
    one_line_error(code, err, "3.npz", "trigger file")
    assert not (run_dir / "report.html").exists()
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]


def test_repair_with_a_truncated_trigger_is_one_line(capsys, tmp_path):
    pytest.importorskip("sklearn")
    run_dir = _run_with_trigger(tmp_path, 300)
    (run_dir / "run.json").write_text(json.dumps({"models": {"original": {}, "compressed": {}}}))
    code, _, err = run(capsys, "repair", run_dir, "-o", tmp_path / "rep")
    one_line_error(code, err, "3.npz", "trigger file")
    assert not (tmp_path / "rep").exists()


# ----------------------------------------------------------------------- the one error path
@pytest.mark.parametrize("name", ["config.c:abc:", "x:up:y", ":smile:", "[bold]b[/bold]", "[red]", "a\\[b]"])
def test_errors_print_paths_literally(capsys, tmp_path, monkeypatch, name):
    """rich markup and emoji codes in a user's path are printed as typed (`config.c:abc:` was `config.c🔤`)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "repair", name, "-o", "out")
    line = one_line_error(code, err, "does not exist")
    assert line == f"error: {name}: run directory does not exist"


def test_print_error_uses_no_markup_even_on_a_terminal():
    import io

    from rich.console import Console

    from twinspect.progress import print_plain

    buf = io.StringIO()
    print_plain("x:up:y [b]z[/b] :smile:", prefix="error: ", prefix_style="bold red",
                console=Console(file=buf, force_terminal=True, width=20))
    text = buf.getvalue()
    assert "x:up:y [b]z[/b] :smile:" in text and "\n" == text[-1] and text.count("\n") == 1


# -------------------------------------------------------------------------------- Python API
def test_scan_takes_a_single_path(examples_dir):
    import twinspect

    as_list = twinspect.scan([str(examples_dir)])
    for single in (str(examples_dir), Path(examples_dir)):
        report = twinspect.scan(single)
        assert len(report.fragments) == len(as_list.fragments) > 0
        assert [(p.a, p.b) for p in report.pairs] == [(p.a, p.b) for p in as_list.pairs]


def test_scan_of_a_path_like_object(examples_dir):
    import twinspect

    class Where(os.PathLike):
        def __fspath__(self) -> str:
            return str(examples_dir)

    assert len(twinspect.scan(Where()).fragments) == len(twinspect.scan(examples_dir).fragments)


@pytest.mark.parametrize("field, value, name", [("min_lines", 0, "min_lines"), ("top_k", 0, "top_k"),
                                                ("M", 1, "M"), ("ef_search", 0, "ef_search"),
                                                ("threads", 0, "threads"), ("base_code", 2.0, "base_code"),
                                                ("token_overlap", 0.0, "token_overlap"),
                                                ("max_neighbours", 0, "max_neighbours")])
def test_library_errors_name_fields_not_flags(field, value, name):
    from twinspect import DetectConfig, InputError

    config = DetectConfig(**{field: value})
    with pytest.raises(InputError) as exc:
        config.validate()
    assert name in str(exc.value) and "--" not in str(exc.value)


def test_library_scan_refuses_empty_tree_and_bad_max_file_bytes(tmp_path, examples_dir):
    import twinspect

    with pytest.raises(twinspect.InputError, match="no source files"):
        twinspect.scan(tmp_path)
    with pytest.raises(twinspect.InputError, match="max_file_bytes must be at least 1, got -1"):
        twinspect.scan(examples_dir, max_file_bytes=-1)


def test_readme_api_example_prints_the_most_similar_pairs(repo_root):
    """The README's Python example sorts by similarity (report.pairs keeps its path order)."""
    import re

    readme = (repo_root / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S)
    assert block and "twinspect.scan" in block.group(1)
    code = block.group(1)
    assert "similarity" in code and ("sorted(" in code or "most_similar" in code), code
