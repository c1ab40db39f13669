"""RoPE in ``attnlab.modern``: cos/sin computed once per forward, in float32 as
transformers does (float64 for float64 inputs), and no host sync on the decode path."""

from __future__ import annotations

import contextlib

import pytest
import torch

from attnlab.modern import Attention, Cache, LatentAttention, RoPE

D, H = 32, 4
# every conversion of a tensor's value to Python: each one waits for the device
SYNCS = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "cpu")


@contextlib.contextmanager
def count_host_syncs():
    calls: dict[str, int] = {}
    saved = {n: getattr(torch.Tensor, n) for n in SYNCS}

    def wrap(name, fn):
        def inner(self, *a, **k):
            calls[name] = calls.get(name, 0) + 1
            return fn(self, *a, **k)

        return inner

    try:
        for n in SYNCS:
            setattr(torch.Tensor, n, wrap(n, saved[n]))
        yield calls
    finally:
        for n in SYNCS:
            setattr(torch.Tensor, n, saved[n])


def test_the_counter_sees_a_sync():
    with count_host_syncs() as calls:
        int(torch.arange(3).max())
        bool(torch.ones(1).any())
    assert calls == {"__int__": 1, "__bool__": 1}


YARN = {"type": "yarn", "factor": 4.0, "original_max_position": 4}
LAYERS = {
    "rope_gqa": lambda: Attention(D, H, 2, rope=RoPE()),
    "yarn_window_sink": lambda: Attention(
        D, H, rope=RoPE(scaling=YARN), window=3, sink=True, qk_norm=True
    ),
    "partial_gate": lambda: Attention(D, H, rope=RoPE(fraction=0.5), output_gate=True),
    "alibi": lambda: Attention(D, H, alibi=True),
    "mla": lambda: LatentAttention(
        D, H, kv_rank=8, q_rank=12, nope_dim=6, rope_dim=4, v_dim=5
    ),
    "mla_absorbed": lambda: LatentAttention(
        D, H, kv_rank=8, nope_dim=6, rope_dim=4, v_dim=5, absorb=True
    ),
}


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("explicit_positions", [False, True])
def test_a_decode_step_of_a_three_layer_stack_makes_no_host_sync(
    name, explicit_positions
):
    """Three layers with a cache each, as the shipped LM decodes: prefill, then
    decode steps; the steps read nothing back from the tensors."""
    torch.manual_seed(0)
    layers = [LAYERS[name]() for _ in range(3)]
    caches = [Cache() for _ in layers]
    x = torch.randn(2, 6, D)

    def step(x, start):
        pos = torch.arange(start, start + x.shape[1]) if explicit_positions else None
        for layer, cache in zip(layers, caches):
            x = x + layer(x, position_ids=pos, cache=cache)
        return x

    with torch.no_grad():
        step(x, 0)  # the prefill (first call: the frequencies are computed)
        with count_host_syncs() as calls:
            for t in range(6, 9):
                step(torch.randn(2, 1, D), t)
    assert calls == {}, calls


def test_cos_sin_is_computed_once_per_forward():
    rope = RoPE()
    layer = Attention(D, H, rope=rope)
    seen = []
    orig = rope.cos_sin
    rope.cos_sin = lambda *a, **k: seen.append(1) or orig(*a, **k)  # type: ignore
    layer(torch.randn(1, 5, D))
    assert len(seen) == 1  # for the queries and the keys together


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_angles_in_float32_like_transformers(dtype):
    """cos/sin come from float32 angles (float64 ones for float64 inputs) and are cast
    to the input's dtype once, as transformers' rotary embedding computes them."""
    rope = RoPE(500000.0)
    pos = torch.arange(4000, 4008)
    cos, sin = rope.cos_sin(pos, 64, dtype)
    assert cos.dtype == sin.dtype == dtype and cos.shape == (8, 32)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    inv = 500000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    theta = pos.to(work)[:, None] * inv.to(work)  # transformers: float32 inv_freq
    torch.testing.assert_close(cos, theta.cos().to(dtype), atol=0, rtol=0)
    torch.testing.assert_close(sin, theta.sin().to(dtype), atol=0, rtol=0)


@pytest.mark.parametrize("name", ["rope_gqa", "yarn_window_sink", "mla"])
def test_position_embeddings_from_the_model_equal_the_layers_own(name):
    """A model may compute cos/sin once for all its layers and pass them down."""
    torch.manual_seed(0)
    layer = LAYERS[name]().double()
    x = torch.randn(2, 7, D, dtype=torch.float64)
    pos = torch.arange(3, 10)
    d_head = layer.rope_dim if isinstance(layer, LatentAttention) else layer.head_dim
    pe = layer.rope.cos_sin(pos, d_head, x.dtype)
    with torch.no_grad():
        a = layer(x, position_ids=pos)
        b = layer(x, position_ids=pos, position_embeddings=pe)
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="position_embeddings must end in"):
        layer(x, position_ids=pos, position_embeddings=(pe[0][:3], pe[1][:3]))
    with pytest.raises(TypeError, match=r"\(cos, sin\) tuple"):
        layer(x, position_ids=pos, position_embeddings=[pe[0], pe[1]])


def test_negative_positions_are_a_debug_scan():
    import attnlab

    layer = Attention(D, H, rope=RoPE())
    x = torch.randn(1, 3, D)
    layer(x, position_ids=torch.tensor([-1, 0, 1]))  # no scan outside debug
    with attnlab.debug(), pytest.raises(ValueError, match="position_ids must be >= 0"):
        layer(x, position_ids=torch.tensor([-1, 0, 1]))
