"""Induction heads in a small attention-only Transformer (Elhage et al., 2021;
Olsson et al., 2022).

* :class:`AttentionOnly` — token + learned position embeddings, ``n_layers`` causal
  blocks ``x + MultiHeadAttention(LayerNorm(x))`` with no MLP, a final LayerNorm and
  an unembedding. With two layers it can learn induction; with one it cannot.
* :func:`repeated_tokens` — the task: ``[BOS] r_1 .. r_n r_1 .. r_n`` for random tokens
  ``r``. The first copy is unpredictable; the second copy is predictable only by
  looking back at what followed the same token before.
* :func:`copy_losses` — the loss on the first and on the second copy.
* :func:`head_scores` — per-head previous-token and induction scores, as the head
  detector of TransformerLens defines them: the share of a head's attention that
  falls on the pattern's query-key pairs.
* :func:`train_induction` — the training loop of chapter 12 and its sweep, with a
  history of losses and head scores.

Shapes: B sequences, L layers, H heads, T positions, D model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import validation as V
from .masking import head_pattern_mask as pattern_mask
from .multihead import MultiHeadAttention
from .seeding import generator, manual_seed

__all__ = [
    "InductionConfig",
    "AttentionOnly",
    "repeated_tokens",
    "split_of",
    "copy_masks",
    "copy_losses",
    "pattern_mask",
    "head_scores",
    "phase_change_step",
    "train_induction",
    "BOS",
]

BOS = 0  # token 0 opens every sequence; random tokens are drawn from 1 .. V-1


@dataclass
class InductionConfig:
    """Sizes of the attention-only model and of its task."""

    vocab_size: int = 32  # V, token 0 is [BOS]
    half: int = 12  # n, length of each copy: sequences have T = 1 + 2n tokens
    d_model: int = 64  # D
    n_heads: int = 4  # H, so Dh = 16
    n_layers: int = 2  # 2 can form induction heads, 1 cannot
    steps: int = 1200  # optimizer steps
    batch: int = 32  # sequences per step (fresh random ones each step)
    lr: float = 1e-3  # AdamW learning rate, constant
    eval_every: int = 50  # steps between two measurements of the history
    n_eval: int = 128  # held-out sequences, drawn from their own generator

    def __post_init__(self) -> None:
        fn = "InductionConfig"
        for name in ("vocab_size", "half", "d_model", "n_heads", "n_layers"):
            setattr(self, name, V.integer(getattr(self, name), name, fn, low=1))
        for name in ("steps", "batch", "eval_every", "n_eval"):
            setattr(self, name, V.integer(getattr(self, name), name, fn, low=1))
        self.lr = V.real(self.lr, "lr", fn, low=0.0, open_low=True)


class Block(nn.Module):
    """``x + attn(LayerNorm(x))``: one attention-only layer, causal, pre-LN."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        h = self.norm(x)
        out, w = self.attn(
            h, h, h, is_causal=True, need_weights=True, average_attn_weights=False
        )
        self.weights = w.detach()  # (B, H, T, T), kept for the head scores
        return x + out


class AttentionOnly(nn.Module):
    """A decoder-only Transformer with attention layers only (no MLP).

    ``forward(ids (B, T)) -> logits (B, T, V)``; after a forward pass,
    :meth:`attention` holds every layer's weights, (L, B, H, T, T).
    """

    def __init__(self, cfg: InductionConfig):
        super().__init__()
        self.cfg = cfg
        D = cfg.d_model
        self.tok = nn.Embedding(cfg.vocab_size, D)
        self.pos = nn.Embedding(2 * cfg.half + 1, D)
        self.blocks = nn.ModuleList(Block(D, cfg.n_heads) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(D)
        self.unembed = nn.Linear(D, cfg.vocab_size, bias=False)

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        """The residual stream ``(B, T, D)`` to logits ``(B, T, V)`` (the logit lens
        applies it after any layer)."""
        return self.unembed(self.norm(x))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        fn = "AttentionOnly.forward"
        V.tensor(ids, "ids (B, T)", fn, dim=2)
        if ids.dtype != torch.long:
            raise TypeError(f"{fn}: ids must be torch.long token ids, got {ids.dtype}")
        B, T = ids.shape
        if not 1 <= T <= self.pos.num_embeddings:
            raise ValueError(
                f"{fn}: ids has {T} positions; this model takes 1 to "
                f"{self.pos.num_embeddings}"
            )
        V.token_ids(ids, self.cfg.vocab_size, "ids", fn)
        x = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))  # (B, T, D)
        for block in self.blocks:
            x = block(x)  # (B, T, D)
        return self.readout(x)  # (B, T, V)

    def attention(self) -> torch.Tensor:
        """(L, B, H, T, T): the weights of the last forward pass."""
        if not hasattr(self.blocks[0], "weights"):
            raise RuntimeError("run the model once before asking for its attention")
        return torch.stack([b.weights for b in self.blocks])  # type: ignore[misc]


