"""Build the large benchmark tree of issue 23 reproducibly and write its manifest (item 6).

The tree is the ``site-packages`` of a fresh virtual environment holding the project's own
``[all]`` extras at the exact versions of ``constraints.txt``, installed with README's install line
(non-editable here)::

    python3 -m venv VENV && VENV/bin/pip install -c constraints.txt torch==2.13.0 ".[all]"

after which twinspect itself is uninstalled again, so the tree holds third-party code only. The
venv lives in ``~/.cache/twinspect-bench/large-corpus/venv`` (``--root`` to change); its
``site-packages`` (``.../venv/lib/pythonX.Y/site-packages``) is the tree the scale benchmarks scan.
The build is skipped when the venv exists and was built from a ``constraints.txt`` with the same
SHA-256 (recorded in ``build.json`` beside it); ``--rebuild`` forces it.

The manifest, ``benchmarks/results/large_corpus.md``, counts the tree as ``twinspect clones``
sees it: the files :func:`twinspect.code.files.discover` selects (default options: 1 MiB size
limit, ``.gitignore`` files honoured), per language, with their lines (newline count, plus one
for a last line without a newline), the files it skips and why, and the total MLOC. It also lists
the twenty largest top-level packages by lines.

Usage (from the repository root; the install takes 2–4 minutes, the count about half a minute)::

    nice -n 10 .venv/bin/python benchmarks/large_corpus.py [--root DIR] [--rebuild] [--print-tree]

``--print-tree`` only prints the tree's path (building it first if needed) and writes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import _provenance

ROOT = _provenance.ROOT
DEFAULT_ROOT = Path.home() / ".cache" / "twinspect-bench" / "large-corpus"
RESULT = ROOT / "benchmarks" / "results" / "large_corpus.md"
TORCH_PIN = "torch==2.13.0"


def constraints_hash() -> str:
    """SHA-256 hex digest of the repository's ``constraints.txt``."""
    return hashlib.sha256((ROOT / "constraints.txt").read_bytes()).hexdigest()


def site_packages(venv: Path) -> Path:
    """The ``site-packages`` directory of ``venv`` (the benchmark tree).

    Raises:
        FileNotFoundError: the venv has no ``lib/python*/site-packages``.
    """
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise FileNotFoundError(f"{venv} has no lib/python*/site-packages")
    return found[0]


