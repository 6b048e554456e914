"""Agreement of ``twinspect clones`` with jscpd 5 on repositories in the registry's new languages (issue 22).

What it measures
    For each tree given with ``--tree NAME=PATH[@COMMIT]`` (a checkout or ``git archive`` of a public
    repository), on one temporary copy of it, in the same run:

    * ``jscpd <copy> --min-lines 6 --reporters json --output <dir>`` (jscpd 5.3.3, installed with npm
      on first use as in ``benchmarks/clones_speed_jscpd.py``; other settings at their defaults: min
      50 tokens, mode mild, every format it knows). Its own report is read before anything is quoted:
      sources read, clones per format. Clones in formats twinspect does not parse (YAML, Markdown,
      PowerShell...) are counted apart and left out of the agreement.
    * ``twinspect clones <copy> --format json`` at the default function granularity (with its sub-function
      pairs: copied runs inside functions that no function pair holds, ``twinspect.code.subfunction``),
      and again with ``--granularity block``; wall time of each command. The jscpd clones held only by a
      sub-function pair are counted, and a seeded sample of 20 per tree is kept in the JSON for reading.

    Agreement: a jscpd clone (two file line ranges) is *inside a reported pair* when both ranges are
    each covered for ≥ 90 % of their *code lines* by the two fragments of one pair twinspect states
    (listed ``pairs``, members of one ``identical_groups`` entry, cross pairs of a ``group_pairs``
    entry). Code lines: blank lines and lines holding only comments are left out (jscpd 5's default
    mode keeps comments in its ranges, twinspect leaves them out), and so is the last line of a range
    when the two ranges end on different tokens and that token stands first on its line (jscpd
    sometimes ends a clone on the first token after the copy), and the first line of a range when the
    copy holds nothing of it but closing brackets and separators (a copy that starts with the ``,``
    ending the line before it, :func:`jscpd_code_clones`). Every count is also given by the
    earlier rule (≥ 90 % of all the range's lines, as ``clones_speed_jscpd.py``), keys ``*_all_lines``. A range is *inside a function* when ≥ 90 % of its lines lie in one
    function of its file, functions of any length (twinspect's own function node types, mined with
    ``min_lines=1``); its function is the innermost such one. Targets of issue 22: every jscpd clone
    whose two ranges lie inside functions is inside a pair at function granularity; ≥ 90 % of all
    jscpd clones are with ``--granularity block``. The in-function clones are split into *two
    different functions* (what a function-level detector can report) and *the same function* (a
    copy inside one function: never a pair of two function fragments). Misses are broken down by
    whether the two enclosing functions were mined (≥ 6 code lines) and whether jscpd's range covers
    at least half of them; a seeded sample of misses is listed for reading by eye. Clones with a side
    made (≥ 90 % of its lines) of comments, blank lines and imports (licence headers and ``use`` lists,
    which twinspect ignores by design) are counted apart, and the block agreement is also given
    without them; so is a looser agreement (≥ 50 % of each range inside the two fragments).

    With ``--stdlib-before REV``, also the wall time of ``twinspect clones`` on a copy of this Python's
    standard library (without site-packages, test folders and caches, as ``benchmarks/clones.py``)
    with REV's code and with HEAD's, interleaved ``--stdlib-reps`` times, and whether both reports
    list the same function fragments and function pairs.

Output
    ``benchmarks/results/clones_languages_jscpd.{md,json}`` (``--out`` changes the stem).

Usage (from the repository root; trees fetched beforehand, e.g. ``git clone`` + ``git checkout COMMIT``)::

    .venv/bin/python benchmarks/clones_languages_jscpd.py --tree gin=/tmp/trees/gin@dcaa4296d111 \\
        --tree express=/tmp/trees/express@a3714473feb3 --tree serde=/tmp/trees/serde@1023d077510b \\
        --tree MediatR=/tmp/trees/MediatR@8a64581e2570 --tree sinatra=/tmp/trees/sinatra@cb22afd7902b \\
        --tree Slim=/tmp/trees/Slim@038fd5713d5a --tree ky=/tmp/trees/ky@3419113b48e0 --stdlib-before 34f613a
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clones_speed_jscpd import install_jscpd, stated_pairs, twinspect_env  # noqa: E402

JSCPD_VERSION = "5.3.3"
OVERLAP = 0.9
#: jscpd format names of the languages twinspect parses.
PARSED_FORMATS = {
    "python": "python", "java": "java", "c": "c", "cpp": "cpp", "c-header": "c", "javascript": "javascript",
    "jsx": "javascript", "typescript": "typescript", "tsx": "tsx", "go": "go", "rust": "rust", "csharp": "csharp",
    "kotlin": "kotlin", "swift": "swift", "ruby": "ruby", "php": "php", "scala": "scala",
}


def covers(span: tuple[int, int], rng: tuple[int, int], share: float = OVERLAP) -> bool:
    """Whether ``span`` (first, last line) holds at least ``share`` of the lines of ``rng``."""
    s, e = rng
    return min(e, span[1]) - max(s, span[0]) + 1 >= share * (e - s + 1)


def function_spans(tree: Path) -> dict[str, list[tuple[int, int, str]]]:
    """Every function of every parsed file of ``tree``: rel path -> [(start, end, name)], any length."""
    from twinspect.code.files import discover
    from twinspect.code.fragments import extract_fragments, read_source

    files, _ = discover([tree])
    out: dict[str, list[tuple[int, int, str]]] = {}
    for sf in files:
        text = read_source(sf)
        if text is None:
            continue
        frags = extract_fragments(text, sf.rel, sf.language, min_lines=1)
        out[sf.rel] = [(f.start_line, f.end_line, f.name) for f in frags]
    return out


#: Statement types counted as boilerplate besides the registry's import-like statements.
HEADER_TYPES = frozenset({"php_tag", "declare_statement", "text_interpolation"})


def boilerplate_lines(tree: Path) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Per parsed file, the 1-based lines that hold no code twinspect compares: blank lines, comment
    lines and lines of import-like statements (the registry's ``import_types``: ``use``, ``import``,
    ``package``, ``namespace X;``...) and of PHP's ``<?php`` / ``declare(...)`` header; and, apart,
    the lines that hold no code at all (blank lines and lines holding nothing but comments)."""
    import tree_sitter

    from twinspect.code.files import discover
    from twinspect.code.fragments import read_source
    from twinspect.code.languages import REGISTRY, get_parser, get_query

    files, _ = discover([tree])
    out: dict[str, set[int]] = {}
    noncode: dict[str, set[int]] = {}
    for sf in files:
        text = read_source(sf)
        if text is None:
            continue
        src = text.encode("utf-8", "surrogatepass")
        root = get_parser(sf.language).parse(src).root_node
        lines = {i + 1 for i, line in enumerate(text.split("\n")) if not line.strip()}
        comments = tree_sitter.QueryCursor(get_query(sf.language)).captures(root).get("comment", [])
        heads = REGISTRY[sf.language].import_types | HEADER_TYPES
        stack = [root]
        nodes = list(comments)
        while stack:  # import-like statements at top level or in namespace/module bodies
            n = stack.pop()
            for c in n.named_children:
                if c.type in heads:
                    nodes.append(c)
                elif c.type in ("namespace_definition", "compilation_unit", "declaration_list", "program",
                                "file_scoped_namespace_declaration", "namespace_declaration", "source_file"):
                    stack.append(c)
        code_rows = [bytearray(line) for line in src.split(b"\n")]  # the file with its comments blanked
        for n in comments:
            for row in range(n.start_point.row, n.end_point.row + 1):
                lo = n.start_point.column if row == n.start_point.row else 0
                hi = n.end_point.column if row == n.end_point.row else len(code_rows[row])
                code_rows[row][lo:hi] = b" " * (hi - lo)  # tree-sitter columns count bytes
        noncode[sf.rel] = {i + 1 for i, row in enumerate(code_rows) if not row.strip()}
        for n in nodes:
            lines.update(range(n.start_point.row + 1, n.end_point.row + 2 if n.end_point.column else n.end_point.row + 1))
        out[sf.rel] = lines
    return out, noncode


