"""The clone pipeline: buckets, k-NN pairs, typing, classes, on real fragments with controlled vectors."""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest

from twinspect.code.clones import ClonePair, CloneReport, DetectConfig, detect, overlaps, scan
from twinspect.code.fragments import Fragment, extract_fragments
from twinspect.errors import InputError

#: The SSCD-style cosine rule (``decision="cosine"``, the pair margin it was tuned with): the tests of
#: top-k, thresholds, margins and clustering linkages exercise that mode; the verifier has its own tests.
CosineConfig = functools.partial(DetectConfig, decision="cosine", pair_margin=0.02)

BASE = """def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.qty
    if tax:
        total = total * (1 + tax)
    return total
"""
T1_COPY = BASE.replace("    total = 0\n", "    total = 0   # start\n")
T2_COPY = BASE.replace("total", "acc").replace("items", "goods").replace("item", "g")
T3_COPY = BASE.replace("    return total", "    log(total)\n    return total")


def distinct_function(i: int, path: str | None = None) -> Fragment:
    """A function whose token structure differs from every other i (i + 3 statements)."""
    body = "".join(f"    v{j} = x * {j} + v{j - 1 if j else 0}\n" for j in range(i + 3))
    src = f"def f{i}(x):\n    v0 = 0\n{body}    return v0\n"
    return one(src, path or f"d{i}.py")


def one(src: str, path: str) -> Fragment:
    frags = extract_fragments(src, path, "python", min_lines=1)
    assert len(frags) == 1
    return frags[0]


def unit(*coords: float, dim: int = 16) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[: len(coords)] = coords
    return v / np.linalg.norm(v)


def key_pairs(report: CloneReport) -> dict[tuple[str, str], ClonePair]:
    return {(report.fragments[p.a].key, report.fragments[p.b].key): p for p in report.pairs}


def check_invariants(report: CloneReport, config: DetectConfig) -> None:
    frags = report.fragments
    assert frags == sorted(frags, key=lambda f: (f.path, f.start_line, f.end_line, f.name))
    seen = set()
    for p in report.pairs:
        assert p.a < p.b
        assert (p.a, p.b) not in seen
        seen.add((p.a, p.b))
        assert not overlaps(frags[p.a], frags[p.b])
        assert p.type in ("T1", "T2", "T3", "T4")
        if p.type in ("T3", "T4"):
            assert p.similarity >= config.threshold - 1e-6
            assert p.band is not None and p.t3_similarity is not None
        else:
            assert p.band is None
    members = [m for c in report.classes for m in c]
    assert len(members) == len(set(members)), "classes must be disjoint"
    sizes = [len(c) for c in report.classes]
    assert sizes == sorted(sizes, reverse=True) and all(s >= 2 for s in sizes)
    for c in report.classes:
        assert c == sorted(c)


def test_types_of_known_pairs_and_json_shape():
    frags = [one(BASE, "a.py"), one(T1_COPY, "b.py"), one(T2_COPY, "c.py"), one(T3_COPY, "d.py"),
             distinct_function(1, "e.py")]
    vecs = np.stack([unit(1, 0.01), unit(1, 0.02), unit(1, 0.05), unit(1, 0.1), unit(0, 1)])
    config = DetectConfig(threshold=0.8)
    report = detect(frags, config, vectors=vecs)
    check_invariants(report, config)
    pairs = key_pairs(report)
    assert pairs[("a.py:1-7", "b.py:1-7")].type == "T1"
    assert pairs[("a.py:1-7", "c.py:1-7")].type == "T2"
    assert pairs[("b.py:1-7", "c.py:1-7")].type == "T2"
    t3 = pairs[("a.py:1-7", "d.py:1-8")]
    assert t3.type == "T3" and t3.band == "VST3" and 0.9 <= t3.t3_similarity < 1
    assert not any("e.py" in a or "e.py" in b for a, b in pairs)
    assert report.classes == [[0, 1, 2, 3]]
    assert report.stats["pairs_by_type"]["T1"] == 1 and report.stats["pairs_by_type"]["T3"] == 3
    doc = report.to_json_dict()
    assert {"fragments", "pairs", "classes", "stats", "version", "config"} <= set(doc)
    assert set(doc["fragments"][0]) >= {"id", "path", "start_line", "end_line", "name", "language"}
    assert [f["id"] for f in doc["fragments"]] == list(range(5))
    p0 = doc["pairs"][0]
    assert isinstance(p0["a"], int) and isinstance(p0["similarity"], float) and p0["type"] in ("T1", "T2", "T3", "T4")


