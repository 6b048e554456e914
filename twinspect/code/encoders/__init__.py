"""Fragment encoders: fragments in, float32 (N, d) L2-normalised matrix out."""

from twinspect.code.encoders.base import Encoder

__all__ = ["Encoder"]
