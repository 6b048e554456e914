"""The reuse score's zoo-relative features (issue 18, protocol v2): ``margin_one`` / ``margin_both`` of
:func:`twinspect.dl.modelclones.reuse.zoo_margins`, computed by ``compare_models`` over every model of a
run, and the score's fall-back to the sets without them (two models, or an older calibration file)."""

from __future__ import annotations

import json
import math
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from twinspect.dl.modelclones import CompareConfig, compare_models, reuse  # noqa: E402
from twinspect.errors import InputError  # noqa: E402


def t(x: float) -> float:
    return -math.log(1 - x + 1e-6)


def test_zoo_margins_by_hand():
    # 0 and 1 are each other's nearest models; 2's nearest is 0, 3's nearest is 2
    s = np.array([
        [1.0, 0.99, 0.95, 0.50],
        [0.99, 1.0, 0.90, 0.40],
        [0.95, 0.90, 1.0, 0.60],
        [0.50, 0.40, 0.60, 1.0],
    ])
    one, both = reuse.zoo_margins(s)
    # pair (0, 1): 0's best third model is 2 (0.95), 1's is 2 (0.90)
    assert one[0, 1] == pytest.approx(t(0.99) - t(0.90))
    assert both[0, 1] == pytest.approx(t(0.99) - t(0.95))
    # pair (0, 2): 0's best third is 1 (0.99), 2's best third is 1 (0.90) -> nearer than 2's other, not than 0's
    assert one[0, 2] == pytest.approx(t(0.95) - t(0.90)) and one[0, 2] > 0
    assert both[0, 2] == pytest.approx(t(0.95) - t(0.99)) and both[0, 2] < 0
    # pair (2, 3): 3 is nearer to 2 than to any other model (0.60 > 0.50), 2 is much nearer to 0
    assert one[2, 3] == pytest.approx(t(0.60) - t(0.50)) and both[2, 3] == pytest.approx(t(0.60) - t(0.95))
    np.testing.assert_allclose(one, one.T)
    np.testing.assert_allclose(both, both.T)
    assert np.all(both[~np.eye(4, dtype=bool)] <= one[~np.eye(4, dtype=bool)])
    assert np.isnan(np.diag(one)).all() and np.isnan(np.diag(both)).all()


def test_zoo_margins_undefined_without_a_third_comparable_model():
    one, both = reuse.zoo_margins(np.array([[1.0, 0.9], [0.9, 1.0]]))
    assert np.isnan(one).all() and np.isnan(both).all()
    # model 2 is comparable with no one: its pairs are NaN, and it is no third model for (0, 1)
    s = np.array([[1.0, 0.9, np.nan], [0.9, 1.0, np.nan], [np.nan, np.nan, 1.0]])
    one, both = reuse.zoo_margins(s)
    assert np.isnan(one).all() and np.isnan(both).all()
    with pytest.raises(ValueError, match="square"):
        reuse.zoo_margins(np.ones((2, 3)))


