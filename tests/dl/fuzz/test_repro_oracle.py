"""A finding bundle's ``repro.py`` and the campaign judge by one rule: the bundle's script, run in a
subprocess on the outputs recorded in it (``--recorded``), reaches the verdict of
:func:`twinspect.dl.fuzz.oracles.judge` on boundary cases. Needs numpy only (no Keras backend)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from twinspect.dl.fuzz import oracles, triage


def _ok(*values: float) -> dict:
    return {"status": "ok", "outputs": [np.array(values, dtype=np.float32)]}


CRASH = {"status": "crash", "error_type": "SIGSEGV", "message": "killed by signal 11", "frames": ["lib.so:f"]}
HALF_ABOVE = float(np.nextafter(np.float32(0.5), np.float32(1.0)))  # the next float32 above 0.5

#: name → (every system's result in the campaign, threshold, rel_tol)
CASES: dict[str, tuple[dict[str, dict], float, float]] = {
    # 1.0 / 1.6 / 2.2 at threshold 1.0: only the a-c pair (D_MAD 1.2) is over it, no chaining
    "chain": ({"a": _ok(1.0), "b": _ok(1.6), "c": _ok(2.2)}, 1.0, oracles.REL_TOL),
    # D_MAD exactly at the threshold is consistent (the rule is strictly greater); one float32 step above is not
    "at_threshold": ({"a": _ok(0.0, 1.0), "b": _ok(0.5, 1.5)}, 0.5, oracles.REL_TOL),
    "just_above": ({"a": _ok(0.0, 1.0), "b": _ok(HALF_ABOVE, 1.0 + HALF_ABOVE)}, 0.5, oracles.REL_TOL),
    # NaN on one system only: a nan finding; on every system: none
    "nan_one": ({"a": _ok(np.nan, 1.0), "b": _ok(0.0, 1.0), "c": _ok(0.0, 1.0)}, 1.0, oracles.REL_TOL),
    "nan_all": ({"a": _ok(np.nan, 1.0), "b": _ok(np.nan, 1.0)}, 1.0, oracles.REL_TOL),
    "crash": ({"a": CRASH, "b": _ok(0.0, 1.0), "c": _ok(0.0, 1.0)}, 1.0, oracles.REL_TOL),
    "shape": ({"a": _ok(0.0, 1.0), "b": _ok(0.0, 1.0, 2.0)}, 1.0, oracles.REL_TOL),
    # exploded outputs: the relative guard keeps float32 rounding from counting; without it the pair is flagged
    "huge_guarded": ({"a": _ok(1e5, -3e5), "b": _ok(1e5 + 1.0, -3e5)}, 0.1, oracles.REL_TOL),
    "huge_unguarded": ({"a": _ok(1e5, -3e5), "b": _ok(1e5 + 1.0, -3e5)}, 0.1, 0.0),
}


def _candidates(results: dict[str, dict]) -> list[dict]:
    """Every symptom a bundle could be written for on these systems: the real findings of :func:`judge`
    and, for each pair of systems, an inconsistency that may or may not be one."""
    found = oracles.judge(results, 1.0)  # kinds other than inconsistency do not depend on the threshold
    cands = [f for f in found if f["kind"] != "inconsistency"]
    names = sorted(results)
    cands += [{"kind": "inconsistency", "systems": [a, b]} for i, a in enumerate(names) for b in names[i + 1:]]
    return cands


def _bundle(tmp_path, name: str, finding: dict, results: dict[str, dict], threshold: float, rel_tol: float):
    model, inputs = tmp_path / "model.keras", tmp_path / "inputs.npz"
    model.write_bytes(b"not a model: --recorded does not load it")
    np.savez(inputs, x=np.zeros((1, 2), dtype=np.float32))
    spec = {"nodes": [], "outputs": []}
    f = {**finding, "signature": name, "detail": finding.get("detail", {})}
    return triage.write_bundle(tmp_path / "findings", name, f, spec, model, inputs, results, threshold, rel_tol=rel_tol)


def _run_repro(bundle) -> tuple[int, dict]:
    p = subprocess.run([sys.executable, str(bundle / "repro.py"), "--recorded", "--json"],
                       capture_output=True, text=True, timeout=120, cwd=bundle)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return p.returncode, json.loads(p.stdout)


def _plain(found: list[dict]) -> list[dict]:
    """Findings as they come back from JSON (numpy scalars → floats), without crash messages (the bundle
    records a crash's message and frames as text, so they come back reformatted)."""
    out = json.loads(json.dumps(found, default=float))
    for f in out:
        if f["kind"] == "crash":
            f["detail"] = {k: v for k, v in f["detail"].items() if k in ("status", "error_type")}
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_bundle_repro_reaches_the_campaigns_verdict(tmp_path, case):
    results, threshold, rel_tol = CASES[case]
    campaign = oracles.judge(results, threshold, rel_tol)
    seen_reproduced = seen_not = 0
    for k, cand in enumerate(_candidates(results)):
        bundle = _bundle(tmp_path, f"{case}{k}", cand, results, threshold, rel_tol)
        code, out = _run_repro(bundle)
        # the campaign's verdict on the systems the bundle re-runs, with the bundle's settings
        systems = triage.repro_systems(cand, sorted(s for s, r in results.items() if r["status"] == "ok"))
        expected = oracles.judge({s: results[s] for s in systems}, threshold, rel_tol)
        assert _plain(out["findings"]) == _plain(expected), (case, cand)
        # a symptom the campaign found reproduces from its bundle; one it did not find does not
        in_campaign = oracles.symptom(campaign, cand["kind"], cand["systems"]) is not None
        assert out["reproduces"] is in_campaign and code == int(in_campaign), (case, cand, out)
        seen_reproduced += in_campaign
        seen_not += not in_campaign
    assert seen_reproduced + seen_not >= 1


def test_boundary_cases_mean_what_they_say():
    # the cases above are only boundary cases if the rule really decides them this way
    def kinds(case):
        results, threshold, rel_tol = CASES[case]
        return [(f["kind"], f["systems"]) for f in oracles.judge(results, threshold, rel_tol)]

    assert kinds("chain") == [("inconsistency", ["a", "c"])]
    assert oracles.d_mad(*(CASES["at_threshold"][0][s]["outputs"] for s in "ab")) == 0.5
    assert kinds("at_threshold") == []
    assert kinds("just_above") == [("inconsistency", ["a", "b"])]
    assert kinds("nan_one") == [("nan", ["a"])]
    assert kinds("nan_all") == []
    assert kinds("crash") == [("crash", ["a"])]
    assert kinds("shape") == [("inconsistency", ["a", "b"])]
    assert kinds("huge_guarded") == [] and kinds("huge_unguarded") == [("inconsistency", ["a", "b"])]


def test_repro_decides_with_the_bundled_oracle(tmp_path):
    # the bundle's oracle.py is literally the module; editing the copy changes the bundle's verdict, so
    # repro.py has no rule of its own
    results, threshold, rel_tol = CASES["chain"]
    bundle = _bundle(tmp_path, "edited", {"kind": "inconsistency", "systems": ["a", "c"]}, results, threshold, rel_tol)
    import inspect

    assert (bundle / "oracle.py").read_text() == inspect.getsource(oracles)
    assert _run_repro(bundle)[0] == 1
    src = (bundle / "oracle.py").read_text()
    (bundle / "oracle.py").write_text(src.replace("d > threshold and", "d > 10 * threshold and"))
    assert _run_repro(bundle)[0] == 0
    # the symptom is recognised by the copy's symptom(), not by a test of its own in repro.py
    want = "    want = list(systems)\n"
    assert src.count(want) == 1
    (bundle / "oracle.py").write_text(src.replace(want, "    want = ['nobody']\n"))
    assert _run_repro(bundle) == (0, {"reproduces": False, "findings": _plain(oracles.judge(results, threshold, rel_tol))})


def test_repro_recorded_without_a_recorded_result_is_one_line_and_exit_2(tmp_path):
    results, threshold, rel_tol = CASES["chain"]
    bundle = _bundle(tmp_path, "gone", {"kind": "inconsistency", "systems": ["a", "c"]}, results, threshold, rel_tol)
    (bundle / "outputs" / "c.npz").unlink()
    p = subprocess.run([sys.executable, str(bundle / "repro.py"), "--recorded"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "no recorded result of c" in p.stderr


def test_symptom_matches_kind_and_exact_systems():
    found = oracles.judge(CASES["chain"][0], 1.0)
    assert oracles.symptom(found, "inconsistency", ["a", "c"]) is found[0]
    assert oracles.symptom(found, "inconsistency", ["c", "a"]) is None  # judge sorts the systems
    assert oracles.symptom(found, "inconsistency", ["a", "b"]) is None
    assert oracles.symptom(found, "nan", ["a", "c"]) is None