def is_boilerplate(lines: dict[str, set[int]], side: tuple[str, int, int]) -> bool:
    """Whether ≥ 90 % of the side's lines are blank, comment or import lines (:func:`boilerplate_lines`)."""
    mine = lines.get(side[0], set())
    return sum(1 for i in range(side[1], side[2] + 1) if i in mine) >= OVERLAP * (side[2] - side[1] + 1)


def innermost(spans: list[tuple[int, int, str]], side: tuple[str, int, int]) -> tuple[int, int, str] | None:
    """The smallest function of the side's file holding ≥ 90 % of its lines, or None."""
    inside = [sp for sp in spans if covers((sp[0], sp[1]), (side[1], side[2]))]
    return min(inside, key=lambda sp: sp[1] - sp[0], default=None)


def code_share(span: tuple[int, int], side: tuple[str, int, int], noncode: dict[str, set[int]]) -> float:
    """Share of the side's code lines (neither blank nor only comments) that ``span`` holds (all its
    lines when none is code)."""
    skip = noncode.get(side[0], set())
    lines = [i for i in range(side[1], side[2] + 1) if i not in skip] or list(range(side[1], side[2] + 1))
    return sum(1 for i in lines if span[0] <= i <= span[1]) / len(lines)


def agreement(clones: list[dict], report: dict, spans: dict[str, list[tuple[int, int, str]]],
              boiler: dict[str, set[int]], noncode: dict[str, set[int]]) -> dict:
    """Counts of jscpd clones inside a pair of the twinspect report (see the module docstring), by the
    code-line rule (the counters) and by the all-lines rule (the same counters with ``_all_lines``)."""
    by_file: dict[str, list[dict]] = {}
    for f in report["fragments"]:
        by_file.setdefault(f["path"], []).append(f)
    pairs = set(stated_pairs(report))
    sub = {f["id"] for f in report["fragments"] if f.get("kind") == "subfunction"}

    def holders(side, share=OVERLAP, code=True):
        span = lambda f: (f["start_line"], f["end_line"])  # noqa: E731
        if code:
            return [f["id"] for f in by_file.get(side[0], []) if code_share(span(f), side, noncode) >= share]
        return [f["id"] for f in by_file.get(side[0], []) if covers(span(f), side[1:], share)]

    def hits_of(a, b, share=OVERLAP, code=True):
        return [(x, y) for x in holders(a, share, code) for y in holders(b, share, code)
                if x != y and (min(x, y), max(x, y)) in pairs]

    def mined(side, fn):
        return any(f["start_line"] == fn[0] and f["end_line"] == fn[1] for f in by_file.get(side[0], []))

    keys = ("inside_a_pair", "in_functions_hit", "two_functions_hit", "same_function_hit", "outside_functions_hit",
            "boilerplate_hit")
    res = {"clones": len(clones), "inside_a_pair": 0, "half_inside_a_pair": 0, "in_functions": 0, "in_functions_hit": 0,
           "two_functions": 0, "two_functions_hit": 0, "same_function": 0, "same_function_hit": 0,
           "outside_functions": 0, "outside_functions_hit": 0, "boilerplate": 0, "boilerplate_hit": 0,
           **{k + "_all_lines": 0 for k in keys}, "jscpd_ranges_trimmed": 0,
           "missed_in_two_functions": Counter(), "misses": [], "subfunction_only_hit": 0, "subfunction_hits": []}
    for c in clones:
        ca, cb = c.get("code_a", c["a"]), c.get("code_b", c["b"])
        res["jscpd_ranges_trimmed"] += (ca, cb) != (c["a"], c["b"])
        hits = hits_of(ca, cb)
        found = bool(hits)
        found_all = bool(hits_of(c["a"], c["b"], code=False))
        if found and all(x in sub or y in sub for x, y in hits):  # only a sub-function pair holds it
            res["subfunction_only_hit"] += 1
            x, y = hits[0]
            res["subfunction_hits"].append({"jscpd": [c["a"], c["b"]], "pair": [x, y]})
        counted = {"inside_a_pair"}
        res["half_inside_a_pair"] += found or bool(hits_of(ca, cb, 0.5))
        if is_boilerplate(boiler, c["a"]) or is_boilerplate(boiler, c["b"]):
            res["boilerplate"] += 1
            counted.add("boilerplate_hit")
        fa, fb = innermost(spans.get(c["a"][0], []), c["a"]), innermost(spans.get(c["b"][0], []), c["b"])
        if fa is not None and fb is not None:
            res["in_functions"] += 1
            same = c["a"][0] == c["b"][0] and fa == fb
            kind = "same_function" if same else "two_functions"
            res[kind] += 1
            counted |= {"in_functions_hit", kind + "_hit"}
            if not found and not same:
                both = mined(c["a"], fa) and mined(c["b"], fb)
                share = min((c["a"][2] - c["a"][1] + 1) / (fa[1] - fa[0] + 1), (c["b"][2] - c["b"][1] + 1) / (fb[1] - fb[0] + 1))
                why = ("a function not mined (< 6 code lines, or a lambda/closure)" if not both else
                       "both mined, not paired; jscpd covers ≥ 50 % of each" if share >= 0.5 else
                       "both mined, not paired; jscpd covers < 50 % of one (a part of a larger function)")
                res["missed_in_two_functions"][why] += 1
        else:
            kind = "outside_functions"
            res["outside_functions"] += 1
            counted.add("outside_functions_hit")
        for k in counted:
            res[k] += found
            res[k + "_all_lines"] += found_all
        if not found:
            res["misses"].append({"a": c["a"], "b": c["b"], "lines": c["lines"], "kind": kind,
                                  "functions": [fa and fa[2], fb and fb[2]]})
    res["missed_in_two_functions"] = dict(res["missed_in_two_functions"])
    return res


