"""Small models shipped with attnlab, stored as safetensors in this package (see
``MODEL_CARD.md`` here): chapter 14's causal LMs, a target and a draft model on
:mod:`attnlab.modern` (RoPE, GQA), trained by ``tools/experiments/ch14_lm.py`` on
:mod:`attnlab.data.stories`; chapter 1's English-French translator, trained by
``tools/experiments/ch01_real.py --weights`` on :mod:`attnlab.data.tatoeba`.

    lm = attnlab.models.load_lm("target")           # a CausalLM (a TinyLM), eval, CPU
    cache = attnlab.models.KVCache.for_model(lm)
    logits = lm(ids[None], cache)                    # (1, T, V); the cache now holds T
    logits, weights = lm(next_id[None, None], cache, return_weights=True)
    cache.rollback(1)                                # forget the last token

    model, task = attnlab.models.load_translator()   # a Seq2Seq and its EngFraTask
    r = model.translate(task, "We need a car.")       # r["out"], r["weights"] (T, S)
"""

from .lm import (
    MODEL_NAMES,
    CausalLM,
    KVCache,
    load_lm,
    model_path,
    per_token_loss,
)
from .translator import TRANSLATOR_PATH, load_translator, save_translator

__all__ = [
    "MODEL_NAMES",
    "CausalLM",
    "KVCache",
    "load_lm",
    "model_path",
    "per_token_loss",
    "TRANSLATOR_PATH",
    "load_translator",
    "save_translator",
]
