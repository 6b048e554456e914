"""Acceptance rule and selector of Algorithm 2, D_MAD on hand-computed vectors, oracles, dedup signatures."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from twinspect.dl.fuzz import oracles, triage
from twinspect.dl.fuzz.campaign import parse_budget
from twinspect.dl.fuzz.seed_selection import SeedSelector, Stats, acceptance, seed_key
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
        # ten distinct fitness values (1 / (1 + k)), so that the ranking is the same whatever the tie order
        fixed = {seed_key(*s): Stats(uses=k) for k, s in enumerate(sel.ranked())}
        rng = random.Random(1)
        picks = {}
        for _ in range(2000):
            sel.seeds = {k: Stats(v.uses, v.gains) for k, v in fixed.items()}  # keep fitness fixed
            ranked = sel.ranked()
            seed = sel.pick(rng)
            picks[ranked.index(seed)] = picks.get(ranked.index(seed), 0) + 1
        return picks

    mh, rnd = counts("mh"), counts("random")
    assert mh.get(0, 0) > 3 * mh.get(9, 0)
    assert max(rnd.values()) < 2 * min(rnd.values())


def test_ties_in_fitness_are_ranked_in_random_order_not_by_name():
    """The authors' sort_seeds shuffles before sorting; by name, MH would favour the names that sort first."""
    sel = SeedSelector(("A", "B", "C"), p=0.05)
    for m in ("m0", "m1", "m2", "m3"):
        sel.add_model(m)
    sel.seeds = {"m3|C": Stats(uses=1, gains=0)}  # fitness 1/2: last in every order; the other 11 tie at 1
    rng = random.Random(0)
    firsts = {sel.ranked(rng)[0] for _ in range(200)}
    assert len(firsts) >= 8  # the head of the order varies among the tied seeds
    assert all(sel.ranked(rng)[-1] == ("m3", "C") for _ in range(20))  # fitness still decides
    assert sel.ranked()[0] == ("m0", "A")  # without an rng: by name (display)
    # MEMO's picks spread over the tied seeds instead of piling on the first names
    sel2 = SeedSelector(("A", "B", "C"), p=0.05)
    for m in ("m0", "m1", "m2", "m3"):
        sel2.add_model(m)
    picks: dict[tuple[str, str], int] = {}
    for _ in range(3000):
        sel2.seeds.clear()
        s = sel2.pick(rng)
        picks[s] = picks.get(s, 0) + 1
    assert len(picks) == 12 and max(picks.values()) < 2 * min(picks.values())


def test_fitness_is_eq3_on_a_hand_worked_example():
    # fitness(s) = (1 + R(s)) / (1 + N(s)): N selections, R of them added coverage
    sel = SeedSelector(("A", "B"))
    assert sel.p == 0.05  # MEMO's p
    sel.add_model("m0")
    assert sel.fitness("m0", "A") == 1.0  # never selected
    rng = random.Random(0)
    for gained in (True, False, False):  # seed (m0, A): 3 selections, 1 gain -> (1 + 1) / (1 + 3)
        sel.last = None
        while sel.pick(rng) != ("m0", "A"):
            sel.seeds.pop("m0|B", None)
        sel.feedback("m0", "A", gained)
    assert sel.fitness("m0", "A") == pytest.approx(2 / 4)
    assert sel.fitness("m0", "B") == 1.0
    assert sel.ranked() == [("m0", "B"), ("m0", "A")]
    again = SeedSelector.from_json(sel.to_json())
    assert again.fitness("m0", "A") == pytest.approx(0.5) and again.p == 0.05
    with pytest.raises(ValueError):
        SeedSelector(("A",), p=0.0)
    with pytest.raises(ValueError):
        SeedSelector(("A",), p=1.5)


