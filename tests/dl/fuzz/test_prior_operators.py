"""Issue 20, item 1: MEMO_o with the operators of all three prior tools (DeepMutation, LEMON, Audee).

The weight rules are checked against hand-worked arrays from their definitions (the authors' ``NEB_mut``,
``NAI_mut``, ``NS_mut``, ``WS_mut``, ``GF_mut`` with ``mutation_ratio = 1``); the operators on a real seed
model built with Keras on the torch backend in-process; a short MEMO_o campaign on one worker process.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from twinspect.dl.fuzz import catalogue, graph, prior_operators, seeds
from twinspect.dl.fuzz.campaign import Campaign, Config, read_model_log
from twinspect.dl.fuzz.coverage import Coverage, model_coverage


def _kb():
    kernel = np.arange(1.0, 13.0, dtype=np.float32).reshape(2, 2, 3)  # (…, fan-in, 3 output neurons)
    return [kernel, np.array([0.5, -1.0, 2.0], dtype=np.float32)]


def test_neuron_rules_follow_their_definitions_on_a_hand_worked_layer():
    w = _kb()
    neb = prior_operators.edit_weights("NEB", w, np.random.default_rng(0))
    assert neb is not None and not neb[0].any() and not neb[1].any()  # ratio 1: every neuron blocked
    nai = prior_operators.edit_weights("NAI", w, np.random.default_rng(0))
    assert nai is not None and np.array_equal(nai[0], -w[0]) and np.array_equal(nai[1], -w[1])
    ns = prior_operators.edit_weights("NS", w, np.random.default_rng(3))
    assert ns is not None
    moved = [j for j in range(3) if not np.array_equal(ns[0][..., j], w[0][..., j])]
    assert len(moved) == 2  # exactly two neurons switched, kernel columns and biases together
    a, b = moved
    assert np.array_equal(ns[0][..., a], w[0][..., b]) and np.array_equal(ns[0][..., b], w[0][..., a])
    assert ns[1][a] == w[1][b] and ns[1][b] == w[1][a]
    assert np.array_equal(w[0], np.arange(1.0, 13.0, dtype=np.float32).reshape(2, 2, 3))  # inputs untouched
    # not [kernel, bias] with one bias per output neuron: skipped, as the authors skip such layers
    assert prior_operators.edit_weights("NEB", [w[0]], np.random.default_rng(0)) is None
    assert prior_operators.edit_weights("NS", [np.ones((4, 1)), np.ones(1)], np.random.default_rng(0)) is None
    assert prior_operators.edit_weights("GF", [], np.random.default_rng(0)) is None
    with pytest.raises(KeyError):
        prior_operators.edit_weights("XX", w, np.random.default_rng(0))


def test_weight_shuffle_permutes_each_output_neurons_incoming_weights_and_keeps_biases():
    w = _kb()
    ws = prior_operators.edit_weights("WS", w, np.random.default_rng(1))
    assert ws is not None and np.array_equal(ws[1], w[1])
    cols, new = w[0].reshape(-1, 3), ws[0].reshape(-1, 3)
    assert all(sorted(new[:, j]) == sorted(cols[:, j]) for j in range(3))  # a permutation within each column
    assert not np.array_equal(new, cols)


def test_gaussian_fuzzing_moves_every_weight_by_a_tenth_of_their_spread():
    rng = np.random.default_rng(7)
    kernel = rng.normal(size=(200, 50)).astype(np.float32)
    gf = prior_operators.edit_weights("GF", [kernel], np.random.default_rng(2))
    assert gf is not None
    delta = gf[0] - kernel
    assert np.count_nonzero(delta) == kernel.size
    assert abs(float(delta.std()) / float(kernel.std()) - prior_operators.GF_STD) < 0.01


def test_every_memo_o_operator_gives_a_valid_mutant_of_alexnet():
    parent = seeds.alexnet()  # has shape-preserving layers (BatchNormalization, Dropout) for LEMON's rules
    graph.build(parent)
    assert set(prior_operators.MEMO_O_OPERATORS) == set(prior_operators.OPERATORS) and len(prior_operators.MEMO_O_OPERATORS) == 13
    for op in prior_operators.MEMO_O_OPERATORS:
        made = 0
        for k in range(6):
            m = prior_operators.apply(op, parent, Coverage(), random.Random(k))
            if m is None:
                continue
            try:
                graph.validate(graph.clone(m))
            except Exception:  # LEMON/Audee mutants Keras rejects are invalid mutants, counted by the campaign
                continue
            made += 1
        assert made >= 1, op


def test_weight_rules_edit_only_their_layer_and_add_no_coverage():
    parent = seeds.lenet5()
    graph.build(parent)
    keras = graph.keras_module()
    for op in prior_operators.WEIGHT_RULES:
        m = prior_operators.apply(op, parent, Coverage(), random.Random(1))
        assert m is not None and [n["name"] for n in m["nodes"]] == [n["name"] for n in parent["nodes"]]
        assert model_coverage(m) == model_coverage(parent)  # structure and parameters unchanged
        (edit,) = m["weight_edits"]
        assert edit["rule"] == op and "weight_edits" not in parent
        keras.utils.set_random_seed(11)
        plain = graph.build(graph.clone(m))
        keras.utils.set_random_seed(11)
        edited = graph.build(graph.clone(m))
        assert prior_operators.apply_weight_edits(edited, m) == 1
        for layer in plain.layers:
            same = all(np.array_equal(a, b) for a, b in zip(layer.get_weights(), edited.get_layer(layer.name).get_weights()))
            assert same == (layer.name != edit["layer"]), (op, layer.name)
    # an edit whose layer a later mutation removed changes nothing
    gone = {**graph.clone(parent), "weight_edits": [{"rule": "NEB", "layer": "no_such_layer", "seed": 0}]}
    assert prior_operators.apply_weight_edits(graph.build(graph.clone(gone)), gone) == 0


def test_audee_changes_audee_parameters_of_exactly_one_layer():
    parent = seeds.lenet5()
    graph.build(parent)
    changed_layers = set()
    for k in range(12):
        m = prior_operators.apply("Audee", parent, Coverage(), random.Random(k))
        assert m is not None
        before = {n["name"]: n for n in parent["nodes"]}
        diff = [(n["name"], n["layer"], {p for p in n["params"] if n["params"].get(p) != before[n["name"]]["params"].get(p)})
                for n in m["nodes"] if n["name"] in before and n["params"] != before[n["name"]]["params"]]
        assert len(diff) <= 1  # one layer (a value may equal the old one)
        for _, layer, params in diff:
            assert layer in prior_operators.AUDEE_PARAMS and params <= set(prior_operators.AUDEE_PARAMS[layer])
            changed_layers.add(layer)
    assert changed_layers  # it does change something
    assert all(catalogue.get(layer) is not None for layer in prior_operators.AUDEE_PARAMS)
    for layer, params in prior_operators.AUDEE_PARAMS.items():
        assert set(params) <= {p.name for p in catalogue.get(layer).params}, layer  # type: ignore[union-attr]


def test_memo_o_campaign_selects_the_thirteen_operators_and_weight_mutants_stay_out_of_the_pool(tmp_path):
    cfg = Config(backends=["keras-torch"], seeds=["LeNet5"], seed=2, variant="memo_o")
    s = Campaign.create(tmp_path / "o", cfg).run(budget_s=600, max_models=8)
    st = json.loads((tmp_path / "o" / "state.json").read_text())
    assert set(st["selector"]["operators"]) == set(prior_operators.MEMO_O_OPERATORS)
    logged = read_model_log(tmp_path / "o")
    assert s["models_generated"] == 8 and len(logged) >= 3
    assert {r["op"] for r in logged} <= set(prior_operators.MEMO_O_OPERATORS)
    assert all(not r["gained"] for r in logged if r["op"] in prior_operators.WEIGHT_RULES)
    assert not any("weight_edits" in spec for spec in st["pool"].values())


def test_the_campaigns_seeded_build_carries_out_the_weight_edits(tmp_path):
    camp = Campaign.create(tmp_path / "b", Config(backends=["keras-torch"], seeds=["LeNet5"], variant="memo_o"))
    parent = seeds.lenet5()
    graph.build(parent)
    dense = next(n["name"] for n in parent["nodes"] if n["layer"] == "Dense")
    m = {**graph.clone(parent), "weight_edits": [{"rule": "NAI", "layer": dense, "seed": 0}]}
    plain, edited = camp._seeded_build(graph.clone(parent)), camp._seeded_build(m)  # same index: same initial weights
    for a, b in zip(plain.get_layer(dense).get_weights(), edited.get_layer(dense).get_weights()):
        assert np.array_equal(b, -a)
