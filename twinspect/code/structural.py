"""Structural evidence for Type-4 clones: Weisfeiler–Lehman similarity of two fragments' control-flow graphs.

A semantic encoder alone is one kind of evidence; a Type-4 pair is reported only when an independent
signal agrees (issue 16). This module gives that signal from control flow only — no token, name or
literal enters it: each fragment is parsed into its control-flow graph
(:func:`twinspect.code.similitude.cfg.program_graph`: basic blocks labelled by language-neutral
statement kinds such as ``assign+loop``, ``compare+cond``, ``io``), its Weisfeiler–Lehman subtree
labels of depth 0…h are collected as a bag (:func:`twinspect.code.similitude.measures.wl_labels`,
Shervashidze et al., JMLR 2011), and two fragments are compared by the cosine of their
sublinear-tf bags (no idf, so a pair's value does not depend on the rest of the scan).

Languages: those :mod:`twinspect.code.similitude.cfg` builds graphs for (C, C++, Java, Python); a
fragment in another language, or one that does not parse on its own, has no structural bag and so
never gives structural evidence.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinspect.code.fragments import Fragment
from twinspect.code.similitude.cfg import CFG_LANGUAGES

#: WL depth h of the bags (labels of iterations 0..h).
WL_ITERATIONS = 2
#: The Type-4 rule calibrated by ``benchmarks/calibrate_t4.py``.
T4_RULE = Path(__file__).parent / "data" / "t4_rule.json"


def wl_bag(fragment: Fragment, iterations: int = WL_ITERATIONS) -> dict[str, float] | None:
    """The L2-normalised sublinear-tf WL bag of a fragment's control-flow graph.

    Args:
        fragment: one fragment (its ``code`` and ``language`` are read).
        iterations: WL depth h ≥ 0.

    Returns:
        ``{label: weight}`` with unit L2 norm, or None when the language has no CFG builder, the code
        does not parse on its own, or the graph is empty.
    """
    from twinspect.code.similitude.cfg import program_graph
    from twinspect.code.similitude.measures import wl_labels
    from twinspect.errors import InputError

    if fragment.language not in CFG_LANGUAGES:
        return None
    try:
        graph = program_graph(fragment.code, fragment.language, fragment.path)
    except (InputError, RecursionError):  # does not parse on its own, or nests too deeply
        return None
    if graph.n_nodes == 0:
        return None
    counts = Counter(wl_labels(graph, iterations))
    weights = {k: 1.0 + math.log(c) for k, c in counts.items()}
    norm = math.sqrt(sum(w * w for w in weights.values()))
    return {k: w / norm for k, w in weights.items()}


def bag_cosine(a: dict[str, float] | None, b: dict[str, float] | None) -> float | None:
    """Cosine of two unit bags from :func:`wl_bag` in [0, 1]; None when either is None."""
    if a is None or b is None:
        return None
    if len(a) > len(b):
        a, b = b, a
    return min(1.0, sum(w * b.get(k, 0.0) for k, w in a.items()))


class StructuralSimilarity:
    """WL-CFG cosines of fragment pairs, each fragment's bag built once (lazily).

    Args:
        fragments: the scan's fragments (indexed by position).
        iterations: WL depth h.
    """

    def __init__(self, fragments: Sequence[Fragment], iterations: int = WL_ITERATIONS):
        self.fragments = fragments
        self.iterations = iterations
        self._bags: dict[int, dict[str, float] | None] = {}

    def bag(self, i: int) -> dict[str, float] | None:
        """The bag of fragment ``i`` (see :func:`wl_bag`)."""
        if i not in self._bags:
            self._bags[i] = wl_bag(self.fragments[i], self.iterations)
        return self._bags[i]

    def __call__(self, i: int, j: int) -> float | None:
        """Structural similarity of fragments ``i`` and ``j`` in [0, 1], or None (no graph for one of them)."""
        return bag_cosine(self.bag(i), self.bag(j))


@dataclass(frozen=True)
class T4Rule:
    """When a pair below the MT3 band is a Type-4 clone: both kinds of evidence agree.

    Attributes:
        semantic: cosine of the shipped semantic encoder (``-e semantic``) a T4 pair reaches; other
            semantic encoders (``neural``, caller-given vectors) use ``DetectConfig.threshold``.
        structural: WL-CFG cosine (:class:`StructuralSimilarity`) a T4 pair reaches; a fragment
            without a control-flow graph never gives structural evidence.
        wl_iterations: WL depth h the structural threshold was calibrated with.
        info: how the thresholds were calibrated (data, rates), copied into the scan's stats.
    """

    semantic: float
    structural: float
    wl_iterations: int = WL_ITERATIONS
    info: dict[str, Any] = field(default_factory=dict)


def load_t4_rule(path: str | Path | None = None) -> T4Rule:
    """Read the calibrated Type-4 rule (default: :data:`T4_RULE`, shipped with twinspect).

    Raises:
        ModelError: unreadable or malformed file.
    """
    from twinspect.errors import ModelError

    path = Path(path) if path is not None else T4_RULE
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return T4Rule(float(d["semantic"]), float(d["structural"]), int(d["wl_iterations"]), dict(d.get("info", {})))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"cannot read the Type-4 rule: {exc}", path) from exc


__all__ = ["CFG_LANGUAGES", "T4_RULE", "WL_ITERATIONS", "StructuralSimilarity", "T4Rule", "bag_cosine",
           "load_t4_rule", "wl_bag"]
