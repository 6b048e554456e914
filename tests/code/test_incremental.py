"""Changed-files checks (twinspect.code.incremental): a full scan saves its state, --changed checks edits against it."""

from __future__ import annotations

import email
import json
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.cli_run import run
from twinspect.code.clones import DetectConfig, scan
from twinspect.code.incremental import STATE_DIR, changed_scan, token_items
from twinspect.code.report import summary_line
from twinspect.errors import InputError

EMAIL = Path(email.__file__).parent


def planted_copy() -> str:
    """email.utils.decode_params renamed to planted_decode, with one added statement (a Type-3 copy)."""
    src = (EMAIL / "utils.py").read_text()
    start = src.index("def decode_params(")
    end = src.index("\ndef ", start + 1)
    lines = src[start:end].rstrip().split("\n")
    last_return = max(i for i, ln in enumerate(lines) if ln.startswith("    return "))
    lines.insert(last_return, "    extra_marker = 1")
    return "\n\n\n" + "\n".join(lines).replace("def decode_params(", "def planted_decode(") + "\n"


PLANT = planted_copy()


def pair_keys(report, touched: str | None = None) -> set[tuple]:
    fr = report.fragments
    out = set()
    for p in report.pairs:
        a, b = fr[p.a], fr[p.b]
        ka, kb = (a.path, a.start_line, a.end_line), (b.path, b.start_line, b.end_line)
        if touched is None or touched in (ka[0], kb[0]):
            out.add((*sorted([ka, kb]), p.type))
    return out


def test_full_scan_with_cache_saves_state_and_unchanged_tree_reports_nothing(email_tree, tmp_path):
    cache = tmp_path / "cache"
    full = scan(email_tree, DetectConfig(), cache_dir=cache)
    assert (cache / STATE_DIR / "state.npz").is_file() and (cache / STATE_DIR / "state.json").is_file()
    report = changed_scan([email_tree], DetectConfig(), cache)
    ch = report.stats["changed"]
    assert report.pairs == [] and ch["fragments_changed"] == 0
    assert ch["files_unchanged"] == full.stats["files_parsed"] and ch["state_fragments"] == sum(
        f.kind == "function" for f in full.fragments)


def test_planted_copy_is_found_and_matches_a_full_rescan(email_tree, tmp_path):
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(), cache_dir=cache)
    target = email_tree / "quoprimime.py"
    target.write_text(target.read_text() + PLANT)
    report = changed_scan([email_tree], DetectConfig(), cache)
    assert report.stats["changed"]["files_changed"] == 1
    got = pair_keys(report)
    assert all("quoprimime.py" in (k[0][0], k[1][0]) for k in got)  # only pairs involving the changed file
    planted = [k for k in got if {k[0][0], k[1][0]} == {"quoprimime.py", "utils.py"}]
    assert planted and planted[0][2] == "T3"
    # the same pairs as a full re-scan of the edited tree states for that file
    rescan = scan(email_tree, DetectConfig())
    assert got == pair_keys(rescan, "quoprimime.py")


def test_added_and_removed_files(email_tree, tmp_path):
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(), cache_dir=cache)
    (email_tree / "added.py").write_text("from email.utils import unquote, quote, rfc2231_continuation\n" + PLANT)
    removed = email_tree / "mime" / "audio.py"
    removed.unlink()
    report = changed_scan([email_tree], DetectConfig(), cache)
    ch = report.stats["changed"]
    assert (ch["files_added"], ch["files_removed"], ch["files_changed"]) == (1, 1, 0)
    assert not any(f.path == "mime/audio.py" for f in report.fragments)
    assert any({k[0][0], k[1][0]} == {"added.py", "utils.py"} for k in pair_keys(report))


