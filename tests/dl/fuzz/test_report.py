"""`fuzz report`: an interrupted run says it is incomplete; HTML is a real page; coverage over time in text."""

from __future__ import annotations

import html as htmllib

import pytest

from twinspect.dl.fuzz import report
from twinspect.dl.fuzz.campaign import Campaign, Config


@pytest.fixture
def campaign(tmp_path, monkeypatch):
    """A campaign whose seeding and steps are stand-ins (no Keras, no workers): run()'s own bookkeeping."""
    camp = Campaign.create(tmp_path / "c", Config(backends=["keras-torch", "onnxruntime"], seeds=["LeNet5"]))
    monkeypatch.setattr(Campaign, "_systems", lambda self: ["keras-torch", "onnxruntime"])
    monkeypatch.setattr(Campaign, "_seed", lambda self, systems, verbose: self.state.update(seeded=True, threshold=0.5))
    monkeypatch.setattr(Campaign, "_warm_up", lambda self, systems: 0.0)
    return camp


def test_interrupted_run_is_reported_incomplete(campaign, monkeypatch):
    calls = []

    def step(self, systems):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        self.state["models_generated"] += 1

    monkeypatch.setattr(Campaign, "_step", step)
    with pytest.raises(KeyboardInterrupt):
        campaign.run(budget_s=600, max_models=10)
    s = report.summary(campaign.root)  # read back from state.json, as `fuzz report` does
    note = report.incomplete_note(s)
    assert note is not None and "2 models of its 600 s / 10 models" in note
    assert note in report.table(s) and htmllib.escape(note) in report.to_html(s)


def test_complete_run_has_no_note_and_shows_coverage_over_time(campaign, monkeypatch):
    monkeypatch.setattr(Campaign, "_step", lambda self, systems: self.state.__setitem__(
        "models_generated", self.state["models_generated"] + 1))
    campaign.run(budget_s=600, max_models=12)
    s = report.summary(campaign.root)
    assert report.incomplete_note(s) is None and s["last_run"]["models"] == 12
    text = report.table(s)
    assert "incomplete" not in text and "coverage over time" in text
    assert len(report.coverage_points(s)) == 8 and report.coverage_points(s)[-1] == s["coverage_over_time"][-1]


def test_html_is_tables_not_json_and_escapes_findings():
    s = {"variant": "memo", "backends": ["keras-torch", "onnxruntime"], "elapsed_s": 61.0, "models_generated": 5,
         "models_valid": 4, "models_tested": 4, "models_per_hour": 236.1, "threshold": None, "skipped_backends": {},
         "coverage": {"layer_type": {"covered": 3, "total": 72, "ratio": 3 / 72}},
         "coverage_over_time": [[0.0, 0.01, 0.0, 0.0], [60.0, 0.04, 0.001, 0.01]],
         "findings": [{"id": "f1", "kind": "crash", "systems": ["onnxruntime"], "layer": None, "duplicates": 2,
                       "signature": "crash:<Dense>", "dir": "findings/f1"}], "last_run": None}
    page = report.to_html(s)
    assert "<pre>" not in page and '"covered"' not in page
    assert "<td>layer type</td><td>3</td><td>72</td><td>4.2%</td>" in page
    assert "crash:&lt;Dense&gt;" in page and "not localised" in page and "None" not in page
    assert "layer not localised" in report.table(s)


def test_findings_name_the_deviating_system_when_a_majority_agreed():
    s = {"variant": "memo", "backends": ["keras-jax", "keras-torch", "keras-tensorflow", "onnxruntime"],
         "elapsed_s": 61.0, "models_generated": 5, "models_valid": 4, "models_tested": 4, "models_per_hour": 236.1,
         "threshold": 0.2, "skipped_backends": {}, "coverage": {}, "coverage_over_time": [], "last_run": None,
         "findings": [{"id": "f1", "kind": "inconsistency", "systems": ["keras-jax", "keras-torch"],
                       "deviating": ["keras-torch"], "layer": "AveragePooling2D", "duplicates": 1,
                       "signature": "inconsistency|keras-torch|AveragePooling2D", "dir": "findings/f1"},
                      {"id": "f2", "kind": "inconsistency", "systems": ["keras-jax", "onnxruntime"], "deviating": None,
                       "layer": "Dense", "duplicates": 1, "signature": "inconsistency|keras-jax,onnxruntime|Dense",
                       "dir": "findings/f2"}]}
    text, page = report.table(s), report.to_html(s)
    assert "keras-torch (against the others)" in text and "keras-torch (against the others)" in page
    assert "keras-jax,keras-torch" not in text  # the pair it was minimised on is not shown as the cause
    assert "keras-jax,onnxruntime" in text  # no majority: the pair


def test_run_campaign_records_wall_time_and_overhead(tmp_path, monkeypatch):
    """Issue 20 item 6: the cost around the search loop is in the summary, not only in the user's stopwatch."""
    import time

    from twinspect.dl.fuzz.campaign import run_campaign

    monkeypatch.setattr(Campaign, "_systems", lambda self: ["keras-torch", "onnxruntime"])

    def seed(self, systems, verbose):
        time.sleep(0.3)  # stands in for worker start-up and calibration
        self.state.update(seeded=True, threshold=0.5)

    monkeypatch.setattr(Campaign, "_seed", seed)
    monkeypatch.setattr(Campaign, "_warm_up", lambda self, systems: 0.2)  # stands in for backend start-up
    monkeypatch.setattr(Campaign, "_step", lambda self, systems: self.state.__setitem__(
        "models_generated", self.state["models_generated"] + 1))
    from twinspect.dl.fuzz.executors import LocalExecutor

    class SlowWorker:  # stands in for a backend worker that takes a while to exit
        def close(self):
            time.sleep(0.4)

    real_init = LocalExecutor.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        self.workers.update(a=SlowWorker(), b=SlowWorker())

    monkeypatch.setattr(LocalExecutor, "__init__", init)
    s = run_campaign(tmp_path / "c", 600.0, Config(), max_models=3)
    last = s["last_run"]
    assert last["executor"] == "local" and last["models"] == 3 and last["complete"]
    assert last["seeding_s"] >= 0.3 and last["wall_s"] >= last["loop_s"] + 0.3
    assert abs(last["overhead_s"] - (last["wall_s"] - last["loop_s"])) < 0.11
    assert last["startup_s"] == 0.2 and last["findings_after_s"] == 0.0
    # both workers were closed at once, and that time is reported as the executor's, not as "other"
    assert last["executor_start_s"] == 0.0 and 0.4 <= last["executor_close_s"] < 0.75
    assert last["overhead_other_s"] < 0.1  # 0.2 without the close: the fake start-up of 0.2 s took no time
    assert report.run_cost_line(s).startswith("last run (local executor): wall ")
    assert "backend start-up 0 s" in report.run_cost_line(s)
    assert report.run_cost_line(s).endswith(f", shutdown {last['executor_close_s']:.0f} s)")
    assert "last run" in report.table(s) and "last run" in report.to_html(s)
    s2 = run_campaign(tmp_path / "c", 600.0, max_models=2)  # resumed: already seeded, no seeding cost
    assert s2["last_run"]["seeding_s"] == 0.0 and s2["last_run"]["models"] == 2
