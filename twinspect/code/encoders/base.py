"""The encoder interface shared by the lexical and neural encoders."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from twinspect.code.fragments import Fragment


class Encoder(ABC):
    """Turns fragments into unit-length embedding vectors.

    Implementations store their parameters in the constructor (scikit-learn style) and must pass
    the encoder conformance test in ``tests/code/test_encoders.py``.

    Attributes:
        name: short identifier written into indexes (an index built by one encoder is never queried
            with another).
        dim: embedding dimension d.
    """

    name: str = "encoder"

    @property
    @abstractmethod
    def dim(self) -> int:
        """Embedding dimension d."""

    @abstractmethod
    def encode(self, fragments: Sequence[Fragment], quiet: bool = True) -> np.ndarray:
        """Embed fragments.

        Args:
            fragments: N fragments.
            quiet: suppress progress output.

        Returns:
            float32 array of shape (N, dim), each row L2-normalised (a zero row only for an empty
            fragment).
        """

    def config(self) -> dict:
        """Parameters that must match for two embeddings to be comparable (stored in indexes)."""
        return {"name": self.name, "dim": self.dim}


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Return float32 ``x`` with each row scaled to unit L2 norm (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms
