"""The seed's Codeforces experiment with verdicts (issue 21, item 3): silhouettes per measure, per
problem and per verdict, beside the seed's Table 5.

Data: the seed's own corpus, SimCorp (github.com/FLAGlab/SimCorp, ``codeforces/``): C++ submissions to
five Codeforces problems (558B, 922E, 1142C, 1579A, 1553G), up to 50 per problem and verdict, in
``codeforces/<problem>/submissions/<VERDICT>/<id>.cpp`` with VERDICT one of ``OK``,
``RUNTIME_ERROR`` and ``WRONG_ANSWER`` (Codeforces' own verdicts, as the folder names say). Its
``codeforces/results/all/names-order.txt`` lists the 566 programs the seed evaluated (of 581 files;
the seed's text says 566 without saying why 15 were left out), ``codeforces/results/stats.txt`` its
silhouettes (Table 5 of the seed's SQAMIA 2024 text, ``web/sqamia2024.md``, is those numbers rounded),
and ``results/all/similarity-{ORIGINAL,NORMALIZED-NODE-SYM}.dat`` two of its 566 x 566 matrices.

``--data`` is a bare git directory of that repository (what ``fetch github:FLAGlab/SimCorp`` gives,
or ``git clone --bare``) or a folder holding ``codeforces/``. From a git directory the script extracts
the ``.cpp`` submissions and the ``results/`` files of HEAD into
``~/.cache/twinspect-bench/verdicts/SimCorp-<commit>/`` on first run (``--cache``); nothing is copied
into this repository.

Selection: the programs of the seed's ``names-order.txt`` (``--programs all``: every ``.cpp`` file),
at most ``--cap`` per problem and verdict (default 50, which keeps all: the corpus holds at most 50
per cell), drawn with ``random.Random(--seed)`` from the ids in sorted order when a cell holds more.
Every program is parsed as C++ by :func:`twinspect.code.similitude.cfg.program_graph`; programs that
do not parse are counted, named and left out.

Matrices: ``node-sym``, ``normalized-node-sym`` and ``lav`` score a pair independently of the other
programs, so one all-pairs matrix over the selection serves every subset (as the seed did).
``wl-tokens`` and ``cfg`` are transductive (idf, centring and SVD come from the compared set), so they
are recomputed on every subset, which is what ``twinspect similitude`` does when given that subset.
LAV runs on the whole selection with ``--workers`` processes unless ``--lav-cap N`` limits it to N
programs per problem and verdict (seeded as above; the tables then say so).

Silhouettes, each under two conventions:

- ``1-s``: :func:`twinspect.code.similitude.cluster.silhouette`, distance ``1 − similarity``
  (the project's convention, what ``twinspect similitude`` prints);
- ``rows``: scikit-learn's ``silhouette_score(S, labels)`` with its default Euclidean metric on the
  rows of the similarity sub-matrix ``S`` (each program is the vector of its similarities to the
  compared programs). This is the seed's convention as far as its stored matrices tell: recomputed
  this way from ``similarity-NORMALIZED-NODE-SYM.dat``, all nine of its silhouettes come out within
  0.012 of its ``stats.txt`` (1 − s: up to 0.12 off); its stored LAV matrix (``ORIGINAL``) is up to
  0.06 off under either convention, so it is probably not the matrix its stats came from (table
  "Convention check" in the results).

Questions (one table each):

1. problem as label over all programs, over all-OK, all-WRONG_ANSWER, all-RUNTIME_ERROR and OK +
   WRONG_ANSWER (Table 5's first four rows; the last is in the seed's ``stats.txt``);
2. per problem, verdict as label (three verdicts), OK vs not OK as label (two), and the leave-one-out
   1-nearest-neighbour accuracy of OK vs not OK beside the majority rate (does similarity separate
   correct from incorrect solutions of one problem?); the three-verdict silhouette is the seed's
   ``plot_by_problem`` in ``stats.txt``;
3. per problem and verdict (Table 5's other rows): the seed scored sub-clusters of a single
   problem-and-verdict cell, but neither its text nor its repository says how those clusters were
   formed (KMeans and average-linkage clusters with k = 2..8 on its stored matrices do not give its
   numbers); here: average-linkage clusters on ``1 − s`` with k = 2..5 chosen by silhouette
   (:func:`~twinspect.code.similitude.cluster.best_clusters`), reported as ``k`` and that silhouette
   under both conventions.

Run (12 minutes on 2 cores at load 8, 10 of them LAV; ``--lav-cap 20`` for a quicker run)::

    nice -n 10 .venv/bin/python benchmarks/similitude_verdicts.py --data /path/to/FLAGlab+SimCorp/repo

Results: ``benchmarks/results/similitude_verdicts.{md,json}`` (``--out`` changes the stem).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _provenance  # sibling module in benchmarks/: the results header
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
CACHE = Path.home() / ".cache" / "twinspect-bench" / "verdicts"
DEFAULT_DATA = Path(os.environ.get("TWINSPECT_SIMCORP", "/work/.mirror/FLAGlab+SimCorp/repo"))
REPO_URL = "https://github.com/FLAGlab/SimCorp"

PROBLEMS = ("558-B", "922-E", "1142-C", "1579-A", "1553-G")  # the seed's Table 3/5 order
VERDICTS = ("OK", "WRONG_ANSWER", "RUNTIME_ERROR")
MEASURES = ("wl-tokens", "cfg", "node-sym", "normalized-node-sym", "lav")
TRANSDUCTIVE = frozenset({"wl-tokens", "cfg"})
#: the seed's matrix names in stats.txt -> ours
SEED_MEASURES = {"ORIGINAL": "lav", "ORIGINAL-NODE-SYM": "node-sym", "NORMALIZED-NODE-SYM": "normalized-node-sym"}
_SUBMISSION = re.compile(r"^codeforces/([^/]+)/submissions/(OK|WRONG_ANSWER|RUNTIME_ERROR)/([^/]+)\.cpp$")


class DataError(Exception):
    """The corpus is missing or not laid out as expected (one line, exit 2)."""


@dataclass(frozen=True)
class Program:
    """One submission: problem (e.g. ``558-B``), verdict folder, Codeforces submission id, file."""

    problem: str
    verdict: str
    ident: str
    path: Path

    @property
    def name(self) -> str:
        """``problem/VERDICT/id.cpp``, the form of the seed's ``names-order.txt``."""
        return f"{self.problem}/{self.verdict}/{self.ident}.cpp"


