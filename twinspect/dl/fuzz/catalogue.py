"""Keras 3 layer catalogue for MEMO-style model generation: parameter spaces, ranks, coverage denominators.

Follows the layer-parameter split of MEMO (Li et al., "MEMO: Coverage-guided Model Generation For Deep
Learning Library Testing", ICSE 2023 / COMET, TOSEM 2023): every layer API has *mode* parameters
(initialisers, regularisers, padding, activation, ... — categorical values) and *shape* parameters
(filters, kernel_size, units, strides, ... — integers, bucketed for coverage). The catalogue also lists
the tensor ranks (batch axis included) each layer accepts and the rank it outputs, which defines which
ordered layer pairs can legally follow each other.

Denominators of the three coverage criteria (see :func:`denominators`):

* layer type: number of layer APIs in the catalogue;
* layer pair: ordered pairs ``(A, B)`` such that some output rank of ``A`` is an input rank of ``B``;
* layer parameter: the number of (layer, parameter, value-or-bucket) triples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh", "softmax", "softplus", "softsign", "selu", "elu",
               "exponential", "relu6", "silu", "gelu", "hard_sigmoid", "leaky_relu", "mish")
INITIALIZERS = ("glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "lecun_uniform", "lecun_normal",
                "zeros", "ones", "random_normal", "random_uniform", "truncated_normal", "orthogonal")
REGULARIZERS = (None, "l1", "l2", "l1_l2")
BOOL = (True, False)

#: Integer buckets: (label, low, high) inclusive. Each space runs from the smallest value Keras 3 accepts
#: to a very large one, because real bugs sit at the edges (MEMO/COMET's ONNX Runtime core dump needed
#: ``Dense(units=0)``). Keras 3.15 rejects 0 at construction for ``units``, ``filters``, ``kernel_size``,
#: ``strides``, ``dilation_rate``, ``depth_multiplier``, ``pool_size``, ``size``, ``n`` and ``groups``
#: (``tests/dl/fuzz/test_coverage_denominators.py`` checks several), so those spaces start at 1: a 0 there would be
#: an invalid model, never a test of a library. Where 0 is accepted (``padding``, ``cropping``) it is a
#: bucket, and so is GroupNormalization's ``groups=-1`` (instance normalisation).
Bucket = tuple[str, int, int]
SIZE_BUCKETS: tuple[Bucket, ...] = (("1", 1, 1), ("2-3", 2, 3), ("4-7", 4, 7), ("8-15", 8, 15), ("16-63", 16, 63),
                                    ("64-255", 64, 255), ("256-2048", 256, 2048))
KERNEL_BUCKETS: tuple[Bucket, ...] = (("1", 1, 1), ("2", 2, 2), ("3", 3, 3), ("4-5", 4, 5))
STRIDE_BUCKETS: tuple[Bucket, ...] = (("1", 1, 1), ("2", 2, 2), ("3", 3, 3), ("4-16", 4, 16))
SMALL_BUCKETS: tuple[Bucket, ...] = (("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4))
LARGE_SMALL_BUCKETS: tuple[Bucket, ...] = SMALL_BUCKETS + (("5-16", 5, 16),)
ZERO_SMALL_BUCKETS: tuple[Bucket, ...] = (("0", 0, 0),) + SMALL_BUCKETS
ZERO_LARGE_BUCKETS: tuple[Bucket, ...] = (("0", 0, 0),) + LARGE_SMALL_BUCKETS
GROUP_BUCKETS: tuple[Bucket, ...] = (("-1", -1, -1),) + SMALL_BUCKETS
FLOAT_BUCKETS: tuple[tuple[str, float, float], ...] = (("0", 0.0, 0.0), ("(0,0.25]", 1e-12, 0.25),
                                                        ("(0.25,0.5]", 0.25, 0.5), ("(0.5,1)", 0.5, 0.999),
                                                        ("1", 1.0, 1.0))


@dataclass(frozen=True)
class Param:
    """One layer parameter and its value space.

    Attributes:
        name: keyword argument of the Keras layer constructor.
        kind: ``"mode"`` (categorical, ``values``) or ``"shape"`` (integer, ``buckets``) or ``"float"``
            (a float in [0, 1], ``buckets`` of :data:`FLOAT_BUCKETS`).
        values: the categorical values (mode parameters).
        buckets: ``(label, low, high)`` integer/float ranges (shape and float parameters).
    """

    name: str
    kind: str
    values: tuple = ()
    buckets: tuple = ()

    def labels(self) -> list[str]:
        """All coverage labels of this parameter (one per value or bucket)."""
        if self.kind == "mode":
            return [value_label(v) for v in self.values]
        return [b[0] for b in self.buckets]

    def label_of(self, value) -> str | None:
        """The coverage label of ``value`` or None when it is outside the value space.

        Integer tuples (``kernel_size=(3, 3)``) are labelled by their first element.
        """
        if self.kind == "mode":
            lab = value_label(value)
            return lab if lab in self.labels() else None
        if isinstance(value, (list, tuple)):
            if not value:
                return None
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        for lab, lo, hi in self.buckets:
            if lo <= value <= hi:
                return lab
        return None


def value_label(value) -> str:
    """Normalise a mode value to its label: ``None`` → ``"None"``, Keras config dicts → snake_case class name."""
    if isinstance(value, dict):
        name = value.get("class_name") or value.get("config", {}).get("name") or "dict"
        if name in ("L1L2",):
            cfg = value.get("config", {})
            l1, l2 = cfg.get("l1", 0) or 0, cfg.get("l2", 0) or 0
            return "l1_l2" if (l1 and l2) else ("l1" if l1 else ("l2" if l2 else "None"))
        return _snake(str(name))
    return str(value)


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and (not name[i - 1].isupper() or (i + 1 < len(name) and name[i + 1].islower())):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


@dataclass(frozen=True)
class LayerSpec:
    """One layer API of the catalogue.

    Attributes:
        name: Keras class name (``keras.layers.<name>``).
        category: convolution, pooling, recurrent, normalization, regularization, activation, reshaping,
            merging, core, attention.
        in_ranks: accepted input ranks, batch axis included (4 = NHWC images).
        params: the parameters with value spaces (mode and shape).
        out_rank: rule mapping input rank to output rank: ``"same"``, ``"minus1"``, ``"2"``, ``"3"``,
            ``"plus1"``, ``"rnn"`` (2 or 3 depending on ``return_sequences``), ``"convlstm"`` (rank−1 or rank),
            ``"gpool"`` (2, or the input rank with ``keepdims=True``).
        arity: 1 for single-input layers, 2 for merge and attention layers (two tensors of equal shape).
    """

    name: str
    category: str
    in_ranks: tuple[int, ...]
    params: tuple[Param, ...] = ()
    out_rule: str = "same"
    arity: int = 1
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    def out_ranks(self, in_rank: int | None = None) -> set[int]:
        """Possible output ranks for ``in_rank`` (all accepted input ranks when None)."""
        ranks = self.in_ranks if in_rank is None else (in_rank,)
        out: set[int] = set()
        for r in ranks:
            rule = self.out_rule
            if rule == "same":
                out.add(r)
            elif rule == "minus1":
                out.add(r - 1)
            elif rule == "plus1":
                out.add(r + 1)
            elif rule == "rnn":
                out.update((2, 3))
            elif rule == "convlstm":
                out.update((r - 1, r))
            elif rule == "gpool":  # global pooling: rank 2, or the input rank with keepdims=True
                out.update((2, r))
            else:
                out.add(int(rule))
        return out

    def param(self, name: str) -> Param | None:
        """The catalogue parameter called ``name`` or None."""
        for p in self.params:
            if p.name == name:
                return p
        return None


def _m(name: str, values) -> Param:
    return Param(name, "mode", values=tuple(values))


def _s(name: str, buckets=SIZE_BUCKETS) -> Param:
    return Param(name, "shape", buckets=tuple(buckets))


def _f(name: str) -> Param:
    return Param(name, "float", buckets=FLOAT_BUCKETS)


_CONV_MODE = (_m("padding", ("valid", "same")), _m("activation", ACTIVATIONS), _m("use_bias", BOOL),
              _m("kernel_initializer", INITIALIZERS), _m("bias_initializer", INITIALIZERS),
              _m("kernel_regularizer", REGULARIZERS), _m("bias_regularizer", REGULARIZERS),
              _m("activity_regularizer", REGULARIZERS))
_CONV_SHAPE = (_s("filters"), _s("kernel_size", KERNEL_BUCKETS), _s("strides", STRIDE_BUCKETS),
               _s("dilation_rate", LARGE_SMALL_BUCKETS))
_DEPTH_SHAPE = (_s("depth_multiplier", LARGE_SMALL_BUCKETS), _s("kernel_size", KERNEL_BUCKETS),
                _s("strides", STRIDE_BUCKETS), _s("dilation_rate", LARGE_SMALL_BUCKETS))
_DEPTH_MODE = (_m("padding", ("valid", "same")), _m("activation", ACTIVATIONS), _m("use_bias", BOOL),
               _m("depthwise_initializer", INITIALIZERS), _m("bias_initializer", INITIALIZERS),
               _m("depthwise_regularizer", REGULARIZERS), _m("bias_regularizer", REGULARIZERS))
_SEP_MODE = _DEPTH_MODE + (_m("pointwise_initializer", INITIALIZERS), _m("pointwise_regularizer", REGULARIZERS))
_TRANSPOSE_SHAPE = (_s("filters"), _s("kernel_size", KERNEL_BUCKETS), _s("strides", STRIDE_BUCKETS))
_POOL = (_s("pool_size", KERNEL_BUCKETS), _s("strides", STRIDE_BUCKETS), _m("padding", ("valid", "same")))
_GPOOL = (_m("keepdims", BOOL),)
_RNN_MODE = (_m("activation", ACTIVATIONS), _m("use_bias", BOOL), _m("kernel_initializer", INITIALIZERS),
             _m("recurrent_initializer", INITIALIZERS), _m("bias_initializer", INITIALIZERS),
             _m("kernel_regularizer", REGULARIZERS), _m("recurrent_regularizer", REGULARIZERS),
             _m("return_sequences", BOOL), _m("go_backwards", BOOL), _m("unroll", BOOL))
_GATED = _RNN_MODE + (_m("recurrent_activation", ACTIVATIONS),)
_CONVLSTM = (_s("filters"), _s("kernel_size", KERNEL_BUCKETS), _s("strides", STRIDE_BUCKETS),
             _m("padding", ("valid", "same")), _m("activation", ACTIVATIONS),
             _m("recurrent_activation", ACTIVATIONS), _m("return_sequences", BOOL), _m("go_backwards", BOOL),
             _m("kernel_initializer", INITIALIZERS), _m("recurrent_initializer", INITIALIZERS))
_NORM_INIT = (_m("beta_initializer", INITIALIZERS), _m("gamma_initializer", INITIALIZERS),
              _m("center", BOOL), _m("scale", BOOL))


def _build() -> tuple[LayerSpec, ...]:
    L = LayerSpec
    layers: list[LayerSpec] = [
        L("Dense", "core", (2, 3, 4, 5), (_s("units"),) + tuple(p for p in _CONV_MODE if p.name != "padding")),
        L("Identity", "core", (2, 3, 4, 5)),
        L("Conv1D", "convolution", (3,), _CONV_SHAPE + _CONV_MODE),
        L("Conv2D", "convolution", (4,), _CONV_SHAPE + _CONV_MODE),
        L("Conv3D", "convolution", (5,), _CONV_SHAPE + _CONV_MODE),
        L("SeparableConv1D", "convolution", (3,), (_s("filters"),) + _DEPTH_SHAPE + _SEP_MODE),
        L("SeparableConv2D", "convolution", (4,), (_s("filters"),) + _DEPTH_SHAPE + _SEP_MODE),
        L("DepthwiseConv1D", "convolution", (3,), _DEPTH_SHAPE + _DEPTH_MODE),
        L("DepthwiseConv2D", "convolution", (4,), _DEPTH_SHAPE + _DEPTH_MODE),
        L("Conv1DTranspose", "convolution", (3,), _TRANSPOSE_SHAPE + _CONV_MODE),
        L("Conv2DTranspose", "convolution", (4,), _TRANSPOSE_SHAPE + _CONV_MODE),
        L("Conv3DTranspose", "convolution", (5,), _TRANSPOSE_SHAPE + _CONV_MODE),
        L("MaxPooling1D", "pooling", (3,), _POOL),
        L("MaxPooling2D", "pooling", (4,), _POOL),
        L("MaxPooling3D", "pooling", (5,), _POOL),
        L("AveragePooling1D", "pooling", (3,), _POOL),
        L("AveragePooling2D", "pooling", (4,), _POOL),
        L("AveragePooling3D", "pooling", (5,), _POOL),
        L("GlobalMaxPooling1D", "pooling", (3,), _GPOOL, "gpool"),
        L("GlobalMaxPooling2D", "pooling", (4,), _GPOOL, "gpool"),
        L("GlobalMaxPooling3D", "pooling", (5,), _GPOOL, "gpool"),
        L("GlobalAveragePooling1D", "pooling", (3,), _GPOOL, "gpool"),
        L("GlobalAveragePooling2D", "pooling", (4,), _GPOOL, "gpool"),
        L("GlobalAveragePooling3D", "pooling", (5,), _GPOOL, "gpool"),
        L("SimpleRNN", "recurrent", (3,), (_s("units"),) + _RNN_MODE, "rnn"),
        L("LSTM", "recurrent", (3,), (_s("units"),) + _GATED + (_m("unit_forget_bias", BOOL),), "rnn"),
        L("GRU", "recurrent", (3,), (_s("units"),) + _GATED + (_m("reset_after", BOOL),), "rnn"),
        L("ConvLSTM1D", "recurrent", (4,), _CONVLSTM, "convlstm"),
        L("ConvLSTM2D", "recurrent", (5,), _CONVLSTM, "convlstm"),
        L("BatchNormalization", "normalization", (2, 3, 4, 5),
          (_m("momentum", (0.0, 0.5, 0.9, 0.99)), _m("epsilon", (0.0, 1e-3, 1e-5, 0.1))) + _NORM_INIT
          + (_m("moving_mean_initializer", INITIALIZERS), _m("moving_variance_initializer", ("ones", "zeros", "random_uniform")))),
        L("LayerNormalization", "normalization", (2, 3, 4, 5), (_m("epsilon", (0.0, 1e-3, 1e-5, 0.1)),) + _NORM_INIT),
        L("GroupNormalization", "normalization", (2, 3, 4, 5), (_s("groups", GROUP_BUCKETS), _m("epsilon", (0.0, 1e-3, 1e-5, 0.1))) + _NORM_INIT),
        L("UnitNormalization", "normalization", (2, 3, 4, 5)),
        L("RMSNormalization", "normalization", (2, 3, 4, 5), (_m("epsilon", (0.0, 1e-6, 1e-3, 0.1)),)),
        L("Dropout", "regularization", (2, 3, 4, 5), (_f("rate"),)),
        L("SpatialDropout1D", "regularization", (3,), (_f("rate"),)),
        L("SpatialDropout2D", "regularization", (4,), (_f("rate"),)),
        L("SpatialDropout3D", "regularization", (5,), (_f("rate"),)),
        L("GaussianNoise", "regularization", (2, 3, 4, 5), (_f("stddev"),)),
        L("GaussianDropout", "regularization", (2, 3, 4, 5), (_f("rate"),)),
        L("AlphaDropout", "regularization", (2, 3, 4, 5), (_f("rate"),)),
        L("ActivityRegularization", "regularization", (2, 3, 4, 5), (_m("l1", (0.0, 0.01, 1.0)), _m("l2", (0.0, 0.01, 1.0)))),
        L("Activation", "activation", (2, 3, 4, 5), (_m("activation", ACTIVATIONS),)),
        L("ReLU", "activation", (2, 3, 4, 5), (_m("max_value", (None, 0.0, 1.0, 6.0, 1e6)), _m("negative_slope", (0.0, 0.1, 0.5)),
                                                _m("threshold", (0.0, 0.5, 1.0, 1e6)))),
        L("LeakyReLU", "activation", (2, 3, 4, 5), (_m("negative_slope", (0.0, 0.01, 0.1, 0.3, 1.0, 1e6)),)),
        L("PReLU", "activation", (2, 3, 4, 5), (_m("alpha_initializer", INITIALIZERS), _m("alpha_regularizer", REGULARIZERS))),
        L("ELU", "activation", (2, 3, 4, 5), (_m("alpha", (-1.0, 0.0, 0.1, 1.0, 2.0, 1e6)),)),
        L("Softmax", "activation", (2, 3, 4, 5), (_m("axis", (-1, 0, 1)),)),
        L("Flatten", "reshaping", (3, 4, 5), (), "2"),
        L("Reshape", "reshaping", (2, 3, 4, 5), (), "same", extra={"computed": "target_shape"}),
        L("Permute", "reshaping", (3, 4, 5), (), "same", extra={"computed": "dims"}),
        L("RepeatVector", "reshaping", (2,), (_s("n", SIZE_BUCKETS),), "3"),
        L("Cropping1D", "reshaping", (3,), (_s("cropping", ZERO_SMALL_BUCKETS),)),
        L("Cropping2D", "reshaping", (4,), (_s("cropping", ZERO_SMALL_BUCKETS),)),
        L("Cropping3D", "reshaping", (5,), (_s("cropping", ZERO_SMALL_BUCKETS),)),
        L("ZeroPadding1D", "reshaping", (3,), (_s("padding", ZERO_LARGE_BUCKETS),)),
        L("ZeroPadding2D", "reshaping", (4,), (_s("padding", ZERO_LARGE_BUCKETS),)),
        L("ZeroPadding3D", "reshaping", (5,), (_s("padding", ZERO_LARGE_BUCKETS),)),
        L("UpSampling1D", "reshaping", (3,), (_s("size", LARGE_SMALL_BUCKETS),)),
        L("UpSampling2D", "reshaping", (4,), (_s("size", LARGE_SMALL_BUCKETS), _m("interpolation", ("nearest", "bilinear")))),
        L("UpSampling3D", "reshaping", (5,), (_s("size", SMALL_BUCKETS),)),
        L("Add", "merging", (2, 3, 4, 5), (), arity=2),
        L("Subtract", "merging", (2, 3, 4, 5), (), arity=2),
        L("Multiply", "merging", (2, 3, 4, 5), (), arity=2),
        L("Average", "merging", (2, 3, 4, 5), (), arity=2),
        L("Maximum", "merging", (2, 3, 4, 5), (), arity=2),
        L("Minimum", "merging", (2, 3, 4, 5), (), arity=2),
        L("Concatenate", "merging", (2, 3, 4, 5), (_m("axis", (-1, 1)),), arity=2),
        L("Dot", "merging", (2,), (_m("axes", (-1, 1)), _m("normalize", BOOL)), "2", arity=2),
        L("Attention", "attention", (3,), (_m("use_scale", BOOL), _m("score_mode", ("dot", "concat")), _f("dropout")), arity=2),
        L("AdditiveAttention", "attention", (3,), (_m("use_scale", BOOL), _f("dropout")), arity=2),
        L("MultiHeadAttention", "attention", (3,), (_s("num_heads", SMALL_BUCKETS), _s("key_dim", SIZE_BUCKETS),
                                                    _m("use_bias", BOOL), _m("kernel_initializer", INITIALIZERS)), arity=2),
    ]
    return tuple(layers)


#: Every layer API of the catalogue, in a fixed order.
LAYERS: tuple[LayerSpec, ...] = _build()
BY_NAME: dict[str, LayerSpec] = {spec.name: spec for spec in LAYERS}

#: Keras aliases mapped to catalogue names (keras.applications use a few).
ALIASES = {"Convolution2D": "Conv2D", "MaxPool2D": "MaxPooling2D", "AvgPool2D": "AveragePooling2D",
           "GlobalAvgPool2D": "GlobalAveragePooling2D", "SeparableConvolution2D": "SeparableConv2D"}


def get(name: str) -> LayerSpec | None:
    """The catalogue entry of Keras class ``name`` (aliases resolved), or None when out of scope."""
    return BY_NAME.get(ALIASES.get(name, name))


def can_follow(a: str, b: str) -> bool:
    """Whether layer ``b`` can consume ``a``'s output directly (some output rank of a is an input rank of b)."""
    la, lb = BY_NAME[a], BY_NAME[b]
    return bool(la.out_ranks() & set(lb.in_ranks))


