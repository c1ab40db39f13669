"""Attention masks, one convention everywhere: boolean ``True`` = may attend.

This is the convention of :func:`torch.nn.functional.scaled_dot_product_attention`.
(:class:`torch.nn.MultiheadAttention` uses the opposite for its boolean masks: there
``True`` means "masked out".) A float mask is *added* to the scores: ``0`` where a key may
be attended, a large negative number (``-inf``, or in older code ``-10000``) where not.

Shapes: T queries, S keys. A mask broadcasts against scores of shape ``(..., T, S)``.

Float masks are additive in both libraries and mean the same thing in both: nothing
is ever flipped. Only *boolean* masks differ between ``F.scaled_dot_product_attention``
(and attnlab: ``True`` = may attend) and ``nn.MultiheadAttention`` (``True`` = blocked).
A float mask of 0/1 indicators is therefore not a mask at all (it adds 1 to some
scores); :class:`attnlab.MultiHeadAttention` refuses one.

Every mask builder of the library lives here (one home per concept): :func:`causal_mask`,
:func:`padding_mask`, :func:`band_mask` (sliding window, causal, top-left or
bottom-right aligned), and, outside the top-level namespace (``__all__``),
:func:`streaming_mask` (rolling cache + sinks), :func:`position_mask` (from positions,
chapter 13), :func:`head_pattern_mask` (previous-token and induction pairs, chapter 12),
:func:`sparse_pattern_mask` (chapter 9's sparse patterns) and :func:`masked_softmax`.
The modules that once built their own re-export them.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import operator
import os
import sys
import warnings
from collections.abc import Iterator, Sequence

import torch

from . import validation as V

__all__ = [
    "causal_mask",
    "padding_mask",
    "to_additive",
    "apply_mask",
    "check_mask",
    "combine_masks",
    "fully_masked_rows",
    "warn_if_nothing_attended",
    "MaskConventionWarning",
    "derived_masks",
    "canonical_mask",
    "band_mask",
]

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


def _size(value, name: str, fn: str, low: int) -> int:
    """An integer size (Python or NumPy int, not bool or float) >= ``low``."""
    if isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be an int, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an int, got {value!r}") from None
    if value < low:
        raise ValueError(f"{fn}: {name} must be >= {low}, got {value}")
    return value


def causal_mask(
    T: int, S: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """Lower-triangular boolean mask ``(T, S)``: query ``i`` may attend keys ``j <= i``.

    The triangle is aligned to the top left, as ``is_causal`` in
    :func:`torch.nn.functional.scaled_dot_product_attention`: query ``i`` sees keys
    ``0..i`` for any S. ``T = 0`` or ``S = 0`` give an empty mask (as PyTorch).

    Parameters
    ----------
    T : the number of queries, an int >= 0.
    S : the number of keys, an int >= 0; None means ``T``.
    device : where to build the mask.

    Returns
    -------
    boolean tensor ``(T, S)``, ``True`` = may attend (``j <= i``).

    Raises
    ------
    TypeError
        ``T`` or ``S`` is not an int.
    ValueError
        ``T`` or ``S`` is negative.
    """
    T = V.integer(T, "T", "causal_mask", low=0)
    S = T if S is None else V.integer(S, "S", "causal_mask", low=0)
    return torch.ones(T, S, dtype=torch.bool, device=device).tril()  # (T, S)


def streaming_mask(
    T: int, window: int, n_sink: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """(T, T) bool, True = may attend: causal, keys among the last ``window`` positions
    (the query's own included) or among the first ``n_sink`` (a decoder with a rolling
    cache and attention sinks), on ``device``. Re-exported by :mod:`attnlab.serving`,
    its 0.1 home; not in the top-level namespace."""
    T = V.integer(T, "T", "streaming_mask", low=0)
    window = V.integer(window, "window", "streaming_mask", low=1)
    n_sink = V.integer(n_sink, "n_sink", "streaming_mask", low=0)
    i = torch.arange(T, device=device)[:, None]  # (T, 1)
    j = torch.arange(T, device=device)[None, :]  # (1, T)
    return (j <= i) & ((i - j < window) | (j < n_sink))  # (T, T)


def padding_mask(
    lengths: torch.Tensor | Sequence[int],
    S: int | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Boolean key mask ``(B, S)``: ``True`` on the first ``lengths[b]`` positions.

    Use it as ``mask[:, None, :]`` for scores ``(B, T, S)`` or ``mask[:, None, None, :]``
    for per-head scores ``(B, H, T, S)``.

    Parameters
    ----------
    lengths : the real length of each sequence, ``(B,)`` integers >= 0 (a tensor or a
        list).
    S : the padded length; None means ``max(lengths)``.
    device : where to build the mask.

    Returns
    -------
    boolean tensor ``(B, S)``, ``True`` on real tokens (= may attend).

    Raises
    ------
    TypeError
        ``lengths`` are not integers.
    ValueError
        ``lengths`` is not 1-D, a length is negative or exceeds ``S``.
    """
    try:
        lengths = torch.as_tensor(lengths, device=device)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"padding_mask: lengths must be integers (B,), got {lengths!r}"
        ) from e
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if lengths.numel() == 0:
        lengths = lengths.long()  # torch.as_tensor([]) is float
    if (
        lengths.is_floating_point()
        or lengths.is_complex()
        or lengths.dtype == torch.bool
    ):
        raise TypeError(
            f"padding_mask: lengths must be integers, got {lengths.tolist()} "
            f"({lengths.dtype})"
        )
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    if S is None:
        S = int(lengths.max()) if lengths.numel() else 0
    else:
        S = _size(S, "S", "padding_mask", 0)
    if lengths.numel() and int(lengths.max()) > S:
        raise ValueError(f"a length exceeds S={S}: {lengths.tolist()}")
    return torch.arange(S, device=lengths.device) < lengths[:, None]  # (B, S)


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
    os.path.dirname(os.path.abspath(__file__)) + os.sep,  # attnlab
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


