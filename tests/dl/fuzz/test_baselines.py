"""Issue 20, items 4 and 5: the Muffin-style and LEMON-style baselines, cached (reduced) seeds, and finding
signatures from the root-cause layer of the minimised model.

Keras runs on the torch backend in-process; the campaigns run real worker processes (seconds each).
"""

from __future__ import annotations

import json
import random
import textwrap

import numpy as np
import pytest

from twinspect.dl.fuzz import graph, lemon, muffin, seeds, triage
from twinspect.dl.fuzz.backends import Worker
from twinspect.dl.fuzz.campaign import Campaign, Config, read_model_log
from twinspect.dl.fuzz.coverage import Coverage, coverage_of
from twinspect.errors import InputError


def _runs(spec) -> list[np.ndarray]:
    return graph.validate(graph.clone(spec))[1]


def test_muffin_generates_valid_dag_models_of_both_structures():
    rng = random.Random(5)
    specs = [muffin.generate(rng, mode=("chain", "cell")[i % 2]) for i in range(10)]
    for s in specs:
        outs = _runs(s)  # builds and runs on the reference backend
        assert len(outs) == len(s["outputs"]) >= 1 and all(np.isfinite(o).all() for o in outs if o.dtype.kind == "f")
        names = ["input"] + graph.node_names(s)
        assert all(names.index(i) < names.index(n["name"]) for n in s["nodes"] for i in n["inputs"])  # topological
    assert {s["origin"] for s in specs} == {"muffin:chain", "muffin:cell"}
    assert any(len(n["inputs"]) == 2 for s in specs for n in s["nodes"])  # DAGs, not only chains
    assert len({len(s["input_shape"]) for s in specs}) >= 2  # inputs of several ranks
    cov = coverage_of(specs)
    assert cov.outside() == {"layer_type": [], "layer_pair": [], "layer_param": []}
    assert len(cov.types) >= 15
    with pytest.raises(ValueError, match="unknown Muffin structure mode"):
        muffin.generate(rng, mode="tree")


def _out_shapes(spec) -> list[list[int]]:
    return [graph.shape_of(spec, o) for o in spec["outputs"]]


@pytest.mark.parametrize("rule", lemon.RULES)
def test_lemon_rules_give_valid_mutants_with_the_seed_output_shapes(rule):
    rng = random.Random(11)
    valid = 0
    for name in ("LeNet5", "AlexNet", "LSTM2"):
        parent = seeds.seed(name)
        graph.build(parent)
        for _ in range(3):
            m = lemon.apply(rule, parent, rng)
            if m is None:
                continue
            assert m != parent
            try:
                graph.build(m)
            except ValueError:  # e.g. LA's random PReLU params on a 1-D tensor: an invalid mutant, as in a campaign
                continue
            assert _out_shapes(m) == _out_shapes(parent)  # LEMON's rules keep the model's output shape
            valid += 1
    assert valid >= 3, f"{rule}: {valid} valid mutants"


def test_layer_switch_and_activation_removal_on_a_hand_made_chain():
    spec = {"input_shape": [8], "nodes": [
        {"name": "d", "layer": "Dense", "params": {"units": 8, "activation": "relu"}, "inputs": ["input"]},
        {"name": "bn", "layer": "BatchNormalization", "params": {}, "inputs": ["d"]},
        {"name": "a", "layer": "Activation", "params": {"activation": "tanh"}, "inputs": ["bn"]}], "outputs": ["a"]}
    graph.build(spec)
    rng = random.Random(0)
    sw = lemon.layer_switch(spec, rng)
    assert sw is not None
    order = [(n["layer"], n["inputs"]) for n in sw["nodes"]]
    # the only switchable pairs are d->bn and bn->a: either way two layers traded places and the chain holds
    assert order in ([("BatchNormalization", ["input"]), ("Dense", ["bn"]), ("Activation", ["d"])],
                     [("Dense", ["input"]), ("Activation", ["d"]), ("BatchNormalization", ["a"])])
    assert sw["outputs"] == [sw["nodes"][-1]["name"]]
    rem = lemon.activation_removal(spec, rng)
    assert rem is not None and sorted(n["params"].get("activation") for n in rem["nodes"] if "activation" in n["params"]) \
        in (["linear", "tanh"], ["linear", "relu"])


