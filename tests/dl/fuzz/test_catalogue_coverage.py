"""Catalogue denominators and coverage counts on small hand-made model specs (no Keras import)."""

from __future__ import annotations

from twinspect.dl.fuzz import catalogue
from twinspect.dl.fuzz.coverage import Coverage, coverage_of, model_coverage


def _spec(nodes, shape=(28, 28, 1)):
    out = {"input_shape": list(shape), "nodes": [], "outputs": []}
    prev = "input"
    for i, (layer, params) in enumerate(nodes):
        out["nodes"].append({"name": f"n{i}", "layer": layer, "params": params, "inputs": [prev]})
        prev = f"n{i}"
    out["outputs"] = [prev]
    return out


def test_catalogue_size_and_denominators():
    den = catalogue.denominators()
    assert len(catalogue.LAYERS) >= 60
    assert den["layer_type"] == len(catalogue.LAYERS)
    # pairs: recount by brute force from the rank rules
    brute = 0
    for a in catalogue.LAYERS:
        for b in catalogue.LAYERS:
            if a.out_ranks() & set(b.in_ranks):
                brute += 1
    assert den["layer_pair"] == brute
    assert ("Conv2D", "Flatten") in catalogue.legal_pairs()
    assert ("Flatten", "Conv2D") not in catalogue.legal_pairs()  # rank 2 cannot feed a 2-D convolution
    assert ("LSTM", "Dense") in catalogue.legal_pairs()
    assert den["layer_param"] == sum(len(p.labels()) for lay in catalogue.LAYERS for p in lay.params)


def test_param_labels_buckets_and_keras_configs():
    conv = catalogue.BY_NAME["Conv2D"]
    ks = conv.param("kernel_size")
    assert ks.label_of(3) == "3" and ks.label_of((5, 5)) == "4-5" and ks.label_of(9) is None
    filters = conv.param("filters")
    assert filters.label_of(1) == "1" and filters.label_of(12) == "8-15" and filters.label_of(True) is None
    init = conv.param("kernel_initializer")
    assert init.label_of({"module": "keras.initializers", "class_name": "GlorotUniform", "config": {}}) == "glorot_uniform"
    reg = conv.param("kernel_regularizer")
    assert reg.label_of({"class_name": "L1L2", "config": {"l1": 0.0, "l2": 0.01}}) == "l2"
    assert reg.label_of(None) == "None"


def test_model_coverage_counts_on_hand_made_model():
    spec = _spec([("Conv2D", {"filters": 6, "kernel_size": 3, "padding": "same", "activation": "relu"}),
                  ("Flatten", {}), ("Dense", {"units": 10, "name_not_in_catalogue": 1})])
    cov = model_coverage(spec)
    assert cov.types == {"Conv2D", "Flatten", "Dense"}
    assert cov.pairs == {("Conv2D", "Flatten"), ("Flatten", "Dense")}
    assert cov.params == {("Conv2D", "filters", "4-7"), ("Conv2D", "kernel_size", "3"),
                          ("Conv2D", "padding", "same"), ("Conv2D", "activation", "relu"), ("Dense", "units", "8-15")}


def test_merge_edges_aliases_and_unknown_layers():
    spec = {"input_shape": [8], "outputs": ["m"], "nodes": [
        {"name": "a", "layer": "Dense", "params": {"units": 8}, "inputs": ["input"]},
        {"name": "b", "layer": "Rescaling", "params": {"scale": 2.0}, "inputs": ["input"]},  # not in catalogue
        {"name": "m", "layer": "Add", "params": {}, "inputs": ["a", "b"]}]}
    cov = model_coverage(spec)
    assert cov.types == {"Dense", "Add"}
    assert cov.pairs == {("Dense", "Add")}  # the Rescaling edge is not a catalogue pair
    alias = _spec([("MaxPool2D", {"pool_size": 2})])
    assert model_coverage(alias).params == {("MaxPooling2D", "pool_size", "2")}


def test_union_update_and_summary():
    a = model_coverage(_spec([("Conv2D", {"filters": 1}), ("Flatten", {})]))
    b = model_coverage(_spec([("Conv2D", {"filters": 2}), ("Flatten", {}), ("Dropout", {"rate": 0.5})]))
    total = Coverage()
    assert total.update(a) == len(a)
    assert total.new_items(b) == 4  # Dropout type, (Flatten, Dropout), filters 2-3, rate bucket
    assert total.update(b) == 4
    assert coverage_of([a_spec for a_spec in []]).summary()["layer_type"]["covered"] == 0
    s = total.summary()
    assert s["layer_type"] == {"covered": 3, "total": len(catalogue.LAYERS), "ratio": 3 / len(catalogue.LAYERS), "outside": 0}
    assert Coverage.from_json(total.to_json()).params == total.params


def test_every_regularizer_value_of_the_catalogue_builds():
    """Each catalogue regulariser value (including the L1+L2 one) must give a buildable layer, not an invalid mutant."""
    from twinspect.dl.fuzz import catalogue, graph

    for value in catalogue.REGULARIZERS:
        spec = {"input_shape": [12, 4], "outputs": ["c"],
                "nodes": [{"name": "c", "layer": "Conv1D", "inputs": ["input"],
                           "params": {"filters": 3, "kernel_size": 2, "kernel_regularizer": value,
                                      "activity_regularizer": value}}]}
        _, outs = graph.validate(spec)
        assert outs[0].shape == (2, 11, 3)


def test_inception_resnet_custom_scale_layer_converts_to_an_equivalent_spec():
    """InceptionResNetV2's CustomScaleLayer (x0 + x1 * scale) becomes Rescaling + Add with the same outputs."""
    import numpy as np

    from twinspect.dl.fuzz import graph

    keras = graph.keras_module()
    from keras.src.applications.inception_resnet_v2 import CustomScaleLayer

    inp = keras.Input((6, 6, 4))
    branch = keras.layers.Conv2D(4, 1, name="branch")(inp)
    out = CustomScaleLayer(0.17, name="residual")([inp, branch])
    model = keras.Model(inp, out)
    spec = graph.from_keras(model)
    assert [n["layer"] for n in spec["nodes"]] == ["Conv2D", "Rescaling", "Add"]
    rebuilt = graph.build(spec)
    rebuilt.set_weights(model.get_weights())
    x = np.random.default_rng(0).random((2, 6, 6, 4), dtype=np.float32)
    got, want = (keras.ops.convert_to_numpy(m(x, training=False)) for m in (rebuilt, model))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