def test_input_order_does_not_matter():
    frags = [one(BASE, "a.py"), one(T3_COPY, "b.py"), distinct_function(1, "c.py"), distinct_function(2, "d.py")]
    vecs = np.stack([unit(1, 0.1), unit(1, 0.15), unit(0, 1, 0.2), unit(0, 1, 0.3)])
    ref = key_pairs(detect(frags, vectors=vecs))
    perm = [3, 1, 0, 2]
    shuffled = detect([frags[i] for i in perm], vectors=vecs[perm])
    assert [f.key for f in shuffled.fragments] == sorted(f.key for f in frags)
    got = key_pairs(shuffled)
    assert set(got) == set(ref) == {(frags[0].key, frags[1].key), (frags[2].key, frags[3].key)}
    for k in ref:
        assert got[k].similarity == pytest.approx(ref[k].similarity)


def test_threshold_and_top_k_bound_pairs():
    # fragment 0 at angle 0, others at growing angles: cos = 0.99, 0.95, 0.9, 0.8, 0.6
    cosines = [0.99, 0.95, 0.9, 0.8, 0.6]
    frags = [distinct_function(i) for i in range(6)]
    vecs = [unit(1, 0)]
    for c in cosines:
        vecs.append(unit(c, math.sqrt(1 - c * c), 0, 0))
    vecs = np.stack(vecs)  # all in one plane: each fragment's nearest neighbour is its angular neighbour
    # pair_margin=None: plain SSCD thresholding (the margin rule is tested separately)
    report = detect(frags, CosineConfig(threshold=0.85, top_k=10, pair_margin=None), vectors=vecs)
    partners_of_0 = {p.b for p in report.pairs if p.a == 0}
    assert partners_of_0 == {1, 2, 3}  # cos 0.99, 0.95, 0.9 >= 0.85; 0.8 and 0.6 are not
    assert all(p.similarity >= 0.85 - 1e-6 for p in report.pairs)
    top1 = detect(frags, CosineConfig(threshold=0.85, top_k=1, pair_margin=None), vectors=vecs)
    # with top_k=1 fragment 0 keeps only its nearest neighbour (1); 2 and 3 are nearest to each other
    assert {p.b for p in top1.pairs if p.a == 0} == {1}
    assert (2, 3) in {(p.a, p.b) for p in top1.pairs}
    assert len(top1.pairs) <= len(frags)  # at most one pair per query


def test_no_pairs_between_nested_function_and_parent():
    src = """def outer(xs):
    def inner(xs):
        total = 0
        for x in xs:
            total += x
        return total
    return inner(xs)
"""
    frags = extract_fragments(src, "n.py", "python", min_lines=1)
    assert len(frags) == 2 and overlaps(frags[0], frags[1])
    other = distinct_function(4, "z.py")
    vecs = np.stack([unit(1, 0), unit(1, 0), unit(1, 0.01)])  # all three nearly identical vectors
    report = detect(frags + [other], DetectConfig(threshold=0.5), vectors=vecs)
    got = {(report.fragments[p.a].name, report.fragments[p.b].name) for p in report.pairs}
    assert ("outer", "outer.inner") not in got and ("outer.inner", "outer") not in got
    assert len(report.pairs) == 2  # each of them with z.py


def copies(n: int, src: str = BASE) -> list[Fragment]:
    return [one(src, f"copy{i:03d}.py") for i in range(n)]


