"""Atomic writes and user-facing errors shared by every capability."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twinspect._io import atomic_path, atomic_write, read_json, require_readable, write_json
from twinspect.errors import InputError, TwinspectError


def test_atomic_write_replaces_only_on_success(tmp_path):
    out = tmp_path / "sub" / "report.json"
    write_json(out, {"a": np.int64(3), "b": np.float32(0.5), "c": np.arange(2)})
    assert json.loads(out.read_text()) == {"a": 3, "b": 0.5, "c": [0, 1]}

    with pytest.raises(RuntimeError):
        with atomic_write(out) as fh:
            fh.write('{"half": ')
            raise RuntimeError("interrupted mid-write")
    # the old content is intact and no temporary file is left behind
    assert json.loads(out.read_text())["a"] == 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.json"]


def test_atomic_write_survives_keyboard_interrupt(tmp_path):
    out = tmp_path / "x.txt"
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(out) as fh:
            fh.write("partial")
            raise KeyboardInterrupt
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_keeps_suffix_for_format_sniffing_writers(tmp_path):
    out = tmp_path / "arrays.npz"
    with atomic_path(out) as tmp:
        assert tmp.suffix == ".npz" and tmp.parent == tmp_path
        np.savez(tmp, x=np.ones(3))
    assert np.load(out)["x"].sum() == 3


def test_read_json_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="bad.json: not valid JSON"):
        read_json(bad)
    with pytest.raises(InputError, match="missing.json: file does not exist"):
        read_json(tmp_path / "missing.json")


def test_require_readable(tmp_path):
    assert require_readable(tmp_path) == tmp_path
    with pytest.raises(InputError, match="nope: path does not exist"):
        require_readable(tmp_path / "nope")


def test_error_message_format():
    err = TwinspectError("index is corrupted", path="idx", hint="rebuild it")
    assert str(err) == "idx: index is corrupted (rebuild it)"
    assert err.exit_code == 2


def test_outputs_get_umask_mode_not_mkstemp_0600(tmp_path):
    import os

    out = tmp_path / "r.json"
    write_json(out, {})
    mask = os.umask(0)
    os.umask(mask)
    assert (out.stat().st_mode & 0o777) == (0o666 & ~mask)


def test_atomic_directory_replaces_old_only_when_new_is_complete(tmp_path):
    from twinspect._io import atomic_directory

    target = tmp_path / "index"
    with atomic_directory(target) as d:
        (d / "v").write_text("1")
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as d:
            (d / "v").write_text("2")
            raise RuntimeError("crash while writing")
    assert (target / "v").read_text() == "1"
    with atomic_directory(target) as d:
        (d / "v").write_text("3")
    assert (target / "v").read_text() == "3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]  # no temporary or old copies left


def test_atomic_directory_keeps_old_when_swap_fails(tmp_path, monkeypatch):
    """A failure at the moment of the swap must leave the complete old directory in place."""
    from pathlib import Path

    import twinspect._io as io

    target = tmp_path / "index"
    with io.atomic_directory(target) as d:
        (d / "v").write_text("old")
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)  # the portable path
    real_rename = Path.rename

    def failing_rename(self, dest):
        if Path(dest) == target and self.name.startswith(".index.tmp-"):
            raise OSError("disk full")  # the new directory cannot be moved in
        return real_rename(self, dest)

    monkeypatch.setattr(Path, "rename", failing_rename)
    with pytest.raises(OSError):
        with io.atomic_directory(target) as d:
            (d / "v").write_text("new")
    assert (target / "v").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_user_errors_are_value_errors_and_outputs_onto_directories_fail_clearly(tmp_path):
    from twinspect.errors import IndexFormatError, ModelError

    for cls in (InputError, IndexFormatError, ModelError):
        assert issubclass(cls, ValueError) and issubclass(cls, TwinspectError)
    with pytest.raises(InputError, match="is a directory"):
        write_json(tmp_path, {})
    with pytest.raises(InputError, match="is a directory"):
        with atomic_path(tmp_path):
            pass
