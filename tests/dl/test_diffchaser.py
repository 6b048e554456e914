"""DiffChaser (genetic algorithm, k-uncertainty fitness) on tiny pairs and on the real LeNet-1 pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinspect.dl.adapters.base import PRESETS, Classifier
from twinspect.dl.deviate.diffchaser import DiffChaser
from twinspect.errors import InputError

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
MODELS = SHARED / "data" / "models" / "dflare"


class LinearSoftmax(Classifier):
    def __init__(self, W, nan_above=None, name="lin"):
        super().__init__((6, 6, 1), W.shape[1], PRESETS["unit"], output="logits", name=name)
        self.W = W
        self.nan_above = nan_above
        self.batches = []

    def _forward(self, batch):
        self.batches.append(len(batch))
        z = batch.reshape(len(batch), -1).astype(np.float64) @ self.W
        if self.nan_above is not None:
            z[batch.reshape(len(batch), -1).mean(axis=1) * 255.0 > self.nan_above] = np.nan
        return z


def tiny_pair(seed=0, noise=0.5):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(36, 3))
    return LinearSoftmax(W, name="f"), LinearSoftmax(W + rng.normal(scale=noise, size=W.shape), name="g")


def agreeing_seed(f, g, seed=1):
    x = np.random.default_rng(seed).integers(0, 256, size=(100, 6, 6, 1)).astype(np.uint8)
    return x[np.flatnonzero(f.predict(x) == g.predict(x))[0]]


def test_finds_trigger_and_counts_every_individual():
    f, g = tiny_pair()
    x = agreeing_seed(f, g)
    f.reset_queries(), g.reset_queries()
    f.batches.clear()
    res = DiffChaser(f, g, pop_size=20, max_queries=20000, timeout=None, seed=0, minimize=False).search(x)
    assert res.status == "found" and res.success
    # the models saw the seed (1) plus every individual of every generation evaluated: a first
    # generation of 20, then 19 new individuals per generation (1 elite kept), one batch each
    gen_total = res.extra["generation_queries"]
    assert gen_total == 20 + 19 * (res.extra["generations"] - 1)
    assert g.queries == gen_total + 1
    assert f.batches[:2] == [1, 20] and set(f.batches[2:-1]) <= {19}
    assert f.predict(res.trigger)[0] != g.predict(res.trigger)[0]
    # queries are counted up to the first triggering individual of the last generation, as DFlare's
    assert gen_total - 19 < res.queries <= gen_total


def test_reproducible_and_budget_is_never_exceeded():
    f, g = tiny_pair(seed=2)
    same = LinearSoftmax(f.W, name="same")
    x = agreeing_seed(f, same)
    res = DiffChaser(f, same, pop_size=16, max_queries=50, timeout=None).search(x)
    assert res.status == "max_queries" and res.queries == 50 and res.trigger is None
    assert res.extra["generations"] == 4  # 16 + 15 + 15 + 4
    x = agreeing_seed(f, g)
    a = DiffChaser(f, g, pop_size=10, max_queries=5000, timeout=None, seed=4).search(x)
    b = DiffChaser(f, g, pop_size=10, max_queries=5000, timeout=None, seed=4).search(x)
    assert a.queries == b.queries
    np.testing.assert_array_equal(a.trigger, b.trigger)


def test_fitness_prefers_inputs_near_a_decision_boundary():
    f, g = tiny_pair()
    dc = DiffChaser(f, g, pop_size=4, k=2, max_queries=10)
    pf = np.array([[0.9, 0.05, 0.05], [0.5, 0.45, 0.05]])
    pg = np.array([[0.8, 0.15, 0.05], [0.6, 0.3, 0.1]])
    fit = dc.fitness(pf, pg)
    np.testing.assert_allclose(fit, [-0.65, -0.05])  # min of the two models' top-1 minus 2nd gaps
    assert DiffChaser(f, g, pop_size=4, uncertainty_of="compressed", max_queries=10).fitness(pf, pg)[1] == pytest.approx(-0.3)


def test_nan_individual_is_a_finding():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(36, 3))
    f, g = LinearSoftmax(W, name="f"), LinearSoftmax(W, nan_above=140.0, name="g-nan")
    res = DiffChaser(f, g, pop_size=30, max_queries=3000, timeout=None).search(np.full((6, 6), 120, np.uint8))
    assert res.status == "nan" and res.success and res.comp_label == -1
    assert res.trigger.mean() > 140.0


def test_bad_parameters():
    f, g = tiny_pair()
    for kw in ({"pop_size": 1}, {"crossover_rate": 1.5}, {"mutation_rate": -0.1}, {"k": 4},
               {"uncertainty_of": "neither"}, {"elite": 10, "pop_size": 10}):
        with pytest.raises(InputError):
            DiffChaser(f, g, max_queries=10, **kw)


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.ci
def test_diffchaser_on_real_lenet1_pair():
    if not (MODELS / "lenet1.h5").exists():
        pytest.skip(f"shared DFlare models not found under {MODELS}")
    adapters = pytest.importorskip("twinspect.dl.adapters")
    f = adapters.load_classifier(MODELS / "lenet1.h5", preprocess="unit")
    g = adapters.load_classifier(MODELS / "lenet1-quan.lite", preprocess="unit")
    x = np.load(SHARED / "data" / "mnist" / "test.npz")["x"]
    i = int(np.random.default_rng(0).permutation(len(x))[2])
    res = DiffChaser(f, g, pop_size=500, max_queries=20000, timeout=150, seed=0).search(x[i], seed=[0, i])
    assert res.status == "found", res.status
    assert f.predict(res.trigger)[0] != g.predict(res.trigger)[0]
