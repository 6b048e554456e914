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


def raw_triggers(search, f, g, x, y, *, scan: int, want: int = 8):
    """Unminimised triggers of ``search`` from the first ``scan`` test images both models classify right,
    at most ``want`` of them: yields ``(label, raw result)``."""
    found = 0
    for i in range(scan):
        if found == want:
            return
        if f.predict(x[i])[0] != y[i] or g.predict(x[i])[0] != y[i]:
            continue
        raw = search.search(x[i], seed=[0, i], label=int(y[i]))
        if raw.status != "found":
            continue
        found += 1
        yield int(y[i]), raw


def compressed_error_of(label: int):
    """The preferred trigger condition when the seed's label is known: the models differ and the
    original still gives ``label`` (a compressed-model error)."""
    def compressed_error(pf, pg):
        return labels_differ(pf, pg) and int(np.argmax(pf)) == label
    return compressed_error
