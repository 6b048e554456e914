"""Muffin-style baseline: random DAG-shaped models generated from scratch from the layer catalogue.

Follows the model generation of Muffin (Gu, Luo, Zhou, Xu, Wang: "Muffin: Testing Deep Learning Libraries
via Neural Architecture Fuzzing", ICSE 2022): a model is a fresh directed acyclic graph, not a mutant of a
seed, in one of Muffin's two structure modes —

* *chain with skips*: node ``i`` reads node ``i − 1`` and, with probability :data:`SKIP_P`, one earlier node
  as well (ResNet-like shortcuts);
* *cell*: NAS-style cells, each node reading one or two earlier nodes drawn at random;

— and each node gets a layer drawn from the catalogue (:mod:`twinspect.dl.fuzz.catalogue`) among the
layers that accept its input's rank, with random parameter values from the catalogue's value spaces
(:func:`twinspect.dl.fuzz.operators.random_params`, no coverage preference). A node with two inputs is a
merging layer; when the two shapes differ, both inputs are flattened and concatenated (Muffin aligns
shapes with reshaping layers too). Layers are called on symbolic Keras tensors as the graph grows, so a
layer Keras rejects is redrawn (up to :data:`TRIES` times) instead of spoiling the model: Muffin likewise
only emits models whose shapes check.

Deliberate differences from Muffin: inference only (Muffin also runs a training step and compares losses
and gradients; twinspect's campaign and oracles compare forward outputs); layers are drawn uniformly
(no selection weights); there is no coverage guidance of any kind (Muffin has none at model level either),
while the campaign still counts every generated model's layer type, pair and parameter coverage with the
same :func:`twinspect.dl.fuzz.coverage.model_coverage` as MEMO's mutants; the input shape is drawn from
:data:`INPUT_SHAPES` (small tensors of rank 2–5, batch included) so every rank's layers are reachable.
"""

from __future__ import annotations

import random
from typing import Any

from twinspect.dl.fuzz import catalogue, graph, operators

#: per-sample input shapes (batch axis excluded) a generated model may take, by batch-inclusive rank
INPUT_SHAPES: dict[int, tuple[tuple[int, ...], ...]] = {
    2: ((16,), (32,)), 3: ((10, 8), (20, 4)), 4: ((16, 16, 3), (28, 28, 1), (32, 32, 3)), 5: ((8, 8, 8, 2), (6, 10, 10, 3))}
MODES = ("chain", "cell")
#: probability that a chain node also reads an earlier node (a skip connection)
SKIP_P = 0.3
#: probability that a cell node reads two earlier nodes
CELL_TWO_P = 0.4
#: draws of a layer for one node before the node is skipped
TRIES = 8
MIN_NODES, MAX_NODES = 4, 16
_SINGLE = tuple(la.name for la in catalogue.LAYERS if la.arity == 1)
_MERGING = tuple(la.name for la in catalogue.LAYERS if la.category == "merging")
_ATTENTION = tuple(la.name for la in catalogue.LAYERS if la.category == "attention")


def _ok_shape(shape) -> bool:
    return all(d is not None and int(d) > 0 for d in shape) and operators._size(shape) <= operators.MAX_ELEMENTS


def _try_node(spec: dict, tensors: dict, node: dict[str, Any]) -> list[int] | None:
    """Call ``node`` on the symbolic tensors; keep it (append to ``spec``) when Keras accepts it and its output
    has a usable shape. Returns the per-sample output shape, or None (nothing kept)."""
    try:
        out = graph.call_node(node, tensors)
    except Exception:
        tensors.pop(node["name"], None)
        return None
    shape = list(out.shape[1:])
    if not _ok_shape(shape):
        tensors.pop(node["name"], None)
        return None
    spec["nodes"].append(node)
    return [int(d) for d in shape]


def _single(spec: dict, tensors: dict, shapes: dict, src: str, rng: random.Random) -> str | None:
    """Add one single-input catalogue layer reading ``src``; its name, or None after :data:`TRIES` rejected draws."""
    shape = shapes[src]
    cands = [n for n in _SINGLE if len(shape) + 1 in catalogue.BY_NAME[n].in_ranks]
    for _ in range(TRIES):
        layer = rng.choice(cands)
        node: dict[str, Any] = {"name": graph.fresh_name(spec, layer), "layer": layer,
                                "params": operators.random_params(layer, shape, rng), "inputs": [src]}
        out = _try_node(spec, tensors, node)
        if out is not None:
            shapes[node["name"]] = out
            return node["name"]
    return None


