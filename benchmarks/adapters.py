"""Per-query cost of every model adapter (``twinspect.dl.adapters``).

For each model: load time, milliseconds per single-image ``predict_proba`` call (DFlare's hot path)
and milliseconds per image in a batch of 64, the median of ``--runs`` timed calls after warm-up. Rows
for the framework's own convenience call (Keras ``Model.predict``) show what calling the model
directly saves.

Models: the DiffChaser/DFlare pairs in ../shared/data/models/dflare (Keras ``.h5`` and TFLite
``.lite``), and one LeNet-style torch CNN (untrained weights: timing only) as an eager module,
TorchScript and ONNX.

Run: ``nice .venv/bin/python benchmarks/adapters.py [--runs 200] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _timing import median_ms  # noqa: E402  (sibling module in benchmarks/)
from rich.console import Console  # noqa: E402

from twinspect.dl.adapters import load_classifier  # noqa: E402
from twinspect.dl.data import find_shared_data, load_images  # noqa: E402
from twinspect.reports.table import print_table  # noqa: E402


def _lenet_module():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    ).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="timed single-image calls per model")
    ap.add_argument("--batch-runs", type=int, default=20, help="timed batch-of-64 calls per model")
    ap.add_argument("--quick", action="store_true", help="skip the ResNet pair")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")

    data = find_shared_data()
    if data is None:
        sys.exit("shared data not found (set TWINSPECT_DATA)")
    mnist = load_images("mnist", limit=64)[0]
    cifar = load_images("cifar10", limit=64)[0]
    dflare = data / "models" / "dflare"

    import torch

    from twinspect.dl.adapters import TorchClassifier

    tmp = Path(tempfile.mkdtemp(prefix="twinspect-bench-"))
    module = _lenet_module()
    ts_path, onnx_path = tmp / "lenet.pt", tmp / "lenet.onnx"
    torch.jit.save(torch.jit.trace(module, torch.zeros(1, 1, 28, 28)), str(ts_path))
    torch.onnx.export(
        module, (torch.zeros(1, 1, 28, 28),), str(onnx_path), dynamo=False,
        input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
    )

    specs = [
        ("lenet1.h5", "keras", lambda: load_classifier(dflare / "lenet1.h5", preprocess="unit"), mnist),
        ("lenet1-quan.lite", "tflite", lambda: load_classifier(dflare / "lenet1-quan.lite", preprocess="unit"), mnist),
        ("lenet5.h5", "keras", lambda: load_classifier(dflare / "lenet5.h5", preprocess="unit"), mnist),
        ("lenet5-quan.lite", "tflite", lambda: load_classifier(dflare / "lenet5-quan.lite", preprocess="unit"), mnist),
        ("lenet (eager)", "torch", lambda: TorchClassifier.from_module(module, (28, 28, 1), 10, "unit"), mnist),
        ("lenet.pt", "torch", lambda: load_classifier(ts_path, input_shape=(28, 28, 1)), mnist),
        ("lenet.onnx", "onnx", lambda: load_classifier(onnx_path), mnist),
    ]
    if not args.quick:
        specs += [
            ("resnet.h5", "keras", lambda: load_classifier(dflare / "resnet.h5", preprocess="cifar10-dflare"), cifar),
            ("resnet-quan.lite", "tflite", lambda: load_classifier(dflare / "resnet-quan.lite", preprocess="cifar10-dflare"), cifar),
        ]

    rows = []
    for name, adapter, make, x in specs:
        t = time.perf_counter()
        clf = make()
        load_s = time.perf_counter() - t
        heavy = "resnet" in name
        runs = max(10, args.runs // 5) if heavy else args.runs
        single = median_ms(lambda: clf.predict_proba(x[:1]), runs)
        batch = median_ms(lambda: clf.predict_proba(x), max(3, args.batch_runs // 2) if heavy else args.batch_runs, 2) / len(x)
        rows.append([name, adapter, load_s, single, batch])
        if adapter == "keras":  # what Model.predict would cost instead of calling the model
            pre = clf.preprocess
            rows.append([
                name, "keras predict()", None,
                median_ms(lambda: clf.model.predict(pre(x[:1]), verbose=0), max(10, runs // 10), 2),
                median_ms(lambda: clf.model.predict(pre(x), verbose=0, batch_size=64), 3, 1) / len(x),
            ])
    print_table(
        rows,
        ["model", "adapter", "load s", "ms / single query", "ms / image (batch 64)"],
        title=f"twinspect adapters: median per-query cost (torch threads {torch.get_num_threads()})",
        floatfmt=".3f",
        console=Console(width=110),
    )


if __name__ == "__main__":
    main()
