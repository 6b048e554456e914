"""Third-party log noise (TensorFlow, absl, oneDNN, TFLite, Keras, torch, ONNX) kept off the terminal.

The one place that silences other libraries' start-up lines and warnings; the CLI calls
:func:`silence_third_party` before any command runs unless ``-v/--verbose`` is given.

Three layers, because the libraries log in three ways:

* **Environment variables** read by native code at import (``TF_CPP_MIN_LOG_LEVEL=3``,
  ``GRPC_VERBOSITY=ERROR``, ``GLOG_minloglevel=2``, ``TORCH_CPP_LOG_LEVEL=ERROR``). They are set in
  ``os.environ`` before the libraries are imported, so worker processes inherit them; a variable
  the user has set is left alone. ``TF_ENABLE_ONEDNN_OPTS`` is *not* changed: turning oneDNN off
  would change the numbers deviate/fuzz compare, only its notice is hidden.
* **Python warnings and loggers**: ``UserWarning``/``DeprecationWarning``/``FutureWarning`` raised
  inside keras, tensorflow, torch, onnx, onnxruntime, jax, h5py, absl, ml_dtypes, ai_edge_litert are
  ignored, and the ``tensorflow``, ``absl``, ``keras``, ``jax`` and ``h5py`` loggers are set to
  ERROR. :data:`ENV_FLAG` (``TWINSPECT_QUIET_LOGS=1``) is set too: ``import twinspect`` in a worker
  process (``deviate --workers``, ``python -m twinspect.dl.fuzz.backends...``) applies the same
  filters there.
* **Native lines written straight to file descriptor 2** that ignore the variables above (TF 2.16+
  logs "oneDNN custom operations are on" through absl before ``absl::InitializeLog()``, TFLite's
  "Created TensorFlow Lite XNNPACK delegate"): :func:`filter_native_stderr` routes fd 2 through a
  pipe and drops the lines matching :data:`NOISE_PATTERNS`; every other line is passed on as written.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator

#: Set in ``os.environ`` by :func:`silence_third_party`; ``import twinspect`` in a child process
#: that sees it applies :func:`silence_python_warnings`.
ENV_FLAG = "TWINSPECT_QUIET_LOGS"

#: Environment variables read by native code of TensorFlow/absl/gRPC/torch (set only if unset).
QUIET_ENV: dict[str, str] = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "GRPC_VERBOSITY": "ERROR",
    "GLOG_minloglevel": "2",
    "TORCH_CPP_LOG_LEVEL": "ERROR",
}

#: Top-level packages whose UserWarning/DeprecationWarning/FutureWarning are ignored.
NOISY_PACKAGES: tuple[str, ...] = (
    "keras", "tf_keras", "tensorflow", "torch", "torchvision", "onnx", "onnxruntime", "onnxscript", "jax",
    "jaxlib", "h5py", "absl", "ml_dtypes", "ai_edge_litert", "google", "tensorboard", "flatbuffers",
)

#: Python loggers set to ERROR.
NOISY_LOGGERS: tuple[str, ...] = ("tensorflow", "absl", "keras", "jax", "jax._src", "h5py", "onnxruntime")

#: Lines written to fd 2 by native code that :func:`filter_native_stderr` drops.
NOISE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"^[IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ",  # absl/glog C++ lines (fatal F lines are kept)
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] \S+:\d+\] ",  # older TensorFlow C++ log format
    r"^INFO: (Created|Initialized) TensorFlow Lite",
    r"^To enable the following instructions: .* rebuild TensorFlow",
    r"^\[[IW]\d{4} \d\d:\d\d:\d\d",  # torch C++ (c10) info/warning lines
    r"^oneDNN custom operations are on",
))


def is_noise(line: str) -> bool:
    """Whether one stderr line is third-party start-up noise (see :data:`NOISE_PATTERNS`)."""
    return any(p.search(line) for p in NOISE_PATTERNS)


def silence_python_warnings() -> None:
    """Ignore library warnings raised inside :data:`NOISY_PACKAGES`; set :data:`NOISY_LOGGERS` to ERROR."""
    module = r"(" + "|".join(re.escape(p) for p in NOISY_PACKAGES) + r")(\..*)?"
    for category in (UserWarning, DeprecationWarning, FutureWarning, RuntimeWarning):
        warnings.filterwarnings("ignore", category=category, module=module)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def silence_third_party() -> None:
    """Silence third-party logs in this process and in the processes it starts (see the module doc).

    Call it before TensorFlow, torch or Keras are imported; environment variables the user has set
    are kept.
    """
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    os.environ[ENV_FLAG] = "1"
    silence_python_warnings()


#: The filter process's program: copy stdin to stdout line by line, dropping lines that match one of
#: the regular expressions given as JSON in argv[1]; at the first line ending with the marker argv[3]
#: (the end of the block) it writes one byte to the file descriptor argv[2]. It ignores SIGINT (Ctrl-C reaches the whole
#: process group; the filter must outlive the command to pass on its last lines) and ends at EOF.
_FILTER_PROGRAM = """
import json, os, re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
pats = [re.compile(p) for p in json.loads(sys.argv[1])]
ack, mark = int(sys.argv[2]), sys.argv[3].encode()
src, pending = sys.stdin.buffer, b""
def put(raw):
    if not any(p.search(raw.decode("utf-8", "replace")) for p in pats):
        os.write(1, raw)
