"""Model reduction of ``twinspect fuzz`` (MEMO's Algorithm 1) on the large seed models.

For each ``keras.applications`` seed (random weights, 10 classes, built without downloads) this script
converts the model to a spec, reduces it with :func:`twinspect.dl.fuzz.reduction.reduce_model` (intra-block
removal of duplicated layers that keep tensor shapes, then removal of duplicated blocks, both only when
layer type, layer pair and layer parameter coverage are unchanged), and reports layers, parameters and
inference time (seconds per batch of 2 on the reference backend, median of ``--runs``) before and after,
plus the reduction's own wall time. The paper: InceptionResNetV2 782 → 69 layers, 65 s → 6 s.

Usage: ``nice -n 10 .venv/bin/python benchmarks/fuzz_reduction.py [--seeds MobileNetV2,ResNet50] [--runs 3]``;
writes ``benchmarks/results/fuzz_reduction.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

from twinspect._io import atomic_write
from twinspect.dl.fuzz import graph, seeds
from twinspect.dl.fuzz.coverage import model_coverage
from twinspect.dl.fuzz.reduction import reduce_model, reduction_report

APPS = ("MobileNetV2", "ResNet50", "DenseNet121", "InceptionV3", "Xception", "InceptionResNetV2")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default=",".join(APPS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--append", action="store_true", help="Keep the models already in OUT/fuzz_reduction.json.")
    a = ap.parse_args()
    rows = {}
    if a.append and (Path(a.out) / "fuzz_reduction.json").exists():
        rows = json.loads((Path(a.out) / "fuzz_reduction.json").read_text())["models"]
    for name in a.seeds.split(","):
        t0 = time.perf_counter()
        spec = seeds.seed(name)
        graph.build(spec)  # records node shapes, which reduction needs
        t1 = time.perf_counter()
        small = reduce_model(spec)
        t2 = time.perf_counter()
        rep = reduction_report(spec, small, runs=a.runs)
        same = model_coverage(spec) == model_coverage(small)
        rows[name] = {**rep, "convert_s": round(t1 - t0, 1), "reduce_s": round(t2 - t1, 1), "coverage_kept": same}
        print(name, json.dumps(rows[name]), flush=True)
    write_results(rows, Path(a.out), a.runs)


def write_results(rows: dict, out: Path, runs: int) -> None:
    """Write ``fuzz_reduction.{json,md}`` of ``rows`` (model name → measurements) into ``out``, atomically."""
    load = os.getloadavg()
    with atomic_write(out / "fuzz_reduction.json") as fh:
        json.dump({"provenance": _provenance.info(__file__), "runs": runs, "loadavg": load, "models": rows}, fh, indent=1)
    lines = [
        "# Model reduction of the large seed models (`benchmarks/fuzz_reduction.py`)", "",
        f"Inference: seconds per batch of 2 on the reference backend (Keras, {os.environ.get('KERAS_BACKEND', 'torch')} "
        f"backend), {runs} runs after one warm-up; load average at the end {load[0]:.1f} on 2 cores (times are "
        "pessimistic; rows may come from separate runs, see `--append`). Coverage kept: the three coverage sets of "
        "the reduced model equal the original's.", "",
        "| model | layers before | after | params before | after | inference s before | after | reduction s | coverage kept |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        b, f = r["before"], r["after"]
        lines.append(f"| {name} | {b['layers']} | {f['layers']} | {b['params']:,} | {f['params']:,} | "
                     f"{b['inference_s']:.3f} | {f['inference_s']:.3f} | {r['reduce_s']} | {'yes' if r['coverage_kept'] else 'NO'} |")
    lines += ["", "The paper (MEMO/COMET): InceptionResNetV2 782 → 69 layers, inference 65 s → 6 s (GPU servers, Keras 2)."]
    with atomic_write(out / "fuzz_reduction.md") as fh:
        fh.write(_provenance.md_header(__file__) + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
