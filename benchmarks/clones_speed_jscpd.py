"""Speed, memory and agreement of ``twinspect clones`` against the current jscpd (5.x) and jscpd 4.3.0.

What it measures
    On one tree (by default this Python's standard library without ``site-packages``, ``test``,
    ``tests``, ``idle_test`` and ``__pycache__`` folders, as in ``benchmarks/clones.py``), in the same
    run: wall time and peak RSS of three commands, each a subprocess measured with ``os.wait4`` (the
    rusage of that child and of the children it waited for; jscpd 5's node launcher waits for its
    native binary, so the binary's peak is included) and by sampling its process tree in /proc every
    50 ms (summed RSS and CPU time: twinspect's forkserver parse workers are not in its wait4 rusage):

    * jscpd 5.3.3 (Rust engine, installed with npm) and jscpd 4.3.0 (the last JavaScript release):
      ``jscpd <tree> --format python --min-lines 6 --reporters json --output <dir>``, other settings
      at their defaults (min 50 tokens, mode mild; jscpd 4 also skips files over 1,000 lines / 100 kB);
    * ``twinspect clones <tree> --format json -o <file>`` at default settings (functions of ≥ 6 code
      lines), plus ``--granularity G`` when this script is given ``--granularity G`` and the CLI
      accepts the option (otherwise the script says so and runs the default).

    The tools run interleaved (jscpd 5, jscpd 4, twinspect; again; ...) ``--reps`` times (default 3);
    min and median are reported. Each tool's own output is checked before its time is quoted: files
    read and clones found, per run (the script stops if jscpd read no file — jscpd skips every file
    below a hidden directory, which is why the tree is first copied to a temporary folder).

    Agreement: the fraction of jscpd 5's clones (each a pair of file line ranges) that lie inside one
    pair twinspect reports: the two jscpd ranges are each contained in — or covered for ≥ 90 % of
    their lines by — the two fragments of one reported pair (listed ``pairs``, or two members of one
    ``identical_groups`` entry, or a cross pair of a ``group_pairs`` entry), same files. Misses are broken down with Python's ``ast`` by where
    their ranges lie: docstring text (both ranges inside docstrings, which twinspect ignores), both
    inside functions (same function; a function twinspect did not mine; both mined but not paired, with
    the jscpd range covering < or ≥ 50 % of the fragment), class level (a side in a class body outside
    any single method) or module level (a side outside any class or function); also by folder, and the
    share found among the clones whose two sides lie in two different functions. A seeded sample of
    misses, drawn round-robin over those kinds (``--sample``), is listed for reading by eye. The same
    measure is given for jscpd 4.

Output
    ``benchmarks/results/clones_speed_jscpd.{md,json}`` (``--out`` changes the stem), written
    atomically. The markdown's hand-written section between ``<!-- by-eye:start -->`` and
    ``<!-- by-eye:end -->`` is kept when the script rewrites the file. ``--dump-missed FILE`` writes
    the code of the sampled missed clones, side by side, for reading.

Options
    ``--granularity function|block|file`` (passed to twinspect if supported), ``--reps N``,
    ``--tree DIR`` (scan a copy of DIR instead of the stdlib), ``--twinspect-arg ARG`` (repeatable,
    extra CLI arguments, e.g. ``--twinspect-arg=--threshold --twinspect-arg=0.6``), ``--sample N``,
    ``--seed S``, ``--no-jscpd4``, ``--keep DIR`` (keep the copied tree and every report there),
    ``--working-tree`` (run the working tree's twinspect; by default HEAD's ``twinspect/`` is exported
    with ``git archive`` and put first on PYTHONPATH, so the measured code is exactly the named commit
    even while others edit the working tree).

Data and tools
    The tree is this machine's Python standard library (``sysconfig.get_paths()["stdlib"]``). jscpd
    is installed on first use with ``npm install --prefix ~/.cache/twinspect-bench/jscpd-<version>
    jscpd@<version>`` (``$XDG_CACHE_HOME`` respected); 5.4.1's platform binary does not install here,
    5.3.3 does. Run from the repository root, on a shared machine under ``nice``::

        nice -n 10 .venv/bin/python benchmarks/clones_speed_jscpd.py
        nice -n 10 .venv/bin/python benchmarks/clones_speed_jscpd.py --granularity block --out /tmp/block
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import itertools
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
JSCPD5, JSCPD4 = "5.3.3", "4.3.0"
MIN_LINES = 6
OVERLAP = 0.9  # a jscpd range is "inside" a fragment when ≥ 90 % of its lines are in the fragment
IGNORED_DIRS = ("site-packages", "test", "tests", "idle_test", "__pycache__")
BY_EYE_START, BY_EYE_END = "<!-- by-eye:start -->", "<!-- by-eye:end -->"


# ------------------------------------------------------------------------------------------ utils


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class TreeSampler:
    """Samples, every ``interval`` s, the process tree under ``root`` through /proc: the peak of the summed RSS
    of the tree, each process's own peak RSS (VmHWM) and CPU time (utime + stime) as last seen.

    ``os.wait4`` only counts the children a process waited for: twinspect parses in a ``forkserver`` process
    pool, whose workers are children of the forkserver process, which the CLI never waits for, so their CPU
    time and memory are not in its rusage. The samples see them."""

    def __init__(self, root: int, interval: float = 0.05):
        import threading

        self.root, self.interval = root, interval
        self.tick = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak_sum = 0
        self.hwm: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo += children.get(pid, [])
        return out

    def _sample(self) -> None:
        total = 0
        for pid in self._tree():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * self.page
                status = Path(f"/proc/{pid}/status").read_text()
            except (OSError, IndexError, ValueError):
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] == "Z":
                continue
            self.seen.add(pid)
            self.cpu[pid] = (int(fields[11]) + int(fields[12])) / self.tick
            m = re.search(r"VmHWM:\s+(\d+) kB", status)
            if m:
                self.hwm[pid] = max(self.hwm.get(pid, 0), int(m.group(1)) * 1024)
            total += rss
        self.peak_sum = max(self.peak_sum, total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        mib = 1024.0 * 1024.0
        return {"tree_processes": len(self.seen), "tree_peak_rss_sum_mib": self.peak_sum / mib,
                "tree_max_process_hwm_mib": max(self.hwm.values(), default=0) / mib,
                "tree_cpu_seconds_sampled": sum(self.cpu.values())}


def run_measured(cmd: list[str], log: Path, cwd: Path | None = None, env: dict | None = None) -> dict:
    """Run ``cmd`` (stdout and stderr to ``log``): wall seconds; CPU seconds and peak RSS (MiB) from
    ``os.wait4`` (the child and the children it waited for); and the /proc samples of its whole process
    tree (:class:`TreeSampler`); exit code."""
    with open(log, "wb") as fh:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        sampler = TreeSampler(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        tree = sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime, "maxrss_mib": usage.ru_maxrss / 1024.0,
            **tree, "exit": proc.returncode, "output_tail": log.read_bytes().decode(errors="replace")[-1500:]}


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "twinspect-bench"


def install_jscpd(version: str) -> Path:
    """Path of the jscpd ``version`` launcher, installed with npm into the cache folder if absent."""
    prefix = cache_dir() / f"jscpd-{version}"
    binary = prefix / "node_modules" / ".bin" / "jscpd"
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("npm not found: jscpd cannot be installed")
        prefix.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
                            f"jscpd@{version}"], capture_output=True, text=True)
        if r.returncode != 0 or not binary.exists():
            sys.exit(f"npm install jscpd@{version} failed: {r.stderr[-600:]}")
    return binary


def tool_version(cmd: list[str], env: dict | None = None) -> str:
    r = subprocess.run(cmd + ["--version"], capture_output=True, text=True, env=env)
    return (r.stdout.strip() or r.stderr.strip()).splitlines()[-1] if (r.stdout or r.stderr) else "?"


def machine_info() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        mem = round(int(m.group(1)) / 1024 / 1024, 1) if m else None
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(), "cpu": cpu, "mem_gib": mem,
            "platform": platform.platform(), "python": sys.version.split()[0]}


def git_commit(rev: str = "HEAD", working_tree: bool = False) -> str:
    """Short ``rev`` and the last commit before it that changed twinspect/; with ``working_tree``, also the
    uncommitted files under twinspect/ that were measured."""
    head = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    code = subprocess.run(["git", "log", "-1", "--format=%h", rev, "--", "twinspect"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    out = head if code == head else f"{head} (twinspect/ last changed in {code})"
    if not working_tree:
        return out
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "twinspect"], cwd=ROOT, capture_output=True,
                           text=True).stdout.split("\n")
    files = [line[3:] for line in dirty if line.strip()]
    if not files:
        return out + ", working tree clean"
    return out + f" + uncommitted changes in {', '.join(files[:4])}" + (" ..." if len(files) > 4 else "")


def twinspect_env(workdir: Path, working_tree: bool) -> tuple[dict, str, str]:
    """Environment in which the ``twinspect`` CLI runs HEAD's committed code (unless ``working_tree``).

    Other people may be editing and committing twinspect/ while a benchmark runs, and the venv's install is
    editable: by default the commit HEAD names now is resolved once, its ``twinspect/`` is exported with
    ``git archive`` into ``workdir`` and put first on PYTHONPATH, so the measured code is exactly that
    commit. Returns (env, description of the code run, commit label for the results)."""
    env = dict(os.environ)
    if working_tree:
        return env, "the working tree (editable install), uncommitted changes included", git_commit("HEAD", True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    src = workdir / "twinspect-src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", sha, "twinspect"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    where = subprocess.run([sys.executable, "-c", "import twinspect; print(twinspect.__file__)"], env=env,
                           capture_output=True, text=True, cwd=str(workdir)).stdout.strip()
    if not where.startswith(str(src)):
        sys.exit(f"the exported twinspect is not the one imported ({where}); use --working-tree")
    return env, f"the committed code of {sha[:7]} (`git archive`, first on PYTHONPATH)", git_commit(sha)


def twinspect_bin() -> str:
    return shutil.which("twinspect", path=str(Path(sys.executable).parent)) or "twinspect"


def cli_accepts(option: str, env: dict | None = None) -> bool:
    env = dict(env or os.environ, COLUMNS="200", NO_COLOR="1")
    r = subprocess.run([twinspect_bin(), "clones", "scan", "--help"], capture_output=True, text=True, env=env)
    return option in (r.stdout + r.stderr)


# ------------------------------------------------------------------------------------ tool output


def jscpd_summary(outdir: Path) -> dict:
    rep = outdir / "jscpd-report.json"
    if not rep.is_file():
        return {"sources": 0, "clones": None, "lines": None, "report": None}
    data = json.loads(rep.read_text())
    tot = data.get("statistics", {}).get("total", {})
    return {"sources": tot.get("sources", 0), "clones": tot.get("clones"), "duplicates": len(data.get("duplicates", [])),
            "lines": tot.get("lines"), "report": str(rep)}


def stated_pairs(r: dict) -> dict[tuple[int, int], dict]:
    """Every fragment pair a twinspect JSON report states, as {(a, b): {similarity, type, score}} with a < b:
    the listed ``pairs``, every member pair of an ``identical_groups`` entry, and every cross pair of a
    ``group_pairs`` entry (two exact-duplicate groups, each member of one a clone of each of the other).
    Stated pairs without their own listed similarity take the highest listed one of their group (1.0 for
    identical groups)."""
    out: dict[tuple[int, int], dict] = {}
    for p in r["pairs"]:
        k = (min(p["a"], p["b"]), max(p["a"], p["b"]))
        if k not in out or p.get("similarity", 0.0) > out[k]["similarity"]:
            out[k] = {"similarity": float(p.get("similarity", 0.0)), "type": p.get("type"), "score": p.get("score")}
    for g in r.get("identical_groups", []):
        for a, b in itertools.combinations(sorted(g["members"]), 2):
            out.setdefault((a, b), {"similarity": 1.0, "type": g.get("type"), "score": None})
    for g in r.get("group_pairs", []):
        listed = [out[(min(a, b), max(a, b))]["similarity"] for a in g["a"] for b in g["b"]
                  if a != b and (min(a, b), max(a, b)) in out]
        sim = max(listed, default=None)
        for a in g["a"]:
            for b in g["b"]:
                if a != b:
                    out.setdefault((min(a, b), max(a, b)), {"similarity": sim, "type": g.get("type"),
                                                           "score": g.get("score")})
    return out


def twinspect_summary(report: Path) -> dict:
    if not report.is_file():
        return {"files": 0, "report": None}
    r = json.loads(report.read_text())
    stated = len(stated_pairs(r))
    st = r.get("stats", {})
    return {"files": st.get("files_parsed"), "files_seen": st.get("files_seen"), "fragments": len(r["fragments"]),
            "pairs": len(r["pairs"]), "stated_pairs": stated, "identical_groups": len(r.get("identical_groups", [])),
            "group_pairs": len(r.get("group_pairs", [])), "pairs_by_type": st.get("pairs_by_type"),
            "classes": len(r.get("classes", [])), "granularity": r.get("config", {}).get("granularity"),
            "timings": st.get("timings"),
            "report": str(report)}


def jscpd_clones(report: Path, tree: Path, cwd: Path) -> list[dict]:
    """jscpd duplicates as {a: (relpath, start, end), b: (...), lines} with paths relative to ``tree``."""
    data = json.loads(report.read_text())

    def rel(name: str) -> str:
        for cand in (Path(name), tree / name, cwd / name):
            if cand.is_file():
                return os.path.relpath(cand.resolve(), tree.resolve())
        raise FileNotFoundError(f"jscpd names {name!r}, found neither under {tree} nor {cwd}")

    out = []
    for d in data["duplicates"]:
        f1, f2 = d["firstFile"], d["secondFile"]
        s1, e1 = f1.get("startLoc", {}).get("line", f1.get("start")), f1.get("endLoc", {}).get("line", f1.get("end"))
        s2, e2 = f2.get("startLoc", {}).get("line", f2.get("start")), f2.get("endLoc", {}).get("line", f2.get("end"))
        out.append({"a": (rel(f1["name"]), int(s1), int(e1)), "b": (rel(f2["name"]), int(s2), int(e2)),
                    "lines": d.get("lines"), "tokens": d.get("tokens"), "kind": d.get("kind", "exact")})
    return out


# ------------------------------------------------------------------------------------- agreement


def _covers(frag: tuple[int, int], rng: tuple[int, int], share: float = OVERLAP) -> bool:
    s, e = rng
    ov = min(e, frag[1]) - max(s, frag[0]) + 1
    return ov >= share * (e - s + 1)


class Structure:
    """Function and class line spans of the Python files of a tree (``ast``), for classifying ranges."""

    def __init__(self, tree: Path):
        self.tree = tree
        self.cache: dict[str, tuple[list, list] | None] = {}

    def spans(self, rel: str):
        if rel not in self.cache:
            try:
                mod = ast.parse((self.tree / rel).read_bytes())
            except (SyntaxError, ValueError, OSError):
                self.cache[rel] = None
                return None
            funcs, classes, strings = [], [], []

            def walk(node, qual):
                for ch in ast.iter_child_nodes(node):
                    if isinstance(ch, ast.Expr) and isinstance(ch.value, ast.Constant) and isinstance(ch.value.value, str):
                        strings.append((ch.lineno, ch.end_lineno))
                    if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        start = min([ch.lineno] + [d.lineno for d in ch.decorator_list])
                        q = f"{qual}.{ch.name}" if qual else ch.name
                        (classes if isinstance(ch, ast.ClassDef) else funcs).append((start, ch.end_lineno, q))
                        walk(ch, q)
                    else:
                        walk(ch, qual)

            walk(mod, "")
            self.cache[rel] = (funcs, classes, strings)
        return self.cache[rel]

    def in_docstring(self, side: tuple[str, int, int]) -> bool:
        """≥ 90 % of the range's lines are inside bare string statements (docstrings)."""
        sp = self.spans(side[0])
        if sp is None:
            return False
        s, e = side[1], side[2]
        covered = {n for a, b in sp[2] for n in range(max(a, s), min(b, e) + 1)}
        return len(covered) >= OVERLAP * (e - s + 1)

    def context(self, side: tuple[str, int, int]) -> dict:
        rel, s, e = side
        sp = self.spans(rel)
        if sp is None:
            return {"where": "unparsed"}
        funcs, classes, _ = sp
        inner = [f for f in funcs if f[0] <= s and e <= f[1]]
        if inner:
            f = max(inner, key=lambda f: f[0])  # innermost: latest start
            return {"where": "function", "name": f[2], "span": [f[0], f[1]]}
        touches = sum(1 for f in funcs if f[0] <= e and s <= f[1])
        cls = [c for c in classes if c[0] <= s and e <= c[1]]
        if cls:
            c = max(cls, key=lambda c: c[0])
            return {"where": "class", "name": c[2], "touches_functions": touches}
        return {"where": "module", "touches_functions": touches}