def build(root: Path, rebuild: bool = False) -> tuple[Path, dict]:
    """Create (or reuse) the venv under ``root`` and return its site-packages and build record.

    Args:
        root: directory holding ``venv/`` and ``build.json``.
        rebuild: build again even when ``build.json`` records the current constraints hash.

    Returns:
        ``(tree, record)``: the site-packages path and the build record (dict with ``constraints_sha256``,
        ``command``, ``seconds``, ``built`` UTC time, ``reused`` bool).

    Raises:
        subprocess.CalledProcessError: venv creation or pip failed (its output is on stderr).
    """
    venv = root / "venv"
    stamp = root / "build.json"
    digest = constraints_hash()
    if not rebuild and stamp.is_file() and venv.is_dir():
        record = json.loads(stamp.read_text(encoding="utf-8"))
        if record.get("constraints_sha256") == digest:
            return site_packages(venv), {**record, "reused": True}
    if venv.exists():
        shutil.rmtree(venv)
    stamp.unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    pip = [str(venv / "bin" / "pip"), "install", "-q", "-c", "constraints.txt", TORCH_PIN, ".[all]"]
    had_build_dir = (ROOT / "build").exists()
    t0 = time.perf_counter()
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    subprocess.run(pip, cwd=ROOT, check=True)
    # twinspect is the scanner, not part of the corpus
    subprocess.run([str(venv / "bin" / "pip"), "uninstall", "-q", "-y", "twinspect"], check=True)
    if not had_build_dir:  # setuptools' in-tree build directory, made by this install
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    record = {
        "constraints_sha256": digest,
        "command": "python3 -m venv venv && venv/bin/pip install -c constraints.txt "
        f"{TORCH_PIN} \".[all]\" && venv/bin/pip uninstall -y twinspect",
        "seconds": round(time.perf_counter() - t0, 1),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    stamp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return site_packages(venv), {**record, "reused": False}


def count_lines(path: Path) -> int:
    """Lines of a file: newlines, plus one when the last line has none (0 for an empty file)."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def manifest(tree: Path) -> dict:
    """Files and lines of ``tree`` as twinspect's discovery selects them.

    Returns:
        dict with ``files`` / ``lines`` (int totals), ``by_language`` (language -> {files, lines}),
        ``by_package`` (top-level entry -> lines), ``skipped`` (reason -> count), ``unsupported``
        (language -> files) and ``seconds`` (float, discovery plus counting).
    """
    from twinspect.code.files import discover

    t0 = time.perf_counter()
    files, stats = discover([tree])
    by_lang: dict[str, dict[str, int]] = defaultdict(lambda: {"files": 0, "lines": 0})
    by_pkg: Counter[str] = Counter()
    total = 0
    for sf in files:
        n = count_lines(sf.path)
        by_lang[sf.language]["files"] += 1
        by_lang[sf.language]["lines"] += n
        by_pkg[sf.rel.split("/", 1)[0]] += n
        total += n
    sd = stats.to_dict()
    return {
        "files": len(files),
        "lines": total,
        "by_language": dict(sorted(by_lang.items(), key=lambda kv: -kv[1]["lines"])),
        "by_package": dict(by_pkg.most_common(20)),
        "skipped": sd["skipped"],
        "unsupported": sd["unsupported_files"],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def render(tree: Path, record: dict, m: dict) -> str:
    """The markdown manifest (without the provenance header)."""
    out = [
        "# Large benchmark corpus (issue 23 item 6)",
        "",
        "The `site-packages` of a fresh venv with twinspect's `[all]` extras at the versions of "
        "`constraints.txt`, built by `benchmarks/large_corpus.py` (twinspect itself uninstalled "
        "again). Counted as `twinspect clones` selects files (`twinspect.code.files.discover`, "
        "default options: files over 1 MiB skipped, `.gitignore` honoured).",
        "",
        f"- tree: `{tree}`",
        f"- build: `{record['command']}`, constraints.txt SHA-256 `{record['constraints_sha256'][:16]}…`, "
        f"built {record['built']} in {record['seconds']} s"
        + (" (reused this run)" if record.get("reused") else ""),
        f"- **{m['files']:,} files, {m['lines']:,} lines = {m['lines'] / 1e6:.2f} MLOC** "
        f"(counted in {m['seconds']} s)",
        "",
        "| language | files | lines |",
        "|---|---:|---:|",
    ]
    for lang, c in m["by_language"].items():
        out.append(f"| {lang} | {c['files']:,} | {c['lines']:,} |")
    out.append(f"| **total** | **{m['files']:,}** | **{m['lines']:,}** |")
    out += ["", "Skipped by discovery (files, or pruned directories for `excluded`/`gitignored`):", ""]
    out += [f"- {reason}: {n:,}" for reason, n in m["skipped"].items()] or ["- none"]
    if m["unsupported"]:
        out += ["", "Source files in languages twinspect does not parse: "
                + ", ".join(f"{lang} {n:,}" for lang, n in m["unsupported"].items())]
    out += ["", "Largest top-level entries of the tree by lines:", "", "| entry | lines |", "|---|---:|"]
    out += [f"| `{pkg}` | {n:,} |" for pkg, n in m["by_package"].items()]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Build the tree if needed, count it, write the manifest; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="directory of the venv (default %(default)s)")
    ap.add_argument("--rebuild", action="store_true", help="build the venv again even if it is current")
    ap.add_argument("--print-tree", action="store_true", help="only print the tree path (building it if needed)")
    args = ap.parse_args(argv)
    try:
        tree, record = build(args.root.expanduser(), args.rebuild)
    except subprocess.CalledProcessError as exc:
        print(f"large_corpus: building the venv failed: {exc}", file=sys.stderr)
        return 2
    if args.print_tree:
        print(tree)
        return 0
    m = manifest(tree)
    text = _provenance.md_header(__file__, argv) + render(tree, record, m)
    from twinspect._io import atomic_write

    with atomic_write(RESULT) as fh:
        fh.write(text)
    print(f"{tree}: {m['files']:,} files, {m['lines'] / 1e6:.2f} MLOC -> {RESULT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
