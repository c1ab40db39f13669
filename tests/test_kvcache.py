"""attnlab.kvcache: cached generation gives the same tokens as the uncached one."""

from __future__ import annotations

import pytest
import torch

import attnlab


def lm(norm_first):
    cfg = attnlab.TransformerConfig(
        tgt_vocab=12,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_decoder_layers=2,
        norm_first=norm_first,
        max_len=40,
    )
    return attnlab.TransformerLM(cfg).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_same_tokens_as_uncached(norm_first):
    model = lm(norm_first)
    prompt = torch.randint(3, 12, (3, 5))
    a = model.generate(prompt, 20)
    b = attnlab.generate_with_cache(model, prompt, 20)
    assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    a = model.generate(prompt, 10, temperature=1.0, generator=g1)
    b = attnlab.generate_with_cache(model, prompt, 10, temperature=1.0, generator=g2)
    assert torch.equal(a, b)


def test_cached_logits_equal_full_forward():
    model = lm(False)
    ids = torch.randint(3, 12, (2, 9))
    cache = attnlab.KVCache()
    from attnlab.kvcache import _forward_cached  # no public name

    first = _forward_cached(model, ids[:, :4], cache)
    rest = [_forward_cached(model, ids[:, t : t + 1], cache) for t in range(4, 9)]
    got = torch.cat([first, *rest], dim=1)
    torch.testing.assert_close(got, model(ids), atol=1e-5, rtol=1e-4)
    assert len(cache) == 9 and cache.nbytes() == 2 * 2 * 2 * 4 * 9 * 8 * 4


@pytest.mark.parametrize("norm_first", [False, True])
def test_beam_search_with_cached_step(norm_first):
    """Beam search re-selects rows: the cache follows them through reorder."""
    model = lm(norm_first)
    plain = attnlab.beam_search(model.step, bos_id=1, eos_id=2, beam_size=3, max_len=12)
    step = attnlab.CachedLMStep(model)
    cached = attnlab.beam_search(step, bos_id=1, eos_id=2, beam_size=3, max_len=12)
    assert [ids for ids, _ in plain] == [ids for ids, _ in cached]
    for (_, a), (_, b) in zip(plain, cached):
        assert abs(a - b) < 1e-4


def test_bad_input():
    model = lm(False)
    with pytest.raises(ValueError, match="max_len"):
        attnlab.generate_with_cache(model, torch.ones(1, 30, dtype=torch.long), 20)
    with pytest.raises(ValueError, match="prompt"):
        attnlab.generate_with_cache(model, torch.ones(4, dtype=torch.long), 2)
    step = attnlab.CachedLMStep(model)
    step(torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="new tokens"):
        step(torch.ones(1, 3, dtype=torch.long))


def test_reused_step_with_another_prefix_raises():
    """A step that cached one prefix refuses another of the same length + 1, whose
    cached keys would be stale, instead of returning wrong log-probs."""
    model = lm(False)
    step = attnlab.CachedLMStep(model)
    a = torch.tensor([[3, 4, 5, 6]])
    step(a)
    b = torch.tensor([[3, 9, 5, 6, 7]])  # token 1 differs from what is cached
    with pytest.raises(ValueError, match="stale"):
        step(b)
    step.reset()
    torch.testing.assert_close(step(b), model.step(b), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="batch of 1"):
        step(torch.ones(3, 6, dtype=torch.long))


def test_extending_the_same_prefix_still_works():
    model = lm(True)
    step = attnlab.CachedLMStep(model)
    ids = torch.randint(3, 12, (2, 8))
    step(ids[:, :3])
    torch.testing.assert_close(step(ids), model.step(ids), atol=1e-5, rtol=1e-4)


def test_append_checks_shapes():
    cache = attnlab.KVCache()
    cache.append(0, torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8))
    with pytest.raises(ValueError, match="batch size B = 3"):
        cache.append(0, torch.randn(3, 4, 1, 8), torch.randn(3, 4, 1, 8))
    with pytest.raises(ValueError, match="width Dh = 6"):
        cache.append(0, torch.randn(2, 4, 1, 6), torch.randn(2, 4, 1, 6))
    with pytest.raises(ValueError, match="same B, H, t"):
        cache.append(0, torch.randn(2, 4, 1, 8), torch.randn(2, 4, 2, 8))
    with pytest.raises(ValueError, match="rows must lie in"):
        cache.reorder(torch.tensor([0, 5]))
