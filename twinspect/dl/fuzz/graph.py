"""The model spec: a JSON-able layer graph, built into a Keras 3 functional model.

A spec is ``{"input_shape": [d1, ...] (batch axis excluded), "nodes": [{"name", "layer", "params",
"inputs"}], "outputs": [names]}``. ``layer`` is a ``keras.layers`` class name, ``params`` its config
(constructor keyword arguments; Keras config dicts accepted), ``inputs`` node names (``"input"`` is the
model input). Nodes are listed in topological order. After :func:`build`, each node carries its output
``"shape"`` (batch excluded). Keras is imported lazily (``KERAS_BACKEND`` defaults to ``torch`` here,
the reference backend of the generator).
"""

from __future__ import annotations

import copy
import os
from typing import Any

import numpy as np

from twinspect.errors import ModelError

INPUT = "input"


def keras_module():
    """Import Keras (backend ``$KERAS_BACKEND``, default ``torch`` when unset) and return the module."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    return keras


def new_spec(input_shape: list[int]) -> dict:
    """An empty spec with the given per-sample input shape."""
    return {"input_shape": list(input_shape), "nodes": [], "outputs": []}


def node_names(spec: dict) -> list[str]:
    return [n["name"] for n in spec["nodes"]]


def fresh_name(spec: dict, layer: str) -> str:
    """A node name not yet used in ``spec`` (``<layer>_<k>``)."""
    used = set(node_names(spec))
    k = len(used)
    while f"{layer.lower()}_{k}" in used:
        k += 1
    return f"{layer.lower()}_{k}"


def consumers(spec: dict, name: str) -> list[dict]:
    """Nodes that take ``name`` as an input."""
    return [n for n in spec["nodes"] if name in n["inputs"]]


def sinks(spec: dict) -> list[str]:
    """Names of nodes no other node consumes, in order."""
    used = {i for n in spec["nodes"] for i in n["inputs"]}
    return [n["name"] for n in spec["nodes"] if n["name"] not in used]


def shape_of(spec: dict, name: str) -> list[int] | None:
    """Output shape (batch excluded) recorded for ``name`` by the last build, or the input shape."""
    if name == INPUT:
        return list(spec["input_shape"])
    for n in spec["nodes"]:
        if n["name"] == name:
            return n.get("shape")
    return None


def prune(spec: dict) -> dict:
    """Drop nodes that do not reach an output; outputs default to the sinks. Returns the same dict."""
    if not spec["outputs"] or any(o not in node_names(spec) for o in spec["outputs"]):
        spec["outputs"] = sinks(spec)
    needed = set(spec["outputs"])
    for n in reversed(spec["nodes"]):
        if n["name"] in needed:
            needed.update(n["inputs"])
    spec["nodes"] = [n for n in spec["nodes"] if n["name"] in needed]
    return spec


def _make_layer(keras, node: dict):
    cls = getattr(keras.layers, node["layer"], None)
    if cls is None:
        raise ModelError(f"unknown Keras layer {node['layer']!r}")
    cfg = dict(node.get("params", {}))
    for key, value in cfg.items():  # the catalogue's label "l1_l2" is Keras 3's identifier "l1l2"
        if key.endswith("_regularizer") and value == "l1_l2":
            cfg[key] = "l1l2"
    cfg["name"] = node["name"]
    return cls.from_config(cfg)


def call_node(node: dict, tensors: dict[str, Any]):
    """Make node ``node``'s Keras layer, call it on its input tensors and store its output in ``tensors``.

    Args:
        node: a spec node (``{"name", "layer", "params", "inputs"}``).
        tensors: node name → Keras tensor (symbolic or eager) of the nodes built so far (``"input"`` included).

    Returns:
        The output tensor (also stored as ``tensors[node["name"]]``).

    Raises:
        Exception: whatever Keras raises for an invalid layer config or input.
    """
    layer = _make_layer(keras_module(), node)
    args = [tensors[i] for i in node["inputs"]]
    if node["layer"] in ("Attention", "AdditiveAttention"):
        out = layer(args if len(args) > 1 else [args[0], args[0]])
    elif node["layer"] == "MultiHeadAttention":
        out = layer(args[0], args[-1])
    elif len(args) > 1 or node.get("list_input"):
        out = layer(args)
    else:
        out = layer(args[0])
    tensors[node["name"]] = out
    return out


def build(spec: dict, record_shapes: bool = True):
    """Build the Keras functional model of ``spec``.

    Args:
        spec: model spec; when ``record_shapes`` its nodes get ``"shape"`` (list of int, batch excluded).
        record_shapes: write output shapes into the spec.

    Returns:
        A ``keras.Model`` with one input and the spec's outputs.

    Raises:
        Exception: whatever Keras raises for an invalid graph (callers count it as an invalid mutant).
    """
    keras = keras_module()
    x = keras.Input(shape=tuple(spec["input_shape"]), name=INPUT)
    tensors: dict[str, Any] = {INPUT: x}
    for node in spec["nodes"]:
        out = call_node(node, tensors)
        if record_shapes:
            node["shape"] = [int(d) if d is not None else -1 for d in out.shape[1:]]
    outs = spec["outputs"] or sinks(spec)
    return keras.Model(inputs=x, outputs=[tensors[o] for o in outs])


def make_inputs(spec: dict, seed: int = 0, batch: int = 2) -> np.ndarray:
    """Random float32 inputs in [0, 1) of shape ``(batch, *input_shape)``, with the spec's NaN/Inf injection.

    The NaN operator sets ``spec["inject"] = {"value": "nan"|"inf"|"-inf", "fraction": f}``; that fraction
    of the entries (at least one) gets the special value.
    """
    rng = np.random.default_rng(seed)
    x = rng.random((batch, *spec["input_shape"]), dtype=np.float32)
    inj = spec.get("inject")
    if inj:
        val = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[inj["value"]]
        flat = x.reshape(-1)
        k = max(1, int(flat.size * float(inj.get("fraction", 0.01))))
        idx = rng.choice(flat.size, size=k, replace=False)
        flat[idx] = val
    return x


def validate(spec: dict, seed: int = 0):
    """Build ``spec`` and run one batch on the reference backend; returns ``(model, outputs list)``.

    Raises:
        Exception: the spec does not build or run (an invalid mutant).
    """
    model = build(spec)
    outs = model(make_inputs(spec, seed), training=False)
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    keras = keras_module()
    return model, [np.asarray(keras.ops.convert_to_numpy(o)) for o in outs]


def output_elements(spec: dict) -> int:
    """Elements per sample over the spec's outputs, from the shapes :func:`build` recorded (unknown dims as 1).

    Raises:
        KeyError: an output has no recorded shape (the spec was not built).
    """
    shapes = {n["name"]: n["shape"] for n in spec["nodes"] if "shape" in n}
    total = 0
    for o in spec["outputs"] or sinks(spec):
        n = 1
        for d in shapes[o]:
            n *= max(int(d), 1)
        total += n
    return total


def count_params(model) -> int:
    """Number of weights (scalars) of a built Keras model."""
    return int(model.count_params())


def from_keras(model) -> dict:
    """Convert a single-input Keras functional model into a spec (its layers' configs become params).

    ``keras.applications``' InceptionResNetV2 residual ``CustomScaleLayer`` (``x0 + x1 * scale``) becomes the
    equivalent ``Rescaling(scale)`` of ``x1`` followed by ``Add``.

    Raises:
        ModelError: the model has several inputs or a layer that is not a ``keras.layers`` class.
    """
    keras = keras_module()
    cfg = model.get_config()
    ins = cfg["input_layers"]
    if ins and isinstance(ins[0], str):
        ins = [ins]
    if len(ins) != 1:
        raise ModelError("only single-input models can be converted")
    in_name = ins[0][0]
    spec = new_spec([int(d) for d in model.inputs[0].shape[1:]])
    rename = {in_name: INPUT}
    for lay in cfg["layers"]:
        if lay["class_name"] == "InputLayer":
            continue
        if lay["class_name"] == "CustomScaleLayer":  # InceptionResNetV2's residual: inputs[0] + inputs[1] * scale
            a, b = (rename.get(s, s) for s in _history(lay["inbound_nodes"][0]["args"]))
            scaled = lay["name"] + "_scale"
            spec["nodes"].append({"name": scaled, "layer": "Rescaling", "params": {"scale": float(lay["config"]["scale"]),
                                                                                  "offset": 0.0}, "inputs": [b]})
            spec["nodes"].append({"name": lay["name"], "layer": "Add", "params": {}, "inputs": [a, scaled]})
            continue
        if not hasattr(keras.layers, lay["class_name"]):
            raise ModelError(f"layer {lay['class_name']!r} is not a keras.layers class")
        nodes = lay["inbound_nodes"]
        if len(nodes) != 1:
            raise ModelError(f"shared layer {lay['name']!r} cannot be converted")
        srcs = _history(nodes[0]["args"]) + _history(nodes[0].get("kwargs", {}))
        params = {k: v for k, v in lay["config"].items() if k not in ("name", "trainable", "dtype")}
        node = {"name": lay["name"], "layer": lay["class_name"], "params": params,
                "inputs": [rename.get(s, s) for s in srcs]}
        if len(srcs) == 1 and isinstance(nodes[0]["args"][0], list):
            node["list_input"] = True
        spec["nodes"].append(node)
    outs = cfg["output_layers"]
    if outs and isinstance(outs[0], str):
        outs = [outs]
    spec["outputs"] = [o[0] for o in outs]
    return spec


def _history(obj) -> list[str]:
    out: list[str] = []
    if isinstance(obj, dict):
        if obj.get("class_name") == "__keras_tensor__":
            out.append(obj["config"]["keras_history"][0])
        else:
            for v in obj.values():
                out.extend(_history(v))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            out.extend(_history(v))
    return out


def clone(spec: dict) -> dict:
    """Deep copy of a spec."""
    return copy.deepcopy(spec)


def as_mutant(spec: dict | None) -> dict | None:
    """An operator's output made ready to build: nodes nothing reads pruned (:func:`prune`) and the parent's
    ``shapes_valid`` mark dropped (the mutant's shapes are recorded again when it is built). In place;
    None (the operator did not apply) stays None."""
    if spec is not None:
        prune(spec)
        spec.pop("shapes_valid", None)
    return spec
