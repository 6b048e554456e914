"""Model reduction (MEMO Algorithm 1): drop duplicated layers and blocks while keeping coverage and shapes.

Step 1 (intra-block): a single-input layer whose output shape equals its input shape is removed when the
model's layer type / pair / parameter coverage (:func:`~twinspect.dl.fuzz.coverage.model_coverage`) is
unchanged without it. Step 2 (blocks): a block is the span between two cut nodes of the topologically
ordered graph (no edge jumps over a cut node) with equal shapes at both ends — or equal up to the channel
count, which downstream layers re-infer when the spec is rebuilt (DenseNet's concatenating blocks); it is
removed when coverage is unchanged without it. Every accepted removal is re-checked by building the model; coverage is therefore
preserved by construction and the result always builds.
"""

from __future__ import annotations

import time

from twinspect.dl.fuzz import graph
from twinspect.dl.fuzz.coverage import model_coverage
from twinspect.dl.fuzz.operators import remove_node


def _same_cov(a: dict, b: dict) -> bool:
    ca, cb = model_coverage(a), model_coverage(b)
    return ca.types == cb.types and ca.pairs == cb.pairs and ca.params == cb.params


def _builds(spec: dict) -> bool:
    try:
        graph.build(spec)
        return True
    except Exception:
        return False


def _cut_nodes(spec: dict) -> list[str]:
    names = [graph.INPUT] + graph.node_names(spec)
    pos = {n: i for i, n in enumerate(names)}
    span = [0] * (len(names) + 1)
    for n in spec["nodes"]:
        for src in n["inputs"]:
            a, b = pos[src], pos[n["name"]]
            for k in range(a + 1, b):
                span[k] += 1
    outs = set(spec["outputs"])
    return [names[i] for i in range(len(names)) if span[i] == 0 and names[i] not in outs]


def _block_ends_match(a: list[int] | None, b: list[int] | None) -> bool:
    """Whether a block from a tensor of shape ``a`` to one of shape ``b`` may be cut out: equal shapes, or
    the same rank and spatial dimensions with another channel count (the last axis). The second case is
    what DenseNet's dense blocks need (every layer concatenates 32 more channels, so no block keeps its
    input shape); the layers downstream are rebuilt from their configs and re-infer their input channels,
    and the caller's build check rejects a cut that a layer cannot absorb (a Reshape's fixed target)."""
    if a is None or b is None:
        return False
    return a == b or (len(a) == len(b) >= 2 and a[:-1] == b[:-1])


def _remove_block(spec: dict, start: str, end: str) -> dict:
    new = graph.clone(spec)
    names = graph.node_names(new)
    a = -1 if start == graph.INPUT else names.index(start)
    b = names.index(end)
    drop = set(names[a + 1:b + 1])
    new["nodes"] = [n for n in new["nodes"] if n["name"] not in drop]
    for n in new["nodes"]:
        n["inputs"] = [start if i == end else i for i in n["inputs"]]
    new["outputs"] = [start if o == end else o for o in new["outputs"]]
    return graph.prune(new)


def reduce_model(spec: dict, check_build: bool = True) -> dict:
    """Reduce a built spec (node shapes recorded) without losing coverage.

    Args:
        spec: model spec built once by :func:`twinspect.dl.fuzz.graph.build` (shapes recorded).
        check_build: rebuild after each accepted removal and undo it when the model no longer builds.

    Returns:
        The reduced spec (a new dict; shapes recorded when ``check_build``).
    """
    cur = graph.clone(spec)
    # step 2 first on whole blocks (cheap, large gains), then step 1 on single layers.
    changed = True
    while changed:
        changed = False
        cuts = _cut_nodes(cur)
        for i in range(len(cuts) - 1, 0, -1):
            for j in range(i - 1, -1, -1):
                s, e = cuts[j], cuts[i]
                if not _block_ends_match(graph.shape_of(cur, s), graph.shape_of(cur, e)):
                    continue
                cand = _remove_block(cur, s, e)
                if _same_cov(cur, cand) and (not check_build or _builds(cand)):
                    cur, changed = cand, True
                    break
            if changed:
                break
    for node in list(cur["nodes"]):
        if node["name"] not in graph.node_names(cur):
            continue
        n = next(x for x in cur["nodes"] if x["name"] == node["name"])
        if len(n["inputs"]) != 1 or n.get("shape") != graph.shape_of(cur, n["inputs"][0]) or n["inputs"][0] == graph.INPUT and not cur["nodes"]:
            continue
        cand = remove_node(cur, n["name"])
        if cand["nodes"] and _same_cov(cur, cand) and (not check_build or _builds(cand)):
            cur = cand
    if check_build:
        graph.build(cur)
    return cur


def reduction_report(spec: dict, reduced: dict, runs: int = 1) -> dict:
    """Layers, parameters and inference time (s per batch of 2, reference backend) before and after reduction."""
    out = {}
    for key, s in (("before", spec), ("after", reduced)):
        model = graph.build(graph.clone(s), record_shapes=False)
        x = graph.make_inputs(s)
        model(x, training=False)
        t = time.perf_counter()
        for _ in range(runs):
            model(x, training=False)
        out[key] = {"layers": len(s["nodes"]), "params": graph.count_params(model),
                    "inference_s": (time.perf_counter() - t) / runs}
    return out