def test_score_uses_zoo_sets_when_present_and_falls_back_without_them(tmp_path):
    f = {"weights": None, "cka": 0.9, "io_jsd": 0.95, "io_agreement": 0.95, "ddv_random": 0.99, "io_logprob": 0.97,
         "margin_one": 0.5, "margin_both": -0.2}
    assert reuse.feature_set(f) == "no_weights_zoo"
    assert reuse.feature_set(dict(f, margin_both=None)) == "no_weights"
    assert reuse.feature_set(dict(f, cka=None)) == "io_zoo"
    assert reuse.feature_set(f, ["full", "no_weights", "io"]) == "no_weights"
    # a calibration file written before the zoo sets existed still loads and scores with the old sets
    params = {k: list(v) for k, v in reuse.DEFAULT_PARAMS.items() if k in reuse.REQUIRED_SETS}
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"params": params}))
    loaded = reuse.load_params(old)
    assert set(loaded) == set(reuse.REQUIRED_SETS)
    assert reuse.reuse_score(f, loaded) == pytest.approx(reuse.reuse_score(dict(f, margin_one=None), loaded))
    # the zoo features enter as they are (not through -log(1 - x)): a larger margin gives a larger score
    full = dict(reuse.DEFAULT_PARAMS)
    assert reuse.reuse_score(dict(f, margin_one=2.0), full) > reuse.reuse_score(f, full) > reuse.reuse_score(
        dict(f, margin_one=-2.0), full)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"params": dict(params, io_zoo=[1.0, 2.0])}))
    with pytest.raises(InputError, match="io_zoo"):
        reuse.load_params(bad)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tiny_torch, torchscript_file, tiny_meta, mnist_train_512):
    """Real small MNIST models: the tiny CNN (teacher), an MLP distilled from its logits, two MLPs trained on
    the labels alone (different seeds), all TorchScript."""
    import torch
    import torch.nn.functional as F

    from twinspect.dl.adapters.metadata import extra_files, write_metadata

    d = tmp_path_factory.mktemp("zoo")
    x, y = mnist_train_512
    xt = torch.from_numpy(x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0)
    yt = torch.from_numpy(y)
    with torch.no_grad():
        soft = tiny_torch(xt)

    def mlp(seed: int, teacher: bool, steps: int = 300):
        torch.manual_seed(seed)
        m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        opt = torch.optim.Adam(m.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            idx = torch.randint(0, len(yt), (64,), generator=gen)
            out = m(xt[idx])
            loss = (F.kl_div(F.log_softmax(out / 2, 1), F.softmax(soft[idx] / 2, 1), reduction="batchmean") if teacher
                    else F.cross_entropy(out, yt[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return m.eval()

    meta = dict(tiny_meta, arch="mlp")
    paths = {"teacher": torchscript_file}
    for name, seed, teacher in (("student", 1, True), ("mlp_a", 2, False), ("mlp_b", 3, False)):
        path = d / f"{name}.pt"
        ts = torch.jit.trace(mlp(seed, teacher), torch.zeros(1, 1, 28, 28))
        torch.jit.save(ts, str(path), _extra_files=extra_files(meta))
        write_metadata(path, meta)
        paths[name] = path
    return paths


def _cfg():
    return CompareConfig(data="mnist", n_inputs=200, cka_inputs=64, modeldiff_pairs=50, seed=0,
                         levels=("weights", "representation", "io", "reuse"))


def test_compare_models_computes_the_margins_over_the_whole_run(zoo):
    names = ["teacher", "student", "mlp_a", "mlp_b"]
    r = compare_models([zoo[k] for k in names], config=_cfg())
    lp = r.matrix("io_logprob_cosine")
    one, both = r.matrix("io_logprob_margin_one"), r.matrix("io_logprob_margin_both")
    ref_one, ref_both = reuse.zoo_margins(lp)
    off = ~np.eye(4, dtype=bool)
    np.testing.assert_allclose(one[off], ref_one[off], atol=1e-12)
    np.testing.assert_allclose(both[off], ref_both[off], atol=1e-12)
    # the distilled student's nearest model is its teacher: the pair's margin_one is >= 0
    assert lp[1, 0] == max(lp[1, j] for j in (0, 2, 3))
    assert one[0, 1] >= 0
    # the student is nearer to its teacher than to either scratch MLP
    assert one[0, 1] > one[1, 2] and one[0, 1] > one[1, 3]
    # the features reach the reuse score: every cross-architecture pair uses a zoo set
    from twinspect.dl.modelclones.measures import reuse_features

    vals = {k: r.matrix(k)[0, 1] for k in r.measures}
    feats = reuse_features(vals)
    assert reuse.feature_set(feats) == "no_weights_zoo"
    assert reuse.reuse_score(feats, reuse.load_params()) == pytest.approx(r.matrix("reuse")[0, 1], abs=1e-12)
    # the zoo is every model given, also when only some pairs are computed
    rp = compare_models([zoo[k] for k in names], config=_cfg(), pairs=[(0, 1)])
    assert rp.matrix("io_logprob_margin_one")[0, 1] == pytest.approx(one[0, 1], abs=1e-12)
    assert np.isnan(rp.matrix("io_logprob_margin_one")[2, 3])


def test_two_models_have_no_margins_but_a_reuse_score(zoo):
    r = compare_models([zoo["teacher"], zoo["student"]], config=_cfg())
    assert r.measures["io_logprob_margin_one"]["matrix"][0][1] is None
    reasons = {s["measure"]: s["reason"] for s in r.skipped}
    assert "third model" in reasons["io_logprob_margin_one"] and "third model" in reasons["io_logprob_margin_both"]
    score = r.matrix("reuse")[0, 1]
    assert np.isfinite(score)
    from twinspect.dl.modelclones.measures import reuse_features

    feats = reuse_features({k: r.matrix(k)[0, 1] for k in r.measures})
    assert reuse.feature_set(feats) == "no_weights"
    assert reuse.reuse_score(feats, reuse.load_params()) == pytest.approx(score, abs=1e-12)


def test_zoo_margins_against_unrelated_third_models_only():
    """Model 0 has a near-duplicate copy 1 and a student 2; 3 and 4 are unrelated. Against every third model,
    the copy hides the student (0's nearest third model of the pair (0, 2) is its copy); with the copy marked
    related to 0, the student is nearer to 0 than either is to any unrelated model."""
    s = np.array([
        [1.0, 0.999, 0.97, 0.80, 0.85],
        [0.999, 1.0, 0.97, 0.80, 0.85],
        [0.97, 0.97, 1.0, 0.82, 0.84],
        [0.80, 0.80, 0.82, 1.0, 0.90],
        [0.85, 0.85, 0.84, 0.90, 1.0],
    ])
    one, both = reuse.zoo_margins(s)
    assert both[0, 2] == pytest.approx(t(0.97) - t(0.999)) and both[0, 2] < 0
    rel = np.zeros((5, 5), dtype=bool)
    rel[0, 1] = rel[1, 0] = True
    one_r, both_r = reuse.zoo_margins(s, rel)
    # (0, 2): 1 is related to 0, so the third models are 3 and 4: o_0 = t(0.85), o_2 = t(0.84)
    assert both_r[0, 2] == pytest.approx(t(0.97) - t(0.85)) and both_r[0, 2] > 0
    assert one_r[0, 2] == pytest.approx(t(0.97) - t(0.84))
    # (3, 4): 0 and 1 are related to each other but not to 3 or 4: both stay third models of (3, 4)
    assert one_r[3, 4] == pytest.approx(one[3, 4]) and both_r[3, 4] == pytest.approx(both[3, 4])
    # (2, 3): the copy 1 is related to 0, not to 2 or 3: still a third model of (2, 3), as is 0
    assert both_r[2, 3] == pytest.approx(both[2, 3])
    np.testing.assert_allclose(one_r, one_r.T)
    # every third model related: undefined
    all_rel = ~np.eye(3, dtype=bool)
    one3, _ = reuse.zoo_margins(s[:3, :3], all_rel)
    assert np.isnan(one3).all()
    with pytest.raises(ValueError, match="shape"):
        reuse.zoo_margins(s, rel[:4, :4])


def test_nonneg_fit_never_gives_a_similarity_a_negative_weight():
    """Two collinear similarities where the unconstrained fit gives one a negative coefficient; with
    ``nonneg`` every coefficient is ≥ 0 and a higher similarity never lowers the score."""
    rng = np.random.default_rng(0)
    n = 400
    y = (rng.random(n) < 0.3).astype(int)
    base = np.where(y == 1, rng.uniform(0.95, 0.999, n), rng.uniform(0.5, 0.97, n))
    # io_jsd tracks io_logprob closely but is a little higher on the independent pairs: the free fit uses it negatively
    rows = [{"io_jsd": min(0.999, b + (0.02 if yy == 0 else 0.0) + rng.normal(0, 0.002)), "io_agreement": b,
             "ddv_random": rng.uniform(0.3, 0.6), "io_logprob": b} for b, yy in zip(base, y)]
    free = reuse.fit_params(rows, list(y), max_fpr=None)["io"]
    assert min(free[1:]) < 0
    nn = reuse.fit_params(rows, list(y), max_fpr=None, nonneg=True)["io"]
    assert min(nn[1:]) >= 0.0 and max(nn[1:]) > 0
    f = dict(rows[0])
    lo = reuse.reuse_score(f, {"io": nn})
    for k in ("io_jsd", "io_agreement", "io_logprob"):
        assert reuse.reuse_score(dict(f, **{k: min(0.999, f[k] + 0.01)}), {"io": nn}) >= lo
    # the fit still separates the two classes
    sc = [reuse.reuse_score(r, {"io": nn}) for r in rows]
    assert np.mean([s >= 0.5 for s, yy in zip(sc, y) if yy]) > 0.8
    assert np.mean([s >= 0.5 for s, yy in zip(sc, y) if not yy]) < 0.2


def test_compare_models_with_an_unrelated_margins_calibration(zoo, tmp_path):
    """A calibration fitted with margins against unrelated third models (``"zoo_margins": "unrelated"``):
    ``compare_models`` leaves out of a pair's third models those the io set flags as derived from either model."""
    names = ["teacher", "student", "mlp_a", "mlp_b"]
    params = {k: list(v) for k, v in reuse.DEFAULT_PARAMS.items()}
    params["io"] = [-3.0, 0.0, 0.0, 0.0, 1.0]  # related when the log-prob cosine is above 1 − e^-3 ≈ 0.95
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"params": params, "zoo_margins": "unrelated"}))
    assert reuse.zoo_mode(cal) == "unrelated" and reuse.zoo_mode() in ("all", "unrelated")
    cfg = _cfg()
    cfg.calibration = str(cal)
    r = compare_models([zoo[k] for k in names], config=cfg)
    lp = r.matrix("io_logprob_cosine")
    feats = {"io_jsd": 1.0 - r.matrix("io_mean_jsd"), "io_agreement": r.matrix("io_top1_agreement"),
             "ddv_random": r.matrix("io_ddv_random_pairs"), "io_logprob": lp}
    rel = reuse.related_by_outputs(feats, params)
    np.testing.assert_array_equal(rel, (lp >= 1 - math.exp(-3) - 1e-6) & ~np.eye(4, dtype=bool))
    ref_one, ref_both = reuse.zoo_margins(lp, rel)
    off = ~np.eye(4, dtype=bool)
    np.testing.assert_allclose(r.matrix("io_logprob_margin_one")[off], ref_one[off], atol=1e-12)
    np.testing.assert_allclose(r.matrix("io_logprob_margin_both")[off], ref_both[off], atol=1e-12)
    # teacher-student and the two scratch MLPs (which agree closely, as MLPs do) are related (log-prob cosine
    # 0.98 each), no cross pair is: a cross pair, e.g. (teacher, mlp_a), has no unrelated third model left
    assert rel[0, 1] and rel[2, 3] and not rel[0, 2] and not rel[1, 3]
    plain_one, _ = reuse.zoo_margins(lp)
    assert np.isnan(r.matrix("io_logprob_margin_one")[0, 2]) and np.isfinite(plain_one[0, 2])
    # (teacher, student): the third models are the two MLPs either way
    assert ref_one[0, 1] == pytest.approx(plain_one[0, 1])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"params": params, "zoo_margins": "nearest"}))
    with pytest.raises(InputError, match="zoo_margins"):
        reuse.zoo_mode(bad)
