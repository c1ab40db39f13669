"""attnlab.modern against transformers' own attention layers (tiny random configs,
weights copied by ``from_hf``), against bloom's ALiBi tensor and float64 formulas.

``reference_cases()`` is also what chapter 13's closing note reads its maximum
differences from (run this file's ``__main__``).
"""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.modern import Attention, LatentAttention, RoPE, alibi_slopes

transformers = pytest.importorskip("transformers")

TOL = 1e-5  # HF computes cos/sin in float32; ours in float64 — the rest is float64


def _randomize(model: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)


def _run_hf(model, T: int, seed: int = 0):
    """Run a 1-layer HF model (eager, float64); capture layer 0's attention."""
    cap: dict = {}

    class _Stop(Exception):
        pass

    def hook(mod, args, kwargs, out):
        cap["x"] = kwargs["hidden_states"]
        cap["out"] = out[0]
        raise _Stop  # the rest of the model (MoE etc.) is not needed

    attn = model.layers[0].self_attn
    handle = attn.register_forward_hook(hook, with_kwargs=True)
    ids = torch.randint(
        0,
        model.config.vocab_size,
        (2, T),
        generator=torch.Generator().manual_seed(seed),
    )
    try:
        with torch.no_grad():
            model(input_ids=ids)
    except _Stop:
        pass
    finally:
        handle.remove()
    return attn, cap["x"], cap["out"]


def _model(name: str, **kw):
    cfg_cls = getattr(transformers, f"{name}Config")
    model_cls = getattr(transformers, f"{name}Model")
    common = dict(
        vocab_size=37,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="eager",
    )
    common.update(kw)
    cfg = cfg_cls(**common)
    model = model_cls(cfg).double().eval()
    _randomize(model)
    return model


LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0, 1.1, 1.7, 2.3],
    "long_factor": [1.2, 2.5, 4.0, 7.5],
    "original_max_position_embeddings": 16,
    "rope_theta": 10000.0,
}

CONFIGS = {
    "llama_rope": ("Llama", dict(max_position_embeddings=64), 12),
    "llama_linear": (
        "Llama",
        dict(
            max_position_embeddings=16,
            rope_parameters={
                "rope_type": "linear",
                "factor": 2.0,
                "rope_theta": 10000.0,
            },
        ),
        40,
    ),
    "llama_dynamic": (
        "Llama",
        dict(
            max_position_embeddings=16,
            rope_parameters={
                "rope_type": "dynamic",
                "factor": 2.0,
                "rope_theta": 10000.0,
            },
        ),
        40,
    ),
    "llama_yarn": (
        "Llama",
        dict(
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "rope_theta": 10000.0,
            },
        ),
        40,
    ),
    "llama3_rope": (
        "Llama",
        dict(
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
                "rope_theta": 10000.0,
            },
        ),
        40,
    ),
    "longrope_long": (  # 40 > 16 positions: the long factors
        "Llama",
        dict(max_position_embeddings=64, rope_parameters=LONGROPE),
        40,
    ),
    "longrope_short": (
        "Llama",
        dict(max_position_embeddings=64, rope_parameters=LONGROPE),
        12,
    ),
    "qwen3_qk_norm": ("Qwen3", dict(head_dim=8, max_position_embeddings=64), 12),
    "gemma2_softcap_window": (
        "Gemma2",
        dict(
            head_dim=8,
            query_pre_attn_scalar=12,
            attn_logit_softcapping=2.0,
            sliding_window=5,
            layer_types=["sliding_attention"],
            max_position_embeddings=64,
        ),
        14,
    ),
    "gptoss_sinks": (
        "GptOss",
        dict(
            head_dim=8,
            num_local_experts=2,
            num_experts_per_tok=1,
            sliding_window=6,
            layer_types=["sliding_attention"],
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "rope_theta": 150000.0,
            },
        ),
        24,
    ),
    "qwen3next_gate": (
        "Qwen3Next",
        dict(
            head_dim=16,
            layer_types=["full_attention"],
            num_experts=2,
            num_experts_per_tok=1,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=16,
            max_position_embeddings=64,
        ),
        12,
    ),
}

