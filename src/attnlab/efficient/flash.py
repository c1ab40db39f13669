"""Flash attention in PyTorch (tiled forward with an online softmax, tiled backward
from the log-sum-exp) and sliding-window attention on it. On CUDA, the Triton kernels
(forward and backward) of :mod:`attnlab.kernels.triton_flash`, with the causal or
banded mask, the key padding mask, the alignment and grouped-query attention inside."""

from __future__ import annotations

import math

import torch

from .. import validation as V
from ..masking import check_align, check_window, diagonal_offset
from .tiles import (
    BLOCK_K,
    BLOCK_Q,
    LOG2E,
    check_tiled_qkv,
    tile_mask,
)


# -------------------------------------------------------------- torch forward/backward
def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for 16-bit inputs, else the input dtype: the statistics' precision."""
    return torch.promote_types(dtype, torch.float32)


def _flash_forward(q, k, v, scale, causal, window, block_q, block_k, offset=0,
                   kpm=None):  # fmt: skip
    """Tiled forward. q (N, T, Dh), k (N, S, Dh), v (N, S, Dv) -> out (N, T, Dv), lse (N, T).

    Scores, running max ``m`` and running sum ``l`` are in base 2 (``q`` is scaled by
    ``scale * LOG2E`` and ``exp2`` replaces ``exp``); ``lse`` is returned in base e.
    Scores, statistics, accumulator and ``lse`` are float32 for 16-bit inputs (each
    block is cast as it is loaded); ``out`` has the input dtype. ``kpm (N, S)`` bool,
    True = this key may be attended (padding otherwise).
    """
    N, T, _ = q.shape
    S, Dv = k.shape[1], v.shape[2]
    f = _acc_dtype(q.dtype)  # float32 for float16/bfloat16
    out = q.new_empty(N, T, Dv)  # (N, T, Dv), input dtype
    lse = q.new_empty(N, T, dtype=f)  # (N, T)
    kt = k.transpose(1, 2)  # (N, Dh, S), a view
    tile = q.new_empty(N, min(block_q, T), min(block_k, S), dtype=f)  # reused buffer
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        qi = q[:, i0:i1].to(f) * (scale * LOG2E)  # (N, Bq, Dh): base-2 scores below
        m = q.new_full((N, i1 - i0), -math.inf, dtype=f)  # running max     (N, Bq)
        l = q.new_zeros(N, i1 - i0, dtype=f)  # running sum of 2^(s - m)    (N, Bq)
        acc = q.new_zeros(N, i1 - i0, Dv, dtype=f)  # unnormalised output  (N, Bq, Dv)
        for j0 in range(0, S, block_k):
            j1 = min(j0 + block_k, S)
            mask = tile_mask(i0, i1, j0, j1, causal, window, q.device, offset)
            if isinstance(mask, str):
                continue  # the whole tile is masked: never computed
            s = tile[:, : i1 - i0, : j1 - j0]  # (N, Bq, Bk)
            torch.bmm(qi, kt[:, :, j0:j1].to(f), out=s)  # (N, Bq, Dh) @ (N, Dh, Bk)
            if mask is not None:
                s.masked_fill_(~mask, -math.inf)  # (N, Bq, Bk)
            if kpm is not None:
                s.masked_fill_(~kpm[:, None, j0:j1], -math.inf)  # padded keys
            m_new = torch.maximum(m, s.amax(-1))  # (N, Bq)
            # rows that saw only masked keys keep -inf: subtract 0 there, no NaN
            m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)
            p = s.sub_(m_safe[..., None]).exp2_()  # (N, Bq, Bk), in place of s
            alpha = torch.exp2(m - m_safe)  # rescales what was summed so far  (N, Bq)
            l.mul_(alpha).add_(p.sum(-1))  # (N, Bq)
            acc.mul_(alpha[..., None]).baddbmm_(p, v[:, j0:j1].to(f))  # += P V
            m = m_new
        dead = l == 0  # rows that saw no key: output 0, L = +inf so P = 0 in backward
        out[:, i0:i1] = acc / l.masked_fill(dead, 1.0)[..., None]  # (N, Bq, Dv)
        lse2 = m + torch.log2(l)  # base-2 log-sum-exp  (N, Bq)
        lse[:, i0:i1] = (lse2 / LOG2E).masked_fill(dead, math.inf)  # base e
    return out, lse


