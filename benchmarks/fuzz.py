"""Benchmark of ``twinspect fuzz``: coverage after a fixed budget for MEMO and its ablations.

Runs MEMO, MEMO_r (random seed selection), MEMO_o (LEMON operators) and MEMO without reduction, one after
the other, each for the same budget on the same backends and seeds, and writes
``benchmarks/results/fuzz.json`` and ``fuzz.md`` (``--name`` changes the stem) (coverage, models per hour, unique findings).
Campaign directories (models, findings bundles) go to ``--work`` (default a temporary directory) and are
not committed. Run with ``nice -n 10``; the issue's budgets are 15 and 60 minutes per variant.

Usage: ``nice -n 10 .venv/bin/python benchmarks/fuzz.py --budget 3m --work /tmp/fuzzbench`` (add
``--parallel`` to run the four variants at the same time, each with a quarter of the machine).
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
from twinspect.dl.fuzz import report
from twinspect.dl.fuzz.campaign import Config, parse_budget, run_campaign

VARIANTS = ("memo", "memo_r", "memo_o", "memo_noreduce")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", default="3m")
    ap.add_argument("--backends", default="keras-tensorflow,keras-jax,keras-torch,onnxruntime")
    ap.add_argument("--seeds", default="LeNet5,AlexNet,LSTM1,LSTM2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--name", default="fuzz",
                    help="Results file stem: writes OUT/NAME.json and OUT/NAME.md (e.g. fuzz_60m for a 60-minute run); "
                         "OUT/NAME_notes.md, when it exists, is copied verbatim under a 'Notes' heading.")
    ap.add_argument("--summarise-only", action="store_true", help="Only summarise the campaigns already in --work.")
    ap.add_argument("--parallel", action="store_true",
                    help="Run the variants at the same time (one `twinspect fuzz run` process each), so that they "
                         "share the machine equally instead of meeting different loads one after another.")
    a = ap.parse_args()
    budget = parse_budget(a.budget)
    work = Path(a.work or tempfile.mkdtemp(prefix="fuzzbench-"))
    if a.parallel and not a.summarise_only:
        work.mkdir(parents=True, exist_ok=True)
        procs = [subprocess.Popen([sys.executable, "-m", "twinspect", "fuzz", "run", "-o", str(work / v), "--budget", a.budget,
                                   "--backends", a.backends, "--seeds", a.seeds, "--variant", v, "--seed", "0", "-q"],
                                  stdout=open(work / f"{v}.json", "w"), stderr=open(work / f"{v}.log", "w"))
                 for v in a.variants.split(",")]
        for p in procs:
            p.wait()
        a.summarise_only = True
    rows = {}
    for v in a.variants.split(","):
        if a.summarise_only:
            if not (work / v / "state.json").exists():
                continue
            s = report.summary(work / v)
        else:
            cfg = Config(backends=a.backends.split(","), seeds=a.seeds.split(","), variant=v, seed=0)
            s = run_campaign(work / v, budget, cfg, verbose=0)
        s["campaign_dir"] = str(work / v)
        rows[v] = s
        print(v, json.dumps(s["coverage"]), s["models_tested"], len(s["findings"]), flush=True)
    out = Path(a.out)
    with atomic_write(out / f"{a.name}.json") as fh:
        json.dump({"provenance": _provenance.info(__file__), "budget_s": budget, "backends": a.backends, "seeds": a.seeds, "runs": rows}, fh, indent=1, default=str)
    lines = ["| variant | loop s (+ seeding s) | layer type | layer pair | layer param | models generated | valid | tested | tested/h | unique findings |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v, s in rows.items():
        c = s["coverage"]
        lines.append(f"| {v} | {s['elapsed_s']:.0f} (+{s.get('seeding_s') or 0:.0f}) | {c['layer_type']['ratio']:.1%} | {c['layer_pair']['ratio']:.1%} | "
                     f"{c['layer_param']['ratio']:.1%} | {s['models_generated']} | {s['models_valid']} | {s['models_tested']} | "
                     f"{s['models_per_hour']:.0f} | {len(s['findings'])} |")
    notes = out / f"{a.name}_notes.md"
    with atomic_write(out / f"{a.name}.md") as fh:
        fh.write(_provenance.md_header(__file__) + "\n".join(lines) + "\n")
        if notes.is_file():
            fh.write(f"\n## Notes (written by hand, copied verbatim from `{notes.name}`)\n\n" + notes.read_text())
    print("\n".join(lines))


if __name__ == "__main__":
    main()
