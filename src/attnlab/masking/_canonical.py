"""Masks applied and combined: boolean to additive, a mask applied to scores, several
masks made one, the one canonical mask of a multi-head call, and the masked softmax.

Part of :mod:`attnlab.masking`; import the names from there.
"""

from __future__ import annotations

import math
import numbers

import torch

from .. import validation as V
from ._checks import check_mask, convention_scan, in_derived_masks


def to_additive(
    mask: torch.Tensor,
    mask_value: float = float("-inf"),
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Boolean mask (``True`` = may attend) -> float mask to add to the scores.

    ``mask_value`` is what blocked positions get: ``-inf`` (exact zeros after softmax) or a
    finite stand-in such as the ``-10000`` of early BERT code, which is *not* always
    enough (scaled-up scores, float16).

    Parameters
    ----------
    mask : boolean tensor, ``True`` = may attend.
    mask_value : what blocked positions get: ``-inf`` or a large negative number.
    dtype : the result's dtype; default torch's default float dtype.

    Returns
    -------
    float tensor of ``mask``'s shape: 0 where ``mask`` is True, ``mask_value`` elsewhere.

    Raises
    ------
    TypeError
        ``mask`` is not boolean, ``mask_value`` not a number, or ``dtype`` not a
        floating-point type.
    ValueError
        ``mask_value`` is NaN, positive, or below ``dtype``'s lowest finite value.
    """
    V.tensor(mask, "mask", "to_additive")
    if mask.dtype != torch.bool:
        raise TypeError(f"to_additive: mask must be boolean, got dtype {mask.dtype}")
    if isinstance(mask_value, bool) or not isinstance(mask_value, numbers.Real):
        raise TypeError(f"to_additive: mask_value must be a number, got {mask_value!r}")
    if math.isnan(mask_value) or mask_value > 0:
        raise ValueError(
            f"to_additive: mask_value must be -inf or a large negative number, got "
            f"{mask_value}"
        )
    dtype = dtype or torch.get_default_dtype()
    if not dtype.is_floating_point:
        raise TypeError(f"to_additive: dtype must be a float type, got {dtype}")
    lowest = torch.finfo(dtype).min
    if mask_value != float("-inf") and mask_value < lowest:
        raise ValueError(
            f"to_additive: mask_value={mask_value:g} does not fit in {dtype} (its lowest "
            f"finite value is {lowest:g}); use float('-inf') or a value >= {lowest:g}"
        )
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill(~mask, mask_value)


def apply_mask(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Scores with the mask applied: boolean -> ``-inf`` where ``False``; float -> added.

    Parameters
    ----------
    scores : floating-point tensor ``(..., T, S)``.
    mask : None, or a boolean (``True`` = may attend) or float (added) mask that
        broadcasts to ``scores``.

    Returns
    -------
    tensor of ``scores``' shape: ``-inf`` where a boolean mask is False, ``scores +
    mask`` for a float mask, ``scores`` itself for None.

    Raises
    ------
    TypeError
        ``scores`` is not floating point, or ``mask`` neither boolean nor float.
    ValueError
        ``mask`` does not broadcast to ``scores``.
    """
    V.floating(scores, "scores", "apply_mask")
    if mask is None:
        return scores
    check_mask(mask, scores)
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.to(scores.dtype)


def combine_masks(
    *masks: torch.Tensor | None, dtype: torch.dtype | None = None
) -> torch.Tensor | None:
    """One mask that blocks whatever any of ``masks`` blocks (``None`` entries skipped).

    All boolean -> their logical AND (``True`` = may attend). If any is a float mask,
    the boolean ones become ``-inf`` additive masks (:func:`to_additive`) and everything
    is summed, in ``dtype`` (default: the first float mask's dtype). Shapes broadcast:
    e.g. a ``(T, S)`` causal mask and a ``(B, 1, 1, S)`` padding mask give
    ``(B, 1, T, S)``. Returns ``None`` when every entry is ``None``.

    Parameters
    ----------
    *masks : boolean (``True`` = may attend) or float (added) masks, or None; their
        shapes broadcast together.
    dtype : the dtype of a float result; default the first float mask's.

    Returns
    -------
    tensor or None: boolean if every mask is boolean, else float; of the broadcast
    shape; None when every entry is None.

    Raises
    ------
    TypeError
        an entry is not a tensor, or neither boolean nor floating point.
    ValueError
        the shapes do not broadcast.
    """
    given = [m for m in masks if m is not None]
    for i, m in enumerate(given):
        if not isinstance(m, torch.Tensor):
            raise TypeError(
                f"combine_masks: mask {i} is {type(m).__name__}, not a tensor"
            )
        if m.dtype != torch.bool and not m.is_floating_point():
            raise TypeError(
                f"combine_masks: mask {i} has dtype {m.dtype}; bool or float"
            )
    if not given:
        return None
    try:
        torch.broadcast_shapes(*(m.shape for m in given))
    except RuntimeError:
        shapes = ", ".join(str(tuple(m.shape)) for m in given)
        raise ValueError(f"combine_masks: shapes {shapes} do not broadcast") from None
    if all(m.dtype == torch.bool for m in given):
        out = given[0]
        for m in given[1:]:
            out = out & m
        return out
    if dtype is None:
        dtype = next(m.dtype for m in given if m.dtype != torch.bool)
    total: torch.Tensor | None = None
    for m in given:
        m = to_additive(m, dtype=dtype) if m.dtype == torch.bool else m.to(dtype)
        total = m if total is None else total + m
    assert total is not None  # given is not empty
    return total


def canonical_mask(
    attn_mask: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    *,
    B: int,
    H: int,
    T: int,
    S: int,
    dtype: torch.dtype,
    fn: str = "MultiHeadAttention",
) -> torch.Tensor | None:
    """The one mask of a multi-head attention call: ``None``, or boolean (``True`` = may
    attend) or float (added) of shape ``(B|1, H|1, T, S)``, made once per call.

    ``attn_mask``: (T, S), (B, T, S), PyTorch's (B·H, T, S), or anything broadcastable
    to (B, H, T, S); ``key_padding_mask``: (B, S). Shapes and dtypes are checked from
    metadata; a mask the caller built (outside :func:`derived_masks`) is also scanned
    once for the convention mistakes (NaN/+inf or 0/1 float masks raise, a boolean
    row with no key warns): one host sync per mask. A float result has ``dtype``.

    Parameters
    ----------
    attn_mask : None, or a bool or float mask of one of the shapes above.
    key_padding_mask : None, or a bool or float (B, S) mask.
    B, H, T, S : the batch, heads, queries and keys of the scores.
    dtype : the scores' dtype (of a float result).
    fn : the caller's name, for the messages.

    Returns
    -------
    None if both masks are None, else the combined mask of shape
    ``(B|1, H|1, T, S)``: bool if both are bool, else float in ``dtype``.

    Raises
    ------
    TypeError
        A mask is not a tensor, or neither bool nor floating point.
    ValueError
        A mask's shape does not fit (B, H, T, S); a float mask the caller built holds
        NaN or +inf, or only 0s and 1s.

    Warns
    -----
    MaskConventionWarning
        A bool mask the caller built leaves a row with no key
        (:func:`warn_if_nothing_attended`).
    """
    for m, name in ((attn_mask, "attn_mask"), (key_padding_mask, "key_padding_mask")):
        if m is None:
            continue
        V.tensor(m, name, fn)
        if m.dtype != torch.bool and not m.is_floating_point():
            raise TypeError(
                f"{fn}: {name} must be bool (True = may attend) or float (added to "
                f"the scores), got {m.dtype}"
            )
        if not in_derived_masks():
            convention_scan(m, name, fn)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (B, S):
            raise ValueError(
                f"{fn}: key_padding_mask must have shape (B, S) = {(B, S)}, "
                f"got {tuple(key_padding_mask.shape)}"
            )
        key_padding_mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
    if attn_mask is not None:
        if attn_mask.dim() == 3:
            if attn_mask.shape[0] == B and attn_mask.shape[1:] == (T, S):
                attn_mask = attn_mask[:, None]  # (B, T, S) -> (B, 1, T, S)
            elif attn_mask.shape == (B * H, T, S):  # PyTorch's layout
                attn_mask = attn_mask.view(B, H, T, S)  # (B·H, T, S) -> (B, H, T, S)
            else:
                raise ValueError(
                    f"{fn}: a 3-D attn_mask must be (B, T, S) = {(B, T, S)} or "
                    f"PyTorch's (B*H, T, S) = {(B * H, T, S)}, got "
                    f"{tuple(attn_mask.shape)}"
                )
        try:
            ok = torch.broadcast_shapes(attn_mask.shape, (B, H, T, S)) == (B, H, T, S)
        except RuntimeError:
            ok = False
        if not ok or attn_mask.dim() > 4:
            raise ValueError(
                f"{fn}: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast "
                f"to the scores (B, H, T, S) = {(B, H, T, S)}"
            )
    mask = combine_masks(attn_mask, key_padding_mask, dtype=dtype)
    if mask is not None and mask.dtype != torch.bool and mask.dtype != dtype:
        mask = mask.to(dtype)
    return mask


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the real positions of each row, (..., T) -> (..., T); zero on
    padding. A row with no real position is all zeros by construction (``torch.where``),
    never NaN; a NaN score at a real position stays NaN (NaN in, NaN out, as PyTorch)."""
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (..., T)
    return torch.where(mask.any(-1, keepdim=True), w, torch.zeros_like(w))
