"""Worker pools stop when their driver is killed from outside (twinspect._mp.exit_with_parent)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest


def _children_of_pids(pids: list[int]) -> list[int]:
    return [p for p in pids if os.path.exists(f"/proc/{p}")]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_pool_workers_exit_when_the_driver_is_killed(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent("""
        import os, sys, threading, time
        from twinspect.code.executors import LocalPool

        def slow(shared, shard):
            # one write(2) of under PIPE_BUF bytes is atomic on a pipe; print() writes the text and
            # the newline separately, and two workers' lines interleaved ("worker 19019worker ...")
            os.write(1, f"worker {os.getpid()}\\n".encode())
            time.sleep(120)
            return shard

        if __name__ == "__main__":
            it = LocalPool(2).map(slow, [1, 2], shared=None)
            threading.Thread(target=lambda: next(it), daemon=True).start()
            time.sleep(120)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    workers: list[int] = []
    deadline = time.time() + 60
    assert proc.stdout is not None
    while len(workers) < 2 and time.time() < deadline:
        line = proc.stdout.readline()
        if line.startswith("worker "):
            workers.append(int(line.split()[1]))
    assert len(workers) == 2, "the pool did not start its two workers"
    assert _children_of_pids(workers) == workers
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 15
    while _children_of_pids(workers) and time.time() < deadline:
        time.sleep(0.5)
    left = _children_of_pids(workers)
    for pid in left:  # do not leak them into the rest of the test session
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed driver"
