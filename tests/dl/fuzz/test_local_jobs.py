"""Issue 20 (speed): the local executor may run a model's systems at the same time (``--jobs N``).

The workers here are small stand-ins (numpy only): each answers with its input times a factor and the
moments its request began and ended, so the test can see whether two requests overlapped.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from twinspect.dl.fuzz.backends import Worker
from twinspect.dl.fuzz.executors import LocalExecutor, make_executor
from twinspect.errors import InputError

SLOW_WORKER = textwrap.dedent('''
    import sys
    import time

    import numpy as np

    from twinspect.dl.fuzz.backends.worker import serve

    FACTOR = float(sys.argv[1])


    def run_one(model, inputs):
        t0 = time.time()
        if model.endswith("slow.keras"):
            time.sleep(1.0)
        return [np.load(inputs)["x"] * FACTOR, np.array([t0, time.time()])]


    if __name__ == "__main__":
        serve(run_one)
''')


def _executor(tmp_path, jobs: int) -> LocalExecutor:
    (tmp_path / "slow_worker.py").write_text(SLOW_WORKER)
    ex = LocalExecutor(timeout_s=30, jobs=jobs)
    for i, s in enumerate(("keras-tensorflow", "keras-jax", "onnxruntime")):
        ex.workers[s] = Worker(s, ["slow_worker", str(i + 2)], timeout_s=30, env={"PYTHONPATH": str(tmp_path)})
    return ex


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_are_the_same_and_only_jobs_gt_1_overlaps(tmp_path, jobs):
    ex = _executor(tmp_path, jobs)
    systems = ["keras-tensorflow", "keras-jax", "onnxruntime"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.savez(tmp_path / "x.npz", x=x)
    try:
        ex.run(systems, tmp_path / "warm.keras", tmp_path / "x.npz")  # workers started and imported
        res = ex.run(systems, tmp_path / "slow.keras", tmp_path / "x.npz")
    finally:
        ex.close()
    assert list(res) == systems  # in the order asked, whatever order they ran in
    for i, s in enumerate(systems):
        assert res[s]["status"] == "ok"
        np.testing.assert_array_equal(res[s]["outputs"][0], x * (i + 2))
        assert res[s]["out"] == str(tmp_path / f"out-{s}.npz")
    spans = sorted(tuple(res[s]["outputs"][1]) for s in systems)
    overlaps = sum(b0 < a1 for (_, a1), (b0, _) in zip(spans, spans[1:]))
    if jobs == 1:
        assert overlaps == 0  # one after another
    else:
        assert overlaps >= 1  # two at a time: some request began before the previous one ended
        assert set(ex.spent) == set(systems) and all(n == 2 for n, _ in ex.spent.values())


def test_bad_jobs_are_refused():
    with pytest.raises(InputError, match="jobs"):
        LocalExecutor(jobs=0)
    with pytest.raises(InputError, match="must be >= 1"):
        make_executor("local", jobs=-1)
    with pytest.raises(InputError, match="only applies to --executor local"):
        make_executor("ray", jobs=2)


def test_cli_bad_jobs_is_one_line_and_exit_2(tmp_path, capsys):
    from twinspect.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fuzz", "run", "-o", str(tmp_path / "c"), "--jobs", "0", "--budget", "5s", "-q"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--jobs 0 must be >= 1" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "c").exists()