def flash_forward_tiles(q, k, v, scale, causal, window, block_q, block_k):
    """The tiled forward for other modules (ring attention merges its blocks with
    it): ``q (N, T, Dh)``, ``k (N, S, Dh)``, ``v (N, S, Dv)`` -> ``out (N, T, Dv)``,
    ``lse (N, T)`` (base e; ``+inf`` for a row with no key). Not API: no checks."""
    return _flash_forward(q, k, v, scale, causal, window, block_q, block_k)


def _flash_backward(q, k, v, out, lse, dout, scale, causal, window, block_q, block_k,
                    offset=0, kpm=None):  # fmt: skip
    """Recompute each tile's probabilities from the saved log-sum-exp; never (T, S).

    Gradients are accumulated in float32 for 16-bit inputs and cast back at the end.
    ``D = rowsum(dO * O)`` is computed one row block at a time, as the tiles: a
    full-size float32 product ``dout.to(f) * out.to(f)`` would hold three (N, T, Dv)
    float32 temporaries at once."""
    T, S = q.shape[1], k.shape[1]
    f = _acc_dtype(q.dtype)
    dq = torch.zeros_like(q, dtype=f)  # (N, T, Dh)
    dk = torch.zeros_like(k, dtype=f)  # (N, S, Dh)
    dv = torch.zeros_like(v, dtype=f)  # (N, S, Dv)
    lse2 = lse.to(f) * LOG2E  # base 2, as the scores below                  (N, T)
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        qi = q[:, i0:i1].to(f) * (scale * LOG2E)  # (N, Bq, Dh): base-2 scores
        doi = dout[:, i0:i1].to(f)  # (N, Bq, Dv)
        delta = (doi * out[:, i0:i1].to(f)).sum(-1)  # D_i = dO_i . O_i      (N, Bq)
        for j0 in range(0, S, block_k):
            j1 = min(j0 + block_k, S)
            mask = tile_mask(i0, i1, j0, j1, causal, window, q.device, offset)
            if isinstance(mask, str):
                continue
            kj, vj = k[:, j0:j1].to(f), v[:, j0:j1].to(f)  # (N, Bk, Dh), (N, Bk, Dv)
            s = torch.bmm(qi, kj.transpose(1, 2))  # (N, Bq, Bk)
            if mask is not None:
                s.masked_fill_(~mask, -math.inf)
            if kpm is not None:
                s.masked_fill_(~kpm[:, None, j0:j1], -math.inf)
            p = s.sub_(lse2[:, i0:i1, None]).exp2_()  # P recomputed  (N, Bq, Bk)
            dv[:, j0:j1].baddbmm_(p.transpose(1, 2), doi)  # += P^T dO    (N, Bk, Dv)
            dp = torch.bmm(doi, vj.transpose(1, 2))  # dP = dO V^T          (N, Bq, Bk)
            ds = p.mul_(dp.sub_(delta[..., None]))  # dS = P * (dP - D)
            dq[:, i0:i1].baddbmm_(ds, kj, alpha=scale)  # += dS K * scale  (N, Bq, Dh)
            dk[:, j0:j1].baddbmm_(ds.transpose(1, 2), qi, alpha=1 / LOG2E)  # dS^T Q s
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _triton_usable(q) -> bool:
    """The Triton forward takes CUDA tensors in float16, bfloat16 or float32; float64
    (gradcheck, references) stays on the torch loop."""
    if not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    from ..kernels import triton_flash

    return triton_flash.available()


