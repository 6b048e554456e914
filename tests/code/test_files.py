"""Source discovery: skip rules, .gitignore, exclude globs, relative paths, errors."""

from __future__ import annotations

import os
import sys

import pytest

from twinspect.code.files import ScanStats, discover, scan_base
from twinspect.code.fragments import mine, read_source
from twinspect.errors import InputError

PY_FUNC = "def f(x):\n    y = x + 1\n    z = y * 2\n    w = z - 3\n    v = w // 4\n    return v\n"


def write(path, text="", data=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        path.write_bytes(data)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def rels(files):
    return [f.rel for f in files]


def test_directory_scan_is_sorted_relative_and_typed(tmp_path):
    write(tmp_path / "src" / "b.py", PY_FUNC)
    write(tmp_path / "src" / "a" / "X.java", "class X {}")
    write(tmp_path / "lib.c", "int x;")
    write(tmp_path / "lib.hpp", "int y;")
    write(tmp_path / "README.md", "# hi")
    files, stats = discover([tmp_path])
    assert rels(files) == ["lib.c", "lib.hpp", "src/a/X.java", "src/b.py"]
    assert [f.language for f in files] == ["c", "cpp", "java", "python"]
    assert all(f.path.is_absolute() and f.path.is_file() for f in files)
    assert files[-1].size == len(PY_FUNC.encode())
    assert stats.files_seen == 4
    assert stats.skipped == {"unsupported": 1}


def test_file_argument_uses_its_name_and_multiple_roots_are_unique(tmp_path):
    write(tmp_path / "one" / "m.py", PY_FUNC)
    write(tmp_path / "two" / "m.py", PY_FUNC)
    files, _ = discover([tmp_path / "one" / "m.py"])
    assert rels(files) == ["m.py"]
    files, _ = discover([tmp_path / "one", tmp_path / "two"])
    assert rels(files) == ["one/m.py", "two/m.py"]
    assert scan_base([tmp_path / "one", tmp_path / "two"]) == str(tmp_path)
    # the same file twice is listed once
    files, stats = discover([tmp_path / "one", tmp_path / "one" / "m.py"])
    assert rels(files) == ["m.py"] and stats.files_seen == 1


def test_nonexistent_path_is_an_input_error_naming_it(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(InputError) as exc:
        discover([missing])
    assert str(missing) in str(exc.value)
    assert exc.value.exit_code == 2


def test_empty_directory_gives_no_files_and_no_error(tmp_path):
    files, stats = discover([tmp_path])
    assert files == [] and stats.files_seen == 0


def test_binary_undecodable_too_large(tmp_path):
    write(tmp_path / "ok.py", PY_FUNC)
    write(tmp_path / "bin.c", data=b"int x;\x00\x01\x02")
    write(tmp_path / "latin1.py", data="# caf\xe9\nx = '\xe9'\n".encode("latin-1"))
    write(tmp_path / "bom.py", data=b"\xef\xbb\xbf" + PY_FUNC.encode())
    write(tmp_path / "big.py", "x = 1\n" * 100)
    write(tmp_path / "utf16.py", data="x = 'caf\xe9'\n".encode("utf-16-le"))  # NUL bytes: binary
    write(tmp_path / "c1.py", data=b"x = 1\n\x81\x8d\n")  # not UTF-8, not Windows-1252, C1 controls
    fragments, stats = mine([tmp_path], max_file_bytes=300)
    assert stats.skipped.get("binary") == 2
    assert stats.skipped.get("undecodable") == 1
    assert stats.skipped.get("too_large") == 1
    assert stats.files_seen == 7
    assert stats.files_parsed == 3  # ok.py, bom.py and latin1.py (Windows-1252 fallback)
    assert stats.files_decoded_fallback == 1
    assert stats.to_dict()["skipped_files"] == [
        {"path": "big.py", "reason": "too_large"}, {"path": "bin.c", "reason": "binary"},
        {"path": "c1.py", "reason": "undecodable"}, {"path": "utf16.py", "reason": "binary"},
    ]
    # BOM stripped: the fragment of bom.py starts at line 1 with "def"
    bom = [f for f in fragments if f.path == "bom.py"]
    assert len(bom) == 1 and bom[0].text.startswith("def f")


def test_read_source_normalises_crlf_and_counts_skips(tmp_path):
    files, stats = discover([write(tmp_path / "w.py", data=b"def f():\r\n    return 1\r\n")])
    assert read_source(files[0], stats) == "def f():\n    return 1\n"
    latin = write(tmp_path / "latin.py", data=b"# caf\xe9 \x93quoted\x94\nx = 1\n")
    files, stats = discover([latin])
    assert read_source(files[0], stats) == "# caf\xe9 \u201cquoted\u201d\nx = 1\n"
    assert stats.files_decoded_fallback == 1 and stats.skipped == {}
    bad = write(tmp_path / "bad.py", data=b"x = 1\n\x81\x9d\n")
    files, stats = discover([bad])
    assert read_source(files[0], stats) is None
    assert stats.skipped == {"undecodable": 1}


def test_exclude_globs(tmp_path):
    write(tmp_path / "vendor" / "lib" / "v.py", PY_FUNC)
    write(tmp_path / "pkg" / "core.py", PY_FUNC)
    write(tmp_path / "pkg" / "core_test.py", PY_FUNC)
    write(tmp_path / "build" / "gen.c", "int x;")
    files, stats = discover([tmp_path], exclude=["vendor/**", "*_test.py", "build/"])
    assert rels(files) == ["pkg/core.py"]
    assert stats.skipped["excluded"] >= 3


def test_gitignore_root_nested_and_negation(tmp_path):
    write(tmp_path / ".gitignore", "*.gen.py\nout/\n")
    write(tmp_path / "a.py", PY_FUNC)
    write(tmp_path / "a.gen.py", PY_FUNC)
    write(tmp_path / "out" / "b.py", PY_FUNC)
    write(tmp_path / "sub" / ".gitignore", "local_*.py\n!keep.gen.py\n")
    write(tmp_path / "sub" / "local_x.py", PY_FUNC)
    write(tmp_path / "sub" / "keep.gen.py", PY_FUNC)
    write(tmp_path / "sub" / "c.py", PY_FUNC)
    write(tmp_path / "other" / "local_y.py", PY_FUNC)  # nested rule applies only under sub/
    write(tmp_path / ".git" / "hooks" / "h.py", PY_FUNC)
    files, stats = discover([tmp_path])
    assert rels(files) == ["a.py", "other/local_y.py", "sub/c.py", "sub/keep.gen.py"]
    assert stats.skipped["gitignored"] == 3  # a.gen.py, out/ (pruned), sub/local_x.py
    files, _ = discover([tmp_path], respect_gitignore=False)
    assert "a.gen.py" in rels(files) and "out/b.py" in rels(files)
    assert not any(r.startswith(".git/") for r in rels(files))


@pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32", reason="needs symlinks")
def test_symlink_loop_does_not_hang(tmp_path):
    write(tmp_path / "d" / "a.py", PY_FUNC)
    os.symlink(tmp_path / "d", tmp_path / "d" / "loop")
    os.symlink(tmp_path / "missing.py", tmp_path / "d" / "dangling.py")
    files, stats = discover([tmp_path])
    assert rels(files) == ["d/a.py"]
    assert stats.skipped.get("unreadable") == 1  # the dangling link


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="needs POSIX permissions, non-root")
def test_unreadable_file_inside_tree_is_counted_not_fatal(tmp_path):
    write(tmp_path / "a.py", PY_FUNC)
    secret = write(tmp_path / "secret.py", PY_FUNC)
    secret.chmod(0)
    try:
        fragments, stats = mine([tmp_path])
        assert [f.path for f in fragments] == ["a.py"]
        assert stats.skipped.get("unreadable") == 1
        with pytest.raises(InputError, match="permission denied"):
            discover([secret])
    finally:
        secret.chmod(0o644)


def test_language_override(tmp_path):
    write(tmp_path / "a.h", "class A { public: int f() { return 1; } };")
    files, _ = discover([tmp_path], language="cpp")
    assert [f.language for f in files] == ["cpp"]
    txt = write(tmp_path / "prog.txt", "int main() { return 0; }")
    files, _ = discover([txt], language="c")
    assert [(f.rel, f.language) for f in files] == [("prog.txt", "c")]
    with pytest.raises(InputError):
        discover([tmp_path], language="cobol")


def test_scanstats_merge_and_dict_roundtrip():
    a = ScanStats(files_seen=2, fragments=5, skipped={"binary": 1})
    b = ScanStats(files_seen=1, fragments=1, fragments_too_short=3, skipped={"binary": 2, "excluded": 1})
    b.skip("too_large", path="z.py")
    b.skip("excluded", path="vendor/x.py")  # a deliberate exclusion: counted, not listed
    a.merge(b)
    assert a.skipped_files == [{"path": "z.py", "reason": "too_large"}]
    d = a.to_dict()
    assert d["files_seen"] == 3 and d["fragments"] == 6 and d["fragments_too_short"] == 3
    assert d["skipped"] == {"excluded": 2, "binary": 3, "too_large": 1}
    assert ScanStats.from_dict(d) == a


def test_file_vanishing_before_read_is_counted_unreadable(tmp_path):
    path = write(tmp_path / "gone.py", PY_FUNC)
    files, stats = discover([tmp_path])
    path.unlink()
    assert read_source(files[0], stats) is None
    assert stats.skipped == {"unreadable": 1}


def test_exclude_matches_reported_paths_with_several_roots(tmp_path):
    write(tmp_path / "src" / "a.py", PY_FUNC)
    write(tmp_path / "tests" / "a.py", PY_FUNC)
    write(tmp_path / "tests" / "b.py", PY_FUNC)
    files, stats = discover([tmp_path / "src", tmp_path / "tests"], exclude=["tests/b.py"])
    assert rels(files) == ["src/a.py", "tests/a.py"]
    files, _ = discover([tmp_path / "src" / "a.py", tmp_path / "tests" / "b.py"], exclude=["tests/**"])
    assert rels(files) == ["src/a.py"]
