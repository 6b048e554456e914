"""How a pair's differences are laid out: edit hunks of blind-labelled clone pairs (issue 15).

The blind precision studies (``clones_precision_blind.py``) and the blind reading of BigCloneBench's
own pairs (``clones_bcb_blind.py``) left a conflict: the Type-3 pairs blind judges call ``weak`` (a
shared skeleton: test bodies on one scaffold, delegating overloads) are the kind of pair that
BigCloneBench's MT3 band and its recall target count as clones. This script measures one property
that separates the two readings: **edit hunks per 100 tokens** — the number of maximal runs of
inserted, deleted or replaced tokens in the LCS alignment (rapidfuzz ``Indel.opcodes``) of the two
fragments' lexical tokens (identifiers and literals kept; comments and layout gone:
:func:`twinspect.code.normalize.lex`), per 100 tokens of the longer fragment. A copied-then-edited
fragment differs from its origin in a few places (few hunks); two fragments built on one skeleton
differ in every identifier and literal the skeleton leaves open (many hunks) — and so do two
independently written implementations of one functionality, BigCloneBench's MT3.

Samples (each pair's code is read from the sources the studies sampled; labels are the blind
judges'): the languages study (``clones_precision_lang_*``, 110 pairs; ``--lang-src``) and the
Python/Java/stdlib study (``clones_precision_blind_*``, 316 pairs; ``--src``), each fragment cut from
``SRC/<project>/<path>`` as the judge's blind file was (:func:`clones_precision_blind.fragment_lines`; the
sources laid out as that script's docstring says), and the BigCloneBench study (``clones_bcb_blind_*``,
100 pairs of the test half; ``../shared``).

The rule reported, "keep a pair when it has at most 15 hunks per 100 tokens", was chosen by looking
at the languages sample (tuned on it: its numbers are not a test); the Python/Java study was read
after the rule was fixed (held out).

Run from the repository root::

    .venv/bin/python benchmarks/clones_edit_hunks.py --lang-src /tmp/langsrc --src /tmp/prec2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from clones_bcb_blind import DATA, read_labels  # noqa: E402  (sibling benchmark scripts)
from clones_bcb_blind import LABELS as BCB_LABELS  # noqa: E402
from clones_bcb_blind import SAMPLE as BCB_SAMPLE  # noqa: E402
from clones_precision_blind import STUDIES, fragment_lines, records  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
#: the rule: at most this many edit hunks per 100 tokens (chosen on the languages sample)
RULE = 15.0
BANDS = ("T1", "T2", "VST3", "ST3", "MT3")


def hunks_per_100(a: list[str], b: list[str]) -> float:
    """Edit hunks of the LCS alignment of token lists ``a`` and ``b`` per 100 tokens of the longer one.

    A hunk is one maximal non-equal block of rapidfuzz's ``Indel.opcodes`` (an insertion, a deletion,
    or both at one place). Identical lists: 0.
    """
    from rapidfuzz.distance import Indel

    vocab: dict[str, int] = {}
    ea = [vocab.setdefault(t, len(vocab)) for t in a]
    eb = [vocab.setdefault(t, len(vocab)) for t in b]
    hunks = sum(1 for op in Indel.opcodes(ea, eb) if op.tag != "equal")
    return 100.0 * hunks / max(1, len(ea), len(eb))


def _tokens(code: str, language: str) -> list[str]:
    from twinspect.code.comments import strip_comments_text
    from twinspect.code.normalize import lex

    return list(lex(strip_comments_text(code, language), language)[0])


def study_rows(study: str, src: Path) -> list[dict]:
    """One row per labelled pair of a real-code study (``clones_precision_blind.STUDIES``'s key): band,
    judged clone?, hunks per 100 tokens; fragments cut from ``src/<project>/<path>`` as the judge saw them."""
    lab, rows = read_labels(STUDIES[study][1]), []
    for r in records(False, study):
        if r["id"] not in lab:
            continue
        toks = [_tokens("\n".join(fragment_lines(src, r, side)), r[side]["language"]) for side in ("a", "b")]
        rows.append({"id": r["id"], "band": r.get("band") or r["type"], "clone": lab[r["id"]] == "clone",
                     "label": lab[r["id"]], "hunks": hunks_per_100(*toks)})
    return rows


def bcb_rows() -> list[dict]:
    """The BigCloneBench blind study's pairs (test half of the functionality split)."""
    from twinspect.code.evaluate.bcb import bcb_split, load_bcb_functions, load_bcb_labels

    functions, _ = bcb_split(load_bcb_functions(DATA), load_bcb_labels(DATA), "test", 0)
    code = {f["id"]: f["code"] for f in functions}
    lab, rows = read_labels(BCB_LABELS), []
    with open(BCB_SAMPLE, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            rows.append({"id": r["id"], "band": r["type"], "clone": lab[r["id"]] == "clone", "label": lab[r["id"]],
                         "hunks": hunks_per_100(_tokens(code[r["id1"]], "java"), _tokens(code[r["id2"]], "java"))})
    return rows


def _quart(xs: list[float]) -> str:
    import numpy as np

    if not xs:
        return "–"
    q = np.percentile(xs, [25, 50, 75])
    return f"{q[1]:.1f} ({q[0]:.1f}–{q[2]:.1f})"


def _pct(k: int, n: int) -> str:
    return f"{100.0 * k / n:.1f} % ({k}/{n})" if n else "–"


def _auc(rows: list[dict]) -> str:
    from sklearn.metrics import roc_auc_score

    y = [r["clone"] for r in rows]
    return f"{roc_auc_score(y, [-r['hunks'] for r in rows]):.3f}" if 0 < sum(y) < len(y) else "–"


def render(studies: dict[str, list[dict]], bcb: list[dict]) -> str:
    out = ["# Edit hunks of blind-labelled pairs: copied-and-edited code against shared skeletons (issue 15)", "",
           __doc__.split("\n\n")[1].replace("\n", " "), "",
           "## Hunks per 100 tokens, median (quartiles), by band and blind label", "",
           "| sample | band | judged clone | judged weak/not | ROC-AUC of fewer hunks (clone vs the rest) |",
           "|---|---|---|---|---|"]
    for name, rows in studies.items():
        for b in BANDS:
            sub = [r for r in rows if r["band"] == b]
            if sub:
                out.append(f"| {name} | {b} | {_quart([r['hunks'] for r in sub if r['clone']])} (n={sum(r['clone'] for r in sub)}) "
                           f"| {_quart([r['hunks'] for r in sub if not r['clone']])} (n={sum(not r['clone'] for r in sub)}) "
                           f"| {_auc(sub)} |")
        out.append(f"| {name} | all | {_quart([r['hunks'] for r in rows if r['clone']])} | "
                   f"{_quart([r['hunks'] for r in rows if not r['clone']])} | {_auc(rows)} |")
    for t in ("ST3", "MT3", "WT3/T4", "non-clone"):
        sub = [r for r in bcb if r["band"] == t]
        out.append(f"| BigCloneBench (labelled {t}) | – | {_quart([r['hunks'] for r in sub if r['clone']])} "
                   f"(n={sum(r['clone'] for r in sub)}) | {_quart([r['hunks'] for r in sub if not r['clone']])} "
                   f"(n={sum(not r['clone'] for r in sub)}) | {_auc(sub)} |")
    out += ["", f"## The rule: keep a pair with at most {RULE:g} hunks per 100 tokens", "",
            "Precision counts `clone` labels among the pairs kept (the samples are stratified by band, as in the "
            "studies: per-band figures are per-band sample precisions).", "",
            "| sample | pairs | precision before | kept | precision of the kept | judged clones kept | MT3 precision before → kept |",
            "|---|---|---|---|---|---|---|"]
    for name, rows in studies.items():
        kept = [r for r in rows if r["hunks"] <= RULE]
        mt, mtk = [r for r in rows if r["band"] == "MT3"], [r for r in kept if r["band"] == "MT3"]
        out.append(f"| {name} | {len(rows)} | {_pct(sum(r['clone'] for r in rows), len(rows))} | {len(kept)} | "
                   f"{_pct(sum(r['clone'] for r in kept), len(kept))} | "
                   f"{_pct(sum(r['clone'] for r in kept), sum(r['clone'] for r in rows))} | "
                   f"{_pct(sum(r['clone'] for r in mt), len(mt))} → {_pct(sum(r['clone'] for r in mtk), len(mtk))} |")
    out += ["", "BigCloneBench pairs the rule would keep (an upper bound on what a detector with this rule could "
            "state of each type):", "", "| BigCloneBench type | pairs | kept | of the blind judge's clones |", "|---|---|---|---|"]
    for t in ("ST3", "MT3", "WT3/T4", "non-clone"):
        sub = [r for r in bcb if r["band"] == t]
        cl = [r for r in sub if r["clone"]]
        out.append(f"| {t} | {len(sub)} | {_pct(sum(r['hunks'] <= RULE for r in sub), len(sub))} | "
                   f"{_pct(sum(r['hunks'] <= RULE for r in cl), len(cl))} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang-src", type=Path, required=True, help="the languages study's repositories")
    ap.add_argument("--src", type=Path, required=True, help="the Python/Java study's projects")
    ap.add_argument("--out", type=Path, default=RESULTS / "clones_edit_hunks")
    args = ap.parse_args(argv)
    from twinspect._io import atomic_write

    studies = {
        "languages study (rule tuned here)": study_rows("languages", args.lang_src),
        "Python/Java study (held out)": study_rows("issue15", args.src),
    }
    bcb = bcb_rows()
    with atomic_write(args.out.with_suffix(".md")) as fh:
        fh.write(_provenance.md_header(__file__) + "\n" + render(studies, bcb))
    with atomic_write(args.out.with_suffix(".json")) as fh:
        json.dump({"provenance": _provenance.info(__file__), "rule_max_hunks_per_100": RULE,
                   "studies": studies, "bcb": bcb}, fh, indent=1)
    print(f"wrote {args.out.with_suffix('.md')}", file=sys.stderr)


if __name__ == "__main__":
    main()
