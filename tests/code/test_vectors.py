"""FragmentVectors (dense or sparse rows behind one interface) and the reduced index of ``--index auto``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from twinspect.code import candidates
from twinspect.code.candidates import range_pairs
from twinspect.code.clones import DetectConfig, detect
from twinspect.code.encoders import make_encoder
from twinspect.code.vectors import FragmentVectors, as_vectors, reduce_dim, reduce_dim_chunks


@pytest.fixture(scope="module")
def lexical(email_frags) -> sp.csr_matrix:
    enc = make_encoder("lexical", **DetectConfig().encoder_params)
    enc.fit(email_frags)
    return enc.encode_sparse(email_frags)


def test_sparse_and_dense_rows_agree(lexical):
    sparse, dense = FragmentVectors(lexical), FragmentVectors(lexical.toarray())
    assert sparse.sparse and not dense.sparse
    assert sparse.shape == dense.shape == lexical.shape
    assert sparse.nbytes < dense.nbytes / 4  # the point of keeping the lexical rows sparse
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(sparse), 500), rng.integers(0, len(sparse), 500)
    np.testing.assert_allclose(sparse.pair_cosines(a, b), dense.pair_cosines(a, b), atol=1e-5)
    np.testing.assert_allclose(sparse.cross(a[:7], b[:9]), dense.cross(a[:7], b[:9]), atol=1e-5)
    assert sparse.cosine(int(a[0]), int(b[0])) == pytest.approx(dense.cosine(int(a[0]), int(b[0])), abs=1e-5)
    # rows are unit length (or zero), and a row's cosine with itself is 1
    norms = np.linalg.norm(sparse.dense(np.arange(len(sparse))), axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
    assert sparse.cosine(3, 3) == pytest.approx(1.0, abs=1e-6)


def test_pair_cosines_in_chunks_equal_one_pass(lexical, monkeypatch):
    """Pairs are scored a chunk at a time (bounded memory): chunks of 7 give the one-pass values bit for bit."""
    from twinspect.code import vectors

    fv = FragmentVectors(lexical)
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, len(fv), 100), rng.integers(0, len(fv), 100)
    want = fv.pair_cosines(a, b)
    monkeypatch.setattr(vectors, "_PAIR_CHUNK", 7)
    np.testing.assert_array_equal(fv.pair_cosines(a, b), want)
    assert want[0] == pytest.approx(fv.cosine(int(a[0]), int(b[0])), abs=1e-6)


def test_subset_is_a_view_by_position(lexical):
    full = FragmentVectors(lexical)
    ids = np.array([40, 3, 17, 99], dtype=np.int64)
    sub = full.subset(ids)
    assert len(sub) == 4 and sub.nbytes == full.nbytes  # shares the matrix
    np.testing.assert_allclose(sub.dense([0, 1]), full.dense([40, 3]))
    np.testing.assert_allclose(sub.pair_cosines([0, 2], [1, 3]), full.pair_cosines([40, 17], [3, 99]), atol=1e-6)
    np.testing.assert_allclose(sub.cross_all([1]), full.cross(np.array([3]), ids), atol=1e-6)
    assert sub.subset([3, 0]).dense([0]).tobytes() == full.dense([99]).tobytes()


def test_dense_input_is_normalised_and_validated():
    fv = as_vectors(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(fv.dense([0, 1]), [[0.6, 0.8], [0.0, 0.0]])
    assert as_vectors(fv) is fv
    with pytest.raises(ValueError, match="two-dimensional"):
        FragmentVectors(np.zeros(3))


def test_reduce_dim_keeps_nearest_neighbours(lexical):
    fv = FragmentVectors(lexical)
    ids = np.arange(len(fv))
    low = reduce_dim(fv, ids, 64, seed=1)
    assert low.shape == (len(fv), 64) and low.dtype == np.float32
    np.testing.assert_array_equal(low, reduce_dim(fv, ids, 64, seed=1))  # seeded
    full = fv.cross_all(ids)
    approx = low @ low.T
    np.fill_diagonal(full, -2)
    np.fill_diagonal(approx, -2)
    # the full vectors' nearest neighbour is among the reduced space's 10 nearest for most rows
    top10 = np.argsort(-approx, axis=1)[:, :10]
    hit = np.mean([full[i].argmax() in top10[i] for i in range(len(fv))])
    assert hit > 0.9
    with pytest.raises(ValueError, match="at least 1"):
        reduce_dim(fv, ids, 0)
    chunks = list(reduce_dim_chunks(fv, ids, 64, seed=1, chunk=13))  # the same rows, 13 at a time
    assert [len(c) for c in chunks[:-1]] == [13] * (len(chunks) - 1)
    np.testing.assert_array_equal(np.concatenate(chunks), low)


def test_range_pairs_sparse_equals_dense_and_reduced_index_rescored(email_frags, lexical, monkeypatch):
    frags = email_frags
    reps = list(range(len(frags)))
    sparse = range_pairs(FragmentVectors(lexical), reps, frags, threshold=0.4, cap=100, index="exact")
    dense = range_pairs(lexical.toarray(), reps, frags, threshold=0.4, cap=100, index="exact")
    assert set(sparse.pairs) == set(dense.pairs)
    assert all(abs(sparse.pairs[p] - dense.pairs[p]) < 1e-5 for p in sparse.pairs)
    # --index auto above the size limit: HNSW over a reduced SVD, neighbours re-scored with the full cosine
    monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", 50)
    monkeypatch.setattr(candidates, "AUTO_HNSW_DIM", 32)
    approx = range_pairs(FragmentVectors(lexical), reps, frags, threshold=0.4, cap=100, index="auto")
    assert approx.index == "hnsw" and approx.index_recall is not None and approx.index_recall >= 0.9
    assert set(approx.pairs) <= set(sparse.pairs)  # every kept pair really reaches the threshold
    assert len(approx.pairs) >= 0.9 * len(sparse.pairs)
    assert all(abs(approx.pairs[p] - sparse.pairs[p]) < 1e-5 for p in approx.pairs)


def test_detect_same_report_from_sparse_and_dense_vectors(email_frags, lexical):
    """The lexical encoder's sparse rows and the same rows given dense give one report."""
    from_encoder = detect(email_frags, DetectConfig(), quiet=True)
    order = sorted(range(len(email_frags)), key=lambda i: (email_frags[i].path, email_frags[i].start_line,
                                                           email_frags[i].end_line, email_frags[i].name))
    assert order == list(range(len(email_frags)))  # mine() returns fragments in report order
    given = detect(email_frags, DetectConfig(), vectors=lexical.toarray(), vectors_encoder="lexical", quiet=True)
    assert from_encoder.pairs and [(p.a, p.b, p.type) for p in from_encoder.pairs] == \
        [(p.a, p.b, p.type) for p in given.pairs]
    np.testing.assert_allclose([p.similarity for p in from_encoder.pairs], [p.similarity for p in given.pairs],
                               atol=1e-5)
    assert from_encoder.classes == given.classes
