"""Reduced CPU-scale reproduction of Wu et al., "How are Deep Learning Models Similar? An Empirical
Study on Clone Analysis of Deep Learning Software" (ICPC 2020) with ``twinspect models compare``.

**Superseded by** ``benchmarks/models_study_v2.py`` (issue 18 item 3): the models here are far too weak
(CIFAR-10 18–32 %), distillation goes into one common student without accuracies, random inputs are
drawn once, the Euclidean distance is not normalised and Table 3 compares each snapshot with the last
only. Kept for the committed v1 results.

What is reproduced, and how it is scaled down (2 shared CPU cores):

* **Models** — the paper's seven families (LeNet-5, ResNet-18, ResNet-34, DenseNet-121, DenseNet-161,
  VGG-16, AlexNet), written in :mod:`twinspect.dl.architectures`, at ``--width`` (default 0.25; DenseNet-161 at
  half of it, LeNet-5 at full width) of their channel counts, trained ``--epochs`` epoch(s) on ``--train-size`` images of the shared MNIST and CIFAR-10
  training sets (accuracies recorded: they are far below the paper's fully trained models).
* **Code level** — the source of each family's model class (``inspect.getsource`` of the zoo class,
  plus the shared BasicBlock for the ResNets) and, for the paper's cross-framework comparison, a
  LeNet-5 training program in PyTorch and in Keras (``benchmarks/models_study_code/``), compared with
  pycode_similar, copydetect and twinspect's clone machinery.
* **Distillation** — every model distilled (Hinton et al., T = 4) into a common LeNet-1 student
  (MNIST) / ResNet-8 student (CIFAR-10), then the students' weight cosine and Euclidean matrices
  (the paper found ≈ 0.55 everywhere: unable to tell models apart).
* **I/O level** — JSD of predicted-label distributions and Jaccard of per-class prediction sets on
  three input sets per data set: its test set, uniform random pixels, and an out-of-distribution set
  (CIFAR-10 in grey, centre-cropped to 28×28, for MNIST models; MNIST padded to 32×32 and repeated to 3
  channels for CIFAR-10 models).
* **CKA maps** (not in the paper) for every pair, on the test set.
* **Table 3** — epoch snapshots of one LeNet-5 (``--snapshots`` successive 1-epoch fits) on
  ``--table3-dataset`` (default: the first of ``--datasets``): weight cosine and Euclidean distance to
  the final snapshot beside the accuracy difference.

Run: ``nice -n 10 .venv/bin/python benchmarks/models_study.py [--work-dir runs/bench-study]``.
Results: ``--out`` (default ``benchmarks/results/models_study``) ``.{md,json}`` and PNG heatmaps in the
directory of that name. The outputs are *overwritten*, not merged: the committed MNIST run is in
``models_study.{md,json}``; the CIFAR-10 half was run separately with ``--datasets cifar10 --skip-code
--out benchmarks/results/models_study_cifar10`` (see the header of each file for its scale and load).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from twinspect._io import atomic_write, write_json  # noqa: E402
from twinspect.reports.table import markdown_table  # noqa: E402

FAMILIES = ["lenet5", "resnet18", "resnet34", "densenet121", "densenet161", "vgg16", "alexnet"]
CLASS_OF = {"lenet5": "LeNet", "resnet18": "ResNet", "resnet34": "ResNet", "densenet121": "DenseNet",
            "densenet161": "DenseNet", "vgg16": "VGG", "alexnet": "AlexNet"}
STUDENT = {"mnist": "lenet1", "cifar10": "resnet8"}
#: Families trained at half the common width (DenseNet-161 at width 0.25 took > 8 min for one MNIST epoch here).
HALF_WIDTH = ("densenet161",)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def train_all(work: Path, dataset: str, width: float, epochs: int, train_size: int, test_size: int) -> list[dict]:
    from twinspect.dl.train import save_model, train_model

    out = []
    for arch in FAMILIES:
        path = work / f"{dataset}-{arch}.pt"
        w = 1.0 if arch == "lenet5" else (width / 2 if arch in HALF_WIDTH else width)
        t = time.perf_counter()
        if not path.exists():
            res = train_model(arch, dataset, epochs=epochs, seed=0, train_size=train_size, width=w, test_size=test_size,
                              augment=False, quiet=True)
            save_model(res.module, path, res.meta)
            acc = res.test_accuracy
        else:
            from twinspect.dl.adapters.metadata import read_metadata

            acc = (read_metadata(path) or {}).get("accuracy")
        out.append({"dataset": dataset, "arch": arch, "width": w, "path": str(path), "accuracy": acc,
                    "train_s": round(time.perf_counter() - t, 1)})
        log(f"  {dataset} {arch}: acc {acc:.3f}")
    return out


def ood_npz(tmp: Path, dataset: str, n: int) -> Path:
    """The other data set reshaped to this one's input shape (see the module docstring)."""
    from twinspect.dl.data import load_images
    from twinspect.dl.train import eval_subset

    if dataset == "mnist":
        # evenly spaced, not the first n: the shared CIFAR-10 test set is sorted by class (the committed
        # MNIST run predates this fix: its OOD set was 300 grey *airplane* crops)
        x, y = load_images("cifar10", "test")
        assert y is not None
        x, _ = eval_subset(x, y, n)
        g = (0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2])[:, 2:30, 2:30, None]
        xo = np.clip(g, 0, 255).astype(np.uint8)
    else:
        x, _ = load_images("mnist", "test", limit=n)
        x = x.reshape(len(x), 28, 28)  # (N, 28, 28, 1) or (N, 28, 28)
        xo = np.repeat(np.pad(x, ((0, 0), (2, 2), (2, 2)))[..., None], 3, axis=-1).astype(np.uint8)
    p = tmp / f"ood-{dataset}.npz"
    np.savez(p, x=xo)
    return p


