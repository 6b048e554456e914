"""Mutation operator validity, model reduction preserving coverage, campaign resume and bad input.

Uses Keras on the torch backend in-process (the generator's reference backend); no worker processes.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from twinspect.dl.fuzz import graph, operators, reduction, seeds
from twinspect.dl.fuzz.campaign import Campaign, Config
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
                if op in ("NLA", "LResh", "LMerge", "LConn"):
                    assert len(m["nodes"]) == len(parent["nodes"]) + 1
                if op == "NaN":
                    assert not np.isfinite(graph.make_inputs(m)).all()
                if op in ("CShape", "CMode"):
                    assert [n["layer"] for n in m["nodes"]] == [n["layer"] for n in parent["nodes"]]
    assert valid >= 4, f"{op}: only {valid} of 8 mutants build and run"


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
