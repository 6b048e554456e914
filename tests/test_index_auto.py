"""``--index auto`` (issue 23 item 2): exact search below a representative count, HNSW above it with
its recall against exact search measured at run time and reported."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twinspect.code import candidates
from twinspect.code.candidates import measure_recall, range_pairs, resolve_index
from twinspect.code.clones import DetectConfig, detect
from twinspect.code.index import ExactIndex, HNSWIndex
from twinspect.code.report import summary_line, to_json
from twinspect.errors import InputError


def test_resolve_index_threshold(monkeypatch):
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 100)
    assert resolve_index("auto", 99) == "exact"
    assert resolve_index("auto", 100) == "hnsw"
    assert resolve_index("exact", 10**7) == "exact"
    assert resolve_index("hnsw", 3) == "hnsw"
    with pytest.raises(InputError, match="unknown index 'faiss'"):
        resolve_index("faiss", 3)


def test_auto_is_the_default_and_validates():
    assert DetectConfig().index == "auto"
    DetectConfig(index="auto").validate()
    with pytest.raises(InputError, match="unknown index"):
        DetectConfig(index="ivf").validate()


def test_measure_recall_exact_index_is_one_and_hnsw_bounded():
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(600, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = np.arange(1000, 1600, dtype=np.int64)  # ids are not row numbers
    exact = ExactIndex(16)
    exact.add(ids, vecs)
    recall, queries = measure_recall(exact, vecs, ids, k=20, threshold=0.2, queries=50)
    assert (recall, queries) == (1.0, 50)
    # a deliberately poor graph (M=2, ef 20) misses some neighbours: recall is measured, not assumed
    poor = HNSWIndex(16, M=2, ef_construction=4, ef_search=20, num_threads=1)
    poor.add(ids, vecs)
    recall, _ = measure_recall(poor, vecs, ids, k=20, threshold=0.2, queries=50)
    assert recall is not None and 0.0 <= recall < 1.0
    # nothing at or above the threshold: no recall to report
    assert measure_recall(exact, vecs, ids, k=5, threshold=1.5, queries=10) == (None, 10)


def test_range_pairs_auto_switches_to_hnsw(email_frags, monkeypatch):
    frags = email_frags
    from twinspect.code.encoders import make_encoder

    enc = make_encoder("lexical", **DetectConfig().encoder_params)
    enc.fit(frags)
    vecs = np.asarray(enc.encode(frags), dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    reps = list(range(len(frags)))
    small = range_pairs(vecs, reps, frags, threshold=0.4, cap=100, index="auto")
    exact = range_pairs(vecs, reps, frags, threshold=0.4, cap=100, index="exact")
    assert small.index == "exact" and small.index_recall is None and small.index_recall_queries == 0
    assert small.pairs == exact.pairs and small.capped == exact.capped
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 50)
    big = range_pairs(vecs, reps, frags, threshold=0.4, cap=100, index="auto")
    assert big.index == "hnsw"
    assert big.index_recall_queries == min(candidates.RECALL_QUERIES, len(reps))
    assert big.index_recall is not None and 0.9 <= big.index_recall <= 1.0
    # HNSW finds nearly all exact candidates, at the same cosines
    shared = set(big.pairs) & set(exact.pairs)
    assert len(shared) >= 0.9 * len(exact.pairs)
    assert all(abs(big.pairs[p] - exact.pairs[p]) < 1e-4 for p in shared)


def test_detect_auto_small_is_exact_report(email_frags):
    auto = detect(email_frags, DetectConfig(), quiet=True)
    exact = detect(email_frags, DetectConfig(index="exact"), quiet=True)
    assert auto.stats["index"] == exact.stats["index"] == "exact"
    assert "index_recall" not in auto.stats and "index_requested" not in auto.stats
    assert [(p.a, p.b, p.type, p.similarity) for p in auto.pairs] == \
        [(p.a, p.b, p.type, p.similarity) for p in exact.pairs]

    def without_volatile(report):  # timings vary; the config echoes the index asked for
        data = json.loads(to_json(report))
        data["stats"].pop("timings")
        data["config"].pop("index")
        return data

    assert without_volatile(auto) == without_volatile(exact)
    assert "HNSW" not in summary_line(auto)


def test_detect_auto_large_uses_hnsw_and_reports_recall(email_frags, monkeypatch):
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 50)
    report = detect(email_frags, DetectConfig(), quiet=True)
    st = report.stats
    assert st["index"] == "hnsw" and st["index_requested"] == "auto"
    assert st["index_recall_queries"] == min(candidates.RECALL_QUERIES, st["representatives"])
    assert 0.9 <= st["index_recall"] <= 1.0
    assert f"HNSW index, recall {st['index_recall']:.3f}" in summary_line(report)
    # explicit --index exact never measures recall, whatever the size
    exact = detect(email_frags, DetectConfig(index="exact"), quiet=True)
    assert exact.stats["index"] == "exact" and "index_recall" not in exact.stats
    # the clone pairs of the HNSW run are (nearly) those of exact search
    got = {(p.a, p.b) for p in report.pairs}
    want = {(p.a, p.b) for p in exact.pairs}
    assert len(got & want) >= 0.95 * len(want)


def test_clone_index_store_resolves_auto(tmp_path, examples_dir, monkeypatch):
    from twinspect.code.encoders import make_encoder
    from twinspect.code.store import CloneIndex

    small = CloneIndex.build([examples_dir], tmp_path / "small", encoder=make_encoder("lexical"), index_kind="auto")
    assert small.manifest["index"]["kind"] == "exact"
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 2)
    big = CloneIndex.build([examples_dir], tmp_path / "big", encoder=make_encoder("lexical"), index_kind="auto")
    assert big.manifest["index"]["kind"] == "hnsw"
    assert CloneIndex.load(tmp_path / "big").manifest["index"]["params"]["M"] == candidates.AUTO_HNSW_PARAMS["M"]


@pytest.mark.parametrize(("knob", "value", "cap"), [
    ("_REDUCE_CHUNK", 7, 100),  # the reduced index filled 7 projected rows at a time (same graph: one thread, same order)
    ("_GROUP_CHUNK", 50, 3),  # neighbours ranked per query ~50 entries at a time (dozens of ranges), a binding cap
])
def test_reduced_index_in_chunks_gives_the_same_candidates(email_frags, monkeypatch, knob, value, cap):
    """The reduced HNSW search's memory bounds are not result parameters: small chunks give the
    candidates, cap counts and measured recall of one chunk."""
    frags = email_frags
    from twinspect.code.encoders import make_encoder

    enc = make_encoder("lexical", **DetectConfig().encoder_params)
    vecs = enc.fit(frags).encode_sparse(frags)
    reps = list(range(len(frags)))
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 50)
    monkeypatch.setattr(candidates, "AUTO_HNSW_DIM", 32)
    whole = range_pairs(vecs, reps, frags, threshold=0.4, cap=cap, index="auto")
    assert whole.index == "hnsw" and len(whole.pairs) > 50 and (whole.capped > 0) == (cap < 10)
    monkeypatch.setattr(candidates, knob, value)
    chunked = range_pairs(vecs, reps, frags, threshold=0.4, cap=cap, index="auto")
    assert chunked.pairs == whole.pairs and chunked.capped == whole.capped
    assert chunked.index_recall == whole.index_recall


def test_reduced_search_lets_go_of_its_index_before_joining_the_neighbours(email_frags, monkeypatch):
    """The reduced HNSW search measures its recall first and then drops the index (the graph and its
    copy of the reduced vectors), so the index is gone while the found neighbour keys are joined,
    re-scored and ranked (the search's largest temporaries); the recall is still measured."""
    import weakref

    from twinspect._arrays import concatenate_consumed
    from twinspect.code import index as index_module
    from twinspect.code.encoders import make_encoder

    frags = email_frags
    vecs = make_encoder("lexical", **DetectConfig().encoder_params).fit(frags).encode_sparse(frags)
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 50)
    monkeypatch.setattr(candidates, "AUTO_HNSW_DIM", 32)
    made: list[weakref.ref] = []
    real_make = index_module.make_index

    def make_index(*args, **kwargs):
        idx = real_make(*args, **kwargs)
        made.append(weakref.ref(idx))
        return idx

    alive_at_join: list[bool] = []

    def joining(parts, *args, **kwargs):
        if args and args[0] is np.int64:  # the neighbour keys (the first join of the tail)
            alive_at_join.append(any(r() is not None for r in made))
        return concatenate_consumed(parts, *args, **kwargs)

    monkeypatch.setattr(index_module, "make_index", make_index)
    monkeypatch.setattr("twinspect._arrays.concatenate_consumed", joining)
    got = range_pairs(vecs, list(range(len(frags))), frags, threshold=0.4, cap=20, index="auto")
    assert got.index == "hnsw" and made and alive_at_join == [False]
    assert got.index_recall is not None and 0.5 < got.index_recall <= 1.0 and got.index_recall_queries > 0


