"""Scoring clone detectors on real benchmarks: SSCD Company-C, BigCloneBench, POJ-104.

Everything here scores the detector's *output*, read through the ``twinspect clones`` JSON contract::

    {"fragments": [{"id", "path", "start_line", "end_line", "name", "language"}],
     "pairs": [{"a", "b", "similarity", "type"}], "classes": [[id, ...]], "stats": {}}

so any detector that writes that contract can be scored (a :class:`~twinspect.code.clones.CloneReport`
is accepted too, through its ``to_json_dict()``).

Modules: :mod:`.matching` (line-range matching, report reading), :mod:`.metrics` (recall@k, MRR,
MAP@R), and one module per benchmark with its loader, scoring and runner — :mod:`.sscd`
(Chochlov et al., ICSME 2022), :mod:`.bcb` (BigCloneBench, Svajlenko et al., ICSME 2014),
:mod:`.poj104` (CodeXGLUE POJ-104). The runners (:func:`run_sscd`, :func:`run_bcb`,
:func:`run_poj104`) load the shared data sets, run the twinspect detector and return the scores;
the CLI (``twinspect clones eval``) and ``benchmarks/clones.py`` call them.
"""

from twinspect.code.evaluate.bcb import (
    BCB_TYPES,
    BCBPair,
    FoundPairs,
    bcb_fragments,
    bcb_split,
    bcb_subset,
    functionality_groups,
    load_bcb_functions,
    load_bcb_labels,
    run_bcb,
    score_bcb,
)
from twinspect.code.evaluate.common import Embedder, config_embedder, default_data_dir, require_data_dir
from twinspect.code.evaluate.matching import (
    MIN_OVERLAP,
    ReportView,
    Span,
    file_equivalence,
    fragment_copies,
    overlap_lines,
    report_view,
    spans_match,
)
from twinspect.code.evaluate.metrics import average_precision_at_r, first_relevant_rank, map_at_r, rank_metrics
from twinspect.code.evaluate.poj104 import load_poj104, poj104_fragments, run_poj104
from twinspect.code.evaluate.sscd import SSCDLabel, load_sscd_labels, run_sscd, score_sscd, sscd_query_ranks
from twinspect.errors import InputError  # noqa: F401 - errors raised by the runners, for callers

__all__ = [
    "MIN_OVERLAP",
    "Span",
    "overlap_lines",
    "spans_match",
    "file_equivalence",
    "fragment_copies",
    "ReportView",
    "report_view",
    "rank_metrics",
    "first_relevant_rank",
    "average_precision_at_r",
    "map_at_r",
    "Embedder",
    "config_embedder",
    "default_data_dir",
    "require_data_dir",
    "SSCDLabel",
    "load_sscd_labels",
    "score_sscd",
    "sscd_query_ranks",
    "run_sscd",
    "BCB_TYPES",
    "BCBPair",
    "load_bcb_functions",
    "load_bcb_labels",
    "FoundPairs",
    "score_bcb",
    "bcb_subset",
    "bcb_split",
    "functionality_groups",
    "bcb_fragments",
    "run_bcb",
    "load_poj104",
    "poj104_fragments",
    "run_poj104",
]
