"""Each PyTorch-named class, called *positionally* exactly as PyTorch's, after a weight copy.

Masks are float (additive in both libraries, so they mean the same thing) or None:
boolean masks mean opposite things in the two libraries and are tested elsewhere.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import attnlab

D, H, F_, B, T, S = 8, 2, 16, 2, 4, 5


def _float_masks(g):
    """A float attention mask (T, S) and a float padding mask (B, S), 0 / -inf / bias."""
    attn = torch.randn(T, S, generator=g, dtype=torch.float64)
    attn[1, 3:] = float("-inf")
    pad = torch.zeros(B, S, dtype=torch.float64)
    pad[0, 4:] = float("-inf")
    return attn, pad


def _noisy_biases(module: nn.Module, g) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.fixture
def g():
    return torch.Generator().manual_seed(0)


def test_multihead_attention_positional(g):
    ref = nn.MultiheadAttention(D, H, 0.0, True, batch_first=True).double().eval()
    _noisy_biases(ref, g)
    mine = attnlab.MultiHeadAttention(D, H, 0.0, True).double().load_torch(ref).eval()
    q = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    kv = torch.randn(B, S, D, generator=g, dtype=torch.float64)
    attn, pad = _float_masks(g)
    for args in [(), (pad,), (pad, True), (pad, True, attn), (pad, True, attn, False)]:
        out_t, w_t = ref(q, kv, kv, *args)
        out_m, w_m = mine(q, kv, kv, *args)
        torch.testing.assert_close(out_m, out_t)
        torch.testing.assert_close(w_m, w_t)  # averaged (B, T, S) by default in both
    out_t, w_t = ref(q, kv, kv, None, False)
    out_m, w_m = mine(q, kv, kv, None, False)
    assert w_t is None and w_m is None
    torch.testing.assert_close(out_m, out_t)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_positional(g, norm_first):
    ref = nn.TransformerEncoderLayer(
        D, H, F_, 0.0, "gelu", 1e-5, batch_first=True, norm_first=norm_first
    )
    ref = ref.double().eval()
    _noisy_biases(ref, g)
    mine = attnlab.TransformerEncoderLayer(
        D, H, F_, 0.0, "gelu", 1e-5, norm_first=norm_first
    )
    mine = attnlab.copy_from_torch(mine.double(), ref).eval()
    x = torch.randn(B, S, D, generator=g, dtype=torch.float64)
    attn, pad = _float_masks(g)
    self_mask = torch.randn(S, S, generator=g, dtype=torch.float64)
    for args in [(), (self_mask,), (self_mask, pad), (None, pad)]:
        torch.testing.assert_close(mine(x, *args), ref(x, *args))


def test_decoder_layer_positional(g):
    ref = nn.TransformerDecoderLayer(D, H, F_, 0.0, batch_first=True).double().eval()
    _noisy_biases(ref, g)
    mine = attnlab.TransformerDecoderLayer(D, H, F_, 0.0).double()
    mine = attnlab.copy_from_torch(mine, ref).eval()
    tgt = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    mem = torch.randn(B, S, D, generator=g, dtype=torch.float64)
    attn, pad = _float_masks(g)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    tgt_pad = torch.zeros(B, T, dtype=torch.float64)
    for args in [(), (tgt_mask,), (tgt_mask, attn), (tgt_mask, attn, tgt_pad, pad)]:
        torch.testing.assert_close(mine(tgt, mem, *args), ref(tgt, mem, *args))


def test_encoder_stack_positional(g):
    layer_t = nn.TransformerEncoderLayer(D, H, F_, 0.0, batch_first=True).double()
    ref = nn.TransformerEncoder(
        layer_t, 2, nn.LayerNorm(D).double(), enable_nested_tensor=False
    )
    ref = ref.eval()
    for layer in ref.layers:
        _noisy_biases(layer, g)
    layer_m = attnlab.TransformerEncoderLayer(D, H, F_, 0.0).double()
    mine = attnlab.TransformerEncoder(layer_m, 2, nn.LayerNorm(D).double()).eval()
    for ours, theirs in zip(mine.layers, ref.layers, strict=True):
        attnlab.copy_from_torch(ours, theirs)
    mine.norm.load_state_dict(ref.norm.state_dict())
    x = torch.randn(B, S, D, generator=g, dtype=torch.float64)
    attn, pad = _float_masks(g)
    self_mask = torch.randn(S, S, generator=g, dtype=torch.float64)
    for args in [(), (self_mask,), (self_mask, pad)]:
        torch.testing.assert_close(mine(x, *args), ref(x, *args))


def test_decoder_stack_positional(g):
    layer_t = nn.TransformerDecoderLayer(D, H, F_, 0.0, batch_first=True).double()
    ref = nn.TransformerDecoder(layer_t, 2, nn.LayerNorm(D).double()).eval()
    for layer in ref.layers:
        _noisy_biases(layer, g)
    layer_m = attnlab.TransformerDecoderLayer(D, H, F_, 0.0).double()
    mine = attnlab.TransformerDecoder(layer_m, 2, nn.LayerNorm(D).double()).eval()
    for ours, theirs in zip(mine.layers, ref.layers, strict=True):
        attnlab.copy_from_torch(ours, theirs)
    mine.norm.load_state_dict(ref.norm.state_dict())
    tgt = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    mem = torch.randn(B, S, D, generator=g, dtype=torch.float64)
    attn, pad = _float_masks(g)
    # PyTorch users pass the causal mask third: it is tgt_mask in both now
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    tgt_pad = torch.zeros(B, T, dtype=torch.float64)
    for args in [(), (tgt_mask,), (tgt_mask, attn), (tgt_mask, attn, tgt_pad, pad)]:
        torch.testing.assert_close(mine(tgt, mem, *args), ref(tgt, mem, *args))


def test_stacks_reject_what_pytorch_would_not_take():
    with pytest.raises(TypeError, match="attnlab.TransformerEncoderLayer"):
        attnlab.TransformerEncoder(nn.TransformerEncoderLayer(D, H), 2)
    with pytest.raises(TypeError, match="needs num_layers"):
        attnlab.TransformerDecoder(attnlab.TransformerDecoderLayer(D, H, F_))
    with pytest.raises(TypeError):  # batch_first is PyTorch's 7th: here keyword-only
        attnlab.TransformerEncoderLayer(D, H, F_, 0.0, "relu", 1e-5, True)


def test_average_attn_weights_defaults_to_true_as_in_pytorch():
    import inspect

    ours = inspect.signature(attnlab.MultiHeadAttention.forward).parameters
    theirs = inspect.signature(nn.MultiheadAttention.forward).parameters
    assert list(ours)[:8] == list(theirs)[:8]
    for name in (
        "key_padding_mask",
        "need_weights",
        "attn_mask",
        "average_attn_weights",
    ):
        assert ours[name].default == theirs[name].default, name


def test_attention_maps_stay_per_head():
    cfg = attnlab.TransformerConfig(
        src_vocab=12, tgt_vocab=12, d_model=D, n_heads=H, d_ff=F_
    )
    model = attnlab.Seq2SeqTransformer(cfg).eval()
    maps = model.attention_maps(torch.tensor([[4, 5, 6]]), torch.tensor([[1, 4]]))
    assert maps["encoder"][0].shape == (1, H, 3, 3)
    assert maps["cross"][0].shape == (1, H, 2, 3)
