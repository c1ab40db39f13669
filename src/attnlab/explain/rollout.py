"""Where attention goes through the layers: rollout and flow (Abnar & Zuidema, 2020), and
norm-weighted attention (Kobayashi et al., 2020)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .. import validation as V


# ------------------------------------------------------------------ rollout and flow
def residual_attention(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """A&Z's per-layer matrices: ``A_l = norm_rows(0.5 mean_heads(W_l) + 0.5 I)``.

    ``attentions``: L tensors (B, H, T, T) (or (H, T, T)). Returns (L, B, T, T) (or
    (L, T, T)). The identity stands for the residual connection, which carries
    each token's own vector past the attention (Abnar & Zuidema, 2020, §3). An
    all-zero row (a padded query) becomes the identity row.
    """
    fn = "residual_attention"
    if isinstance(attentions, torch.Tensor) or not isinstance(
        attentions, (list, tuple)
    ):
        raise TypeError(
            f"{fn}: attentions must be a list or tuple of per-layer weight tensors, "
            f"got {type(attentions).__name__}"
        )
    if len(attentions) == 0:
        raise ValueError("need the attention of at least one layer")
    for i, a in enumerate(attentions):
        V.tensor(a, f"attentions[{i}]", fn)
    shapes = {tuple(a.shape) for a in attentions}
    if len(shapes) != 1 or attentions[0].dim() not in (3, 4):
        raise ValueError(
            "attentions must be L tensors of one shape, (B, H, T, T) or (H, T, T); "
            f"got shapes {[tuple(a.shape) for a in attentions]}"
        )
    for i, a in enumerate(attentions):
        V.distribution(a, f"attentions[{i}]", fn)  # weights, not scores
    W = torch.stack([a.float().mean(-3) for a in attentions])  # (L, [B,] T, T)
    T = W.shape[-1]
    if W.shape[-2] != T:
        raise ValueError(f"self-attention maps must be square, got {tuple(W.shape)}")
    A = 0.5 * W + 0.5 * torch.eye(T, device=W.device)  # (L, [B,] T, T)
    return A / A.sum(-1, keepdim=True)


def attention_rollout(
    attentions: Sequence[torch.Tensor], mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, 2020): ``A_L @ ... @ A_2 @ A_1``.

    ``attentions``: L tensors (B, H, T, T) from the first layer up. Returns (B, T, T)
    (or (T, T)): row i is how much of top-layer position i comes from each input token,
    each row on the simplex. Rollout multiplies the weights along every path.
    ``mask`` (B, T) (or (T,)), True on real tokens: the rows of padded positions are
    set to zero (without it, :func:`residual_attention` makes them identity rows); the
    rows of real tokens never reach padding either way.
    """
    A = residual_attention(attentions)  # (L, B, T, T)
    R = A[0]
    for layer in A[1:]:
        R = layer @ R  # (B, T, T) @ (B, T, T): one more layer on top
    if mask is not None:
        if mask.dtype != torch.bool or mask.shape != R.shape[:-1]:
            raise ValueError(
                f"mask must be bool of shape {tuple(R.shape[:-1])}, got {mask.dtype} "
                f"{tuple(mask.shape)}"
            )
        R = R * mask[..., :, None].to(R.device)  # (B, T, T): padded rows -> 0
    return R


def _flow_graph(A: np.ndarray, scale: int):
    """Layered graph of one example: node ``l*T + i`` is token i after layer l."""
    from scipy.sparse import csr_matrix

    L, T, _ = A.shape
    cap = np.rint(A * scale).astype(np.int32)  # scipy's max-flow wants integers
    l, i, j = np.nonzero(cap)
    rows = (l + 1) * T + i  # from token i at layer l+1 ...
    cols = l * T + j  # ... down to token j at layer l, capacity A_l[i, j]
    return csr_matrix((cap[l, i, j], (rows, cols)), shape=((L + 1) * T,) * 2)


