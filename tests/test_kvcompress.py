"""KV-cache eviction and quantisation against naive definitions and float64."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlab.kvcompress import (
    POLICIES,
    QuantCache,
    channel_outliers,
    dequantize,
    evict_decode,
    fake_quantize,
    keep_h2o,
    keep_snapkv,
    keep_tova,
    keep_window,
    lm_forward,
    quantize,
)
from attnlab.modern.lab import TinyLM


def _model(seed=0, vocab=40):
    torch.manual_seed(seed)
    return TinyLM(vocab, 32, 2, 4, num_kv_heads=2).eval()


# ------------------------------------------------------------ naive definitions
def test_keep_window_naive():
    for n, b, s in [(20, 8, 4), (20, 8, 0), (5, 8, 2), (9, 9, 3), (30, 4, 4)]:
        want = (
            list(range(n))
            if b >= n
            else sorted(set(range(s)) | set(range(n - (b - s), n)))
        )
        assert keep_window(n, b, sinks=s).tolist() == want


def test_keep_h2o_naive():
    g = torch.Generator().manual_seed(1)
    sc = torch.rand(2, 3, 17, generator=g)
    got = keep_h2o(sc, 9, recent=4)
    assert got.shape == (2, 3, 9)
    for i in range(2):
        for h in range(3):
            row = sc[i, h].tolist()
            heavy = sorted(range(13), key=lambda j: -row[j])[:5]
            assert got[i, h].tolist() == sorted(heavy) + [13, 14, 15, 16]


def test_keep_snapkv_naive():
    g = torch.Generator().manual_seed(2)
    w = torch.rand(2, 4, 20, generator=g).softmax(-1)  # 2 heads, window 4, 20 keys
    got = keep_snapkv(w, 10, pool=3)
    for h in range(2):
        votes = w[h, :, :16].sum(0).tolist()
        pooled = [
            np.mean([votes[j] for j in (i - 1, i, i + 1) if 0 <= j < 16])
            for i in range(16)
        ]
        top = sorted(range(16), key=lambda j: -pooled[j])[:6]
        assert got[h].tolist() == sorted(top) + [16, 17, 18, 19]


def test_keep_tova_naive():
    g = torch.Generator().manual_seed(3)
    w = torch.rand(2, 4, 12, generator=g).softmax(-1)  # (B, H, S)
    got = keep_tova(w, 5)
    for b in range(2):
        mean = [float(w[b, :, j].mean()) for j in range(12)]
        assert got[b].tolist() == sorted(sorted(range(12), key=lambda j: -mean[j])[:5])


def test_budget_at_or_above_length_keeps_all():
    sc = torch.rand(3, 6)
    assert keep_h2o(sc, 6, recent=2).tolist() == [list(range(6))] * 3
    assert keep_tova(sc[None], 10).tolist() == [list(range(6))]
    assert keep_snapkv(sc[None], 7).tolist() == [list(range(6))]
    assert keep_window(6, 6).tolist() == list(range(6))


# ------------------------------------------------------------ the decoding loop
def test_full_budget_equals_full_cache():
    m = _model()
    ids = torch.randint(0, 40, (2, 30), generator=torch.Generator().manual_seed(0))
    logits = m(ids)  # (B, T, V)
    full = F.cross_entropy(
        logits[:, 10:-1].transpose(1, 2), ids[:, 11:], reduction="none"
    )  # (B, T - 11)
    for pol in POLICIES:
        got = evict_decode(m, ids, pol, 30, prompt=10)
        torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-5)
    small = evict_decode(m, ids, "window", 8, prompt=10)
    assert not torch.allclose(small, full, atol=1e-3)


def test_window_policy_equals_masked_forward():
    """Window + sinks decoding = one forward whose mask allows exactly those keys."""
    m = _model(1)
    ids = torch.randint(0, 40, (2, 28), generator=torch.Generator().manual_seed(1))
    P, b, s = 8, 10, 3
    T = ids.shape[1]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = (j <= i) & ((i < P) | (j < s) | (j >= i - (b - s)))  # (T, T)
    x = m.embed(ids)
    with torch.no_grad():
        for blk in m.blocks:
            x = x + blk.attn(blk.n1(x), attn_mask=allowed)
            x = x + blk.mlp(blk.n2(x))
        logits = m.head(m.norm(x))
    want = F.cross_entropy(
        logits[:, P:-1].transpose(1, 2), ids[:, P + 1 :], reduction="none"
    )
    got = evict_decode(m, ids, "window", b, prompt=P, sinks=s)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_lm_forward_matches_model():
    m = _model(2)
    ids = torch.randint(0, 40, (1, 12))
    torch.testing.assert_close(lm_forward(m, ids), m(ids))


# ------------------------------------------------------------ quantisation
@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize(
    "per,group", [("token", None), ("channel", None), ("channel", 5)]
)
def test_quantize_against_float64(bits, per, group):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(2, 3, 13, 8, generator=g) * torch.linspace(0.1, 5, 8)
    codes, scale, zero = quantize(x, bits, per=per, group=group)
    assert codes.dtype == torch.uint8 and int(codes.max()) <= 2**bits - 1
    # float64, written out directly
    xd = x.double()
    if per == "token":
        lo, hi = xd.amin(-1, keepdim=True), xd.amax(-1, keepdim=True)
    else:
        gs = group or 13
        lo, hi = torch.empty_like(xd), torch.empty_like(xd)
        for t0 in range(0, 13, gs):
            sl = slice(t0, min(t0 + gs, 13))
            lo[..., sl, :] = xd[..., sl, :].amin(-2, keepdim=True)
            hi[..., sl, :] = xd[..., sl, :].amax(-2, keepdim=True)
    sc = (hi - lo) / (2**bits - 1)
    deq64 = torch.round((xd - lo) / sc) * sc + lo
    deq = dequantize(codes, scale, zero)
    err = (deq.double() - xd).abs()
    assert bool((err <= sc / 2 * (1 + 1e-5) + 1e-6).all())  # the bound, scale / 2
    torch.testing.assert_close(
        deq.double(), deq64, atol=1e-5 * float(sc.max()) + 1e-6, rtol=0
    )
    assert float(err.max()) > 0.2 * float(sc.max() / 2)  # the bound is not vacuous


def test_fewer_bits_more_error_and_constant_rows():
    x = torch.randn(4, 16, 8, generator=torch.Generator().manual_seed(0))
    errs = [
        float((fake_quantize(x, b, per="token") - x).abs().mean()) for b in (8, 4, 2)
    ]
    assert errs[0] < errs[1] < errs[2]
    c = torch.full((3, 4), 2.5)
    assert torch.equal(fake_quantize(c, 2, per="token"), c)  # no 0/0


def test_outlier_channel_prefers_per_channel_keys():
    g = torch.Generator().manual_seed(4)
    k = torch.randn(64, 16, generator=g)
    k[:, 3] += 20  # one outlier channel, as KIVI finds in LLM keys
    assert float(channel_outliers(k)) > 10
    e_tok = (fake_quantize(k, 4, per="token") - k).abs().mean()
    e_ch = (fake_quantize(k, 4, per="channel") - k).abs().mean()
    assert e_ch < e_tok / 3


@torch.no_grad()
def test_quant_cache_loss():
    m = _model(3)
    ids = torch.randint(0, 40, (2, 24), generator=torch.Generator().manual_seed(3))
    ref = lm_forward(m, ids)
    same = lm_forward(m, ids, [QuantCache(None, None) for _ in m.blocks])
    torch.testing.assert_close(same, ref)
    l8 = lm_forward(m, ids, [QuantCache(8, 8) for _ in m.blocks])
    l2 = lm_forward(m, ids, [QuantCache(2, 2) for _ in m.blocks])
    e8, e2 = float((l8 - ref).abs().max()), float((l2 - ref).abs().max())
    assert 0 < e8 < e2


# ------------------------------------------------------------ bad input
def test_bad_input():
    m = _model()
    ids = torch.randint(0, 40, (1, 20))
    with pytest.raises(ValueError, match="policy"):
        evict_decode(m, ids, "lru", 8, prompt=5)
    with pytest.raises(ValueError, match="budget"):
        evict_decode(m, ids, "window", 0, prompt=5)
    with pytest.raises(TypeError, match="budget"):
        evict_decode(m, ids, "window", 4.0, prompt=5)
    with pytest.raises(ValueError, match="prompt"):
        evict_decode(m, ids, "window", 8, prompt=19)
    with pytest.raises(ValueError, match="ids"):
        evict_decode(m, ids + 100, "window", 8, prompt=5)
    with pytest.raises(TypeError, match="model"):
        evict_decode(torch.nn.Linear(2, 2), ids, "window", 8, prompt=5)
    with pytest.raises(ValueError, match="window"):
        keep_snapkv(torch.rand(5, 8), 3)
    with pytest.raises(ValueError, match="pool"):
        keep_snapkv(torch.rand(2, 8), 4, pool=4)
    with pytest.raises(ValueError, match="recent"):
        keep_h2o(torch.rand(8), 4, recent=5)
    with pytest.raises(TypeError, match="scores"):
        keep_h2o([0.1, 0.2], 1, recent=0)
    with pytest.raises(ValueError, match="sinks"):
        keep_window(10, 4, sinks=5)
    with pytest.raises(ValueError, match="bits"):
        quantize(torch.rand(3, 4), 9, per="token")
    with pytest.raises(ValueError, match="per"):
        quantize(torch.rand(3, 4), 4, per="head")
    with pytest.raises(TypeError, match="x"):
        quantize(torch.ones(3, 4, dtype=torch.long), 4, per="token")
    with pytest.raises(TypeError, match="codes"):
        dequantize(torch.ones(2), torch.ones(1), torch.ones(1))
    with pytest.raises(ValueError, match="key_per"):
        QuantCache(4, 4, key_per="row")


def test_shipped_lm_full_budget_equals_per_token_loss():
    from attnlab.data import stories
    from attnlab.models import load_lm, per_token_loss

    lm = load_lm("target")
    ids = stories.heldout_prompts(2, 48, seed=0)
    with torch.no_grad():
        full = per_token_loss(lm, ids)[:, 16:]  # (B, 31)
    for pol in ("h2o", "snapkv"):
        got = evict_decode(lm, ids, pol, 48, prompt=16)
        torch.testing.assert_close(got, full, atol=1e-4, rtol=1e-4)
    small = evict_decode(lm, ids, "h2o", 8, prompt=16)
    assert float(small.mean()) > float(full.mean())
