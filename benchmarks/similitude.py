"""Program similitude benchmark (issue 10): known algorithms, POJ-104 silhouettes, speed.

Parts (``--part``):

- ``examples``: the 10 x 10 matrices of every measure on the shipped C and Python algorithms.
- ``silhouette``: silhouette by problem for every measure on a stratified sample of 50 programs per
  problem of POJ-104 dev (problems 81–92, 600 programs, ``--seed``), the per-problem best number of
  sub-clusters (2–5) with its silhouette, and the default measure on all 6,000 programs. ``--split
  valid`` runs the same on the valid split (problems 65–80, 800 programs): that is where the default
  measure's settings were chosen (``--tune`` prints the grid).
- ``speed``: wall time and peak RSS per measure for 100 / 600 / 1,000 / 6,000 programs (one child
  process per run so peak memory is that run's).
- ``lav``: LAV (ε 1e-4) all-pairs on the 600 dev programs of ``silhouette`` with a process pool
  (``--workers``): wall time, peak memory of this process and its workers together (RSS sampled
  every 0.1 s from /proc), iterations per pair, silhouette; then a synthetic 600-node C program whose
  helper is called from 200 branches against a small program (one process, peak RSS and traced
  allocations). Results: ``similitude_lav.{md,json}``.
- ``tune-cfg``: the grid the ``cfg`` measure's settings were chosen from (valid split only).

Programs are parsed as C++ (POJ-104 mixes C and C++). Run with ``nice -n 10`` on the shared machine;
results go to ``benchmarks/results/similitude_<part>.{md,json}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results header
import numpy as np

from twinspect.code.similitude.analysis import analyze
from twinspect.code.similitude.cfg import ProgramGraph, program_graph
from twinspect.code.similitude.cluster import best_clusters, silhouette
from twinspect.code.similitude.measures import MEASURES, WLTokenParams, similarity_matrix
from twinspect.code.similitude.structure import CfgParams, cfg_matrix
from twinspect.errors import InputError
from twinspect.reports.table import markdown_table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "clones" / "poj104"
SPLITS = {"dev": "dev_81_92.jsonl.gz", "valid": "valid_65_80.jsonl.gz", "train": "train_1_64.jsonl.gz"}
OUT = ROOT / "benchmarks" / "results"


def load_split(split: str, per_problem: int | None, seed: int) -> list[dict]:
    """Records of a POJ-104 split; ``per_problem`` programs per label sampled with ``seed`` (None = all)."""
    by: dict[str, list[dict]] = {}
    with gzip.open(DATA / SPLITS[split], "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            by.setdefault(r["label"], []).append(r)
    rng = random.Random(seed)
    out: list[dict] = []
    for lab in sorted(by, key=int):
        out.extend(by[lab] if per_problem is None else rng.sample(by[lab], per_problem))
    return out


def graphs_of(records: list[dict]) -> tuple[list[ProgramGraph], list[str], list[str]]:
    """Parse records as C++; returns (graphs, labels, skipped indices)."""
    gs, labs, bad = [], [], []
    for r in records:
        try:
            gs.append(program_graph(r["code"], "cpp", path=f"{r['label']}/{r['index']}"))
            labs.append(r["label"])
        except InputError:
            bad.append(r["index"])
    return gs, labs, bad


def write(name: str, md: str, data: dict) -> None:
    from twinspect._io import atomic_write, write_json

    with atomic_write(OUT / f"{name}.md") as fh:
        fh.write(_provenance.md_header(__file__) + md + "\n")
    write_json(OUT / f"{name}.json", {"provenance": _provenance.info(__file__), **data})
    print(md)


def part_examples() -> None:
    md, data = [], {}
    for lang in ("c", "python"):
        for m in MEASURES:
            r = analyze([ROOT / "twinspect" / "examples" / "similitude" / lang], measure=m)
            names = [Path(p).stem for p in r.paths]
            md.append(f"### {lang}, {m}\n")
            md.append(markdown_table([[n, *row] for n, row in zip(names, r.matrix.tolist())], ["", *names]))
            md.append("")
            data[f"{lang}/{m}"] = {"programs": names, "matrix": np.round(r.matrix, 4).tolist()}
    write("similitude_examples", "\n".join(md), data)


def part_silhouette(split: str, seed: int, measures: list[str], full: bool, per: int = 50) -> None:
    recs = load_split(split, per, seed)
    t = time.perf_counter()
    gs, labs, bad = graphs_of(recs)
    parse_s = time.perf_counter() - t
    rows, per_problem, data = [], [], {"split": split, "seed": seed, "per_problem": per, "programs": len(gs), "skipped": bad,
                                       "parse_seconds": parse_s, "measures": {}}
    problems = sorted(set(labs), key=int)
    for m in measures:
        t = time.perf_counter()
        s = similarity_matrix(gs, m, verbose=1 if m == "lav" else 0)
        secs = time.perf_counter() - t
        sil = silhouette(s, labs)
        sub = []
        for p in problems:
            idx = [i for i, lab in enumerate(labs) if lab == p]
            _, k, ks = best_clusters(s[np.ix_(idx, idx)], 2, 5)
            sub.append((p, k, ks))
        rows.append([m, sil, secs])
        per_problem.append([m, *(f"{k} ({ks:.2f})" if ks is not None else "-" for _, k, ks in sub)])
        data["measures"][m] = {"silhouette": sil, "seconds": secs,
                               "per_problem": [{"problem": p, "k": k, "silhouette": ks} for p, k, ks in sub]}
    md = [f"## Silhouette by problem, POJ-104 {split}, {per} programs x {len(problems)} problems "
          f"(seed {seed}, {len(gs)} parsed, {len(bad)} skipped)\n",
          markdown_table(rows, ["measure", "silhouette", "matrix seconds"], floatfmt=".3f"), "",
          "### Best number of sub-clusters (2-5) per problem, with its silhouette\n",
          markdown_table(per_problem, ["measure", *problems])]
    if full:
        recs = load_split(split, None, seed)
        gs, labs, bad = graphs_of(recs)
        t = time.perf_counter()
        s = similarity_matrix(gs, "wl-tokens")
        secs = time.perf_counter() - t
        sil = silhouette(s, labs)
        data["full"] = {"programs": len(gs), "skipped": len(bad), "wl-tokens": sil, "seconds": secs}
        md += ["", f"All {len(gs)} programs ({len(bad)} skipped): wl-tokens silhouette {sil:.3f} ({secs:.0f} s)"]
    write(f"similitude_silhouette_{split}_{per}" + ("_" + "_".join(measures) if measures != list(MEASURES) else ""),
          "\n".join(md), data)


def part_tune(seed: int) -> None:
    """The grid the default measure's settings were chosen from (valid split only)."""
    gs, labs, _ = graphs_of(load_split("valid", 50, seed))
    rows = []
    for depth in (False, True):
        for wl in (1, 2, 3):
            for ng in (2, 3, 4):
                for svd in (0, 10, 15, 20, 25, 30, 40):
                    for w_wl in (0.5, 1.0, 1.5):
                        p = WLTokenParams(wl_iterations=wl, token_ngram=ng, svd=svd, w_wl=w_wl, loop_depth=depth)
                        if depth and (ng != 4 or w_wl != 1.0 or svd not in (20, 30)):
                            continue
                        if not depth and (ng != 3 or wl != 3) and (svd != 20 or w_wl != 1.0):
                            continue
                        rows.append([depth, wl, ng, svd, w_wl,
                                     silhouette(similarity_matrix(gs, "wl-tokens", params=p), labs)])
                        print(rows[-1], file=sys.stderr)
    write("similitude_tune_valid", markdown_table(rows, ["loop depth", "wl", "ngram", "svd", "w_wl", "silhouette"],
                                                  ".3f"), {"rows": rows, "default": vars(WLTokenParams())})


