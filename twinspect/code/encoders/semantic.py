"""The clone-trained semantic encoder (``-e semantic``) shipped with twinspect.

A fragment becomes two sparse TF-IDF bags over a *fixed* vocabulary learnt at training time:

* **structure** — 1…``n``-grams of the Type-2 token stream (:func:`twinspect.code.normalize.abstract_tokens`:
  identifiers → ``ID``, keywords and operators kept; literals → ``STR``/``CHR``/``NUM`` or 0, 1, 2
  verbatim, :func:`literal_class`), sublinear tf × idf, L2-normalised;
* **names** — the lower-cased identifiers and literal texts of the Type-1 stream, sublinear tf × idf,
  L2-normalised and scaled by ``name_weight``.

Their concatenation ``x`` (1 × V) is mapped by a learnt linear projection ``W`` (V × d) to the
embedding ``x W`` and L2-normalised. ``W`` is fitted by ``benchmarks/train_semantic.py`` with the
supervised contrastive loss (SupCon, Khosla et al., NeurIPS 2020; temperature τ) on programs that
solve the same problem (POJ-104 train split, problems 1–64) and functions of one BigCloneBench
functionality (tune half), so that programs doing the same thing in different ways land close
together — the metric-learning view of semantic (Type-4) clone retrieval that MISIM and ContraBERT
take with far larger encoders. The projection is stored int8 with one float32 scale per output
column (symmetric per-channel quantisation, the scheme ONNX Runtime's dynamic quantisation uses) and
applied as a sparse × dense product with scipy: the input is a sparse bag, so a dense ONNX graph
would only add a densification of V floats per fragment.

The model file (``twinspect/code/data/semantic_encoder.npz``) holds the vocabularies, idf weights,
the quantised projection and a JSON ``info`` record (data, split, seed, loss, steps, MAP@R on the
validation split used to stop training). Nothing is fitted on the scanned corpus: vectors of two runs
are comparable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from twinspect.code.encoders.base import Encoder, l2_normalize
from twinspect.code.fragments import Fragment
from twinspect.errors import ModelError

#: The shipped model file.
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "data" / "semantic_encoder.npz"
#: Version of the feature definitions (:func:`structure_terms`, :func:`name_terms`); a model file of
#: another version is refused.
FEATURE_VERSION = 1
#: Separator joining the tokens of one n-gram in the vocabulary.
SEP = " "


#: Integer literals kept verbatim in the structure stream (loop bounds, flags, base cases).
SMALL_INTS = frozenset({"0", "1", "2"})


def literal_class(text: str) -> str:
    """The structure token of a literal: ``STR`` (string), ``CHR`` (character), the text itself for
    0, 1 and 2, else ``NUM``."""
    if text in SMALL_INTS:
        return text
    if text[:1] == "'":
        return "CHR"
    if text[:1].isdigit() or text[:1] in ".-":
        return "NUM"
    return "STR"


def structure_stream(t1: Sequence[str], t2: Sequence[str]) -> list[str]:
    """The Type-2 stream with each ``LIT`` replaced by its :func:`literal_class`."""
    return [literal_class(a) if b == "LIT" else b for a, b in zip(t1, t2)]


def structure_terms(t2: Sequence[str], max_n: int) -> list[str]:
    """Every 1…``max_n``-gram of a token stream (:func:`structure_stream`), tokens joined by :data:`SEP`.

    Args:
        t2: the fragment's structure tokens (strings).
        max_n: largest n-gram order, ≥ 1.

    Returns:
        The n-grams, in stream order, unigrams first (a list of str, with repeats).
    """
    out = list(t2)
    for n in range(2, max_n + 1):
        out.extend(SEP.join(t2[i : i + n]) for i in range(len(t2) - n + 1))
    return out


def name_terms(t1: Sequence[str], t2: Sequence[str]) -> list[str]:
    """Lower-cased identifier and literal texts of a fragment (the Type-1 tokens the Type-2 stream
    abstracts to ``ID`` or ``LIT``); literals are prefixed with ``#`` so they never meet a name."""
    out = []
    for a, b in zip(t1, t2):
        if b == "ID":
            out.append(a.lower())
        elif b == "LIT":
            out.append("#" + a)
    return out


def fragment_terms(fragments: Sequence[Fragment], max_n: int) -> tuple[list[list[str]], list[list[str]]]:
    """(structure terms, name terms) of each fragment (see :func:`structure_terms`, :func:`name_terms`)."""
    from twinspect.code import normalize

    struct, names = [], []
    for f in fragments:
        t1, t2 = normalize.tokens(f), normalize.abstract_tokens(f)
        struct.append(structure_terms(structure_stream(t1, t2), max_n))
        names.append(name_terms(t1, t2))
    return struct, names


