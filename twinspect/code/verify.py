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

Two models ship (``--verifier default|strict|FILE``). They disagree about what a Type-3 clone is,
and the data say so: BigCloneBench's MT3 pairs are different implementations of one functionality,
while blind judges of real code (``benchmarks/clones_precision_blind.py``) call most pairs in that
band "weak" — shared skeletons such as null-check-then-write adapters, try/except wrappers or
field-assigning constructors. *default* is fitted on BigCloneBench only and reaches its Type-3
recall; on held-out real projects about a third of the pairs it reports are judged clones.
*strict* is fitted with the blind-labelled pairs of other projects as well (weighted to half of the
sample weight) and its threshold is raised until their out-of-fold precision reaches 80 %: on
held-out projects about four in five of its pairs are clones, at the price of nearly every MT3 and
most ST3 pair (benchmarks/results/verifier_models.md has both models' numbers).

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
* ``lcs_contain`` — the same token LCS over the *shorter* length: how much of the smaller fragment
  lies, in order, inside the larger one. A copy that was extended (statements added around it) keeps
  it high while ``lcs_min`` falls with the added length; in the blind-labelled real-code pairs of the
  MT3 band it separates clones from shared skeletons better than ``lcs_min`` (ROC-AUC 0.74 vs 0.38).

The model file (JSON, ``twinspect/code/data/t3_verifier.json``) holds the trees, the threshold and
how they were obtained; :func:`load_verifier` reads and checks it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinspect.code.fragments import Fragment
from twinspect.code.normalize import normalized_lines
from twinspect.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import scipy.sparse as sp

    from twinspect.code.executors import ShardExecutor

#: The verifier's features, in model column order (see the module doc).
FEATURES = ("lcs_min", "lcs_dice", "tfidf", "token_overlap", "trigram_overlap", "size_ratio",
            "identifier_tfidf", "length", "line_lcs", "lcs_contain")
#: Features computed from the token-bag/TF-IDF matrices (costly per pair; see :func:`verify_pairs`).
SPARSE_FEATURES = ("tfidf", "token_overlap", "trigram_overlap", "identifier_tfidf")
#: The other features: alignments of token and line sequences, sizes (computed for every candidate).
SEQUENCE_FEATURES = tuple(f for f in FEATURES if f not in SPARSE_FEATURES)
#: Version of the feature definitions; a model file of another version is refused.
FEATURE_VERSION = 4
#: Abstracted-token length at which the ``length`` feature reaches 1 (log scale).
LENGTH_SATURATION = 1000
DEFAULT_MODEL = Path(__file__).parent / "data" / "t3_verifier.json"
#: The precision-first model (``--verifier strict``): also fitted on blind-labelled real-code pairs.
STRICT_MODEL = Path(__file__).parent / "data" / "t3_verifier_strict.json"
#: Models shipped in the package, by name.
MODELS = {"default": DEFAULT_MODEL, "strict": STRICT_MODEL}
_CHUNK = 1 << 15  # pairs whose sparse features are computed at once (bounded memory)
_SCORE_CHUNK = 1 << 18  # feature rows scored at once (bounded memory)


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
        self._seq_counts: tuple[sp.csr_matrix, sp.csr_matrix] | None = None

    def _prepare(self, sparse: bool = True) -> None:
        """Per-fragment representations: sequences (always) and, with ``sparse``, the bag matrices."""
        import numpy as np

        from twinspect._memory import trim
        from twinspect.code.encoders.lexical import LexicalEncoder
        from twinspect.code.normalize import token_ids, token_ids_by_chunk

        if self._strings is None:
            # one character per abstracted token: rapidfuzz's LCS then runs on plain strings; int32
            # ids (one per token: 35 M on a 13-MLOC tree)
            abs_ids, abs_len, _ = token_ids(self._abstract, dtype="int32")
            self._strings = _as_strings(abs_ids, abs_len)
            self._sizes = abs_len.astype(np.float64)
            line_ids, line_len, _ = token_ids([normalized_lines(f) for f in self.fragments], dtype="int32")
            self._lines = _as_strings(line_ids, line_len)
            # the sequences' symbols as the alignments see them (ids wrapped as in _as_strings), counted
            self._seq_counts = tuple(  # type: ignore[assignment]
                _list_counts(ids, lens, int(min(_CHAR_SPAN, ids.max(initial=0) + 1)), wrap=_CHAR_SPAN)
                for ids, lens in ((abs_ids, abs_len), (line_ids, line_len)))
        if not sparse or self._tfidf is not None:
            return
        enc = LexicalEncoder(dim=1 << 20, ngram_range=(1, 3), identifier_weight=0.0)
        self._tfidf = enc.encode_sparse(self.fragments).tocsr()
        del enc  # its fitted document frequencies
        trim()  # each pass's freed chunk temporaries back to the system before the next pass (glibc keeps them)
        # Per-token work below goes a chunk of fragments at a time (35 M tokens on a 13-MLOC tree; this
        # stage's memory peak): token ids are made on demand inside each pass (token_ids_by_chunk),
        # never all at once, and reduced to per-fragment counts chunk by chunk (_trigram_counts, _list_counts,
        # _list_sums). The trigrams come first, while fewer tables are held (the tables do not depend
        # on the order).
        abstract_ids, abs_len, abs_vocab = token_ids_by_chunk(self._abstract)
        self._trigrams = _trigram_counts(abstract_ids, abs_len, max(1, len(abs_vocab)))
        trim()
        plain_ids, plain_len, plain_vocab = token_ids_by_chunk(self._plain)
        self._bags = _list_counts(plain_ids, plain_len, len(plain_vocab))
        trim()
        ident = np.fromiter(map(_is_identifier, plain_vocab), dtype=bool, count=len(plain_vocab))

        def ident_ids(r0: int, r1: int) -> np.ndarray:
            ids = plain_ids(r0, r1)
            return ids[ident[ids]]

        ident_len = _list_sums(lambda r0, r1: ident[plain_ids(r0, r1)], plain_len)  # identifiers per fragment
        self._idents = _tfidf_rows(_list_counts(ident_ids, ident_len, len(plain_vocab)))
        trim()

    def sequences(self) -> tuple[list[str], list[str], np.ndarray]:
        """The per-fragment sequences the alignment features read.

        Returns:
            ``(strings, lines, sizes)``: per fragment, its abstracted tokens as a string of one
            character per token, its normalised lines as a string of one character per line, and
            float64 (N,) token counts.
        """
        self._prepare(sparse=False)
        assert self._strings is not None and self._lines is not None and self._sizes is not None
        return self._strings, self._lines, self._sizes

    def bounds(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Upper bounds of the features of the pairs ``(a[i], b[i])`` without aligning them.

        A longest common subsequence uses each symbol occurrence of either sequence at most once,
        so it is at most the two sequences' multiset intersection (their symbols counted, the
        smaller count of each): the token-LCS features are bounded by the abstracted tokens'
        intersection, ``line_lcs`` by the normalised lines'. The bag features
        (:data:`SPARSE_FEATURES`) are bounded by 1; ``size_ratio`` and ``length`` are exact.
        Computed with sparse count matrices: on the 2.6 M candidates of a 2.4-MLOC tree 1.2 s of CPU,
        against 12 s for the alignments.

        Args:
            a, b: int (P,) fragment indices.

        Returns:
            float32 (P, len(FEATURES)) in :data:`FEATURES` order, each column at or above the value
            :meth:`compute` gives it.
        """
        import numpy as np

        self._prepare(sparse=False)
        assert self._seq_counts is not None and self._sizes is not None
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        out = np.ones((len(a), len(FEATURES)), dtype=np.float32)
        if not len(a):
            return out
        tokens, lines = self._seq_counts
        na, nb = self._sizes[a], self._sizes[b]
        n_lines = np.asarray(lines.sum(axis=1)).ravel()
        for lo in range(0, len(a), _CHUNK):
            pa, pb = a[lo:lo + _CHUNK], b[lo:lo + _CHUNK]
            qa, qb = na[lo:lo + _CHUNK], nb[lo:lo + _CHUNK]
            shared = _intersection(tokens, pa, pb)
            out[lo:lo + _CHUNK, 0] = shared / np.maximum(np.maximum(qa, qb), 1.0)
            out[lo:lo + _CHUNK, 1] = 2.0 * shared / np.maximum(qa + qb, 1.0)
            out[lo:lo + _CHUNK, 9] = shared / np.maximum(np.minimum(qa, qb), 1.0)
            out[lo:lo + _CHUNK, 8] = _intersection(lines, pa, pb) / np.maximum(
                np.maximum(n_lines[pa], n_lines[pb]), 1.0)
        _size_columns(out, na, nb)
        return out

    def compute(self, a: np.ndarray, b: np.ndarray, columns: Sequence[str] | None = None,
                workers: int = 1) -> np.ndarray:
        """Features of the pairs ``(a[i], b[i])``.

        Args:
            a, b: int (P,) fragment indices.
            columns: compute only these features (names from :data:`FEATURES`; the others are left
                0); None = all.
            workers: threads of the LCS alignments (rapidfuzz ``cpdist``; -1 = every core). The
                result does not depend on it.

        Returns:
            float32 (P, len(FEATURES)) in :data:`FEATURES` order.

        Raises:
            ValueError: an unknown feature name in ``columns``.
        """
        import numpy as np

        from twinspect.code.vectors import rowdot

        want = set(FEATURES if columns is None else columns)
        if want - set(FEATURES):
            raise ValueError(f"unknown features {sorted(want - set(FEATURES))}; known: {', '.join(FEATURES)}")
        self._prepare(sparse=bool(want & set(SPARSE_FEATURES)))
        assert self._strings is not None and self._sizes is not None and self._lines is not None
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        out = np.zeros((len(a), len(FEATURES)), dtype=np.float32)
        if not len(a):
            return out
        _sequence_columns(out, self._strings, self._lines, self._sizes, a, b, want, workers=workers)
        if want & set(SPARSE_FEATURES):
            assert self._tfidf is not None and self._bags is not None and self._trigrams is not None
            assert self._idents is not None
            for lo in range(0, len(a), _CHUNK):
                pa, pb = a[lo:lo + _CHUNK], b[lo:lo + _CHUNK]
                out[lo:lo + _CHUNK, 2] = np.clip(rowdot(self._tfidf, pa, pb), 0.0, 1.0)
                out[lo:lo + _CHUNK, 3] = _overlap(self._bags, pa, pb)
                out[lo:lo + _CHUNK, 4] = _overlap(self._trigrams, pa, pb)
                out[lo:lo + _CHUNK, 6] = np.clip(rowdot(self._idents, pa, pb), 0.0, 1.0)
        return out


def _sequence_columns(out: np.ndarray, strings: Sequence[str], lines: Sequence[str], sizes: np.ndarray,
                      a: np.ndarray, b: np.ndarray, want: set[str], workers: int = 1) -> None:
    """Fill the sequence features (LCS of abstracted tokens, line LCS, size ratio, length) of pairs
    ``(a[i], b[i])`` into ``out`` (float32 (P, len(FEATURES))), from one-character-per-token strings.
    The alignments run in rapidfuzz's ``cpdist`` on ``workers`` threads (-1: every core)."""
    import numpy as np
    from rapidfuzz.distance import LCSseq
    from rapidfuzz.process import cpdist

    al, bl = a.tolist(), b.tolist()

    def lcs(seqs: Sequence[str]) -> np.ndarray:
        return cpdist([seqs[x] for x in al], [seqs[y] for y in bl], scorer=LCSseq.similarity,
                      dtype=np.int64, workers=workers).astype(np.float64)

    na, nb = sizes[a], sizes[b]
    if len(a) and want & {"lcs_min", "lcs_dice", "lcs_contain"}:
        shared = lcs(strings)
        out[:, 0] = shared / np.maximum(np.maximum(na, nb), 1.0)
        out[:, 1] = 2.0 * shared / np.maximum(na + nb, 1.0)
        out[:, 9] = shared / np.maximum(np.minimum(na, nb), 1.0)
    if len(a) and "line_lcs" in want:
        longest = np.fromiter((max(len(lines[x]), len(lines[y])) for x, y in zip(al, bl)),
                              dtype=np.float64, count=len(a))
        out[:, 8] = lcs(lines) / np.maximum(longest, 1.0)
    _size_columns(out, na, nb)


def _size_columns(out: np.ndarray, na: np.ndarray, nb: np.ndarray) -> None:
    """Fill ``size_ratio`` and ``length`` of pairs with abstracted-token lengths ``na``, ``nb`` (float (P,))."""
    import numpy as np

    out[:, 5] = np.minimum(na, nb) / np.maximum(np.maximum(na, nb), 1.0)
    out[:, 7] = np.minimum(np.log1p(np.minimum(na, nb)) / np.log1p(LENGTH_SATURATION), 1.0)


def _sequence_chunk(shared: tuple, chunk: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """One shard of the sequence features on a :class:`~twinspect.code.executors.ShardExecutor`:
    ``shared = (strings, lines, sizes)``, ``chunk = (a, b)``; returns float32 (P, len(FEATURES))."""
    import numpy as np

    strings, lines, sizes = shared
    a, b = chunk
    out = np.zeros((len(a), len(FEATURES)), dtype=np.float32)
    _sequence_columns(out, strings, lines, sizes, a, b, set(SEQUENCE_FEATURES))
    return out


#: candidate pairs per shard when the sequence features run on an executor
SEQUENCE_SHARD = 20_000


def verify_pairs(features: PairFeatures, verifier: Verifier, a: np.ndarray, b: np.ndarray,
                 executor: ShardExecutor | None = None, prefilter: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Score candidate pairs, aligning and computing the costly bag features only where they can matter.

    The verifier is monotone in every feature (all in [0, 1]), so a row of upper bounds scores at
    least as high as the real features. With ``prefilter``, every pair is first scored on
    :meth:`PairFeatures.bounds` (sequence multiset intersections instead of alignments, bag features
    set to 1); a pair whose bound is below the threshold is rejected without being aligned (on the
    standard library 93 % of 153k candidates). The sequence features (LCS, line LCS, sizes) are then
    computed for the remaining pairs; a pair whose bound with its :data:`SPARSE_FEATURES` set to 1 is
    below the threshold is rejected without the bag features, the others get every feature.
    Decisions are exactly those of scoring every feature.

    Args:
        features: the fragments' :class:`PairFeatures`.
        verifier: the model (must be monotone increasing in every feature, as
            ``benchmarks/train_verifier.py`` fits it).
        a, b: int (P,) fragment indices.
        executor: where the sequence features (the LCS alignments, the costly part) are computed,
            in shards of :data:`SEQUENCE_SHARD` pairs (:mod:`twinspect.code.executors`); None = here.
            The result is the same either way.
        prefilter: reject on the bounds before aligning. Off, every pair's sequence features are
            exact (what a caller that reads rejected pairs' features needs, e.g. the WT3 band).

    Returns:
        ``(x, scores)``: float32 (P, len(FEATURES)) features and float64 (P,) scores. Every feature
        of a pair at or above the threshold is exact; a rejected pair has its upper-bound score
        (below the threshold), its bag features left 0, and — when the prefilter rejected it — its
        sequence features replaced by their bounds (``size_ratio`` and ``length`` stay exact).
    """
    import numpy as np

    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    cols = np.asarray([FEATURES.index(f) for f in SPARSE_FEATURES], dtype=np.int64)
    if not len(a):
        return np.zeros((0, len(FEATURES)), dtype=np.float32), np.zeros(0)
    align = None  # every pair is aligned
    pa, pb = a, b
    if prefilter:
        x = features.bounds(a, b)
        scores = verifier.score(x)
        x[:, cols] = 0.0
        align = np.flatnonzero(scores >= verifier.threshold)
        if not len(align):
            return x, scores
        pa, pb = a[align], b[align]
    if executor is None or len(pa) <= SEQUENCE_SHARD:  # nothing else runs now: the alignments use every core
        seq = features.compute(pa, pb, columns=SEQUENCE_FEATURES, workers=-1)
    else:
        strings, lines, sizes = features.sequences()
        shards = [(pa[i:i + SEQUENCE_SHARD], pb[i:i + SEQUENCE_SHARD]) for i in range(0, len(pa), SEQUENCE_SHARD)]
        seq = np.concatenate(list(executor.map(_sequence_chunk, shards, shared=(strings, lines, sizes))))
    bound = seq.copy()
    bound[:, cols] = 1.0
    seq_scores = verifier.score(bound)
    keep = np.flatnonzero(seq_scores >= verifier.threshold)
    if len(keep):
        seq[np.ix_(keep, cols)] = features.compute(pa[keep], pb[keep], columns=SPARSE_FEATURES)[:, cols]
        seq_scores[keep] = verifier.score(seq[keep])
    if align is None:
        return seq, seq_scores
    x[align] = seq
    scores[align] = seq_scores
    return x, scores


# characters used for token ids: from U+0100 up, skipping the surrogate block (not encodable)
_FIRST_CHAR, _SURROGATES, _LAST_CHAR = 0x100, (0xD800, 0xE000), 0x10FFFF
_CHAR_SPAN = _LAST_CHAR + 1 - _FIRST_CHAR - (_SURROGATES[1] - _SURROGATES[0])


def _as_strings(ids: np.ndarray, lengths: np.ndarray, chunk_tokens: int = 1 << 22) -> list[str]:
    """One string per list, one character per id (so rapidfuzz compares plain strings).

    Ids beyond the ~1.1 M usable code points wrap around (two distinct tokens then compare equal;
    only a corpus with over a million distinct normalised lines gets there). Encoded about
    ``chunk_tokens`` ids of whole lists at a time (memory bound, not a result parameter): the
    code points, their UTF-32 bytes and the decoded text of every token at once were about 1 GB of
    temporaries at a 13-MLOC tree's 35 M tokens.
    """
    import numpy as np

    from twinspect._arrays import chunk_bounds

    ends = np.cumsum(lengths)
    out: list[str] = []
    for lo, hi in chunk_bounds(lengths, chunk_tokens):
        t0 = int(ends[lo - 1]) if lo else 0
        t1 = int(ends[hi - 1])
        c = ids[t0:t1] % _CHAR_SPAN + _FIRST_CHAR
        c[c >= _SURROGATES[0]] += _SURROGATES[1] - _SURROGATES[0]
        text = c.astype("<u4").tobytes().decode("utf-32-le")
        del c
        cuts = (ends[lo:hi] - t0).tolist()
        out.extend(text[s:e] for s, e in zip([0, *cuts[:-1]], cuts))
    return out


def _lists_chunk(values: np.ndarray | Callable[[int, int], np.ndarray], ends: np.ndarray, r0: int,
                 r1: int) -> np.ndarray:
    """The entries of lists ``r0`` to ``r1 - 1``: a slice of ``values`` (all lists concatenated, list i
    ending at ``ends[i]``) or, for a function, ``values(r0, r1)`` (the passes below take either)."""
    if callable(values):
        return values(r0, r1)
    return values[(int(ends[r0 - 1]) if r0 else 0):int(ends[r1 - 1])]


def _list_counts(cols: np.ndarray | Callable[[int, int], np.ndarray], lengths: np.ndarray, ncols: int,
                 wrap: int | None = None, chunk_tokens: int = 1 << 21) -> sp.csr_matrix:
    """Sparse (N, ncols) float32 counts of the occurrences of ``cols`` in N consecutive lists of
    ``lengths`` ids (row i: list i), with sorted, summed entries (canonical format).

    Counted in chunks of whole lists of about ``chunk_tokens`` ids (:func:`twinspect._arrays.chunk_bounds`):
    each chunk's ids are reduced to its distinct ``(list, id)`` entries with their counts before the
    next one is read, and the parts are joined by :func:`twinspect._arrays.concatenate_consumed`. One
    CSR matrix of every occurrence with its duplicates summed held a copy of the ids and a float32 one
    per occurrence besides the result (about 0.3 GB at a 13-MLOC tree's 35 M tokens, at the
    verifier's memory peak). ``cols`` is not modified; it may also be a function ``cols(r0, r1)``
    returning the ids of lists ``r0`` to ``r1 - 1``, concatenated
    (:func:`twinspect.code.normalize.token_ids_by_chunk`), so that the ids of every list are never
    held at once. ``wrap``: count ``cols % wrap`` instead.
    ``chunk_tokens`` bounds memory only; the result does not depend on it.
    """
    import numpy as np
    import scipy.sparse as sp

    from twinspect._arrays import chunk_bounds, concatenate_consumed, index_dtype

    n = len(lengths)
    width = max(1, ncols)
    ends = np.cumsum(lengths, dtype=np.int64)
    dtype = index_dtype(max(int(ends[-1]) if n else 0, width))
    row_counts = np.zeros(n, dtype=np.int64)
    ind_parts: list[np.ndarray] = []
    data_parts: list[np.ndarray] = []
    for r0, r1 in chunk_bounds(lengths, chunk_tokens):
        key = np.array(_lists_chunk(cols, ends, r0, r1), dtype=np.int64)  # a copy: modified below
        if wrap is not None:
            key = key % wrap
        key += np.repeat(np.arange(r1 - r0, dtype=np.int64), lengths[r0:r1]) * width
        key, counts = np.unique(key, return_counts=True)  # by (list, id)
        row_counts[r0:r1] = np.bincount(key // width, minlength=r1 - r0)
        ind_parts.append((key % width).astype(dtype))
        data_parts.append(counts.astype(np.float32))
        del key, counts
    indptr = np.zeros(n + 1, dtype=dtype)
    np.cumsum(row_counts, out=indptr[1:])
    m = sp.csr_matrix((concatenate_consumed(data_parts, np.float32), concatenate_consumed(ind_parts, dtype),
                       indptr), shape=(n, width))
    m.has_canonical_format = True  # sorted and summed by construction
    return m


def _list_sums(values: np.ndarray | Callable[[int, int], np.ndarray], lengths: np.ndarray,
               chunk: int = 1 << 21) -> np.ndarray:
    """int64 (N,) sums of N consecutive lists of ``lengths`` entries of ``values`` (bool or int, (T,),
    or a function of a range of lists as in :func:`_list_counts`).

    Summed a chunk of about ``chunk`` entries of whole lists at a time: ``np.add.reduceat`` into int64
    casts its whole input first (8 bytes an entry: 0.3 GB for a 13-MLOC tree's 35 M tokens).
    """
    import numpy as np

    from twinspect._arrays import chunk_bounds

    out = np.zeros(len(lengths), dtype=np.int64)
    ends = np.cumsum(lengths, dtype=np.int64)
    for r0, r1 in chunk_bounds(lengths, chunk):
        filled = np.flatnonzero(lengths[r0:r1])
        if len(filled):
            starts = ends[r0 + filled] - lengths[r0 + filled] - (int(ends[r0 - 1]) if r0 else 0)
            out[r0 + filled] = np.add.reduceat(_lists_chunk(values, ends, r0, r1), starts, dtype=np.int64)
    return out


def _trigram_counts(ids: np.ndarray | Callable[[int, int], np.ndarray], lengths: np.ndarray, v: int,
                    chunk_tokens: int = 1 << 20) -> sp.csr_matrix:
    """Per-fragment counts of abstracted-token trigrams (three consecutive tokens of one fragment).

    A trigram is coded as the base-``v`` integer of its three token ids; column ``j`` of the result is
    the ``j``-th smallest code that occurs anywhere. The same matrix as counting every trigram
    occurrence at once (``np.unique(codes, return_inverse=True)`` then summing duplicates), built in
    chunks of about ``chunk_tokens`` tokens of whole fragments: each chunk's occurrences are reduced
    to distinct ``(fragment, trigram)`` entries with their counts before the next chunk is coded, so
    no array holds one entry per token of the corpus beyond ``ids`` itself (on a 13-MLOC tree the
    one-pass version held about 1.3 GB of per-token temporaries at the verifier's memory peak), and
    not even ``ids`` when it is given as a function of the chunk.

    Args:
        ids: int (T,) abstracted-token ids of all fragments, concatenated in fragment order; or a
            function ``ids(r0, r1)`` returning the int ids of fragments ``r0`` to ``r1 - 1``,
            concatenated (the same values: the corpus' ids are then never held at once).
        lengths: int (N,) tokens per fragment (summing to T).
        v: the id space (every id < ``v``); ``v ** 3`` must fit in int64.
        chunk_tokens: tokens coded at once (memory bound, not a result parameter).

    Returns:
        float32 CSR (N, K) with sorted column indices, K = number of distinct trigrams (at least 1).
    """
    import numpy as np
    import scipy.sparse as sp

    from twinspect._arrays import chunk_bounds, concatenate_consumed, index_dtype

    n = len(lengths)
    ends = np.cumsum(lengths, dtype=np.int64)
    row_counts = np.zeros(n, dtype=np.int64)  # distinct trigrams per fragment
    code_parts: list[np.ndarray] = []
    count_parts: list[np.ndarray] = []
    for r0, r1 in chunk_bounds(lengths, chunk_tokens):
        x = np.asarray(_lists_chunk(ids, ends, r0, r1), dtype=np.int64)
        if len(x) > 2 and int(lengths[r0:r1].max()) > 2:  # a chunk of lists of ≤ 2 ids has no trigram
            rows = np.repeat(np.arange(r0, r1, dtype=np.int32), lengths[r0:r1])
            valid = rows[:-2] == rows[2:]
            code = x[:-2][valid] * v
            code += x[1:-1][valid]
            code *= v
            code += x[2:][valid]
            rows = rows[:-2][valid]
            order = np.lexsort((code, rows))
            code, rows = code[order], rows[order]
            first = np.flatnonzero(np.r_[True, (code[1:] != code[:-1]) | (rows[1:] != rows[:-1])])
            row_counts[r0:r1] = np.bincount(rows[first] - r0, minlength=r1 - r0)
            code_parts.append(code[first])
            count_parts.append(np.diff(np.r_[first, len(code)]).astype(np.float32))
    if not code_parts:
        return sp.csr_matrix((n, 1), dtype=np.float32)
    # Assembled part by part, each part dropped once used: the codes' vocabulary grown one part at a
    # time, then each part's codes mapped to columns as concatenate_consumed copies it into the array
    # of the final index dtype, the counts joined the same way (the rows were counted per chunk above). Joining every part at once
    # (int64 columns from searchsorted, then scipy's int32 copy) held about 0.6 GB above the finished
    # matrix on a 13-MLOC tree: the verifier's memory peak there.
    vocab = np.zeros(0, dtype=np.int64)
    pending: list[np.ndarray] = []
    for i, c in enumerate(code_parts):  # merged every ~4 M codes: one sort per part was slow, all at once large
        pending.append(np.unique(c))
        if i == len(code_parts) - 1 or sum(len(p) for p in pending) >= 1 << 22:
            vocab = np.unique(np.concatenate([vocab, *pending]))
            pending.clear()
    indptr = np.r_[0, np.cumsum(row_counts)]
    def columns(codes: np.ndarray) -> np.ndarray:
        return np.searchsorted(vocab, codes)

    indices = concatenate_consumed(code_parts, index_dtype(max(len(vocab), int(indptr[-1]))), transform=columns)
    data = concatenate_consumed(count_parts)
    return sp.csr_matrix((data, indices, indptr.astype(indices.dtype)), shape=(n, max(1, len(vocab))))


def _is_identifier(tok: str) -> bool:
    return tok[:1].isalpha() or tok[:1] == "_" or tok[:1] == "$"


def _tfidf_rows(counts: sp.csr_matrix, chunk_entries: int = 1 << 21) -> sp.csr_matrix:
    """Sublinear-tf, smoothed-idf (as scikit-learn's TfidfTransformer), L2-normalised rows, float64.

    ``counts``: float CSR with positive entries in canonical format (as :func:`_list_counts` makes
    them); its entries are not modified, and the result (canonical too) shares its index arrays. The
    weights are computed in place on one float64 copy of the entries, a chunk of about
    ``chunk_entries`` entries of whole rows at a time (a copy of the whole matrix in each step, and
    the diagonal product that scaled the rows, held several at once: about 0.3 GB above the result on
    a 13-MLOC tree's identifiers). The row norms are summed as ``scipy.sparse``'s row sum does
    (``np.add.reduceat`` over each non-empty row), so the result does not depend on ``chunk_entries``.
    """
    import numpy as np
    import scipy.sparse as sp

    from twinspect._arrays import chunk_bounds

    n = counts.shape[0]
    indptr, indices = counts.indptr, counts.indices
    data = counts.data.astype(np.float64)
    df = np.bincount(indices, minlength=counts.shape[1])
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    np.log(data, out=data)
    data += 1.0
    row_nnz = np.diff(indptr)
    norms = np.zeros(n, dtype=np.float64)
    ranges = chunk_bounds(row_nnz, chunk_entries)
    for r0, r1 in ranges:
        e0, e1 = int(indptr[r0]), int(indptr[r1])
        seg = data[e0:e1]
        seg *= idf[indices[e0:e1]]
        filled = np.flatnonzero(row_nnz[r0:r1])
        if len(filled):
            norms[r0 + filled] = np.add.reduceat(seg * seg, indptr[r0 + filled] - e0)
    np.sqrt(norms, out=norms)
    norms[norms == 0] = 1.0
    inv = 1.0 / norms
    for r0, r1 in ranges:
        data[int(indptr[r0]):int(indptr[r1])] *= np.repeat(inv[r0:r1], row_nnz[r0:r1])
    m = sp.csr_matrix((data, indices, indptr), shape=counts.shape)
    m.has_canonical_format = True  # the counts' order (canonical, as _list_counts makes them)
    return m


def _intersection(m: sp.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Multiset intersection sizes ``|A ∩ B|`` of count-matrix rows ``a[i]`` and ``b[i]``, float64 (P,)."""
    import numpy as np

    return np.asarray(m[a].minimum(m[b]).sum(axis=1), dtype=np.float64).ravel()


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

        x = np.asarray(x)
        if len(x) > _SCORE_CHUNK:  # a float64 column copy of millions of rows would be GBs
            return np.concatenate([self.score(x[i:i + _SCORE_CHUNK]) for i in range(0, len(x), _SCORE_CHUNK)])
        cols = np.ascontiguousarray(x.T, dtype=np.float64)
        raw = np.full(len(x), float(self.baseline))
        for t in self.trees:
            feat, thr, left, right, leaf, value = (t["feature"], t["threshold"], t["left"], t["right"],
                                                   t["leaf"], t["value"])
            # every leaf is the AND of the split outcomes on its root path (trees are shallow)
            go_left = {i: cols[feat[i]] <= thr[i] for i in range(len(feat)) if not leaf[i]}
            stack: list[tuple[int, np.ndarray | None]] = [(0, None)]
            while stack:
                i, mask = stack.pop()
                if leaf[i]:
                    raw += value[i] if mask is None else np.where(mask, value[i], 0.0)
                    continue
                g = go_left[i]
                stack.append((left[i], g if mask is None else mask & g))
                stack.append((right[i], ~g if mask is None else mask & ~g))
        return 1.0 / (1.0 + np.exp(-raw))

    def to_json_dict(self) -> dict[str, Any]:
        """The model file's content."""
        return {"kind": "monotone-gbdt", "feature_version": FEATURE_VERSION, "features": list(self.features),
                "baseline": self.baseline, "threshold": self.threshold, "info": self.info, "trees": self.trees}


def verifier_file(path: str | Path | None = None) -> Path:
    """The model file ``path`` names: a shipped model's name (:data:`MODELS`), a file, or None for
    :data:`DEFAULT_MODEL` (not checked to exist)."""
    return MODELS.get(str(path), Path(path)) if path is not None else DEFAULT_MODEL


def load_verifier(path: str | Path | None = None) -> Verifier:
    """Read a verifier model file (default: the one shipped in the package).

    Args:
        path: a JSON file written by ``benchmarks/train_verifier.py``, or the name of a shipped
            model (``"default"``, ``"strict"``: :data:`MODELS`); None = :data:`DEFAULT_MODEL`.

    Returns:
        The :class:`Verifier`.

    Raises:
        InputError: the file is missing, not JSON, or of another feature version / feature list.
    """
    p = verifier_file(path)
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
