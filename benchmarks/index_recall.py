"""Neighbour recall, time and memory of the approximate (HNSW) index against exact search (issue 23 item 2).

The sample: function fragments mined (``twinspect.code.fragments.mine(..., workers=2)``, default
options) from files of the large tree (``benchmarks/large_corpus.py``; ``--tree`` to choose another),
taken in a seeded random order (``--seed``) in batches until at least ``--fragments`` (100,000)
fragments are mined; the first ``--fragments`` of them in that order are kept. They are prepared as
``twinspect clones`` (``detect()``) does: sorted, T2-identical fragments collapsed into one
representative, embedded by the default lexical encoder (fitted on the sample) and L2-normalised.

The query measured is the one candidate generation runs (:func:`twinspect.code.candidates.range_pairs`
called by ``clones._verified_pairs``): every representative searches all representatives for its
``k = max_neighbours + 5`` nearest neighbours (105 by default) and keeps those at cosine ≥ the
candidate threshold (0.40 for the lexical encoder). Recall of an index = Σ over queries of
|approximate ∩ exact| / Σ |exact|, where each side is the query's top-k ids (itself excluded) at
cosine ≥ the threshold. The exact side is :class:`twinspect.code.index.ExactIndex` (blocked matrix
products); it is computed once and cached with the sample under
``~/.cache/twinspect-bench/index-recall/``.

Every HNSW setting (M, ef_construction) is built with each of ``--build-threads`` (one thread gives
a reproducible graph; two are about twice as fast) and searched with two (``--threads``) at each
``--ef`` value (range_pairs raises ef_search to at least k). Times are wall seconds; memory is the
growth of the process's resident set while building (``VmRSS``) and its peak during the stage
(``VmHWM``, reset before each stage through ``/proc/self/clear_refs``). faiss is measured too when
``import faiss`` works in this interpreter (it is not a twinspect dependency and was not installed
in the last run).

``--shipped`` adds a table for what ``--index auto`` actually runs above the switch-over: HNSW over a
truncated SVD of the vectors with the neighbours re-scored by the full cosine
(:func:`twinspect.code.candidates.range_pairs` itself, ``index="auto"``), at the shipped reduced dimension
and oversampling and at the settings given with ``--reduced`` (``DIM:OVERSAMPLE`` pairs, default
``384:2``, the setting before 2026-11-27). Its recall is ``range_pairs``' own measurement
(:func:`twinspect.code.candidates.measure_recall`: the search function against exact top-k over the full
vectors) on ``--recall-queries`` seeded queries instead of the pipeline's 256; the fragments are
stand-ins with distinct paths (the sample keeps only vectors; the measurement does not read spans).
This table goes to its own results file, ``benchmarks/results/index_recall_shipped.md`` (with
``--skip-main`` and no ``--sizes``, nothing else is run or written).

``--sizes`` adds a second table: exact search against HNSW (``--crossover-setting``, first of
``--build-threads``) on seeded subsets of the representatives, which places ``--index auto``'s
switch-over (:data:`twinspect.code.candidates.AUTO_HNSW_MIN`). Each table is kept in the cache
directory and the results file holds the latest of both, so the two can be run separately
(``--skip-main`` runs only the second).

Usage (from the repository root; first run ≈ 10 min on a shared machine: mining ≈ 2 min, encoding
≈ 1 min, exact search 4–6 min, then each HNSW build and query 2–7 min; the sample and the exact
results are cached)::

    nice -n 10 .venv/bin/python benchmarks/index_recall.py [--tree DIR] [--fragments 100000]
        [--settings 16:100] [--ef 105] [--threads 2] [--build-threads 1,2]
    nice -n 10 .venv/bin/python benchmarks/index_recall.py --skip-main --sizes 10000,20000,40000 --build-threads 1

Writes ``benchmarks/results/index_recall.md`` (and prints the table).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from pathlib import Path

import _provenance
import numpy as np

ROOT = _provenance.ROOT
CACHE = Path.home() / ".cache" / "twinspect-bench" / "index-recall"
RESULT = ROOT / "benchmarks" / "results" / "index_recall.md"
RESULT_SHIPPED = ROOT / "benchmarks" / "results" / "index_recall_shipped.md"
MAIN_SITE = ROOT / ".venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def _status_kib(field: str) -> int:
    """A ``VmRSS`` / ``VmHWM`` value of this process from /proc/self/status, in KiB (0 if absent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0); silently nothing elsewhere."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def default_tree() -> Path:
    """The large corpus's site-packages when it is built, else this venv's site-packages."""
    venv = Path.home() / ".cache" / "twinspect-bench" / "large-corpus" / "venv"
    found = sorted(venv.glob("lib/python*/site-packages"))
    return found[0] if found and (venv.parent / "build.json").is_file() else MAIN_SITE


