"""Verification of candidate clone pairs: several lexical signals, one calibrated decision.

Candidates (:mod:`twinspect.code.candidates`) are cheap to find and mostly not clones; each one is
verified here. No single similarity separates Type-3 clones from the rest at a low false-positive
rate: on BigCloneBench an LCS alignment alone reaches MT3 only by accepting many non-clones, and a
token-bag cosine alone misses most MT3 pairs. So every candidate gets the features of
:data:`FEATURES`, and a small monotone gradient-boosted model, fitted by
``benchmarks/train_verifier.py`` on the BigCloneBench tune half (split by functionality, see
:func:`twinspect.code.evaluate.bcb.bcb_split`), turns them into a clone score in [0, 1]. The
decision threshold is the one stated in the model file (chosen on the tune half for its false-positive
rate on the labelled non-clones). The model is *monotone*: raising any similarity never lowers the
score, so it cannot learn that "less alike" means "more of a clone".

Features of a pair of fragments (all in [0, 1]):

* ``lcs_min`` — NiCad/BigCloneBench-style alignment similarity: the longest common subsequence of
  the two abstracted token sequences (identifiers → ``ID``, literals → ``LIT``; see
  :func:`twinspect.code.normalize.abstract_tokens`) over the longer length. This is also the
  measure the Type-3 bands (VST3 ≥ 0.9, ST3 ≥ 0.7, MT3 ≥ 0.5) are read on.
* ``lcs_dice`` — the same LCS over the mean length, ``2·LCS / (|a| + |b|)``.
* ``tfidf`` — cosine of identifier-blind token 1–3-gram TF-IDF vectors (sublinear tf, idf fitted
  on the scanned fragments; exact up to 64-bit feature hashing, 2^20 columns).
* ``token_overlap`` — SourcererCC's overlap similarity of the plain token multisets, identifiers
  included: ``|A ∩ B| / max(|A|, |B|)``.
* ``trigram_overlap`` — the same over abstracted token 3-grams (order-sensitive, renaming-blind).
* ``size_ratio`` — shorter over longer abstracted-token length.
* ``identifier_tfidf`` — cosine of the identifiers' TF-IDF vectors (whole identifiers, sublinear tf,
  idf fitted on the scanned fragments): two fragments sharing rare names (the same API calls, the
  same fields) score high, two sharing only ``self``/``i``/``result`` do not.
* ``length`` — the shorter fragment's abstracted-token length on a log scale,
  ``log(1 + n) / log(1 + 1000)`` capped at 1: short fragments share a skeleton by chance far more
  often than long ones, so the same similarity is weaker evidence for them.
* ``line_lcs`` — NiCad-style line alignment: the LCS of the two sequences of normalised lines
  (each non-blank code line's abstracted tokens; lines holding only a brace dropped) over the
  longer sequence. A line counts only when it matches whole, so two fragments that share a
  token-level skeleton (``ID . ID ( ID )``) but no statement score near 0 (BigCloneBench tune
  half: non-clones' 90th percentile 0.12 against 0.58 for ``lcs_min``).

The model file (JSON, ``twinspect/code/data/t3_verifier.json``) holds the trees, the threshold and
how they were obtained; :func:`load_verifier` reads and checks it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinspect.code.fragments import Fragment
from twinspect.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import scipy.sparse as sp

#: The verifier's features, in model column order (see the module doc).
FEATURES = ("lcs_min", "lcs_dice", "tfidf", "token_overlap", "trigram_overlap", "size_ratio",
            "identifier_tfidf", "length", "line_lcs")
#: Version of the feature definitions; a model file of another version is refused.
FEATURE_VERSION = 3
#: Abstracted-token length at which the ``length`` feature reaches 1 (log scale).
LENGTH_SATURATION = 1000
DEFAULT_MODEL = Path(__file__).parent / "data" / "t3_verifier.json"
_CHUNK = 1 << 15  # pairs whose sparse features are computed at once (bounded memory)


class PairFeatures:
    """Computes :data:`FEATURES` for pairs of fragments, caching per-fragment representations.

    Args:
        fragments: the N fragments that pair indices refer to.
        abstract: optional per-fragment abstracted token lists (else computed with
            :func:`twinspect.code.normalize.abstract_tokens`).
        plain: optional per-fragment plain token lists (else :func:`twinspect.code.normalize.tokens`).
    """

    def __init__(
        self,
        fragments: Sequence[Fragment],
        abstract: Sequence[Sequence[str]] | None = None,
        plain: Sequence[Sequence[str]] | None = None,
    ):
        from twinspect.code import normalize

        self.fragments = fragments
        self._abstract = abstract if abstract is not None else [normalize.abstract_tokens(f) for f in fragments]
        self._plain = plain if plain is not None else [normalize.tokens(f) for f in fragments]
        self._strings: list[str] | None = None
        self._lines: list[str] | None = None
        self._tfidf: sp.csr_matrix | None = None
        self._bags: sp.csr_matrix | None = None
        self._trigrams: sp.csr_matrix | None = None
        self._sizes: np.ndarray | None = None
        self._idents: sp.csr_matrix | None = None

    def _prepare(self) -> None:
        import numpy as np

        from twinspect.code.encoders.lexical import LexicalEncoder

        if self._strings is not None:
            return
        vocab: dict[str, int] = {}
        # one character per abstracted token: rapidfuzz's LCS then runs on plain strings
        self._strings = ["".join(chr(0x100 + vocab.setdefault(t, len(vocab))) for t in toks) for toks in self._abstract]
        self._sizes = np.asarray([len(s) for s in self._strings], dtype=np.float64)
        line_vocab: dict[str, int] = {}
        self._lines = ["".join(chr(0x100 + line_vocab.setdefault(ln, len(line_vocab))) for ln in normalized_lines(f))
                       for f in self.fragments]
        enc = LexicalEncoder(dim=1 << 20, ngram_range=(1, 3), identifier_weight=0.0)
        self._tfidf = enc.encode_sparse(self.fragments).tocsr()
        self._bags = _count_matrix(self._plain)
        self._trigrams = _count_matrix(
            [[f"{t[i]} {t[i + 1]} {t[i + 2]}" for i in range(len(t) - 2)] for t in self._abstract]
        )
        self._idents = _tfidf_rows(_count_matrix([[t for t in toks if _is_identifier(t)] for toks in self._plain]))

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Features of the pairs ``(a[i], b[i])``.

        Args:
            a, b: int (P,) fragment indices.

        Returns:
            float32 (P, len(FEATURES)) in :data:`FEATURES` order.
        """
        import numpy as np
        from rapidfuzz.distance import LCSseq

        self._prepare()
        assert self._strings is not None and self._sizes is not None
        assert self._tfidf is not None and self._bags is not None and self._trigrams is not None
        assert self._idents is not None and self._lines is not None
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        out = np.zeros((len(a), len(FEATURES)), dtype=np.float32)
        if not len(a):
            return out
        strings = self._strings
        sim = LCSseq.similarity
        lcs = np.fromiter((sim(strings[x], strings[y]) for x, y in zip(a.tolist(), b.tolist())),
                          dtype=np.float64, count=len(a))
        na, nb = self._sizes[a], self._sizes[b]
        longer = np.maximum(np.maximum(na, nb), 1.0)
        out[:, 0] = lcs / longer
        out[:, 1] = 2.0 * lcs / np.maximum(na + nb, 1.0)
        out[:, 5] = np.minimum(na, nb) / longer
        lines = self._lines
        out[:, 8] = np.fromiter(
            (sim(lines[x], lines[y]) / max(len(lines[x]), len(lines[y]), 1) for x, y in zip(a.tolist(), b.tolist())),
            dtype=np.float64, count=len(a))
        out[:, 7] = np.minimum(np.log1p(np.minimum(na, nb)) / np.log1p(LENGTH_SATURATION), 1.0)
        for lo in range(0, len(a), _CHUNK):
            pa, pb = a[lo:lo + _CHUNK], b[lo:lo + _CHUNK]
            out[lo:lo + _CHUNK, 2] = np.clip(_rowdot(self._tfidf, pa, pb), 0.0, 1.0)
            out[lo:lo + _CHUNK, 3] = _overlap(self._bags, pa, pb)
            out[lo:lo + _CHUNK, 4] = _overlap(self._trigrams, pa, pb)
            out[lo:lo + _CHUNK, 6] = np.clip(_rowdot(self._idents, pa, pb), 0.0, 1.0)
        return out


