"""Compressing the KV cache (chapter 14): evict tokens at a fixed budget, or store
keys and values in fewer bits.

**Eviction.** Each policy is a function from what the cache knows (its length, the
attention it has received) and a ``budget`` to the indices of the tokens it keeps,
sorted by position; a budget at or above the length keeps everything.

==================  ======================================================  ============
policy              keeps                                                   per head?
==================  ======================================================  ============
:func:`keep_window` ``sinks`` first tokens + the most recent ones           no
                    (StreamingLLM, Xiao et al. 2024)
:func:`keep_h2o`    ``recent`` newest + the largest *accumulated* attention  yes
                    (heavy hitters, H2O, Zhang et al. 2023)
:func:`keep_snapkv` the last ``w`` (observation window) + the largest votes yes
                    of those ``w`` queries, pooled along the sequence
                    (SnapKV, Li et al. 2024)
:func:`keep_tova`   the largest attention from the *current* query,         no (per layer)
                    averaged over heads (TOVA, Oren et al. 2024)
==================  ======================================================  ============

:func:`evict_decode` runs an LM under a policy: the prompt is prefilled with the full
cache, compressed to the budget with the prompt's statistics, then the continuation is
decoded one token at a time, each new token attending to the (at most ``budget``)
cached tokens and itself, after which the cache is cut back to the budget. It returns
the loss of every continuation token, to compare with the full cache's.

SnapKV compresses once, after the prompt; to hold the same fixed budget while decoding
we let the last ``w`` decoded queries vote again at every step (an extension).
Evicted tokens keep their RoPE rotation: the positions of the kept keys do not change.

**Quantisation.** :func:`quantize` / :func:`dequantize`: asymmetric min-max integer
codes of ``bits`` bits, with one scale and zero point per token (statistics over the
channels) or per channel (statistics over the tokens, in groups of ``group`` tokens).
The round-trip error is at most ``scale / 2`` per entry. KIVI (Liu et al. 2024) stores
keys per channel (a few channels carry outliers that would set every token's scale)
and values per token. :class:`QuantCache` is a decoding cache that stores what it is
given that way; :func:`channel_outliers` measures how uneven the channels are.

Shapes: keys and values ``(B, G, S, Dh)`` (G key/value heads), attention weights
``(B, H, T, S)``.
"""

from __future__ import annotations

from .evict import (  # noqa: F401
    POLICIES,
    evict_decode,
    keep_h2o,
    keep_snapkv,
    keep_tova,
    keep_window,
    lm_forward,
)
from .quant import (  # noqa: F401
    QuantCache,
    channel_outliers,
    dequantize,
    fake_quantize,
    quantize,
)

__all__ = [
    "keep_window",
    "keep_h2o",
    "keep_snapkv",
    "keep_tova",
    "POLICIES",
    "evict_decode",
    "lm_forward",
    "quantize",
    "dequantize",
    "fake_quantize",
    "QuantCache",
    "channel_outliers",
]