def last_token(path: Path, line: int, column: int) -> tuple[str, bool]:
    """The token that ends at ``line``:``column`` (1-based line, 0-based end column, as jscpd gives
    ``endLoc``): its text (a word with its sigils, or one other character; the whole word when jscpd
    ends inside it, e.g. on the ``$`` of ``$strategy``), and whether it is the first on its line."""
    import re

    rows = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    row = rows[line - 1] if line <= len(rows) else ""
    head = row[:column]
    m = re.search(r"([$@]*\w+|[$@]+|\S)\s*$", head)  # a PHP/Ruby/Perl variable's sigil is part of its name
    if m is None:
        return "", False
    token = m.group(1)
    if m.end(1) == len(head) and re.fullmatch(r"[$@]*\w*", token):
        # jscpd may end inside a word (after a sigil: `$` of `$strategy`, or a name's first part): the
        # token is the whole word there, which tells two different names apart
        token += re.match(r"\w*", row[column:]).group(0)  # type: ignore[union-attr]
    return token, not head[:m.start(1)].strip()


def tail_only(path: Path, line: int, column: int) -> bool:
    """Whether the text of ``line`` from ``column`` on (1-based line, 0-based column, as jscpd gives
    ``startLoc``) is only closing brackets and separators (``,;)]}``): the tail of the statement
    before the copy, the rest of that line being no copy."""
    rows = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    row = rows[line - 1] if line <= len(rows) else ""
    rest = row[column:].strip()
    return bool(rest) and not rest.strip(",;)]}").strip()


