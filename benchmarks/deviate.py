"""Benchmark of ``twinspect deviate``: DFlare and DiffChaser on compressed image classifiers.

Follows the evaluation of Tian et al., "Finding Deviated Behaviors of the Compressed DNN Models for
Image Classifications" (DFlare, ACM TOSEM 2023), whose published numbers are in
``../shared/README.md``. Sections (``--only loaders,built,shared,ablations``; default all, run in this
order, cheapest first):

* ``shared``    — DFlare on the three DiffChaser/DFlare pairs of ``../shared/data/models/dflare``
  (LeNet-1, LeNet-5 on MNIST; ResNet-20 on CIFAR-10; originals Keras ``.h5``, compressed 8-bit TFLite
  ``.lite``): 500 seed inputs each, drawn at random from the test set with a fixed seed
  (:func:`twinspect.dl.deviate.results.seed_list`), timeout 180 s per seed, as in the paper.
  Success rate (over the searched seeds; seeds where the two models already disagree are counted
  apart, "no search needed", as in DFlare's code), average/median queries and time of the
  successful seeds, beside the paper, and how far the triggering inputs are from their seeds
  (median over triggers of the mean and the largest absolute pixel difference). Targets: 100 %
  success and average queries no higher than the paper's DFlare figures (84 / 117 / 30).
* ``ablations`` — DFlare_R (uniform operator choice), DFlare_D (distance-only fitness) and DiffChaser
  (the genetic-algorithm baseline, population 1,000) on a random 50 of those 500 seeds with a 60 s
  timeout. **The budgets differ from the paper's** (which gave every method 180 s on all 500 seeds).
  DFlare's row for the same 50 seeds is taken from the ``shared`` run (each seed's search depends
  only on the run seed and the seed index, so it is the same search). Target: DiffChaser needs at
  least 10× DFlare's average queries on every pair.
* ``built``     — DFlare on pairs built with ``twinspect train`` / ``twinspect compress``: a LeNet-5
  trained on MNIST (2 epochs) and its static 8-bit quantised, magnitude-pruned and distilled
  (LeNet-1 student) twins, all TorchScript. 100 seeds each, timeout 60 s per seed. Models are cached
  under ``WORK_DIR/models`` and reused by later runs.
* ``loaders``   — milliseconds per single-image query (median of repeated calls after warm-up) of
  each loader — Keras ``.h5``, TFLite, TorchScript — through the adapter (``predict_proba``: what a
  search pays per query), beside the model's bare forward call (traced Keras graph / TFLite
  ``set_tensor``+``invoke``+``get_tensor`` / TorchScript module) and, for Keras, the framework's
  convenience call ``Model.predict``. The adapter should cost about the bare call, not the
  framework's per-call overhead.

Run directories (``run.json``, ``results.jsonl``, ``triggers/``, ``summary.json``) go under
``--work-dir`` (default ``runs/bench-deviate``, git-ignored). Without ``--resume`` a section's run
directories are started afresh; with ``--resume`` finished seeds are kept and an interrupted
benchmark continues where it stopped (``--ablation-seeds`` etc. may be lowered on resume: the
ablation sample is prefix-stable). ``--pairs`` restricts the shared and ablation sections to some of the three pairs (e.g. to run a
pair in another process; never run two processes on the same run directory). ``--report-only`` runs nothing and rebuilds the tables from the
run directories (unfinished runs are shown as done/planned seeds; loader timings and run wall times
come from the previous ``deviate.json``). Seed-parallel runs use ``--workers`` processes (2 by
default); each worker uses one torch/TFLite thread and loads both models itself (about 40 s per run
on a loaded 2-core machine). Results are rewritten after every section.

``--quick`` is a smoke run (20 / 5 / 10 seeds, timeouts 20 / 10 / 20 s, smaller built models)
with its own sub-folder ``WORK_DIR/quick``; it writes its tables there instead of
``benchmarks/results``.

Output: markdown tables on stdout and in ``benchmarks/results/deviate.md``, all numbers and the
configuration (seeds, timeouts, workers, machine, total wall time) in
``benchmarks/results/deviate.json``. Timings depend on the machine and on its load: the load
average at start and end is recorded.

Run from the repository root::

    nice .venv/bin/python benchmarks/deviate.py --quick
    nohup nice .venv/bin/python benchmarks/deviate.py --workers 2 > /tmp/deviate_bench.log 2>&1 &
    nice .venv/bin/python benchmarks/deviate.py --resume            # continue an interrupted run
    .venv/bin/python benchmarks/deviate.py --report-only            # tables of the runs so far
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from _timing import median_ms  # noqa: E402  (sibling module in benchmarks/)

PAIRS = ("lenet1", "lenet5", "resnet")
PAIR_TITLES = {"lenet1": "LeNet-1 (MNIST)", "lenet5": "LeNet-5 (MNIST)", "resnet": "ResNet-20 (CIFAR-10)"}
#: DFlare paper (TOSEM 2023, Table 4) on the shared pairs, 500 seeds, 180 s per seed.
PAPER = {
    "lenet1": {"dflare_success": 100.0, "dflare_queries": 83.97, "diffchaser_success": 99.40, "diffchaser_queries": 5812.47},
    "lenet5": {"dflare_success": 100.0, "dflare_queries": 117.02, "diffchaser_success": 99.68, "diffchaser_queries": 6040.53},
    "resnet": {"dflare_success": 100.0, "dflare_queries": 30.43, "diffchaser_success": 99.76, "diffchaser_queries": 2323.58},
}
#: Targets of the issue: DFlare's average queries no higher than the paper's (rounded).
TARGET_QUERIES = {"lenet1": 84, "lenet5": 117, "resnet": 30}
TARGET_RATIO = 10.0  # DiffChaser queries / DFlare queries
ABLATIONS = ("dflare-r", "dflare-d", "diffchaser")
ALGO_TITLES = {"dflare": "DFlare", "dflare-r": "DFlare_R", "dflare-d": "DFlare_D", "diffchaser": "DiffChaser"}
BUILT = ("quantize", "prune", "distill")
SECTIONS = ("loaders", "built", "shared", "ablations")  # run order: cheap sections first

FULL = dict(shared_seeds=500, shared_timeout=180.0, ablation_seeds=50, ablation_timeout=60.0,
            built_seeds=100, built_timeout=60.0, train_epochs=2, train_size=None, distill_epochs=2,
            loader_runs=200)
QUICK = dict(shared_seeds=20, shared_timeout=20.0, ablation_seeds=5, ablation_timeout=10.0,
             built_seeds=10, built_timeout=20.0, train_epochs=1, train_size=3000, distill_epochs=1,
             loader_runs=50)
PRUNE_SPARSITY = 0.8


def log(msg: str) -> None:
    """A timestamped progress line on stderr (the log of a background run)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _pct(x):
    return None if x is None else round(100.0 * float(x), 2)