def _convention_scan(mask: torch.Tensor, name: str, fn: str) -> None:
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
        if not _DERIVED.get():
            _convention_scan(m, name, fn)
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


# ------------------------------------------------ bands, positions and patterns
# Every mask builder of the library lives here (one home per concept); the modules that
# once built their own re-export them: attnlab.efficient (band_mask), attnlab.circuits
# (pattern_mask), attnlab.classifiers (masked_softmax), chapter 9's widgets.
ALIGNS = ("top_left", "bottom_right")


def check_window(window) -> None:
    """A band's half-width: ``None`` (no band) or an int >= 0."""
    if window is None:
        return
    if isinstance(window, bool) or not isinstance(window, int):
        raise TypeError(f"window must be an int >= 0, got {window!r}")
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")


def check_align(align) -> None:
    """Where a causal triangle or band sits when T != S: one of :data:`ALIGNS`."""
    if align not in ALIGNS:
        raise ValueError(f"align must be one of {ALIGNS}, got {align!r}")


def diagonal_offset(T: int, S: int, align: str) -> int:
    """Key index on the diagonal of query 0: 0 (top-left) or S - T (bottom-right)."""
    return 0 if align == "top_left" else S - T


def band_mask(
    T: int,
    S: int,
    window: int | None = None,
    is_causal: bool = False,
    device=None,
    align: str = "top_left",
) -> torch.Tensor:
    """Boolean (T, S) mask, ``True`` = may attend: ``|i + o - j| <= window`` (no limit
    if ``window`` is None) and ``j <= i + o`` when causal, with ``o = 0`` for
    ``align="top_left"`` and ``o = S - T`` for ``"bottom_right"``.

    Parameters
    ----------
    T, S : the numbers of queries and keys, ints >= 0.
    window : the half-width of the band (an int >= 0), or None for no band.
    is_causal : also block the keys after the diagonal.
    device : where to build the mask.
    align : ``"top_left"`` (as ``is_causal`` in PyTorch) or ``"bottom_right"`` (the
        last query sits on the last key, as in a KV cache).

    Returns
    -------
    boolean tensor ``(T, S)``, ``True`` = may attend.

    Raises
    ------
    TypeError
        ``T``, ``S`` or ``window`` is not an int, or ``is_causal`` not a bool.
    ValueError
        ``T``, ``S`` or ``window`` is negative, or ``align`` is not one of the two.
    """
    T = V.integer(T, "T", "band_mask", low=0)
    S = V.integer(S, "S", "band_mask", low=0)
    is_causal = V.flag(is_causal, "is_causal", "band_mask")
    check_window(window)
    check_align(align)
    i = torch.arange(T, device=device)[:, None] + diagonal_offset(T, S, align)  # (T, 1)
    j = torch.arange(S, device=device)[None, :]  # (1, S)
    allowed = torch.ones(T, S, dtype=torch.bool, device=device)  # (T, S)
    if window is not None:
        allowed &= (i - j).abs() <= window
    if is_causal:
        allowed &= j <= i
    return allowed


