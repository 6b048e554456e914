"""Clone typing: T1/T2 by normalisation keys, T3 bands and T4 by abstracted-token similarity."""

from __future__ import annotations

import pytest

from twinspect.code.clone_types import (
    BANDS,
    TYPES,
    CloneType,
    TypeClassifier,
    band_of,
    classify_pair,
)
from twinspect.code.fragments import extract_fragments
from twinspect.code.normalize import abstract_tokens, token_similarity


def frag(src: str, rel: str = "x.py", language: str = "python"):
    frags = extract_fragments(src, rel, language, min_lines=1)
    assert len(frags) == 1, frags
    return frags[0]


BASE = """
def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.qty
    if tax:
        total = total * (1 + tax)
    return total
"""

# Same code, other layout and a comment: Type-1.
T1_COPY = """
def total_price(items,   tax):
    # accumulate the prices
    total = 0
    for item in items:
        total += item.price  *  item.qty   # line total
    if tax:
        total = total * (1 + tax)

    return total
"""

# Identifiers and a literal renamed: Type-2.
T2_COPY = """
def sum_cost(goods, rate):
    acc = 1
    for g in goods:
        acc += g.cost * g.n
    if rate:
        acc = acc * (2 + rate)
    return acc
"""

# One statement added: Type-3 (very strongly similar).
T3_COPY = """
def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.qty
    if tax:
        total = total * (1 + tax)
    log(total)
    return total
"""

UNRELATED = """
def parse_config(path):
    with open(path) as fh:
        lines = fh.readlines()
    out = {}
    for ln in lines:
        if "=" not in ln:
            continue
        k, v = ln.split("=", 1)
        out[k.strip()] = v.strip()
    return out
"""


@pytest.mark.parametrize(
    "sim, expected",
    [
        (1.0, CloneType("T3", "VST3", 1.0)),
        (0.9, CloneType("T3", "VST3", 0.9)),
        (0.8999, CloneType("T3", "ST3", 0.8999)),
        (0.7, CloneType("T3", "ST3", 0.7)),
        (0.6999, CloneType("T3", "MT3", 0.6999)),
        (0.5, CloneType("T3", "MT3", 0.5)),
        (0.4999, CloneType("T4", "WT3", 0.4999)),
        (0.0, CloneType("T4", "WT3", 0.0)),
    ],
)
def test_band_boundaries_follow_bigclonebench(sim, expected):
    assert band_of(sim) == expected


def test_type_and_band_vocabularies():
    assert TYPES == ("T1", "T2", "T3", "T4")
    assert BANDS == ("VST3", "ST3", "MT3", "WT3")


def test_t1_layout_and_comments():
    ct = classify_pair(frag(BASE), frag(T1_COPY))
    assert ct == CloneType("T1", None, None)


def test_t2_renamed_identifiers_and_literals():
    ct = classify_pair(frag(BASE), frag(T2_COPY))
    assert ct.type == "T2" and ct.band is None and ct.t3_similarity is None


def test_t3_added_statement_band_matches_token_similarity():
    a, b = frag(BASE), frag(T3_COPY)
    ct = classify_pair(a, b)
    expected = token_similarity(abstract_tokens(a), abstract_tokens(b))
    assert ct.type == "T3"
    assert ct.t3_similarity == pytest.approx(expected)
    assert 0.5 <= ct.t3_similarity < 1.0
    assert ct.band == band_of(expected).band


def test_unrelated_functions_are_t4():
    ct = classify_pair(frag(BASE), frag(UNRELATED))
    assert ct.type == "T4" and ct.band == "WT3"
    assert ct.t3_similarity < 0.5


def test_java_t2_clone():
    a = frag("class A { int add(int a, int b) { int s = a + b; return s; } }", "A.java", "java")
    b = frag("class B {\n  int plus(int x, int y) {\n    int r = x + y; // sum\n    return r;\n  }\n}", "B.java", "java")
    assert classify_pair(a, b).type == "T2"


def test_classifier_is_symmetric_and_caches():
    frags = [frag(BASE), frag(T3_COPY), frag(UNRELATED)]
    clf = TypeClassifier(frags)
    for i in range(3):
        for j in range(3):
            if i != j:
                assert clf.classify(i, j) == clf.classify(j, i)
    assert set(clf._tok) == {0, 1, 2}
