"""The tools of the "is attention explanation?" debate, each a short function.

Where information flows in a Transformer (Abnar & Zuidema, 2020):

* :func:`attention_rollout`, :func:`attention_flow` — heads averaged, the residual
  added as ``A = 0.5 W + 0.5 I`` (rows renormalised), then the product of the layers
  (rollout) or a max-flow through the layered graph (flow).
* :func:`value_norm_attention` — ``||alpha_ij f(x_j)||``: a weight times the length of
  what it moves (Kobayashi et al., 2020).

How much each input token matters, to compare attention against (Jain & Wallace, 2019):

* :func:`gradient_importance` (gradient × input), :func:`leave_one_out` (delete or
  blank out a token); :func:`kendall_tau` (tau-b) and :func:`spearman` compare two
  rankings, :func:`rationale_recall` compares one with the known rationale.

Tests of attention as an explanation. A *decoder* ``decode(h, weights) -> logit (B,)``
is the part of a model after its attention, with the encoded tokens ``h`` held fixed
(:meth:`attnlab.classifiers.AttentionClassifier.decode`):

* Jain & Wallace (2019): :func:`permutation_test`, :func:`adversarial_attention`
  (max :func:`jsd` to the original weights with the output changed by at most eps);
* Wiegreffe & Pinter (2019): the uniform baseline
  (``AttentionClassifier(attention="uniform")``), :func:`wp_adversary` and
  :func:`wp_adversary_loss` (a model
  *trained* to predict like the base model with different attention),
  :func:`diagnostic_mlp` (frozen weights in a model without context);
* Serrano & Smith (2019): :func:`erasure_test` (erase the top items until the
  decision flips), :func:`weight_gradient` (their gradient ranking);
* Pruthi et al. (2020): :func:`deception_penalty`, :func:`deceptive_loss` (train a
  model to keep its attention off tokens it still uses).

Shapes: B examples, L layers, H heads, T tokens, E embedding width. Masks are True on
real tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "residual_attention",
    "attention_rollout",
    "attention_flow",
    "value_norm_attention",
    "gradient_importance",
    "leave_one_out",
    "kendall_tau",
    "spearman",
    "rationale_recall",
    "jsd",
    "permutation_test",
    "adversarial_attention",
    "wp_adversary",
    "wp_adversary_loss",
    "diagnostic_mlp",
    "weight_gradient",
    "erasure_test",
    "deception_penalty",
    "deceptive_loss",
    "mean_std",
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


# -------------------------------------------------------------- importance measures
def _check_scores(name: str, x: torch.Tensor, mask: torch.Tensor | None) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise TypeError(f"{name} must be a tensor (..., T), got {type(x).__name__}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(
                f"mask must be a boolean tensor, got {getattr(mask, 'dtype', mask)}"
            )
        if mask.shape != x.shape:
            raise ValueError(
                f"mask {tuple(mask.shape)} must have the shape of {name} {tuple(x.shape)}"
            )


def gradient_importance(f: Callable, embeddings: torch.Tensor, mask: torch.Tensor,
                        times_input: bool = True) -> torch.Tensor:  # fmt: skip
    """Gradient × input (Jain & Wallace, 2019, §4.1): ``|sum_e (df/dx_t)_e (x_t)_e|``.

    ``f(embeddings) -> (B,)`` is the output to explain (J&W: the predicted
    probability); ``embeddings`` (B, T, E), ``mask`` (B, T). With
    ``times_input=False`` it is ``|sum_e (df/dx_t)_e|``, the "input gradient" of
    Abnar & Zuidema's (2020) code. Returns (B, T), zero on padding, each row divided
    by its sum (a ranking is all the correlations use).
    """
    if embeddings.dim() != 3 or mask.shape != embeddings.shape[:2]:
        raise ValueError(
            f"need embeddings (B, T, E) and mask (B, T), got {tuple(embeddings.shape)} "
            f"and {tuple(mask.shape)}"
        )
    e = embeddings.detach().requires_grad_(True)
    y = f(e)
    if y.shape != e.shape[:1]:
        raise ValueError(
            f"f must return one value per example (B,), got {tuple(y.shape)}"
        )
    (g,) = torch.autograd.grad(y.sum(), e)  # (B, T, E): examples are independent
    s = ((g * e) if times_input else g).sum(-1).abs() * mask  # (B, T)
    return (s / s.sum(1, keepdim=True).clamp_min(1e-12)).detach()


@torch.no_grad()
def leave_one_out(f: Callable, ids: torch.Tensor, mask: torch.Tensor,
                  replace_with: int | None = None) -> torch.Tensor:  # fmt: skip
    """Leave-one-out importance ``|f(x) - f(x without token t)|`` (J&W, §4.1), (B, T).

    ``f(ids, mask) -> (B,)`` (J&W: the predicted probability); ``ids``, ``mask``
    (B, T) with the padding at the end. By default token t is *deleted* and the rest
    closes up, as in J&W's code; with ``replace_with`` (a token id) it is replaced
    instead (A&Z's "blank-out" uses ``<unk>``). Padding scores 0, and so does the
    only token of a one-token sequence (nothing would be left).
    """
    if ids.dim() != 2 or mask.shape != ids.shape or mask.dtype != torch.bool:
        raise ValueError(
            f"need ids (B, T) and a boolean mask of that shape, got {tuple(ids.shape)} "
            f"and {tuple(mask.shape)} {mask.dtype}"
        )
    B, T = ids.shape
    base = f(ids, mask)  # (B,)
    out = torch.zeros(B, T, dtype=base.dtype)
    for t in range(T):
        ok = mask[:, t]  # (B,) the rows where token t is real
        if replace_with is None:
            ok = ok & (mask.sum(1) > 1)
            keep = torch.arange(T) != t  # drop column t, pad one column at the end
            x = F.pad(ids[:, keep], (0, 1), value=0)  # (B, T)
            m = F.pad(mask[:, keep], (0, 1), value=False)  # (B, T)
            x, m = torch.where(ok[:, None], x, ids), torch.where(ok[:, None], m, mask)
        else:
            x, m = ids.clone(), mask
            x[:, t] = torch.where(ok, replace_with, ids[:, t])
        out[:, t] = torch.where(ok, (f(x, m) - base).abs(), 0.0)
    return out


def _rankings(a, b, mask):
    """``a``, ``b`` as float64 tensors of one shape (..., T), checked against ``mask``."""
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64, device=a.device)
    if a.shape != b.shape or a.dim() == 0:
        raise ValueError(
            f"a and b must have one shape (..., T), got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    _check_scores("a", a, mask)
    return a, b


def _nan_rows(a, b, mask) -> torch.Tensor:
    """(...) True where a used position of ``a`` or ``b`` is NaN (scipy then gives NaN)."""
    bad = a.isnan() | b.isnan()  # (..., T)
    if mask is not None:
        bad = bad & mask
    return bad.any(-1)


def _no_nan(x: torch.Tensor) -> torch.Tensor:
    return x.nan_to_num(0.0)  # NaN rows are set to NaN at the end; padding is ignored


def kendall_tau(a, b, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Kendall's tau-b between the last dimensions of ``a`` and ``b`` (Kendall, 1945).

    ``tau_b = sum_{i<j} sgn(a_i - a_j) sgn(b_i - b_j) / sqrt(n_a n_b)``, with ``n_a``
    (``n_b``) the pairs not tied in ``a`` (``b``): 1 when both rank the tokens alike,
    -1 when reversed, ties handled as :func:`scipy.stats.kendalltau` does. J&W (2019,
    Table 2) report it per example between attention and gradient or LOO importance.
    ``a``, ``b``: (..., T); ``mask`` (..., T) keeps only real tokens. Returns (...)
    float64, NaN where a ranking is constant or a used position is NaN (as scipy's
    default ``nan_policy='propagate'``).
    """
    a, b = _rankings(a, b, mask)
    nan = _nan_rows(a, b, mask)
    a, b = _no_nan(a), _no_nan(b)
    sa = torch.sign(a[..., :, None] - a[..., None, :])  # (..., T, T)
    sb = torch.sign(b[..., :, None] - b[..., None, :])
    if mask is not None:
        pair = mask[..., :, None] & mask[..., None, :]  # (..., T, T) both real
        sa, sb = sa * pair, sb * pair
    num = (sa * sb).sum((-1, -2))  # every pair counted twice, as in the norms
    den = torch.sqrt((sa**2).sum((-1, -2)) * (sb**2).sum((-1, -2)))
    tau = torch.where(den > 0, num / den.clamp_min(1e-300), torch.nan)
    return tau.masked_fill(nan, torch.nan)


def _ranks(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average ranks (1 = smallest) among the real positions, ties sharing the mean."""
    less = (x[..., None, :] < x[..., :, None]) & mask[..., None, :]  # (..., T, T)
    same = (x[..., None, :] == x[..., :, None]) & mask[..., None, :]
    return less.sum(-1) + (same.sum(-1) + 1) / 2  # (..., T)


def spearman(a, b, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Spearman's rank correlation along the last dimension (A&Z 2020, Tables 1-2).

    The Pearson correlation of the average ranks (ties share their mean rank, as
    :func:`scipy.stats.spearmanr`). ``a``, ``b`` (..., T), ``mask`` (..., T) True on
    the positions to use. Returns (...) float64, NaN where a ranking is constant or a
    used position is NaN (as scipy).
    """
    a, b = _rankings(a, b, mask)
    nan = _nan_rows(a, b, mask)
    a, b = _no_nan(a), _no_nan(b)
    mask = torch.ones_like(a, dtype=torch.bool) if mask is None else mask
    m = mask.to(a.dtype)
    n = m.sum(-1, keepdim=True).clamp_min(1)
    ra, rb = _ranks(a, mask), _ranks(b, mask)
    ra = (ra - (ra * m).sum(-1, keepdim=True) / n) * m  # centred, zero on padding
    rb = (rb - (rb * m).sum(-1, keepdim=True) / n) * m
    den = torch.sqrt((ra**2).sum(-1) * (rb**2).sum(-1))
    rho = torch.where(den > 1e-12, (ra * rb).sum(-1) / den.clamp_min(1e-300), torch.nan)
    return rho.masked_fill(nan, torch.nan)


def rationale_recall(scores: torch.Tensor, rationale: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Recall@k of a ranking against the known rationale, (B,).

    k is the size of each example's rationale; the result is the fraction of the k
    top-scoring real tokens that are rationale tokens (so recall@k = precision@k).
    Ties are broken by position (the earlier token first). ``scores``, ``rationale``
    (bool), ``mask`` (bool): (B, T). NaN for an example without rationale.
    """
    _check_scores("scores", scores, mask)
    _check_scores("scores", scores, rationale)
    s = scores.masked_fill(~mask, float("-inf"))
    order = s.argsort(dim=1, descending=True, stable=True)  # (B, T)
    k = (rationale & mask).sum(1)  # (B,)
    top = torch.arange(s.shape[1], device=s.device)[None] < k[:, None]  # first k ranks
    hit = (rationale & mask).gather(1, order) & top
    return torch.where(k > 0, hit.sum(1) / k.clamp_min(1), torch.nan)


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen–Shannon divergence along the last dimension, natural log.

    ``JSD(p, q) = KL(p || m) / 2 + KL(q || m) / 2`` with ``m = (p + q) / 2``: between 0
    (equal) and ln 2 ≈ 0.693 (disjoint supports), the scale of J&W's (2019) figures.
    ``p`` and ``q`` must be distributions: a negative or NaN entry raises ValueError.
    """
    if p.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"p and q need one last dimension, got {tuple(p.shape)}, {tuple(q.shape)}"
        )
    for name, x in (("p", p), ("q", q)):
        if not bool((x >= 0).all()):  # also catches NaN
            raise ValueError(
                f"jsd compares distributions: {name} has a negative or NaN entry "
                f"(min {float(x.min())})"
            )
    m = 0.5 * (p + q)

    def kl(x, y):  # 0 log 0 = 0
        return torch.where(
            x > 0,
            x * (torch.log(x.clamp_min(1e-30)) - torch.log(y.clamp_min(1e-30))),
            0.0,
        ).sum(-1)

    return (0.5 * kl(p, m) + 0.5 * kl(q, m)).clamp_min(0.0)


def mean_std(values) -> tuple[float, float]:
    """Mean and (population) standard deviation of the finite values: the ``m ± s``
    of the papers' tables."""
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    v = v[torch.isfinite(v)]
    if len(v) == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(unbiased=False))


# --------------------------------------------------------- Jain & Wallace (2019)
def _check_decoder_args(h, weights, mask) -> None:
    if weights.dim() != 2 or mask.shape != weights.shape or mask.dtype != torch.bool:
        raise ValueError(
            f"need weights (B, T) and a boolean mask of that shape, got "
            f"{tuple(weights.shape)} and {tuple(mask.shape)} {mask.dtype}"
        )
    if h.shape[:2] != weights.shape:
        raise ValueError(
            f"h must be (B, T, ...) like weights {tuple(weights.shape)}, got {tuple(h.shape)}"
        )


@torch.no_grad()
def permutation_test(decode: Callable, h: torch.Tensor, weights: torch.Tensor,
                     mask: torch.Tensor, n_perm: int = 100,
                     seed: int = 0) -> torch.Tensor:  # fmt: skip
    """J&W (2019, §4.2.1): shuffle the attention weights, keep everything else; (B,).

    Per example, the median over ``n_perm`` random permutations of the weights among
    its real tokens of ``|sigmoid(decode(h, w_perm)) - sigmoid(decode(h, w))|``. A
    small value means the output does not care *which* token gets which weight.
    """
    _check_decoder_args(h, weights, mask)
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    g = torch.Generator().manual_seed(seed)
    B, T = weights.shape
    y = torch.sigmoid(decode(h, weights))  # (B,)
    real = torch.argsort((~mask).int(), dim=1, stable=True)  # real positions first
    diffs = []
    for _ in range(n_perm):
        keys = torch.rand(B, T, generator=g).to(weights.device).masked_fill(~mask, 2.0)
        shuffled = torch.argsort(keys, dim=1)  # the real positions, shuffled, first
        w = torch.zeros_like(weights).scatter(1, real, weights.gather(1, shuffled))
        diffs.append((torch.sigmoid(decode(h, w)) - y).abs())
    return torch.stack(diffs, 1).median(1).values  # (B, n_perm) -> (B,)


def adversarial_attention(decode: Callable, h: torch.Tensor, weights: torch.Tensor,
                          mask: torch.Tensor, eps: float = 0.01, k: int = 4,
                          steps: int = 300, lr: float = 0.05, penalty: float = 500.0,
                          seed: int = 0):  # fmt: skip
    """J&W (2019, §4.2.2): the most different attention that leaves the output alone.

    Searches, per example, ``max JSD(w', w)`` subject to ``|sigmoid(decode(h, w')) -
    sigmoid(decode(h, w))| <= eps``, the relaxation of J&W's code: Adam on the logits
    of ``k`` candidate distributions (started from uniform plus N(0, 3²) noise), loss
    ``-JSD + penalty * relu(|Δŷ| - eps)``, ``h`` fixed. (J&W also reward diversity
    among their candidates and run 500 steps at lr 0.01.) Returns ``(best (B, T),
    max_jsd (B,), dy (B,))``: of the final candidates *within eps*, the one farthest
    from ``w`` (``w`` itself, JSD 0, where none is), its JSD (at most ln 2) and its
    ``|Δŷ|``, which is therefore always <= eps.
    """
    _check_decoder_args(h, weights, mask)
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if k < 1 or steps < 0:
        raise ValueError(f"need k >= 1 and steps >= 0, got k={k}, steps={steps}")
    g = torch.Generator().manual_seed(seed)
    h, w0 = h.detach(), weights.detach()
    with torch.no_grad():
        y0 = torch.sigmoid(decode(h, w0))  # (B,)
    B, T = w0.shape
    noise = 3 * torch.randn(B, k, T, generator=g, dtype=w0.dtype).to(w0.device)
    logits = noise.requires_grad_(True)  # (B, k, T)
    mk = mask[:, None].expand(B, k, T)
    hk = h[:, None].expand(B, k, *h.shape[1:]).reshape(B * k, *h.shape[1:])
    opt = torch.optim.Adam([logits], lr=lr)

    def candidates():
        w = torch.softmax(logits.masked_fill(~mk, float("-inf")), -1)  # (B, k, T)
        y = torch.sigmoid(decode(hk, w.reshape(B * k, T))).view(B, k)
        return w, (y - y0[:, None]).abs(), jsd(w, w0[:, None])

    for _ in range(steps):
        w, dy, div = candidates()
        loss = (-div + penalty * F.relu(dy - eps)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        w, dy, div = candidates()
        ok = dy <= eps  # (B, k) feasible candidates
        best = div.masked_fill(~ok, -1.0).argmax(1)  # (B,)
        feasible = ok.any(1)
        rows = torch.arange(B, device=w.device)
        chosen = torch.where(feasible[:, None], w[rows, best], w0)
        max_jsd = torch.where(feasible, div[rows, best], 0.0)
        dy_best = torch.where(feasible, dy[rows, best], 0.0)
    return chosen, max_jsd, dy_best


# -------------------------------------------------------- Wiegreffe & Pinter (2019)
def wp_adversary(base, data, lam: float = 0.1, epochs: int = 3, seed: int = 1,
                 **fit_kwargs):  # fmt: skip
    """W&P (2019, §4): *train* a model to predict like ``base`` with other attention.

    Per example the loss is :func:`wp_adversary_loss`, ``TVD(ŷ_adv, ŷ_base) - lam *
    KL(α_adv || α_base)``: the total variation between the two models' output
    distributions (for one probability, ``|ŷ_adv - ŷ_base|``) minus the divergence of
    the adversary's attention from the base model's, in the direction of W&P's code. Unlike J&W's
    per-example search, the adversary is one model, consistent across the data.
    ``base``: an :class:`~attnlab.classifiers.AttentionClassifier`; ``data``: the
    training :class:`~attnlab.data.RationaleData`. Returns the trained adversary (same
    architecture, eval mode).
    """
    from .classifiers import fit_classifier

    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    base.eval()
    with torch.no_grad():
        logit, a_base = base(data.ids, data.mask)  # (N,), (N, T)
    y_base = torch.sigmoid(logit)
    torch.manual_seed(seed)
    adv = base.make_like()

    def loss_fn(model, batch, idx):
        yb, ab = y_base[idx], a_base[idx, : batch.ids.shape[1]]  # (B,), (B, T)
        logit, a = model(batch.ids, batch.mask)
        return wp_adversary_loss(torch.sigmoid(logit), yb, a, ab, lam).mean()

    fit_classifier(adv, data, epochs=epochs, seed=seed, loss_fn=loss_fn, **fit_kwargs)
    return adv.eval()


def wp_adversary_loss(y_adv: torch.Tensor, y_base: torch.Tensor, a_adv: torch.Tensor,
                      a_base: torch.Tensor, lam: float) -> torch.Tensor:  # fmt: skip
    """W&P's (2019) adversary objective per example, (B,): lower is better.

    ``|y_adv - y_base| - lam * KL(a_adv || a_base)``, with ``KL(a_adv || a_base) =
    sum_t a_adv,t (log a_adv,t - log a_base,t)`` (0 log 0 = 0). The direction is the
    one of W&P's code, ``nn.KLDivLoss()(a_base.log(), a_adv)``: it rewards the
    adversary for piling weight on tokens the base model ignores (the reverse
    direction would reward zeroing the base model's favourite tokens instead).
    ``y_*`` (B,) probabilities of label 1; ``a_*`` (B, T) attention, zero on padding.
    """
    if y_adv.shape != y_base.shape or a_adv.shape != a_base.shape:
        raise ValueError(
            f"need y_adv, y_base (B,) and a_adv, a_base (B, T) of matching shapes, got "
            f"{tuple(y_adv.shape)}, {tuple(y_base.shape)}, {tuple(a_adv.shape)}, "
            f"{tuple(a_base.shape)}"
        )
    tvd = (y_adv - y_base).abs()  # (B,)
    log_ratio = a_adv.clamp_min(1e-30).log() - a_base.clamp_min(1e-30).log()
    kl = torch.where(a_adv > 0, a_adv * log_ratio, 0.0).sum(-1)  # (B,)
    return tvd - lam * kl


def diagnostic_mlp(train, test, w_train: torch.Tensor, w_test: torch.Tensor,
                   epochs: int = 3, seed: int = 1, **fit_kwargs) -> tuple[float, float]:  # fmt: skip
    """W&P (2019, §5): a model without context, pooled with *frozen* outside weights.

    Trains an :class:`~attnlab.classifiers.AttentionClassifier` with the ``"average"``
    encoder (each token alone) whose attention is replaced by ``w_train`` (N, T) while
    training and by ``w_test`` when tested. Weights from a model that knew which
    tokens matter should beat uniform weights. Returns the test ``(accuracy, F1)``.
    """
    from .classifiers import AttentionClassifier, accuracy_f1, fit_classifier

    if w_train.shape != train.ids.shape or w_test.shape != test.ids.shape:
        raise ValueError(
            f"w_train {tuple(w_train.shape)} and w_test {tuple(w_test.shape)} must match "
            f"the data {tuple(train.ids.shape)}, {tuple(test.ids.shape)}"
        )
    torch.manual_seed(seed)
    mlp = AttentionClassifier(len(train.vocab), "average")
    w_train = w_train.detach()

    def loss_fn(model, batch, idx):
        w = w_train[idx, : batch.ids.shape[1]]  # (B, T) frozen weights
        logit = model(batch.ids, batch.mask, weights=w)[0]
        return F.binary_cross_entropy_with_logits(logit, batch.labels.float())

    fit_classifier(mlp, train, epochs=epochs, seed=seed, loss_fn=loss_fn, **fit_kwargs)
    return accuracy_f1(mlp, test, weights=w_test.detach())


# -------------------------------------------------------------- Serrano & Smith (2019)
def weight_gradient(
    decode: Callable, h: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """How much each attention weight pushes toward the current decision, (B, T).

    ``d s / d w_t`` with ``s = logit`` where the decision is positive and ``-logit``
    where it is negative: the gradient ranking of Serrano & Smith (2019, §4), erased
    highest first.
    """
    w = weights.detach().requires_grad_(True)
    logit = decode(h.detach(), w)  # (B,)
    sign = torch.where(logit.detach() > 0, 1.0, -1.0)
    (g,) = torch.autograd.grad((sign * logit).sum(), w)
    return g  # (B, T)


@torch.no_grad()
def erasure_test(decode: Callable, h: torch.Tensor, weights: torch.Tensor,
                 mask: torch.Tensor, order: torch.Tensor):  # fmt: skip
    """S&S (2019, §5): erase attended items, top-ranked first, until the decision flips.

    ``order`` (B, T): a score per item, erased highest first (attention itself, a
    gradient, random numbers). Erasing sets an item's weight to 0 and renormalises
    the rest; ``h`` stays fixed (S&S erase the encoded items, not the words). Returns
    ``(fraction (B,), flipped (B,) bool)``: the fraction of the real items erased when
    the decision first flipped, 1.0 where it never flipped before one item was left.
    """
    _check_decoder_args(h, weights, mask)
    if order.shape != weights.shape:
        raise ValueError(
            f"order {tuple(order.shape)} must match weights {tuple(weights.shape)}"
        )
    B, T = weights.shape
    decision = decode(h, weights) > 0  # (B,)
    ranked = order.masked_fill(~mask, float("-inf")).argsort(
        dim=1, descending=True, stable=True
    )
    n = mask.sum(1)  # (B,)
    frac = torch.ones(B, dtype=torch.float64)
    flipped = torch.zeros(B, dtype=torch.bool)
    keep = mask.clone()
    rows = torch.arange(B)
    for j in range(T - 1):
        live = (j < n - 1) & ~flipped  # always leave at least one item
        if not live.any():
            break
        item = ranked[:, j]  # (B,) the next item to erase
        keep[rows[live], item[live]] = False
        w = weights * keep
        w = w / w.sum(1, keepdim=True).clamp_min(1e-12)  # renormalise what is left
        new = ((decode(h, w) > 0) != decision) & live
        frac[new] = (j + 1) / n[new].double()
        flipped |= new
    return frac, flipped


# ----------------------------------------------------------- Pruthi et al. (2020)
def deception_penalty(
    weights: torch.Tensor, impermissible: torch.Tensor
) -> torch.Tensor:
    """Pruthi et al. (2020, "Learning to deceive"): ``-log(1 - alpha^T m)``, (B,).

    ``weights`` (B, T) attention on the simplex; ``impermissible`` (B, T) bool, the
    tokens the attention should seem to ignore. Zero when no weight is on them,
    growing without bound as all of it is; the mass is capped at ``1 - 1e-6`` so the
    value stays finite. Subtracting ``lam`` times ``log(1 - alpha^T m)`` from a
    model's loss (:func:`deceptive_loss`) trains it to hide those tokens from its
    attention, whether or not it still uses them.
    """
    if weights.shape != impermissible.shape or weights.dim() != 2:
        raise ValueError(
            f"weights and impermissible must both be (B, T), got "
            f"{tuple(weights.shape)} and {tuple(impermissible.shape)}"
        )
    if impermissible.dtype != torch.bool:
        raise TypeError(f"impermissible must be boolean, got {impermissible.dtype}")
    mass = (weights * impermissible).sum(1).clamp(max=1 - 1e-6)  # (B,)
    return -torch.log1p(-mass)


def deceptive_loss(lam: float) -> Callable:
    """A ``loss_fn`` for :func:`attnlab.classifiers.fit_classifier` (Pruthi et al. 2020).

    Binary cross-entropy plus ``lam`` times the mean :func:`deception_penalty`, with
    each example's rationale (``batch.rationale``) as the impermissible tokens: the
    model is rewarded for predicting well *and* for keeping its attention off the
    tokens that decide the label.
    """
    if not lam >= 0:
        raise ValueError(f"lam must be >= 0, got {lam}")

    def loss_fn(model, batch, idx):
        logit, weights = model(batch.ids, batch.mask)  # (B,), (B, T)
        bce = F.binary_cross_entropy_with_logits(logit, batch.labels.float())
        return bce + lam * deception_penalty(weights, batch.rationale).mean()

    return loss_fn