def position_mask(
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    *,
    causal: bool,
    window: int | None,
) -> torch.Tensor | None:
    """Boolean (T, S) mask from positions: causal, and ``i - j < window``."""
    if not causal and window is None:
        return None
    diff = q_pos[:, None] - k_pos[None, :]  # (T, S)
    ok = diff >= 0 if causal else torch.ones_like(diff, dtype=torch.bool)
    if window is not None:
        ok = ok & (diff < window) & (diff > -window)
    return ok


def head_pattern_mask(ids: torch.Tensor, kind: str) -> torch.Tensor:
    """(B, T, T) bool: the query-key pairs a head of ``kind`` would attend to.

    ``"previous"``: key ``i - 1`` for every query ``i >= 1``. ``"induction"``: key
    ``j + 1`` for every earlier ``j < i`` holding the same token as query ``i`` (the
    token after the previous occurrence), with ``j + 1 <= i``.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise ValueError(f"ids must be (B, T), got {getattr(ids, 'shape', type(ids))}")
    B, T = ids.shape
    if kind == "previous":
        m = torch.zeros(T, T, dtype=torch.bool)
        m[torch.arange(1, T), torch.arange(T - 1)] = True  # (i, i - 1)
        return m.expand(B, T, T).clone()
    if kind == "induction":
        same = ids[:, :, None] == ids[:, None, :]  # (B, T, T): token i == token j
        same &= torch.ones(T, T, dtype=torch.bool).tril(-1)  # j < i only
        m = torch.zeros(B, T, T, dtype=torch.bool)
        m[:, :, 1:] = same[:, :, :-1]  # pair (i, j) -> (i, j + 1)
        return m & torch.ones(T, T, dtype=torch.bool).tril()  # j + 1 <= i
    raise ValueError(f"kind must be 'previous' or 'induction', got {kind!r}")


PATTERNS = ["full", "causal", "window", "dilated", "global+local", "strided"]


def sparse_pattern_mask(
    pattern: str,
    n: int,
    window: int = 4,
    dilation: int = 2,
    n_global: int = 2,
    causal: bool = False,
) -> torch.Tensor:
    """(n, n) boolean mask of ``pattern``; ``window`` keys on each side (times
    ``dilation`` apart for "dilated"); ``n_global`` first tokens attend and are
    attended everywhere for "global+local"; ``causal`` also forbids j > i."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    if window < 0 or dilation < 1 or n_global < 0:
        raise ValueError(
            f"need window >= 0, dilation >= 1, n_global >= 0, got {window}, "
            f"{dilation}, {n_global}"
        )
    i = torch.arange(n)[:, None]  # (n, 1)
    j = torch.arange(n)[None, :]  # (1, n)
    d = i - j  # (n, n)
    if pattern in ("full", "causal"):
        mask = torch.ones(n, n, dtype=torch.bool)
    elif pattern == "window":
        mask = d.abs() <= window
    elif pattern == "strided":  # local heads + strided heads, merged in one mask
        if window < 1:
            raise ValueError(
                f"the strided pattern needs window (the stride) >= 1, got {window}"
            )
        mask = (d.abs() < window) | (d % window == 0)
    elif pattern == "dilated":
        mask = (d.abs() <= window * dilation) & (d % dilation == 0)
    else:  # global + local
        glob = (i < n_global) | (j < n_global)
        mask = (d.abs() <= window) | glob
    if causal or pattern == "causal":
        mask = mask & (j <= i)
    return mask


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the real positions of each row, (..., T) -> (..., T); zero on
    padding. A row with no real position is all zeros by construction (``torch.where``),
    never NaN; a NaN score at a real position stays NaN (NaN in, NaN out, as PyTorch)."""
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (..., T)
    return torch.where(mask.any(-1, keepdim=True), w, torch.zeros_like(w))
