"""Generation-only replay of a ``twinspect fuzz`` search: coverage per generated mutant, without running backends.

A campaign's coverage counts every mutant Keras builds (before its runs), so the search's own reach can be
measured apart from the backends' cost: this script runs a campaign's loop (:meth:`Campaign._step`) with no
system to test on — seeding, selection, mutation, the Keras build check, coverage and MEMO's pool exactly as
in a campaign, where every coverage-adding mutant joins the pool as if its runs were clean (a campaign keeps
out those whose runs crash or give NaN/Inf, a few per hundred). It answers two questions of issue 20: how
far the generator gets per mutant (versus per minute, which the backends decide), and which parameter values
and layer pairs stay uncovered, by layer, parameter and layer category.

Each ``--config LABEL=TREE`` runs in its own process with ``TREE`` first on ``PYTHONPATH`` (e.g. a ``git
worktree`` of an older commit: the same seeds, variant and RNG seed on two versions of the code). Seeds come
from the prepared-seed cache when its key matches (see :func:`twinspect.dl.fuzz.seeds.prepared`).

Usage: ``nice -n 10 .venv/bin/python benchmarks/fuzz_generation.py --mutants 600 --seeds all
--config before=/tmp/wt --config after=. --name fuzz_issue20_generation``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

from twinspect._io import atomic_write

STEP = 50  # a coverage point every STEP mutants


def child(work: Path, mutants: int, seeds_: list[str], variant: str, seed: int) -> dict:
    """Run the generation-only loop in this process (its code: whatever ``twinspect`` imports) and return its record."""
    from twinspect.dl.fuzz import catalogue
    from twinspect.dl.fuzz.campaign import Campaign, Config
    from twinspect.dl.fuzz.coverage import Coverage, model_coverage

    camp = Campaign.create(work, Config(backends=["keras-torch"], seeds=seeds_, variant=variant, seed=seed,
                                        threshold=1e-4))
    t0 = time.perf_counter()
    camp._seed([], 0)
    seed_s = time.perf_counter() - t0
    curve = [[0, 0.0, *camp.cov.ratios()]]
    t0 = time.perf_counter()
    for i in range(mutants):
        camp._step([])
        if (i + 1) % STEP == 0 or i + 1 == mutants:
            curve.append([i + 1, round(time.perf_counter() - t0, 1), *[round(r, 5) for r in camp.cov.ratios()]])
    camp.save()
    # per operator: valid mutants, coverage-adding ones, new pairs and parameter values (in generation order)
    cov = Coverage()
    for spec in camp.state.get("seed_specs", {}).values():
        cov.update(model_coverage(spec))
    per_op: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for line in (work / "models.jsonl").read_text().splitlines():
        rec = json.loads(line)
        m = model_coverage(rec["spec"])
        row = per_op[rec["op"]]
        row[0] += 1
        row[1] += bool(rec["gained"])
        row[2] += len(m.pairs - cov.pairs)
        row[3] += len(m.params - cov.params)
        row[4] += len(rec["spec"]["nodes"])
        cov.update(m)
    final = camp.cov
    miss_q = catalogue.param_values() - final.params
    miss_p = catalogue.legal_pairs() - final.pairs
    kinds = {(lay.name, p.name): p.kind for lay in catalogue.LAYERS for p in lay.params}
    cat = {lay.name: lay.category for lay in catalogue.LAYERS}
    count = collections.Counter
    return {
        "seeding_s": round(seed_s, 1), "curve": curve, "models_valid": camp.state["models_valid"],
        "models_invalid": camp.state["models_invalid"], "invalid_reasons": camp.state["invalid_reasons"],
        "per_operator": {op: dict(zip(("valid", "gained", "new_pairs", "new_params", "layers"), r)) for op, r in sorted(per_op.items())},
        "missing_params": {"total": len(miss_q), "of": len(catalogue.param_values()),
                           "by_layer": count(t[0] for t in miss_q).most_common(),
                           "by_param": count(t[1] for t in miss_q).most_common(),
                           "by_kind": count(kinds[(t[0], t[1])] for t in miss_q).most_common()},
        "missing_pairs": {"total": len(miss_p), "of": len(catalogue.legal_pairs()),
                          "by_category": count(f"{cat[a]}->{cat[b]}" for a, b in miss_p).most_common(),
                          "by_consumer_ranks": count(str(list(catalogue.BY_NAME[b].in_ranks)) for a, b in miss_p).most_common()},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutants", type=int, default=600)
    ap.add_argument("--seeds", default="all", help="Seed models, or 'all' (the ten of the paper).")
    ap.add_argument("--variant", default="memo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", action="append", default=[], metavar="LABEL=TREE",
                    help="A version of the code: LABEL=TREE runs with TREE first on PYTHONPATH ('.' = this tree).")
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--name", default="fuzz_generation")
    ap.add_argument("--heading", default=None, metavar="FILE", help="A markdown file written above the tables.")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: run one config here, write JSON
    a = ap.parse_args()
    from twinspect.dl.fuzz import seeds as seedmod

    seed_list = list(seedmod.ALL_SEEDS) if a.seeds == "all" else a.seeds.split(",")
    if a.child:
        rec = child(Path(a.child), a.mutants, seed_list, a.variant, a.seed)
        (Path(a.child) / "generation.json").write_text(json.dumps(rec))
        return
    work = Path(a.work or tempfile.mkdtemp(prefix="fuzzgen-"))
    runs = {}
    for cfg in a.config or ["current=."]:
        label, tree = cfg.split("=", 1)
        d = work / label
        env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        subprocess.run([sys.executable, __file__, "--child", str(d), "--mutants", str(a.mutants), "--seeds", a.seeds,
                        "--variant", a.variant, "--seed", str(a.seed)], env=env, check=True)
        runs[label] = json.loads((d / "generation.json").read_text())
        c = runs[label]["curve"][-1]
        print(label, c, flush=True)
    out = Path(a.out)
    with atomic_write(out / f"{a.name}.json") as fh:
        json.dump({"provenance": _provenance.info(__file__), "mutants": a.mutants, "seeds": a.seeds, "variant": a.variant,
                   "seed": a.seed, "configs": a.config, "runs": runs}, fh, indent=1)
    labels = list(runs)
    lines = [f"Coverage (type / pair / param, %) after N generated mutants ({a.variant}, seeds {a.seeds}, RNG seed "
             f"{a.seed}; no backend runs), and the loop's seconds:", "",
             "| mutants | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    points = sorted({p[0] for r in runs.values() for p in r["curve"]})
    for n in points:
        cells = []
        for r in runs.values():
            p = next((q for q in r["curve"] if q[0] == n), None)
            cells.append("—" if p is None else f"{p[2]:.1%} / {p[3]:.1%} / {p[4]:.1%} ({p[1]:.0f} s)")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "Valid and invalid mutants (invalid: Keras rejects the mutant, or it is over the size caps):", "",
              "| config | valid | invalid | invalid reasons |", "|---|---|---|---|"]
    for lab, r in runs.items():
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["invalid_reasons"].items(), key=lambda kv: -kv[1]))
        lines.append(f"| {lab} | {r['models_valid']} | {r['models_invalid']} | {reasons} |")
    lines += ["", "Per operator (valid mutants; how many added coverage; new pairs and parameter values they added, "
              "counted in generation order after the seeds; mean layers per mutant):", "",
              "| config | operator | valid | gained | new pairs | new params | mean layers |", "|---|---|---|---|---|---|---|"]
    for lab, r in runs.items():
        for op, v in r["per_operator"].items():
            lines.append(f"| {lab} | {op} | {v['valid']} | {v['gained']} | {v['new_pairs']} | {v['new_params']} | "
                         f"{v['layers'] / max(v['valid'], 1):.0f} |")
    lines += ["", "Uncovered at the end (missing / denominator):", ""]
    for lab, r in runs.items():
        mq, mp = r["missing_params"], r["missing_pairs"]
        lines.append(f"- **{lab}**: parameter values {mq['total']} / {mq['of']} — by kind "
                     + ", ".join(f"{k} {v}" for k, v in mq["by_kind"]) + "; by layer "
                     + ", ".join(f"{k} {v}" for k, v in mq["by_layer"][:15]) + "; by parameter "
                     + ", ".join(f"{k} {v}" for k, v in mq["by_param"][:12])
                     + f". Layer pairs {mp['total']} / {mp['of']} — by consumer input ranks "
                     + ", ".join(f"{k} {v}" for k, v in mp["by_consumer_ranks"]) + "; by category (top 12) "
                     + ", ".join(f"{k} {v}" for k, v in mp["by_category"][:12]) + ".")
    with atomic_write(out / f"{a.name}.md") as fh:
        heading = Path(a.heading).read_text(encoding="utf-8").strip() if a.heading else ""
        fh.write(_provenance.md_header(__file__) + (heading + "\n\n" if heading else "") + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
