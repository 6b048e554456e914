"""Issue 20, MEMO as its authors run it: mutants join a capped model pool (the parent stays), backend start-up
is paid before the campaign clock, and findings are minimised after the budget, not inside it."""

from __future__ import annotations

import json
import random
import textwrap
import time

import numpy as np
import pytest

from twinspect.dl.fuzz.backends import Worker
from twinspect.dl.fuzz.campaign import Campaign, Config, clean_run, read_model_log
from twinspect.dl.fuzz.executors import LocalExecutor
from twinspect.errors import InputError


def _spec(units: int) -> dict:
    return {"input_shape": [4], "nodes": [{"name": "d", "layer": "Dense", "params": {"units": units}, "inputs": ["input"]}],
            "outputs": ["d"]}


def test_pool_add_keeps_the_parent_and_evicts_uniformly_over_the_cap(tmp_path):
    seen = set()
    for trial in range(120):
        camp = Campaign.create(tmp_path / f"c{trial}", Config(backends=["keras-torch"], seeds=["LeNet5"], seed=trial,
                                                              pool_size=3))
        for u in (1, 2, 3):
            camp._add_model(_spec(u))
        camp.selector.pick(random.Random(trial))  # some seed now has use counts
        new = camp._pool_add(_spec(9))
        pool = camp.state["pool"]
        assert len(pool) == 3 and camp.state["pool_added"] == 1 and camp.state["pool_evicted"] == 1
        assert set(camp.selector.models) == set(pool)  # the evicted model left the selector too
        assert all(k.split("|")[0] in pool for k in camp.selector.seeds)
        gone = ({"m0", "m1", "m2", new} - set(pool)).pop()
        seen.add(gone)
        if trial >= 3 and len(seen) == 4:
            break
    assert seen == {"m0", "m1", "m2", "m3"}  # any model may leave, the new one and the seeds included


def test_pool_size_must_be_positive():
    with pytest.raises(InputError, match="pool_size"):
        Config(pool_size=0).validate()


def test_clean_run_is_all_ok_and_finite():
    ok = {"a": {"status": "ok", "outputs": [np.ones(3, np.float32)]}, "b": {"status": "ok", "outputs": [np.zeros(2)]}}
    assert clean_run(ok)
    assert not clean_run({**ok, "b": {"status": "ok", "outputs": [np.array([1.0, np.nan])]}})
    assert not clean_run({**ok, "b": {"status": "ok", "outputs": [np.array([np.inf])]}})
    assert not clean_run({**ok, "b": {"status": "crash", "outputs": None}})
    assert clean_run({"a": {"status": "ok", "outputs": [np.array([1, 2])]}})  # integer outputs are finite


def test_memo_campaign_adds_coverage_gaining_mutants_to_the_pool(tmp_path):
    """A real campaign on LeNet5: every mutant that added coverage and ran cleanly joined the pool, and its
    parent was still there (nothing is replaced; the cap of 50 is not reached)."""
    root = tmp_path / "c"
    s = Campaign.create(root, Config(backends=["keras-torch"], seeds=["LeNet5"], seed=4)).run(budget_s=600, max_models=5)
    st = json.loads((root / "state.json").read_text())
    log = read_model_log(root)
    gained = [r for r in log if r["gained"]]
    assert gained and s["pool"]["added"] >= 1 and s["pool"]["evicted"] == 0
    assert s["pool"]["added"] + s["pool"]["not_clean"] + s["pool"]["too_large"] == len(gained)
    assert len(st["pool"]) == 1 + s["pool"]["added"] == s["pool"]["size"]
    assert "m0" in st["pool"] and st["pool"]["m0"]["origin"] == "LeNet5"  # the seed stays
    assert all(r["parent"] in st["pool"] for r in log)  # no parent was replaced by its mutant
    pooled = [json.dumps(v, sort_keys=True) for k, v in st["pool"].items() if k != "m0"]
    joined = {json.dumps(r["spec"], sort_keys=True) for r in gained}
    assert all(p in joined for p in pooled)