def jscpd_code_clones(data: dict, tree: Path) -> tuple[list[dict], int]:
    """jscpd's duplicates of ≥ 6 lines in the formats twinspect parses, as {a: (rel, start, end), b: ...,
    lines, code_a, code_b}, and the number left out because a side is a code block inside another file
    (jscpd names those ``doc.md:go``: Markdown code blocks).

    ``code_a`` and ``code_b`` are the two ranges as the code-line rule reads them: when the last
    tokens of jscpd's two ranges differ (jscpd 5.3.3 sometimes ends a clone on the first token after
    the copy, which is no copy), a range whose last token stands first on its line ends on the line
    before (that line holds nothing of the copy); and a range whose first line holds, from jscpd's
    start on, only closing brackets and separators (:func:`tail_only`: the copy starts with the ``,``
    that ends the line before it) starts on the next line."""
    out, embedded = [], 0
    for d in data["duplicates"]:
        if d["format"] not in PARSED_FORMATS or int(d.get("lines") or 0) < 6:
            continue
        sides, ends, tails = [], [], []
        for f in (d["firstFile"], d["secondFile"]):
            path = tree / f["name"]
            if not path.is_file():
                break
            sides.append((os.path.relpath(path, tree), int(f["startLoc"]["line"]), int(f["endLoc"]["line"])))
            ends.append(last_token(path, int(f["endLoc"]["line"]), int(f["endLoc"]["column"])))
            tails.append(tail_only(path, int(f["startLoc"]["line"]), int(f["startLoc"]["column"])))
        if len(sides) < 2:
            embedded += 1
            continue
        clone = {"a": sides[0], "b": sides[1], "lines": int(d["lines"])}
        cut_end = ends[0][0] != ends[1][0] and any(first for _, first in ends)
        if cut_end or any(tails):
            code = []
            for (rel, start, end), (_, first), tail in zip(sides, ends, tails):
                end = end - 1 if cut_end and first and end > start else end
                code.append((rel, start + 1 if tail and end > start else start, end))
            clone["code_a"], clone["code_b"] = code
        out.append(clone)
    return out, embedded


def run(cmd: list[str], log: Path, env: dict | None = None) -> tuple[float, int]:
    t = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=log.parent).returncode
    return time.perf_counter() - t, rc


