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