def repeated_tokens(
    n_seqs: int,
    half: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
    min_half: int | None = None,
    split: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of random tokens repeated twice, each with its own copy length.

    Returns ``ids (n_seqs, 1 + 2 half)`` long and ``n (n_seqs,)``: row b is ``[BOS]``,
    ``n_b`` random tokens (from 1 .. V-1), the same ``n_b`` tokens again, then fresh
    random filler up to the common length. ``n_b`` is drawn from ``min_half .. half``
    (default ``half // 2``): since the distance between the two copies changes from row
    to row, a head cannot find the earlier copy by position alone.

    ``split="train"`` or ``"test"`` keeps only sequences of that split (drawing again
    until there are enough): a sequence is a test sequence when a fixed hash of its
    first copy, :func:`split_of`, is 0 (one in seven), so no test sequence can appear
    in training, by construction.
    """
    fn = "repeated_tokens"
    n_seqs = V.integer(n_seqs, "n_seqs", fn)
    half = V.integer(half, "half", fn)
    vocab_size = V.integer(vocab_size, "vocab_size", fn)
    min_half = V.integer(min_half, "min_half", fn, optional=True)
    lo = half // 2 if min_half is None else min_half
    if n_seqs < 1 or half < 2 or vocab_size < 3 or not 2 <= lo <= half:
        raise ValueError(
            f"need n_seqs >= 1, 2 <= min_half <= half, vocab_size >= 3; got n_seqs="
            f"{n_seqs}, half={half}, min_half={lo}, vocab_size={vocab_size}"
        )
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be None, 'train' or 'test', got {split!r}")
    if split is not None:
        ids, n = repeated_tokens(2 * n_seqs + 64, half, vocab_size, generator, lo)
        keep = [i for i, v in enumerate(split_of(ids, n)) if v == split]
        while len(keep) < n_seqs:  # (a shortfall is rare; draw another batch)
            more = repeated_tokens(2 * n_seqs + 64, half, vocab_size, generator, lo)
            ids, n = torch.cat([ids, more[0]]), torch.cat([n, more[1]])
            keep = [i for i, v in enumerate(split_of(ids, n)) if v == split]
        return ids[keep[:n_seqs]], n[keep[:n_seqs]]  # (n_seqs, T), (n_seqs,)
    T = 1 + 2 * half
    n = torch.randint(lo, half + 1, (n_seqs,), generator=generator)  # (B,)
    ids = torch.randint(1, vocab_size, (n_seqs, T), generator=generator)  # (B, T)
    ids[:, 0] = BOS
    pos = torch.arange(T)[None]  # (1, T)
    second = (pos > n[:, None]) & (pos <= 2 * n[:, None])  # (B, T): the second copy
    src = (pos - n[:, None]).clamp(min=0)  # (B, T): the same token in the first copy
    ids = torch.where(second, ids.gather(1, src), ids)
    return ids, n


def split_of(ids: torch.Tensor, n: torch.Tensor) -> list[str]:
    """``"test"`` or ``"train"`` per row: a fixed hash of the first copy (its tokens
    and length), ``sum_t (t + 1) * r_t * 31 + n`` modulo 7, is 0 for test sequences."""
    V.tensor(ids, "ids", "split_of", dim=2)
    V.tensor(n, "n", "split_of", dim=1)
    if ids.shape[1] < 1 or n.shape != ids.shape[:1]:
        raise ValueError(
            f"split_of: ids must be (B, T >= 1) and n (B,), got ids "
            f"{tuple(ids.shape)} and n {tuple(n.shape)}"
        )
    T = ids.shape[1]
    pos = torch.arange(1, T)[None]  # (1, T - 1)
    first = torch.where(pos <= n[:, None], ids[:, 1:], 0)  # (B, T - 1): the first copy
    h = ((first * pos).sum(1) * 31 + n) % 7  # (B,)
    return ["test" if int(v) == 0 else "train" for v in h]


def copy_masks(n: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T - 1) bool each: which next-token *targets* ``ids[:, 1:]`` belong to the
    first copy, and to the second copy after its first token (which is new, hence
    unpredictable: the second copy is scored on its tokens 2 .. n)."""
    V.tensor(n, "n", "copy_masks", dim=1)
    T = V.integer(T, "T", "copy_masks", low=1)
    t = torch.arange(1, T, device=n.device)[None]  # (1, T - 1): target positions
    first = t <= n[:, None]
    second = (t >= n[:, None] + 2) & (t <= 2 * n[:, None])
    return first, second


def copy_losses(
    logits: torch.Tensor, ids: torch.Tensor, n: torch.Tensor
) -> tuple[float, float]:
    """Mean next-token cross-entropy on the first copy and on the second (from its
    second token on; see :func:`copy_masks`)."""
    fn = "copy_losses"
    V.floating(logits, "logits (B, T, V)", fn, min_dim=3)
    V.tensor(ids, "ids", fn, dim=2)
    V.tensor(n, "n", fn, dim=1)
    if logits.shape[-1] == 0:
        raise ValueError(f"{fn}: logits has no vocabulary: shape {tuple(logits.shape)}")
    V.token_ids(ids, logits.shape[-1], "ids", fn)
    if n.is_floating_point() or n.dtype == torch.bool:
        raise TypeError(f"{fn}: n must hold integer copy lengths, got {n.dtype}")
    if logits.dim() != 3 or logits.shape[:2] != ids.shape:
        raise ValueError(
            f"logits must be (B, T, V) for ids (B, T) = {tuple(ids.shape)}, got "
            f"{tuple(logits.shape)}"
        )
    B, T = ids.shape
    if n.shape != (B,) or int(n.min()) < 2 or int(n.max()) > (T - 1) // 2:
        raise ValueError(
            f"n must hold B = {B} copy lengths in 2 .. {(T - 1) // 2}, got "
            f"{tuple(n.shape)} with values {n.tolist()[:8]}"
        )
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    first, second = copy_masks(n, T)  # (B, T - 1) each
    return float(ce[first].mean()), float(ce[second].mean())


def head_scores(weights: torch.Tensor, ids: torch.Tensor, kind: str) -> torch.Tensor:
    """Share of each head's attention on the ``kind`` pattern, mean over sequences.

    ``weights`` (L, B, H, T, T) or (B, H, T, T); returns (L, H) or (H,). For one
    sequence and one head, score = sum(weights * pattern) / sum(weights), the
    definition of TransformerLens's head detector (its "mul" measure). Rows with no
    pattern key (the first copy, for induction) count in the denominator, so a perfect
    induction head scores the share of query rows that have a pattern key (chapter 12
    builds one and measures it), not 1.
    """
    V.tensor(ids, "ids", "head_scores", dim=2)
    if V.floating(weights, "weights", "head_scores").dim() not in (4, 5):
        raise ValueError(
            "weights must be (L, B, H, T, T) or (B, H, T, T), got "
            f"{getattr(weights, 'shape', type(weights))}"
        )
    B, T = ids.shape
    if weights.shape[-4] != B or weights.shape[-2:] != (T, T):
        raise ValueError(
            f"weights {tuple(weights.shape)} do not match ids (B, T) = {(B, T)}"
        )
    m = pattern_mask(ids, kind)[:, None].to(weights.dtype)  # (B, 1, T, T)
    hit = (weights * m).sum((-1, -2))  # (..., B, H)
    return (hit / weights.sum((-1, -2))).mean(-2)  # (..., H)


def phase_change_step(steps, loss_first, loss_second) -> int | None:
    """The first step at which the second copy's loss falls below half the first
    copy's (the model now predicts repeated tokens from context); ``None`` if never."""
    for s, a, b in zip(steps, loss_first, loss_second):
        if b < 0.5 * a:
            return int(s)
    return None


def _measure(model: AttentionOnly, ids: torch.Tensor, n: torch.Tensor) -> dict:
    with torch.no_grad():
        logits = model(ids)
        w = model.attention()  # (L, B, H, T, T)
    first, second = copy_losses(logits, ids, n)
    return {
        "loss_first": first,
        "loss_second": second,
        "previous": head_scores(w, ids, "previous").tolist(),  # (L, H)
        "induction": head_scores(w, ids, "induction").tolist(),  # (L, H)
    }


def train_induction(cfg: InductionConfig, seed: int = 0):
    """Train an :class:`AttentionOnly` model on :func:`repeated_tokens`.

    Returns ``(model, history)``; ``history`` holds, every ``cfg.eval_every`` steps
    (and at step 0), the held-out losses on each copy and the (L, H) previous-token
    and induction scores. Training batches come from generator ``seed`` and the
    training split, the held-out sequences from generator ``10_000 + seed`` and the
    test split (:func:`repeated_tokens`).
    """
    manual_seed(seed)  # ATTNLAB_SEED moves every seed here (attnlab.seeding)
    model = AttentionOnly(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    g = generator(seed)
    held = repeated_tokens(
        cfg.n_eval,
        cfg.half,
        cfg.vocab_size,
        generator(10_000 + seed),
    )  # (ids, n)
    keys = ("loss_first", "loss_second", "previous", "induction")
    hist: dict = {"step": []} | {k: [] for k in keys}
    for step in range(cfg.steps + 1):
        if step % cfg.eval_every == 0:
            model.eval()
            m = _measure(model, *held)
            hist["step"].append(step)
            for k in keys:
                hist[k].append(m[k])
            model.train()
        if step == cfg.steps:
            break
        ids, _ = repeated_tokens(cfg.batch, cfg.half, cfg.vocab_size, g, split="train")
        logits = model(ids)  # (B, T, V)
        loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), hist
