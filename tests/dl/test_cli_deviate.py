"""``twinspect deviate``: bad inputs exit 2 without creating the run directory; a small real run + resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinspect.cli import main

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
MODELS = SHARED / "data" / "models" / "dflare"


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def need_shared():
    if not (MODELS / "lenet1.h5").exists():
        pytest.skip(f"shared DFlare models not found under {MODELS}")


def assert_user_error(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err
    assert "error:" in err
    for n in needles:
        assert n in err, err


def assert_options_rejected(cases, out, capsys):
    """Each ``(argv, message)``: ``deviate --pair lenet1 --seeds 1 ARGV -o OUT`` is a one-line user error naming
    ``message``, with nothing written at ``out``."""
    for argv, msg in cases:
        code, _, err = run(["deviate", "--pair", "lenet1", "--seeds", "1", *argv, "-o", str(out), "--quiet"], capsys)
        assert_user_error(code, err, msg)
        assert not out.exists()


def test_missing_model_file(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run(["deviate", str(tmp_path / "nope.h5"), str(tmp_path / "nope.lite"), "--data", "mnist",
                        "-o", str(out), "--quiet"], capsys)
    assert_user_error(code, err, "nope.h5")
    assert not out.exists()


def test_bad_options(tmp_path, capsys):
    out = tmp_path / "run"
    a, b = str(tmp_path / "a.h5"), str(tmp_path / "b.lite")
    cases = [
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--algorithm", "nope"], "algorithm"),
        (["deviate", a, b, "--pair", "lenet1", "-o", str(out)], "--pair"),
        (["deviate", "--pair", "lenet9", "-o", str(out)], "lenet9"),
        (["deviate", a, "-o", str(out), "--data", "mnist"], "COMPRESSED"),
        (["deviate", a, b, "-o", str(out)], "--data"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--format", "xml"], "--format"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--workers", "0"], "--workers"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--timeout", "0"], "--max-queries"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--max-linf", "0"], "--max-linf"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--max-linf", "300"], "--max-linf"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--min-ssim", "0"], "--min-ssim"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--min-ssim", "1.5"], "--min-ssim"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--require", "everything"], "--require"),
        (["deviate", a, b, "--data", "mnist"], "--output"),
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--pixels", "uint8-wrap"], "--pixels"),  # margin: float
        (["deviate", a, b, "--data", "mnist", "-o", str(out), "--preset", "reference"], "--preset"),  # DFlare's
        (["deviate", "report"], "RUN_DIR"),
        (["deviate", "report", str(tmp_path), "--format", "pdf"], "--format"),
        (["deviate", "report", str(tmp_path / "none")], "does not exist"),
        (["deviate", "report", str(tmp_path)], "results.jsonl"),
    ]
    for argv, needle in cases:
        code, _, err = run(argv + ["--quiet"], capsys)
        assert_user_error(code, err, needle)
        assert not out.exists()


def test_bad_data_file(tmp_path, capsys):
    # the data is validated before the (slow) model loading, so these need only existing model files
    out = tmp_path / "run"
    orig, comp = tmp_path / "orig.tflite", tmp_path / "comp.lite"
    orig.write_bytes(b"x")
    comp.write_bytes(b"x")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not an npz file")
    code, _, err = run(["deviate", str(orig), str(comp), "--data", str(bad), "-o", str(out), "--quiet"], capsys)
    assert_user_error(code, err, "bad.npz")
    assert not out.exists()
    small = tmp_path / "small.npz"
    np.savez(small, x=np.zeros((3, 28, 28), np.uint8))
    code, _, err = run(["deviate", str(orig), str(comp), "--data", str(small), "--seeds", "5", "-o", str(out),
                        "--quiet"], capsys)
    assert_user_error(code, err, "--seeds 5")
    assert not out.exists()
    # a corrupt model file is reported by name
    code, _, err = run(["deviate", str(orig), str(comp), "--data", str(small), "--seeds", "2", "-o", str(out),
                        "--quiet"], capsys)
    assert_user_error(code, err, "orig.tflite")
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.shared
def test_mismatched_data_and_models_with_real_pair(tmp_path, capsys):
    need_shared()
    out = tmp_path / "run"
    orig, comp = str(MODELS / "lenet1.h5"), str(MODELS / "lenet1-quan.lite")
    # CIFAR-10 images do not fit the MNIST models
    code, _, err = run(["deviate", orig, comp, "--data", "cifar10", "--seeds", "2", "-o", str(out), "--quiet"], capsys)
    assert_user_error(code, err, "(28, 28, 1)")
    assert not out.exists()
    # an MNIST model and a CIFAR-10 model cannot be compared
    code, _, err = run(["deviate", orig, str(MODELS / "resnet-quan.lite"), "--data", "mnist", "-o", str(out),
                        "--quiet"], capsys)
    assert_user_error(code, err, "input shapes differ")
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.ci
def test_small_real_run_json_output_and_resume(tmp_path, capsys):
    need_shared()
    out = tmp_path / "run"
    base = ["deviate", "--pair", "lenet1", "--max-queries", "2000", "--timeout", "120", "-o", str(out), "--quiet"]
    code, stdout, err = run(base + ["--seeds", "2", "--format", "json"], capsys)
    assert code == 0, err
    summary = json.loads(stdout)
    # the default (-a auto): the guided search, since the Keras original gives an input gradient
    assert summary["seeds"] == 2 and summary["algorithm"] == "guided"
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    # an existing run is not overwritten without --resume
    code, _, err = run(base + ["--seeds", "3"], capsys)
    assert_user_error(code, err, "--resume")
    # resume with one more seed: only the new seed runs
    first = (out / "results.jsonl").read_text()
    code, stdout, err = run(base[:-1] + ["--seeds", "3", "--resume"], capsys)  # without --quiet: the table
    assert code == 0, err
    text = (out / "results.jsonl").read_text()
    assert text.startswith(first) and len(text.splitlines()) == 3
    assert "success rate" in stdout  # the table
    cfg = json.loads((out / "run.json").read_text())
    assert len(cfg["seed_indices"]) == 3 and cfg["dataset"] == "mnist"
    # a different configuration is refused on resume
    code, _, err = run(base[:-1] + ["--seeds", "3", "--resume", "--algorithm", "diffchaser", "--quiet"], capsys)
    assert_user_error(code, err, "different configuration")
    # the HTML report of the run: one card per trigger, self-contained
    code, stdout, err = run(["deviate", "report", str(out), "--format", "html"], capsys)
    assert code == 0, err
    page = (out / "report.html").read_text()
    successes = sum(json.loads(line)["success"] for line in text.splitlines())
    assert page.count("<div class='card'>") == successes
    assert page.count("data:image/png;base64,") == 3 * successes and "http" not in page
    # the summary as a JSON report file, written with -o like every report
    code, stdout, err = run(["deviate", "report", str(out), "-f", "json", "-o", str(tmp_path / "s.json")], capsys)
    assert code == 0 and stdout == "", err
    assert json.loads((tmp_path / "s.json").read_text())["seeds"] == 3


def _fake_inputs(tmp_path):
    """Model files that exist (the run directory is checked before they are loaded) and 2 seeds."""
    orig, comp = tmp_path / "orig.tflite", tmp_path / "comp.lite"
    orig.write_bytes(b"x")
    comp.write_bytes(b"x")
    small = tmp_path / "small.npz"
    np.savez(small, x=np.zeros((2, 28, 28), np.uint8))
    return str(orig), str(comp), str(small)


def test_unwritable_output_is_one_line_before_any_model_work(tmp_path, capsys):
    orig, comp, data = _fake_inputs(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("a file, not a directory\n")
    for out in (afile / "run", afile / "deeper" / "run", afile):
        code, stdout, err = run(["deviate", orig, comp, "--data", data, "--seeds", "2", "-o", str(out), "--quiet"],
                                capsys)
        assert_user_error(code, err, str(out))
        assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
        assert "orig.tflite" not in err  # failed on the output, before the (corrupt) models were loaded
    assert afile.read_text() == "a file, not a directory\n"


def test_read_only_file_system_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    import errno

    orig, comp, data = _fake_inputs(tmp_path)
    out = tmp_path / "ro" / "run"

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    code, _, err = run(["deviate", orig, comp, "--data", data, "--seeds", "2", "-o", str(out), "--quiet"], capsys)
    assert_user_error(code, err, str(out), "Read-only file system")
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    monkeypatch.undo()
    assert not (tmp_path / "ro").exists()


def test_output_check_leaves_nothing_behind(tmp_path, capsys):
    # a writable output passes the check; the corrupt model then fails, and no directory is left
    orig, comp, data = _fake_inputs(tmp_path)
    out = tmp_path / "a" / "b" / "run"
    code, _, err = run(["deviate", orig, comp, "--data", data, "--seeds", "2", "-o", str(out), "--quiet"], capsys)
    assert_user_error(code, err, "orig.tflite")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_unrelated_non_empty_output_is_refused_before_any_work(tmp_path, capsys, monkeypatch, resume):
    # `clones index` refuses the same: a folder that is not a run is never written into
    from twinspect.dl import data as dl_data

    monkeypatch.setattr(dl_data, "load_images", lambda *a, **k: pytest.fail("loaded data for a refused -o"))
    orig, comp, data = _fake_inputs(tmp_path)
    out = tmp_path / "holiday"
    out.mkdir()
    (out / "photo.jpg").write_bytes(b"\xff\xd8")
    code, _, err = run(["deviate", orig, comp, "--data", data, "--seeds", "2", "-o", str(out), "--quiet", *resume],
                       capsys)
    assert_user_error(code, err, str(out), "not a deviation run")
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    assert sorted(p.name for p in out.iterdir()) == ["photo.jpg"]


def test_empty_existing_output_directory_is_accepted(tmp_path):
    from twinspect.dl.deviate.cli import check_run_dir

    out = tmp_path / "run"
    out.mkdir()
    check_run_dir(out)  # an empty directory may hold a new run
    assert list(out.iterdir()) == []


def test_output_in_proc_is_one_line(tmp_path, capsys):
    orig, comp, data = _fake_inputs(tmp_path)
    code, _, err = run(["deviate", orig, comp, "--data", data, "-o", "/proc/twinspect-run", "--quiet"], capsys)
    assert_user_error(code, err, "/proc/twinspect-run", "cannot")
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err


def test_seeds_below_1_fail_before_the_data_is_loaded(tmp_path, capsys, monkeypatch):
    from twinspect.dl import data as dl_data

    monkeypatch.setattr(dl_data, "load_images", lambda *a, **k: pytest.fail("loaded data for --seeds 0"))
    orig, comp, data = _fake_inputs(tmp_path)
    out = tmp_path / "run"
    code, _, err = run(["deviate", orig, comp, "--data", data, "--seeds", "0", "-o", str(out), "--quiet"], capsys)
    assert_user_error(code, err, "--seeds must be >= 1, got 0")
    assert not out.exists()


def test_guided_search_from_the_cli(tmp_path, capsys):
    """``-a guided`` on the shared LeNet-1 pair (a Keras original on the torch backend gives the
    gradient): a real run whose records carry the approach's gradient count; a TFLite original
    without --surrogate, and --surrogate with the margin search, are one-line errors with nothing
    written; -a auto (the default) resolves to the search the original allows."""
    need_shared()
    out = tmp_path / "run"
    code, stdout, err = run(["deviate", "--pair", "lenet1", "-a", "guided", "--seeds", "2", "--max-queries", "500",
                             "--timeout", "120", "-o", str(out), "--quiet", "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["algorithm"] == "guided"
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all(r["gradient_evaluations"] > 0 for r in recs if r["status"] != "disagree_at_seed")
    bad = tmp_path / "bad"
    code, _, err = run(["deviate", str(MODELS / "lenet1-quan.lite"), str(MODELS / "lenet1.h5"), "--preprocess", "unit",
                        "--data", "mnist", "--seeds", "1", "-a", "guided", "-o", str(bad), "--quiet"], capsys)
    assert_user_error(code, err, "surrogate")
    assert not bad.exists()
    code, _, err = run(["deviate", "--pair", "lenet1", "--seeds", "1", "-a", "margin", "--surrogate",
                        str(MODELS / "lenet1.h5"), "-o", str(bad), "--quiet"], capsys)
    assert_user_error(code, err, "--surrogate applies to --algorithm guided")
    assert not bad.exists()
    # -a auto: the guided search for a Keras original, the margin search for a TFLite one (no gradient)
    for orig, comp, want in ((MODELS / "lenet1.h5", MODELS / "lenet1-quan.lite", "guided"),
                             (MODELS / "lenet1-quan.lite", MODELS / "lenet1.h5", "margin")):
        out = tmp_path / f"auto-{want}"
        code, stdout, err = run(["deviate", str(orig), str(comp), "--preprocess", "unit", "--data", "mnist", "--seeds", "1",
                                 "-a", "auto", "--max-queries", "300", "-o", str(out), "--quiet", "--format", "json"], capsys)
        assert code == 0, err
        assert json.loads(stdout)["algorithm"] == want
        assert json.loads((out / "run.json").read_text())["algorithm"] == want


def test_second_search_option(tmp_path, capsys):
    """``--second margin`` reaches the guided search (run.json records it, with the default cap of its queries); with
    a search that has no second search, or an unknown or negative value, it is a one-line error with nothing written; under -a auto a
    TFLite original (no gradient) runs the margin search, for which the option has nothing to add."""
    need_shared()
    out = tmp_path / "run"
    code, stdout, err = run(["deviate", "--pair", "lenet1", "-a", "guided", "--second", "margin", "--seeds", "2",
                             "--max-queries", "300", "--timeout", "120", "-o", str(out), "--quiet", "--format", "json"],
                            capsys)
    assert code == 0, err
    params = json.loads((out / "run.json").read_text())["params"]
    assert params["second"] == "margin" and params["second_max_queries"] == 200  # the cap is on by default
    bad = tmp_path / "bad"
    assert_options_rejected(((["-a", "margin", "--second", "margin"], "--second applies to --algorithm guided"),
                             (["-a", "guided", "--second", "dflare"], "unknown --second"),
                             (["-a", "margin", "--second-max-queries", "50"], "--second-max-queries applies to --algorithm guided"),
                             (["-a", "guided", "--second-max-queries", "-1"], "--second-max-queries must be >= 0")), bad, capsys)
    out = tmp_path / "auto"
    code, stdout, err = run(["deviate", str(MODELS / "lenet1-quan.lite"), str(MODELS / "lenet1.h5"), "--preprocess", "unit",
                             "--data", "mnist", "--seeds", "1", "--second", "margin", "--max-queries", "300", "-o", str(out),
                             "--quiet", "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["algorithm"] == "margin"


def test_minimize_pixel_order_option(tmp_path, capsys):
    """The margin search minimises in SSIM order by default and ``--minimize-pixel-order largest`` restores the old
    order (run.json records which ran); an unknown order, or the option with DFlare, is a one-line error with
    nothing written."""
    need_shared()
    for flag, want in (([], "ssim"), (["--minimize-pixel-order", "largest"], "largest")):
        out = tmp_path / f"run-{want}"
        code, _, err = run(["deviate", "--pair", "lenet1", "-a", "margin", *flag, "--seeds", "1", "--max-queries", "300",
                            "--timeout", "120", "-o", str(out), "--quiet", "--format", "json"], capsys)
        assert code == 0, err
        assert json.loads((out / "run.json").read_text())["params"]["minimize_pixel_order"] == want
    bad = tmp_path / "bad"
    assert_options_rejected(((["-a", "margin", "--minimize-pixel-order", "random"], "unknown --minimize-pixel-order"),
                             (["-a", "dflare", "--minimize-pixel-order", "ssim"], "--minimize-pixel-order applies to --algorithm")),
                            bad, capsys)


def test_minimize_flat_option(tmp_path, capsys):
    """The flat-region pass is on by default for the margin search (run.json records it), ``--no-minimize-flat``
    turns it off, and for DFlare it is a one-line error with nothing written."""
    need_shared()
    for flag, want in (([], True), (["--no-minimize-flat"], False)):
        out = tmp_path / f"run{int(want)}"
        code, _, err = run(["deviate", "--pair", "lenet1", "-a", "margin", *flag, "--seeds", "1", "--max-queries", "300",
                            "--timeout", "120", "-o", str(out), "--quiet", "--format", "json"], capsys)
        assert code == 0, err
        assert json.loads((out / "run.json").read_text())["params"]["minimize_flat"] is want
    bad = tmp_path / "bad"
    code, _, err = run(["deviate", "--pair", "lenet1", "-a", "dflare", "--minimize-flat", "--seeds", "1", "-o", str(bad),
                        "--quiet"], capsys)
    assert_user_error(code, err, "--minimize-flat applies to --algorithm margin, guided or auto")
    assert not bad.exists()


def test_pair_restarts_option(tmp_path, capsys):
    """``--pair-restarts N`` reaches the guided search (run.json records it, next to the pair's direction it follows);
    with a search that has no pair's direction, or a negative value, it is a one-line error with nothing written."""
    need_shared()
    out = tmp_path / "run"
    code, _, err = run(["deviate", "--pair", "lenet1", "-a", "guided", "--pair-restarts", "4", "--seeds", "1",
                        "--max-queries", "300", "--timeout", "120", "-o", str(out), "--quiet", "--format", "json"], capsys)
    assert code == 0, err
    params = json.loads((out / "run.json").read_text())["params"]
    assert params["pair_restarts"] == 4 and "pair_gradient" in params
    bad = tmp_path / "bad"
    assert_options_rejected(((["-a", "dflare", "--pair-restarts", "4"], "--pair-restarts applies to --algorithm guided"),
                             (["-a", "guided", "--pair-restarts", "-1"], "--pair-restarts must be >= 0")), bad, capsys)