@lru_cache(maxsize=1)
def legal_pairs() -> frozenset[tuple[str, str]]:
    """All ordered layer pairs ``(A, B)`` that can legally follow each other (the layer-pair denominator)."""
    return frozenset((a.name, b.name) for a in LAYERS for b in LAYERS if can_follow(a.name, b.name))


@lru_cache(maxsize=1)
def param_values() -> frozenset[tuple[str, str, str]]:
    """All (layer, parameter, value label) triples (the layer-parameter denominator)."""
    return frozenset((lay.name, p.name, lab) for lay in LAYERS for p in lay.params for lab in p.labels())


def denominators() -> dict[str, int]:
    """Totals of the three coverage criteria: ``{"layer_type", "layer_pair", "layer_param"}`` → int."""
    return {"layer_type": len(LAYERS), "layer_pair": len(legal_pairs()), "layer_param": len(param_values())}


def as_table() -> list[dict]:
    """One row per layer API: name, category, input ranks, mode and shape parameters with their value counts."""
    rows = []
    for lay in LAYERS:
        rows.append({
            "layer": lay.name, "category": lay.category, "in_ranks": list(lay.in_ranks),
            "mode": {p.name: len(p.labels()) for p in lay.params if p.kind == "mode"},
            "shape": {p.name: len(p.labels()) for p in lay.params if p.kind != "mode"},
            "values": sum(len(p.labels()) for p in lay.params),
        })
    return rows
