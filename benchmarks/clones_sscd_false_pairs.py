"""The SSCD Company-C pairs that the copy-aware precision counts as false, judged blind (issue 15).

SSCD-C labels one original per private function. The copy-aware precision of ``twinspect clones eval
sscd`` (the share of reported pairs touching a labelled private function that pair it with its labelled
original, a byte-identical copy counting as the original) is 66.9 % at the default settings, against
issue 15's 95 %. A pair can count as false because it is a wrong pair, or because it joins the private
function with a real clone the labels do not list (a sibling function of the same library). This script
separates the two by a blind judge:

1. ``sample``: runs :func:`twinspect.code.evaluate.sscd.run_sscd` at the default settings, takes the
   reported pairs its copy-aware rule counts as false (``false_pairs_copies``), and writes their spans to
   ``benchmarks/results/clones_sscd_false_pairs.jsonl`` (a first line of counts, then the pairs under ids
   ``S000``... in a seeded shuffle) and the
   judge's blind file (``--blind``, default ``/tmp/judge_sscd_pairs.md``): the two functions' code only.
2. The judge labels each pair ``clone`` / ``weak`` / ``not`` with a reason (the blind-precision study's
   instructions: ``benchmarks/clones_precision_blind.py``) into ``clones_sscd_false_pairs_labels.csv``.
3. ``score``: the labels' counts, written to ``benchmarks/results/clones_sscd_false_pairs.md`` with what the
   precision would be if the pairs judged ``clone`` counted as true.

Run from the repository root with ``../shared`` beside it::

    .venv/bin/python benchmarks/clones_sscd_false_pairs.py sample
    .venv/bin/python benchmarks/clones_sscd_false_pairs.py score
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from collections import Counter
from pathlib import Path

import _provenance  # sibling module: the results files' provenance header
from clones_precision_blind import write_blind  # sibling script: the judge's file, written alike

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
SAMPLE = RESULTS / "clones_sscd_false_pairs.jsonl"
LABELS = RESULTS / "clones_sscd_false_pairs_labels.csv"
REPORT = RESULTS / "clones_sscd_false_pairs.md"
DATA = ROOT.parent / "shared" / "data" / "clones" / "sscd"


def sample(data: Path, blind: Path, seed: int) -> None:
    from twinspect._io import atomic_write
    from twinspect.code.clones import DetectConfig
    from twinspect.code.evaluate import run_sscd

    res = run_sscd(data, DetectConfig(), query=False)  # the evaluation itself: its copy-aware false pairs
    false, true = res["false_pairs_copies"], int(res["true_pairs_copies"])
    random.Random(seed).shuffle(false)
    recs = [{"id": f"S{n:03d}", "a": a, "b": b} for n, (a, b) in enumerate(false)]
    with atomic_write(SAMPLE) as fh:  # first line: the counts the pairs were drawn from
        fh.write(json.dumps({"meta": {"touching_private": true + len(false), "true": true, "false": len(false)}}) + "\n")
        for rec in recs:
            fh.write(json.dumps(rec) + "\n")

    def code(side: list) -> str:
        path, start, end = side
        return "\n".join((data / path).read_text(encoding="utf-8", errors="replace").splitlines()[start - 1:end])

    write_blind(blind, "# Pairs of code fragments to label (clone / weak / not), one line of reason each\n\n",
                [(rec["id"], code(rec["a"]), code(rec["b"])) for rec in recs])
    print(f"pairs touching a labelled private function: {true + len(false)} ({true} true, {len(false)} false); "
          f"wrote {SAMPLE} and {blind}", file=sys.stderr)


def score() -> None:
    from twinspect._io import atomic_write

    lines = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line]
    meta, recs = lines[0]["meta"], lines[1:]
    with LABELS.open(encoding="utf-8") as fh:
        labels = {row["id"]: row["label"].strip() for row in csv.DictReader(fh)}
    missing = [r["id"] for r in recs if r["id"] not in labels]
    c = Counter(labels[r["id"]] for r in recs if r["id"] in labels)
    touching, true = int(meta["touching_private"]), int(meta["true"])
    text = ("# SSCD Company-C: the pairs the copy-aware precision counts as false, judged blind\n\n"
            f"At the default settings {touching} reported pairs touch a labelled private function; {true} pair it with "
            f"its labelled original (copy-aware: {100 * true / touching:.1f} %). The other {len(recs)}, judged blind "
            "(code only, the blind-precision study's instructions):\n\n"
            "| label | pairs |\n|---|---:|\n" + "".join(f"| {k} | {c[k]} |\n" for k in ("clone", "weak", "not"))
            + f"\nUnlabelled: {len(missing)}. Counting the pairs judged `clone` as true (real clones of the private "
            f"function that the labels do not list), the precision would be {100 * (true + c['clone']) / touching:.1f} %; "
            f"the pairs judged `weak` or `not` ({c['weak'] + c['not']}) are the detector's own misses.\n")
    print(text)
    with atomic_write(REPORT) as fh:
        fh.write(_provenance.md_header(__file__) + text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--data", type=Path, default=DATA)
    s.add_argument("--blind", type=Path, default=Path("/tmp/judge_sscd_pairs.md"))
    s.add_argument("--seed", type=int, default=0)
    sub.add_parser("score")
    args = ap.parse_args()
    if args.cmd == "sample":
        sample(args.data, args.blind, args.seed)
    else:
        score()


if __name__ == "__main__":
    main()
