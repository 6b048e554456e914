"""`fuzz confirm`: every bundle's repro.py re-run in a fresh process, the verdict kept in the bundle and shown by
`fuzz report`. The bundles judge their recorded outputs (``--recorded``: numpy only, seconds); the real-system path
of repro.py is tested in test_backends_repro.py."""

from __future__ import annotations

import json

import numpy as np

from tests.cli_run import run
from twinspect.dl.fuzz import confirm, report, triage
from twinspect.dl.fuzz.campaign import Campaign, Config


def _ok(*values: float) -> dict:
    return {"status": "ok", "outputs": [np.array(values, dtype=np.float32)]}


def _write(root, name: str, systems: list[str], results: dict[str, dict]):
    model, inputs = root / "model.keras", root / "inputs.npz"
    model.write_bytes(b"not a model: --recorded does not load it")
    np.savez(inputs, x=np.zeros((1, 2), dtype=np.float32))
    finding = {"kind": "inconsistency", "systems": systems, "signature": name, "detail": {}}
    return triage.write_bundle(root / "findings", name, finding, {"nodes": [], "outputs": []}, model, inputs,
                               results, threshold=1.0)


def test_confirm_records_which_bundles_reproduce_and_report_shows_it(tmp_path, capsys):
    camp = Campaign.create(tmp_path / "c", Config(backends=["keras-torch", "onnxruntime"], seeds=["LeNet5"]))
    results = {"a": _ok(1.0), "b": _ok(1.6), "c": _ok(2.2)}  # only a–c is over the threshold 1.0
    yes = _write(camp.root, "yes", ["a", "c"], results)
    no = _write(camp.root, "no", ["a", "b"], results)
    broken = _write(camp.root, "broken", ["a", "c"], results)
    (broken / "repro.py").write_text("import sys\nsys.exit('repro.py: cannot run here')\n")
    for b in (yes, no, broken):
        camp.state["findings"].append({"id": b.name, "kind": "inconsistency", "systems": ["a"], "signature": b.name,
                                       "dir": f"findings/{b.name}", "layer": None})
        camp.state["signatures"][b.name] = 1
    camp.save()
    code, out, err = run(capsys, "fuzz", "confirm", camp.root, "--recorded", "-f", "json")
    assert code == 0, err
    recs = json.loads(out)
    assert {k: v["reproduces"] for k, v in recs.items()} == {"broken": False, "no": False, "yes": True}
    assert recs["yes"]["exit_code"] == 1 and recs["no"]["exit_code"] == 0 and recs["yes"]["recorded"] is True
    assert recs["broken"]["exit_code"] == 1 and "cannot run here" in recs["broken"]["error"]
    assert [f["kind"] for f in recs["yes"]["findings"]] == ["inconsistency"]
    assert confirm.read(yes) == recs["yes"]
    text = report.table(report.summary(camp.root))
    assert "yes  fresh run: reproduces (recorded)" in text and "no  fresh run: does not reproduce (recorded)" in text
    # --resume keeps what is there; --finding picks one bundle by prefix
    (no / confirm.CONFIRM_FILE).write_text(json.dumps({**recs["no"], "seconds": 123.0}))
    again = confirm.confirm_all(camp.root, ids=["n"], recorded=True, skip_done=True)
    assert list(again) == ["no"] and again["no"]["seconds"] == 123.0
    # a campaign without findings has nothing to confirm; a directory that is no campaign: one line, exit 2
    empty = Campaign.create(tmp_path / "empty", Config(backends=["keras-torch", "onnxruntime"], seeds=["LeNet5"]))
    empty.save()
    assert confirm.confirm_all(empty.root) == {}
    code, out, err = run(capsys, "fuzz", "confirm", tmp_path / "nowhere")
    assert code == 2 and err.startswith("error: ") and "no findings directory" in err
