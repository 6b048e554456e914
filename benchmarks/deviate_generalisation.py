"""Issue 19: ``twinspect deviate`` on model pairs it was never tuned on (the pair suite of ``deviate_suite.py``).

For each pair of the suite and each configuration, runs the search (in process, one model load per
pair for all configurations) on N seeds of the run-seed-0 seed list and reports per pair and pooled
per split (``tune`` / ``heldout``): success rate over searched seeds, search queries (successful
seeds) and minimisation queries apart, median L∞ / SSIM of the minimised triggers, the share of
compressed-model errors (the original keeps the seed's true label), and how many triggers still
trigger when re-run through each model's own runtime *outside twinspect's adapters* (onnxruntime,
the LiteRT interpreter, ``torch.jit.load``, Keras; preprocessing written out in this script) — a
trigger that does not is counted as a failure in ``verified %``.

Configurations (``--configs``): ``default`` (the margin search with default settings; the CLI's default
until 2026-11-27, when ``-a auto`` — the guided search for originals with a gradient — replaced it; the
name is kept so that earlier results files read the same), ``dflare``
(``-a dflare``), ``reference`` (``-a dflare --preset reference``), ``diffchaser`` (population 1,000),
``margin-v1`` (the margin search with the constants tuned on the LeNets before issue 19: fixed ε 48
doubling after 50 stalled queries, no boundary refinement), ``minimize-v1`` (the default search with
the minimisation before the boundary-following one: restoring patches and pixels, ``minimize_method="restore"``),
``guided`` (``-a guided``: the margin search started on the original's gradient; for an ONNX original the
torch model it was exported from, the ``.pt`` of the same name, is the surrogate).
``guided-second`` (with the second search, the default from 2026-11-27 until the heldout5 rule) and
``guided-flat`` (that with the minimisation's flat-region pass, ``minimize_flat``, the default since the
heldout5 rule of ``deviate_ssim_notes.md``). The configurations from before that rule set
``minimize_flat=False``, so that they stay what their results files report. ``guided-skip``
(``guided-flat`` with ``skip_orig_wrong``: seeds the original gets wrong are set aside, status
``orig_wrong_at_seed``, not searched; the candidate of ``deviate_cifar_notes.md``, the default since
its heldout6 rule held); the margin and guided configurations before it set ``skip_orig_wrong=False``.
``guided-pair`` (with the pair's direction, ``pair_gradient``, for compressed models with a gradient of their
own; ``deviate_pair_notes.md``) and ``guided-standin`` (the same with ONNX Runtime dynamic-int8 models given one
by their stand-in; the default since the heldout8 rule of ``deviate_standin_notes.md`` held); the guided
configurations before them set ``pair_gradient=False``.

Run from the repository root after ``benchmarks/deviate_suite.py build``::

    nice -n 10 .venv/bin/python benchmarks/deviate_generalisation.py --split tune --seeds 30 --configs default
    nice -n 10 .venv/bin/python benchmarks/deviate_generalisation.py --split heldout --seeds 50 --configs default,margin-v1,dflare
    .venv/bin/python benchmarks/deviate_generalisation.py --report-only

Output: ``benchmarks/results/deviate_generalisation.md`` and ``.json`` (rows merged and rewritten
after every run; ``--name`` changes the stem, for reduced runs kept apart from the full table);
run directories under ``--work-dir`` (default ``runs/bench-generalisation``,
resumed when re-run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from deviate_suite import DEFAULT_DIR, PAIRS, pair_by_name, resolve  # noqa: E402

CONFIGS: dict[str, tuple[str, dict]] = {
    # the configurations before the heldout5 rule keep the minimisation they were reported with: without
    # step 6 (minimize_flat, the default since that rule; deviate_ssim_notes.md)
    "default": ("margin", {"minimize_flat": False}),
    "margin-v1": ("margin", {"eps": 48.0, "adaptive": False, "refine": False, "orig_weight": 0.0,
                             "minimize_flat": False}),
    "minimize-v1": ("margin", {"minimize_method": "restore", "minimize_flat": False}),
    "descent": ("margin", {"descent": 3, "minimize_flat": False}),
    "dflare": ("dflare", {}),
    "reference": ("dflare", {"preset": "reference"}),
    "diffchaser": ("diffchaser", {"pop_size": 1000}),
    # the margin search with today's defaults (flat-region pass, seeds the original gets wrong set aside, SSIM order):
    # the black-box peer of the guided search in the side-by-side runs
    "margin-now": ("margin", {"minimize_flat": True, "skip_orig_wrong": True, "minimize_pixel_order": "ssim"}),
    # steps 1-4 of the guided search alone (its default before the heldout4 rule; results files before it)
    "guided": ("guided", {"second": None, "minimize_flat": False}),
    "guided-seed": ("guided", {"fallback": "seed", "second": None, "minimize_flat": False}),
    # the guided search's default from the heldout4 rule (deviate_second_notes.md) to the heldout5 rule
    "guided-second": ("guided", {"second": "margin", "minimize_flat": False}),
    # the same with the minimisation's flat-region pass (step 6): the default since the heldout5 rule
    # (deviate_ssim_notes.md)
    "guided-flat": ("guided", {"second": "margin", "minimize_flat": True}),
    # the same with seeds the original gets wrong set aside (the candidate of deviate_cifar_notes.md; the
    # default since its heldout6 rule held)
    "guided-skip": ("guided", {"second": "margin", "minimize_flat": True, "skip_orig_wrong": True}),
    # the same with the pair's direction in step 3 (the compressed model's own gradient, where it has one):
    # the candidate of deviate_pair_notes.md
    "guided-pair": ("guided", {"second": "margin", "minimize_flat": True, "skip_orig_wrong": True,
                               "pair_gradient": True, "pair_standin": False}),
    # the same with the ONNX Runtime dynamic-int8 stand-in giving such a compressed model a gradient
    # (twinspect/dl/deviate/ort_dynamic.py): the candidate of deviate_standin_notes.md
    "guided-standin": ("guided", {"second": "margin", "minimize_flat": True, "skip_orig_wrong": True,
                                  "pair_gradient": True, "pair_standin": True}),
    # the same with step 5 capped at 200 search queries: the candidate of deviate_second_cap_notes.md, the default
    # since the heldout10 rule held
    "guided-cap": ("guided", {"second": "margin", "minimize_flat": True, "skip_orig_wrong": True,
                              "pair_gradient": True, "pair_standin": True, "second_max_queries": 200}),
    # the same with the minimisation's single-pixel pass in SSIM order: the candidate of deviate_pixel_order_notes.md,
    # the default since its heldout11 rule held
    "guided-ssim": ("guided", {"second": "margin", "minimize_flat": True, "skip_orig_wrong": True,
                               "pair_gradient": True, "pair_standin": True, "second_max_queries": 200,
                               "minimize_pixel_order": "ssim"}),
    # the same with the pair's restarts (step 3's last direction, twinspect/dl/deviate/guided.py): the candidate of
    # deviate_pair_restarts_notes.md
    "guided-restart": ("guided", {"second": "margin", "minimize_flat": True, "skip_orig_wrong": True,
                                  "pair_gradient": True, "pair_standin": True, "second_max_queries": 200,
                                  "minimize_pixel_order": "ssim", "pair_restarts": 8}),
}
# every margin / guided configuration before the heldout6 rule searches the seeds the original gets wrong, and
# every guided configuration before the heldout8 rule (deviate_standin_notes.md) runs without the pair's direction
for _name, (_alg, _params) in CONFIGS.items():
    if _alg in ("margin", "guided"):
        _params.setdefault("skip_orig_wrong", False)
    if _alg == "guided":
        _params.setdefault("pair_gradient", False)
        _params.setdefault("second_max_queries", None)  # every guided configuration before the heldout10 rule
    if _alg in ("margin", "guided"):
        _params.setdefault("minimize_pixel_order", "largest")  # every configuration before the heldout11 rule
#: the suite's splits, in the tables' order
SPLITS = tuple(dict.fromkeys(p.split for p in PAIRS))  # tune, heldout, heldout2, …: in the order PAIRS lists them
#: configuration name → its place in the tables (overrides ``name+key=value`` sort after their base)
CONFIG_ORDER = {c: i for i, c in enumerate(CONFIGS)}
#: the fields of a results.jsonl record the tables need
RECORD_KEYS = ("status", "success", "queries", "time_s", "minimize_queries", "distances", "compressed_error")
#: DFlare's published average queries on the shared pairs (TOSEM 2023, Table 4)
PAPER = {"lenet1-tflite8": 83.97, "lenet5-tflite8": 117.02, "resnet20-tflite8": 30.43}


def parse_config(config: str) -> tuple[str, dict]:
    """``name[+key=value...]`` → (algorithm, parameters): a named configuration with overrides (tuning runs)."""
    name, *over = config.split("+")
    if name not in CONFIGS:
        raise SystemExit(f"unknown config {name!r}; choose from {', '.join(CONFIGS)}")
    algorithm, params = CONFIGS[name]
    params = dict(params)
    for kv in over:
        k, _, v = kv.partition("=")
        params[k] = {"true": True, "false": False}.get(v.lower(), None)
        if params[k] is None:
            try:
                params[k] = float(v) if "." in v else int(v)
            except ValueError:  # a word, e.g. minimize_pixel_order=ssim
                params[k] = v
    return algorithm, params


def config_key(config: str) -> tuple[int, str]:
    """Sort key of a configuration name: its base's place in :data:`CONFIGS`, then the full name."""
    return CONFIG_ORDER.get(config.split("+")[0], len(CONFIG_ORDER)), config


