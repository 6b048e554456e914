"""Tests of the clone-benchmark metrics (twinspect.code.evaluate) on hand-made cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinspect.code import evaluate as ev
from twinspect.code.evaluate import BCBPair, FoundPairs, Span, SSCDLabel

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
SSCD_DIR = SHARED / "data" / "clones" / "sscd"


# ---------------------------------------------------------------- line-range matching


def test_overlap_exactly_seventy_percent_matches():
    labelled = Span("f.c", 1, 10)  # 10 lines
    # reported 4..20 shares lines 4..10 = 7 lines = 70 % of the shorter (10) → match
    assert ev.spans_match(Span("f.c", 4, 20), labelled)
    # 5..20 shares 6 lines = 60 % → no match
    assert not ev.spans_match(Span("f.c", 5, 20), labelled)


def test_overlap_uses_shorter_range_and_same_file():
    labelled = Span("f.c", 100, 199)  # 100 lines
    inner = Span("f.c", 120, 129)  # 10 lines fully inside: overlap 10 = 100 % of the shorter
    assert ev.spans_match(inner, labelled)
    assert not ev.spans_match(Span("g.c", 100, 199), labelled)
    # 3 lines of a 10-line range: 30 % → no
    assert not ev.spans_match(Span("f.c", 197, 206), labelled)


def test_byte_identical_files_are_one_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.c").write_bytes(b"int f() { return 1; }\n")
    (tmp_path / "b" / "y.c").write_bytes(b"int f() { return 1; }\n")
    (tmp_path / "b" / "z.c").write_bytes(b"int f() { return 2; }\n")
    eq = ev.file_equivalence(tmp_path, ["a/x.c", "b/y.c", "b/z.c"])
    assert eq["a/x.c"] == eq["b/y.c"] == "a/x.c"
    assert eq["b/z.c"] == "b/z.c"
    assert ev.spans_match(Span("b/y.c", 1, 1), Span("a/x.c", 1, 1), eq)
    assert not ev.spans_match(Span("b/z.c", 1, 1), Span("a/x.c", 1, 1), eq)


# ---------------------------------------------------------------- SSCD pair scoring


def _report(frags, pairs):
    return {
        "fragments": [
            {"id": i, "path": p, "start_line": s, "end_line": e, "name": "", "language": "c"}
            for i, (p, s, e) in enumerate(frags)
        ],
        "pairs": [{"a": a, "b": b, "similarity": 0.9, "type": "T3"} for a, b in pairs],
        "classes": [],
        "stats": {},
    }


def test_sscd_recall_and_precision_denominator():
    labels = [
        SSCDLabel(Span("p1.c", 10, 29), Span("o1.c", 5, 24), "function"),
        SSCDLabel(Span("p2.c", 1, 10), Span("o2.c", 1, 10), "function"),
    ]
    frags = [
        ("p1.c", 10, 29),  # 0 private of label 0
        ("o1.c", 6, 24),  # 1 original of label 0 (19/19 overlap)
        ("x.c", 1, 50),  # 2 unrelated
        ("p2.c", 1, 10),  # 3 private of label 1
        ("y.c", 1, 10),  # 4 unrelated
        ("z.c", 1, 10),  # 5 unrelated
        ("p1.c", 40, 60),  # 6 another function in the private file, not labelled
    ]
    pairs = [
        (1, 0),  # true pair, reversed orientation → counts
        (0, 2),  # private of label 0 with an unrelated fragment → FP in the denominator
        (3, 4),  # private of label 1 with an unrelated fragment → FP in the denominator
        (4, 5),  # no private side → not in the precision denominator
        (6, 2),  # unlabelled fragment of a private file → not in the denominator
    ]
    out = ev.score_sscd(ev.report_view(_report(frags, pairs)), labels)
    assert out["found"] == 1 and out["labels"] == 2
    assert out["recall"] == pytest.approx(0.5)
    assert out["private_pairs"] == 3 and out["true_pairs"] == 1
    assert out["precision"] == pytest.approx(1 / 3)
    assert out["missed"] == [1]
    # the two pairs in the denominator that match no label, with their spans, in report order
    assert out["false_pairs"] == [[["p1.c", 10, 29], ["x.c", 1, 50]], [["p2.c", 1, 10], ["y.c", 1, 10]]]


def test_copy_aware_scoring_counts_identical_copies_of_the_original(tmp_path):
    body = "int f(int x) {\n  int y = x;\n  y += 1;\n  return y;\n}\n"
    (tmp_path / "o.c").write_text("// header\n" + body)  # original at lines 2-6
    (tmp_path / "copy.c").write_text(body)  # identical function text at lines 1-5 of another file
    (tmp_path / "p.c").write_text(body.replace("y += 1", "y += 2"))
    labels = [SSCDLabel(Span("p.c", 1, 5), Span("o.c", 2, 6), "function")]
    view = ev.report_view(_report([("p.c", 1, 5), ("o.c", 2, 6), ("copy.c", 1, 5)], [(0, 1), (0, 2)]))
    strict = ev.score_sscd(view, labels)
    assert strict["private_pairs"] == 2 and strict["true_pairs"] == 1  # the copy counts as false
    copies = ev.fragment_copies(tmp_path, view.spans.values())
    assert copies[Span("copy.c", 1, 5)] == [Span("o.c", 2, 6)]
    aware = ev.score_sscd(view, labels, copies=copies)
    assert aware["true_pairs"] == 2 and aware["precision"] == pytest.approx(1.0)


def test_report_view_rejects_dangling_pair_ids():
    bad = _report([("a.c", 1, 5)], [(0, 7)])
    with pytest.raises(ev.InputError):
        ev.report_view(bad)
    with pytest.raises(ev.InputError):
        ev.report_view({"pairs": []})


def test_report_view_reads_json_file_and_prefix(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_report([("20/private/a.c", 1, 9)], [])))
    view = ev.report_view(path, path_prefix="dataset_c/")
    assert view.spans[0] == Span("dataset_c/20/private/a.c", 1, 9)


# ---------------------------------------------------------------- query metrics


def test_rank_metrics_recall_at_k_and_mrr():
    ranks = [1, 3, None, 12]
    out = ev.rank_metrics(ranks, ks=(1, 10))
    assert out["recall@1"] == pytest.approx(1 / 4)
    assert out["recall@10"] == pytest.approx(2 / 4)
    # MRR = (1 + 1/3 + 0 + 1/12) / 4
    assert out["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 12) / 4)


def test_first_relevant_rank_ties_and_absence():
    sims = np.array([0.9, 0.5, 0.9, 0.7])
    assert ev.first_relevant_rank(sims, np.array([False, False, True, False])) == 2  # tie, later index
    assert ev.first_relevant_rank(sims, np.array([False, True, False, True])) == 3  # best relevant 0.7
    assert ev.first_relevant_rank(sims, np.zeros(4, dtype=bool)) is None


def test_sscd_query_ranks_excludes_own_file():
    labels = [SSCDLabel(Span("p.c", 1, 10), Span("o.c", 1, 10), "function")]
    cands = [Span("p.c", 1, 10), Span("q.c", 1, 10), Span("o.c", 1, 10)]
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    vecs = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]], dtype=np.float32)
    # the identical fragment in p.c is excluded; q.c (0.8) ranks before o.c (0.6) → rank 2
    assert ev.sscd_query_ranks(q, cands, vecs, labels) == [2]


# ---------------------------------------------------------------- MAP@R


def test_average_precision_at_r_hand_worked():
    # R = 3, top-3 relevance = [1, 0, 1]: (1/3) * (1/1 + 2/3) = 5/9
    assert ev.average_precision_at_r([True, False, True, True], 3) == pytest.approx(5 / 9)


def test_map_at_r_hand_worked():
    # four items on a line (1-d cosine is degenerate, so use 2-d unit vectors at angles)
    ang = np.deg2rad([0.0, 10.0, 30.0, 90.0])
    x = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    labels = ["a", "a", "b", "b"]
    # R = 1 for every item (one other item shares its label)
    # item0 (0°): nearest 10° (a) → AP 1; item1 (10°): nearest 0° (a, 10° away) vs 30° (20°) → 1
    # item2 (30°): nearest 10° (a) → 0; item3 (90°): nearest 30° (b) → 1
    assert ev.map_at_r(x, labels) == pytest.approx(3 / 4)
    # chunking does not change the answer
    assert ev.map_at_r(x, labels, chunk=1) == pytest.approx(3 / 4)


def test_map_at_r_larger_r():
    # labels a,a,a,b; query 0 at 0°: ranking 1(5°)=a, 3(20°)=b, 2(40°)=a → R=2, top2 rel [1,0] → AP 1/2
    ang = np.deg2rad([0.0, 5.0, 40.0, 20.0])
    x = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    labels = ["a", "a", "a", "b"]
    # q1 (5°): 0(5°)a, 3(15°)b → [1,0] → 1/2; q2 (40°): 3(20°)b, 1(35°)a → [0,1] → (1/2)(1/2)=1/4
    # q3 is alone in its label → skipped
    assert ev.map_at_r(x, labels) == pytest.approx((0.5 + 0.5 + 0.25) / 3)


# ---------------------------------------------------------------- BigCloneBench rule


def test_bcb_pair_or_same_class_and_fp_rate():
    found = FoundPairs(pairs=[(1, 2)], classes=[[3, 4, 5], [6, 7]])
    labels = [
        BCBPair(1, 2, True, 0),  # reported pair → found
        BCBPair(2, 1, True, 0),  # order does not matter
        BCBPair(3, 5, True, 1),  # same class → found
        BCBPair(5, 6, True, 1),  # different classes → missed
        BCBPair(4, 3, False, 5),  # non-clone in one class → false positive
        BCBPair(1, 7, False, 5),  # non-clone not reported
        BCBPair(8, 9, False, 5),
        BCBPair(2, 6, False, 5),
    ]
    out = ev.score_bcb(found, labels)
    assert out["recall"]["T1"] == pytest.approx(1.0)
    assert out["recall"]["T2"] == pytest.approx(0.5)
    assert out["fp"] == 1 and out["negatives"] == 4
    assert out["fp_rate"] == pytest.approx(0.25)
    # pair recall: the same labels, credited only for reported pairs (FPs counted the same way)
    pairs_only = ev.score_bcb(FoundPairs(found.pairs), labels)
    assert pairs_only["recall"]["T1"] == pytest.approx(1.0) and pairs_only["recall"]["T2"] == 0.0
    assert pairs_only["fp"] == 0 and pairs_only["negatives"] == 4


def test_bcb_split_by_functionality_keeps_clone_groups_whole():
    # two functionalities {1,2,3} and {4,5} (+ {6,7}); non-clone pairs inside and across them
    labels = [BCBPair(1, 2, True, 0), BCBPair(2, 3, True, 3), BCBPair(4, 5, True, 1), BCBPair(6, 7, True, 2),
              BCBPair(1, 4, False, 5), BCBPair(3, 1, False, 5), BCBPair(6, 5, False, 5)]
    groups = ev.functionality_groups(labels)
    assert groups[1] == groups[2] == groups[3] != groups[4] == groups[5] != groups[6]
    funcs = [{"id": i, "code": ""} for i in range(1, 8)]
    tune_f, tune_l = ev.bcb_split(funcs, labels, "tune", seed=0)
    test_f, test_l = ev.bcb_split(funcs, labels, "test", seed=0)
    assert {f["id"] for f in tune_f}.isdisjoint({f["id"] for f in test_f})
    for part in (tune_l, test_l):
        assert part and all(groups[lab.id1] == groups[lab.id2] or not lab.is_clone for lab in part)
    # every clone label lands in one half; the cross-half non-clone pairs are dropped
    assert sum(lab.is_clone for lab in tune_l + test_l) == 4
    with pytest.raises(ValueError, match="split"):
        ev.bcb_split(funcs, labels, "dev")


def test_found_pairs_from_fragment_view():
    view = ev.report_view(
        _report(
            [("f/10.java", 2, 9), ("f/11.java", 2, 9), ("f/12.java", 2, 9), ("f/12.java", 11, 20)],
            [(0, 1), (2, 3)],  # the second pair is within one function file → ignored
        )
    )
    view.classes = [[1, 2]]
    found = FoundPairs.from_view(view, lambda s: int(Path(s.path).stem))
    assert found(10, 11) and found(11, 12)
    assert not found(10, 12)
    assert not found(12, 12)
    # stated pairs: listed pairs plus identical groups, never the classes
    assert found.stated()(10, 11) and not found.stated()(11, 12)
    view.identical_groups = [[1, 2, 3]]
    found = FoundPairs.from_view(view, lambda s: int(Path(s.path).stem))
    assert found.stated()(11, 12) and not found.listed()(11, 12)


def test_report_view_reads_identical_groups_and_rejects_dangling_ids():
    rep = _report([("f/1.java", 1, 5), ("f/2.java", 1, 5), ("f/3.java", 1, 5)], [(0, 1)])
    rep["identical_groups"] = [{"type": "T1", "members": [0, 1, 2]}]
    assert ev.report_view(rep).identical_groups == [[0, 1, 2]]
    rep["identical_groups"] = [{"type": "T1", "members": [0, 7]}]
    with pytest.raises(ValueError, match="identical group"):
        ev.report_view(rep)


# ---------------------------------------------------------------- loaders


def test_loaders_report_malformed_files(tmp_path):
    (tmp_path / "dataset_c.csv").write_text("private_path,private_start_line\nx.c,notanint\n")
    with pytest.raises(ev.InputError, match="dataset_c.csv"):
        ev.load_sscd_labels(tmp_path)
    with pytest.raises(ev.InputError, match="clone_labels.csv"):
        ev.load_bcb_labels(tmp_path)
    with pytest.raises(ev.InputError, match="functions.jsonl.gz"):
        ev.load_bcb_functions(tmp_path)


# ---------------------------------------------------------------- end to end on the real data


@pytest.mark.slow
@pytest.mark.ci
def test_sscd_end_to_end_default_settings():
    """The whole SSCD Company-C evaluation at default settings (about 20-40 s on 2 cores).

    Floors are the published SSCD results on this data set (recall 60.76 %, precision 84.21 %,
    Chochlov et al. 2022), not twinspect's own measured numbers: a regression below what the paper's
    BERT-based detector reached fails. Precision is asserted with the copy-aware rule (a byte-identical
    copy of the labelled original in another file counts as the original), because the data set
    reuses open-source files across its folders and the strict rule counts those exact copies as false.
    """
    if not (SSCD_DIR / "dataset_c.csv").is_file():
        pytest.skip(f"SSCD data not found at {SSCD_DIR} (needs ../shared beside the repository)")
    res = ev.run_sscd(SSCD_DIR, query=True)
    assert res["labels"] == 80
    assert res["recall"] >= 0.6076
    # query mode: the labelled original is among the 10 nearest fragments for most queries
    assert res["recall@10"] >= 0.8
    assert 0.0 < res["mrr"] <= 1.0
    # the SSCD-style cosine rule keeps the published precision floor
    from twinspect.code.clones import DetectConfig

    cos = ev.run_sscd(SSCD_DIR, DetectConfig(decision="cosine", pair_margin=0.02), query=False)
    assert cos["recall"] >= 0.6076 and cos["precision_copies"] >= 0.8421
    if res["precision_copies"] < 0.8421:
        pytest.xfail(f"known regression of the verifier default on SSCD-C (copy-aware precision "
                     f"{res['precision_copies']:.1%}): the data set injects the same add_var_* statements into every "
                     "private function (now set aside as base code, see twinspect.code.basecode); what is left is libpostal's own "
                     "sibling functions of one skeleton (the *_destroy family) and versions of the labelled function in "
                     "other folders that are not byte-identical (issue 15)")


def test_eval_output_follows_the_format(tmp_path, capsys):
    """docs/CLI.md: `-o` writes the report in the `-f` format (eval used to write JSON whatever -f said)."""
    from tests.cli_run import run

    if not (SSCD_DIR / "dataset_c.csv").is_file():
        pytest.skip(f"SSCD data not found at {SSCD_DIR} (needs ../shared beside the repository)")
    code, out, _ = run(capsys, "clones", "eval", "sscd", "--data", SSCD_DIR, "-o", tmp_path / "r.md", "-q")
    assert code == 0 and out == ""
    text = (tmp_path / "r.md").read_text()
    assert text.startswith("SSCD Company-C") and "| recall (pairs) |" in text
    code, out, _ = run(capsys, "clones", "eval", "sscd", "--data", SSCD_DIR, "-f", "json", "-o", tmp_path / "r.json")
    assert code == 0 and out == "" and "recall" in json.loads((tmp_path / "r.json").read_text())
