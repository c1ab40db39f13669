"""The checks of masks: does a mask fit the scores, does a row keep a key, does a
mask look as if it was written for ``nn.MultiheadAttention`` (and where to point the
warning), and the arguments of a band (window, alignment).

Part of :mod:`attnlab.masking`; import the names from there.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Iterator

import torch

from .. import validation as V

_DERIVED = contextvars.ContextVar("attnlab_derived_masks", default=False)


@contextlib.contextmanager
def derived_masks() -> Iterator[None]:
    """Inside this block masks are trusted to follow attnlab's convention (a model built
    them from lengths or pad ids), so :func:`warn_if_nothing_attended` stays silent: a
    row with no key there means an empty input, not a PyTorch-style mask.

    Returns
    -------
    A context manager (``with attnlab.derived_masks(): ...``); the setting is
    per context (thread or task) and restored on leaving the block.
    """
    token = _DERIVED.set(True)
    try:
        yield
    finally:
        _DERIVED.reset(token)


def in_derived_masks() -> bool:
    """Whether the caller runs inside :func:`derived_masks` (masks a model built)."""
    return _DERIVED.get()


def check_mask(mask: torch.Tensor, scores: torch.Tensor, name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` broadcasts to ``scores`` (..., T, S).

    Parameters
    ----------
    mask : the mask to check, boolean or float.
    scores : the scores ``(..., T, S)`` it is meant for.
    name : the argument's name, for the messages.

    Raises
    ------
    TypeError
        ``mask`` or ``scores`` is not a tensor, or ``mask`` neither boolean nor float.
    ValueError
        ``mask`` does not broadcast to ``scores`` (nor may it add dimensions); under
        :func:`attnlab.debug`, a float ``mask`` holds NaN or ``+inf``.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if not isinstance(scores, torch.Tensor):
        raise TypeError(
            f"check_mask: scores must be a torch.Tensor, got {type(scores)}"
        )
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"{name} must be bool (True = may attend) or float (added), got {mask.dtype}"
        )
    if V.debugging() and mask.is_floating_point() and mask.numel():
        if bool((torch.isnan(mask) | torch.isposinf(mask)).any()):
            raise ValueError(
                f"{name} is a float mask (added to the scores) containing NaN or +inf; "
                "use 0 where a key may be attended and -inf where not"
            )
    try:
        shape = torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError:
        shape = None
    if shape != scores.shape:  # the mask may not add dimensions to the scores either
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the scores of "
            f"shape {tuple(scores.shape)} (..., T, S)"
        )


def fully_masked_rows(scores: torch.Tensor) -> torch.Tensor:
    """Boolean ``(..., T, 1)``: ``True`` where every masked score of the row is ``-inf``.

    Such a query has nothing to attend to; attention gives it zero weights and a zero
    output. (A finite stand-in such as ``-10000`` is not detected: added to every
    score of the row it shifts them all by one constant, which cancels in the
    softmax, so in float32 the row gets the *unmasked* weights, and uniform ones only
    where the constant swamps the precision, e.g. in float16. Only where the stand-in
    blocks some keys and not others does it act as a mask.
    ``F.scaled_dot_product_attention`` returns zeros for a row of ``-inf`` on a CPU, as
    attnlab does.)

    Parameters
    ----------
    scores : tensor ``(..., T, S)`` of masked scores (at least 1-D).

    Returns
    -------
    boolean tensor ``(..., T, 1)``.

    Raises
    ------
    ValueError
        ``scores`` is 0-D.
    """
    V.tensor(scores, "scores", "fully_masked_rows", min_dim=1)
    return torch.isneginf(scores).all(dim=-1, keepdim=True)


class MaskConventionWarning(UserWarning):
    """A mask that looks as if it was written for ``nn.MultiheadAttention``."""


_INTERNAL = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # attnlab
    os.path.dirname(os.path.abspath(torch.__file__))
    + os.sep,  # torch (Module.__call__)
)


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the function calling this one
    point at the first frame outside attnlab and torch: the reader's own line, however
    deep the call came (a layer inside a model inside ``nn.Module.__call__``). A fixed
    number would land in torch's ``module.py`` (``skip_file_prefixes`` is 3.12+)."""
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
        level += 1
    return level


