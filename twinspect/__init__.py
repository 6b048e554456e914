"""twinspect — find twins and where twins diverge.

Capabilities (one sub-package each, sharing :mod:`twinspect._io`, :mod:`twinspect.errors`,
:mod:`twinspect.progress` and :mod:`twinspect.reports`):

* :mod:`twinspect.code` — scalable code clone detection (``twinspect clones``), later program similitude.
* :mod:`twinspect.dl` — model adapters, model zoo and compression, deviated-behaviour search
  (``twinspect deviate``, ``twinspect repair``), later model similarity and library fuzzing.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
