"""Chapter 13's small experiments: a tiny decoder LM on ``attnlab.modern`` and the
synthetic tasks it is trained on (used by ``tools/experiments/ch13_*.py`` and by the
page's live point).

Tasks (every batch drawn from a seeded generator; evaluation batches come from a
different seed stream, ``EVAL_SEED_OFFSET`` away, so they are disjoint in the random
stream by construction — the token strings themselves may repeat, as in any
synthetic copy task):

- ``periodic_copy``: a block of ``period`` random tokens repeated to the length; the
  next token is predictable from position ``period`` on (it equals the token
  ``period`` back). Trained at one length, evaluated at longer ones.
- ``recall``: ``n_pairs`` key-value pairs, then ``n_queries`` keys, each followed by
  its value; the loss is on the values after the queries.
- ``passkey``: a needle in noise (the passkey retrieval of the context-extension
  papers): random tokens, a marker followed by the passkey somewhere, and at the end a
  query whose target is the passkey. ``far`` puts the marker further back than a given
  distance, e.g. beyond the training length.
- ``noop``: a ``<bos>``, then random tokens in which a trigger appears now and then;
  at a trigger the model must output the first real token (so attend far back),
  elsewhere the current token (which the residual stream already holds: attention
  should do nothing).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ..positional import sinusoidal_encoding
from ..seeding import generator
from .attention import Attention, RMSNorm
from .latent import LatentAttention
from .rope import RoPE

__all__ = [
    "TinyLM",
    "periodic_copy",
    "recall",
    "noop",
    "passkey",
    "train_lm",
    "accuracy",
    "with_rope_scaling",
    "EVAL_SEED_OFFSET",
]

EVAL_SEED_OFFSET = 10_000


class _Block(nn.Module):
    def __init__(self, attn: nn.Module, d: int) -> None:
        super().__init__()
        self.n1, self.attn, self.n2 = RMSNorm(d), attn, RMSNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.n1(x))  # (B, T, D)
        return x + self.mlp(self.n2(x))  # (B, T, D)


class TinyLM(nn.Module):
    """A pre-norm decoder: embedding, ``n_layers`` blocks, RMSNorm, unembedding.

    ``positional``: ``"rope"``, ``"sinusoidal"`` (added to the embeddings),
    ``"alibi"`` or ``"none"`` (NoPE: order only from the causal mask). ``kind``:
    ``"attention"`` (``attnlab.modern.Attention`` with ``**attn``) or ``"latent"``
    (``LatentAttention`` with ``**attn``; RoPE on its decoupled key).
    """

    def __init__(
        self,
        vocab: int,
        d_model: int = 32,
        n_layers: int = 2,
        n_heads: int = 4,
        *,
        positional: str = "rope",
        kind: str = "attention",
        mlp: bool = True,
        **attn,
    ) -> None:
        super().__init__()
        if positional not in ("rope", "sinusoidal", "alibi", "none"):
            raise ValueError(f"TinyLM: unknown positional {positional!r}")
        if kind not in ("attention", "latent"):
            raise ValueError(
                f"TinyLM: kind must be 'attention' or 'latent', got {kind!r}"
            )
        self.positional, self.d_model = positional, d_model
        self.embed = nn.Embedding(vocab, d_model)
        blocks = []
        for _ in range(n_layers):
            if kind == "latent":
                layer: nn.Module = LatentAttention(d_model, n_heads, **attn)
            else:
                layer = Attention(
                    d_model,
                    n_heads,
                    rope=RoPE() if positional == "rope" else None,
                    alibi=positional == "alibi",
                    **attn,
                )
            blocks.append(_Block(layer, d_model))
            if not mlp:
                blocks[-1].mlp = nn.Identity()  # type: ignore[assignment]
                blocks[-1].n2 = nn.Identity()  # type: ignore[assignment]
        self.blocks = nn.ModuleList(blocks)
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, T = ids.shape
        x = self.embed(ids)  # (B, T, D)
        if self.positional == "sinusoidal":
            x = x + sinusoidal_encoding(T, self.d_model, dtype=x.dtype, device=x.device)
        for block in self.blocks:
            x = block(x)  # (B, T, D)
        return self.head(self.norm(x))  # (B, T, V)

    def attention_layers(self) -> list[Any]:
        """Each block's attention layer (``Attention`` or ``LatentAttention``)."""
        return [b.attn for b in self.blocks]


def with_rope_scaling(model: TinyLM, scaling: dict | None) -> TinyLM:
    """A copy of a RoPE model whose layers use ``RoPE(scaling=scaling)``."""
    if model.positional != "rope":
        raise ValueError("with_rope_scaling needs a model with positional='rope'")
    out = copy.deepcopy(model)
    for layer in out.attention_layers():
        layer.rope = RoPE(layer.rope.base, layer.rope.layout, scaling)
    return out


def _gen(seed: int) -> torch.Generator:
    return generator(int(seed))  # ATTNLAB_SEED moves it (attnlab.seeding)


