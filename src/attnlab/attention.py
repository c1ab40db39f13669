"""The attention recipe: score, map to the simplex, combine.

Given queries ``q (..., T, Dq)``, keys ``k (..., S, Dk)`` and values ``v (..., S, Dv)``:

1. ``scores = score(q, k)``            (..., T, S)
2. ``weights = mapping(scores)``       (..., T, S), each row on the simplex
3. ``out = weights @ v``               (..., T, Dv)

:func:`attend` is the recipe with any scorer and any mapping;
:func:`scaled_dot_product_attention` is the same recipe with the scaled dot-product score,
in the call shape of :func:`torch.nn.functional.scaled_dot_product_attention`. Both run
steps 2-3 through one private core, :func:`_combine`, so they mask, map and combine the
same way.

Masks: boolean ``True`` = may attend (as ``F.scaled_dot_product_attention``);
``nn.MultiheadAttention`` reads a boolean mask the other way round (``True`` = blocked).
A float mask is added to the scores in every one of these, never flipped.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F

from . import validation as V
from .mappings import softmax
from .masking import apply_mask, causal_mask, combine_masks, fully_masked_rows
from .scoring import dot_score

__all__ = ["attend", "scaled_dot_product_attention"]


def attention_core(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    mapping: Callable = softmax,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The readable path, inputs already checked: scaled scores, mask, map, combine.

    q (..., T, Dh), k (..., S, Dh), v (..., S, Dv), mask broadcastable to (..., T, S)
    -> out (..., T, Dv), weights (..., T, S). ``scale`` None: ``1/sqrt(Dh)``."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T, Dh) @ (..., Dh, S)
    return _combine(scores, v, mask, mapping, dropout_p)  # (..., T, Dv), (..., T, S)


def dead_rows(mask: torch.Tensor) -> torch.Tensor:
    """``(..., T, 1)`` True where the mask blocks every key (bool: all False; float:
    all ``-inf``). Read from the mask only: no host sync."""
    if mask.dtype == torch.bool:
        return ~mask.any(dim=-1, keepdim=True)
    return torch.isneginf(mask).all(dim=-1, keepdim=True)


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> torch.Tensor:
    """The fast path, inputs already checked: ``F.scaled_dot_product_attention``
    (fused kernels; no weights are made). (B, H, T, Dh) -> (B, H, T, Dv).

    A query with no key gets a zero output by construction (``torch.where`` on the
    mask's dead rows), whatever the kernel returns there."""
    if is_causal and mask is not None:
        mask = combine_masks(mask, causal_mask(q.shape[-2], k.shape[-2], q.device))
        is_causal = False
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
    )  # (..., T, Dv)
    if mask is not None:
        out = out.masked_fill(dead_rows(mask), 0.0)  # (..., T, Dv)
    return out