def _merge(spec: dict, tensors: dict, shapes: dict, a: str, b: str, rng: random.Random) -> str | None:
    """Merge ``a`` and ``b`` with a merging (or, for two sequences, attention) layer; inputs of different shapes
    are flattened and concatenated. Returns the merge node's name, or None."""
    if shapes[a] != shapes[b]:
        flat: list[str] = []
        for src in (a, b):
            if len(shapes[src]) == 1:
                flat.append(src)
                continue
            flatten: dict[str, Any] = {"name": graph.fresh_name(spec, "Flatten"), "layer": "Flatten", "params": {},
                                       "inputs": [src]}
            out = _try_node(spec, tensors, flatten)
            if out is None:
                return None
            shapes[flatten["name"]] = out
            flat.append(flatten["name"])
        cat: dict[str, Any] = {"name": graph.fresh_name(spec, "Concatenate"), "layer": "Concatenate",
                               "params": {"axis": -1}, "inputs": flat}
        out = _try_node(spec, tensors, cat)
        if out is not None:
            shapes[cat["name"]] = out
            return cat["name"]
        return None
    shape = shapes[a]
    cands = [m for m in _MERGING + _ATTENTION if len(shape) + 1 in catalogue.BY_NAME[m].in_ranks]
    for _ in range(TRIES):
        layer = rng.choice(cands)
        node: dict[str, Any] = {"name": graph.fresh_name(spec, layer), "layer": layer,
                                "params": operators.random_params(layer, shape, rng), "inputs": [a, b]}
        out = _try_node(spec, tensors, node)
        if out is not None:
            shapes[node["name"]] = out
            return node["name"]
    return None


def generate(rng: random.Random, mode: str | None = None, nodes: int | None = None) -> dict:
    """One random DAG-shaped model spec (see the module docstring).

    Args:
        rng: the campaign's random generator.
        mode: ``"chain"`` or ``"cell"`` (:data:`MODES`); None draws one.
        nodes: number of nodes to draw (merge alignment may add Flatten nodes; a node whose layer draws all
            fail is skipped); None draws from ``MIN_NODES..MAX_NODES``.

    Returns:
        A spec (``{"input_shape", "nodes", "outputs", "origin": "muffin:<mode>"}``) with node shapes recorded,
        at least one node, outputs = the graph's sinks. The caller still builds it (the campaign's validity check).

    Raises:
        ValueError: an unknown ``mode``.
    """
    mode = mode or rng.choice(MODES)
    if mode not in MODES:
        raise ValueError(f"unknown Muffin structure mode {mode!r}; choose from {', '.join(MODES)}")
    keras = graph.keras_module()
    rank = rng.choice(sorted(INPUT_SHAPES))
    in_shape = list(rng.choice(INPUT_SHAPES[rank]))
    spec = graph.new_spec(in_shape)
    tensors = {graph.INPUT: keras.Input(shape=tuple(in_shape), name=graph.INPUT)}
    shapes: dict[str, list[int]] = {graph.INPUT: in_shape}
    order = [graph.INPUT]
    for _ in range(nodes or rng.randint(MIN_NODES, MAX_NODES)):
        if mode == "chain":
            srcs = [order[-1]]
            if len(order) > 2 and rng.random() < SKIP_P:
                srcs.append(rng.choice(order[:-1]))
        else:
            k = 2 if len(order) >= 2 and rng.random() < CELL_TWO_P else 1
            srcs = sorted(rng.sample(order, k), key=order.index)
        if len(srcs) == 2:
            name = _merge(spec, tensors, shapes, srcs[0], srcs[1], rng)
        else:
            name = _single(spec, tensors, shapes, srcs[0], rng)
        if name is not None:
            order.append(name)
    if not spec["nodes"]:  # every draw failed (rare): one Identity keeps the model valid
        _try_node(spec, tensors, {"name": "identity_0", "layer": "Identity", "params": {}, "inputs": [graph.INPUT]})
    for n in spec["nodes"]:
        n["shape"] = shapes.get(n["name"]) or [int(d) for d in tensors[n["name"]].shape[1:]]
    spec["outputs"] = graph.sinks(spec)
    spec["origin"] = f"muffin:{mode}"
    return spec
