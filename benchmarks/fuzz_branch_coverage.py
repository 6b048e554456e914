"""Library branch coverage of fuzz campaigns: replay their models under coverage.py (issue 11's benchmark).

MEMO's layer coverage criteria are proxies; what a DL-library developer cares about is how much of the
library's code the generated models exercise. This script replays the valid models a campaign logged
(``models.jsonl``, in generation order) in one process with Keras on its TensorFlow backend — build from
the spec, one inference, ONNX export (tf2onnx underneath, as the ``onnxruntime`` system does) and one ONNX
Runtime session — under ``coverage.py`` with branch measurement, and reports line and branch coverage of
the Keras and tf2onnx Python packages (ONNX Runtime's Python layer is a thin binding; its C++ is not
measured).

Models are taken evenly spaced over each campaign (``--n`` of them, the same number for every campaign
so that the comparison is per model count, not per throughput), plus each campaign's seed models. One
process per campaign, so Keras' import-time coverage is the same baseline for all.

Usage: ``.venv/bin/python benchmarks/fuzz_branch_coverage.py /tmp/fuzz60/memo /tmp/fuzz60/memo_r --n 200``
writes ``benchmarks/results/fuzz_branch_coverage.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

PACKAGES = ("keras", "tf2onnx")


def replay(campaign: str, n: int, export: bool) -> dict:
    """Replay ``n`` evenly spaced logged models of ``campaign`` under coverage; in this process."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import coverage

    cov = coverage.Coverage(branch=True, source_pkgs=list(PACKAGES), data_file=None)
    cov.start()
    import keras
    import onnxruntime as ort

    from twinspect.dl.fuzz import graph
    from twinspect.dl.fuzz.campaign import read_model_log

    state = json.loads((Path(campaign) / "state.json").read_text())
    logged = [r["spec"] for r in read_model_log(campaign)]
    step = max(1, len(logged) // n) if logged and n > 0 else 1
    specs = list(state.get("seed_specs", {}).values()) + (logged[::step][:n] if n > 0 else [])
    ok = failed = 0
    t0 = time.perf_counter()
    for i, spec in enumerate(specs):
        try:
            keras.utils.set_random_seed(i)
            model = graph.build(graph.clone(spec), record_shapes=False)
            x = graph.make_inputs(spec, seed=i)
            model(x, training=False)
            if export:
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "m.onnx")
                    model.export(path, format="onnx", verbose=False)
                    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                    sess.run(None, {sess.get_inputs()[0].name: x})
            ok += 1
        except Exception:  # a library failure is still code exercised; count it and go on
            failed += 1
        keras.backend.clear_session()
    cov.stop()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cov.json")
        cov.json_report(outfile=out)
        files = json.loads(Path(out).read_text())["files"]
    per: dict[str, dict] = {}
    for fname, data in files.items():
        pkg = next((p for p in PACKAGES if f"/{p}/" in fname.replace(os.sep, "/")), None)
        if pkg is None:
            continue
        s = data["summary"]
        acc = per.setdefault(pkg, {"statements": 0, "covered_lines": 0, "branches": 0, "covered_branches": 0})
        acc["statements"] += s["num_statements"]
        acc["covered_lines"] += s["covered_lines"]
        acc["branches"] += s["num_branches"]
        acc["covered_branches"] += s["covered_branches"]
    for acc in per.values():
        acc["line_ratio"] = acc["covered_lines"] / max(acc["statements"], 1)
        acc["branch_ratio"] = acc["covered_branches"] / max(acc["branches"], 1)
    return {"campaign": campaign, "variant": state["config"]["variant"], "models_logged": len(logged),
            "models_replayed": len(specs), "replay_ok": ok, "replay_failed": failed, "export": export,
            "seconds": round(time.perf_counter() - t0, 1), "packages": per}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("campaigns", nargs="+")
    ap.add_argument("--n", type=int, default=200, help="Logged models replayed per campaign (evenly spaced); 0 replays "
                    "the seed models only (the baseline the generated models add to).")
    ap.add_argument("--no-export", action="store_true", help="Skip the ONNX export and ONNX Runtime run.")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: replay one campaign in this process
    a = ap.parse_args()
    if a.one:
        print(json.dumps(replay(a.one, a.n, not a.no_export)))
        return
    rows = []
    for camp in a.campaigns:
        cmd = [sys.executable, __file__, "--one", camp, "--n", str(a.n), camp] + (["--no-export"] if a.no_export else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{camp}: replay failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    from twinspect._io import atomic_write

    out = Path(a.out)
    with atomic_write(out / "fuzz_branch_coverage.json") as fh:
        json.dump({"provenance": _provenance.info(__file__), "n": a.n, "export": not a.no_export, "runs": rows}, fh, indent=1)
    lines = ["| variant | models replayed (ok / failed) | " + " | ".join(f"{p} lines | {p} branches" for p in PACKAGES) + " |",
             "|---|---|" + "---|---|" * len(PACKAGES)]
    for r in rows:
        cells = []
        for p in PACKAGES:
            acc = r["packages"].get(p, {})
            cells.append(f"{acc.get('covered_lines', 0)}/{acc.get('statements', 0)} ({acc.get('line_ratio', 0):.1%})")
            cells.append(f"{acc.get('covered_branches', 0)}/{acc.get('branches', 0)} ({acc.get('branch_ratio', 0):.1%})")
        lines.append(f"| {r['variant']} | {r['models_replayed']} ({r['replay_ok']} / {r['replay_failed']}) | " + " | ".join(cells) + " |")
    with atomic_write(out / "fuzz_branch_coverage.md") as fh:
        fh.write(_provenance.md_header(__file__) + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
