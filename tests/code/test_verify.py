"""The clone verifier: features on real snippets, the tree ensemble, the model file, group pairs, embed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twinspect.code.clones import DetectConfig, detect
from twinspect.code.embed import embed, write_embeddings
from twinspect.code.evaluate.bcb import FoundPairs
from twinspect.code.evaluate.matching import report_view
from twinspect.code.fragments import extract_fragments
from twinspect.code.normalize import normalized_lines
from twinspect.code.verify import FEATURES, PairFeatures, Verifier, load_verifier, verify_pairs
from twinspect.errors import InputError

BASE = """def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.qty
    if tax:
        total = total * (1 + tax)
    return total
"""
EDITED = BASE.replace("    return total", "    log(total)\n    return total").replace("total", "acc")
OTHER = """def parse_config(path):
    with open(path) as fh:
        lines = fh.readlines()
    out = {}
    for ln in lines:
        k, v = ln.split("=", 1)
        out[k.strip()] = v.strip()
    return out
"""


def one(src: str, path: str):
    (frag,) = extract_fragments(src, path, "python", min_lines=1)
    return frag


def test_features_of_identical_edited_and_unrelated_pairs():
    frags = [one(BASE, "a.py"), one(BASE, "b.py"), one(EDITED, "c.py"), one(OTHER, "d.py")]
    x = PairFeatures(frags).compute(np.array([0, 0, 0]), np.array([1, 2, 3]))
    assert x.shape == (3, len(FEATURES)) and x.dtype == np.float32
    col = {name: i for i, name in enumerate(FEATURES)}
    assert np.allclose(x[0, [col[n] for n in FEATURES if n != "length"]], 1.0, atol=1e-5)
    # one inserted line out of 8 (renamed identifiers are the same after abstraction): 7 of 8 lines align
    assert x[1, col["line_lcs"]] == pytest.approx(7 / 8)
    assert x[1, col["lcs_min"]] > 0.85 and x[1, col["identifier_tfidf"]] < 0.9
    assert (x[2] < x[1]).sum() >= 7  # the unrelated pair is less alike on nearly every feature
    assert 0.0 < x[0, col["length"]] < 1.0


def test_verify_pairs_decides_as_full_scoring_on_real_code():
    """The two-stage scorer (bag features only where the monotone bound reaches the threshold)
    accepts exactly the pairs full scoring accepts, with the same scores, on every pair of the
    example corpus's Python functions."""
    from pathlib import Path

    from twinspect.code.fragments import mine

    root = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones" / "python"
    frags, _ = mine([root], min_lines=3, quiet=True)
    assert len(frags) >= 8
    a, b = (np.asarray(t, dtype=np.int64) for t in zip(*[(i, j) for i in range(len(frags)) for j in range(i + 1, len(frags))]))
    verifier = load_verifier()
    full_x = PairFeatures(frags).compute(a, b)
    full = verifier.score(full_x)
    x, scores = verify_pairs(PairFeatures(frags), verifier, a, b)
    accepted = full >= verifier.threshold
    assert accepted.any() and (~accepted).any()
    assert np.array_equal(scores >= verifier.threshold, accepted)
    np.testing.assert_allclose(scores[accepted], full[accepted])
    np.testing.assert_allclose(x[accepted], full_x[accepted])
    # a rejected pair's score is an upper bound of its real score
    assert np.all(scores[~accepted] >= full[~accepted] - 1e-12)
    with pytest.raises(ValueError, match="unknown features"):
        PairFeatures(frags).compute(a, b, columns=["nope"])


