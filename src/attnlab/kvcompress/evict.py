"""Eviction at a fixed budget: the policies and the decoding loop (see the package)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import validation as _v
from ..modern.attention import Cache

POLICIES = ("full", "window", "h2o", "snapkv", "tova")


# ----------------------------------------------------------------- eviction policies
def _budget(budget, fn: str) -> int:
    return _v.integer(budget, "budget", fn, low=1)


def keep_window(length: int, budget: int, *, sinks: int = 4) -> torch.Tensor:
    """Indices ``(min(budget, length),)``: the first ``sinks`` tokens and the newest
    ``budget - sinks`` (StreamingLLM's attention sinks plus a window)."""
    fn = "keep_window"
    n = _v.integer(length, "length", fn, low=0)
    b = _budget(budget, fn)
    s = _v.integer(sinks, "sinks", fn, low=0, high=b)
    if b >= n:
        return torch.arange(n)
    return torch.cat((torch.arange(s), torch.arange(n - (b - s), n)))


def _scores(scores, fn: str, name: str = "scores") -> torch.Tensor:
    t = _v.floating(scores, name, fn, min_dim=1)
    _v.finite(t, name, fn)
    return t


def _top_sorted(score: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` largest along the last dim, sorted by position."""
    if k <= 0:
        return torch.zeros(*score.shape[:-1], 0, dtype=torch.long, device=score.device)
    return score.topk(k, dim=-1).indices.sort(-1).values


def keep_h2o(scores: torch.Tensor, budget: int, *, recent: int) -> torch.Tensor:
    """H2O: ``scores (..., S)`` accumulated attention each token has received (summed
    over the queries so far); keep the ``recent`` newest and the ``budget - recent``
    others with the largest scores. Returns ``(..., min(budget, S))``, per leading
    index (e.g. per head)."""
    fn = "keep_h2o"
    t = _scores(scores, fn)
    b = _budget(budget, fn)
    r = _v.integer(recent, "recent", fn, low=0, high=b)
    S = t.shape[-1]
    if b >= S:
        return torch.arange(S, device=t.device).expand(*t.shape[:-1], S)
    old = _top_sorted(t[..., : S - r], b - r)  # (..., b - r)
    new = torch.arange(S - r, S, device=t.device).expand(*t.shape[:-1], r)
    return torch.cat((old, new), -1)  # (..., b)


def keep_snapkv(
    obs_weights: torch.Tensor, budget: int, *, pool: int = 5
) -> torch.Tensor:
    """SnapKV: ``obs_weights (..., w, S)`` attention of the last ``w`` queries (the
    observation window, which are the last ``w`` of the ``S`` keys). Each prefix key's
    vote is the sum of those ``w`` rows, average-pooled along the sequence with an odd
    ``pool`` (a kernel of ``pool`` neighbours: keeps clusters, not lone spikes); keep
    the window and the ``budget - w`` prefix keys with the largest pooled votes.
    Returns ``(..., min(budget, S))``, per leading index (e.g. per head)."""
    fn = "keep_snapkv"
    t = _scores(obs_weights, fn, "obs_weights")
    if t.dim() < 2:
        raise ValueError(f"{fn}: obs_weights must be (..., w, S), got {tuple(t.shape)}")
    b = _budget(budget, fn)
    p = _v.integer(pool, "pool", fn, low=1)
    if p % 2 == 0:
        raise ValueError(f"{fn}: pool must be odd (a centred kernel), got {p}")
    w, S = t.shape[-2], t.shape[-1]
    if w > S:
        raise ValueError(
            f"{fn}: obs_weights' window w = {w} is longer than its S = {S} keys"
        )
    if b >= S:
        return torch.arange(S, device=t.device).expand(*t.shape[:-2], S)
    if b < w:
        raise ValueError(f"{fn}: budget ({b}) must be >= the window w ({w})")
    votes = t[..., : S - w].sum(-2)  # (..., S - w)
    lead = votes.shape[:-1]
    flat = votes.reshape(-1, 1, S - w)  # (N, 1, S - w)
    pooled = F.avg_pool1d(flat, p, stride=1, padding=p // 2, count_include_pad=False)
    pooled = pooled.reshape(*lead, S - w)  # (..., S - w)
    old = _top_sorted(pooled, b - w)  # (..., b - w)
    new = torch.arange(S - w, S, device=t.device).expand(*lead, w)
    return torch.cat((old, new), -1)  # (..., b)


def keep_tova(weights: torch.Tensor, budget: int) -> torch.Tensor:
    """TOVA: ``weights (..., H, S)`` the current query's attention in each head; keep
    the ``budget`` tokens with the largest weight averaged over the heads (one set
    per layer). Returns ``(..., min(budget, S))``."""
    fn = "keep_tova"
    t = _scores(weights, fn, "weights")
    if t.dim() < 2:
        raise ValueError(f"{fn}: weights must be (..., H, S), got {tuple(t.shape)}")
    b = _budget(budget, fn)
    S = t.shape[-1]
    if b >= S:
        return torch.arange(S, device=t.device).expand(*t.shape[:-2], S)
    return _top_sorted(t.mean(-2), b)  # (..., b)


# ----------------------------------------------------------------- running an LM
def _blocks(model):
    blocks = getattr(model, "blocks", None)
    ok = (
        blocks is not None
        and hasattr(model, "embed")
        and hasattr(model, "head")
        and hasattr(model, "norm")
        and all(hasattr(b, a) for b in blocks for a in ("n1", "attn", "n2", "mlp"))
    )
    if not ok:
        raise TypeError(
            "model must be a pre-norm decoder like attnlab.modern.lab.TinyLM (embed, "
            f"blocks of n1/attn/n2/mlp, norm, head), got {type(model).__name__}"
        )
    if getattr(model, "positional", "rope") == "sinusoidal":
        raise ValueError("model: sinusoidal positions are not supported with a cache")
    return blocks


def lm_forward(
    model, ids: torch.Tensor, caches=None, *, start: int = 0, weights: bool = False
):
    """One forward of a TinyLM-style decoder with a ``Cache`` per layer.

    ``ids (B, T)`` at positions ``start, ..., start + T - 1`` (an evicting cache is
    shorter than the position) -> logits ``(B, T, V)``, and with ``weights`` the list
    of each layer's attention weights ``(B, H, T, S)``."""
    blocks = _blocks(model)
    if caches is not None and len(caches) != len(blocks):
        raise ValueError(f"lm_forward: need {len(blocks)} caches, got {len(caches)}")
    x = model.embed(ids)  # (B, T, D)
    pos = torch.arange(start, start + ids.shape[1], device=ids.device)  # (T,)
    ws = []
    for i, blk in enumerate(blocks):
        c = None if caches is None else caches[i]
        a, w = blk.attn(
            blk.n1(x), position_ids=pos, cache=c, return_weights=True
        )  # (B, T, D)
        ws.append(w)
        x = x + a
        x = x + blk.mlp(blk.n2(x))  # (B, T, D)
    logits = model.head(model.norm(x))  # (B, T, V)
    return (logits, ws) if weights else logits


def _gather(cache: Cache, idx: torch.Tensor) -> None:
    """Keep cache slots ``idx (B, G, b)`` (sorted positions per head)."""
    k, v = cache.first, cache.second
    assert k is not None and v is not None and cache.positions is not None
    Dh, Dv = k.shape[-1], v.shape[-1]
    cache.first = k.gather(-2, idx[..., None].expand(*idx.shape, Dh))  # (B, G, b, Dh)
    cache.second = v.gather(-2, idx[..., None].expand(*idx.shape, Dv))
    # the positions of head 0 of sequence 0: a decoding query is later than every
    # kept key, so the causal mask built from them allows all of them (any head)
    cache.positions = cache.positions[idx[0, 0]]


def _group_sum(w: torch.Tensor, G: int) -> torch.Tensor:
    """(B, H, ..., S) -> (B, G, ..., S): summed over the query heads of each group."""
    B, H = w.shape[:2]
    return w.reshape(B, G, H // G, *w.shape[2:]).sum(2)


class _State:
    """A layer's cache and the statistics its policy needs."""

    def __init__(self, policy: str, G: int) -> None:
        self.cache, self.policy, self.G = Cache(), policy, G
        self.acc: torch.Tensor | None = None  # H2O: (B, G, S)
        self.rows: torch.Tensor | None = None  # SnapKV: (B, G, w, S)
        self.last: torch.Tensor | None = None  # TOVA: (B, H, S)

    def observe(self, w: torch.Tensor, window: int) -> None:
        """Update with this step's weights ``w (B, H, T, S)`` over the cache."""
        g = _group_sum(w.detach(), self.G)  # (B, G, T, S)
        S = g.shape[-1]
        if self.policy == "h2o":
            prev = g.new_zeros(*g.shape[:2], S)
            if self.acc is not None:
                prev[..., : self.acc.shape[-1]] = self.acc
            self.acc = prev + g.sum(-2)  # (B, G, S)
        elif self.policy == "snapkv":
            rows = g
            if self.rows is not None:
                old = g.new_zeros(*self.rows.shape[:3], S)
                old[..., : self.rows.shape[-1]] = self.rows
                rows = torch.cat((old, g), -2)  # (B, G, w' + T, S)
            self.rows = rows[..., -window:, :]
        elif self.policy == "tova":
            self.last = w[..., -1, :].detach()  # (B, H, S)

    def evict(self, budget: int, sinks: int, recent: int, window: int, pool: int):
        S = self.cache.length
        if self.policy == "full" or S <= budget:
            return
        B = self.cache.first.shape[0]  # type: ignore[union-attr]
        if self.policy == "window":
            idx = keep_window(S, budget, sinks=sinks).expand(B, self.G, budget)
        elif self.policy == "h2o":
            assert self.acc is not None
            idx = keep_h2o(self.acc, budget, recent=recent)  # (B, G, b)
            self.acc = self.acc.gather(-1, idx)
        elif self.policy == "snapkv":
            assert self.rows is not None
            idx = keep_snapkv(self.rows, budget, pool=pool)  # (B, G, b)
            w = self.rows.shape[-2]
            self.rows = self.rows.gather(-1, idx[..., None, :].expand(-1, -1, w, -1))
        else:  # tova
            assert self.last is not None
            idx = keep_tova(self.last, budget)  # (B, b)
            idx = idx[:, None].expand(B, self.G, budget)
        _gather(self.cache, idx)


@torch.no_grad()
def evict_decode(
    model,
    ids: torch.Tensor,
    policy: str,
    budget: int,
    *,
    prompt: int,
    sinks: int = 4,
    recent: int | None = None,
    window: int = 8,
    pool: int = 5,
) -> torch.Tensor:
    """Per-token loss ``(B, T - prompt - 1)`` of ``ids (B, T)``'s continuation under
    an eviction ``policy`` (one of :data:`POLICIES`) at a fixed ``budget`` of cached
    tokens per layer (and head).

    The first ``prompt`` tokens are prefilled with the full cache and compressed to the
    budget; each later token is decoded against the cache, and predicts the next one.
    ``sinks`` (window), ``recent`` (H2O, default ``budget // 2``), ``window`` and
    ``pool`` (SnapKV's observation window and kernel) are the policies' settings.
    """
    fn = "evict_decode"
    blocks = _blocks(model)
    vocab = model.head.out_features
    t = _v.token_ids(ids, vocab, "ids", fn)
    if t.dim() != 2:
        raise ValueError(f"{fn}: ids must be (B, T), got shape {tuple(t.shape)}")
    if policy not in POLICIES:
        raise ValueError(f"{fn}: policy must be one of {POLICIES}, got {policy!r}")
    b = _budget(budget, fn)
    P = _v.integer(prompt, "prompt", fn, low=1, high=t.shape[1] - 2)
    s = _v.integer(sinks, "sinks", fn, low=0, high=b)
    r = b // 2 if recent is None else _v.integer(recent, "recent", fn, low=0, high=b)
    w = _v.integer(window, "window", fn, low=1, high=P)
    p = _v.integer(pool, "pool", fn, low=1)
    if policy == "snapkv" and b < w:
        raise ValueError(f"{fn}: budget ({b}) must be >= SnapKV's window ({w})")
    for blk in blocks:
        a = blk.attn
        if getattr(a, "window", None) is not None or getattr(a, "alibi", False):
            raise ValueError(f"{fn}: layers with a sliding window or ALiBi unsupported")
    states = [_State(policy, blk.attn.num_kv_heads) for blk in blocks]
    caches = [st.cache for st in states]
    logits, ws = lm_forward(model, t[:, :P], caches, weights=True)  # (B, P, V)
    losses = []
    for pos in range(P, t.shape[1]):
        for st, wl in zip(states, ws):
            st.observe(wl, w)
            st.evict(b, s, r, w, p)
        if pos == t.shape[1] - 1:
            break
        logits, ws = lm_forward(
            model, t[:, pos : pos + 1], caches, start=pos, weights=True
        )
        losses.append(F.cross_entropy(logits[:, -1], t[:, pos + 1], reduction="none"))
    return torch.stack(losses, 1)  # (B, T - P - 1)
