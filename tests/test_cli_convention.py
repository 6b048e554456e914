"""Every `twinspect` command follows docs/CLI.md: shared options, --help, one-line exit-2 user errors.

The commands are read from the typer app (a new command is checked without editing this file), and
docs/CLI.md's per-command table must list exactly those commands, so neither can go stale.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from tests.cli_run import run
from twinspect.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "CLI.md"


def _leaves(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [(path, cmd)]
    return [leaf for name, sub in sorted(subs.items()) for leaf in _leaves(sub, (*path, name))]


LEAVES = dict(_leaves(typer.main.get_command(app)))


def _doc_names(cell: str) -> list[tuple[str, ...]]:
    """``clones [scan] PATH...`` -> [("clones", "scan")]; ``clones eval sscd\\|bcb`` -> two commands."""
    words: list[list[str]] = []
    for word in cell.strip("`").split():
        inner = word[1:-1] if word.startswith("[") and word.endswith("]") else word
        if not re.fullmatch(r"[a-z][a-z0-9-]*(\\\|[a-z][a-z0-9-]*)*", inner):
            break
        words.append(inner.split("\\|"))
    names: list[tuple[str, ...]] = [()]
    for alternatives in words:
        names = [(*n, a) for n in names for a in alternatives]
    return names


def _doc_table() -> dict[tuple[str, ...], dict[str, str]]:
    text = DOC.read_text()
    section = text.split("## Per command", 1)[1]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    headers = [h.strip() for h in lines[0].strip("|").split("|")]
    table: dict[tuple[str, ...], dict[str, str]] = {}
    for line in lines[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        row = dict(zip(headers, cells))
        for name in _doc_names(row["command"]):
            table[name] = row
    return table


DOC_TABLE = _doc_table()


def _options(cmd: Any) -> dict[str, Any]:
    return {opt: p for p in cmd.params if type(p).__name__.endswith("Option") for opt in (*p.opts, *p.secondary_opts)}


def test_doc_table_lists_exactly_the_commands_of_the_app():
    assert set(DOC_TABLE) == set(LEAVES), (sorted(set(LEAVES) - set(DOC_TABLE)), sorted(set(DOC_TABLE) - set(LEAVES)))


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_shared_options_follow_the_doc(path, capsys):
    cmd, row = LEAVES[path], DOC_TABLE[path]
    opts = _options(cmd)
    code, out, err = run(capsys, *path, "--help")
    assert code == 0 and "Usage" in out and err == "", err
    # every command: -q/--quiet and -v/--verbose are the same boolean flags
    for short, long in (("-q", "--quiet"), ("-v", "--verbose")):
        assert short in opts and long in opts and opts[short] is opts[long], (path, long)
        assert opts[long].is_flag
    # -f/--format with the formats the doc lists (each named in the option's help)
    formats = row["`-f` formats"]
    if formats == "–":
        assert "--format" not in opts, path
    else:
        assert opts.get("-f") is not None and opts.get("-f") is opts.get("--format"), path
        for fmt in re.findall(r"\b(table|json|csv|html|sarif)\b", formats):
            assert fmt in (opts["--format"].help or ""), (path, fmt)
        assert opts["--format"].default == "table", path
    # -o/--output (report file or artefact) where the doc lists it
    if row["`-o`"] != "–":
        assert opts.get("-o") is not None and opts.get("-o") is opts.get("--output"), path
    else:
        assert "-o" not in opts and "--output" not in opts, path
    # --plots DIR takes a directory where the doc lists it, and nowhere else
    assert ("--plots" in opts) == (row["`--plots DIR`"] != "–"), path
    if "--plots" in opts:
        assert not opts["--plots"].is_flag and opts["--plots"].metavar == "DIR", path
    # --seed only on randomised commands
    assert ("--seed" in opts) == row["`--seed`"].startswith("✓"), path


def _bad_argv(path: tuple[str, ...], cmd: Any, tmp: Path) -> list[str]:
    """A bad invocation: every argument a nonexistent path, an unknown --format value where there is
    one, the required options filled (paths inside ``tmp``, which must stay empty)."""
    argv = list(path)
    for p in cmd.params:
        if type(p).__name__.endswith("Argument"):
            argv.append(str(tmp / "missing" / f"no-{p.name}"))
    opts = _options(cmd)
    if "--format" in opts:
        argv += ["--format", "no-such-format"]
    for p in cmd.params:
        if type(p).__name__.endswith("Option") and p.required:
            value = str(tmp / "out" / p.name) if p.name in ("output", "out", "out_dir") else "no-such-value"
            argv += [p.opts[0], value]
    if len(argv) == len(path):  # no argument, no format, nothing required: a value of the wrong type
        numeric = next((p for p in cmd.params if type(p).__name__.endswith("Option")
                        and getattr(p.type, "name", "") in ("integer", "float")), None)
        argv += [numeric.opts[0], "not-a-number"] if numeric is not None else ["--no-such-option"]
    return argv + ["-q"]


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(path, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a command that wrongly wrote to the working directory would show up
    work = tmp_path / "work"
    work.mkdir()
    argv = _bad_argv(path, LEAVES[path], work)
    code, out, err = run(capsys, *argv)
    assert code == 2, (argv, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    # the line names what is wrong: the missing path, the bad value, or the option to fix
    assert re.search(r"no-such|missing|not-a-number|--[a-z]", lines[0]), lines
    assert out == "", out
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["work"], sorted(tmp_path.rglob("*"))


def test_usage_errors_are_one_line_too(capsys):
    code, out, err = run(capsys, "clones", "scan", ".", "--min-lines", "many")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Invalid value for '--min-lines'"), err
    assert lines[0].endswith("(see 'twinspect clones scan --help')"), err
    code, out, err = run(capsys, "deviate", "report")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "RUN_DIR" in err


def test_verbose_switch_is_read_from_the_arguments():
    """-v (also bundled, -qv) keeps third-party logs; option values that happen to contain a v do not count."""
    from twinspect.cli import _is_verbose

    assert _is_verbose(["clones", "x", "-v"]) and _is_verbose(["deviate", "-qv"]) and _is_verbose(["--verbose"])
    assert not _is_verbose(["clones", "x", "-q"]) and not _is_verbose(["--levels", "io,cka", "-e", "lexical"])


def _run_python(script: str) -> Any:
    """``script`` run by this interpreter in a fresh process from the repository root (its stdout/stderr captured)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_native_noise_filter_drops_start_up_lines_and_keeps_the_rest(tmp_path):
    """fd-2 lines from TensorFlow/absl/TFLite are dropped; other lines (children's too) pass unchanged."""
    script = (
        "import os, subprocess, sys\n"
        "from twinspect._quiet import filter_native_stderr\n"
        "with filter_native_stderr():\n"
        "    os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n')\n"
        "    os.write(2, b'I0000 00:00:1795638291.736724   27443 port.cc:153] oneDNN custom operations are on.\\n')\n"
        "    os.write(2, b'INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\\n')\n"
        "    os.write(2, b'a real problem\\n')\n"
        "    subprocess.run([sys.executable, '-c', \"import os; os.write(2, b'E0000 00:00:1.2 1 x.cc:1] noise\\\\nchild line\\\\n')\"])\n"
        "    print('python stderr', file=sys.stderr)\n"
    )
    res = _run_python(script)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    # fd-2 lines pass through the filter process in order; sys.stderr is rebound to the original stderr for
    # the block (so rich still sees a terminal), so where Python's own line lands among them is a race
    assert sorted(lines) == sorted(["a real problem", "child line", "python stderr"]), res.stderr
    assert [line for line in lines if line != "python stderr"] == ["a real problem", "child line"], res.stderr


