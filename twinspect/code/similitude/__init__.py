"""Program similitude from control-flow graphs (``twinspect similitude``, capability 2).

Modules: :mod:`.cfg` (tree-sitter -> per-function CFGs joined by calls), :mod:`.lav` (Nikolić's
neighbour matching, the LAV baseline), :mod:`.measures` (node-sym, normalized-node-sym, the default
``twinspect`` measure), :mod:`.cluster` (silhouette, agglomerative clusters), :mod:`.analysis`
(:func:`analyze`), :mod:`.report` (JSON/CSV/plots), :mod:`.cli`. Names load on first use.
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "analyze": "twinspect.code.similitude.analysis",
    "SimilitudeResult": "twinspect.code.similitude.analysis",
    "CFG": "twinspect.code.similitude.cfg",
    "ProgramGraph": "twinspect.code.similitude.cfg",
    "program_graph": "twinspect.code.similitude.cfg",
    "load_program": "twinspect.code.similitude.cfg",
    "silhouette": "twinspect.code.similitude.cluster",
    "agglomerative": "twinspect.code.similitude.cluster",
    "best_clusters": "twinspect.code.similitude.cluster",
    "MEASURES": "twinspect.code.similitude.measures",
    "similarity_matrix": "twinspect.code.similitude.measures",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