def test_trigram_counts_match_a_plain_count_whatever_the_chunk():
    """The chunked trigram matrix holds, per fragment, each abstracted-token trigram's count in the
    column of its rank among all distinct trigrams, however the fragments are cut into chunks."""
    from collections import Counter
    from pathlib import Path

    from twinspect.code.fragments import mine
    from twinspect.code.normalize import abstract_tokens, token_ids
    from twinspect.code.verify import _trigram_counts

    root = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"
    frags, _ = mine([root], min_lines=3, quiet=True)
    ids, lengths, vocab = token_ids([abstract_tokens(f) for f in frags])
    v = len(vocab)
    per_frag, start = [], 0
    for n in lengths.tolist():
        t = ids[start:start + n].tolist()
        per_frag.append(Counter((t[i] * v + t[i + 1]) * v + t[i + 2] for i in range(n - 2)))
        start += n
    vocab3 = sorted(set().union(*per_frag))
    col = {c: j for j, c in enumerate(vocab3)}
    want = np.zeros((len(frags), len(vocab3)), dtype=np.float32)
    for r, counts in enumerate(per_frag):
        for c, k in counts.items():
            want[r, col[c]] = k
    assert want.sum() > 100 and (want > 1).any()
    for chunk in (1, 37, 1 << 22):  # every fragment its own chunk, fragments cut mid-list, one chunk
        got = _trigram_counts(ids, lengths, v, chunk_tokens=chunk)
        assert got.has_sorted_indices
        np.testing.assert_array_equal(got.toarray(), want)
        # the ids asked for a chunk of fragments at a time: the same matrix
        asked: list[tuple[int, int]] = []

        def chunk_ids(r0: int, r1: int, asked: list = asked, bounds: np.ndarray = np.cumsum(lengths) - lengths
                      ) -> np.ndarray:
            asked.append((r0, r1))
            return ids[bounds[r0]:bounds[r1 - 1] + lengths[r1 - 1]]

        got = _trigram_counts(chunk_ids, lengths, v, chunk_tokens=chunk)
        np.testing.assert_array_equal(got.toarray(), want)
        assert asked[0][0] == 0 and all(a[1] == b[0] for a, b in zip(asked, asked[1:]))
    # a chunk whose lists are all too short for a trigram (here the whole input) has none: no error
    short = _trigram_counts(np.array([1, 2, 3, 4, 5]), np.array([2, 0, 1, 2]), 6, chunk_tokens=1 << 22)
    assert short.shape == (4, 1) and short.nnz == 0


def test_sequence_strings_and_counts_match_a_plain_encoding_whatever_the_chunk():
    """The alignment strings (one character per token, ids wrapped past the usable code points) and the
    per-fragment symbol counts equal a token-by-token encoding, however the lists are cut into chunks."""
    from collections import Counter

    from twinspect.code.verify import _CHAR_SPAN, _FIRST_CHAR, _SURROGATES, _as_strings, _list_counts

    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 40, size=50)
    lengths[[4, 9]] = 0  # empty lists among them
    ids = rng.integers(0, 30, size=int(lengths.sum()))
    ids[::7] += _CHAR_SPAN  # ids past the code points wrap onto low ones
    ids[3] = _SURROGATES[0] - _FIRST_CHAR  # lands on the first surrogate: moved past the block

    def char(i: int) -> str:
        c = i % _CHAR_SPAN + _FIRST_CHAR
        return chr(c + (_SURROGATES[1] - _SURROGATES[0]) if c >= _SURROGATES[0] else c)

    starts = np.concatenate([[0], np.cumsum(lengths)])
    want = ["".join(char(int(i)) for i in ids[starts[k]:starts[k + 1]]) for k in range(len(lengths))]
    for chunk in (1, 23, 1 << 22):  # every list its own chunk, chunks of a few lists, one chunk
        assert _as_strings(ids, lengths, chunk_tokens=chunk) == want
    ncols = int(min(_CHAR_SPAN, ids.max() + 1))  # as PairFeatures sizes it
    dense = np.zeros((len(lengths), ncols), dtype=np.float32)
    for k in range(len(lengths)):
        for sym, cnt in Counter(int(i) % _CHAR_SPAN for i in ids[starts[k]:starts[k + 1]]).items():
            dense[k, sym] = cnt
    assert (dense > 1).any()
    for chunk in (1, 23, 1 << 22):  # the counts are made a chunk of lists at a time: same matrix
        got = _list_counts(ids, lengths, ncols, wrap=_CHAR_SPAN, chunk_tokens=chunk)
        assert got.has_canonical_format and got.dtype == np.float32
        np.testing.assert_array_equal(got.toarray(), dense)
        # canonical indeed (the flag is set, not checked, by _list_counts): strictly ascending columns per row
        assert all((np.diff(got.indices[got.indptr[r]:got.indptr[r + 1]]) > 0).all() for r in range(got.shape[0]))
        assert got.nnz == np.count_nonzero(dense)
    # ids already of the index dtype (int32, as PairFeatures passes them) are counted, not sorted in place
    small = (ids % _CHAR_SPAN).astype(np.int32)
    before = small.copy()
    np.testing.assert_array_equal(_list_counts(small, lengths, ncols).toarray(), dense)
    np.testing.assert_array_equal(small, before)


