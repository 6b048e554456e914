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
- ``table2`` (issue 21): Spearman rank correlation of every measure's pairwise similarities of the ten
  known algorithms (C, Python, and the seed's own C++ sources) with the seed paper's Table 2
  (NORMALIZED-NODE-SYM) and with the seed's LAV matrix of the same programs, read from the seed
  repository FLAGlab/SimCorp (``--simcorp``: a bare git directory, a checkout or a folder; default
  ``$TWINSPECT_SIMCORP``). Results: ``similitude_table2.{md,json}``.

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
from typing import Any, NoReturn

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
    data: dict[str, Any]
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
    best = max(rows, key=lambda r: -1.0 if r[-1] is None else float(r[-1]))
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


#: The seed repository (Table 2's numbers, the seed's sources of the ten algorithms).
SIMCORP_URL = "https://github.com/FLAGlab/SimCorp"
SIMCORP_DEFAULT = Path(os.environ.get("TWINSPECT_SIMCORP", "/work/.mirror/FLAGlab+SimCorp/repo"))
#: Table 2's program names (its column order) -> our example file stems.
TABLE2_OURS = {"sum": "sum", "sum_odd": "sum_odd", "min": "min", "linear": "linear_search", "quick": "quick_sort",
               "binary": "binary_search", "merge": "merge_sort", "bubble": "bubble_sort", "max": "max",
               "gnone": "gnome_sort"}
#: Table 2's program names -> the seed's source files in SimCorp.
TABLE2_SEED_SOURCES = {
    "sum": "known_application_domains/aggregation/sum.cpp",
    "sum_odd": "known_application_domains/aggregation/sum_odd.cpp",
    "min": "known_application_domains/aggregation/min.cpp",
    "linear": "known_application_domains/searching/linear_search.cpp",
    "quick": "known_application_domains/sorting/iterative_quick_sort.cpp",
    "binary": "known_application_domains/searching/binary_search.cpp",
    "merge": "known_application_domains/sorting/iterative_merge_sort.cpp",
    "bubble": "known_application_domains/sorting/bubble_sort.cpp",
    "max": "known_application_domains/aggregation/max.cpp",
    "gnone": "known_application_domains/sorting/gnone_sort.cpp",
}
SEED_PAPER = "web/sqamia2024.md"
SEED_DAT = "known_application_domains/results/similarity-basic-{}.dat"
SEED_ORDER = "known_application_domains/results/names-order-basic.txt"


def _fail(message: str) -> NoReturn:
    """Bad input: ``error: message`` on stderr, exit code 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


class SimCorp:
    """Read files of the seed repository from a git directory (bare or a checkout) or a plain folder.

    Args:
        where: a bare git directory of FLAGlab/SimCorp, a checkout of it, or a folder with its files.

    Raises:
        SystemExit: (exit code 2, one line) ``where`` does not exist.
    """

    def __init__(self, where: Path):
        if not where.exists():
            _fail(f"{where}: no such directory; fetch or `git clone --bare {SIMCORP_URL}` "
                     "and pass --simcorp (or set TWINSPECT_SIMCORP)")
        self.git: Path | None = None
        if (where / "objects").is_dir() and (where / "HEAD").is_file():
            self.git = where
        elif (where / ".git").exists():
            self.git = where / ".git"
        self.where = where
        self.commit = self._git("rev-parse", "HEAD").strip() if self.git else "unknown (a folder, not a git checkout)"

    def _git(self, *args: str) -> str:
        out = subprocess.run(["git", f"--git-dir={self.git}", *args], capture_output=True, text=True)
        if out.returncode != 0:
            _fail(f"{self.where}: git {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def read(self, path: str) -> str:
        """The text of ``path`` (relative to the repository root) at HEAD.

        Raises:
            SystemExit: (exit code 2, one line) the file is missing.
        """
        if self.git is not None:
            return self._git("show", f"HEAD:{path}")
        p = self.where / path
        if not p.is_file():
            _fail(f"{p}: missing (is {self.where} a copy of {SIMCORP_URL}?)")
        return p.read_text(encoding="utf-8")


def parse_table2(paper: str) -> tuple[list[str], np.ndarray]:
    """Table 2 of the seed paper (markdown): its program names and the 10 x 10 matrix (float64).

    Raises:
        SystemExit: (exit code 2, one line) no 10 x 10 table after the ``**Table 2.**`` caption.
    """
    lines = paper.splitlines()
    start = next((i for i, s in enumerate(lines) if s.startswith("**Table 2.**")), None)
    if start is None:
        _fail(f"{SEED_PAPER}: no '**Table 2.**' caption")
    names: list[str] = []
    rows: list[list[float]] = []
    for s in lines[start + 1:]:
        cells = [c.strip().strip("*") for c in s.strip().strip("|").split("|")]
        if not s.strip():
            if rows:
                break
            continue
        if not names and cells[0] == "":
            names = cells[1:]
        elif names and cells[0] in names:
            rows.append([float(c) for c in cells[1:]])
    mat = np.array(rows, dtype=np.float64)
    if len(names) != 10 or mat.shape != (10, 10):
        _fail(f"{SEED_PAPER}: Table 2 is not 10 x 10 (names {names}, shape {mat.shape})")
    return names, mat


def parse_table1_nodes(paper: str) -> dict[str, int]:
    """Table 1 of the seed paper: CFG nodes (of the seed's LLVM-IR CFGs) by Table 2 name; {} if absent."""
    lines = paper.splitlines()
    start = next((i for i, s in enumerate(lines) if s.startswith("**Table 1.**")), None)
    out: dict[str, int] = {}
    for s in lines[start + 1:] if start is not None else []:
        cells = [c.strip() for c in s.strip().strip("|").split("|")]
        if out and not s.strip():
            break
        if len(cells) == 7 and cells[-1].isdigit():
            name = cells[0].replace(" sort", "").replace(" search", "").replace(" ", "_")
            out[name] = int(cells[-1])
    return out


def _dat(text: str) -> np.ndarray:
    return np.array([[float(x) for x in s.split()] for s in text.splitlines() if s.strip()], dtype=np.float64)


def _upper(m: np.ndarray) -> np.ndarray:
    return m[np.triu_indices(m.shape[0], 1)]


def _loc(text: str) -> int:
    """Lines holding code (not blank, not only a // comment or a #include / using line)."""
    return sum(1 for s in text.splitlines()
               if s.strip() and not s.strip().startswith(("//", "/*", "*", "#include", "using ")))


def part_table2(simcorp: Path) -> None:
    """Spearman correlation of every measure's pairwise similarities with the seed's Table 2."""
    from scipy.stats import spearmanr

    repo = SimCorp(simcorp)
    paper = repo.read(SEED_PAPER)
    names, table2 = parse_table2(paper)
    table1 = parse_table1_nodes(paper)
    order = [s.split("/")[0] for s in repo.read(SEED_ORDER).split()]
    # names-order-basic.txt spells the programs' directories; map them to Table 2's column names
    spelled = {"linear_search": "linear", "iterative_quick_sort": "quick", "binary_search": "binary",
               "iterative_merge_sort": "merge", "bubble_sort": "bubble", "gnone_sort": "gnone"}
    order = [spelled.get(o, o) for o in order]
    if order != names:
        _fail(f"{SEED_ORDER}: order {order} is not Table 2's {names}")
    seed = {"normalized-node-sym (Table 2)": table2,
            "original = LAV (similarity-basic-ORIGINAL.dat)": _dat(repo.read(SEED_DAT.format("ORIGINAL")))}
    dat_nns = _dat(repo.read(SEED_DAT.format("NORMALIZED-NODE-SYM")))
    dat_diff = float(np.abs(dat_nns - table2).max())
    seed_texts = {n: repo.read(TABLE2_SEED_SOURCES[n]) for n in names}
    ours: dict[str, dict[str, np.ndarray]] = {}
    programs: dict[str, dict[str, ProgramGraph]] = {}
    for lang in ("c", "python"):
        ext = {"c": ".c", "python": ".py"}[lang]
        folder = ROOT / "twinspect" / "examples" / "similitude" / lang
        programs[lang] = {n: program_graph((folder / f"{TABLE2_OURS[n]}{ext}").read_text(encoding="utf-8"), lang,
                                           path=f"{lang}/{TABLE2_OURS[n]}{ext}") for n in names}
    try:
        programs["seed-cpp"] = {n: program_graph(seed_texts[n], "cpp", path=TABLE2_SEED_SOURCES[n]) for n in names}
    except InputError as exc:
        _fail(str(exc))
    for key, gs in programs.items():
        ours[key] = {m: similarity_matrix([gs[n] for n in names], m, workers=1) for m in MEASURES}
    rows: list[list] = []
    data_rows: list[dict[str, Any]] = []
    for key in programs:
        for m in MEASURES:
            row: list = [key, m]
            for sname, smat in seed.items():
                r = spearmanr(_upper(ours[key][m]), _upper(smat))
                rho, p = float(r.statistic), float(r.pvalue)
                row += [rho, p]
                data_rows.append({"programs": key, "measure": m, "seed_measure": sname, "spearman": rho, "p": p})
            rows.append(row)
    def rho_of(programs_key: str, measure: str) -> float:
        return next(d["spearman"] for d in data_rows if d["programs"] == programs_key and d["measure"] == measure
                    and d["seed_measure"].endswith("(Table 2)"))

    ours_best = max((d for d in data_rows if d["seed_measure"].endswith("(Table 2)") and d["programs"] != "seed-cpp"),
                    key=lambda d: d["spearman"])
    comp_rows = []
    for n in names:
        c_text = (ROOT / "twinspect" / "examples" / "similitude" / "c" / f"{TABLE2_OURS[n]}.c").read_text()
        comp_rows.append([n, TABLE2_SEED_SOURCES[n].rsplit("/", 1)[1], _loc(seed_texts[n]),
                          len(programs["seed-cpp"][n].functions), table1.get(n, "-"), programs["seed-cpp"][n].n_nodes,
                          f"{TABLE2_OURS[n]}.c", _loc(c_text), len(programs["c"][n].functions),
                          programs["c"][n].n_nodes, programs["python"][n].n_nodes])
    sheads = list(seed)
    md = [
        "## Spearman rank correlation with the seed's Table 2 (issue 21)\n",
        f"Seed numbers: **Table 2** of the seed paper (`{SEED_PAPER}` of {SIMCORP_URL} at commit {repo.commit}), "
        "the 10 x 10 similarity matrix of the known algorithms under the seed's **NORMALIZED-NODE-SYM** "
        "measure (its own method), C++ only (the seed has no Python version). The same numbers are in "
        f"`{SEED_DAT.format('NORMALIZED-NODE-SYM')}` (largest difference from the paper's table {dat_diff:.4f}), "
        f"row order `{SEED_ORDER}`. Also, beside it, `{SEED_DAT.format('ORIGINAL')}`: the seed's LAV baseline "
        "(labelled ORIGINAL in the paper) on the same ten programs; it is not printed in the paper. The seed "
        "has no third measure for these programs (`stats-basic.txt` names an ORIGINAL-NODE-SYM plot, but no "
        "matrix file).",
        "",
        "Spearman's rho (`scipy.stats.spearmanr`, ties averaged) over the 45 pairs i < j of the ten programs, "
        "every twinspect measure against each seed matrix. `c` and `python` are our examples "
        "(`twinspect/examples/similitude/{c,python}/`); `seed-cpp` is our measures on **the seed's own ten C++ "
        "sources** (read from SimCorp, parsed as C++). The p-values assume 45 independent pairs, which pairs "
        "of ten programs are not; read them as a rough guide only.",
        "",
        markdown_table(rows, ["programs", "measure", *(h for s in sheads for h in (f"rho vs {s}", "p"))],
                       floatfmt=".3f"),
        "",
        f"Best on our own examples against Table 2: {ours_best['measure']} on {ours_best['programs']}, "
        f"rho {ours_best['spearman']:.3f} (target: >= 0.8 for at least one measure). The default measure "
        f"(wl-tokens): C {rho_of('c', 'wl-tokens'):.3f}, Python {rho_of('python', 'wl-tokens'):.3f}, the seed's "
        f"sources {rho_of('seed-cpp', 'wl-tokens'):.3f}. (The issue filer's 0.33 / 0.22 for the default "
        "measure and 0.79 / 0.86 for normalized-node-sym came from a script that is not in the repository; "
        "the rows above are this script's.)",
        "",
        "### Are our ten programs the seed's ten programs? No.\n",
        "Same algorithms, different programs. The seed's programs (`known_application_domains/` in SimCorp) "
        "put the whole algorithm in `main` on a fixed array `{1, 2, 3, 4, 5}` with no input or output; quick "
        "sort is iterative with an explicit stack and a `swap` helper, merge sort is bottom-up iterative with "
        "a `min` helper, linear search stops at the first hit (`ans == -1` in the loop condition), min/max start "
        "from `n > 0 ? a[0] : 0`. Ours define the algorithm as a function plus a small driver that prints the "
        "result (`printf` / `print`); our quick sort and merge sort are recursive (a `partition` / `merge` "
        "helper). The seed built its CFGs from LLVM IR; twinspect builds them from the source syntax tree. "
        "Code lines (not blank, comment, `#include` or `using`) and CFG nodes of the joined program graph:",
        "",
        markdown_table(comp_rows, ["Table 2 name", "seed file", "seed LoC", "seed functions",
                                   "seed CFG nodes (seed, Table 1)", "seed CFG nodes (twinspect)",
                                   "our C file", "our LoC", "our functions", "our C CFG nodes",
                                   "our Python CFG nodes"]),
    ]
    data = {"simcorp": {"url": SIMCORP_URL, "commit": repo.commit},
            "seed_matrices": {
                "normalized-node-sym (Table 2)": {"source": f"{SEED_PAPER}, Table 2; equal to "
                                                            f"{SEED_DAT.format('NORMALIZED-NODE-SYM')} "
                                                            f"(max abs difference {dat_diff})",
                                                  "programs": names, "matrix": table2.tolist()},
                "original = LAV (similarity-basic-ORIGINAL.dat)": {
                    "source": SEED_DAT.format("ORIGINAL"), "programs": names,
                    "matrix": seed["original = LAV (similarity-basic-ORIGINAL.dat)"].tolist()}},
            "our_files": {"c": [f"{TABLE2_OURS[n]}.c" for n in names],
                          "python": [f"{TABLE2_OURS[n]}.py" for n in names],
                          "seed-cpp": [TABLE2_SEED_SOURCES[n] for n in names]},
            "pairs": 45, "correlations": data_rows,
            "our_matrices": {k: {m: np.round(v, 4).tolist() for m, v in d.items()} for k, d in ours.items()},
            "programs_compared": [dict(zip(["name", "seed_file", "seed_loc", "seed_functions", "seed_table1_cfg_nodes", "seed_cfg_nodes",
                                            "our_c_file", "our_loc", "our_functions", "our_c_cfg_nodes",
                                            "our_python_cfg_nodes"], r)) for r in comp_rows]}
    write("similitude_table2", "\n".join(md), data)


def speed_one(measure: str, n: int, seed: int) -> None:
    recs = load_split("dev", None, seed)
    rng = random.Random(seed)
    recs = rng.sample(recs, n)
    t = time.perf_counter()
    gs, _, bad = graphs_of(recs)
    parse_s = time.perf_counter() - t
    import sklearn.decomposition  # noqa: F401  (import cost is not matrix time)

    t = time.perf_counter()
    similarity_matrix(gs, measure)
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"measure": measure, "n": n, "parsed": len(gs), "skipped": len(bad), "parse_seconds": parse_s,
                      "matrix_seconds": secs, "peak_rss_mb": rss}))


