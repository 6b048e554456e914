"""Nikolić neighbour matching on small graphs with hand-computed answers."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.code.similitude.cfg import ProgramGraph, program_graph
from twinspect.code.similitude.lav import graph_similarity, label_similarity, lav_matrix, node_similarity


def graph(labels, edges, kinds=None):
    kinds = kinds or [() for _ in labels]
    return ProgramGraph(path="g", language="c", functions=[], labels=list(labels), kinds=list(kinds),
                        edges=list(edges))


def test_path2_vs_path3_fixed_point():
    # Hand computation (unlabelled): x(u1,v1) = (1 + x(u2,v2)) / 2, x(u2,v2) = x(u1,v1) / 2 -> 2/3, 1/3;
    # x(u1,v2) = x(u2,v3) / 2, x(u2,v3) = (x(u1,v2) + 1) / 2 -> 1/3, 2/3; pairs with one endpoint
    # having no in- (out-) neighbours while the other has some get 0 in that term.
    a = graph("xx", [(0, 1)])
    b = graph("xxx", [(0, 1), (1, 2)])
    x = node_similarity(a, b, eps=1e-10, max_iter=500, labelled=False)
    np.testing.assert_allclose(x, [[2 / 3, 1 / 3, 0], [0, 1 / 3, 2 / 3]], atol=1e-8)
    # optimal assignment u1-v1, u2-v3: (2/3 + 2/3) / max(2, 3)
    assert graph_similarity(a, b, eps=1e-10, max_iter=500, labelled=False) == pytest.approx(4 / 9, abs=1e-8)


def test_first_iteration_by_hand():
    a = graph("xx", [(0, 1)])
    b = graph("xxx", [(0, 1), (1, 2)])
    x1 = node_similarity(a, b, eps=0, max_iter=1, labelled=False)
    np.testing.assert_allclose(x1, [[1, 0.5, 0], [0, 0.5, 1]])


def test_label_awareness():
    # same shape, one node labelled differently: L = 0 for that node pair, the others stay high
    a = graph(["entry", "exit", "call"], [(0, 2), (2, 1)], [(), (), ("call",)])
    b = graph(["entry", "exit", "assign"], [(0, 2), (2, 1)], [(), (), ("assign",)])
    c = graph(["entry", "exit", "assign+call"], [(0, 2), (2, 1)], [(), (), ("assign", "call")])
    assert label_similarity(a.kinds, a.labels, c.kinds, c.labels)[2, 2] == pytest.approx(0.5)
    assert label_similarity(a.kinds, a.labels, b.kinds, b.labels)[0, 2] == 0
    assert graph_similarity(a, a) == pytest.approx(1.0)
    assert graph_similarity(a, c) > graph_similarity(a, b)
    assert graph_similarity(a, c) == pytest.approx(graph_similarity(c, a))


def test_high_degree_nodes_use_the_assignment():
    # a switch with 6 cases (degree > 4 goes through linear_sum_assignment) is fully similar to itself
    src = "int f(int x){ switch(x){case 1: a(); break; case 2: b=1; break; case 3: c[0]=1; break;" \
          " case 4: return 1; case 5: x++; break; default: y = x > 2; } return x; }"
    g = program_graph(src, "c")
    assert graph_similarity(g, g) == pytest.approx(1.0)
    m = lav_matrix([g, g])
    np.testing.assert_allclose(m, np.ones((2, 2)))
