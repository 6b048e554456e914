"""Inconsistency signatures name the deviating system, not the pair (issue 20 item 4: one cause, one finding).

Hand-made results of the four systems, worked by hand at threshold 0.2 (every output's magnitude is about
1.5 or less, so the relative guard, 1e-3 of it, never decides): ``BASE`` is one output of four elements;
a system's output is ``BASE + shift``, so the D_MAD of two systems is the difference of their shifts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from twinspect.dl.fuzz import oracles, triage

SYSTEMS = ["keras-jax", "keras-tensorflow", "keras-torch", "onnxruntime"]
THRESHOLD = 0.2
BASE = np.array([[0.0, 0.5, 1.0, 1.5]], np.float32)


def _results(shift: dict[str, float]) -> dict[str, dict]:
    """Model outputs (one output) of the four systems: ``BASE + shift[system]`` (0 when not given)."""
    return {s: {"status": "ok", "outputs": [BASE + np.float32(shift.get(s, 0.0))]} for s in SYSTEMS}


def _signatures(res: dict[str, dict], layer: str = "Dense") -> set[str]:
    """The campaign's keys of one model's findings: judge, mark the deviating minority, sign."""
    found = triage.mark_deviating(oracles.judge(res, THRESHOLD), res)
    return {triage.signature({**f, "layer": layer}) for f in found}


def test_one_faulty_system_of_four_is_one_signature_naming_it():
    # onnxruntime +0.5 against jax +0.01, tensorflow 0, torch -0.01: its D_MAD to each is 0.49 / 0.5 / 0.51 > 0.2,
    # the three Keras backends differ by 0.01 or 0.02 < 0.2: three flagged pairs, one cause
    res = _results({"keras-jax": 0.01, "keras-torch": -0.01, "onnxruntime": 0.5})
    found = oracles.judge(res, THRESHOLD)
    assert sorted(tuple(f["systems"]) for f in found) == [("keras-jax", "onnxruntime"), ("keras-tensorflow", "onnxruntime"),
                                                         ("keras-torch", "onnxruntime")]
    assert _signatures(res) == {"inconsistency|onnxruntime|Dense"}
    # each finding keeps its pair, and says which system deviates
    assert all(f["deviating"] == ["onnxruntime"] for f in triage.mark_deviating(found, res))
    assert triage.split(SYSTEMS, [f["systems"] for f in found]) == ["onnxruntime"]


def test_two_against_two_keeps_the_pair_signatures():
    # jax, tensorflow at 0; torch, onnxruntime at +0.5: four pairs at 0.5, two at 0; no majority of three
    res = _results({"keras-torch": 0.5, "onnxruntime": 0.5})
    assert _signatures(res) == {"inconsistency|keras-jax,keras-torch|Dense", "inconsistency|keras-jax,onnxruntime|Dense",
                                "inconsistency|keras-tensorflow,keras-torch|Dense",
                                "inconsistency|keras-tensorflow,onnxruntime|Dense"}
    assert not any("deviating" in f for f in triage.mark_deviating(oracles.judge(res, THRESHOLD), res))


def test_all_systems_differing_pairwise_is_one_signature():
    # shifts 0 / 0.3 / 0.6 / 0.9: every pair 0.3 or more apart (> 0.2), so no system is the odd one out and the
    # six flagged pairs are one cause (before: six signatures, one per pair)
    res = _results({"keras-tensorflow": 0.3, "keras-torch": 0.6, "onnxruntime": 0.9})
    found = triage.mark_deviating(oracles.judge(res, THRESHOLD), res)
    assert len(found) == 6 and all(f["all_differ"] and "deviating" not in f for f in found)
    assert _signatures(res) == {"inconsistency|all-differ|Dense"}
    # three systems all apart are the same; two systems, two against two, or a pair that agrees are not
    three = {s: r for s, r in res.items() if s != "onnxruntime"}
    assert _signatures(three) == {"inconsistency|all-differ|Dense"}
    assert triage.all_differ(["keras-jax", "onnxruntime"], [["keras-jax", "onnxruntime"]]) is False
    close = _results({"keras-tensorflow": 0.3, "keras-torch": 0.6, "onnxruntime": 0.7})  # torch-ort 0.1 apart
    assert not any(f.get("all_differ") for f in triage.mark_deviating(oracles.judge(close, THRESHOLD), close))
    assert len(_signatures(close)) > 1


def test_all_agree_no_finding():
    res = _results({"keras-jax": 0.01, "keras-torch": -0.01, "onnxruntime": 0.1})  # at most 0.11 apart
    assert oracles.judge(res, THRESHOLD) == []
    assert _signatures(res) == set()
    assert triage.split(SYSTEMS, []) is None


@pytest.mark.parametrize("shift, minority", [
    ({"onnxruntime": 0.5}, ["onnxruntime"]),
    ({"keras-torch": 0.5, "onnxruntime": 0.5}, None),  # 2 vs 2
    ({"keras-tensorflow": 0.3, "keras-torch": 0.6, "onnxruntime": 0.9}, None),  # all differ
    # onnxruntime 0.3 from jax, tensorflow and torch halfway (0.15 from both): it differs from jax only
    ({"keras-tensorflow": 0.15, "keras-torch": 0.15, "onnxruntime": 0.3}, None),
])
def test_split_of_hand_made_outputs(shift, minority):
    res = _results(shift)
    pairs = [f["systems"] for f in oracles.judge(res, THRESHOLD)]
    assert triage.split(SYSTEMS, pairs) == minority


def test_two_systems_are_no_majority_and_three_are():
    assert triage.split(["keras-jax", "onnxruntime"], [["keras-jax", "onnxruntime"]]) is None
    three = [["keras-jax", "onnxruntime"], ["keras-torch", "onnxruntime"]]
    assert triage.split(["keras-jax", "keras-torch", "onnxruntime"], three) == ["onnxruntime"]


# a probe model with every node an output: Conv2D -> BatchNormalization -> ReLU -> Dense (root_cause_split only
# reads the probe's outputs and each node's layer type)
PROBE = {"nodes": [{"name": "c", "layer": "Conv2D"}, {"name": "bn", "layer": "BatchNormalization"},
                   {"name": "r", "layer": "ReLU"}, {"name": "d", "layer": "Dense"}],
         "outputs": ["c", "bn", "r", "d"]}


def _probe_results(shifts: list[dict[str, float]], systems: list[str] = SYSTEMS) -> dict[str, dict]:
    """Probe results: node i of system s is ``BASE + shifts[i][s]``."""
    return {s: {"status": "ok", "outputs": [BASE + np.float32(sh.get(s, 0.0)) for sh in shifts]} for s in systems}


def test_root_cause_layer_decides_the_minority_of_all_four():
    # onnxruntime parts from the three at the BatchNormalization and stays apart
    pres = _probe_results([{}, {"onnxruntime": 0.5}, {"onnxruntime": 0.5}, {"onnxruntime": 0.7}])
    f = {"kind": "inconsistency", "systems": ["keras-jax", "onnxruntime"], "deviating": ["onnxruntime"]}
    assert triage.root_cause_split(PROBE, f, pres, THRESHOLD) == ("BatchNormalization", ["onnxruntime"])
    assert triage.signature({**f, "layer": "BatchNormalization", "deviating": ["onnxruntime"]}) == \
        "inconsistency|onnxruntime|BatchNormalization"


def test_faulty_system_at_a_later_layer_than_an_earlier_disagreement_names_the_earlier_layer():
    # at the BatchNormalization onnxruntime is already the minority (0.3 from each of the three, which agree);
    # at the ReLU tensorflow also moves (+0.5): no majority there, but the cause is upstream
    pres = _probe_results([{}, {"onnxruntime": 0.3}, {"onnxruntime": 0.9, "keras-tensorflow": 0.5},
                           {"onnxruntime": 0.9, "keras-tensorflow": 0.5}])
    f = {"kind": "inconsistency", "systems": ["keras-jax", "onnxruntime"]}
    layer, minority = triage.root_cause_split(PROBE, f, pres, THRESHOLD)
    assert (layer, minority) == ("BatchNormalization", ["onnxruntime"])
    assert triage.signature({**f, "layer": layer, "deviating": minority}) == "inconsistency|onnxruntime|BatchNormalization"
    # the other way round: at the BatchNormalization jax and onnxruntime part with no majority (tensorflow and
    # torch halfway, 0.15 from both); onnxruntime is the clean minority only at the ReLU. The earlier layer
    # names the finding, with its pair.
    pres = _probe_results([{}, {"keras-tensorflow": 0.15, "keras-torch": 0.15, "onnxruntime": 0.3},
                           {"onnxruntime": 1.0}, {"onnxruntime": 1.0}])
    layer, minority = triage.root_cause_split(PROBE, f, pres, THRESHOLD)
    assert (layer, minority) == ("BatchNormalization", None)
    assert triage.signature({**f, "layer": layer, "deviating": minority}) == \
        "inconsistency|keras-jax,onnxruntime|BatchNormalization"


def test_probe_of_the_pair_keeps_the_minority_decided_on_the_model_outputs():
    # the campaign probes the finding's pair only: two systems cannot decide a majority, so the minority
    # decided on the mutant's outputs (all four ran it) stands unless the probed systems contradict it
    f = {"kind": "inconsistency", "systems": ["keras-jax", "onnxruntime"], "deviating": ["onnxruntime"]}
    pres = _probe_results([{}, {"onnxruntime": 0.5}, {"onnxruntime": 0.5}, {"onnxruntime": 0.5}],
                          ["keras-jax", "onnxruntime"])
    assert triage.root_cause_split(PROBE, f, pres, THRESHOLD, SYSTEMS) == ("BatchNormalization", ["onnxruntime"])
    # the minimised model's runs (the pair and tensorflow) contradict it when tensorflow sides with onnxruntime
    assert triage.agrees(["onnxruntime"], ["keras-jax", "keras-tensorflow", "onnxruntime"],
                         [["keras-jax", "onnxruntime"], ["keras-jax", "keras-tensorflow"]]) is None
    assert triage.agrees(["onnxruntime"], ["keras-jax", "keras-tensorflow", "onnxruntime"],
                         [["keras-jax", "onnxruntime"], ["keras-tensorflow", "onnxruntime"]]) == ["onnxruntime"]


def test_nan_and_crash_are_per_system_already():
    # a NaN on onnxruntime alone is one finding (not one per pair); the finite positions agree, so no pair
    res = _results({})
    res["onnxruntime"]["outputs"][0][0, 1] = np.nan
    res["keras-torch"] = {"status": "crash", "error_type": "SIGSEGV", "message": "", "frames": []}
    found = triage.mark_deviating(oracles.judge(res, THRESHOLD), res)
    assert [(f["kind"], f["systems"]) for f in found] == [("crash", ["keras-torch"]), ("nan", ["onnxruntime"])]
    assert all("deviating" not in f for f in found)


def _spec():
    return {"input_shape": [4], "nodes": [{"name": "d", "layer": "Dense", "params": {"units": 4}, "inputs": ["input"]}],
            "outputs": ["d"]}


def test_campaign_queues_one_finding_for_one_faulty_system(tmp_path):
    """The campaign's own dedup (Campaign._judge): one faulty system of four is one queued finding, counted
    once per mutant; a second mutant with the same cause is a duplicate of it."""
    from twinspect.dl.fuzz.campaign import Campaign, Config

    camp = Campaign.create(tmp_path / "c", Config(backends=list(SYSTEMS), seeds=["LeNet5"], threshold=THRESHOLD))
    mpath, ipath = tmp_path / "m.keras", tmp_path / "x.npz"
    mpath.write_bytes(b"model")
    np.savez(ipath, x=BASE)
    res = _results({"keras-jax": 0.01, "keras-torch": -0.01, "onnxruntime": 0.5})
    camp._judge(_spec(), "NLA", None, res, mpath, ipath, list(SYSTEMS))
    pend = camp.state["pending_findings"]
    assert [p["seen"] for p in pend] == ["inconsistency|onnxruntime|Dense"]
    assert pend[0]["finding"]["deviating"] == ["onnxruntime"] and len(pend[0]["finding"]["systems"]) == 2
    assert pend[0]["duplicates"] == 0  # the other two pairs of the same mutant are the same finding, not duplicates
    camp._judge(_spec(), "NLA", None, _results({"onnxruntime": -0.4}), mpath, ipath, list(SYSTEMS))
    assert len(pend) == 1 and pend[0]["duplicates"] == 1
    json.dumps(camp.state)  # the queued finding stays JSON


def test_campaign_queues_one_finding_when_all_systems_differ(tmp_path):
    from twinspect.dl.fuzz.campaign import Campaign, Config

    camp = Campaign.create(tmp_path / "c", Config(backends=list(SYSTEMS), seeds=["LeNet5"], threshold=THRESHOLD))
    mpath, ipath = tmp_path / "m.keras", tmp_path / "x.npz"
    mpath.write_bytes(b"model")
    np.savez(ipath, x=BASE)
    res = _results({"keras-tensorflow": 0.3, "keras-torch": 0.6, "onnxruntime": 0.9})
    camp._judge(_spec(), "NLA", None, res, mpath, ipath, list(SYSTEMS))
    pend = camp.state["pending_findings"]
    assert [p["seen"] for p in pend] == ["inconsistency|all-differ|Dense"] and pend[0]["duplicates"] == 0
    assert pend[0]["finding"]["all_differ"] is True and len(pend[0]["finding"]["systems"]) == 2


def test_bundle_records_pair_and_deviating(tmp_path):
    mpath, ipath = tmp_path / "m.keras", tmp_path / "x.npz"
    mpath.write_bytes(b"model")
    np.savez(ipath, x=BASE)
    res = _results({"onnxruntime": 0.5})
    f = {"kind": "inconsistency", "systems": ["keras-jax", "onnxruntime"], "deviating": ["onnxruntime"],
         "layer": "Dense", "detail": {}}
    f["signature"] = triage.signature(f)
    dest = triage.write_bundle(tmp_path / "findings", "abc", f, _spec(), mpath, ipath, res, THRESHOLD)
    meta = json.loads((dest / "finding.json").read_text())
    assert meta["systems"] == ["keras-jax", "onnxruntime"] and meta["deviating"] == ["onnxruntime"]
    assert meta["signature"] == "inconsistency|onnxruntime|Dense"