def measure(name: str, src: Path, commit: str, work: Path, jscpd: Path, seed: int, sample: int, env: dict) -> dict:
    copy = work / name
    shutil.copytree(src, copy, symlinks=True)
    out = work / f"{name}.out"
    out.mkdir()
    twin = str(Path(sys.executable).with_name("twinspect"))
    t_j, rc = run([str(jscpd), str(copy), "--min-lines", "6", "--reporters", "json", "--output", str(out / "jscpd")],
                  out / "jscpd.log")
    rep = out / "jscpd" / "jscpd-report.json"
    if rc != 0 or not rep.is_file():
        sys.exit(f"{name}: jscpd failed (exit {rc}), see {out / 'jscpd.log'}")
    data = json.loads(rep.read_text())
    sources = data["statistics"]["total"]["sources"]
    if not sources:
        sys.exit(f"{name}: jscpd read no file")
    formats = Counter(d["format"] for d in data["duplicates"])
    clones, embedded = jscpd_code_clones(data, copy)
    res: dict = {"name": name, "commit": commit, "jscpd": {"sources": sources, "clones": len(data["duplicates"]),
                 "clones_by_format": dict(formats.most_common()), "clones_in_parsed_languages": len(clones),
                 "clones_in_code_blocks_of_other_files": embedded, "wall_s": round(t_j, 2)}}
    spans = function_spans(copy)
    boiler, noncode = boilerplate_lines(copy)
    for gran in ("function", "block"):
        report_path = out / f"twinspect-{gran}.json"
        cmd = [twin, "clones", str(copy), "--format", "json", "-o", str(report_path), "-q"]
        if gran != "function":
            cmd += ["--granularity", gran]
        t_t, rc = run(cmd, out / f"twinspect-{gran}.log", env)
        if rc != 0:
            sys.exit(f"{name}: twinspect --granularity {gran} failed (exit {rc}): {(out / f'twinspect-{gran}.log').read_text()[-400:]}")
        report = json.loads(report_path.read_text())
        st = report["stats"]
        agree = agreement(clones, report, spans, boiler, noncode)
        rng = random.Random(seed)
        misses = agree.pop("misses")
        agree["miss_sample"] = rng.sample(misses, min(sample, len(misses)))
        agree["in_function_misses"] = [m for m in misses if m["kind"] != "outside_functions"]
        frag = {f["id"]: f for f in report["fragments"]}
        hits = agree.pop("subfunction_hits")
        agree["subfunction_hit_sample"] = [
            {"jscpd": h["jscpd"], "pair": [f"{frag[i]['path']}:{frag[i]['start_line']}-{frag[i]['end_line']}" for i in h["pair"]],
             "names": [frag[i]["name"] for i in h["pair"]]}
            for h in rng.sample(hits, min(20, len(hits)))]
        res[gran] = {"wall_s": round(t_t, 2), "files_parsed": st["files_parsed"],
                     "files_by_language": st.get("files_by_language"), "unsupported_files": st.get("unsupported_files"),
                     "fragments": len(report["fragments"]), "pairs": len(report["pairs"]),
                     "stated_pairs": len(stated_pairs(report)), "pairs_by_type": st.get("pairs_by_type"),
                     "subfunction_fragments": st.get("subfunction_fragments", 0),
                     "subfunction_pairs": st.get("subfunction_pairs", 0),
                     "subfunction_pairs_by_type": st.get("subfunction_pairs_by_type"),
                     "subfunction_s": (st.get("timings") or {}).get("subfunction"), "agreement": agree}
        print(f"{name} {gran}: {agree['inside_a_pair']}/{agree['clones']} jscpd clones inside a pair; in two functions "
              f"{agree['two_functions_hit']}/{agree['two_functions']}, same function "
              f"{agree['same_function_hit']}/{agree['same_function']}, outside {agree['outside_functions_hit']}/"
              f"{agree['outside_functions']} ({t_t:.1f} s)", flush=True)
    return res


