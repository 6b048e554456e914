"""``twinspect clones --cache DIR``: the parse checkpoint gives the report of an uncached scan, re-parses only
the files that changed, resumes after an interruption, and rejects what it cannot use with exit 2."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli_run import run
from twinspect.code import fragments
from twinspect.code.checkpoint import ParseCache
from twinspect.code.clones import DetectConfig, scan

VOLATILE = ("timings", "parse_cache", "stage_cache", "executor", "workers")


def _view(report) -> dict:
    d = report.to_json_dict()
    d["stats"] = {k: v for k, v in d["stats"].items() if k not in VOLATILE}
    return d


def test_cached_scans_give_the_uncached_report_and_parse_only_changed_files(email_tree, tmp_path):
    cache = tmp_path / "cache"
    files = len(list(email_tree.rglob("*.py")))
    reference = _view(scan(email_tree, DetectConfig()))
    first = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert first.stats["parse_cache"] == {"hits": 0, "parsed": files, "reset": False}
    assert _view(first) == reference
    second = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert second.stats["parse_cache"] == {"hits": files, "parsed": 0, "reset": False}
    assert _view(second) == reference

    # an edit: one function copied into another file (a new clone pair) and one file removed
    src = (email_tree / "quoprimime.py").read_text()
    start = src.index("def body_encode(")
    end = src.index("\ndef ", start + 1)
    with open(email_tree / "base64mime.py", "a") as fh:
        fh.write("\n\n" + src[start:end].replace("def body_encode(", "def body_encode_copy(") + "\n")
    (email_tree / "encoders.py").unlink()
    third = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert third.stats["parse_cache"] == {"hits": files - 2, "parsed": 1, "reset": False}
    fresh = _view(scan(email_tree, DetectConfig()))
    assert _view(third) == fresh
    frags = fresh["fragments"]
    copy = next(i for i, f in enumerate(frags) if f["name"] == "body_encode_copy")
    assert any(copy in (p["a"], p["b"]) for p in fresh["pairs"])


def test_other_mining_options_empty_the_cache(email_tree, tmp_path):
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(), cache_dir=cache)
    other = scan(email_tree, DetectConfig(min_lines=10), cache_dir=cache)
    assert other.stats["parse_cache"]["reset"] is True and other.stats["parse_cache"]["hits"] == 0
    assert _view(other) == _view(scan(email_tree, DetectConfig(min_lines=10)))


def test_an_interrupted_run_resumes_from_the_shards_it_stored(email_tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setattr(fragments, "_FILES_PER_TASK", 4)
    real = fragments._mine_run_each
    calls = {"n": 0}

    def dies_on_third_shard(options, files):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(options, files)

    monkeypatch.setattr(fragments, "_mine_run_each", dies_on_third_shard)
    with pytest.raises(KeyboardInterrupt):
        scan(email_tree, DetectConfig(), cache_dir=cache)
    monkeypatch.setattr(fragments, "_mine_run_each", real)
    resumed = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert resumed.stats["parse_cache"]["hits"] == 8  # the two shards stored before the interruption
    assert _view(resumed) == _view(scan(email_tree, DetectConfig()))


def test_a_file_edited_with_its_size_and_mtime_kept_is_not_misread(email_tree, tmp_path):
    # the key is (size, mtime_ns, language): a same-size edit with a new mtime is parsed again
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(), cache_dir=cache)
    path = email_tree / "charset.py"
    text = path.read_text()
    path.write_text(text.replace("def get_body_encoding(", "def get_body_encodinX("))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert again.stats["parse_cache"]["parsed"] == 1
    assert any(f.name.endswith("get_body_encodinX") for f in again.fragments)


@pytest.mark.parametrize("setup,extra,needle", [
    ("file", [], "is a file, expected a cache directory"),
    ("under_a_file", [], "cannot create the cache directory"),
    ("garbage", [], "cannot use the parse cache"),
    ("dir", ["--granularity", "block"], "--cache works with --granularity function or file, not block"),
])
def test_unusable_caches_exit_2_with_one_line(email_tree, tmp_path, capsys, setup, extra, needle):
    cache = tmp_path / "cache"
    if setup == "file":
        cache.write_text("x")
    elif setup == "under_a_file":  # mkdir fails (not a directory), as under a read-only mount
        (tmp_path / "plain").write_text("x")
        cache = tmp_path / "plain" / "cache"
    elif setup == "garbage":
        cache.mkdir()
        (cache / "parse.sqlite").write_bytes(b"this is not an sqlite database" * 100)
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "clones", email_tree, "-f", "json", "-o", out, "--cache", cache, *extra)
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert not out.exists()


def test_cli_cache_counts_in_the_json_report(email_tree, tmp_path, capsys):
    cache, out = tmp_path / "cache", tmp_path / "r.json"
    for _ in range(2):
        assert run(capsys, "clones", email_tree, "-f", "json", "-o", out, "-q", "--cache", cache)[0] == 0
    assert json.loads(out.read_text())["stats"]["parse_cache"]["parsed"] == 0
    reopened = ParseCache(cache)
    reopened.load([], {"min_lines": 6, "errors": "lenient", "pretokenize": True, "granularity": "function"})
    assert reopened.counters["reset"] is False  # the options mine() used: nothing emptied


def test_stored_tokens_and_lines_read_back_equal_and_share_one_object_per_distinct_token(email_tree):
    """A file's T1 tokens and normalised lines go into the cache as a vocabulary and ids: read back
    equal, and each distinct token is one (interned) object however often it occurs."""
    from twinspect.code.checkpoint import _decode, _encode
    from twinspect.code.files import discover

    (sf,) = [f for f in discover([email_tree])[0] if f.rel.endswith("_header_value_parser.py")]
    result = fragments._mine_run_each((6, "lenient", True, "function"), [sf])[0]
    frags, _stats, toks, lines = result
    assert len(frags) > 20 and toks is not None and lines is not None
    back_frags, _, back_toks, back_lines = _decode(_encode(result))
    assert back_frags == frags and back_toks == [tuple(t) for t in toks] and back_lines == [list(ls) for ls in lines]
    by_value: dict[str, int] = {}
    for t in (t for seq in back_toks for t in seq):
        assert by_value.setdefault(t, id(t)) == id(t)
    assert len(by_value) < sum(map(len, back_toks)) / 3  # tokens repeat: far fewer objects than tokens


def test_a_damaged_token_table_is_parsed_again(email_tree, tmp_path):
    """An entry whose ids point past its vocabulary is treated as damaged: the file is parsed again."""
    import sqlite3
    import zlib

    cache = tmp_path / "cache"
    reference = _view(scan(email_tree, DetectConfig(), cache_dir=cache))
    db = sqlite3.connect(cache / "parse.sqlite")
    rel, payload = db.execute("SELECT rel, payload FROM files WHERE rel LIKE '%_header_value_parser.py'").fetchone()
    doc = json.loads(zlib.decompress(payload))
    doc["toks"]["vocab"] = doc["toks"]["vocab"][:3]
    db.execute("UPDATE files SET payload = ? WHERE rel = ?", (zlib.compress(json.dumps(doc).encode()), rel))
    db.commit()
    db.close()
    again = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert again.stats["parse_cache"]["parsed"] == 1
    assert _view(again) == reference


def test_letting_go_of_the_token_caches_changes_neither_report_nor_saved_state(email_tree, tmp_path, monkeypatch):
    """A large scan empties the token caches once the candidates are verified (after saving the scan
    state) and again after detection: forced here on the email package, the report and every array of
    the saved state are those of a scan that keeps them."""
    import numpy as np

    from twinspect.code import clones, normalize

    reference = scan(email_tree, DetectConfig(), cache_dir=tmp_path / "keep")
    monkeypatch.setattr(clones, "RELEASE_TOKENS_MIN", 0)
    normalize.release_token_caches()  # nothing primed from the first scan helps the second
    released = scan(email_tree, DetectConfig(), cache_dir=tmp_path / "release")
    assert _view(released) == _view(reference)
    with np.load(tmp_path / "keep" / "scan-state" / "state.npz") as a, \
            np.load(tmp_path / "release" / "scan-state" / "state.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_a_large_scan_keeps_its_code_hashes_and_its_report_does_not_lex_again(email_tree, tmp_path, monkeypatch):
    """A scan that lets go of its token caches takes every fragment's code hash first: the JSON report
    (each fragment's ``code_hash``) and ``--baseline`` read them instead of lexing all fragments again.
    The hashes are each fragment's T1 key, the sub-function pass's added fragments (not known) are
    hashed when asked, and the JSON report is the one of a scan that keeps its caches."""
    from twinspect.code import clones, normalize
    from twinspect.code.baseline import filter_report, load_baseline
    from twinspect.code.report import to_json

    reference = scan(email_tree, DetectConfig())
    assert reference.code_hashes is None  # a small scan keeps its caches: nothing to carry
    monkeypatch.setattr(clones, "RELEASE_TOKENS_MIN", 0)
    normalize.release_token_caches()
    released = scan(email_tree, DetectConfig())
    hashes = released.code_hashes
    assert hashes is not None and len(hashes) == len(released.fragments)
    added = [i for i, f in enumerate(released.fragments) if f.kind == "subfunction"]
    assert added and all(hashes[i] == b"" for i in added)
    assert all(hashes[i] for i, f in enumerate(released.fragments) if f.kind != "subfunction")
    normalize.release_token_caches()
    lexed = []
    real_lex = normalize.lex
    monkeypatch.setattr(normalize, "lex", lambda code, language: lexed.append(code) or real_lex(code, language))
    doc = json.loads(to_json(released))
    assert len(lexed) == len(added)  # only the fragments the sub-function pass added
    normalize.release_token_caches()
    assert [e["code_hash"] for e in doc["fragments"]] == [normalize.t1_key(f) for f in released.fragments]
    ref_doc = json.loads(to_json(reference))
    for d in (doc, ref_doc):
        d["stats"] = {k: v for k, v in d["stats"].items() if k not in VOLATILE}
    assert doc == ref_doc
    # a baseline of the same tree knows every pair, matched through the carried hashes
    old = tmp_path / "old.json"
    old.write_text(to_json(reference))
    lexed.clear()
    assert filter_report(released, load_baseline(old)).pairs == []
    assert len(lexed) <= len(added)