def test_detect_verifies_in_chunks_with_the_same_result(monkeypatch):
    """Verifying the candidates in chunks (a memory bound) reports exactly what one pass reports."""
    from pathlib import Path

    import twinspect.code.clones as clones
    from twinspect.code.fragments import mine

    root = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"
    frags, _ = mine([root], min_lines=3, quiet=True)
    whole = detect(frags, DetectConfig())
    monkeypatch.setattr(clones, "VERIFY_CHUNK", 3)
    chunked = detect(frags, DetectConfig())
    assert whole.pairs and chunked.pairs == whole.pairs
    assert chunked.classes == whole.classes
    assert chunked.stats["candidate_pairs"] == whole.stats["candidate_pairs"] > 3 * 3


def test_bounds_bound_the_alignments_and_spare_most_of_them(monkeypatch):
    """PairFeatures.bounds (multiset intersections instead of LCS) is at or above every feature on
    every pair of the example corpus, strictly above where statements were reordered; with the
    prefilter, verify_pairs aligns only the pairs whose bound reaches the threshold and decides as
    without it."""
    from pathlib import Path

    from twinspect.code import verify
    from twinspect.code.fragments import mine

    root = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones" / "python"
    frags, _ = mine([root], min_lines=3, quiet=True)
    frags += [one(BASE, "a.py"), one(BASE.replace("    if tax:\n        total = total * (1 + tax)\n", "")
                                     .replace("    total = 0\n", "    total = 0\n    if tax:\n"
                                              "        total = total * (1 + tax)\n"), "r.py")]
    a, b = (np.asarray(t, dtype=np.int64) for t in zip(*[(i, j) for i in range(len(frags)) for j in range(i + 1, len(frags))]))
    feats = PairFeatures(frags)
    ub, exact = feats.bounds(a, b), feats.compute(a, b)
    col = {name: i for i, name in enumerate(FEATURES)}
    seq = [col[f] for f in verify.SEQUENCE_FEATURES]
    assert np.all(ub[:, seq] >= exact[:, seq] - 1e-6)
    np.testing.assert_array_equal(ub[:, [col[f] for f in verify.SPARSE_FEATURES]], 1.0)
    np.testing.assert_array_equal(ub[:, [col["size_ratio"], col["length"]]], exact[:, [col["size_ratio"], col["length"]]])
    # the reordered copy (last pair): same tokens, so the bound is 1, but the LCS is not
    assert ub[-1, col["lcs_min"]] == pytest.approx(1.0) and exact[-1, col["lcs_min"]] < 0.95

    aligned: list[int] = []
    compute = PairFeatures.compute

    def counting(self, a, b, columns=None, workers=1):
        if columns == verify.SEQUENCE_FEATURES:
            aligned.append(len(a))
        return compute(self, a, b, columns, workers)

    monkeypatch.setattr(PairFeatures, "compute", counting)
    verifier = load_verifier()
    x, scores = verify_pairs(PairFeatures(frags), verifier, a, b)
    x0, scores0 = verify_pairs(PairFeatures(frags), verifier, a, b, prefilter=False)
    assert aligned[-1] == len(a) and 0 < aligned[0] < len(a) // 2
    accepted = scores0 >= verifier.threshold
    assert accepted.any()
    assert np.array_equal(scores >= verifier.threshold, accepted)
    np.testing.assert_array_equal(x[accepted], x0[accepted])
    np.testing.assert_array_equal(scores[accepted], scores0[accepted])


def test_normalized_lines_drop_braces_and_abstract_names():
    (java,) = extract_fragments("class A {\n  int f(int a) {\n    return a + 1;\n  }\n}\n", "A.java", "java",
                                min_lines=1)
    assert normalized_lines(java) == ["int ID ( int ID ) {", "return ID + LIT ;"]


def stump(feature: int, threshold: float, low: float, high: float) -> dict:
    return {"feature": [feature, 0, 0], "threshold": [threshold, 0.0, 0.0], "left": [1, 0, 0], "right": [2, 0, 0],
            "value": [0.0, low, high], "leaf": [False, True, True]}


def test_tree_ensemble_scores_by_hand():
    v = Verifier(baseline=0.5, trees=[stump(0, 0.6, -2.0, 1.0), stump(8, 0.3, -1.0, 2.0)], threshold=0.5)
    x = np.zeros((3, len(FEATURES)))
    x[1, 0] = 0.9
    x[2, [0, 8]] = 0.9
    raw = np.array([0.5 - 2.0 - 1.0, 0.5 + 1.0 - 1.0, 0.5 + 1.0 + 2.0])
    assert np.allclose(v.score(x), 1 / (1 + np.exp(-raw)))