def test_state_is_not_used_under_other_options_or_missing(email_tree, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(InputError, match="no saved scan state"):
        changed_scan([email_tree], DetectConfig(), cache)
    assert not cache.exists()  # a failed check creates nothing
    scan(email_tree, DetectConfig(), cache_dir=cache)
    with pytest.raises(InputError, match="other detection or parse options"):
        changed_scan([email_tree], DetectConfig(token_overlap=0.7), cache)
    with pytest.raises(InputError, match="none of the 29 files of the saved scan"):
        changed_scan([email_tree.parent], DetectConfig(), cache)  # another root: every path differs
    with pytest.raises(InputError, match="--changed cannot serve --granularity file"):
        changed_scan([email_tree], DetectConfig(granularity="file"), cache)


def test_scan_without_a_supported_detection_saves_no_state(email_tree, tmp_path):
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(granularity="file"), cache_dir=cache)
    assert (cache / "parse.sqlite").is_file() and not (cache / STATE_DIR).exists()


def test_token_items_count_the_multiset_intersection(monkeypatch):
    rng = random.Random(3)
    vocab = ["a", "b", "(", ")", "x", "self", "return", "=", "1"]
    lists = [[rng.choice(vocab) for _ in range(rng.randint(0, 40))] for _ in range(30)]
    indptr, items = token_items(lists)
    assert np.array_equal(np.diff(indptr), [len(t) for t in lists])
    for i in range(len(lists)):
        for j in range(len(lists)):
            a, b = items[indptr[i]:indptr[i + 1]], items[indptr[j]:indptr[j + 1]]
            shared = int(np.isin(a, b).sum())
            assert shared == sum((Counter(lists[i]) & Counter(lists[j])).values())
    # an item depends on the token and its occurrence only, not on the other lists (nor on the blocks)
    alone_ptr, alone = token_items([lists[5]])
    assert sorted(alone.tolist()) == sorted(items[indptr[5]:indptr[6]].tolist())
    import twinspect.code.incremental as inc

    monkeypatch.setattr(inc, "_ITEM_ROWS", 7)
    assert np.array_equal(token_items(lists)[1], items)


def test_cli_changed(email_tree, tmp_path, capsys):
    cache = tmp_path / "cache"
    code, _, err = run(capsys, "clones", email_tree, "--cache", cache, "-q", "-f", "json", "-o", tmp_path / "a.json")
    assert code == 0, err
    target = email_tree / "quoprimime.py"
    target.write_text(target.read_text() + PLANT)
    code, out, err = run(capsys, "clones", email_tree, "--cache", cache, "--changed")
    assert code == 0, err
    assert "changed-files check" in out and "planted_decode" in out
    code, _, err = run(capsys, "clones", email_tree, "--changed")
    assert code == 2 and "--changed needs --cache" in err
    code, _, err = run(capsys, "clones", email_tree, "--changed", "--cache", cache, "--fail-over", "5")
    assert code == 2 and "--fail-over" in err
    # the planted pair is new against the full scan's report: --fail-on-new fails the check
    code, _, _ = run(capsys, "clones", email_tree, "--cache", cache, "--changed", "--baseline", tmp_path / "a.json",
                     "--fail-on-new", "-q")
    assert code == 1
    os.utime(target)  # still changed: the state is the full scan's, --changed never rewrites it
    code, out, _ = run(capsys, "clones", email_tree, "--cache", cache, "--changed", "-q", "-f", "json")
    assert code == 0 and json.loads(out)["stats"]["changed"]["files_changed"] == 1
    code, _, err = run(capsys, "clones", email_tree, "--cache", cache, "--update-state")
    assert code == 2 and "add --changed" in err
    # folded into the state: the next check starts from this tree
    code, out, _ = run(capsys, "clones", email_tree, "--cache", cache, "--changed", "--update-state", "-q", "-f", "json")
    assert code == 0 and json.loads(out)["stats"]["changed"]["state_update"]["fragments_added"] > 0
    code, out, _ = run(capsys, "clones", email_tree, "--cache", cache, "--changed", "-q", "-f", "json")
    assert code == 0 and json.loads(out)["stats"]["changed"]["files_changed"] == 0 and not json.loads(out)["pairs"]


