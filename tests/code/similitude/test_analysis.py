"""`analyze`: what it refuses before any scoring (issue 17: empty or junk input used to exit 0)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from twinspect.code.similitude.analysis import analyze
from twinspect.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[3] / "twinspect" / "examples" / "similitude" / "c"


def test_empty_tree_is_refused(tmp_path):
    with pytest.raises(InputError, match="no source file"):
        analyze([tmp_path])


def test_one_program_is_refused(tmp_path):
    shutil.copy(EXAMPLES / "max.c", tmp_path)
    with pytest.raises(InputError, match="1 program parsed"):
        analyze([tmp_path])


def test_unparsable_second_program_is_named(tmp_path):
    shutil.copy(EXAMPLES / "max.c", tmp_path)
    (tmp_path / "broken.py").write_text("def f(:\n    return\n")
    with pytest.raises(InputError, match="broken.py"):
        analyze([tmp_path])


def test_two_programs_are_compared(tmp_path):
    shutil.copy(EXAMPLES / "max.c", tmp_path)
    shutil.copy(EXAMPLES / "min.c", tmp_path)
    r = analyze([tmp_path])
    assert r.matrix.shape == (2, 2) and sorted(r.paths) == ["max.c", "min.c"]
    assert 0.0 <= r.matrix[0, 1] < 1.0
