"""Small causal LMs shipped with attnlab (chapter 14): a target and a draft model on
:mod:`attnlab.modern` (RoPE, GQA), trained by ``tools/experiments/ch14_lm.py`` on
:mod:`attnlab.data.stories` and stored as safetensors in this package (see
``MODEL_CARD.md`` here).

    lm = attnlab.models.load_lm("target")           # a CausalLM (a TinyLM), eval, CPU
    cache = attnlab.models.KVCache.for_model(lm)
    logits = lm(ids[None], cache)                    # (1, T, V); the cache now holds T
    logits, weights = lm(next_id[None, None], cache, return_weights=True)
    cache.rollback(1)                                # forget the last token
"""

from .lm import (
    MODEL_NAMES,
    CausalLM,
    KVCache,
    load_lm,
    model_path,
    per_token_loss,
)

__all__ = [
    "MODEL_NAMES",
    "CausalLM",
    "KVCache",
    "load_lm",
    "model_path",
    "per_token_loss",
]
