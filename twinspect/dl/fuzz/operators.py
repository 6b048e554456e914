"""MEMO mutation operators on model specs: NLA, LResh, LMerge, LConn, CShape, CMode, NaN (+ LEMON's LA, LR, LC, AR).

Each operator takes a built spec (node shapes recorded by :func:`twinspect.dl.fuzz.graph.build`), the
campaign's :class:`~twinspect.dl.fuzz.coverage.Coverage` (operators prefer unseen layer types, pairs and
parameter values, as in MEMO §3.3) and a ``random.Random``; it returns a new spec or None when it does
not apply. Validity is checked by the caller: a mutant Keras rejects at build time is an *invalid
mutant*, never a finding; one Keras builds is run on every backend, and a backend that fails on it has a
crash finding. NLA, LResh, LConn, CShape and CMode touch 1–5 layers per application (MEMO; LConn's 1–5
edges as in the authors' ``connect_layers``), and CShape/CMode change 1–3 parameters of each layer they
touch (the authors' ``mutate_param``, ``max_config_num=3``).

NLA and LResh insert their layers *into* the model, between a tensor and the layers that read it, as the
authors' ``NL_mut`` does (``maybeLee/COMET``, ``scripts/mutation/comet_mutation_operators.py``): the new
layer reads the tensor, and its readers read the new layer — through restoring layers when the new layer
changed the shape (:func:`restore_chain`: a Reshape when the element count is the same, else a Dense for
the channel count and ZeroPadding/Cropping for the spatial sizes; the authors use custom pad/crop layers,
twinspect uses catalogue layers, which count in the coverage like any other layer). So one inserted layer
covers the pair with its producer and the pair with its reader. When the shape cannot be restored cheaply
(a rank change with a different element count) the layer becomes a new output branch instead, as LConn's
and LMerge's layers always do (the authors' ``connect_two_layers`` adds a model output too).

LEMON-style operators (Wang et al., "Deep learning library testing via effective model generation", FSE
2020): LA (add a shape-preserving layer), LR (remove a shape-preserving layer), LC (copy a shape-preserving
layer), AR (replace an activation). The LEMON-style baseline (:mod:`twinspect.dl.fuzz.lemon`) and MEMO_o
(:mod:`twinspect.dl.fuzz.prior_operators`) use LA, LR and LC; MEMO_o campaigns of releases before
DeepMutation's and Audee's operators were added selected from :data:`LEMON_OPERATORS`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from twinspect.dl.fuzz import catalogue, graph
from twinspect.dl.fuzz.coverage import Coverage, model_coverage

MEMO_OPERATORS = ("NLA", "LResh", "LMerge", "LConn", "CShape", "CMode", "NaN")
LEMON_OPERATORS = ("LA", "LR", "LC", "AR")

_RESHAPING = ("Flatten", "Reshape", "Permute", "RepeatVector", "Cropping1D", "Cropping2D", "Cropping3D",
              "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "UpSampling1D", "UpSampling2D", "UpSampling3D")
_MERGING = tuple(la.name for la in catalogue.LAYERS if la.category == "merging")
_SHAPE_SAFE = {"Identity", "BatchNormalization", "LayerNormalization", "UnitNormalization", "RMSNormalization",
               "Dropout", "GaussianNoise", "GaussianDropout", "AlphaDropout", "ActivityRegularization",
               "Activation", "ReLU", "LeakyReLU", "PReLU", "ELU", "Softmax", "SpatialDropout1D",
               "SpatialDropout2D", "SpatialDropout3D"}
#: layers whose Keras constructor rejects ``strides > 1`` together with ``dilation_rate > 1``
_NO_STRIDED_DILATION = {"Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
                        "ConvLSTM1D", "ConvLSTM2D"}
#: MEMO applies NLA, LResh, CShape and CMode to 1–5 layers per application
MAX_LAYERS_PER_APPLICATION = 5
MAX_ELEMENTS = 200_000  # per-sample tensor size cap so generated models stay fast
#: CShape/CMode change 1 to this many parameters of each layer they touch (COMET's ``max_config_num``)
MAX_PARAMS_PER_LAYER = 3
#: a restoring Dense (the channel count back to the readers') is used only up to this many weights;
#: beyond, the inserted layer becomes an output branch instead of growing the model
MAX_ADAPTER_WEIGHTS = 65_536


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 1)
    return n


def sample_value(p: catalogue.Param, rng: random.Random, avoid: set[str] | None = None):
    """A value of parameter ``p``; prefers labels not in ``avoid`` (unseen values)."""
    labels = p.labels()
    fresh = [lab for lab in labels if not avoid or lab not in avoid]
    lab = rng.choice(fresh or labels)
    if p.kind == "mode":
        return p.values[labels.index(lab)]
    lo, hi = next((b[1], b[2]) for b in p.buckets if b[0] == lab)
    if p.kind == "float":
        return round(rng.uniform(lo, hi), 3) if hi > 0 else 0.0
    return rng.randint(int(lo), int(hi))


def reshape_target(in_shape: list[int], rng: random.Random, rank: int | None = None) -> list[int]:
    """A Reshape ``target_shape`` with the same number of elements as ``in_shape`` (batch excluded).

    Args:
        in_shape: per-sample input shape (positive ints).
        rank: per-sample rank of the target (1–4); None picks one at random, preferring a rank other than
            ``len(in_shape)`` so that reshaping opens layers of other ranks (Conv3D needs 4, Conv1D 2).

    Returns:
        A list of ``rank`` positive ints whose product is the input size; the element count is split into
        factors near its rank-th root (one of the three divisors nearest it at each step), so that no axis
        is degenerate where the size allows it.
    """
    n = _size(in_shape)
    if rank is None:
        ranks = [r for r in (1, 2, 3, 4) if r != len(in_shape)]
        rank = rng.choice(ranks)
    dims: list[int] = []
    rest = n
    for left in range(rank, 1, -1):  # balanced factors: each near the remaining size's left-th root
        goal = rest ** (1.0 / left)
        divs = sorted((d for d in range(1, min(rest, 256) + 1) if rest % d == 0), key=lambda d: abs(d - goal))
        d = rng.choice(divs[:3])
        dims.append(d)
        rest //= d
    dims.append(rest)
    return dims


def random_params(layer: str, in_shape: list[int], rng: random.Random, cov: Coverage | None = None) -> dict:
    """Constructor arguments for ``layer`` on a per-sample input of ``in_shape``, preferring unseen values.

    Shape parameters are kept small relative to ``in_shape`` (kernels and pools not larger than the
    spatial size); computed parameters (Reshape's target_shape, Permute's dims) are derived from it.
    """
    spec = catalogue.BY_NAME[layer]
    seen = {(p[1], p[2]) for p in cov.params if p[0] == layer} if cov else set()
    params: dict = {}
    for p in spec.params:
        params[p.name] = sample_value(p, rng, {lab for (n, lab) in seen if n == p.name})
    spatial = in_shape[:-1] if len(in_shape) > 1 else in_shape
    smin = min(spatial) if spatial else 1
    for key in ("kernel_size", "pool_size"):
        if key in params:
            params[key] = max(1, min(params[key], smin))
    if layer in _NO_STRIDED_DILATION and params.get("strides", 1) > 1 and params.get("dilation_rate", 1) > 1:
        # Keras rejects strides > 1 with dilation_rate > 1 on these layers (not on Depthwise/SeparableConv):
        # keep one of the two, chosen at random, so both value spaces stay reachable
        params["strides" if rng.random() < 0.5 else "dilation_rate"] = 1
    if "kernel_size" in params and params.get("dilation_rate", 1) > 1:  # the dilated kernel must fit
        while params["dilation_rate"] > 1 and (params["kernel_size"] - 1) * params["dilation_rate"] + 1 > smin:
            params["dilation_rate"] -= 1
    if "cropping" in params:
        params["cropping"] = min(params["cropping"], max(0, (smin - 1) // 2))
    if layer == "Reshape":
        params["target_shape"] = reshape_target(in_shape, rng)
    if layer == "Permute":
        dims = list(range(1, len(in_shape) + 1))
        rng.shuffle(dims)
        params["dims"] = dims
    if layer == "GroupNormalization":
        c = in_shape[-1]
        params["groups"] = next(g for g in (params["groups"], 2, 1) if c % g == 0)
    if layer == "Concatenate" and params.get("axis") == 1 and len(in_shape) < 2:
        params["axis"] = -1
    if layer in ("Softmax",) and params.get("axis") == 1 and len(in_shape) < 1:
        params["axis"] = -1
    if layer in ("ConvLSTM1D", "ConvLSTM2D"):
        params["kernel_size"] = max(1, min(params["kernel_size"], min(in_shape[1:-1])))
    return params


def _candidates(rank: int, pool=None) -> list[str]:
    names = pool or [la.name for la in catalogue.LAYERS if la.arity == 1]
    return [n for n in names if rank in catalogue.BY_NAME[n].in_ranks]


def _pick_node(spec: dict, rng: random.Random, pred: Callable[[dict], bool] | None = None) -> dict | None:
    nodes = [n for n in spec["nodes"] if n.get("shape") and (pred is None or pred(n))]
    return rng.choice(nodes) if nodes else None


def _source_choices(spec: dict) -> list[tuple[str, list[int], str | None]]:
    out: list[tuple[str, list[int], str | None]] = [(graph.INPUT, list(spec["input_shape"]), None)]
    out += [(n["name"], n["shape"], n["layer"]) for n in spec["nodes"] if n.get("shape") and -1 not in n["shape"]]
    return out


def _insert_after(spec: dict, src: str, src_shape: list[int], layer: str, params: dict,
                  extra_inputs: tuple[str, ...] = ()) -> dict:
    """Add ``layer`` consuming ``src`` as a new output branch (a new sink)."""
    new = graph.clone(spec)
    name = graph.fresh_name(new, layer)
    node = {"name": name, "layer": layer, "params": params, "inputs": [src, *extra_inputs]}
    idx = 0 if src == graph.INPUT else graph.node_names(new).index(src) + 1
    for e in extra_inputs:
        if e != graph.INPUT:  # merging the input with itself (a model whose only tensor is its input)
            idx = max(idx, graph.node_names(new).index(e) + 1)
    new["nodes"].insert(idx, node)
    new["outputs"] = [o for o in new["outputs"] if o != src] + [name] if src in new["outputs"] else new["outputs"] + [name]
    return new


def _insert_chain(spec: dict, src: str, chain: list[tuple[str, dict]]) -> dict:
    """Add the layers of ``chain`` one after the other from ``src``, the last one a new output branch."""
    new = spec
    for layer, params in chain:
        before = set(graph.node_names(new))
        new = _insert_after(new, src, [], layer, params)
        src = next(n for n in graph.node_names(new) if n not in before)
    return new


def chain_shapes(chain: list[tuple[str, dict]], in_shape: list[int]) -> list[list[int]]:
    """Per-sample output shape of each layer of ``chain`` applied in a row to a tensor of ``in_shape``.

    Args:
        chain: ``(layer, params)`` pairs (catalogue layer names and constructor arguments).
        in_shape: per-sample input shape (batch excluded).

    Returns:
        One shape (list of int, -1 for an unknown dimension) per layer, from a symbolic Keras call.

    Raises:
        Exception: whatever Keras raises for a layer it rejects on that input.
    """
    keras = graph.keras_module()
    tensors = {graph.INPUT: keras.Input(shape=tuple(in_shape))}
    prev: str = graph.INPUT
    out: list[list[int]] = []
    for k, (layer, params) in enumerate(chain):
        name = f"probe_{k}"
        res = graph.call_node({"name": name, "layer": layer, "params": params, "inputs": [prev]}, tensors)
        out.append([int(d) if d is not None else -1 for d in res.shape[1:]])
        prev = name
    return out


def restore_chain(shape: list[int], target: list[int]) -> list[tuple[str, dict]] | None:
    """Catalogue layers that turn a tensor of per-sample ``shape`` back into ``target`` (NLA/LResh inline).

    Args:
        shape: per-sample shape the inserted layers produce.
        target: per-sample shape the readers of the tensor expect.

    Returns:
        ``[]`` when the shapes are equal; ``[Reshape(target)]`` when the element counts are; for equal ranks a
        ``Dense(units=target[-1])`` when the channel counts differ (at most :data:`MAX_ADAPTER_WEIGHTS`
        weights) followed by ZeroPadding/Cropping of the spatial axes that differ; None otherwise (a rank
        change with another element count, an unknown dimension, spatial ranks above 3, a too large Dense).
    """
    shape, target = [int(d) for d in shape], [int(d) for d in target]
    if shape == target:
        return []
    if -1 in shape or -1 in target or min(shape + target) < 1:
        return None
    if _size(shape) == _size(target):
        return [("Reshape", {"target_shape": list(target)})]
    if len(shape) != len(target) or len(target) > 4:
        return None
    chain: list[tuple[str, dict]] = []
    if shape[-1] != target[-1]:
        if shape[-1] * target[-1] > MAX_ADAPTER_WEIGHTS:
            return None
        chain.append(("Dense", {"units": target[-1]}))
    spatial = len(target) - 1
    if spatial:
        pad = [[max(b - a, 0) // 2, max(b - a, 0) - max(b - a, 0) // 2] for a, b in zip(shape[:-1], target[:-1])]
        crop = [[max(a - b, 0) // 2, max(a - b, 0) - max(a - b, 0) // 2] for a, b in zip(shape[:-1], target[:-1])]
        if any(sum(p) for p in pad):
            chain.append((f"ZeroPadding{spatial}D", {"padding": pad[0] if spatial == 1 else pad}))
        if any(sum(c) for c in crop):
            chain.append((f"Cropping{spatial}D", {"cropping": crop[0] if spatial == 1 else crop}))
    return chain


def insert_inline(spec: dict, src: str, src_shape: list[int], chain: list[tuple[str, dict]]) -> dict | None:
    """``chain`` inserted between tensor ``src`` and every layer reading it (and the model output it is).

    The chain's layers read ``src`` one after the other, then the layers of :func:`restore_chain` bring the
    tensor back to ``src_shape``, and ``src``'s readers read the last of them; so the model's other shapes do
    not change. The layers are checked by a symbolic Keras call on ``src_shape``.

    Args:
        spec: a built spec (node shapes recorded).
        src: name of the tensor (a node or :data:`graph.INPUT`).
        src_shape: its per-sample shape.
        chain: ``(layer, params)`` pairs to insert.

    Returns:
        The new spec (the inserted nodes carry their shapes; restoring nodes are marked ``"adapter": True``),
        or None when Keras rejects a layer of the chain on that input or the shape cannot be restored.
    """
    try:
        shapes = chain_shapes(chain, src_shape)
        back = restore_chain(shapes[-1], src_shape)
        if back is None:
            return None
        if back:
            shapes = chain_shapes(chain + back, src_shape)
            if shapes[-1] != [int(d) for d in src_shape]:
                return None
    except Exception:
        return None
    new = graph.clone(spec)
    _splice(new, src, chain + back, shapes, adapters_from=len(chain))
    return new


def _splice(spec: dict, src: str, layers: list[tuple[str, dict]], shapes: list[list[int]], adapters_from: int) -> None:
    """In place: ``layers`` (with their per-sample ``shapes``) one after the other between tensor ``src`` and
    every layer reading it (and the model output it is); layers from index ``adapters_from`` on are marked
    ``"adapter": True`` (shape-restoring layers). Shared by :func:`insert_inline` and :func:`_restore_output`."""
    readers = graph.consumers(spec, src)
    idx = 0 if src == graph.INPUT else graph.node_names(spec).index(src) + 1
    prev = src
    for k, ((layer, params), shape) in enumerate(zip(layers, shapes)):
        node: dict = {"name": graph.fresh_name(spec, layer), "layer": layer, "params": params, "inputs": [prev],
                      "shape": shape}
        if k >= adapters_from:
            node["adapter"] = True
        spec["nodes"].insert(idx, node)
        idx += 1
        prev = node["name"]
    for n in readers:
        n["inputs"] = [prev if i == src else i for i in n["inputs"]]
    spec["outputs"] = [prev if o == src else o for o in spec["outputs"]]


def _place(spec: dict, src: str, src_shape: list[int], chain: list[tuple[str, dict]]) -> dict:
    """NLA/LResh placement: ``chain`` inline after ``src`` (:func:`insert_inline`), else as a new output branch."""
    new = insert_inline(spec, src, src_shape, chain)
    if new is not None:
        return new
    if len(chain) == 1:
        return _insert_after(spec, src, src_shape, *chain[0])
    return _insert_chain(spec, src, chain)


def _pair_options(spec: dict, cands_of: Callable[[int], list[str]]) -> dict[tuple[str | None, str], list[tuple[str, list[int]]]]:
    """Every (source layer type, candidate layer) option of the model: ``{(A, B): [(tensor, shape), ...]}`` over
    *all* tensors of the model (A is None for the model input), B from ``cands_of(rank)`` of the tensor.

    The authors' ``ArchitectureUtils.choose_new_layer`` and ``find_new_edges`` (``maybeLee/COMET``) look at
    every layer class present in the model and every candidate class, keep the pairs whose ranks fit
    (``scan_by_ndim``), and split them into uncovered and covered ones; this is that enumeration."""
    out: dict[tuple[str | None, str], list[tuple[str, list[int]]]] = {}
    cache: dict[int, list[str]] = {}
    for src, shape, kind in _source_choices(spec):
        entry = catalogue.get(kind) if kind else None
        a = entry.name if entry else None
        rank = len(shape) + 1
        if rank not in cache:
            cache[rank] = cands_of(rank)
        for c in cache[rank]:
            out.setdefault((a, c), []).append((src, shape))
    return out


def _pick_pair(spec: dict, cands_of: Callable[[int], list[str]], cov: Coverage, rng: random.Random,
               ) -> tuple[str, list[int], str] | None:
    """A (source tensor, its shape, new layer) choice in MEMO's "diverse" mode: an uncovered (source type, layer)
    pair whose layer type is also unseen first, then an unseen layer type, then any uncovered pair, then any
    option at random; None when no tensor of the model has a candidate layer.

    The options are every (layer type present in the model, candidate) pair whose ranks fit
    (:func:`_pair_options`), drawn uniformly among the pairs of the first non-empty class, then a tensor of
    that source type uniformly — as the authors' ``choose_new_layer`` does for NLA (MEMO/COMET §3.3: the new
    layer is chosen so that its pair with the preceding layer is not yet covered). twinspect used to look at 12 random
    tensors only, so in a 60–150-layer reduced seed the uncovered pairs of rare source types (a merge, a
    pooling, an inserted layer) were almost never offered once the common types' pairs were covered."""
    opts = _pair_options(spec, cands_of)
    if not opts:
        return None
    fresh = [k for k in opts if k[0] is not None and k not in cov.pairs]
    unseen = [k for k in opts if k[1] not in cov.types]
    both = [k for k in fresh if k[1] not in cov.types]
    for group in (both, unseen, fresh, list(opts)):
        if group:
            key = rng.choice(sorted(group, key=str))
            src, shape = rng.choice(opts[key])
            return src, shape, key[1]
    return None