@pytest.mark.parametrize("name", [None, "strict"])
def test_shipped_model_is_monotone_in_every_feature(name):
    v = load_verifier(name)
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(200, len(FEATURES)))
    base = v.score(x)
    for j in range(len(FEATURES)):
        up = x.copy()
        up[:, j] = np.minimum(1.0, up[:, j] + 0.2)
        assert np.all(v.score(up) >= base - 1e-12), FEATURES[j]
    assert 0.0 < v.threshold < 1.0 and "out_of_fold_rates" in v.info
    if name == "strict":  # fitted with the blind-labelled real code of the tune projects, never the held-out ones
        assert v.info["real_code_projects"] and v.info["real_code_holdout"]
        assert not set(v.info["real_code_projects"]) & set(v.info["real_code_holdout"])


def test_strict_verifier_reports_a_subset_on_real_code():
    """On the example corpus the strict model keeps only pairs the default one keeps too, fewer of them."""
    from pathlib import Path

    from twinspect.code.fragments import mine

    root = Path(__file__).resolve().parents[2] / "twinspect" / "examples" / "clones"
    frags, _ = mine([root], quiet=True)
    pairs = {}
    for name in (None, "strict"):
        rep = detect(frags, DetectConfig(verifier_path=name), quiet=True)
        pairs[name] = {(p.a, p.b) for p in rep.pairs if p.type == "T3"}
        assert rep.stats["verifier"]["threshold"] == pytest.approx(load_verifier(name).threshold, abs=1e-6)
    assert pairs["strict"] < pairs[None]


