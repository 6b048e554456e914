"""Compression: quantised / pruned / distilled twins of a small real LeNet-5, loaded through the adapter."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from twinspect.cli import main  # noqa: E402
from twinspect.dl.adapters import load_classifier, read_metadata  # noqa: E402
from twinspect.dl.architectures import count_parameters, quiet_torch_warnings  # noqa: E402
from twinspect.dl.compress import compress_model  # noqa: E402
from twinspect.dl.train import eval_subset, save_model, train_model  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
TEST_N = 400


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A LeNet-5 trained on 1,000 MNIST images for 3 epochs, saved as TorchScript + metadata."""
    if not (SHARED / "data" / "mnist" / "test.npz").exists():
        pytest.skip("../shared/data/mnist not found")
    res = train_model("lenet5", "mnist", epochs=3, batch_size=32, train_size=1000, test_size=TEST_N, seed=0, quiet=True)
    path = tmp_path_factory.mktemp("orig") / "lenet5.pt"
    save_model(res.module, path, res.meta)
    return path


@pytest.fixture(scope="module")
def test_images():
    from twinspect.dl.data import load_images

    return eval_subset(*load_images("mnist"), TEST_N)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def graph_text(path: Path) -> str:
    with quiet_torch_warnings():
        return str(torch.jit.load(str(path)).inlined_graph)


def check_twin(original: Path, compressed: Path, x: np.ndarray, y: np.ndarray, min_agreement: float) -> dict:
    """Load both through load_classifier, check agreement and the reported compression block."""
    orig, comp = load_classifier(original), load_classifier(compressed)
    assert comp.input_shape == orig.input_shape and comp.num_classes == orig.num_classes
    lo, lc = orig.predict(x), comp.predict(x)
    assert np.mean(lo == lc) >= min_agreement
    info = read_metadata(compressed)["compression"]
    assert info["disagreements"] == int(np.sum(lo != lc))
    assert info["original_accuracy"] == pytest.approx(np.mean(lo == y))
    assert info["compressed_accuracy"] == pytest.approx(np.mean(lc == y))
    assert info["test_size"] == len(y)
    return info


def test_static_quantisation_makes_an_int8_twin(original, test_images, tmp_path):
    before = digest(original)
    out = tmp_path / "q.pt"
    res = compress_model(original, "quantize", out, calib_size=64, test_size=TEST_N, quiet=True)
    assert digest(original) == before  # the original is left as is
    text = graph_text(out)
    assert "quantized::conv2d_relu" in text and "quantized::linear" in text
    info = check_twin(original, out, *test_images, min_agreement=0.95)
    assert info["method"] == "quantize" and info["mode"] == "static" and info["calib_size"] == 64
    assert res.disagreements == info["disagreements"]


def test_dynamic_quantisation_quantises_linear_layers(original, test_images, tmp_path):
    out = tmp_path / "qd.pt"
    compress_model(original, "quantize", out, dynamic=True, test_size=TEST_N, quiet=True)
    text = graph_text(out)
    assert "quantized::linear_dynamic" in text and "quantized::conv2d" not in text
    assert check_twin(original, out, *test_images, min_agreement=0.95)["mode"] == "dynamic"


def _sparsity(path: Path) -> float:
    with quiet_torch_warnings():
        sd = torch.jit.load(str(path)).state_dict()
    weights = [v for k, v in sd.items() if k.endswith("weight") and v.dim() >= 2]
    return sum(int((w == 0).sum()) for w in weights) / sum(w.numel() for w in weights)


@pytest.mark.parametrize("target", [0.5, 0.7])
def test_magnitude_pruning_hits_the_target_sparsity(original, test_images, tmp_path, target):
    out = tmp_path / "p.pt"
    compress_model(original, "prune", out, sparsity=target, test_size=TEST_N, quiet=True)
    assert abs(_sparsity(out) - target) <= 0.01
    assert _sparsity(original) < 0.01
    info = check_twin(original, out, *test_images, min_agreement=0.8)
    assert abs(info["sparsity"] - target) <= 0.01


