"""Measures on the shipped ten algorithms: the seed's observations, symmetry, self-similarity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinspect.code.similitude.cfg import load_program, program_graph
from twinspect.code.similitude.measures import MEASURES, node_features, similarity_matrix, wl_labels
from twinspect.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[3] / "twinspect" / "examples" / "similitude"
NAMES = ["binary_search", "bubble_sort", "gnome_sort", "linear_search", "max", "merge_sort", "min",
         "quick_sort", "sum", "sum_odd"]


@pytest.fixture(scope="module", params=["c", "python"])
def graphs(request):
    ext = {"c": ".c", "python": ".py"}[request.param]
    return [load_program(EXAMPLES / request.param / f"{n}{ext}") for n in NAMES]


@pytest.fixture(scope="module")
def matrices(graphs):
    return {m: similarity_matrix(graphs, m) for m in MEASURES}


@pytest.mark.parametrize("measure", MEASURES)
def test_symmetric_in_unit_interval(matrices, measure):
    s = matrices[measure]
    assert s.shape == (10, 10)
    np.testing.assert_allclose(s, s.T, atol=1e-12)
    assert s.min() >= 0 and s.max() <= 1


@pytest.mark.parametrize("measure", ["wl-tokens", "cfg", "normalized-node-sym", "lav"])
def test_self_similarity_is_one(matrices, measure):
    np.testing.assert_allclose(np.diag(matrices[measure]), 1.0)


@pytest.mark.parametrize("measure", MEASURES)
def test_self_similarity_is_highest_in_its_row(matrices, measure):
    s = matrices[measure]
    assert np.all(np.diag(s) >= s.max(axis=1) - 1e-12)


def test_raw_node_sym_is_not_one_on_the_diagonal(matrices):
    d = np.diag(matrices["node-sym"])
    assert d.max() == pytest.approx(1.0) and d.min() < 0.9


@pytest.mark.parametrize("measure", ["node-sym", "normalized-node-sym", "lav"])
def test_min_and_max_indistinguishable(matrices, measure):
    s = matrices[measure]
    i, j = NAMES.index("min"), NAMES.index("max")
    np.testing.assert_allclose(s[i], s[j], atol=1e-9)
    assert s[i, j] == pytest.approx(s[i, i])


def test_min_max_nearest_under_default_measure(matrices):
    s = matrices["wl-tokens"].copy()
    np.fill_diagonal(s, -1)
    i, j = NAMES.index("min"), NAMES.index("max")
    assert s[i].argmax() == j and s[j].argmax() == i


@pytest.mark.parametrize("measure", ["lav", "wl-tokens"])
def test_bubble_nearest_is_gnome(matrices, measure):
    s = matrices[measure].copy()
    np.fill_diagonal(s, -1)
    assert NAMES[s[NAMES.index("bubble_sort")].argmax()] == "gnome_sort"


def test_merge_and_quick_sort_apart_under_lav(matrices):
    s = matrices["lav"].copy()
    np.fill_diagonal(s, np.nan)
    others = [NAMES.index(n) for n in ("binary_search", "linear_search", "min", "max", "sum", "sum_odd")]
    for name in ("merge_sort", "quick_sort"):
        row = s[NAMES.index(name)]
        assert np.nanmax(row[others]) < 0.25


def test_node_features_are_unit_length():
    g = program_graph("int f(int x){ while (x) { x--; } return x; }", "c")
    phi = node_features(g)
    np.testing.assert_allclose(np.linalg.norm(phi, axis=1), 1.0)


def test_wl_labels_distinguish_structure_not_names():
    a = program_graph("int f(int x){ if (x > 0) { y = 1; } return x; }", "c")
    b = program_graph("int g(int q){ if (q > 9) { z = 2; } return q; }", "c")
    c = program_graph("int f(int x){ while (x > 0) { y = 1; } return x; }", "c")
    assert sorted(wl_labels(a, 2)) == sorted(wl_labels(b, 2))
    assert sorted(wl_labels(a, 2)) != sorted(wl_labels(c, 2))
    assert len(wl_labels(a, 2)) == 3 * a.n_nodes


def test_renamed_program_scores_one_and_unknown_measure_fails():
    a = program_graph("int f(int x){ if (x > 0) { y = 1; } return x; }", "c")
    b = program_graph("int g(int q){ if (q > 9) { z = 2; } return q; }", "c")
    c = program_graph("int h(int x){ while (x > 0) { x = x / 2; } return x; }", "c")
    s = similarity_matrix([a, b, c], "wl-tokens")
    assert s[0, 1] == pytest.approx(1.0) and s[0, 2] < 0.9
    with pytest.raises(InputError, match="unknown measure"):
        similarity_matrix([a], "bogus")


def test_cfg_measure_ignores_tokens_and_sees_loop_nesting():
    from twinspect.code.similitude.structure import depth_labels, loop_depths

    nested = "int f(int n){ int s = 0; for (int i = 0; i < n; i++) { for (int j = 0; j < n; j++) { s += i * j; } } return s; }"
    renamed = "int g(int m){ int t = 0; for (int a = 0; a < m; a++) { for (int b = 0; b < m; b++) { t += a * b; } } return t; }"
    sequence = "int f(int n){ int s = 0; for (int i = 0; i < n; i++) { s += i; } for (int j = 0; j < n; j++) { s += j; } return s; }"
    ga, gb, gc = (program_graph(src, "c") for src in (nested, renamed, sequence))
    # the inner loop's blocks are at depth 2 in the nest, nothing is deeper than 1 in the sequence
    assert max(loop_depths(ga.functions[0])) == 2 and max(loop_depths(gc.functions[0])) == 1
    assert sorted(depth_labels(ga)) == sorted(depth_labels(gb)) != sorted(depth_labels(gc))
    s = similarity_matrix([ga, gb, gc], "cfg")
    assert s[0, 1] == pytest.approx(1.0) and s[0, 2] < 0.9
    np.testing.assert_allclose(np.diag(s), 1.0)


def test_cfg_measure_does_not_depend_on_tokens(graphs):
    import dataclasses

    stripped = [dataclasses.replace(g, tokens=[]) for g in graphs]
    np.testing.assert_array_equal(similarity_matrix(stripped, "cfg"), similarity_matrix(graphs, "cfg"))
    assert not np.array_equal(similarity_matrix(stripped, "wl-tokens"), similarity_matrix(graphs, "wl-tokens"))


def test_deprecated_measure_name_warns_and_gives_the_same_matrix(graphs):
    with pytest.warns(DeprecationWarning, match="wl-tokens"):
        old = similarity_matrix(graphs, "twinspect")
    np.testing.assert_array_equal(old, similarity_matrix(graphs, "wl-tokens"))
