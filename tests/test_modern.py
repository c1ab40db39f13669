"""attnlab.modern: cached decoding, the rotation identity, masks, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.modern import Attention, Cache, LatentAttention, RoPE, attend

D, H = 32, 4

OPTIONS = {
    "plain": dict(),
    "gqa_rope": dict(num_kv_heads=2, rope=RoPE()),
    "mqa_interleaved": dict(num_kv_heads=1, rope=RoPE(layout="interleaved")),
    "rope_linear": dict(rope=RoPE(scaling={"type": "linear", "factor": 4.0})),
    "rope_ntk": dict(rope=RoPE(scaling={"type": "ntk", "factor": 4.0})),
    "rope_yarn": dict(
        rope=RoPE(scaling={"type": "yarn", "factor": 4.0, "original_max_position": 4})
    ),
    "partial_rope": dict(rope=RoPE(fraction=0.5)),
    "alibi": dict(alibi=True),
    "qk_norm": dict(qk_norm=True, rope=RoPE()),
    "softcap": dict(softcap=1.5, rope=RoPE()),
    "sink": dict(sink=True, rope=RoPE()),
    "output_gate": dict(output_gate=True, rope=RoPE()),
    "window": dict(window=3, rope=RoPE()),
    "everything": dict(
        num_kv_heads=2,
        rope=RoPE(),
        qk_norm=True,
        softcap=3.0,
        sink=True,
        output_gate=True,
        window=4,
    ),
}


def _layer(**kw) -> Attention:
    layer = Attention(D, H, **kw).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn_like(p) * 0.2)  # sinks, norms off their init
    return layer


def _decode(layer, x: torch.Tensor, prefix: int) -> torch.Tensor:
    cache = Cache()
    outs = [layer(x[:, :prefix], cache=cache)]
    for t in range(prefix, x.shape[1]):
        outs.append(layer(x[:, t : t + 1], cache=cache))
    assert cache.length == x.shape[1]
    return torch.cat(outs, 1)


@pytest.mark.parametrize("name", list(OPTIONS))
def test_cached_decode_equals_full_forward(name):
    layer = _layer(**OPTIONS[name])
    x = torch.randn(2, 9, D, dtype=torch.float64)
    with torch.no_grad():
        full = layer(x)
        assert (_decode(layer, x, 3) - full).abs().max() < 1e-12


@pytest.mark.parametrize("absorb", [False, True])
def test_mla_cached_decode_equals_full_forward(absorb):
    layer = LatentAttention(
        D, H, kv_rank=8, q_rank=12, nope_dim=6, rope_dim=4, v_dim=5, absorb=absorb
    ).double()
    x = torch.randn(2, 9, D, dtype=torch.float64)
    with torch.no_grad():
        assert (_decode(layer, x, 2) - layer(x)).abs().max() < 1e-12
    cache = Cache()
    with torch.no_grad():
        layer(x, cache=cache)
    assert cache.nbytes_per_token() == (8 + 4) * 8  # latent + RoPE key, float64


def test_dynamic_ntk_refuses_a_cache_and_why():
    """Dynamic NTK rotates every key with frequencies set by the current length:
    keys cached at length 5 were rotated with other frequencies than a full forward
    at length 12 uses, so a cache cannot reproduce the full forward. We refuse it."""
    rope = RoPE(scaling={"type": "dynamic", "factor": 2.0, "original_max_position": 4})
    layer = _layer(rope=rope)
    x = torch.randn(1, 12, D, dtype=torch.float64)
    with pytest.raises(ValueError, match="dynamic NTK"):
        layer(x, cache=Cache())
    # what a naive cache would compute: each step's keys rotated at its own length
    with torch.no_grad():
        full = layer(x)
        per_step = torch.cat([layer(x[:, : t + 1])[:, -1:] for t in range(12)], 1)
    assert (per_step[:, :4] - full[:, :4]).abs().max() > 1e-6
    a5, _ = rope.angles(torch.arange(5), 8)
    a12, _ = rope.angles(torch.arange(12), 8)
    assert (a5 - a12[:5]).abs().max() > 1e-3


def test_rotation_identity():
    """<R(m) q, R(n) k> depends on m - n only."""
    rope = RoPE()
    q = torch.randn(1, 1, 1, 16, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 16, dtype=torch.float64)

    def score(m, n):
        return float((rope(q, torch.tensor([m])) * rope(k, torch.tensor([n]))).sum())

    for m, n in [(5, 2), (40, 37), (1003, 1000)]:
        assert math.isclose(score(m, n), score(m - n, 0), rel_tol=1e-9, abs_tol=1e-9)
    assert abs(score(5, 2) - score(5, 3)) > 1e-6


def test_no_leak_from_the_future():
    layer = _layer(**OPTIONS["everything"])
    x = torch.randn(1, 8, D, dtype=torch.float64)
    y = x.clone()
    y[:, 5:] += 1.0
    with torch.no_grad():
        assert (layer(x)[:, :5] - layer(y)[:, :5]).abs().max() == 0


def test_window_sees_only_recent_keys():
    layer = _layer(window=3)
    x = torch.randn(1, 8, D, dtype=torch.float64)
    with torch.no_grad():
        _, w = layer(x, return_weights=True)
    assert w[0, :, 7, :5].abs().max() == 0 and w[0, :, 7, 5:].min() > 0


def test_sink_takes_mass_and_fully_masked_rows_are_zero():
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    k = torch.randn(1, 2, 5, 4, dtype=torch.float64)
    v = torch.randn(1, 2, 5, 4, dtype=torch.float64)
    allowed = torch.ones(3, 5, dtype=torch.bool)
    allowed[1] = False
    out, w = attend(q, k, v, allowed, scale=0.5)
    assert torch.isfinite(out).all() and out[:, :, 1].abs().max() == 0
    torch.testing.assert_close(
        w[:, :, 0].sum(-1), torch.ones(1, 2, dtype=torch.float64)
    )
    out, w = attend(q, k, v, None, scale=0.5, sink=torch.tensor([0.0, 5.0]))
    total = w.sum(-1)  # (1, 2, 3): 1 - the sink's share
    assert (total < 1).all() and (total[:, 1] < total[:, 0]).all()
    # huge logits stay finite
    out, _ = attend(q * 1e4, k * 1e4, v, None, scale=1.0, softcap=30.0)
    assert torch.isfinite(out).all()


def test_softcap_bounds_scores():
    q = torch.randn(1, 1, 4, 8, dtype=torch.float64) * 100
    k = torch.randn(1, 1, 4, 8, dtype=torch.float64) * 100
    v = torch.eye(4, dtype=torch.float64)[None, None]
    _, w = attend(q, k, v, None, scale=1.0, softcap=2.0)
    assert w.max() <= math.exp(2) / (math.exp(2) + 3 * math.exp(-2)) + 1e-12


def test_length_one_and_masks():
    layer = _layer(rope=RoPE())
    x = torch.randn(2, 1, D, dtype=torch.float64)
    with torch.no_grad():
        assert torch.isfinite(layer(x)).all()
        x = torch.randn(2, 4, D, dtype=torch.float64)
        pad = torch.tensor([True, True, False, False])  # keys 2, 3 padded away
        out, w = layer(x, attn_mask=pad.expand(4, 4), return_weights=True)
    assert w[..., 2:].abs().max() == 0 and torch.isfinite(out).all()


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(embed_dim=30, num_heads=4), ValueError, "divisible by num_heads"),
        (dict(embed_dim=32, num_heads=4, num_kv_heads=3), ValueError, "multiple of"),
        (dict(embed_dim=32, num_heads=0), ValueError, "num_heads"),
        (dict(embed_dim=32, num_heads=4, softcap=-1.0), ValueError, "softcap"),
        (dict(embed_dim=32, num_heads=4, window=0), ValueError, "window"),
        (dict(embed_dim=32, num_heads=4, rope="rope"), TypeError, "rope"),
        (dict(embed_dim=12, num_heads=4, rope=RoPE()), ValueError, "even"),
    ],
)
def test_bad_construction(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        Attention(**kwargs)


@pytest.mark.parametrize(
    "kwargs, exc, pattern",
    [
        (dict(base=1.0), ValueError, "base"),
        (dict(layout="neox"), ValueError, "layout"),
        (dict(scaling={"type": "ntk2", "factor": 2}), ValueError, "type"),
        (dict(scaling={"type": "linear", "factor": 0.5}), ValueError, "factor"),
        (dict(scaling={"type": "yarn", "factor": 2.0}), ValueError, "original_max"),
        (
            dict(scaling={"type": "linear", "factor": 2, "beta": 1}),
            ValueError,
            "unknown",
        ),
        (dict(scaling=2.0), TypeError, "scaling"),
    ],
)
def test_bad_rope(kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        RoPE(**kwargs)


def test_bad_forward_input():
    layer = Attention(D, H, rope=RoPE())
    with pytest.raises(ValueError, match=r"\(B, T, 32\)"):
        layer(torch.randn(2, 5, 16))
    with pytest.raises(TypeError, match="floating-point"):
        layer(torch.ones(2, 5, D, dtype=torch.long))
    with pytest.raises(ValueError, match="attn_mask"):
        layer(torch.randn(2, 5, D), attn_mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="position_ids"):
        layer(torch.randn(2, 5, D), position_ids=torch.arange(4))
    with pytest.raises(TypeError, match="position_ids"):
        layer(torch.randn(2, 5, D), position_ids=torch.arange(5.0))
    with pytest.raises(TypeError, match="cache"):
        layer(torch.randn(2, 5, D), cache={})
    with pytest.raises(ValueError, match="kv_rank"):
        LatentAttention(D, H, kv_rank=0, nope_dim=4, rope_dim=4, v_dim=4)
    with pytest.raises(ValueError, match="rope_dim"):
        LatentAttention(D, H, kv_rank=4, nope_dim=4, rope_dim=3, v_dim=4)
    with pytest.raises(TypeError, match="DeepseekV3Attention"):
        LatentAttention.from_hf(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="expected one of"):
        Attention.from_hf(torch.nn.Linear(2, 2))


def test_gradients_flow_to_every_parameter():
    layer = Attention(
        D,
        H,
        2,
        **{k: v for k, v in OPTIONS["everything"].items() if k != "num_kv_heads"},
    )
    x = torch.randn(2, 6, D)
    layer(x).pow(2).sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
