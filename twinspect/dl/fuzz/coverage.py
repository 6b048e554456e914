"""Layer type, layer pair and layer parameter coverage of a set of model specs (MEMO, Li et al. ICSE 2023).

A model spec is the JSON-able dict of :mod:`twinspect.dl.fuzz.graph` (``{"input_shape", "nodes", "outputs"}``).
Only layers and parameter values in the :mod:`~twinspect.dl.fuzz.catalogue` count; numeric parameter
values count by bucket. Layer pairs are the ordered (producer, consumer) layer types of graph edges
between two catalogue layers (the model input is not a layer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from twinspect.dl.fuzz import catalogue


@dataclass
class Coverage:
    """Covered items of the three criteria; ``update`` merges, ``ratios`` divides by the catalogue totals.

    Attributes:
        types: covered layer types (catalogue names).
        pairs: covered ordered layer pairs.
        params: covered (layer, parameter, value label) triples.
    """

    types: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    params: set[tuple[str, str, str]] = field(default_factory=set)

    def update(self, other: Coverage) -> int:
        """Add ``other``'s items; returns how many new items (all criteria together) were added."""
        before = len(self)
        self.types |= other.types
        self.pairs |= other.pairs
        self.params |= other.params
        return len(self) - before

    def new_items(self, other: Coverage) -> int:
        """Number of items of ``other`` not yet in ``self`` (no update)."""
        return len(other.types - self.types) + len(other.pairs - self.pairs) + len(other.params - self.params)

    def __len__(self) -> int:
        return len(self.types) + len(self.pairs) + len(self.params)

    def copy(self) -> Coverage:
        return Coverage(set(self.types), set(self.pairs), set(self.params))

    def outside(self) -> dict[str, list]:
        """Covered items that are not in their criterion's denominator (sorted; empty lists when the
        catalogue's rank rules and value spaces describe every generated model, which the tests check)."""
        return {"layer_type": sorted(self.types - set(catalogue.BY_NAME)),
                "layer_pair": sorted(self.pairs - catalogue.legal_pairs()),
                "layer_param": sorted(self.params - catalogue.param_values())}

    def summary(self) -> dict[str, dict[str, float]]:
        """``{"layer_type"|"layer_pair"|"layer_param": {"covered", "total", "ratio", "outside"}}`` against the
        catalogue. ``covered`` counts only items inside the denominator (so ``ratio`` <= 1); ``outside``
        counts the others (see :meth:`outside`; 0 unless the catalogue misdescribes a generated layer)."""
        dens = {"layer_type": set(catalogue.BY_NAME), "layer_pair": catalogue.legal_pairs(),
                "layer_param": catalogue.param_values()}
        out = {}
        for key, items in (("layer_type", self.types), ("layer_pair", self.pairs), ("layer_param", self.params)):
            inside = len(items & dens[key])  # type: ignore[operator]
            out[key] = {"covered": inside, "total": len(dens[key]), "ratio": inside / len(dens[key]),
                        "outside": len(items) - inside}
        return out

    def ratios(self) -> tuple[float, float, float]:
        """(type, pair, param) coverage ratios in [0, 1]."""
        s = self.summary()
        return s["layer_type"]["ratio"], s["layer_pair"]["ratio"], s["layer_param"]["ratio"]

    def to_json(self) -> dict:
        return {"types": sorted(self.types), "pairs": sorted(list(p) for p in self.pairs),
                "params": sorted(list(p) for p in self.params)}

    @classmethod
    def from_json(cls, data: dict) -> Coverage:
        return cls(set(data["types"]), {tuple(p) for p in data["pairs"]}, {tuple(p) for p in data["params"]})  # type: ignore[misc]


def node_params(layer: str, params: dict) -> set[tuple[str, str, str]]:
    """Covered (layer, parameter, label) triples of one layer instance with constructor arguments ``params``."""
    spec = catalogue.get(layer)
    if spec is None:
        return set()
    out = set()
    for p in spec.params:
        if p.name in params:
            lab = p.label_of(params[p.name])
            if lab is not None:
                out.add((spec.name, p.name, lab))
    return out


def model_coverage(spec: dict) -> Coverage:
    """Coverage of one model spec.

    Args:
        spec: model spec (see :mod:`twinspect.dl.fuzz.graph`).

    Returns:
        A :class:`Coverage` with the model's catalogue layer types, edges between catalogue layers and
        parameter values.
    """
    cov = Coverage()
    kinds = {}
    for node in spec["nodes"]:
        lay = catalogue.get(node["layer"])
        kinds[node["name"]] = lay.name if lay else None
        if lay is None:
            continue
        cov.types.add(lay.name)
        cov.params |= node_params(node["layer"], node.get("params", {}))
    for node in spec["nodes"]:
        b = kinds.get(node["name"])
        for src in node["inputs"]:
            a = kinds.get(src)
            if a and b:
                cov.pairs.add((a, b))
    return cov


def coverage_of(specs: Iterable[dict]) -> Coverage:
    """Union coverage of several model specs."""
    total = Coverage()
    for spec in specs:
        total.update(model_coverage(spec))
    return total
