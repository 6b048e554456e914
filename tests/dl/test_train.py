"""Training: short real runs on a few hundred MNIST images; save → load_classifier round trip; CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from twinspect.cli import main  # noqa: E402
from twinspect.dl.adapters import load_classifier  # noqa: E402
from twinspect.dl.train import augment_crop_flip, eval_subset, predict_logits, save_model, train_model  # noqa: E402
from twinspect.errors import InputError  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
needs_mnist = pytest.mark.skipif(
    not (SHARED / "data" / "mnist" / "test.npz").exists(), reason="../shared/data/mnist not found"
)


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture(scope="module")
def small_lenet5():
    """LeNet-5 trained for 3 epochs on 500 MNIST images (75 steps), evaluated on 300 test images."""
    if not (SHARED / "data" / "mnist" / "test.npz").exists():
        pytest.skip("../shared/data/mnist not found")
    return train_model("lenet5", "mnist", epochs=3, batch_size=20, train_size=500, test_size=300, seed=3, quiet=True)


@needs_mnist
def test_short_training_learns_and_records_metadata(small_lenet5):
    res = small_lenet5
    assert res.test_accuracy > 0.4  # chance is 0.1
    assert res.log.loss[-1] < res.log.loss[0]
    meta = res.meta
    assert meta["arch"] == "lenet5" and meta["dataset"] == "mnist"
    assert meta["input_shape"] == [28, 28, 1] and meta["num_classes"] == 10 and meta["output"] == "logits"
    assert meta["preprocess"]["layout"] == "NCHW" and meta["preprocess"]["scale"] == 255.0
    assert meta["training"]["train_size"] == 500 and meta["test_size"] == 300
    assert meta["accuracy"] == res.test_accuracy


@needs_mnist
def test_save_then_load_classifier_gives_the_modules_predictions(small_lenet5, tmp_path):
    from twinspect.dl.data import load_images

    path = save_model(small_lenet5.module, tmp_path / "lenet5.pt", small_lenet5.meta)
    clf = load_classifier(path)  # no options: everything comes from the metadata
    assert clf.input_shape == (28, 28, 1) and clf.num_classes == 10
    x, y = eval_subset(*load_images("mnist"), 300)
    module_labels = predict_logits(small_lenet5.module, x, clf.preprocess).argmax(1)
    np.testing.assert_array_equal(clf.predict(x), module_labels)
    assert np.mean(module_labels == y) == pytest.approx(small_lenet5.test_accuracy)
    assert json.loads((tmp_path / "lenet5.pt.json").read_text())["arch"] == "lenet5"


@needs_mnist
def test_training_is_deterministic_under_the_seed():
    kw = dict(epochs=1, batch_size=32, train_size=160, test_size=50, quiet=True)
    a = train_model("lenet1", "mnist", seed=7, **kw).module.state_dict()
    b = train_model("lenet1", "mnist", seed=7, **kw).module.state_dict()
    c = train_model("lenet1", "mnist", seed=8, **kw).module.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_augmentation_keeps_shape_and_pixels():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(5, 32, 32, 3), dtype=np.uint8)
    out = augment_crop_flip(x, np.random.default_rng(1))
    assert out.shape == x.shape and out.dtype == x.dtype
    assert set(np.unique(out)) <= set(np.unique(x)) | {0}  # crops/flips/zero padding only
    np.testing.assert_array_equal(out, augment_crop_flip(x, np.random.default_rng(1)))


def test_bad_hyper_parameters_are_input_errors():
    with pytest.raises(InputError, match="unknown architecture"):
        train_model("resnet1000", "mnist")
    with pytest.raises(InputError, match="epochs"):
        train_model("lenet1", "mnist", epochs=0)


@needs_mnist
def test_cli_train_writes_model_and_sidecar(tmp_path, capsys):
    out = tmp_path / "m.pt"
    code, stdout, _ = run_cli(
        ["train", "lenet1", "--data", "mnist", "-o", str(out), "--epochs", "1", "--train-size", "128",
         "--test-size", "100", "--batch-size", "32", "-q", "-f", "json"], capsys)
    assert code == 0
    assert out.exists() and (tmp_path / "m.pt.json").exists()
    assert json.loads(stdout)["arch"] == "lenet1"  # -q hides the table; -f json is the report itself


@pytest.mark.parametrize(
    "args, needle",
    [
        (["train", "no-such-net", "-o", "{tmp}/x.pt"], "unknown architecture"),
        (["train", "lenet1", "--data", "{tmp}/missing.npz", "-o", "{tmp}/x.pt"], "missing.npz"),
        (["train", "lenet1", "-o", "{tmp}/x.pt", "--epochs", "0"], "epochs"),
        (["train", "lenet1", "-o", "{tmp}/x.txt"], ".pt"),
    ],
)
def test_cli_train_bad_inputs_exit_2_with_one_line(tmp_path, capsys, args, needle):
    code, _, err = run_cli([a.format(tmp=tmp_path) for a in args], capsys)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.pt").exists()


def test_fit_calls_on_epoch_after_every_epoch_with_the_trained_module():
    from twinspect.dl.adapters.base import PRESETS
    from twinspect.dl.architectures import build_model
    from twinspect.dl.train import FitConfig, fit

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(40, 28, 28, 1)).astype(np.uint8)
    y = rng.integers(0, 10, size=40)
    torch.manual_seed(0)
    m = build_model("lenet1", (28, 28, 1), 10)
    seen: list[tuple[int, torch.Tensor]] = []
    fit(m, x, y, PRESETS["unit-nchw"], FitConfig(epochs=3, batch_size=16, lr=1e-2, seed=0),
        on_epoch=lambda e, mod: seen.append((e, next(mod.parameters()).detach().clone())))
    assert [e for e, _ in seen] == [1, 2, 3]
    # each snapshot is the weights after that epoch: they change between epochs, the last is the final model
    assert not torch.equal(seen[0][1], seen[1][1])
    assert torch.equal(seen[-1][1], next(m.parameters()).detach())
