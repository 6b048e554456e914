"""Seed models of MEMO (§4): LeNet-5, AlexNet, keras.applications CNNs (weights=None) and two LSTM models.

Hand-written seeds are specs built from catalogue layers; application models are converted with
:func:`twinspect.dl.fuzz.graph.from_keras` (no download: ``weights=None``) at small input sizes.
"""

from __future__ import annotations

from twinspect.dl.fuzz import graph
from twinspect.errors import InputError

_APPS = {  # name -> (keras.applications attribute, input shape)
    "ResNet50": ("ResNet50", (32, 32, 3)),
    "DenseNet121": ("DenseNet121", (32, 32, 3)),
    "InceptionV3": ("InceptionV3", (75, 75, 3)),
    "InceptionResNetV2": ("InceptionResNetV2", (75, 75, 3)),
    "MobileNetV2": ("MobileNetV2", (32, 32, 3)),
    "Xception": ("Xception", (71, 71, 3)),
}
SMALL_SEEDS = ("LeNet5", "AlexNet", "LSTM1", "LSTM2")
ALL_SEEDS = SMALL_SEEDS + tuple(_APPS)


def _chain(input_shape, layers) -> dict:
    spec = graph.new_spec(list(input_shape))
    prev = graph.INPUT
    for i, (layer, params) in enumerate(layers):
        name = f"{layer.lower()}_{i}"
        spec["nodes"].append({"name": name, "layer": layer, "params": params, "inputs": [prev]})
        prev = name
    spec["outputs"] = [prev]
    return spec


def lenet5() -> dict:
    """LeNet-5 on 28×28×1 (LeCun et al. 1998)."""
    return _chain((28, 28, 1), [
        ("Conv2D", {"filters": 6, "kernel_size": 5, "padding": "same", "activation": "tanh"}),
        ("AveragePooling2D", {"pool_size": 2}),
        ("Conv2D", {"filters": 16, "kernel_size": 5, "activation": "tanh"}),
        ("AveragePooling2D", {"pool_size": 2}),
        ("Flatten", {}), ("Dense", {"units": 120, "activation": "tanh"}),
        ("Dense", {"units": 84, "activation": "tanh"}), ("Dense", {"units": 10, "activation": "softmax"})])


def alexnet() -> dict:
    """AlexNet-style CNN on 32×32×3 (Krizhevsky et al. 2012, small-image form)."""
    return _chain((32, 32, 3), [
        ("Conv2D", {"filters": 32, "kernel_size": 3, "padding": "same", "activation": "relu"}),
        ("BatchNormalization", {}), ("MaxPooling2D", {"pool_size": 2}),
        ("Conv2D", {"filters": 64, "kernel_size": 3, "padding": "same", "activation": "relu"}),
        ("MaxPooling2D", {"pool_size": 2}),
        ("Conv2D", {"filters": 64, "kernel_size": 3, "padding": "same", "activation": "relu"}),
        ("Conv2D", {"filters": 64, "kernel_size": 3, "padding": "same", "activation": "relu"}),
        ("MaxPooling2D", {"pool_size": 2}), ("Flatten", {}),
        ("Dense", {"units": 128, "activation": "relu"}), ("Dropout", {"rate": 0.5}),
        ("Dense", {"units": 10, "activation": "softmax"})])


def lstm1() -> dict:
    """Two stacked LSTMs on sequences of 20×8 (regression head)."""
    return _chain((20, 8), [("LSTM", {"units": 16, "return_sequences": True}), ("LSTM", {"units": 16}),
                            ("Dense", {"units": 1})])


def lstm2() -> dict:
    """LSTM + dense classifier on sequences of 30×4."""
    return _chain((30, 4), [("LSTM", {"units": 32}), ("Dropout", {"rate": 0.2}),
                            ("Dense", {"units": 5, "activation": "softmax"})])


def application(name: str) -> dict:
    """A ``keras.applications`` model (random weights, ten classes) converted to a spec.

    Raises:
        InputError: unknown name.
    """
    if name not in _APPS:
        raise InputError(f"unknown seed model {name!r}; choose from {', '.join(ALL_SEEDS)}")
    keras = graph.keras_module()
    attr, shape = _APPS[name]
    model = getattr(keras.applications, attr)(weights=None, input_shape=shape, classes=10)
    return graph.from_keras(model)


def seed(name: str) -> dict:
    """The seed model spec called ``name`` (one of :data:`ALL_SEEDS`).

    Raises:
        InputError: unknown name.
    """
    small = {"LeNet5": lenet5, "AlexNet": alexnet, "LSTM1": lstm1, "LSTM2": lstm2}
    if name in small:
        return small[name]()
    return application(name)