def part_speed(seed: int, plan: list[tuple[str, int]], name: str = "similitude_speed") -> None:
    rows, data = [], []
    for m, n in plan:
        out = subprocess.run([sys.executable, __file__, "--speed-one", m, str(n), "--seed", str(seed)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        data.append(r)
        rows.append([m, n, r["parsed"], r["parse_seconds"], r["matrix_seconds"], r["parse_seconds"] + r["matrix_seconds"],
                     r["peak_rss_mb"]])
        print(rows[-1], file=sys.stderr)
    write(name, markdown_table(rows, ["measure", "programs", "parsed", "parse s", "matrix s", "total s", "peak RSS MB"],
                                             ".1f"), {"runs": data})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("examples", "silhouette", "tune", "tune-cfg", "speed", "lav", "table2"), default="examples")
    ap.add_argument("--workers", type=int, default=None, help="lav: worker processes (default: CPUs, at most 8)")
    ap.add_argument("--split", choices=("dev", "valid"), default="dev")
    ap.add_argument("--measures", default=",".join(MEASURES))
    ap.add_argument("--full", action="store_true", help="silhouette: also the default measure on the whole split")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-problem", type=int, default=50, help="silhouette: programs sampled per problem")
    ap.add_argument("--simcorp", type=Path, default=SIMCORP_DEFAULT,
                    help="table2: bare git directory, checkout or copy of FLAGlab/SimCorp "
                         "(default: $TWINSPECT_SIMCORP or %(default)s)")
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
    elif a.part == "table2":
        part_table2(a.simcorp)
    else:
        plan = [(p.split(":")[0], int(p.split(":")[1])) for p in a.plan.split(",")]
        part_speed(a.seed, plan, a.speed_name)


if __name__ == "__main__":
    main()