def test_small_exact_bucket_reports_all_pairs_regardless_of_top_k():
    frags = copies(6)
    vecs = np.stack([unit(1, 0.001 * i) for i in range(6)])
    report = detect(frags, DetectConfig(top_k=1), vectors=vecs)
    assert len(report.pairs) == 15 and all(p.type == "T1" for p in report.pairs)
    assert report.classes == [list(range(6))]


def test_large_exact_bucket_is_one_class_with_star_pairs():
    frags = copies(30)
    vecs = np.stack([unit(1, 0.001 * i) for i in range(30)])
    report = detect(frags, DetectConfig(top_k=2, max_bucket_pairs=20), vectors=vecs)
    assert report.classes == [list(range(30))]
    assert {(p.a, p.b) for p in report.pairs} == {(0, i) for i in range(1, 30)}
    assert report.stats["buckets"] == 1 and report.stats["representatives"] == 1
    # the star does not list the other 406 member pairs: the report states them as one identical group
    assert report.identical_groups == [{"type": "T1", "members": list(range(30))}]
    assert report.to_json_dict()["identical_groups"] == report.identical_groups


def test_identical_group_type_and_small_buckets_are_listed_pairwise():
    # 22 copies, two of them renamed (T2 of the others): one group of type T2; a 3-copy bucket is listed
    frags = copies(20) + [one(T2_COPY, "ren0.py"), one(T2_COPY, "ren1.py")] + \
        [one(distinct_function(7).text, f"small{i}.py") for i in range(3)]
    vecs = np.stack([unit(1, 0.001 * i) for i in range(22)] + [unit(0, 1, 0.001 * i) for i in range(3)])
    report = detect(frags, DetectConfig(top_k=2, max_bucket_pairs=20), vectors=vecs)
    assert len(report.identical_groups) == 1
    group = report.identical_groups[0]
    assert group["type"] == "T2" and len(group["members"]) == 22
    small = [i for i, f in enumerate(report.fragments) if f.path.startswith("small")]
    assert {(p.a, p.b) for p in report.pairs if p.a in small} == {(small[0], small[1]), (small[0], small[2]),
                                                                   (small[1], small[2])}
    assert report.stats["identical_groups"] == 1


def test_neighbour_of_a_bucket_pairs_with_its_members():
    # 15 identical copies + a Type-3 variant: only the representative is searched, top_k = 1
    frags = copies(15) + [one(T3_COPY, "variant.py")]
    vecs = np.stack([unit(1, 0) for _ in range(15)] + [unit(1, 0.2)])
    report = detect(frags, DetectConfig(top_k=1, threshold=0.9), vectors=vecs)
    v = next(i for i, f in enumerate(report.fragments) if f.path == "variant.py")
    partners = {p.a if p.b == v else p.b for p in report.pairs if v in (p.a, p.b)}
    assert len(partners) == 15
    assert all(p.type == "T3" for p in report.pairs if v in (p.a, p.b))
    assert report.classes == [list(range(16))]


def test_without_buckets_duplicates_fill_the_top_k():
    frags = copies(15) + [one(T3_COPY, "variant.py")]
    vecs = np.stack([unit(1, 0) for _ in range(15)] + [unit(1, 0.2)])
    report = detect(frags, CosineConfig(top_k=1, threshold=0.9, exact_buckets=False), vectors=vecs)
    v = next(i for i, f in enumerate(report.fragments) if f.path == "variant.py")
    partners = {p.a if p.b == v else p.b for p in report.pairs if v in (p.a, p.b)}
    assert len(partners) == 1  # plain top-1: the variant finds one copy, the copies find each other


def chain_vectors() -> np.ndarray:
    a = math.acos(0.9)  # cos(0,1) = cos(1,2) = 0.9, cos(0,2) = cos(2a) = 0.62
    return np.stack([unit(1, 0), unit(math.cos(a), math.sin(a)), unit(math.cos(2 * a), math.sin(2 * a))])


