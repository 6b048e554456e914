"""Silhouette and agglomerative clusters on precomputed similarity."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.code.similitude.cluster import agglomerative, best_clusters, distances, silhouette
from twinspect.errors import InputError

# two groups {0, 1} and {2, 3}: within-distance 0.2, between 0.8 -> every s(i) = (0.8 - 0.2) / 0.8
S = np.array([[1.0, 0.8, 0.2, 0.2], [0.8, 1.0, 0.2, 0.2], [0.2, 0.2, 1.0, 0.8], [0.2, 0.2, 0.8, 1.0]])


def test_silhouette_by_hand():
    assert silhouette(S, ["a", "a", "b", "b"]) == pytest.approx(0.75)
    # swapping labels across groups: a(i) = 0.8 (other member 0.8 away), b(i) = mean(0.2, 0.8) = 0.5
    assert silhouette(S, ["a", "b", "a", "b"]) == pytest.approx((0.5 - 0.8) / 0.8)


def test_silhouette_ignores_unlabelled_and_needs_two_labels():
    assert silhouette(S, ["a", "a", "b", None]) == pytest.approx(np.mean([
        (0.8 - 0.2) / 0.8, (0.8 - 0.2) / 0.8, 0.0]))  # singleton cluster scores 0 (scikit-learn)
    assert silhouette(S, ["a", "a", None, None]) is None
    assert silhouette(S, [None] * 4) is None
    with pytest.raises(InputError):
        silhouette(S, ["a"])


def test_distances_zero_diagonal_even_for_raw_measures():
    d = distances(S * 0.5)
    assert np.all(np.diag(d) == 0) and d[0, 1] == pytest.approx(0.6)


def test_agglomerative_and_best_k():
    c = agglomerative(S, 2)
    assert c[0] == c[1] and c[2] == c[3] and c[0] != c[2]
    labels, k, score = best_clusters(S, 2, 3)
    assert k == 2 and score == pytest.approx(0.75)
    with pytest.raises(InputError):
        agglomerative(S, 5)
