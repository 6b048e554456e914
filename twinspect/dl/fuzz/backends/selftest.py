"""A worker that misbehaves on purpose, for testing crash and hang isolation (no DL library imported).

Run as ``python -m twinspect.dl.fuzz.backends.selftest``. The model "path" chooses the behaviour:
``segv`` dereferences NULL (SIGSEGV), ``abort`` calls ``os.abort`` (SIGABRT), ``hang`` sleeps forever,
``raise`` raises ``RuntimeError``; anything else returns the inputs' ``x`` doubled.
"""

from __future__ import annotations

import ctypes
import os
import time

from twinspect.dl.fuzz.backends.worker import serve


def run_one(model: str, inputs: str) -> list:
    """Behave as ``model`` says (see module docstring)."""
    import numpy as np

    if model == "segv":
        ctypes.string_at(0)
    if model == "abort":
        os.abort()
    if model == "hang":
        while True:
            time.sleep(1)
    if model == "raise":
        raise RuntimeError("asked to fail")
    return [np.load(inputs)["x"] * 2]


if __name__ == "__main__":
    serve(run_one)