@pytest.mark.parametrize("linkage, chained", [("single", True), ("average", False), ("complete", False)])
def test_class_linkage_guards_against_chaining(linkage, chained):
    frags = [distinct_function(i) for i in range(3)]
    config = CosineConfig(threshold=0.85, class_threshold=None, linkage=linkage)  # classes at 0.85 too
    report = detect(frags, config, vectors=chain_vectors())
    check_invariants(report, config)
    assert len(report.pairs) == 2  # (0,1) and (1,2); cos(0,2) = 0.62 < 0.85
    if chained:
        assert report.classes == [[0, 1, 2]]
    else:
        assert len(report.classes) == 1 and len(report.classes[0]) == 2


def test_class_threshold_above_threshold_splits_classes():
    frags = [distinct_function(i) for i in range(3)]
    report = detect(frags, CosineConfig(threshold=0.85, class_threshold=0.95, linkage="single"),
                    vectors=chain_vectors())
    assert len(report.pairs) == 2 and report.classes == []


def margin_vectors() -> np.ndarray:
    """0–1 cos 0.95 and 2–3 cos 0.97 are best matches; 0–2 (cos 0.85) is a weaker neighbour of both;
    4's only neighbour is 0 (cos 0.86, 4's best match). Other cosines are below 0.84."""
    def mix(c: float, base: np.ndarray, axis: int) -> np.ndarray:
        return c * base + math.sqrt(1 - c * c) * unit(*([0.0] * axis + [1.0]))

    v0 = unit(1.0)
    v2 = mix(0.85, v0, 2)
    return np.stack([v0, mix(0.95, v0, 1), v2, mix(0.97, v2, 3), mix(0.86, v0, 4)]).astype(np.float32)


def test_pair_margin_suppresses_weaker_neighbour_and_keeps_best_matches():
    frags = [distinct_function(i) for i in range(5)]
    vecs = margin_vectors()
    gram = vecs @ vecs.T
    assert gram[0, 2] == pytest.approx(0.85, abs=1e-5) and gram[1, 2] < 0.84 and gram[0, 3] < 0.84

    plain = detect(frags, CosineConfig(threshold=0.84, pair_margin=None), vectors=vecs)
    assert {(p.a, p.b) for p in plain.pairs} == {(0, 1), (2, 3), (0, 2), (0, 4)}
    assert plain.stats["margin_suppressed"] == 0

    config = CosineConfig(threshold=0.84, pair_margin=0.02)
    report = detect(frags, config, vectors=vecs)
    check_invariants(report, config)
    # (0, 2): 0.85 < best(0) - 0.02 = 0.93 and < best(2) - 0.02 = 0.95 -> suppressed.
    # (0, 4): 0.86 is 4's own best match -> kept although 0 has a better partner.
    assert {(p.a, p.b) for p in report.pairs} == {(0, 1), (2, 3), (0, 4)}
    assert report.stats["margin_suppressed"] == 1

    # a wide margin keeps (0, 2): 0.85 >= best(0) - 0.15 = 0.80
    wide = detect(frags, CosineConfig(threshold=0.84, pair_margin=0.15), vectors=vecs)
    assert (0, 2) in {(p.a, p.b) for p in wide.pairs}
    # margin 0: only pairs that are the best match of one of their fragments
    zero = detect(frags, CosineConfig(threshold=0.84, pair_margin=0.0), vectors=vecs)
    assert {(p.a, p.b) for p in zero.pairs} == {(0, 1), (2, 3), (0, 4)}


def test_pair_margin_never_drops_exact_bucket_pairs():
    # three T1 copies (one bucket, cos 1) and a T3 variant at cos ~0.9 to them
    frags = copies(3) + [one(T3_COPY, "variant.py")]
    vecs = np.stack([unit(1, 0)] * 3 + [unit(1, 0.45)])
    report = detect(frags, DetectConfig(threshold=0.8, pair_margin=0.0), vectors=vecs)
    kinds = {(p.a, p.b): p.type for p in report.pairs}
    bucket = [i for i, f in enumerate(report.fragments) if f.path != "variant.py"]
    assert all(kinds[(a, b)] in ("T1", "T2") for a in bucket for b in bucket if a < b)
    # the variant's best match is a copy (cos ~0.91 < best(copy) = 1): kept through the variant's side
    assert any(t == "T3" for t in kinds.values())


