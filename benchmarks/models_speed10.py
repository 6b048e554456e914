"""Speed of ``twinspect models compare`` on 10 MNIST models, all pairs, every level but distillation (issue 18).

Issue 18's target: "10 models all-pairs at every level but distillation ≤ 60 s on this machine". This
script builds a zoo of 10 MNIST models of the kinds a user keeps, with twinspect's own ``train`` /
``compress`` command-line tools where they exist, and times the all-pairs comparison the way a user
runs it:

* **originals** — LeNet-5 seeds 0 and 1 and the plain CNN (width 0.5) seed 0, ``twinspect train``
  (``--epochs`` epochs on the 10,000 shared MNIST training images, TorchScript + metadata sidecar);
  the DFlare LeNet-1 (Keras 2.2.4 HDF5, ``../shared/data/models/dflare/lenet1.h5``).
* **derivatives** — LeNet-5 s0 fine-tuned (1 epoch on a seeded 1,000 training images with
  :func:`twinspect.dl.train.fit`: there is no fine-tuning command); LeNet-5 s0 magnitude-pruned 50 %
  (``twinspect compress --method prune``); the CNN exported to ONNX (``torch.onnx.export``, no
  metadata sidecar, as a user's export has none) and that ONNX file's ONNX Runtime dynamic int8
  quantisation (``onnxruntime.quantization.quantize_dynamic``, the export's most common shrink); the
  DFlare LeNet-1's 8-bit TFLite conversion (``lenet1-quan.lite``, made by DiffChaser's authors); a
  LeNet-1 student distilled from the CNN (``twinspect compress --method distill``), a model trained
  once, not the distillation *level*.

Everything is seeded. Models are cached under ``~/.cache/twinspect-bench/models-speed10/`` (never in
the repository; ``--cache`` to move it); a re-run reuses them. Accuracy of every model on the
10,000 official MNIST test images is measured with :func:`twinspect.dl.adapters.load_classifier`.

**Timing** (``--reps`` repetitions each, min and median reported, 1-minute load average before and
after every repetition, and CPU time, user + system, which a shared machine's load disturbs less):

(a) the CLI end to end, as a subprocess, start-up included:
    ``twinspect models compare M1 … M10 --data mnist --format json --output <tmp> --quiet``
    (default levels, i.e. every level; the ``code`` level needs ``--code`` training programs, which a
    zoo of downloaded models does not have, so it does not apply; distillation is off by default).
    CPU time is ``resource.getrusage(RUSAGE_CHILDREN)`` before/after.
(b) the Python API call alone, in this process after one untimed warm-up call (imports, lazy
    initialisation): :func:`twinspect.dl.modelclones.compare.compare_models` with
    ``CompareConfig(data="mnist")``; CPU time is ``resource.getrusage(RUSAGE_SELF)`` before/after.

Then each level alone through the API (one run each) for how the time splits over levels, and the
report's own ``timings`` (load / per-model / pairs). Every CLI report is checked: per measure, the
off-diagonal cells measured and the ``skipped`` entries with their reasons.

Run: ``nice -n 19 .venv/bin/python benchmarks/models_speed10.py [--reps 3]``. Results:
``benchmarks/results/models_speed10.{md,json}`` (atomic writes).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinspect._io import atomic_write, write_json  # noqa: E402
from twinspect.reports.table import markdown_table  # noqa: E402

TWINSPECT = ROOT / ".venv" / "bin" / "twinspect"
DEFAULT_CACHE = Path.home() / ".cache" / "twinspect-bench" / "models-speed10"
TARGET_S = 60.0
#: the levels timed one by one (``code`` needs training programs; distillation is not a level of its own)
SINGLE_LEVELS = ("weights", "representation", "io", "baselines", "reuse")


def log(msg: str) -> None:
    """Progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


def load1() -> float:
    """1-minute load average."""
    return round(os.getloadavg()[0], 2)


