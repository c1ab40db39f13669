"""The attention layer of a 2026 LLM: RoPE and its scalings, ALiBi, QK-norm, logit
soft-capping, sink logits, output gates, sliding windows, GQA/MQA and multi-head
latent attention, each checked against transformers' own layers (chapter 13)."""

from .attention import Attention, Cache, RMSNorm, attend
from .latent import LatentAttention
from .rope import RoPE, alibi_bias, alibi_slopes, rope_frequencies

__all__ = [
    "Attention",
    "Cache",
    "LatentAttention",
    "RMSNorm",
    "RoPE",
    "alibi_bias",
    "alibi_slopes",
    "attend",
    "rope_frequencies",
]
