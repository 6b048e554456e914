"""Precision of a clone verifier on the blind-labelled real-code pairs of held-out projects.

Which of the hand-labelled pairs (``benchmarks/clones_precision_blind.py``; labels given blind) of
the *held-out* projects a verifier model file still accepts, and how many of those a judge called
"clone", per reported type/band. The pairs were drawn from what the shipped detector reported, so
for a stricter model this is the precision over the pairs both report; a model that accepts pairs
the sampled detector did not is not measured here. With ``--bcb``, each model's BigCloneBench
held-out recall (stated pairs, default settings otherwise) is measured in the same run, and
``--out STEM`` writes ``STEM.md``/``STEM.json``. Usage (from the repository root; the projects as
``benchmarks/clones_precision_blind.py`` describes)::

    .venv/bin/python benchmarks/verifier_holdout.py --model default --model strict --bcb \\
        --holdout PyYAML-6.0.1,click-8.1.7,gson,jinja2-3.1.4,msgpack-1.0.8,stdlib-3.11 \\
        --real benchmarks/results/clones_precision_blind_sample.jsonl:benchmarks/results/clones_precision_blind_labels.csv:/tmp/prec2 \\
        --out benchmarks/results/verifier_models
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from train_verifier import real_code_pairs  # noqa: E402

from twinspect.code.verify import load_verifier  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", default=[], help="verifier model file(s); default the shipped one")
    ap.add_argument("--real", action="append", required=True, metavar="SAMPLE:LABELS:SRC")
    ap.add_argument("--holdout", required=True, help="comma-separated held-out projects")
    ap.add_argument("--bcb", action="store_true", help="also BigCloneBench held-out recall per model")
    ap.add_argument("--out", type=Path, default=None, help="write STEM.md and STEM.json")
    args = ap.parse_args()
    strata: list[str] = []
    x, y, _, names = real_code_pairs(args.real, set(args.holdout.split(",")), strata)
    st = np.asarray(strata)
    print(f"held-out projects {names}: {len(y)} labelled pairs, {int(y.sum())} clones")
    results = []
    md = ["# Clone verifier models: real-code precision (held-out projects) and BigCloneBench recall\n",
          f"Written by `benchmarks/verifier_holdout.py`. Held-out projects (never used to fit any model): "
          f"{', '.join(names)} — {len(y)} blind-labelled pairs, {int(y.sum())} judged clones. Precision = pairs "
          "judged clone / pairs the model keeps, among the sampled pairs (drawn from what the default detector "
          "reported, so it covers the pairs both report). T1/T2 pairs are exact duplicates that no verifier "
          "decides; they are left out here.\n",
          "| model | threshold | VST3 kept / precision | ST3 kept / precision | MT3 kept / precision | T3 all: precision "
          "(clones kept) | BCB held-out ST3 | BCB MT3 | BCB non-clones reported |",
          "|---|---|---|---|---|---|---|---|---|"]
    for path in args.model or ["default"]:
        v = load_verifier(path)
        acc = v.score(x) >= v.threshold
        row: dict = {"model": path, "threshold": v.threshold, "bands": {}}
        cells = []
        for key in ("VST3", "ST3", "MT3", "T3"):
            sel = np.isin(st, ("VST3", "ST3", "MT3")) if key == "T3" else st == key
            a = acc & sel
            prec = float(y[a].mean()) if a.any() else float("nan")
            row["bands"][key] = {"sampled": int(sel.sum()), "kept": int(a.sum()), "clones_kept": int(y[a].sum()),
                                 "clones_sampled": int(y[sel].sum()), "precision": prec}
            cells.append(f"{int(a.sum())}/{int(sel.sum())}, {100 * prec:.1f} %" if key != "T3"
                         else f"{100 * prec:.1f} % ({int(y[a].sum())}/{int(y[sel].sum())})")
        if args.bcb:
            from twinspect.code.clones import DetectConfig
            from twinspect.code.evaluate.bcb import run_bcb

            res = run_bcb(None, DetectConfig(verifier_path=None if path == "default" else path), split="test")["pair"]
            row["bcb"] = {"recall": res["recall"], "fp": res["fp"], "negatives": res["negatives"]}
            cells += [f"{100 * res['recall']['ST3']:.2f} %", f"{100 * res['recall']['MT3']:.2f} %",
                      f"{res['fp']}/{res['negatives']}"]
        else:
            cells += ["", "", ""]
        results.append(row)
        md.append(f"| {path} | {v.threshold:.4f} | " + " | ".join(cells) + " |")
        print(md[-1], flush=True)
    if args.out is not None:
        from twinspect._io import atomic_write

        with atomic_write(args.out.with_suffix(".md")) as fh:
            fh.write(_provenance.md_header(__file__) + "\n".join(md) + "\n")
        with atomic_write(args.out.with_suffix(".json")) as fh:
            fh.write(json.dumps({"provenance": _provenance.info(__file__), "holdout": names, "pairs": int(len(y)), "clones": int(y.sum()), "models": results},
                                indent=1) + "\n")

if __name__ == "__main__":
    main()
