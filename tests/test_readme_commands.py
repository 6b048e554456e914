"""README commands run as written (issue 17, item 6).

Every ``twinspect clones …`` and ``twinspect similitude …`` line of README.md's ``bash`` blocks is run
in the README's order, as a subprocess of the installed ``twinspect`` entry point, in a scratch folder
where ``twinspect/examples`` is the repository's example tree — so a README command cannot break
unnoticed. Lines that need ``../shared`` data (``clones eval``) or load the stock MiniLM model
(``-e neural``) run only in the full suite (marked slow); the DL commands (models, deviate, train,
fuzz) take minutes to hours and are not run here.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

TWINSPECT = Path(sys.executable).parent / "twinspect"


def readme_commands(prefixes: tuple[str, ...] = ("twinspect clones", "twinspect similitude")) -> list[str]:
    """The README's shell lines starting with one of ``prefixes``, trailing ``# comments`` removed."""
    out, in_bash = [], False
    for line in (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if in_bash and line.startswith(prefixes):
            out.append(line.split("  #")[0].strip())
    return out


COMMANDS = readme_commands()


def _slow(cmd: str) -> bool:
    return " eval " in f" {cmd} " or "-e neural" in cmd


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A scratch folder whose ``twinspect/examples`` is the repository's example tree."""
    root = tmp_path_factory.mktemp("readme")
    (root / "twinspect").mkdir()
    (root / "twinspect" / "examples").symlink_to(REPO_ROOT / "twinspect" / "examples")
    return root


def test_readme_has_the_commands():
    assert len(COMMANDS) >= 15
    assert "twinspect clones index twinspect/examples/clones -o examples.idx" in COMMANDS


@pytest.mark.skipif(not TWINSPECT.exists(), reason="the twinspect entry point is not installed beside this Python")
@pytest.mark.parametrize("cmd", [pytest.param(c, marks=[pytest.mark.slow] if _slow(c) else []) for c in COMMANDS])
def test_readme_command_runs(cmd: str, workdir: Path):
    args = shlex.split(cmd)
    env = dict(os.environ, NO_COLOR="1", COLUMNS="120")
    proc = subprocess.run([str(TWINSPECT), *args[1:]], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{cmd}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