def run(cmd: list[str]) -> None:
    """Run a build command; on failure print its command and stderr and exit 2 (no results written)."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        print(f"models_speed10.py: build step failed ({' '.join(cmd)}): {tail}", file=sys.stderr)
        sys.exit(2)


# -- building ---------------------------------------------------------------------------------------
def build(cache: Path, epochs: int, dflare: Path) -> list[dict]:
    """Build (or reuse from ``cache``) the 10 models.

    Args:
        cache: directory of the cached models (created).
        epochs: training epochs of the ``twinspect train`` originals.
        dflare: directory of the shared DFlare models.

    Returns:
        list of 10 dicts ``{"name", "path", "framework", "format", "kind", "how"}`` in comparison order.
    """
    cache.mkdir(parents=True, exist_ok=True)
    ts = str(TWINSPECT)
    models: list[dict] = []

    def add(name: str, path: Path, framework: str, fmt: str, kind: str, how: str) -> None:
        models.append({"name": name, "path": str(path), "framework": framework, "format": fmt, "kind": kind, "how": how})

    for arch, seed, width in (("lenet5", 0, 1.0), ("lenet5", 1, 1.0), ("cnn", 0, 0.5)):
        name = f"{arch}-s{seed}"
        p = cache / f"{name}.pt"
        cmd = [ts, "train", arch, "--data", "mnist", "--epochs", str(epochs), "--seed", str(seed), "--width", str(width),
               "--threads", "2", "--quiet", "--output", str(p)]
        if not p.exists():
            log(f"  training {name}")
            run(cmd)
        add(name, p, "torch", "TorchScript .pt", "original", " ".join(["twinspect", *cmd[1:-1], f"{name}.pt"]))
    add("dflare-lenet1", dflare / "lenet1.h5", "Keras 2.2.4", "HDF5 .h5", "original (DFlare, shared)",
        "../shared/data/models/dflare/lenet1.h5")

    # fine-tuned copy of lenet5-s0 (no CLI for fine-tuning: twinspect.dl.train.fit)
    ft = cache / "lenet5-s0~finetune.pt"
    if not ft.exists():
        log("  fine-tuning lenet5-s0")
        from twinspect.dl.architectures import load_zoo_module
        from twinspect.dl.data import load_images
        from twinspect.dl.train import FitConfig, default_preprocess, fit, save_model

        module, meta = load_zoo_module(cache / "lenet5-s0.pt")
        x_all, y_all = load_images("mnist", "train")
        assert y_all is not None
        idx = np.random.default_rng(123).permutation(len(x_all))[:1000]
        m = copy.deepcopy(module)
        fit(m, x_all[idx], y_all[idx], default_preprocess("mnist", 1),
            FitConfig(epochs=1, batch_size=64, lr=1e-3, optimizer="adam", weight_decay=1e-4, seed=123), quiet=True)
        save_model(m.eval(), ft, dict(meta, compression={"method": "finetune", "parent": "lenet5-s0"}))
    add("lenet5-s0~finetune", ft, "torch", "TorchScript .pt", "fine-tuned lenet5-s0",
        "twinspect.dl.train.fit: 1 epoch, 1,000 seeded training images, Adam 1e-3")

    pr = cache / "lenet5-s0~prune50.pt"
    cmd = [ts, "compress", str(cache / "lenet5-s0.pt"), "--method", "prune", "--sparsity", "0.5", "--seed", "0",
           "--threads", "2", "--quiet", "--output", str(pr)]
    if not pr.exists():
        log("  pruning lenet5-s0")
        run(cmd)
    add("lenet5-s0~prune50", pr, "torch", "TorchScript .pt", "pruned lenet5-s0 (50 %)",
        "twinspect compress lenet5-s0.pt --method prune --sparsity 0.5 --seed 0 --output lenet5-s0~prune50.pt")

    onnx_f = cache / "cnn-s0.onnx"
    if not onnx_f.exists():
        log("  exporting cnn-s0 to ONNX")
        import torch

        from twinspect.dl.architectures import load_zoo_module

        module, _meta = load_zoo_module(cache / "cnn-s0.pt")
        tmp = onnx_f.with_suffix(".tmp.onnx")
        torch.onnx.export(module.eval(), (torch.zeros(1, 1, 28, 28),), str(tmp), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        os.replace(tmp, onnx_f)
    add("cnn-s0.onnx", onnx_f, "ONNX", "ONNX float32", "ONNX export of cnn-s0",
        "torch.onnx.export(dynamo=False, dynamic batch), no metadata sidecar")

    q = cache / "cnn-s0~dynint8.onnx"
    if not q.exists():
        log("  ONNX Runtime dynamic int8 quantisation")
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = q.with_suffix(".tmp.onnx")
        quantize_dynamic(str(onnx_f), str(tmp), weight_type=QuantType.QInt8)
        os.replace(tmp, q)
    add("cnn-s0~dynint8.onnx", q, "ONNX Runtime", "ONNX dynamic int8", "int8 quantisation of cnn-s0.onnx",
        "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8)")

    add("dflare-lenet1-quan", dflare / "lenet1-quan.lite", "TFLite", "TFLite 8-bit weights", "TFLite int8 of dflare-lenet1",
        "../shared/data/models/dflare/lenet1-quan.lite (DiffChaser's conversion)")

    st = cache / "cnn-s0~distill-lenet1.pt"
    cmd = [ts, "compress", str(cache / "cnn-s0.pt"), "--method", "distill", "--student", "lenet1", "--epochs", str(epochs),
           "--seed", "0", "--threads", "2", "--quiet", "--output", str(st)]
    if not st.exists():
        log("  distilling cnn-s0 into lenet1")
        run(cmd)
    add("cnn-s0~distill-lenet1", st, "torch", "TorchScript .pt", "LeNet-1 student distilled from cnn-s0",
        f"twinspect compress cnn-s0.pt --method distill --student lenet1 --epochs {epochs} --seed 0 --output cnn-s0~distill-lenet1.pt")
    return models


def accuracies(models: list[dict]) -> None:
    """Add ``"accuracy"`` (fraction of the 10,000 MNIST test images, default preprocessing) to every model."""
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.data import load_images

    xt, yt = load_images("mnist", "test")
    for m in models:
        m["accuracy"] = float(np.mean(load_classifier(m["path"]).predict(xt) == yt))
        log(f"  {m['name']}: accuracy {m['accuracy']:.4f}")


# -- checking a report ------------------------------------------------------------------------------
def coverage(report: dict) -> tuple[list[dict], list[dict]]:
    """Per measure, the off-diagonal cells measured; the ``skipped`` entries grouped by measure and reason.

    Args:
        report: the ``--format json`` report of ``twinspect models compare``.

    Returns:
        ``(rows, skips)``: rows ``{"measure", "level", "measured", "cells"}`` (ordered cells i != j for
        the directional baselines, i < j otherwise); skips ``{"measure", "reason", "pairs"}``.
    """
    n = len(report["models"])
    rows = []
    for name, m in report["measures"].items():
        mat = m["matrix"]
        directional = m["level"] == "baselines"
        cells = [(i, j) for i in range(n) for j in range(n) if i != j and (directional or i < j)]
        rows.append({"measure": name, "level": m["level"], "measured": sum(mat[i][j] is not None for i, j in cells), "cells": len(cells)})
    names = [m.get("path", str(i)) for i, m in enumerate(report["models"])]
    grouped: dict[tuple[str, str], list[str]] = {}
    for s in report["skipped"]:
        grouped.setdefault((s["measure"], s["reason"]), []).append(f"{Path(names[s['a']]).name}/{Path(names[s['b']]).name}")
    skips = [{"measure": k[0], "reason": k[1], "count": len(v), "pairs": v} for k, v in grouped.items()]
    return rows, skips


# -- timing -----------------------------------------------------------------------------------------
def cpu_children() -> float:
    """User + system CPU seconds of all waited-for children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_self() -> float:
    """User + system CPU seconds of this process (all threads) so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_cli(paths: list[str], reps: int, out_dir: Path) -> tuple[list[dict], dict]:
    """``reps`` end-to-end CLI runs. Returns (one record per run, the last run's JSON report)."""
    runs, report = [], {}
    for r in range(reps):
        out = out_dir / f"cli{r}.json"
        cmd = [str(TWINSPECT), "models", "compare", *paths, "--data", "mnist", "--format", "json", "--output", str(out), "--quiet"]
        l0, c0, t0 = load1(), cpu_children(), time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall, cpu, l1 = time.perf_counter() - t0, cpu_children() - c0, load1()
        rec: dict[str, Any] = {"rep": r + 1, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load1_before": l0, "load1_after": l1,
               "exit": proc.returncode}
        if proc.returncode != 0:
            rec["stderr_tail"] = proc.stderr.strip().splitlines()[-20:]
            log(f"  CLI run {r + 1}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        else:
            report = json.loads(out.read_text())
            rec["timings"] = {k: round(v, 2) for k, v in report.get("timings", {}).items()}
        runs.append(rec)
        log(f"  CLI run {r + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU, load {l0} -> {l1}")
    return runs, report


def time_api(paths: list[str], reps: int) -> tuple[dict, list[dict]]:
    """One untimed-for-the-target warm-up call and ``reps`` timed calls of ``compare_models``."""
    from twinspect.dl.modelclones.compare import CompareConfig, compare_models

    def one(levels: tuple[str, ...] | None = None) -> dict:
        cfg = CompareConfig(data="mnist") if levels is None else CompareConfig(data="mnist", levels=levels)
        l0, c0, t0 = load1(), cpu_self(), time.perf_counter()
        res = compare_models(paths, config=cfg)
        wall, cpu, l1 = time.perf_counter() - t0, cpu_self() - c0, load1()
        return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load1_before": l0, "load1_after": l1,
                "timings": {k: round(v, 2) for k, v in res.timings.items()}, "skipped": len(res.skipped)}

    warm = one()
    log(f"  API warm-up: {warm['wall_s']} s wall, {warm['cpu_s']} s CPU")
    runs = []
    for r in range(reps):
        rec = {"rep": r + 1, **one()}
        runs.append(rec)
        log(f"  API run {r + 1}: {rec['wall_s']} s wall, {rec['cpu_s']} s CPU, load {rec['load1_before']} -> {rec['load1_after']}")
    return warm, runs


def time_levels(paths: list[str]) -> list[dict]:
    """Each level of :data:`SINGLE_LEVELS` alone through the API, one run each."""
    from twinspect.dl.modelclones.compare import CompareConfig, compare_models

    out = []
    for level in SINGLE_LEVELS:
        l0, c0, t0 = load1(), cpu_self(), time.perf_counter()
        res = compare_models(paths, config=CompareConfig(data="mnist", levels=(level,)))
        wall, cpu = time.perf_counter() - t0, cpu_self() - c0
        out.append({"level": level, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load1_before": l0, "load1_after": load1(),
                    "timings": {k: round(v, 2) for k, v in res.timings.items()}})
        log(f"  level {level}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    return out


def summary(runs: list[dict], key: str) -> tuple[float, float]:
    """(min, median) of ``key`` over the runs."""
    v = [r[key] for r in runs]
    return min(v), statistics.median(v)


# -- main -------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="model cache directory (outside the repository)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the trained originals and the distilled student")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions of the CLI and of the API call")
    ap.add_argument("--no-levels", action="store_true", help="skip the per-level timing")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "models_speed10"), help="results path without suffix")
    args = ap.parse_args()
    if args.reps < 1 or args.epochs < 1:
        print("models_speed10.py: --reps and --epochs must be at least 1", file=sys.stderr)
        sys.exit(2)
    if not TWINSPECT.exists():
        print(f"models_speed10.py: {TWINSPECT}: no twinspect executable (create the venv first)", file=sys.stderr)
        sys.exit(2)
    from twinspect.dl.data import find_shared_data

    shared = find_shared_data()
    dflare = None if shared is None else shared / "models" / "dflare"
    if dflare is None or not (dflare / "lenet1.h5").exists() or not (dflare / "lenet1-quan.lite").exists():
        print("models_speed10.py: ../shared/data/models/dflare/lenet1.h5 and lenet1-quan.lite are missing", file=sys.stderr)
        sys.exit(2)

    log("building / reusing the models")
    t = time.perf_counter()
    models = build(Path(args.cache).expanduser(), args.epochs, dflare)
    build_s = time.perf_counter() - t
    accuracies(models)
    paths = [m["path"] for m in models]

    with tempfile.TemporaryDirectory(prefix="speed10-") as tmp:
        log("CLI, end to end")
        cli_runs, report = time_cli(paths, args.reps, Path(tmp))
    cov_rows, skips = coverage(report) if report else ([], [])
    cka_skipped = {Path(m["path"]).name: m.get("cka_layers_skipped", []) for m in report.get("models", [])}
    log("API call")
    warm, api_runs = time_api(paths, args.reps)
    levels = [] if args.no_levels else time_levels(paths)

    ok_cli = [r for r in cli_runs if r["exit"] == 0]
    cli_min, cli_med = summary(ok_cli, "wall_s") if ok_cli else (float("nan"), float("nan"))
    cli_cpu_min, cli_cpu_med = summary(ok_cli, "cpu_s") if ok_cli else (float("nan"), float("nan"))
    api_min, api_med = summary(api_runs, "wall_s")
    api_cpu_min, api_cpu_med = summary(api_runs, "cpu_s")
    met = bool(ok_cli) and len(ok_cli) == len(cli_runs) and cli_med <= TARGET_S

    # -- report ---------------------------------------------------------------------------------
    model_rows = [[i + 1, m["name"], m["framework"], m["format"], m["kind"], 100 * m["accuracy"]] for i, m in enumerate(models)]
    cmd_line = "twinspect models compare " + " ".join(Path(p).name for p in paths) + " --data mnist --format json --output report.json --quiet"
    time_rows = [["CLI end to end (subprocess)", r["rep"], r["wall_s"], r["cpu_s"], r["load1_before"], r["load1_after"],
                  r.get("timings", {}).get("total_s", "")] for r in cli_runs]
    time_rows += [["API call (after warm-up)", r["rep"], r["wall_s"], r["cpu_s"], r["load1_before"], r["load1_after"],
                   r["timings"].get("total_s", "")] for r in api_runs]
    time_rows.append(["API warm-up call (imports, not in the summary)", 0, warm["wall_s"], warm["cpu_s"], warm["load1_before"],
                      warm["load1_after"], warm["timings"].get("total_s", "")])
    split_rows = [[r["rep"], r["timings"].get("load_s"), r["timings"].get("per_model_s"), r["timings"].get("pairs_s"),
                   r["timings"].get("total_s")] for r in api_runs]
    level_rows = [[r["level"], r["wall_s"], r["cpu_s"], r["timings"].get("load_s"), r["timings"].get("per_model_s"),
                   r["timings"].get("pairs_s"), r["load1_before"], r["load1_after"]] for r in levels]
    cov_md = [[r["measure"], r["level"], r["measured"], r["cells"]] for r in cov_rows]
    skip_md = [[s["measure"], s["count"], s["reason"], ", ".join(s["pairs"][:4]) + (" …" if len(s["pairs"]) > 4 else "")] for s in skips]
    cka_md = [[k, len(v), "; ".join(sorted({x.get("reason", "") for x in v}))] for k, v in cka_skipped.items() if v]
    failed = [r for r in cli_runs if r["exit"] != 0]

    md = ["# 10 MNIST models, all pairs, every level but distillation (`benchmarks/models_speed10.py`)", "",
          f"Issue 18 target: 10 models all-pairs at every level but distillation ≤ {TARGET_S:.0f} s on this machine "
          "(2 CPUs, shared with other jobs: the load columns record them).", "",
          f"**Result: CLI end to end median {cli_med:.1f} s (min {cli_min:.1f} s) wall, {cli_cpu_med:.1f} s CPU; "
          f"API call median {api_med:.1f} s (min {api_min:.1f} s) wall, {api_cpu_med:.1f} s CPU — target "
          f"{'met' if met else 'MISSED'}.**", "",
          "## Models", "",
          f"Built or reused from the cache (`{args.cache}`, build/reuse {build_s:.0f} s). Accuracy on the 10,000 "
          "official MNIST test images, default preprocessing (x/255). The originals were trained "
          f"{args.epochs} epochs on the 10,000 shared training images: accuracy is not the point here.", "",
          markdown_table(model_rows, ["#", "model", "framework", "format", "kind", "test acc %"], floatfmt=".2f"), "",
          "How each was made:", "", *[f"- `{m['name']}`: {m['how']}" for m in models], "",
          "## Command", "",
          f"(a) `{cmd_line}` (full paths; run from `.venv/bin/twinspect` as a subprocess, wall time includes start-up; "
          "CPU = user + system of the child from `resource.getrusage(RUSAGE_CHILDREN)`). "
          "Default levels: code, weights, representation, io, baselines, reuse; the code level needs `--code` "
          "training programs (a downloaded zoo has none), so it does not apply; distillation is off unless `--distill`.", "",
          "(b) `compare_models(paths, config=CompareConfig(data=\"mnist\"))` in-process, after one warm-up call; "
          "CPU from `resource.getrusage(RUSAGE_SELF)` (all threads).", "",
          "## Times", "",
          markdown_table(time_rows, ["run", "rep", "wall s", "CPU s", "load1 before", "load1 after", "report total_s"], floatfmt=".2f"), "",
          f"| summary | min wall s | median wall s | min CPU s | median CPU s |\n|---|---|---|---|---|\n"
          f"| CLI end to end | {cli_min:.2f} | {cli_med:.2f} | {cli_cpu_min:.2f} | {cli_cpu_med:.2f} |\n"
          f"| API call | {api_min:.2f} | {api_med:.2f} | {api_cpu_min:.2f} | {api_cpu_med:.2f} |", "",
          f"Target ≤ {TARGET_S:.0f} s: **{'met' if met else 'missed'}** (CLI median, the slower of the two).", ""]
    if failed:
        md += ["### Failed CLI runs", "", *[f"- run {r['rep']}: exit {r['exit']}:\n\n```\n" + "\n".join(r.get("stderr_tail", [])) + "\n```" for r in failed], ""]
    md += ["## How the time splits", "",
           "The report's own `timings` of the API runs (load = reading the 10 model files; per-model = outputs, "
           "canonical weights, activations' Gram matrices once per model; pairs = every pair's measures at every level):", "",
           markdown_table(split_rows, ["API rep", "load s", "per-model s", "pairs s", "total s"], floatfmt=".2f"), ""]
    if level_rows:
        md += ["Each level alone (API, one run each; the `reuse` level computes the weights, CKA and I/O measures it "
               "needs, so it is not additive with them):", "",
               markdown_table(level_rows, ["level", "wall s", "CPU s", "load s", "per-model s", "pairs s", "load1 before", "load1 after"],
                              floatfmt=".2f"), ""]
    md += ["## Coverage of the last CLI report", "",
           "Off-diagonal cells with a value, per measure (baselines are directional: ordered pairs).", "",
           markdown_table(cov_md, ["measure", "level", "measured", "cells"]), "",
           "### Skipped (the report's `skipped` list, grouped by reason)", "",
           (markdown_table(skip_md, ["measure", "pairs", "reason", "examples"]) if skip_md else "None."), ""]
    if cka_md:
        md += ["### Layers left out of CKA, per model (`cka_layers_skipped`)", "",
               markdown_table(cka_md, ["model", "layers", "reasons"]), ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out.with_suffix(".md")) as fh:
        fh.write(_provenance.md_header(__file__) + "\n".join(md))
    write_json(out.with_suffix(".json"), {
        "provenance": _provenance.info(__file__), "target_s": TARGET_S, "target_met": met,
        "models": [{k: m[k] for k in ("name", "framework", "format", "kind", "how", "accuracy")} for m in models],
        "command": cmd_line, "cli_runs": cli_runs, "api_warmup": warm, "api_runs": api_runs,
        "summary": {"cli_wall_min_s": cli_min, "cli_wall_median_s": cli_med, "cli_cpu_min_s": cli_cpu_min, "cli_cpu_median_s": cli_cpu_med,
                    "api_wall_min_s": api_min, "api_wall_median_s": api_med, "api_cpu_min_s": api_cpu_min, "api_cpu_median_s": api_cpu_med},
        "levels": levels, "coverage": cov_rows, "skipped": skips, "cka_layers_skipped": cka_skipped,
    }, indent=1)
    print("\n".join(md))


if __name__ == "__main__":
    main()