def _nla_one(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """One NLA step: insert a new layer after a compatible tensor (inline, else as a new output branch: :func:`_place`).

    Unseen layer types come first: when no tensor of the model has a rank the unseen type accepts, a
    Reshape to such a rank is inserted before it (so 3-D layers are reached from image models). Otherwise
    the (source, layer) choice prefers an uncovered layer pair.
    """
    unseen = [la.name for la in catalogue.LAYERS if la.arity == 1 and la.name not in cov.types]
    srcs = _source_choices(spec)
    if unseen:
        layer = rng.choice(unseen)
        ranks = catalogue.BY_NAME[layer].in_ranks
        ok = [s for s in srcs if len(s[1]) + 1 in ranks]
        if ok:
            src, shape, _ = rng.choice(ok)
            return _place(spec, src, shape, [(layer, random_params(layer, shape, rng, cov))])
        src, shape, _ = rng.choice(srcs)
        target = reshape_target(shape, rng, rank=rng.choice([r - 1 for r in ranks if r >= 2]))
        chain = [("Reshape", {"target_shape": target}), (layer, random_params(layer, target, rng, cov))]
        return _place(spec, src, shape, chain)
    pick = _pick_pair(spec, _candidates, cov, rng)
    if pick is None:
        return None
    src, shape, layer = pick
    return _place(spec, src, shape, [(layer, random_params(layer, shape, rng, cov))])


def _lresh_one(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """One LResh step: insert a reshaping layer (Flatten, Reshape, Permute, Cropping, ZeroPadding, UpSampling, ...)
    (inline, else as a new output branch: :func:`_place`), preferring an uncovered (source, reshaping layer)
    pair and then an unseen reshaping type."""
    pick = _pick_pair(spec, lambda rank: _candidates(rank, list(_RESHAPING)), cov, rng)
    if pick is None:
        return None
    src, shape, layer = pick
    return _place(spec, src, shape, [(layer, random_params(layer, shape, rng, cov))])


def lmerge(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LMerge: merge two tensors of the same shape with a merging layer (unseen ones first)."""
    srcs = _source_choices(spec)
    by_shape: dict[tuple, list[str]] = {}
    for name, shape, _ in srcs:
        by_shape.setdefault(tuple(shape), []).append(name)
    groups = [v for v in by_shape.values() if len(v) >= 2]
    if not groups:
        a, shape, _ = rng.choice(srcs)
        b = a
    else:
        pair = rng.sample(rng.choice(groups), 2)
        a, b = pair
        shape = list(next(s for n, s, _ in srcs if n == a))
    merges = [m for m in _MERGING if len(shape) + 1 in catalogue.BY_NAME[m].in_ranks]
    merges += [m for m in ("Attention", "AdditiveAttention", "MultiHeadAttention") if len(shape) == 2]
    layer = rng.choice([m for m in merges if m not in cov.types] or merges)
    names = graph.node_names(spec)
    first, second = sorted((a, b), key=lambda n: -1 if n == graph.INPUT else names.index(n))
    return _insert_after(spec, first, shape, layer, random_params(layer, shape, rng, cov), (second,))


def _lconn_one(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """One LConn step: connect a layer of type A to a new layer of type B with (A, B) an uncovered legal pair,
    as a new output branch. The pair is drawn among the uncovered pairs of *every* layer of the model
    (:func:`_pair_options`; the authors' ``find_new_edges`` enumerates every layer class of the model); a model
    with no catalogue layer gets an NLA step instead; None when every pair it offers is covered."""
    if not any(catalogue.get(n["layer"]) for n in spec["nodes"]):
        return _nla_one(spec, cov, rng)
    opts = _pair_options(spec, _candidates)
    fresh = sorted((k for k in opts if k[0] is not None and k not in cov.pairs), key=str)
    if not fresh:
        return None
    a, layer = rng.choice(fresh)
    src, shape = rng.choice(opts[(a, layer)])
    return _insert_after(spec, src, shape, layer, random_params(layer, shape, rng, cov))


#: CShape/CMode try at most this many values for one parameter before giving up on it (the authors'
#: ``choose_layers_for_mparam`` redraws an already covered value up to 10 times, ``try_time > 10``)
MAX_VALUE_TRIES = 10


def _open_labels(layer: str, p: catalogue.Param, seen: set[tuple[str, str, str]]) -> list[str]:
    """Labels of parameter ``p`` of ``layer`` not in ``seen`` (the uncovered values or buckets)."""
    return [lab for lab in p.labels() if (layer, p.name, lab) not in seen]


def _value_of(p: catalogue.Param, lab: str, rng: random.Random):
    """A value of parameter ``p`` in its value or bucket ``lab``."""
    if p.kind == "mode":
        return p.values[p.labels().index(lab)]
    lo, hi = next((b[1], b[2]) for b in p.buckets if b[0] == lab)
    if p.kind == "float":
        return round(rng.uniform(lo, hi), 3) if hi > 0 else 0.0
    return rng.randint(int(lo), int(hi))


def _accepts(spec: dict, node: dict, params: dict) -> list[int] | None:
    """The per-sample output shape of ``node`` with constructor arguments ``params`` on its recorded input
    shapes (a symbolic Keras call), or None when Keras rejects them or an input shape is unknown."""
    keras = graph.keras_module()
    tensors: dict = {}
    for i in node["inputs"]:
        shape = graph.shape_of(spec, i)
        if not shape or -1 in shape:
            return None
        tensors[i] = keras.Input(shape=tuple(shape))
    try:
        out = graph.call_node({**node, "name": "probe", "params": params}, tensors)
    except Exception:
        return None
    return [int(d) if d is not None else -1 for d in out.shape[1:]]


def _fix_strided_dilation(layer: str, tp: dict, just_set: set[str], rng: random.Random) -> None:
    """Keras rejects strides > 1 with dilation_rate > 1 on :data:`_NO_STRIDED_DILATION`: one of the two goes back
    to 1, the one not in ``just_set`` (random when both or neither are)."""
    if layer in _NO_STRIDED_DILATION and _first(tp.get("strides", 1)) > 1 and _first(tp.get("dilation_rate", 1)) > 1:
        keep = [k for k in ("strides", "dilation_rate") if k in just_set]
        reset = ("dilation_rate" if keep == ["strides"] else "strides") if len(keep) == 1 else rng.choice(("strides", "dilation_rate"))
        tp[reset] = [1] * len(tp[reset]) if isinstance(tp[reset], (list, tuple)) else 1


def change_params(spec: dict, cov: Coverage, rng: random.Random, kinds: tuple[str, ...], count: int,
                  only: dict[str, tuple[str, ...]] | None = None) -> dict | None:
    """CShape/CMode in MEMO's "diverse" mode: on each of ``count`` distinct layers (fewer when the model has fewer
    such layers) set 1 to :data:`MAX_PARAMS_PER_LAYER` parameters of ``kinds`` to uncovered values; None when
    the model has no such layer. ``only`` (layer type → parameter names), when given, restricts the layers and
    parameters that may change (MEMO_o's Audee operator: Audee's layer APIs and parameters).

    "Diverse" is the authors' rule for every choice of their operators (``maybeLee/COMET``, ``mutation_mode``:
    "first select the global option, if no global option is available, randomly choose one"), applied here
    at each level of the choice (MEMO/COMET §3.3, layer parameter mutation):

    * *layers*: a layer whose type still has an uncovered value of ``kinds`` first (uniform among them),
      then any layer. Before, layers were drawn uniformly from the model, so in a reduced ResNet50 or
      Xception (dozens of Conv2D, BatchNormalization and Activation layers) the few layers of rarer types
      (Conv1D, GRU, Conv3D inserted by NLA) were almost never the ones mutated once Conv2D's values were
      covered — the single largest block of uncovered parameter values at the end of a campaign;
    * *parameters*: those with an uncovered value first (the authors skip a numeric parameter whose space is
      already covered), then the others;
    * *values*: the uncovered values or buckets in random order, then the covered ones; each candidate is
      checked by a symbolic Keras call of the layer on its recorded input shapes, and the first one Keras
      accepts is kept (at most :data:`MAX_VALUE_TRIES` tries; the authors redraw up to 10 times). Before,
      one value was drawn and a kernel, pool or stride larger than the input made the whole mutant invalid
      (about half of all CShape mutants of the reduced large seeds).

    When a new shape parameter changes the layer's output shape, the layers of :func:`restore_chain` bring it
    back for the layer's readers (marked ``"adapter": True``), as NLA's inline insertion does (the authors'
    ``NL_mut`` with ``revert_shape``): without it a changed filter count or stride inside a residual block or
    before a Concatenate made the mutant invalid. The authors' ``mutate_param`` does not restore the shape;
    twinspect does, so that such a change is tested instead of rejected. When the shape cannot be restored
    (:func:`restore_chain` returns None) the change is kept as it is and the caller's build decides.
    """
    def mutable(node: dict) -> list[catalogue.Param]:
        lay = catalogue.get(node["layer"])
        if lay is None or (only is not None and lay.name not in only):
            return []
        return [p for p in lay.params if p.kind in kinds and (only is None or p.name in only[lay.name])]

    nodes = [n for n in spec["nodes"] if mutable(n)]
    if not nodes:
        return None
    new = graph.clone(spec)
    seen_all = set(cov.params)

    def is_open(node: dict) -> bool:
        name = catalogue.get(node["layer"]).name  # type: ignore[union-attr]
        return any(_open_labels(name, p, seen_all) for p in mutable(node))

    picked: list[dict] = []
    for _ in range(min(count, len(nodes))):
        left = [n for n in nodes if n not in picked]
        fresh = [n for n in left if is_open(n)]
        node = rng.choice(fresh or left)
        picked.append(node)
        lay = catalogue.get(node["layer"])
        assert lay is not None
        target = next(n for n in new["nodes"] if n["name"] == node["name"])
        params = mutable(node)
        rng.shuffle(params)
        params.sort(key=lambda p: not _open_labels(lay.name, p, seen_all))  # stable: open ones first, shuffled
        chosen = params[:min(rng.randint(1, MAX_PARAMS_PER_LAYER), len(params))]
        just_set: set[str] = set()
        for p in chosen:
            opened = _open_labels(lay.name, p, seen_all)
            rng.shuffle(opened)
            rest = [lab for lab in p.labels() if lab not in opened]
            rng.shuffle(rest)
            for lab in (opened + rest)[:MAX_VALUE_TRIES]:
                value = _value_of(p, lab, rng)
                old = target["params"].get(p.name)
                if p.name in ("kernel_size", "pool_size", "strides", "dilation_rate", "cropping", "padding", "size") \
                        and isinstance(old, (list, tuple)) and old and not isinstance(old[0], (list, tuple)):
                    value = [value] * len(old)
                trial = {**target["params"], p.name: value}
                _fix_strided_dilation(lay.name, trial, just_set | {p.name}, rng)
                if _accepts(new, target, trial) is not None:
                    target["params"] = trial
                    just_set.add(p.name)
                    label = p.label_of(value)
                    if label is not None:
                        seen_all.add((lay.name, p.name, label))
                    break
        _restore_output(new, target)
    return new


def _restore_output(spec: dict, node: dict) -> None:
    """After a parameter change of ``node`` (in ``spec``, in place): when its output shape differs from the one
    recorded, insert the :func:`restore_chain` layers between it and its readers (and the model output it is),
    so the rest of the model sees the old shape. Nothing when the shape is unchanged, unknown or cannot be
    restored."""
    old = node.get("shape")
    out = _accepts(spec, node, node["params"])
    if not old or out is None or out == old:
        return
    back = restore_chain(out, old)
    if not back:
        return
    try:
        shapes = chain_shapes(back, out)
    except Exception:
        return
    if shapes[-1] != [int(d) for d in old]:
        return
    _splice(spec, node["name"], back, shapes, adapters_from=0)
    node["shape"] = out


def _first(value) -> int:
    """The first element of an int tuple/list parameter (``kernel_size=(3, 3)`` → 3), or the int itself."""
    return int(value[0]) if isinstance(value, (list, tuple)) and value else int(value)


def layers_per_application(rng: random.Random) -> int:
    """How many layers one NLA/LResh/CShape/CMode application touches: uniform in 1..5 (MEMO)."""
    return rng.randint(1, MAX_LAYERS_PER_APPLICATION)


def _repeat(step: Callable[[dict, Coverage, random.Random], dict | None], spec: dict, cov: Coverage,
            rng: random.Random) -> dict | None:
    """Apply ``step`` :func:`layers_per_application` times in a row, each step seeing the coverage the
    previous ones would add (so the steps spread over different unseen items); stops early when a step
    does not apply. None when the first step does not apply."""
    out, local = None, cov
    for _ in range(layers_per_application(rng)):
        nxt = step(out if out is not None else spec, local, rng)
        if nxt is None:
            break
        out = nxt
        local = local.copy()
        local.update(model_coverage(out))
    return out


def nla(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """NLA: insert 1–5 new layers, each after a compatible tensor of the model and before that tensor's readers
    (restoring its shape for them; a new output branch when it cannot be restored: :func:`insert_inline`).

    Unseen layer types come first: when no tensor of the model has a rank the unseen type accepts, a
    Reshape to such a rank is inserted before it (so 3-D layers are reached from image models). Otherwise
    the (source, layer) choice prefers an uncovered layer pair. Later steps of the same application may
    insert after the layers earlier steps inserted inline (their shapes are known), not after branch layers.
    """
    return _repeat(_nla_one, spec, cov, rng)


def lconn(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LConn: 1–5 new edges, each from a layer of type A to a new layer of type B with (A, B) an uncovered legal
    pair (a new output branch), as the authors' ``connect_layers`` adds 1 to ``max_num`` edges."""
    return _repeat(_lconn_one, spec, cov, rng)


def lresh(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LResh: insert 1–5 reshaping layers (Flatten, Reshape, Permute, Cropping, ZeroPadding, UpSampling, ...)
    inline as NLA does, each preferring an uncovered (source, reshaping layer) pair and then an unseen
    reshaping type."""
    return _repeat(_lresh_one, spec, cov, rng)


def cshape(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """CShape: on 1–5 layers, set 1–3 shape parameters (filters, kernel_size, units, strides, ...) to unseen values."""
    return change_params(spec, cov, rng, ("shape", "float"), layers_per_application(rng))


def cmode(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """CMode: on 1–5 layers, set 1–3 mode parameters (initialiser, regulariser, padding, activation, ...) to
    unseen values."""
    return change_params(spec, cov, rng, ("mode",), layers_per_application(rng))


def nan(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """NaN: feed NaN or ±Inf into the first layers' input (a fraction of the model input entries)."""
    new = graph.clone(spec)
    new["inject"] = {"value": rng.choice(("nan", "inf", "-inf")), "fraction": rng.choice((0.001, 0.01, 0.1))}
    return new


def _shape_preserving(spec: dict) -> list[dict]:
    return [n for n in spec["nodes"] if len(n["inputs"]) == 1 and n.get("shape") is not None
            and n["shape"] == graph.shape_of(spec, n["inputs"][0])]


def remove_node(spec: dict, name: str) -> dict:
    """A copy of ``spec`` without single-input node ``name``; its consumers read its input instead."""
    new = graph.clone(spec)
    node = next(n for n in new["nodes"] if n["name"] == name)
    src = node["inputs"][0]
    new["nodes"] = [n for n in new["nodes"] if n["name"] != name]
    for n in new["nodes"]:
        n["inputs"] = [src if i == name else i for i in n["inputs"]]
    new["outputs"] = [src if o == name else o for o in new["outputs"]]
    new["outputs"] = [o for o in dict.fromkeys(new["outputs"]) if o != graph.INPUT]
    return graph.prune(new)


def lemon_la(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LEMON LA: insert a shape-preserving layer inside the chain."""
    src, shape, _ = rng.choice(_source_choices(spec))
    cands = [c for c in _candidates(len(shape) + 1) if c in _SHAPE_SAFE]
    if not cands:
        return None
    layer = rng.choice(cands)
    new = graph.clone(spec)
    name = graph.fresh_name(new, layer)
    for n in new["nodes"]:
        n["inputs"] = [name if i == src else i for i in n["inputs"]]
    idx = 0 if src == graph.INPUT else graph.node_names(new).index(src) + 1
    new["nodes"].insert(idx, {"name": name, "layer": layer, "params": random_params(layer, shape, rng), "inputs": [src]})
    new["outputs"] = [name if o == src else o for o in new["outputs"]]
    return new


def lemon_lr(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LEMON LR: remove a layer whose output shape equals its input shape."""
    cands = _shape_preserving(spec)
    return remove_node(spec, rng.choice(cands)["name"]) if cands else None


def lemon_lc(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LEMON LC: copy a shape-preserving layer right after itself."""
    cands = [n for n in _shape_preserving(spec) if n["layer"] in _SHAPE_SAFE or n["layer"].startswith("Conv")]
    if not cands:
        return None
    node = rng.choice(cands)
    new = graph.clone(spec)
    name = graph.fresh_name(new, node["layer"])
    for n in new["nodes"]:
        n["inputs"] = [name if i == node["name"] else i for i in n["inputs"]]
    idx = graph.node_names(new).index(node["name"]) + 1
    new["nodes"].insert(idx, {"name": name, "layer": node["layer"], "params": dict(node["params"]), "inputs": [node["name"]]})
    new["outputs"] = [name if o == node["name"] else o for o in new["outputs"]]
    return new


def lemon_ar(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """LEMON AR: replace the activation of a layer that has one."""
    cands = [n for n in spec["nodes"] if "activation" in n.get("params", {})]
    if not cands:
        return None
    new = graph.clone(spec)
    pick = rng.choice(cands)["name"]
    node = next(n for n in new["nodes"] if n["name"] == pick)
    node["params"]["activation"] = rng.choice(catalogue.ACTIVATIONS)
    return new


OPERATORS: dict[str, Callable[[dict, Coverage, random.Random], dict | None]] = {
    "NLA": nla, "LResh": lresh, "LMerge": lmerge, "LConn": lconn, "CShape": cshape, "CMode": cmode, "NaN": nan,
    "LA": lemon_la, "LR": lemon_lr, "LC": lemon_lc, "AR": lemon_ar,
}


def apply(op: str, spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """Apply operator ``op`` (a key of :data:`OPERATORS`); returns the mutant spec or None.

    Raises:
        KeyError: unknown operator name.
    """
    return graph.as_mutant(OPERATORS[op](spec, cov, rng))
