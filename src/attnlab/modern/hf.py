"""Weight copies from transformers' attention layers into ``attnlab.modern``.

Only reads attributes of the given module and its ``config``; transformers is never
imported here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .rope import RoPE

__all__ = [
    "rope_from_config",
    "rope_parameters_of",
    "attention_from_hf",
    "latent_from_hf",
]

_SUPPORTED = (
    "LlamaAttention",
    "Qwen3Attention",
    "Gemma2Attention",
    "GptOssAttention",
    "Qwen3NextAttention",
)


def rope_parameters_of(config) -> dict:
    """A config's RoPE parameters, read the 5.x way (``rope_parameters``, with
    ``rope_theta`` inside) or the 4.x way (``rope_scaling``, whose kind is ``"type"``
    or ``"rope_type"``, and ``config.rope_theta``), as one 5.x-style dict."""
    rp = dict(getattr(config, "rope_parameters", None) or {})
    old = getattr(config, "rope_scaling", None)
    if isinstance(old, dict):  # 4.x: the scaling only; the base is on the config
        rp = {**dict(old), **rp}
    if not isinstance(rp.get("rope_type"), str):
        rp["rope_type"] = rp.get("type") or "default"
    rp.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    if "original_max_position_embeddings" not in rp:
        # Phi-3 keeps the pretraining length on the config itself
        orig = getattr(config, "original_max_position_embeddings", None)
        rp["original_max_position_embeddings"] = orig or getattr(
            config, "max_position_embeddings", None
        )
    return rp


_KINDS = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")


def rope_from_config(config, layout: str = "half") -> RoPE:
    """The RoPE a transformers config describes: default, linear, dynamic, yarn,
    llama3 or longrope, from a 5.x ``rope_parameters`` or a 4.x ``rope_scaling``;
    any other kind raises ``ValueError`` (never a silent plain RoPE)."""
    rp = rope_parameters_of(config)
    kind = rp["rope_type"]
    base = rp["rope_theta"]
    fraction = rp.get(
        "partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)
    )
    orig = rp["original_max_position_embeddings"]
    scaling: dict | None
    if kind == "default":
        scaling = None
    elif kind == "linear":
        scaling = {"type": "linear", "factor": rp["factor"]}
    elif kind == "dynamic":
        scaling = {
            "type": "dynamic",
            "factor": rp["factor"],
            "original_max_position": config.max_position_embeddings,
        }
    elif kind == "yarn":
        factor = rp.get("factor") or config.max_position_embeddings / orig
        scaling = {"type": "yarn", "factor": factor, "original_max_position": orig}
        for key in (
            "beta_fast",
            "beta_slow",
            "attention_factor",
            "mscale",
            "mscale_all_dim",
            "truncate",
        ):
            if rp.get(key) is not None:
                scaling[key] = rp[key]
    elif kind == "llama3":
        scaling = {
            "type": "llama3",
            "factor": rp["factor"],
            "original_max_position": orig,
            "low_freq_factor": rp["low_freq_factor"],
            "high_freq_factor": rp["high_freq_factor"],
        }
    elif kind == "longrope":
        factor = rp.get("factor") or config.max_position_embeddings / orig
        scaling = {
            "type": "longrope",
            "factor": factor,
            "original_max_position": orig,
            "short_factor": list(rp["short_factor"]),
            "long_factor": list(rp["long_factor"]),
        }
        if rp.get("attention_factor") is not None:
            scaling["attention_factor"] = rp["attention_factor"]
    else:
        raise ValueError(
            f"rope_from_config: rope_type {kind!r} is not supported (supported: "
            f"{_KINDS})"
        )
    return RoPE(base, layout, scaling, fraction=fraction)


def _copy(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    with torch.no_grad():
        dst.weight.copy_(weight)
        if dst.bias is not None and bias is not None:
            dst.bias.copy_(bias)


def _norm_weight(norm: Any) -> torch.Tensor:
    """RMSNorm weight as ``y · w``: Gemma-style norms store ``w - 1``."""
    w = norm.weight.detach()
    name = type(norm).__name__
    return 1.0 + w if name.startswith(("Qwen3Next", "Gemma")) else w


def _eps(norm: Any) -> float:
    return float(getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6)))


def attention_from_hf(cls, module: Any):
    name = type(module).__name__
    if name not in _SUPPORTED:
        raise TypeError(
            f"Attention.from_hf: expected one of {_SUPPORTED}, got {name} "
            "(DeepseekV3Attention goes to LatentAttention.from_hf)"
        )
    config = module.config
    H, G = config.num_attention_heads, config.num_key_value_heads
    Dh, D = module.head_dim, config.hidden_size
    gated = name == "Qwen3NextAttention"
    has_bias = module.q_proj.bias is not None
    if has_bias != (module.o_proj.bias is not None):
        raise ValueError(
            "Attention.from_hf: q_proj and o_proj must both have biases or neither"
        )
    qk_norm = getattr(module, "q_norm", None) is not None
    layer = cls(
        D,
        H,
        G,
        rope=rope_from_config(config),
        qk_norm=qk_norm,
        softcap=getattr(module, "attn_logit_softcapping", None),
        sink=getattr(module, "sinks", None) is not None,
        output_gate=gated,
        window=getattr(module, "sliding_window", None),
        head_dim=Dh,
        scale=module.scaling,
        bias=has_bias,
        norm_eps=_eps(module.q_norm) if qk_norm else 1e-6,
    )
    wq, bq = module.q_proj.weight.detach(), module.q_proj.bias
    if gated:  # Qwen3-Next packs [q_h, gate_h] per head in q_proj
        wq2 = wq.view(H, 2, Dh, D)  # (H, 2, Dh, D)
        wq, wg = wq2[:, 0].reshape(H * Dh, D), wq2[:, 1].reshape(H * Dh, D)
        bg = None
        if bq is not None:
            b2 = bq.detach().view(H, 2, Dh)
            bq, bg = b2[:, 0].reshape(-1), b2[:, 1].reshape(-1)
        _copy(layer.gate_proj, wg, bg)
    _copy(layer.q_proj, wq, None if bq is None else bq.detach())
    for mine, theirs in (
        (layer.k_proj, module.k_proj),
        (layer.v_proj, module.v_proj),
        (layer.o_proj, module.o_proj),
    ):
        _copy(
            mine,
            theirs.weight.detach(),
            None if theirs.bias is None else theirs.bias.detach(),
        )
    with torch.no_grad():
        if qk_norm:
            layer.q_norm.weight.copy_(_norm_weight(module.q_norm))
            layer.k_norm.weight.copy_(_norm_weight(module.k_norm))
        if layer.sinks is not None:
            layer.sinks.copy_(module.sinks.detach())
    return layer.to(wq.dtype)


def latent_from_hf(cls, module: Any, *, absorb: bool = False):
    name = type(module).__name__
    if name != "DeepseekV3Attention":
        raise TypeError(
            f"LatentAttention.from_hf: expected DeepseekV3Attention, got {name}"
        )
    config = module.config
    if getattr(module.kv_a_proj_with_mqa, "bias", None) is not None:
        raise ValueError(
            "LatentAttention.from_hf: attention_bias=True is not supported"
        )
    layout = "interleaved" if getattr(config, "rope_interleave", False) else "half"
    q_rank = module.q_lora_rank
    layer = cls(
        config.hidden_size,
        module.num_heads,
        kv_rank=module.kv_lora_rank,
        q_rank=q_rank,
        nope_dim=module.qk_nope_head_dim,
        rope_dim=module.qk_rope_head_dim,
        v_dim=module.v_head_dim,
        rope=rope_from_config(config, layout),
        absorb=absorb,
        scale=module.scaling,
        norm_eps=_eps(module.kv_a_layernorm),
    )
    with torch.no_grad():
        if q_rank is None:
            layer.q_proj.weight.copy_(module.q_proj.weight)
        else:
            layer.q_proj[0].weight.copy_(module.q_a_proj.weight)
            layer.q_proj[1].weight.copy_(module.q_a_layernorm.weight)
            layer.q_proj[1].eps = _eps(module.q_a_layernorm)
            layer.q_proj[2].weight.copy_(module.q_b_proj.weight)
        layer.kv_down.weight.copy_(module.kv_a_proj_with_mqa.weight)
        layer.kv_norm.weight.copy_(module.kv_a_layernorm.weight)
        layer.kv_up.weight.copy_(module.kv_b_proj.weight)
        layer.o_proj.weight.copy_(module.o_proj.weight)
    return layer.to(module.o_proj.weight.dtype)
