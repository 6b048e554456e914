"""Issue 19's pair suite: original/compressed model pairs built with the runtimes' own tools, split by pair.

``twinspect deviate``'s search parameters must be chosen on some model pairs and reported on
others it never saw (a seed-level hold-out on the tuning pairs does not show how it carries to a new
model). This script builds the pairs and names the split; ``benchmarks/deviate_generalisation.py``
runs the searches on them.

Pairs (``PAIRS``; ``split`` is ``tune`` or ``heldout``, fixed before any search was run on them; the later
hold-outs ``heldout2`` … ``heldout12`` are listed in ``PAIRS`` with the rule each decided):

============================  =======  ========  ======================================================
pair                           split    data      compressed model made by
============================  =======  ========  ======================================================
lenet1-tflite8                 tune     MNIST     shared DFlare pair (Keras 2.2.4 → 8-bit TFLite)
resnet20-tflite8               tune     CIFAR-10  shared DFlare pair
lenet1-tflite-fp16             tune     MNIST     shared LeNet-1 .h5 → TFLiteConverter float16
lenet5t-ort-dyn                tune     MNIST     torch LeNet-5 → ONNX → ORT ``quantize_dynamic`` int8
lenet5t-prune50                tune     MNIST     ``twinspect compress -m prune --sparsity 0.5``
lenet5t-distill                tune     MNIST     ``twinspect compress -m distill`` (LeNet-1 student)
lenet5-tflite8                 heldout  MNIST     shared DFlare pair
lenet5-tflite-dyn              heldout  MNIST     shared LeNet-5 .h5 → TFLite dynamic-range int8
lenet5-tflite-int8             tune     MNIST     shared LeNet-5 .h5 → TFLite full int8 (float I/O) [1]_
cnn-ort-dyn                    heldout  MNIST     torch CNN → ONNX → ORT ``quantize_dynamic`` int8
cnn-ort-qdq                    heldout  MNIST     torch CNN → ONNX → ORT ``quantize_static`` QDQ int8
cnn-torch-int8                 heldout  MNIST     ``twinspect compress -m quantize`` (torch eager int8)
cnn-prune80                    heldout  MNIST     ``twinspect compress -m prune --sparsity 0.8`` (+1 epoch)
resnet8-ort-dyn                heldout  CIFAR-10  torch ResNet-8 → ONNX → ORT ``quantize_dynamic`` int8
resnet8-prune50                heldout  CIFAR-10  ``twinspect compress -m prune --sparsity 0.5``
============================  =======  ========  ======================================================

.. [1] held out at first; its default run failed on 96 % of seeds, which led to two fixes (a quantised
   softmax read as logits by the adapters, and the margin search's plateau rule), so it was moved to
   the tuning half and is not reported as held out.

The torch originals (LeNet-5 seed 0, CNN seed 1, ResNet-8 seed 2 with 10 epochs) are trained here by
``twinspect train``; the held-out pairs share no original with the tuning pairs except the Keras
LeNet-5 of the shared data, whose 8-bit TFLite pair was the one the *previous* margin search was tuned
on (so it is also reported apart). Nothing is downloaded: the shared data and the installed
converters are all it needs.

Run from the repository root (about 3 minutes; TensorFlow converts in a child process)::

    .venv/bin/python benchmarks/deviate_suite.py build
    .venv/bin/python benchmarks/deviate_suite.py list

The models go to ``--dir`` (default ``~/.cache/twinspect-bench/deviate-suite``), never into the
repository; each step is skipped when its file exists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DIR = Path.home() / ".cache" / "twinspect-bench" / "deviate-suite"


@dataclass(frozen=True)
class Pair:
    """One original/compressed pair of the suite (paths relative to the suite directory, or ``shared:``)."""

    name: str
    split: str
    data: str
    orig: str
    comp: str
    preprocess: str | None
    kind: str


PAIRS: list[Pair] = [
    Pair("lenet1-tflite8", "tune", "mnist", "shared:lenet1.h5", "shared:lenet1-quan.lite", "unit", "Keras → TFLite 8-bit (shared)"),
    Pair("resnet20-tflite8", "tune", "cifar10", "shared:resnet.h5", "shared:resnet-quan.lite", "cifar10-dflare", "Keras → TFLite 8-bit (shared)"),
    Pair("lenet1-tflite-fp16", "tune", "mnist", "shared:lenet1.h5", "lenet1-fp16.tflite", "unit", "Keras → TFLite float16"),
    Pair("lenet5t-ort-dyn", "tune", "mnist", "mnist-lenet5.onnx", "mnist-lenet5-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("lenet5t-prune50", "tune", "mnist", "mnist-lenet5.pt", "mnist-lenet5-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("lenet5t-distill", "tune", "mnist", "mnist-lenet5.pt", "mnist-lenet5-distill.pt", None, "distillation into LeNet-1"),
    Pair("lenet5-tflite8", "heldout", "mnist", "shared:lenet5.h5", "shared:lenet5-quan.lite", "unit", "Keras → TFLite 8-bit (shared)"),
    Pair("lenet5-tflite-dyn", "heldout", "mnist", "shared:lenet5.h5", "lenet5-dyn.tflite", "unit", "Keras → TFLite dynamic-range int8"),
    # held out at first; moved to the tuning half after its failure (a twice-applied softmax on its
    # quantised output, and g's margin on a plateau) was read and fixed during the design
    Pair("lenet5-tflite-int8", "tune", "mnist", "shared:lenet5.h5", "lenet5-int8.tflite", "unit", "Keras → TFLite full int8 (seen)"),
    Pair("cnn-ort-dyn", "heldout", "mnist", "mnist-cnn.onnx", "mnist-cnn-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("cnn-ort-qdq", "heldout", "mnist", "mnist-cnn.onnx", "mnist-cnn-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    Pair("cnn-torch-int8", "heldout", "mnist", "mnist-cnn.pt", "mnist-cnn-int8.pt", None, "torch eager static int8"),
    Pair("cnn-prune80", "heldout", "mnist", "mnist-cnn.pt", "mnist-cnn-prune80.pt", None, "magnitude pruning 80 % (+1 epoch)"),
    Pair("resnet8-ort-dyn", "heldout", "cifar10", "cifar-resnet8.onnx", "cifar-resnet8-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("resnet8-prune50", "heldout", "cifar10", "cifar-resnet8.pt", "cifar-resnet8-prune50.pt", None, "magnitude pruning 50 %"),
    # the second hold-out (2026-11-26 afternoon): new originals, built and fixed before any search ran on them;
    # the first held-out pairs above had been reported twice by then and were used in the design of the
    # search that is reported on these
    Pair("lenet4-ort-dyn", "heldout2", "mnist", "mnist-lenet4.onnx", "mnist-lenet4-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("lenet4-prune50", "heldout2", "mnist", "mnist-lenet4.pt", "mnist-lenet4-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("cnnh-ort-qdq", "heldout2", "mnist", "mnist-cnnh.onnx", "mnist-cnnh-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    Pair("cnnh-torch-int8", "heldout2", "mnist", "mnist-cnnh.pt", "mnist-cnnh-int8.pt", None, "torch eager static int8"),
    Pair("cnnh-distill", "heldout2", "mnist", "mnist-cnnh.pt", "mnist-cnnh-distill.pt", None, "distillation into LeNet-1"),
    Pair("resnet8h-ort-qdq", "heldout2", "cifar10", "cifar-resnet8h.onnx", "cifar-resnet8h-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    # the third hold-out (2026-11-27): new originals built after the guided search's held-out results had
    # been seen, fixed before any search ran on them; it decides whether the guided search becomes the
    # default for originals that give a gradient (the rule is in deviate_guided_notes.md)
    Pair("vgg-ort-dyn", "heldout3", "mnist", "mnist-vgg11q.onnx", "mnist-vgg11q-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("vgg-torch-int8", "heldout3", "mnist", "mnist-vgg11q.pt", "mnist-vgg11q-int8.pt", None, "torch eager static int8"),
    Pair("lenet5w-ort-qdq", "heldout3", "mnist", "mnist-lenet5w.onnx", "mnist-lenet5w-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    Pair("lenet5w-prune50", "heldout3", "mnist", "mnist-lenet5w.pt", "mnist-lenet5w-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("cnn9-distill", "heldout3", "mnist", "mnist-cnn9.pt", "mnist-cnn9-distill.pt", None, "distillation into LeNet-1"),
    # the fourth hold-out (2026-11-27, second session): new originals built after the rule in
    # deviate_second_notes.md was committed, fixed before any search ran on them; it decides whether the
    # guided search's second search becomes the default
    Pair("lenet4w-ort-qdq", "heldout4", "mnist", "mnist-lenet4w.onnx", "mnist-lenet4w-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    Pair("lenet4w-torch-int8", "heldout4", "mnist", "mnist-lenet4w.pt", "mnist-lenet4w-int8.pt", None, "torch eager static int8"),
    Pair("lenet4w-prune80", "heldout4", "mnist", "mnist-lenet4w.pt", "mnist-lenet4w-prune80.pt", None, "magnitude pruning 80 % (+1 epoch)"),
    Pair("cnn11-ort-dyn", "heldout4", "mnist", "mnist-cnn11.onnx", "mnist-cnn11-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("cnn11-distill", "heldout4", "mnist", "mnist-cnn11.pt", "mnist-cnn11-distill.pt", None, "distillation into LeNet-1"),
    Pair("resnet8q-ort-dyn", "heldout4", "cifar10", "cifar-resnet8q.onnx", "cifar-resnet8q-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    # the fifth hold-out (2026-11-27, third session): new originals (a 1.5-width LeNet-5 of seed 14, a
    # double-width torch LeNet-1 of seed 15), entries committed before the models were built and before any
    # search ran on them; it decides whether the SSIM pass of the minimisation becomes the default
    # (the rule is in deviate_ssim_notes.md)
    Pair("lenet5m-ort-qdq", "heldout5", "mnist", "mnist-lenet5m.onnx", "mnist-lenet5m-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    Pair("lenet5m-torch-int8", "heldout5", "mnist", "mnist-lenet5m.pt", "mnist-lenet5m-int8.pt", None, "torch eager static int8"),
    Pair("lenet1w-ort-dyn", "heldout5", "mnist", "mnist-lenet1w.onnx", "mnist-lenet1w-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("lenet1w-prune80", "heldout5", "mnist", "mnist-lenet1w.pt", "mnist-lenet1w-prune80.pt", None, "magnitude pruning 80 % (+1 epoch)"),
    # the sixth hold-out (2026-11-27, fourth session): new originals (a 1.25-width ResNet-8 of seed 16, a
    # half-width ResNet-14 of seed 19, a 1.5-width LeNet-4 of seed 17, a 0.75-width CNN of seed 18), entered
    # after the rule in deviate_cifar_notes.md was committed and before any of them was built; it decides
    # whether seeds the original gets wrong are set aside by default (skip_orig_wrong)
    Pair("resnet8s-ort-dyn", "heldout6", "cifar10", "cifar-resnet8s.onnx", "cifar-resnet8s-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("resnet8s-prune50", "heldout6", "cifar10", "cifar-resnet8s.pt", "cifar-resnet8s-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("resnet14h-ort-qdq", "heldout6", "cifar10", "cifar-resnet14h.onnx", "cifar-resnet14h-qdq.onnx", None, "torch → ONNX → ORT static QDQ int8"),
    Pair("lenet4m-ort-dyn", "heldout6", "mnist", "mnist-lenet4m.onnx", "mnist-lenet4m-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("cnn18-prune50", "heldout6", "mnist", "mnist-cnn18.pt", "mnist-cnn18-prune50.pt", None, "magnitude pruning 50 %"),
    # the seventh hold-out (2026-11-27, fifth session): new originals (a 0.75-width ResNet-8 of seed 20, a 0.75-width
    # LeNet-5 of seed 21, a 1.25-width CNN of seed 22, a 0.75-width LeNet-4 of seed 23), entered after the rule in
    # deviate_pair_notes.md was committed and before any of them was built; it decides whether the guided search's
    # pair direction (pair_gradient) becomes the default
    Pair("resnet8v-prune50", "heldout7", "cifar10", "cifar-resnet8v.pt", "cifar-resnet8v-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("resnet8v-ort-dyn", "heldout7", "cifar10", "cifar-resnet8v.onnx", "cifar-resnet8v-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("lenet5v-prune50", "heldout7", "mnist", "mnist-lenet5v.pt", "mnist-lenet5v-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("cnn22-ort-dyn", "heldout7", "mnist", "mnist-cnn22.onnx", "mnist-cnn22-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("lenet4v-distill", "heldout7", "mnist", "mnist-lenet4v.pt", "mnist-lenet4v-distill.pt", None, "distillation into LeNet-1"),
    # the eighth hold-out (2026-11-27, sixth session): new originals (a 0.625-width ResNet-8 of seed 24, a 1.25-width
    # LeNet-5 of seed 25), entered after the rule in deviate_standin_notes.md was committed and before either was
    # built; it decides whether the pair direction with the ONNX Runtime dynamic-int8 stand-in becomes the default
    Pair("resnet8x-ort-dyn", "heldout8", "cifar10", "cifar-resnet8x.onnx", "cifar-resnet8x-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("resnet8x-prune50", "heldout8", "cifar10", "cifar-resnet8x.pt", "cifar-resnet8x-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("lenet5x-ort-dyn", "heldout8", "mnist", "mnist-lenet5x.onnx", "mnist-lenet5x-dyn.onnx", None, "torch → ONNX → ORT dynamic int8"),
    Pair("lenet5x-prune50", "heldout8", "mnist", "mnist-lenet5x.pt", "mnist-lenet5x-prune50.pt", None, "magnitude pruning 50 %"),
    # the ninth hold-out (2026-11-28, seventh session): TFLite pairs of new Keras originals (a LeNet-5 of seed 26 on
    # MNIST, a 4-convolution CNN of seed 27 on CIFAR-10, trained here by Keras on TensorFlow: ``_KERAS_TRAIN``),
    # entered after the rule in deviate_tflite_notes.md was committed and before any was built; it decides whether
    # the pair direction through the TFLite stand-in (twinspect/dl/deviate/tflite_standin.py) stays in the default
    Pair("lenet5k-tflite-dyn", "heldout9", "mnist", "keras-lenet5k.keras", "keras-lenet5k-dyn.tflite", "unit",
         "Keras → TFLite dynamic-range int8"),
    Pair("lenet5k-tflite-int8", "heldout9", "mnist", "keras-lenet5k.keras", "keras-lenet5k-int8.tflite", "unit",
         "Keras → TFLite full int8"),
    Pair("cnnk-tflite-dyn", "heldout9", "cifar10", "keras-cnnk.keras", "keras-cnnk-dyn.tflite", "unit",
         "Keras → TFLite dynamic-range int8"),
    Pair("cnnk-tflite-int8", "heldout9", "cifar10", "keras-cnnk.keras", "keras-cnnk-int8.tflite", "unit",
         "Keras → TFLite full int8"),
    # the tenth hold-out (2026-11-28, seventh session): new originals (a Keras LeNet-1 of seed 28, a half-width Keras
    # CNN of seed 29 on CIFAR-10, a 1.25-width torch LeNet-4 of seed 30), entered with the rule in
    # deviate_second_cap_notes.md and built after it; it decides whether step 5 of the guided search gets a query cap
    Pair("lenet1k-tflite-dyn", "heldout10", "mnist", "keras-lenet1k.keras", "keras-lenet1k-dyn.tflite", "unit",
         "Keras → TFLite dynamic-range int8"),
    Pair("cnnkh-tflite-int8", "heldout10", "cifar10", "keras-cnnkh.keras", "keras-cnnkh-int8.tflite", "unit",
         "Keras → TFLite full int8"),
    Pair("lenet4y-ort-dyn", "heldout10", "mnist", "mnist-lenet4y.onnx", "mnist-lenet4y-dyn.onnx", None,
         "torch → ONNX → ORT dynamic int8"),
    Pair("lenet4y-prune50", "heldout10", "mnist", "mnist-lenet4y.pt", "mnist-lenet4y-prune50.pt", None, "magnitude pruning 50 %"),
    # the eleventh hold-out (2026-11-29, eighth session): new originals (a classic Keras LeNet-5 — tanh, average
    # pooling — of seed 31, a 0.75-width torch LeNet-5 of seed 32, a half-width Keras CNN of seed 33 on CIFAR-10),
    # entered with the rule in deviate_pixel_order_notes.md and built after it; it decides whether the
    # minimisation's single-pixel pass restores pixels in SSIM order
    Pair("lenet5kt-tflite-int8", "heldout11", "mnist", "keras-lenet5kt.keras", "keras-lenet5kt-int8.tflite", "unit",
         "Keras → TFLite full int8"),
    Pair("lenet5kt-tflite-dyn", "heldout11", "mnist", "keras-lenet5kt.keras", "keras-lenet5kt-dyn.tflite", "unit",
         "Keras → TFLite dynamic-range int8"),
    Pair("lenet5z-ort-dyn", "heldout11", "mnist", "mnist-lenet5z.onnx", "mnist-lenet5z-dyn.onnx", None,
         "torch → ONNX → ORT dynamic int8"),
    Pair("cnnkh33-tflite-int8", "heldout11", "cifar10", "keras-cnnkh33.keras", "keras-cnnkh33-int8.tflite", "unit",
         "Keras → TFLite full int8"),
    # the twelfth hold-out (2026-11-29, ninth session): new torch originals (a LeNet-4 of seed 34, a CNN of seed 35),
    # entered with the rule in deviate_pair_restarts_notes.md and built after it; it decides whether the guided
    # search's pair restarts (pair_restarts=8) become the default
    Pair("lenet4r-prune50", "heldout12", "mnist", "mnist-lenet4r.pt", "mnist-lenet4r-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("lenet4r-ort-dyn", "heldout12", "mnist", "mnist-lenet4r.onnx", "mnist-lenet4r-dyn.onnx", None,
         "torch → ONNX → ORT dynamic int8"),
    Pair("cnnr-prune50", "heldout12", "mnist", "mnist-cnnr.pt", "mnist-cnnr-prune50.pt", None, "magnitude pruning 50 %"),
    Pair("cnnr-distill", "heldout12", "mnist", "mnist-cnnr.pt", "mnist-cnnr-distill.pt", None, "distillation into LeNet-1"),
]


def pair_by_name(name: str) -> Pair:
    for p in PAIRS:
        if p.name == name:
            return p
    raise SystemExit(f"unknown pair {name!r}; choose from {', '.join(p.name for p in PAIRS)}")


def shared_models() -> Path:
    """The shared DFlare model folder (``shared/data/models/dflare``)."""
    from twinspect.dl.data import find_shared_data

    shared = find_shared_data()
    if shared is None:
        raise SystemExit("shared data not found (set TWINSPECT_DATA)")
    return shared / "models" / "dflare"


def resolve(pair: Pair, suite_dir: Path = DEFAULT_DIR) -> tuple[Path, Path]:
    """Absolute paths of a pair's two model files."""

    def one(rel: str) -> Path:
        return shared_models() / rel.split(":", 1)[1] if rel.startswith("shared:") else suite_dir / rel

    return one(pair.orig), one(pair.comp)