def sample(tree: Path, n_frags: int, seed: int) -> dict:
    """Mine, bucket and encode the fragment sample (cached by tree, size and seed).

    Returns:
        dict with ``vecs`` float32 (R, d) unit rows of the representatives, ``fragments`` (int),
        ``files`` (int files mined), ``files_total`` (int files in the tree), ``representatives`` (int R),
        ``mine_s`` / ``encode_s`` (float seconds; 0 when cached) and ``cached`` (bool).
    """
    from twinspect.code.files import discover

    key = hashlib.sha256(f"{tree.resolve()}|{n_frags}|{seed}".encode()).hexdigest()[:16]
    path = CACHE / f"sample-{key}.npz"
    if path.is_file():
        with np.load(path) as d:
            meta = {k: int(d[k]) for k in ("fragments", "files", "files_total", "representatives")}
            return {"vecs": d["vecs"], **meta, "mine_s": float(d["mine_s"]), "encode_s": float(d["encode_s"]),
                    "cached": True}
    from twinspect.code.clone_types import TypeClassifier
    from twinspect.code.clones import DetectConfig, _buckets, _encode
    from twinspect.code.fragments import mine

    files, _ = discover([tree])
    paths = [sf.path for sf in files]
    random.Random(seed).shuffle(paths)
    t0 = time.perf_counter()
    frags: list = []
    used = 0
    batch = 1000
    while len(frags) < n_frags and used < len(paths):
        chunk = paths[used:used + batch]
        got, _ = mine(chunk, workers=2)
        frags.extend(got)
        used += len(chunk)
        print(f"  mined {used:,} files: {len(frags):,} fragments", file=sys.stderr)
    mine_s = time.perf_counter() - t0
    frags = frags[:n_frags]
    frags.sort(key=lambda f: (f.path, f.start_line, f.end_line, f.name))
    t0 = time.perf_counter()
    config = DetectConfig()
    clf = TypeClassifier(frags)
    reps = [b[0] for b in _buckets(frags, clf, True)]
    fv, _, _ = _encode(frags, config, quiet=True)
    vecs = fv.dense(np.asarray(reps))  # unit rows
    encode_s = time.perf_counter() - t0
    CACHE.mkdir(parents=True, exist_ok=True)
    out = {"fragments": len(frags), "files": used, "files_total": len(paths), "representatives": len(reps)}
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, vecs=vecs, mine_s=mine_s, encode_s=encode_s, **out)
    os.replace(tmp, path)
    return {"vecs": vecs, **out, "mine_s": mine_s, "encode_s": encode_s, "cached": False}