def test_overlap_neighbours_equal_a_brute_force_multiset_overlap(email_tree, tmp_path):
    from twinspect.code.fragments import mine
    from twinspect.code.incremental import load_state, mining_options, overlap_neighbours
    from twinspect.code.normalize import token_views

    cache = tmp_path / "cache"
    config = DetectConfig()
    scan(email_tree, config, cache_dir=cache)
    state = load_state(cache, config, mining_options(config))
    frags, _ = mine([email_tree / "utils.py", email_tree / "_header_value_parser.py"])
    fragments = sorted(mine([email_tree])[0], key=lambda f: (f.path, f.start_line, f.end_line, f.name))
    rep_bags = [Counter(token_views(fragments[int(r)])[0]) for r in state.reps]
    ok = np.ones(len(state.reps), dtype=bool)
    ok[::7] = False  # some representatives may not be returned
    theta = 0.55
    got = overlap_neighbours(state, frags, theta, 10_000, ok)
    checked = 0
    for f, sel in zip(frags, got):
        bag = Counter(token_views(f)[0])
        size = sum(bag.values())
        want = {i for i, rb in enumerate(rep_bags) if ok[i] and size and
                sum((bag & rb).values()) >= theta * max(size, sum(rb.values())) - 1e-9}
        assert set(sel.tolist()) == want
        checked += len(want)
    assert checked > 20  # the files' own functions (and their clones) are found


def _state_rows(cache: Path) -> tuple[dict[tuple, int], set[frozenset]]:
    """A saved state's fragments (path, start, end, name, t2 hash) -> row, and its buckets as sets of fragments."""
    from twinspect.code.incremental import load_state, mining_options

    st = load_state(cache, DetectConfig(), mining_options(DetectConfig()))
    keys = [(st.meta["paths"][p], int(s), int(e), n, int(t))
            for p, s, e, n, t in zip(st.path_id.tolist(), st.start.tolist(), st.end.tolist(), st.meta["names"],
                                     st.t2.tolist())]
    buckets: dict[int, set] = {}
    for k, b in zip(keys, st.bucket.tolist()):
        buckets.setdefault(b, set()).add(k)
    assert all(int(st.bucket[r]) == b for b, r in enumerate(st.reps.tolist()))  # each rep is in its own bucket
    return {k: i for i, k in enumerate(keys)}, {frozenset(v) for v in buckets.values()}


def test_update_state_equals_the_state_of_a_full_scan_of_the_edited_tree(email_tree, tmp_path):
    from twinspect.code.incremental import load_state, mining_options
    from twinspect.code.normalize import token_views

    # a copy of quoprimime.py that sorts first: its functions are the representatives of their buckets
    shutil.copy(email_tree / "quoprimime.py", email_tree / "aaa_copy.py")
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(), cache_dir=cache)
    (email_tree / "aaa_copy.py").write_text((email_tree / "aaa_copy.py").read_text() + "\nVALUE = 1\n")  # changed: reps promoted
    (email_tree / "added.py").write_text(PLANT)  # added
    (email_tree / "mime" / "audio.py").unlink()  # removed
    report = changed_scan([email_tree], DetectConfig(), cache, update=True)
    up = report.stats["changed"]["state_update"]
    assert up["fragments_added"] > 0 and up["fragments_dropped"] > 0 and up["representatives_promoted"] > 0
    fresh = tmp_path / "fresh"
    scan(email_tree, DetectConfig(), cache_dir=fresh)
    rows_up, buckets_up = _state_rows(cache)
    rows_fresh, buckets_fresh = _state_rows(fresh)
    assert set(rows_up) == set(rows_fresh) and buckets_up == buckets_fresh
    # every representative's vector and token items are those of its fragment (under the saved encoder)
    st = load_state(cache, DetectConfig(), mining_options(DetectConfig()))
    from twinspect.code.fragments import mine

    frags = {(f.path, f.start_line, f.end_line, f.name): f for f in mine([email_tree])[0] if f.kind == "function"}
    keys = list(rows_up)
    reps = [frags[keys[r][:4]] for r in st.reps.tolist()]
    want = st.encoder.encode_sparse(reps).toarray()
    assert np.allclose(st.vectors.toarray(), want, atol=1e-6)
    ptr, items = token_items([token_views(f)[0] for f in reps])
    assert np.array_equal(st.item_ptr, ptr) and np.array_equal(st.items, items)
    # the merged inverted index holds what one built from scratch holds (order within an item aside)
    from twinspect.code.incremental import postings

    want_items, want_ptr, want_reps = postings(ptr, items)
    assert np.array_equal(st.post_items, want_items) and np.array_equal(st.post_ptr, want_ptr)
    item_of = np.repeat(np.arange(len(want_items), dtype=np.int64), np.diff(want_ptr))
    assert np.array_equal(np.sort(item_of * len(reps) + st.post_reps), np.sort(item_of * len(reps) + want_reps))
    meta = json.loads((cache / STATE_DIR / "state.json").read_text())
    assert meta["updates"] == 1 and "mime/audio.py" not in meta["files"] and "added.py" in meta["files"]