def code_programs(tmp: Path) -> list[Path]:
    from twinspect.dl import architectures as zoo

    files = []
    for arch in FAMILIES:
        cls = getattr(zoo, CLASS_OF[arch])
        src = inspect.getsource(cls)
        if CLASS_OF[arch] == "ResNet":
            src = inspect.getsource(zoo.BasicBlock) + "\n\n" + src
        if CLASS_OF[arch] == "DenseNet":
            src = inspect.getsource(zoo.DenseLayer) + "\n\n" + src
        p = tmp / f"{arch}.py"
        p.write_text("import torch\nfrom torch import nn\n\n\n" + src)
        files.append(p)
    return files


def fmt_matrix(m, labels) -> str:
    rows = [[lab, *[None if v != v else float(v) for v in row]] for lab, row in zip(labels, m)]
    return markdown_table(rows, ["", *labels], floatfmt=".2f")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", default="runs/bench-study")
    ap.add_argument("--width", type=float, default=0.25)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-size", type=int, default=3000)
    ap.add_argument("--inputs", type=int, default=300)
    ap.add_argument("--snapshots", type=int, default=5)
    ap.add_argument("--datasets", default="mnist,cifar10")
    ap.add_argument("--test-size", type=int, default=2000, help="test images for the recorded accuracies")
    ap.add_argument("--table3-dataset", default=None, help="data set of the Table 3 snapshots (default: first of --datasets)")
    ap.add_argument("--skip-code", action="store_true", help="leave out the code level (it does not depend on the data set)")
    ap.add_argument("--table3-only", action="store_true", help="only the Table 3 snapshots (no code level, no model families)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "models_study"))
    args = ap.parse_args()

    from twinspect.dl.adapters.torch import set_torch_threads
    from twinspect.dl.modelclones import CompareConfig, compare_models, write_plots

    set_torch_threads(1)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    plots = out.parent / out.name
    datasets = args.datasets.split(",")
    t3_data = args.table3_dataset or datasets[0]
    load0 = os.getloadavg()
    md: list[str] = ["# Model clone study at CPU scale (`benchmarks/models_study.py`)", "",
                     f"Data sets: {', '.join(datasets)}. Seven families at width {args.width} (DenseNet-161 at half of it, "
                     f"LeNet-5 at full width), {args.epochs} epoch(s) on {args.train_size} training images; accuracies on "
                     f"{args.test_size} test images; {args.inputs} comparison inputs per set.", ""]
    result: dict = {"args": vars(args), "models": [], "io": {}, "distill": {}, "code": {}, "cka": {}, "table3": [],
                    "table3_dataset": t3_data, "timings_s": {}}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        # -- code level ------------------------------------------------------------------------
        if args.table3_only:
            args.skip_code, datasets = True, []
        progs = [] if args.skip_code else code_programs(tmp)
        cross = [ROOT / "benchmarks" / "models_study_code" / "lenet5_torch.py", ROOT / "benchmarks" / "models_study_code" / "lenet5_keras.py"]
        from twinspect.dl.modelclones.source import (
            copydetect_scores,
            pycode_similar_score,
            read_program,
            token_lcs_scores,
        )

        programs = [] if args.skip_code else [read_program(p) for p in progs + cross]
        labels = FAMILIES + ["lenet5-torch-prog", "lenet5-keras-prog"]
        n = len(programs)
        from twinspect.reports.plots import heatmap

        code_mats = [] if args.skip_code else [
            ("code_pycode_similar", [[pycode_similar_score(programs[i], programs[j]) if i != j else 1.0 for j in range(n)] for i in range(n)]),
            ("code_copydetect", copydetect_scores(programs)),
            ("code_token_lcs", token_lcs_scores(programs))]
        for name, m in code_mats:
            arr = np.array([[np.nan if v is None else v for v in row] for row in m], dtype=float)
            heatmap(arr, plots / f"{name}.png", labels, labels, title=name, vmin=0, vmax=1)
            result["code"][name] = arr.round(3).tolist()
            md += [f"## Code similarity: {name} (row = reference, column = candidate)", "", fmt_matrix(arr, labels), ""]

        for dataset in datasets:
            log(f"training {dataset} models ...")
            t = time.perf_counter()
            models = train_all(work, dataset, args.width, args.epochs, args.train_size, args.test_size)
            result["timings_s"][f"{dataset}/train"] = round(time.perf_counter() - t, 1)
            result["models"] += models
            md += [f"## {dataset}: models", "",
                   markdown_table([[m["arch"], str(m["width"]), 100 * (m["accuracy"] or 0), m["train_s"]] for m in models],
                                  ["family", "width", f"test acc % ({args.test_size:,})", "train s (0 = cached)"], floatfmt=".1f"), ""]
            paths = [m["path"] for m in models]
            names = [m["arch"] for m in models]
            ood = ood_npz(tmp, dataset, args.inputs)
            for set_name, data in (("test", dataset), ("uniform", "uniform"), ("ood", str(ood))):
                t = time.perf_counter()
                r = compare_models(paths, config=CompareConfig(data=data, n_inputs=args.inputs, cka_inputs=min(128, args.inputs),
                                                               levels=("io", "representation") if set_name == "test" else ("io",)))
                key = f"{dataset}/{set_name}"
                result["io"][key] = {k: r.matrix(k).round(4).tolist() for k in ("io_label_jsd", "io_jaccard", "io_top1_agreement")}
                for k in ("io_label_jsd", "io_jaccard"):
                    heatmap(r.matrix(k), plots / f"{dataset}_{set_name}_{k}.png", names, names, title=f"{k} — {dataset}, {set_name} inputs",
                            vmin=0, vmax=1)
                    md += [f"### {dataset}, {set_name} inputs: {k}", "", fmt_matrix(r.matrix(k), names), ""]
                if set_name == "test":
                    result["cka"][dataset] = r.matrix("cka").round(3).tolist()
                    md += [f"### {dataset}: model-level CKA (test inputs)", "", fmt_matrix(r.matrix("cka"), names), ""]
                    write_plots(r, plots / f"{dataset}_cka")
                result["timings_s"][key] = round(time.perf_counter() - t, 1)
                log(f"  {key}: {time.perf_counter() - t:.1f} s")
            # distillation into a common student
            t = time.perf_counter()
            r = compare_models(paths, config=CompareConfig(data=dataset, n_inputs=100, cka_inputs=32, distill_student=STUDENT[dataset],
                                                           distill_epochs=1, distill_train=args.train_size, levels=("weights",)))
            for k in ("distill_cosine", "distill_euclidean"):
                result["distill"][f"{dataset}/{k}"] = r.matrix(k).round(4).tolist()
                heatmap(r.matrix(k), plots / f"{dataset}_{k}.png", names, names, title=f"{k} ({STUDENT[dataset]} students), {dataset}")
                md += [f"### {dataset}: {k} of the distilled {STUDENT[dataset]} students", "", fmt_matrix(r.matrix(k), names), ""]
            off = r.matrix("distill_cosine")[~np.eye(len(names), dtype=bool)]
            result["timings_s"][f"{dataset}/distill"] = round(time.perf_counter() - t, 1)
            md += [f"Off-diagonal student cosine: mean {off.mean():.3f}, range {off.min():.3f}–{off.max():.3f} "
                   f"(distillation {time.perf_counter() - t:.0f} s).", ""]

        # -- Table 3: epoch snapshots --------------------------------------------------------------
        log(f"epoch snapshots ({t3_data}) ...")
        t = time.perf_counter()
        import torch

        from twinspect.dl.adapters.torch import TorchModel
        from twinspect.dl.architectures import build_model
        from twinspect.dl.data import load_images
        from twinspect.dl.modelclones import compare_weights
        from twinspect.dl.train import FitConfig, accuracy, default_preprocess, eval_subset, fit, predict_logits

        x, y = load_images(t3_data, "train")
        xt, yt = load_images(t3_data, "test")
        assert y is not None and yt is not None
        xt, yt = eval_subset(xt, yt, args.test_size)  # evenly spaced: the CIFAR-10 test file is sorted by class
        sub = np.random.default_rng(0).permutation(len(x))[: args.train_size]
        pre = default_preprocess(t3_data, x.shape[-1])
        torch.manual_seed(0)
        m = build_model("lenet5", tuple(x.shape[1:]), 10)
        snaps = []
        for e in range(args.snapshots):
            fit(m, x[sub], y[sub], pre, FitConfig(epochs=1, batch_size=64, lr=1e-3, optimizer="adam", weight_decay=1e-4, seed=e), quiet=True)
            snaps.append((TorchModel(m).canonical_weights(), accuracy(predict_logits(m, xt, pre).argmax(1), yt)))
        final_w, final_acc = snaps[-1]
        rows = []
        for e, (w, acc) in enumerate(snaps):
            c = compare_weights(w, final_w)
            rows.append([e + 1, 100 * acc, 100 * (final_acc - acc), c.cosine, c.euclidean])
        result["table3"] = rows
        result["timings_s"]["table3"] = round(time.perf_counter() - t, 1)
        md += [f"## Table 3: epoch snapshots of one LeNet-5 ({t3_data}) vs its last snapshot", "",
               markdown_table(rows, ["epoch", "test acc %", "acc diff to last (pp)", "weight cosine", "weight Euclidean"], floatfmt=".3f"), ""]
    load1 = os.getloadavg()
    result["timings_s"]["total"] = round(time.perf_counter() - t_all, 1)
    result["loadavg"] = {"start": load0, "end": load1}
    md += [f"Whole study: {time.perf_counter() - t_all:.0f} s on {os.cpu_count()} shared cores, 1 torch thread; "
           f"1-min load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end "
           f"(other jobs were running).", ""]
    with atomic_write(out.with_suffix(".md")) as fh:
        fh.write(_provenance.md_header(__file__) + "\n".join(md))
    write_json(out.with_suffix(".json"), {"provenance": _provenance.info(__file__), **result})
    print("\n".join(md))


if __name__ == "__main__":
    main()
