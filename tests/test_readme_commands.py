"""README commands run as written, or with a short budget (issue 17, item 6).

Every command line of README.md's ``bash`` blocks is accounted for here, so a README command cannot
break again unnoticed:

* lines in :data:`NOT_RUN` are deliberately not run (each with its reason; the list is checked
  against the README so it cannot go stale);
* every other line must be a ``twinspect …`` command. It runs, in the README's order, as a subprocess
  of the installed ``twinspect`` entry point, in a scratch folder laid out like a clone:
  ``<tmp>/work`` (the current directory) holds ``twinspect/examples`` (the repository's example
  tree) and ``<tmp>/shared`` is the real ``../shared`` beside the repository, so ``../shared/…``
  paths resolve as in the README. Later commands read what earlier ones wrote (``clones query`` the
  index, ``deviate report`` the run, ``repair`` the search, ``fuzz report`` the campaign);
* a command the README says takes longer than :data:`AS_WRITTEN_LIMIT_S` runs with a short budget
  by the mechanical rewrite :func:`short_budget` (``--seeds N`` → ``--seeds 8``, ``--budget D`` →
  ``--budget 10s``, ``--epochs N`` → ``--epochs 1``, ``--timeout T`` → ``--timeout 20``); the
  README states its real duration (``# ~N s`` / ``~N min`` on the line or the comment above it,
  checked here). A command run as written must finish within three times the duration the README
  states (one without a stated duration: within 60 s);
* each run must exit 0, print no Python traceback, leave every ``-o`` / ``--plots`` output it names,
  and print no third-party log line on stderr (TensorFlow/absl/oneDNN/XNNPACK lines, Python
  warnings).

Commands that read ``../shared`` data skip with a reason when it is absent. The slow ones
(:data:`SLOW`) run only in the full suite; the rest — at least one per capability: clones,
similitude, models, deviate, train/compress/repair, fuzz — run in CI.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, SHARED_DIR

TWINSPECT = Path(sys.executable).parent / "twinspect"

#: README lines deliberately not run here, with the reason.
NOT_RUN: dict[str, str] = {
    'python3 -m venv .venv && .venv/bin/pip install -c constraints.txt torch==2.13.0 -e ".[all]" '
    "&& .venv/bin/twinspect clones twinspect/examples/clones":
        "the install itself (a new venv and several GB from the package registry, minutes); .ci/run does "
        "exactly this install on every CI run, and its last part, `twinspect clones twinspect/examples/clones`, "
        "is the first command of the clones tour, which runs here",
    '.venv/bin/python -m pytest -q -m "not slow or ci"':
        "the test suite itself (running it from a test would recurse); tests/test_cli_root.py checks it is "
        "the command .ci/run runs",
}

#: Commands run only in the full suite (pytest -m slow), with why they are not in CI's subset.
SLOW: dict[str, str] = {
    "twinspect clones twinspect/examples/clones -e neural --runtime onnx-int8":
        "loads the stock MiniLM encoder (~10 s, longer on a cold cache); -e semantic covers encoders in CI",
    "twinspect models compare ../shared/data/models/dflare/lenet5.h5 ../shared/data/models/dflare/lenet5-quan.lite "
    "--data mnist --format json -o models.json --plots models-plots/":
        "the first models compare line covers the capability in CI",
    "twinspect deviate --pair lenet1 --seeds 20 -a dflare -o runs/lenet1-dflare":
        "the default search (guided on this pair) and -a margin cover deviate in CI",
    "twinspect deviate --pair lenet5 --seeds 50 -a dflare --preset reference -o runs/lenet5-ref":
        "the default search (guided on this pair) and -a margin cover deviate in CI",
    "twinspect deviate --pair lenet5 --seeds 20 -a diffchaser -o runs/lenet5-dc":
        "DiffChaser's population of 1,000 per generation; the default search (guided on this pair) and -a margin cover deviate in CI",
}

#: Longest stated duration (s) of a command that runs as written; longer ones get :func:`short_budget`.
AS_WRITTEN_LIMIT_S = 20.0
#: Time limit (s) of a command without a stated duration (the README states any above ~10 s).
UNSTATED_LIMIT_S = 60.0
#: Time limit (s) of a command run with a short budget.
SHORT_BUDGET_LIMIT_S = 300.0

#: The short-budget rewrite: (pattern, replacement), applied in order.
REWRITES: list[tuple[str, str]] = [
    (r"--seeds \d+", "--seeds 8"),  # repair needs >= 5 seeds with a trigger (5 folds)
    (r"--budget \S+", "--budget 10s"),
    (r"--epochs \d+", "--epochs 1"),
    (r"--timeout \S+", "--timeout 20"),
]

#: A third-party log line on stderr: absl/glog-formatted lines (``I0000 00:00:…``, TensorFlow's
#: ``I tensorflow/…``), absl's pre-init warning, oneDNN, TFLite's XNNPACK line, Python warnings.
THIRD_PARTY_LOG = re.compile(
    r"^[IWEF]\d{4} \d\d:\d\d:|^[IWEF] tensorflow/|tensorflow/|absl|oneDNN|XNNPACK|onnxruntime.*\[[WE]:"
    r"|\b[A-Z]\w*Warning\b"
)

DURATION = re.compile(r"~\s*(\d+(?:\.\d+)?)\s*(s|min|h)\b")
_UNIT_S = {"s": 1.0, "min": 60.0, "h": 3600.0}
_OUTPUT_OPTS = {"-o", "--output", "--plots"}


@dataclass
class ReadmeCommand:
    """One command line of README.md's bash blocks.

    Attributes:
        line: The command as written, its trailing ``# comment`` removed.
        comment: The trailing comment and the comment lines right above it (the README's prose about it).
        stated_s: The duration the README states for it in seconds (``~N s|min|h``), or None.
    """

    line: str
    comment: str = ""
    stated_s: float | None = None

    @property
    def sub(self) -> str:
        """The subcommand (``clones``, ``deviate``, …): the word after ``twinspect``."""
        return shlex.split(self.line)[1]

    @property
    def long(self) -> bool:
        """Whether the README says it takes longer than :data:`AS_WRITTEN_LIMIT_S`."""
        return self.stated_s is not None and self.stated_s > AS_WRITTEN_LIMIT_S

    def to_run(self) -> str:
        """The command the test runs: :func:`short_budget` of it when long, else as written."""
        return short_budget(self.line) if self.long else self.line

    def time_limit(self) -> float:
        """Seconds the run may take: :data:`SHORT_BUDGET_LIMIT_S` when rewritten, else three times the
        stated duration plus 30 s (the machine is shared), else :data:`UNSTATED_LIMIT_S`."""
        if self.to_run() != self.line:
            return SHORT_BUDGET_LIMIT_S
        return UNSTATED_LIMIT_S if self.stated_s is None else 3 * self.stated_s + 30

    def outputs(self) -> list[str]:
        """The paths it writes (values of ``-o``, ``--output``, ``--plots``)."""
        args = shlex.split(self.line)
        return [args[i + 1] for i, a in enumerate(args[:-1]) if a in _OUTPUT_OPTS]


def short_budget(cmd: str) -> str:
    """``cmd`` with every budget option cut down by :data:`REWRITES` (other text unchanged)."""
    for pattern, repl in REWRITES:
        cmd = re.sub(pattern, repl, cmd)
    return cmd


def readme_commands() -> list[ReadmeCommand]:
    """Every command line of README.md's ``bash`` blocks, in order, with its comment and stated duration."""
    out: list[ReadmeCommand] = []
    in_bash, above = False, []  # type: tuple[bool, list[str]]
    for raw in (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if raw.startswith("```"):
            in_bash, above = raw.strip() == "```bash", []
            continue
        line = raw.strip()
        if not in_bash or not line:
            continue
        if line.startswith("#"):
            above.append(line.lstrip("# "))
            continue
        cmd, _, trailing = line.partition("  #")
        comment = " ".join([*above, trailing.strip()])
        m = DURATION.search(comment)
        stated = float(m.group(1)) * _UNIT_S[m.group(2)] if m else None
        out.append(ReadmeCommand(cmd.strip(), comment, stated))
        above = []
    return out


COMMANDS = readme_commands()
RUN = [c for c in COMMANDS if c.line not in NOT_RUN]


def _needs_shared(cmd: ReadmeCommand) -> bool:
    """Whether it reads ``../shared`` data, itself or through an earlier command's output."""
    direct = ("../shared", " --pair ", " eval ", " --data mnist", " --data cifar10")
    return any(s in f" {cmd.line} " for s in direct) or any(_needs_shared(p) for p in _producers(cmd))


def _producers(cmd: ReadmeCommand) -> list[ReadmeCommand]:
    """Earlier README commands that write a path this command reads."""
    args = set(shlex.split(cmd.line))
    earlier = RUN[: RUN.index(cmd)]
    return [c for c in earlier if args & set(c.outputs()) and c.outputs() != cmd.outputs()]


# --- static checks: the lists and the README agree ---------------------------------------------------


def test_readme_has_the_commands():
    lines = [c.line for c in COMMANDS]
    assert len(lines) >= 35
    assert "twinspect clones index twinspect/examples/clones -o examples.idx" in lines
    in_ci = {c.sub for c in RUN if c.line not in SLOW}
    for sub in ("clones", "similitude", "models", "deviate", "train", "compress", "repair", "fuzz"):
        assert sub in in_ci, f"no README command of `twinspect {sub}` runs in CI"


def test_not_run_and_slow_lists_are_not_stale():
    lines = {c.line for c in COMMANDS}
    assert set(NOT_RUN) <= lines, f"NOT_RUN names lines no longer in README.md: {set(NOT_RUN) - lines}"
    assert set(SLOW) <= lines, f"SLOW names lines no longer in README.md: {set(SLOW) - lines}"


def test_every_run_command_is_a_twinspect_command():
    others = [c.line for c in RUN if not c.line.startswith("twinspect ")]
    assert not others, f"README lines neither run here nor listed in NOT_RUN: {others}"


def test_long_commands_state_their_duration_and_ci_runs_them_short():
    for c in RUN:
        if c.line in SLOW:
            assert c.stated_s is not None, f"README states no duration for a slow command: {c.line}"
        elif c.long:
            assert c.to_run() != c.line, f"no short-budget rewrite applies to a long command run in CI: {c.line}"


def test_ci_subset_is_self_contained():
    for c in RUN:
        if c.line not in SLOW:
            slow_inputs = [p.line for p in _producers(c) if p.line in SLOW]
            assert not slow_inputs, f"{c.line} (run in CI) reads the output of slow-only {slow_inputs}"


def test_short_budget_rewrite():
    assert short_budget("twinspect deviate --pair lenet1 --seeds 50 -o runs/x") == \
        "twinspect deviate --pair lenet1 --seeds 8 -o runs/x"
    assert short_budget("twinspect fuzz run --budget 10m -o runs/fuzz") == "twinspect fuzz run --budget 10s -o runs/fuzz"
    assert short_budget("twinspect train lenet5 --epochs 4 -o m.pt") == "twinspect train lenet5 --epochs 1 -o m.pt"


def test_third_party_log_pattern():
    noisy = [
        "I0000 00:00:1795638205.879047   26763 port.cc:153] oneDNN custom operations are on.",
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
        "2026-11-25 20:23:26.1 I tensorflow/core/util/port.cc:153] oneDNN custom operations are on.",
        "/x/keras/src/layers/core/dense.py:93: UserWarning: Do not pass an `input_shape`",
        "/x/torch/ao/quantization/observer.py:229: FutureWarning: `reduce_range` will be deprecated",
    ]
    own = [
        "margin seeds ━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 50/50 0:00:55 0:00:00",
        "error: runs/mine: 2 seeds with usable inputs: too few for 5-fold cross-validation",
        "wrote models.json and models-plots/",
        "train lenet5 epoch 4/4 loss 0.054",
    ]
    assert all(THIRD_PARTY_LOG.search(line) for line in noisy)
    assert not any(THIRD_PARTY_LOG.search(line) for line in own)


def test_readme_parser_reads_comments_and_durations():
    by_line = {c.line: c for c in COMMANDS}
    idx = by_line["twinspect clones index twinspect/examples/clones -o examples.idx"]
    assert idx.outputs() == ["examples.idx"] and "persisted" in idx.comment
    assert any(c.stated_s is not None for c in COMMANDS)


# --- running them ------------------------------------------------------------------------------------

_STDERR: dict[str, str] = {}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """``<tmp>/work`` holding ``twinspect/examples``, with ``<tmp>/shared`` the real ``../shared`` if present."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "work"
    (work / "twinspect").mkdir(parents=True)
    (work / "twinspect" / "examples").symlink_to(REPO_ROOT / "twinspect" / "examples")
    if SHARED_DIR.is_dir():
        (root / "shared").symlink_to(SHARED_DIR.resolve())
    return work


def _param(c: ReadmeCommand):
    marks = [pytest.mark.slow] if c.line in SLOW else []
    return pytest.param(c, marks=marks, id=c.line)


@pytest.mark.skipif(not TWINSPECT.exists(), reason="the twinspect entry point is not installed beside this Python")
@pytest.mark.parametrize("cmd", [_param(c) for c in RUN])
def test_readme_command_runs(cmd: ReadmeCommand, workdir: Path):
    if _needs_shared(cmd) and not SHARED_DIR.is_dir():
        pytest.skip(f"needs the shared data folder {SHARED_DIR.resolve()} (absent)")
    for p in _producers(cmd):
        for out in p.outputs():
            if not (workdir / out).exists():
                pytest.fail(f"{out}, written by the earlier README command `{p.line}`, is missing")
    run, limit = cmd.to_run(), cmd.time_limit()
    env = dict(os.environ, NO_COLOR="1", COLUMNS="120")
    start = time.monotonic()
    try:
        proc = subprocess.run([str(TWINSPECT), *shlex.split(run)[1:]], cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`{run}` did not finish within {limit:.0f} s (README states "
                    f"{'nothing' if cmd.stated_s is None else f'{cmd.stated_s:.0f} s'})")
    took = time.monotonic() - start
    _STDERR[cmd.line] = proc.stderr
    assert proc.returncode == 0, f"{run} -> exit {proc.returncode} after {took:.0f} s\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for out in cmd.outputs():
        path = workdir / out
        assert path.exists() and (path.is_file() and path.stat().st_size > 0 or any(path.iterdir())), \
            f"{run} exited 0 but did not write {out}"


@pytest.mark.parametrize("cmd", [_param(c) for c in RUN])
def test_readme_command_prints_no_third_party_log_line(cmd: ReadmeCommand):
    if cmd.line not in _STDERR:
        pytest.skip("the command did not run (skipped, deselected or failed)")
    noise = [ln for ln in _STDERR[cmd.line].splitlines() if THIRD_PARTY_LOG.search(ln)]
    assert not noise, "third-party log lines on stderr:\n" + "\n".join(noise[:10])