def periodic_copy(
    n: int, length: int, *, period: int = 8, vocab: int = 16, seed: int = 0
):
    """ids (n, length), targets (n, length) (next token), mask (n, length)."""
    g = _gen(seed)
    block = torch.randint(0, vocab, (n, period), generator=g)
    reps = -(-(length + 1) // period)
    seq = block.repeat(1, reps)[:, : length + 1]  # (n, length + 1)
    mask = torch.zeros(n, length, dtype=torch.bool)
    mask[:, period - 1 :] = True  # next token = the one `period` back
    return seq[:, :-1], seq[:, 1:], mask


def recall(
    n: int, *, n_pairs: int = 8, n_queries: int = 8, n_keys: int = 32, seed: int = 0
):
    """Multi-query associative recall; vocab = 2·n_keys (keys, then values)."""
    g = _gen(seed)
    keys = torch.rand(n, n_keys, generator=g).argsort(-1)[:, :n_pairs]  # distinct
    vals = torch.randint(0, n_keys, (n, n_pairs), generator=g) + n_keys
    pick = torch.randint(0, n_pairs, (n, n_queries), generator=g)
    qk, qv = keys.gather(1, pick), vals.gather(1, pick)
    pairs = torch.stack((keys, vals), -1).flatten(1)  # (n, 2·n_pairs)
    queries = torch.stack((qk, qv), -1).flatten(1)  # (n, 2·n_queries)
    seq = torch.cat((pairs, queries), 1)  # (n, L + 1)
    ids, targets = seq[:, :-1], seq[:, 1:]
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, 2 * n_pairs :: 2] = True  # at each query key: predict its value
    return ids, targets, mask


def passkey(n: int, length: int, *, vocab: int = 32, far: int = 0, seed: int = 0):
    """ids, targets, mask (n, length): ``length - 1`` random tokens (ids < ``vocab``)
    holding a marker (id ``vocab``) followed by the passkey (an id < ``vocab``), then a
    query (id ``vocab + 1``) whose target is the passkey; the mask is True at the query
    only. The marker sits more than ``far`` positions before the query (``far = 0``:
    anywhere). The noise is drawn from the passkeys' own ids, so only the marker tells
    the passkey apart."""
    hi = min(length - 2, length - 1 - far)  # marker positions 0 .. hi - 1
    if hi < 1:
        raise ValueError(
            f"passkey: no room for a marker more than far={far} positions before "
            f"the query in length {length}"
        )
    g = _gen(seed)
    ids = torch.randint(0, vocab, (n, length), generator=g)
    key = torch.randint(0, vocab, (n,), generator=g)
    at = torch.randint(0, hi, (n,), generator=g)  # the marker's position
    rows = torch.arange(n)
    ids[rows, at] = vocab
    ids[rows, at + 1] = key
    ids[:, -1] = vocab + 1
    targets = torch.zeros_like(ids)
    targets[:, -1] = key
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, -1] = True
    return ids, targets, mask


def noop(
    n: int, length: int = 32, *, vocab: int = 16, p_trigger: float = 0.15, seed: int = 0
):
    """``<bos>`` (id ``vocab``) then tokens; trigger = id 0. Returns ids, targets,
    mask and a boolean ``trigger`` (n, length)."""
    g = _gen(seed)
    body = torch.randint(1, vocab, (n, length - 1), generator=g)
    trig = torch.rand(n, length - 1, generator=g) < p_trigger
    trig[:, 0] = False  # position 1 holds the token to recall
    body = body.masked_fill(trig, 0)
    ids = torch.cat((torch.full((n, 1), vocab), body), 1)  # (n, length)
    targets = ids.clone()
    trigger = ids == 0
    targets[trigger] = ids[:, 1:2].expand_as(ids)[trigger]
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[:, 0] = False
    return ids, targets, mask, trigger


def train_lm(
    model: nn.Module,
    batch_fn,
    *,
    steps: int,
    lr: float,
    seed: int,
    clip: float | None = 1.0,
    callback=None,
) -> list[float]:
    """Adam on the masked next-token loss; ``batch_fn(seed)`` gives (ids, targets,
    mask, ...). Batch ``i`` uses seed ``seed·1_000_000 + i``. ``callback(step)``, if
    given, runs after each step (1-based; the model in eval mode, back to training
    after). Returns the losses."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for i in range(steps):
        ids, targets, mask = batch_fn(seed * 1_000_000 + i)[:3]
        logits = model(ids)  # (B, T, V)
        loss = F.cross_entropy(logits[mask], targets[mask])
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
        if callback is not None:
            model.eval()
            callback(i + 1)
            model.train()
    model.eval()
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, ids, targets, mask) -> float:
    """Share of masked positions whose argmax is the target."""
    pred = model(ids).argmax(-1)  # (B, T)
    return float((pred == targets)[mask].float().mean())
