"""ModelDiff (Li et al., ISSTA 2021) and DeepJudge's black-box metrics (Chen et al., S&P 2022) on real
small models: a small MNIST CNN, a fine-tuned copy of it, and an independently trained one."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

torch = pytest.importorskip("torch")

from twinspect.dl.adapters.differentiable import logit_fn  # noqa: E402
from twinspect.dl.adapters.torch import TorchClassifier  # noqa: E402
from twinspect.dl.data import load_images  # noqa: E402
from twinspect.dl.modelclones import CompareConfig, compare_models, deepjudge, measures, modeldiff  # noqa: E402
from twinspect.errors import InputError  # noqa: E402


def _net(seed: int):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 12, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(12 * 4 * 4, 10),
    )


def _fit(net, x, y, epochs: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    xt = torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float32) / 255.0)
    yt = torch.from_numpy(y)
    net.train()
    for _ in range(epochs):
        for b in torch.randperm(len(xt), generator=g).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xt[b]), yt[b]).backward()
            opt.step()
    return net.eval()


@pytest.fixture(scope="module")
def trio():
    """(victim, fine-tuned copy, independent model) as classifiers, and 300 MNIST test images."""
    import copy

    torch.set_num_threads(1)
    x, y = load_images("mnist", "train")
    assert y is not None
    order = np.random.default_rng(0).permutation(len(x))
    xa, ya = x[order[:3000]], y[order[:3000]]
    xb, yb = x[order[3000:6000]], y[order[3000:6000]]
    victim = _fit(_net(0), xa, ya, epochs=2, seed=0)
    tuned = _fit(copy.deepcopy(victim), xb[:600], yb[:600], epochs=1, seed=1)
    other = _fit(_net(1), xb, yb, epochs=2, seed=2)
    clfs = [TorchClassifier.from_module(m, (28, 28, 1), 10, name=n) for m, n in ((victim, "victim"), (tuned, "tuned"), (other, "other"))]
    xt, _ = load_images("mnist", "test")
    xt = xt[np.random.default_rng(1).permutation(len(xt))[:300]].astype(np.float32)
    return clfs, xt


def test_modeldiff_search_makes_close_pairs_that_move_the_source_and_ranks_the_copy_first(trio):
    (victim, tuned, other), x = trio
    f, why = logit_fn(victim)
    assert f is not None and why is None
    prof = modeldiff.search_pairs(victim, f, x, 40, seed=0)
    assert prof.seeds.shape == prof.perturbed.shape == (40, 28, 28, 1)
    # perturbations stay in the ε-ball (pixel scale) and the pixel range
    assert np.abs(prof.perturbed - prof.seeds).max() <= 255 * modeldiff.EPS + 1e-3
    assert prof.perturbed.min() >= 0 and prof.perturbed.max() <= 255
    # the search moved the source's outputs much more than random noise of the same size does
    rng = np.random.default_rng(0)
    noisy = np.clip(prof.seeds + rng.choice([-1, 1], prof.seeds.shape) * 255 * modeldiff.EPS, 0, 255).astype(np.float32)
    assert prof.source_ddv.mean() > 3 * modeldiff.pair_ddv(victim, prof.seeds, noisy).mean()
    s_tuned, s_other = modeldiff.similarity(prof, tuned), modeldiff.similarity(prof, other)
    assert s_tuned > s_other
    assert modeldiff.similarity(prof, victim) == pytest.approx(1.0)
    assert modeldiff.ranking_correct(s_tuned, [s_other]) is True
    assert modeldiff.ranking_correct(s_other, [s_tuned]) is False


def test_deepjudge_metrics_are_lower_for_the_copy(trio):
    (victim, tuned, other), x = trio
    f, _ = logit_fn(victim)
    cases = deepjudge.generate(victim, f, x, 200, seed=0)
    assert cases.seeds == 200 and 0 < len(cases.x) <= 200
    assert np.all(victim.predict(cases.x) != cases.y)  # only successful adversarial examples are kept
    m_self = deepjudge.metrics(cases, victim)
    assert m_self["robd"] == 0.0 and m_self["jsd"] == pytest.approx(0.0, abs=1e-9)
    m_tuned, m_other = deepjudge.metrics(cases, tuned), deepjudge.metrics(cases, other)
    assert m_tuned["robd"] < m_other["robd"]
    assert m_tuned["jsd"] < m_other["jsd"] <= np.log(2)
    # judging: thresholds from negatives, a majority of the two metrics below them
    negatives = [m_other, {k: v * 1.05 for k, v in m_other.items()}, {k: v * 0.95 for k, v in m_other.items()}]
    th = {k: deepjudge.threshold([n[k] for n in negatives]) for k in ("robd", "jsd")}
    assert th["jsd"] == pytest.approx(m_other["jsd"] * (1 - 2.3263 * 0.05), rel=1e-3)  # mean − z₀.₉₉·std
    assert deepjudge.judge(m_tuned, th) is True
    assert deepjudge.judge(m_other, th) is False
    assert deepjudge.judge({"robd": m_tuned["robd"], "jsd": m_other["jsd"]}, th) is False  # 1 of 2 votes: no majority
    # skewed negatives: the normal lower bound falls below 0, the empirical quantile does not
    skewed = [0.0, 0.01, 0.01, 0.02, 0.4, 0.5] * 20
    assert deepjudge.threshold(skewed) < 0 < deepjudge.threshold(skewed, 0.8, method="quantile") == pytest.approx(0.01)
    assert deepjudge.judge({"robd": float("nan")}, th) is None


def test_seed_selection_keeps_correct_inputs_most_confident_first():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.45, 0.55]])
    assert deepjudge.select_seeds(probs, 3).tolist() == [0, 2, 1]
    assert deepjudge.select_seeds(probs, 10, labels=np.array([1, 1, 1, 1])).tolist() == [2, 3]


def test_baselines_are_seeded(trio):
    (victim, tuned, _), x = trio
    f, _ = logit_fn(victim)
    a = modeldiff.search_pairs(victim, f, x, 20, seed=3)
    b = modeldiff.search_pairs(victim, f, x, 20, seed=3)
    c = modeldiff.search_pairs(victim, f, x, 20, seed=4)
    assert np.array_equal(a.perturbed, b.perturbed) and not np.array_equal(a.seeds, c.seeds)
    d1 = deepjudge.generate(victim, f, x, 50, seed=3, method="fgsm")
    d2 = deepjudge.generate(victim, f, x, 50, seed=3, method="fgsm")
    assert np.array_equal(d1.x, d2.x) and deepjudge.metrics(d1, tuned) == deepjudge.metrics(d2, tuned)


def test_bad_input_gives_input_error(trio):
    (victim, _, _), x = trio
    f, _ = logit_fn(victim)
    with pytest.raises(InputError, match="at least 2 input pairs"):
        modeldiff.search_pairs(victim, f, x, 1)
    with pytest.raises(InputError, match="shape"):
        modeldiff.search_pairs(victim, f, x[0], 10)
    with pytest.raises(InputError, match="unknown DeepJudge attack 'cw'"):
        deepjudge.generate(victim, f, x, 10, method="cw")
    with pytest.raises(InputError, match="eps, step, iters and num positive"):
        deepjudge.generate(victim, f, x, 10, eps=0.0)
    with pytest.raises(InputError, match="at least 2 negative"):
        deepjudge.threshold([0.5])
    with pytest.raises(InputError, match="unknown threshold method 'max'"):
        deepjudge.threshold([0.5, 0.6], method="max")
    with pytest.raises(InputError, match="different lengths"):
        modeldiff.ddv_similarity(np.ones(3), np.ones(4))
    with pytest.raises(InputError, match="one shape"):
        deepjudge.jsd(np.ones((2, 3)) / 3, np.ones((3, 3)) / 3)


def test_compare_models_reports_directional_baselines_and_skips_a_victim_without_gradients(trio, tmp_path):
    (victim, tuned, other), x = trio
    np.savez(tmp_path / "x.npz", x=x[:120])
    # an ONNX export of the victim: a suspect like any other, but it cannot be a victim (no gradients)
    onnx_path = tmp_path / "victim.onnx"
    torch.onnx.export(victim.module, (torch.zeros(1, 1, 28, 28),), str(onnx_path), dynamo=False, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    from twinspect.dl.adapters import load_classifier

    onnx_clf = load_classifier(onnx_path, input_shape=(28, 28, 1), num_classes=10, preprocess="unit")
    cfg = CompareConfig(data=str(tmp_path / "x.npz"), n_inputs=120, cka_inputs=32, modeldiff_search_pairs=30,
                        deepjudge_seeds=100, levels=("io", "baselines"), seed=0)
    res = compare_models(["v", "t", "o", "v.onnx"], config=cfg, classifiers=[victim, tuned, other, onnx_clf])
    assert list(res.measures)[-3:] == list(measures.names("baselines"))
    md, robd = res.matrix("modeldiff"), res.matrix("deepjudge_robd")
    assert md[0, 1] > md[0, 2] and robd[0, 1] < robd[0, 2]
    assert md[0, 3] == pytest.approx(1.0, abs=1e-4)  # the victim's own export behaves as the victim
    assert md[0, 0] == pytest.approx(1.0) and robd[0, 0] == 0.0
    assert md[1, 0] != md[0, 1]  # directional: the other row's inputs are generated on the tuned model
    assert np.all(np.isnan(md[3]))  # the ONNX model cannot be a victim ...
    reasons = {(s["a"], s["b"]): s["reason"] for s in res.skipped if s["measure"] == "modeldiff"}
    assert "needs input gradients of the first model" in reasons[(3, 0)]
    # ... and with pairs, only the given direction is computed
    res2 = compare_models(["v", "t", "o"], config=cfg, classifiers=[victim, tuned, other], pairs=[(0, 1)])
    m2 = res2.matrix("modeldiff")
    assert m2[0, 1] == pytest.approx(md[0, 1]) and np.isnan(m2[1, 0]) and np.isnan(m2[0, 2])
