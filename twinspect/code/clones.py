"""The clone-detection pipeline: fragments → vectors → k-NN → typed clone pairs → clone classes.

This follows SSCD (Chochlov et al., "Using a Nearest-Neighbour, BERT-Based Approach for Scalable
Clone Detection", ICSME 2022): every fragment (function/method) is embedded, the ``top_k`` nearest
neighbours of each fragment by cosine similarity are retrieved from an exact or HNSW index, and the
neighbours at or above a similarity ``threshold`` are reported as clone pairs. Pairs are then typed
(T1/T2/T3/T4 with BigCloneBench's Type-3 bands, see :mod:`twinspect.code.clone_types`) and grouped
into clone classes.

Three additions to plain top-k retrieval:

**Exact-duplicate buckets.** Fragments are first grouped by their T2 key (identical after removing
comments and layout and abstracting identifiers/literals). Every bucket with more than one member is
a clone class of T1/T2 clones whatever ``top_k`` is (BigCloneBench has classes of hundreds of
identical functions, whose pairs a top-k list would mostly miss). The k-NN search runs over one
*representative* per bucket (its lowest id), so duplicates do not fill each other's top-k lists.
Pairs are then expanded to bucket members with a bound, never O(n²) for huge buckets:

- inside a bucket of ``≤ max_bucket_pairs`` members every pair is reported; a larger bucket is
  reported as a *star*: the representative paired with every other member, and the bucket is
  listed in the report's ``identical_groups`` (type T1 or T2, members): the report thereby states
  every member pair as a clone of that type without listing O(n²) pairs (the bucket is also inside
  one clone class);
- a neighbour pair between two representatives whose buckets have ``≤ max_bucket_pairs`` members
  together expands to all member pairs; otherwise to two stars (each representative paired with the
  members of the other bucket). Expanded member pairs are kept only if their own cosine similarity
  reaches ``threshold``.

**Pair margin** (``pair_margin``, default 0.02). A k-NN pair (a, b) with cosine s ≥ ``threshold`` is
reported only if s ≥ best(a) − margin or s ≥ best(b) − margin, where best(x) is x's highest similarity
to another fragment it does not overlap (among the candidate pairs: the top-k neighbours at
``min(threshold, class_threshold)``, their bucket expansions and the exact-duplicate pairs; a
bucketed fragment's best is thus ≈ 1). Rationale: a fragment's clone is, as a rule, its *best* match;
its weaker neighbours above the threshold are mostly near-misses (same API idiom, same boilerplate)
that cost SSCD-style pair precision. Pairs inside a T1/T2 bucket are exact and never suppressed;
``pair_margin=None`` disables the rule. Recall on class-based benchmarks (BigCloneBench) does not
depend on these pairs: it is carried by the clone classes, built at the lower ``class_threshold``.
(Tuning log: benchmarks/README.md, sections 5–6 — on SSCD the margin 0.02 at threshold 0.7 keeps
recall at 96 % with ~91 % strict precision.)

**T4 needs two kinds of evidence.** A pair whose abstracted-token similarity is below the MT3 band
is typed T4 only when a semantic encoder (``semantic``, the clone-trained encoder shipped with
twinspect; ``neural``, a fine-tuned model, or caller-given vectors) found it *and* the WL similarity
of the two control-flow graphs agrees (:mod:`twinspect.code.structural`; thresholds calibrated on the
BigCloneBench tune half, ``twinspect/code/data/t4_rule.json``, stated in ``stats["t4_rule"]``); with
the lexical encoder it would be weak Type-3 (type T3, band WT3), and by default
(``lexical_min_t3=0.5``) such lexical pairs below the MT3 band are not reported at all
(``stats["weak_lexical_dropped"]``). With ``lexical_min_t3=0.7`` the MT3 band is dropped too: more
precise on real code, less recall (see DetectConfig); ``None`` keeps every band. The *stock* neural
encoder (general-purpose sentence embeddings, no clone-trained ``model_path``) is not evidence either:
its T4 pairs were 1 clone in 49 hand-labelled pairs (benchmarks/results/clones_precision.md), so by
default (``stock_t4="drop"``) they are not reported (``stats["stock_t4_dropped"]``); its T1–T3 pairs
are kept. A fine-tuned model (``model_path``) or caller-given vectors report T4.

**Clone classes** (default ``linkage="pairs"``) are built from the *reported pairs* only, by complete
linkage: the pairs are visited strongest first, and the two groups of a pair are merged only if
*every* pair of members across them is itself a qualifying clone pair — T2-identical (same bucket)
or of cosine similarity ≥ ``max(threshold, class_threshold)``. So every member of a class is in at
least one reported pair, and every pair a class implies is as similar as a reported pair must be: a
class is a clique, it never chains (on flask the former average-linkage classes at 0.40 grew to 54
members). The report's ``stats["class_sizes"]`` gives the size distribution.

The other linkages keep the earlier, looser *clustering* view (documented for comparison and for
class-based benchmark studies; their classes may hold fragments in no reported pair): buckets are
agglomerated along the k-NN edges (between representatives) whose similarity is at least
``class_threshold`` (None means ``threshold``), strongest edge first. ``class_threshold`` may be lower than ``threshold``: the top_k edges are then collected
at ``min(threshold, class_threshold)``, classes may join fragments that are not reported as a pair,
and pairs are still reported only at ≥ ``threshold``.
Two groups joined by an edge are merged only if their *linkage* similarity — computed over the
representatives' vectors — is at least ``class_threshold``:

- ``"single"``: the edge alone suffices (connected components; prone to chaining);
- ``"average"`` (default): the mean cosine over all representative pairs across the two groups;
- ``"complete"``: the minimum cosine over those pairs (every class is then a clique at the
  threshold);
- ``"none"``: classes are the exact-duplicate buckets only.

Guarding against chaining keeps unrelated fragments out of one class (BigCloneBench counts every
non-clone pair inside a class as a false positive). Classes have at least two members, are sorted by
size (descending) then smallest id, and list member ids in ascending order.

Pairs never join a fragment with itself or with a fragment it overlaps (same file, intersecting line
ranges, e.g. a nested function and its parent); each unordered pair appears once with ``a < b``.
Fragment ids are indices into the report's fragment list, sorted by (path, start_line, end_line).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinspect._memory import trim
from twinspect.code.basecode import FRACTION as BASE_CODE_FRACTION
from twinspect.code.clone_types import BANDS, LEXICAL_ENCODERS, TYPES, TypeClassifier
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError
from twinspect.progress import progress

if TYPE_CHECKING:  # numpy is imported lazily so that `twinspect --help` stays fast
    import numpy as np

    from twinspect.code.candidates import Candidates
    from twinspect.code.executors import ShardExecutor
    from twinspect.code.stage_cache import StageCache
    from twinspect.code.vectors import FragmentVectors

ENCODERS = ("lexical", "neural", "semantic")
#: Default encoder parameters per encoder (tuned on SSCD/BigCloneBench, benchmarks/README.md §5–6);
#: used when :attr:`DetectConfig.encoder_params` is left as None.
DEFAULT_ENCODER_PARAMS: dict[str, dict[str, Any]] = {
    "lexical": {"identifier_weight": 0.3, "identifier_mode": "subtokens"},
    "neural": {},
    "semantic": {},
}
#: Default :attr:`DetectConfig.candidate_threshold` per encoder: the embedding cosine down to which
#: neighbours become candidates. The semantic encoder's cosines are compressed upwards (BigCloneBench
#: non-clones: median 0.71), so its candidates start at 0.8 (test half: MT3 53.1 vs 53.4 % at 0.4,
#: stdlib verify stage 12.9 -> 7.4 s).
DEFAULT_CANDIDATE_THRESHOLD: dict[str, float] = {"lexical": 0.40, "neural": 0.40, "semantic": 0.80}
INDEXES = ("auto", "exact", "hnsw")
#: Default :attr:`DetectConfig.lexical_min_t3`: lexical Type-3 pairs below the MT3 band (WT3,
#: abstracted-token similarity < 0.5) are not reported. Chosen on SSCD-C (no recall or precision
#: cost there: 78/80 found either way) and the hand-labelled precision sample (lexical WT3 pairs
#: were 0 of 4 clones), benchmarks/results/clones_precision.md.
DEFAULT_LEXICAL_MIN_T3 = 0.5
LINKAGES = ("pairs", "single", "average", "complete", "none")
#: Values of :attr:`DetectConfig.decision`.
DECISIONS = ("verifier", "cosine", "tiling")
#: Values of :attr:`DetectConfig.stock_t4`.
STOCK_T4 = ("drop", "keep")
#: File granularity: unused functions of whole programs left out of the comparison, or kept (:mod:`twinspect.code.unused`).
UNUSED_CODE = ("drop", "keep")
_SEARCH_CHUNK = 1024  # queries per index.search call (progress granularity, bounded memory)
#: Fragments from which :func:`detect` empties the token caches once the candidates are verified (after
#: the scan state is saved, before the pairs are built), and :func:`scan` again after detection, each
#: time handing the freed pages back to the system (:func:`twinspect._memory.release`): the primed
#: token lists of a 13-MLOC tree are about 700 MB, held otherwise through the pair building, the
#: classes and the sub-function pass. Below it the caches stay (a SARIF report's fingerprints read
#: them). A memory bound, not a result parameter: the report is the same either way.
RELEASE_TOKENS_MIN = 50_000

#: Candidate pairs verified at once (:func:`twinspect.code.verify.verify_pairs`); only the rows that
#: need a look are kept between chunks. A memory bound, not a result parameter: 1 << 21 until
#: 2026-11-27, when a run of the 13.3-MLOC tree with stack dumps put its driver peak (3,977 MiB) in the
#: first chunks (their bounds, scores and features of 2 M pairs at a time beside the feature tables).
VERIFY_CHUNK = 1 << 20


@dataclass
class DetectConfig:
    """Parameters of clone detection (every ``twinspect clones`` option has a field here).

    Attributes:
        encoder: ``"lexical"`` or ``"neural"`` (see :func:`twinspect.code.encoders.make_encoder`).
        encoder_params: keyword arguments of the encoder (e.g. ``dim``, ``identifier_weight`` for
            the lexical encoder; ``max_tokens``, ``batch_size``, ``model_path`` for the neural one).
            None (the default) means :data:`DEFAULT_ENCODER_PARAMS` of ``encoder`` (lexical:
            ``{"identifier_weight": 0.3, "identifier_mode": "subtokens"}``); it is resolved on
            construction and by :meth:`validate`.
        index: ``"auto"`` (default: exact below :data:`twinspect.code.candidates.AUTO_HNSW_MIN`
            representatives, HNSW with :data:`~twinspect.code.candidates.AUTO_HNSW_PARAMS` above —
            with the verifier over a :data:`~twinspect.code.candidates.AUTO_HNSW_DIM`-dimensional SVD
            of the vectors, neighbours re-scored by the full cosine —, its recall against exact search
            measured on a seeded query sample and reported in the stats), ``"exact"`` (brute-force cosine) or ``"hnsw"`` (approximate, hnswlib, with
            ``M`` / ``ef_construction`` / ``ef_search`` below).
        decision: how a candidate pair becomes a clone pair. ``"verifier"`` (default): candidates
            come from a range search on the embeddings (every neighbour at cosine ≥
            ``candidate_threshold``, at most ``max_neighbours`` per fragment) and from
            SourcererCC's token-overlap index (overlap ≥ ``token_overlap``), and each is decided
            by the calibrated verifier of :mod:`twinspect.code.verify` (LCS alignment, token-bag
            overlaps, TF-IDF cosine, size ratio). ``"cosine"``: the earlier SSCD rule — the
            ``top_k`` nearest neighbours at cosine ≥ ``threshold``, with ``pair_margin``.
            ``"tiling"``: JPlag's Greedy String Tiling of whole token sequences
            (:mod:`twinspect.code.tiling`); at ``granularity="file"`` the default ``"verifier"``
            means ``"tiling"`` too (programs are compared as JPlag compares them).
        max_neighbours: with ``decision="verifier"``, the most candidates kept per fragment and
            source (a fragment that hits it is counted in ``stats["capped"]``). ≥ 1.
        token_overlap: with ``decision="verifier"``, the SourcererCC overlap similarity down to
            which token-bag candidates are collected, in (0, 1]; None disables that source.
        verifier_path: a verifier model file (``benchmarks/train_verifier.py``) or the name of a shipped model
            (``"strict"``, see :mod:`twinspect.code.verify`); None = the default one
            shipped with twinspect.
        top_k: with ``decision="cosine"``: neighbours retrieved per fragment (SSCD's topN; the
            paper uses 10).
        threshold: with ``decision="cosine"``, the minimum cosine similarity of a reported pair;
            with ``decision="verifier"``, the cosine at which a *semantic* encoder's pair that the
            lexical verifier rejects is still reported as T4 (below the MT3 band). In [-1, 1].
        class_threshold: with ``linkage="pairs"``: a stricter similarity for class-implied pairs
            (the effective value is ``max(threshold, class_threshold)``); with the clustering
            linkages: minimum edge and linkage similarity for merging, may be below ``threshold``
            (edges are then collected at the lower value). None means ``threshold``. In [-1, 1].
        pair_margin: with ``decision="cosine"``, a k-NN pair is reported only if its similarity is
            within this margin of the best similarity of one of its two fragments (see the module
            doc), in [0, 2]; None (default) disables the rule (0 keeps only pairs that are some
            fragment's best match). It hid real clones whose fragment had an exact copy elsewhere;
            the verifier decides each pair on its own.
        candidate_threshold: with ``linkage="pairs"``, k-NN edges are collected down to
            ``min(threshold, candidate_threshold)``: an edge below ``threshold`` between two T2
            buckets is expanded to their members, which may pair at ≥ ``threshold`` (0.40, the
            value the edges were collected at before classes were tied to pairs). None (default)
            means the encoder's :data:`DEFAULT_CANDIDATE_THRESHOLD` (lexical and neural 0.40,
            semantic 0.80).
        lexical_min_t3: with a lexical encoder, a non-T1/T2 pair is reported only if its
            abstracted-token similarity is at least this. Default 0.5
            (:data:`DEFAULT_LEXICAL_MIN_T3`): WT3 pairs, found by lexical cosine alone, are
            dropped (0 of 4 were clones in the hand-labelled precision sample,
            benchmarks/results/clones_precision.md; no cost on SSCD-C). 0.7 keeps VST3 and ST3
            only (lexical MT3 pairs were 6 of 16 clones there, but dropping them costs SSCD-C
            recall 97.5 → 91.3 %); None keeps every band. Semantic encoders (neural,
            caller-given vectors) are not filtered. In [0, 1].
        stock_t4: what happens to T4 pairs found by the stock neural encoder (``encoder="neural"``
            without a clone-trained ``model_path``): ``"drop"`` (default; 1 of 49 such pairs was a
            clone in the precision study) or ``"keep"`` (report them, as leads to check by hand).
        linkage: ``"pairs"`` (default: classes are cliques of reported pairs), or the clustering
            linkages ``"single"``, ``"average"``, ``"complete"``, ``"none"`` (see the module doc).
        M: HNSW graph degree.
        ef_construction: HNSW build-time candidate list size.
        ef_search: HNSW query-time candidate list size.
        min_lines: fragments shorter than this many lines are not mined (SSCD: 6).
        granularity: what :func:`scan` mines as fragments: ``"function"`` (default: functions and
            methods), ``"block"`` (also runs of statements inside or outside functions that have a
            T2-identical copy elsewhere, see :mod:`twinspect.code.blocks`) or ``"file"`` (whole
            files, as MOSS and JPlag compare programs).
        subfunction: at function granularity, :func:`scan` also reports the exact copied runs inside
            functions (jscpd's token windows) that no reported function pair holds, as pairs of
            sub-function fragments (:mod:`twinspect.code.subfunction`); :func:`detect` ignores it.
        seed: random seed (HNSW construction, any randomised encoder).
        threads: HNSW insertion/search threads (-1 = all cores). 1 (default) builds the same graph
            for a given seed; more threads are faster and may differ in the last neighbours.
        exact_buckets: group T2-identical fragments before the k-NN search (recommended).
        max_bucket_pairs: bucket size up to which all member pairs are reported (see module doc).
        base_code: with ``decision="verifier"``, the share of fragments (and at least
            :data:`twinspect.code.basecode.MIN_FRAGMENTS` of them) in which a source line must occur
            to be *base code* (:mod:`twinspect.code.basecode`, as MOSS ignores passages shared by
            many submissions); a candidate holding base lines is accepted only when the verifier
            also accepts it with them set aside. None disables the rule. In [0, 1].
        unused_code: at file granularity (Greedy String Tiling), ``"drop"`` (default) compares programs
            without the functions that no code reachable from their ``main`` refers to — a
            submission's unused template helpers (:mod:`twinspect.code.unused`; Java, C and C++
            programs with a ``main``) — and ``"keep"`` compares whole files. Other granularities
            ignore it.
    """

    encoder: str = "lexical"
    encoder_params: dict | None = None
    index: str = "auto"
    decision: str = "verifier"
    max_neighbours: int = 100
    token_overlap: float | None = 0.55
    verifier_path: str | None = None
    top_k: int = 10
    threshold: float = 0.7
    class_threshold: float | None = None
    linkage: str = "pairs"
    candidate_threshold: float | None = None
    pair_margin: float | None = None
    lexical_min_t3: float | None = DEFAULT_LEXICAL_MIN_T3
    stock_t4: str = "drop"
    M: int = 16
    ef_construction: int = 200
    ef_search: int = 100
    min_lines: int = 6
    granularity: str = "function"
    subfunction: bool = True
    seed: int = 0
    threads: int = 1
    exact_buckets: bool = True
    max_bucket_pairs: int = 20
    base_code: float | None = BASE_CODE_FRACTION
    unused_code: str = "drop"

    def __post_init__(self) -> None:
        if self.encoder_params is None and self.encoder in DEFAULT_ENCODER_PARAMS:
            self.encoder_params = dict(DEFAULT_ENCODER_PARAMS[self.encoder])
        if self.candidate_threshold is None:
            self.candidate_threshold = self.candidate_cosine

    @property
    def candidate_cosine(self) -> float:
        """:attr:`candidate_threshold`, resolved to the encoder's default when None."""
        if self.candidate_threshold is None:
            return DEFAULT_CANDIDATE_THRESHOLD.get(self.encoder, 0.40)
        return self.candidate_threshold

    def validate(self) -> None:
        """Check every field's range (and resolve ``encoder_params=None`` to the encoder's defaults).

        Raises:
            InputError: naming the first invalid option and its allowed values.
        """
        if self.encoder not in ENCODERS:
            raise InputError(f"unknown encoder {self.encoder!r}", hint=f"choose one of {', '.join(ENCODERS)}")
        if self.encoder_params is None:
            self.encoder_params = dict(DEFAULT_ENCODER_PARAMS[self.encoder])
        if self.index not in INDEXES:
            raise InputError(f"unknown index {self.index!r}", hint=f"choose one of {', '.join(INDEXES)}")
        if self.linkage not in LINKAGES:
            raise InputError(f"unknown linkage {self.linkage!r}", hint=f"choose one of {', '.join(LINKAGES)}")
        if self.top_k < 1:
            raise InputError(f"top_k must be at least 1, got {self.top_k}")
        if self.decision not in DECISIONS:
            raise InputError(f"unknown decision rule {self.decision!r}", hint=f"choose one of {', '.join(DECISIONS)}")
        if self.decision == "verifier" and self.verifier_path is not None:
            from twinspect.code.verify import load_verifier

            load_verifier(self.verifier_path)  # a bad model file fails before any file is parsed (~1 ms)
        if self.max_neighbours < 1:
            raise InputError(f"max_neighbours must be at least 1, got {self.max_neighbours}")
        if self.token_overlap is not None and not 0.0 < self.token_overlap <= 1.0:
            raise InputError(f"token_overlap must be in (0, 1] (or None to disable it), got {self.token_overlap}")
        for name in ("threshold", "class_threshold", "candidate_threshold"):
            value = getattr(self, name)
            if value is not None and not -1.0 <= value <= 1.0:
                raise InputError(f"{name} must be a cosine similarity in [-1, 1], got {value}")
        if self.pair_margin is not None and not 0.0 <= self.pair_margin <= 2.0:
            raise InputError(f"pair_margin must be in [0, 2] (or None to disable it), got {self.pair_margin}")
        if self.M < 2:
            raise InputError(f"M must be at least 2, got {self.M}")
        if self.ef_construction < 1 or self.ef_search < 1:
            raise InputError(f"ef_construction and ef_search must be at least 1, got {self.ef_construction} and {self.ef_search}")
        if self.min_lines < 1:
            raise InputError(f"min_lines must be at least 1, got {self.min_lines}")
        from twinspect.code.fragments import check_granularity

        check_granularity(self.granularity)
        if self.stock_t4 not in STOCK_T4:
            raise InputError(f"stock_t4 must be one of {', '.join(STOCK_T4)}, got {self.stock_t4!r}")
        if self.lexical_min_t3 is not None and not 0.0 <= self.lexical_min_t3 <= 1.0:
            raise InputError(f"lexical_min_t3 must be a token similarity in [0, 1], got {self.lexical_min_t3}")
        if self.threads == 0 or self.threads < -1:
            raise InputError(f"threads must be -1 (all cores) or at least 1, got {self.threads}")
        if self.max_bucket_pairs < 2:
            raise InputError(f"max_bucket_pairs must be at least 2, got {self.max_bucket_pairs}")
        if self.base_code is not None and not 0.0 <= self.base_code <= 1.0:
            raise InputError(f"base_code must be a share of fragments in [0, 1] (or None to disable it), got {self.base_code}")
        if self.unused_code not in UNUSED_CODE:
            raise InputError(f"unused_code must be one of {', '.join(UNUSED_CODE)}, got {self.unused_code!r}")

    @property
    def effective_class_threshold(self) -> float:
        """The class-merging threshold in force (``class_threshold`` or ``threshold``)."""
        return self.threshold if self.class_threshold is None else self.class_threshold

    @property
    def edge_threshold(self) -> float:
        """The similarity down to which k-NN edges are collected: ``min(threshold, class threshold)``
        (``min(threshold, candidate_threshold)`` with ``linkage="pairs"``, whose classes use
        reported pairs only)."""
        if self.linkage == "pairs":
            return min(self.threshold, self.candidate_cosine)
        return min(self.threshold, self.effective_class_threshold)

    def to_dict(self) -> dict:
        """All fields as a JSON-serialisable dict (written into reports)."""
        d = asdict(self)
        params = self.encoder_params if self.encoder_params is not None else DEFAULT_ENCODER_PARAMS.get(self.encoder, {})
        d["encoder_params"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in params.items()}
        return d


