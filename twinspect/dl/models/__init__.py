"""Deprecated alias of :mod:`twinspect.dl.modelclones` (model clone analysis), kept for one release.

``twinspect.dl.models`` was renamed because the name said "models" where the package holds model
*clone analysis* (the architectures live in :mod:`twinspect.dl.architectures`). Importing this
package emits a :class:`DeprecationWarning`; every name of the old ``__all__`` still resolves, to
the same object as in :mod:`twinspect.dl.modelclones`. Sub-modules (``twinspect.dl.models.cka``…)
are not aliased: import them from :mod:`twinspect.dl.modelclones`.
"""

from __future__ import annotations

import warnings
from typing import Any

from twinspect.dl import modelclones as _new

warnings.warn("twinspect.dl.models is deprecated; use twinspect.dl.modelclones", DeprecationWarning, stacklevel=2)

__all__ = list(_new.__all__)


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(_new, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
