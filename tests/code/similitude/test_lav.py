"""Nikolić neighbour matching on small graphs with hand-computed answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinspect.code.similitude.cfg import ProgramGraph, load_program, program_graph
from twinspect.code.similitude.lav import graph_similarity, label_similarity, lav, lav_matrix, node_similarity
from twinspect.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[3] / "twinspect" / "examples" / "similitude" / "c"


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


# --- the bounded-memory implementation against the original dense one (tests/.../_lav_reference.py) ---

def _random_graph(rng, n, p, hubs=0):
    pool = ["assign", "call", "cond", "loop", "arith"]
    labels, kinds = ["entry", "exit"], [(), ()]
    for _ in range(2, n):
        ks = tuple(sorted(rng.choices(pool, k=rng.randint(0, 3))))
        kinds.append(ks)
        labels.append("+".join(sorted(set(ks))))
    edges = {(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < p}
    for h in range(hubs):  # a node with many successors and predecessors (switch, called helper)
        edges |= {(2 + h, b) for b in range(3, n) if b != 2 + h}
        edges |= {(b, 2 + h) for b in range(3, n, 2) if b != 2 + h}
    return graph(labels, sorted(edges), kinds)


@pytest.mark.parametrize("seed", range(6))
def test_equal_to_the_dense_reference(seed):
    import random

    import _lav_reference as ref

    rng = random.Random(seed)
    for t in range(8):
        # degrees up to ~12: every matching path (row max, two-row, enumerated, assignment) is hit
        a = _random_graph(rng, rng.randint(2, 14), rng.random() * 0.5, hubs=t % 3)
        b = _random_graph(rng, rng.randint(2, 14), rng.random() * 0.5, hubs=(t + 1) % 2)
        for labelled in (True, False):
            for eps, max_iter in ((1e-2, 10), (1e-6, 60)):
                x0 = ref.node_similarity(a, b, eps=eps, max_iter=max_iter, labelled=labelled)
                x1 = node_similarity(a, b, eps=eps, max_iter=max_iter, labelled=labelled)
                np.testing.assert_allclose(x1, x0, rtol=0, atol=1e-9)


def test_matrix_equal_to_reference_and_independent_of_workers():
    import _lav_reference as ref

    gs = [load_program(p) for p in sorted(EXAMPLES.glob("*.c"))]
    m0 = ref.lav_matrix(gs, eps=1e-4, max_iter=100)
    r1 = lav(gs, eps=1e-4, max_iter=100, workers=1)
    np.testing.assert_allclose(r1.matrix, m0, rtol=0, atol=1e-9)
    r2 = lav(gs, eps=1e-4, max_iter=100, workers=2)
    np.testing.assert_array_equal(r2.matrix, r1.matrix)
    np.testing.assert_array_equal(r2.iterations, r1.iterations)
    s = r1.summary()
    assert s["pairs"] == 45 and s["unconverged_pairs"] == 0 and 1 <= s["iterations_mean"] <= s["iterations_max"] <= 100


def test_iterations_reported_and_cap_respected():
    gs = [load_program(EXAMPLES / f"{n}.c") for n in ("bubble_sort", "merge_sort", "sum")]
    loose, tight = lav(gs, eps=1e-2, workers=1), lav(gs, eps=1e-6, workers=1)
    off = ~np.eye(3, dtype=bool)
    assert np.all(tight.iterations[off] > loose.iterations[off])
    capped = lav(gs, eps=1e-12, max_iter=3, workers=1)
    assert np.all(capped.iterations[off] == 3) and capped.summary()["unconverged_pairs"] == 3
    with pytest.raises(InputError, match="workers"):
        lav(gs, workers=0)


def _star(leaves):
    return graph(["x"] * (leaves + 1), [(0, i) for i in range(1, leaves + 1)])


def test_high_degree_star_bounded_memory_and_fixed_point():
    # Hub with 300 successors vs hub with 400 (unlabelled). Fixed point by hand, r = 300/400:
    # leaf pairs f = (h + 1)/2 (in-term: the hubs; out-term: both empty), hub pair h = (1 + r·f)/2
    # -> h = (2 + r)/(4 - r); hub-leaf pairs 0. A dense (n, m, D, D) tensor would be 301·401·400²
    # float64 (~155 GB); the traced peak must stay far below that.
    import tracemalloc

    a, b = _star(300), _star(400)
    tracemalloc.start()
    try:
        x = node_similarity(a, b, eps=1e-12, max_iter=500, labelled=False)
        s = graph_similarity(a, b, eps=1e-12, max_iter=500, labelled=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    r = 300 / 400
    h = (2 + r) / (4 - r)
    f = (h + 1) / 2
    assert x[0, 0] == pytest.approx(h, abs=1e-9)
    np.testing.assert_allclose(x[1:, 1:], f, atol=1e-9)
    assert np.all(x[0, 1:] == 0) and np.all(x[1:, 0] == 0)
    assert s == pytest.approx((h + 300 * f) / 401, abs=1e-9)
    assert peak < 64 * 2**20


def hub_program(calls: int) -> str:
    """C source: ``main`` calls ``helper`` from ``calls`` branches (helper entry in-degree = calls)."""
    body = "\n".join(f"  if (x % {k + 2} == {k % 3}) {{ y = helper(y + {k}); }} else {{ y = y - {k}; }}"
                     for k in range(calls))
    return ("int helper(int v) { int s = 0; for (int i = 0; i < v; i++) { if (i % 2) s += i; else s -= 1; }"
            f" return s; }}\nint main() {{ int x, y = 0; scanf(\"%d\", &x);\n{body}\n  printf(\"%d\", y);"
            " return 0; }\n")


def test_program_with_a_helper_called_from_250_sites_in_bounded_memory():
    import tracemalloc

    g = program_graph(hub_program(250), "c")
    indeg = np.bincount([d for _, d in g.edges], minlength=g.n_nodes)
    assert g.n_nodes > 700 and indeg.max() == 250
    small = load_program(EXAMPLES / "bubble_sort.c")
    tracemalloc.start()
    try:
        m = lav([g, small, g], workers=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m.matrix[0, 2] == pytest.approx(1.0) and 0 < m.matrix[0, 1] < 0.1
    assert m.summary()["unconverged_pairs"] == 0
    assert peak < 256 * 2**20
