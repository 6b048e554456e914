"""Benchmark of ``twinspect fuzz``: coverage after a fixed budget for MEMO, its ablations and two baselines.

Runs MEMO, MEMO_r (random seed selection), MEMO_o (LEMON operators), MEMO without reduction (the RQ3
ablation: with ``--seeds all`` the large keras.applications seeds go in unreduced), the Muffin-style
baseline (random DAG models from scratch) and LEMON-style mutation (LEMON's rules, inconsistency-guided),
one after the other, each for the same budget on the same backends and seeds, and writes
``benchmarks/results/fuzz.json`` and ``fuzz.md`` (``--name`` changes the stem) (coverage, models per hour, unique findings).
Campaign directories (models, findings bundles) go to ``--work`` (default a temporary directory) and are
not committed. Run with ``nice -n 10``; the issue's budgets are 15 and 60 minutes per variant. The budget
is each campaign's search loop (generation and testing); backend start-up, seeding and the minimisation
of the findings queued during the loop come on top and are reported apart in the first table.

Usage: ``nice -n 10 .venv/bin/python benchmarks/fuzz.py --budget 3m --work /tmp/fuzzbench`` (add
``--parallel`` to run the variants at the same time, each with a share of the machine; ``--seeds all`` for
all ten of the paper's seed models; ``--shared-threshold`` to calibrate the D_MAD threshold once, in the
first variant, and give it to the others, so that their findings are judged by the same rule).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

from twinspect._io import atomic_write
from twinspect.dl.fuzz import report, seeds
from twinspect.dl.fuzz.campaign import VARIANTS, Config, parse_budget, run_campaign


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", default="3m")
    ap.add_argument("--backends", default="keras-tensorflow,keras-jax,keras-torch,onnxruntime")
    ap.add_argument("--seeds", default="LeNet5,AlexNet,LSTM1,LSTM2", help="Seed models, or 'all' (the ten of the paper).")
    ap.add_argument("--timeout", type=float, default=60.0, help="Per-model time limit of a backend, seconds.")
    ap.add_argument("--shared-threshold", action="store_true",
                    help="The first variant calibrates the D_MAD threshold; the others use its value.")
    ap.add_argument("--threshold", type=float, default=None,
                    help="D_MAD threshold given to every variant (no calibration run), e.g. an earlier run's value.")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--name", default="fuzz",
                    help="Results file stem: writes OUT/NAME.json and OUT/NAME.md (e.g. fuzz_60m for a 60-minute run); "
                         "OUT/NAME_notes.md, when it exists, is copied verbatim under a 'Notes' heading.")
    ap.add_argument("--heading", default=None, metavar="FILE",
                    help="A markdown file whose text is written above the table (e.g. what kind of run this was).")
    ap.add_argument("--summarise-only", action="store_true", help="Only summarise the campaigns already in --work.")
    ap.add_argument("--parallel", action="store_true",
                    help="Run the variants at the same time (one `twinspect fuzz run` process each), so that they "
                         "share the machine equally instead of meeting different loads one after another.")
    a = ap.parse_args()
    a.seeds = ",".join(seeds.parse_names(a.seeds))
    if a.parallel and not a.summarise_only and (a.threshold is not None or a.shared_threshold):
        ap.error("--parallel runs `twinspect fuzz run` per variant, which calibrates its own D_MAD threshold: "
                 "drop --threshold / --shared-threshold, or run the variants one after another")
    budget = parse_budget(a.budget)
    work = Path(a.work or tempfile.mkdtemp(prefix="fuzzbench-"))
    if a.parallel and not a.summarise_only:
        work.mkdir(parents=True, exist_ok=True)
        # --timeout as in the sequential path (before, --parallel dropped it silently: the CLI's 60 s applied)
        procs = [subprocess.Popen([sys.executable, "-m", "twinspect", "fuzz", "run", "-o", str(work / v), "--budget", a.budget,
                                   "--backends", a.backends, "--seeds", a.seeds, "--variant", v, "--seed", "0",
                                   "--timeout", str(a.timeout), "-q"],
                                  stdout=open(work / f"{v}.json", "w"), stderr=open(work / f"{v}.log", "w"))
                 for v in a.variants.split(",")]
        for p in procs:
            p.wait()
        a.summarise_only = True
    rows = {}
    threshold = a.threshold
    for v in a.variants.split(","):
        if a.summarise_only:
            if not (work / v / "state.json").exists():
                continue
            s = report.summary(work / v)
        else:
            cfg = Config(backends=a.backends.split(","), seeds=a.seeds.split(","), variant=v, seed=0,
                         timeout_s=a.timeout, threshold=threshold)
            s = run_campaign(work / v, budget, cfg, verbose=0)
            if a.shared_threshold and threshold is None:  # (with --threshold every variant has it already)
                threshold = float(s["threshold"])
        s["campaign_dir"] = str(work / v)
        rows[v] = s
        print(v, json.dumps(s["coverage"]), s["models_tested"], len(s["findings"]), flush=True)
    out = Path(a.out)
    with atomic_write(out / f"{a.name}.json") as fh:
        json.dump({"provenance": _provenance.info(__file__), "budget_s": budget, "backends": a.backends, "seeds": a.seeds,
                   "shared_threshold": a.shared_threshold, "threshold": a.threshold, "runs": rows}, fh, indent=1, default=str)
    lines = ["| variant | loop s (+ start-up, seeding, findings after) | seed layers in pool | layer type | layer pair | layer param | models generated | valid | tested | tested/h | unique findings |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v, s in rows.items():
        c = s["coverage"]
        red = [r for r in (s.get("reduction") or {}).values() if "layers_after" in r]
        layers = "—" if v == "muffin" else f"{sum(r['layers_after'] for r in red)} of {sum(r['layers_before'] for r in red)}"
        lines.append(f"| {v} | {s['elapsed_s']:.0f} (+{s.get('startup_s') or 0:.0f}, +{s.get('seeding_s') or 0:.0f}, "
                     f"+{s.get('findings_after_s') or 0:.0f}) | {layers} | {c['layer_type']['ratio']:.1%} | {c['layer_pair']['ratio']:.1%} | "
                     f"{c['layer_param']['ratio']:.1%} | {s['models_generated']} | {s['models_valid']} | {s['models_tested']} | "
                     f"{s['models_per_hour']:.0f} | {len(s['findings'])} |")
    lines += ["", "Where each variant's search loop went (seconds by phase, from the campaign's `phase_s`; `generate` = "
              "mutation or random model, `check` = Keras build and size caps, `execute` = the runs on every backend, "
              "`findings` = oracles and queueing new symptoms (campaigns before the issue-20 pool change also "
              "minimised, root-caused and bundled them here; now that runs after the budget), what a tested model "
              "added on average (coverage items after seeding; the seeds' own items excluded) and MEMO's model pool "
              "at the end (size; mutants added; evicted over the cap; coverage-adding mutants kept out because "
              "their run crashed or gave NaN/Inf, or because they grew past `max_added_layers`):", "",
              "| variant | generate | check | save_model | execute | findings | state_write | s per tested model | "
              "tested per minute | new pairs per tested model | new params per tested model | pool size / added / "
              "evicted / not clean / too large |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for v, s in rows.items():
        ph = s.get("phase_s") or {}
        c, first = s["coverage"], (s["coverage_over_time"] or [[0, 0.0, 0.0, 0.0]])[0]
        n = max(s["models_tested"], 1)
        pl = s.get("pool")
        pool = "—" if v in ("muffin", "lemon") or not pl else \
            f"{pl['size']} / {pl['added']} / {pl['evicted']} / {pl['not_clean']} / {pl['too_large']}"
        gained = [c[k]["covered"] - round(first[i + 1] * c[k]["total"]) for i, k in enumerate(("layer_type", "layer_pair", "layer_param"))]
        lines.append(f"| {v} | " + " | ".join(f"{ph.get(k, 0.0):.0f}" for k in
                                              ("generate", "check", "save_model", "execute", "findings", "state_write"))
                     + f" | {s['elapsed_s'] / n:.1f} | {s['models_tested'] * 60 / max(s['elapsed_s'], 1e-9):.1f} | "
                     f"{gained[1] / n:.2f} | {gained[2] / n:.2f} | {pool} |")
    lines += ["", "Findings (signature = kind | the deviating system, else the pair | root-cause layer of the minimised model, or the crash's "
              "exception and top frame; duplicates = mutants showing the same signature):", "",
              "| variant | kind | systems | layer (root cause; symptom layer) | duplicates | signature |", "|---|---|---|---|---|---|"]
    for v, s in rows.items():
        for f in s["findings"]:
            where = f"{f.get('layer')} ({f.get('root_cause') or '-'}; {f.get('symptom_layer')})"
            lines.append(f"| {v} | {f['kind']} | {', '.join(f['systems'])} | {where} | {f.get('duplicates', 1)} | "
                         f"`{f['signature'][:110]}` |")
    notes = out / f"{a.name}_notes.md"
    with atomic_write(out / f"{a.name}.md") as fh:
        heading = Path(a.heading).read_text(encoding="utf-8").strip() if a.heading else ""
        fh.write(_provenance.md_header(__file__) + (heading + "\n\n" if heading else "")
                 + "\n".join(lines) + "\n")
        if notes.is_file():
            fh.write(f"\n## Notes (written by hand, copied verbatim from `{notes.name}`)\n\n" + notes.read_text())
    print("\n".join(lines))


if __name__ == "__main__":
    main()