MLA_CONFIG = dict(
    vocab_size=37,
    hidden_size=32,
    intermediate_size=48,
    moe_intermediate_size=16,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=16,
    kv_lora_rank=12,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=6,
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_group=1,
    topk_group=1,
    first_k_dense_replace=1,
    max_position_embeddings=64,
    rope_interleave=True,
    attn_implementation="eager",
)


def reference_cases():
    """(name, ours, theirs) for every option against its transformers layer."""
    out = []
    for name, (arch, kw, T) in CONFIGS.items():
        attn, x, ref = _run_hf(_model(arch, **kw), T)
        mine = Attention.from_hf(attn)
        with torch.no_grad():
            out.append((name, mine(x), ref))
    cfg = transformers.DeepseekV3Config(**MLA_CONFIG)
    model = transformers.DeepseekV3Model(cfg).double().eval()
    _randomize(model)
    attn, x, ref = _run_hf(model, 12)
    for absorb in (False, True):
        mine = LatentAttention.from_hf(attn, absorb=absorb)
        with torch.no_grad():
            out.append(
                (f"deepseek_v3_mla{'_absorbed' if absorb else ''}", mine(x), ref)
            )
    return out


@pytest.fixture(scope="module")
def cases():
    return {name: (mine, ref) for name, mine, ref in reference_cases()}


@pytest.mark.parametrize(
    "name", [*CONFIGS, "deepseek_v3_mla", "deepseek_v3_mla_absorbed"]
)
def test_matches_transformers(cases, name):
    mine, ref = cases[name]
    assert mine.shape == ref.shape
    assert ref.abs().max() > 1e-3  # the reference is not trivially zero
    torch.testing.assert_close(mine, ref, atol=TOL, rtol=TOL)


class _Config4x:
    """A transformers 4.x-style config: ``rope_scaling`` (kind under ``"type"`` or
    ``"rope_type"``) and ``rope_theta`` on the config, no ``rope_parameters``."""

    def __init__(self, config, scaling: dict, key: str) -> None:
        self.__dict__.update(
            {k: v for k, v in vars(config).items() if k != "rope_parameters"}
        )
        rp = dict(config.rope_parameters)
        self.rope_theta = rp.pop("rope_theta")
        kind = rp.pop("rope_type")
        self.rope_scaling = {key: kind, **{k: v for k, v in rp.items() if k in scaling}}


@pytest.mark.parametrize(
    "name, key", [("llama3_rope", "rope_type"), ("llama_yarn", "type")]
)
def test_a_transformers_4_config_keeps_its_scaling(name, key):
    """The same layer read from a 4.x-style config (``rope_scaling``) gives the same
    output as from the 5.x one: the scaling is not silently dropped."""
    arch, kw, T = CONFIGS[name]
    attn, x, ref = _run_hf(_model(arch, **kw), T)
    scaling = kw["rope_parameters"]
    attn.config = _Config4x(attn.config, scaling, key)
    assert not hasattr(attn.config, "rope_parameters")
    mine = Attention.from_hf(attn)
    assert mine.rope.scaling is not None
    assert mine.rope.scaling["type"] == scaling["rope_type"]
    with torch.no_grad():
        torch.testing.assert_close(mine(x), ref, atol=TOL, rtol=TOL)


def test_an_unknown_rope_type_raises():
    from attnlab.modern.hf import rope_from_config

    class Cfg:
        rope_scaling = {"type": "su", "factor": 2.0}
        rope_theta = 10000.0
        max_position_embeddings = 64

    with pytest.raises(ValueError, match="rope_type 'su' is not supported"):
        rope_from_config(Cfg())