@dataclass(slots=True)
class ClonePair:
    """One reported clone pair.

    Attributes:
        a: id of the first fragment (index into :attr:`CloneReport.fragments`), ``a < b``.
        b: id of the second fragment.
        similarity: cosine similarity of the two embeddings, in [-1, 1].
        type: ``"T1"``, ``"T2"``, ``"T3"`` or ``"T4"``.
        t3_similarity: abstracted-token similarity in [0, 1] for T3/T4 pairs, else None.
        band: ``"VST3"``, ``"ST3"``, ``"MT3"`` or ``"WT3"`` for T3/T4 pairs, else None.
        score: the verifier's clone score in [0, 1] that decided a T3 pair (or rejected a T4 pair
            reported on semantic evidence); None for T1/T2 pairs and with ``decision="cosine"``.
    """

    a: int
    b: int
    similarity: float
    type: str
    t3_similarity: float | None = None
    band: str | None = None
    score: float | None = None

    @property
    def t3_band(self) -> str | None:
        """Alias of :attr:`band`."""
        return self.band

    def to_json_dict(self) -> dict:
        """The pair as written in the JSON report."""
        return {
            "a": int(self.a),
            "b": int(self.b),
            "similarity": round(float(self.similarity), 6),
            "type": self.type,
            "band": self.band,
            "t3_similarity": None if self.t3_similarity is None else round(float(self.t3_similarity), 6),
            "score": None if self.score is None else round(float(self.score), 6),
        }