def test_class_threshold_below_threshold_merges_without_reporting_pair():
    frags = [distinct_function(i) for i in range(3)]
    a = math.acos(0.6)
    vecs = np.stack([unit(1, 0), unit(math.cos(a), math.sin(a)), unit(0, 0, 1)])  # cos(0,1) = 0.6
    report = detect(frags, CosineConfig(threshold=0.7, class_threshold=0.5, linkage="average"), vectors=vecs)
    assert report.pairs == []
    assert report.classes == [[0, 1]]
    assert report.stats["knn_edges"] == 1
    # at class_threshold = threshold the same edge neither pairs nor merges
    same = detect(frags, CosineConfig(threshold=0.7, class_threshold=None, linkage="average"), vectors=vecs)
    assert same.pairs == [] and same.classes == []
    # average linkage at the lower threshold: the chain 0-1-2 (0.9, 0.9, cos(0,2) = 0.62) is one class,
    # but (0, 2) is not reported
    chain = detect(frags, CosineConfig(threshold=0.85, class_threshold=0.6, linkage="average"),
                   vectors=chain_vectors())
    assert chain.classes == [[0, 1, 2]]
    assert {(p.a, p.b) for p in chain.pairs} == {(0, 1), (1, 2)}


def test_default_config_is_the_tuned_one():
    cfg = DetectConfig()
    assert (cfg.threshold, cfg.class_threshold, cfg.linkage, cfg.top_k, cfg.pair_margin) == (0.7, None, "pairs", 10, None)
    assert (cfg.decision, cfg.max_neighbours, cfg.token_overlap, cfg.granularity) == ("verifier", 100, 0.55, "function")
    assert cfg.candidate_threshold == 0.4 and cfg.edge_threshold == 0.4
    assert cfg.encoder_params == {"identifier_weight": 0.3, "identifier_mode": "subtokens"}
    assert DetectConfig(encoder="neural").encoder_params == {}
    assert cfg.to_dict()["pair_margin"] is None and cfg.lexical_min_t3 == 0.5


def test_linkage_none_keeps_only_buckets():
    frags = copies(3) + [one(T3_COPY, "variant.py")]
    vecs = np.stack([unit(1, 0)] * 3 + [unit(1, 0.1)])
    report = detect(frags, DetectConfig(linkage="none", threshold=0.9), vectors=vecs)
    assert report.classes == [[0, 1, 2]]
    assert any(p.type == "T3" for p in report.pairs)


def test_hnsw_matches_exact_on_small_input():
    rng = np.random.default_rng(0)
    frags = [distinct_function(i) for i in range(40)]
    centers = rng.normal(size=(8, 32))
    vecs = np.stack([centers[i % 8] + 0.3 * rng.normal(size=32) for i in range(40)])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cfg = dict(threshold=0.7, top_k=5)
    exact = detect(frags, DetectConfig(**cfg), vectors=vecs)
    hnsw = detect(frags, DetectConfig(index="hnsw", **cfg), vectors=vecs)
    assert exact.pairs, "the test needs some pairs"
    assert {(p.a, p.b) for p in hnsw.pairs} == {(p.a, p.b) for p in exact.pairs}
    assert detect(frags, DetectConfig(index="hnsw", seed=3, **cfg), vectors=vecs).pairs == \
        detect(frags, DetectConfig(index="hnsw", seed=3, **cfg), vectors=vecs).pairs


def test_empty_and_single_inputs():
    empty = detect([], DetectConfig())
    assert empty.fragments == [] and empty.pairs == [] and empty.classes == []
    single = detect([one(BASE, "a.py")], vectors=np.ones((1, 4)))
    assert single.pairs == [] and single.classes == []