def test_native_noise_filter_keeps_the_last_lines_of_a_native_abort():
    """A C++ abort's message, written just before the process dies, still reaches the terminal."""
    script = (
        "import os\n"
        "from twinspect._quiet import filter_native_stderr\n"
        "with filter_native_stderr():\n"
        "    os.write(2, b'I0000 00:00:1795638291.736724   27443 port.cc:153] oneDNN custom operations are on.\\n')\n"
        "    os.write(2, b\"terminate called after throwing an instance of 'std::runtime_error'\\n\")\n"
        "    os.abort()\n"
    )
    res = _run_python(script)
    assert res.returncode != 0
    assert res.stderr.splitlines() == ["terminate called after throwing an instance of 'std::runtime_error'"], res.stderr


def test_native_noise_filter_does_not_wait_for_processes_that_outlive_the_block():
    """A child still holding fd 2 (as a forkserver does) does not hold up the end of the block,
    and what it writes afterwards still passes through the filter."""
    script = (
        "import os, subprocess, sys, time\n"
        "from twinspect._quiet import filter_native_stderr\n"
        "with filter_native_stderr():\n"
        "    child = subprocess.Popen([sys.executable, '-c', \"import os, sys; sys.stdin.read(); "
        "os.write(2, b'I0000 00:00:1.2 1 x.cc:1] noise\\\\nlate child line\\\\n')\"], stdin=subprocess.PIPE)\n"
        "    os.write(2, b'written in the block\\n')\n"
        "    t0 = time.perf_counter()\n"
        "print(f'{time.perf_counter() - t0:.3f}', child.poll())\n"
        "child.stdin.close()\n"
        "child.wait()\n"
    )
    res = _run_python(script)
    assert res.returncode == 0, res.stderr
    seconds, alive = res.stdout.split()
    # the child was still running when the block ended, and the block did not sit out the 2 s timeout
    assert alive == "None" and float(seconds) < 1.9, res.stdout
    assert res.stderr.splitlines() == ["written in the block", "late child line"], res.stderr
