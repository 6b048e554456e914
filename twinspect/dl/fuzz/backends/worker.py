"""A long-lived worker process per system under test, with per-model timeout and crash/hang isolation.

The parent writes one JSON request per line on the worker's stdin (``{"model": path, "inputs": path,
"out": path}``); the worker loads the model, runs it on the inputs (``.npz`` with array ``x``), saves the
outputs to ``out`` (``.npz`` with ``o0``, ``o1``, ...) and answers one JSON line on stdout
(``{"ok": true}`` or ``{"ok": false, "error_type", "message", "frames"}``). A worker that dies (segfault,
abort, OOM kill) or exceeds the timeout is recorded as a crash/hang with its signal and the tail of its
stderr, and is restarted on the next request. Library imports are paid once per worker life.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class WorkerResult:
    """Outcome of one model execution on one system.

    Attributes:
        status: ``"ok"``, ``"error"`` (a Python exception in the worker), ``"crash"`` (the process died) or
            ``"timeout"`` (killed after the time limit).
        error_type: exception class name, or ``"SIGSEGV"`` etc. for crashes, ``"Timeout"`` for hangs.
        message: exception message (first 500 characters) or stderr tail.
        frames: top stack frames ``"file:function"`` (library frames first).
        seconds: wall time of the request in seconds.
        out: path of the saved outputs when ``status == "ok"``.
    """

    status: str
    error_type: str = ""
    message: str = ""
    frames: list[str] = field(default_factory=list)
    seconds: float = 0.0
    out: str | None = None

    def to_json(self) -> dict:
        return dict(self.__dict__)


class Worker:
    """Parent-side handle of one worker process (``python -m <module> <args>``).

    Args:
        system: system name (recorded in results).
        argv: module and arguments run with ``python -m``.
        timeout_s: per-request time limit in seconds (the first request also gets ``startup_s``).
        startup_s: extra seconds allowed for the worker's imports on its first request.
        env: extra environment variables.
    """

    def __init__(self, system: str, argv: list[str], timeout_s: float = 60.0, startup_s: float = 120.0,
                 env: dict[str, str] | None = None):
        self.system = system
        self.argv = argv
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self._stderr: Path | None = None
        self._fresh = False
        self.restarts = 0

    def _start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", TF_CPP_MIN_LOG_LEVEL="3", **self.env)
        fd, path = tempfile.mkstemp(prefix=f"twinspect-{self.system}-", suffix=".stderr")
        os.close(fd)
        self._stderr = Path(path)
        self.proc = subprocess.Popen([sys.executable, "-m", *self.argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=open(path, "wb"), env=env)
        self._fresh = True

    def _stderr_tail(self, n: int = 2000) -> str:
        try:
            return self._stderr.read_text(errors="replace")[-n:] if self._stderr else ""
        except OSError:
            return ""

    def run(self, model: str | Path, inputs: str | Path, out: str | Path) -> WorkerResult:
        """Run ``model`` on ``inputs`` in the worker; never raises for a worker failure."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
            self._start()
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        limit = self.timeout_s + (self.startup_s if self._fresh else 0.0)
        t0 = time.perf_counter()
        req = json.dumps({"model": str(model), "inputs": str(inputs), "out": str(out)}) + "\n"
        try:
            self.proc.stdin.write(req.encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = limit - (time.perf_counter() - t0)
            if left <= 0:
                self.kill()
                return WorkerResult("timeout", "Timeout", f"no answer within {limit:.0f} s",
                                    seconds=time.perf_counter() - t0)
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                line += chunk
        self._fresh = False
        dt = time.perf_counter() - t0
        if not line.endswith(b"\n"):
            code = self.proc.wait()
            name = signal.Signals(-code).name if code < 0 and -code in signal.Signals._value2member_map_ else f"exit {code}"
            tail = self._stderr_tail()
            return WorkerResult("crash", name, tail, frames=crash_frames(tail), seconds=dt)
        ans = json.loads(line.decode())
        if ans.get("ok"):
            return WorkerResult("ok", seconds=dt, out=str(out))
        return WorkerResult("error", ans.get("error_type", ""), ans.get("message", ""), ans.get("frames", []), dt)

    def kill(self) -> None:
        """Kill the worker process (it restarts on the next request)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Stop the worker and remove its stderr file."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                assert self.proc.stdin
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.kill()
        if self._stderr is not None:
            self._stderr.unlink(missing_ok=True)


def crash_frames(text: str, n: int = 3) -> list[str]:
    """Innermost ``n`` Python frames ``"file:function"`` of a faulthandler dump (``PYTHONFAULTHANDLER``)."""
    import re

    found = re.findall(r'File "([^"]+)", line \d+ in (\S+)', text)
    return [f"{Path(f).name}:{fn}" for f, fn in found[:n]]


def frames_of(exc: BaseException, n: int = 3) -> list[str]:
    """Top ``n`` innermost stack frames of ``exc`` as ``"module_file:function"``."""
    tb = traceback.extract_tb(exc.__traceback__)
    return [f"{Path(f.filename).name}:{f.name}" for f in tb[-n:]][::-1]


def serve(run_one: Callable[[str, str], list]) -> None:
    """Worker main loop: read requests from stdin, call ``run_one(model, inputs)`` → list of arrays, answer.

    Library output printed by ``run_one`` goes to stderr so that stdout carries only answers.
    """
    import numpy as np

    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            outs = run_one(req["model"], req["inputs"])
            arrays: dict = {f"o{i}": np.asarray(o) for i, o in enumerate(outs)}
            np.savez(req["out"], **arrays)
            ans: dict = {"ok": True}
        except Exception as exc:  # noqa: BLE001 - every library error is a result, not a worker death
            ans = {"ok": False, "error_type": type(exc).__name__, "message": str(exc)[:500], "frames": frames_of(exc)}
        real_stdout.write(json.dumps(ans) + "\n")
        real_stdout.flush()
