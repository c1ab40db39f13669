"""Chapter 12 checks pass a good answer written independently of the check's reference
and fail realistic wrong ones."""

from __future__ import annotations

import torch

import attnlab
from attnlab.circuits import copy_losses


# ------------------------------------------------------------------ ablation effect
def _second_loss(model, ids, n):
    with torch.no_grad():
        return copy_losses(model(ids), ids, n)[1]


def ablate_good(model, ids, n, head):  # zero the head's columns of w_o, then restore
    layer, h = head
    w = model.blocks[layer].attn.w_o.weight
    Dh = model.blocks[layer].attn.d_head
    base = _second_loss(model, ids, n)
    saved = w.detach().clone()
    with torch.no_grad():
        w[:, h * Dh : (h + 1) * Dh] = 0
    try:
        return _second_loss(model, ids, n) - base
    finally:
        with torch.no_grad():
            w.copy_(saved)


def ablate_rows(model, ids, n, head):  # zeroes rows of w_o: output dims, not the head
    layer, h = head
    w = model.blocks[layer].attn.w_o.weight
    Dh = model.blocks[layer].attn.d_head
    base, saved = _second_loss(model, ids, n), w.detach().clone()
    with torch.no_grad():
        w[h * Dh : (h + 1) * Dh] = 0
    out = _second_loss(model, ids, n) - base
    with torch.no_grad():
        w.copy_(saved)
    return out


def ablate_not_restored(model, ids, n, head):  # forgets to put the weights back
    layer, h = head
    w = model.blocks[layer].attn.w_o.weight
    Dh = model.blocks[layer].attn.d_head
    base = _second_loss(model, ids, n)
    with torch.no_grad():
        w[:, h * Dh : (h + 1) * Dh] = 0
    return _second_loss(model, ids, n) - base


def ablate_both_copies(model, ids, n, head):  # the loss on both copies, not the second
    def loss():
        with torch.no_grad():
            return sum(copy_losses(model(ids), ids, n)) / 2

    layer, h = head
    w = model.blocks[layer].attn.w_o.weight
    Dh = model.blocks[layer].attn.d_head
    base, saved = loss(), w.detach().clone()
    with torch.no_grad():
        w[:, h * Dh : (h + 1) * Dh] = 0
    out = loss() - base
    with torch.no_grad():
        w.copy_(saved)
    return out


def ablate_library(model, ids, n, head):  # the library call the exercise asks to write
    from attnlab.explain import ablate_heads, attention_modules

    base = _second_loss(model, ids, n)
    with ablate_heads(attention_modules(model), [head]):
        return _second_loss(model, ids, n) - base


def test_ablation_effect(check_separates):
    check_separates(
        attnlab.check.ablation_effect,
        ablate_good,
        [ablate_rows, ablate_not_restored, ablate_both_copies, ablate_library],
    )


# ------------------------------------------------------------------ patched loss
def _run_patched(model, clean, corrupt, n, head, slot=None, whole=False):
    layer, h = head
    attn = model.blocks[layer].attn
    Dh = attn.d_head
    cols = slice(None) if whole else slice(slot * Dh, (slot + 1) * Dh)
    saved = {}

    def grab(_mod, args):
        saved["x"] = args[0].detach().clone()

    def put(_mod, args):
        x = args[0].clone()
        x[..., cols] = saved["x"][..., cols]
        return (x,)

    with torch.no_grad():
        hook = attn.w_o.register_forward_pre_hook(grab)
        model(clean)
        hook.remove()
        hook = attn.w_o.register_forward_pre_hook(put)
        try:
            return copy_losses(model(corrupt), corrupt, n)[1]
        finally:
            hook.remove()


def patch_good(model, clean, corrupt, n, head):
    return _run_patched(model, clean, corrupt, n, head, slot=head[1])


def patch_next_head(model, clean, corrupt, n, head):  # off by one head
    return _run_patched(model, clean, corrupt, n, head, slot=(head[1] + 1) % 4)


def patch_whole_layer(model, clean, corrupt, n, head):  # every head of the layer
    return _run_patched(model, clean, corrupt, n, head, whole=True)


def patch_library(model, clean, corrupt, n, head):
    from attnlab.explain import attention_modules, cache_heads, patch_heads

    mhas = attention_modules(model)
    with torch.no_grad(), cache_heads(mhas) as cache:
        model(clean)
    with torch.no_grad(), patch_heads(mhas, cache, [head]):
        return copy_losses(model(corrupt), corrupt, n)[1]


def test_patched_loss(check_separates):
    check_separates(
        attnlab.check.patched_loss,
        patch_good,
        [patch_next_head, patch_whole_layer, patch_library],
    )


# ------------------------------------------------------------- duplicate-token heads
def dup_good(weights, ids):
    T = ids.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-1)  # j < i
    same = (ids[:, :, None] == ids[:, None, :]) & earlier  # (B, T, T)
    hit = (weights * same[None, :, None]).sum((-1, -2))  # (L, B, H)
    return (hit / weights.sum((-1, -2))).mean(1)  # (L, H)


def dup_with_diagonal(weights, ids):  # the current token counted as its own duplicate
    same = ids[:, :, None] == ids[:, None, :]
    same = same & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()
    hit = (weights * same[None, :, None]).sum((-1, -2))
    return (hit / weights.sum((-1, -2))).mean(1)


def dup_per_pair(weights, ids):  # divides by the number of duplicate pairs
    T = ids.shape[1]
    same = (ids[:, :, None] == ids[:, None, :]) & torch.ones(T, T).tril(-1).bool()
    hit = (weights * same[None, :, None]).sum((-1, -2))
    return (hit / same.sum((-1, -2)).clamp(min=1)[None, :, None]).mean(1)


def dup_later(weights, ids):  # later positions (j > i): the transposed pattern
    T = ids.shape[1]
    same = (ids[:, :, None] == ids[:, None, :]) & torch.ones(T, T).triu(1).bool()
    hit = (weights * same[None, :, None]).sum((-1, -2))
    return (hit / weights.sum((-1, -2))).mean(1)


def test_duplicate_token_scores(check_separates):
    check_separates(
        attnlab.check.duplicate_token_scores,
        dup_good,
        [dup_with_diagonal, dup_per_pair, dup_later],
    )
