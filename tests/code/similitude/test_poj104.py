"""End-to-end on real programs from ../shared: POJ-104 dev, 10 programs for each of 12 problems."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from twinspect.code.similitude.cfg import program_graph
from twinspect.code.similitude.cluster import silhouette
from twinspect.code.similitude.measures import similarity_matrix


@pytest.mark.slow
@pytest.mark.ci
def test_default_measure_separates_problems(shared_dir):
    path = shared_dir / "data" / "clones" / "poj104" / "dev_81_92.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} not found")
    by: dict[str, list[dict]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            by.setdefault(r["label"], []).append(r)
    rng = random.Random(0)
    recs = [r for lab in sorted(by) for r in rng.sample(by[lab], 10)]
    graphs = [program_graph(r["code"], "cpp", path=r["index"]) for r in recs]
    labels = [r["label"] for r in recs]
    assert all(g.n_nodes >= 2 and g.functions for g in graphs)
    default = silhouette(similarity_matrix(graphs, "wl-tokens"), labels)
    baseline = silhouette(similarity_matrix(graphs, "normalized-node-sym"), labels)
    assert default is not None and baseline is not None
    assert default > 0.2 and default > baseline