def test_inconsistency_degree_is_the_sum_of_pairwise_d_mad():
    ok = lambda v: {"status": "ok", "outputs": [np.array([v, v], dtype=np.float32)]}  # noqa: E731
    res = {"a": ok(1.0), "b": ok(1.5), "c": ok(3.0), "d": {"status": "crash"}}
    assert lemon.inconsistency_degree(res) == pytest.approx(0.5 + 2.0 + 1.5)
    assert lemon.inconsistency_degree({"a": ok(1.0), "d": {"status": "error"}}) is None
    sel = lemon.LemonSelector()
    sel.add_model("m0", 2.0)
    assert sel.raised("m0", 2.5) and not sel.raised("m0", 2.0) and not sel.raised("m0", None)
    mid, rule = sel.pick(random.Random(0))
    assert mid == "m0" and rule in lemon.RULES and sel.uses[rule] == 1 and sel.picks["m0"] == 1
    assert lemon.LemonSelector.from_json(json.loads(json.dumps(sel.to_json()))) == sel


@pytest.mark.parametrize("variant", ["muffin", "lemon"])
def test_baseline_campaign_counts_coverage_with_the_same_code(tmp_path, variant):
    cfg = Config(backends=["keras-torch"], seeds=["LeNet5", "LSTM2"], seed=4, variant=variant)
    camp = Campaign.create(tmp_path / variant, cfg)
    s = camp.run(budget_s=600, max_models=5)
    st = json.loads((tmp_path / variant / "state.json").read_text())
    logged = read_model_log(tmp_path / variant)
    assert s["models_generated"] == 5 and s["models_valid"] == len(logged) >= 3
    assert s["models_tested"] == s["models_valid"]  # every valid model ran on the backend
    got = Coverage.from_json(st["coverage"])
    if variant == "muffin":  # from scratch: the seeds are not in the pool nor in the coverage
        assert st["pool"] == {} and all(r["op"] == "Muffin" and r["spec"]["origin"].startswith("muffin:") for r in logged)
        assert got == coverage_of(r["spec"] for r in logged)
    else:
        assert {r["op"] for r in logged} <= set(lemon.RULES) and st["lemon"]["uses"]
        assert got == coverage_of([*st["seed_specs"].values(), *(r["spec"] for r in logged)])
    assert s["coverage"]["layer_type"]["covered"] == len(got.types) and s["coverage"]["layer_type"]["outside"] == 0


def test_unknown_variant_and_seed_are_input_errors():
    with pytest.raises(InputError, match="unknown variant 'nnsmith'; choose from memo, .*muffin, lemon"):
        Config(variant="nnsmith").validate()
    with pytest.raises(InputError, match="unknown seed model 'VGG16'"):
        Config(seeds=["VGG16"]).validate()


def test_prepared_seeds_are_reduced_and_cached(tmp_path):
    spec, info = seeds.prepared("MobileNetV2", reduce=True, cache=tmp_path)
    assert not info["cached"] and info["layers_before"] == 155 and info["layers_after"] == len(spec["nodes"]) < 100
    assert all("shape" in n for n in spec["nodes"])  # built: the operators need node shapes
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and files[0].startswith("MobileNetV2.full.") and files[1].startswith("MobileNetV2.reduced.")
    again, info2 = seeds.prepared("MobileNetV2", reduce=True, cache=tmp_path)
    assert info2["cached"] and info2["prepare_s"] == 0.0 and again == spec
    graph.build(graph.clone(again))
    with pytest.raises(InputError, match="unknown seed model"):
        seeds.prepared("VGG16", reduce=False, cache=tmp_path)


def _chain_probe():
    spec = {"input_shape": [4], "nodes": [
        {"name": "d1", "layer": "Dense", "params": {"units": 4}, "inputs": ["input"]},
        {"name": "r", "layer": "ReLU", "params": {}, "inputs": ["d1"]},
        {"name": "d2", "layer": "Dense", "params": {"units": 3}, "inputs": ["r"]},
        {"name": "s", "layer": "Softmax", "params": {}, "inputs": ["d2"]}], "outputs": ["s"]}
    graph.build(spec)
    return triage.probe_spec(spec)