def test_bad_arguments():
    frags = [one(BASE, "a.py"), one(T3_COPY, "b.py")]
    with pytest.raises(ValueError):
        detect(frags, vectors=np.ones((3, 4)))
    for bad in (dict(top_k=0), dict(threshold=1.5), dict(index="faiss"), dict(encoder="x"), dict(linkage="ward"),
                dict(pair_margin=-0.1), dict(class_threshold=-2.0)):
        with pytest.raises(InputError):
            detect(frags, DetectConfig(**bad), vectors=np.ones((2, 4)))


def test_random_inputs_keep_invariants():
    rng = random.Random(1)
    srcs = [BASE, T1_COPY, T2_COPY, T3_COPY]
    frags = []
    for i in range(60):
        frags.append(one(rng.choice(srcs), f"r{i:02d}.py") if rng.random() < 0.5 else distinct_function(i % 9, f"r{i:02d}.py"))
    vecs = np.random.default_rng(2).normal(size=(60, 8)) + 2.0
    for linkage in ("single", "average", "complete"):
        config = CosineConfig(threshold=0.9, top_k=3, linkage=linkage, max_bucket_pairs=4)
        check_invariants(detect(frags, config, vectors=vecs), config)


def test_scan_with_lexical_encoder_finds_typed_clones(tmp_path):
    pytest.importorskip("twinspect.code.encoders.lexical")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(BASE + "\n\n" + T2_COPY.replace("def acc_price", "def other_price"))
    (tmp_path / "pkg" / "b.py").write_text(T1_COPY + "\n\n" + T3_COPY.replace("def total_price", "def total_price_logged"))
    (tmp_path / "pkg" / "c.py").write_text(
        "def parse_config(path):\n    with open(path) as fh:\n        lines = fh.readlines()\n    out = {}\n"
        "    for ln in lines:\n        k, v = ln.split('=', 1)\n        out[k.strip()] = v.strip()\n    return out\n"
    )
    (tmp_path / "pkg" / "notes.txt").write_text("not code")
    report = scan([tmp_path / "pkg"], DetectConfig(threshold=0.5))
    assert report.root == str(tmp_path / "pkg")
    names = {(report.fragments[p.a].name, report.fragments[p.b].name): p.type for p in report.pairs}
    by_name = {frozenset(k): v for k, v in names.items()}
    assert by_name[frozenset({"total_price"})] == "T1"  # a.py and b.py both define total_price
    assert by_name[frozenset({"total_price", "other_price"})] == "T2"
    assert by_name[frozenset({"total_price", "total_price_logged"})] == "T3"
    assert not any("parse_config" in k for k in by_name)
    st = report.stats
    assert st["files_parsed"] == 3 and st["fragments"] == 5
    assert st["skipped"].get("unsupported") == 1
    assert set(st["timings"]) >= {"mine", "encode", "verify", "classes", "total"}
    t3 = next(p for p in report.pairs if p.type == "T3")
    assert t3.score is not None and t3.score >= st["verifier"]["threshold"] and st["decision"] == "verifier"


def test_scan_missing_path_is_input_error(tmp_path):
    with pytest.raises(InputError):
        scan([tmp_path / "missing"])


def test_pair_classes_are_cliques_of_reported_pairs():
    # the chain 0-1-2 (cos 0.9, 0.9; cos(0, 2) = 0.62): average linkage at 0.6 makes one class holding
    # the unreported pair (0, 2); the default "pairs" classes never imply a pair below the threshold
    frags = [distinct_function(i) for i in range(3)]
    report = detect(frags, CosineConfig(threshold=0.85), vectors=chain_vectors())
    assert {(p.a, p.b) for p in report.pairs} == {(0, 1), (1, 2)}
    assert report.classes == [[0, 1]] or report.classes == [[1, 2]]
    assert report.stats["class_sizes"]["2"] == 1 and report.stats["largest_class"] == 2
    # a stricter class threshold splits classes whose implied pairs fall below it
    strict = detect(frags, CosineConfig(threshold=0.85, class_threshold=0.95), vectors=chain_vectors())
    assert strict.classes == [] and len(strict.pairs) == 2


