"""Mutation operator validity, model reduction preserving coverage, campaign resume and bad input.

Uses Keras on the torch backend in-process (the generator's reference backend); no worker processes.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from twinspect.dl.fuzz import graph, operators, reduction, seeds
from twinspect.dl.fuzz.campaign import Campaign, Config, read_model_log
from twinspect.dl.fuzz.coverage import Coverage, model_coverage
from twinspect.errors import InputError


def _built(spec):
    graph.build(spec)
    return spec


def _valid(spec) -> bool:
    try:
        graph.validate(spec)
        return True
    except Exception:
        return False


@pytest.mark.parametrize("op", operators.MEMO_OPERATORS)
def test_memo_operator_produces_valid_mutants(op):
    rng = random.Random(7)
    valid = 0
    for parent in (_built(seeds.lenet5()), _built(seeds.lstm2())):
        cov = model_coverage(parent)
        for _ in range(4):
            m = operators.apply(op, parent, cov, rng)
            assert m is not None
            assert m != parent  # every operator changes the spec
            if _valid(m):
                valid += 1
                # the operator's own layers (not the restoring layers of an inline insertion)
                added = len([n for n in m["nodes"] if not n.get("adapter")]) - len(parent["nodes"])
                if op == "NLA":  # 1-5 layers, each possibly behind a Reshape to reach an unseen type's rank
                    assert 1 <= added <= 10
                if op in ("LResh", "LConn"):
                    assert 1 <= added <= 5
                if op == "LMerge":
                    assert added == 1
                if op == "NaN":
                    assert not np.isfinite(graph.make_inputs(m)).all()
                if op in ("CShape", "CMode"):  # the same layers, plus restoring layers after a changed shape
                    assert [n["layer"] for n in m["nodes"] if not n.get("adapter")] == [n["layer"] for n in parent["nodes"]]
    assert valid >= 4, f"{op}: only {valid} of 8 mutants build and run"


def test_cshape_cmode_and_lresh_touch_one_to_five_layers():
    # MEMO: NLA, LResh, CShape and CMode apply to 1-5 layers per application
    parent = _built(seeds.alexnet())
    counts = {"CShape": set(), "CMode": set(), "LResh": set()}
    for k in range(60):
        rng = random.Random(k)
        for op in counts:
            m = operators.apply(op, parent, model_coverage(parent), rng)
            if op == "LResh":
                n = len([a for a in m["nodes"] if not a.get("adapter")]) - len(parent["nodes"])
            else:
                after = {b["name"]: b["params"] for b in m["nodes"]}
                n = sum(a["params"] != after[a["name"]] for a in parent["nodes"])
            counts[op].add(n)
    # CShape/CMode may redraw a value already there (no change) when no unseen value is left
    assert counts["LResh"] == {1, 2, 3, 4, 5}
    assert counts["CShape"] <= {0, 1, 2, 3, 4, 5} and {1, 5} <= counts["CShape"]
    assert counts["CMode"] <= {0, 1, 2, 3, 4, 5} and {1, 5} <= counts["CMode"]
    assert {operators.layers_per_application(random.Random(k)) for k in range(200)} == {1, 2, 3, 4, 5}


def test_cshape_cmode_change_one_to_three_parameters_per_layer():
    # the authors' mutate_param changes up to max_config_num = 3 parameters of each selected layer
    parent = _built(seeds.alexnet())
    per_layer = set()
    for k in range(60):
        for op in ("CShape", "CMode"):
            m = operators.apply(op, parent, Coverage(), random.Random(k))
            after = {b["name"]: b for b in m["nodes"]}
            for a in parent["nodes"]:
                b = after[a["name"]]
                keys = {key for key in set(a["params"]) | set(b["params"]) if a["params"].get(key) != b["params"].get(key)}
                if keys:
                    per_layer.add(len(keys))
    # 1-3 parameters drawn; a fourth may change only as Conv's strides/dilation_rate going back to 1
    assert {1, 2, 3} <= per_layer and max(per_layer) <= 4


def test_restore_chain_brings_every_shape_back():
    assert operators.restore_chain([8, 8, 6], [8, 8, 6]) == []
    assert operators.restore_chain([384], [8, 8, 6]) == [("Reshape", {"target_shape": [8, 8, 6]})]
    assert operators.restore_chain([16, 16, 6], [8, 8, 6]) == [("Cropping2D", {"cropping": [[4, 4], [4, 4]]})]
    assert operators.restore_chain([5, 7, 10], [8, 8, 6]) == [
        ("Dense", {"units": 6}), ("ZeroPadding2D", {"padding": [[1, 2], [0, 1]]})]
    assert operators.restore_chain([9, 4], [10, 2]) == [("Dense", {"units": 2}), ("ZeroPadding1D", {"padding": [0, 1]})]
    assert operators.restore_chain([3, 20], [7]) is None  # rank change, other element count
    assert operators.restore_chain([8, 8, 4096], [8, 8, 64]) is None  # the Dense would hold 262,144 weights
    for shape, target in (([16, 16, 6], [8, 8, 6]), ([5, 7, 10], [8, 8, 6]), ([384], [8, 8, 6]), ([9, 4], [10, 2]),
                          ([3, 3, 3, 5], [4, 2, 2, 1])):
        chain = operators.restore_chain(shape, target)
        assert chain is not None and operators.chain_shapes(chain, shape)[-1] == target


@pytest.mark.parametrize("layer,params,adapters", [
    ("ReLU", {}, []),  # keeps the shape: the readers read it directly
    ("Conv2D", {"filters": 10, "kernel_size": 3, "padding": "valid"}, ["Dense", "ZeroPadding2D"]),
    ("Flatten", {}, ["Reshape"]),
    ("UpSampling2D", {"size": 2}, ["Cropping2D"]),
])
def test_nla_inserts_inline_and_covers_the_pair_with_the_reader(layer, params, adapters):
    # MEMO/COMET's NL_mut: the new layer sits between a tensor and its readers (shape restored for them)
    parent = _built(seeds.lenet5())
    conv = parent["nodes"][0]  # Conv2D(6, 5, same) on 28x28x1 -> 28x28x6, read by AveragePooling2D
    m = operators.insert_inline(parent, conv["name"], conv["shape"], [(layer, params)])
    assert m is not None
    new = [n for n in m["nodes"] if n["name"] not in graph.node_names(parent)]
    assert [n["layer"] for n in new] == [layer, *adapters]
    assert [bool(n.get("adapter")) for n in new] == [False] + [True] * len(adapters)
    assert new[0]["inputs"] == [conv["name"]]
    pool = next(n for n in m["nodes"] if n["name"] == parent["nodes"][1]["name"])
    assert pool["inputs"] == [new[-1]["name"]]  # the old reader reads the inserted layers
    assert m["outputs"] == parent["outputs"]  # no new output branch
    before = {n["name"]: n["shape"] for n in parent["nodes"]}
    graph.validate(m)  # builds and runs
    assert all(n["shape"] == before[n["name"]] for n in m["nodes"] if n["name"] in before)  # shapes kept
    pairs = model_coverage(m).pairs
    assert ("Conv2D", layer) in pairs and ((new[-1]["layer"], "AveragePooling2D") in pairs)
    if not adapters:
        assert (layer, "AveragePooling2D") in pairs


def test_nla_falls_back_to_an_output_branch_when_the_shape_cannot_be_restored():
    parent = _built(seeds.lstm2())
    dense = next(n for n in parent["nodes"] if len(n["shape"]) == 1)  # a vector, read by the next layer
    assert operators.insert_inline(parent, dense["name"], dense["shape"], [("RepeatVector", {"n": 3})]) is None
    m = operators._place(parent, dense["name"], dense["shape"], [("RepeatVector", {"n": 3})])
    rep = next(n for n in m["nodes"] if n["layer"] == "RepeatVector" and n["name"] not in graph.node_names(parent))
    assert rep["name"] in m["outputs"] and len(m["outputs"]) == len(parent["outputs"]) + 1
    _ = _valid(m) or pytest.fail("the branch mutant does not build")
    # a layer Keras rejects on that input is not inserted inline either
    assert operators.insert_inline(parent, dense["name"], dense["shape"], [("Conv2D", {"filters": 2, "kernel_size": 3})]) is None


def test_nla_covers_more_pairs_per_mutant_than_one_per_layer():
    # each inline layer covers its producer's and its reader's pair: over 20 NLA mutants of LeNet-5, more new
    # pairs than added layers (the former output-branch insertion gave at most one pair per layer)
    parent = _built(seeds.lenet5())
    cov = model_coverage(parent)
    pairs = layers = 0
    for k in range(20):
        m = operators.apply("NLA", parent, cov, random.Random(k))
        pairs += len(model_coverage(m).pairs - cov.pairs)
        layers += len([n for n in m["nodes"] if not n.get("adapter")]) - len(parent["nodes"])
    assert pairs > 1.3 * layers


def test_lconn_adds_one_to_five_edges_each_to_an_uncovered_pair():
    parent = _built(seeds.alexnet())
    cov = model_coverage(parent)
    sizes = set()
    for k in range(40):
        m = operators.apply("LConn", parent, cov, random.Random(k))
        new = [n for n in m["nodes"] if n["name"] not in graph.node_names(parent)]
        sizes.add(len(new))
        assert len(model_coverage(m).pairs - cov.pairs) >= len(new)  # every edge an uncovered pair
    assert sizes == {1, 2, 3, 4, 5}


def test_conv_keeps_strides_or_dilation_and_depthwise_keeps_both():
    # Keras rejects strides > 1 with dilation_rate > 1 on Conv2D but accepts both on DepthwiseConv2D
    conv, depth = [], []
    for k in range(300):
        conv.append(operators.random_params("Conv2D", [32, 32, 3], random.Random(k)))
        depth.append(operators.random_params("DepthwiseConv2D", [32, 32, 3], random.Random(k)))
    assert not any(p["strides"] > 1 and p["dilation_rate"] > 1 for p in conv)
    assert any(p["strides"] > 1 for p in conv if p["dilation_rate"] == 1)
    assert any(p["dilation_rate"] > 1 for p in conv if p["strides"] == 1)
    assert any(p["strides"] > 1 and p["dilation_rate"] > 1 for p in depth)


def test_lconn_targets_unseen_pairs_and_cmode_unseen_values():
    rng = random.Random(3)
    parent = _built(seeds.lenet5())
    cov = model_coverage(parent)
    for _ in range(5):
        m = operators.apply("LConn", parent, cov, rng)
        if m is not None:
            assert model_coverage(m).pairs - cov.pairs  # a new pair
        m = operators.apply("CMode", parent, cov, rng)
        assert model_coverage(m).params - cov.params  # a new parameter value


def test_reshape_target_keeps_size_and_rank():
    rng = random.Random(0)
    for shape in ([28, 28, 6], [120], [7, 5], [13]):
        for rank in (1, 2, 3, 4):
            t = operators.reshape_target(shape, rng, rank=rank)
            assert len(t) == rank and int(np.prod(t)) == int(np.prod(shape)) and min(t) >= 1
        assert len(operators.reshape_target(shape, rng)) != len(shape)  # a free choice changes the rank
    assert sorted(operators.reshape_target([8, 8, 8], random.Random(1), rank=3)) != [1, 1, 512]  # balanced


def test_nla_reaches_an_unseen_type_of_another_rank_through_reshape():
    parent = _built(seeds.lenet5())  # image model: tensors of rank 4 and 2 only
    cov = model_coverage(parent)
    cov.types |= {n for n in operators.catalogue.BY_NAME if n != "Conv3D"}  # only Conv3D (rank 5) unseen
    rng = random.Random(5)
    built = 0
    for _ in range(4):
        m = operators.apply("NLA", parent, cov, rng)
        assert m is not None
        new = {n["name"]: n for n in m["nodes"] if n["name"] not in graph.node_names(parent)}
        conv3d = [n for n in new.values() if n["layer"] == "Conv3D"]
        assert len(conv3d) == 1  # the first step takes the only unseen type; later steps see it covered
        src = new[conv3d[0]["inputs"][0]]
        assert src["layer"] == "Reshape" and len(src["params"]["target_shape"]) == 4
        built += _valid(m)
    assert built >= 3


def test_lemon_operators():
    rng = random.Random(0)
    parent = _built(seeds.alexnet())  # has BatchNormalization and Dropout (shape-preserving)
    cov = Coverage()
    for op in operators.LEMON_OPERATORS:
        m = operators.apply(op, parent, cov, rng)
        assert m is not None and _valid(m), op
    assert len(operators.apply("LR", parent, cov, rng)["nodes"]) == len(parent["nodes"]) - 1


def _dup_blocks():
    layers = [("Conv2D", {"filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"})]
    for _ in range(3):
        layers += [("Conv2D", {"filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"}),
                   ("BatchNormalization", {}), ("ReLU", {})]
    layers += [("Flatten", {}), ("Dense", {"units": 3})]
    spec = graph.new_spec([8, 8, 3])
    prev = "input"
    for i, (lay, p) in enumerate(layers):
        spec["nodes"].append({"name": f"n{i}", "layer": lay, "params": p, "inputs": [prev]})
        prev = f"n{i}"
    spec["outputs"] = [prev]
    return _built(spec)


def test_reduction_keeps_coverage_and_builds():
    spec = _dup_blocks()
    red = reduction.reduce_model(spec)
    assert len(red["nodes"]) < len(spec["nodes"])
    a, b = model_coverage(spec), model_coverage(red)
    assert (a.types, a.pairs, a.params) == (b.types, b.pairs, b.params)
    assert _valid(red)
    rep = reduction.reduction_report(spec, red)
    assert rep["after"]["layers"] < rep["before"]["layers"] and rep["after"]["params"] < rep["before"]["params"]


def _dense_blocks():
    """DenseNet-style: each block concatenates its input with 4 new channels, so no block keeps its shape."""
    spec = graph.new_spec([8, 8, 3])
    nodes = [{"name": "stem", "layer": "Conv2D", "params": {"filters": 8, "kernel_size": 3, "padding": "same"},
              "inputs": ["input"]}]
    prev = "stem"
    for b in range(4):
        nodes += [{"name": f"bn{b}", "layer": "BatchNormalization", "params": {}, "inputs": [prev]},
                  {"name": f"relu{b}", "layer": "ReLU", "params": {}, "inputs": [f"bn{b}"]},
                  {"name": f"conv{b}", "layer": "Conv2D", "params": {"filters": 4, "kernel_size": 3, "padding": "same"},
                   "inputs": [f"relu{b}"]},
                  {"name": f"cat{b}", "layer": "Concatenate", "params": {}, "inputs": [prev, f"conv{b}"]}]
        prev = f"cat{b}"
    nodes += [{"name": "gap", "layer": "GlobalAveragePooling2D", "params": {}, "inputs": [prev]},
              {"name": "out", "layer": "Dense", "params": {"units": 3}, "inputs": ["gap"]}]
    spec["nodes"], spec["outputs"] = nodes, ["out"]
    return _built(spec)


def test_reduction_cuts_concatenating_dense_blocks_and_keeps_coverage():
    spec = _dense_blocks()
    red = reduction.reduce_model(spec)
    assert len(red["nodes"]) <= len(spec["nodes"]) - 4  # at least one whole dense block is gone
    a, b = model_coverage(spec), model_coverage(red)
    assert (a.types, a.pairs, a.params) == (b.types, b.pairs, b.params)
    assert _valid(red)
    gap = [next(n["shape"][0] for n in sp["nodes"] if n["name"] == "gap") for sp in (spec, red)]
    assert gap[1] < gap[0] == 24  # fewer concatenated channels reach the pooling layer: re-inferred downstream


def test_campaign_resume_and_bad_directories(tmp_path):
    root = tmp_path / "camp"
    cfg = Config(backends=["keras-torch"], seeds=["LeNet5", "LSTM1"], seed=1)
    camp = Campaign.create(root, cfg)
    camp.run(budget_s=600, max_models=3)
    st1 = json.loads((root / "state.json").read_text())
    assert st1["models_generated"] == 3 and st1["seeded"]
    assert st1["models_valid"] + st1["models_invalid"] == 3
    camp2 = Campaign.open(root)
    s = camp2.run(budget_s=600, max_models=2)
    assert s["models_generated"] == 5
    assert s["coverage"]["layer_type"]["covered"] >= len(st1["coverage"]["types"])
    assert len(s["coverage_over_time"]) == 1 + 5  # seeding point + one per model
    logged = read_model_log(root)
    assert len(logged) == s["models_valid"] and all("spec" in r and r["op"] for r in logged)
    # where the loop's time went, by phase: the phases sum to about the loop time (the rest is bookkeeping)
    ph = s["phase_s"]
    assert {"generate", "check", "state_write"} <= set(ph) and all(v >= 0 for v in ph.values())
    if s["models_tested"]:
        assert ph["execute"] > 0 and ph["save_model"] > 0
    assert 0.8 * s["elapsed_s"] <= sum(ph.values()) <= s["elapsed_s"] + 0.5
    # bad input
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("x")
    with pytest.raises(InputError):
        Campaign.create(tmp_path / "foreign", cfg)
    with pytest.raises(InputError):
        Campaign.open(tmp_path / "foreign")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "state.json").write_text("{not json")
    with pytest.raises(InputError):
        Campaign.open(tmp_path / "bad")


def test_campaign_keeps_grown_models_out_of_the_pool(tmp_path):
    cfg = Config(backends=["keras-torch"], seeds=["LSTM1"], seed=2, max_added_layers=0)
    camp = Campaign.create(tmp_path / "c", cfg)
    camp.run(budget_s=600, max_models=4)
    st = json.loads((tmp_path / "c" / "state.json").read_text())
    seed_layers = len(st["seed_specs"]["LSTM1"]["nodes"])
    assert st["pool_too_large"] >= 1  # some mutant added coverage and, being over the cap, was not kept
    assert all(len(spec["nodes"]) == seed_layers for spec in st["pool"].values())


def test_lmerge_of_a_model_whose_only_tensor_is_its_input():
    spec = graph.new_spec([6, 4])
    spec["nodes"] = [{"name": "d", "layer": "Dense", "params": {"units": 4}, "inputs": ["input"]}]
    spec["outputs"] = ["d"]
    spec = _built(spec)
    m = operators._insert_after(spec, "input", [6, 4], "Add", {}, ("input",))  # merging the input with itself
    assert m["nodes"][0]["layer"] == "Add" and m["nodes"][0]["inputs"] == ["input", "input"] and _valid(m)