def _combine(
    scores: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    mapping: Callable,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Steps 2-3 of the recipe, shared by both public functions.

    scores (..., T, S), v (..., S, Dv), mask broadcastable to (..., T, S) (its batch
    dimensions may add to the scores') -> out (..., T, Dv), weights (..., T, S).
    """
    if isinstance(mask, torch.Tensor) and mask.dim() >= 2:
        T, S = scores.shape[-2:]
        try:
            shape = torch.broadcast_shapes(scores.shape, mask.shape[:-2] + (T, S))
        except RuntimeError:
            shape = scores.shape  # apply_mask names the mismatch
        scores = scores.expand(shape)  # (..., T, S), batch dims of the mask included
    scores = apply_mask(scores, mask)  # (..., T, S), -inf where not allowed
    weights = mapping(scores)  # (..., T, S)
    if mask is not None:  # whatever the mapping does, a dead row stays zero
        weights = weights.masked_fill(fully_masked_rows(scores), 0.0)  # (..., T, S)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)  # (..., T, S)
    out = weights @ v  # (..., T, S) @ (..., S, Dv) -> (..., T, Dv)
    return out, weights


def check_qkv(q, k, v, fn: str) -> None:
    """Raise a TypeError/ValueError naming ``fn`` and the shapes unless ``q (..., T, Dh)``,
    ``k (..., S, Dh)`` and ``v (..., S, Dv)`` are tensors of one dtype that fit together.
    Shared by every attention function (this module and :mod:`attnlab.efficient`)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        V.tensor(t, name, fn, min_dim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{fn}: q and k must share the last size Dh, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{fn}: k and v must have the same number of keys S, got k "
            f"{tuple(k.shape)} and v {tuple(v.shape)}"
        )
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        V.floating(t, name, fn)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{fn}: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")


def _check_values(fn: str, **tensors: torch.Tensor) -> None:
    """TypeError unless every tensor is floating point; under :func:`attnlab.debug`,
    ValueError if one holds NaN or ``±inf``. Names ``fn`` and the argument."""
    for name, t in tensors.items():
        V.floating(t, name, fn)
        V.finite(t, name, fn)


def _check_batch(fn: str, q: torch.Tensor, k: torch.Tensor) -> None:
    """ValueError unless the leading (batch, head) dims of q and k broadcast."""
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"{fn}: the leading (batch, head) dimensions of q {tuple(q.shape)} and "
            f"k {tuple(k.shape)} do not broadcast"
        ) from None


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    score: Callable = dot_score,
    mapping: Callable = softmax,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attend from queries to keys and combine the values.

    Parameters
    ----------
    q, k, v : tensors of shape (..., T, Dq), (..., S, Dk), (..., S, Dv)
    score : callable ``(q, k) -> (..., T, S)``; any scorer of :mod:`attnlab.scoring`
    mapping : callable ``scores -> weights`` along the last dimension (default softmax)
    mask : optional, broadcastable to (..., T, S); boolean ``True`` = may attend
        (``nn.MultiheadAttention`` reads a boolean mask the other way round), or a
        float mask added to the scores. A query whose every key is masked gets zero
        weights and a zero output (never NaN).

    Returns
    -------
    out : (..., T, Dv)
    weights : (..., T, S)
    """
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        V.tensor(t, name, "attend", min_dim=2)
    if not callable(score) or not callable(mapping):
        raise TypeError("attend: score and mapping must be callables")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"attend: keys and values must agree on (..., S), got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    if v.dtype != q.dtype or k.dtype != q.dtype:
        raise TypeError(
            f"attend: q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    _check_values("attend", q=q, k=k, v=v)
    _check_batch("attend", q, k)
    scores = score(q, k)  # (..., T, S)
    return _combine(scores, v, mask, mapping)  # (..., T, Dv), (..., T, S)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    mapping: Callable | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Scaled dot-product attention that also returns its weights.

    .. math:: \mathrm{out} = \mathrm{softmax}\big(q k^\top / \sqrt{D_h} + M\big)\, v

    (Vaswani et al., 2017). The arguments are those of
    :func:`torch.nn.functional.scaled_dot_product_attention`, in its order, but this
    function returns ``(out, weights)`` where PyTorch's returns ``out`` only: write
    ``out, _ = attnlab.scaled_dot_product_attention(q, k, v)``. Written out in plain
    torch through the same core as :func:`attend`, so every step can be read.

    Parameters
    ----------
    q, k, v : tensors of shape (..., T, Dh), (..., S, Dh), (..., S, Dv); leading
        (batch, head) dimensions broadcast.
    attn_mask : optional, broadcastable to (..., T, S). Boolean ``True`` = may attend,
        as in PyTorch's function (``nn.MultiheadAttention`` reads a boolean mask the
        other way round); a float mask is added to the scaled scores, as in both of
        PyTorch's (float masks are never flipped).
    dropout_p : dropout probability on the weights, applied whenever > 0 (as PyTorch's
        function; pass ``0.0`` at evaluation time).
    is_causal : query ``i`` attends keys ``0..i`` (top-left triangle, any S); cannot be
        combined with ``attn_mask`` (as in PyTorch, whose name this is: merge them with
        :func:`attnlab.combine_masks` first).
    scale : multiplies the scores; default ``1 / sqrt(Dh)``.
    mapping : keyword only; scores -> weights along the last dimension, e.g.
        ``attnlab.sparsemax``; ``None`` (the default) means :func:`attnlab.softmax`.

    Returns
    -------
    out : (..., T, Dv)
    weights : (..., T, S), after dropout, so that ``out == weights @ v``. A query whose
        every key is masked gets zero weights and a zero output, as PyTorch's function
        gives since version 2.5 (``nn.MultiheadAttention`` still gives NaN there).
        With no keys at all (S = 0) the output is zeros (..., T, Dv), as PyTorch's.

    A non-finite ``scale``, integer tensors and lists raise an error that names the
    argument; NaN or ``±inf`` in q, k or v give NaN, as in PyTorch (a ValueError under
    :func:`attnlab.debug`). Head width 0 gives the mean of the values, as PyTorch's.
    """
    fn = "scaled_dot_product_attention"
    check_qkv(q, k, v, fn)
    _check_values(fn, q=q, k=k, v=v)
    _check_batch(fn, q, k)
    scale = V.real(scale, "scale", fn, optional=True)
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise TypeError(
            f"{fn}: dropout_p must be a float in [0, 1], got {dropout_p!r} (the 5th "
            "argument is dropout_p, as in PyTorch; pass is_causal by keyword)"
        )
    dropout_p = V.real(dropout_p, "dropout_p", fn, low=0.0, high=1.0)
    is_causal = V.flag(is_causal, "is_causal", fn)
    if is_causal and attn_mask is not None:
        raise ValueError(
            f"{fn}: pass either attn_mask or is_causal=True, not both (as PyTorch's "
            "function; combine them with "
            "attnlab.combine_masks(attn_mask, attnlab.causal_mask(T, S)))"
        )
    if attn_mask is not None:
        V.tensor(attn_mask, "attn_mask", fn)
    if mapping is not None and not callable(mapping):
        raise TypeError(f"{fn}: mapping must be a callable or None, got {mapping!r}")
    T, S = q.shape[-2], k.shape[-2]
    if is_causal:  # top-left triangle, as PyTorch's; T = 0 or S = 0 give empty masks
        attn_mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()  # (T, S)
    mapping = softmax if mapping is None else mapping
    # (..., T, Dh) x (..., S, Dh) x (..., S, Dv) -> (..., T, Dv), (..., T, S)
    return attention_core(q, k, v, attn_mask, dropout_p, scale, mapping)
