"""`twinspect clones --executor ray` against the local run: same report, stage costs, scaling with workers.

Runs ``twinspect clones TREE -f json`` (each in its own process, so a run pays its own Ray start) with
the local default, then with ``--executor ray --workers 1`` and ``--workers 2`` on a local Ray instance,
``--reps`` times each, interleaved. For every run it records wall time, the driver process's peak RSS (GNU time's
``%M``; worker processes not included) and the report's stage
timings (``mine`` = parsing; ``token_overlap``, ``alignment`` = the sharded detection stages; ``encode``
and ``range_search`` stay on the driver). It checks that every report equals the local one (stats
except timings, executor and workers), and derives per-shard costs: parsing seconds per MLOC per worker
and alignment seconds per million candidate pairs, extrapolated to BigCloneBench's 320 MLOC on a
cluster of W workers (assuming the sharded stages scale as measured here; the driver-side stages
do not shard and are listed apart).

Usage::

    benchmarks/clones_ray_scaling.py                  # a copy of this machine's stdlib (327 KLOC)
    benchmarks/clones_ray_scaling.py --tree DIR --reps 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _provenance  # noqa: E402  (sibling module: the results files' provenance header)
from clones_speed_jscpd import IGNORED_DIRS, copy_tree  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TWINSPECT = Path(sys.executable).with_name("twinspect")
TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"
VOLATILE = ("timings", "executor", "workers")
CONFIGS = {
    "local (default)": [],
    "ray, 1 worker": ["--executor", "ray", "--workers", "1"],
    "ray, 2 workers": ["--executor", "ray", "--workers", "2"],
}


def run_once(tree: Path, extra: list[str], out: Path) -> dict:
    """One ``twinspect clones`` run in a child process (under GNU time): wall seconds, the driver
    process's peak RSS (MiB; Ray's and the pool's worker processes are not included) and the report."""
    t = time.perf_counter()
    proc = subprocess.run([TIME, "-f", "maxrss_kb=%M", str(TWINSPECT), "clones", str(tree), "-f", "json", "-o",
                           str(out), "-q", *extra], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"twinspect failed ({proc.returncode}): {proc.stderr[-2000:]}")
    kb = [int(line.split("=", 1)[1]) for line in proc.stderr.splitlines() if line.startswith("maxrss_kb=")]
    return {"wall_s": wall, "peak_mib": kb[-1] / 1024 if kb else float("nan"), "report": json.loads(out.read_text())}


def comparable(report: dict) -> dict:
    """The report without the fields that may differ between executors (timings, executor, workers)."""
    r = dict(report)
    r["stats"] = {k: v for k, v in report["stats"].items() if k not in VOLATILE}
    return r


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=None, help="scan a copy of this tree instead of the stdlib")
    ap.add_argument("--reps", type=int, default=2, help="runs of each configuration, interleaved (default 2)")
    ap.add_argument("--out", type=Path, default=RESULTS / "clones_ray_scaling", help="output stem (.md, .json)")
    args = ap.parse_args(argv)
    src = (args.tree or Path(sysconfig.get_paths()["stdlib"])).resolve()
    with tempfile.TemporaryDirectory(prefix="twinspect-ray-") as tmp:
        tree = Path(tmp) / "tree"
        copy_tree(src, tree)
        runs: dict[str, list[dict]] = {name: [] for name in CONFIGS}
        reference = None
        for rep in range(args.reps):
            for name, extra in CONFIGS.items():
                r = run_once(tree, extra, Path(tmp) / "r.json")
                report = r.pop("report")
                r["timings"] = report["stats"]["timings"]
                view = comparable(report)
                if reference is None:
                    reference = view
                r["same_report"] = view == reference
                runs[name].append(r)
                print(f"rep {rep + 1} {name}: {r['wall_s']:.1f} s, same report: {r['same_report']}", file=sys.stderr)
        assert reference is not None
        stats = reference["stats"]
    lines_total = int(stats.get("total_lines") or 0)
    pairs = int(stats.get("verified") or 0)

    def med(name: str, key: str) -> float:
        vals = [r["timings"].get(key, 0.0) if key != "wall_s" else r["wall_s"] for r in runs[name]]
        return statistics.median(vals)

    rows = []
    for name in CONFIGS:
        rows.append({"config": name, "wall_s": med(name, "wall_s"),
                     "peak_mib": max(r["peak_mib"] for r in runs[name]),
                     **{k: med(name, k) for k in ("mine", "encode", "range_search", "token_overlap", "alignment",
                                                  "verify", "total")},
                     "same_report": all(r["same_report"] for r in runs[name])})
    r1 = next(r for r in rows if r["config"] == "ray, 1 worker")
    r2 = next(r for r in rows if r["config"] == "ray, 2 workers")
    mloc = lines_total / 1e6 if lines_total else None
    shard = {
        "parse_s_per_mloc_per_worker": (r1["mine"] / mloc) if mloc else None,
        "parse_speedup_2_vs_1": r1["mine"] / r2["mine"] if r2["mine"] else None,
        "token_overlap_speedup_2_vs_1": r1["token_overlap"] / r2["token_overlap"] if r2["token_overlap"] else None,
        "alignment_s_per_million_pairs_per_worker": (r1["alignment"] / pairs * 1e6) if pairs else None,
        "alignment_speedup_2_vs_1": r1["alignment"] / r2["alignment"] if r2["alignment"] else None,
    }
    payload = {"provenance": _provenance.info(__file__, argv), "tree": str(src), "lines": lines_total,
               "fragments": stats.get("fragments"), "candidate_pairs": pairs, "reps": args.reps,
               "rows": rows, "per_shard": shard, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".json"), "w") as fh:
        json.dump(payload, fh, indent=1)
    md = [f"Tree: a copy of `{src}` without {', '.join(IGNORED_DIRS)} ({lines_total:,} physical lines, {stats.get('fragments'):,} fragments, "
          f"{pairs:,} candidate pairs verified); medians of {args.reps} interleaved runs, each in its own "
          "process (a Ray run pays its own Ray start).", "",
          "| run | wall s | driver peak RSS MiB | parse (mine) s | encode s | range search s | token overlap s | "
          "alignment s | same report as local |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['config']} | {r['wall_s']:.1f} | {r['peak_mib']:.0f} | {r['mine']:.1f} | {r['encode']:.1f} | "
                  f"{r['range_search']:.1f} | {r['token_overlap']:.1f} | {r['alignment']:.1f} | "
                  f"{'yes' if r['same_report'] else '**no**'} |")
    md += ["", "Per-shard costs (Ray, 1 worker) and the speed-up of 2 workers over 1:", ""]
    for k, v in shard.items():
        md.append(f"- {k.replace('_', ' ')}: {'n/a' if v is None else f'{v:.2f}'}")
    if shard["parse_s_per_mloc_per_worker"]:
        p = shard["parse_s_per_mloc_per_worker"]
        md += ["", "Parsing 320 MLOC (BigCloneBench's size) at this per-worker rate, if it scales linearly: "
               + ", ".join(f"{w} workers ≈ {320 * p / w / 60:.0f} min" for w in (2, 16, 64, 256)) + "."]
    md += ["", "Peak RSS is the driver process's (the `twinspect` command); worker processes hold their shards "
           "and the shared inputs of the running stage on top of it."]
    with open(args.out.with_suffix(".md"), "w") as fh:
        fh.write(_provenance.md_header(__file__, argv) + "\n".join(md) + "\n")
    print(f"wrote {args.out.with_suffix('.md')}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    main()
