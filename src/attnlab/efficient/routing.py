"""Learned sparse attention: MoBA-style top-k block routing (Lu et al. 2025).

The keys are cut into blocks of ``block_size``; each block is summarised by the mean of
its keys. A query scores every block by ``q · mean(k_block)`` (the *gate*), always
attends to its own (current) block, causally, and to the ``top_k - 1`` best-scoring
earlier blocks; every other block is skipped. The attention itself is computed tile by
tile with the online softmax (chapter 8), and a key-block tile is computed only for
the query rows that selected it.

    out, stats = block_routed_attention(q, k, v, block_size=4, top_k=3,
                                        return_stats=True)
    stats["mask"]      # (..., T, S) bool, True = attended: the dense equivalent
    stats["selected"]  # (..., T, n_blocks) the blocks each query routed to
    stats["visited"]   # share of the causal (query, key-block) pairs computed
    stats["tiles"]     # share of the causal (query-block, key-block) tiles computed

Shapes ``q, k, v (..., T, Dh)`` (self-attention: the same ``T`` for keys).
"""

from __future__ import annotations

import math

import torch

from .. import validation as _v
from .tiles import check_tiled_qkv

__all__ = [
    "block_routed_attention",
    "route_blocks",
    "block_window_attention",
    "RecallProbe",
]


def _check(q, k, v, block_size, top_k, fn):
    check_tiled_qkv(q, k, v, fn)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"{fn}: self-attention only: q and k need the same length, got "
            f"{q.shape[-2]} and {k.shape[-2]}"
        )
    bs = _v.integer(block_size, "block_size", fn, low=1)
    kk = _v.integer(top_k, "top_k", fn, low=1)
    _v.integer(q.shape[-2], "the sequence length T (q.shape[-2])", fn, low=1)
    return bs, kk


def route_blocks(
    q: torch.Tensor, k: torch.Tensor, *, block_size: int, top_k: int
) -> torch.Tensor:
    """The blocks each query routes to: ``(..., T, n_blocks)`` bool.

    Block ``j`` holds keys ``j·block_size ...``; query ``i``'s current block is
    ``i // block_size`` (always selected); among the blocks before it, the
    ``top_k - 1`` with the largest ``q_i · mean(k in block)`` (fewer if fewer exist).
    """
    fn = "route_blocks"
    check_tiled_qkv(q, k, k, fn)
    bs = _v.integer(block_size, "block_size", fn, low=1)
    kk = _v.integer(top_k, "top_k", fn, low=1)
    _v.integer(k.shape[-2], "the number of keys S (k.shape[-2])", fn, low=1)
    T, S, Dh = q.shape[-2], k.shape[-2], k.shape[-1]
    nb = math.ceil(S / bs)
    pad = nb * bs - S
    kp = torch.cat((k, k.new_zeros(*k.shape[:-2], pad, Dh)), -2)  # (..., nb·bs, Dh)
    count = torch.full((nb,), bs, dtype=k.dtype, device=k.device)
    count[-1] = bs - pad
    means = (
        kp.reshape(*k.shape[:-2], nb, bs, Dh).sum(-2) / count[:, None]
    )  # (..., nb, Dh)
    gate = q @ means.transpose(-2, -1)  # (..., T, Dh) @ (..., Dh, nb) -> (..., T, nb)
    qb = torch.arange(T, device=q.device) // bs  # (T,) current block of each query
    blk = torch.arange(nb, device=q.device)
    earlier = blk[None, :] < qb[:, None]  # (T, nb): blocks wholly before the query's
    current = blk[None, :] == qb[:, None]  # (T, nb)
    sel = current.expand(gate.shape).clone()  # (..., T, nb)
    if kk > 1 and nb > 1:
        g = gate.masked_fill(~earlier, -math.inf)
        top = g.topk(min(kk - 1, nb), dim=-1)  # (..., T, k - 1)
        chosen = torch.zeros_like(sel).scatter_(-1, top.indices, True)
        sel |= chosen & earlier  # a -inf pick (fewer earlier blocks than k-1) dropped
    return sel


