"""Coverage numerators stay inside their denominators, checked against what Keras 3 actually builds."""

from __future__ import annotations

import random

import pytest

from twinspect.dl.fuzz import catalogue, graph, operators, seeds
from twinspect.dl.fuzz.coverage import Coverage, model_coverage

#: a per-sample input shape for each input rank (batch axis included in the rank)
SHAPES = {2: [12], 3: [8, 6], 4: [8, 8, 4], 5: [6, 6, 6, 4]}


def _one_layer(layer: str, params: dict, shape: list[int]) -> dict:
    return {"input_shape": list(shape), "outputs": ["l"],
            "nodes": [{"name": "l", "layer": layer, "params": params, "inputs": ["input"]}]}


def _out_rank(layer: str, params: dict, shape: list[int]) -> int | None:
    spec = _one_layer(layer, params, shape)
    try:
        graph.build(spec)
    except Exception:
        return None
    return len(spec["nodes"][0]["shape"]) + 1


def test_rank_rules_match_what_keras_builds():
    """Every output rank a catalogue layer really produces is one of its ``out_ranks()``, so every edge a
    generated model can hold is in ``legal_pairs()`` (the layer-pair denominator)."""
    rank_params = {"keepdims": (True, False), "return_sequences": (True, False)}
    for lay in catalogue.LAYERS:
        if lay.arity != 1:
            continue
        for r in lay.in_ranks:
            built = 0
            for k in range(3):
                params = operators.random_params(lay.name, SHAPES[r], random.Random(k))
                variants = [params] + [{**params, name: v} for name, vals in rank_params.items()
                                       if name in params for v in vals]
                for p in variants:
                    got = _out_rank(lay.name, p, SHAPES[r])
                    if got is None:
                        continue
                    built += 1
                    assert got in lay.out_ranks(), f"{lay.name} {p} on rank {r} gives rank {got}"
            assert built, f"{lay.name} never builds on rank {r}"


def test_global_pooling_with_keepdims_feeding_a_rank4_layer_is_a_legal_pair():
    spec = {"input_shape": [8, 8, 3], "outputs": ["c"], "nodes": [
        {"name": "g", "layer": "GlobalAveragePooling2D", "params": {"keepdims": True}, "inputs": ["input"]},
        {"name": "c", "layer": "Conv2D", "params": {"filters": 2, "kernel_size": 1}, "inputs": ["g"]}]}
    graph.build(spec)  # Keras accepts it, so the generator can produce it
    assert spec["nodes"][1]["shape"] == [1, 1, 2]
    cov = model_coverage(spec)
    assert ("GlobalAveragePooling2D", "Conv2D") in cov.pairs
    assert ("GlobalAveragePooling2D", "Conv2D") in catalogue.legal_pairs()
    assert cov.outside() == {"layer_type": [], "layer_pair": [], "layer_param": []}


def test_generated_mutants_stay_inside_the_denominators():
    rng = random.Random(11)
    cov = Coverage()
    pool = []
    for s in (seeds.lenet5(), seeds.lstm2()):
        graph.build(s)
        pool.append(s)
        cov.update(model_coverage(s))
    made = 0
    for i in range(36):
        op = operators.MEMO_OPERATORS[i % len(operators.MEMO_OPERATORS)]
        k = rng.randrange(len(pool))
        m = operators.apply(op, pool[k], cov, rng)
        if m is None:
            continue
        try:
            graph.build(m)
        except Exception:
            continue  # invalid mutant: never counted
        made += 1
        cov.update(model_coverage(m))
        pool[k] = m
    assert made >= 20
    assert cov.outside() == {"layer_type": [], "layer_pair": [], "layer_param": []}
    s = cov.summary()
    assert all(v["outside"] == 0 and v["covered"] <= v["total"] for v in s.values())


#: larger inputs for the value-space check (cropping 3-4 needs a spatial size of 7 or more)
BIG_SHAPES = {2: [12], 3: [16, 6], 4: [16, 16, 4], 5: [10, 10, 10, 4]}


def _boundary_labels(p: catalogue.Param) -> list[str]:
    labels = p.labels()
    if p.kind == "mode":
        return [catalogue.value_label(v) for v in p.values
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
    edge = {"0", "-1", "1", labels[0], labels[-1]}
    return [lab for lab in labels if lab in edge]


def test_boundary_values_of_the_value_spaces_are_accepted_by_keras():
    """Each edge of a numeric value space (0, -1, 1, the smallest and the largest bucket, every numeric mode
    value) builds on some input: the denominators hold no value Keras rejects."""
    failed = []
    for lay in catalogue.LAYERS:
        if lay.arity != 1:
            continue
        for p in lay.params:
            for lab in _boundary_labels(p):
                ok = False
                for k in range(4):
                    rng = random.Random(k)
                    r = lay.in_ranks[k % len(lay.in_ranks)]
                    params = operators.random_params(lay.name, BIG_SHAPES[r], rng)
                    others = set(p.labels()) - {lab}
                    params[p.name] = operators.sample_value(p, rng, avoid=others)
                    if p.name == "strides" and lab != "1":
                        params.pop("dilation_rate", None)
                    if _out_rank(lay.name, params, BIG_SHAPES[r]) is not None:
                        ok = True
                        break
                if not ok:
                    failed.append((lay.name, p.name, lab))
    assert failed == []


@pytest.mark.parametrize("layer,params,shape,left_out", [
    ("Dense", {"units": 0}, [4], "units"), ("Conv2D", {"filters": 0, "kernel_size": 2}, [8, 8, 3], "filters"),
    ("LSTM", {"units": 0}, [5, 3], "units"), ("RepeatVector", {"n": 0}, [4], "n"),
    ("DepthwiseConv2D", {"kernel_size": 2, "depth_multiplier": 0}, [8, 8, 3], "depth_multiplier"),
    ("Conv2D", {"filters": 2, "kernel_size": 2, "strides": 2, "dilation_rate": 2}, [12, 12, 3], None),
])
def test_values_left_out_of_the_spaces_are_rejected_by_keras(layer, params, shape, left_out):
    """The catalogue leaves 0 out of these spaces because Keras 3 rejects it at build time (an invalid model,
    not a test of a library); Conv2D's strides > 1 with dilation_rate > 1 is never generated."""
    assert _out_rank(layer, params, shape) is None
    if left_out is not None:
        assert catalogue.BY_NAME[layer].param(left_out).label_of(0) is None


def test_depthwise_conv_accepts_strides_with_dilation():
    assert _out_rank("DepthwiseConv2D", {"kernel_size": 2, "strides": 2, "dilation_rate": 2}, [12, 12, 3]) == 4
