"""Code level of model clone analysis: copydetect scores are the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from twinspect.dl.modelclones.source import Program, copydetect_scores, stable_kgram_hashes

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = (
    "from pathlib import Path\n"
    "from twinspect.dl.modelclones.source import Program, copydetect_scores\n"
    "P = [Program(n, (n,), Path(n).read_text(), 'python', '.py') for n in ('twinspect/dl/train.py', 'twinspect/dl/compress.py')]\n"
    "print(repr(copydetect_scores(P)))\n"
)


def test_copydetect_scores_do_not_depend_on_the_hash_seed():
    outs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        outs.add(res.stdout)
    assert len(outs) == 1  # copydetect's own hash() differed per process (0.148 vs 0.138 on one pair)
    m = eval(outs.pop())  # noqa: S307 - our own repr of a list of floats
    assert m[0][0] == m[1][1] == 1.0 and 0.0 < m[0][1] < 1.0


def test_copy_scores_one_and_library_left_unpatched():
    import copydetect.utils

    text = (ROOT / "twinspect" / "dl" / "train.py").read_text()
    m = copydetect_scores([Program("a.py", ("a.py",), text, "python", ".py"),
                           Program("b.py", ("b.py",), text, "python", ".py")])
    assert m[0][1] == m[1][0] == 1.0
    assert copydetect.utils.hashed_kgrams is not stable_kgram_hashes
    h = stable_kgram_hashes("abcdefg", 3)
    assert h.dtype == np.int64 and len(h) == 5 and h[0] == stable_kgram_hashes("abcxyz", 3)[0]
