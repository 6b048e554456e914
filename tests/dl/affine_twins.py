"""Hand-made twins for the deviation-search tests: linear two-class models whose boundaries are known."""

from __future__ import annotations

import numpy as np

from twinspect.dl.adapters.base import PRESETS, Classifier


class Affine(Classifier):
    """Two classes: logits (0, flatten(x/255) @ w − b); the boundary is the hyperplane w·x/255 = b."""

    def __init__(self, w, b, name, shape=(8, 8, 1)):
        super().__init__(shape, 2, PRESETS["unit"], output="logits", name=name)
        self.w, self.b = np.asarray(w, dtype=np.float64), float(b)

    def _forward(self, batch):
        z = batch.reshape(len(batch), -1).astype(np.float64) @ self.w - self.b
        return np.stack([np.zeros_like(z), z], axis=1)