def tfidf_rows(terms: Sequence[Sequence[str]], vocab: dict[str, int], idf: np.ndarray) -> sp.csr_matrix:
    """Sublinear-tf × idf rows over a fixed vocabulary, each row L2-normalised.

    Args:
        terms: N term lists.
        vocab: term → column (0 ≤ column < len(idf)); terms outside it are ignored.
        idf: float32 (V,) idf weight per column.

    Returns:
        float32 CSR (N, V); a row with no known term is all zero.
    """
    indptr = [0]
    cols: list[int] = []
    vals: list[float] = []
    for ts in terms:
        counts: dict[int, int] = {}
        for t in ts:
            j = vocab.get(t)
            if j is not None:
                counts[j] = counts.get(j, 0) + 1
        cols.extend(counts)
        vals.extend(counts.values())
        indptr.append(len(cols))
    m = sp.csr_matrix((np.asarray(vals, dtype=np.float32), np.asarray(cols, dtype=np.int64),
                       np.asarray(indptr, dtype=np.int64)), shape=(len(terms), len(idf)))
    m.data = (1.0 + np.log(m.data)) * idf[m.indices]
    # L2 row normalisation in place (scikit-learn's normalize does the same, but importing
    # scikit-learn costs ~1 s, more than encoding a small package); zero rows stay zero
    per_row = np.diff(m.indptr)
    norms = np.sqrt(np.bincount(np.repeat(np.arange(m.shape[0]), per_row),
                                weights=m.data.astype(np.float64) ** 2, minlength=m.shape[0]))
    m.data = (m.data / np.repeat(norms, per_row)).astype(np.float32)
    return m


def bag_features(struct: Sequence[Sequence[str]], names: Sequence[Sequence[str]], struct_vocab: dict[str, int],
                 name_vocab: dict[str, int], idf: np.ndarray, name_weight: float) -> sp.csr_matrix:
    """The encoder's input rows: the structure bag and the ``name_weight``-scaled names bag side by side.

    Args:
        struct / names: N term lists each (:func:`fragment_terms`).
        struct_vocab / name_vocab: term → column within its part.
        idf: float32 (len(struct_vocab) + len(name_vocab),) idf per column, structure columns first.
        name_weight: scale of the names part, ≥ 0.

    Returns:
        float32 CSR (N, V) with V = len(idf).
    """
    ns = len(struct_vocab)
    a = tfidf_rows(struct, struct_vocab, idf[:ns])
    b = tfidf_rows(names, name_vocab, idf[ns:]) * name_weight
    return sp.hstack([a, b], format="csr", dtype=np.float32)


