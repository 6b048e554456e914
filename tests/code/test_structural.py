"""Structural evidence (WL over control-flow graphs) and the two-evidence Type-4 rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twinspect.code import structural
from twinspect.code.clones import DetectConfig, detect
from twinspect.code.fragments import extract_fragments
from twinspect.code.structural import StructuralSimilarity, bag_cosine, load_t4_rule, wl_bag
from twinspect.errors import ModelError

# Two ways to sum the positive items (same control flow: loop + condition), and a straight-line
# function with a different control flow.
SOURCE = '''
def total_positive(values):
    total = 0
    for v in values:
        if v > 0:
            total += v
    return total


def sum_pos(xs):
    acc = 0
    for x in xs:
        if x > 0:
            acc = acc + x
    return acc


def describe(record):
    name = record["name"]
    age = record.get("age", 0)
    city = record.get("city", "")
    line = f"{name} ({age}) {city}"
    print(line)
    return line
'''


@pytest.fixture(scope="module")
def frags():
    out = extract_fragments(SOURCE, "m.py", "python", min_lines=1)
    assert [f.name for f in out] == ["total_positive", "sum_pos", "describe"]
    return out


def test_wl_bags_compare_control_flow_not_names(frags):
    bags = [wl_bag(f) for f in frags]
    assert all(b is not None for b in bags)
    assert abs(sum(w * w for w in bags[0].values()) - 1.0) < 1e-9
    same_flow = bag_cosine(bags[0], bags[1])
    other_flow = bag_cosine(bags[0], bags[2])
    assert same_flow == pytest.approx(1.0)  # renamed, `+=` vs `= +`: the same statement kinds and edges
    assert other_flow < 0.5
    sim = StructuralSimilarity(frags)
    assert sim(0, 1) == pytest.approx(same_flow) and sim(0, 2) == pytest.approx(other_flow)


def test_no_graph_no_evidence(frags):
    go = extract_fragments("package m\n\nfunc f(x int) int {\n\treturn x + 1\n}\n", "m.go", "go", min_lines=1)
    assert go and wl_bag(go[0]) is None
    assert bag_cosine(None, wl_bag(frags[0])) is None


def test_shipped_rule_reads_and_bad_rule_file(tmp_path):
    rule = load_t4_rule()
    assert 0.0 < rule.semantic < 1.0 and 0.0 <= rule.structural < 1.0
    assert rule.info["pairs"]["WT3/T4"] > 0
    bad = tmp_path / "rule.json"
    bad.write_text('{"semantic": 0.9}', encoding="utf-8")
    with pytest.raises(ModelError, match="rule.json"):
        load_t4_rule(bad)


def test_t4_needs_structural_agreement(frags, tmp_path, monkeypatch):
    """Caller-given vectors make all three fragments semantic neighbours (cosine 0.95); below the
    MT3 band only the pair whose control flow agrees is reported as T4, and the rule is stated."""
    vecs = np.array([[1.0, 0.0], [0.95, np.sqrt(1 - 0.95**2)], [0.95, -np.sqrt(1 - 0.95**2)]], dtype=np.float32)
    rule = tmp_path / "t4.json"
    rule.write_text(json.dumps({"semantic": 0.99, "structural": 0.5, "wl_iterations": 2, "info": {"data": "t"}}),
                    encoding="utf-8")
    monkeypatch.setattr(structural, "T4_RULE", rule)
    report = detect(frags, DetectConfig(threshold=0.9, lexical_min_t3=None), vectors=vecs)
    t4 = {(report.fragments[p.a].name, report.fragments[p.b].name) for p in report.pairs if p.type == "T4"}
    names = {tuple(sorted(k)) for k in t4}
    assert ("describe", "total_positive") not in names and ("describe", "sum_pos") not in names
    st = report.stats
    assert st["t4_rule"]["structural"] == 0.5 and st["t4_rule"]["semantic"] == 0.9  # precomputed: config.threshold
    assert st["t4_structural_vetoed"] >= 1
    # with the structural floor at 0 the same pairs are T4 (the veto was the structural signal)
    rule.write_text(json.dumps({"semantic": 0.99, "structural": 0.0, "wl_iterations": 2}), encoding="utf-8")
    again = detect(frags, DetectConfig(threshold=0.9, lexical_min_t3=None), vectors=vecs)
    assert again.stats["t4_structural_vetoed"] == 0
    assert sum(p.type == "T4" for p in again.pairs) > sum(p.type == "T4" for p in report.pairs)


def test_cfg_builder_refuses_languages_it_does_not_know(tmp_path):
    from twinspect.code.similitude.cfg import load_program, program_graph
    from twinspect.errors import InputError

    with pytest.raises(InputError, match="no control-flow graph builder for go"):
        program_graph("package m\nfunc f() {}\n", "go")
    src = tmp_path / "m.go"
    src.write_text("package m\nfunc f() {}\n", encoding="utf-8")
    with pytest.raises(InputError, match="m.go"):
        load_program(src)


def test_candidate_threshold_defaults_per_encoder():
    assert DetectConfig().candidate_threshold == 0.4
    assert DetectConfig(encoder="semantic").candidate_threshold == 0.8
    assert DetectConfig(encoder="semantic", candidate_threshold=0.5).candidate_cosine == 0.5