def test_pruning_with_fine_tuning_keeps_the_mask(original, test_images, tmp_path):
    out = tmp_path / "pf.pt"
    compress_model(original, "prune", out, sparsity=0.8, finetune_epochs=1, train_size=320, batch_size=32,
                   test_size=TEST_N, quiet=True)
    assert abs(_sparsity(out) - 0.8) <= 0.01
    check_twin(original, out, *test_images, min_agreement=0.7)


def test_distillation_trains_a_smaller_student(original, test_images, tmp_path):
    out = tmp_path / "d.pt"
    compress_model(original, "distill", out, student="lenet4", epochs=3, batch_size=32, train_size=1000,
                   test_size=TEST_N, quiet=True)
    meta = read_metadata(out)
    assert meta["arch"] == "lenet4"
    info = check_twin(original, out, *test_images, min_agreement=0.6)
    assert info["student_parameters"] < read_metadata(original)["parameters"]
    with quiet_torch_warnings():
        n_student = sum(p.numel() for p in torch.jit.load(str(out)).parameters())
    assert n_student == info["student_parameters"] < count_parameters(torch.jit.load(str(original)))


@pytest.mark.slow
def test_distillation_from_a_keras_teacher(test_images, tmp_path):
    h5 = SHARED / "data" / "models" / "dflare" / "lenet1.h5"
    if not h5.exists():
        pytest.skip("DFlare lenet1.h5 not found")
    pytest.importorskip("keras")
    out = tmp_path / "student.pt"
    res = compress_model(h5, "distill", out, data="mnist", student="lenet4", epochs=2, batch_size=32, train_size=1000,
                         test_size=TEST_N, quiet=True)
    assert res.original_accuracy > 0.95
    check_twin(h5, out, *test_images, min_agreement=0.6)


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_cli_compress_reports_the_deviation(original, tmp_path, capsys):
    out = tmp_path / "cli.pt"
    code, stdout, _ = run_cli(["compress", str(original), "--method", "prune", "--sparsity", "0.5", "-o", str(out),
                               "--test-size", "100", "-q", "-f", "json"], capsys)
    assert code == 0 and out.exists()
    info = read_metadata(out)["compression"]
    summary = json.loads(stdout)  # -q hides the table; -f json is the report itself
    assert summary["disagree"] == info["disagreements"] and summary["model"] == str(out)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["compress", "{tmp}/missing.pt", "-m", "prune", "-o", "{tmp}/x.pt"], "does not exist"),
        (["compress", "{orig}", "-m", "zip", "-o", "{tmp}/x.pt"], "unknown compression method"),
        (["compress", "{orig}", "-m", "prune", "--sparsity", "0", "-o", "{tmp}/x.pt"], "sparsity"),
        (["compress", "{orig}", "-m", "prune", "--sparsity", "1.0", "-o", "{tmp}/x.pt"], "sparsity"),
        (["compress", "{orig}", "-m", "distill", "--student", "resnet1000", "-o", "{tmp}/x.pt"], "unknown student"),
        (["compress", "{orig}", "-m", "prune", "-o", "{orig}"], "original"),
    ],
)
def test_cli_compress_bad_inputs_exit_2_with_one_line(original, tmp_path, capsys, args, needle):
    code, _, err = run_cli([a.format(tmp=tmp_path, orig=original) for a in args], capsys)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.pt").exists()


def test_quantising_a_quantised_model_is_refused(original, tmp_path, capsys):
    q = tmp_path / "q.pt"
    compress_model(original, "quantize", q, dynamic=True, test_size=50, quiet=True)
    code, _, err = run_cli(["compress", str(q), "-m", "quantize", "-o", str(tmp_path / "qq.pt")], capsys)
    assert code == 2 and "q.pt" in err and len(err.strip().splitlines()) == 1


def test_quantising_a_non_torchscript_model_points_to_distillation(tmp_path, capsys):
    fake = tmp_path / "model.h5"
    fake.write_bytes(b"\x89HDF\r\n")
    code, _, err = run_cli(["compress", str(fake), "-m", "quantize", "--data", "mnist", "-o", str(tmp_path / "q.pt")], capsys)
    assert code == 2 and "model.h5" in err and "distill" in err and len(err.strip().splitlines()) == 1
