"""Acceptance rule and selector of Algorithm 2, D_MAD on hand-computed vectors, oracles, dedup signatures."""

from __future__ import annotations

import random

import numpy as np
import pytest

from twinspect.dl.fuzz import oracles, triage
from twinspect.dl.fuzz.campaign import parse_budget
from twinspect.dl.fuzz.search import SeedSelector, acceptance
from twinspect.errors import InputError


def test_acceptance_rule():
    assert acceptance(3, 1, 0.2) == 1.0  # moving to a fitter rank is always accepted
    assert acceptance(2, 2, 0.2) == 1.0
    assert acceptance(0, 3, 0.5) == pytest.approx(0.125)
    assert acceptance(1, 4, 0.1) == pytest.approx(0.9 ** 3)


def test_mh_prefers_fit_seeds_and_random_mode_is_uniform():
    def counts(mode):
        sel = SeedSelector(("A", "B"), p=0.3, mode=mode)
        for m in ("m0", "m1", "m2", "m3", "m4"):
            sel.add_model(m)
        rng = random.Random(1)
        picks = {}
        for _ in range(2000):
            ranked = sel.ranked()
            seed = sel.pick(rng)
            picks[ranked.index(seed)] = picks.get(ranked.index(seed), 0) + 1
            sel.selected.clear()  # keep fitness fixed to look at the rank distribution
        return picks

    mh, rnd = counts("mh"), counts("random")
    assert mh.get(0, 0) > 3 * mh.get(9, 0)
    assert max(rnd.values()) < 2 * min(rnd.values())


def test_fitness_uses_scores_and_selection_counts():
    sel = SeedSelector(("A", "B"))
    sel.add_model("m0")
    sel.feedback("m0", "A", True)
    sel.feedback("m0", "B", False)
    assert sel.fitness("m0", "A") == pytest.approx(0.5 + 1.0)
    assert sel.fitness("m0", "B") == pytest.approx(0.5 + 0.0)
    sel.selected["m0|A"] = 2
    assert sel.fitness("m0", "A") == pytest.approx(1.5 / 3)
    assert SeedSelector.from_json(sel.to_json()).fitness("m0", "A") == pytest.approx(0.5)


def test_d_mad_hand_computed():
    assert oracles.d_mad(np.array([1.0, 2.0, 3.0]), np.array([1.0, 4.0, 0.0])) == pytest.approx(5 / 3)
    # lists of outputs are concatenated; non-finite positions are left out
    a = [np.array([[0.5, np.nan]]), np.array([2.0])]
    b = [np.array([[0.0, 1.0]]), np.array([np.inf])]
    assert oracles.d_mad(a, b) == pytest.approx(0.5)
    assert np.isnan(oracles.d_mad(np.array([np.nan]), np.array([1.0])))
    with pytest.raises(ValueError):
        oracles.d_mad(np.zeros(3), np.zeros(4))
    assert oracles.calibrate_threshold([1e-8, 3e-5, float("nan")]) == pytest.approx(3e-4)
    assert oracles.calibrate_threshold([1e-8, 3e-7]) == 1e-4  # the floor
    assert oracles.calibrate_threshold([]) == 1e-4


def test_judge_crash_nan_inconsistency():
    ok = {"status": "ok", "outputs": [np.array([0.0, 1.0])]}
    far = {"status": "ok", "outputs": [np.array([0.0, 2.0])]}
    nanout = {"status": "ok", "outputs": [np.array([np.nan, 1.0])]}
    dead = {"status": "crash", "error_type": "SIGSEGV", "message": "", "frames": []}
    kinds = [f["kind"] for f in oracles.judge({"a": ok, "b": dead}, 1e-3)]
    assert kinds == ["crash"]
    assert oracles.judge({"a": dead, "b": dead}, 1e-3) == []  # nobody succeeded: not a differential crash
    f = oracles.judge({"a": ok, "b": nanout}, 1e-3)
    assert [x["kind"] for x in f] == ["nan"] and f[0]["systems"] == ["b"]
    f = oracles.judge({"a": ok, "b": far}, 0.1)
    assert f[0]["kind"] == "inconsistency" and f[0]["detail"]["d_mad"] == pytest.approx(0.5)
    assert oracles.judge({"a": ok, "b": far}, 0.6) == []


def test_judge_reports_the_deviating_system_once_and_ignores_rounding_of_huge_outputs():
    base = np.array([0.0, 1.0, 2.0])
    res = {s: {"status": "ok", "outputs": [base.copy()]} for s in ("a", "b", "c")}
    res["d"] = {"status": "ok", "outputs": [base + 0.5]}
    f = oracles.judge(res, 0.1)
    assert [(x["kind"], x["systems"]) for x in f] == [("inconsistency", ["a", "d"])]  # not three pairs
    assert f[0]["detail"]["reference"] == "a"
    res["c"] = {"status": "ok", "outputs": [base - 0.5]}  # two groups of one beside {a, b}
    assert sorted(x["systems"] for x in oracles.judge(res, 0.1)) == [["a", "c"], ["a", "d"]]
    huge = np.array([1e30, -3e31, 2e32])
    rounding = huge * (1 + 1e-6)  # float32-level relative noise, absolute D_MAD ~1e26
    assert oracles.judge({"a": {"status": "ok", "outputs": [huge]}, "b": {"status": "ok", "outputs": [rounding]}}, 1e-4) == []
    assert oracles.judge({"a": {"status": "ok", "outputs": [huge]}, "b": {"status": "ok", "outputs": [rounding]}},
                         1e-4, rel_tol=0, max_magnitude=np.inf) != []
    big, off = np.array([1e3, 2e3]), np.array([1.1e3, 2e3])  # 5 % apart at magnitude 1e3: compared and reported
    assert oracles.judge({"a": {"status": "ok", "outputs": [big]}, "b": {"status": "ok", "outputs": [off]}}, 1e-4) != []
    assert oracles.judge({"a": {"status": "ok", "outputs": [big]}, "b": {"status": "ok", "outputs": [off]}}, 1e-4,
                         max_magnitude=100) == []
    assert oracles.magnitude(np.array([1.0, -3.0]), np.array([3.0, np.nan])) == pytest.approx(2.0)


def test_signature_deduplication():
    c1 = {"kind": "crash", "systems": ["onnxruntime"], "detail": {"status": "error", "error_type": "ValueError",
                                                                 "frames": ["onnx.py:export", "x.py:f"]}}
    c2 = {**c1, "detail": {**c1["detail"], "frames": ["onnx.py:export", "y.py:g"], "message": "other text"}}
    c3 = {**c1, "detail": {**c1["detail"], "frames": ["conv.py:call"]}}
    assert triage.signature(c1) == triage.signature(c2)
    assert triage.finding_id(triage.signature(c1)) != triage.finding_id(triage.signature(c3))
    n1 = {"kind": "nan", "systems": ["keras-jax"], "layer": "MaxPooling2D"}
    n2 = {"kind": "nan", "systems": ["keras-jax"], "layer": "Conv2D"}
    assert triage.signature(n1) != triage.signature(n2)


def test_parse_budget():
    assert parse_budget("90s") == 90 and parse_budget("15m") == 900 and parse_budget("1h30m") == 5400
    assert parse_budget("12") == 12
    for bad in ("soon", "1x", "0", "-5m", "1h 2"):
        with pytest.raises(InputError):
            parse_budget(bad)