def attention_flow(
    attentions: Sequence[torch.Tensor],
    mask: torch.Tensor | None = None,
    rows: Sequence[int] | None = None,
    scale: int = 10**6,
):
    """Attention flow (Abnar & Zuidema, 2020): max-flow from the top to each input.

    The graph has a node per (layer, token); token i of layer l + 1 has an edge to
    token j of layer l with capacity ``A_l[i, j]`` (:func:`residual_attention`). The
    flow from top-layer position i to input token j is the max-flow between the two
    nodes: a path carries at most its weakest edge, where rollout multiplies. Each
    row is normalised to sum to 1, as in A&Z's code.

    ``attentions``: L tensors (B, H, T, T); ``mask`` (B, T) True on real tokens
    (default all); ``rows``: the top-layer positions to compute (default all; A&Z
    use only the CLS token, ``rows=[0]``). Returns (B, len(rows), T) float32, zero on
    padding. Capacities are rounded to multiples of ``1 / scale``, because
    :func:`scipy.sparse.csgraph.maximum_flow` only takes integers; the result agrees
    with an exact float max-flow to about ``L / scale``.
    """
    from scipy.sparse.csgraph import maximum_flow

    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)):
        raise TypeError(f"scale must be an int, got {type(scale).__name__}")
    A = residual_attention(attentions)  # (L, B, T, T)
    T_all = A.shape[-1]
    if not 1 <= scale <= np.iinfo(np.int32).max // (T_all + 1):
        raise ValueError(
            f"scale must be in 1..{np.iinfo(np.int32).max // (T_all + 1)} (capacities "
            f"are int32 and a node sums up to T + 1 = {T_all + 1} of them), got {scale}"
        )
    if mask is not None and (mask.dtype != torch.bool or mask.shape != A.shape[1:-1]):
        raise ValueError(
            f"mask must be bool of shape {tuple(A.shape[1:-1])}, got {mask.dtype} "
            f"{tuple(mask.shape)}"
        )
    if A.dim() == 3:
        A, mask = A[:, None], None if mask is None else mask[None]
    L, B, T, _ = A.shape
    mask = torch.ones(B, T, dtype=torch.bool) if mask is None else mask.cpu()
    rows = list(range(T)) if rows is None else [int(i) for i in rows]
    if any(not 0 <= i < T for i in rows):
        raise ValueError(f"rows must be positions in 0..{T - 1}, got {rows}")
    out = np.zeros((B, len(rows), T), dtype=np.float64)
    for b in range(B):
        n = int(mask[b].sum())
        real = mask[b].nonzero().squeeze(1).numpy()
        Ab = A[:, b].detach().cpu().double().numpy()[:, real][:, :, real]  # (L, n, n)
        G = _flow_graph(Ab, scale)
        pos = {int(p): k for k, p in enumerate(real)}
        for r, i in enumerate(rows):
            if i not in pos:
                continue  # a padded row stays zero
            src = L * n + pos[i]
            f = [maximum_flow(G, src, k).flow_value for k in range(n)]
            out[b, r, real] = np.asarray(f) / max(sum(f), 1)
    return torch.from_numpy(out).float()


# ------------------------------------------------------------ norm-weighted attention
def _weight(w, name: str) -> torch.Tensor:
    w = getattr(w, "weight", w)  # an nn.Linear or its weight
    if not isinstance(w, torch.Tensor) or w.dim() != 2:
        raise TypeError(f"{name} must be an nn.Linear or a 2-D weight, got {type(w)}")
    return w


def value_norm_attention(x: torch.Tensor, weights: torch.Tensor, w_v, w_o):
    """Norm-weighted attention (Kobayashi et al., 2020): ``||alpha_ij f(x_j)||``.

    A head adds ``sum_j alpha_ij f_h(x_j)`` to query i, with ``f_h(x_j) = x_j W_V^h
    W_O^h``: the value projection of head h and the head's slice of the output
    projection (rows ``h Dh .. (h+1) Dh`` of ``W_O``), biases left out. How much key j
    *adds* to query i is the length of that vector, not the weight alone.

    ``x`` (B, S, D): the layer's input (what the values are made of); ``weights`` (B,
    H, T, S); ``w_v``, ``w_o``: the value and output projections, ``nn.Linear`` s (or
    their (D, H*Dh) and (D, H*Dh) weights, PyTorch layout ``y = x @ W.T``). Returns
    ``(per_head (B, H, T, S), layer (B, T, S))``: ``alpha^h_ij ||f_h(x_j)||`` per
    head, and the layer-level map ``|| sum_h alpha^h_ij f_h(x_j) ||``, the norm of the
    sum over heads (heads can cancel, so it is at most the sum of the head maps).
    """
    Wv, Wo = _weight(w_v, "w_v").to(x.dtype), _weight(w_o, "w_o").to(x.dtype)
    if x.dim() != 3 or weights.dim() != 4:
        raise ValueError(
            f"need x (B, S, D) and weights (B, H, T, S), got {tuple(x.shape)} and "
            f"{tuple(weights.shape)}"
        )
    B, H, T, S = weights.shape
    D = x.shape[-1]
    if x.shape[:2] != (B, S) or Wv.shape[1] != D or Wo.shape[1] != Wv.shape[0]:
        raise ValueError(
            f"shapes do not fit: x {tuple(x.shape)}, weights {tuple(weights.shape)}, "
            f"w_v {tuple(Wv.shape)}, w_o {tuple(Wo.shape)}"
        )
    if Wv.shape[0] % H:
        raise ValueError(f"{Wv.shape[0]} value columns do not split into {H} heads")
    Dh = Wv.shape[0] // H
    v = (x @ Wv.T).view(B, S, H, Dh)  # (B, S, D) @ (D, H*Dh) -> (B, S, H, Dh)
    Wo_h = Wo.view(Wo.shape[0], H, Dh)  # (D_out, H, Dh): head h's columns of W_O
    f = torch.einsum("bshd,ehd->bhse", v, Wo_h)  # (B, H, S, D_out): f_h(x_j)
    per_head = weights * f.norm(dim=-1)[:, :, None, :]  # (B, H, T, S)
    summed = torch.einsum("bhts,bhse->btse", weights.to(f.dtype), f)  # (B, T, S, D_out)
    return per_head, summed.norm(dim=-1)