def test_mh_measures_k1_in_the_current_ordering():
    """After a re-sort the previous seed is looked up again (Algorithm 2 as the authors' code does it)."""
    sel = SeedSelector(("A", "B"), p=0.3)
    for m in ("m0", "m1"):
        sel.add_model(m)
    # distinct fitness: (m0, B) 1, (m1, B) 3/5, (m0, A) 1/2, (m1, A) 1/3. (m0, A) was picked last with no
    # gain: it now ranks third (index 2), not first
    stats = {"m0|A": (1, 0), "m1|B": (4, 2), "m1|A": (2, 0)}
    sel.seeds = {k: Stats(uses=u, gains=g) for k, (u, g) in stats.items()}
    sel.last = "m0|A"
    ranked = sel.ranked()
    assert ranked == [("m0", "B"), ("m1", "B"), ("m0", "A"), ("m1", "A")]
    for k in range(20):  # replay the same random stream by hand: the tie shuffle, then MH from k1 = 2
        rng, mine = random.Random(k), random.Random(k)
        mine.shuffle([0, 1, 2, 3])
        while True:
            k2 = mine.randrange(4)
            if mine.random() < acceptance(2, k2, 0.3):
                break
        assert sel.pick(rng) == ranked[k2]
        sel.seeds = {k: Stats(uses=u, gains=g) for k, (u, g) in stats.items()}
        sel.last = "m0|A"


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
    hung = {"status": "timeout", "error_type": "Timeout", "message": "", "frames": []}
    kinds = [f["kind"] for f in oracles.judge({"a": ok, "b": dead}, 1e-3)]
    assert kinds == ["crash"]
    # the model is valid, so a system that cannot run it is a crash even when no other system succeeds
    f = oracles.judge({"a": dead, "keras-torch": hung}, 1e-3)
    assert [(x["kind"], x["systems"], x["detail"]["status"]) for x in f] == [
        ("crash", ["a"], "crash"), ("crash", ["keras-torch"], "timeout")]
    f = oracles.judge({"a": ok, "b": nanout}, 1e-3)
    assert [x["kind"] for x in f] == ["nan"] and f[0]["systems"] == ["b"]
    f = oracles.judge({"a": ok, "b": far}, 0.1)
    assert f[0]["kind"] == "inconsistency" and f[0]["detail"]["d_mad"] == pytest.approx(0.5)
    assert oracles.judge({"a": ok, "b": far}, 0.6) == []


def test_judge_flags_every_pair_over_the_threshold_without_chaining():
    # outputs 1.0 / 1.6 / 2.2 at threshold 1.0: a-b and b-c are within it (0.6), a-c is not (1.2)
    res = {s: {"status": "ok", "outputs": [np.array([v])]} for s, v in (("a", 1.0), ("b", 1.6), ("c", 2.2))}
    f = oracles.judge(res, 1.0)
    assert [(x["kind"], x["systems"]) for x in f] == [("inconsistency", ["a", "c"])]
    assert f[0]["detail"]["d_mad"] == pytest.approx(1.2)
    # one deviating system among four: one finding per pair it is in (MEMO/LEMON count pairs)
    base = np.array([0.0, 1.0, 2.0])
    res = {s: {"status": "ok", "outputs": [base.copy()]} for s in ("a", "b", "c")}
    res["d"] = {"status": "ok", "outputs": [base + 0.5]}
    assert [x["systems"] for x in oracles.judge(res, 0.1)] == [["a", "d"], ["b", "d"], ["c", "d"]]
    # outputs of different shapes are always inconsistent
    res = {"a": {"status": "ok", "outputs": [np.zeros(3)]}, "b": {"status": "ok", "outputs": [np.zeros(4)]}}
    assert "shape" in oracles.judge(res, 1.0)[0]["detail"]


def test_judge_ignores_rounding_of_huge_outputs():
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


def test_repro_takes_its_rule_from_the_oracles_module():
    # the bundle's oracle.py is the module's own source, and repro.py judges with it (no copy of the rule)
    assert triage.oracle_source() == Path(oracles.__file__).read_text()
    src = triage.repro_source("x", "inconsistency", ["a", "b"], 0.5)
    assert "import oracle" in src and "oracle.judge(results, THRESHOLD, REL_TOL, MAX_MAGNITUDE)" in src
    assert "np.mean(np.abs" not in src
    compile(src, "repro.py", "exec")


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


def test_bad_mh_p_is_one_clear_line_and_exit_2(tmp_path, capsys):
    from twinspect.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fuzz", "run", "-o", str(tmp_path / "c"), "--mh-p", "1.5", "--budget", "5s", "-q"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--mh-p must be in (0, 1)" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "c").exists()
