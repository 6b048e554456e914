"""``--executor ray``: bad executor choices exit 2; on a local Ray instance a worker crash stays inside its
actor, and a tiny campaign produces the same state as with local worker processes."""

from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest

from twinspect.cli import main
from twinspect.dl.fuzz import executors
from twinspect.dl.fuzz.campaign import Campaign, Config, run_campaign

# a worker that segfaults when the model file holds b"segv" and doubles the inputs otherwise
CRASHY = textwrap.dedent('''
    import ctypes
    from pathlib import Path

    from twinspect.dl.fuzz.backends.worker import serve


    def run_one(model, inputs):
        import numpy as np

        if Path(model).read_bytes() == b"segv":
            ctypes.string_at(0)
        return [np.load(inputs)["x"] * 2]


    if __name__ == "__main__":
        serve(run_one)
''')


def _crashy_setup(tmp_path, monkeypatch, n: int) -> np.ndarray:
    """The CRASHY worker module importable by Ray workers, ``inputs.npz`` with ``x`` = arange(n) and a
    model file ``ok.keras`` the worker runs normally; returns ``x``."""
    (tmp_path / "crashy_worker.py").write_text(CRASHY)
    # a local Ray instance started now inherits this environment, so its workers can import crashy_worker
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    x = np.arange(n, dtype=np.float32)
    np.savez(tmp_path / "inputs.npz", x=x)
    (tmp_path / "ok.keras").write_bytes(b"fine")
    return x


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.mark.parametrize("extra,needle", [
    (["--executor", "dask"], "unknown executor 'dask'; choose from local, ray"),
    (["--executor", "local", "--address", "auto"], "--address only applies to --executor ray"),
])
def test_bad_executor_choice_exits_2_without_creating_the_campaign(tmp_path, capsys, extra, needle):
    out = tmp_path / "camp"
    code, _, err = run(["fuzz", "run", "-o", str(out), "--backends", "torch", "-q", *extra], capsys)
    assert code == 2 and "Traceback" not in err and needle in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_ray_not_installed_is_one_clear_error(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    code, _, err = run(["fuzz", "run", "-o", str(tmp_path / "c"), "--executor", "ray", "-q"], capsys)
    assert code == 2 and "needs Ray, which is not installed" in err and "'ray' extra" in err and "Traceback" not in err, err


@pytest.mark.parametrize("address,needle", [
    ("127.0.0.1:1", "cannot reach the Ray cluster at '127.0.0.1:1'"),
    ("nonsense", "cannot parse Ray address 'nonsense'"),
])
def test_unreachable_or_bad_ray_address_exits_2_without_creating_the_campaign(tmp_path, capsys, address, needle):
    pytest.importorskip("ray", reason="Ray is the optional 'ray' extra")
    out = tmp_path / "camp"
    code, _, err = run(["fuzz", "run", "-o", str(out), "--backends", "torch,onnxruntime", "-q", "--executor", "ray",
                        "--address", address], capsys)
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.ci
def test_ray_actor_survives_a_worker_segfault_and_restarts_it(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is the optional 'ray' extra")
    x = _crashy_setup(tmp_path, monkeypatch, 5)
    (tmp_path / "bad.keras").write_bytes(b"segv")
    ex = executors.RayExecutor(timeout_s=30, argv={"a": ["crashy_worker"], "b": ["crashy_worker"]})
    try:
        res = ex.run(["a", "b"], tmp_path / "ok.keras", tmp_path / "inputs.npz")
        for s in ("a", "b"):
            assert res[s]["status"] == "ok", res[s]
            assert np.array_equal(res[s]["outputs"][0], x * 2)
            assert res[s]["out"] == str(tmp_path / f"out-{s}.npz")  # outputs come back to the driver's disk
            assert np.array_equal(np.load(tmp_path / f"out-{s}.npz")["o0"], x * 2)
        before = ex.where("a")
        assert before["pid"] != os.getpid() and before["worker_pid"] is not None
        res = ex.run(["a", "b"], tmp_path / "bad.keras", tmp_path / "inputs.npz")
        assert res["a"]["status"] == res["b"]["status"] == "crash"
        assert res["a"]["error_type"] == "SIGSEGV" and "Fatal Python error" in res["a"]["message"]
        assert res["a"]["frames"][:2] == ["__init__.py:string_at", "crashy_worker.py:run_one"]
        res = ex.run(["a"], tmp_path / "ok.keras", tmp_path / "inputs.npz")
        assert res["a"]["status"] == "ok" and np.array_equal(res["a"]["outputs"][0], x * 2)
        after = ex.where("a")
        assert after["pid"] == before["pid"]  # same actor ...
        assert after["worker_pid"] != before["worker_pid"] and after["worker_restarts"] == 1  # ... new worker
        assert ex.stats["a"]["runs"] == 3 and ex.stats["a"]["actor_deaths"] == 0
    finally:
        ex.close()
    assert not ray.is_initialized()  # the instance this executor started is shut down


@pytest.mark.slow
@pytest.mark.ci
def test_ray_actors_start_together_with_their_workers_and_close_at_once(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is the optional 'ray' extra")
    x = _crashy_setup(tmp_path, monkeypatch, 3)
    systems = ["a", "b", "c"]
    ex = executors.RayExecutor(timeout_s=30, argv={s: ["crashy_worker"] for s in systems})
    try:
        assert ex.timings["init_s"] > 0 and ex.timings["first_run_s"] is None
        ex.start(systems)
        st = ex.stats
        # every actor was created before any of them answered: they start concurrently, not one by one
        assert max(st[s]["created_s"] for s in systems) <= min(st[s]["ready_s"] for s in systems)
        # each actor's worker process exists before its first request (library imports already under way)
        workers = {s: ex.where(s)["worker_pid"] for s in systems}
        assert all(pid is not None for pid in workers.values()) and len(set(workers.values())) == 3
        assert ex.timings["actors_s"] > 0 and all(st[s]["runs"] == 0 for s in systems)
        ex.start(systems)  # idempotent: no new actors
        assert {s: ex.where(s)["worker_pid"] for s in systems} == workers
        res = ex.run(systems, tmp_path / "ok.keras", tmp_path / "inputs.npz")
        assert all(res[s]["status"] == "ok" and np.array_equal(res[s]["outputs"][0], x * 2) for s in systems)
        assert ex.timings["first_run_s"] >= max(st[s]["ready_s"] for s in systems)
        assert all(ex.where(s)["worker_pid"] == workers[s] and ex.where(s)["worker_restarts"] == 0 for s in systems)
    finally:
        ex.close()
    assert not ray.is_initialized() and ex.timings["close_s"] > 0 and ex.actors == {}
    for pid in workers.values():  # the workers are gone with their actors
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


#: run-timing fields of ``last_run`` (wall times, which differ from run to run), and which executor ran it
#: (run_campaign records its name and jobs; Campaign.run with an executor object does not)
_LAST_RUN_TIMING = ("loop_s", "wall_s", "executor_start_s", "startup_s", "seeding_s", "findings_after_s", "overhead_s",
                    "executor_close_s", "overhead_other_s", "executor", "jobs")


def _comparable(state: dict) -> dict:
    """A campaign state without wall-clock fields (everything else is kept and compared); ``system_s`` is the
    loop's execute seconds per system."""
    st = json.loads(json.dumps(state))
    for k in ("elapsed_s", "seeding_s", "startup_s", "findings_after_s", "minimise_s", "seed_distances", "phase_s", "system_s"):
        st.pop(k, None)
    for k in _LAST_RUN_TIMING:
        (st.get("last_run") or {}).pop(k, None)
    st["coverage_over_time"] = [p[1:] for p in st["coverage_over_time"]]
    for f in st["findings"]:
        f.pop("found_at_s", None)
    return st


@pytest.mark.slow
def test_tiny_campaign_on_ray_matches_local_workers(tmp_path):
    pytest.importorskip("ray", reason="Ray is the optional 'ray' extra")
    cfg = Config(backends=["onnxruntime", "keras-tensorflow"], seeds=["LeNet5"], seed=3, timeout_s=120)
    camp = Campaign.create(tmp_path / "ray", cfg)
    ex = executors.RayExecutor(timeout_s=cfg.timeout_s)
    s_ray = camp.run(budget_s=600, max_models=2, executor=ex)
    assert camp.executor is None  # closed with the run
    for system in cfg.backends:  # seeding + 2 mutants (+ minimisation runs if a finding turned up)
        assert ex.stats[system]["runs"] >= 3 and ex.stats[system]["pid"] != os.getpid()
    s_local = run_campaign(tmp_path / "local", 600, cfg, max_models=2)
    assert s_ray["models_generated"] == 2 and s_ray["models_tested"] == s_ray["models_valid"]
    assert s_ray["skipped_backends"] == {}
    assert set(s_ray) == set(s_local) and set(s_ray["coverage"]) == {"layer_type", "layer_pair", "layer_param"}
    st_ray = json.loads((tmp_path / "ray" / "state.json").read_text())
    st_local = json.loads((tmp_path / "local" / "state.json").read_text())
    assert _comparable(st_ray) == _comparable(st_local)
    # the seed model ran on both systems under both executors: same outputs up to float noise
    assert np.allclose(st_ray["seed_distances"], st_local["seed_distances"], atol=1e-6)
    # the last model's outputs came back from the actors and match an in-process run of the same saved model
    # (weights are drawn afresh by each build, so ray's and local's model files differ; compare within one)
    import keras

    work = tmp_path / "ray" / "work"
    model = keras.saving.load_model(work / "current.keras", compile=False)
    want = model(np.load(work / "current.npz")["x"], training=False)
    want = [keras.ops.convert_to_numpy(o) for o in (want if isinstance(want, (list, tuple)) else [want])]
    for system in cfg.backends:
        got = np.load(work / f"out-{system}.npz")
        assert len(got.files) == len(want)
        assert all(np.allclose(got[f"o{i}"], w, atol=1e-4) for i, w in enumerate(want)), system
