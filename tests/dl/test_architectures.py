"""Model zoo: every architecture builds, maps (N, C, H, W) to (N, K) logits, traces and saves."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from twinspect.dl.architectures import ARCHS, build_model, count_parameters, load_zoo_module, save_torchscript  # noqa: E402
from twinspect.errors import InputError, ModelError  # noqa: E402

SHAPES = {"mnist": (28, 28, 1), "cifar10": (32, 32, 3)}


STUDY = ("resnet18", "resnet34", "densenet121", "densenet161", "vgg16", "alexnet")


@pytest.mark.parametrize("arch", sorted(set(ARCHS) - set(STUDY)))
def test_every_architecture_outputs_logits_per_image(arch):
    h, w, c = SHAPES[ARCHS[arch].dataset]
    torch.manual_seed(0)
    model = build_model(arch, (h, w, c), num_classes=7).eval()
    with torch.no_grad():
        out = model(torch.randn(3, c, h, w))
    assert tuple(out.shape) == (3, 7)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("arch", ["lenet5", "resnet20", "vgg11", "cnn"])
def test_width_factor_shrinks_the_network(arch):
    shape = SHAPES[ARCHS[arch].dataset]
    full = count_parameters(build_model(arch, shape, 10, width=1.0))
    half = count_parameters(build_model(arch, shape, 10, width=0.5))
    assert half < full / 2  # conv/linear weights scale with width squared


def test_lenets_also_take_cifar_sized_inputs():
    model = build_model("lenet5", (32, 32, 3), 10).eval()
    with torch.no_grad():
        assert tuple(model(torch.zeros(2, 3, 32, 32)).shape) == (2, 10)


def test_students_are_smaller_than_teachers():
    assert count_parameters(build_model("lenet1")) < count_parameters(build_model("lenet5"))
    cifar = SHAPES["cifar10"]
    assert count_parameters(build_model("resnet8", cifar)) < count_parameters(build_model("resnet20", cifar))


def test_unknown_architecture_and_bad_width_are_input_errors():
    with pytest.raises(InputError, match="unknown architecture 'lenet9'"):
        build_model("lenet9")
    with pytest.raises(InputError, match="width"):
        build_model("lenet5", width=0)


def test_save_embeds_metadata_and_reloads_as_float_module(tmp_path):
    torch.manual_seed(1)
    model = build_model("lenet4").eval()
    meta = {
        "input_shape": [28, 28, 1], "num_classes": 10, "output": "logits",
        "preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NCHW"},
        "arch": "lenet4", "width": 1.0, "dataset": "mnist", "compression": None, "accuracy": 0.5,
    }
    path = save_torchscript(model, tmp_path / "m.pt", meta, torch.zeros(2, 1, 28, 28))
    side = json.loads((tmp_path / "m.pt.json").read_text())
    assert side["arch"] == "lenet4" and side["input_shape"] == [28, 28, 1]
    extra = {"twinspect.json": ""}
    torch.jit.load(str(path), _extra_files=extra)
    assert json.loads(extra["twinspect.json"])["dataset"] == "mnist"
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary files left behind
    rebuilt, meta2 = load_zoo_module(path)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(4, 1, 28, 28)).astype(np.float32))
    with torch.no_grad():
        assert torch.allclose(rebuilt(x), model(x), atol=1e-6)
    assert meta2["arch"] == "lenet4"


def test_load_zoo_module_rejects_files_without_zoo_metadata(tmp_path):
    model = build_model("lenet1").eval()
    path = tmp_path / "plain.pt"
    torch.jit.save(torch.jit.trace(model, torch.zeros(1, 1, 28, 28)), str(path))
    with pytest.raises(ModelError, match="twinspect train"):
        load_zoo_module(path)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ModelError, match="TorchScript"):
        load_zoo_module(bad)


@pytest.mark.parametrize("arch", [pytest.param(a, marks=pytest.mark.slow) if a in ("densenet161", "resnet34") else a for a in STUDY])
def test_study_families_run_on_mnist_and_cifar_shapes(arch):
    import torch

    from twinspect.dl.architectures import build_model, count_parameters

    sizes = []
    for shape in ((28, 28, 1), (32, 32, 3)):
        m = build_model(arch, shape, 10, width=0.25).eval()
        with torch.no_grad():
            out = m(torch.zeros(2, shape[2], shape[0], shape[1]))
        assert out.shape == (2, 10)
        sizes.append(count_parameters(m))
    # width scales the network: a quarter-width model is much smaller than a half-width one
    assert count_parameters(build_model(arch, (32, 32, 3), 10, width=0.5)) > 2.5 * sizes[1]