while True:
    chunk = os.read(src.fileno(), 65536)
    if not chunk:
        break
    pending += chunk
    *lines, pending = pending.split(b"\\n")
    for raw in lines:
        if ack >= 0 and raw.endswith(mark):  # the block ended: all it wrote before is passed on
            if raw[:-len(mark)]:
                put(raw[:-len(mark)] + b"\\n")
            os.write(ack, b"1")
            os.close(ack)
            ack = -1
        else:
            put(raw + b"\\n")
if pending:
    put(pending)
"""


@contextlib.contextmanager
def filter_native_stderr() -> Iterator[None]:
    """Drop third-party noise lines that native code writes to file descriptor 2, for the block.

    File descriptor 2 (inherited by child processes) is pointed at a pipe read by a small filter
    *process* (``python -I -S``, stdlib only), which copies every line that is not :func:`is_noise` to
    the original stderr. Being a separate process, it passes on everything written before a native
    crash of this process (``terminate called after ...`` followed by an abort): a thread would die
    with the process and lose those lines. When ``sys.stderr`` wrote to fd 2, it is rebound to the
    original stderr for the block, so rich progress bars still see a terminal. At the end, fd 2 is
    restored once the filter has passed on everything written before the end of the block (a
    marker line it acknowledges on a second pipe; at most 2 s), without waiting for the processes
    that outlive the block and still hold the pipe — a ``forkserver`` and its workers live until
    the interpreter exits, which used to cost every run the full 2 s. The filter keeps passing on
    what they write and ends when the last of them closes the pipe. Does nothing
    (yields at once) when fd 2 cannot be duplicated or the filter cannot start.
    """
    import json
    import select
    import subprocess

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_fd, write_fd = os.pipe()
    ack_r, ack_w = os.pipe()
    mark = f"\x1etwinspect-end-of-block-{os.getpid()}-{os.urandom(6).hex()}"
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER_PROGRAM,
                                 json.dumps([p.pattern for p in NOISE_PATTERNS]), str(ack_w), mark],
                                stdin=read_fd, stdout=saved, stderr=saved, close_fds=True, pass_fds=(ack_w,))
    except OSError:
        for fd in (read_fd, write_fd, saved, ack_r, ack_w):
            os.close(fd)
        yield
        return
    os.close(read_fd)
    os.close(ack_w)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    old_stderr = sys.stderr
    try:
        rebind = old_stderr.fileno() == 2
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        rebind = False
    if rebind:
        sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(saved), "wb", buffering=0), encoding=old_stderr.encoding,
                                      errors="backslashreplace", line_buffering=True, write_through=True)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if rebind:
            with contextlib.suppress(Exception):
                sys.stderr.close()
            sys.stderr = old_stderr
        with contextlib.suppress(OSError):
            os.write(2, mark.encode() + b"\n")  # after everything this process wrote to the pipe
        os.dup2(saved, 2)  # closes this process's pipe end; the filter ends once children close theirs
        os.close(saved)
        with contextlib.suppress(OSError, ValueError):
            select.select([ack_r], [], [], 2.0)  # the filter has passed the block's output on (or died)
        os.close(ack_r)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)  # reaped now when nothing else holds the pipe