def warn_if_nothing_attended(
    mask: torch.Tensor, name: str = "key_padding_mask"
) -> bool:
    """Warn if a boolean mask leaves some row with no key at all; return whether it did.

    ``mask`` is a padding mask ``(B, S)`` (a row per sequence) or an attention mask
    ``(..., T, S)`` (a row per query). Here ``True`` = may attend;
    ``nn.MultiheadAttention`` reads the same argument names the other way round
    (``True`` = blocked). The unambiguous sign of such a mask is a row that blocks
    every key, which is rarely intended:

    * a PyTorch-style padding mask (``True`` = pad) blocks every key of each
      sequence that has no padding (and of the whole batch when none has any);
    * a PyTorch-style causal mask ``torch.triu(ones(T, S), 1)`` (``True`` above the
      diagonal) blocks every key of the last query.

    Silent on float masks, on masks with no key at all (S = 0), on masks in our
    convention whose every row keeps a key (e.g. a left-padded batch) and inside
    :func:`derived_masks` (a model's own masks: an empty source there is just empty).
    Filter :class:`MaskConventionWarning` where a dead row is intended.

    Parameters
    ----------
    mask : the mask to inspect (any dtype; only a bool mask can warn).
    name : the argument's name in the message; a name ending in
        ``key_padding_mask`` is read as a padding mask (a row per sequence), any
        other as an attention mask (a row per query).

    Returns
    -------
    bool, whether a :class:`MaskConventionWarning` was issued.

    Raises
    ------
    TypeError
        ``mask`` is not a tensor.
    """
    V.tensor(mask, "mask", "warn_if_nothing_attended")
    if (
        _DERIVED.get()
        or mask.dtype != torch.bool
        or mask.dim() == 0
        or mask.shape[-1] == 0
        or mask.numel() == 0
    ):
        return False
    dead = ~mask.any(dim=-1)  # (..., rows)
    if not bool(dead.any()):
        return False
    n_dead, n_rows = int(dead.sum()), dead.numel()
    if name.endswith("key_padding_mask"):
        idx = dead.nonzero().squeeze(-1).tolist() if dead.dim() == 1 else "some"
        what = (
            f"{name} blocks every key of every sequence (all False)"
            if n_dead == n_rows
            else f"{name} blocks every key of sequence(s) {idx} while the others "
            "keep some"
        )
        fix = f"Pass ~{name} if it was written for PyTorch"
        sense = "(True = padding)"
    else:
        T, S = mask.shape[-2:] if mask.dim() >= 2 else (1, mask.shape[-1])
        triu = mask.dim() == 2 and torch.equal(
            mask, torch.ones(T, S, dtype=torch.bool, device=mask.device).triu(1)
        )
        what = (
            f"{name} is True strictly above the diagonal (torch.triu(..., 1)): "
            "PyTorch's causal mask, which here lets each query see only the future "
            "and the last query nothing"
            if triu
            else f"{name} leaves {n_dead} of {n_rows} query rows with no key"
        )
        fix = (
            f"Pass ~{name}, or attnlab.causal_mask(T, S) / is_causal=True, if it was "
            "written for PyTorch"
        )
        sense = "(True = blocked)"
    warnings.warn(
        f"{what}; such rows get a zero output. In attnlab True = may attend; "
        f"nn.MultiheadAttention reads the same name the other way round {sense}. "
        f"{fix}.",
        MaskConventionWarning,
        stacklevel=caller_stacklevel(),
    )
    return True


def convention_scan(mask: torch.Tensor, name: str, fn: str) -> None:
    """The conventions a caller's mask can get wrong, read with one host sync: a float
    mask with NaN or +inf, or of 0/1 indicators (ValueError); a boolean mask with a
    row that blocks every key (:class:`MaskConventionWarning`)."""
    if mask.numel() == 0:
        return
    if mask.dtype == torch.bool:
        warn_if_nothing_attended(mask, name)
        return
    flags = torch.stack(
        [
            (torch.isnan(mask) | torch.isposinf(mask)).any(),
            ((mask == 0) | (mask == 1)).all() & (mask == 1).any(),
        ]
    ).tolist()  # one sync for both
    if flags[0]:
        raise ValueError(
            f"{fn}: {name} is a float mask (added to the scores) containing NaN or "
            "+inf; use 0 where a key may be attended and -inf where not"
        )
    if flags[1]:
        raise ValueError(
            f"{fn}: {name} is a float mask of 0s and 1s, but float masks are added to "
            "the scores (here and in PyTorch), so 1 would not mean 'keep' or "
            "'block'. Pass a bool mask (True = may attend) or a float mask with 0 "
            "and -inf"
        )


ALIGNS = ("top_left", "bottom_right")


def check_window(window) -> None:
    """A band's half-width: ``None`` (no band) or an int >= 0."""
    V.integer(window, "window", "band", low=0, optional=True)


def check_align(align) -> None:
    """Where a causal triangle or band sits when T != S: one of :data:`ALIGNS`."""
    if align not in ALIGNS:
        raise ValueError(f"align must be one of {ALIGNS}, got {align!r}")


def diagonal_offset(T: int, S: int, align: str) -> int:
    """Key index on the diagonal of query 0: 0 (top-left) or S - T (bottom-right)."""
    return 0 if align == "top_left" else S - T