def agreement(clones: list[dict], tw_report: Path, structure: Structure) -> dict:
    rep = json.loads(tw_report.read_text())
    frags = {f["id"]: f for f in rep["fragments"]}
    by_file: dict[str, list[dict]] = {}
    for f in rep["fragments"]:
        by_file.setdefault(f["path"], []).append(f)
    pairs = set(stated_pairs(rep))

    def holders(side):
        rel, s, e = side
        return [f["id"] for f in by_file.get(rel, []) if _covers((f["start_line"], f["end_line"]), (s, e))]

    def touching(side):
        rel, s, e = side
        return [f["id"] for f in by_file.get(rel, []) if _covers((f["start_line"], f["end_line"]), (s, e), 0.5)]

    hit, missed, in_funcs, in_funcs_hit, by_folder, touched = 0, [], 0, 0, {}, 0
    for c in clones:
        ha, hb = holders(c["a"]), holders(c["b"])
        found = any((min(x, y), max(x, y)) in pairs for x in ha for y in hb if x != y)
        touched += found or any((min(x, y), max(x, y)) in pairs for x in touching(c["a"]) for y in touching(c["b"])
                                if x != y)
        ca, cb = structure.context(c["a"]), structure.context(c["b"])
        if ca["where"] == cb["where"] == "function" and not (c["a"][0] == c["b"][0] and ca["name"] == cb["name"]):
            in_funcs += 1
            in_funcs_hit += found
        folder = c["a"][0].split("/")[0] if "/" in c["a"][0] else "(top-level modules)"
        fb = by_folder.setdefault(folder, [0, 0])
        fb[0] += 1
        if found:
            hit += 1
            continue
        fb[1] += 1
        wheres = {ca["where"], cb["where"]}
        if structure.in_docstring(c["a"]) and structure.in_docstring(c["b"]):
            cat, sub = "docstring text", "both ranges ≥ 90 % inside docstrings (twinspect ignores docstrings)"
        elif "unparsed" in wheres:
            cat, sub = "unparsed file", ""
        elif "module" in wheres:
            cat = "module level"
            sub = "spans functions" if any(x.get("touches_functions") for x in (ca, cb) if x["where"] == "module") \
                else "statements outside any function"
        elif "class" in wheres:
            cat = "class level"
            sub = "spans methods" if any(x.get("touches_functions") for x in (ca, cb) if x["where"] == "class") \
                else "class body outside methods"
        else:
            cat = "inside functions"
            if c["a"][0] == c["b"][0] and ca["name"] == cb["name"]:
                sub = "both sides in the same function"
            elif not ha or not hb:
                sub = "a function twinspect did not mine"
            else:
                def frac(side, ids):
                    n = side[2] - side[1] + 1
                    return max(n / (frags[i]["end_line"] - frags[i]["start_line"] + 1) for i in ids)
                share = min(frac(c["a"], ha), frac(c["b"], hb))
                sub = ("mined, not paired: jscpd range ≥ 50 % of both fragments" if share >= 0.5
                       else "mined, not paired: jscpd range < 50 % of a fragment (part of a larger function)")
        missed.append({"a": list(c["a"]), "b": list(c["b"]), "lines": c["lines"], "category": cat, "detail": sub,
                       "context_a": ca, "context_b": cb,
                       "fragments_a": [f"{frags[i]['name']}:{frags[i]['start_line']}-{frags[i]['end_line']}" for i in ha],
                       "fragments_b": [f"{frags[i]['name']}:{frags[i]['start_line']}-{frags[i]['end_line']}" for i in hb]})
    breakdown: dict[str, dict] = {}
    for m in missed:
        b = breakdown.setdefault(m["category"], {"count": 0, "detail": {}})
        b["count"] += 1
        b["detail"][m["detail"]] = b["detail"].get(m["detail"], 0) + 1
    return {"clones": len(clones), "inside_a_pair": hit, "fraction": hit / len(clones) if clones else None,
            "missed": len(missed), "breakdown": breakdown, "half_inside_a_pair": touched,
            "both_sides_in_two_functions": {"clones": in_funcs, "inside_a_pair": in_funcs_hit},
            "by_folder": {k: {"clones": v[0], "missed": v[1]} for k, v in
                          sorted(by_folder.items(), key=lambda kv: -kv[1][0])},
            "missed_list": missed}