@pytest.mark.parametrize(
    "name",
    ["llama_rope", "llama_linear", "llama_yarn", "llama3_rope", "longrope_long"],
)
@pytest.mark.parametrize("T", [12, 40])
def test_cos_sin_match_transformers_rotary_embedding(name, T):
    """Our cos/sin (float32 angles) against transformers' own rotary module."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from attnlab.modern.hf import rope_from_config

    arch, kw, _ = CONFIGS[name]
    cfg = transformers.LlamaConfig(
        vocab_size=37,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        **kw,
    )
    pos = torch.arange(T)[None]  # (1, T)
    x = torch.zeros(1, T, 32)
    cos_ref, sin_ref = LlamaRotaryEmbedding(cfg)(x, pos)  # (1, T, 8): [c, c]
    cos, sin = rope_from_config(cfg).cos_sin(pos[0], 8, torch.float32)  # (T, 4)
    torch.testing.assert_close(cos, cos_ref[0, :, :4], atol=2e-6, rtol=0)
    torch.testing.assert_close(sin, sin_ref[0, :, :4], atol=2e-6, rtol=0)


MLA_YARN = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 16,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "rope_theta": 10000.0,
}


def test_mla_with_yarn_built_directly_scales_the_whole_softmax():
    """DeepSeek-V3 with YaRN: transformers multiplies the whole softmax scale by
    mscale(s, mscale_all_dim)^2. A LatentAttention built directly with the same RoPE
    (no explicit scale) does the same, and matches transformers' layer."""
    cfg = transformers.DeepseekV3Config(**{**MLA_CONFIG, "rope_parameters": MLA_YARN})
    model = transformers.DeepseekV3Model(cfg).double().eval()
    _randomize(model)
    attn, x, ref = _run_hf(model, 40)
    copied = LatentAttention.from_hf(attn)
    direct = LatentAttention(
        32,
        4,
        kv_rank=12,
        q_rank=16,
        nope_dim=8,
        rope_dim=4,
        v_dim=6,
        rope=copied.rope,
    ).double()
    direct.load_state_dict(copied.state_dict())
    direct.q_proj[1].eps = copied.q_proj[1].eps
    assert math.isclose(direct.scale, attn.scaling, rel_tol=1e-12)
    assert direct.scale > 12**-0.5 * 1.1  # mscale(4)^2 = 1.29
    with torch.no_grad():
        torch.testing.assert_close(direct(x), ref, atol=TOL, rtol=TOL)
    plain_yarn = RoPE(
        scaling={"type": "yarn", "factor": 4.0, "original_max_position": 16}
    )
    with pytest.raises(ValueError, match="mscale_all_dim"):
        LatentAttention(32, 4, kv_rank=12, nope_dim=8, rope_dim=4, v_dim=6,
                        rope=plain_yarn)  # fmt: skip
    LatentAttention(
        32, 4, kv_rank=12, nope_dim=8, rope_dim=4, v_dim=6, rope=plain_yarn, scale=0.3
    )  # fmt: skip  (explicit: accepted)


def test_options_are_switched_on():
    """from_hf turned on what each reference layer has (so a pass means something)."""
    attn, _, _ = _run_hf(
        _model(
            CONFIGS["gemma2_softcap_window"][0], **CONFIGS["gemma2_softcap_window"][1]
        ),
        4,
    )
    g = Attention.from_hf(attn)
    assert g.softcap == 2.0 and g.window == 5 and g.scale == 12**-0.5
    attn, _, _ = _run_hf(
        _model(CONFIGS["gptoss_sinks"][0], **CONFIGS["gptoss_sinks"][1]), 4
    )
    s = Attention.from_hf(attn)
    assert s.sinks is not None and s.window == 6 and s.rope.scaling["type"] == "yarn"
    attn, _, _ = _run_hf(
        _model(CONFIGS["qwen3next_gate"][0], **CONFIGS["qwen3next_gate"][1]), 4
    )
    q = Attention.from_hf(attn)
    assert q.gate_proj is not None and q.q_norm is not None and q.rope.fraction == 0.25


