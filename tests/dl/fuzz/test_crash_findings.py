"""A valid model that crashes the reference system (keras-torch) is a crash finding with a bundle."""

from __future__ import annotations

import json
import textwrap

from twinspect.dl.fuzz.backends import Worker
from twinspect.dl.fuzz.campaign import Campaign, Config
from twinspect.dl.fuzz.executors import LocalExecutor

# stands in for a keras-torch whose every model run aborts (SIGABRT), as a C++ assertion in a library would
ABORTING = textwrap.dedent('''
    import os

    from twinspect.dl.fuzz.backends.worker import serve


    def run_one(model, inputs):
        os.abort()


    if __name__ == "__main__":
        serve(run_one)
''')


def test_a_reference_crash_on_a_valid_model_is_a_finding_with_a_bundle(tmp_path):
    (tmp_path / "aborting_torch.py").write_text(ABORTING)
    ex = LocalExecutor(timeout_s=30)
    ex.workers["keras-torch"] = Worker("keras-torch", ["aborting_torch"], timeout_s=30,
                                       env={"PYTHONPATH": str(tmp_path)})
    root = tmp_path / "camp"
    cfg = Config(backends=["keras-torch"], seeds=["LeNet5"], seed=3, threshold=1.0, minimise_tries=1)
    camp = Campaign.create(root, cfg)
    s = camp.run(budget_s=600, max_models=3, executor=ex)
    assert s["models_valid"] >= 1 and s["models_tested"] == s["models_valid"]
    crashes = [f for f in s["findings"] if f["kind"] == "crash"]
    assert len(crashes) == 1  # one signature, the other runs are duplicates of it
    f = crashes[0]
    assert f["systems"] == ["keras-torch"] and "SIGABRT" in f["signature"]
    assert f["duplicates"] == s["models_tested"]
    bundle = root / f["dir"]
    meta = json.loads((bundle / "finding.json").read_text())
    assert meta["detail"]["status"] == "crash" and meta["repro_systems"] == ["keras-torch"]
    for name in ("model.keras", "inputs.npz", "repro.py", "oracle.py", "outputs/keras-torch.error.txt"):
        assert (bundle / name).is_file(), name
    assert '"crash"' in (bundle / "repro.py").read_text()
