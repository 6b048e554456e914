"""Shared by the minimisation tests: a query function over two classifiers that counts its calls."""

from __future__ import annotations

import numpy as np


class Counter:
    """A query function over two classifiers that counts the batches it is asked about."""

    def __init__(self, f, g):
        self.f, self.g, self.calls = f, g, 0

    def __call__(self, batch):
        self.calls += 1
        return self.f.predict_proba(batch), self.g.predict_proba(batch)


def labels_differ(pf, pg):
    """The trigger condition of a plain deviation: the two models' top-1 labels differ."""
    return int(np.argmax(pf)) != int(np.argmax(pg))
