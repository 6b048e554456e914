"""Seed models of MEMO (§4): LeNet-5, AlexNet, keras.applications CNNs (weights=None) and two LSTM models.

Hand-written seeds are specs built from catalogue layers; application models are converted with
:func:`twinspect.dl.fuzz.graph.from_keras` (no download: ``weights=None``) at small input sizes.

Converting and reducing the six large seeds takes minutes each (InceptionResNetV2: about 4 min to convert
and 13 min to reduce on this 2-core machine), so :func:`prepared` caches the built (and optionally reduced)
spec of a seed as JSON, keyed by the Keras version and the source of the modules the result depends on; a
campaign then pays the cost once per machine, not once per campaign (MEMO's RQ3 needs these seeds).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import time
from pathlib import Path

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


def parse_names(text: str) -> list[str]:
    """The seed model names of a comma-separated ``--seeds`` value, in order, without repeats.

    ``all`` stands for :data:`ALL_SEEDS` (the paper's ten seed models) and ``small`` for
    :data:`SMALL_SEEDS`; either may be mixed with names (``small,ResNet50``).

    Args:
        text: e.g. ``"LeNet5,AlexNet"``, ``"all"`` or ``"small,Xception"``; blanks around names are ignored.

    Returns:
        The names, each one of :data:`ALL_SEEDS`.

    Raises:
        InputError: a name that is not a seed model, or no name at all.
    """
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        group = {"all": ALL_SEEDS, "small": SMALL_SEEDS}.get(part.lower(), (part,))
        for name in group:
            if name not in ALL_SEEDS:
                raise InputError(f"unknown seed model {name!r}; choose from all, small, {', '.join(ALL_SEEDS)}")
            if name not in out:
                out.append(name)
    if not out:
        raise InputError("--seeds names no seed model; choose from all, small, " + ", ".join(ALL_SEEDS))
    return out


def chain(input_shape, layers) -> dict:
    """A sequential model spec: each ``(layer, params)`` reads the one before, the first reads the input.

    Args:
        input_shape: the input shape without the batch axis (e.g. ``(28, 28, 1)``).
        layers: ``(layer type, parameters)`` pairs from :mod:`twinspect.dl.fuzz.catalogue`; node
            ``i`` is named ``f"{layer.lower()}_{i}"``.

    Returns:
        The spec (:mod:`twinspect.dl.fuzz.graph`'s dict), not built.
    """
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
    return chain((28, 28, 1), [
        ("Conv2D", {"filters": 6, "kernel_size": 5, "padding": "same", "activation": "tanh"}),
        ("AveragePooling2D", {"pool_size": 2}),
        ("Conv2D", {"filters": 16, "kernel_size": 5, "activation": "tanh"}),
        ("AveragePooling2D", {"pool_size": 2}),
        ("Flatten", {}), ("Dense", {"units": 120, "activation": "tanh"}),
        ("Dense", {"units": 84, "activation": "tanh"}), ("Dense", {"units": 10, "activation": "softmax"})])


def alexnet() -> dict:
    """AlexNet-style CNN on 32×32×3 (Krizhevsky et al. 2012, small-image form)."""
    return chain((32, 32, 3), [
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
    return chain((20, 8), [("LSTM", {"units": 16, "return_sequences": True}), ("LSTM", {"units": 16}),
                            ("Dense", {"units": 1})])


def lstm2() -> dict:
    """LSTM + dense classifier on sequences of 30×4."""
    return chain((30, 4), [("LSTM", {"units": 32}), ("Dropout", {"rate": 0.2}),
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


#: environment variable naming the seed cache directory (default ``~/.cache/twinspect/fuzz-seeds``)
CACHE_ENV = "TWINSPECT_FUZZ_SEED_CACHE"


def cache_dir() -> Path:
    """Directory of the prepared-seed cache: ``$TWINSPECT_FUZZ_SEED_CACHE`` or ``~/.cache/twinspect/fuzz-seeds``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "twinspect" / "fuzz-seeds"


def _code_key() -> str:
    """12 hex digits over the Keras version and the source of the code a prepared seed depends on (seed
    definitions, spec conversion, reduction, the coverage that reduction preserves, and of the mutation
    operators only ``remove_node``, which reduction uses: a change to the operators does not redo the
    reduction of the large seeds, minutes each)."""
    import inspect

    from twinspect.dl.fuzz import catalogue, coverage, operators, reduction

    h = hashlib.sha1(importlib.metadata.version("keras").encode())
    h.update(Path(__file__).read_bytes())
    for mod in (graph, reduction, coverage, catalogue):
        h.update(Path(mod.__file__ or "").read_bytes())
    h.update(inspect.getsource(operators.remove_node).encode())
    return h.hexdigest()[:12]


def prepared(name: str, reduce: bool, cache: Path | None = None) -> tuple[dict, dict]:
    """The built spec of seed ``name`` (node shapes recorded), reduced by MEMO's Algorithm 1 when ``reduce``.

    Args:
        name: one of :data:`ALL_SEEDS`.
        reduce: apply :func:`twinspect.dl.fuzz.reduction.reduce_model`.
        cache: cache directory (default :func:`cache_dir`); a file per (name, reduce, code key). A cache
            that cannot be written is not an error (the spec is returned uncached).

    Returns:
        ``(spec, info)``: ``info`` = ``{"layers_before", "layers_after", "cached": bool, "prepare_s": float}``
        (``prepare_s``: seconds spent converting and reducing now, 0.0 from the cache; ``layers_after`` equals
        ``layers_before`` without ``reduce``).

    Raises:
        InputError: unknown name.
        Exception: whatever Keras raises when the seed does not build (not expected for the shipped seeds).
    """
    if name not in ALL_SEEDS:
        raise InputError(f"unknown seed model {name!r}; choose from {', '.join(ALL_SEEDS)}")
    path = (cache or cache_dir()) / f"{name}.{'reduced' if reduce else 'full'}.{_code_key()}.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            return data["spec"], {**data["info"], "cached": True, "prepare_s": 0.0}
        except (ValueError, KeyError):
            pass  # a damaged cache file is rebuilt below
    t0 = time.perf_counter()
    if reduce:  # the reduction starts from the (cached) full spec
        from twinspect.dl.fuzz import reduction

        spec, _ = prepared(name, False, cache)
        before = len(spec["nodes"])
        spec = reduction.reduce_model(spec)
    else:
        spec = seed(name)
        graph.build(spec)  # records node shapes (reduction and the operators need them)
        before = len(spec["nodes"])
    info = {"layers_before": before, "layers_after": len(spec["nodes"])}
    spec = json.loads(json.dumps(spec))  # the cached form (tuples become lists): fresh and cached seeds are equal
    try:
        from twinspect._io import write_json

        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {"name": name, "reduced": reduce, "spec": spec, "info": info}, indent=None)
    except OSError:
        pass
    return spec, {**info, "cached": False, "prepare_s": round(time.perf_counter() - t0, 1)}