# stands in for a keras-torch whose every model run aborts (SIGABRT)
ABORTING = textwrap.dedent('''
    import os

    from twinspect.dl.fuzz.backends.worker import serve


    def run_one(model, inputs):
        os.abort()


    if __name__ == "__main__":
        serve(run_one)
''')


def _aborting_executor(tmp_path) -> LocalExecutor:
    (tmp_path / "aborting_torch.py").write_text(ABORTING)
    ex = LocalExecutor(timeout_s=30)
    ex.workers["keras-torch"] = Worker("keras-torch", ["aborting_torch"], timeout_s=30, env={"PYTHONPATH": str(tmp_path)})
    return ex


def test_findings_are_minimised_after_the_budget_and_survive_an_interruption(tmp_path, monkeypatch):
    root = tmp_path / "camp"
    cfg = Config(backends=["keras-torch"], seeds=["LeNet5"], seed=3, threshold=1.0, minimise_tries=1)
    calls: list[tuple[int, float]] = []
    real_minimise = Campaign._minimise

    def minimise(self, *a, **k):
        calls.append((self.state["last_run"]["models"], self.deadline))
        time.sleep(0.3)  # stands in for minimising a large mutant: its time must land outside the loop
        return real_minimise(self, *a, **k)

    def step_no_bundle_yet(real):
        def step(self, systems):
            real(self, systems)
            assert not (self.root / "findings").exists() or not any((self.root / "findings").iterdir())
        return step

    monkeypatch.setattr(Campaign, "_minimise", minimise)
    monkeypatch.setattr(Campaign, "_step", step_no_bundle_yet(Campaign._step))

    def interrupted(self, systems):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # the run ends before its queue is worked off
        m.setattr(Campaign, "_finish_findings", interrupted)
        with pytest.raises(KeyboardInterrupt):
            Campaign.create(root, cfg).run(budget_s=600, max_models=2, executor=_aborting_executor(tmp_path))
    st = json.loads((root / "state.json").read_text())
    assert len(st["pending_findings"]) == 1 and st["pending_findings"][0]["duplicates"] == 1  # 2 crashes, 1 cause
    assert st["findings"] == [] and not calls
    # resumed: one more model, then the queue (with the earlier symptom) is finished after the loop
    s = Campaign.open(root).run(budget_s=600, max_models=1, executor=_aborting_executor(tmp_path))
    assert len(calls) == 1 and calls[0] == (1, float("inf"))  # after the run's only model, no deadline
    assert s["pending_findings"] == 0 and s["findings_after_s"] == s["last_run"]["findings_after_s"] >= 0.3
    (f,) = s["findings"]
    assert f["duplicates"] == 3 == s["models_tested"] and "SIGABRT" in f["signature"]
    assert f["found_at_s"] <= s["elapsed_s"]
    for name in ("model.keras", "inputs.npz", "repro.py"):
        assert (root / f["dir"] / name).is_file(), name


def test_backends_start_before_the_clock_for_every_variant(tmp_path, monkeypatch):
    selftest = ["twinspect.dl.fuzz.backends.selftest"]  # answers with its input doubled, no DL library
    ex = LocalExecutor(timeout_s=30)
    for s in ("keras-torch", "onnxruntime"):
        ex.workers[s] = Worker(s, selftest, timeout_s=30)
    alive = []

    def step(self, systems):
        alive.append(all(w.proc is not None and w.proc.poll() is None for w in ex.workers.values()))
        self.state["models_generated"] += 1

    monkeypatch.setattr(Campaign, "_step", step)
    cfg = Config(backends=["keras-torch", "onnxruntime"], seeds=["LeNet5"], variant="muffin", threshold=1.0)
    s = Campaign.create(tmp_path / "c", cfg).run(budget_s=600, max_models=2, executor=ex)
    st = json.loads((tmp_path / "c" / "state.json").read_text())
    assert alive == [True, True]  # the workers were up before the first model of the loop
    assert st["warmup_status"] == {"keras-torch": "ok", "onnxruntime": "ok"}
    assert s["startup_s"] == s["last_run"]["startup_s"] > 0
    assert st["pool"] == {}  # a muffin campaign has no model pool
