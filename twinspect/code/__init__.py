"""Source-code side: clone detection (capability 1) and, beside it, program similitude (capability 2).

Main entry points (loaded on first use, so importing :mod:`twinspect.code` stays cheap):

* :func:`scan` — mine fragments from files/directories and detect clones → :class:`CloneReport`;
* :func:`detect` — clone pairs and classes among given fragments;
* :class:`DetectConfig` — detector settings (encoder, index, thresholds, top-k, seed);
* :class:`CloneIndex` — a persisted, incremental index of a codebase for one-fragment queries;
* :class:`Fragment` — a function/method with its location and text; :func:`mine` extracts them;
* :func:`make_encoder` — the lexical (hashed TF-IDF) or neural (MiniLM) fragment encoder;
* :func:`run_sscd`, :func:`run_bcb`, :func:`run_poj104` — evaluation on the shared benchmarks.

Pipeline after SSCD (Chochlov et al., "Using a Nearest-Neighbour, BERT-Based Approach for Scalable
Clone Detection", ICSME 2022): tree-sitter fragments → embeddings → k-NN → typed pairs and classes.
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "scan": "twinspect.code.clones",
    "detect": "twinspect.code.clones",
    "DetectConfig": "twinspect.code.clones",
    "CloneReport": "twinspect.code.clones",
    "ClonePair": "twinspect.code.clones",
    "CloneIndex": "twinspect.code.store",
    "Fragment": "twinspect.code.fragments",
    "mine": "twinspect.code.fragments",
    "make_encoder": "twinspect.code.encoders",
    "run_sscd": "twinspect.code.evaluate",
    "run_bcb": "twinspect.code.evaluate",
    "run_poj104": "twinspect.code.evaluate",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
