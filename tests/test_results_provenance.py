"""Every file under benchmarks/results/ says which script wrote it (issue 17, item 4).

No benchmark runs here: the test reads the results files' provenance headers (``.md``: the
``<!-- provenance`` block that ``benchmarks/_provenance.py`` writes; ``.json``: the top-level
``"provenance"`` object) and the results table of ``benchmarks/README.md``.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "benchmarks" / "README.md"
TABLE_HEADER = "| results file | script |"
COMMIT = re.compile(r"^([0-9a-f]{7,40})(-dirty)?\b")


def results_files() -> list[Path]:
    """Every file under benchmarks/results (recursively), sorted."""
    return sorted(p for p in RESULTS.rglob("*") if p.is_file())


def readme_rows() -> dict[str, str]:
    """Results table of benchmarks/README.md: listed name (file, or folder ending in '/') -> script cell."""
    text = README.read_text(encoding="utf-8")
    assert TABLE_HEADER in text, f"{README}: no results table starting with {TABLE_HEADER!r}"
    rows: dict[str, str] = {}
    for line in text[text.index(TABLE_HEADER):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        script = cells[1].strip("`")
        for name in re.findall(r"`([^`]+)`", cells[0]):
            rows[name] = script
    return rows


def md_header(path: Path) -> dict[str, str]:
    """``key: value`` lines of the provenance block a markdown file starts with ({} when it has none)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].strip() != "<!-- provenance":
        return {}
    out: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "-->":
            return out
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return {}  # block never closed


def header_of(path: Path) -> dict | None:
    """Provenance of a results file: the md block or the json object; None for data files."""
    if path.suffix == ".md":
        return md_header(path)
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        prov = data.get("provenance") if isinstance(data, dict) else None
        return prov if isinstance(prov, dict) else {}
    return None


def listed_script(rel: str, rows: dict[str, str]) -> str | None:
    """README script cell of a results file (by its own name or a listed parent folder)."""
    if rel in rows:
        return rows[rel]
    parts = rel.split("/")
    for i in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:i]) + "/"
        if folder in rows:
            return rows[folder]
    return None


def known_commits(hashes: set[str]) -> set[str]:
    """The hashes in ``hashes`` that name a commit of this repository (all of them without git)."""
    try:
        shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=60, check=True).stdout.strip()
        if shallow == "true":
            pytest.skip("shallow clone: older commits are not available")
        out = subprocess.run(["git", "cat-file", "--batch-check"], cwd=ROOT, input="\n".join(sorted(hashes)) + "\n",
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git not available")
    return {h for h, line in zip(sorted(hashes), out.splitlines()) if line.split()[1:2] == ["commit"]}


FILES = results_files()


def test_results_folder_is_not_empty() -> None:
    assert len(FILES) > 50


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix in (".md", ".json")],
                         ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_header_names_an_existing_script_and_a_commit(path: Path) -> None:
    prov = header_of(path)
    rel = path.relative_to(RESULTS).as_posix()
    assert prov, f"{rel}: no provenance header"
    script = str(prov.get("script", ""))
    if script.startswith("none"):
        # a hand-written file: allowed only when the README says so
        assert listed_script(rel, readme_rows()) == "none (hand-written)", f"{rel}: no script, and README does not say hand-written"
    else:
        assert script.startswith("benchmarks/") and script.endswith(".py"), f"{rel}: script {script!r}"
        assert (ROOT / script).is_file(), f"{rel}: script {script} does not exist"
    assert COMMIT.match(str(prov.get("commit", ""))), f"{rel}: commit {prov.get('commit')!r}"
    assert prov.get("command"), f"{rel}: no command"
    assert prov.get("date") or prov.get("written"), f"{rel}: no date"


def test_header_commits_exist() -> None:
    commits = {}
    for p in FILES:
        prov = header_of(p)
        if prov and (m := COMMIT.match(str(prov.get("commit", "")))):
            commits[p.relative_to(RESULTS).as_posix()] = m.group(1)
    assert commits
    known = known_commits(set(commits.values()))
    assert {rel: c for rel, c in commits.items() if c not in known} == {}


def test_every_results_file_is_listed_in_the_readme_with_its_script() -> None:
    rows = readme_rows()
    unlisted, mismatched = [], []
    for p in FILES:
        rel = p.relative_to(RESULTS).as_posix()
        listed = listed_script(rel, rows)
        if listed is None:
            unlisted.append(rel)
            continue
        prov = header_of(p)
        if prov and not str(prov.get("script", "")).startswith("none") and prov.get("script") != listed:
            mismatched.append((rel, prov.get("script"), listed))
    assert unlisted == [], f"results files missing from {README.name}'s results table"
    assert mismatched == [], "header script differs from the README's"


def test_readme_lists_no_missing_file() -> None:
    missing = [name for name in readme_rows() if not (RESULTS / name).exists()]
    assert missing == []


def test_md_header_parser_reads_a_real_block(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _provenance
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    f = tmp_path / "x.md"
    f.write_text(_provenance.md_header(ROOT / "benchmarks" / "fuzz.py", ["--budget", "3m"]) + "| a |\n")
    h = md_header(f)
    assert h["script"] == "benchmarks/fuzz.py"
    assert h["command"] == "python benchmarks/fuzz.py --budget 3m"
    assert COMMIT.match(h["commit"])
    assert "load" in h["machine"]
    (tmp_path / "y.md").write_text("# no header\n")
    assert md_header(tmp_path / "y.md") == {}