def part_tune_cfg(seed: int) -> None:
    """The grid the ``cfg`` measure's settings were chosen from (valid split only)."""
    gs, labs, _ = graphs_of(load_split("valid", 50, seed))
    rows = []
    for wl in (1, 2, 3):
        for svd in (0, 20, 30, 40):
            for ws in (0.0, 0.5, 1.0):
                p = CfgParams(wl_iterations=wl, w_struct=ws, svd=svd)
                rows.append([wl, svd, ws, silhouette(cfg_matrix(gs, p), labs)])
                print(rows[-1], file=sys.stderr)
    best = max(rows, key=lambda r: r[-1])
    md = markdown_table(rows, ["wl", "svd", "w_struct", "silhouette"], ".3f")
    md += f"\n\nBest on valid: wl {best[0]}, svd {best[1]}, w_struct {best[2]} ({best[3]:.3f}); default {CfgParams()}"
    write("similitude_tune_cfg_valid", md, {"rows": rows, "default": vars(CfgParams())})


def hub_program(calls: int = 200) -> str:
    """C source whose ``helper`` is called from ``calls`` branches of ``main`` (~3 blocks per call)."""
    body = "\n".join(f"  if (x % {k + 2} == {k % 3}) {{ y = helper(y + {k}); }} else {{ y = y - {k}; }}"
                     for k in range(calls))
    return ("int helper(int v) { int s = 0; for (int i = 0; i < v; i++) { if (i % 2) s += i; else s -= 1; }"
            f" return s; }}\nint main() {{ int x, y = 0; scanf(\"%d\", &x);\n{body}\n  printf(\"%d\", y);"
            " return 0; }\n")


