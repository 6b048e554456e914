"""LEMON-style baseline: LEMON's model-level mutation rules on the seeds, guided by inconsistency, not coverage.

Follows LEMON (Wang, Yan, Chen, Wang, Chen, Xu: "Deep Learning Library Testing via Effective Model
Generation", ESEC/FSE 2020):

* its seven intact-layer mutation rules (:data:`RULES`): LA (add a shape-preserving layer), LC (copy a
  shape-preserving layer after itself), LR (remove a shape-preserving layer), LS (switch two consecutive
  layers with equal input and output shapes), MLA (add a block of layers whose output shape equals its
  input shape), ARem (remove an activation: set it to ``linear``) and ARep (replace an activation). LA,
  LC and LR are :mod:`twinspect.dl.fuzz.operators`' implementations (MEMO_o uses them too);
* its heuristic search: a model is chosen from the pool by roulette wheel with score ``1 / (1 + c)``
  (``c``: times it was chosen), a rule by a Metropolis–Hastings chain over the rules ranked by priority
  (times the rule's mutant raised the inconsistency degree ÷ times it was used; acceptance
  :func:`twinspect.dl.fuzz.seed_selection.acceptance`), and a valid mutant joins the pool only when its
  inconsistency degree — :func:`inconsistency_degree`, the sum of D_MAD over the pairs of systems that ran
  it — exceeds its parent's.

Nothing here looks at coverage: the campaign counts the coverage of every valid mutant with the same
:func:`twinspect.dl.fuzz.coverage.model_coverage` as MEMO's, only to measure it.

Deliberate differences from LEMON: no inner-layer (weight) rules — WS, GF, NEB, NAI and NS perturb trained
weights, and twinspect's specs carry no weights (each build draws them from the campaign seed), so those
rules have no spec form; LEMON's seeds are trained models with real inputs, here the seeds carry random
weights and random inputs; LEMON's MH parameter was not checked against its code — the selector uses
MEMO's p (0.05) unless told otherwise; the inconsistency degree is the sum of D_MAD, without LEMON's
ground-truth label (there is none for these models).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from twinspect.dl.fuzz import catalogue, graph, operators, oracles, seed_selection
from twinspect.dl.fuzz.coverage import Coverage

RULES = ("LA", "LC", "LR", "LS", "MLA", "ARem", "ARep")


def _shape_preserving(spec: dict) -> list[dict]:
    return [n for n in spec["nodes"] if len(n["inputs"]) == 1 and n.get("shape") is not None
            and n["shape"] == graph.shape_of(spec, n["inputs"][0])]


def layer_switch(spec: dict, rng: random.Random) -> dict | None:
    """LS: swap two consecutive single-input layers ``a → b`` that both keep the tensor shape (``b`` reads only
    ``a``, nothing else reads ``a``, and neither is a model output). None when no such pair exists."""
    keep = {n["name"]: n for n in _shape_preserving(spec)}
    outs = set(spec["outputs"])
    pairs = [(keep[n["inputs"][0]], n) for n in keep.values()
             if n["inputs"][0] in keep and len(graph.consumers(spec, n["inputs"][0])) == 1
             and n["inputs"][0] not in outs]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    new = graph.clone(spec)
    na = next(n for n in new["nodes"] if n["name"] == a["name"])
    nb = next(n for n in new["nodes"] if n["name"] == b["name"])
    src = na["inputs"][0]
    for n in new["nodes"]:  # consumers of b now read a
        n["inputs"] = [a["name"] if i == b["name"] else i for i in n["inputs"]]
    nb["inputs"], na["inputs"] = [src], [b["name"]]
    new["outputs"] = [a["name"] if o == b["name"] else o for o in new["outputs"]]
    ia, ib = new["nodes"].index(na), new["nodes"].index(nb)
    new["nodes"][ia], new["nodes"][ib] = nb, na
    return new


def _mla_block(shape: list[int], rng: random.Random) -> list[tuple[str, dict]]:
    """Layers (with params) that map a tensor of per-sample ``shape`` back to the same shape."""
    rank = len(shape) + 1
    k = {3: "1D", 4: "2D", 5: "3D"}.get(rank)
    blocks: list[list[tuple[str, dict]]] = [[("Dense", {"units": rng.choice((4, 16, 64))}), ("Dense", {"units": shape[-1]})]]
    if k:
        p = rng.randint(1, 3)
        blocks.append([(f"ZeroPadding{k}", {"padding": p}), (f"Cropping{k}", {"cropping": p})])
        s = rng.randint(2, 3)
        pool = rng.choice(("MaxPooling", "AveragePooling"))
        # upsampling by s then pooling by s (strides default to the pool size): d * s // s = d on every axis
        blocks.append([(f"UpSampling{k}", {"size": s}), (f"{pool}{k}", {"pool_size": s})])
    return rng.choice(blocks)


def multi_layers_addition(spec: dict, rng: random.Random) -> dict | None:
    """MLA: after a tensor of the model, insert a block of layers whose output shape equals its input shape
    (Dense → Dense back to the channel count; zero padding then the same cropping; upsampling then pooling
    by the same factor); the tensor's consumers read the block's end."""
    srcs = [(n["name"], n["shape"]) for n in spec["nodes"] if n.get("shape") and -1 not in n["shape"]]
    if not srcs:
        return None
    src, shape = rng.choice(srcs)
    block = _mla_block(list(shape), rng)
    new = graph.clone(spec)
    consumers = [n for n in new["nodes"] if src in n["inputs"]]
    idx = graph.node_names(new).index(src) + 1
    prev = src
    for layer, params in block:
        name = graph.fresh_name(new, layer)
        new["nodes"].insert(idx, {"name": name, "layer": layer, "params": params, "inputs": [prev]})
        idx += 1
        prev = name
    for n in consumers:
        n["inputs"] = [prev if i == src else i for i in n["inputs"]]
    new["outputs"] = [prev if o == src else o for o in new["outputs"]]
    return new


def _activation(spec: dict, rng: random.Random, value: Callable[[str], str | None]) -> dict | None:
    cands = [n for n in spec["nodes"] if "activation" in n.get("params", {})
             and value(n["params"]["activation"]) is not None]
    if not cands:
        return None
    new = graph.clone(spec)
    pick = rng.choice(cands)["name"]
    node = next(n for n in new["nodes"] if n["name"] == pick)
    node["params"]["activation"] = value(node["params"]["activation"])
    return new


def activation_removal(spec: dict, rng: random.Random) -> dict | None:
    """ARem: set the activation of a layer that has a non-linear one to ``linear``."""
    return _activation(spec, rng, lambda a: "linear" if a not in ("linear", None) else None)


def activation_replacement(spec: dict, rng: random.Random) -> dict | None:
    """ARep: replace the activation of a layer that has one by another catalogue activation."""
    return _activation(spec, rng, lambda a: rng.choice([x for x in catalogue.ACTIVATIONS if x != a]))


_NO_COV = Coverage()  # operators' LA/LC/LR take a coverage argument and ignore it

_RULE_FN: dict[str, Callable[[dict, random.Random], dict | None]] = {
    "LA": lambda s, r: operators.lemon_la(s, _NO_COV, r),
    "LC": lambda s, r: operators.lemon_lc(s, _NO_COV, r),
    "LR": lambda s, r: operators.lemon_lr(s, _NO_COV, r),
    "LS": layer_switch, "MLA": multi_layers_addition, "ARem": activation_removal, "ARep": activation_replacement,
}


def apply(rule: str, spec: dict, rng: random.Random) -> dict | None:
    """Apply LEMON rule ``rule`` (one of :data:`RULES`) to a built spec; the mutant or None when it does not apply.

    Raises:
        KeyError: unknown rule.
    """
    return graph.as_mutant(_RULE_FN[rule](spec, rng))


def inconsistency_degree(results: dict[str, dict]) -> float | None:
    """LEMON's inconsistency degree of one model: the sum of D_MAD over the pairs of systems whose run ended
    ``ok`` with finite distances; None when fewer than two systems ran it (a crash or a lone system)."""
    ok = sorted(s for s, r in results.items() if r["status"] == "ok")
    if len(ok) < 2:
        return None
    total = 0.0
    for i, a in enumerate(ok):
        for b in ok[i + 1:]:
            try:
                d = oracles.d_mad(results[a]["outputs"], results[b]["outputs"])
            except ValueError:  # shapes differ: an inconsistency finding, not a degree
                continue
            if np.isfinite(d):
                total += float(d)
    return total


@dataclass
class LemonSelector:
    """LEMON's model and rule selection (see the module docstring).

    Args:
        p: MH parameter of the rule chain, in (0, 1).
        picks: model id → times chosen.
        degree: model id → inconsistency degree (None: unknown, e.g. a seed not run).
        uses / raises: rule → times used / times its valid mutant raised the inconsistency degree.
        last: the rule chosen last (the MH chain's state).
    """

    p: float = seed_selection.DEFAULT_P
    picks: dict[str, int] = field(default_factory=dict)
    degree: dict[str, float | None] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    raises: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    last: str | None = None

    def add_model(self, mid: str, degree: float | None = None) -> None:
        """Add model ``mid`` with its inconsistency degree to the pool."""
        self.picks.setdefault(mid, 0)
        self.degree[mid] = degree

    def remove_model(self, mid: str) -> None:
        """Drop model ``mid`` from the pool."""
        self.picks.pop(mid, None)
        self.degree.pop(mid, None)

    def priority(self, rule: str) -> float:
        """Rule priority: raises ÷ uses; infinite for a rule never used, so unused rules rank first."""
        return self.raises[rule] / self.uses[rule] if self.uses[rule] else float("inf")

    def pick(self, rng: random.Random) -> tuple[str, str]:
        """The next (model id, rule): roulette wheel over the pool by ``1 / (1 + picks)``, MH over ranked rules."""
        mids = sorted(self.picks)
        mid = rng.choices(mids, weights=[1.0 / (1 + self.picks[m]) for m in mids])[0]
        self.picks[mid] += 1
        ranked = sorted(RULES, key=lambda r: (-self.priority(r), r))
        if self.last is None:
            k2 = rng.randrange(len(ranked))
        else:
            k1 = ranked.index(self.last)
            while True:
                k2 = rng.randrange(len(ranked))
                if rng.random() < seed_selection.acceptance(k1, k2, self.p):
                    break
        self.last = ranked[k2]
        self.uses[self.last] += 1
        return mid, self.last

    def raised(self, parent: str, degree: float | None) -> bool:
        """Whether a mutant of degree ``degree`` beats its parent's (an unknown parent degree counts as 0)."""
        if degree is None:
            return False
        return degree > (self.degree.get(parent) or 0.0)

    def to_json(self) -> dict:
        """JSON-able state (see :meth:`from_json`)."""
        return {"p": self.p, "picks": self.picks, "degree": self.degree, "uses": self.uses, "raises": self.raises,
                "last": self.last}

    @classmethod
    def from_json(cls, d: dict) -> LemonSelector:
        """Selector from :meth:`to_json`'s dict."""
        return cls(d["p"], dict(d["picks"]), dict(d["degree"]), dict(d["uses"]), dict(d["raises"]), d.get("last"))