def code_line_agreement(jscpd_report: Path, tw_report: Path, tree: Path) -> dict:
    """jscpd's clones inside a reported pair under the code-line rule of ``clones_languages_jscpd.py``:
    each range counted by its code lines (no blank or comment-only line), and jscpd 5's partly copied
    boundary lines left out (a range ending on the first token after the copy ends on the line before;
    one starting with the tail of the line before starts on the next). Imported lazily: that script
    imports this one."""
    import clones_languages_jscpd as cl

    clones, _ = cl.jscpd_code_clones(json.loads(jscpd_report.read_text()), tree)
    boiler, noncode = cl.boilerplate_lines(tree)
    a = cl.agreement(clones, json.loads(tw_report.read_text()), cl.function_spans(tree), boiler, noncode)
    return {"clones": a["clones"], "inside_a_pair": a["inside_a_pair"], "jscpd_ranges_trimmed": a["jscpd_ranges_trimmed"]}


def _med(xs):
    return statistics.median(xs) if xs else None


def _f(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def render_md(res: dict, old_md: str | None) -> str:
    m, L = res["machine"], []
    L.append("# `twinspect clones` vs jscpd 5 and jscpd 4 — speed, memory, agreement\n")
    L.append(f"twinspect commit **{res['twinspect_commit']}** ({res['versions']['twinspect']}; code run: "
             f"{res['measured_code']}), measured "
             f"{res['date']} by `benchmarks/clones_speed_jscpd.py` "
             f"(`{' '.join(res['argv']) or '(defaults)'}`).\n")
    L.append(f"Machine: {m['cpu']}, {m['nproc']} usable cores (nproc), {m['mem_gib']} GiB RAM, {m['platform']}; "
             f"load average (1/5/15 min) {res['load_before']} before and {res['load_after']} after the timed runs "
             "(a shared machine: other jobs were running). "
             f"Python {m['python']}, node {res['versions']['node']}; "
             f"`jscpd --version`: {res['versions'].get('jscpd5', 'n/a')} / {res['versions'].get('jscpd4', 'n/a')}.\n")
    t = res["tree"]
    L.append(f"Tree: {t['source']} copied to a temporary folder without {', '.join(IGNORED_DIRS)} folders — "
             f"{t['py_files']} `.py` files, {t['py_lines']:,} lines.\n")
    g = res["granularity"]
    if g["requested"] and not g["accepted"]:
        L.append(f"**`--granularity {g['requested']}` was requested but `twinspect clones` at this commit does not accept "
                 "`--granularity`: twinspect ran at its default (function) granularity.**\n")
    elif g["requested"]:
        L.append(f"twinspect ran with `--granularity {g['requested']}`.\n")
    L.append(f"twinspect command: `{' '.join(res['commands']['twinspect'])}`; jscpd: "
             f"`{' '.join(res['commands'].get('jscpd5', []))}` (same for 4.3.0). Each tool ran {res['reps']} times, "
             "interleaved; min / median over the runs.\n")
    L.append("## Speed and memory\n")
    L.append("| tool | files read | clones / pairs found | wall s (min / median) | peak RSS MiB, wait4 (min / median) "
             "| peak RSS MiB, whole process tree (median) | CPU s, process tree (min / median) | wall s of each run |")
    L.append("|---|---|---|---|---|---|---|---|")
    for name, s in res["summary"].items():
        L.append(f"| {name} | {s['files']} | {s['found']} | {_f(s['wall_min'])} / {_f(s['wall_median'])} | "
                 f"{_f(s['rss_min'], 0)} / {_f(s['rss_median'], 0)} | {_f(s['tree_rss_median'], 0)} "
                 f"({s['tree_processes']} process{'es' if s['tree_processes'] != 1 else ''}) | {_f(s['cpu_min'])} / {_f(s['cpu_median'])} | "
                 f"{', '.join(_f(x) for x in s['walls'])} |")
    L.append("")
    L.append("Peak RSS, wait4: `ru_maxrss` from `os.wait4` — the largest single process among the command and the "
             "children it waited for. twinspect parses in a `forkserver` pool whose workers it never waits for, so "
             "their memory and CPU are not in that figure; the whole-tree columns come from sampling /proc every "
             "50 ms (the largest sum of RSS over the command's process tree at one instant; the CPU time, user + "
             "system, each process last showed — a slight underestimate).\n")
    tt = res["runs"]["twinspect"][0]["summary"].get("timings") or {}
    if tt:
        L.append("twinspect's own stage timings in its first run (`stats.timings`, s): "
                 + ", ".join(f"{k} {v:.2f}" for k, v in tt.items()) + ".\n")
    L.append(f"The measuring process's own peak RSS was {res['parent_maxrss_mib']:.0f} MiB (on Linux a child's peak "
             "RSS is at least its parent's at the fork, so this is the floor of every figure above).\n")
    tg = res["targets"]
    L.append("| target | measured | target | met |")
    L.append("|---|---|---|---|")
    L.append(f"| twinspect wall time / jscpd {JSCPD5} wall time (median; min) | {_f(tg['ratio_median'])}× "
             f"({_f(tg['ratio_min'])}×) | ≤ 3× | {'yes' if tg['ratio_median'] is not None and tg['ratio_median'] <= 3 else 'NO'} |")
    worst = max(tg["rss_median"] or 0, tg["tree_rss_median"] or 0)
    L.append(f"| twinspect peak memory (median; wait4 / whole tree) | {_f(tg['rss_median'], 0)} / "
             f"{_f(tg['tree_rss_median'], 0)} MiB | ≤ 1024 MiB | {'yes' if worst <= 1024 else 'NO'} |")
    L.append(f"| twinspect CPU time / jscpd {JSCPD5} CPU time (process trees, median; less sensitive to the load) | "
             f"{_f(tg['cpu_ratio_median'])}× | | |")
    if "jscpd 4" in tg:
        L.append(f"| twinspect / jscpd {JSCPD4} wall time (median) | {_f(tg['jscpd 4'])}× | | |")
    gr = res["runs"]["twinspect"][0]["summary"].get("granularity") or "function"
    a5 = res.get("agreement", {}).get("jscpd5") or {}
    if gr == "block" and a5.get("code_line_rule"):
        cr = a5["code_line_rule"]
        share = {"all lines": a5["inside_a_pair"] / a5["clones"], "code lines": cr["inside_a_pair"] / cr["clones"]}
        L.append(f"| jscpd {JSCPD5}'s clones inside a reported pair (rules below: all lines; code lines) | "
                 f"{_f(100 * share['all lines'], 1)} %; {_f(100 * share['code lines'], 1)} % | ≥ 90 % | "
                 + "; ".join(f"{k}: {'yes' if v >= 0.9 else 'NO'}" for k, v in share.items()) + " |")
    L.append("")
    what = {"function": "pairs of whole functions (≥ 6 code lines, docstrings and comments not counted)",
            "block": "pairs of whole functions and of copied runs of statements (blocks, inside or outside "
                     "functions; ≥ 6 code lines, docstrings and comments not counted)",
            "file": "pairs of whole files"}.get(gr, f"pairs of {gr} fragments")
    L.append("What the tools count differ: jscpd reports token-sequence duplicates of ≥ 6 lines and ≥ 50 tokens "
             "anywhere in a file (several per pair of files, inside or across functions, repeated blocks within one "
             f"function), starting and ending mid-line; twinspect (granularity `{gr}`) reports {what} that its "
             "detector accepts. jscpd 4 read fewer files: it skips files over 1,000 lines or 100 kB by default.\n")
    for key, title in (("jscpd5", f"jscpd {JSCPD5}"), ("jscpd4", f"jscpd {JSCPD4}")):
        a = res.get("agreement", {}).get(key)
        if not a:
            continue
        L.append(f"## Agreement: {title}'s clones inside a twinspect pair\n")
        L.append(f"{a['inside_a_pair']} of {a['clones']} {title} clones ({_f(100 * a['fraction'], 1)} %) lie inside a "
                 f"reported twinspect pair (both ranges covered ≥ {int(OVERLAP * 100)} % by the two fragments of one "
                 f"pair, same files); {a['missed']} are missed:\n")
        cr = a.get("code_line_rule")
        if cr:
            L.append(f"Under the code-line rule of `benchmarks/clones_languages_jscpd.py` (each range counted by its "
                     "code lines, blank and comment-only lines left out; a boundary line jscpd copied only in part — "
                     "its range ending on the first token after the copy, or starting with the tail of the line "
                     f"before — left out; {cr['jscpd_ranges_trimmed']} clones trimmed so): **{cr['inside_a_pair']} of "
                     f"{cr['clones']} ({_f(100 * cr['inside_a_pair'] / cr['clones'] if cr['clones'] else None, 1)} %)** "
                     "inside a reported pair.\n")
        L.append(f"Looser: {a['half_inside_a_pair']} ({_f(100 * a['half_inside_a_pair'] / a['clones'], 1)} %) have "
                 "≥ 50 % of each range inside the two fragments of one reported pair — e.g. a jscpd range that runs two "
                 "lines past a reported nested function, or from the tail of one method into a reported next one.\n")
        bf = a["both_sides_in_two_functions"]
        L.append(f"Of the {bf['clones']} clones whose two sides each lie inside a function (two different "
                 f"functions; what a function-level detector can report), {bf['inside_a_pair']} "
                 f"({_f(100 * bf['inside_a_pair'] / bf['clones'] if bf['clones'] else None, 1)} %) are inside a "
                 "twinspect pair. By folder of side A (largest first): "
                 + "; ".join(f"`{k}` {v['clones']} clones, {v['missed']} missed"
                             for k, v in list(a["by_folder"].items())[:6]) + ".")
        top, tv = next(iter(a["by_folder"].items()))
        rest_n, rest_hit = a["clones"] - tv["clones"], a["inside_a_pair"] - (tv["clones"] - tv["missed"])
        L.append(f"Without the `{top}` folder: {rest_hit} of {rest_n} "
                 f"({_f(100 * rest_hit / rest_n if rest_n else None, 1)} %).\n")
        L.append("| where the missed clone lies | missed | detail |")
        L.append("|---|---|---|")
        for cat, b in sorted(a["breakdown"].items(), key=lambda kv: -kv[1]["count"]):
            det = "; ".join(f"{k}: {v}" for k, v in sorted(b["detail"].items(), key=lambda kv: -kv[1]))
            L.append(f"| {cat} | {b['count']} ({_f(100 * b['count'] / a['clones'], 1)} % of all) | {det} |")
        L.append("")
    smp = res.get("missed_sample", [])
    if smp:
        L.append(f"## Sample of missed jscpd {JSCPD5} clones (seed {res['seed']})\n")
        L.append("| # | side A | side B | lines | where | twinspect fragments holding A / B |")
        L.append("|---|---|---|---|---|---|")
        for i, s in enumerate(smp, 1):
            fa = ", ".join(s["fragments_a"]) or "none"
            fb = ", ".join(s["fragments_b"]) or "none"
            L.append(f"| {i} | `{s['a'][0]}:{s['a'][1]}-{s['a'][2]}` | `{s['b'][0]}:{s['b'][1]}-{s['b'][2]}` | "
                     f"{s['lines']} | {s['category']} — {s['detail']} | {fa} / {fb} |")
        L.append("")
    by_eye = None
    if old_md and BY_EYE_START in old_md and BY_EYE_END in old_md:
        by_eye = old_md[old_md.index(BY_EYE_START): old_md.index(BY_EYE_END) + len(BY_EYE_END)]
    L.append("## Read by eye\n")
    L.append(by_eye or f"{BY_EYE_START}\n(not yet written for this run)\n{BY_EYE_END}")
    L.append("")
    return "\n".join(L)


# -------------------------------------------------------------------------------------------- main


def stratified_sample(missed: list[dict], n: int, seed: int) -> list[dict]:
    """Up to ``n`` missed clones, drawn round-robin over (category, detail) so each kind of miss is seen."""
    rng = random.Random(seed)
    groups: dict[tuple, list] = {}
    for m in missed:
        groups.setdefault((m["category"], m["detail"]), []).append(m)
    for g in groups.values():
        rng.shuffle(g)
    order = sorted(groups, key=lambda k: -len(groups[k]))
    out: list[dict] = []
    while len(out) < n and any(groups[k] for k in order):
        for k in order:
            if groups[k] and len(out) < n:
                out.append(groups[k].pop())
    return out


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(*IGNORED_DIRS))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--granularity", choices=("function", "block", "file"), default=None,
                    help="passed to `twinspect clones --granularity` when the CLI accepts it")
    ap.add_argument("--reps", type=int, default=3, help="runs of each tool, interleaved (default 3)")
    ap.add_argument("--tree", type=Path, default=None, help="scan a copy of this tree instead of the stdlib")
    ap.add_argument("--twinspect-arg", action="append", default=[], help="extra twinspect CLI argument (repeatable)")
    ap.add_argument("--sample", type=int, default=12,
                    help="missed jscpd 5 clones listed for reading by eye (round-robin over the kinds of miss)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-jscpd4", action="store_true", help="skip jscpd 4.3.0 (about 25 s a run)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the tree copy and all reports in this folder")
    ap.add_argument("--working-tree", action="store_true",
                    help="measure the working tree's twinspect (editable install) instead of HEAD's committed code")
    ap.add_argument("--dump-missed", type=Path, default=None, help="write the sampled missed clones' code here")
    ap.add_argument("--out", type=Path, default=RESULTS / "clones_speed_jscpd",
                    help="output stem (.md and .json are added)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    src = (args.tree or Path(sysconfig.get_paths()["stdlib"])).resolve()
    workdir = Path(tempfile.mkdtemp(prefix="twinspect-jscpd-")) if args.keep is None else args.keep.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tree = workdir / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    copy_tree(src, tree)
    hidden = [p for p in tree.parts if p.startswith(".")]
    if hidden:
        sys.exit(f"the tree copy {tree} lies below a hidden directory ({hidden}); jscpd would skip it — set TMPDIR")
    py = [p for p in tree.rglob("*.py") if p.is_file()]
    tree_info = {"source": str(src), "py_files": len(py),
                 "py_lines": sum(p.read_bytes().count(b"\n") for p in py)}

    tw = twinspect_bin()
    tw_env, measured_code, commit = twinspect_env(workdir, args.working_tree)
    gran = {"requested": args.granularity, "accepted": None}
    tw_cmd = [tw, "clones", str(tree), "--format", "json"]
    if args.granularity:
        gran["accepted"] = cli_accepts("--granularity", tw_env)
        if gran["accepted"]:
            tw_cmd += ["--granularity", args.granularity]
        else:
            print(f"NOTE: `twinspect clones` does not accept --granularity at this commit; "
                  f"--granularity {args.granularity} ignored, twinspect runs at its default (function) granularity.",
                  file=sys.stderr)
    tw_cmd += args.twinspect_arg

    tools: dict[str, list[str]] = {}
    versions = {"twinspect": tool_version([tw], tw_env), "node": tool_version(["node"])}
    j5 = install_jscpd(JSCPD5)
    versions["jscpd5"] = tool_version([str(j5)])
    if JSCPD5 not in versions["jscpd5"]:
        sys.exit(f"expected jscpd {JSCPD5}, `jscpd --version` says {versions['jscpd5']!r}")
    tools[f"jscpd {JSCPD5}"] = [str(j5)]
    if not args.no_jscpd4:
        j4 = install_jscpd(JSCPD4)
        versions["jscpd4"] = tool_version([str(j4)])
        if JSCPD4 not in versions["jscpd4"]:
            sys.exit(f"expected jscpd {JSCPD4}, `jscpd --version` says {versions['jscpd4']!r}")
        tools[f"jscpd {JSCPD4}"] = [str(j4)]
    tools["twinspect"] = tw_cmd

    runs: dict[str, list[dict]] = {k: [] for k in tools}
    commands = {}
    load_before = [round(x, 2) for x in os.getloadavg()]
    for rep in range(1, args.reps + 1):
        for name, base in tools.items():
            out = workdir / "runs" / f"{name.replace(' ', '-')}-{rep}"
            if out.exists():
                shutil.rmtree(out)
            out.mkdir(parents=True)
            if name == "twinspect":
                cmd = base + ["-o", str(out / "report.json")]
            else:
                cmd = base + [str(tree), "--format", "python", "--min-lines", str(MIN_LINES), "--reporters", "json",
                              "--output", str(out)]
            key = "twinspect" if name == "twinspect" else ("jscpd5" if JSCPD5 in name else "jscpd4")
            commands.setdefault(key, [Path(c).name if i == 0 else c.replace(str(out), "<out>").replace(str(tree), "<tree>")
                                      for i, c in enumerate(cmd)])
            r = run_measured(cmd, out.parent / f"{out.name}.log", cwd=workdir,
                             env=tw_env if name == "twinspect" else None)
            r["summary"] = twinspect_summary(out / "report.json") if name == "twinspect" else jscpd_summary(out)
            runs[name].append(r)
            s = r["summary"]
            print(f"run {rep} {name}: {r['seconds']:.2f} s, {r['maxrss_mib']:.0f} MiB, exit {r['exit']}, "
                  + (f"{s.get('files')} files, {s.get('fragments')} fragments, {s.get('pairs')} pairs"
                     if name == "twinspect" else f"{s.get('sources')} files, {s.get('clones')} clones"), flush=True)
            if r["exit"] != 0:
                sys.exit(f"{name} failed (exit {r['exit']}): {r['output_tail'][-800:]}")
            if name != "twinspect" and not s.get("sources"):
                sys.exit(f"{name} read no file of {tree}: its timing would mean nothing")
            if name == "twinspect" and not s.get("files"):
                sys.exit(f"twinspect parsed no file of {tree}")
    load_after = [round(x, 2) for x in os.getloadavg()]
    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    summary, consistent = {}, {}
    for name, rs in runs.items():
        walls, rss = [r["seconds"] for r in rs], [r["maxrss_mib"] for r in rs]
        cpus, trss = [r["tree_cpu_seconds_sampled"] for r in rs], [r["tree_peak_rss_sum_mib"] for r in rs]
        s0 = rs[0]["summary"]
        if name == "twinspect":
            files = s0["files"]
            found = (f"{s0['pairs']} pairs listed ({s0['stated_pairs']} stated, with identical groups and group "
                     f"pairs), {s0['fragments']} fragments")
            sig = [(r["summary"]["files"], r["summary"]["pairs"], r["summary"]["fragments"]) for r in rs]
        else:
            files = s0["sources"]
            found = f"{s0['clones']} clones"
            sig = [(r["summary"]["sources"], r["summary"]["clones"]) for r in rs]
        consistent[name] = len(set(sig)) == 1
        summary[name] = {"files": files, "found": found, "walls": walls, "rss": rss, "cpus": cpus, "wall_min": min(walls),
                         "cpu_min": min(cpus), "cpu_median": _med(cpus), "tree_rss": trss,
                         "tree_rss_median": _med(trss), "tree_processes": max(r["tree_processes"] for r in rs),
                         "wall_median": _med(walls), "rss_min": min(rss), "rss_median": _med(rss),
                         "same_output_every_run": consistent[name]}
    j5n = f"jscpd {JSCPD5}"
    targets = {"ratio_median": summary["twinspect"]["wall_median"] / summary[j5n]["wall_median"],
               "ratio_min": summary["twinspect"]["wall_min"] / summary[j5n]["wall_min"],
               "rss_median": summary["twinspect"]["rss_median"],
               "tree_rss_median": summary["twinspect"]["tree_rss_median"],
               "cpu_ratio_median": summary["twinspect"]["cpu_median"] / summary[j5n]["cpu_median"]}
    if f"jscpd {JSCPD4}" in summary:
        targets["jscpd 4"] = summary["twinspect"]["wall_median"] / summary[f"jscpd {JSCPD4}"]["wall_median"]

    structure = Structure(tree)
    tw_report = Path(runs["twinspect"][0]["summary"]["report"])
    agree = {}
    for name, key in ((j5n, "jscpd5"), (f"jscpd {JSCPD4}", "jscpd4")):
        if name in runs:
            clones = jscpd_clones(Path(runs[name][0]["summary"]["report"]), tree, workdir)
            agree[key] = agreement(clones, tw_report, structure)
            short = [c for c in clones if c["a"][2] - c["a"][1] + 1 < MIN_LINES or c["b"][2] - c["b"][1] + 1 < MIN_LINES]
            agree[key]["clones_shorter_than_min_lines"] = len(short)
            print(f"{name}: {agree[key]['inside_a_pair']}/{agree[key]['clones']} clones inside a twinspect pair; "
                  f"missed by category: { {k: v['count'] for k, v in agree[key]['breakdown'].items()} }")
    if "jscpd5" in agree:
        agree["jscpd5"]["code_line_rule"] = code_line_agreement(Path(runs[j5n][0]["summary"]["report"]), tw_report, tree)
        cr = agree["jscpd5"]["code_line_rule"]
        print(f"{j5n}, code-line rule: {cr['inside_a_pair']}/{cr['clones']} clones inside a twinspect pair")
    missed5 = agree["jscpd5"]["missed_list"]
    sample = stratified_sample(missed5, args.sample, args.seed)
    if args.dump_missed:
        chunks = []
        for i, s in enumerate(sample, 1):
            chunks.append(f"=== {i}: {s['category']} — {s['detail']}")
            for side in ("a", "b"):
                rel, a, b = s[side]
                lines = (tree / rel).read_text(errors="replace").splitlines()
                chunks.append(f"--- {side.upper()} {rel}:{a}-{b}  context {s['context_' + side]}  "
                              f"fragments {s['fragments_' + side]}")
                chunks += [f"{n:5d} {lines[n - 1]}" for n in range(max(1, a - 2), min(len(lines), b + 2) + 1)]
        write_atomic(args.dump_missed, "\n".join(chunks) + "\n")

    res = {
        "twinspect_commit": commit, "measured_code": measured_code, "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv, "machine": machine_info(), "load_before": load_before,
        "load_after": load_after, "versions": versions, "tree": tree_info, "granularity": gran,
        "commands": commands, "reps": args.reps, "seed": args.seed, "parent_maxrss_mib": parent_rss,
        "summary": summary, "targets": targets,
        "runs": {k: [{x: r[x] for x in ("seconds", "cpu_seconds", "maxrss_mib", "tree_processes", "tree_peak_rss_sum_mib",
                                        "tree_max_process_hwm_mib", "tree_cpu_seconds_sampled", "exit", "summary")}
                                                             for r in v] for k, v in runs.items()},
        "agreement": {k: {x: v[x] for x in v if x != "missed_list"} for k, v in agree.items()},
        "missed_sample": sample, "missed_jscpd5": missed5,
        "total_seconds": time.perf_counter() - t_start,
    }
    for r in res["runs"].values():
        for x in r:
            x["summary"] = {k: v for k, v in x["summary"].items() if k != "report"}
    md_path, json_path = args.out.with_suffix(".md"), args.out.with_suffix(".json")
    old = md_path.read_text() if md_path.is_file() else None
    write_atomic(json_path, json.dumps({"provenance": _provenance.info(__file__), **res}, indent=1, default=str) + "\n")
    write_atomic(md_path, _provenance.md_header(__file__) + render_md(res, old))
    print(f"wrote {md_path} and {json_path} ({res['total_seconds']:.0f} s)")
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
