"""Importance measures (gradient, leave-one-out) and the statistics that compare them
with attention: rank correlations, rationale recall, Jensen-Shannon divergence."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike

from .. import validation as V


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


def gradient_importance(
    f: Callable, embeddings: torch.Tensor, mask: torch.Tensor, times_input: bool = True
) -> torch.Tensor:
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
def leave_one_out(
    f: Callable, ids: torch.Tensor, mask: torch.Tensor, replace_with: int | None = None
) -> torch.Tensor:
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


def _rankings(a, b, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """``a``, ``b`` as float64 tensors of one shape (..., T), checked against ``mask``."""
    # array-likes (lists, NumPy) are taken as scipy.stats takes them; strings are not
    for x, name in ((a, "a"), (b, "b")):
        if isinstance(x, (str, bytes)) or not hasattr(x, "__len__"):
            raise TypeError(
                f"rank correlation: {name} must be a tensor or an array of numbers, "
                f"got {type(x).__name__}"
            )
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


def kendall_tau(
    a: torch.Tensor | ArrayLike,
    b: torch.Tensor | ArrayLike,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Kendall's tau-b between the last dimensions of ``a`` and ``b`` (Kendall, 1945).

    ``tau_b = sum_{i<j} sgn(a_i - a_j) sgn(b_i - b_j) / sqrt(n_a n_b)``, with ``n_a``
    (``n_b``) the pairs not tied in ``a`` (``b``): 1 when both rank the tokens alike,
    -1 when reversed, ties handled as :func:`scipy.stats.kendalltau` does. J&W (2019,
    Table 2) report it per example between attention and gradient or LOO importance.
    ``a``, ``b``: (..., T); ``mask`` (..., T) keeps only real tokens. Returns (...)
    float64, NaN where a ranking is constant or a used position is NaN (as scipy's
    default ``nan_policy='propagate'``).
    """
    ta, tb = _rankings(a, b, mask)
    nan = _nan_rows(ta, tb, mask)
    a, b = _no_nan(ta), _no_nan(tb)
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


def spearman(
    a: torch.Tensor | ArrayLike,
    b: torch.Tensor | ArrayLike,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Spearman's rank correlation along the last dimension (A&Z 2020, Tables 1-2).

    The Pearson correlation of the average ranks (ties share their mean rank, as
    :func:`scipy.stats.spearmanr`). ``a``, ``b`` (..., T), ``mask`` (..., T) True on
    the positions to use. Returns (...) float64, NaN where a ranking is constant or a
    used position is NaN (as scipy).
    """
    ta, tb = _rankings(a, b, mask)
    nan = _nan_rows(ta, tb, mask)
    a, b = _no_nan(ta), _no_nan(tb)
    mask = torch.ones_like(a, dtype=torch.bool) if mask is None else mask
    m = mask.to(a.dtype)
    n = m.sum(-1, keepdim=True).clamp_min(1)
    ra, rb = _ranks(a, mask), _ranks(b, mask)
    ra = (ra - (ra * m).sum(-1, keepdim=True) / n) * m  # centred, zero on padding
    rb = (rb - (rb * m).sum(-1, keepdim=True) / n) * m
    den = torch.sqrt((ra**2).sum(-1) * (rb**2).sum(-1))
    rho = torch.where(den > 1e-12, (ra * rb).sum(-1) / den.clamp_min(1e-300), torch.nan)
    return rho.masked_fill(nan, torch.nan)


def rationale_recall(
    scores: torch.Tensor, rationale: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
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
    ``p`` and ``q`` must be distributions along the last dimension: a negative or
    NaN entry, or a row that does not sum to 1 (logits, unnormalised weights), raises
    ValueError (an all-zero row, a padded query, is allowed: its JSD with a zero row
    is 0).
    """
    V.distribution(p, "p", "jsd")
    V.distribution(q, "q", "jsd")
    if p.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"jsd: p and q need one last dimension, got {tuple(p.shape)}, "
            f"{tuple(q.shape)}"
        )
    m = 0.5 * (p + q)

    def kl(x, y):  # 0 log 0 = 0
        return torch.where(
            x > 0,
            x * (torch.log(x.clamp_min(1e-30)) - torch.log(y.clamp_min(1e-30))),
            0.0,
        ).sum(-1)

    # within [0, ln 2] also for rows normalised only to the dtype's precision
    return (0.5 * kl(p, m) + 0.5 * kl(q, m)).clamp(0.0, math.log(2.0))


def mean_std(values) -> tuple[float, float]:
    """Mean and (population) standard deviation of the finite values: the ``m ± s``
    of the papers' tables."""
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    v = v[torch.isfinite(v)]
    if len(v) == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(unbiased=False))