class TreeRss:
    """Peak of the summed RSS (MiB) of this process and all its descendants, sampled in a thread."""

    def __init__(self, interval: float = 0.1):
        import threading

        self.interval, self.peak = interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _tree(pid: int) -> list[int]:
        out, todo = [], [pid]
        while todo:
            p = todo.pop()
            out.append(p)
            try:
                for t in Path(f"/proc/{p}/task").iterdir():
                    todo.extend(int(c) for c in (t / "children").read_text().split())
            except OSError:
                pass
        return out

    def sample(self) -> float:
        total = 0
        for p in self._tree(os.getpid()):
            try:
                for line in Path(f"/proc/{p}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total / 1024

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def part_lav(seed: int, workers: int | None, per: int = 50) -> None:
    import tracemalloc

    from twinspect.code.similitude.lav import default_workers, graph_similarity, lav

    workers = workers or default_workers()
    gs, labs, bad = graphs_of(load_split("dev", per, seed))
    with TreeRss() as rss:
        t = time.perf_counter()
        res = lav(gs, workers=workers, verbose=1)
        secs = time.perf_counter() - t
    it = res.iterations[np.triu_indices(len(gs), 1)]
    sil = silhouette(res.matrix, labs)
    summary = res.summary()
    data: dict = {"split": "dev", "seed": seed, "per_problem": per, "programs": len(gs), "skipped": bad,
                  "workers": workers, "seconds": secs, "peak_tree_rss_mb": rss.peak, "silhouette": sil,
                  "iterations": {**summary, "p50": float(np.percentile(it, 50)), "p90": float(np.percentile(it, 90)),
                                 "p99": float(np.percentile(it, 99))}}
    hub = program_graph(hub_program(200), "c", path="hub200.c")
    small = program_graph((ROOT / "twinspect" / "examples" / "similitude" / "c" / "bubble_sort.c").read_text(), "c")
    indeg = np.bincount([d for _, d in hub.edges], minlength=hub.n_nodes)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    t = time.perf_counter()
    s_hs = graph_similarity(hub, small)
    hub_secs = time.perf_counter() - t
    traced = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    t = time.perf_counter()
    s_hh = graph_similarity(hub, hub)
    self_secs = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    data["hub"] = {"nodes": hub.n_nodes, "edges": hub.n_edges, "max_in_degree": int(indeg.max()),
                   "small_nodes": small.n_nodes, "similarity": s_hs, "seconds": hub_secs,
                   "traced_peak_mb": traced, "self_similarity": s_hh, "self_seconds": self_secs,
                   "process_peak_rss_mb_before": rss0, "process_peak_rss_mb_after": rss1}
    rows = [["all pairs, 600 programs (50 x 12 POJ-104 dev)", f"{secs:.0f} s ({workers} workers)", "<= 300 s",
             f"{rss.peak:.0f} MiB (process + workers)", "<= 2048 MiB",
             f"eps 1e-4: {summary['unconverged_pairs']} of {summary['pairs']} pairs unconverged"],
            [f"hub program ({hub.n_nodes} nodes, helper in-degree {int(indeg.max())}) vs bubble_sort "
             f"({small.n_nodes} nodes)", f"{hub_secs:.2f} s", "-",
             f"traced {traced:.1f} MiB, process peak RSS {rss1:.0f} MiB", "<= 1024 MiB", f"similarity {s_hs:.4f}"],
            ["hub program vs itself", f"{self_secs:.2f} s", "-", "-", "-", f"similarity {s_hh:.4f}"]]
    md = ["## LAV (Nikolić 2012), bounded-memory neighbour matching, eps 1e-4\n",
          markdown_table(rows, ["run", "time", "target", "peak memory", "target", "convergence"]), "",
          f"Iterations per pair: mean {summary['iterations_mean']:.1f}, median {data['iterations']['p50']:.0f}, "
          f"p90 {data['iterations']['p90']:.0f}, p99 {data['iterations']['p99']:.0f}, max {summary['iterations_max']} "
          f"(cap {summary['max_iter']}).", "",
          f"Silhouette of the 12 problems under LAV at eps 1e-4: {sil:.3f} (the seed's LAV: 0.234 on its own "
          "corpus; the old eps 0.01 / 10 iterations approximation gave 0.034 here)."]
    write("similitude_lav", "\n".join(md), data)


def speed_one(measure: str, n: int, seed: int) -> None:
    recs = load_split("dev", None, seed)
    rng = random.Random(seed)
    recs = rng.sample(recs, n)
    t = time.perf_counter()
    gs, _, _ = graphs_of(recs)
    parse_s = time.perf_counter() - t
    import sklearn.decomposition  # noqa: F401  (import cost is not matrix time)

    t = time.perf_counter()
    similarity_matrix(gs, measure)
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"measure": measure, "n": n, "parse_seconds": parse_s, "matrix_seconds": secs,
                      "peak_rss_mb": rss}))


