"""Stage checkpoints of a clone scan (`--cache DIR`): read back, resumed after an interruption, refused
when the fragments or settings differ, and ignored when unreadable — the report the same every time."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from twinspect.code import candidates as candidates_module
from twinspect.code import verify as verify_module
from twinspect.code.clones import DetectConfig, scan
from twinspect.code.stage_cache import StageCache

EXAMPLES = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"


def outcome(report) -> tuple:
    """What a report states: pairs (ids, type, band, similarities, score), classes, groups."""
    return ([(p.a, p.b, p.type, p.band, p.similarity, p.t3_similarity, p.score) for p in report.pairs],
            report.classes, report.identical_groups, report.group_pairs, [f.key for f in report.fragments])


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(EXAMPLES, root)
    return root


def test_stages_are_saved_then_read_back_with_the_same_report(tree: Path, tmp_path: Path):
    plain = scan(tree)
    assert any(p.type == "T3" for p in plain.pairs)  # the verified stage holds real near-miss pairs
    assert "stage_cache" not in plain.stats
    first = scan(tree, cache_dir=tmp_path / "cache")
    assert first.stats["stage_cache"] == {"loaded": [], "saved": ["candidates", "verified"]}
    second = scan(tree, cache_dir=tmp_path / "cache")
    assert second.stats["stage_cache"] == {"loaded": ["candidates", "verified"], "saved": []}
    assert outcome(first) == outcome(plain) == outcome(second)


def test_an_interrupted_scan_resumes_after_its_candidate_search(tree: Path, tmp_path: Path, monkeypatch):
    reference = scan(tree)
    real_verify = verify_module.verify_pairs

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify_module, "verify_pairs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        scan(tree, cache_dir=tmp_path / "cache")
    assert (tmp_path / "cache" / "stages" / "candidates.npz").is_file()
    assert not (tmp_path / "cache" / "stages" / "verified.npz").exists()

    def never(*args, **kwargs):
        raise AssertionError("the candidate search ran again")

    monkeypatch.setattr(verify_module, "verify_pairs", real_verify)
    monkeypatch.setattr(candidates_module, "range_pairs", never)
    monkeypatch.setattr(candidates_module, "overlap_pairs", never)
    resumed = scan(tree, cache_dir=tmp_path / "cache")
    assert resumed.stats["stage_cache"] == {"loaded": ["candidates"], "saved": ["verified"]}
    assert outcome(resumed) == outcome(reference)


def test_other_fragments_or_settings_do_not_use_a_checkpoint(tree: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    scan(tree, cache_dir=cache)
    # another setting: the checkpoint is not read, and is replaced by this run's
    other = DetectConfig(max_neighbours=5)
    strict = scan(tree, other, cache_dir=cache)
    assert strict.stats["stage_cache"]["loaded"] == []
    assert outcome(strict) == outcome(scan(tree, other))
    # an edited file: new fragments, new key
    target = next(p for p in sorted(tree.rglob("*.py")))
    target.write_text(target.read_text() + "\n\ndef added(a, b):\n    x = a + b\n    y = x * 2\n    z = y - a\n"
                      "    w = z + b\n    return w\n")
    edited = scan(tree, cache_dir=cache)
    assert edited.stats["stage_cache"]["loaded"] == []
    assert outcome(edited) == outcome(scan(tree))


def test_an_unreadable_checkpoint_counts_as_absent(tree: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    reference = scan(tree, cache_dir=cache)
    (cache / "stages" / "verified.npz").write_bytes(b"not a zip archive")
    again = scan(tree, cache_dir=cache)
    assert again.stats["stage_cache"] == {"loaded": ["candidates"], "saved": ["verified"]}
    assert outcome(again) == outcome(reference)


def test_stage_cache_keys_and_names(tmp_path: Path):
    mine = StageCache(tmp_path, "a" * 32)
    mine.save("candidates", {"x": np.arange(3), "label": "hnsw"})
    assert StageCache(tmp_path, "b" * 32).load("candidates") is None  # another run's key
    data = mine.load("candidates")
    assert data is not None and data["x"].tolist() == [0, 1, 2] and str(data["label"]) == "hnsw"
    assert mine.counters() == {"loaded": ["candidates"], "saved": ["candidates"]}
    with pytest.raises(ValueError, match="unknown stage"):
        mine.path("report")


def test_the_base_lines_come_back_with_the_verified_stage(tmp_path: Path):
    """The base-code rule's lines (pasted into ≥ 10 functions here) are part of the verified checkpoint:
    a scan that reads it back hands the same base lines to the saved scan state."""
    from twinspect.code.clones import detect
    from twinspect.code.fragments import mine

    root = tmp_path / "tree"
    root.mkdir()
    for i in range(12):  # the same three injected lines in every function, different code around them
        body = "\n".join(f"    v{k} = a * {i + k} + b" for k in range(i + 3))  # 12 T2 shapes: 12 representatives
        (root / f"m{i}.py").write_text(f"def f{i}(a, b):\n    tmp_x = [0, 1, 2]\n    tmp_y = ('hello', 'world')\n    tmp_x = tmp_x + [len(tmp_y)]\n{body}\n"
                                       f"    return a + {i}\n")
    frags, _ = mine([root], min_lines=3)
    seen: list[frozenset] = []
    config = DetectConfig(min_lines=3)
    for _ in range(2):
        report = detect(frags, config, checkpoint_dir=tmp_path / "cache", keep_state=lambda **kw: seen.append(kw["base"]))
    assert report.stats["stage_cache"]["loaded"] == ["candidates", "verified"]
    assert seen[0] and seen[0] == seen[1]
    assert "tmp_y = ('hello', 'world')" in seen[0]
