"""Lazy re-exports for package ``__init__`` modules (PEP 562 module ``__getattr__``).

A package lists its public names and the sub-module defining each; they are imported on first
access, so ``import twinspect`` does not import torch, tree-sitter or onnxruntime.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> tuple[
    Callable[[str], Any], Callable[[], list[str]]
]:
    """Build the ``__getattr__`` and ``__dir__`` of a package that re-exports names lazily.

    Args:
        package: the package's ``__name__`` (for error messages).
        exports: public name → dotted name of the module that defines it.
        namespace: the package's ``globals()``; a loaded value is cached there.

    Returns:
        ``(__getattr__, __dir__)`` to assign in the package module.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