def _yes(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "NO")


def _seeds(s: dict):
    """Seeds finished, as "done/planned" when the run is unfinished."""
    planned = s.get("planned")
    return s["seeds"] if planned is None or planned == s["seeds"] else f"{s['seeds']}/{planned}"


def _dist(s: dict) -> str:
    """"mean / max" pixel difference of trigger and seed (medians over the triggers)."""
    d = s.get("trigger_distance") or {}
    if d.get("median_mean_abs") is None:
        return ""
    return f"{d['median_mean_abs']:.1f} / {d['median_linf']:.0f}"


def _kept(s: dict):
    """% of triggers on which the original model still gives the seed's true label."""
    return _pct((s.get("trigger_distance") or {}).get("orig_keeps_true_label"))


def _r(x, nd=2):
    return None if x is None else round(float(x), nd)


# ---------------------------------------------------------------------------------------------
# Machine / configuration
# ---------------------------------------------------------------------------------------------


def machine_info() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    import torch

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem_gb,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "load_avg_start": [round(v, 2) for v in os.getloadavg()],
    }


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


def fresh_or_resume(run_dir: Path, resume: bool) -> None:
    """Without --resume, remove a previous run directory of this benchmark (it lives in WORK_DIR)."""
    if not resume and run_dir.exists() and (run_dir / "run.json").exists():
        shutil.rmtree(run_dir)


def per_query_ms(records: list[dict]) -> float | None:
    """Wall time per query of both models (seed evaluation included), over all searched seeds."""
    searched = [r for r in records if r["status"] != "disagree_at_seed"]
    q = sum(r["queries"] + 1 for r in searched)
    return None if q == 0 else 1e3 * sum(r["time_s"] for r in searched) / q


def trigger_distance(run_dir: Path, records: list[dict]) -> dict:
    """How far the triggering inputs are from their seeds (successful searches only).

    Returns:
        ``{"median_mean_abs": m, "median_linf": l, "orig_keeps_true_label": f}``: the medians over the
        triggers of the mean absolute pixel difference to the seed and of the largest one, in pixel
        levels (0–255), and the fraction of triggers on which the original model still gives the
        seed's true label; None without triggers.
    """
    mean_abs, linf = [], []
    found = [r for r in records if r["status"] == "found" and r.get("true_label", -1) >= 0]
    kept = float(np.mean([r["orig_label"] == r["true_label"] for r in found])) if found else None
    for r in records:
        if not r.get("success") or not r.get("trigger") or r["status"] == "disagree_at_seed":
            continue
        try:
            with np.load(run_dir / r["trigger"]) as z:
                d = np.abs(z["trigger"].astype(np.float64) - z["seed"].astype(np.float64))
        except (OSError, KeyError, ValueError):
            continue
        mean_abs.append(float(d.mean()))
        linf.append(float(d.max()))
    if not mean_abs:
        return {"median_mean_abs": None, "median_linf": None, "orig_keeps_true_label": kept}
    return {"median_mean_abs": float(np.median(mean_abs)), "median_linf": float(np.median(linf)),
            "orig_keeps_true_label": kept}


_MODELS: dict = {}


