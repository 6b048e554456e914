"""MEMO_o's operators: the mutation operators of the three tools before MEMO — DeepMutation, LEMON and Audee.

MEMO/COMET's ablation MEMO_o keeps MEMO's search and coverage but replaces its operators by those of prior
work. The authors' code (``maybeLee/COMET``, ``scripts/mutation/structure_mutation_generators.py``,
``baseline_mutate_ops``) uses 13 (:data:`MEMO_O_OPERATORS`):

* DeepMutation's model-level weight rules (Ma et al., "DeepMutation: Mutation Testing of Deep Learning
  Systems", ISSRE 2018), as LEMON's code implements them (``GF_mut``, ``WS_mut``, ``NEB_mut``, ``NAI_mut``,
  ``NS_mut``): **GF** (Gaussian fuzzing of one layer's weights), **WS** (shuffle the incoming weights of
  output neurons of one Dense/Conv2D layer), **NEB** (block neurons: zero their incoming weights and
  bias), **NAI** (invert neurons' activation: negate their incoming weights and bias) and **NS** (switch
  two neurons). The authors call them with ``mutation_ratio = 1`` (:data:`MUTATION_RATIO`): GF perturbs
  every weight of the layer, NEB blocks and NAI inverts every neuron of it;
* LEMON's seven intact-layer rules (LA, LC, LR, LS, MLA, ARem, ARep: :mod:`twinspect.dl.fuzz.lemon`);
* **Audee** (Guo et al., "Audee: Automated Testing for Deep Learning Frameworks", ASE 2020): COMET's
  ``mutate_param`` in Audee's configuration — one layer (``max_layer_num = 1``) of Audee's layer APIs,
  1–3 of Audee's parameters (:data:`AUDEE_PARAMS`), values chosen in MEMO's "diverse" mode.

twinspect's specs carry no weights (each saved model draws them from the campaign seed), so a weight rule
adds a *weight edit* to the spec — ``spec["weight_edits"]``: ``{"rule", "layer", "seed"}`` — that
:func:`apply_weight_edits` carries out on the built model right after its weights are initialised (the
campaign's seeded build), so every backend loads the edited weights from the saved file. A weight edit
adds no coverage (coverage counts layer types, pairs and parameters), so, as in the authors' MEMO_o, such a
mutant never joins the pool; it is tested for inconsistencies and crashes like any other.

Deliberate differences: GF picks among layers that have weights (the authors draw any layer, and a
weightless one gives an unchanged model); Audee's parameters are those the catalogue models
(``data_format``, the recurrent dropouts, LSTM/GRU ``implementation``, ``Dropout.seed`` and Keras 2's
``LeakyReLU.alpha`` are not in it, nor ``kernel_initializer`` of the depthwise and separable
convolutions, which Keras 3 does not have; ``ThresholdedReLU`` and ``Embedding`` are not catalogue layers); a
changed output shape is restored for the layer's readers as CShape does
(:func:`twinspect.dl.fuzz.operators.change_params`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from twinspect.dl.fuzz import graph, lemon, operators
from twinspect.dl.fuzz.coverage import Coverage

WEIGHT_RULES = ("WS", "GF", "NEB", "NAI", "NS")
#: the authors' ``baseline_mutate_ops`` order
MEMO_O_OPERATORS = WEIGHT_RULES + ("ARem", "ARep", "LA", "LC", "LR", "LS", "MLA", "Audee")
#: fraction of the weights (GF) or neurons (WS, NEB, NAI) a weight rule changes; the authors' default (1)
MUTATION_RATIO = 1.0
#: GF's noise standard deviation, as a fraction of the standard deviation of the weights it perturbs
GF_STD = 0.1
#: DeepMutation's neuron rules (NEB, NAI, NS) act on these layers (LEMON's ``weight_change_white_list``
#: without the weightless ones: pooling layers and activations)
NEURON_LAYERS = ("Dense", "Conv1D", "Conv2D", "Conv3D", "DepthwiseConv2D", "Conv2DTranspose", "Conv3DTranspose")
#: WS shuffles the weights of these layers only (the authors' ``WS_mut``)
SHUFFLE_LAYERS = ("Dense", "Conv2D")
#: layer types with trainable or non-trainable weights that GF can perturb
WEIGHTED_LAYERS = NEURON_LAYERS + (
    "Conv1DTranspose", "SeparableConv1D", "SeparableConv2D", "DepthwiseConv1D", "BatchNormalization",
    "LayerNormalization", "PReLU", "SimpleRNN", "LSTM", "GRU", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "Embedding")
#: Audee's layer APIs and their mutable parameters (``scripts/evaluation/audee_api_config.json`` of the
#: authors' code), restricted to what the catalogue models
AUDEE_PARAMS: dict[str, tuple[str, ...]] = {
    "Conv2D": ("filters", "kernel_size", "strides", "padding", "activation", "kernel_initializer"),
    "DepthwiseConv2D": ("kernel_size", "strides", "padding", "activation"),
    "SeparableConv2D": ("filters", "kernel_size", "strides", "padding", "activation"),
    "MaxPooling2D": ("pool_size", "strides", "padding"),
    "AveragePooling2D": ("pool_size", "padding"),
    "ZeroPadding2D": ("padding",),
    "Dense": ("units",),
    "Activation": ("activation",),
    "ReLU": ("max_value", "negative_slope", "threshold"),
    "PReLU": ("alpha_initializer",),
    "ELU": ("alpha",),
    "BatchNormalization": ("momentum", "epsilon"),
    "SimpleRNN": ("units", "activation"),
    "LSTM": ("units", "recurrent_activation", "unit_forget_bias"),
    "GRU": ("units", "recurrent_activation"),
    "GaussianNoise": ("stddev",),
    "Dropout": ("rate",),
    "ConvLSTM2D": ("filters", "kernel_size", "strides", "padding", "activation", "recurrent_activation",
                   "kernel_initializer"),
    "Conv2DTranspose": ("filters", "kernel_size", "strides", "padding", "activation", "kernel_initializer"),
}


def _weight_rule(rule: str, layers: tuple[str, ...]) -> Callable[[dict, Coverage, random.Random], dict | None]:
    def op(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
        cands = [n["name"] for n in spec["nodes"] if n["layer"] in layers]
        if not cands:
            return None
        new = graph.clone(spec)
        edits = new.setdefault("weight_edits", [])
        edits.append({"rule": rule, "layer": rng.choice(cands), "seed": rng.randrange(2 ** 31)})
        return new
    op.__name__ = rule.lower()
    op.__doc__ = f"DeepMutation {rule}: add a {rule} weight edit of one random layer to a copy of ``spec``."
    return op


def audee(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """Audee's parameter mutation: on one layer of Audee's layer APIs, set 1–3 of Audee's parameters
    (:data:`AUDEE_PARAMS`) to values not yet covered (MEMO's "diverse" choice); None when the model has no
    such layer."""
    return operators.change_params(spec, cov, rng, ("shape", "float", "mode"), 1, only=AUDEE_PARAMS)


def _lemon(rule: str) -> Callable[[dict, Coverage, random.Random], dict | None]:
    def op(spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
        return lemon.apply(rule, spec, rng)
    op.__name__ = rule.lower()
    return op


OPERATORS: dict[str, Callable[[dict, Coverage, random.Random], dict | None]] = {
    **{r: _weight_rule(r, SHUFFLE_LAYERS if r == "WS" else NEURON_LAYERS if r in ("NEB", "NAI", "NS")
                       else WEIGHTED_LAYERS) for r in WEIGHT_RULES},
    **{r: _lemon(r) for r in lemon.RULES},
    "Audee": audee,
}


def apply(op: str, spec: dict, cov: Coverage, rng: random.Random) -> dict | None:
    """Apply MEMO_o operator ``op`` (one of :data:`MEMO_O_OPERATORS`) to a built spec.

    Args:
        op: operator name.
        spec: a spec built once (node shapes recorded); not modified.
        cov: the campaign's coverage (Audee prefers uncovered parameter values; the others ignore it).
        rng: the campaign's random generator.

    Returns:
        The mutant spec, or None when the operator does not apply to ``spec``.

    Raises:
        KeyError: unknown operator name.
    """
    return graph.as_mutant(OPERATORS[op](spec, cov, rng))


def _neurons(n: int, rng: np.random.Generator) -> np.ndarray:
    """The authors' ``generate_permutation``: ``floor(n · ratio)`` distinct indices in random order."""
    return rng.permutation(n)[: int(np.floor(n * MUTATION_RATIO))]


def edit_weights(rule: str, weights: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray] | None:
    """One DeepMutation weight rule on a layer's weight arrays (as ``layer.get_weights()`` gives them).

    Args:
        rule: one of :data:`WEIGHT_RULES`.
        weights: the layer's arrays; for the neuron rules ``[kernel, bias]`` with the output neurons on the
            kernel's last axis (Keras' layout for Dense and convolutions).
        rng: numpy generator (the edit's seed).

    Returns:
        New arrays (the inputs are not modified), or None when the rule does not apply to these weights
        (no weights; not exactly ``[kernel, bias]`` with one bias per output neuron for NEB/NAI/NS; fewer
        than two neurons for NS), as the authors' code skips such layers.

    Raises:
        KeyError: unknown rule.
    """
    if not weights:
        return None
    out = [np.array(w, copy=True) for w in weights]
    if rule == "GF":
        for w in out:
            flat = w.reshape(-1)
            idx = _neurons(flat.size, rng)
            if idx.size and np.issubdtype(flat.dtype, np.floating):
                flat[idx] += rng.normal(scale=float(np.sqrt(flat.var())) * GF_STD, size=idx.size).astype(flat.dtype)
        return out
    if rule == "WS":
        for w in out:
            if w.ndim < 2:
                continue  # biases are not shuffled
            cols = w.reshape(-1, w.shape[-1])  # a view: (fan-in, output neurons)
            for j in _neurons(cols.shape[1], rng):
                cols[:, j] = cols[rng.permutation(cols.shape[0]), j]
        return out
    if rule not in ("NEB", "NAI", "NS"):
        raise KeyError(rule)
    if len(out) != 2 or out[0].ndim < 2 or out[1].shape != (out[0].shape[-1],):
        return None
    kernel, bias = out
    if rule == "NS":
        if kernel.shape[-1] < 2:
            return None
        a, b = rng.permutation(kernel.shape[-1])[:2]
        kernel[..., [a, b]] = kernel[..., [b, a]]
        bias[[a, b]] = bias[[b, a]]
        return out
    idx = _neurons(kernel.shape[-1], rng)
    if rule == "NEB":
        kernel[..., idx] = 0
        bias[idx] = 0
    else:
        kernel[..., idx] *= -1
        bias[idx] *= -1
    return out


def apply_weight_edits(model, spec: dict) -> int:
    """Carry out ``spec["weight_edits"]`` on the built Keras ``model`` (in place, in order).

    Args:
        model: ``spec`` built by :func:`twinspect.dl.fuzz.graph.build` (layers named as the spec's nodes),
            weights already initialised.
        spec: the model spec; a spec without edits leaves the model unchanged.

    Returns:
        The number of edits that changed weights (an edit whose layer a later mutation removed, or whose
        rule does not apply to the layer's current weights, changes nothing).
    """
    edits = spec.get("weight_edits")
    if not edits:  # every saved model of every variant is built through here; most have no edits
        return 0
    done = 0
    names = {layer.name for layer in model.layers}
    for edit in edits:
        if edit["layer"] not in names:
            continue
        layer = model.get_layer(edit["layer"])
        new = edit_weights(edit["rule"], layer.get_weights(), np.random.default_rng(int(edit["seed"])))
        if new is not None:
            layer.set_weights(new)
            done += 1
    return done
