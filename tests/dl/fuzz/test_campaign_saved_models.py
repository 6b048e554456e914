"""Issue 20 (speed): the model a campaign builds to check a mutant is the one it saves and runs (built once,
not twice), with the weights every saved model gets: those of a build under the seed of its index.

Keras runs on the torch backend in-process; the executor here reads the saved files in-process too.
"""

from __future__ import annotations

import numpy as np

from twinspect.dl.fuzz import graph
from twinspect.dl.fuzz.campaign import Campaign, Config, read_model_log


class RecordingExecutor:
    """Stands in for the backends: records each saved model's weights and inputs, answers with zeros."""

    def __init__(self):
        self.runs: list[dict] = []

    def start(self, systems):
        pass

    def unavailable(self, system):
        return None

    def run(self, systems, model, inputs):
        keras = graph.keras_module()
        m = keras.saving.load_model(model, compile=False)
        x = np.load(inputs)["x"]
        self.runs.append({"name": model.name, "weights": [np.asarray(keras.ops.convert_to_numpy(w)) for w in m.weights],
                          "x": x})
        return {s: {"status": "ok", "error_type": "", "message": "", "frames": [], "seconds": 0.0, "out": None,
                    "outputs": [np.zeros((len(x), 1), np.float32)]} for s in systems}

    def close(self):
        pass


def test_saved_mutants_have_the_weights_of_a_build_under_their_seed(tmp_path):
    ex = RecordingExecutor()
    cfg = Config(backends=["keras-torch"], seeds=["LeNet5"], seed=7, threshold=1.0)
    Campaign.create(tmp_path / "c", cfg).run(budget_s=600, max_models=6, executor=ex)
    tested = [r for r in ex.runs if r["name"] == "current.keras"]
    log = read_model_log(tmp_path / "c")
    assert len(tested) == len(log) >= 3  # every valid mutant was run once
    keras = graph.keras_module()
    for rec, run in zip(log, tested, strict=True):
        keras.utils.set_random_seed(7 * 1_000_003 + rec["i"])
        fresh = graph.build(graph.clone(rec["spec"]))
        weights = [np.asarray(keras.ops.convert_to_numpy(w)) for w in fresh.weights]
        assert len(weights) == len(run["weights"]) and any(w.any() for w in weights)
        for a, b in zip(weights, run["weights"], strict=True):
            np.testing.assert_array_equal(b, a)
        np.testing.assert_array_equal(run["x"], graph.make_inputs(rec["spec"], seed=rec["i"]))