_LAYOUT = frozenset(("<INDENT>", "<DEDENT>"))
_BRACES = frozenset(("{", "}", "};", "} ;", "( ) ;", ") ;"))


def normalized_lines(fragment: Fragment) -> list[str]:
    """The fragment's non-blank code lines, each as its abstracted tokens joined by spaces.

    Lines of only braces (``{``, ``}``, ``};``) are dropped (where a brace goes is layout). Each line
    is tokenised on its own (:func:`twinspect.code.normalize.lex`), so a string spanning lines is
    cut at the line ends; Python's indentation tokens are not part of a line.

    Args:
        fragment: a fragment (its ``code``, comments blanked, is read).

    Returns:
        The normalised lines in order.
    """
    out = []
    for raw in fragment.code.split("\n"):
        key = _line_key(raw.strip(), fragment.language)
        if key:
            out.append(key)
    return out


@functools.lru_cache(maxsize=1 << 18)
def _line_key(line: str, language: str) -> str:
    from twinspect.code.normalize import lex

    if not line:
        return ""
    key = " ".join(t for t in lex(line, language)[1] if t not in _LAYOUT)
    return "" if key in _BRACES else key


def _count_matrix(lists: Sequence[Sequence[str]]) -> sp.csr_matrix:
    """Sparse (N, V) token-count matrix of token lists (V = distinct tokens)."""
    import numpy as np
    import scipy.sparse as sp

    vocab: dict[str, int] = {}
    cols = [vocab.setdefault(t, len(vocab)) for toks in lists for t in toks]
    rows = np.repeat(np.arange(len(lists)), [len(t) for t in lists])
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.float32), (rows, np.asarray(cols, dtype=np.int64))),
                      shape=(len(lists), max(1, len(vocab))))
    m.sum_duplicates()
    return m