@dataclass
class CloneReport:
    """The result of clone detection on one codebase.

    Attributes:
        root: the scanned root directory (fragment paths are relative to it); "" when unknown.
        fragments: all fragments, sorted by (path, start_line, end_line); ids are list indices.
        pairs: clone pairs sorted by (a, b).
        classes: clone classes (lists of fragment ids), largest first.
        stats: counts and timings (see :func:`detect` and :func:`scan`).
        config: the :class:`DetectConfig` used, as a dict.
        identical_groups: exact-duplicate buckets too large to list all their pairs (more than
            ``max_bucket_pairs`` members; only a star of pairs is in :attr:`pairs`), each
            ``{"type": "T1" | "T2", "members": [ids]}``: every pair of members is a clone of that
            type (T1: identical after removing comments and layout; T2: identical after also
            abstracting identifiers and literals). Members ascending; groups largest first.
        group_pairs: clone pairs between two exact-duplicate groups too large to list pair by pair,
            each ``{"a": [ids], "b": [ids], "type", "band", "t3_similarity", "score"}``: every
            fragment of ``a`` is a clone of every fragment of ``b`` of that type (the members of
            each side are T2-identical, so one verified pair stands for all); :attr:`pairs` lists
            two stars of each.
        code_hashes: None, or the fragments' code hashes (:meth:`code_hash`) known at detection, one
            per fragment: a numpy ``S32`` array of their hex digits (ASCII), ``b""`` where not known.
            A large scan fills it while its tokens are still in memory, so that its report does not
            lex every fragment again after letting go of them (see :data:`RELEASE_TOKENS_MIN`).
    """

    root: str
    fragments: list[Fragment]
    pairs: list[ClonePair]
    classes: list[list[int]]
    stats: dict
    config: dict
    identical_groups: list[dict] = field(default_factory=list)
    group_pairs: list[dict] = field(default_factory=list)
    code_hashes: Any = None

    def code_hash(self, i: int) -> str:
        """The code hash of fragment ``i``: 32 hex digits, :func:`twinspect.code.normalize.t1_key`
        (the T1 key: its tokens after layout and comment normalisation, not its line numbers); read
        from :attr:`code_hashes` when known there, else computed."""
        if self.code_hashes is not None:
            known = self.code_hashes[i]
            if known:
                return known.decode("ascii")
        from twinspect.code.normalize import t1_key

        return t1_key(self.fragments[i])

    def to_json_dict(self) -> dict:
        """The JSON report: ``fragments``, ``pairs``, ``classes``, ``stats`` plus ``version``, ``root``, ``config``.

        Shape (a contract read by other tools; fields may be added, never removed)::

            {"version": str, "root": str, "config": {...},
             "fragments": [{"id", "path", "start_line", "end_line", "name", "language", "kind"}],
             "pairs": [{"a", "b", "similarity", "type", "band", "t3_similarity", "score"}],
             "classes": [[id, ...]],
             "identical_groups": [{"type": "T1" | "T2", "members": [id, ...]}],
             "group_pairs": [{"a": [id, ...], "b": [id, ...], "type", "band", "t3_similarity", "score"}],
             "stats": {...}}

        ``identical_groups`` (see the attribute) states the member pairs of exact-duplicate groups
        too large to list pair by pair.
        """
        return {key: list(value) if isinstance(value, Iterator) else value for key, value in self.json_fields()}

    def restricted(self, pairs: list[ClonePair], identical_groups: list[dict], group_pairs: list[dict]) -> CloneReport:
        """A copy that keeps only the given pairs, identical groups and group pairs (subsets of this
        report's), with the clone classes that hold one of the kept pairs (whole) and the pair, class and
        group counts of the stats recomputed. Fragments (and so ids) are unchanged; this report is not
        modified. Used by ``--baseline`` (:func:`twinspect.code.baseline.filter_report`) and
        ``--changed`` (:func:`twinspect.code.incremental.changed_scan`)."""
        import dataclasses

        class_of = {m: ci for ci, c in enumerate(self.classes) for m in c}
        holding = {class_of[p.a] for p in pairs if p.a in class_of and class_of.get(p.b) == class_of[p.a]}
        classes = [c for ci, c in enumerate(self.classes) if ci in holding]
        stats = dict(self.stats)
        stats.update(pair_stats(pairs, classes))
        stats["identical_groups"] = len(identical_groups)
        stats["group_pairs"] = len(group_pairs)
        return dataclasses.replace(self, pairs=pairs, classes=classes, stats=stats, identical_groups=identical_groups,
                                   group_pairs=group_pairs)

    def json_fields(self) -> list[tuple[str, Any]]:
        """The fields of :meth:`to_json_dict` in order, the five long lists as iterators of their entries.

        A writer can stream a report of millions of pairs without holding every entry as a dict
        at once (:func:`twinspect.code.report.write_json_report`).

        Returns:
            ``[(key, value)]``: ``fragments``, ``pairs``, ``classes``, ``identical_groups`` and
            ``group_pairs`` are one-shot iterators of JSON-ready entries; the other values are JSON-ready.
        """
        from twinspect import __version__

        def fragments() -> Iterator[dict]:
            for i, f in enumerate(self.fragments):
                yield {"id": i, "path": f.path, "start_line": f.start_line, "end_line": f.end_line, "name": f.name,
                       "language": f.language, "kind": f.kind}

        def group_pairs() -> Iterator[dict]:
            for g in self.group_pairs:
                yield {"a": list(map(int, g["a"])), "b": list(map(int, g["b"])), "type": g["type"], "band": g["band"],
                       "t3_similarity": None if g["t3_similarity"] is None else round(float(g["t3_similarity"]), 6),
                       "score": None if g["score"] is None else round(float(g["score"]), 6)}

        return [
            ("version", __version__),
            ("root", self.root),
            ("config", self.config),
            ("fragments", fragments()),
            ("pairs", (p.to_json_dict() for p in self.pairs)),
            ("classes", (list(map(int, c)) for c in self.classes)),
            ("identical_groups", ({"type": g["type"], "members": list(map(int, g["members"]))}
                                  for g in self.identical_groups)),
            ("group_pairs", group_pairs()),
            ("stats", self.stats),
        ]


def overlaps(a: Fragment, b: Fragment) -> bool:
    """True if two fragments are in the same file and their line ranges intersect."""
    return a.path == b.path and a.start_line <= b.end_line and b.start_line <= a.end_line


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root


