"""attnlab.MultiHeadAttention against torch.nn.MultiheadAttention by weight copy.

PyTorch's boolean masks mean the opposite of ours (True = blocked there), so every
boolean mask goes to torch inverted (``~mask``).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import attnlab

D, H = 12, 3


def pair(device, dtype=torch.float32, **kw):
    """A torch module with random (non-zero) biases and our copy of it."""
    ref = nn.MultiheadAttention(D, H, batch_first=True, **kw).to(device, dtype)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "bias" in name:
                p.normal_()
    mine = attnlab.MultiHeadAttention(
        D, H, bias=kw.get("bias", True), kdim=kw.get("kdim"), vdim=kw.get("vdim")
    )
    return ref, mine.to(device, dtype).load_torch(ref)


def inputs(device, B=2, T=4, S=6, kdim=D, vdim=D, dtype=torch.float32):
    g = dict(device=device, dtype=dtype)
    x = torch.randn(B, T, D, **g)
    return x, torch.randn(B, S, kdim, **g), torch.randn(B, S, vdim, **g)


def both(ref, mine, q, k, v, attn_mask=None, key_padding_mask=None, is_causal=False):
    """Run both modules; masks are given in OUR convention and inverted for torch."""

    def inv(m):
        return None if m is None else (~m if m.dtype == torch.bool else m)

    t_mask = inv(attn_mask)
    if is_causal:  # torch's is_causal is only a hint: it wants the mask itself too
        t_mask = ~attnlab.causal_mask(q.shape[1], k.shape[1], device=q.device)
    out_r, w_r = ref(
        q,
        k,
        v,
        attn_mask=t_mask,
        key_padding_mask=inv(key_padding_mask),
        average_attn_weights=False,
        is_causal=is_causal,
    )
    out_m, w_m = mine(
        q,
        k,
        v,
        attn_mask=attn_mask,
        key_padding_mask=key_padding_mask,
        average_attn_weights=False,
        is_causal=is_causal,
    )
    return out_r, w_r, out_m, w_m


CASES = {
    "self": dict(),
    "causal": dict(is_causal=True),
    "padding": dict(key_padding_mask="pad"),
    "bool attn_mask": dict(attn_mask="bool"),
    "float attn_mask": dict(attn_mask="float"),
    "all": dict(attn_mask="bool", key_padding_mask="pad"),
}


def make_masks(spec, T, S, device):
    kw = dict(spec)
    if kw.get("key_padding_mask") == "pad":
        kw["key_padding_mask"] = attnlab.padding_mask([S, S - 2], S, device=device)
    if kw.get("attn_mask") == "bool":
        m = torch.rand(T, S, device=device) > 0.4
        m[:, 0] = True
        kw["attn_mask"] = m
    elif kw.get("attn_mask") == "float":
        kw["attn_mask"] = torch.randn(T, S, device=device)
    return kw


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("cross", [False, True], ids=["self-attn", "cross-attn"])
def test_forward_and_grads_match_torch(device, case, cross):
    ref, mine = pair(device)
    T, S = (4, 6) if cross else (5, 5)
    q, k, v = inputs(device, T=T, S=S)
    if not cross:
        k = v = q
    kw = make_masks(CASES[case], T, S, device)
    out_r, w_r, out_m, w_m = both(ref, mine, q, k, v, **kw)
    torch.testing.assert_close(out_m, out_r)
    torch.testing.assert_close(w_m, w_r)
    assert w_m.shape == (2, H, T, S)
    g = torch.randn_like(out_r)
    (out_r * g).sum().backward()
    (out_m * g).sum().backward()
    w_in = ref.in_proj_weight.grad.chunk(3)
    for lin, gw in zip((mine.w_q, mine.w_k, mine.w_v), w_in):
        torch.testing.assert_close(lin.weight.grad, gw)
    b_in = ref.in_proj_bias.grad.chunk(3)
    for lin, gb in zip((mine.w_q, mine.w_k, mine.w_v), b_in):
        torch.testing.assert_close(lin.bias.grad, gb)
    torch.testing.assert_close(mine.w_o.weight.grad, ref.out_proj.weight.grad)
    torch.testing.assert_close(mine.w_o.bias.grad, ref.out_proj.bias.grad)


def test_input_gradients_float64(device):
    ref, mine = pair(device, torch.float64)
    q, k, v = inputs(device, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    pad = attnlab.padding_mask([6, 3], 6, device=device)
    mine(*leaves, key_padding_mask=pad)[0].square().sum().backward()
    ref(*refs, key_padding_mask=~pad)[0].square().sum().backward()
    for a, b in zip(leaves, refs):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-12, rtol=1e-10)


def test_kdim_vdim(device):
    ref, mine = pair(device, kdim=5, vdim=7)
    q, k, v = inputs(device, kdim=5, vdim=7)
    pad = attnlab.padding_mask([6, 4], 6, device=device)
    out_r, w_r, out_m, w_m = both(ref, mine, q, k, v, key_padding_mask=pad)
    torch.testing.assert_close(out_m, out_r)
    torch.testing.assert_close(w_m, w_r)
    (out_r.sum() + out_m.sum()).backward()
    torch.testing.assert_close(mine.w_k.weight.grad, ref.k_proj_weight.grad)
    torch.testing.assert_close(mine.w_v.weight.grad, ref.v_proj_weight.grad)


def test_no_bias(device):
    ref, mine = pair(device, bias=False)
    assert mine.w_q.bias is None and mine.w_o.bias is None
    q, k, v = inputs(device)
    out_r, _, out_m, _ = both(ref, mine, q, k, v)
    torch.testing.assert_close(out_m, out_r)


def test_averaged_vs_per_head_weights(device):
    ref, mine = pair(device)
    q, k, v = inputs(device)
    _, w_avg = ref(q, k, v)  # torch's default: averaged over heads, (B, T, S)
    _, w_avg_mine = mine(q, k, v)  # ours: the same default, as in PyTorch
    assert w_avg.shape == w_avg_mine.shape == (2, 4, 6)
    torch.testing.assert_close(w_avg_mine, w_avg)
    _, w_heads = mine(q, k, v, average_attn_weights=False)  # per head (B, H, T, S)
    _, w_heads_r = ref(q, k, v, average_attn_weights=False)
    assert w_heads.shape == (2, H, 4, 6)
    torch.testing.assert_close(w_heads, w_heads_r)
    torch.testing.assert_close(w_heads.mean(1), w_avg)
    torch.testing.assert_close(w_heads.sum(-1), torch.ones(2, H, 4, device=device))
    assert not hasattr(mine, "last_weights")  # no hidden state: weights are returned
    out, w = mine(q, k, v, need_weights=False)
    assert w is None and out.shape == (2, 4, D)


def test_heads_differ_and_mask_shapes():
    mine = attnlab.MultiHeadAttention(D, H)
    q, k, v = inputs("cpu")
    _, w = mine(q, k, v, average_attn_weights=False)
    assert not torch.allclose(w[:, 0], w[:, 1])  # each head has its own pattern
    m3 = torch.rand(2, 4, 6) > 0.5  # (B, T, S)
    m3[..., 0] = True
    m4 = m3[:, None].expand(2, H, 4, 6)  # (B, H, T, S)
    torch.testing.assert_close(
        mine(q, k, v, attn_mask=m3)[0], mine(q, k, v, attn_mask=m4)[0]
    )


def test_fully_padded_sequence_gives_no_nan():
    mine = attnlab.MultiHeadAttention(D, H)
    q, k, v = inputs("cpu")
    pad = attnlab.padding_mask([0, 6], 6)  # the first sequence has no real key
    with pytest.warns(attnlab.MaskConventionWarning, match=r"sequence\(s\) \[0\]"):
        out, w = mine(q, k, v, key_padding_mask=pad)
    assert torch.all(w[0] == 0) and torch.isfinite(out).all()
    torch.testing.assert_close(out[0], mine.w_o.bias.expand(4, D))  # zero heads -> bias
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in mine.parameters())


def test_causal_no_leak():
    mine = attnlab.MultiHeadAttention(D, H)
    x = torch.randn(1, 6, D)
    y = x.clone()
    y[:, 3:] = torch.randn(1, 3, D)  # change the future
    a, _ = mine(x, x, x, is_causal=True)
    b, _ = mine(y, y, y, is_causal=True)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_with_attn_mask_is_their_and(need_weights):
    """attnlab's one is_causal rule: the causal triangle ANDed with the masks given.
    With an honest hint (a causal attn_mask) that is nn.MultiheadAttention's result;
    with a padding mask, the AND of both; without attn_mask, PyTorch raises."""
    torch.manual_seed(1)
    ref, mine = pair("cpu", torch.float64)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    causal = attnlab.causal_mask(5)  # (T, T), True = may attend
    kw = dict(need_weights=need_weights)
    with torch.no_grad():
        want, _ = ref(x, x, x, attn_mask=~causal, is_causal=True)  # the hint
        got, _ = mine(x, x, x, attn_mask=causal, is_causal=True, **kw)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(mine(x, x, x, is_causal=True, **kw)[0], want)
        with pytest.raises(RuntimeError, match="is_causal"):
            ref(x, x, x, is_causal=True)  # PyTorch needs the mask with the hint
        pad = attnlab.padding_mask([5, 3], 5)  # (B, S), True = real token
        got, _ = mine(x, x, x, key_padding_mask=pad, is_causal=True, **kw)
        merged = pad[:, None, :] & causal  # (B, T, S)
        want, _ = ref(x, x, x, attn_mask=(~merged).repeat_interleave(H, 0))
        torch.testing.assert_close(got, want)
        keep = torch.ones(5, 5, dtype=torch.bool).triu()  # not causal: AND = diagonal
        got, _ = mine(x, x, x, attn_mask=keep, is_causal=True, **kw)
        want, _ = ref(x, x, x, attn_mask=~torch.eye(5, dtype=torch.bool))
        torch.testing.assert_close(got, want)


def test_dropout_only_in_training():
    mine = attnlab.MultiHeadAttention(D, H, dropout=0.5)
    q, k, v = inputs("cpu")
    mine.eval()
    a, _ = mine(q, k, v)
    b, _ = mine(q, k, v)
    assert torch.equal(a, b)
    mine.train()
    _, w = mine(q, k, v)
    assert (w == 0).any()


def test_errors():
    with pytest.raises(ValueError, match="not divisible"):
        attnlab.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="dropout"):
        attnlab.MultiHeadAttention(12, 3, dropout=1.0)
    mine = attnlab.MultiHeadAttention(D, H)
    q, k, v = inputs("cpu")
    with pytest.raises(ValueError, match="batch-first"):
        mine(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="d_model=12"):
        mine(q[..., :8], k, v)
    with pytest.raises(ValueError, match="kdim=12"):
        mine(q, k[..., :8], v)
    with pytest.raises(ValueError, match="agree on B"):
        mine(q, k, v[:, :5])
    with pytest.raises(ValueError, match="agree on B"):
        mine(q[:1], k, v)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, S\)"):
        mine(q, k, v, key_padding_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):
        mine(q, k, v, attn_mask=torch.ones(4, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.Tensor"):
        mine(q.tolist(), k, v)
    with pytest.raises(ValueError, match="num_heads"):
        attnlab.MultiHeadAttention(D, 4).load_torch(nn.MultiheadAttention(D, H))


def test_arguments_in_pytorch_order():
    # MultiHeadAttention(64, 4, 0.1) means dropout 0.1, as nn.MultiheadAttention(64, 4, 0.1)
    mine, ref = (
        attnlab.MultiHeadAttention(D, H, 0.25),
        nn.MultiheadAttention(D, H, 0.25),
    )
    assert mine.dropout == ref.dropout == 0.25 and mine.w_q.bias is not None
    assert attnlab.MultiHeadAttention(D, H, 0.0, False).w_o.bias is None
    with pytest.raises(TypeError):  # kdim is keyword-only (PyTorch: add_bias_kv there)
        attnlab.MultiHeadAttention(D, H, 0.0, True, 8)
    # forward(query, key, value, key_padding_mask, need_weights, attn_mask, ...)
    q, k, v = inputs("cpu")
    pad = torch.ones(2, 6, dtype=torch.bool)
    pad[0, 4:] = False
    mine.eval()
    by_position = mine(q, k, v, pad, False)
    assert by_position[1] is None
    torch.testing.assert_close(by_position[0], mine(q, k, v, key_padding_mask=pad)[0])


def test_pytorch_style_padding_mask_warns():
    mine = attnlab.MultiHeadAttention(D, H)
    q, k, v = inputs("cpu")
    torch_style = torch.zeros(2, 6, dtype=torch.bool)  # PyTorch: "no padding anywhere"
    with pytest.warns(attnlab.masking.MaskConventionWarning, match="True = padding"):
        out, _ = mine(q, k, v, key_padding_mask=torch_style)
    assert out.isfinite().all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real padding mask stays silent
        mine(q, k, v, key_padding_mask=~torch_style)
    partly = torch_style.clone()
    partly[1] = True  # one sequence fully masked, the other not: PyTorch-style too
    with pytest.warns(attnlab.MaskConventionWarning, match="True = padding"):
        mine(q, k, v, key_padding_mask=partly)