def stdlib_timing(before: str, reps: int, work: Path) -> dict:
    """Wall time of ``twinspect clones <stdlib copy> --format json`` with the code of commit ``before`` and of
    HEAD, interleaved ``reps`` times (stdlib without site-packages, test folders and caches, as in
    ``benchmarks/clones.py``); also whether the two reports list the same fragments and pairs."""
    import sysconfig

    tree = work / "stdlib"
    shutil.copytree(sysconfig.get_paths()["stdlib"], tree, symlinks=True,
                    ignore=shutil.ignore_patterns("site-packages", "test", "tests", "idle_test", "__pycache__"))
    envs = {}
    for label, rev in (("before", before), ("after", "HEAD")):
        src = work / f"src-{label}"
        src.mkdir()
        archive = subprocess.run(["git", "archive", rev, "twinspect"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        envs[label] = dict(os.environ, PYTHONPATH=str(src))
    twin = str(Path(sys.executable).with_name("twinspect"))
    walls: dict[str, list[float]] = {"before": [], "after": []}
    reports = {}
    for i in range(reps):
        for label in ("before", "after"):
            rep = work / f"stdlib-{label}.json"
            t, rc = run([twin, "clones", str(tree), "--format", "json", "-o", str(rep), "-q"], work / f"std-{label}.log",
                        envs[label])
            if rc != 0:
                sys.exit(f"stdlib run ({label}) failed")
            walls[label].append(round(t, 2))
            reports[label] = json.loads(rep.read_text())
        print(f"stdlib rep {i + 1}: before {walls['before'][-1]} s, after {walls['after'][-1]} s", flush=True)

    def key(r):
        """Function fragments and the pairs between them (sub-function ones, added after HEAD, left out)."""
        fn = {f["id"]: (f["path"], f["start_line"], f["end_line"], f["name"]) for f in r["fragments"]
              if f.get("kind", "function") == "function"}
        return (sorted(fn.values()), sorted((fn[p["a"]], fn[p["b"]], p["type"], round(p["similarity"], 6))
                                            for p in r["pairs"] if p["a"] in fn and p["b"] in fn))

    rev = subprocess.run(["git", "rev-parse", "--short", before], capture_output=True, text=True).stdout.strip()
    return {"before": rev, "files": reports["after"]["stats"]["files_parsed"], "walls": walls,
            "median": {k: statistics.median(v) for k, v in walls.items()}, "min": {k: min(v) for k, v in walls.items()},
            "identical_reports": key(reports["before"]) == key(reports["after"]),
            "fragments": len(reports["after"]["fragments"]), "pairs": len(reports["after"]["pairs"]),
            "subfunction_pairs": reports["after"]["stats"].get("subfunction_pairs", 0),
            "subfunction_s": {label: reports[label]["stats"]["timings"].get("subfunction") for label in reports},
            "total_s": {label: reports[label]["stats"]["timings"].get("total") for label in reports}}


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f} %" if b else "—"


def old(a: dict, key: str) -> str:
    """The count ``key`` of an agreement under the earlier all-lines rule ("?" in results made before it)."""
    return str(a.get(key + "_all_lines", "?"))


def render(res: dict) -> str:
    trimmed = sum(r["function"]["agreement"].get("jscpd_ranges_trimmed", 0) for r in res["trees"])
    L = ["# `twinspect clones` vs jscpd 5 on repositories in the new languages (issue 22)\n",
         f"twinspect commit **{res['commit']}** ({res['code_run']}), measured {res['date']} by `benchmarks/clones_languages_jscpd.py`; "
         f"jscpd {res['jscpd_version']}; machine: {res['machine']}.\n",
         "Each tree was copied once to a temporary folder; jscpd (`--min-lines 6 --reporters json`, defaults "
         "otherwise: min 50 tokens, every format) and twinspect (`clones --format json`, default function "
         "granularity, then `--granularity block`) ran on that copy. A jscpd clone is *inside a pair* when the "
         "two fragments of one pair twinspect states each cover ≥ 90 % of the *code lines* of one of its ranges "
         "(lines that hold code: blank lines and lines of comments only are left out, as twinspect leaves "
         "comments out and jscpd 5 keeps them in its ranges; and when jscpd's two ranges end on different "
         "tokens — the first token after the copy — the line of that token is left out where it stands first; the "
         "token is the whole word at jscpd's end position, which may fall inside it, e.g. on the `$` of a PHP "
         "variable; and the first line of a range is left out when the copy holds nothing of it but closing "
         "brackets and separators, i.e. the copy starts with the `,` that ends the line before it. Either rule "
         f"trims {trimmed} clones at function granularity). Each count is followed by the count under the earlier rule, in brackets: ≥ 90 % "
         "of *all* the range's lines (the rule of this script's results up to commit 66787c9). A range is "
         "*inside a function* when ≥ 90 % of its lines lie in one function of any length. Clones in formats "
         "twinspect does not parse (YAML, Markdown, PowerShell) are left out.\n",
         "## Trees\n",
         "| tree | commit | jscpd sources | jscpd clones (by format) | twinspect files parsed (by language) | "
         "not parsed | jscpd s | twinspect s (function / block) |",
         "|---|---|---|---|---|---|---|---|"]
    for r in res["trees"]:
        j, f, b = r["jscpd"], r["function"], r["block"]
        fmts = ", ".join(f"{k} {v}" for k, v in j["clones_by_format"].items())
        langs = ", ".join(f"{k} {v}" for k, v in (f["files_by_language"] or {}).items())
        unsup = ", ".join(f"{k} {v}" for k, v in (f["unsupported_files"] or {}).items()) or "—"
        L.append(f"| {r['name']} | {r['commit'][:12]} | {j['sources']} | {j['clones']} ({fmts}) | "
                 f"{f['files_parsed']} ({langs}) | {unsup} | {j['wall_s']} | {f['wall_s']} / {b['wall_s']} |")
    L += ["", "## Agreement at the default function granularity\n",
          "Target: every jscpd clone whose two ranges lie inside functions is inside a reported pair.\n",
          "| tree | fragments / pairs | sub-function fragments / pairs | jscpd clones (parsed languages) | inside a pair "
          "| of which only through a sub-function pair | both ranges in functions: "
          "inside a pair | of which in two different functions | of which in the same function | outside "
          "functions | target met |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["trees"]:
        a = r["function"]["agreement"]
        met = "yes" if a["in_functions_hit"] == a["in_functions"] else "NO"
        L.append(f"| {r['name']} | {r['function']['fragments']} / {r['function']['pairs']} | "
                 f"{r['function'].get('subfunction_fragments', 0)} / {r['function'].get('subfunction_pairs', 0)} | {a['clones']} | "
                 f"{a['inside_a_pair']} ({pct(a['inside_a_pair'], a['clones'])}) [{old(a, 'inside_a_pair')}] | "
                 f"{a.get('subfunction_only_hit', 0)} | "
                 f"{a['in_functions_hit']}/{a['in_functions']} ({pct(a['in_functions_hit'], a['in_functions'])}) "
                 f"[{old(a, 'in_functions_hit')}] | "
                 f"{a['two_functions_hit']}/{a['two_functions']} ({pct(a['two_functions_hit'], a['two_functions'])}) "
                 f"[{old(a, 'two_functions_hit')}] | "
                 f"{a['same_function_hit']}/{a['same_function']} [{old(a, 'same_function_hit')}] | "
                 f"{a['outside_functions_hit']}/{a['outside_functions']} [{old(a, 'outside_functions_hit')}] | {met} |")
    L += ["", "Misses of clones in two different functions, by cause:\n"]
    for r in res["trees"]:
        m = r["function"]["agreement"]["missed_in_two_functions"]
        L.append(f"- {r['name']}: " + ("; ".join(f"{k}: {v}" for k, v in m.items()) or "none"))
    L += ["", "Every miss of a clone whose two ranges lie in functions (function granularity):\n"]
    for r in res["trees"]:
        for m in r["function"]["agreement"].get("in_function_misses", []):
            L.append(f"- {r['name']}: `{m['a'][0]}:{m['a'][1]}-{m['a'][2]}` / `{m['b'][0]}:{m['b'][1]}-{m['b'][2]}` "
                     f"({m['lines']} lines, {m['kind'].replace('_', ' ')}; functions {m['functions']})")
    L += ["", "## Agreement with `--granularity block`\n",
          "Target: ≥ 90 % of all jscpd clones (≥ 6 lines, parsed languages) inside a reported pair.\n",
          "| tree | fragments / pairs | jscpd clones | inside a pair | in functions | outside functions | target met | "
          "looser: ≥ 50 % of each range inside a pair | a side ≥ 90 % comments/imports/blank | without those: inside a pair |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["trees"]:
        a = r["block"]["agreement"]
        met = "yes" if a["clones"] and a["inside_a_pair"] >= 0.9 * a["clones"] else "NO"
        L.append(f"| {r['name']} | {r['block']['fragments']} / {r['block']['pairs']} | {a['clones']} | "
                 f"{a['inside_a_pair']} ({pct(a['inside_a_pair'], a['clones'])}) [{old(a, 'inside_a_pair')}] | "
                 f"{a['in_functions_hit']}/{a['in_functions']} [{old(a, 'in_functions_hit')}] | "
                 f"{a['outside_functions_hit']}/{a['outside_functions']} [{old(a, 'outside_functions_hit')}] "
                 f"| {met} | {a['half_inside_a_pair']} ({pct(a['half_inside_a_pair'], a['clones'])}) | "
                 f"{a['boilerplate']} | {a['inside_a_pair'] - a['boilerplate_hit']}/{a['clones'] - a['boilerplate']} "
                 f"({pct(a['inside_a_pair'] - a['boilerplate_hit'], a['clones'] - a['boilerplate'])}) |")
    def totals(suffix):
        return {g: [sum(r[g]["agreement"].get(k + (suffix if k.endswith(("_hit", "_pair")) else ""), 0)
                        for r in res["trees"])
                    for k in ("inside_a_pair", "clones", "in_functions_hit", "in_functions", "two_functions_hit",
                              "two_functions")]
                for g in ("function", "block")}

    L += ["", "## Totals\n"]
    for label, suffix in (("code-line rule", ""), ("earlier all-lines rule", "_all_lines")):
        tot = totals(suffix)
        f, b = tot["function"], tot["block"]
        L += [f"- {label}: function granularity {f[0]}/{f[1]} jscpd clones inside a pair ({pct(f[0], f[1])}); "
              f"in-function clones {f[2]}/{f[3]} ({pct(f[2], f[3])}), of which in two different functions "
              f"{f[4]}/{f[5]} ({pct(f[4], f[5])}); block granularity {b[0]}/{b[1]} ({pct(b[0], b[1])}; "
              f"target ≥ 90 %: {'met' if b[1] and 10 * b[0] >= 9 * b[1] else f'NOT met, {-(-9 * b[1] // 10)} needed'})."]
    L += ["", ""]
    sd = res.get("stdlib")
    if sd:
        L += ["## Python standard library: wall time before / after\n",
              f"`twinspect clones <stdlib copy> --format json` ({sd['files']} files, {sd['fragments']} fragments, "
              f"{sd['pairs']} pairs, of which {sd.get('subfunction_pairs', 0)} sub-function pairs) with the code of "
              f"{sd['before']} (before) and of HEAD, interleaved "
              f"{len(sd['walls']['before'])} times on this shared machine: before median {sd['median']['before']:.2f} s "
              f"(min {sd['min']['before']:.2f}; runs {sd['walls']['before']}), after median {sd['median']['after']:.2f} s "
              f"(min {sd['min']['after']:.2f}; runs {sd['walls']['after']}). The two reports list "
              + ("the same function fragments and function pairs" if sd["identical_reports"] else
                 "DIFFERENT function fragments or function pairs")
              + f" (sub-function fragments and pairs left out). Stated total seconds of the last run: {sd.get('total_s')}; "
              f"of which the sub-function pass: {sd.get('subfunction_s')}.\n"]
    L += ["## Sample of misses (block granularity)\n"]
    for r in res["trees"]:
        for m in r["block"]["agreement"]["miss_sample"]:
            L.append(f"- {r['name']}: `{m['a'][0]}:{m['a'][1]}-{m['a'][2]}` / `{m['b'][0]}:{m['b'][1]}-{m['b'][2]}` "
                     f"({m['lines']} lines, {m['kind'].replace('_', ' ')}; functions {m['functions']})")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH[@COMMIT] (repeatable)")
    ap.add_argument("--out", default="benchmarks/results/clones_languages_jscpd")
    ap.add_argument("--sample", type=int, default=4)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--stdlib-before", help="also time the stdlib scan with this commit's code against HEAD's")
    ap.add_argument("--stdlib-reps", type=int, default=5)
    ap.add_argument("--working-tree", action="store_true", help="run the working tree's twinspect, not HEAD's")
    args = ap.parse_args(argv)
    jscpd = install_jscpd(JSCPD_VERSION)
    trees = []
    with tempfile.TemporaryDirectory(prefix="twinspect-langs-") as tmp:
        env, code_run, label = twinspect_env(Path(tmp), args.working_tree)
        if not args.working_tree:  # classify ranges with the same code (function spans, in this process)
            sys.path.insert(0, env["PYTHONPATH"].split(os.pathsep)[0])
        for spec in args.tree:
            name, _, rest = spec.partition("=")
            path, _, commit = rest.partition("@")
            trees.append(measure(name, Path(path), commit or "?", Path(tmp), jscpd, args.seed, args.sample, env))
        stdlib = stdlib_timing(args.stdlib_before, args.stdlib_reps, Path(tmp)) if args.stdlib_before else None
    res = {"stdlib": stdlib, "commit": label, "code_run": code_run, "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
           "jscpd_version": JSCPD_VERSION, "machine": f"{platform.processor() or platform.machine()}, "
           f"{os.cpu_count()} cores, {platform.platform()}", "trees": trees}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps({"provenance": _provenance.info(__file__), **res}, indent=1) + "\n")
    out.with_suffix(".md").write_text(_provenance.md_header(__file__) + render(res))
    print(f"wrote {out}.md and {out}.json")


if __name__ == "__main__":
    main()