# ----------------------------------------------------------------------------------------- data


def _git(git_dir: Path, *args: str, binary: bool = False) -> bytes | str:
    out = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=True)
    return out.stdout if binary else out.stdout.decode().strip()


def locate(data: Path, cache: Path) -> tuple[Path, dict]:
    """The folder holding ``codeforces/`` and a source record (repository, commit, paths).

    Args:
        data: a bare git directory of FLAGlab/SimCorp, or a folder holding ``codeforces/``.
        cache: where a git directory's ``.cpp`` and ``results/`` files are extracted once.

    Returns:
        ``(root, source)``: ``root / "codeforces"`` exists; ``source`` is JSON-ready.

    Raises:
        DataError: ``data`` is neither, or git fails on it.
    """
    source: dict = {"repository": REPO_URL, "paths": "codeforces/<problem>/submissions/<VERDICT>/<id>.cpp"}
    if (data / "codeforces").is_dir():
        source["folder"] = str(data)
        try:
            source["commit"] = _git(data / ".git", "rev-parse", "HEAD")
        except (subprocess.CalledProcessError, OSError):
            source["commit"] = "unknown (a folder, not a git checkout)"
        return data, source
    if not (data / "HEAD").is_file() or not (data / "objects").is_dir():
        raise DataError(f"{data}: neither a git directory of {REPO_URL} nor a folder holding codeforces/ "
                        f"(fetch or `git clone --bare {REPO_URL}` it and pass --data)")
    try:
        commit = str(_git(data, "rev-parse", "HEAD"))
    except (subprocess.CalledProcessError, OSError) as exc:
        raise DataError(f"{data}: git rev-parse HEAD failed ({exc})") from exc
    source.update(git_dir=str(data), commit=commit)
    root = cache / f"SimCorp-{commit[:12]}"
    if (root / "codeforces").is_dir():
        return root, source
    tmp = cache / f".SimCorp-{commit[:12]}.{os.getpid()}"
    try:
        raw = _git(data, "archive", "--format=tar", commit, "codeforces", binary=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        raise DataError(f"{data}: git archive of codeforces/ failed ({exc})") from exc
    assert isinstance(raw, bytes)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and
                   (_SUBMISSION.match(m.name) or m.name.startswith("codeforces/results/"))]
        tar.extractall(tmp, members=members, filter="data")
    cache.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, root)
    return root, source