def _search_all(index, vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Search every row of ``vecs`` (ids = row numbers) in chunks of 1024, as range_pairs does."""
    ids = np.empty((len(vecs), k), np.int64)
    sims = np.empty((len(vecs), k), np.float32)
    for lo in range(0, len(vecs), 1024):
        hi = min(len(vecs), lo + 1024)
        ids[lo:hi], sims[lo:hi] = index.search(vecs[lo:hi], k)
    return ids, sims


def neighbour_sets(ids: np.ndarray, sims: np.ndarray, threshold: float) -> np.ndarray:
    """Result ids at cosine ≥ threshold with each query's own id (row number) removed (-1 elsewhere)."""
    own = np.arange(len(ids))[:, None]
    return np.where((sims >= threshold) & (ids != own) & (ids >= 0), ids, -1)


def recall(approx: np.ndarray, exact: np.ndarray) -> float:
    """Σ |approx_row ∩ exact_row| / Σ |exact_row| over rows of id arrays (-1 = empty slot)."""
    hits = total = 0
    for lo in range(0, len(exact), 4096):
        e, a = exact[lo:lo + 4096], approx[lo:lo + 4096]
        base = (np.arange(len(e)) * (int(max(e.max(), a.max())) + 2))[:, None]
        ev = (e + 1 + base)[e >= 0]
        av = (a + 1 + base)[a >= 0]
        hits += int(np.isin(ev, av, assume_unique=True).sum())
        total += int(ev.size)
    return hits / total if total else 1.0


def exact_run(vecs: np.ndarray, k: int, cache_key: str) -> dict:
    """Exact top-k of every row (cached); returns ids, sims and build/query seconds and memory."""
    from twinspect.code.index import ExactIndex

    path = CACHE / f"exact-{cache_key}-k{k}.npz"
    if path.is_file():
        with np.load(path) as d:
            return {"ids": d["ids"], "sims": d["sims"], "build_s": float(d["build_s"]),
                    "query_s": float(d["query_s"]), "rss_mib": float(d["rss_mib"]),
                    "peak_mib": float(d["peak_mib"]), "cached": True}
    _reset_peak()
    rss0 = _status_kib("VmRSS")
    t0 = time.perf_counter()
    idx = ExactIndex(vecs.shape[1])
    idx.add(np.arange(len(vecs)), vecs)
    build_s = time.perf_counter() - t0
    rss_mib = (_status_kib("VmRSS") - rss0) / 1024
    t0 = time.perf_counter()
    ids, sims = _search_all(idx, vecs, k)
    query_s = time.perf_counter() - t0
    peak_mib = (_status_kib("VmHWM") - rss0) / 1024
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, ids=ids, sims=sims, build_s=build_s, query_s=query_s, rss_mib=rss_mib, peak_mib=peak_mib)
    os.replace(tmp, path)
    return {"ids": ids, "sims": sims, "build_s": build_s, "query_s": query_s, "rss_mib": rss_mib,
            "peak_mib": peak_mib, "cached": False}


def hnsw_runs(vecs: np.ndarray, k: int, M: int, efc: int, efs: list[int], threads: int, build_threads: int,
              threshold: float, exact_sets: np.ndarray, exact_topk: np.ndarray) -> list[dict]:
    """Build one HNSW index (``build_threads``) and search it (``threads``) at every ef_search; one row each."""
    from twinspect.code.index import HNSWIndex

    _reset_peak()
    rss0 = _status_kib("VmRSS")
    t0 = time.perf_counter()
    idx = HNSWIndex(vecs.shape[1], M=M, ef_construction=efc, ef_search=k, seed=0, num_threads=build_threads,
                    initial_capacity=len(vecs))
    idx.add(np.arange(len(vecs)), vecs)
    build_s = time.perf_counter() - t0
    idx.num_threads = threads
    rss_mib = (_status_kib("VmRSS") - rss0) / 1024
    rows = []
    for ef in efs:
        idx.ef_search = max(ef, k)
        t0 = time.perf_counter()
        ids, sims = _search_all(idx, vecs, k)
        query_s = time.perf_counter() - t0
        rows.append({"kind": f"hnsw (build threads {build_threads})", "M": M, "ef_construction": efc, "ef_search": max(ef, k), "build_s": build_s,
                     "query_s": query_s, "rss_mib": rss_mib, "peak_mib": (_status_kib("VmHWM") - rss0) / 1024,
                     "recall": recall(neighbour_sets(ids, sims, threshold), exact_sets),
                     "recall_topk": recall(np.where(ids >= 0, ids, -1), exact_topk)})
        print(f"  hnsw M={M} efc={efc} ef={max(ef, k)}: build {build_s:.1f} s, query {query_s:.1f} s, "
              f"recall {rows[-1]['recall']:.4f}", file=sys.stderr)
    return rows