def block_routed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    block_size: int,
    top_k: int,
    scale: float | None = None,
    return_stats: bool = False,
):
    """Causal attention of each query over the blocks it routes to (see the module).

    Parameters
    ----------
    q, k, v : (..., T, Dh), (..., T, Dh), (..., T, Dv) floating-point tensors on one
        device, with the same leading dims and length (self-attention), T >= 1.
    block_size : the keys per block, an int >= 1.
    top_k : the blocks each query attends to, its own included, an int >= 1 (fewer
        where fewer earlier blocks exist).
    scale : the score scale, a real > 0; default ``Dh ** -0.5`` (1 if ``Dh`` is 0).
    return_stats : also return the routing statistics.

    Returns
    -------
    out : (..., T, Dv), in ``q``'s dtype.
    stats : only with ``return_stats``, a dict: ``mask (..., T, S)`` (True =
        attended), ``selected (..., T, n_blocks)``, ``visited`` (share of the causal
        (query, key block) pairs computed) and ``tiles`` (share of the causal (query
        block, key block) tiles any query of the block needed), both floats.

    Raises
    ------
    TypeError
        ``q``, ``k`` or ``v`` is not a tensor or not floating point, or they differ in
        dtype; ``block_size``/``top_k`` is not an int; ``scale`` is not a real;
        ``return_stats`` is not a bool.
    ValueError
        The shapes do not match (leading dims, ``Dh``, lengths; ``k`` and ``q`` of
        different lengths), T is 0, the tensors are on different devices,
        ``block_size``/``top_k`` < 1, ``scale`` <= 0 or not finite; under
        :func:`attnlab.debug`, ``q`` holding NaN or inf.
    """
    fn = "block_routed_attention"
    bs, kk = _check(q, k, v, block_size, top_k, fn)
    sc = (
        (q.shape[-1] ** -0.5 if q.shape[-1] else 1.0)  # head width 0: scores all 0
        if scale is None
        else _v.real(scale, "scale", fn, low=0.0, open_low=True)
    )
    _v.flag(return_stats, "return_stats", fn)
    _v.finite(q, "q", fn)
    sel = route_blocks(q, k, block_size=bs, top_k=kk)  # (..., T, nb)
    T, S, nb = q.shape[-2], k.shape[-2], sel.shape[-1]
    f = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(f) * sc
    i = torch.arange(T, device=q.device)[:, None]  # (T, 1)
    m = q.new_full((*q.shape[:-1],), -math.inf, dtype=f)  # running max (..., T)
    l = q.new_zeros(*q.shape[:-1], dtype=f)  # running sum (..., T)
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1], dtype=f)  # (..., T, Dv)
    for j in range(nb):
        rows = sel[..., j]  # (..., T): queries that visit this block
        if not bool(rows.any()):
            continue  # nobody routed here: the tile is never computed
        j0, j1 = j * bs, min((j + 1) * bs, S)
        s = qf @ k[..., j0:j1, :].to(f).transpose(-2, -1)  # (..., T, Dh) @ (..., Dh, b)
        jj = torch.arange(j0, j1, device=q.device)[None, :]  # (1, b)
        ok = rows[..., None] & (jj <= i)  # (..., T, b)
        s = s.masked_fill(~ok, -math.inf)
        m_new = torch.maximum(m, s.amax(-1))  # (..., T)
        m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)
        p = torch.exp(s - m_safe[..., None])  # (..., T, b)
        alpha = torch.exp(m - m_safe)  # (..., T)
        l = l * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + p @ v[..., j0:j1, :].to(f)  # (..., T, Dv)
        m = m_new
    out = (acc / l.clamp_min(torch.finfo(f).tiny)[..., None]).to(
        q.dtype
    )  # (..., T, Dv)
    if not return_stats:
        return out
    key_block = torch.arange(S, device=q.device) // bs  # (S,)
    mask = sel[..., key_block] & (torch.arange(S, device=q.device)[None, :] <= i)
    qb = torch.arange(T, device=q.device) // bs
    causal_pairs = (torch.arange(nb, device=q.device)[None, :] <= qb[:, None]).sum()
    visited = sel.sum((-1, -2)).to(f) / causal_pairs  # (...)
    nq = math.ceil(T / bs)
    pad = nq * bs - T
    selp = torch.cat((sel, sel.new_zeros(*sel.shape[:-2], pad, nb)), -2)
    tiles = selp.reshape(*sel.shape[:-2], nq, bs, nb).any(-2)  # (..., nq, nb)
    causal_tiles = (
        torch.arange(nb, device=q.device)[None, :]
        <= torch.arange(nq, device=q.device)[:, None]
    ).sum()
    stats = dict(
        mask=mask,
        selected=sel,
        visited=float(visited.mean()),
        tiles=float((tiles.sum((-1, -2)).to(f) / causal_tiles).mean()),
    )
    return out, stats


# ------------------------------------------------ chapter 14's probe: routing at inference
class RecallProbe(torch.nn.Module):
    """Chapter 9's one-layer recall model (one head): each (key, value) pair is one
    token (the two embeddings summed), then the query key; the value is read out at the
    query's position. ``forward(keys, vals, query, attention=None)``: ``attention(q, k,
    v)`` replaces full causal attention (e.g. block routing at inference)."""

    def __init__(self, n_keys: int = 64, n_vals: int = 16, d_model: int = 32):
        super().__init__()
        self.key_emb = torch.nn.Embedding(n_keys, d_model)
        self.val_emb = torch.nn.Embedding(n_vals, d_model)
        self.w_q, self.w_k, self.w_v = (
            torch.nn.Linear(d_model, d_model) for _ in range(3)
        )
        self.out = torch.nn.Linear(d_model, n_vals)

    def forward(self, keys, vals, query, attention=None):
        x = torch.cat(
            [self.key_emb(keys) + self.val_emb(vals), self.key_emb(query)[:, None]], 1
        )  # (B, P + 1, D)
        q, k, v = (
            w(x)[:, None] for w in (self.w_q, self.w_k, self.w_v)
        )  # (B, 1, P+1, D)
        if attention is None:
            h = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True
            )
        else:
            h = attention(q, k, v)  # (B, 1, P + 1, D)
        return self.out(h[:, 0, -1])  # (B, V)


def block_window_attention(q, k, v, *, block_size: int, n_blocks: int):
    """The fixed alternative: each query sees its own block and the ``n_blocks - 1``
    before it (causal) -- as many blocks as routing with ``top_k = n_blocks``."""
    fn = "block_window_attention"
    check_tiled_qkv(q, k, v, fn)
    bs = _v.integer(block_size, "block_size", fn, low=1)
    nb = _v.integer(n_blocks, "n_blocks", fn, low=1)
    i = torch.arange(q.shape[-2], device=q.device)[:, None]  # (T, 1)
    j = torch.arange(k.shape[-2], device=q.device)[None, :]  # (1, S)
    allowed = (j <= i) & (j // bs > i // bs - nb)  # (T, S)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
