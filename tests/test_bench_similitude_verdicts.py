"""The selection, the seed-stats reader and the label scores of benchmarks/similitude_verdicts.py, on
tiny synthetic inputs (no network, no corpus)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sv():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import similitude_verdicts
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return similitude_verdicts


def test_select_caps_each_cell_reproducibly_and_honours_keep(sv) -> None:
    progs = [sv.Program(pr, v, str(i), Path(f"{pr}/{v}/{i}.cpp"))
             for pr in ("1-A", "2-B") for v in ("OK", "WRONG_ANSWER") for i in range(10 if pr == "1-A" else 3)]
    a = sv.select(progs, 4, seed=1)
    cells = {(p.problem, p.verdict): 0 for p in a}
    for p in a:
        cells[(p.problem, p.verdict)] += 1
    assert cells == {("1-A", "OK"): 4, ("1-A", "WRONG_ANSWER"): 4, ("2-B", "OK"): 3, ("2-B", "WRONG_ANSWER"): 3}
    assert a == sv.select(list(reversed(progs)), 4, seed=1)  # input order does not matter
    assert [p.name for p in a] != [p.name for p in sv.select(progs, 4, seed=2)]
    kept = sv.select(progs, None, seed=0, keep={"2-B/OK/0.cpp", "1-A/OK/9.cpp"})
    assert [p.name for p in kept] == ["1-A/OK/9.cpp", "2-B/OK/0.cpp"]


def test_parse_seed_stats_keeps_the_first_score_of_each_block(sv) -> None:
    text = ("plot_all_vs_all: similarity-ORIGINAL\n\tsilhouette_score: 0.149\n\tPCA Indices\n"
            "\tsilhouette_score: 0.095\nplot_by_type: similarity-NORMALIZED-NODE-SYM OK\n(181, 181)\n"
            "\tcalinski_harabasz_score: 55.6\n\tsilhouette_score: 0.204\n\tPCA Indices\n\tsilhouette_score: 0.153\n"
            "plot_by_problem_and_type: similarity-ORIGINAL-NODE-SYM 558-B OK\n(25, 25)\n"
            "\tsilhouette_score: -0.3\n")
    assert sv.parse_seed_stats(text) == {("plot_all_vs_all", "lav"): 0.149,
                                         ("plot_by_type", "normalized-node-sym", "OK"): 0.204,
                                         ("plot_by_problem_and_type", "node-sym", "558-B", "OK"): -0.3}


def test_label_scores_on_two_clear_groups(sv) -> None:
    s = np.array([[1.0, 0.9, 0.1, 0.2], [0.9, 1.0, 0.2, 0.1], [0.1, 0.2, 1.0, 0.8], [0.2, 0.1, 0.8, 1.0]])
    good, bad = ["a", "a", "b", "b"], ["a", "b", "a", "b"]
    assert sv.nn_accuracy(s, good) == 1.0 and sv.nn_accuracy(s, bad) == 0.0
    assert sv.sil_rows(s, good) > 0.5 > sv.sil_rows(s, bad)
    assert sv.sil_rows(s, ["a"] * 4) is None
    both = sv.sil_both(s, good)
    assert both["1-s"] > 0.5 and both["rows"] == sv.sil_rows(s, good)
    assert sv.majority(["a", "a", "b"]) == pytest.approx(2 / 3)