def test_model_file_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_verifier(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not a readable"):
        load_verifier(tmp_path / "bad.json")
    doc = load_verifier().to_json_dict()
    doc["feature_version"] = 0
    (tmp_path / "old.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="version"):
        load_verifier(tmp_path / "old.json")


def test_large_buckets_are_stated_as_group_pairs():
    # 12 copies of BASE and 12 of EDITED: 24 members > max_bucket_pairs, so two stars plus a group pair
    frags = [one(BASE, f"a{i}.py") for i in range(12)] + [one(EDITED, f"b{i}.py") for i in range(12)]
    vecs = np.ones((24, 4), dtype=np.float32)
    report = detect(frags, DetectConfig(max_bucket_pairs=20), vectors=vecs, vectors_encoder="lexical")
    assert len(report.group_pairs) == 1 and report.stats["group_pairs"] == 1
    g = report.group_pairs[0]
    assert len(g["a"]) == 12 and len(g["b"]) == 12 and g["type"] == "T3"
    listed = {(p.a, p.b) for p in report.pairs if p.type == "T3"}
    assert len(listed) == 23  # two stars through the representatives
    view = report_view(report.to_json_dict())
    found = FoundPairs.from_view(view, lambda s: s.path)
    assert found.stated()("a5.py", "b7.py") and not found.listed()("a5.py", "b7.py")
    assert not found.stated()("a5.py", "a5.py")


def test_embed_writes_normalised_vectors(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(BASE + "\n\n" + OTHER)
    frags, vecs = embed([tmp_path / "src"], min_lines=1)
    assert [f.name for f in frags] == ["total_price", "parse_config"]
    assert vecs.dtype == np.float32 and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    write_embeddings(tmp_path / "out.npz", frags, vecs)
    data = np.load(tmp_path / "out.npz")
    assert list(data["start_lines"]) == [1, 10] and data["vectors"].shape == vecs.shape
    assert list(data["paths"]) == ["m.py", "m.py"]
    files, fvecs = embed([tmp_path / "src"], granularity="file", min_lines=1)
    assert len(files) == 1 and fvecs.shape[0] == 1
    with pytest.raises(InputError):
        embed([tmp_path / "src"], granularity="module")


def test_eval_takes_the_verifier_option(capsys, tmp_path):
    """`clones eval sscd|bcb --verifier` names a shipped model or a file; a missing one is one line, exit 2,
    before any benchmark data is read."""
    from tests.cli_run import run

    code, _, err = run(capsys, "clones", "eval", "bcb", "--verifier", tmp_path / "missing.json",
                       "--data", tmp_path / "no-data")
    assert code == 2 and "missing.json" in err and "no-data" not in err and len(err.strip().splitlines()) == 1


def test_bad_verifier_fails_in_validate(tmp_path):
    """DetectConfig.validate() reads the verifier model, so every entry point refuses a bad one before mining."""
    from twinspect.code.clones import DetectConfig
    from twinspect.errors import InputError

    cfg = DetectConfig()
    cfg.verifier_path = str(tmp_path / "missing.json")
    with pytest.raises(InputError, match="missing.json"):
        cfg.validate()
    cfg.verifier_path = "strict"
    cfg.validate()


def test_identifier_tfidf_rows_equal_scikit_learns_transformer():
    """The identifier features' weights are scikit-learn's TfidfTransformer (sublinear tf, smoothed idf,
    L2 rows), computed in place on the counts' entries, empty rows included; the counts are untouched."""
    from sklearn.feature_extraction.text import TfidfTransformer

    from twinspect.code.verify import _list_counts, _tfidf_rows

    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 30, size=40)
    lengths[[0, 7, 39]] = 0  # empty rows: first, inside, last
    counts = _list_counts(rng.integers(0, 25, size=int(lengths.sum())), lengths, 25)
    before = counts.toarray()
    want = TfidfTransformer(sublinear_tf=True, smooth_idf=True, norm="l2").fit_transform(counts.astype(np.float64)).toarray()
    assert (before > 1).any()
    whole = _tfidf_rows(counts)
    for chunk in (1, 7, 1 << 21):  # weighted a chunk of rows at a time: the same matrix
        got = _tfidf_rows(counts, chunk_entries=chunk)
        assert got.dtype == np.float64 and got.has_canonical_format
        np.testing.assert_allclose(got.toarray(), want, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(got.toarray(), whole.toarray())
        np.testing.assert_array_equal(counts.toarray(), before)


def test_list_sums_equal_a_sum_per_list_whatever_the_chunk():
    """Identifiers per fragment are summed a chunk of lists at a time; empty lists (first, inside, last) sum to 0."""
    from twinspect.code.verify import _list_sums

    rng = np.random.default_rng(8)
    lengths = rng.integers(0, 9, size=60)
    lengths[[0, 5, 6, 59]] = 0
    values = rng.random(int(lengths.sum())) < 0.4
    starts = np.cumsum(lengths) - lengths
    want = np.array([int(values[s:s + n].sum()) for s, n in zip(starts, lengths)])
    assert want.max() > 1
    bounds = np.cumsum(lengths) - lengths
    for chunk in (1, 10, 1 << 21):
        got = _list_sums(values, lengths, chunk=chunk)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
        # the values of a range of lists asked for on demand: the same sums
        got = _list_sums(lambda r0, r1: values[bounds[r0]:bounds[r1 - 1] + lengths[r1 - 1]], lengths, chunk=chunk)
        np.testing.assert_array_equal(got, want)


def test_token_ids_by_chunk_number_tokens_as_token_ids_and_feed_list_counts():
    """Ids made a chunk of lists at a time equal token_ids' ids; counts from them (and from int64 ids,
    which are not modified) equal the counts of the whole id array."""
    from twinspect.code.normalize import token_ids, token_ids_by_chunk
    from twinspect.code.verify import _list_counts

    rng = np.random.default_rng(11)
    words = ["self", "x", "(", ")", "return", "if", "y2", "==", "_z"]
    lists = [[words[i] for i in rng.integers(0, len(words), size=n)] for n in rng.integers(0, 25, size=30)]
    lists[3] = []
    want_ids, want_len, want_vocab = token_ids(lists)
    ids, lengths, vocab = token_ids_by_chunk(lists)
    assert vocab == want_vocab
    np.testing.assert_array_equal(lengths, want_len)
    np.testing.assert_array_equal(ids(0, len(lists)), want_ids)
    np.testing.assert_array_equal(np.concatenate([ids(0, 7), ids(7, 8), ids(8, 30)]), want_ids)
    before = want_ids.copy()
    whole = _list_counts(want_ids, want_len, len(vocab), chunk_tokens=50)
    np.testing.assert_array_equal(want_ids, before)  # int64 ids without wrap: still not modified
    for chunk in (1, 50, 1 << 21):
        got = _list_counts(ids, lengths, len(vocab), chunk_tokens=chunk)
        assert (got != whole).nnz == 0 and np.array_equal(got.indices, whole.indices)
