"""Shared hidden-layer kernels (issue 18): a transfer-learned copy with a new head of another class count,
and a fine-tuned one, share the base's hidden kernels and get reuse 1.0; an independently trained model,
a channel-permuted copy, output layers and constant kernels do not count."""

from __future__ import annotations

import copy
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.cli import main  # noqa: E402
from twinspect.dl.adapters.metadata import write_metadata  # noqa: E402
from twinspect.dl.modelclones import CompareConfig, compare_models, reuse  # noqa: E402  (reuse: the module)
from twinspect.dl.modelclones.weights import (  # noqa: E402
    SHARED_MIN_WEIGHTS,
    architecture_signature,
    pruned_sub_kernels,
    shared_kernels,
)


def _weights(module) -> dict[str, dict[str, np.ndarray]]:
    """A live torch module's canonical per-layer weights, as ``models compare`` reads them from a file."""
    from twinspect.dl.adapters.torch import TorchClassifier

    return TorchClassifier.from_module(module, (28, 28, 1)).loaded.canonical_weights()


@pytest.fixture(scope="module")
def family(tiny_torch, mnist_train_512):
    """The conftest TinyCNN (conv1 150 weights, conv2 1,800, fc head) and four relatives: its backbone under a
    new 5-class head trained alone on digits 0-4 (frozen), the same fine-tuned whole (Adam 3e-4, 40 steps), an
    independently trained TinyCNN (seed 1), and a copy with conv1's channels permuted (same function)."""
    import torch
    from torch import nn

    from tests.dl.conftest import adam_steps, make_tiny_cnn

    x, y = mnist_train_512
    keep = y < 5
    frozen = copy.deepcopy(tiny_torch)
    torch.manual_seed(5)
    frozen.fc = nn.Linear(12 * 4 * 4, 5)
    for p in (*frozen.conv1.parameters(), *frozen.conv2.parameters()):
        p.requires_grad_(False)
    frozen = adam_steps(frozen, x[keep], y[keep], steps=40, lr=3e-3, seed=5)
    tuned = copy.deepcopy(frozen)
    for p in tuned.parameters():
        p.requires_grad_(True)
    tuned = adam_steps(tuned, x[keep], y[keep], steps=40, lr=3e-4, seed=6)
    torch.manual_seed(1)
    other = adam_steps(make_tiny_cnn(), x, y, steps=60, lr=3e-3, seed=1)
    perm = copy.deepcopy(tiny_torch)
    p = torch.randperm(6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        perm.conv1.weight.copy_(tiny_torch.conv1.weight[p])
        perm.conv1.bias.copy_(tiny_torch.conv1.bias[p])
        perm.conv2.weight.copy_(tiny_torch.conv2.weight[:, p])
    return {"base": tiny_torch, "frozen": frozen, "tuned": tuned, "other": other, "perm": perm}


def test_backbone_under_a_new_head_is_shared(family):
    sk = shared_kernels(_weights(family["base"]), _weights(family["frozen"]))
    # conv1 (150 weights) is below the size floor and fc is each model's output layer: conv2 is the one hidden kernel
    assert SHARED_MIN_WEIGHTS > 150 and (sk.hidden_a, sk.hidden_b) == (1, 1)
    assert [(m["a"], m["b"], m["shape"]) for m in sk.matches] == [("conv2/weight", "conv2/weight", [12, 6, 5, 5])]
    assert sk.matches[0]["correlation"] == pytest.approx(1.0) and sk.share == 1.0


def test_fine_tuned_backbone_is_still_shared(family):
    base, tuned = _weights(family["base"]), _weights(family["tuned"])
    assert not np.array_equal(base["conv2"]["weight"], tuned["conv2"]["weight"])  # the fine-tuning moved it
    sk = shared_kernels(base, tuned)
    assert sk.share == 1.0 and 0.99 <= sk.matches[0]["correlation"] < 1.0


def test_independent_and_permuted_models_share_nothing(family):
    base = _weights(family["base"])
    for key in ("other", "perm"):
        sk = shared_kernels(base, _weights(family[key]))
        assert sk.matches == [] and sk.share == 0.0, key
        assert sk.best is not None and abs(sk.best) < 0.2, key  # the nearest unshared conv2 pair is far off
    # the permuted copy's conv2 holds the same numbers in another order: element-wise matching does not see it
    # (the documented limit; its I/O and CKA are identical to the base's)
    sk = shared_kernels(base, _weights(family["perm"]), min_correlation=0.2)
    assert sk.matches == []


def test_output_layers_and_constant_kernels_do_not_count():
    rng = np.random.default_rng(0)
    head = rng.normal(size=(10, 784))
    # two linear models with the same weights: their only kernel is the output layer
    lin = {"fc": {"weight": head, "bias": np.zeros(10)}}
    assert shared_kernels(lin, copy.deepcopy(lin)).matches == []
    # a hidden kernel that is constant (here zeros) in both is not evidence of anything
    hidden = {"h": {"weight": np.zeros((32, 784))}, "fc": {"weight": head[:, :32]}}
    assert shared_kernels(hidden, copy.deepcopy(hidden)).hidden_a == 0
    # the same random hidden kernel is, and one-to-one: two identical kernels of b pair with one of a at most
    h = rng.normal(size=(32, 784))
    a = {"h1": {"weight": h}, "fc": {"weight": head[:, :32]}}
    b = {"h1": {"weight": h.copy()}, "h2": {"weight": h.copy()}, "fc": {"weight": head[:, :32]}}
    sk = shared_kernels(a, b)
    assert len(sk.matches) == 1 and sk.share == 1.0 and (sk.hidden_a, sk.hidden_b) == (1, 2)
    with pytest.raises(ValueError, match="min_weights"):
        shared_kernels(a, b, min_weights=0)
    with pytest.raises(ValueError, match="min_correlation"):
        shared_kernels(a, b, min_correlation=0.0)


def test_reuse_rule_only_lifts_pairs_that_share_kernels():
    assert reuse.with_shared_weights(0.2, 0.5) == 1.0
    assert reuse.with_shared_weights(None, 1.0) == 1.0
    assert reuse.with_shared_weights(0.2, 0.0) == 0.2
    assert reuse.with_shared_weights(None, None) is None


def _save(module, path, classes: int):
    import torch

    torch.jit.save(torch.jit.trace(module.eval(), torch.zeros(1, 1, 28, 28)), str(path))
    write_metadata(path, {"input_shape": [28, 28, 1], "num_classes": classes, "output": "logits",
                          "preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NCHW"}})
    return path


