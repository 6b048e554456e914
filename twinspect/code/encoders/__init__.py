"""Fragment encoders: fragments in, float32 (N, d) L2-normalised matrix out.

* ``"lexical"`` — :class:`~twinspect.code.encoders.lexical.LexicalEncoder`: hashed TF-IDF over
  identifier-blind token n-grams (fast, default; needs :meth:`fit` on the corpus for IDF).
* ``"neural"`` — :class:`~twinspect.code.encoders.neural.NeuralEncoder`: transformer sentence
  embeddings (SSCD; all-MiniLM-L6-v2 offline by default, or a fine-tuned model directory).
* ``"semantic"`` — :class:`~twinspect.code.encoders.semantic.SemanticEncoder`: the clone-trained
  encoder shipped in the package (TF-IDF bags projected by a contrastively trained linear map).

Use :func:`make_encoder` to build one by name, and :func:`encoder_from_state` to rebuild a persisted
one (``{"name": ..., **state_dict()}``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twinspect.code.encoders.base import Encoder, l2_normalize
from twinspect.errors import InputError


def _lexical(**params: Any) -> Encoder:
    from twinspect.code.encoders.lexical import LexicalEncoder

    return LexicalEncoder(**params)


def _neural(**params: Any) -> Encoder:
    from twinspect.code.encoders.neural import NeuralEncoder

    return NeuralEncoder(**params)


def _semantic(**params: Any) -> Encoder:
    from twinspect.code.encoders.semantic import SemanticEncoder

    return SemanticEncoder(**params)


#: Encoder name -> factory taking the encoder's keyword parameters.
ENCODERS: dict[str, Callable[..., Encoder]] = {"lexical": _lexical, "neural": _neural, "semantic": _semantic}


def make_encoder(name: str, **params: Any) -> Encoder:
    """Create an encoder by name.

    Args:
        name: ``"lexical"`` or ``"neural"``.
        **params: constructor parameters (e.g. ``dim``, ``ngram_range``, ``identifier_weight`` for
            lexical; ``model_path``, ``max_tokens``, ``batch_size`` for neural).

    Returns:
        An unfitted :class:`Encoder` (the lexical one fits its IDF with ``fit`` or on first encode).

    Raises:
        InputError: unknown name or parameter.
    """
    factory = ENCODERS.get(name)
    if factory is None:
        raise InputError(f"unknown encoder {name!r}", hint=f"choose one of {', '.join(ENCODERS)}")
    try:
        return factory(**params)
    except TypeError as exc:
        raise InputError(f"bad parameters for the {name} encoder: {exc}") from exc


def encoder_from_state(name: str, state: dict) -> Encoder:
    """Rebuild a persisted encoder from its ``state_dict()`` (lexical: fitted IDF; neural: params).

    Raises:
        InputError: unknown name or malformed state.
    """
    if name == "lexical":
        from twinspect.code.encoders.lexical import LexicalEncoder

        return LexicalEncoder.from_state(state)
    if name == "neural":
        from twinspect.code.encoders.neural import NeuralEncoder

        return NeuralEncoder.from_state(state)
    if name == "semantic":
        from twinspect.code.encoders.semantic import SemanticEncoder

        return SemanticEncoder.from_state(state)
    raise InputError(f"unknown encoder {name!r}", hint=f"choose one of {', '.join(ENCODERS)}")


__all__ = ["ENCODERS", "Encoder", "encoder_from_state", "l2_normalize", "make_encoder"]