class _FlashAttention(torch.autograd.Function):
    """The torch loop, forward and backward (the CPU path and the readable reference)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, causal, window, block_q, block_k, offset, kpm):
        out, lse = _flash_forward(
            q, k, v, scale, causal, window, block_q, block_k, offset, kpm
        )
        ctx.save_for_backward(q, k, v, out, lse)  # O(T) statistics, no (T, S) tensor
        ctx.kpm = kpm
        ctx.args = (scale, causal, window, block_q, block_k, offset)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        scale, causal, window, block_q, block_k, offset = ctx.args
        dq, dk, dv = _flash_backward(
            q,
            k,
            v,
            out,
            lse,
            dout.contiguous(),
            scale,
            causal,
            window,
            block_q,
            block_k,
            offset,
            kpm=ctx.kpm,
        )
        return dq, dk, dv, None, None, None, None, None, None, None


def _blocks(block_size):
    if block_size is None:
        return BLOCK_Q, BLOCK_K
    sizes = (
        (block_size, block_size)
        if not isinstance(block_size, (tuple, list))
        else tuple(block_size)
    )
    if len(sizes) != 2 or any(
        isinstance(b, bool) or not isinstance(b, int) for b in sizes
    ):
        raise TypeError(
            f"block_size must be an int or a pair of ints (Bq, Bk), got {block_size!r}"
        )
    if min(sizes) < 1:
        raise ValueError(f"block sizes must be >= 1, got {block_size}")
    return int(sizes[0]), int(sizes[1])


def _padding_mask(key_padding_mask, lead, S, device):
    """``key_padding_mask`` (B, S) or (*lead, S), True = attend -> (N, S) bool."""
    if key_padding_mask is None:
        return None
    m = key_padding_mask
    if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
        raise TypeError(
            "key_padding_mask must be a bool tensor, True = may attend (as SDPA's "
            f"attn_mask), got {getattr(m, 'dtype', type(m).__name__)}"
        )
    if (
        m.dim() < 1
        or m.shape[-1] != S
        or m.dim() - 1 > len(lead)
        or tuple(m.shape[:-1]) != tuple(lead[: m.dim() - 1])
    ):
        raise ValueError(
            f"key_padding_mask must have shape (B, S) = {(*lead[:1], S)} or "
            f"(*leading dims, S) = {(*lead, S)}, got {tuple(m.shape)}"
        )
    m = m.reshape(*m.shape[:-1], *([1] * (len(lead) - m.dim() + 1)), S)
    return m.expand(*lead, S).reshape(-1, S).to(device)  # (N, S)


def _group(q, k, v, fn):
    """Grouped-query attention: k, v (..., H_kv, S, D) with H a multiple of H_kv -> G."""
    if q.shape[:-2] == k.shape[:-2]:
        return 1
    if (
        q.dim() >= 3
        and q.shape[:-3] == k.shape[:-3]
        and k.shape[-3] > 0
        and q.shape[-3] % k.shape[-3] == 0
        and k.shape[:-2] == v.shape[:-2]
    ):
        return q.shape[-3] // k.shape[-3]
    raise ValueError(
        f"{fn}: q, k, v must share their leading (batch, head) dims, or k, v have "
        f"H_kv heads with H a multiple of H_kv (grouped-query attention), got "
        f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    )


def _tiled(
    q, k, v, scale, causal, window, block_size, align="top_left", key_padding_mask=None
):
    lead, (T, Dh), S, Dv = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    check_align(align)
    fn = "flash_attention" if window is None else "sliding_window_attention"
    scale = V.real(scale, "scale", fn, optional=True)  # NaN/inf/str refused
    causal = V.flag(causal, "is_causal", fn)
    if scale is None:  # head width 0: the scores are all 0, any scale (as SDPA)
        scale = 1.0 / math.sqrt(Dh) if Dh else 1.0
    bq, bk = _blocks(block_size)
    kpm = _padding_mask(key_padding_mask, lead, S, q.device)
    group = _group(q, k, v, "flash_attention")
    if (T == 0 or S == 0) and group > 1:
        k, v = k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)
    if T == 0 or S == 0:  # nothing to tile: (T, 0) @ (0, Dv) is zeros, differentiable
        return (q @ k.transpose(-2, -1)) @ v  # (..., T, Dv), 0 elements or zeros
    if _triton_usable(q):  # CUDA: the Triton kernels, forward and backward
        from ..kernels.triton_flash import TritonFlash

        N = math.prod(lead)
        q3 = q.reshape(N, T, Dh).contiguous()  # (N, T, Dh), N = B * H
        k3 = k.reshape(N // group, S, Dh).contiguous()  # (N / G, S, Dh)
        v3 = v.reshape(N // group, S, Dv).contiguous()  # (N / G, S, Dv)
        out = TritonFlash.apply(
            q3,
            k3,
            v3,
            float(scale),
            bool(causal),
            window,
            diagonal_offset(T, S, align),
            kpm,
        )
        return out.reshape(*lead, T, Dv)  # (..., T, Dv)
    if group > 1:  # the readable torch loop repeats the shared heads
        k, v = k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)
    N = math.prod(lead)
    q3 = q.reshape(N, T, Dh).contiguous()  # (N, T, Dh), N = B * H
    k3 = k.reshape(N, S, Dh).contiguous()  # (N, S, Dh)
    v3 = v.reshape(N, S, Dv).contiguous()  # (N, S, Dv)
    out = _FlashAttention.apply(
        q3,
        k3,
        v3,
        float(scale),
        bool(causal),
        window,
        bq,
        bk,
        diagonal_offset(T, S, align),
        kpm,
    )
    return out.reshape(*lead, T, Dv)  # (..., T, Dv)


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] | None = None,
    key_padding_mask: torch.Tensor | None = None,
    align: str = "top_left",
) -> torch.Tensor:
    r"""Exact softmax attention without ever holding the (T, S) scores.

    .. math:: \mathrm{out} = \mathrm{softmax}(s\, q k^\top)\, v,\qquad s = 1/\sqrt{D_h}

    computed tile by tile with the online softmax (Milakov & Gimelshein 2018) as in
    FlashAttention (Dao et al. 2022; loop order of FlashAttention-2, Dao 2023). Saves
    only the output and one log-sum-exp per query; the hand-written backward recomputes
    each tile's probabilities. Extra memory O(T + Bq·Bk) instead of O(T·S).

    Parameters
    ----------
    q, k, v : (..., T, Dh), (..., S, Dh), (..., S, Dv), same leading dims and dtype
        (or k, v with H_kv heads in dim -3, H a multiple of H_kv: grouped-query
        attention, run without copying the shared heads on CUDA); float16/bfloat16 inputs are computed with float32 statistics and returned in
        their own dtype
    is_causal : query ``i`` sees keys ``j <= i`` (top-left) or ``j <= i + S - T``
        (``align="bottom_right"``); tiles beyond the diagonal are skipped
    scale : multiplies the scores, default ``1 / sqrt(Dh)``
    block_size : rows and columns per tile, an int or (Bq, Bk); default (256, 256) in
        the readable torch loop; ignored on CUDA with Triton, whose kernels pick their
        tiles by autotuning (keyed on T, S, Dh, the mask and the dtype)
    key_padding_mask : bool (B, S) or (..., S), True = may attend (variable-length
        batches); a query with no allowed key gets a zero output
    align : ``"top_left"`` (default, as SDPA's ``is_causal``) or ``"bottom_right"``

    Returns
    -------
    out : (..., T, Dv), equal to :func:`torch.nn.functional.scaled_dot_product_attention`
    """
    check_tiled_qkv(q, k, v, "flash_attention", gqa=True)
    return _tiled(q, k, v, scale, is_causal, None, block_size, align, key_padding_mask)


def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] | None = None,
    align: str = "top_left",
) -> torch.Tensor:
    """Local attention: query ``i`` sees keys with ``|i - j| <= window`` (and
    ``j <= i`` when causal), as in Longformer (Beltagy et al. 2020); with
    ``align="bottom_right"`` the band is centred on key ``i + S - T``.

    The tiled kernel of :func:`flash_attention` visits only the tiles that meet the
    band, so time is O(T·window) instead of O(T·S), and extra memory is O(T + tile), as
    for flash attention (only the output and one log-sum-exp per query are kept).
    Equal to
    :func:`torch.nn.functional.scaled_dot_product_attention` with
    ``attn_mask=band_mask(T, S, window, is_causal, align=align)``; a query with no key
    in its band
    (possible when T > S) gets a zero output.

    Parameters
    ----------
    q, k, v : (..., T, Dh), (..., S, Dh), (..., S, Dv)
    window : int >= 0, keys at distance at most ``window`` on each side; ``None``
        means no band (full attention, as ``band_mask`` reads it)
    block_size : default ``min(256, max(32, window))`` rows and columns per tile (the
        torch loop; the Triton kernels on CUDA autotune theirs)

    Returns
    -------
    tensor ``(..., T, Dv)`` in the dtype of ``q``.

    Raises
    ------
    TypeError
        ``q``, ``k`` or ``v`` is not a floating-point tensor, or their dtypes differ.
    ValueError
        the shapes do not agree (``Dh``, ``S``, the leading dimensions), ``window``
        is negative, ``scale`` is not finite, or ``align`` is not one of the two.
    """
    check_tiled_qkv(q, k, v, "sliding_window_attention", gqa=True)
    if window is None:  # no band at all, as band_mask(T, S, None): full attention
        return flash_attention(
            q,
            k,
            v,
            is_causal=is_causal,
            scale=scale,
            block_size=block_size,
            align=align,
        )
    check_window(window)
    if block_size is None:
        block_size = min(BLOCK_Q, max(32, window))
    return _tiled(q, k, v, scale, is_causal, window, block_size, align)