def test_compare_flags_the_transfer_model_with_another_class_count(family, tmp_path, capsys):
    paths = [_save(family["base"], tmp_path / "base.pt", 10), _save(family["frozen"], tmp_path / "transfer5.pt", 5),
             _save(family["other"], tmp_path / "other.pt", 10)]
    r = compare_models(paths, config=CompareConfig(data="uniform", n_inputs=64, cka_inputs=32, modeldiff_pairs=32,
                                                   levels=("weights", "representation", "io", "reuse")))
    share, score = r.matrix("weights_shared"), r.matrix("reuse")
    assert share[0, 1] == 1.0 and share[0, 2] == 0.0 and share[1, 2] == 0.0
    # different class counts: no I/O measure and so no calibrated score, but the shared backbone gives 1.0
    assert np.isnan(r.matrix("io_top1_agreement")[0, 1]) and score[0, 1] == 1.0
    assert score[0, 2] < 0.5 and np.isnan(score[1, 2])
    assert [m["a"] for m in r.shared_weights["0,1"]] == ["conv2/weight"] and set(r.shared_weights) == {"0,1"}
    assert r.to_json()["shared_weights"] == r.shared_weights
    with pytest.raises(SystemExit) as exc:
        main(["models", "compare", *map(str, paths[:2]), "--data", "uniform", "--inputs", "40", "--cka-inputs", "20"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None)
    assert "transfer5.pt   reuse 1.000   (shares 1 hidden-layer kernel)" in out


def test_mask_pruned_copies_match_on_the_weights_they_kept(family):
    base = _weights(family["base"])
    rng = np.random.default_rng(0)
    pruned = copy.deepcopy(base)
    w = pruned["conv2"]["weight"]
    w[rng.random(w.shape) < 0.6] = 0.0  # unstructured: 60 % of the weights zeroed
    structured = copy.deepcopy(base)
    structured["conv2"]["weight"][:4] = 0.0  # 4 of 12 output channels zeroed
    for copy_ in (pruned, structured):
        # the zeros alone pull the whole-array correlation under the floor; over the kept weights it is 1
        x, y = base["conv2"]["weight"].ravel(), copy_["conv2"]["weight"].ravel()
        assert np.corrcoef(x, y)[0, 1] < 0.99
        sk = shared_kernels(base, copy_)
        assert sk.share == 1.0 and sk.matches[0]["correlation"] == pytest.approx(1.0)
    # too few weights kept on both sides: not evidence either way
    sparse = copy.deepcopy(base)
    sparse["conv2"]["weight"][rng.random(w.shape) < 0.9] = 0.0
    assert (sparse["conv2"]["weight"] != 0).sum() < SHARED_MIN_WEIGHTS
    assert shared_kernels(base, sparse).matches == []


@pytest.fixture(scope="module")
def pruned(family, mnist_train_512):
    """The TinyCNN and another trained one, each with half of conv1's and conv2's channels physically removed by
    torch_pruning (L2 magnitude; the head's outputs kept), then fine-tuned (Adam 3e-4, 40 steps)."""
    import torch

    from tests.dl.conftest import adam_steps

    tp = pytest.importorskip("torch_pruning")  # the bench extra (in [all])
    out = {}
    for key in ("base", "other"):
        m = copy.deepcopy(family[key])
        tp.pruner.MetaPruner(m, torch.zeros(1, 1, 28, 28), importance=tp.importance.GroupMagnitudeImportance(p=2),
                             pruning_ratio=0.5, ignored_layers=[m.fc]).step()
        out[key] = adam_steps(m, *mnist_train_512, steps=40, lr=3e-4, seed=8)
    assert tuple(out["base"].conv2.weight.shape) == (6, 3, 5, 5)  # the pruning removed channels for real
    return out


def test_physically_pruned_copy_shares_its_kernels_as_sub_blocks(family, pruned):
    base, small = _weights(family["base"]), _weights(pruned["base"])
    assert architecture_signature(base) != architecture_signature(small)
    for a, b, side in ((base, small, "b"), (small, base, "a")):  # either argument order
        sk = shared_kernels(a, b)
        assert sk.share == 1.0 and len(sk.matches) == 1, side
        m = sk.matches[0]
        assert (m["a"], m["b"], m["pruned"]) == ("conv2/weight", "conv2/weight", side)
        assert {tuple(m["shape"]), tuple(m["shape_b"])} == {(12, 6, 5, 5), (6, 3, 5, 5)}
        assert 0.99 <= m["correlation"] < 1.0  # fine-tuned after the pruning
    # the walk aligns every layer, the small first convolution and the head (after the flatten) too
    walk = pruned_sub_kernels(base, small)
    assert [n for n, _, _, _ in walk] == ["conv1/weight", "conv2/weight", "fc/weight"]
    assert min(r for _, _, _, r in walk) > 0.99
    # another model pruned the same way has the same shapes and none of the weights
    sk = shared_kernels(base, _weights(pruned["other"]))
    assert sk.matches == [] and sk.share == 0.0 and sk.best is not None and sk.best < 0.5


def test_sub_kernel_walk_recovers_an_unsorted_channel_selection():
    rng = np.random.default_rng(1)
    w1, w2, head = rng.normal(size=(8, 1, 3, 3)), rng.normal(size=(16, 8, 3, 3)), rng.normal(size=(10, 16 * 4))
    big = {"c1": {"weight": w1}, "c2": {"weight": w2}, "fc": {"weight": head}}
    keep1, keep2 = np.array([6, 0, 3, 5]), np.array([9, 2, 14, 7, 11, 0, 4, 12])  # kept channels, in another order
    cols = (keep2[:, None] * 4 + np.arange(4)).ravel()  # the head's inputs: 4 positions per kept channel
    small = {"c1": {"weight": w1[keep1]}, "c2": {"weight": w2[keep2][:, keep1]}, "fc": {"weight": head[:, cols]}}
    walk = pruned_sub_kernels(big, small)
    assert [r for _, _, _, r in walk] == pytest.approx([1.0, 1.0, 1.0])
    # not a pruned copy: wider than the original in a channel dimension, or another number of kernels
    assert pruned_sub_kernels(small, big) == []
    assert pruned_sub_kernels(big, {"c1": small["c1"], "fc": small["fc"]}) == []
    # the columns of a layer that cannot be aligned (a layer in between changed the width) break the walk there
    odd = copy.deepcopy(small)
    odd["c2"]["weight"] = w2[keep2][:, :3]
    assert [n for n, _, _, _ in pruned_sub_kernels(big, odd)] == ["c1/weight"]


def test_compare_flags_the_physically_pruned_copy(family, pruned, tmp_path, capsys):
    paths = [_save(family["base"], tmp_path / "base.pt", 10), _save(pruned["base"], tmp_path / "pruned.pt", 10),
             _save(pruned["other"], tmp_path / "other_pruned.pt", 10)]
    r = compare_models(paths, config=CompareConfig(data="uniform", n_inputs=64, cka_inputs=32, modeldiff_pairs=32,
                                                   levels=("weights", "reuse")))
    assert r.matrix("weights_shared")[0, 1] == 1.0 and r.matrix("reuse")[0, 1] == 1.0
    assert set(r.shared_weights) == {"0,1"} and r.shared_weights["0,1"][0]["pruned"] == "b"
    assert np.isnan(r.matrix("weights_cosine")[0, 1])  # different architectures: no whole-model weight cosine
    with pytest.raises(SystemExit) as exc:
        main(["models", "compare", *map(str, paths[:2]), "--data", "uniform", "--inputs", "40", "--cka-inputs", "20"])
    assert exc.value.code in (0, None)
    assert "(shares 1 hidden-layer kernel, pruned.pt as a channel-pruned copy)" in capsys.readouterr().out
