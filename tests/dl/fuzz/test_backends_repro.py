"""Real backend workers and the standalone reproducer (spawn Keras processes: slow)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from twinspect.dl.fuzz import backends, graph, seeds, triage


def _save(tmp_path):
    spec = seeds.lstm2()
    model, outs = graph.validate(spec)
    model.save(tmp_path / "model.keras")
    np.savez(tmp_path / "inputs.npz", x=graph.make_inputs(spec))
    return spec, outs


@pytest.mark.slow
@pytest.mark.ci
def test_keras_torch_worker_matches_in_process_run(tmp_path):
    spec, outs = _save(tmp_path)
    w = backends.make_backend("torch", timeout_s=120)
    try:
        r = w.run(tmp_path / "model.keras", tmp_path / "inputs.npz", tmp_path / "o.npz")
        assert r.status == "ok", r.message
        got = np.load(tmp_path / "o.npz")["o0"]
        assert got.shape == outs[0].shape and np.allclose(got, outs[0], atol=1e-6)
        r = w.run(tmp_path / "missing.keras", tmp_path / "inputs.npz", tmp_path / "o.npz")
        assert r.status == "error" and r.error_type  # a library error is a result, the worker lives on
        assert w.proc.poll() is None
    finally:
        w.close()


@pytest.mark.slow
def test_repro_exits_1_when_symptom_reproduces_and_0_otherwise(tmp_path):
    spec, outs = _save(tmp_path)
    res = {"keras-torch": {"status": "ok", "outputs": outs}, "keras-jax": {"status": "ok", "outputs": outs}}
    finding = {"kind": "inconsistency", "systems": ["keras-jax", "keras-torch"], "signature": "test", "layer": "Dense"}
    # torch and JAX agree on an LSTM to ~1e-7: D_MAD is above -1 but not above 1e-4, and (at the default
    # relative guard) not above 1e-3 of the outputs' magnitude either; rel_tol 0 leaves the threshold alone
    for name, threshold, rel_tol, code in (("t0", 1e-4, 0.0, 0), ("t1", -1.0, 0.0, 1), ("guard", -1.0, 1e-3, 0)):
        dest = triage.write_bundle(tmp_path / "findings", name, finding, spec, tmp_path / "model.keras",
                                   tmp_path / "inputs.npz", res, threshold, rel_tol=rel_tol)
        meta = json.loads((dest / "finding.json").read_text())
        assert meta["kind"] == "inconsistency" and meta["versions"]["keras"] != "-"
        assert (dest / "outputs" / "keras-torch.npz").is_file()
        p = subprocess.run([sys.executable, str(dest / "repro.py")], capture_output=True, text=True, timeout=600)
        assert p.returncode == code, p.stdout + p.stderr


def test_same_campaign_seed_saves_the_same_weights(tmp_path):
    """Weights of saved models come from the campaign seed and the model count, not from global state."""
    import numpy as np

    from twinspect.dl.fuzz import graph, seeds
    from twinspect.dl.fuzz.campaign import Campaign, Config

    spec = seeds.seed("LeNet5")

    def weights(root, seed):
        camp = Campaign.create(root, Config(backends=["keras-tensorflow", "onnxruntime"], seed=seed))
        mpath, _ = camp._save_model(spec, "m")
        model = graph.keras_module().saving.load_model(mpath, compile=False)
        return [np.asarray(w) for w in model.get_weights()]

    a, b, c = weights(tmp_path / "a", 0), weights(tmp_path / "b", 0), weights(tmp_path / "c", 1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, z) for x, z in zip(a, c))
