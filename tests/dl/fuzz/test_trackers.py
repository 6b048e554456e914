"""Issue 20, item 7: a finding's public issue-tracker verdict is recorded in its bundle and shown by `fuzz report`."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run
from twinspect.dl.fuzz import report, trackers, triage
from twinspect.dl.fuzz.campaign import Campaign, Config
from twinspect.errors import InputError


def _bundle(root, fid: str, signature: str):
    d = root / "findings" / fid
    d.mkdir(parents=True)
    (d / "finding.json").write_text(json.dumps({"id": fid, "kind": "crash", "signature": signature}))
    return d


def test_record_and_read_back_a_verdict_with_its_signature(tmp_path):
    b = _bundle(tmp_path, "abc123", "crash|onnxruntime|<GRU>")
    rec = trackers.record(b, "Known", links=["https://github.com/onnx/tensorflow-onnx/pull/2463"], note="open PR",
                          checked="2026-11-29")
    assert trackers.read(b) == rec == {
        "verdict": "known", "links": ["https://github.com/onnx/tensorflow-onnx/pull/2463"], "queries": [],
        "note": "open PR", "checked": "2026-11-29", "signature": "crash|onnxruntime|<GRU>"}
    assert trackers.record(b, "not-found", queries=["GroupNormalization onnxruntime"])["verdict"] == "not found"
    assert trackers.read(b)["queries"] == ["GroupNormalization onnxruntime"]  # replaced, not appended
    (b / trackers.TRACKER_FILE).write_text("{broken")
    assert trackers.read(b) is None  # advice only: an unreadable verdict reads as unchecked


@pytest.mark.parametrize("kwargs, needle", [
    ({"verdict": "fixed", "links": ["https://x.org/1"]}, "unknown tracker verdict"),
    ({"verdict": "known"}, "needs the thread"),
    ({"verdict": "related", "links": ["github.com/keras-team/keras/issues/1"]}, r"not an http\(s\) URL"),
    ({"verdict": "not found"}, "needs the searches tried"),
])
def test_a_verdict_without_its_evidence_is_refused_and_nothing_is_written(tmp_path, kwargs, needle):
    b = _bundle(tmp_path, "f1", "nan|keras-jax|LSTM")
    with pytest.raises(InputError, match=needle):
        trackers.record(b, **kwargs)
    assert not (b / trackers.TRACKER_FILE).exists()
    with pytest.raises(InputError, match="not a finding bundle"):
        trackers.record(tmp_path, "known", links=["https://x.org/1"])


def test_bundle_is_found_by_id_or_unique_prefix(tmp_path):
    _bundle(tmp_path, "aa11", "s1")
    _bundle(tmp_path, "aa22", "s2")
    _bundle(tmp_path, "aa2", "s3")
    assert triage.bundle_dir(tmp_path, "aa11").name == "aa11"
    assert triage.bundle_dir(tmp_path, "aa2").name == "aa2"  # an exact id wins over the prefix
    with pytest.raises(InputError, match=r"matches 3 findings \(aa11, aa2, aa22\)"):
        triage.bundle_dir(tmp_path, "aa")
    with pytest.raises(InputError, match="no finding 'zz'"):
        triage.bundle_dir(tmp_path, "zz")
    with pytest.raises(InputError, match="no findings directory"):
        triage.bundle_dir(tmp_path / "aa11", "x")


def test_report_shows_each_findings_verdict_and_the_counts(tmp_path, capsys):
    camp = Campaign.create(tmp_path / "c", Config(backends=["keras-torch", "onnxruntime"], seeds=["LeNet5"]))
    for fid, sig in (("f1", "crash|onnxruntime|<GRU>"), ("f2", "nan|keras-jax|LSTM")):
        _bundle(camp.root, fid, sig)
        camp.state["findings"].append({"id": fid, "kind": sig.split("|")[0], "systems": ["onnxruntime"],
                                       "signature": sig, "dir": f"findings/{fid}", "layer": None})
        camp.state["signatures"][sig] = 1
    camp.save()
    code, out, err = run(capsys, "fuzz", "tracker", camp.root, "f1", "--verdict", "known",
                         "--link", "https://github.com/onnx/tensorflow-onnx/pull/2463", "-f", "json")
    assert code == 0 and json.loads(out)["finding"] == "f1"
    s = report.summary(camp.root)
    assert [f["tracker"] and f["tracker"]["verdict"] for f in s["findings"]] == ["known", None]
    assert report.tracker_counts(s) == {"known": 1, "unchecked": 1}
    text = report.table(s)
    assert "(trackers: 1 known, 1 unchecked)" in text
    assert "tracker: known https://github.com/onnx/tensorflow-onnx/pull/2463" in text and "tracker: unchecked" in text
    assert "public trackers" in report.to_html(s)
    # a bad verdict: one line, exit 2, the bundle untouched
    code, out, err = run(capsys, "fuzz", "tracker", camp.root, "f2", "--verdict", "not-found")
    assert code == 2 and err.startswith("error: ") and "--query" in err and len(err.strip().splitlines()) == 1
    assert not (camp.root / "findings" / "f2" / trackers.TRACKER_FILE).exists()