def trim(record: dict) -> dict:
    """The :data:`RECORD_KEYS` of a results.jsonl record."""
    return {k: record[k] for k in RECORD_KEYS if k in record}


def _f(v, nd=1, pct=False):
    if v is None:
        return ""
    return f"{100 * v:.{nd}f}" if pct else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


#: the preprocessing presets the suite's Keras/TFLite pairs use, written out: (scale, mean, std)
PRESETS = {"unit": (255.0, None, None),
           "cifar10-dflare": (1.0, (125.307, 122.95, 113.865), (62.9932, 62.0887, 66.7048))}


def raw_predictor(path: Path, preset: str | None):
    """Top-1 labels of (N, H, W, C) 0–255 images from the model file's own runtime, outside twinspect's
    adapters: onnxruntime, the LiteRT interpreter, ``torch.jit.load`` or Keras; preprocessing from the
    preset or the model's sidecar JSON."""
    import numpy as np

    if preset is not None:
        scale, mean, std = PRESETS[preset]
        layout = None
    else:
        meta = json.loads(Path(str(path) + ".json").read_text())["preprocess"]
        scale, mean, std, layout = meta["scale"], meta["mean"] or None, meta["std"] or None, meta["layout"]

    def prep(x):
        z = np.asarray(x, np.float32) / np.float32(scale)
        if mean is not None:
            z = (z - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
        return z

    suffix = path.suffix
    if suffix == ".onnx":
        import onnxruntime as ort

        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        nchw = layout == "NCHW"
        return lambda x: sess.run(None, {name: prep(x).transpose(0, 3, 1, 2).copy() if nchw else prep(x)})[0].argmax(1)
    if suffix in (".lite", ".tflite"):
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(model_path=str(path))
        it.allocate_tensors()
        i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

        def run(x):
            out = []
            for img in prep(x):
                it.set_tensor(i, img[None])
                it.invoke()
                out.append(int(it.get_tensor(o)[0].argmax()))
            return np.array(out)

        return run
    if suffix == ".pt":
        import torch

        m = torch.jit.load(str(path)).eval()

        def run(x):
            with torch.no_grad():
                return m(torch.from_numpy(prep(x).transpose(0, 3, 1, 2).copy())).numpy().argmax(1)

        return run
    if suffix in (".h5", ".keras"):
        import keras

        m = keras.models.load_model(str(path), compile=False)
        return lambda x: np.asarray(m.predict(prep(x), verbose=0)).argmax(1)
    raise SystemExit(f"no raw runtime for {path}")


def verify(run_dir: Path, predictors) -> tuple[int, int, int, int]:
    """Re-run each trigger of a run through the models' own runtimes.

    Returns (triggers that still trigger, triggers, triggers whose seed the original classifies right,
    compressed-model errors among those): a compressed-model error is impossible from a seed the
    original already gets wrong, so the last two give the share where it was possible."""
    from twinspect.dl.deviate.results import RunDir, load_trigger

    ok = n = right = ce_right = 0
    for rec in RunDir(run_dir).load_records().values():
        if not rec.get("success") or not rec.get("trigger"):
            continue
        seed, t = load_trigger(run_dir / rec["trigger"], "seed", "trigger")
        n += 1
        lf, lg = predictors[0](t[None])[0], predictors[1](t[None])[0]
        ok += int(lf != lg)
        if int(predictors[0](seed[None])[0]) == rec["true_label"]:
            right += 1
            ce_right += int(bool(rec.get("compressed_error")))
    return ok, n, right, ce_right


def pooled(rows: list[dict]) -> dict:
    """Pool the per-seed records of several rows (same config) into one summary."""
    from twinspect.dl.deviate.results import summarize

    recs = [r for row in rows for r in row["records"]]
    s = summarize(recs)
    s["verified"] = sum(r["verified"][0] for r in rows)
    s["triggers"] = sum(r["verified"][1] for r in rows)
    right = sum(r["verified"][2] for r in rows)
    s["ce_right"] = sum(r["verified"][3] for r in rows) / right if right else None
    return s


def write_report(rows: list[dict], meta: dict, out_dir: Path, name: str = "deviate_generalisation") -> None:
    (out_dir / f"{name}.json").write_text(json.dumps({"provenance": _provenance.info(__file__), "meta": meta, "rows": [
        {k: v for k, v in r.items() if k != "records"} for r in rows]}, indent=2))
    head = ("| pair | split | config | seeds searched | success % | verified % | avg search queries (successful) | paper DFlare avg | "
            "avg minimisation queries | median L∞ | median SSIM | compressed-model errors % | compressed-model errors where possible % | by status | wall s |")
    lines = ["# twinspect deviate on pairs it was not tuned on (issue 19)", "",
             "Generated by `benchmarks/deviate_generalisation.py`; pairs built by `benchmarks/deviate_suite.py` "
             "(kinds and split listed there).", "",
             f"- seeds: the first N of the run-seed-0 seed list of each pair; budget {meta['max_queries']} queries / "
             f"{meta['timeout']} s per seed; machine: {meta['machine']}.",
             f"- this file: `{meta.get('command', '')}` at commit {meta.get('commit', '?')}, {meta.get('date', '?')}, "
             f"load average {', '.join(f'{v:.1f}' for v in meta.get('load', []))}; the rows' wall times come from the runs that "
             "made them (per row; other work shared the 2 cores).",
             "- `compressed-model errors where possible`: the share among triggers whose seed the original classifies right "
             "(from a seed the original gets wrong no trigger can be one; ResNet-8 is right on 69 % of CIFAR-10).",
             "- `verified %`: triggers that still trigger when re-run through each model's own runtime outside twinspect "
             "(onnxruntime, LiteRT, torch.jit, Keras), over searched seeds.",
             "- Search parameters of `default` were chosen on the `tune` pairs only; `heldout` rows are pairs the search never ran on "
             "while it was designed; `heldout2` rows are pairs of new originals built after the `heldout` results had been seen "
             "(and used in later design), fixed before any search ran on them; `heldout3` rows are pairs of new originals built "
             "after the guided search's results on `heldout` and `heldout2` had been seen, fixed before any search ran on them; "
             "`heldout4` rows are pairs of new originals built after the rule in `deviate_second_notes.md` was committed, fixed "
             "before any search ran on them; `heldout5` rows are pairs of new originals whose entries were committed before they "
             "were built and before any search ran on them, and searched only after the rule in `deviate_ssim_notes.md` was "
             "committed; `heldout6` rows are pairs of new originals built (and entered here) only after the rule in "
             "`deviate_cifar_notes.md` was committed, searched only after that; `heldout7` rows likewise after the rule in "
             "`deviate_pair_notes.md`; `heldout8` rows likewise after the rule in `deviate_standin_notes.md`; `heldout9` rows (TFLite pairs of new Keras originals) likewise after the rule in `deviate_tflite_notes.md`; `heldout10`, "
             "`heldout11` and `heldout12` rows likewise after the rules in `deviate_second_cap_notes.md`, "
             "`deviate_pixel_order_notes.md` and `deviate_pair_restarts_notes.md`.",
             "- `orig_wrong_at_seed` (in `by status`): seeds set aside without a search because the original is wrong on "
             "them (`guided-skip`); like `disagree_at_seed` they are not in `seeds searched` and not in the success rate.",
             "", head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        s = r["summary"]
        st = ", ".join(f"{k} {v}" for k, v in s["by_status"].items() if v)
        ver = None if not s["searched"] else r["verified"][0] / s["searched"]
        lines.append(f"| {r['pair']} | {r['split']} | {r['config']} | {s['searched']} | {_f(s['success_rate'], pct=True)} | "
                     f"{_f(ver, pct=True)} | {_f(s['avg_queries'])} | {_f(PAPER.get(r['pair']))} | {_f(s['avg_minimize_queries'])} | "
                     f"{_f(s['median_linf'])} | {_f(s['median_ssim'], 3)} | {_f(s['compressed_error_share'], pct=True)} | "
                     f"{_f(r['verified'][3] / r['verified'][2] if r['verified'][2] else None, pct=True)} | {st} | "
                     f"{_f(r['wall_s'], 0)} |")
    lines += ["", "## Pooled per split", "", "| split | config | pairs | seeds searched | success % | verified % | "
              "avg search queries (successful) | avg minimisation queries | median L∞ | median SSIM | compressed-model errors % | "
              "compressed-model errors where possible % | worst pair success % | worst pair median L∞ | worst pair "
              "compressed-model errors % |", "|" + "---|" * 15]
    for split in SPLITS:
        for config in sorted({r["config"] for r in rows}, key=config_key):
            grp = [r for r in rows if r["split"] == split and r["config"] == config]
            if not grp:
                continue
            s = pooled(grp)
            ver = None if not s["searched"] else s["verified"] / s["searched"]
            worst_sr = min((r["summary"]["success_rate"] or 0) for r in grp)
            worst_linf = max((r["summary"]["median_linf"] or 0) for r in grp)
            worst_ce = min((r["summary"]["compressed_error_share"] or 0) for r in grp)
            lines.append(f"| {split} | {config} | {len(grp)} | {s['searched']} | {_f(s['success_rate'], pct=True)} | {_f(ver, pct=True)} | "
                         f"{_f(s['avg_queries'])} | {_f(s['avg_minimize_queries'])} | {_f(s['median_linf'])} | "
                         f"{_f(s['median_ssim'], 3)} | {_f(s['compressed_error_share'], pct=True)} | {_f(s['ce_right'], pct=True)} | "
                         f"{_f(worst_sr, pct=True)} | "
                         f"{_f(worst_linf)} | {_f(worst_ce, pct=True)} |")
    (out_dir / f"{name}.md").write_text(_provenance.md_header(__file__) + "\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=[*SPLITS, "all"], default="heldout")
    ap.add_argument("--pairs", default="", help="comma-separated pair names (default: every pair of --split)")
    ap.add_argument("--configs", default="default")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--max-queries", type=int, default=3000)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--suite-dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench-generalisation")
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--name", default="deviate_generalisation",
                    help="stem of the results files under --results (default: deviate_generalisation)")
    args = ap.parse_args()
    if not args.name or "/" in args.name or args.name.startswith("."):
        print(f"deviate_generalisation.py: bad --name {args.name!r}: a plain file stem is needed", file=sys.stderr)
        raise SystemExit(2)

    import torch

    torch.set_num_threads(1)
    import subprocess

    from twinspect.dl.data import load_images
    from twinspect.dl.deviate.results import RunDir, seed_list, summarize
    from twinspect.dl.deviate.runner import load_model, run_search

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    meta = {"seeds": args.seeds, "max_queries": args.max_queries, "timeout": args.timeout, "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": list(os.getloadavg()),
            "command": " ".join(["benchmarks/deviate_generalisation.py", *sys.argv[1:]]),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                       f"Python {platform.python_version()}, torch {torch.__version__}"}
    json_path = args.results / f"{args.name}.json"
    rows: list[dict] = json.loads(json_path.read_text())["rows"] if json_path.exists() else []
    pairs = [pair_by_name(n) for n in args.pairs.split(",") if n] or [p for p in PAIRS if args.split in ("all", p.split)]
    order = {p.name: i for i, p in enumerate(PAIRS)}
    for pair in pairs:
        orig_p, comp_p = resolve(pair, args.suite_dir)
        x, y = load_images(pair.data, split="test")
        idx = seed_list(len(x), args.seeds, 0)
        specs = [{"path": str(p), **({"preprocess": pair.preprocess} if pair.preprocess else {})} for p in (orig_p, comp_p)]
        models = fresh = None
        for config in args.configs.split(","):
            algorithm, extra = parse_config(config)
            if algorithm == "guided" and orig_p.suffix == ".onnx":
                # an ONNX original gives no gradient: the torch model it was exported from is the surrogate
                extra["surrogate"] = {"path": str(orig_p.with_suffix(".pt")),
                                      **({"preprocess": pair.preprocess} if pair.preprocess else {})}
            out = args.work_dir / pair.name / config
            wall = None
            if not args.report_only:
                if models is None:
                    models = (load_model(specs[0]), load_model(specs[1]))
                t0 = time.perf_counter()
                run_search(specs[0], specs[1], x, y, idx, algorithm, out, resume=out.exists(), quiet=True, seed=0,
                           params={"max_queries": args.max_queries, "timeout": args.timeout, **extra}, dataset=pair.data,
                           models=models)
                wall = time.perf_counter() - t0
                (out / "bench_wall.json").write_text(json.dumps({"wall_s": wall, "load": list(os.getloadavg())}))
            elif (out / "bench_wall.json").exists():
                wall = json.loads((out / "bench_wall.json").read_text())["wall_s"]
            if args.report_only and not (out / "results.jsonl").exists():
                continue
            if fresh is None:
                fresh = (raw_predictor(orig_p, pair.preprocess), raw_predictor(comp_p, pair.preprocess))
            recs = list(RunDir(out).load_records().values())
            summary = summarize(recs)
            row = {"pair": pair.name, "split": pair.split, "kind": pair.kind, "config": config, "algorithm": algorithm,
                   "params": extra, "summary": summary, "verified": list(verify(out, fresh)), "wall_s": wall,
                   "records": [trim(r) for r in recs]}
            rows = [r for r in rows if (r["pair"], r["config"]) != (pair.name, config)] + [row]
            rows.sort(key=lambda r: (order.get(r["pair"], len(order)), config_key(r["config"])))
            _ensure_records(rows, args.work_dir)
            write_report(rows, meta, args.results, args.name)
            print(f"{pair.name} {config}: success {summary['success_rate']} linf {summary['median_linf']} "
                  f"ce {summary['compressed_error_share']} q {summary['avg_queries']}", flush=True)


def _ensure_records(rows: list[dict], work_dir: Path) -> None:
    """Rows read back from the JSON have no per-seed records: reload them from their run directories."""
    from twinspect.dl.deviate.results import RunDir

    for r in rows:
        if "records" not in r:
            r["records"] = [trim(x) for x in RunDir(work_dir / r["pair"] / r["config"]).load_records().values()]


if __name__ == "__main__":
    main()
