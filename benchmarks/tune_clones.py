"""Tuning experiments for ``twinspect clones`` defaults (helper script, not part of the package).

* ``baseline``: a plain scikit-learn TF-IDF sanity baseline (identifier-blind token 1–3-grams,
  exact top-1 search, cosine ≥ 0.6) scored with twinspect.code.evaluate, to validate the scoring code
  against the brief's reference numbers (SSCD recall 93.8 % / precision 95.0 %).
* ``grid``: sweeps of DetectConfig / encoder parameters on SSCD, BCB (subsampled) and POJ-104.

Run: ``.venv/bin/python benchmarks/tune_clones.py baseline`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinspect.code import evaluate as ev  # noqa: E402

DATA = ROOT / ".." / "shared" / "data" / "clones"

_LEAF_ID = {"identifier", "field_identifier", "type_identifier", "statement_identifier", "namespace_identifier"}
_LEAF_LIT = {"number_literal", "string_literal", "char_literal", "string_content", "escape_sequence", "true", "false", "null"}


def _ts_fragments(root: Path, language: str = "c", min_lines: int = 6) -> list[dict]:
    """Baseline extractor (tree-sitter walk): function_definition nodes ≥ min_lines, identifier-blind tokens."""
    from twinspect.code.languages import get_parser

    parser = get_parser(language)
    out = []
    for path in sorted(root.rglob("*.c")):
        src = path.read_bytes()
        tree = parser.parse(src)
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            if node.type == "function_definition":
                s, e = node.start_point[0] + 1, node.end_point[0] + 1
                if e - s + 1 >= min_lines:
                    toks = []
                    st = [node]
                    while st:
                        n = st.pop()
                        if n.type == "comment":
                            continue
                        if n.child_count == 0 or n.type in ("string_literal", "char_literal"):
                            if n.type in _LEAF_ID:
                                toks.append("ID")
                            elif n.type in _LEAF_LIT:
                                toks.append("LIT")
                            else:
                                toks.append(n.text.decode("utf-8", "replace"))
                        else:
                            st.extend(reversed(n.children))
                    out.append({"path": path.relative_to(root).as_posix(), "start": s, "end": e, "tokens": toks})
                continue
            stack.extend(node.children)
    return out


def baseline_sscd(threshold: float = 0.6) -> dict:
    """The brief's sanity baseline on SSCD Company-C, scored with twinspect.code.evaluate."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    root = DATA / "sscd"
    t0 = time.perf_counter()
    frags = _ts_fragments(root)
    vec = TfidfVectorizer(analyzer=lambda toks: [" ".join(toks[i : i + n]) for n in (1, 2, 3) for i in range(len(toks) - n + 1)])
    x = vec.fit_transform([f["tokens"] for f in frags])
    sims = (x @ x.T).toarray()
    np.fill_diagonal(sims, -1)
    nn = sims.argmax(1)
    pairs = []
    for i, j in enumerate(nn):
        if sims[i, j] >= threshold:
            pairs.append({"a": int(min(i, j)), "b": int(max(i, j)), "similarity": float(sims[i, j]), "type": "T3"})
    pairs = list({(p["a"], p["b"]): p for p in pairs}.values())
    report = {
        "fragments": [{"id": i, "path": f["path"], "start_line": f["start"], "end_line": f["end"]} for i, f in enumerate(frags)],
        "pairs": pairs,
        "classes": [],
        "stats": {},
    }
    labels = ev.load_sscd_labels(root)
    eq = ev.file_equivalence(root, [f["path"] for f in frags])
    out = ev.score_sscd(ev.report_view(report), labels, eq)
    out["fragments"] = len(frags)
    out["seconds"] = time.perf_counter() - t0
    return out


def mine_tolerant(paths, min_lines: int = 6, language: str | None = None, exclude=()):
    """Prototype miner that KEEPS functions containing tree-sitter ERROR/MISSING nodes (macro-heavy C).

    Same records as twinspect.code.fragments.mine (text = the function's lines, code = "" so the
    normaliser strips comments itself). Used to measure what A's error-dropping rule costs.
    """
    from twinspect.code.files import discover
    from twinspect.code.fragments import Fragment, read_source
    from twinspect.code.languages import FUNCTION_TYPES, get_parser

    files, _ = discover(paths, exclude=exclude, language=language, respect_gitignore=False)
    out = []
    for sf in files:
        text = read_source(sf)
        if text is None:
            continue
        src = text.encode("utf-8", "surrogatepass")
        tree = get_parser(sf.language).parse(src)
        kinds = set(FUNCTION_TYPES[sf.language])
        stack = [tree.root_node]
        found = []
        while stack:
            node = stack.pop()
            if node.type in kinds:
                found.append(node)
            stack.extend(node.children)
        for node in sorted(found, key=lambda n: n.start_byte):
            s = node.start_point.row + 1
            ep = node.end_point
            e = ep.row + 1 if ep.column > 0 or ep.row == node.start_point.row else ep.row
            if e - s + 1 < min_lines:
                continue
            ls = src.rfind(b"\n", 0, node.start_byte) + 1
            st = ls if src[ls : node.start_byte].isspace() else node.start_byte
            out.append(Fragment(sf.rel, s, e, "", sf.language, src[st : node.end_byte].decode("utf-8", "surrogatepass")))
    return out


_SPLIT = None


def _subtokens(name: str) -> list[str]:
    import re

    global _SPLIT
    if _SPLIT is None:
        _SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
    return [t.lower() for t in _SPLIT.findall(name)]


