"""Clone types of fragment pairs (Roy & Cordy's taxonomy, BigCloneBench's Type-3 bands).

Types, from the strongest to the weakest, following Roy, Cordy & Koschke (2009) and the
BigCloneBench bands of Svajlenko et al. (2014):

- **T1** – identical after removing comments and normalising whitespace/layout
  (:func:`twinspect.code.normalize.t1_key` equal).
- **T2** – identical after additionally abstracting identifiers, literals and types
  (:func:`twinspect.code.normalize.t2_key` equal).
- **T3** – syntactically similar with statements added, removed or modified. The syntactic
  similarity is the token-level similarity of the abstracted token sequences
  (:func:`twinspect.code.normalize.token_similarity` of
  :func:`twinspect.code.normalize.abstract_tokens`), banded as in BigCloneBench:
  ``VST3`` (very strongly type-3) ≥ 0.9, ``ST3`` (strongly) in [0.7, 0.9), ``MT3`` (moderately)
  in [0.5, 0.7).
- **T4** – below 0.5 syntactic similarity (BigCloneBench's ``WT3/T4`` band): the pair was found by
  the embedding only (semantic / weakly type-3 clone).

The band is reported separately from the type: a T3 pair has band VST3, ST3 or MT3, a T4 pair has
band ``WT3``, T1/T2 pairs have no band.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twinspect.code.fragments import Fragment

#: Lower bounds of the Type-3 bands (Svajlenko et al., BigCloneBench), on token similarity in [0, 1].
VST3_MIN = 0.9
ST3_MIN = 0.7
MT3_MIN = 0.5

#: All clone types, strongest first.
TYPES = ("T1", "T2", "T3", "T4")
#: All bands, strongest first ("WT3" is the band of T4 pairs).
BANDS = ("VST3", "ST3", "MT3", "WT3")

#: Human-readable descriptions (used in SARIF rules and the HTML report).
TYPE_DESCRIPTIONS = {
    "T1": "Type-1 clone: identical code apart from whitespace, layout and comments.",
    "T2": "Type-2 clone: identical structure apart from identifiers, literals and types.",
    "T3": "Type-3 clone: similar code with statements added, removed or modified "
    f"(abstracted-token similarity >= {MT3_MIN}).",
    "T4": "Type-4 clone: similar by a semantic (neural) embedding only "
    f"(abstracted-token similarity < {MT3_MIN}; BigCloneBench's WT3/T4 band).",
}
#: Encoders whose similarity is lexical: below the MT3 band their pairs carry no semantic evidence
#: and are reported as weak Type-3 (type T3, band WT3), never as T4.
LEXICAL_ENCODERS = ("lexical",)


def without_semantic_evidence(ct: CloneType) -> CloneType:
    """Re-label a T4 (band WT3) type as weak Type-3 (``CloneType("T3", "WT3", s)``).

    Used when the similarity that found the pair is lexical: a pair that clears the lexical
    threshold but not the MT3 band has no semantic evidence of being a Type-4 clone.

    Args:
        ct: a clone type from :func:`band_of` / :meth:`TypeClassifier.classify`.

    Returns:
        ``ct`` unchanged unless it is T4, else the same band and similarity typed T3.
    """
    if ct.type != "T4":
        return ct
    return CloneType("T3", ct.band, ct.t3_similarity)


@dataclass(frozen=True, slots=True)
class CloneType:
    """The type of one clone pair.

    Attributes:
        type: ``"T1"``, ``"T2"``, ``"T3"`` or ``"T4"``.
        band: ``"VST3"``, ``"ST3"``, ``"MT3"`` or ``"WT3"`` for T3/T4 pairs, None for T1/T2.
        t3_similarity: token similarity of the abstracted token sequences in [0, 1] for T3/T4
            pairs, None for T1/T2 (not computed: they are identical after normalisation).
    """

    type: str
    band: str | None = None
    t3_similarity: float | None = None


def band_of(similarity: float) -> CloneType:
    """Map a token similarity of a non-identical pair to its type and BigCloneBench band.

    Args:
        similarity: abstracted-token similarity in [0, 1].

    Returns:
        ``CloneType("T3", "VST3"|"ST3"|"MT3", similarity)`` for similarity ≥ 0.5, else
        ``CloneType("T4", "WT3", similarity)``.
    """
    s = float(similarity)
    if s >= VST3_MIN:
        return CloneType("T3", "VST3", s)
    if s >= ST3_MIN:
        return CloneType("T3", "ST3", s)
    if s >= MT3_MIN:
        return CloneType("T3", "MT3", s)
    return CloneType("T4", "WT3", s)


class TypeClassifier:
    """Classifies fragment pairs, caching each fragment's normalisation keys and tokens.

    The keys are computed lazily, once per fragment, so classifying the k nearest neighbours of
    every fragment costs one normalisation per fragment plus one token similarity per T3/T4 pair.

    Args:
        fragments: the fragments that pair indices refer to.
    """

    def __init__(self, fragments: Sequence[Fragment]):
        self.fragments = fragments
        self._t1: dict[int, str] = {}
        self._t2: dict[int, str] = {}
        self._tok: dict[int, Sequence[str]] = {}

    def t1_key(self, i: int) -> str:
        """The T1 key (comment/layout-normalised text) of fragment ``i``."""
        if i not in self._t1:
            from twinspect.code.normalize import t1_key

            self._t1[i] = t1_key(self.fragments[i])
        return self._t1[i]

    def t2_key(self, i: int) -> str:
        """The T2 key (identifier/literal-abstracted text) of fragment ``i``."""
        if i not in self._t2:
            from twinspect.code.normalize import t2_key

            self._t2[i] = t2_key(self.fragments[i])
        return self._t2[i]

    def set_t2_key(self, i: int, key: str) -> None:
        """Seed the cache with an already computed T2 key (avoids recomputing it)."""
        self._t2[i] = key

    def abstract_tokens(self, i: int) -> Sequence[str]:
        """The abstracted token sequence of fragment ``i`` (a shared tuple: do not modify)."""
        if i not in self._tok:
            from twinspect.code.normalize import token_views

            self._tok[i] = token_views(self.fragments[i])[1]
        return self._tok[i]

    def forget_tokens(self) -> None:
        """Drop the cached abstracted token sequences (the keys stay); later look-ups compute them again.

        For a large scan that is done with the tokens of most fragments (they are a few hundred MB on
        a 10-MLOC tree, held here as long as this classifier lives).
        """
        self._tok.clear()

    def classify(self, a: int, b: int) -> CloneType:
        """Type of the pair of fragments ``a`` and ``b`` (indices into ``fragments``).

        Returns:
            T1 if the T1 keys are equal, T2 if the T2 keys are equal, otherwise the band of the
            abstracted-token similarity (see :func:`band_of`).
        """
        if self.t2_key(a) == self.t2_key(b):
            if self.t1_key(a) == self.t1_key(b):
                return CloneType("T1")
            return CloneType("T2")
        from twinspect.code.normalize import token_similarity

        return band_of(token_similarity(self.abstract_tokens(a), self.abstract_tokens(b)))


def classify_pair(a: Fragment, b: Fragment) -> CloneType:
    """Clone type of two fragments (see the module docstring for the rules).

    Args:
        a: first fragment.
        b: second fragment.

    Returns:
        The :class:`CloneType` of the pair.
    """
    return TypeClassifier([a, b]).classify(0, 1)