def _bloom_reference(layer: Attention, x: torch.Tensor) -> torch.Tensor:
    """Eager causal attention with bloom's build_alibi_tensor added to the scores."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    B, T, D = x.shape
    H, Dh = layer.num_heads, layer.head_dim
    alibi = build_alibi_tensor(torch.ones(B, T), H, x.dtype).view(B, H, 1, T)
    q = layer.q_proj(x).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
    k = layer.k_proj(x).view(B, T, H, Dh).transpose(1, 2)
    v = layer.v_proj(x).view(B, T, H, Dh).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(Dh) + alibi  # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    w = scores.masked_fill(~causal, float("-inf")).softmax(-1)
    out = (w @ v).transpose(1, 2).reshape(B, T, D)
    return layer.o_proj(out)


@pytest.mark.parametrize("heads", [4, 6, 8, 12])
def test_alibi_matches_bloom(heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    bloom = build_alibi_tensor(torch.ones(1, 3), heads, torch.float64)  # (H, 1, 3)
    # bloom computes its slopes in float32: equal to float32 rounding
    torch.testing.assert_close(
        alibi_slopes(heads), bloom[:, 0, 1], atol=1e-7, rtol=1e-7
    )
    layer = Attention(heads * 4, heads, alibi=True).double()
    x = torch.randn(2, 11, heads * 4, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(
            layer(x), _bloom_reference(layer, x), atol=1e-6, rtol=0
        )


def test_ntk_matches_float64_formula():
    d, base, s = 16, 10000.0, 8.0
    rope = RoPE(base, scaling={"type": "ntk", "factor": s})
    theta, att = rope.angles(torch.arange(50), d)
    new_base = base * s ** (d / (d - 2))
    expect = torch.tensor(
        [[t * new_base ** (-2 * i / d) for i in range(d // 2)] for t in range(50)],
        dtype=torch.float64,
    )
    torch.testing.assert_close(theta, expect, atol=1e-12, rtol=1e-12)
    assert att == 1.0
    # the lowest frequency is slowed by exactly s, the highest is untouched
    plain, _ = RoPE(base).angles(torch.tensor([1]), d)
    assert math.isclose(float(plain[0, -1] / theta[1, -1]), s, rel_tol=1e-12)
    assert float(theta[1, 0]) == float(plain[0, 0])


def test_interleaved_with_permuted_weights_equals_half():
    H, Dh, D = 4, 8, 32
    half = Attention(D, H, rope=RoPE(layout="half")).double()
    inter = Attention(D, H, rope=RoPE(layout="interleaved")).double()
    inter.load_state_dict(half.state_dict())
    # HF's permutation: feature 2i <- i, 2i+1 <- i + Dh/2 within each head
    perm = torch.stack(
        (torch.arange(Dh // 2), torch.arange(Dh // 2) + Dh // 2), 1
    ).flatten()
    rows = (torch.arange(H)[:, None] * Dh + perm[None]).flatten()
    with torch.no_grad():
        inter.q_proj.weight.copy_(half.q_proj.weight[rows])
        inter.k_proj.weight.copy_(half.k_proj.weight[rows])
    x = torch.randn(2, 9, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(inter(x), half(x), atol=1e-12, rtol=0)
        # without the permutation the layouts disagree
        inter.q_proj.weight.copy_(half.q_proj.weight)
        inter.k_proj.weight.copy_(half.k_proj.weight)
        assert (inter(x) - half(x)).abs().max() > 1e-3


def test_naive_mla_equals_absorbed_float64():
    torch.manual_seed(0)
    naive = LatentAttention(32, 4, kv_rank=12, nope_dim=8, rope_dim=4, v_dim=6).double()
    absorbed = LatentAttention(
        32, 4, kv_rank=12, nope_dim=8, rope_dim=4, v_dim=6, absorb=True
    ).double()
    absorbed.load_state_dict(naive.state_dict())
    x = torch.randn(3, 10, 32, dtype=torch.float64)
    with torch.no_grad():
        a, b = naive(x), absorbed(x)
    assert (a - b).abs().max() < 1e-12


if __name__ == "__main__":
    for name, mine, ref in reference_cases():
        print(f"{name:28s} max |diff| = {(mine - ref).abs().max().item():.2e}")