class ProtoLexical:
    """Prototype lexical embedder (hashed TF-IDF) used for tuning before/alongside encoder B.

    Blocks (each TF-IDF weighted, L2-normalised, scaled by sqrt(weight), concatenated, re-normalised):
    abstract-token n-grams (identifier-blind), optional identifier sub-token unigrams.
    """

    def __init__(self, dim: int = 4096, ngram: tuple[int, int] = (1, 3), sublinear: bool = True,
                 id_weight: float = 0.0, id_dim: int = 1024, kw_only_ngrams: bool = False):
        self.dim, self.ngram, self.sublinear, self.id_weight, self.id_dim = dim, ngram, sublinear, id_weight, id_dim

    def _grams(self, f):
        from twinspect.code.normalize import abstract_tokens

        toks = abstract_tokens(f)
        lo, hi = self.ngram
        return [" ".join(toks[i : i + n]) for n in range(lo, hi + 1) for i in range(len(toks) - n + 1)]

    def _ids(self, f):
        from twinspect.code.normalize import abstract_tokens, tokens

        raw, ab = tokens(f), abstract_tokens(f)
        out = []
        if len(raw) == len(ab):
            for r, a in zip(raw, ab):
                if a == "ID":
                    out += _subtokens(r)
        return out

    def _block(self, docs_fit, docs, dim):
        from sklearn.feature_extraction.text import HashingVectorizer

        hv = HashingVectorizer(n_features=dim, analyzer=lambda x: x, alternate_sign=False, norm=None)
        xf = hv.transform(docs_fit)
        df = np.bincount(xf.indices, minlength=dim)
        idf = np.log((1 + xf.shape[0]) / (1 + df)) + 1.0
        x = hv.transform(docs).astype(np.float32)
        if self.sublinear:
            x.data = 1.0 + np.log(x.data)
        x = x.multiply(idf[None, :].astype(np.float32)).tocsr()
        from sklearn.preprocessing import normalize

        return normalize(x)

    def __call__(self, fit_on, batches):
        import scipy.sparse as sp
        from sklearn.preprocessing import normalize

        g_fit = [self._grams(f) for f in fit_on]
        i_fit = [self._ids(f) for f in fit_on] if self.id_weight > 0 else None
        out = []
        for b in batches:
            if len(b) == 0:
                out.append(np.zeros((0, self.dim), np.float32))
                continue
            blocks = [self._block(g_fit, [self._grams(f) for f in b], self.dim)]
            if self.id_weight > 0:
                blocks = [blocks[0], self._block(i_fit, [self._ids(f) for f in b], self.id_dim) * np.sqrt(self.id_weight)]
            x = normalize(sp.hstack(blocks).tocsr())
            out.append(x.toarray().astype(np.float32))
        return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["baseline"])
    args = ap.parse_args(argv)
    if args.what == "baseline":
        res = baseline_sscd()
        print(json.dumps({k: v for k, v in res.items()}, indent=1))


if __name__ == "__main__":
    main()


def install_search_cache(k_max: int = 60) -> None:
    """Tuning speed-up: memoise the exact index's all-vs-all search per vector matrix (top ``k_max``),
    so sweeps over top_k/threshold/linkage on the same vectors search once. Patches
    twinspect.code.index.make_index in this process only."""
    import hashlib as _h

    import twinspect.code.index as ix

    real = ix.make_index
    cache: dict = {}

    class _Cached:
        def __init__(self, inner):
            self.inner = inner
            self.key = None

        def add(self, ids, vecs):
            self.inner.add(ids, vecs)
            self.key = _h.sha1(np.ascontiguousarray(vecs).tobytes()).hexdigest() + _h.sha1(np.asarray(ids).tobytes()).hexdigest()

        def search(self, q, k):
            if k > k_max:
                return self.inner.search(q, k)
            qk = (self.key, _h.sha1(np.ascontiguousarray(q).tobytes()).hexdigest())
            if qk not in cache:
                for old in [c for c in cache if c[0] != self.key]:
                    del cache[old]
                cache[qk] = self.inner.search(q, k_max)
            i, s = cache[qk]
            return i[:, :k], s[:, :k]

    def make(kind, dim, **params):
        inner = real(kind, dim, **params)
        return _Cached(inner) if kind == "exact" else inner

    ix.make_index = make


def emulate_margin(fragments, vectors, *, top_k=10, threshold=0.8, margin=0.03, class_threshold=0.5,
                   linkage="average", index="exact"):
    """Prototype of the proposed DetectConfig change (not in clones.py yet): classes are built from the
    top_k edges at ``class_threshold`` (below ``threshold``), while a pair is *reported* only when
    sim >= threshold and sim >= best(a) - margin or sim >= best(b) - margin, best(x) being x's highest
    similarity to any other non-overlapping fragment. Returns a JSON-contract dict."""
    from twinspect.code.clones import DetectConfig, detect

    rep = detect(fragments, DetectConfig(top_k=top_k, threshold=min(threshold, class_threshold),
                                         class_threshold=class_threshold, linkage=linkage, index=index),
                 vectors=vectors)
    d = rep.to_json_dict()
    best: dict[int, float] = {}
    for p in d["pairs"]:
        for x in (p["a"], p["b"]):
            best[x] = max(best.get(x, -1.0), p["similarity"])
    d["pairs"] = [p for p in d["pairs"] if p["similarity"] >= threshold
                  and (p["similarity"] >= best[p["a"]] - margin or p["similarity"] >= best[p["b"]] - margin)]
    return d
