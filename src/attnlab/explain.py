"""The tools of the "is attention explanation?" debate, each a short function.

Where information flows in a Transformer (Abnar & Zuidema, 2020):

* :func:`attention_rollout`, :func:`attention_flow` — heads averaged, the residual
  added as ``A = 0.5 W + 0.5 I`` (rows renormalised), then the product of the layers
  (rollout) or a max-flow through the layered graph (flow).

Shapes: B examples, L layers, H heads, T tokens. Masks are True on real tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "residual_attention",
    "attention_rollout",
    "attention_flow",
]


# ------------------------------------------------------------------ rollout and flow
def residual_attention(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """A&Z's per-layer matrices: ``A_l = norm_rows(0.5 mean_heads(W_l) + 0.5 I)``.

    ``attentions``: L tensors (B, H, T, T) (or (H, T, T)). Returns (L, B, T, T) (or
    (L, T, T)). The identity stands for the residual connection, which carries
    each token's own vector past the attention (Abnar & Zuidema, 2020, §3). An
    all-zero row (a padded query) becomes the identity row.
    """
    if len(attentions) == 0:
        raise ValueError("need the attention of at least one layer")
    shapes = {tuple(a.shape) for a in attentions}
    if len(shapes) != 1 or attentions[0].dim() not in (3, 4):
        raise ValueError(
            "attentions must be L tensors of one shape, (B, H, T, T) or (H, T, T); "
            f"got shapes {[tuple(a.shape) for a in attentions]}"
        )
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


def attention_flow(attentions: Sequence[torch.Tensor], mask: torch.Tensor = None,
                   rows: Sequence[int] | None = None, scale: int = 10**6):  # fmt: skip
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

    A = residual_attention(attentions)  # (L, B, T, T)
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
