"""MEMO's "diverse" choices in NLA/LResh/LConn (uncovered pairs of every layer) and CShape/CMode (layers and
parameters with uncovered values first, values Keras accepts, output shape restored).

Each test is built so that the rule it checks is the only way to pass: the uncovered items sit on one layer
of a long model, where a uniform or 12-tensor draw meets them only now and then.
"""

from __future__ import annotations

import random

from twinspect.dl.fuzz import catalogue, graph, operators, seeds
from twinspect.dl.fuzz.coverage import Coverage, model_coverage


def _chain(input_shape, layers) -> dict:
    spec = seeds.chain(input_shape, layers)
    graph.build(spec)
    return spec


def test_pair_choice_reaches_the_uncovered_pairs_of_a_rare_layer():
    # 40 ReLUs and one LayerNormalization in the middle; every pair is covered but those that start at
    # LayerNormalization. The authors' choose_new_layer enumerates every layer class of the model, so every
    # pick is such a pair; a draw over 12 of the 42 tensors missed the LayerNormalization most of the time.
    spec = _chain([6, 4], [("ReLU", {})] * 20 + [("LayerNormalization", {})] + [("ReLU", {})] * 20)
    cov = Coverage(types=set(catalogue.BY_NAME),
                   pairs={p for p in catalogue.legal_pairs() if p[0] != "LayerNormalization"})
    for k in range(25):
        src, shape, layer = operators._pick_pair(spec, operators._candidates, cov, random.Random(k))
        assert src == "layernormalization_20" and ("LayerNormalization", layer) not in cov.pairs
        assert len(shape) + 1 in catalogue.BY_NAME[layer].in_ranks
    for k in range(10):  # NLA and LConn both cover one of those pairs
        for op in ("NLA", "LConn"):
            m = operators.apply(op, spec, cov, random.Random(k))
            assert m is not None and any(p[0] == "LayerNormalization" for p in model_coverage(m).pairs - cov.pairs)


def test_lconn_returns_none_when_every_pair_is_covered():
    spec = _chain([6, 4], [("ReLU", {})] * 3)
    cov = Coverage(types=set(catalogue.BY_NAME), pairs=set(catalogue.legal_pairs()))
    assert operators._lconn_one(spec, cov, random.Random(0)) is None


def test_cmode_mutates_the_layer_whose_values_are_uncovered():
    # 30 Dense layers whose values are all covered and one LayerNormalization whose are not: CMode on one
    # layer (the "diverse" rule: a layer with an uncovered value first) always picks the LayerNormalization
    # and covers a new value; a uniform draw picked it once in 31.
    spec = _chain([6, 4], [("Dense", {"units": 4})] * 15 + [("LayerNormalization", {})] + [("Dense", {"units": 4})] * 15)
    cov = Coverage(params={t for t in catalogue.param_values() if t[0] != "LayerNormalization"})
    for k in range(15):
        m = operators.change_params(spec, cov, random.Random(k), ("mode",), 1)
        assert m is not None
        new = model_coverage(m).params - cov.params
        assert new and all(t[0] == "LayerNormalization" for t in new)


def test_cmode_prefers_a_parameter_with_uncovered_values():
    # Dense: every value covered but kernel_initializer's "orthogonal"; each CMode of it (1-3 of its 7 mode
    # parameters) sets kernel_initializer first and covers that value
    spec = _chain([6, 4], [("Dense", {"units": 4})])
    cov = Coverage(params=set(catalogue.param_values()) - {("Dense", "kernel_initializer", "orthogonal")})
    for k in range(15):
        m = operators.change_params(spec, cov, random.Random(k), ("mode",), 1)
        assert m["nodes"][0]["params"]["kernel_initializer"] == "orthogonal"


def test_cshape_mutants_of_a_residual_block_stay_valid():
    # Conv2D inside a residual Add: a new filter count, stride or (valid) kernel size changes its output shape,
    # and the Add then rejects the model. CShape restores the shape for the readers (NL_mut's revert_shape), and
    # only values Keras accepts on the 3x3 input are kept (a 4-5 kernel or pool would make the model invalid).
    spec = graph.new_spec([3, 3, 4])
    spec["nodes"] = [
        {"name": "conv", "layer": "Conv2D", "params": {"filters": 4, "kernel_size": 1, "padding": "valid"},
         "inputs": [graph.INPUT]},
        {"name": "add", "layer": "Add", "params": {}, "inputs": [graph.INPUT, "conv"]},
    ]
    spec["outputs"] = ["add"]
    graph.build(spec)
    valid = gained = 0
    for k in range(20):
        m = operators.apply("CShape", spec, Coverage(), random.Random(k))
        assert m is not None
        conv = next(n for n in m["nodes"] if n["name"] == "conv")
        try:
            graph.validate(m)
            valid += 1
        except Exception:
            continue
        gained += conv["params"] != spec["nodes"][0]["params"]
        assert all(n["inputs"] != ["conv"] or n.get("adapter") or n["shape"] == [3, 3, 4] for n in m["nodes"])
    assert valid == 20 and gained == 20


def test_cshape_keeps_a_kernel_that_fits_the_input():
    # on a 2x2 input with valid padding, Conv2D accepts kernel sizes 1 and 2 only: every CShape of the kernel
    # keeps one of them (the symbolic call rejects 3 and 4-5, and another bucket is tried)
    spec = _chain([2, 2, 3], [("Conv2D", {"filters": 2, "kernel_size": 1, "padding": "valid"})])
    lay = catalogue.BY_NAME["Conv2D"]
    for k in range(20):
        m = operators.change_params(spec, Coverage(), random.Random(k), ("shape",), 1)
        ks = m["nodes"][0]["params"]["kernel_size"]
        assert (ks[0] if isinstance(ks, list) else ks) in (1, 2)
        graph.validate(m)
    assert lay.param("kernel_size") is not None