def _loaded(spec: dict):
    """The main process's copy of a model (loaded once per benchmark; workers load their own)."""
    from twinspect.dl.deviate.runner import load_model

    key = json.dumps(spec, sort_keys=True)
    if key not in _MODELS:
        _MODELS[key] = load_model(spec)
    return _MODELS[key]


def run_one(name: str, orig_spec: dict, comp_spec: dict, x, y, seeds, algorithm, params, run_dir: Path, args) -> dict:
    """One run_search; returns its summary plus the per-seed records and the wall time."""
    from twinspect.dl.deviate.results import RunDir, records_in_order, summarize
    from twinspect.dl.deviate.runner import run_search

    if args.report_only:
        done = RunDir(run_dir).load_records() if (run_dir / "results.jsonl").exists() else {}
        records = records_in_order(done, seeds)
        summary = {"algorithm": algorithm, **summarize(records), "wall_s": None, "planned": len(seeds),
                   "ms_per_query": per_query_ms(records), "new_seeds": 0, "out_dir": str(run_dir),
                   "complete": len(records) == len(seeds), "trigger_distance": trigger_distance(run_dir, records)}
        return {"summary": summary, "records": records}
    fresh_or_resume(run_dir, args.resume)
    n_done = [0]
    t0 = time.perf_counter()
    every = max(1, len(seeds) // 10)

    def on_result(rec: dict) -> None:
        n_done[0] += 1
        if n_done[0] % every == 0:
            log(f"  {name} {algorithm}: {n_done[0]} new seeds done ({time.perf_counter() - t0:.0f} s)")

    log(f"{name} {algorithm}: {len(seeds)} seeds, params {params}, workers {args.workers} -> {run_dir}")
    run_search(
        orig_spec, comp_spec, x, y, seeds, algorithm, run_dir,
        workers=args.workers, resume=args.resume, quiet=True, seed=args.seed, params=params,
        on_result=on_result, models=(_loaded(orig_spec), _loaded(comp_spec)),
    )
    wall = time.perf_counter() - t0
    records = records_in_order(RunDir(run_dir).load_records(), seeds)
    # the summary of exactly these seeds (a resumed run directory may hold more)
    summary = {"algorithm": algorithm, **summarize(records), "out_dir": str(run_dir), "planned": len(seeds),
               "complete": len(records) == len(seeds)}
    summary["wall_s"] = wall
    summary["trigger_distance"] = trigger_distance(run_dir, records)
    summary["ms_per_query"] = per_query_ms(records)
    summary["new_seeds"] = n_done[0]
    sr = summary["success_rate"]
    log(f"{name} {algorithm}: success {_pct(sr)} %, avg queries {_r(summary['avg_queries'])}, "
        f"wall {wall:.0f} s")
    return {"summary": summary, "records": records}


PIXELS = "uint8-wrap"  # set from --pixels in main()


def dflare_params(timeout: float) -> dict:
    return {"max_queries": None, "timeout": timeout, "pixels": PIXELS}


def section_shared(args, cfg, work: Path) -> dict:
    from twinspect.dl.data import dflare_pair, load_images
    from twinspect.dl.deviate.results import seed_list

    out = {}
    for pair in args.pairs:
        orig, comp, pre, ds = dflare_pair(pair)
        x, y = load_images(ds)
        seeds = seed_list(len(x), cfg["shared_seeds"], args.seed)
        specs = [{"path": str(p), "preprocess": pre} for p in (orig, comp)]
        res = run_one(pair, *specs, x, y, seeds, "dflare", dflare_params(cfg["shared_timeout"]),
                      work / "shared" / pair / "dflare", args)
        out[pair] = {"seeds": seeds, "dataset": ds, "models": [orig.name, comp.name], **res}
    return out


def ablation_seeds(seeds: list[int], n: int, seed: int) -> list[int]:
    """A fixed random ``n`` of the shared run's seeds (prefix-stable in ``n`` for a given shared seed count)."""
    perm = np.random.default_rng(np.random.SeedSequence([int(seed), 0xAB1A])).permutation(len(seeds))
    return [int(seeds[k]) for k in perm[: min(n, len(seeds))]]


def section_ablations(args, cfg, work: Path, shared: dict | None) -> dict:
    from twinspect.dl.data import dflare_pair, load_images
    from twinspect.dl.deviate.results import RunDir, records_in_order, seed_list, summarize

    out = {}
    for pair in args.pairs:
        orig, comp, pre, ds = dflare_pair(pair)
        x, y = load_images(ds)
        all_seeds = seed_list(len(x), cfg["shared_seeds"], args.seed)
        subset = ablation_seeds(all_seeds, cfg["ablation_seeds"], args.seed)
        specs = [{"path": str(p), "preprocess": pre} for p in (orig, comp)]
        rows = {}
        # DFlare on the same seeds, from the shared run (same search, 180 s budget)
        shared_dir = work / "shared" / pair / "dflare"
        done = RunDir(shared_dir).load_records() if (shared_dir / "results.jsonl").exists() else {}
        recs = records_in_order(done, subset)
        if len(recs) == len(subset):
            s = summarize(recs)
            s["ms_per_query"] = per_query_ms(recs)
            s["timeout"] = cfg["shared_timeout"]
            rows["dflare"] = {"summary": s, "records": recs}
        for algo in ABLATIONS:
            params = dflare_params(cfg["ablation_timeout"])
            if algo == "diffchaser":
                params["pop_size"] = args.pop_size
            res = run_one(pair, *specs, x, y, subset, algo, params, work / "ablations" / pair / algo, args)
            res["summary"]["timeout"] = cfg["ablation_timeout"]
            rows[algo] = res
        out[pair] = {"seeds": subset, **rows}
    return out


# ---------------------------------------------------------------------------------------------
# Built pairs (twinspect train / compress)
# ---------------------------------------------------------------------------------------------


def _cli(*argv: str) -> None:
    """Run one ``twinspect`` command in a subprocess (as a user would), failing loudly."""
    cmd = [sys.executable, "-m", "twinspect", *argv]
    log("  $ twinspect " + " ".join(argv))
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")


def build_models(cfg, work: Path, threads: int) -> dict[str, Path]:
    """Train LeNet-5 on MNIST and compress it three ways (cached: existing files are reused)."""
    mdir = work / "models"
    mdir.mkdir(parents=True, exist_ok=True)
    orig = mdir / "lenet5.pt"
    common = ["--threads", str(threads), "--quiet", "--seed", "0"]
    if not (orig.exists() and Path(str(orig) + ".json").exists()):
        argv = ["train", "lenet5", "--data", "mnist", "-o", str(orig), "--epochs", str(cfg["train_epochs"])]
        if cfg["train_size"]:
            argv += ["--train-size", str(cfg["train_size"])]
        _cli(*argv, *common)
    paths = {"original": orig}
    extra = {
        "quantize": [],
        "prune": ["--sparsity", str(PRUNE_SPARSITY)],
        "distill": ["--student", "lenet1", "--epochs", str(cfg["distill_epochs"])]
        + (["--train-size", str(cfg["train_size"])] if cfg["train_size"] else []),
    }
    for method in BUILT:
        p = mdir / f"lenet5-{method}.pt"
        if not (p.exists() and Path(str(p) + ".json").exists()):
            _cli("compress", str(orig), "--method", method, "-o", str(p), *extra[method], *common)
        paths[method] = p
    return paths


def section_built(args, cfg, work: Path) -> dict:
    from twinspect.dl.data import load_images
    from twinspect.dl.deviate.results import seed_list

    t0 = time.perf_counter()
    if args.report_only and not (work / "models" / "lenet5-distill.pt.json").exists():
        return None
    paths = build_models(cfg, work, threads=args.workers)
    build_s = time.perf_counter() - t0
    x, y = load_images("mnist")
    seeds = seed_list(len(x), cfg["built_seeds"], args.seed)
    out: dict = {"build_s": build_s, "seeds": seeds}
    orig_meta = json.loads(Path(str(paths["original"]) + ".json").read_text())
    out["original"] = {"path": str(paths["original"]), "accuracy": orig_meta.get("accuracy"),
                       "training": orig_meta.get("training")}
    for method in BUILT:
        meta = json.loads(Path(str(paths[method]) + ".json").read_text())
        c = meta.get("compression") or {}
        res = run_one(f"lenet5-{method}", {"path": str(paths["original"])}, {"path": str(paths[method])},
                      x, y, seeds, "dflare", dflare_params(cfg["built_timeout"]),
                      work / "built" / method / "dflare", args)
        out[method] = {
            "path": str(paths[method]),
            "compression": {k: c.get(k) for k in ("method", "mode", "sparsity", "student", "student_parameters",
                                                  "teacher_parameters", "original_accuracy", "compressed_accuracy",
                                                  "disagreements", "test_size")},
            **res,
        }
    return out


# ---------------------------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------------------------


def _bare_call(clf):
    """The model's own forward on an already preprocessed float32 batch, without the adapter."""
    fw = getattr(clf, "framework", "")
    if fw == "keras":
        import torch

        traced = getattr(clf, "_traced", None)
        if traced is not None:
            def call(b):
                with torch.inference_mode():
                    return traced(torch.from_numpy(b)).numpy()
        else:
            def call(b):
                with torch.no_grad():
                    return clf.model(torch.from_numpy(b), training=False).detach().numpy()
        return call
    if fw == "tflite":
        interp, i_in, i_out = clf._interp, clf._in_index, clf._out_index

        def call(b):
            interp.set_tensor(i_in, b)
            interp.invoke()
            return interp.get_tensor(i_out)
        return call
    if fw == "torch":
        import torch

        module = clf.module

        def call(b):
            with torch.inference_mode():
                return module(torch.from_numpy(b)).numpy()
        return call
    return None


def section_loaders(args, cfg, work: Path) -> dict:
    from twinspect.dl.adapters import load_classifier
    from twinspect.dl.data import dflare_pair, load_images

    if args.report_only:
        return (args.previous or {}).get("sections", {}).get("loaders")
    warnings.filterwarnings("ignore")
    models = []
    for pair in PAIRS:
        orig, comp, pre, ds = dflare_pair(pair)
        models += [(orig, pre, ds, "Keras .h5"), (comp, pre, ds, "TFLite")]
    paths = build_models(cfg, work, threads=args.workers)
    for key in ("original", *BUILT):
        models.append((paths[key], None, "mnist", "TorchScript"))
    imgs = {ds: load_images(ds, limit=8)[0] for ds in ("mnist", "cifar10")}
    rows = []
    for path, pre, ds, fmt in models:
        t = time.perf_counter()
        clf = load_classifier(path, preprocess=pre)
        load_s = time.perf_counter() - t
        x1 = imgs[ds][:1]
        heavy = "resnet" in path.name
        runs = max(20, cfg["loader_runs"] // 4) if heavy else cfg["loader_runs"]
        adapter_ms = median_ms(lambda: clf.predict_proba(x1), runs)
        b = clf.preprocess(x1.astype(np.float32))
        bare = _bare_call(clf)
        bare_ms = median_ms(lambda: bare(b), runs) if bare is not None else None
        predict_ms = eager_ms = None
        if fmt.startswith("Keras"):
            predict_ms = median_ms(lambda: clf.model.predict(b, verbose=0), max(10, runs // 10), 2)
            import torch

            def eager():
                with torch.no_grad():
                    return clf.model(torch.from_numpy(b), training=False)
            eager_ms = median_ms(eager, max(10, runs // 5), 2)
        engine = clf.describe().get("engine", type(clf).__name__)
        rows.append({
            "model": path.name, "format": fmt, "engine": engine, "load_s": load_s, "adapter_ms": adapter_ms,
            "bare_ms": bare_ms, "overhead_ms": None if bare_ms is None else adapter_ms - bare_ms,
            "keras_eager_ms": eager_ms, "keras_predict_ms": predict_ms, "runs": runs,
        })
        log(f"loader {path.name}: adapter {adapter_ms:.3f} ms, bare {bare_ms if bare_ms is None else round(bare_ms, 3)} ms")
    import torch

    return {"rows": rows, "torch_threads": torch.get_num_threads()}


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def tables(res: dict) -> list[tuple[str, list[str], list[list], str]]:
    """(title, headers, rows, note) of every table."""
    cfg = res["config"]
    out = []
    shared = res["sections"].get("shared")
    abl = res["sections"].get("ablations")
    targets: list[list] = []
    if shared:
        rows = []
        for pair in [p for p in PAIRS if p in shared]:
            s = shared[pair]["summary"]
            p = PAPER[pair]
            sr = _pct(s["success_rate"])
            done = s.get("planned") in (None, s["seeds"])
            ok = s["success_rate"] == 1.0 and s["avg_queries"] is not None and s["avg_queries"] <= TARGET_QUERIES[pair]
            ok = ok if done else None
            rows.append([PAIR_TITLES[pair], _seeds(s), s["no_search_needed"], sr, p["dflare_success"],
                         _r(s["avg_queries"]), p["dflare_queries"], _r(s["median_queries"]), _r(s["avg_time_s"], 3),
                         _r(s["median_time_s"], 3), _r(s["ms_per_query"]), _dist(s), _kept(s), _r(s["wall_s"], 0), _yes(ok)])
            targets.append([f"{PAIR_TITLES[pair]}: DFlare success rate", "100 %", f"{sr} %" if sr is not None else "-",
                            _yes(s["success_rate"] == 1.0 if done else None)])
            targets.append([f"{PAIR_TITLES[pair]}: DFlare avg queries", f"<= {TARGET_QUERIES[pair]}", _r(s["avg_queries"]),
                            _yes(s["avg_queries"] is not None and s["avg_queries"] <= TARGET_QUERIES[pair] if done else None)])
        out.append((
            f"DFlare on the shared pairs ({cfg['shared_seeds']} seeds, timeout {cfg['shared_timeout']:.0f} s per seed, "
            f"{cfg['workers']} workers)",
            ["pair", "seeds", "no search needed", "success %", "paper success %", "avg queries", "paper avg queries",
             "median queries", "avg time s", "median time s", "ms / query (pair)", "trigger - seed: mean / max abs diff",
             "orig = true label on trigger %", "run wall s",
             f"target met? (100 %, avg q <= {'/'.join(str(TARGET_QUERIES[p]) for p in PAIRS)})"],
            rows,
            "Success rate over searched seeds (seeds on which the two models already disagree need no search and "
            "are counted apart); queries and times averaged over successful seeds, as in DFlare's code. A query is "
            "one generated input sent to both models. ms / query = search time / (queries + 1 seed evaluation). "
            "trigger vs seed: medians over the triggering inputs of the mean and the largest absolute pixel "
            "difference to their seed, in pixel levels 0–255 (the search does not bound it); orig = true label: share of "
            "the triggers on which the original model still answers the seed's true label.",
        ))
    if abl:
        rows = []
        for pair in [p for p in PAIRS if p in abl]:
            a = abl[pair]
            base = a.get("dflare", {}).get("summary")
            for algo in ("dflare", *ABLATIONS):
                if algo not in a:
                    continue
                s = a[algo]["summary"]
                ratio = None
                ok = None
                if base and base["avg_queries"] and s["avg_queries"] is not None and algo != "dflare":
                    ratio = s["avg_queries"] / base["avg_queries"]
                if algo == "diffchaser":
                    ok = ratio is not None and ratio >= TARGET_RATIO
                    if s.get("planned") not in (None, s["seeds"]):
                        ok = None
                    targets.append([f"{PAIR_TITLES[pair]}: DiffChaser / DFlare avg queries (same seeds)",
                                    f">= {TARGET_RATIO:.0f}x", _r(ratio, 1), _yes(ok)])
                paper_q = PAPER[pair].get(f"{algo}_queries")
                paper_s = PAPER[pair].get(f"{algo}_success")
                rows.append([PAIR_TITLES[pair], ALGO_TITLES[algo], _seeds(s), s.get("timeout"),
                             _pct(s["success_rate"]), paper_s, _r(s["avg_queries"]), paper_q,
                             _r(s["median_queries"]), _r(s["avg_time_s"], 3), _r(s["median_time_s"], 3),
                             _r(ratio, 1), "" if algo != "diffchaser" else _yes(ok)])
        out.append((
            f"Ablations and DiffChaser (a random {cfg['ablation_seeds']} of the shared seeds, timeout "
            f"{cfg['ablation_timeout']:.0f} s per seed; DFlare row = the same seeds of the "
            f"{cfg['shared_timeout']:.0f} s shared run)",
            ["pair", "algorithm", "seeds", "timeout s", "success %", "paper success %", "avg queries",
             "paper avg queries", "median queries", "avg time s", "median time s", "x DFlare queries",
             f"target met? (DiffChaser >= {TARGET_RATIO:.0f}x)"],
            rows,
            "Budgets differ from the paper's: the paper ran every method on all 500 seeds with 180 s per seed; here "
            f"DFlare_R, DFlare_D and DiffChaser get {cfg['ablation_timeout']:.0f} s on {cfg['ablation_seeds']} seeds. "
            f"DiffChaser: population {cfg['pop_size']}; a generation's new individuals are one batch and each counts as "
            "a query, so its query counts are multiples of the population size (minus the elite). Averages are over "
            "successful seeds only; a seed that timed out is a failure.",
        ))
    built = res["sections"].get("built")
    if built:
        rows = []
        for method in BUILT:
            b = built[method]
            c, s = b["compression"], b["summary"]
            detail = {"quantize": f"int8, {c.get('mode')}", "prune": f"L1 unstructured, sparsity {_r(c.get('sparsity'), 2)}",
                      "distill": f"student {c.get('student')} ({c.get('student_parameters')} params)"}[method]
            rows.append([f"LeNet-5 / {method}", detail, _pct(c.get("original_accuracy")), _pct(c.get("compressed_accuracy")),
                         c.get("disagreements"), _seeds(s), s["no_search_needed"], _pct(s["success_rate"]),
                         _r(s["avg_queries"]), _r(s["median_queries"]), _r(s["avg_time_s"], 3), _r(s["median_time_s"], 3),
                         _r(s["ms_per_query"]), _dist(s), _kept(s)])
            targets.append([f"built LeNet-5 / {method}: DFlare success rate", "(none; reported)", f"{_pct(s['success_rate'])} %", "n/a"])
        tr = (built.get("original") or {}).get("training") or {}
        out.append((
            f"DFlare on pairs built with twinspect train/compress ({cfg['built_seeds']} MNIST test seeds, timeout "
            f"{cfg['built_timeout']:.0f} s per seed)",
            ["pair", "compression", "orig acc %", "comp acc %", "test disagreements", "seeds", "no search needed",
             "success %", "avg queries", "median queries", "avg time s", "median time s", "ms / query (pair)",
             "trigger - seed: mean / max abs diff", "orig = true label on trigger %"],
            rows,
            f"Original: LeNet-5 trained with `twinspect train lenet5 --epochs {tr.get('epochs')}` "
            f"({tr.get('train_size')} MNIST training images, test accuracy {_pct((built.get('original') or {}).get('accuracy'))} %); "
            f"compressed with `twinspect compress` (static quantisation calibrated on 512 images; pruning sparsity "
            f"{PRUNE_SPARSITY} without fine-tuning; distillation into LeNet-1, T = 4). All TorchScript. Building the "
            f"models took {built['build_s']:.0f} s (0 when cached).",
        ))
    loaders = res["sections"].get("loaders")
    if loaders:
        rows = [[r["model"], r["format"], r["engine"], _r(r["load_s"]), _r(r["adapter_ms"], 3), _r(r["bare_ms"], 3),
                 _r(r["overhead_ms"], 3), _r(r["keras_eager_ms"], 3), _r(r["keras_predict_ms"], 3)] for r in loaders["rows"]]
        out.append((
            f"Time per single-image query of each loader (median ms, torch threads {loaders['torch_threads']}, TFLite 1 thread)",
            ["model", "format", "engine", "load s", "adapter predict_proba ms", "bare model call ms",
             "adapter overhead ms", "Keras eager call ms", "Keras Model.predict ms"],
            rows,
            "adapter = Classifier.predict_proba on one uint8 image (preprocessing, forward, softmax, counting): what a "
            "search pays per model per query. bare = the model's own forward on the preprocessed float32 batch "
            "(the traced Keras graph / TFLite set_tensor+invoke+get_tensor / TorchScript module). Keras eager call and "
            "Model.predict show the per-call overhead of the framework that the adapter avoids.",
        ))
    if targets:
        wall, finished = res.get("wall_time_s"), res.get("finished")
        if res["config"]["report_only"]:  # the runs may span several (resumed) processes: no claim
            wall, finished = None, False
        if wall is not None and finished and set(res["config"]["sections"]) == set(SECTIONS) and not res["config"]["quick"]:
            targets.append(["whole benchmark wall time", "< 60 min", f"{wall / 60:.1f} min", _yes(wall < 3600)])
        out.append(("Targets", ["target", "goal", "measured", "met?"], targets, ""))
    return out


def render_markdown(res: dict) -> str:
    from twinspect.reports.table import markdown_table

    cfg, m = res["config"], res["machine"]
    lines = [
        "# twinspect deviate benchmark (DFlare, DiffChaser)",
        "",
        "Generated by `benchmarks/deviate.py`" + (" --quick (smoke run)" if cfg["quick"] else "") + ".",
        "",
        "## Configuration",
        "",
        f"- sections: {', '.join(cfg['sections'])}; run seed {cfg['seed']}; workers {cfg['workers']} (seed-parallel "
        "processes, one torch/TFLite thread each)",
        f"- pixel handling of the mutations: {cfg.get('pixels', 'float')} (`twinspect deviate --pixels`; uint8-wrap = "
        "the public DFlare code's uint8 casting, float = clipped float32 images)",
        f"- shared pairs: DFlare, {cfg['shared_seeds']} seeds, timeout {cfg['shared_timeout']:.0f} s per seed",
        f"- ablations: DFlare_R, DFlare_D, DiffChaser (population {cfg['pop_size']}), {cfg['ablation_seeds']} seeds, "
        f"timeout {cfg['ablation_timeout']:.0f} s per seed",
        f"- built pairs: DFlare, {cfg['built_seeds']} seeds, timeout {cfg['built_timeout']:.0f} s per seed",
        f"- machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB RAM, Python {m['python']}, torch {m['torch']}; "
        f"load average at start {m['load_avg_start']}, at end {m.get('load_avg_end')} "
        "(the machine was shared with other jobs, so times are pessimistic)",
        f"- total wall time: {res['wall_time_s']:.0f} s ({res['wall_time_s'] / 60:.1f} min); per section (s): "
        f"{res.get('section_wall_s', {})}",
        "",
    ]
    if cfg.get("report_only"):
        prev = res.get("previous_run") or {}
        lines += ["**Report rebuilt from the run directories (`--report-only`); the total wall time above is the "
                  "rebuild's. Unfinished runs show seeds as done/planned.**"
                  + (f" The benchmark run itself (as recorded in the previous deviate.json): wall time "
                     f"{prev['wall_time_s']:.0f} s ({prev['wall_time_s'] / 60:.1f} min), per section (s) "
                     f"{prev.get('section_wall_s')}, finished: {prev.get('finished')}, load average at start "
                     f"{prev.get('load_avg_start')}, at end {prev.get('load_avg_end')}." if prev.get("wall_time_s") else ""),
                  ""]
    elif not res.get("finished"):
        lines += ["**Partial results: the benchmark was still running when this file was written.**", ""]
    for title, headers, rows, note in tables(res):
        lines += [f"## {title}", "", markdown_table(rows, headers), ""]
        if note:
            lines += [note, ""]
    return "\n".join(lines)


def strip_records(res: dict) -> dict:
    """The JSON result without the per-seed records (they stay in the run directories)."""

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "records"}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return strip(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: few seeds, short timeouts, small built models")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {','.join(SECTIONS)}")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench-deviate",
                    help="run directories and built models (default runs/bench-deviate)")
    ap.add_argument("--resume", action="store_true", help="continue the runs in --work-dir instead of starting afresh")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: rebuild the tables from the run directories in --work-dir (e.g. of an "
                    "unfinished run; loader timings are taken from the previous deviate.json)")
    ap.add_argument("--workers", type=int, default=2, help="seed-parallel worker processes")
    ap.add_argument("--pairs", default=",".join(PAIRS), help="shared pairs for the shared/ablations sections")
    ap.add_argument("--seed", type=int, default=0, help="run seed (seed sample and every search)")
    ap.add_argument("--pop-size", type=int, default=1000, help="DiffChaser population size")
    ap.add_argument("--pixels", default="uint8-wrap", choices=["float", "uint8-wrap"],
                    help="pixel handling of the mutations (twinspect deviate --pixels): float (clipped) or "
                         "uint8-wrap (the public DFlare code's uint8 casting)")
    ap.add_argument("--shared-seeds", type=int, help="override: seeds per shared pair")
    ap.add_argument("--ablation-seeds", type=int, help="override: seeds per ablation run")
    ap.add_argument("--built-seeds", type=int, help="override: seeds per built pair")
    ap.add_argument("--results", type=Path, help="output folder of deviate.md/.json "
                    "(default benchmarks/results; WORK_DIR/quick with --quick)")
    args = ap.parse_args()
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {', '.join(SECTIONS)}")
    if args.workers < 1:
        ap.error("--workers must be >= 1")
    args.pairs = [p.strip() for p in args.pairs.split(",") if p.strip()]
    if not args.pairs or any(p not in PAIRS for p in args.pairs):
        ap.error(f"--pairs takes a comma-separated subset of {','.join(PAIRS)}")

    global PIXELS
    PIXELS = args.pixels
    cfg = dict(QUICK if args.quick else FULL)
    cfg["pixels"] = args.pixels
    for key in ("shared_seeds", "ablation_seeds", "built_seeds"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    work = args.work_dir / "quick" if args.quick else args.work_dir
    results_dir = args.results or (work if args.quick else ROOT / "benchmarks" / "results")
    work.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")

    t_start = time.perf_counter()
    res: dict = {
        "config": {**cfg, "sections": sections, "quick": args.quick, "workers": args.workers, "seed": args.seed,
                   "pop_size": args.pop_size, "work_dir": str(work), "resume": args.resume,
                   "report_only": args.report_only, "pairs": args.pairs},
        "machine": machine_info(),
        "sections": {},
        "paper": PAPER,
        "targets": {"dflare_avg_queries": TARGET_QUERIES, "diffchaser_over_dflare": TARGET_RATIO},
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    args.previous = None
    if args.report_only and (results_dir / "deviate.json").exists():
        args.previous = json.loads((results_dir / "deviate.json").read_text())
        prev = args.previous
        if prev.get("config", {}).get("report_only"):  # keep the original run's record through rebuilds
            res["previous_run"] = prev.get("previous_run")
        else:
            res["previous_run"] = {"wall_time_s": prev.get("wall_time_s"), "section_wall_s": prev.get("section_wall_s"),
                                   "finished": prev.get("finished"),
                                   "load_avg_start": prev.get("machine", {}).get("load_avg_start"),
                                   "load_avg_end": prev.get("machine", {}).get("load_avg_end")}
    log(f"benchmark start: sections {sections}, work dir {work}, config {cfg}")
    for sec in SECTIONS:
        if sec not in sections:
            continue
        t = time.perf_counter()
        if sec == "loaders":
            out = section_loaders(args, cfg, work)
        elif sec == "shared":
            out = section_shared(args, cfg, work)
        elif sec == "ablations":
            out = section_ablations(args, cfg, work, res["sections"].get("shared"))
        else:
            out = section_built(args, cfg, work)
        if out is not None:
            if args.previous:
                _carry_wall(out, args.previous.get("sections", {}).get(sec))
            res["sections"][sec] = out
        res.setdefault("section_wall_s", {})[sec] = round(time.perf_counter() - t, 1)
        log(f"section {sec} done in {time.perf_counter() - t:.0f} s")
        write_results(res, results_dir, t_start, final=False)  # partial results after every section
    write_results(res, results_dir, t_start, final=True)


def _carry_wall(new, old) -> None:
    """Report-only: take each run's wall time from the previous deviate.json (same section/pair/run)."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return
    if "build_s" in new and old.get("build_s") is not None:
        new["build_s"] = old["build_s"]
    if "summary" in new and isinstance(old.get("summary"), dict) and new["summary"].get("wall_s") is None:
        new["summary"]["wall_s"] = old["summary"].get("wall_s")
    for k, v in new.items():
        if k != "summary" and isinstance(v, dict):
            _carry_wall(v, old.get(k))


def write_results(res: dict, results_dir: Path, t_start: float, final: bool) -> None:
    """Write deviate.md / deviate.json (and print the markdown on stdout when ``final``)."""
    from twinspect._io import atomic_write, write_json

    res["wall_time_s"] = time.perf_counter() - t_start
    res["machine"]["load_avg_end"] = [round(v, 2) for v in os.getloadavg()]
    res["finished"] = final
    md = render_markdown(res)
    with atomic_write(results_dir / "deviate.md") as fh:
        fh.write(_provenance.md_header(__file__) + md + "\n")
    write_json(results_dir / "deviate.json", {"provenance": _provenance.info(__file__), **strip_records(res)})
    if final:
        print(md)
        print(f"\nwrote {results_dir / 'deviate.md'} and {results_dir / 'deviate.json'}")


if __name__ == "__main__":
    main()
