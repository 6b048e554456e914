"""twinspect — find twins and where twins diverge.

The main entry points, importable from the top-level package (loaded on first use, so
``import twinspect`` stays fast and does not import torch or tree-sitter until needed):

Code clones (:mod:`twinspect.code`, after SSCD, Chochlov et al.)
    ``scan(path_or_paths, config) -> CloneReport``; ``detect(fragments, config) -> CloneReport``;
    ``DetectConfig``; ``CloneIndex`` (persisted, incremental index for one-fragment queries);
    ``Fragment``.

Deviated behaviour of compressed models (:mod:`twinspect.dl`, after DFlare, Tian et al., TOSEM 2023)
    ``load_classifier(path) -> Classifier``; ``Classifier``; ``DFlare``; ``DiffChaser``
    (Xie et al., IJCAI 2019); ``run_search(...)`` (a whole resumable run over many seeds).

Each capability is a sub-package: :mod:`twinspect.code` (clone detection, program similitude),
:mod:`twinspect.dl` (model adapters, deviation search, model clone analysis, library fuzzing). They
share :mod:`twinspect.errors` (user errors: :class:`~twinspect.errors.InputError` is also a
``ValueError``), :mod:`twinspect._io` (atomic outputs), :mod:`twinspect.progress` and
:mod:`twinspect.reports`. Library functions are quiet by default (``verbose=0``); only the CLI prints.

Example::

    import twinspect
    report = twinspect.scan("twinspect/examples/clones")  # one path or a list of paths
    for pair in sorted(report.pairs, key=lambda p: p.similarity, reverse=True)[:5]:  # pairs are in path order
        a, b = report.fragments[pair.a], report.fragments[pair.b]
        print(pair.type, round(pair.similarity, 2), f"{a.path}:{a.start_line}", f"{b.path}:{b.start_line}")
"""

from __future__ import annotations

from twinspect._lazy import lazy_exports
from twinspect.errors import InputError, ModelError, TwinspectError

__version__ = "0.1.0"

# name -> module that defines it (imported lazily on first access)
_LAZY: dict[str, str] = {
    "scan": "twinspect.code",
    "detect": "twinspect.code",
    "DetectConfig": "twinspect.code",
    "CloneIndex": "twinspect.code",
    "Fragment": "twinspect.code",
    "load_classifier": "twinspect.dl.adapters",
    "Classifier": "twinspect.dl.adapters",
    "DFlare": "twinspect.dl.deviate.dflare",
    "DiffChaser": "twinspect.dl.deviate.diffchaser",
    "run_search": "twinspect.dl.deviate.runner",
}

__all__ = ["__version__", "TwinspectError", "InputError", "ModelError", *_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

import os as _os

if _os.environ.get("TWINSPECT_QUIET_LOGS") == "1":  # a worker process of a CLI run without --verbose
    from twinspect._quiet import silence_python_warnings as _silence

    _silence()

