"""A residual-aware rollout: each layer's token-to-token map measured, not assumed.

Abnar & Zuidema's rollout models the residual connection as half of every layer,
``A = 0.5 W + 0.5 I``. In a real layer the residual's share is whatever the vectors'
lengths make it. Decompose the self-attention block's output at position i (before its
layer norm) into what each input token j adds:

    c_ij = sum_h alpha^h_ij f_h(x_j) + delta_ij x_i,    f_h(x) = x W_V^h W_O^h,

the attention's share (Kobayashi et al., 2020) plus the residual, which only token i
itself carries (Kobayashi et al., 2021 decompose the same sum). The layer's map is
``N_ij = ||c_ij||`` with each row normalised, and the rollout is the product of the
layers' maps with no extra identity: the residual is already inside each map, at its
measured size. GlobEnc (Modarressi et al., 2022) and ALTI (Ferrando et al., 2022) are
rollouts of this kind (GlobEnc also decomposes the layer norms, ALTI measures a
contribution by a distance instead of a norm); value zeroing (Mohebbi et al., 2023)
measures each map by an intervention instead. Biases are left out, and so are the layer
norms (their per-row scale cancels when the rows are normalised) and the feed-forward
block, which does not mix tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..pretrained.model import MiniLM

__all__ = ["residual_norm_attention", "residual_rollout", "residual_norm_rollout"]


def _weight(w, name: str) -> torch.Tensor:
    w = getattr(w, "weight", w)  # an nn.Linear or its weight
    if not isinstance(w, torch.Tensor) or w.dim() != 2:
        raise TypeError(f"{name} must be an nn.Linear or a 2-D weight, got {type(w)}")
    return w


def residual_norm_attention(x: torch.Tensor, weights: torch.Tensor, w_v, w_o):
    """``||sum_h alpha^h_ij f_h(x_j) + delta_ij x_i||``: what token j adds to position i
    through one self-attention block, its residual connection included.

    ``x`` (B, T, D): the block's input; ``weights`` (B, H, T, T): its attention weights;
    ``w_v``, ``w_o``: the value and output projections (``nn.Linear`` s or their
    weights, PyTorch layout ``y = x @ W.T``; the output projection must map back to D,
    so that the residual can be added). Returns (B, T, T), not normalised.
    """
    fn = "residual_norm_attention"
    if not isinstance(x, torch.Tensor) or not isinstance(weights, torch.Tensor):
        raise TypeError(f"{fn}: x and weights must be tensors")
    if x.dim() != 3 or weights.dim() != 4:
        raise ValueError(
            f"{fn}: need x (B, T, D) and weights (B, H, T, T), got {tuple(x.shape)} "
            f"and {tuple(weights.shape)}"
        )
    B, H, T, S = weights.shape
    Wv, Wo = _weight(w_v, "w_v").to(x.dtype), _weight(w_o, "w_o").to(x.dtype)
    D = x.shape[-1]
    if (
        T != S
        or x.shape[:2] != (B, T)
        or Wv.shape[1] != D
        or Wo.shape != (D, Wv.shape[0])
    ):
        raise ValueError(
            f"{fn}: shapes do not fit a self-attention block with its residual: x "
            f"{tuple(x.shape)}, weights {tuple(weights.shape)}, w_v {tuple(Wv.shape)}, "
            f"w_o {tuple(Wo.shape)} (need T == S and w_o mapping back to D = {D})"
        )
    if Wv.shape[0] % H:
        raise ValueError(
            f"{fn}: {Wv.shape[0]} value columns do not split into {H} heads"
        )
    Dh = Wv.shape[0] // H
    v = (x @ Wv.T).view(B, T, H, Dh)  # (B, T, D) @ (D, H*Dh) -> (B, T, H, Dh)
    f = torch.einsum("bshd,ehd->bhse", v, Wo.view(D, H, Dh))  # (B, H, S, D): f_h(x_j)
    c = torch.einsum("bhts,bhse->btse", weights.to(f.dtype), f)  # (B, T, S, D)
    idx = torch.arange(T, device=x.device)
    c[:, idx, idx] = c[:, idx, idx] + x  # (B, T, D): the residual, on the diagonal only
    return c.norm(dim=-1)  # (B, T, S)


def residual_rollout(maps: Sequence[torch.Tensor]) -> torch.Tensor:
    """The product ``N_L @ ... @ N_1`` of per-layer maps (B, T, T) (first layer first),
    each row normalised to sum to 1 and **no identity added** (each map holds its own
    residual, :func:`residual_norm_attention`). Returns (B, T, T), rows on the simplex."""
    if (
        isinstance(maps, torch.Tensor)
        or not isinstance(maps, (list, tuple))
        or not maps
    ):
        raise TypeError("maps must be a non-empty list or tuple of (B, T, T) tensors")
    shapes = {tuple(m.shape) for m in maps}
    if len(shapes) != 1 or maps[0].dim() != 3 or maps[0].shape[-1] != maps[0].shape[-2]:
        raise ValueError(
            f"maps must be L square (B, T, T) tensors, got {sorted(shapes)}"
        )
    if any(bool((m < 0).any()) or not bool(torch.isfinite(m).all()) for m in maps):
        raise ValueError("maps must be finite and non-negative (norms)")
    R = None
    for m in maps:
        m = m / m.sum(-1, keepdim=True).clamp_min(torch.finfo(m.dtype).tiny)
        R = m if R is None else m @ R  # (B, T, T) @ (B, T, T): one more layer on top
    assert R is not None
    return R


@torch.no_grad()
def residual_norm_rollout(model: MiniLM, text: str) -> torch.Tensor:
    """The residual-aware rollout of MiniLM on ``text``: (n,) over the word tokens, the
    mean of the rows (the output row of a mean-pooled model), float64. The attention's
    share of each layer is the one the vectors give it, not the half that
    :func:`attnlab.explain.norm_rollout` assumes."""
    ids, mask = model.encode([text])
    hidden, att = model(ids, mask)  # 7 x (1, T, D), 6 x (1, H, T, T)
    maps = []
    for layer, x, a in zip(model.layers, hidden[:-1], att):
        sa: Any = layer.self_attn
        maps.append(residual_norm_attention(x, a, sa.w_v, sa.w_o))  # (1, T, T)
    return residual_rollout(maps)[0].mean(0)[1:-1].double()  # (n,)
