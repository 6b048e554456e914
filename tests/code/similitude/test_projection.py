"""The 2-D projections of the similitude plots: classical MDS (default) and PCA."""

from __future__ import annotations

import numpy as np

from twinspect.code.similitude.report import mds_2d, pca_2d


def _planar_similarity():
    # five points in the plane with all distances < 1, so similarity = 1 - distance is exact
    pts = np.array([[0.0, 0.0], [0.3, 0.0], [0.0, 0.4], [0.3, 0.4], [0.15, 0.2]])
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    return 1.0 - d, d


def test_mds_recovers_planar_distances():
    s, d = _planar_similarity()
    xy = mds_2d(s)
    assert xy.shape == (5, 2)
    np.testing.assert_allclose(np.linalg.norm(xy[:, None] - xy[None], axis=-1), d, atol=1e-9)


def test_pca_of_similarity_rows():
    s, _ = _planar_similarity()
    xy = pca_2d(s)
    assert xy.shape == (5, 2)
    np.testing.assert_allclose(xy.mean(0), 0.0, atol=1e-12)  # centred scores
    assert np.var(xy[:, 0]) >= np.var(xy[:, 1]) > 0  # first component carries the most variance
    # the centre point's row is the mean of the corners' rows up to its own entry: it projects near 0
    assert abs(xy[4, 0]) < 0.25 * np.ptp(xy[:, 0])
    assert pca_2d(np.ones((1, 1))).shape == (1, 2)
