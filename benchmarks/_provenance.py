"""Provenance header of a results file, shared by the benchmark scripts (imported as a sibling module).

Every file a benchmark script writes under ``benchmarks/results/`` starts with the block this module
returns: the script, its full command line, the git commit of the code it ran (``-dirty`` when
``twinspect/`` or ``benchmarks/`` had uncommitted changes, results excluded), the UTC date, the
machine (CPU count, RAM), the 1-minute load average when the script started and when the file was
written, and the Python and twinspect versions.

Usage in a script (``benchmarks/`` is on ``sys.path`` when a script in it runs)::

    import _provenance
    text = _provenance.md_header(__file__) + text               # markdown: an HTML comment block
    data = {"provenance": _provenance.info(__file__), **data}    # JSON: a "provenance" object

The start time and load are taken when this module is first imported, which is at the script's
start when it is imported at the top of the script. ``tests/test_results_provenance.py`` checks that
every results file carries such a header.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: first line of the markdown header block (the test looks for it)
MD_START = "<!-- provenance"
#: last line of the markdown header block
MD_END = "-->"


def _load1() -> float | None:
    """1-minute load average, or None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _git(*args: str) -> str | None:
    """Output of ``git args`` in the repository (stripped), or None when git fails or is absent."""
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_commit() -> str:
    """Short HEAD commit, with ``-dirty`` when ``twinspect/`` or ``benchmarks/`` (results excluded) has
    uncommitted changes; ``"unknown"`` outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    status = _git("status", "--porcelain", "--untracked-files=no", "--", "twinspect", "benchmarks",
                  ":(exclude)benchmarks/results")
    return head + ("-dirty" if status else "")


def _ram_gib() -> float | None:
    """Physical memory in GiB (from sysconf), or None where it is not available."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _twinspect_version() -> str:
    """Version of the twinspect package imported by this interpreter, or ``"not importable"``."""
    try:
        from twinspect import __version__
    except ImportError:
        return "not importable"
    return str(__version__)


_START_TIME = datetime.now(UTC)
_START_LOAD = _load1()
_START_COMMIT = git_commit()


def info(script: str | os.PathLike[str], argv: list[str] | None = None) -> dict:
    """The provenance record of a results file written now by ``script``.

    Args:
        script: path of the benchmark script (its ``__file__``); stored relative to the repository.
        argv: the script's arguments (default ``sys.argv[1:]``).

    Returns:
        dict with ``script`` (str, repository-relative path), ``command`` (str, shell-quoted command
        line), ``commit`` (str, short hash, ``-dirty`` suffix as described in the module docstring;
        taken when the script started), ``started`` / ``written`` (str, UTC ISO 8601 seconds),
        ``cpus`` (int), ``ram_gib`` (float or None), ``load1_start`` / ``load1_end`` (float or None,
        1-minute load average), ``python`` (str), ``twinspect`` (str version).
    """
    path = Path(script).resolve()
    try:
        rel = path.relative_to(ROOT).as_posix()
    except ValueError:
        rel = path.as_posix()
    args = sys.argv[1:] if argv is None else argv
    return {
        "script": rel,
        "command": shlex.join(["python", rel, *args]),
        "commit": _START_COMMIT,
        "started": _START_TIME.isoformat(timespec="seconds"),
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "load1_start": _START_LOAD,
        "load1_end": _load1(),
        "python": platform.python_version(),
        "twinspect": _twinspect_version(),
    }


def md_header(script: str | os.PathLike[str], argv: list[str] | None = None) -> str:
    """The provenance of :func:`info` as an HTML comment block for the top of a markdown file.

    Args:
        script: path of the benchmark script (its ``__file__``).
        argv: the script's arguments (default ``sys.argv[1:]``).

    Returns:
        str of ``key: value`` lines between ``<!-- provenance`` and ``-->``, ending in a blank line.
    """
    p = info(script, argv)
    lines = [
        MD_START,
        f"script: {p['script']}",
        f"command: {p['command']}",
        f"commit: {p['commit']}",
        f"date: {p['started']} to {p['written']} (UTC)",
        f"machine: {p['cpus']} CPUs, {p['ram_gib']} GiB RAM, 1-min load {p['load1_start']} at start, "
        f"{p['load1_end']} at end",
        f"versions: Python {p['python']}, twinspect {p['twinspect']}",
        MD_END,
        "",
    ]
    return "\n".join(lines) + "\n"