def test_reduced_search_skips_the_short_first_search_once_a_chunk_shows_it_wasted(email_frags, monkeypatch):
    """Where most queries of a chunk fill their first FIRST_ROUND_K neighbours above threshold − margin
    (and so are searched again), the later chunks ask the reduced index for RERANK_OVERSAMPLE · k at once:
    fewer index searches, the same candidates and measured recall on this package (small enough for
    the graph to be nearly exact)."""
    import math

    from twinspect.code import index as index_module
    from twinspect.code.encoders import make_encoder

    frags = email_frags
    vecs = make_encoder("lexical", **DetectConfig().encoder_params).fit(frags).encode_sparse(frags)
    reps = list(range(len(frags)))
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 50)
    monkeypatch.setattr(candidates, "AUTO_HNSW_DIM", 32)
    monkeypatch.setattr(candidates, "_SEARCH_CHUNK", 64)
    monkeypatch.setattr(candidates, "FIRST_ROUND_K", 4)  # nearly every query fills 4 neighbours at 0.3
    calls: list[tuple[int, int]] = []
    real_search = index_module.HNSWIndex.search

    def search(self, vectors, k):
        calls.append((len(vectors), k))
        return real_search(self, vectors, k)

    monkeypatch.setattr(index_module.HNSWIndex, "search", search)
    runs = {}
    for share in (2.0, 0.5):  # never skip; skip once half a chunk goes on
        monkeypatch.setattr(candidates, "SKIP_FIRST_ROUND_SHARE", share)
        calls.clear()
        got = range_pairs(vecs, reps, frags, threshold=0.4, cap=20, index="auto")
        runs[share] = (got, list(calls))
    k_full = math.ceil(candidates.RERANK_OVERSAMPLE * 25)
    (two_round, two_calls), (direct, direct_calls) = runs[2.0], runs[0.5]
    assert direct.index == "hnsw" and len(direct.pairs) > 50
    assert [k for _, k in two_calls].count(4) > 1 and [k for _, k in direct_calls].count(4) == 1
    assert all(k == k_full for _, k in direct_calls[1:])
    assert len(direct_calls) < len(two_calls)
    assert direct.pairs == two_round.pairs and direct.capped == two_round.capped
    assert direct.index_recall == two_round.index_recall
