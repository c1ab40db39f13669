"""Structured attention (Kim et al., 2017): linear-chain CRF marginals and segmentation
attention, with their input checks."""

from __future__ import annotations

import torch
from torch import nn

from .. import validation as V
from ..mappings.basic import check_dim, check_float


# ------------------------------------------------------------------- input checks
def _check_crf(unary, transition, mask, name):
    for t, what in ((unary, "unary"), (transition, "transition")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: {what} must be a torch.Tensor, got {type(t)}")
        if not t.is_floating_point():
            raise TypeError(f"{name}: {what} must be floating point, got {t.dtype}")
    if unary.dim() != 3 or unary.shape[1] < 1 or unary.shape[2] < 1:
        raise ValueError(
            f"{name}: unary must have shape (B, n, C) with n, C >= 1, "
            f"got {tuple(unary.shape)}"
        )
    C = unary.shape[2]
    if transition.shape != (C, C):
        raise ValueError(
            f"{name}: transition must have shape (C, C) = ({C}, {C}) to match unary "
            f"{tuple(unary.shape)}, got {tuple(transition.shape)}"
        )
    if unary.dtype != transition.dtype:
        raise TypeError(
            f"{name}: unary and transition dtypes differ: {unary.dtype}, "
            f"{transition.dtype}"
        )
    for t, what in ((unary, "unary"), (transition, "transition")):
        if bool(torch.isnan(t).any() | (t == float("inf")).any()):
            raise ValueError(f"{name}: {what} contains NaN or +inf")
    if V.tensor(mask, "mask", name, optional=True) is not None:
        if mask.dtype != torch.bool or mask.shape != unary.shape[:2]:
            raise ValueError(
                f"{name}: mask must be a bool tensor of shape (B, n) = "
                f"{tuple(unary.shape[:2])}, got {mask.dtype} {tuple(mask.shape)}"
            )


# -------------------------------------------------------------- linear-chain CRF
def linear_chain_log_partition(
    unary: torch.Tensor, transition: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``log Z`` of a linear-chain CRF by the forward algorithm in log space.

    .. math:: \\log Z = \\log \\sum_{z \\in [C]^n} \\exp\\Big(\\sum_i u_{i, z_i}
              + \\sum_{i \\ge 2} A_{z_{i-1}, z_i}\\Big)

    computed as ``a_1 = u_1``, ``a_i[c] = u_i[c] + logsumexp_{c'}(a_{i-1}[c'] +
    A[c', c])``, ``log Z = logsumexp_c a_n[c]``: ``O(n C^2)`` instead of ``C^n``
    terms, and no overflow at any scale of the scores (logsumexp subtracts its max).

    Parameters
    ----------
    unary : (B, n, C) potentials ``u_{i, c}`` of state ``c`` at position ``i``.
    transition : (C, C) potentials ``A[c_prev, c]`` of neighbouring states.
    mask : optional (B, n) bool, True on real positions. Masked positions are left
        out of the chain (their neighbours become adjacent); a fully masked row has
        ``log Z = 0`` (the empty chain).

    Returns
    -------
    (B,) log-partition values.
    """
    _check_crf(unary, transition, mask, "linear_chain_log_partition")
    B, n, C = unary.shape
    alpha = unary.new_zeros(B, C)  # (B, C): log-potential of prefixes ending in c
    started = torch.zeros(B, 1, dtype=torch.bool, device=unary.device)  # (B, 1)
    for i in range(n):
        # (B, C, 1) + (C, C) -> (B, C, C), logsumexp over the previous state -> (B, C)
        carried = torch.logsumexp(alpha[:, :, None] + transition, dim=1)
        new = torch.where(started, carried, 0.0) + unary[:, i]  # (B, C)
        live = torch.ones_like(started) if mask is None else mask[:, i, None]
        alpha = torch.where(live, new, alpha)  # (B, C); masked: carry over unchanged
        started = started | live
    logz = torch.logsumexp(alpha, dim=-1)  # (B,)
    return torch.where(started[:, 0], logz, 0.0)  # empty chain: log 1


def linear_chain_marginals(
    unary: torch.Tensor, transition: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Node marginals ``p(z_i = c)`` of a linear-chain CRF: (B, n, C).

    ``p(z_i = c) = ∂ log Z / ∂ u_{i, c}``: one backward pass through
    :func:`linear_chain_log_partition` *is* the forward-backward algorithm. The graph of
    that backward pass is kept (``create_graph=True``), so the marginals are themselves
    differentiable with respect to ``unary`` and ``transition`` and can be trained as
    attention weights (Kim et al., 2017). Each row ``p(z_i = ·)`` sums to 1; masked
    positions get all zeros. float16/bfloat16 potentials are computed in float32 (the
    forward algorithm's sums lose too much in 16 bits) and the result is cast back.
    An example in which no labelling has a finite score (``log Z = -inf``, e.g. every
    transition ``-inf``) has no marginals: ValueError names it.

    Parameters
    ----------
    unary : (B, n, C) floating-point potentials, n, C >= 1.
    transition : (C, C) potentials, ``unary``'s dtype.
    mask : optional (B, n) bool, True on real positions (as in
        :func:`linear_chain_log_partition`).

    Returns
    -------
    (B, n, C) marginals in ``unary``'s dtype: rows sum to 1, masked positions 0;
    differentiable when ``unary`` or ``transition`` requires grad.

    Raises
    ------
    TypeError
        ``unary``, ``transition`` or ``mask`` is not a tensor; ``unary`` or
        ``transition`` is not floating point, or their dtypes differ.
    ValueError
        A shape is wrong (``unary`` not (B, n, C) with n, C >= 1, ``transition`` not
        (C, C), ``mask`` not a (B, n) bool), a potential is NaN or +inf, or an
        example has no finite-score labelling.
    """
    _check_crf(unary, transition, mask, "linear_chain_marginals")
    if unary.dtype in (torch.float16, torch.bfloat16):
        marg = linear_chain_marginals(unary.float(), transition.float(), mask)
        return marg.to(unary.dtype)
    # Keep the graph (double backward) only when someone will differentiate the result.
    keep = torch.is_grad_enabled() and (unary.requires_grad or transition.requires_grad)
    with torch.enable_grad():
        u = unary if unary.requires_grad else unary.detach().requires_grad_()
        logz = linear_chain_log_partition(u, transition, mask)  # (B,)
        infeasible = torch.isneginf(logz)
        if bool(infeasible.any()):
            raise ValueError(
                "linear_chain_marginals: no labelling has a finite score in example(s) "
                f"{infeasible.nonzero().squeeze(-1).tolist()} (log Z = -inf: the -inf "
                "unary and transition potentials rule out every path), so their "
                "marginals are undefined"
            )
        (marg,) = torch.autograd.grad(logz.sum(), u, create_graph=keep)
    return marg if keep else marg.detach()  # (B, n, C)


def enumerate_linear_chain(
    unary: torch.Tensor, transition: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Brute force: every labelling ``z`` (K = C^n of them) and its log-probability.

    For checking the forward algorithm on small chains (and sampling from them).

    Parameters
    ----------
    unary : (B, n, C) floating-point potentials, n, C >= 1.
    transition : (C, C) potentials, ``unary``'s dtype.

    Returns
    -------
    configs : (K, n) long, every labelling, in lexicographic order.
    log_probs : (B, K), ``log p(z)`` of each labelling under each example's chain.

    Raises
    ------
    TypeError
        ``unary`` or ``transition`` is not a floating-point tensor, or their dtypes
        differ.
    ValueError
        A shape is wrong, a potential is NaN or +inf, or ``C^n`` is above 2^16.
    """
    _check_crf(unary, transition, None, "enumerate_linear_chain")
    B, n, C = unary.shape
    if C**n > 2**16:
        raise ValueError(
            f"enumerate_linear_chain: C^n = {C}^{n} labellings is too many"
        )
    grids = torch.meshgrid(*[torch.arange(C)] * n, indexing="ij")
    # (K, n)
    configs = torch.stack([g.flatten() for g in grids], dim=-1).to(unary.device)
    pos = torch.arange(n, device=unary.device)
    score = unary[:, pos, configs].sum(-1)  # (B, K, n) -> (B, K)
    if n > 1:
        score = score + transition[configs[:, :-1], configs[:, 1:]].sum(-1)  # (K,)
    return configs, score - torch.logsumexp(score, dim=-1, keepdim=True)


def segmentation_marginals(
    scores: torch.Tensor, transition: torch.Tensor, dim: int = -1
) -> torch.Tensor:
    """Segmentation attention weights ``p(z_i = 1)`` (Kim et al., 2017).

    Each key ``i`` has a binary variable ``z_i`` ("attend to it") with unary potentials
    ``(0, scores_i)`` and a (2, 2) ``transition`` between neighbours; the weights are the
    marginals ``p(z_i = 1)``. With ``transition = 0`` the ``z_i`` are independent and
    this is ``sigmoid(scores)``; a positive ``transition[1, 1] + transition[0, 0] -
    transition[0, 1] - transition[1, 0]`` rewards neighbours that agree, so the weights
    come in contiguous spans. The weights lie in [0, 1] and do *not* sum to 1.

    Parameters
    ----------
    scores : floating-point tensor of any shape ``(..., S, ...)``; ``-inf`` scores are
        masked keys (weight 0, skipped by the chain); a fully masked row gives zeros.
    transition : (2, 2) floating-point potentials between neighbouring ``z_i``.
    dim : the key dimension of ``scores``.

    Returns
    -------
    Weights in [0, 1] with ``scores``' shape and dtype (zeros if ``scores`` is empty).

    Raises
    ------
    TypeError
        ``scores`` or ``transition`` is not a floating-point tensor, or ``dim`` is
        not an int.
    ValueError
        ``scores`` is 0-d or ``dim`` is out of range, ``transition`` is not (2, 2),
        ``scores`` or ``transition`` holds NaN or +inf, or a row has no finite-score
        labelling (e.g. a ``-inf`` transition that rules out every path).
    """
    check_dim(scores, dim, "segmentation_marginals", "scores")
    check_float(scores, "segmentation_marginals", "scores")
    if not isinstance(transition, torch.Tensor):
        raise TypeError(
            f"segmentation_marginals: transition must be a (2, 2) tensor, got "
            f"{type(transition).__name__}"
        )
    if not transition.is_floating_point():
        raise TypeError(
            f"segmentation_marginals: transition must be floating point, got "
            f"{transition.dtype}"
        )
    if transition.shape != (2, 2):
        raise ValueError(
            f"segmentation_marginals: transition must have shape (2, 2), "
            f"got {tuple(transition.shape)}"
        )
    if bool(torch.isnan(scores).any() | (scores == float("inf")).any()):
        raise ValueError(
            f"segmentation_marginals: scores contain NaN or +inf "
            f"(shape {tuple(scores.shape)})"
        )
    if bool(torch.isnan(transition).any() | torch.isposinf(transition).any()):
        raise ValueError("segmentation_marginals: transition contains NaN or +inf")
    if scores.numel() == 0:  # no key, or no row: nothing to weigh
        return torch.zeros_like(scores)
    x = scores.movedim(dim, -1)  # (..., S)
    lead, S = x.shape[:-1], x.shape[-1]
    x = x.reshape(-1, S)  # (N, S)
    mask = x > float("-inf")  # (N, S) True on real keys
    s1 = torch.where(mask, x, 0.0)  # (N, S): masked keys are skipped via the mask
    unary = torch.stack([torch.zeros_like(s1), s1], dim=-1)  # (N, S, 2)
    marg = linear_chain_marginals(unary, transition.to(x.dtype), mask)  # (N, S, 2)
    w = marg[..., 1].reshape(*lead, S)  # (..., S)
    return w.movedim(-1, dim)


class SegmentationAttention(nn.Module):
    """Segmentation attention as a mapping: a learned (2, 2) transition matrix.

    ``transition`` starts at ``init * [[1, -1], [-1, 1]] / 2`` (``init = 0``: independent
    sigmoids). With ``normalize=True`` the marginals of each row are divided by their
    sum (plus ``eps``), so the output is an average of the values as in soft attention.
    """

    def __init__(self, init: float = 0.0, normalize: bool = False, eps: float = 1e-6):
        super().__init__()
        agree = torch.tensor([[1.0, -1.0], [-1.0, 1.0]]) * (init / 2)
        self.transition = nn.Parameter(agree)
        self.normalize, self.eps = normalize, eps

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        w = segmentation_marginals(scores, self.transition.to(scores.dtype))
        if self.normalize:
            w = w / (w.sum(dim=-1, keepdim=True) + self.eps)
        return w

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}"