def list_programs(root: Path) -> list[Program]:
    """Every ``codeforces/<problem>/submissions/<VERDICT>/<id>.cpp`` under ``root``, sorted by name."""
    out = []
    for p in sorted((root / "codeforces").glob("*/submissions/*/*.cpp")):
        m = _SUBMISSION.match(p.relative_to(root).as_posix())
        if m:
            out.append(Program(m.group(1), m.group(2), m.group(3), p))
    if not out:
        raise DataError(f"{root / 'codeforces'}: no codeforces/<problem>/submissions/<VERDICT>/<id>.cpp file")
    return sorted(out, key=lambda q: (q.problem, q.verdict, q.ident))


def select(programs: Sequence[Program], cap: int | None, seed: int, keep: set[str] | None = None) -> list[Program]:
    """At most ``cap`` programs per (problem, verdict), drawn with ``random.Random(seed)``.

    Args:
        programs: candidates.
        cap: per-cell maximum (None = no cap).
        seed: the draw's seed; each cell is drawn from its programs sorted by id, cells in sorted order.
        keep: when given, only programs whose :attr:`Program.name` is in it are candidates.

    Returns:
        The selection, sorted by (problem, verdict, id).
    """
    cells: dict[tuple[str, str], list[Program]] = {}
    for p in programs:
        if keep is None or p.name in keep:
            cells.setdefault((p.problem, p.verdict), []).append(p)
    rng = random.Random(seed)
    out: list[Program] = []
    for key in sorted(cells):
        cell = sorted(cells[key], key=lambda q: q.ident)
        out.extend(cell if cap is None or len(cell) <= cap else rng.sample(cell, cap))
    return sorted(out, key=lambda q: (q.problem, q.verdict, q.ident))


def parse_seed_stats(text: str) -> dict[tuple[str, ...], float]:
    """The first ``silhouette_score`` after each ``plot_…`` header of the seed's ``stats.txt``.

    Returns:
        ``{(kind, measure, *args): silhouette}``, e.g. ``("plot_by_type", "lav", "OK")``; measure names
        mapped to ours (:data:`SEED_MEASURES`). The second score of each block (on the 2-D PCA
        projection) is not kept.
    """
    out: dict[tuple[str, ...], float] = {}
    key: tuple[str, ...] | None = None
    for line in text.splitlines():
        m = re.match(r"^(plot_\w+): similarity-(\S+)(.*)$", line)
        if m:
            key = (m.group(1), SEED_MEASURES.get(m.group(2), m.group(2)), *m.group(3).split())
            continue
        m = re.match(r"^\s*silhouette_score: (\S+)", line)
        if m and key is not None and key not in out:
            out[key] = float(m.group(1))
    return out


#: U+00A0 in UTF-8: the corpus's files carry no-break spaces where the web page had indentation
#: (a scraping artefact; 335 of the 581 files), which no C++ parser takes as white space
NBSP = b"\xc2\xa0"


