"""The mask builders: causal, padding, band (sliding window), streaming (rolling cache
and sinks), from positions, and the patterns of chapters 9 and 12. Each returns a
boolean mask, ``True`` = may attend.

Part of :mod:`attnlab.masking`; import the names from there.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from .. import validation as V
from ._checks import check_align, check_window, diagonal_offset


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
