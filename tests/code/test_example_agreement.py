"""`clones query` against `scan` on the bundled example (issue 8, point 8)."""

from __future__ import annotations

from twinspect.code.clones import DetectConfig, scan
from twinspect.code.encoders import make_encoder
from twinspect.code.normalize import t2_key
from twinspect.code.query import query_clones
from twinspect.code.store import CloneIndex


def test_query_returns_every_pair_scan_reports(tmp_path, examples_dir):
    # `clones query` ranks by cosine (top-k at --threshold), the rule of decision="cosine"
    cfg = DetectConfig(decision="cosine", pair_margin=0.02)
    report = scan([examples_dir], cfg)
    assert report.pairs
    store = CloneIndex.build([examples_dir], tmp_path / "idx", index_kind="exact",
                             encoder=make_encoder(cfg.encoder, **cfg.encoder_params), min_lines=cfg.min_lines)
    frags = report.fragments
    for p in report.pairs:
        for x, y in ((p.a, p.b), (p.b, p.a)):
            hits = query_clones(store, frags[x], top_k=cfg.top_k, threshold=cfg.threshold,
                                lexical_min_t3=cfg.lexical_min_t3)
            by_loc = {(h.fragment.path, h.fragment.start_line): h for h in hits}
            hit = by_loc.get((frags[y].path, frags[y].start_line))
            assert hit is not None, (frags[x].name, frags[y].name, p.type, p.similarity)
            # the same type, and the same similarity up to the float32 search
            assert hit.clone_type.type == p.type and abs(hit.similarity - p.similarity) < 1e-4


def _manifest_rows(text: str, heading: str) -> list[tuple[str, str, str]]:
    """(type, A, B) rows of the markdown table under ``heading``."""
    rows, on = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            on = line.strip() == heading
        elif on and line.startswith("| T"):
            cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_scan_of_bundled_example_agrees_with_its_manifest(examples_dir):
    text = (examples_dir / "MANIFEST.md").read_text(encoding="utf-8")
    intended = _manifest_rows(text, "## Intended clone pairs")
    missed_rows = _manifest_rows(text, "## Intended pairs the default settings miss")
    known_fp = _manifest_rows(text, "## Reported non-clones (known false positives)")
    assert len(intended) == 13 and len(missed_rows) == 2 and len(known_fp) == 6
    cfg = DetectConfig()
    report = scan([examples_dir], cfg)
    label = [f"{f.path}:{f.name}" for f in report.fragments]
    got = {frozenset((label[p.a], label[p.b])): p for p in report.pairs}
    # intended pairs, closed under "a clone's copy": the connected groups of the intended rows
    group: dict[str, set[str]] = {}
    for _, a, b in intended:
        merged = group.get(a, {a}) | group.get(b, {b})
        for m in merged:
            group[m] = merged
    allowed = {frozenset((a, b)) for g in group.values() for a in g for b in g if a != b}
    missed = {frozenset((a, b)) for _, a, b in missed_rows}
    for t, a, b in intended:
        if frozenset((a, b)) in missed:
            assert frozenset((a, b)) not in got, (a, b)
            continue
        assert frozenset((a, b)) in got, (a, b)
        assert got[frozenset((a, b))].type == t, (a, b, got[frozenset((a, b))].type)
    extra = set(got) - allowed
    assert extra == {frozenset((a, b)) for _, a, b in known_fp}
    # --lexical-min-t3 0.7 changes nothing here: every reported Type-3 pair is VST3/ST3
    strict = scan([examples_dir], DetectConfig(lexical_min_t3=0.7))
    assert [(p.a, p.b, p.type) for p in strict.pairs] == [(p.a, p.b, p.type) for p in report.pairs]
    assert all(p.band in (None, "VST3", "ST3") for p in report.pairs)
    threshold = report.stats["verifier"]["threshold"]
    for key, p in got.items():  # every non-exact pair cleared the verifier's threshold
        assert p.type in ("T1", "T2") or (p.score is not None and p.score >= threshold), (sorted(key), p.score)
    # classes are cliques of reported pairs, up to T2 twins (a T2 bucket is one unit)
    t2 = [t2_key(f) for f in report.fragments]
    linked = {frozenset((t2[p.a], t2[p.b])) for p in report.pairs}
    for c in report.classes:
        for i in c:
            for j in c:
                if i < j and t2[i] != t2[j]:
                    assert frozenset((t2[i], t2[j])) in linked, (label[i], label[j])
    assert any(len(c) > 2 for c in report.classes)