def expand_macros(text: bytes) -> bytes | None:
    """``text`` run through the C preprocessor (``cpp -P -w -x c++``) with its ``#include`` lines
    removed, so that the program's own ``#define`` macros (``rep(i, a, b)``, ``#define re register``)
    are expanded and no system header is pulled in. None when ``cpp`` fails."""
    src = b"\n".join(b"" if re.match(rb"\s*#\s*include", line) else line for line in text.split(b"\n"))
    try:
        out = subprocess.run(["cpp", "-P", "-w", "-x", "c++", "-"], input=src, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


# ---------------------------------------------------------------------------------- silhouettes


def sil_rows(sim: np.ndarray, labels: Sequence[str] | np.ndarray) -> float | None:
    """Silhouette with Euclidean distance between rows of the (sub-)matrix (the seed's convention).

    Args:
        sim: (N, N) similarity matrix of the compared programs.
        labels: N labels.

    Returns:
        scikit-learn's ``silhouette_score(sim, labels)``, or None for fewer than two labels or as
        many labels as programs.
    """
    n_lab = len(set(labels))
    if n_lab < 2 or n_lab >= len(labels):
        return None
    from sklearn.metrics import silhouette_score

    return float(silhouette_score(np.asarray(sim, dtype=float), list(labels)))


def sil_both(sim: np.ndarray, labels: Sequence[str] | np.ndarray) -> dict[str, float | None]:
    """``{"1-s": project silhouette, "rows": seed-convention silhouette}`` of one labelling."""
    from twinspect.code.similitude.cluster import silhouette

    return {"1-s": silhouette(sim, list(labels)), "rows": sil_rows(sim, labels)}


def nn_accuracy(sim: np.ndarray, labels: Sequence[str] | np.ndarray) -> float | None:
    """Leave-one-out 1-nearest-neighbour accuracy: the share of programs whose most similar other
    program (ties: the first) has their label. None for fewer than two programs."""
    s = np.array(sim, dtype=float)
    if s.shape[0] < 2:
        return None
    s = (s + s.T) / 2
    np.fill_diagonal(s, -np.inf)
    nn = s.argmax(axis=1)
    lab = np.asarray(labels)
    return float(np.mean(lab[nn] == lab))


def majority(labels: Sequence[str] | np.ndarray) -> float:
    """Share of the most frequent label (the accuracy of always guessing it)."""
    vals, counts = np.unique(np.asarray(labels), return_counts=True)
    return float(counts.max() / counts.sum())


# ----------------------------------------------------------------------------------------- main


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def run(args: argparse.Namespace) -> int:
    from twinspect.code.similitude.cfg import ProgramGraph, program_graph
    from twinspect.code.similitude.cluster import best_clusters
    from twinspect.code.similitude.measures import similarity_matrix
    from twinspect.errors import InputError
    from twinspect.reports.table import markdown_table

    t_start = time.perf_counter()
    root, source = locate(args.data, args.cache)
    programs = list_programs(root)
    results = root / "codeforces" / "results"
    names_file = results / "all" / "names-order.txt"
    seed_names = names_file.read_text().split() if names_file.is_file() else None
    if args.programs == "seed" and seed_names is None:
        raise DataError(f"{names_file}: missing (use --programs all)")
    seed_stats = parse_seed_stats((results / "stats.txt").read_text()) if (results / "stats.txt").is_file() else {}
    keep = set(seed_names) if args.programs == "seed" and seed_names is not None else None
    chosen = select(programs, args.cap, args.seed, keep)
    measures = [m for m in args.measures.split(",") if m]
    unknown = [m for m in measures if m not in MEASURES]
    if unknown:
        raise DataError(f"--measures: unknown {', '.join(unknown)} (choose from {', '.join(MEASURES)})")

    # parse
    t = time.perf_counter()
    graphs: list[ProgramGraph] = []
    progs: list[Program] = []
    failed: list[dict] = []
    how: dict[str, str] = {}
    use_cpp = args.preprocess and shutil.which("cpp") is not None
    for p in chosen:
        raw = p.path.read_bytes()
        src, label = (raw.replace(NBSP, b" "), "no-break spaces replaced") if NBSP in raw else (raw, "as is")
        g: ProgramGraph | None = None
        err = ""
        try:
            g = program_graph(src, "cpp", path=p.name)
        except InputError as exc:
            err = exc.message
        if g is None and use_cpp:
            expanded = expand_macros(src)
            if expanded is not None:
                try:
                    g, label = program_graph(expanded, "cpp", path=p.name), "macros expanded"
                except InputError:
                    pass
        if g is None:
            failed.append({"program": p.name, "reason": err})
            continue
        graphs.append(g)
        progs.append(p)
        how[p.name] = label
    parse_s = time.perf_counter() - t
    print(f"{len(chosen)} selected, {len(progs)} parsed, {len(failed)} failed ({parse_s:.0f} s)", file=sys.stderr)
    prob = np.array([p.problem for p in progs])
    verd = np.array([p.verdict for p in progs])
    cell_counts = {f"{pr}/{v}": int(((prob == pr) & (verd == v)).sum()) for pr in PROBLEMS for v in VERDICTS}
    nodes = np.array([g.n_nodes for g in graphs])

    # LAV subset
    lav_idx = np.arange(len(progs))
    if args.lav_cap is not None:
        sub = {p.name for p in select(progs, args.lav_cap, args.seed)}
        lav_idx = np.array([i for i, p in enumerate(progs) if p.name in sub])

    full: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    for m in measures:
        if m in TRANSDUCTIVE:
            continue
        idx = lav_idx if m == "lav" else np.arange(len(progs))
        t = time.perf_counter()
        mat = np.full((len(progs), len(progs)), np.nan)
        mat[np.ix_(idx, idx)] = similarity_matrix([graphs[i] for i in idx], m, verbose=1,
                                                  workers=args.workers if m == "lav" else None)
        seconds[m] = time.perf_counter() - t
        full[m] = mat
        print(f"{m}: {len(idx)} programs, {seconds[m]:.0f} s", file=sys.stderr)

    def matrix(m: str, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices, similarity sub-matrix) of measure m over the programs in mask."""
        idx = np.flatnonzero(mask)
        if m == "lav":
            idx = np.intersect1d(idx, lav_idx)
        if m in TRANSDUCTIVE:
            t0 = time.perf_counter()
            s = similarity_matrix([graphs[i] for i in idx], m)
            seconds[m] = seconds.get(m, 0.0) + time.perf_counter() - t0
            return idx, s
        return idx, full[m][np.ix_(idx, idx)]

    everything = np.ones(len(progs), dtype=bool)
    subsets = [("all", "all", everything), ("all", "OK", verd == "OK"),
               ("all", "WRONG_ANSWER", verd == "WRONG_ANSWER"), ("all", "RUNTIME_ERROR", verd == "RUNTIME_ERROR"),
               ("all", "OK+WRONG_ANSWER", verd != "RUNTIME_ERROR")]
    seed_key_q1 = {"all": ("plot_all_vs_all",), "OK+WRONG_ANSWER": ("plot_ok_and_wrong",)}
    q1, q2, q3 = [], [], []
    for m in measures:
        for _, v, mask in subsets:
            idx, s = matrix(m, mask)
            scores = sil_both(s, prob[idx])
            sk = (seed_key_q1[v][0], m) if v in seed_key_q1 else ("plot_by_type", m, v)
            q1.append({"measure": m, "subset": v, "label": "problem", "programs": len(idx), **scores,
                       "seed": seed_stats.get(sk)})
        for pr in PROBLEMS:
            idx, s = matrix(m, prob == pr)
            okl = np.where(verd[idx] == "OK", "OK", "not OK")
            q2.append({"measure": m, "problem": pr, "programs": len(idx),
                       "verdict": sil_both(s, verd[idx]), "ok_vs_not": sil_both(s, okl),
                       "nn_ok_vs_not": nn_accuracy(s, okl), "majority_ok_vs_not": majority(okl),
                       "nn_verdict": nn_accuracy(s, verd[idx]), "majority_verdict": majority(verd[idx]),
                       "seed_verdict": seed_stats.get(("plot_by_problem", m, pr))})
            for v in VERDICTS:
                idx, s = matrix(m, (prob == pr) & (verd == v))
                cl, k, ks = best_clusters(s, 2, 5)
                q3.append({"measure": m, "problem": pr, "verdict": v, "programs": len(idx), "k": k,
                           "1-s": ks, "rows": sil_rows(s, [str(c) for c in cl]) if k > 1 else None,
                           "seed": seed_stats.get(("plot_by_problem_and_type", m, pr, v))})
        print(f"{m}: silhouettes done", file=sys.stderr)

    # the seed's stored matrices under both conventions (which convention its numbers use)
    check: list[dict[str, Any]] = []
    for seed_name, m in SEED_MEASURES.items():
        f = results / "all" / f"similarity-{seed_name}.dat"
        if not f.is_file() or seed_names is None:
            continue
        s_all = np.loadtxt(f)
        sp = np.array([n.split("/")[0] for n in seed_names])
        sverd = np.array([n.split("/")[1] for n in seed_names])
        rows_spec = [("problem", "all", np.ones(len(sp), dtype=bool), ("plot_all_vs_all", m), sp),
                     *[("problem", v, sverd == v, ("plot_by_type", m, v), sp) for v in VERDICTS],
                     *[("verdict", pr, sp == pr, ("plot_by_problem", m, pr), sverd) for pr in PROBLEMS]]
        for lab_name, sub_name, mask, key, labs in rows_spec:
            idx = np.flatnonzero(mask)
            got = sil_both(s_all[np.ix_(idx, idx)], labs[idx])
            check.append({"seed_matrix": seed_name, "measure": m, "label": lab_name, "subset": sub_name,
                          "programs": len(idx), **got, "seed_stats": seed_stats.get(key)})

    total_s = time.perf_counter() - t_start
    lav_note = ("all selected programs" if args.lav_cap is None else
                f"at most {args.lav_cap} programs per problem and verdict ({len(lav_idx)} programs, seed {args.seed})")

    # ---------------------------------------------------------------- markdown
    md: list[str] = []
    md.append("# Program similitude on the seed's Codeforces corpus, split by verdict\n")
    md.append(f"Data: [{REPO_URL}]({REPO_URL}) commit `{source.get('commit')}`, "
              f"`{source['paths']}` (C++; Codeforces verdicts as the folder names give them). "
              f"Selection: {'the 566 programs of the seed' + chr(39) + 's `codeforces/results/all/names-order.txt`' if args.programs == 'seed' else 'every .cpp file'}"
              f", at most {args.cap} per problem and verdict (seed {args.seed}): {len(chosen)} programs, "
              f"{len(progs)} parsed as C++ ("
              + ", ".join(f"{n} {k}" for k, n in sorted(Counter(how.values()).items())) + f"), {len(failed)} failed"
              + (" (tree-sitter syntax errors even after macro expansion; line of the first error): "
                 + ", ".join(f"`{f['program']}`:{f['reason'].rsplit(' ', 1)[-1].rstrip(')')}" for f in failed)
                 if failed else "") + ". "
              f"CFG sizes: median {np.median(nodes):.0f} blocks, max {nodes.max()}. LAV on {lav_note}. "
              f"Total run time {total_s:.0f} s (parse {parse_s:.0f} s; matrices: "
              + ", ".join(f"{m} {seconds.get(m, 0):.0f} s" for m in measures) + ").\n")
    sel_counts = Counter((p.problem, p.verdict) for p in chosen)
    md.append("Programs per problem and verdict: parsed (selected).\n")
    md.append(markdown_table([[pr, *(f"{cell_counts[f'{pr}/{v}']} ({sel_counts[(pr, v)]})" for v in VERDICTS)]
                              for pr in PROBLEMS], ["problem", *VERDICTS]))
    md.append("")
    md.append("Silhouette conventions: **1-s** = `twinspect.code.similitude.cluster.silhouette` (distance "
              "1 − similarity, what `twinspect similitude` prints); **rows** = scikit-learn "
              "`silhouette_score(S, labels)` with Euclidean distance between rows of the similarity "
              "sub-matrix, the seed's convention (see the convention check at the end). **seed** = the "
              "seed's `codeforces/results/stats.txt` (Table 5 of `web/sqamia2024.md` is these rounded to "
              "3 places; ORIGINAL = lav, ORIGINAL-NODE-SYM = node-sym, NORMALIZED-NODE-SYM = "
              "normalized-node-sym). The seed's measures are ours as we read its text, on our source-level "
              "CFGs, not its LLVM CFGs, so equal numbers are not expected. wl-tokens and cfg are "
              "recomputed on each subset (transductive); the others are sub-matrices of one matrix.\n")

    md.append("## 1. Problem as label, over all programs and within each verdict (Table 5, rows All)\n")
    rows = [[r["subset"], r["measure"], r["programs"], _fmt(r["1-s"]), _fmt(r["rows"]), _fmt(r["seed"])] for r in
            sorted(q1, key=lambda r: ([s[1] for s in subsets].index(r["subset"]), measures.index(r["measure"])))]
    md.append(markdown_table(rows, ["verdicts", "measure", "programs", "silhouette 1-s", "silhouette rows",
                                    "seed (rows)"]))
    md.append("")
    md.append("## 2. Per problem: does similarity separate correct from incorrect solutions?\n")
    md.append("Verdict (OK / WRONG_ANSWER / RUNTIME_ERROR) as label, and OK vs not OK as label, over each "
              "problem's programs; 1-NN = leave-one-out nearest-neighbour accuracy of that label, beside "
              "the majority rate (always guessing the commonest label). The seed reports the three-verdict "
              "silhouette in `stats.txt` only (`plot_by_problem`).\n")
    rows = [[r["problem"], r["measure"], r["programs"], _fmt(r["verdict"]["1-s"]), _fmt(r["verdict"]["rows"]),
             _fmt(r["seed_verdict"]), f"{_fmt(r['nn_verdict'])} ({r['majority_verdict']:.3f})",
             _fmt(r["ok_vs_not"]["1-s"]), _fmt(r["ok_vs_not"]["rows"]),
             f"{_fmt(r['nn_ok_vs_not'])} ({r['majority_ok_vs_not']:.3f})"] for r in q2]
    md.append(markdown_table(rows, ["problem", "measure", "programs", "verdict sil 1-s", "verdict sil rows",
                                    "seed (rows)", "verdict 1-NN (majority)", "OK/not sil 1-s",
                                    "OK/not sil rows", "OK/not 1-NN (majority)"]))
    md.append("")
    md.append("## 3. Per problem and verdict: sub-clusters (Table 5, per-problem rows)\n")
    md.append("Average-linkage clusters on 1 − s, k = 2..5 chosen by the 1-s silhouette; cells give "
              "`k: 1-s / rows` for those clusters. The seed's column is its Table 5 number (its clustering "
              "is not documented and its stored matrices do not reproduce it with KMeans or average "
              "linkage, k = 2..8), so compare orders of magnitude, not digits.\n")
    head = ["problem", "verdict", "programs"]
    rows = []
    for pr in PROBLEMS:
        for v in VERDICTS:
            cells = {r["measure"]: r for r in q3 if r["problem"] == pr and r["verdict"] == v}
            row = [pr, v, cells[measures[0]]["programs"]]
            for m in measures:
                r = cells[m]
                row.append("-" if r["1-s"] is None else f"{r['k']}: {_fmt(r['1-s'])} / {_fmt(r['rows'])}")
            for m in SEED_MEASURES.values():
                row.append(_fmt(cells[m]["seed"]) if m in cells else "-")
            rows.append(row)
    head += list(measures) + [f"seed {m}" for m in SEED_MEASURES.values() if m in measures]
    md.append(markdown_table([r[:len(head)] for r in rows], head))
    md.append("")
    if check:
        md.append("## Convention check: the seed's own stored matrices\n")
        gap = {(c["seed_matrix"], conv): max(abs(x[conv] - x["seed_stats"]) for x in check
                                            if x["seed_matrix"] == c["seed_matrix"] and x[conv] is not None
                                            and x["seed_stats"] is not None)
               for c in check for conv in ("1-s", "rows")}
        md.append("Silhouettes recomputed from `codeforces/results/all/similarity-*.dat` (566 × 566, "
                  "4 decimals) with the seed's labels, under both conventions, beside its `stats.txt`. "
                  "Largest difference from `stats.txt`: "
                  + "; ".join(f"{k[0]} {k[1]} {v:.3f}" for k, v in gap.items()) + ".\n")
        md.append(markdown_table([[c["seed_matrix"], c["label"], c["subset"], c["programs"], _fmt(c["1-s"]),
                                   _fmt(c["rows"]), _fmt(c["seed_stats"])] for c in check],
                                 ["seed matrix", "label", "subset", "programs", "1-s", "rows", "seed stats.txt"]))
        md.append("")
    text = "\n".join(md)
    data = {"source": source, "selection": {"programs": args.programs, "cap": args.cap, "seed": args.seed,
                                            "selected": len(chosen), "parsed": len(progs), "failed": failed,
                                            "parsed_how": dict(Counter(how.values())), "parsed_each": how,
                                            "cells": cell_counts, "lav": lav_note,
                                            "lav_programs": int(len(lav_idx))},
            "cfg_blocks": {"median": float(np.median(nodes)), "max": int(nodes.max())},
            "seconds": {"total": total_s, "parse": parse_s, **seconds},
            "q1_problem_label": q1, "q2_per_problem_verdict": q2, "q3_cell_subclusters": q3,
            "seed_convention_check": check}
    from twinspect._io import atomic_write, write_json

    with atomic_write(args.out.with_suffix(".md")) as fh:
        fh.write(_provenance.md_header(__file__) + text + "\n")
    write_json(args.out.with_suffix(".json"), {"provenance": _provenance.info(__file__), **data})
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA,
                    help="bare git directory of FLAGlab/SimCorp, or a folder holding codeforces/ "
                         "(default: $TWINSPECT_SIMCORP or %(default)s)")
    ap.add_argument("--cache", type=Path, default=CACHE, help="extraction folder (default %(default)s)")
    ap.add_argument("--programs", choices=("seed", "all"), default="seed",
                    help="seed: the seed's 566 programs (names-order.txt); all: every .cpp file")
    ap.add_argument("--cap", type=int, default=50, help="at most this many programs per problem and verdict")
    ap.add_argument("--seed", type=int, default=0, help="seed of the per-cell draws")
    ap.add_argument("--measures", default=",".join(MEASURES), help="comma-separated (default: all five)")
    ap.add_argument("--lav-cap", type=int, default=None,
                    help="run LAV on at most this many programs per problem and verdict (default: all)")
    ap.add_argument("--workers", type=int, default=None, help="LAV worker processes (default: CPUs, at most 8)")
    ap.add_argument("--no-preprocess", dest="preprocess", action="store_false",
                    help="do not retry a program that does not parse with its macros expanded by cpp")
    ap.add_argument("--out", type=Path, default=OUT / "similitude_verdicts",
                    help="output stem; .md and .json are written (default %(default)s)")
    args = ap.parse_args(argv)
    if args.cap is not None and args.cap < 1 or args.lav_cap is not None and args.lav_cap < 1:
        print("error: --cap and --lav-cap must be at least 1", file=sys.stderr)
        return 2
    try:
        return run(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
