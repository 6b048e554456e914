"""Speed and memory of the code encoders and k-NN indexes (capability 1, SSCD pipeline).

Prints one table per measurement:

1. parsing + lexical encoding of a Python codebase (default: this interpreter's standard library,
   tests excluded): fragments/s of ``LexicalEncoder.fit`` + ``encode``;
2. how far hashed TF-IDF cosines are from exact (unhashed) TF-IDF cosines per dimension — the
   reason for the default ``dim=2048``;
3. neural encoding (all-MiniLM-L6-v2, CPU) of a sample at 128 and 256 tokens;
4. exact vs HNSW index: build time, search time, recall@10 against exact search, at 8k vectors
   (the stdlib's real lexical vectors) and 50k vectors (real vectors plus small noise).

Every stage runs in a fresh subprocess so that its peak RSS (``ru_maxrss``) is its own (it includes
the interpreter and imports: ~60 MB with numpy, ~600 MB with torch). The machine's load average is
printed, because the numbers are wall-clock times on shared cores.

Usage::

    python benchmarks/encoders_index.py [--path DIR] [--neural-sample 256] [--sizes 8000,50000]
        [--queries 1000] [--skip-neural] [--skip-50k]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXCLUDE = ["test/", "tests/", "idlelib/", "lib2to3/", "site-packages/", "turtledemo/"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------------------------------------
# stages (each run in its own process)


def stage_parse(args) -> dict:
    from twinspect.code.fragments import mine

    t = time.perf_counter()
    frags, stats = mine([args.path], exclude=EXCLUDE, min_lines=args.min_lines)
    dt = time.perf_counter() - t
    with open(args.work / "frags.pkl", "wb") as fh:
        pickle.dump(frags, fh)
    loc = sum(f.loc for f in frags)
    return {"fragments": len(frags), "files": stats.files_parsed, "fragment_loc": loc, "seconds": dt}


def _load_frags(args):
    with open(args.work / "frags.pkl", "rb") as fh:
        return pickle.load(fh)


def stage_lexical(args) -> dict:
    from twinspect.code.encoders.lexical import LexicalEncoder
    from twinspect.code.normalize import abstract_tokens

    frags = _load_frags(args)
    t = time.perf_counter()
    for f in frags:
        abstract_tokens(f)
    tok = time.perf_counter() - t
    enc = LexicalEncoder(dim=args.dim, identifier_weight=args.identifier_weight)
    t = time.perf_counter()
    enc.fit(frags)
    x = enc.encode(frags)
    dt = time.perf_counter() - t
    t = time.perf_counter()
    enc.encode(frags[:1000])
    dt_query = time.perf_counter() - t
    np.save(args.work / "lexical.npy", x)
    return {
        "fragments": len(frags),
        "tokenize_s": tok,
        "fit_encode_s": dt,
        "frags_per_s": len(frags) / dt,
        "encode_1000_s": dt_query,
        "features": int(enc._features.size),
    }


def stage_hash_error(args) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from twinspect.code.encoders.lexical import LexicalEncoder
    from twinspect.code.normalize import abstract_tokens

    frags = _load_frags(args)
    rng = np.random.default_rng(0)
    sample = [frags[i] for i in sorted(rng.choice(len(frags), size=min(2000, len(frags)), replace=False))]

    def grams(f):
        t = abstract_tokens(f)
        return ["\x1f".join(t[p : p + n]) for n in (1, 2, 3) for p in range(len(t) - n + 1)]

    exact = TfidfVectorizer(analyzer=grams, sublinear_tf=True)
    e = exact.fit_transform(sample)
    ec = (e @ e.T).toarray()
    off = ~np.eye(len(sample), dtype=bool)
    near = off & (ec >= 0.6)
    out = {"pairs": int(off.sum()), "near_pairs": int(near.sum()), "by_dim": {}}
    for dim in (512, 1024, 2048, 4096, 8192):
        x = LexicalEncoder(dim=dim).fit(sample).encode(sample)
        err = np.abs(x @ x.T - ec)
        # top-1 neighbour agreement with the exact representation
        hs = x @ x.T
        np.fill_diagonal(hs, -2)
        ex = ec.copy()
        np.fill_diagonal(ex, -2)
        top1 = float(np.mean(np.argmax(hs, axis=1) == np.argmax(ex, axis=1)))
        out["by_dim"][dim] = {
            "mean_abs_err": float(err[off].mean()),
            "p99_abs_err": float(np.quantile(err[off], 0.99)),
            "near_mean_abs_err": float(err[near].mean()) if near.any() else None,
            "top1_agreement": top1,
        }
    return out


def stage_neural(args) -> dict:
    import warnings

    from twinspect.code.encoders.neural import NeuralEncoder

    frags = _load_frags(args)
    rng = np.random.default_rng(0)
    sample = [frags[i] for i in rng.choice(len(frags), size=min(args.neural_sample, len(frags)), replace=False)]
    res = {"fragments": len(sample)}
    t = time.perf_counter()
    enc = NeuralEncoder(max_tokens=128)
    enc.dim  # noqa: B018 - load the model
    res["load_s"] = time.perf_counter() - t
    for mt in (128, 256):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            enc = NeuralEncoder(max_tokens=mt, batch_size=32)
        t = time.perf_counter()
        enc.encode(sample)
        dt = time.perf_counter() - t
        res[f"encode_{mt}_s"] = dt
        res[f"frags_per_s_{mt}"] = len(sample) / dt
    return res


def _vectors(args, n: int) -> np.ndarray:
    base = np.load(args.work / "lexical.npy")
    if n <= base.shape[0]:
        return base[:n]
    rng = np.random.default_rng(0)
    reps = [base]
    while sum(r.shape[0] for r in reps) < n:
        noisy = base + rng.normal(0, 0.3 / np.sqrt(base.shape[1]), base.shape).astype(np.float32)
        reps.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    return np.ascontiguousarray(np.concatenate(reps)[:n], dtype=np.float32)


def stage_index(args) -> dict:
    from twinspect.code.index import knn_all, make_index

    x = _vectors(args, args.n)
    rng = np.random.default_rng(1)
    q_idx = rng.choice(x.shape[0], size=min(args.queries, x.shape[0]), replace=False)
    queries = x[q_idx]
    ids = np.arange(x.shape[0], dtype=np.int64)
    params = {"num_threads": args.threads} if args.kind == "hnsw" else {}
    t = time.perf_counter()
    index = make_index(args.kind, x.shape[1], **params)
    for lo in range(0, x.shape[0], 4096):
        index.add(ids[lo : lo + 4096], x[lo : lo + 4096])
    build = time.perf_counter() - t
    t = time.perf_counter()
    got, _ = index.search(queries, 10)
    search = time.perf_counter() - t
    res = {"n": x.shape[0], "dim": x.shape[1], "build_s": build, "search_s": search, "queries": len(q_idx),
           "qps": len(q_idx) / search}
    if args.kind == "hnsw":
        exact = make_index("exact", x.shape[1])
        exact.add(ids, x)
        want, wsims = exact.search(queries, 10)
        res["recall_at_10"] = float(np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got, want)]))
    if args.all_vs_all:
        t = time.perf_counter()
        knn_all(index, 10, 0.6)
        res["all_vs_all_s"] = time.perf_counter() - t
    return res


STAGES = {
    "parse": stage_parse,
    "lexical": stage_lexical,
    "hash_error": stage_hash_error,
    "neural": stage_neural,
    "index": stage_index,
}


# ------------------------------------------------------------------------------------------------
# driver


def run_stage(name: str, args, **extra) -> dict:
    cmd = [sys.executable, __file__, "--stage", name, "--work", str(args.work), "--path", str(args.path),
           "--dim", str(args.dim), "--neural-sample", str(args.neural_sample), "--queries", str(args.queries),
           "--threads", str(args.threads), "--min-lines", str(args.min_lines),
           "--identifier-weight", str(args.identifier_weight)]
    for k, v in extra.items():
        if isinstance(v, bool):
            if v:
                cmd.append(f"--{k.replace('_', '-')}")
        else:
            cmd += [f"--{k.replace('_', '-')}", str(v)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"stage {name} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--stage", default=None)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--identifier-weight", type=float, default=0.0)
    ap.add_argument("--min-lines", type=int, default=6)
    ap.add_argument("--neural-sample", type=int, default=256)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=-1)
    ap.add_argument("--sizes", default="8000,50000")
    ap.add_argument("--skip-neural", action="store_true")
    ap.add_argument("--skip-hash-error", action="store_true")
    # internal (stage processes)
    ap.add_argument("--kind", default="exact")
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--all-vs-all", action="store_true")
    args = ap.parse_args()

    if args.stage:
        res = STAGES[args.stage](args)
        res["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(res))
        return

    from rich.console import Console

    from twinspect.reports.table import print_table as _print_table

    wide = Console(width=160)

    def print_table(headers, rows, title):
        _print_table(rows, headers, title=title, console=wide)

    with tempfile.TemporaryDirectory(prefix="twinspect-bench-") as work:
        args.work = Path(work)
        print(f"codebase: {args.path}   load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        p = run_stage("parse", args)
        lx = run_stage("lexical", args)
        print_table(
            ["stage", "fragments", "seconds", "fragments/s", "peak RSS MB"],
            [
                ["parse (tree-sitter, mine)", p["fragments"], f"{p['seconds']:.2f}", f"{p['fragments'] / p['seconds']:.0f}",
                 f"{p['peak_rss_mb']:.0f}"],
                ["tokenize (normalize, uncached)", lx["fragments"], f"{lx['tokenize_s']:.2f}",
                 f"{lx['fragments'] / lx['tokenize_s']:.0f}", ""],
                [f"lexical fit+encode (dim {args.dim}, tokens cached)", lx["fragments"], f"{lx['fit_encode_s']:.2f}",
                 f"{lx['frags_per_s']:.0f}", f"{lx['peak_rss_mb']:.0f}"],
                ["lexical encode 1000 queries", 1000, f"{lx['encode_1000_s']:.2f}", f"{1000 / lx['encode_1000_s']:.0f}", ""],
            ],
            title=f"Parsing and lexical encoding ({p['files']} files, {p['fragment_loc']} fragment lines)",
        )
        if not args.skip_hash_error:
            he = run_stage("hash_error", args)
            print_table(
                ["dim", "mean |err|", "p99 |err|", "mean |err| exact cos>=0.6", "top-1 agreement", "MB / 10k frags"],
                [
                    [d, f"{v['mean_abs_err']:.4f}", f"{v['p99_abs_err']:.4f}",
                     "-" if v["near_mean_abs_err"] is None else f"{v['near_mean_abs_err']:.4f}",
                     f"{v['top1_agreement']:.3f}", f"{int(d) * 4 * 10000 / 2**20:.0f}"]
                    for d, v in he["by_dim"].items()
                ],
                title=f"Hashed vs exact TF-IDF cosine ({he['pairs']} pairs, {he['near_pairs']} with exact cos >= 0.6)",
            )
        if not args.skip_neural:
            nr = run_stage("neural", args)
            print_table(
                ["encoder", "fragments", "seconds", "fragments/s", "peak RSS MB"],
                [
                    ["neural load model", "", f"{nr['load_s']:.2f}", "", ""],
                    ["neural max_tokens=128", nr["fragments"], f"{nr['encode_128_s']:.2f}", f"{nr['frags_per_s_128']:.1f}",
                     f"{nr['peak_rss_mb']:.0f}"],
                    ["neural max_tokens=256", nr["fragments"], f"{nr['encode_256_s']:.2f}", f"{nr['frags_per_s_256']:.1f}", ""],
                    ["lexical (above)", lx["fragments"], f"{lx['fit_encode_s']:.2f}", f"{lx['frags_per_s']:.0f}", ""],
                ],
                title="Encoding speed (CPU)",
            )
        rows = []
        for n in [int(s) for s in args.sizes.split(",") if s]:
            for kind in ("exact", "hnsw"):
                r = run_stage("index", args, kind=kind, n=n, all_vs_all=n <= 10000)
                rows.append([kind, r["n"], r["dim"], f"{r['build_s']:.2f}", f"{r['search_s']:.2f}", f"{r['qps']:.0f}",
                             f"{r['recall_at_10']:.3f}" if "recall_at_10" in r else "1.000",
                             f"{r['all_vs_all_s']:.2f}" if "all_vs_all_s" in r else "-", f"{r['peak_rss_mb']:.0f}"])
        print_table(
            ["index", "vectors", "dim", "build s", f"{args.queries} queries s", "queries/s", "recall@10",
             "all-vs-all k=10 s", "peak RSS MB"],
            rows,
            title="k-NN indexes (lexical vectors; 50k = stdlib vectors + noise); HNSW M=16 efC=200 efS=100",
        )


if __name__ == "__main__":
    main()