def test_root_cause_is_the_first_node_showing_the_symptom():
    probe = _chain_probe()
    assert probe["outputs"] == ["d1", "r", "d2", "s"]
    x = [np.ones((2, 4), np.float32), np.ones((2, 4), np.float32), np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)]
    nan = [a.copy() for a in x]
    nan[1][0, 0] = nan[2][0, 0] = nan[3][0, 0] = np.nan  # NaN appears at the ReLU and flows downstream
    res = {"keras-jax": {"status": "ok", "outputs": nan}, "keras-torch": {"status": "ok", "outputs": x}}
    assert triage.root_cause(probe, {"kind": "nan", "systems": ["keras-jax"]}, res, 1e-3) == "ReLU"
    off = [a.copy() for a in x]
    off[2] += 0.5
    off[3] += 0.5  # diverges at the second Dense, not at the Softmax that shows it in the model output
    res = {"keras-jax": {"status": "ok", "outputs": off}, "keras-torch": {"status": "ok", "outputs": x}}
    f = {"kind": "inconsistency", "systems": ["keras-jax", "keras-torch"]}
    assert triage.root_cause(probe, f, res, 1e-3) == "Dense"
    assert triage.root_cause(probe, f, {**res, "keras-jax": {"status": "crash"}}, 1e-3) is None
    assert triage.root_cause(probe, f, {"keras-jax": {"status": "ok", "outputs": x}, "keras-torch": res["keras-torch"]},
                             1e-3) is None  # no node diverges


# a "keras-jax" whose every output is the reference's plus 10: every node diverges, so the root cause of each
# finding is its minimised model's first node, whichever layer shows the symptom at the model's outputs
SHIFTED = textwrap.dedent('''
    import os
    os.environ["KERAS_BACKEND"] = "torch"

    import keras
    import numpy as np

    from twinspect.dl.fuzz.backends.worker import serve


    def run_one(model, inputs):
        m = keras.saving.load_model(model, compile=False)
        out = m(np.load(inputs)["x"], training=False)
        return [keras.ops.convert_to_numpy(o) + 10.0 for o in (out if isinstance(out, (list, tuple)) else [out])]


    if __name__ == "__main__":
        serve(run_one)
''')


def test_campaign_signatures_name_the_root_cause_layer_of_the_minimised_model(tmp_path):
    from twinspect.dl.fuzz.executors import LocalExecutor

    (tmp_path / "shifted.py").write_text(SHIFTED)
    ex = LocalExecutor(timeout_s=120)
    ex.workers["keras-jax"] = Worker("keras-jax", ["shifted"], timeout_s=120, env={"PYTHONPATH": str(tmp_path)})
    root = tmp_path / "camp"
    cfg = Config(backends=["keras-torch", "keras-jax"], seeds=["LSTM1"], seed=6, threshold=1.0, minimise_tries=0)
    s = Campaign.create(root, cfg).run(budget_s=600, max_models=4, executor=ex)
    finds = [f for f in s["findings"] if f["kind"] == "inconsistency"]
    assert finds and s["models_tested"] >= 1
    for f in finds:
        meta = json.loads((root / f["dir"] / "finding.json").read_text())
        first = meta["model_spec"]["nodes"][0]["layer"]
        assert f["root_cause"] == "probe" and f["layer"] == first and f["signature"].endswith(f"|{first}")
        assert f["symptom_layer"] is not None  # the layer at the model output, kept for the record
    # one cause, one finding: every inconsistency is counted under one of as many signatures as first layers
    assert sum(f["duplicates"] for f in finds) == s["models_tested"]
    assert len(finds) == len({f["layer"] for f in finds})


def test_weight_cap_follows_the_seed_and_oversize_mutants_are_counted_apart(tmp_path, monkeypatch):
    from twinspect.dl.fuzz import campaign as cm

    cfg = Config(backends=["keras-torch"], seeds=["LeNet5"], seed=2)
    camp = Campaign.create(tmp_path / "c", cfg)
    camp.state["seed_weights"] = {"ResNet50": 8_000_000}
    assert camp._weight_cap({"origin": "ResNet50"}) == 16_000_000  # a reduced ResNet50's mutants can be valid
    assert camp._weight_cap({"origin": "LeNet5"}) == cm.MAX_WEIGHTS == camp._weight_cap({})
    monkeypatch.setattr(cm, "MAX_WEIGHTS", 10)  # now every mutant is oversize
    monkeypatch.setattr(cm, "SEED_WEIGHT_FACTOR", 0.0)
    s = Campaign.create(tmp_path / "small", cfg).run(budget_s=600, max_models=3)
    st = json.loads((tmp_path / "small" / "state.json").read_text())
    lenet = graph.build(seeds.lenet5(), record_shapes=False)
    assert st["seed_weights"] == {"LeNet5": graph.count_params(lenet)}
    assert s["models_valid"] == 0 and s["models_invalid"] == 3
    assert sum(n for k, n in s["invalid_reasons"].items() if k.endswith(":OversizeModel")) >= 1