def test_successive_checks_with_update_state_report_each_commit_once(email_tree, tmp_path):
    cache = tmp_path / "cache"
    scan(email_tree, DetectConfig(), cache_dir=cache)
    first = email_tree / "quoprimime.py"
    first.write_text(first.read_text() + PLANT)  # commit 1: a copy of decode_params
    one = changed_scan([email_tree], DetectConfig(), cache, update=True)
    assert any({k[0][0], k[1][0]} == {"quoprimime.py", "utils.py"} for k in pair_keys(one))
    second = email_tree / "base64mime.py"  # commit 2: the same copy again, in another file
    second.write_text(second.read_text() + PLANT.replace("planted_decode", "planted_again"))
    two = changed_scan([email_tree], DetectConfig(), cache, update=True)
    ch = two.stats["changed"]
    assert (ch["files_changed"], ch["state_updates"]) == (1, 1)  # commit 1's file is not checked again
    assert "(updated by 1 check since): 1 files changed or added" in summary_line(two)
    assert "updated by" not in summary_line(one)
    got = pair_keys(two)
    assert got and all("base64mime.py" in (k[0][0], k[1][0]) for k in got)
    # commit 2's copy pairs with commit 1's (known only through the updated state), as a full re-scan says
    assert any({k[0][0], k[1][0]} == {"base64mime.py", "quoprimime.py"} for k in got)
    assert got == pair_keys(scan(email_tree, DetectConfig()), "base64mime.py")
    # a third check with nothing changed reports nothing, and leaves the state as it is
    saved = (cache / STATE_DIR / "state.npz").stat().st_mtime_ns
    three = changed_scan([email_tree], DetectConfig(), cache, update=True)
    assert three.pairs == [] and "state_update" not in three.stats["changed"]
    assert (cache / STATE_DIR / "state.npz").stat().st_mtime_ns == saved


@pytest.mark.parametrize("parts", [1, 3, 16, 64])
def test_postings_by_ranges_equal_one_whole_sort(parts, monkeypatch):
    """The inverted index built range by range (range numbers 5 items at a time) equals the one of a
    single stable sort of all items, with items at both ends of the int64 range and shared by many rows."""
    import numpy as np

    from twinspect.code import incremental
    from twinspect.code.incremental import _grouped, postings

    monkeypatch.setattr(incremental, "_TOP_BLOCK", 5)

    rng = np.random.default_rng(parts)
    for _ in range(20):
        lens = rng.integers(0, 20, int(rng.integers(0, 40)))
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        pool = np.concatenate([rng.integers(-2**63, 2**63 - 1, 30, dtype=np.int64), [-2**63, 2**63 - 1, 0, -1]])
        items = rng.choice(pool, size=int(ptr[-1]))
        order = np.argsort(items, kind="stable")
        want = _grouped(items[order], (np.searchsorted(ptr, order, side="right") - 1).astype(np.int32))
        got = postings(ptr, items, parts=parts)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
