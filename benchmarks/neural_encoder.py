"""Speed and fidelity of the neural code encoder's runtimes: PyTorch vs ONNX Runtime fp32 / int8.

Issue 8 asks for ≥ 150 fragments/s on 2 cores with the same neighbours as the PyTorch model
within a stated tolerance. For each runtime and truncation length this script embeds the same
fragments (this interpreter's standard library, tests excluded, first ``--n`` fragments in path
order) and reports fragments/s, the cosine between each fragment's embedding and the PyTorch
fp32 embedding at 128 tokens (the reference), and how often each fragment's nearest neighbour
(top-1) and its 10 nearest neighbours agree with the reference's.

Usage::

    python benchmarks/neural_encoder.py [--n 1000] [--lengths 64,128] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import time
from pathlib import Path

import _provenance  # sibling module in benchmarks/: the results files' provenance header
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXCLUDE = ["test/", "tests/", "idlelib/", "lib2to3/", "site-packages/", "turtledemo/"]


def agreement(ref: np.ndarray, got: np.ndarray, k: int = 10) -> tuple[float, float]:
    """Share of rows whose top-1 neighbour agrees, and mean top-k overlap, between two embeddings."""
    s_ref, s_got = ref @ ref.T, got @ got.T
    np.fill_diagonal(s_ref, -2)
    np.fill_diagonal(s_got, -2)
    nn_ref = np.argsort(-s_ref, axis=1)[:, :k]
    nn_got = np.argsort(-s_got, axis=1)[:, :k]
    top1 = float(np.mean(nn_ref[:, 0] == nn_got[:, 0]))
    topk = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(nn_ref, nn_got)]))
    return top1, topk


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=sysconfig.get_paths()["stdlib"])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--lengths", default="64,128")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from twinspect.code.encoders import neural_onnx
    from twinspect.code.encoders.neural import NeuralEncoder, default_model_path, fragment_text
    from twinspect.code.fragments import mine

    frags, _ = mine([args.path], exclude=EXCLUDE, quiet=True)
    texts = [fragment_text(f) for f in frags[: args.n]]
    enc = NeuralEncoder(max_tokens=128, batch_size=args.batch_size)
    tok = enc.model.tokenizer
    enc.encode_texts(texts[:16])  # warm-up
    rows = []
    t = time.perf_counter()
    ref = enc.encode_texts(texts)
    rows.append(("torch", "fp32", 128, len(texts) / (time.perf_counter() - t), 1.0, 1.0, 1.0, 1.0))
    for length in [int(v) for v in args.lengths.split(",")]:
        if length != 128:
            e2 = NeuralEncoder(max_tokens=length, batch_size=args.batch_size)
            t = time.perf_counter()
            got = e2.encode_texts(texts)
            fps = len(texts) / (time.perf_counter() - t)
            cos = (got * ref).sum(1)
            rows.append(("torch", "fp32", length, fps, float(cos.mean()), float(cos.min()), *agreement(ref, got)))
        for precision in neural_onnx.PRECISIONS:
            path = neural_onnx.exported_model(default_model_path(), precision=precision)
            neural_onnx.embed(path, tok, texts[:16], max_tokens=length)  # warm-up
            t = time.perf_counter()
            got = neural_onnx.embed(path, tok, texts, max_tokens=length, batch_size=args.batch_size)
            fps = len(texts) / (time.perf_counter() - t)
            cos = (got * ref).sum(1)
            rows.append(("onnxruntime", precision, length, fps, float(cos.mean()), float(cos.min()), *agreement(ref, got)))
    load = os.getloadavg()
    print(f"{len(texts)} stdlib fragments; load average {load[0]:.2f}; reference = torch fp32 at 128 tokens\n")
    print("| runtime | precision | max tokens | fragments/s | mean cos | min cos | top-1 agree | top-10 overlap |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.4f} | {r[5]:.4f} | {r[6]:.3f} | {r[7]:.3f} |")
    if args.json:
        keys = ["runtime", "precision", "max_tokens", "fragments_per_s", "mean_cos", "min_cos", "top1_agree", "top10_overlap"]
        args.json.write_text(json.dumps({"provenance": _provenance.info(__file__), "n": len(texts), "load": load[0], "rows": [dict(zip(keys, r)) for r in rows]}, indent=2))


if __name__ == "__main__":
    main()
