"""The root `twinspect` command: version, help on every command, error exit codes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import twinspect

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "twinspect", *args], capture_output=True, text=True, timeout=300
    )


def test_version():
    res = run_cli("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == f"twinspect {twinspect.__version__}"


def _commands(help_text: str) -> list[str]:
    section = help_text.split("Commands")[-1] if "Commands" in help_text else ""
    return re.findall(r"│ (\w[\w-]*)\s", section)


def test_help_on_every_command():
    res = run_cli("--help")
    assert res.returncode == 0
    commands = _commands(res.stdout)
    assert "clones" in commands
    for cmd in commands:
        sub = run_cli(cmd, "--help")
        assert sub.returncode == 0, (cmd, sub.stderr)
        assert "Usage" in sub.stdout


def test_unknown_command_is_a_usage_error():
    res = run_cli("no-such-command")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr


def test_readme_test_command_is_what_ci_runs():
    """README.md's test command and .ci/run must not drift apart."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    m = re.search(r"\.venv/bin/python -m pytest[^\n`]*", ci)
    assert m, "no pytest command in .ci/run"
    assert m.group(0).strip() in readme


def test_quiet_is_read_from_main_argv_not_sys_argv(tmp_path, monkeypatch):
    """`main([..., "--quiet"])` from Python silences library notices even when sys.argv says otherwise."""
    import logging

    from twinspect.cli import main

    monkeypatch.setattr(sys, "argv", ["twinspect"])
    out = tmp_path / "r.json"
    try:
        main(["clones", str(ROOT / "twinspect/examples/clones"), "--quiet", "--format", "json", "-o", str(out)])
    except SystemExit as exc:
        assert exc.code in (0, None)
    assert logging.getLogger("twinspect").level == logging.WARNING
    assert out.exists()
    monkeypatch.setattr(sys, "argv", ["twinspect", "--quiet"])
    try:
        main(["--version"])
    except SystemExit:
        pass
    assert logging.getLogger("twinspect").level == logging.INFO


def test_python_api_is_curated():
    """`import twinspect` exposes the main entry points listed in __all__."""
    for name in ("scan", "detect", "DetectConfig", "CloneIndex", "load_classifier", "Classifier",
                 "DFlare", "DiffChaser", "run_search", "InputError"):
        assert name in twinspect.__all__
        assert getattr(twinspect, name) is not None
    assert issubclass(twinspect.InputError, ValueError)
