"""Shard executors of the clone pipeline: parsing, the token-overlap index and the verifier's alignments give
the same report in this process, in local worker processes and as Ray tasks on a local Ray instance
(1 worker through the API, 2 through the CLI); bad executor choices exit 2 with one line."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest

from tests.cli_run import run
from twinspect.code import candidates, fragments, subfunction, verify
from twinspect.code.clones import DetectConfig, scan
from twinspect.code.executors import InProcess, LocalPool, make_shard_executor

EMAIL = Path(sysconfig.get_paths()["stdlib"]) / "email"
VOLATILE = ("timings", "executor", "workers")


@pytest.fixture
def small_shards(monkeypatch):
    """Shard the stdlib ``email`` package (22 files, ~400 functions) into many small pieces, so every
    stage really runs on the executor: runs of 3 files, 16-row overlap chunks, 200-pair alignment shards,
    sub-function segments of 8 fragments."""
    monkeypatch.setattr(fragments, "PARALLEL_MIN_FILES", 4)
    monkeypatch.setattr(fragments, "_FILES_PER_TASK", 3)
    monkeypatch.setattr(candidates, "_PREFIX_CHUNK", 16)
    monkeypatch.setattr(verify, "SEQUENCE_SHARD", 200)
    monkeypatch.setattr(subfunction, "_STREAM_SHARD", 8)


def _view(report) -> dict:
    d = report.to_json_dict()
    d["stats"] = {k: v for k, v in d["stats"].items() if k not in VOLATILE}
    return d


def _scan(executor):
    # a low token-overlap threshold and candidate cosine: thousands of candidates to shard and verify
    config = DetectConfig(token_overlap=0.4, candidate_threshold=0.3)
    return scan(EMAIL, config, executor=executor)


def test_in_process_and_local_pool_give_the_report_of_the_default_run(small_shards):
    reference = _scan(None)
    assert reference.stats["verified"] > 200 and reference.stats["candidates_token_overlap"] > 16
    assert reference.pairs, "the email package has clone pairs"
    assert reference.stats["subfunction_segments"] > 16 and reference.stats["subfunction_pairs"] > 0
    for ex in (InProcess(), LocalPool(2)):
        got = _scan(ex)
        assert _view(got) == _view(reference), ex
        assert got.stats["executor"] == "local" and got.stats["workers"] == ex.workers


def test_local_pool_holds_no_result_it_has_yielded():
    """Parse results (fragments and their token lists) are large: once the caller has taken one and let
    it go, the pool must not keep it until the last shard is done."""
    import gc
    import weakref

    import numpy as np

    results = LocalPool(2).map(np.full, [1.0, 2.0, 3.0], shared=(50_000,))  # np.full((50_000,), shard)
    first = next(results)
    assert float(first[0]) == 1.0
    gone = weakref.ref(first)
    del first
    second = next(results)
    gc.collect()
    assert gone() is None
    assert float(second[0]) == 2.0 and [float(r[0]) for r in results] == [3.0]


def _first_of(shared, shard):
    return float(shared[0]) + shard


def test_local_pool_lets_go_of_shared_once_the_workers_have_it():
    """The shared inputs (the token-overlap matrices: large) reach the workers through a file; once the map
    has started the pool holds no reference to them, so a caller that drops its own frees them."""
    import gc
    import weakref

    import numpy as np

    shared = np.arange(10.0)
    gone = weakref.ref(shared)
    results = LocalPool(2).map(_first_of, [1.0, 2.0], shared=shared)
    del shared
    assert next(results) == 1.0
    gc.collect()
    assert gone() is None
    assert list(results) == [2.0]


def test_ray_with_one_worker_gives_the_local_report(small_shards):
    pytest.importorskip("ray")
    reference = _view(_scan(None))
    ex = make_shard_executor("ray", workers=1)
    try:
        got = _scan(ex)
    finally:
        ex.close()
    assert got.stats["executor"] == "ray" and got.stats["workers"] == 1
    assert _view(got) == reference


def test_cli_ray_executor_with_two_workers_writes_the_local_report(tmp_path, capsys, small_shards):
    pytest.importorskip("ray")
    local, ray = tmp_path / "local.json", tmp_path / "ray.json"
    assert run(capsys, "clones", EMAIL, "-f", "json", "-o", local, "-q")[0] == 0
    assert run(capsys, "clones", EMAIL, "-f", "json", "-o", ray, "-q", "--executor", "ray", "--workers", "2")[0] == 0
    a, b = json.loads(local.read_text()), json.loads(ray.read_text())
    assert b["stats"]["executor"] == "ray"
    for d in (a, b):
        d["stats"] = {k: v for k, v in d["stats"].items() if k not in VOLATILE}
    assert a == b


@pytest.mark.parametrize("extra,needle", [
    (["--executor", "dask"], "unknown executor 'dask'; choose from local, ray"),
    (["--executor", "local", "--address", "auto"], "--address only applies to --executor ray"),
    (["--workers", "0"], "--workers must be at least 1, got 0"),
    (["--executor", "ray", "--address", "nohost"], "cannot parse Ray address 'nohost'"),
    (["--executor", "ray", "--address", "127.0.0.1:1"], "cannot reach the Ray cluster at '127.0.0.1:1'"),
])
def test_bad_executor_choices_exit_2_with_one_line(tmp_path, capsys, extra, needle):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "clones", EMAIL, "-f", "json", "-o", out, *extra)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2  # the error line and at most one hint
    assert not out.exists()


def test_local_pool_shared_file_is_removed_and_a_killed_runs_file_cleaned_up(tmp_path, monkeypatch):
    """``shared`` reaches the workers through a temporary file: gone after the map, and a file left by a
    run that no longer exists (a SIGKILLed driver) is removed by the next map; a live process's file stays."""
    import os
    import subprocess
    import sys
    import tempfile

    import numpy as np

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"twinspect-shared-{dead.pid}-abc.pickle"
    live = tmp_path / f"twinspect-shared-{os.getpid()}-live.pickle"
    stale.write_bytes(b"x")
    live.write_bytes(b"x")
    results = list(LocalPool(2).map(np.full, [1.0, 2.0], shared=(3,)))
    assert [r.tolist() for r in results] == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]  # the map's own file is gone too
