"""modern.Attention's two paths: SDPA (the default, as transformers' "sdpa") and the
readable ``attend`` ("eager"); the same outputs and gradients either way, and a message
saying why the fast path was refused."""

from __future__ import annotations

import copy

import pytest
import torch

from attnlab.modern import Attention, Cache, RoPE

D, H = 32, 4
YARN = {"type": "yarn", "factor": 4.0, "original_max_position": 4}
FAST = {
    "plain": dict(),
    "gqa_rope": dict(num_kv_heads=2, rope=RoPE()),
    "mqa_interleaved": dict(num_kv_heads=1, rope=RoPE(layout="interleaved")),
    "yarn": dict(rope=RoPE(scaling=YARN)),
    "partial_rope_gate": dict(rope=RoPE(fraction=0.5), output_gate=True),
    "alibi": dict(alibi=True),
    "qk_norm": dict(qk_norm=True, rope=RoPE(), num_kv_heads=2),
    "window": dict(window=3, rope=RoPE()),
    "not_causal": dict(causal=False, rope=RoPE()),
}


def _pair(**kw) -> tuple[Attention, Attention]:
    torch.manual_seed(0)
    fast = Attention(D, H, **kw).double()
    with torch.no_grad():
        for p in fast.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    eager = copy.deepcopy(fast)
    eager.attn_implementation = "eager"
    return fast, eager


def _decode(layer, x, prefix):
    cache = Cache()
    outs = [layer(x[:, :prefix], cache=cache)]
    for t in range(prefix, x.shape[1]):
        outs.append(layer(x[:, t : t + 1], cache=cache))
    return torch.cat(outs, 1)


@pytest.mark.parametrize("name", list(FAST))
def test_sdpa_and_eager_give_the_same_outputs_and_gradients(name):
    fast, eager = _pair(**FAST[name])
    x = torch.randn(2, 9, D, dtype=torch.float64, requires_grad=True)
    a = fast(x)
    assert fast.last_path == "sdpa"
    b = eager(x)
    assert eager.last_path.startswith("eager: attn_implementation='eager'")
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    ga = torch.autograd.grad(a.square().sum(), [x, *fast.parameters()])
    gb = torch.autograd.grad(b.square().sum(), [x, *eager.parameters()])
    for u, w in zip(ga, gb):
        torch.testing.assert_close(u, w, atol=1e-10, rtol=0)
    with torch.no_grad():  # cached decoding, explicit positions, masks
        torch.testing.assert_close(_decode(fast, x, 3), _decode(eager, x, 3),
                                   atol=1e-12, rtol=0)  # fmt: skip
        pos = torch.arange(5, 14)
        torch.testing.assert_close(
            fast(x, position_ids=pos), eager(x, position_ids=pos), atol=1e-12, rtol=0
        )
        keep = torch.rand(2, 1, 9, 9, generator=torch.Generator().manual_seed(1)) > 0.3
        keep[:, :, 4] = False  # a query with no key at all: zeros on both paths
        for m in (keep, torch.zeros(9, 9, dtype=torch.float64).masked_fill(
                ~keep[0, 0], float("-inf"))):  # fmt: skip
            a, b = fast(x, attn_mask=m), eager(x, attn_mask=m)
            assert not a.isnan().any()
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "kw, call, why",
    [
        (dict(softcap=2.0), {}, "soft-capping"),
        (dict(sink=True), {}, "sink logits"),
        (dict(), {"return_weights": True}, "weights requested"),
        (dict(attn_implementation="eager"), {}, "'eager' was requested"),
    ],
)
def test_a_refused_fast_path_says_why(kw, call, why):
    fast, _ = _pair(**kw)
    assert why in fast.why_not_fast_path(**call)
    out = fast(torch.randn(1, 4, D, dtype=torch.float64), **call)
    assert fast.last_path.startswith("eager: ") and why in fast.last_path
    if call:
        assert isinstance(out, tuple) and out[1].shape == (1, H, 4, 4)


def test_a_hook_sends_the_layer_down_the_eager_path():
    fast, eager = _pair(rope=RoPE())
    x = torch.randn(1, 5, D, dtype=torch.float64)
    handle = fast.register_forward_hook(lambda m, a, o: None)
    try:
        assert "forward hook" in fast.why_not_fast_path()
        torch.testing.assert_close(fast(x), eager(x), atol=1e-12, rtol=0)
    finally:
        handle.remove()
    assert fast.why_not_fast_path() == ""


def test_an_unknown_implementation_is_refused():
    with pytest.raises(ValueError, match="attn_implementation must be one of"):
        Attention(D, H, attn_implementation="flash")