def _is_identifier(tok: str) -> bool:
    return tok[:1].isalpha() or tok[:1] == "_" or tok[:1] == "$"


def _tfidf_rows(counts: sp.csr_matrix) -> sp.csr_matrix:
    """Sublinear-tf, smoothed-idf (as scikit-learn's TfidfTransformer), L2-normalised rows."""
    import numpy as np
    import scipy.sparse as sp

    m = counts.tocsr(copy=True).astype(np.float64)
    n = m.shape[0]
    df = np.bincount(m.indices, minlength=m.shape[1])
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    m.data = (1.0 + np.log(m.data)) * idf[m.indices]
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ m)


def _rowdot(m: sp.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.asarray(m[a].multiply(m[b]).sum(axis=1)).ravel()


def _overlap(m: sp.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Multiset overlap ``|A ∩ B| / max(|A|, |B|)`` of count-matrix rows (0 for two empty rows)."""
    import numpy as np

    ra, rb = m[a], m[b]
    inter = np.asarray(ra.minimum(rb).sum(axis=1)).ravel()
    sa = np.asarray(ra.sum(axis=1)).ravel()
    sb = np.asarray(rb.sum(axis=1)).ravel()
    return inter / np.maximum(np.maximum(sa, sb), 1.0)


@dataclass
class Verifier:
    """A monotone tree ensemble over :data:`FEATURES` with a decision threshold.

    The score of a feature row x is ``sigmoid(baseline + Σ_trees leaf_value(x))``; each tree is
    given by parallel arrays (sklearn's HistGradientBoosting layout): ``feature`` (split column),
    ``threshold`` (go left when ``x[feature] <= threshold``), ``left``, ``right`` (child node
    indices) and ``value`` (leaf values), with ``leaf`` marking leaves.

    Attributes:
        baseline: the raw-score offset.
        trees: list of dicts of equal-length lists (``feature``, ``threshold``, ``left``,
            ``right``, ``value``, ``leaf``).
        threshold: clone decision threshold on the score, in (0, 1).
        features: the feature names the columns follow (must equal :data:`FEATURES`).
        info: how the model was fitted (data, split, rates on the tune half), copied into reports.
    """

    baseline: float
    trees: list[dict[str, list]]
    threshold: float
    features: tuple[str, ...] = FEATURES
    info: dict[str, Any] = field(default_factory=dict)

    def score(self, x: np.ndarray) -> np.ndarray:
        """Clone scores of feature rows.

        Args:
            x: float (P, len(FEATURES)).

        Returns:
            float64 (P,) scores in [0, 1].
        """
        import numpy as np

        x = np.asarray(x, dtype=np.float64)
        raw = np.full(len(x), float(self.baseline))
        rows = np.arange(len(x))
        for t in self.trees:
            feat = np.asarray(t["feature"], dtype=np.int64)
            thr = np.asarray(t["threshold"], dtype=np.float64)
            left = np.asarray(t["left"], dtype=np.int64)
            right = np.asarray(t["right"], dtype=np.int64)
            leaf = np.asarray(t["leaf"], dtype=bool)
            value = np.asarray(t["value"], dtype=np.float64)
            node = np.zeros(len(x), dtype=np.int64)
            for _ in range(len(feat)):
                active = ~leaf[node]
                if not active.any():
                    break
                go_left = x[rows, feat[node]] <= thr[node]
                nxt = np.where(go_left, left[node], right[node])
                node = np.where(active, nxt, node)
            raw += value[node]
        return 1.0 / (1.0 + np.exp(-raw))

    def to_json_dict(self) -> dict[str, Any]:
        """The model file's content."""
        return {"kind": "monotone-gbdt", "feature_version": FEATURE_VERSION, "features": list(self.features),
                "baseline": self.baseline, "threshold": self.threshold, "info": self.info, "trees": self.trees}


def load_verifier(path: str | Path | None = None) -> Verifier:
    """Read a verifier model file (default: the one shipped in the package).

    Args:
        path: a JSON file written by ``benchmarks/train_verifier.py``; None = :data:`DEFAULT_MODEL`.

    Returns:
        The :class:`Verifier`.

    Raises:
        InputError: the file is missing, not JSON, or of another feature version / feature list.
    """
    p = Path(path) if path is not None else DEFAULT_MODEL
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: verifier model not found") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{p}: not a readable verifier model ({e})") from None
    if not isinstance(data, dict) or data.get("kind") != "monotone-gbdt":
        raise InputError(f"{p}: not a twinspect verifier model (kind monotone-gbdt expected)")
    if data.get("feature_version") != FEATURE_VERSION or tuple(data.get("features", ())) != FEATURES:
        raise InputError(f"{p}: verifier model has features {data.get('features')} version "
                         f"{data.get('feature_version')}; this twinspect needs {list(FEATURES)} version {FEATURE_VERSION}")
    return Verifier(baseline=float(data["baseline"]), trees=list(data["trees"]), threshold=float(data["threshold"]),
                    features=FEATURES, info=dict(data.get("info", {})))
