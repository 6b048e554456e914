"""Issue 20 (speed): workers load ``.keras`` files without computing the initial weights the load discards.

Keras runs on the torch backend in-process (the stand-in is backend-agnostic; the JAX worker is where it
saves most, see ``benchmarks/results/fuzz_issue20_speed.md``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
import subprocess
import sys

import numpy as np
import pytest

from twinspect.dl.fuzz import catalogue, graph, muffin, seeds
from twinspect.dl.fuzz.backends.loading import initializers_skipped, load_model


@functools.cache
def _specs() -> list[dict]:
    """The four small seeds, Muffin-style random DAGs over the whole catalogue, and a chain of Dense/LSTM
    layers using every initializer of the catalogue's value space (kernels, recurrent kernels, biases)."""
    out = [seeds.lenet5(), seeds.alexnet(), seeds.lstm1(), seeds.lstm2()]
    rng = random.Random(11)
    random_dags: list[dict] = []
    while len(random_dags) < 8:  # with weights: a weightless model loads nothing
        spec = muffin.generate(rng, mode=("chain", "cell")[len(random_dags) % 2])
        if graph.count_params(graph.build(graph.clone(spec), record_shapes=False)):
            random_dags.append(spec)
    out += random_dags
    nodes, prev = [], "input"
    for i, init in enumerate(catalogue.INITIALIZERS):
        layer = "LSTM" if i % 3 == 2 else "Dense"
        bias = init if init != "orthogonal" else "random_normal"  # orthogonal needs a matrix
        params = {"units": 6, "kernel_initializer": init, "bias_initializer": bias, "use_bias": True}
        if layer == "LSTM":
            params.update(recurrent_initializer=init, return_sequences=True)
        nodes.append({"name": f"n{i}", "layer": layer, "params": params, "inputs": [prev]})
        prev = f"n{i}"
    out.append({"input_shape": [5, 6], "nodes": nodes, "outputs": [prev]})
    return out


def test_stand_in_initializers_return_zeros_only_inside_the_context():
    keras = graph.keras_module()
    inits = [keras.initializers.get(name) for name in catalogue.INITIALIZERS if name != "zeros"]
    with initializers_skipped(keras):
        for init in inits:
            v = init((4, 4), dtype="float32")
            assert isinstance(v, np.ndarray) and v.shape == (4, 4) and v.dtype == np.float32 and not v.any()
    after = [np.asarray(keras.ops.convert_to_numpy(init((4, 4), dtype="float32"))) for init in inits]
    assert all(a.any() for a in after)  # the real initializers are back (no catalogue initializer but zeros is all 0)


@pytest.mark.parametrize("k", range(13))
def test_loaded_weights_and_outputs_equal_a_plain_load(tmp_path, k):
    keras = graph.keras_module()
    spec = graph.clone(_specs()[k])
    keras.utils.set_random_seed(k)
    model = graph.build(spec)
    path = str(tmp_path / "m.keras")
    model.save(path)
    x = graph.make_inputs(spec, seed=k)
    keras.utils.set_random_seed(99)  # a random layer's seed-generator state is drawn at load, not stored
    plain = keras.saving.load_model(path, compile=False)
    keras.utils.set_random_seed(99)
    fast = load_model(path)

    def values(variables) -> list[np.ndarray]:
        return [np.asarray(keras.ops.convert_to_numpy(v)) for v in variables]

    saved = values(model.weights)
    assert saved and any(a.any() for a in saved)
    for ref, a, b in zip(saved, values(plain.weights), values(fast.weights), strict=True):  # the file's weights
        np.testing.assert_array_equal(b, ref)
        np.testing.assert_array_equal(a, ref)
    for a, b in zip(values(plain.variables), values(fast.variables), strict=True):  # seed states included
        np.testing.assert_array_equal(b, a)

    def run(m) -> list[np.ndarray]:
        o = m(x, training=False)
        return [np.asarray(keras.ops.convert_to_numpy(t)) for t in (o if isinstance(o, (list, tuple)) else [o])]

    for a, b in zip(run(plain), run(fast), strict=True):
        np.testing.assert_array_equal(b, a)


JAX_CHECK = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras, numpy as np
from twinspect.dl.fuzz.backends.loading import load_model
path, x = sys.argv[1], np.load(sys.argv[2])["x"]
plain, fast = keras.saving.load_model(path, compile=False), load_model(path)
same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(plain.weights, fast.weights, strict=True))
outs = [np.asarray(m(x, training=False)) for m in (plain, fast)]
print(json.dumps({"weights": len(fast.weights), "same_weights": same, "same_outputs": bool(np.array_equal(*outs)),
                  "nonzero": bool(any(np.asarray(w).any() for w in fast.weights))}))
"""


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_worker_load_equals_a_plain_load(tmp_path):
    """On the backend where the saving is (keras-jax), in a fresh process as a worker is."""
    keras = graph.keras_module()
    spec = graph.clone(_specs()[0])  # LeNet-5: convolutions, pooling, dense layers
    keras.utils.set_random_seed(3)
    graph.build(spec).save(tmp_path / "m.keras")
    np.savez(tmp_path / "x.npz", x=graph.make_inputs(spec, seed=3))
    out = subprocess.run([sys.executable, "-c", JAX_CHECK, str(tmp_path / "m.keras"), str(tmp_path / "x.npz")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res == {"weights": 10, "same_weights": True, "same_outputs": True, "nonzero": True}
