"""DFlare on tiny in-test classifier pairs, and on the real LeNet-1 pair (shared data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinspect.dl.adapters.base import PRESETS, Classifier
from twinspect.dl.deviate.dflare import DFlare
from twinspect.errors import IncompatibleModelsError, InputError

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
MODELS = SHARED / "data" / "models" / "dflare"


class LinearSoftmax(Classifier):
    """(H, W, C) images -> softmax(flatten(x/255) @ W + b); NaN rows for images brighter than nan_above."""

    def __init__(self, W, b=None, shape=(6, 6, 1), nan_above=None, name="lin"):
        super().__init__(shape, W.shape[1], PRESETS["unit"], output="logits", name=name)
        self.W = np.asarray(W, dtype=np.float64)
        self.b = np.zeros(W.shape[1]) if b is None else np.asarray(b, dtype=np.float64)
        self.nan_above = nan_above

    def _forward(self, batch):
        z = batch.reshape(len(batch), -1).astype(np.float64) @ self.W + self.b
        if self.nan_above is not None:
            bright = batch.reshape(len(batch), -1).mean(axis=1) * 255.0 > self.nan_above
            z[bright] = np.nan
        return z


def tiny_pair(seed=0, noise=0.5, shape=(6, 6, 1), k=3):
    rng = np.random.default_rng(seed)
    d = int(np.prod(shape))
    W = rng.normal(size=(d, k))
    f = LinearSoftmax(W, shape=shape, name="f")
    g = LinearSoftmax(W + rng.normal(scale=noise, size=W.shape), shape=shape, name="g")
    return f, g


def agreeing_seeds(f, g, n, shape=(6, 6, 1), seed=1):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(200,) + shape).astype(np.uint8)
    agree = np.flatnonzero(f.predict(x) == g.predict(x))
    return x[agree[:n]]


def test_finds_triggering_inputs_and_counts_queries():
    f, g = tiny_pair()
    seeds = agreeing_seeds(f, g, 5)
    assert len(seeds) == 5
    for i, x in enumerate(seeds):
        f.reset_queries(), g.reset_queries()
        res = DFlare(f, g, max_queries=5000, timeout=None, seed=i).search(x)
        assert res.status == "found" and res.success
        # one iteration = one query of each model; the seed's own evaluation is the +1; the
        # trigger minimisation's queries are counted apart
        assert res.queries >= 1
        assert f.queries == g.queries == res.queries + 1 + res.extra["minimize_queries"]
        assert res.trigger.dtype == np.float32 and res.trigger.shape == (6, 6, 1)
        assert res.trigger.min() >= 0 and res.trigger.max() <= 255
        # the trigger really makes the two models disagree, and the recorded labels are theirs
        lf, lg = f.predict(res.trigger)[0], g.predict(res.trigger)[0]
        assert lf != lg
        assert (res.orig_label, res.comp_label) == (lf, lg)
        np.testing.assert_allclose(res.orig_probs, f.predict_proba(res.trigger)[0])
        np.testing.assert_array_equal(res.seed, x.astype(np.float32))
        assert sum(c["selected"] for c in res.operators.values()) == res.queries


def test_reproducible_under_a_seed():
    f, g = tiny_pair(seed=3)
    x = agreeing_seeds(f, g, 1)[0]
    a = DFlare(f, g, max_queries=3000, timeout=None, seed=11).search(x)
    b = DFlare(f, g, max_queries=3000, timeout=None, seed=11).search(x)
    assert a.queries == b.queries
    np.testing.assert_array_equal(a.trigger, b.trigger)
    others = [DFlare(f, g, max_queries=3000, timeout=None, seed=s).search(x) for s in range(12, 16)]
    assert any(o.queries != a.queries or not np.array_equal(o.trigger, a.trigger) for o in others)
    # the per-call seed overrides the object's seed
    c = DFlare(f, g, max_queries=3000, timeout=None, seed=999).search(x, seed=11)
    assert c.queries == a.queries


def test_disagreeing_seed_needs_no_search():
    f, g = tiny_pair()
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(300, 6, 6, 1)).astype(np.uint8)
    dis = np.flatnonzero(f.predict(x) != g.predict(x))
    assert dis.size
    res = DFlare(f, g, max_queries=10).search(x[dis[0]])
    assert res.status == "disagree_at_seed" and not res.success and res.queries == 0
    assert res.orig_label != res.comp_label
    np.testing.assert_array_equal(res.trigger, x[dis[0]].astype(np.float32))


def test_identical_models_exhaust_the_budget():
    f, _ = tiny_pair()
    g = LinearSoftmax(f.W, name="same")
    x = agreeing_seeds(f, g, 1)[0]
    res = DFlare(f, g, max_queries=40, timeout=None).search(x)
    assert res.status == "max_queries" and not res.success
    assert res.queries == 40 and res.trigger is None
    res = DFlare(f, g, max_queries=None, timeout=0.2).search(x)
    assert res.status == "timeout" and not res.success and res.queries > 0


def test_nan_output_is_a_finding():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(36, 3))
    f = LinearSoftmax(W, name="f")
    g = LinearSoftmax(W, nan_above=140.0, name="g-nan")  # same weights: only NaN can deviate
    x = np.full((6, 6, 1), 120, np.uint8)
    res = DFlare(f, g, max_queries=5000, timeout=None, seed=0).search(x)
    assert res.status == "nan" and res.success
    assert res.comp_label == -1 and res.orig_label >= 0
    assert res.trigger.mean() > 140.0
    assert np.isnan(res.comp_probs).all()


def test_ablations_run_and_find():
    f, g = tiny_pair(seed=5)
    x = agreeing_seeds(f, g, 1)[0]
    for kw in ({"selection": "uniform"}, {"fitness": "distance"}, {"acceptance": "increase"}):
        res = DFlare(f, g, max_queries=5000, timeout=None, seed=0, **kw).search(x)
        assert res.status == "found"
        assert f.predict(res.trigger)[0] != g.predict(res.trigger)[0]


def test_bad_arguments():
    f, g = tiny_pair()
    h = LinearSoftmax(np.zeros((36, 4)), name="four-classes")
    with pytest.raises(IncompatibleModelsError):
        DFlare(f, h)
    with pytest.raises(InputError):
        DFlare(f, g, max_queries=None, timeout=None)
    with pytest.raises(InputError):
        DFlare(f, g, selection="greedy")
    with pytest.raises(InputError):
        DFlare(f, g, fitness="other")
    with pytest.raises(InputError):
        DFlare(f, g, acceptance="sometimes")
    with pytest.raises(InputError, match="shape"):
        DFlare(f, g, max_queries=5).search(np.zeros((5, 5, 1)))


# ---------------------------------------------------------------------------------------- real pair
def _real_pair():
    if not (MODELS / "lenet1.h5").exists():
        pytest.skip(f"shared DFlare models not found under {MODELS}")
    adapters = pytest.importorskip("twinspect.dl.adapters")
    f = adapters.load_classifier(MODELS / "lenet1.h5", preprocess="unit")
    g = adapters.load_classifier(MODELS / "lenet1-quan.lite", preprocess="unit")
    d = np.load(SHARED / "data" / "mnist" / "test.npz")
    return f, g, d["x"], d["y"]


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.ci
def test_dflare_on_real_lenet1_pair():
    f, g, x, _ = _real_pair()
    idx = np.random.default_rng(0).permutation(len(x))[:3]
    search = DFlare(f, g, max_queries=3000, timeout=120, seed=0)
    results = [search.search(x[i], seed=[0, int(i)]) for i in idx]
    searched = [r for r in results if r.status != "disagree_at_seed"]
    assert searched and all(r.status == "found" for r in searched), [r.status for r in results]
    for r in searched:
        assert f.predict(r.trigger)[0] != g.predict(r.trigger)[0]
    # the paper reports 84 queries on average on this pair; allow a wide margin on 3 seeds
    assert np.mean([r.queries for r in searched]) < 1000


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.ci
def test_uint8_wrap_pixels_give_valid_uint8_triggers_on_real_pair():
    f, g, x, _ = _real_pair()
    idx = np.random.default_rng(1).permutation(len(x))[:4]
    search = DFlare(f, g, pixels="uint8-wrap", max_queries=3000, timeout=120, seed=0)
    assert search.params()["pixels"] == "uint8-wrap"
    searched = [r for r in (search.search(x[i], seed=[0, int(i)]) for i in idx) if r.status != "disagree_at_seed"]
    assert searched and all(r.status == "found" for r in searched)
    for r in searched:
        t = r.trigger
        assert np.array_equal(t, np.floor(t)) and t.min() >= 0 and t.max() <= 255  # a real uint8 image
        assert f.predict(t.astype(np.uint8))[0] != g.predict(t.astype(np.uint8))[0]


def test_reference_preset_reproduces_the_public_code_settings():
    from twinspect.dl.deviate.mutations import Uint8Cast

    f, g = tiny_pair()
    ref = DFlare(f, g, preset="reference", max_queries=3000, timeout=None, seed=0)
    p = ref.params()
    assert p["preset"] == "reference" and p["pixels"] == "uint8-wrap" and p["initial_d"] == "zero"
    assert p["selection"] == "mh-reference" and len(p["operators"]) == 7 and "salt_pepper" in p["operators"]
    assert all(isinstance(op, Uint8Cast) for op in ref.operators)
    default = DFlare(f, g, timeout=None, max_queries=10).params()
    assert default["pixels"] == "float" and default["selection"] == "mh" and default["initial_d"] == "seed"
    assert len(default["operators"]) == 6
    # explicit arguments override the preset
    assert DFlare(f, g, preset="reference", pixels="float", timeout=None, max_queries=10).params()["pixels"] == "float"
    for x in agreeing_seeds(f, g, 3):
        res = ref.search(x)
        assert res.status == "found"
        assert np.array_equal(res.trigger, np.rint(res.trigger))  # every input is a whole-level uint8 image
    with pytest.raises(InputError, match="unknown DFlare preset"):
        DFlare(f, g, preset="paper", timeout=None, max_queries=10)