def test_pair_classes_invariants_on_copies():
    frags = copies(3) + [one(T3_COPY, "variant.py")]
    vecs = np.stack([unit(1, 0)] * 3 + [unit(1, 0.3)])
    report = detect(frags, DetectConfig(threshold=0.8), vectors=vecs)
    in_pairs = {i for p in report.pairs for i in (p.a, p.b)}
    assert report.classes == [[0, 1, 2, 3]]
    for c in report.classes:
        assert set(c) <= in_pairs
        sims = vecs[c] @ vecs[c].T
        assert (sims >= 0.8 - 1e-6).all()


def test_hnsw_threads_option_and_seeded_single_thread_build_is_reproducible():
    rng = np.random.default_rng(0)
    frags = [distinct_function(i, f"f{i}.py") for i in range(40)]
    vecs = rng.normal(size=(40, 16)).astype(np.float32)
    vecs[1] = vecs[0] + 0.01
    one_a = detect(frags, DetectConfig(index="hnsw", threshold=0.5, seed=3), vectors=vecs)
    one_b = detect(frags, DetectConfig(index="hnsw", threshold=0.5, seed=3), vectors=vecs)
    assert [(p.a, p.b) for p in one_a.pairs] == [(p.a, p.b) for p in one_b.pairs]
    two = detect(frags, DetectConfig(index="hnsw", threshold=0.5, seed=3, threads=2), vectors=vecs)
    assert two.config["threads"] == 2 and two.pairs
    with pytest.raises(InputError):
        DetectConfig(threads=0).validate()


UNRELATED = """def parse_config(path):
    with open(path) as fh:
        lines = fh.readlines()
    out = {}
    for ln in lines:
        if "=" not in ln:
            continue
        k, v = ln.split("=", 1)
        out[k.strip()] = v.strip()
    return out
"""


@pytest.mark.parametrize("encoder, min_t3, expected", [
    ("neural", 0.5, ("T4", "WT3")),  # semantic evidence: T4, never filtered
    ("lexical", 0.5, None),  # default: a lexical pair below the MT3 band is not reported
    ("lexical", None, ("T3", "WT3")),  # kept on request, typed weak Type-3, never T4
])
def test_weak_pairs_need_semantic_evidence(encoder, min_t3, expected):
    frags = [one(BASE, "a.py"), one(UNRELATED, "b.py")]
    vecs = np.stack([unit(1, 0), unit(1, 0.05)])  # cosine ≈ 0.999: only the token similarity is low
    report = detect(frags, CosineConfig(lexical_min_t3=min_t3), vectors=vecs, vectors_encoder=encoder)
    got = [(p.type, p.band) for p in report.pairs]
    assert got == ([] if expected is None else [expected])
    assert report.stats["weak_lexical_dropped"] == (1 if expected is None else 0)
    assert DetectConfig().lexical_min_t3 == 0.5


@pytest.mark.parametrize("params, stock_t4, reported", [
    ({}, "drop", False),  # the stock encoder (default): its T4 pairs are not evidence, dropped
    ({}, "keep", True),  # kept as leads on request
    ({"model_path": "clone-trained-model"}, "drop", True),  # a fine-tuned encoder reports T4
])
def test_stock_neural_t4_pairs_are_dropped_by_default(monkeypatch, params, stock_t4, reported):
    import twinspect.code.clones as clones_mod

    frags = [one(BASE, "a.py"), one(UNRELATED, "b.py")]
    vecs = np.stack([unit(1, 0), unit(1, 0.05)])
    monkeypatch.setattr(clones_mod, "_encode", lambda f, c, q, fitted=None: (vecs, "neural", None))  # no model download in tests
    cfg = DetectConfig(encoder="neural", encoder_params=params, stock_t4=stock_t4)
    report = detect(frags, cfg)
    assert [(p.type, p.band) for p in report.pairs] == ([("T4", "WT3")] if reported else [])
    assert report.stats["stock_t4_dropped"] == (0 if reported else 1)
    with pytest.raises(InputError):
        DetectConfig(stock_t4="maybe").validate()