def part_speed(seed: int, plan: list[tuple[str, int]], name: str = "similitude_speed") -> None:
    rows, data = [], []
    for m, n in plan:
        out = subprocess.run([sys.executable, __file__, "--speed-one", m, str(n), "--seed", str(seed)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        data.append(r)
        rows.append([m, n, r["parse_seconds"], r["matrix_seconds"], r["peak_rss_mb"]])
        print(rows[-1], file=sys.stderr)
    write(name, markdown_table(rows, ["measure", "programs", "parse s", "matrix s", "peak RSS MB"],
                                             ".1f"), {"runs": data})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("examples", "silhouette", "tune", "tune-cfg", "speed", "lav"), default="examples")
    ap.add_argument("--workers", type=int, default=None, help="lav: worker processes (default: CPUs, at most 8)")
    ap.add_argument("--split", choices=("dev", "valid"), default="dev")
    ap.add_argument("--measures", default=",".join(MEASURES))
    ap.add_argument("--full", action="store_true", help="silhouette: also the default measure on the whole split")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-problem", type=int, default=50, help="silhouette: programs sampled per problem")
    ap.add_argument("--speed-one", nargs=2, metavar=("MEASURE", "N"))
    ap.add_argument("--speed-name", default="similitude_speed", help="speed: results file name")
    ap.add_argument("--plan", default="wl-tokens:100,wl-tokens:600,wl-tokens:1000,wl-tokens:6000,"
                    "node-sym:100,node-sym:600,node-sym:1000,normalized-node-sym:1000,lav:100")
    a = ap.parse_args()
    if a.speed_one:
        speed_one(a.speed_one[0], int(a.speed_one[1]), a.seed)
    elif a.part == "examples":
        part_examples()
    elif a.part == "silhouette":
        part_silhouette(a.split, a.seed, a.measures.split(","), a.full, a.per_problem)
    elif a.part == "tune":
        part_tune(a.seed)
    elif a.part == "tune-cfg":
        part_tune_cfg(a.seed)
    elif a.part == "lav":
        part_lav(a.seed, a.workers, a.per_problem)
    else:
        plan = [(p.split(":")[0], int(p.split(":")[1])) for p in a.plan.split(",")]
        part_speed(a.seed, plan, a.speed_name)


if __name__ == "__main__":
    main()