_TFLITE = textwrap.dedent('''
    import os, sys
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np, keras, tensorflow as tf
    src, out_dir, calib_file = sys.argv[1], sys.argv[2], sys.argv[3]
    jobs = sys.argv[4:]
    m = keras.models.load_model(src, compile=False)
    sm = os.path.join(out_dir, "_savedmodel_" + os.path.basename(src))
    m.export(sm, format="tf_saved_model", verbose=False)
    calib = np.load(calib_file).astype(np.float32)
    for job in jobs:
        kind, name = job.split("=")
        c = tf.lite.TFLiteConverter.from_saved_model(sm)
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        if kind == "fp16":
            c.target_spec.supported_types = [tf.float16]
        elif kind == "int8":
            c.representative_dataset = lambda: ([calib[i:i + 1]] for i in range(len(calib)))
        tmp = os.path.join(out_dir, name + ".tmp")
        open(tmp, "wb").write(c.convert())
        os.replace(tmp, os.path.join(out_dir, name))
''')


_KERAS_TRAIN = textwrap.dedent('''
    import os, sys
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np, keras
    arch, data, out, seed, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    keras.utils.set_random_seed(seed)
    d = np.load(data)
    x, y = d["x"].astype(np.float32) / 255.0, d["y"].astype(np.int64)
    L = keras.layers
    if arch == "lenet5k":  # LeNet-5 (ReLU, max pooling), softmax output as DFlare's Keras models
        body = [L.Conv2D(6, 5, padding="same", activation="relu"), L.MaxPooling2D(2), L.Conv2D(16, 5, activation="relu"),
                L.MaxPooling2D(2), L.Flatten(), L.Dense(120, activation="relu"), L.Dense(84, activation="relu")]
    elif arch == "lenet5kt":  # the classic LeNet-5 (tanh, average pooling)
        body = [L.Conv2D(6, 5, padding="same", activation="tanh"), L.AveragePooling2D(2), L.Conv2D(16, 5, activation="tanh"),
                L.AveragePooling2D(2), L.Flatten(), L.Dense(120, activation="tanh"), L.Dense(84, activation="tanh")]
    elif arch == "lenet1k":  # LeNet-1 (tanh, average pooling), as DFlare's LeNet-1 but trained here
        body = [L.Conv2D(4, 5, padding="same", activation="tanh"), L.AveragePooling2D(2), L.Conv2D(12, 5, activation="tanh"),
                L.AveragePooling2D(2), L.Flatten()]
    else:  # cnnk (cnnkh: half width): two 3x3 convolution blocks of 32 and 64 channels, a 128-unit dense layer
        w = 0.5 if arch.startswith("cnnkh") else 1.0
        c1, c2, fc = int(32 * w), int(64 * w), int(128 * w)
        body = [L.Conv2D(c1, 3, padding="same", activation="relu"), L.Conv2D(c1, 3, activation="relu"), L.MaxPooling2D(2),
                L.Conv2D(c2, 3, padding="same", activation="relu"), L.Conv2D(c2, 3, activation="relu"), L.MaxPooling2D(2),
                L.Flatten(), L.Dense(fc, activation="relu")]
    m = keras.Sequential([keras.Input(x.shape[1:]), *body, L.Dense(10, activation="softmax")], name=arch)
    m.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(x, y, batch_size=64, epochs=epochs, verbose=2, shuffle=True)
    tmp = out + ".tmp.keras"
    m.save(tmp)
    os.replace(tmp, out)
''')


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join("<script>" if "\n" in a else a for a in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def _twinspect(*args: str) -> None:
    _run([sys.executable, "-m", "twinspect", *args, "-q"])


def _export_onnx(pt: Path, onnx_path: Path, calib: object | None, qdq: Path | None, dyn: Path | None) -> None:
    """torch → ONNX (TorchScript exporter) with the .pt's metadata as sidecar; ORT int8 copies."""
    import numpy as np
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    from twinspect.dl.adapters.metadata import read_metadata, write_metadata

    meta = read_metadata(pt)
    h, w, c = meta["input_shape"]
    if not onnx_path.exists():
        m = torch.jit.load(str(pt)).eval()
        tmp = onnx_path.with_suffix(".tmp.onnx")
        torch.onnx.export(m, (torch.zeros(1, c, h, w),), str(tmp), dynamo=False, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
        os.replace(tmp, onnx_path)
        write_metadata(onnx_path, {**meta, "compression": None})
    if dyn is not None and not dyn.exists():
        quantize_dynamic(str(onnx_path), str(dyn), weight_type=QuantType.QInt8)
        write_metadata(dyn, {**meta, "compression": {"method": "ort-quantize-dynamic"}})
    if qdq is not None and not qdq.exists():
        x = np.asarray(calib, dtype=np.float32)

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter([{"x": x[i:i + 1]} for i in range(len(x))])

            def get_next(self):
                return next(self.it, None)

        quantize_static(str(onnx_path), str(qdq), Reader(), quant_format=QuantFormat.QDQ, weight_type=QuantType.QInt8,
                        per_channel=True)
        write_metadata(qdq, {**meta, "compression": {"method": "ort-quantize-static-qdq"}})


#: the Keras originals of the ninth to eleventh hold-outs: (architecture, data, file, seed, epochs, the split)
KERAS_ORIGINALS = [("lenet5k", "mnist", "keras-lenet5k.keras", 26, 3, "heldout9"),
                   ("cnnk", "cifar10", "keras-cnnk.keras", 27, 8, "heldout9"),
                   ("lenet1k", "mnist", "keras-lenet1k.keras", 28, 3, "heldout10"),
                   ("cnnkh", "cifar10", "keras-cnnkh.keras", 29, 8, "heldout10"),
                   ("lenet5kt", "mnist", "keras-lenet5kt.keras", 31, 3, "heldout11"),
                   ("cnnkh33", "cifar10", "keras-cnnkh33.keras", 33, 8, "heldout11")]


def build_keras(d: Path, datasets: tuple[str, ...] = ("mnist", "cifar10"), split: str | None = None) -> None:
    """The Keras originals of :data:`KERAS_ORIGINALS` (of ``split``, or all; Keras on TensorFlow in a child process,
    trained on the shared training images scaled to [0, 1]) and their TFLite dynamic-range and full-int8 copies
    (calibration: 256 training images); files that exist are kept."""
    import numpy as np

    from twinspect.dl.data import load_images

    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for arch, data, out, seed, epochs, where in KERAS_ORIGINALS:
        if data not in datasets or (split is not None and where != split):
            continue
        jobs = [f"{k}={out.replace('.keras', f'-{k}.tflite')}" for k in ("dyn", "int8")]
        jobs = [j for j in jobs if not (d / j.split("=")[1]).exists()]
        if (d / out).exists() and not jobs:
            continue
        x_tr, y_tr = load_images(data, split="train")
        if not (d / out).exists():
            np.savez(d / f"train-{data}.npz", x=x_tr, y=y_tr)
            _run([sys.executable, "-c", _KERAS_TRAIN, arch, str(d / f"train-{data}.npz"), str(d / out), str(seed), str(epochs)],
                 env=env)
        np.save(d / f"calib-{data}-unit.npy", x_tr[:256].astype(np.float32) / 255.0)
        if jobs:
            _run([sys.executable, "-c", _TFLITE, str(d / out), str(d), str(d / f"calib-{data}-unit.npy"), *jobs], env=env)


def build_heldout10(d: Path) -> None:
    """The tenth hold-out alone: its Keras originals and TFLite copies, and the torch LeNet-4 (×1.25, seed 30) with its
    50 %-pruned copy and ONNX Runtime dynamic-int8 export; files that exist are kept."""
    build_keras(d, split="heldout10")
    if not (d / "mnist-lenet4y.pt").exists():
        _twinspect("train", "lenet4", "-d", "mnist", "-o", str(d / "mnist-lenet4y.pt"), "--seed", "30", "--width", "1.25")
    if not (d / "mnist-lenet4y-prune50.pt").exists():
        _twinspect("compress", str(d / "mnist-lenet4y.pt"), "-m", "prune", "--sparsity", "0.5", "-o", str(d / "mnist-lenet4y-prune50.pt"))
    _export_onnx(d / "mnist-lenet4y.pt", d / "mnist-lenet4y.onnx", None, None, d / "mnist-lenet4y-dyn.onnx")


def build_heldout11(d: Path) -> None:
    """The eleventh hold-out alone: its Keras originals and TFLite copies, and the torch LeNet-5 (×0.75, seed 32) with
    its ONNX Runtime dynamic-int8 export; files that exist are kept."""
    build_keras(d, split="heldout11")
    if not (d / "mnist-lenet5z.pt").exists():
        _twinspect("train", "lenet5", "-d", "mnist", "-o", str(d / "mnist-lenet5z.pt"), "--seed", "32", "--width", "0.75")
    _export_onnx(d / "mnist-lenet5z.pt", d / "mnist-lenet5z.onnx", None, None, d / "mnist-lenet5z-dyn.onnx")


def build_heldout12(d: Path) -> None:
    """The twelfth hold-out alone: a torch LeNet-4 (seed 34) with its 50 %-pruned copy and ONNX Runtime dynamic-int8
    export, and a torch CNN (seed 35) with its 50 %-pruned and distilled copies; files that exist are kept."""
    if not (d / "mnist-lenet4r.pt").exists():
        _twinspect("train", "lenet4", "-d", "mnist", "-o", str(d / "mnist-lenet4r.pt"), "--seed", "34")
    if not (d / "mnist-cnnr.pt").exists():
        _twinspect("train", "cnn", "-d", "mnist", "-o", str(d / "mnist-cnnr.pt"), "--seed", "35")
    for src, out, extra in (("mnist-lenet4r.pt", "mnist-lenet4r-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
                            ("mnist-cnnr.pt", "mnist-cnnr-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
                            ("mnist-cnnr.pt", "mnist-cnnr-distill.pt", ["-m", "distill"])):
        if not (d / out).exists():
            _twinspect("compress", str(d / src), *extra, "-o", str(d / out))
    _export_onnx(d / "mnist-lenet4r.pt", d / "mnist-lenet4r.onnx", None, None, d / "mnist-lenet4r-dyn.onnx")


def build(suite_dir: Path, datasets: tuple[str, ...] = ("mnist", "cifar10")) -> None:
    """Train the torch originals and make every compressed model of ``datasets`` (skipping files that exist)."""
    import numpy as np

    from twinspect.dl.data import load_images

    suite_dir.mkdir(parents=True, exist_ok=True)
    d = suite_dir
    trains = [("lenet5", "mnist", "mnist-lenet5.pt", "0", []), ("cnn", "mnist", "mnist-cnn.pt", "1", []),
              ("resnet8", "cifar10", "cifar-resnet8.pt", "2", ["--epochs", "10"]),
              # the second hold-out's originals: LeNet-4, a half-width CNN, a half-width ResNet-8
              ("lenet4", "mnist", "mnist-lenet4.pt", "3", []), ("cnn", "mnist", "mnist-cnnh.pt", "4", ["--width", "0.5"]),
              ("resnet8", "cifar10", "cifar-resnet8h.pt", "5", ["--epochs", "10", "--width", "0.5"]),
              # the third hold-out's originals: a quarter-width VGG-11, a double-width LeNet-5, a CNN of seed 9
              ("vgg11", "mnist", "mnist-vgg11q.pt", "7", ["--width", "0.25"]),
              ("lenet5", "mnist", "mnist-lenet5w.pt", "8", ["--width", "2"]),
              ("cnn", "mnist", "mnist-cnn9.pt", "9", []),
              # the fourth hold-out's originals: a double-width LeNet-4, a 1.5-width CNN, a 0.75-width ResNet-8
              ("lenet4", "mnist", "mnist-lenet4w.pt", "10", ["--width", "2"]),
              ("cnn", "mnist", "mnist-cnn11.pt", "11", ["--width", "1.5"]),
              ("resnet8", "cifar10", "cifar-resnet8q.pt", "12", ["--epochs", "10", "--width", "0.75"]),
              # the fifth hold-out's originals: a 1.5-width LeNet-5, a double-width torch LeNet-1
              ("lenet5", "mnist", "mnist-lenet5m.pt", "14", ["--width", "1.5"]),
              ("lenet1", "mnist", "mnist-lenet1w.pt", "15", ["--width", "2"]),
              # the sixth hold-out's originals: a 1.25-width ResNet-8, a half-width ResNet-14, a 1.5-width LeNet-4,
              # a 0.75-width CNN
              ("resnet8", "cifar10", "cifar-resnet8s.pt", "16", ["--epochs", "10", "--width", "1.25", "--threads", "2"]),
              ("resnet14", "cifar10", "cifar-resnet14h.pt", "19", ["--epochs", "10", "--width", "0.5", "--threads", "2"]),
              ("lenet4", "mnist", "mnist-lenet4m.pt", "17", ["--width", "1.5"]),
              ("cnn", "mnist", "mnist-cnn18.pt", "18", ["--width", "0.75"]),
              # the seventh hold-out's originals: a 0.75-width ResNet-8 of seed 20, a 0.75-width LeNet-5, a 1.25-width
              # CNN, a 0.75-width LeNet-4
              ("resnet8", "cifar10", "cifar-resnet8v.pt", "20", ["--epochs", "10", "--width", "0.75", "--threads", "1"]),
              ("lenet5", "mnist", "mnist-lenet5v.pt", "21", ["--width", "0.75"]),
              ("cnn", "mnist", "mnist-cnn22.pt", "22", ["--width", "1.25"]),
              ("lenet4", "mnist", "mnist-lenet4v.pt", "23", ["--width", "0.75"]),
              # the eighth hold-out's originals: a 0.625-width ResNet-8 of seed 24, a 1.25-width LeNet-5 of seed 25
              ("resnet8", "cifar10", "cifar-resnet8x.pt", "24", ["--epochs", "10", "--width", "0.625", "--threads", "1"]),
              ("lenet5", "mnist", "mnist-lenet5x.pt", "25", ["--width", "1.25"])]
    for arch, data, out, seed, extra in trains:
        if data in datasets and not (d / out).exists():
            _twinspect("train", arch, "-d", data, "-o", str(d / out), "--seed", seed, *extra)
    comps = [("mnist-lenet5.pt", "mnist-lenet5-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-lenet5.pt", "mnist-lenet5-distill.pt", ["-m", "distill"]),
             ("mnist-cnn.pt", "mnist-cnn-int8.pt", ["-m", "quantize"]),
             ("mnist-cnn.pt", "mnist-cnn-prune80.pt", ["-m", "prune", "--sparsity", "0.8", "--finetune-epochs", "1"]),
             ("cifar-resnet8.pt", "cifar-resnet8-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-lenet4.pt", "mnist-lenet4-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-cnnh.pt", "mnist-cnnh-int8.pt", ["-m", "quantize"]),
             ("mnist-cnnh.pt", "mnist-cnnh-distill.pt", ["-m", "distill"]),
             ("mnist-vgg11q.pt", "mnist-vgg11q-int8.pt", ["-m", "quantize"]),
             ("mnist-lenet5w.pt", "mnist-lenet5w-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-cnn9.pt", "mnist-cnn9-distill.pt", ["-m", "distill"]),
             ("mnist-lenet4w.pt", "mnist-lenet4w-int8.pt", ["-m", "quantize"]),
             ("mnist-lenet4w.pt", "mnist-lenet4w-prune80.pt", ["-m", "prune", "--sparsity", "0.8", "--finetune-epochs", "1"]),
             ("mnist-cnn11.pt", "mnist-cnn11-distill.pt", ["-m", "distill"]),
             ("mnist-lenet5m.pt", "mnist-lenet5m-int8.pt", ["-m", "quantize"]),
             ("mnist-lenet1w.pt", "mnist-lenet1w-prune80.pt", ["-m", "prune", "--sparsity", "0.8", "--finetune-epochs", "1"]),
             ("cifar-resnet8s.pt", "cifar-resnet8s-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-cnn18.pt", "mnist-cnn18-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("cifar-resnet8v.pt", "cifar-resnet8v-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-lenet5v.pt", "mnist-lenet5v-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-lenet4v.pt", "mnist-lenet4v-distill.pt", ["-m", "distill"]),
             ("cifar-resnet8x.pt", "cifar-resnet8x-prune50.pt", ["-m", "prune", "--sparsity", "0.5"]),
             ("mnist-lenet5x.pt", "mnist-lenet5x-prune50.pt", ["-m", "prune", "--sparsity", "0.5"])]
    for src, out, extra in comps:
        if ("cifar10" if src.startswith("cifar") else "mnist") in datasets and not (d / out).exists():
            _twinspect("compress", str(d / src), *extra, "-o", str(d / out))
    build_keras(d, datasets)
    # ONNX exports and ONNX Runtime's own int8 copies (calibration: 256 training images, model scale)
    if "cifar10" in datasets:
        _export_onnx(d / "cifar-resnet8.pt", d / "cifar-resnet8.onnx", None, None, d / "cifar-resnet8-dyn.onnx")
        _export_onnx(d / "cifar-resnet8q.pt", d / "cifar-resnet8q.onnx", None, None, d / "cifar-resnet8q-dyn.onnx")
        from twinspect.dl.adapters.metadata import read_metadata

        def calibration(model: Path) -> np.ndarray:
            """256 training images as ``model`` sees them (its metadata's scale and per-channel mean/std), NCHW."""
            pre = read_metadata(model)["preprocess"]
            x = load_images("cifar10", split="train")[0][:256].astype(np.float32) / pre["scale"]
            return ((x - np.float32(pre["mean"])) / np.float32(pre["std"])).transpose(0, 3, 1, 2)

        _export_onnx(d / "cifar-resnet8h.pt", d / "cifar-resnet8h.onnx", calibration(d / "cifar-resnet8h.pt"),
                     d / "cifar-resnet8h-qdq.onnx", None)
        _export_onnx(d / "cifar-resnet8s.pt", d / "cifar-resnet8s.onnx", None, None, d / "cifar-resnet8s-dyn.onnx")
        _export_onnx(d / "cifar-resnet14h.pt", d / "cifar-resnet14h.onnx", calibration(d / "cifar-resnet14h.pt"),
                     d / "cifar-resnet14h-qdq.onnx", None)
        _export_onnx(d / "cifar-resnet8v.pt", d / "cifar-resnet8v.onnx", None, None, d / "cifar-resnet8v-dyn.onnx")
        _export_onnx(d / "cifar-resnet8x.pt", d / "cifar-resnet8x.onnx", None, None, d / "cifar-resnet8x-dyn.onnx")
    if "mnist" not in datasets:
        return
    x_mnist = load_images("mnist", split="train")[0][:256].astype(np.float32) / 255.0
    _export_onnx(d / "mnist-lenet5.pt", d / "mnist-lenet5.onnx", None, None, d / "mnist-lenet5-dyn.onnx")
    _export_onnx(d / "mnist-cnn.pt", d / "mnist-cnn.onnx", x_mnist.transpose(0, 3, 1, 2), d / "mnist-cnn-qdq.onnx",
                 d / "mnist-cnn-dyn.onnx")
    _export_onnx(d / "mnist-lenet4.pt", d / "mnist-lenet4.onnx", None, None, d / "mnist-lenet4-dyn.onnx")
    _export_onnx(d / "mnist-cnnh.pt", d / "mnist-cnnh.onnx", x_mnist.transpose(0, 3, 1, 2), d / "mnist-cnnh-qdq.onnx", None)
    _export_onnx(d / "mnist-vgg11q.pt", d / "mnist-vgg11q.onnx", None, None, d / "mnist-vgg11q-dyn.onnx")
    _export_onnx(d / "mnist-lenet5w.pt", d / "mnist-lenet5w.onnx", x_mnist.transpose(0, 3, 1, 2), d / "mnist-lenet5w-qdq.onnx",
                 None)
    _export_onnx(d / "mnist-lenet4w.pt", d / "mnist-lenet4w.onnx", x_mnist.transpose(0, 3, 1, 2), d / "mnist-lenet4w-qdq.onnx",
                 None)
    _export_onnx(d / "mnist-cnn11.pt", d / "mnist-cnn11.onnx", None, None, d / "mnist-cnn11-dyn.onnx")
    _export_onnx(d / "mnist-lenet5m.pt", d / "mnist-lenet5m.onnx", x_mnist.transpose(0, 3, 1, 2), d / "mnist-lenet5m-qdq.onnx",
                 None)
    _export_onnx(d / "mnist-lenet1w.pt", d / "mnist-lenet1w.onnx", None, None, d / "mnist-lenet1w-dyn.onnx")
    _export_onnx(d / "mnist-lenet4m.pt", d / "mnist-lenet4m.onnx", None, None, d / "mnist-lenet4m-dyn.onnx")
    _export_onnx(d / "mnist-cnn22.pt", d / "mnist-cnn22.onnx", None, None, d / "mnist-cnn22-dyn.onnx")
    _export_onnx(d / "mnist-lenet5x.pt", d / "mnist-lenet5x.onnx", None, None, d / "mnist-lenet5x-dyn.onnx")
    # TFLite conversions of the shared Keras models (TensorFlow in a child process)
    todo = {"lenet1.h5": ["fp16=lenet1-fp16.tflite"], "lenet5.h5": ["dyn=lenet5-dyn.tflite", "int8=lenet5-int8.tflite"]}
    np.save(d / "calib-unit.npy", x_mnist)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for src, jobs in todo.items():
        jobs = [j for j in jobs if not (d / j.split("=")[1]).exists()]
        if jobs:
            _run([sys.executable, "-c", _TFLITE, str(shared_models() / src), str(d), str(d / "calib-unit.npy"), *jobs],
                 env=env)


def check(suite_dir: Path, n: int = 1000) -> list[dict]:
    """Load every pair and measure both models' accuracy and top-1 agreement on the first ``n`` test images."""
    from twinspect.dl.data import load_images
    from twinspect.dl.deviate.runner import load_model

    rows = []
    for p in PAIRS:
        o, c = resolve(p, suite_dir)
        if not (o.exists() and c.exists()):
            print(f"{p.name:22s} not built", flush=True)
            continue
        x, y = load_images(p.data, split="test")
        x, y = x[:n], y[:n]
        fo = load_model({"path": str(o), "preprocess": p.preprocess})
        fc = load_model({"path": str(c), "preprocess": p.preprocess})
        lo, lc = fo.predict_proba(x).argmax(1), fc.predict_proba(x).argmax(1)
        rows.append({"pair": p.name, "split": p.split, "kind": p.kind, "acc_orig": float((lo == y).mean()),
                     "acc_comp": float((lc == y).mean()), "agreement": float((lo == lc).mean())})
        print(f"{p.name:22s} {p.split:8s} orig {rows[-1]['acc_orig']:.3f} comp {rows[-1]['acc_comp']:.3f} "
              f"agree {rows[-1]['agreement']:.3f}  {p.kind}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["build", "list", "check"])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--datasets", default="mnist,cifar10", help="build: only the pairs of these data sets")
    ap.add_argument("--only", choices=["heldout9", "heldout10", "heldout11", "heldout12"], help="build: only this hold-out's models")
    args = ap.parse_args()
    if args.command == "build" and args.only == "heldout9":
        build_keras(args.dir, tuple(args.datasets.split(",")), split="heldout9")
    elif args.command == "build" and args.only == "heldout10":
        build_heldout10(args.dir)
    elif args.command == "build" and args.only == "heldout11":
        build_heldout11(args.dir)
    elif args.command == "build" and args.only == "heldout12":
        build_heldout12(args.dir)
    elif args.command == "build":
        build(args.dir, tuple(args.datasets.split(",")))
    elif args.command == "check":
        rows = check(args.dir)
        out = ROOT / "benchmarks" / "results"
        (out / "deviate_suite.json").write_text(json.dumps({"provenance": _provenance.info(__file__), "rows": rows}, indent=2))
        lines = ["# The pair suite of issue 19 (`benchmarks/deviate_suite.py check`)", "",
                 "Accuracy of both models and their top-1 agreement on the first 1,000 test images.", "",
                 "| pair | split | compressed model | original acc % | compressed acc % | top-1 agreement % |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['pair']} | {r['split']} | {r['kind']} | {100 * r['acc_orig']:.1f} | {100 * r['acc_comp']:.1f} | "
                  f"{100 * r['agreement']:.1f} |" for r in rows]
        (out / "deviate_suite.md").write_text(_provenance.md_header(__file__) + "\n".join(lines) + "\n")
    else:
        for p in PAIRS:
            print(f"{p.name:22s} {p.split:8s} {p.data:8s} {p.kind}")


if __name__ == "__main__":
    main()