def lowest_id_components(nodes: Iterable[int], edges: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Connected components of a sparse graph, each named by its lowest node id (union-find).

    Args:
        nodes: node ids that belong in the result even without an edge (singleton components).
        edges: ``(u, v)`` node-id pairs; their ends are nodes too.

    Returns:
        ``{node: lowest id of its component}`` for every node, in first-seen order (``nodes``
        first, then edge ends in edge order).
    """
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x in nodes:
        find(x)
    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return {x: find(x) for x in parent}


def _buckets(frags: Sequence[Fragment], clf: TypeClassifier, enabled: bool) -> list[list[int]]:
    """Group fragment ids by T2 key (each list sorted, lists ordered by first id)."""
    if not enabled:
        return [[i] for i in range(len(frags))]
    by_key: dict[str, list[int]] = {}
    for i in range(len(frags)):
        by_key.setdefault(clf.t2_key(i), []).append(i)
    return sorted(by_key.values(), key=lambda b: b[0])


def _encode(frags: Sequence[Fragment], config: DetectConfig, quiet: bool,
            fitted: Any = None) -> tuple[FragmentVectors, str, Any]:
    """Embed ``frags`` with a new encoder of ``config.encoder``, fitted on them, or with ``fitted`` (an
    encoder fitted elsewhere, e.g. a saved full scan's: not fitted again). Returns the vectors, the
    encoder's name and the encoder."""
    from twinspect.code.encoders import make_encoder
    from twinspect.code.vectors import FragmentVectors

    encoder = fitted if fitted is not None else make_encoder(config.encoder, **(config.encoder_params or {}))
    # the lexical encoder's rows are ~140 non-zeros of 2,048: kept sparse (see twinspect.code.vectors);
    # it has no progress bar of its own (one pass of numpy over all tokens), so a spinner stands in
    encode_sparse = getattr(encoder, "encode_sparse", None)
    with progress("embedding", total=None, quiet=quiet or not callable(encode_sparse) or len(frags) < 10_000):
        fit = getattr(encoder, "fit", None)
        if fitted is None and callable(fit):
            fit(frags)
        if callable(encode_sparse):
            return FragmentVectors(encode_sparse(frags, quiet=quiet)), getattr(encoder, "name", config.encoder), encoder
    return FragmentVectors(encoder.encode(frags, quiet=quiet)), getattr(encoder, "name", config.encoder), encoder


def _knn_edges(
    vecs: FragmentVectors, reps: list[int], frags: Sequence[Fragment], config: DetectConfig, quiet: bool = True
) -> dict[tuple[int, int], float]:
    """k-NN search over representatives; returns {(u, v): cosine} with u < v (fragment ids).

    Keeps each representative's ``top_k`` non-overlapping neighbours at ≥ ``config.edge_threshold``.
    """
    import numpy as np

    from twinspect.code.candidates import AUTO_HNSW_PARAMS, resolve_index
    from twinspect.code.index import make_index

    edges: dict[tuple[int, int], float] = {}
    if len(reps) < 2:
        return edges
    rep_ids = np.asarray(reps, dtype=np.int64)
    rep_vecs = vecs.dense(rep_ids)
    params: dict[str, Any] = {}
    kind = resolve_index(config.index, len(reps))
    if kind == "hnsw":
        # One insertion thread (the default) makes the HNSW graph reproducible for a given seed.
        params = dict(M=config.M, ef_construction=config.ef_construction,
                      ef_search=max(config.ef_search, config.top_k + 5), seed=config.seed,
                      num_threads=config.threads)
        if config.index == "auto":
            params.update(AUTO_HNSW_PARAMS, ef_search=max(AUTO_HNSW_PARAMS["ef_search"], config.top_k + 5))
    index = make_index(kind, rep_vecs.shape[1], **params)
    index.add(rep_ids, rep_vecs)
    # A few extra neighbours stand in for the query itself and for overlapping (nested) fragments.
    k = min(len(reps), config.top_k + 5)
    ids = np.empty((len(reps), k), dtype=np.int64)
    sims = np.empty((len(reps), k), dtype=np.float32)
    with progress("k-NN search", total=len(reps), quiet=quiet) as bar:
        for lo in range(0, len(reps), _SEARCH_CHUNK):
            hi = min(len(reps), lo + _SEARCH_CHUNK)
            ids[lo:hi], sims[lo:hi] = index.search(rep_vecs[lo:hi], k)
            bar.advance(hi - lo)
    thr = config.edge_threshold
    for row, u in enumerate(reps):
        kept = 0
        order = np.argsort(-sims[row], kind="stable")
        for j in order:
            v = int(ids[row, j])
            s = float(sims[row, j])
            if v < 0 or v == u:
                continue
            if s < thr or kept >= config.top_k:
                break
            if overlaps(frags[u], frags[v]):
                continue
            kept += 1
            key = (u, v) if u < v else (v, u)
            if s > edges.get(key, -2.0):
                edges[key] = s
    return edges


def _expand_pairs(
    vecs: FragmentVectors,
    frags: Sequence[Fragment],
    buckets: list[list[int]],
    bucket_of: np.ndarray,
    edges: dict[tuple[int, int], float],
    clf: TypeClassifier,
    config: DetectConfig,
    quiet: bool = True,
) -> tuple[list[ClonePair], dict[str, int]]:
    """Intra-bucket T1/T2 pairs plus k-NN pairs expanded to bucket members (bounded, see module doc).

    Candidates are gathered at ``config.edge_threshold``; a near (non-bucket) candidate is reported
    when its similarity is ≥ ``config.threshold`` and it passes the pair-margin rule. Only reported
    pairs are typed. Returns the pairs sorted by (a, b) and counters ``candidate_pairs`` and
    ``margin_suppressed``.
    """
    cap = config.max_bucket_pairs
    edge_thr = config.edge_threshold
    exact: dict[tuple[int, int], float] = {}
    near: dict[tuple[int, int], float] = {}

    def add_exact(i: int, j: int) -> None:
        a, b = (i, j) if i < j else (j, i)
        if (a, b) in exact or overlaps(frags[a], frags[b]):
            return
        exact[(a, b)] = vecs.cosine(a, b)

    def add_near(i: int, j: int, sim: float | None) -> None:
        a, b = (i, j) if i < j else (j, i)
        if (a, b) in exact or (a, b) in near or overlaps(frags[a], frags[b]):
            return
        s = vecs.cosine(a, b) if sim is None else sim
        if s >= edge_thr:
            near[(a, b)] = s

    for members in buckets:
        if len(members) < 2:
            continue
        if len(members) <= cap:
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    add_exact(members[x], members[y])
        else:
            for m in members[1:]:
                add_exact(members[0], m)

    for (u, v), sim in edges.items():
        bu, bv = buckets[bucket_of[u]], buckets[bucket_of[v]]
        add_near(u, v, sim)
        if len(bu) == 1 and len(bv) == 1:
            continue
        if len(bu) + len(bv) <= cap:
            for x in bu:
                for y in bv:
                    add_near(x, y, None)
        else:
            for y in bv:
                add_near(u, y, None)
            for x in bu:
                add_near(x, v, None)

    thr = config.threshold
    margin = config.pair_margin
    best: dict[int, float] = {}
    if margin is not None:
        for pool in (exact, near):
            for (a, b), s in pool.items():
                if s > best.get(a, -2.0):
                    best[a] = s
                if s > best.get(b, -2.0):
                    best[b] = s
    eps = 1e-6  # float32 cosines of one pair may differ in the last bits (index vs. dot product)
    keep: list[tuple[int, int]] = []
    suppressed = 0
    for (a, b), s in near.items():
        if s < thr:
            continue
        if margin is not None and s + eps < best[a] - margin and s + eps < best[b] - margin:
            suppressed += 1
            continue
        keep.append((a, b))

    out: dict[tuple[int, int], ClonePair] = {}
    for (a, b), s in exact.items():
        kind = "T1" if clf.t1_key(a) == clf.t1_key(b) else "T2"
        out[(a, b)] = ClonePair(a, b, s, kind)
    with progress("typing pairs", total=len(keep), quiet=quiet) as bar:
        for a, b in keep:
            bar.advance()
            ct = clf.classify(a, b)
            out[(a, b)] = ClonePair(a, b, near[(a, b)], ct.type, ct.t3_similarity, ct.band)
    counters = {"candidate_pairs": len(exact) + len(near), "margin_suppressed": suppressed}
    return [out[key] for key in sorted(out)], counters


def _exact_pairs(
    vecs: FragmentVectors, frags: Sequence[Fragment], buckets: list[list[int]], clf: TypeClassifier, cap: int
) -> list[ClonePair]:
    """T1/T2 pairs inside exact-duplicate buckets: every member pair of a bucket of ≤ ``cap``
    members, a star (first member with each other) for a larger one (see the module doc)."""
    out: list[ClonePair] = []
    for members in buckets:
        if len(members) < 2:
            continue
        if len(members) <= cap:
            pairs = [(members[x], members[y]) for x in range(len(members)) for y in range(x + 1, len(members))]
        else:
            pairs = [(members[0], m) for m in members[1:]]
        for a, b in pairs:
            if overlaps(frags[a], frags[b]):
                continue
            kind = "T1" if clf.t1_key(a) == clf.t1_key(b) else "T2"
            out.append(ClonePair(a, b, 0.0, kind))
    _set_similarities(vecs, out)
    return out


def _set_similarities(vecs: FragmentVectors, pairs: Sequence[ClonePair]) -> None:
    """Set each pair's ``similarity`` to its fragments' cosine (computed in one vectorised pass)."""
    import numpy as np

    if not pairs:
        return
    a = np.fromiter((p.a for p in pairs), dtype=np.int64, count=len(pairs))
    b = np.fromiter((p.b for p in pairs), dtype=np.int64, count=len(pairs))
    for p, s in zip(pairs, vecs.pair_cosines(a, b).tolist()):
        p.similarity = s


def _base_code_veto(
    frags: Sequence[Fragment],
    reps: Sequence[int],
    la: np.ndarray,
    lb: np.ndarray,
    x: np.ndarray,
    scores: np.ndarray,
    verifier: Any,
    config: DetectConfig,
    base: frozenset[str],
) -> int:
    """Apply the base-code rule (:mod:`twinspect.code.basecode`) to verified candidates, in place.

    Each accepted candidate (``scores >= verifier.threshold``) one of whose fragments holds base
    lines is scored again with the base lines blanked, and keeps the lower of its two scores. The
    sequence and overlap features are recomputed on the reduced fragments; the two TF-IDF features
    keep their values (their IDF, fitted on all fragments, already discounts frequent tokens).

    Args:
        frags: all fragments; ``reps`` the bucket representatives the features were computed over.
        la, lb: int (P,) candidate pairs as positions in ``reps``.
        x: float32 (P, len(FEATURES)) the candidates' features; ``scores`` float (P,) their scores
            (lowered in place).
        verifier: the :class:`~twinspect.code.verify.Verifier` in use.
        config: its ``base_code`` share (None: nothing is done).
        base: the base lines (:func:`twinspect.code.basecode.base_lines` of the representatives, or
            of a saved full scan's representatives in a changed-files check).

    Returns:
        The number of accepted candidates that the rule turned down.
    """
    import numpy as np

    from twinspect.code.basecode import holds_base_lines, without_base_lines
    from twinspect.code.verify import FEATURES, PairFeatures

    if config.base_code is None or not len(scores) or not base:
        return 0
    rep_frags = [frags[r] for r in reps]
    accepted = np.flatnonzero(scores >= verifier.threshold)
    involved = np.unique(np.concatenate([la[accepted], lb[accepted]]))
    holds = {int(i) for i in involved.tolist() if holds_base_lines(rep_frags[i], base)}
    sel = np.asarray([k for k in accepted.tolist() if int(la[k]) in holds or int(lb[k]) in holds], dtype=np.int64)
    if not len(sel):
        return 0
    sub = np.unique(np.concatenate([la[sel], lb[sel]]))
    pos = {int(i): k for k, i in enumerate(sub.tolist())}
    reduced = PairFeatures([without_base_lines(rep_frags[i], base) if i in holds else rep_frags[i]
                            for i in sub.tolist()])
    xr = reduced.compute(np.asarray([pos[int(i)] for i in la[sel].tolist()], dtype=np.int64),
                         np.asarray([pos[int(i)] for i in lb[sel].tolist()], dtype=np.int64))
    keep = [FEATURES.index("tfidf"), FEATURES.index("identifier_tfidf")]
    xr[:, keep] = x[sel][:, keep]
    again = verifier.score(xr)
    scores[sel] = np.minimum(scores[sel], again)
    return int(np.sum(again < verifier.threshold))


def _code_hashes(frags: Sequence[Fragment]) -> np.ndarray:
    """:attr:`CloneReport.code_hashes` of ``frags``: numpy ``S32``, each fragment's T1 key (hex ASCII)."""
    import numpy as np

    from twinspect.code.normalize import t1_key

    return np.array([t1_key(f).encode("ascii") for f in frags], dtype="S32")


def _release_token_caches() -> None:
    """Empty the token caches and hand the freed pages back to the system (see :data:`RELEASE_TOKENS_MIN`)."""
    from twinspect._memory import release
    from twinspect.code.normalize import release_token_caches

    release_token_caches()
    release()


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(fn(*args, **kwargs), seconds it took)``."""
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def _candidate_sources(
    vecs: FragmentVectors, reps: list[int], frags: Sequence[Fragment], plain: list, config: DetectConfig,
    threshold: float, params: dict[str, Any], quiet: bool, executor: ShardExecutor | None, seconds: dict[str, float],
) -> tuple[Candidates, Candidates]:
    """The embedding range search and the token-overlap index of :func:`_verified_pairs` (their
    seconds added to ``seconds``), the second in a thread beside the first."""
    from twinspect.code.candidates import Candidates, overlap_pairs, range_pairs

    # The two candidate sources are independent and spend most of their time in numpy/scipy
    # kernels that release the GIL, so the token-overlap index runs in a second thread while the
    # range search runs here (stdlib: 5.0 s -> 3.6 s on 2 cores; same candidates). Only one
    # progress display can be live at a time: the thread's bar is silent, and a spinner covers
    # any wait for it after the range search.
    # Each source's tail (joining, ranking and de-duplicating what it found) holds its largest
    # temporaries; one lock keeps the overlap's tail apart from the whole range search, whose index is
    # alive until its own tail ends (the same candidates either way).
    tails = threading.Lock()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="twinspect-overlap") as pool:
        tok_future = None
        if config.token_overlap is not None:
            tok_future = pool.submit(_timed, overlap_pairs, plain, reps, frags, theta=config.token_overlap,
                                     cap=config.max_neighbours, quiet=True, executor=executor, tail=tails)
        t0 = time.perf_counter()
        # The range search holds the lock from its start, not only for its tail: its index and found keys
        # (about 1 GB on a 13-MLOC tree) live through its whole search loop, and the token-overlap index,
        # since its probe loop is compiled (kernels.py), ends minutes before it. Its tail run beside that
        # loop peaked the driver at 4,219 MiB on the 13-MLOC tree; held back so, at 3,778 MiB.
        emb = range_pairs(vecs, reps, frags, threshold=threshold, cap=config.max_neighbours, index=config.index,
                          index_params=params, quiet=quiet, hold=tails)
        seconds["range_search"] = time.perf_counter() - t0
        if tok_future is None:
            tok = Candidates.empty()
        elif tok_future.done():
            tok, seconds["token_overlap"] = tok_future.result()
        else:
            with progress("token-overlap index", total=None, quiet=quiet):
                tok, seconds["token_overlap"] = tok_future.result()
    return emb, tok


def _verified_pairs(
    vecs: FragmentVectors,
    frags: Sequence[Fragment],
    buckets: list[list[int]],
    bucket_of: np.ndarray,
    clf: TypeClassifier,
    config: DetectConfig,
    semantic: bool,
    quiet: bool = True,
    executor: ShardExecutor | None = None,
    base: frozenset[str] | None = None,
    stages: StageCache | None = None,
    verified_hook: Callable[[frozenset[str]], None] | None = None,
) -> tuple[list[ClonePair], Candidates | None, dict[str, Any]]:
    """The near-miss pipeline: candidates from two sources, verified, typed, expanded to buckets.

    Candidates are pairs of bucket representatives (first members) from
    :func:`twinspect.code.candidates.range_pairs` (cosine ≥ ``config.candidate_threshold``, at most
    ``config.max_neighbours`` per fragment) and :func:`twinspect.code.candidates.overlap_pairs`
    (token overlap ≥ ``config.token_overlap``). Each is scored by the verifier
    (:mod:`twinspect.code.verify`); a pair at or above the verifier's threshold is a Type-3 clone
    typed by the band of its LCS similarity (a pair below the MT3 band is weak Type-3, band WT3).
    With a semantic encoder, a rejected pair below the MT3 band is reported as T4 only when two
    kinds of evidence agree (:class:`twinspect.code.structural.T4Rule`): its cosine reaches the
    calibrated threshold of ``-e semantic`` (``config.threshold`` for other semantic encoders) and
    the WL cosine of the two control-flow graphs reaches the calibrated structural floor. A
    representative pair stands for its buckets' member pairs (T2-identical members have the same
    abstracted tokens): all of them when the two buckets have ≤ ``config.max_bucket_pairs`` members
    together, else two stars. ``base``: the base lines of the base-code rule (None: those of the
    representatives, :func:`twinspect.code.basecode.base_lines`). ``stages``: the checkpoints of
    this run (:mod:`twinspect.code.stage_cache`): both candidate sources and the verified candidates
    are read back from it when present, and written to it when computed. ``verified_hook``: called
    with the base lines once the candidates are verified, before the pairs are built (where
    :func:`detect` saves the scan state and lets go of the token caches).

    Returns:
        ``(pairs, edges, counters)``: the clone pairs (exact ones included) sorted by (a, b), the
        embedding candidates (:class:`twinspect.code.candidates.Candidates`, cosine scores) for the
        clustering linkages (None with ``linkage="pairs"``: their arrays are freed before
        verification), and counters
        ``candidate_pairs``, ``candidates_embedding``, ``candidates_token_overlap``,
        ``capped`` (per source), ``verified``, ``accepted``, ``semantic_t4``,
        ``t4_structural_vetoed`` (semantic T4 candidates without structural agreement), ``t4_rule``
        (the thresholds used and their calibration; None without a semantic encoder), ``verifier``
        (threshold and how the model was fitted), ``stage_seconds`` (``tokens``, ``range_search``,
        ``token_overlap`` — in a second thread, overlapping the range search — and ``alignment``) and
        ``base_lines`` (the base lines used, a frozenset).
    """
    import numpy as np

    from twinspect._arrays import index_dtype, unique_sorted
    from twinspect.code.candidates import Candidates
    from twinspect.code.clone_types import MT3_MIN, CloneType, band_of
    from twinspect.code.normalize import token_views
    from twinspect.code.verify import FEATURES, PairFeatures, load_verifier, verify_pairs

    verifier = load_verifier(config.verifier_path)
    t4_rule = t4_semantic = structural = None
    if semantic:
        from twinspect.code.structural import StructuralSimilarity, load_t4_rule

        t4_rule = load_t4_rule()
        t4_semantic = t4_rule.semantic if config.encoder == "semantic" else config.threshold
        structural = StructuralSimilarity(frags, t4_rule.wl_iterations)
    cap = config.max_bucket_pairs
    reps = [b[0] for b in buckets]
    params: dict[str, Any] = {"seed": config.seed}
    if config.index == "hnsw":
        params = dict(M=config.M, ef_construction=config.ef_construction, ef_search=config.ef_search,
                      seed=config.seed, num_threads=config.threads)
    lo_thr = min(config.candidate_cosine, t4_semantic) if t4_semantic is not None else config.candidate_cosine
    rep_set = set(reps)
    t0 = time.perf_counter()
    plain = [token_views(f)[0] if i in rep_set else () for i, f in enumerate(frags)]  # shared tuples, no copies
    seconds = {"tokens": time.perf_counter() - t0}
    cached = stages.load("candidates") if stages is not None else None
    if cached is not None:  # a checkpoint of this run's fragments and settings (twinspect.code.stage_cache)
        emb, tok = Candidates.from_arrays(cached, "emb"), Candidates.from_arrays(cached, "tok")
    else:
        emb, tok = _candidate_sources(vecs, reps, frags, plain, config, lo_thr, params, quiet, executor, seconds)
        if stages is not None:
            stages.save("candidates", {**emb.to_arrays("emb"), **tok.to_arrays("tok")})
    # the union of the two sources, sorted by (u, v): pair keys u·n + v of fragment ids u < v
    n_frags = len(frags)
    keys = np.empty(len(emb) + len(tok), dtype=np.int64)  # filled in place: no per-source key temporaries
    for lo, src in ((0, emb), (len(emb), tok)):
        part = keys[lo:lo + len(src)]
        part[:] = src.a
        part *= n_frags
        part += src.b
    keys = unique_sorted(keys, overwrite=True)
    pa, pb = (keys // n_frags).astype(index_dtype(n_frags)), (keys % n_frags).astype(index_dtype(n_frags))
    del keys
    # what is reported of the two sources; their arrays (hundreds of MB on a 13-MLOC tree) are freed
    # before verification unless a clustering linkage reads the embedding candidates
    source_counters = {
        "candidates_embedding": len(emb),
        "candidates_token_overlap": len(tok),
        "capped": {"embedding": emb.capped, "token_overlap": tok.capped},
        "index_used": emb.index,
        "index_recall": emb.index_recall,
        "index_recall_queries": emb.index_recall_queries,
    }
    del tok
    edges_out = emb if config.linkage != "pairs" else None
    del emb
    trim()  # both sources' arrays and the union's keys, freed into the C heap, back to the system
    t0 = time.perf_counter()
    verified = stages.load("verified") if stages is not None else None
    if verified is not None:
        look, x, scores = verified["look"], verified["x"], verified["scores"]
        base_rejected = int(verified["base_rejected"])
        base = frozenset(verified["base"].tolist())
    else:
        # features over the representatives only (members of a bucket share their abstracted tokens)
        local = np.full(n_frags, -1, dtype=np.int64)
        local[np.asarray(reps, dtype=np.int64)] = np.arange(len(reps))
        feats = PairFeatures([frags[r] for r in reps], abstract=[clf.abstract_tokens(r) for r in reps],
                             plain=[plain[r] for r in reps])
        def wanted(x: np.ndarray, scores: np.ndarray) -> np.ndarray:
            # only accepted pairs and (with a semantic encoder) T4 candidates need a look in Python
            keep = scores >= verifier.threshold
            if t4_rule is not None:
                keep |= x[:, 0] < MT3_MIN  # the WT3 band
            return np.flatnonzero(keep)

        # In chunks of candidates, keeping only the rows that need a look: the features and scores
        # of every candidate at once were a large part of the memory peak on a 13-MLOC tree.
        looks, xs, ss = [], [], []
        with progress("verifying candidates", total=len(pa), quiet=quiet) as bar:
            for lo in range(0, len(pa), VERIFY_CHUNK):
                la, lb = local[pa[lo:lo + VERIFY_CHUNK]], local[pb[lo:lo + VERIFY_CHUNK]]
                cx, cs = verify_pairs(feats, verifier, la, lb, executor=executor, prefilter=t4_rule is None)
                sel = wanted(cx, cs)
                looks.append(sel + lo)
                xs.append(cx[sel])
                ss.append(cs[sel])
                del cx, cs, la, lb
                bar.advance(min(VERIFY_CHUNK, len(pa) - lo))
        look = np.concatenate(looks) if looks else np.zeros(0, dtype=np.int64)
        x = np.concatenate(xs) if xs else np.zeros((0, len(FEATURES)), dtype=np.float32)
        scores = np.concatenate(ss) if ss else np.zeros(0)
        # the representatives' feature tables (TF-IDF rows, trigram counts, alignment strings and their
        # cached UTF-8 copies: about 0.7 GB on a 13-MLOC tree) are done with; freed before the pairs are built
        del looks, xs, ss, feats
        if base is None:
            from twinspect.code.basecode import MIN_FRAGMENTS, base_lines

            base = frozenset() if config.base_code is None else base_lines(
                [frags[r] for r in reps], min_fragments=MIN_FRAGMENTS, fraction=config.base_code)
        # the rule reads and lowers accepted candidates only, all of them among the looked-at rows
        base_rejected = _base_code_veto(frags, reps, local[pa[look]], local[pb[look]], x, scores, verifier,
                                        config, base)
        sel = wanted(x, scores)
        look, x, scores = look[sel], x[sel], scores[sel]
        if stages is not None:
            stages.save("verified", {"look": look, "x": x, "scores": scores, "base_rejected": base_rejected,
                                     "base": np.array(sorted(base), dtype=str)})
    seconds["alignment"] = time.perf_counter() - t0
    if verified_hook is not None:
        verified_hook(base)

    # The near-miss pairs are gathered as keys a·N + b with the looked-at row that stated them, then
    # de-duplicated in one pass (a pair stated twice keeps its first statement, the exact pairs first),
    # the overlapping ones dropped, and only then made ClonePair objects, in key order: a dict of
    # ClonePairs keyed by int held about 0.3 GB more at 3.4 M pairs (13-MLOC tree).
    from array import array

    from twinspect.code.candidates import FragmentSpans

    exact = _exact_pairs(vecs, frags, buckets, clf, cap)
    near_keys, near_rows = array("q"), array("q")
    rows: list[tuple[str, CloneType, float]] = []  # (kind, type, score) of each accepted looked-at row
    accepted = semantic_t4 = structural_vetoed = 0
    group_pairs: list[dict[str, Any]] = []
    for j, i in enumerate(look.tolist()):
        u, v, lcs, score = int(pa[i]), int(pb[i]), float(x[j, 0]), float(scores[j])
        ct = band_of(lcs)
        if score >= verifier.threshold:
            accepted += 1
            kind = "T3"
        elif (t4_rule is not None and structural is not None and t4_semantic is not None and ct.band == "WT3"
              and vecs.cosine(u, v) >= t4_semantic):
            sim = structural(u, v)  # the second, independent kind of evidence
            if sim is None or sim < t4_rule.structural:
                structural_vetoed += 1
                continue
            semantic_t4 += 1
            kind = "T4"
        else:
            continue
        bu, bv = buckets[bucket_of[u]], buckets[bucket_of[v]]
        if len(bu) + len(bv) <= cap:
            members = [(i, j) for i in bu for j in bv]
        else:
            members = [(u, j) for j in bv] + [(i, v) for i in bu if i != u]
            group_pairs.append({"a": sorted(bu), "b": sorted(bv), "type": kind, "band": ct.band,
                                "t3_similarity": ct.t3_similarity, "score": score})
        row = len(rows)
        rows.append((kind, ct, score))
        near_keys.extend(i * n_frags + j if i < j else j * n_frags + i for i, j in members)
        near_rows.extend(row for _ in members)
    exact_keys = np.fromiter((p.a * n_frags + p.b for p in exact), dtype=np.int64, count=len(exact))
    all_keys = np.concatenate([exact_keys, np.frombuffer(near_keys, dtype=np.int64)])
    del near_keys
    keys, first = np.unique(all_keys, return_index=True)  # sorted keys, each with its first statement
    del all_keys
    fresh_at = first >= len(exact)  # stated first by a near-miss row
    fa, fb = keys[fresh_at] // n_frags, keys[fresh_at] % n_frags
    ok = ~FragmentSpans(frags).overlapping(fa, fb)
    pos = np.flatnonzero(fresh_at)[ok]
    src = np.frombuffer(near_rows, dtype=np.int64)[first[pos] - len(exact)]
    del near_rows, fa, fb, ok
    near_keys_kept = keys[pos]
    del keys, first, fresh_at
    ids = list(range(n_frags))  # one int object per fragment id, shared by its pairs
    fresh: list[ClonePair] = []  # near-miss pairs in key order; their cosine is set in one pass below
    for key, r in zip(near_keys_kept.tolist(), src.tolist()):
        kind, ct, score = rows[r]
        a, b = divmod(key, n_frags)
        fresh.append(ClonePair(ids[a], ids[b], 0.0, kind, ct.t3_similarity, ct.band, score))
    del src, rows
    _set_similarities(vecs, fresh)
    # the exact pairs (bucket order) and the near-miss pairs (key order), merged by key
    merged = np.argsort(np.concatenate([exact_keys, near_keys_kept]), kind="stable")
    del near_keys_kept
    pairs = [exact[k] if k < len(exact) else fresh[k - len(exact)] for k in merged.tolist()]
    del merged, fresh, exact
    trim()
    counters: dict[str, Any] = {
        "candidate_pairs": len(pa),
        **source_counters,
        "verified": len(pa),
        "accepted": accepted,
        "semantic_t4": semantic_t4,
        "t4_structural_vetoed": structural_vetoed,
        "t4_rule": None if t4_rule is None else {"semantic": t4_semantic, "structural": t4_rule.structural,
                                                 "wl_iterations": t4_rule.wl_iterations, **t4_rule.info},
        "base_code_rejected": base_rejected,
        "group_pairs": group_pairs,
        "verifier": {"threshold": round(verifier.threshold, 6), **verifier.info},
        "stage_seconds": {k: round(v, 4) for k, v in seconds.items()},
        "base_lines": base,
    }
    return pairs, edges_out, counters


def pair_classes(
    vecs: FragmentVectors | np.ndarray, pairs: Sequence[ClonePair], bucket_of: np.ndarray, threshold: float | None,
    quiet: bool = True,
) -> list[list[int]]:
    """Clone classes as cliques of reported pairs (complete linkage over the pair graph).

    Pairs are visited T1 and T2 first, then by similarity (descending, then ids); the groups of a pair's two fragments
    are merged only if every pair of T2 buckets across them (T2-identical fragments are one unit:
    a clone of one member is a clone of all, after identifier normalisation) has at least one
    member pair of cosine ≥ ``threshold`` and at least one reported member pair — so every
    class-implied bucket pair is as similar as a reported pair must be and is itself reported
    (up to T2 twins), and the class cannot chain.

    Args:
        vecs: the N fragment vectors (:class:`twinspect.code.vectors.FragmentVectors`, or a float32
            (N, d) array of L2-normalised rows); only read with a ``threshold``.
        pairs: the reported pairs (fragment ids).
        bucket_of: int (N,) T2 bucket index of each fragment.
        threshold: minimum cosine of a class-implied pair between different buckets; None: no
            cosine condition (with the verifier, a pair's evidence is its verification, so a class
            is a clique of reported pairs up to T2 twins).
        quiet: no progress bar (one step per pair visited).

    Returns:
        Classes of ≥ 2 fragment ids each, ids ascending, sorted by size (desc) then first id.
    """
    import numpy as np

    from twinspect.code.vectors import as_vectors

    fv = as_vectors(vecs)
    partners: dict[int, set[int]] = {}
    for p in pairs:
        partners.setdefault(p.a, set()).add(p.b)
        partners.setdefault(p.b, set()).add(p.a)
    group: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    failed: set[tuple[int, int, int, int]] = set()
    rank = {"T1": 0, "T2": 1}  # exact clones first: a T1/T2 partner is never crowded out by a T3
    # the visiting order (rank, -similarity, a, b) by one lexsort of four arrays: a sort key tuple per
    # pair held ~300 MB at once for the 3.4 M pairs of a 13-MLOC tree
    count = len(pairs)
    order = np.lexsort((np.fromiter((p.b for p in pairs), np.int64, count),
                        np.fromiter((p.a for p in pairs), np.int64, count),
                        -np.fromiter((p.similarity for p in pairs), np.float64, count),
                        np.fromiter((rank.get(p.type, 2) for p in pairs), np.int8, count)))
    with progress("clone classes", total=count, quiet=quiet) as bar:
        visit = itertools.chain.from_iterable(order[lo:lo + 65536].tolist() for lo in range(0, count, 65536))
        for step, p in enumerate(map(pairs.__getitem__, visit)):
            if step % 8192 == 8191:
                bar.advance(8192)
            for f in (p.a, p.b):
                if f not in group:
                    group[f] = f
                    members[f] = [f]
            ga, gb = group[p.a], group[p.b]
            if ga == gb:
                continue
            # groups only grow, so two groups that failed the test below fail it again until one of them
            # changes: remember the failure by (group, size) (the big tree's families of vendored copies
            # otherwise re-test the same two groups for each of their thousands of pairs)
            tried = (ga, len(members[ga]), gb, len(members[gb])) if ga < gb else (gb, len(members[gb]), ga, len(members[ga]))
            if tried in failed:
                continue
            ma, mb = np.asarray(members[ga]), np.asarray(members[gb])
            ua, ia = np.unique(bucket_of[ma], return_inverse=True)
            ub, ib = np.unique(bucket_of[mb], return_inverse=True)
            same = ua[:, None] == ub[None, :]  # one bucket on both sides: T2-identical
            if threshold is not None:
                sims = fv.cross(ma, mb)
                best = np.full((len(ua), len(ub)), -2.0)
                np.maximum.at(best, (ia[:, None], ib[None, :]), sims)
                best[same] = 1.0
                if not np.all(best >= threshold - 1e-6):
                    failed.add(tried)
                    continue
            # and each such bucket pair holds a *reported* pair (a margin-suppressed near-miss does not
            # join two groups): every pair a class implies is then reported or a T2 twin of one. Only
            # the members' reported partners are looked at, so the cost follows the pairs, not |a|·|b|.
            linked = same.copy()
            pos_b = {y: j for y, j in zip(mb.tolist(), ib.tolist())}
            for x, i in zip(ma.tolist(), ia.tolist()):
                for y in partners.get(x, ()):
                    j = pos_b.get(y)
                    if j is not None:
                        linked[i, j] = True
            if not linked.all():
                failed.add(tried)
                continue
            if len(ma) < len(mb):
                ga, gb = gb, ga
            for f in members[gb]:
                group[f] = ga
            members[ga].extend(members.pop(gb))
        bar.advance(count % 8192)
    classes = [sorted(m) for m in members.values() if len(m) > 1]
    classes.sort(key=lambda c: (-len(c), c[0]))
    return classes


def pair_stats(pairs: Sequence[ClonePair], classes: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The report's pair and class counters.

    Args:
        pairs: the reported clone pairs.
        classes: the clone classes (fragment ids).

    Returns:
        ``pairs``, ``pairs_by_type`` (T1–T4), ``pairs_by_band`` (BigCloneBench bands), ``classes``,
        ``largest_class``, ``fragments_in_classes`` and ``class_sizes``
        (:func:`class_size_distribution`).
    """
    return {
        "pairs": len(pairs),
        "pairs_by_type": {ty: sum(1 for p in pairs if p.type == ty) for ty in TYPES},
        "pairs_by_band": {bd: sum(1 for p in pairs if p.band == bd) for bd in BANDS},
        "classes": len(classes),
        "largest_class": max((len(c) for c in classes), default=0),
        "fragments_in_classes": sum(len(c) for c in classes),
        "class_sizes": class_size_distribution(classes),
    }


def class_size_distribution(classes: Sequence[Sequence[int]]) -> dict[str, int]:
    """Number of classes per size: ``{"2": n2, "3": n3, ..., "6-10": n, "11-20": n, ">20": n}``."""
    bins = {"2": 0, "3": 0, "4": 0, "5": 0, "6-10": 0, "11-20": 0, ">20": 0}
    for c in classes:
        n = len(c)
        key = str(n) if n <= 5 else "6-10" if n <= 10 else "11-20" if n <= 20 else ">20"
        bins[key] += 1
    return bins


def _classes(
    vecs: FragmentVectors,
    buckets: list[list[int]],
    bucket_of: np.ndarray,
    edges: dict[tuple[int, int], float],
    config: DetectConfig,
) -> list[list[int]]:
    """Agglomerate buckets along k-NN edges under the configured linkage (see module doc)."""
    import numpy as np

    nb = len(buckets)
    uf = _UnionFind(nb)
    thr = config.effective_class_threshold
    if config.linkage != "none":
        reps = np.asarray([b[0] for b in buckets], dtype=np.int64)
        rep_vecs = vecs.dense(reps).astype(np.float64) if nb else np.zeros((0, 1))
        sums = rep_vecs.copy()  # per group root: sum of representative vectors (average linkage)
        count = np.ones(nb, dtype=np.int64)
        groups: dict[int, list[int]] = {g: [g] for g in range(nb)}  # complete linkage: member buckets
        for (u, v), sim in sorted(edges.items(), key=lambda kv: (-kv[1], kv[0])):
            if sim < thr:
                break
            gu, gv = uf.find(int(bucket_of[u])), uf.find(int(bucket_of[v]))
            if gu == gv:
                continue
            if config.linkage == "average":
                link = float(sums[gu] @ sums[gv]) / float(count[gu] * count[gv])
            elif config.linkage == "complete":
                link = float((rep_vecs[groups[gu]] @ rep_vecs[groups[gv]].T).min())
            else:
                link = sim
            if link < thr:
                continue
            if count[gu] < count[gv]:
                gu, gv = gv, gu
            uf.parent[gv] = gu
            sums[gu] += sums[gv]
            count[gu] += count[gv]
            groups[gu].extend(groups.pop(gv))
    merged: dict[int, list[int]] = {}
    for b, members in enumerate(buckets):
        merged.setdefault(uf.find(b), []).extend(members)
    classes = [sorted(m) for m in merged.values() if len(m) > 1]
    classes.sort(key=lambda c: (-len(c), c[0]))
    return classes


def detect(
    fragments: Sequence[Fragment],
    config: DetectConfig | None = None,
    *,
    vectors: np.ndarray | None = None,
    vectors_encoder: str | None = None,
    quiet: bool = True,
    executor: ShardExecutor | None = None,
    encoder: Any = None,
    base: frozenset[str] | None = None,
    keep_state: Callable[..., None] | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
) -> CloneReport:
    """Find clone pairs and clone classes among fragments (SSCD-style k-NN over embeddings).

    Args:
        fragments: N fragments (any order; the report sorts them by path and lines).
        config: detection parameters (defaults: :class:`DetectConfig`).
        vectors: optional precomputed embeddings, float (N, d), rows in the order of ``fragments``
            and L2-normalised (they are re-normalised); when None the configured encoder embeds
            the fragments (the lexical encoder is fitted on them first).
        vectors_encoder: the encoder name that produced ``vectors`` (e.g. ``"lexical"``, so the
            lexical rules for T4 and ``lexical_min_t3`` apply); None means ``"precomputed"``,
            treated as semantic evidence.
        quiet: suppress progress output on stderr.
        executor: where the sharded stages run — the token-overlap index's row chunks and the
            verifier's alignments (:mod:`twinspect.code.executors`, e.g. a Ray cluster); None = this
            process and a second thread, as always. The report is the same either way.
        encoder: an already fitted encoder of ``config.encoder`` to embed with (not fitted again);
            None = a new one, fitted on ``fragments`` (the lexical encoder's IDF).
        base: the base lines of the base-code rule (None: those of these fragments' representatives).
            ``encoder`` and ``base`` are how a changed-files check
            (:mod:`twinspect.code.incremental`) detects among a few fragments with the statistics
            of a saved full scan.
        checkpoint_dir: a cache directory for the checkpoints of the candidate search and the
            verification (:mod:`twinspect.code.stage_cache`; ``decision="verifier"`` embedding the
            fragments itself, without ``encoder`` or ``base``): a stage saved there for the same
            fragments and settings is read back instead of computed. Same report either way;
            ``stats["stage_cache"]`` lists the stages ``loaded`` and ``saved``.
        keep_state: called once in a ``decision="verifier"`` detection that embedded the fragments
            itself, when the candidates are verified (before the pairs are built; on
            :data:`RELEASE_TOKENS_MIN` fragments or more the token caches are emptied right after it), with keywords ``fragments`` (sorted as in the report), ``clf``
            (the :class:`~twinspect.code.clone_types.TypeClassifier`), ``buckets`` (lists of ids,
            the first of each the representative), ``vectors`` (:class:`~twinspect.code.vectors.FragmentVectors`),
            ``encoder`` (fitted) and ``base`` (the base lines used); how
            :func:`twinspect.code.incremental.save_state` gets what it saves.

    Returns:
        A :class:`CloneReport` with ``root=""`` and stats ``fragments``, ``buckets`` (T2-identical
        groups of ≥ 2), ``bucketed_fragments``, ``representatives``, ``knn_edges`` (collected at
        ``min(threshold, class_threshold)``), ``candidate_pairs`` (bucket pairs plus expanded k-NN
        pairs at that similarity), ``margin_suppressed`` (k-NN pairs ≥ ``threshold`` dropped by
        ``pair_margin``), ``pairs``,
        ``pairs_by_type``, ``pairs_by_band``, ``classes``, ``largest_class``,
        ``fragments_in_classes``, ``encoder``, ``index`` and ``timings`` (seconds per stage:
        ``normalize``, ``encode``, ``search``, ``pairs``, ``classes``, ``detect``; with the verifier
        also ``verify`` and its parts ``tokens``, ``range_search``, ``token_overlap`` (run beside
        the range search) and ``alignment``).

    Raises:
        InputError: invalid configuration.
        ValueError: ``vectors`` does not have N rows.
        IndexFormatError / ModelError: propagated from the encoder (e.g. a bad ``model_path``).
    """
    import numpy as np

    from twinspect.code.vectors import FragmentVectors, as_vectors

    config = config or DetectConfig()
    config.validate()
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    order = sorted(range(len(fragments)), key=lambda i: (fragments[i].path, fragments[i].start_line,
                                                         fragments[i].end_line, fragments[i].name))
    frags = [fragments[i] for i in order]
    n = len(frags)
    if config.decision == "tiling" or (config.granularity == "file" and config.decision == "verifier"):
        from twinspect.code.tiling import detect_tiling  # whole programs: JPlag's Greedy String Tiling

        return detect_tiling(frags, config, quiet=quiet)
    if vectors is not None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != n:
            raise ValueError(f"vectors must have shape ({n}, d), got {vectors.shape}")

    t = time.perf_counter()
    clf = TypeClassifier(frags)
    with progress("exact-duplicate buckets", total=None, quiet=quiet or n < 10_000):
        buckets = _buckets(frags, clf, config.exact_buckets)
    bucket_of = np.empty(n, dtype=np.int64)
    for bi, members in enumerate(buckets):
        bucket_of[members] = bi
    reps = [b[0] for b in buckets]
    timings["normalize"] = time.perf_counter() - t

    t = time.perf_counter()
    encoder_name = config.encoder
    fitted_here = vectors is None and encoder is None  # what a stage checkpoint's key covers
    if n == 0:
        vecs = FragmentVectors(np.zeros((0, 1), dtype=np.float32))
    elif vectors is not None:
        vecs = FragmentVectors(vectors[np.asarray(order, dtype=np.int64)])  # rows re-normalised
        encoder_name = vectors_encoder or "precomputed"
    else:  # a given encoder (fitted elsewhere: a saved full scan's) only embeds
        encoded, encoder_name, encoder = _encode(frags, config, quiet, encoder)
        vecs = as_vectors(encoded)
    timings["encode"] = time.perf_counter() - t

    pair_counts: dict[str, Any]
    group_pairs: list[dict[str, Any]] = []
    stages: StageCache | None = None
    code_hashes: np.ndarray | None = None  # set by a large scan's verified_hook (CloneReport.code_hashes)
    if config.decision == "verifier":
        t = time.perf_counter()
        semantic = encoder_name not in LEXICAL_ENCODERS
        if checkpoint_dir is not None and fitted_here and base is None:
            from twinspect.code.stage_cache import StageCache, stage_key
            from twinspect.code.verify import verifier_file

            try:
                model = verifier_file(config.verifier_path).read_bytes()
            except OSError:  # load_verifier says what is wrong with it
                model = b""
            stages = StageCache(checkpoint_dir, stage_key(frags, config, [model]))

        def verified_hook(base_lines: frozenset[str]) -> None:
            """The scan state is saved here, not at the end: it is the last reader of most fragments'
            tokens, which a large scan then lets go of before millions of pairs are built."""
            nonlocal code_hashes
            if keep_state is not None and vectors is None and n:
                keep_state(fragments=frags, clf=clf, buckets=buckets, vectors=vecs, encoder=encoder, base=base_lines)
            if n >= RELEASE_TOKENS_MIN:
                for members in buckets:  # the T1 keys the exact pairs and identical groups read
                    if len(members) > 1:
                        for m in members:
                            clf.t1_key(m)
                # and every fragment's, for the report (its code hashes), while its tokens are at hand: on a
                # 13-MLOC tree the report lexed all 305k fragments again, about half a minute
                code_hashes = _code_hashes(frags)
                clf.forget_tokens()
                _release_token_caches()

        pairs, emb, pair_counts = _verified_pairs(vecs, frags, buckets, bucket_of, clf, config, semantic, quiet,
                                                  executor, base, stages, verified_hook)
        base = pair_counts.pop("base_lines")
        n_edges = pair_counts["candidates_embedding"]
        edges = emb.pairs if emb is not None else {}  # a dict only where a clustering needs it
        timings["verify"] = time.perf_counter() - t
        group_pairs = pair_counts.pop("group_pairs")
        timings.update(pair_counts.pop("stage_seconds"))
        index_used = pair_counts.pop("index_used")
        index_recall = {k: pair_counts.pop(k) for k in ("index_recall", "index_recall_queries")}
    else:
        t = time.perf_counter()
        from twinspect.code.candidates import resolve_index

        edges = _knn_edges(vecs, reps, frags, config, quiet)
        n_edges = len(edges)
        index_used = resolve_index(config.index, len(reps))
        index_recall = {}
        timings["search"] = time.perf_counter() - t
        t = time.perf_counter()
        pairs, pair_counts = _expand_pairs(vecs, frags, buckets, bucket_of, edges, clf, config, quiet)
        timings["pairs"] = time.perf_counter() - t

    weak_dropped = 0
    if encoder_name in LEXICAL_ENCODERS:  # no semantic evidence: WT3 pairs are weak T3, not T4
        for p in pairs:
            if p.type == "T4":
                p.type = "T3"
        if config.lexical_min_t3 is not None:
            kept = [p for p in pairs if p.t3_similarity is None or p.t3_similarity >= config.lexical_min_t3]
            weak_dropped = len(pairs) - len(kept)
            pairs = kept

    stock_dropped = 0
    if (vectors is None and config.encoder == "neural" and not (config.encoder_params or {}).get("model_path")
            and config.stock_t4 == "drop"):  # the stock encoder's T4 pairs are not semantic evidence
        kept = [p for p in pairs if p.type != "T4"]
        stock_dropped = len(pairs) - len(kept)
        pairs = kept

    t = time.perf_counter()
    if config.linkage == "pairs":
        class_thr = None if config.decision == "verifier" else max(config.threshold, config.effective_class_threshold)
        classes = pair_classes(vecs, pairs, bucket_of, class_thr, quiet=quiet)
    else:
        classes = _classes(vecs, buckets, bucket_of, edges, config)
    timings["classes"] = time.perf_counter() - t
    timings["detect"] = time.perf_counter() - t_start

    stats: dict[str, Any] = {
        "fragments": n,
        "buckets": sum(1 for b in buckets if len(b) > 1),
        "bucketed_fragments": sum(len(b) for b in buckets if len(b) > 1),
        "representatives": len(reps),
        "knn_edges": n_edges,
        **pair_counts,
        "decision": config.decision,
        "weak_lexical_dropped": weak_dropped,
        "stock_t4_dropped": stock_dropped,
        **pair_stats(pairs, classes),
        "encoder": encoder_name,
        "index": index_used,
        # with HNSW: the index asked for and the range search's measured recall against exact search
        **({"index_requested": config.index, **index_recall} if index_used == "hnsw" else {}),
        "timings": {k: round(v, 4) for k, v in timings.items()},
    }
    groups = identical_groups(buckets, clf, config.max_bucket_pairs)
    stats["identical_groups"] = len(groups)
    stats["group_pairs"] = len(group_pairs)
    if stages is not None:
        stats["stage_cache"] = stages.counters()
    return CloneReport(root="", fragments=frags, pairs=pairs, classes=classes, stats=stats, config=config.to_dict(),
                       identical_groups=groups, group_pairs=group_pairs,
                       code_hashes=code_hashes)


def identical_groups(buckets: Sequence[Sequence[int]], clf: TypeClassifier, cap: int) -> list[dict]:
    """The exact-duplicate buckets of more than ``cap`` members (reported as stars, see the module doc).

    Args:
        buckets: T2-identical groups of fragment ids.
        clf: the type classifier of the same fragments (its T1 keys decide T1 vs T2).
        cap: :attr:`DetectConfig.max_bucket_pairs`.

    Returns:
        ``[{"type": "T1" | "T2", "members": sorted ids}]``, largest first then smallest id; "T1" when
        every member has the same T1 key.
    """
    out = []
    for members in buckets:
        if len(members) > cap:
            kind = "T1" if len({clf.t1_key(m) for m in members}) == 1 else "T2"
            out.append({"type": kind, "members": sorted(int(m) for m in members)})
    out.sort(key=lambda g: (-len(g["members"]), g["members"][0]))
    return out


def scan(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    config: DetectConfig | None = None,
    *,
    exclude: Sequence[str] = (),
    max_file_bytes: int = 1 << 20,
    respect_gitignore: bool = True,
    language: str | None = None,
    quiet: bool = True,
    executor: ShardExecutor | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> CloneReport:
    """Mine fragments from files/directories and detect clones among them.

    Args:
        paths: one file or directory (a ``str`` or path-like) or a list of them (fragment paths are
            relative to the scanned root).
        config: detection parameters; ``config.min_lines`` applies to mining.
        exclude: gitignore-style patterns of files to skip.
        max_file_bytes: larger files are skipped (counted in ``stats["skipped"]``).
        respect_gitignore: honour ``.gitignore`` files under the scanned directories.
        language: force one language (``"python"``, ``"java"``, ``"c"``, ``"cpp"``) instead of
            detecting it from file extensions.
        quiet: suppress progress output.
        executor: where parsing and the sharded detection stages run (see :func:`detect`); None =
            local worker processes for parsing, this process for the rest. Same report either way;
            the stats record ``executor`` and ``workers``.
        cache_dir: a parse checkpoint directory (:mod:`twinspect.code.checkpoint`): unchanged files
            are read back instead of parsed, so an interrupted run resumes and a re-run after an edit
            parses only the changed files; ``stats["parse_cache"]`` counts ``hits`` and ``parsed``.
            The candidate search and the verification are checkpointed there too
            (:mod:`twinspect.code.stage_cache`, ``stats["stage_cache"]``). Same report either way. With the default detection (verifier, function granularity,
            lexical encoder) the scan's state is also saved there for later changed-files checks
            (:mod:`twinspect.code.incremental`).

    Returns:
        The :class:`CloneReport`, whose stats add the scan counters (files, skipped by reason, parse
        errors, ...) of :class:`twinspect.code.files.ScanStats` and ``timings["mine"]``. At function
        granularity with ``config.subfunction`` (default) it also holds the copied regions inside
        functions that no function pair holds (:func:`twinspect.code.subfunction.add_subfunction_pairs`:
        fragments of kind ``"subfunction"``, their pairs, ``stats["subfunction_pairs"]``...). At block
        granularity it also states every copied token run of the block pass that no reported pair
        holds (:func:`twinspect.code.token_runs.add_run_pairs`, ``stats["token_run_pairs"]``...).

    Raises:
        InputError: a path does not exist or cannot be read, or an invalid option.
    """
    from twinspect.code.fragments import mine

    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    path_list: list[str | Path] = [p if isinstance(p, (str, Path)) else os.fspath(p) for p in items]
    config = config or DetectConfig()
    config.validate()
    cache = None
    if cache_dir is not None:
        from twinspect.code.checkpoint import ParseCache

        cache = ParseCache(cache_dir)
    t = time.perf_counter()
    token_copies: list | None = [] if config.granularity == "block" else None  # for add_run_pairs
    try:
        fragments, scan_stats = mine(
            path_list,
            exclude=tuple(exclude),
            max_file_bytes=max_file_bytes,
            respect_gitignore=respect_gitignore,
            language=language,
            min_lines=config.min_lines,
            granularity=config.granularity,
            quiet=quiet,
            executor=executor,
            cache=cache,
            token_copies=token_copies,
        )
    finally:
        if cache is not None:
            cache.close()
    t_mine = time.perf_counter() - t
    check_parsed(scan_stats, scan_root(path_list))
    keep_state: Callable[..., None] | None = None
    saved_in: list[float] = []  # seconds spent saving the state
    if cache is not None and cache_dir is not None:
        from twinspect.code import incremental

        if incremental.state_supported(config) is None:
            keys, state_dir = cache.file_keys, cache_dir

            def save(**parts: Any) -> None:  # the state a later --changed check starts from
                t0 = time.perf_counter()
                with progress("saving the scan state", total=None, quiet=quiet or len(fragments) < 10_000):
                    incremental.save_state(state_dir, config=config, mining=incremental.mining_options(config),
                                           file_keys=keys, **parts)
                saved_in.append(time.perf_counter() - t0)

            keep_state = save
    report = detect(fragments, config, quiet=quiet, executor=executor, keep_state=keep_state, checkpoint_dir=cache_dir)
    if len(fragments) >= RELEASE_TOKENS_MIN:  # detection is done with the tokens of most fragments
        _release_token_caches()
    if config.subfunction and config.granularity == "function":  # copied regions inside functions
        from twinspect.code.subfunction import add_subfunction_pairs

        report = add_subfunction_pairs(report, min_lines=config.min_lines, executor=executor)
    elif token_copies is not None:  # block granularity: the copied token runs detection did not pair
        from twinspect.code.token_runs import add_run_pairs

        report = add_run_pairs(report, token_copies, min_lines=config.min_lines)
    report.root = scan_root(path_list)
    scan_dict = scan_stats.to_dict() if hasattr(scan_stats, "to_dict") else dict(scan_stats)  # type: ignore[call-overload]
    stats = {**scan_dict, **report.stats}
    if cache is not None:
        stats["parse_cache"] = dict(cache.counters)
    stats["executor"] = executor.name if executor is not None else "local"
    if executor is None:
        from twinspect.code.executors import default_workers

        stats["workers"] = default_workers()
    else:
        stats["workers"] = executor.workers
    timings = {"mine": round(t_mine, 4), **report.stats["timings"]}
    if saved_in:
        timings["save_state"] = round(saved_in[0], 4)
    timings["total"] = round(t_mine + report.stats["timings"]["detect"] + report.stats["timings"].get("subfunction", 0.0)
                             + report.stats["timings"].get("token_run_pairs", 0.0) + sum(saved_in), 4)
    stats["timings"] = timings
    report.stats = stats
    return report


def check_parsed(stats: Any, root: str) -> None:
    """Refuse a scan in which no file was parsed: no source files at all, or none that could be parsed.

    Args:
        stats: the :class:`twinspect.code.files.ScanStats` of the scan.
        root: the scanned directory, named in the message.

    Raises:
        InputError: nothing parsed, with source files in languages twinspect does not parse,
            source files all skipped (too large, binary...), or no source file at all (an empty
            tree, or every file excluded, gitignored or not source code): one line saying which.
    """
    if stats.files_parsed:
        return
    unsupported = stats.unsupported_files
    if unsupported:
        langs = ", ".join(f"{k} {v}" for k, v in sorted(unsupported.items(), key=lambda kv: (-kv[1], kv[0])))
        raise InputError(f"nothing parsed: {sum(unsupported.values())} source files, all in languages twinspect "
                         f"does not parse ({langs})", root, hint="see twinspect clones --help, --language")
    skipped = {k: v for k, v in stats.skipped.items() if k not in ("excluded", "gitignored", "unsupported") and v}
    if stats.files_seen and skipped:
        why = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in skipped.items())
        raise InputError(f"nothing parsed: {stats.files_seen} source files, all skipped ({why})", root)
    if not stats.files_seen:
        names = {"excluded": "excluded", "gitignored": "gitignored", "unsupported": "not source code"}
        seen = [f"{names[k]} {stats.skipped[k]}" for k in names if stats.skipped.get(k)]
        raise InputError("nothing to scan: no source files found" + (f" ({', '.join(seen)})" if seen else ""),
                         root, hint="give a directory or files with source code")


def scan_root(paths: Sequence[str | Path]) -> str:
    """The scan base that fragment paths are relative to (as :func:`twinspect.code.files.discover`
    computes it): the common directory of the PATH arguments, a file standing for its parent."""
    import os

    dirs = []
    for p in paths:
        ap = os.path.abspath(os.fspath(p))
        dirs.append(ap if os.path.isdir(ap) else os.path.dirname(ap))
    return os.path.commonpath(dirs) if dirs else ""