def quantize_columns(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-column int8 quantisation: ``w ≈ q * scale``.

    Args:
        w: float (V, d).

    Returns:
        ``(q, scale)``: int8 (V, d) and float32 (d,) (a zero column gets scale 1).
    """
    scale = np.abs(w).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


class SemanticModel:
    """The contents of a semantic encoder model file (see the module docstring).

    Attributes:
        struct_vocab / name_vocab: term → column, columns of the names part start after the structure part.
        idf: float32 (V,) idf per column (structure columns first).
        weights: float32 (V, d) dequantised projection.
        max_n: n-gram order of the structure terms.
        name_weight: scale of the names part, ≥ 0.
        info: training record (JSON-able dict).
    """

    def __init__(self, struct_terms: Sequence[str], name_terms_: Sequence[str], idf: np.ndarray, weights: np.ndarray,
                 max_n: int, name_weight: float, info: dict[str, Any] | None = None):
        self.struct_vocab = {t: i for i, t in enumerate(struct_terms)}
        self.name_vocab = {t: i for i, t in enumerate(name_terms_)}
        self.idf = np.asarray(idf, dtype=np.float32)
        self.weights = np.asarray(weights, dtype=np.float32)
        self.max_n = int(max_n)
        self.name_weight = float(name_weight)
        self.info = dict(info or {})
        if len(self.idf) != len(self.struct_vocab) + len(self.name_vocab) or self.weights.shape[0] != len(self.idf):
            raise ValueError("semantic model: vocabulary, idf and projection sizes disagree")

    @property
    def dim(self) -> int:
        """Embedding dimension d."""
        return int(self.weights.shape[1])

    def features(self, fragments: Sequence[Fragment]) -> sp.csr_matrix:
        """float32 CSR (N, V): the structure bag and the weighted names bag side by side."""
        struct, names = fragment_terms(fragments, self.max_n)
        return bag_features(struct, names, self.struct_vocab, self.name_vocab, self.idf, self.name_weight)

    def save(self, path: str | Path) -> None:
        """Write the model (int8 projection + per-column scales) to ``path`` (.npz), atomically."""
        from twinspect._io import atomic_path

        q, scale = quantize_columns(self.weights)
        ns = len(self.struct_vocab)
        terms = list(self.struct_vocab) + list(self.name_vocab)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(
                    fh, terms_json=np.frombuffer(json.dumps(terms).encode("utf-8"), dtype=np.uint8), n_struct=np.int64(ns), idf=self.idf, q=q, scale=scale,
                    max_n=np.int64(self.max_n), name_weight=np.float32(self.name_weight),
                    feature_version=np.int64(FEATURE_VERSION), info=np.asarray(json.dumps(self.info)))

    @classmethod
    def load(cls, path: str | Path) -> SemanticModel:
        """Read a model file written by :meth:`save`.

        Raises:
            ModelError: unreadable file, another feature version, or inconsistent arrays.
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                version = int(z["feature_version"])
                if version != FEATURE_VERSION:
                    raise ModelError(f"semantic encoder model has feature version {version}, this twinspect reads "
                                     f"{FEATURE_VERSION}", path)
                terms = json.loads(z["terms_json"].tobytes().decode("utf-8"))  # JSON: no fixed-width strings
                ns = int(z["n_struct"])
                weights = z["q"].astype(np.float32) * z["scale"][None, :]
                return cls(terms[:ns], terms[ns:], z["idf"], weights, int(z["max_n"]), float(z["name_weight"]),
                           json.loads(str(z["info"])))
        except ModelError:
            raise
        except (OSError, KeyError, ValueError) as exc:
            raise ModelError(f"cannot read the semantic encoder model: {exc}", path) from exc


class SemanticEncoder(Encoder):
    """The clone-trained semantic encoder (see the module docstring).

    Args:
        model_path: a model file from ``benchmarks/train_semantic.py``; None = the shipped one.
        batch_size: fragments featurised and projected at once (bounds memory), ≥ 1.

    Raises:
        ModelError: unreadable model file (on first use).
        InputError: bad ``batch_size``.
    """

    name = "semantic"

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 4096):
        from twinspect.errors import InputError

        if int(batch_size) != batch_size or batch_size < 1:
            raise InputError(f"semantic encoder batch_size must be an integer >= 1, got {batch_size!r}")
        self.model_path = Path(model_path) if model_path is not None else DEFAULT_MODEL
        self.batch_size = int(batch_size)
        self._model: SemanticModel | None = None

    @property
    def model(self) -> SemanticModel:
        """The loaded model (read once, on first use)."""
        if self._model is None:
            self._model = SemanticModel.load(self.model_path)
        return self._model

    @property
    def dim(self) -> int:
        return self.model.dim

    def config(self) -> dict:
        return {"name": self.name, "dim": self.dim, "model": self.model_path.name,
                "feature_version": FEATURE_VERSION}

    def encode(self, fragments: Sequence[Fragment], quiet: bool = True) -> np.ndarray:
        """Embed fragments: float32 (N, d), rows L2-normalised (a fragment with no known term → zero row)."""
        from twinspect.progress import progress

        model = self.model
        out = np.zeros((len(fragments), model.dim), dtype=np.float32)
        with progress("semantic encoding", total=len(fragments), quiet=quiet) as tracker:
            for lo in range(0, len(fragments), self.batch_size):
                chunk = fragments[lo : lo + self.batch_size]
                out[lo : lo + len(chunk)] = l2_normalize(model.features(chunk) @ model.weights)
                tracker.advance(len(chunk))
        return out

    def state_dict(self) -> dict:
        """Parameters to rebuild this encoder (:meth:`from_state`)."""
        return {"model_path": str(self.model_path), "batch_size": self.batch_size}

    @classmethod
    def from_state(cls, state: dict) -> SemanticEncoder:
        """Rebuild from :meth:`state_dict`."""
        return cls(**state)


__all__ = ["DEFAULT_MODEL", "FEATURE_VERSION", "SemanticEncoder", "SemanticModel", "bag_features", "fragment_terms",
           "literal_class", "name_terms", "quantize_columns", "structure_stream", "structure_terms", "tfidf_rows"]
