"""Crash and hang isolation of backend workers: a worker segfaults / aborts / hangs on purpose."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.fuzz import backends
from twinspect.dl.fuzz.backends import Worker
from twinspect.errors import InputError


@pytest.fixture
def inputs(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, x=np.arange(4, dtype=np.float32))
    return path


def test_segfault_abort_and_error_are_recorded_and_worker_restarts(tmp_path, inputs):
    w = Worker("selftest", ["twinspect.dl.fuzz.backends.selftest"], timeout_s=20, startup_s=20)
    try:
        r = w.run("ok", inputs, tmp_path / "o.npz")
        assert r.status == "ok"
        assert np.array_equal(np.load(tmp_path / "o.npz")["o0"], np.arange(4) * 2)
        pid = w.proc.pid
        r = w.run("segv", inputs, tmp_path / "o.npz")
        assert r.status == "crash" and r.error_type == "SIGSEGV"
        assert "Fatal Python error" in r.message and r.frames[:2] == ["__init__.py:string_at", "selftest.py:run_one"]
        r = w.run("raise", inputs, tmp_path / "o.npz")  # a fresh worker answers
        assert r.status == "error" and r.error_type == "RuntimeError" and "asked to fail" in r.message
        assert r.frames and r.frames[0].endswith(":run_one")
        assert w.proc.pid != pid and w.restarts == 1
        r = w.run("abort", inputs, tmp_path / "o.npz")
        assert r.status == "crash" and r.error_type == "SIGABRT"
        assert w.run("ok", inputs, tmp_path / "o.npz").status == "ok"
    finally:
        w.close()


def test_hang_is_killed_after_timeout(tmp_path, inputs):
    w = Worker("selftest", ["twinspect.dl.fuzz.backends.selftest"], timeout_s=1.5, startup_s=20)
    try:
        assert w.run("ok", inputs, tmp_path / "o.npz").status == "ok"
        r = w.run("hang", inputs, tmp_path / "o.npz")
        assert r.status == "timeout" and 1.0 < r.seconds < 10
        assert w.proc.poll() is not None  # killed
        assert w.run("ok", inputs, tmp_path / "o.npz").status == "ok"
    finally:
        w.close()


def test_backend_names():
    assert backends.canonical("jax") == "keras-jax" and backends.canonical("onnxruntime") == "onnxruntime"
    with pytest.raises(InputError):
        backends.canonical("mxnet")