def faiss_runs(vecs: np.ndarray, k: int, threads: int, threshold: float, exact_sets: np.ndarray,
               exact_topk: np.ndarray) -> list[dict]:
    """faiss HNSW (IndexHNSWFlat, inner product) at M 32 and three efSearch values, if faiss imports."""
    try:
        import faiss
    except ImportError:
        return []
    faiss.omp_set_num_threads(threads)
    rows = []
    _reset_peak()
    rss0 = _status_kib("VmRSS")
    t0 = time.perf_counter()
    index = faiss.IndexHNSWFlat(vecs.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 200
    index.add(vecs)
    build_s = time.perf_counter() - t0
    rss_mib = (_status_kib("VmRSS") - rss0) / 1024
    for ef in (k, 200, 400):
        index.hnsw.efSearch = ef
        t0 = time.perf_counter()
        sims, ids = index.search(vecs, k)
        query_s = time.perf_counter() - t0
        rows.append({"kind": "faiss-hnsw", "M": 32, "ef_construction": 200, "ef_search": ef, "build_s": build_s,
                     "query_s": query_s, "rss_mib": rss_mib, "peak_mib": (_status_kib("VmHWM") - rss0) / 1024,
                     "recall": recall(neighbour_sets(ids.astype(np.int64), sims, threshold), exact_sets),
                     "recall_topk": recall(ids.astype(np.int64), exact_topk)})
    return rows


def crossover(vecs: np.ndarray, k: int, sizes: list[int], M: int, efc: int, ef: int, threshold: float,
              build_threads: int) -> list[dict]:
    """Exact vs HNSW (``build_threads`` to build, two to search) wall time on seeded subsets of ``sizes`` rows."""
    from twinspect.code.index import ExactIndex, HNSWIndex

    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        sub = np.ascontiguousarray(vecs[np.sort(rng.choice(len(vecs), size=min(n, len(vecs)), replace=False))])
        kk = min(k, len(sub))
        t0 = time.perf_counter()
        ex = ExactIndex(sub.shape[1])
        ex.add(np.arange(len(sub)), sub)
        e_ids, e_sims = _search_all(ex, sub, kk)
        exact_s = time.perf_counter() - t0
        del ex
        t0 = time.perf_counter()
        hn = HNSWIndex(sub.shape[1], M=M, ef_construction=efc, ef_search=max(ef, kk), seed=0, num_threads=build_threads,
                       initial_capacity=len(sub))
        hn.add(np.arange(len(sub)), sub)
        build_s = time.perf_counter() - t0
        hn.num_threads = 2
        t0 = time.perf_counter()
        h_ids, h_sims = _search_all(hn, sub, kk)
        query_s = time.perf_counter() - t0
        rec = recall(neighbour_sets(h_ids, h_sims, threshold), neighbour_sets(e_ids, e_sims, threshold))
        rows.append({"n": len(sub), "exact_s": exact_s, "build_s": build_s, "query_s": query_s, "recall": rec})
        print(f"  n={len(sub):,}: exact {exact_s:.1f} s, hnsw {build_s:.1f}+{query_s:.1f} s, recall {rec:.4f}",
              file=sys.stderr)
    return rows


def main_section(args: argparse.Namespace, tree: Path, threshold: float, k: int) -> str:
    """The recall table on the full sample (markdown section)."""
    s = sample(tree, args.fragments, args.seed)
    vecs = s["vecs"]
    print(f"sample: {s['fragments']:,} fragments, {s['representatives']:,} representatives, d={vecs.shape[1]}",
          file=sys.stderr)
    key = hashlib.sha256(vecs.tobytes()).hexdigest()[:16]
    ex = exact_run(vecs, k, key)
    print(f"  exact: build {ex['build_s']:.1f} s, query {ex['query_s']:.1f} s", file=sys.stderr)
    exact_sets = neighbour_sets(ex["ids"], ex["sims"], threshold)
    exact_topk = neighbour_sets(ex["ids"], ex["sims"], -np.inf)
    per_query = (exact_sets >= 0).sum(axis=1)
    rows = [{"kind": "exact", "M": None, "ef_construction": None, "ef_search": None, "build_s": ex["build_s"],
             "query_s": ex["query_s"], "rss_mib": ex["rss_mib"], "peak_mib": ex["peak_mib"], "recall": 1.0,
             "recall_topk": 1.0}]
    efs = [int(x) for x in args.ef.split(",")]
    for setting in args.settings.split(","):
        m, efc = (int(x) for x in setting.split(":"))
        for bt in (int(x) for x in args.build_threads.split(",")):
            rows += hnsw_runs(vecs, k, m, efc, efs, args.threads, bt, threshold, exact_sets, exact_topk)
    rows += faiss_runs(vecs, k, args.threads, threshold, exact_sets, exact_topk)

    lines = [
        "# Approximate-index neighbour recall against exact search (issue 23 item 2)",
        "",
        f"Sample: {s['fragments']:,} function fragments mined from {s['files']:,} of the {s['files_total']:,} "
        f"files of `{tree}` (seeded file order, seed {args.seed}; mining {s['mine_s']:.0f} s"
        + (", cached this run" if s["cached"] else "") + f"), {s['representatives']:,} representatives after "
        f"T2 buckets, lexical encoder (d = {vecs.shape[1]}, {s['encode_s']:.0f} s).",
        "",
        f"Query = candidate generation's range search: top k = {k} (max_neighbours + 5) of every representative, "
        f"kept at cosine ≥ {threshold} (the lexical candidate threshold). The exact side holds "
        f"{int(per_query.sum()):,} neighbours ({per_query.mean():.1f} per query; {int((per_query >= k - 1).sum()):,} "
        f"queries have all k−1 at or above the threshold). **recall** = share of them the index also returns; "
        "recall@k ignores the threshold. Times are wall seconds on 2 cores "
        f"(HNSW search `num_threads={args.threads}`; exact search is numpy's BLAS"
        + (", cached this run" if ex["cached"] else "") + "); RSS = resident-set growth after building, "
        "peak = highest RSS during build and queries, both above the process's RSS before the stage.",
        "",
        "| index | M | ef_construction | ef_search | build s | query s | total s | RSS MiB | peak MiB | recall | recall@k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        def cell(v: object) -> str:
            return "–" if v is None else str(v)
        lines.append(
            f"| {r['kind']} | {cell(r['M'])} | {cell(r['ef_construction'])} | {cell(r['ef_search'])} | "
            f"{r['build_s']:.1f} | {r['query_s']:.1f} | {r['build_s'] + r['query_s']:.1f} | {r['rss_mib']:.0f} | "
            f"{r['peak_mib']:.0f} | {r['recall']:.4f} | {r['recall_topk']:.4f} |"
        )
    try:
        import faiss  # noqa: F401
    except ImportError:
        lines += ["", "faiss: not installed in this environment (not measured)."]
    lines += ["", f"Command: `python benchmarks/index_recall.py {' '.join(sys.argv[1:])}`."]
    return "\n".join(lines) + "\n"


def crossover_section(args: argparse.Namespace, tree: Path, threshold: float, k: int) -> str:
    """The exact-vs-HNSW timing table on subsets (markdown section)."""
    vecs = sample(tree, args.fragments, args.seed)["vecs"]
    m, efc, ef = (int(x) for x in args.crossover_setting.split(":"))
    bt = int(args.build_threads.split(",")[0])
    rows = crossover(vecs, k, [int(x) for x in args.sizes.split(",")], m, efc, ef, threshold, bt)
    lines = [
        "## Where HNSW becomes cheaper than exact search",
        "",
        f"Seeded random subsets of the sample's representatives; exact = build + search all rows (k = {k}); HNSW "
        f"M {m}, ef_construction {efc}, ef_search {max(ef, k)}, built with {bt} thread(s) and searched with two "
        f"(as `--index auto` does); recall as above (cosine ≥ {threshold}). "
        f"Command: `python benchmarks/index_recall.py {' '.join(sys.argv[1:])}`.",
        "",
        "| representatives | exact s | HNSW build s | HNSW query s | HNSW total s | recall |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {r['n']:,} | {r['exact_s']:.1f} | {r['build_s']:.1f} | {r['query_s']:.1f} | "
              f"{r['build_s'] + r['query_s']:.1f} | {r['recall']:.4f} |" for r in rows]
    return "\n".join(lines) + "\n"


def shipped_section(args: argparse.Namespace, tree: Path, threshold: float, k: int) -> str:
    """Recall of ``--index auto``'s reduced HNSW search itself, shipped and ``--reduced`` settings (markdown)."""
    import scipy.sparse as sp

    from twinspect.code import candidates
    from twinspect.code.fragments import Fragment
    from twinspect.code.vectors import FragmentVectors
    from twinspect.reports.table import markdown_table

    s = sample(tree, args.fragments, args.seed)
    fv = FragmentVectors(sp.csr_matrix(s["vecs"]))
    n = len(fv)
    frags = [Fragment(f"r{i}", 1, 1, "", "python", "") for i in range(n)]
    shipped = (candidates.AUTO_HNSW_DIM, candidates.RERANK_OVERSAMPLE)
    settings = [shipped] + [(int(d), float(o)) for d, o in (x.split(":") for x in args.reduced.split(",") if x)]
    saved = (candidates.AUTO_HNSW_DIM, candidates.RERANK_OVERSAMPLE, candidates.RECALL_QUERIES, candidates.AUTO_HNSW_MIN)
    rows = []
    try:  # range_pairs looks these up in its module at call time
        candidates.RECALL_QUERIES = args.recall_queries
        candidates.AUTO_HNSW_MIN = 2
        for dim, over in dict.fromkeys(settings):
            candidates.AUTO_HNSW_DIM, candidates.RERANK_OVERSAMPLE = dim, over
            t0 = time.perf_counter()
            got = candidates.range_pairs(fv, list(range(n)), frags, threshold=threshold, cap=k - 5, index="auto")
            rows.append({"dim": dim, "oversample": over, "shipped": (dim, over) == shipped, "recall": got.index_recall,
                         "queries": got.index_recall_queries, "pairs": len(got), "seconds": time.perf_counter() - t0})
            print(f"  reduced {dim}-d, {over}x: recall {got.index_recall:.4f} on {got.index_recall_queries} queries, "
                  f"{rows[-1]['seconds']:.0f} s", file=sys.stderr)
    finally:
        candidates.AUTO_HNSW_DIM, candidates.RERANK_OVERSAMPLE, candidates.RECALL_QUERIES, candidates.AUTO_HNSW_MIN = saved
    lines = [
        "## The search `--index auto` ships: HNSW over a truncated SVD, re-scored by the full cosine",
        "",
        f"The same sample ({n:,} representatives); `range_pairs(index=\"auto\")` itself, cap {k - 5}, threshold "
        f"{threshold}; recall = its own measurement against exact top-{k} over the full vectors on "
        f"{args.recall_queries:,} seeded queries; seconds = the whole call (SVD, build, search, re-scoring, "
        "ranking and the measurement), wall, 2 cores. The shipped setting was chosen on all 204,925 "
        "representatives of the whole tree, which include this sample's files, so this is not an "
        f"independent check. Command: `python benchmarks/index_recall.py {' '.join(sys.argv[1:])}`.",
        "",
        markdown_table([(f"{r['dim']}{' (shipped)' if r['shipped'] else ''}", f"{r['oversample']:g}", f"{r['recall']:.4f}",
                         f"{r['queries']:,}", f"{r['pairs']:,}", f"{r['seconds']:.0f}") for r in rows],
                       ["reduced dimension", "oversampling (× k)", "recall", "queries", "candidate pairs", "seconds"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the results file; returns the exit code."""
    from twinspect.code.clones import DetectConfig

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=None, help="source tree to sample (default: the large corpus)")
    ap.add_argument("--fragments", type=int, default=100_000, help="fragments in the sample")
    ap.add_argument("--seed", type=int, default=0, help="seed of the file order")
    ap.add_argument("--settings", default="16:100", help="HNSW M:ef_construction pairs (comma list)")
    ap.add_argument("--ef", default="105", help="HNSW ef_search values (raised to at least k; comma list)")
    ap.add_argument("--threads", type=int, default=2, help="HNSW search threads")
    ap.add_argument("--build-threads", default="1,2", help="HNSW build thread counts to measure (1 = reproducible graph)")
    ap.add_argument("--sizes", default="", help="also time exact vs HNSW on subsets of these sizes (comma list)")
    ap.add_argument("--crossover-setting", default="16:100:100",
                    help="HNSW M:ef_construction:ef_search of the --sizes runs")
    ap.add_argument("--skip-main", action="store_true", help="only the --sizes/--shipped runs (the table of the last run is kept)")
    ap.add_argument("--shipped", action="store_true", help="also measure --index auto's reduced search (range_pairs itself)")
    ap.add_argument("--reduced", default="384:2", help="with --shipped, other DIM:OVERSAMPLE settings to compare (comma list)")
    ap.add_argument("--recall-queries", type=int, default=2000, help="with --shipped, seeded queries of the recall measurement")
    args = ap.parse_args(argv)
    tree = (args.tree or default_tree()).resolve()
    if not tree.is_dir():
        print(f"index_recall: {tree}: not a directory", file=sys.stderr)
        return 2
    config = DetectConfig()
    threshold, k = config.candidate_cosine, config.max_neighbours + 5
    sections = []
    main_cache, cross_cache = CACHE / "section-main.md", CACHE / "section-crossover.md"
    if not args.skip_main:
        main_cache.parent.mkdir(parents=True, exist_ok=True)
        main_cache.write_text(main_section(args, tree, threshold, k), encoding="utf-8")
    if args.sizes:
        cross_cache.parent.mkdir(parents=True, exist_ok=True)
        cross_cache.write_text(crossover_section(args, tree, threshold, k), encoding="utf-8")
    from twinspect._io import atomic_write

    if args.shipped:  # its own results file: the other two tables may come from older runs (see the module doc)
        shipped = "# `--index auto`'s reduced search: neighbour recall against exact search (issue 23 item 2)\n\n" + \
            shipped_section(args, tree, threshold, k).split("\n", 2)[2]
        with atomic_write(RESULT_SHIPPED) as fh:
            fh.write(_provenance.md_header(__file__, argv) + shipped)
        print(shipped)
        if args.skip_main and not args.sizes:
            return 0
    for part in (main_cache, cross_cache):
        if part.is_file():
            sections.append(part.read_text(encoding="utf-8"))
    text = "\n".join(sections)
    with atomic_write(RESULT) as fh:
        fh.write(_provenance.md_header(__file__, argv) + text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
