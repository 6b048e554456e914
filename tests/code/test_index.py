"""Conformance tests every k-NN index must pass (exact and HNSW), plus knn_all."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twinspect.code.index import ExactIndex, HNSWIndex, Index, knn_all, make_index
from twinspect.errors import IndexFormatError, InputError

KINDS = ["exact", "hnsw"]


def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force(data: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int):
    sims = queries @ data.T
    order = np.argsort(-sims, axis=1)[:, :k]
    return ids[order], np.take_along_axis(sims, order, axis=1)


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


def test_top1_matches_brute_force_and_recall(kind):
    data = unit_rows(2000, 64, seed=1)
    queries = unit_rows(200, 64, seed=2)
    ids = np.arange(1000, 3000, dtype=np.int64)  # non-contiguous with positions on purpose
    index = make_index(kind, 64)
    index.add(ids, data)
    assert len(index) == 2000
    got_ids, got_sims = index.search(queries, 10)
    assert got_ids.shape == (200, 10) and got_ids.dtype == np.int64
    assert got_sims.shape == (200, 10) and got_sims.dtype == np.float32
    want_ids, want_sims = brute_force(data, ids, queries, 10)
    # rows sorted by decreasing similarity, similarities are real inner products
    assert np.all(np.diff(got_sims, axis=1) <= 1e-6)
    pos = {int(i): r for r, i in enumerate(ids)}
    recomputed = np.array([[queries[q] @ data[pos[int(i)]] for i in row] for q, row in enumerate(got_ids)])
    np.testing.assert_allclose(got_sims, recomputed, atol=1e-5)
    recall = np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got_ids, want_ids)])
    top1 = np.mean(got_ids[:, 0] == want_ids[:, 0])
    if kind == "exact":
        assert recall == 1.0 and top1 == 1.0
        np.testing.assert_allclose(got_sims, want_sims, atol=1e-5)
    else:
        assert recall >= 0.95, recall
        assert top1 >= 0.97, top1


def test_self_query_returns_itself_first(kind):
    data = unit_rows(300, 16, seed=3)
    index = make_index(kind, 16)
    index.add(np.arange(300), data)
    got, sims = index.search(data[:50], 1)
    assert (got[:, 0] == np.arange(50)).all()
    np.testing.assert_allclose(sims[:, 0], 1.0, atol=1e-5)


def test_padding_when_fewer_than_k(kind):
    data = unit_rows(3, 8, seed=4)
    index = make_index(kind, 8)
    got, sims = index.search(data, 5)  # empty index
    assert (got == -1).all() and np.isneginf(sims).all()
    index.add(np.array([7, 8, 9]), data)
    got, sims = index.search(data[:1], 5)
    assert got.shape == (1, 5)
    assert set(got[0, :3]) == {7, 8, 9} and got[0, 0] == 7
    assert (got[0, 3:] == -1).all() and np.isneginf(sims[0, 3:]).all()
    assert np.isfinite(sims[0, :3]).all()


def test_remove_and_readd(kind):
    data = unit_rows(500, 32, seed=5)
    index = make_index(kind, 32)
    index.add(np.arange(500), data)
    index.remove(np.arange(0, 500, 2))
    assert len(index) == 250
    assert set(index.ids().tolist()) == set(range(1, 500, 2))
    got, _ = index.search(data, 5)
    assert not np.isin(got, np.arange(0, 500, 2)).any()
    # a removed item queried with itself no longer finds itself
    assert (got[0::2, 0] != np.arange(0, 500, 2)).all()
    with pytest.raises(InputError):
        index.remove(np.array([0]))
    index.remove(np.array([0, 1]), missing_ok=True)
    assert len(index) == 249
    # re-adding a removed id brings it back, with its new vector
    index.add(np.array([0]), data[11:12])
    got, sims = index.search(data[11:12], 2)
    assert set(got[0]) == {0, 11}
    np.testing.assert_allclose(sims[0], 1.0, atol=1e-5)
    # fresh ids reuse deleted slots without losing anything
    fresh = unit_rows(100, 32, seed=55)
    index.add(np.arange(1000, 1100), fresh)
    assert len(index) == 350
    got, _ = index.search(fresh, 1)
    assert np.mean(got[:, 0] == np.arange(1000, 1100)) >= 0.97


def test_add_existing_id_replaces_vector(kind):
    data = unit_rows(50, 8, seed=6)
    index = make_index(kind, 8)
    index.add(np.arange(50), data)
    index.add(np.array([3]), data[40:41])
    assert len(index) == 50
    np.testing.assert_allclose(index.get_vectors(np.array([3]))[0], data[40], atol=1e-6)


def test_save_load_round_trip(kind, tmp_path):
    data = unit_rows(400, 24, seed=7)
    index = make_index(kind, 24)
    index.add(np.arange(400) * 3, data)
    index.remove(np.array([0, 3, 6]))
    index.save(tmp_path / "idx")
    before = index.search(data[:20], 4)
    loaded = Index.load(tmp_path / "idx")
    assert type(loaded) is type(index)
    assert len(loaded) == 397 and loaded.dim == 24
    after = loaded.search(data[:20], 4)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_allclose(before[1], after[1], atol=1e-6)
    # the loaded index keeps working incrementally
    loaded.add(np.array([5000]), data[:1])
    assert loaded.search(data[:1], 1)[0][0, 0] in (0, 5000) or loaded.search(data[:1], 2)[0][0, 0] == 5000
    assert len(loaded) == 398


def test_wrong_input_raises_input_error(kind):
    index = make_index(kind, 16)
    with pytest.raises(InputError):
        index.add(np.arange(3), unit_rows(3, 8, seed=0))  # wrong dim
    with pytest.raises(InputError):
        index.add(np.arange(2), unit_rows(3, 16, seed=0))  # count mismatch
    with pytest.raises(InputError):
        index.add(np.array([-1, 2, 3]), unit_rows(3, 16, seed=0))  # negative id
    with pytest.raises(InputError):
        index.add(np.array([1, 1, 2]), unit_rows(3, 16, seed=0))  # duplicate ids
    bad = unit_rows(3, 16, seed=0)
    bad[1, 0] = np.nan
    with pytest.raises(InputError):
        index.add(np.arange(3), bad)
    index.add(np.arange(3), unit_rows(3, 16, seed=0))
    with pytest.raises(InputError):
        index.search(unit_rows(2, 15, seed=0), 1)
    with pytest.raises(InputError):
        index.search(unit_rows(2, 16, seed=0), 0)


def test_load_errors(tmp_path):
    with pytest.raises(IndexFormatError):
        Index.load(tmp_path / "missing")
    index = make_index("exact", 4)
    index.add(np.arange(2), unit_rows(2, 4, seed=0))
    index.save(tmp_path / "i")
    with pytest.raises(IndexFormatError):
        HNSWIndex.load(tmp_path / "i")  # wrong kind
    meta = json.loads((tmp_path / "i" / "index.json").read_text())
    meta["format_version"] = 999
    (tmp_path / "i" / "index.json").write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="version"):
        Index.load(tmp_path / "i")
    meta["format_version"] = 1
    (tmp_path / "i" / "index.json").write_text(json.dumps(meta))
    (tmp_path / "i" / "exact.npz").write_bytes(b"garbage")
    with pytest.raises(IndexFormatError):
        ExactIndex.load(tmp_path / "i")


@pytest.mark.parametrize("cut", [0, 10, 0.5])
def test_truncated_data_files_raise_not_crash(tmp_path, cut):
    data = unit_rows(200, 8, seed=12)
    for kind, name in (("hnsw", "hnsw.bin"), ("exact", "exact.npz")):
        index = make_index(kind, 8)
        index.add(np.arange(200), data)
        index.save(tmp_path / kind)
        path = tmp_path / kind / name
        raw = path.read_bytes()
        path.write_bytes(raw[: int(cut * len(raw)) if isinstance(cut, float) else cut])
        with pytest.raises(IndexFormatError):
            Index.load(tmp_path / kind)


def test_make_index_rejects_unknown():
    with pytest.raises(InputError):
        make_index("faiss", 8)
    with pytest.raises(InputError):
        make_index("hnsw", 8, bogus=1)
    with pytest.raises(InputError):
        make_index("hnsw", 8, space="l2")


def test_hnsw_same_seed_same_results():
    data = unit_rows(800, 32, seed=8)
    runs = []
    for _ in range(2):
        index = HNSWIndex(32, seed=3, num_threads=1, M=4, ef_construction=20, ef_search=10)
        index.add(np.arange(800), data)
        runs.append(index.search(data[:100], 5)[0])
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("kind", KINDS)
def test_knn_all_excludes_self_and_applies_threshold(kind):
    base = unit_rows(100, 32, seed=9)
    noise = unit_rows(100, 32, seed=10)
    twins = base + 0.05 * noise
    twins /= np.linalg.norm(twins, axis=1, keepdims=True)
    data = np.concatenate([base, twins])  # item i and i+100 are near-duplicates
    ids = np.arange(200) + 500
    index = make_index(kind, 32)
    index.add(ids, data)
    qids, nbr, sims = knn_all(index, k=3, threshold=0.9)
    assert qids.tolist() == ids.tolist()
    assert not (nbr == qids[:, None]).any()
    partner = np.where(qids < 600, qids + 100, qids - 100)
    assert (nbr[:, 0] == partner).mean() >= 0.97
    # random 32-d unit vectors are far below 0.9: everything but the twin is padding
    assert (nbr[:, 1:] == -1).all() and np.isneginf(sims[:, 1:]).all()
    # same answer straight from vectors
    q2, nbr2, _ = knn_all(data, k=3, threshold=0.9, ids=ids)
    assert (nbr2[:, 0] == partner).mean() >= 0.97


def test_exact_blocks_do_not_change_results():
    data = unit_rows(300, 16, seed=11)
    big = ExactIndex(16)
    small = ExactIndex(16, block_bytes=4 * 300 * 7)  # 7 queries per block
    for index in (big, small):
        index.add(np.arange(300), data)
    a, b = big.search(data, 6), small.search(data, 6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], atol=1e-6)


@pytest.mark.parametrize("block_rows,k", [(7, 20), (300, 20), (7, 3)])  # k=3: dense blocks, trimmed per block
def test_self_range_search_equals_search_over_the_threshold(block_rows, k):
    # clustered vectors: some rows have more hits over the threshold than k, most have a few
    rng = np.random.default_rng(5)
    centres = unit_rows(12, 16, seed=6)
    data = centres[rng.integers(0, 12, 300)] + 0.1 * rng.standard_normal((300, 16)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    ids = np.arange(1000, 1300, dtype=np.int64)[rng.permutation(300)]
    index = ExactIndex(16, block_bytes=4 * 300 * block_rows)
    index.add(ids, data)
    threshold = 0.8
    starts, nbr, sims = index.self_range_search(threshold, k)
    want_ids, want_sims = index.search(data, k)
    compacted = index.self_range_search(threshold, k, max_hits=50)  # hits trimmed to k per row on the way
    for got, want in zip(compacted, (starts, nbr, sims)):
        np.testing.assert_array_equal(got, want)
    counts = np.diff(starts)
    assert counts.max() == k and counts.min() >= 1
    assert k < 20 or (counts < k).any()  # rows cut at k and rows with fewer hits both occur
    for i in range(300):
        keep = want_sims[i] >= threshold
        np.testing.assert_array_equal(nbr[starts[i]:starts[i + 1]], want_ids[i][keep])
        np.testing.assert_allclose(sims[starts[i]:starts[i + 1]], want_sims[i][keep], atol=1e-6)


def test_self_range_search_switches_to_whole_rows_when_hits_get_dense(monkeypatch):
    # 150 unrelated vectors (sparse hits), then 150 in three tight clusters (dense): the join must
    # switch to whole rows midway and still give search()'s neighbours for every row
    import twinspect.code.index as index_module

    rng = np.random.default_rng(9)
    sparse = unit_rows(150, 32, seed=10)
    centres = unit_rows(3, 32, seed=11)
    dense = centres[rng.integers(0, 3, 150)] + 0.05 * rng.standard_normal((150, 32)).astype(np.float32)
    data = np.vstack([sparse, dense / np.linalg.norm(dense, axis=1, keepdims=True)]).astype(np.float32)
    index = ExactIndex(32, block_bytes=4 * 300 * 10)  # 10 rows per block
    index.add(np.arange(300), data)
    calls = []
    real_topk = index_module.topk_rows
    monkeypatch.setattr(index_module, "topk_rows", lambda sims, k: calls.append(len(sims)) or real_topk(sims, k))
    starts, nbr, sims = index.self_range_search(0.8, 5)
    assert calls and sum(calls) < 300  # whole rows only for the rows after the switch
    want_ids, want_sims = index.search(data, 5)
    for i in range(300):
        keep = want_sims[i] >= 0.8
        np.testing.assert_array_equal(nbr[starts[i]:starts[i + 1]], want_ids[i][keep])
