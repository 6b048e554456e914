"""No silent skip: files per language, unsupported source files, exit 2 when nothing is parsed,
shebang detection and ``--language``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_run import run
from twinspect.code.files import ScanStats, discover
from twinspect.code.languages import shebang_language

GO = """package m

func Sum(values []int) int {
\ttotal := 0
\tfor _, v := range values {
\t\tif v > 0 {
\t\t\ttotal += v
\t\t}
\t}
\treturn total
}
"""
LUA = "local function f(x)\n  return x + 1\nend\n"
PY_SCRIPT = "#!/usr/bin/env python3\ndef main(argv):\n    total = 0\n    for a in argv:\n        total += len(a)\n" \
            "        print(a)\n    print(total)\n    return total\n"
NODE_SCRIPT = "#!/usr/bin/env -S node --no-warnings\nfunction main(args) {\n  let n = 0;\n  for (const a of args) {\n" \
              "    n += a.length;\n    console.log(a);\n  }\n  return n;\n}\n"




def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "line, expected",
    [
        (b"#!/usr/bin/env python3\n", ("python", None)),
        (b"#!/usr/local/bin/python3.12 -u\nx", ("python", None)),
        (b"#! /usr/bin/env -S node --flag\n", ("javascript", None)),
        (b"#!/usr/bin/ruby2.7", ("ruby", None)),
        (b"#!/usr/bin/env PATH=/x php\n", ("php", None)),
        (b"#!/bin/bash\n", (None, "shell")),
        (b"#!/usr/bin/env perl -w\n", (None, "perl")),
        (b"#!/usr/bin/whatever\n", (None, None)),
        (b"print('no shebang')\n", (None, None)),
    ],
)
def test_shebang_language(line, expected):
    assert shebang_language(line) == expected


def test_discover_counts_unsupported_sources_and_reads_shebangs(tmp_path):
    write(tmp_path / "m.go", GO)
    write(tmp_path / "lib" / "util.lua", LUA)
    write(tmp_path / "bin" / "tool", PY_SCRIPT)
    write(tmp_path / "bin" / "serve", NODE_SCRIPT)
    write(tmp_path / "bin" / "setup", "#!/bin/sh\necho hi\n")
    write(tmp_path / "README.md", "# hi\n")
    write(tmp_path / "Makefile", "all:\n\techo hi\n")
    files, stats = discover([tmp_path])
    assert [(f.rel, f.language) for f in files] == [
        ("bin/serve", "javascript"), ("bin/tool", "python"), ("m.go", "go"),
    ]
    assert stats.unsupported_files == {"lua": 1, "shell": 1}
    assert sorted(d["path"] for d in stats.unsupported_paths) == ["bin/setup", "lib/util.lua"]
    assert stats.skipped == {"unsupported": 4}  # README.md and Makefile too, as before
    # the counters survive the JSON round trip and merge like the others
    again = ScanStats.from_dict(json.loads(json.dumps(stats.to_dict())))
    again.merge(stats)
    assert again.unsupported_files == {"lua": 2, "shell": 2} and len(again.unsupported_paths) == 4


def test_summary_counts_files_per_language_and_verbose_lists_unsupported(capsys, tmp_path):
    root = tmp_path / "p"
    write(root / "a.go", GO)
    write(root / "b.go", GO.replace("Sum", "Total"))
    write(root / "script", PY_SCRIPT)
    write(root / "x.lua", LUA)
    code, _, err = run(capsys, "clones", root, "-f", "json", "-o", tmp_path / "r.json", "--verbose")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "parsed 3 files: go 2, python 1" in lines
    assert "ignored 1 files in languages twinspect does not parse (lua 1)" in lines
    assert "  not parsed (lua): x.lua" in lines
    stats = json.loads((tmp_path / "r.json").read_text())["stats"]
    assert stats["files_by_language"] == {"go": 2, "python": 1}
    assert stats["unsupported_files"] == {"lua": 1}
    doc = json.loads((tmp_path / "r.json").read_text())
    assert {(f["path"], f["name"], f["language"]) for f in doc["fragments"]} >= {
        ("a.go", "Sum", "go"), ("b.go", "Total", "go"), ("script", "main", "python"),
    }


def test_tree_with_only_unparsed_sources_exits_2_with_one_line(capsys, tmp_path):
    write(tmp_path / "a.lua", LUA)
    write(tmp_path / "b.lua", LUA)
    write(tmp_path / "run.sh", "#!/bin/sh\necho hi\n")
    write(tmp_path / "notes.txt", "text\n")
    code, out, err = run(capsys, "clones", tmp_path, "-q")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(lines) == 1
    assert "nothing parsed: 3 source files, all in languages twinspect does not parse (lua 2, shell 1)" in lines[0]
    assert str(tmp_path) in lines[0]
    # a tree without any source file is refused the same way (issue 17: it used to report 0 fragments, exit 0)
    empty = tmp_path / "empty"
    write(empty / "notes.txt", "text\n")
    code, out, err = run(capsys, "clones", empty, "-f", "json", "-q")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and len(lines) == 1
    assert "nothing to scan: no source files found (not source code 1)" in lines[0] and str(empty) in lines[0]


def test_language_option_forces_a_registry_language(capsys, tmp_path):
    write(tmp_path / "a.txt", GO)  # not a Go extension: parsed as Go only when forced
    code, out, err = run(capsys, "clones", tmp_path / "a.txt", "--language", "golang", "-f", "json", "-q",
                         "--min-lines", "3")
    assert code == 0, err
    doc = json.loads(out)
    assert [(f["name"], f["language"]) for f in doc["fragments"]] == [("Sum", "go")]
    code, _, err = run(capsys, "clones", tmp_path, "--language", "cobol", "-q")
    assert code == 2 and "unknown language 'cobol'" in err and "Traceback" not in err
