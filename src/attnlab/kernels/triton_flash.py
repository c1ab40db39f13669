"""FlashAttention in Triton (Tillet et al. 2019): forward and backward, read beside the
torch loop of :mod:`attnlab.efficient.flash`.

Forward. One Triton *program* computes one block of ``BLOCK_M`` query rows of one
(batch, head) — the body of the outer loop of :func:`attnlab.efficient.flash._flash_forward`
— and walks the key/value blocks with the same online softmax (FlashAttention-2's loop
order, Dao 2023), in base 2 like the torch loop (``exp2``, the scale multiplied by
log2(e)). The difference: the grid runs the row blocks in parallel.

The key blocks a program visits are cut into three ranges (:func:`kv_range`): blocks
that the causal or banded mask rules out entirely are never visited; blocks entirely
inside the band are visited *without* a mask (no comparison, no ``where``); only the
blocks that the band's edges cross (the diagonal ones, when causal) compute the mask.
This is the "two-stage" causal loop of Triton's fused-attention tutorial, extended to the
sliding window and to bottom-right alignment (T != S). With a causal mask, the row blocks
with the most work are launched first.

Backward (FlashAttention-2's, Dao 2023, as in Triton's tutorial): a small kernel computes
``delta_i = dO_i . O_i`` block by block (no full-size float32 temporary); one program per
key block keeps ``dK`` and ``dV`` on chip while it loops over the query blocks that see it
(for grouped-query attention, over the query heads of its group too), and one program per
query block accumulates ``dQ`` over its key blocks. Both recompute ``P`` from the saved
log-sum-exp, so the backward does 7 matrix products per tile instead of FlashAttention-2's
5 with an atomic ``dQ``, and needs no atomics and no float32 gradient buffers.

Grouped-query attention (``k``, ``v`` with ``H / G`` heads), a key padding mask and a
sliding window are handled inside the kernels. The tile sizes, warps and pipeline stages
are autotuned per (T, S bucket, head dim, dtype, causal, window); under Triton's
interpreter one configuration is pinned (:data:`INTERPRETER_CONFIGS`).

Used automatically by :func:`attnlab.flash_attention` for CUDA tensors when Triton is
installed (``pip install attnlab[gpu]``). On a machine without a GPU the kernels run in
Triton's interpreter (set ``TRITON_INTERPRET=1`` before importing triton): that is how
the tests check them. Interpreter traps avoided here: ``bf16`` operands of ``tl.dot``
are cast to float32 (the interpreter stores bf16 as integers), and nothing calls
``triton.runtime.driver.active`` (it raises on a CPU-only machine).
"""

from __future__ import annotations

import math

import torch

try:  # optional dependency: attnlab[gpu]
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

from .triton_flash_bwd import backward3
from .triton_tiles import (  # noqa: F401  (the configurations: re-exported)
    BWD_CONFIGS,
    DKDV_CONFIGS,
    DQ_CONFIGS,
    FP32_CONFIGS,
    FWD_CONFIGS,
    INTERPRETER_CONFIGS,
    LOG2E,
    TUNE_KEY,
    autotune_configs,
    available,
    decorated_interpreted,
    interpreting,
    launch_args,
    prune_configs,
    prune_for,
)

if triton is not None:
    from .triton_tiles import kv_range, round_for_dot, tile_allowed, tile_dot, to_store

__all__ = [
    "available",
    "interpreting",
    "kernels_interpreted",
    "triton_flash_forward",
    "triton_flash_backward",
    "triton_flash_attention",
    "prune_configs",
    "jit_kernels",
]

if triton is not None:
    # kernel-begin
    @triton.jit
    def _fwd_tiles(acc, l_i, m_i, q, Kn, Vn, KPMn, rows_k, start, end, S, W, qk_scale,
                   sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N: tl.constexpr,
                   MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
                   HAS_KPM: tl.constexpr, DOT_FP32: tl.constexpr):  # fmt: skip
        """The online softmax over the key blocks [start, end): the torch loop's body.
        MASKED: the band's edge crosses these blocks (else no mask is computed)."""
        for start_n in range(start, end, BLOCK_N):
            cols = start_n + tl.arange(0, BLOCK_N)  # (BN,)
            kt = tl.load(
                Kn + cols[None, :] * sk_s + dh[:, None] * sk_d,
                mask=(cols[None, :] < S) & (dh[:, None] < Dh),
                other=0.0,
            )  # K^T block (BDh, BN)
            s = tile_dot(q, kt, tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32)
            s = s * qk_scale  # base-2 logits  (BM, BN)
            if MASKED:
                s = tl.where(
                    tile_allowed(rows_k, cols, S, W, CAUSAL, WINDOW), s, -float("inf")
                )
            if HAS_KPM:  # padded keys
                keep = tl.load(KPMn + cols, mask=cols < S, other=0)
                s = tl.where(keep[None, :] != 0, s, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # dead rows: no NaN
            p = tl.math.exp2(s - m_safe[:, None])  # (BM, BN)
            alpha = tl.math.exp2(m_i - m_safe)  # rescale what was summed so far
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(
                Vn + cols[:, None] * sv_s + dv[None, :] * sv_d,
                mask=(cols[:, None] < S) & (dv[None, :] < Dv),
                other=0.0,
            )  # (BN, BDv)
            # P is rounded to the input dtype for the P V product (as FlashAttention-2
            # and -3 do); the statistics and the accumulator stay in float32
            p_r = round_for_dot(p, v.dtype, DOT_FP32)  # (BM, BN)
            acc = tile_dot(p_r, v, acc * alpha[:, None], DOT_FP32)  # (BM, BDv)
            m_i = m_new
        return acc, l_i, m_i

    @triton.jit
    def _flash_fwd_kernel(
        Q, K, V, O, L, KPM, qk_scale, T, S, Dh, Dv, OFF, W, GROUP, T_KEY, S_KEY,
        sq_n, sq_t, sq_d, sk_n, sk_s, sk_d, sv_n, sv_s, sv_d, so_n, so_t, so_d,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DH: tl.constexpr,
        BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
        HAS_KPM: tl.constexpr, DOT_FP32: tl.constexpr, INTERP_BF16: tl.constexpr,
    ):  # fmt: skip
        start_m = tl.program_id(0)  # which block of query rows
        if CAUSAL:  # the longest rows first: they finish with the others
            start_m = tl.num_programs(0) - 1 - start_m
        n = tl.program_id(1).to(tl.int64)  # which (batch, head); int64 offsets below
        nk = n // GROUP  # its key/value head (grouped-query attention)
        m0 = start_m * BLOCK_M
        rows = m0 + tl.arange(0, BLOCK_M)  # (BM,)
        dh = tl.arange(0, BLOCK_DH)
        dv = tl.arange(0, BLOCK_DV)
        q = tl.load(
            Q + n * sq_n + rows[:, None] * sq_t + dh[None, :] * sq_d,
            mask=(rows[:, None] < T) & (dh[None, :] < Dh),
            other=0.0,
        )  # (BM, BDh)
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")  # running max
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum
        acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)  # unnormalised output
        lo, f_lo, f_hi, hi = kv_range(
            m0, T, S, OFF, W, BLOCK_M, BLOCK_N, CAUSAL, WINDOW
        )
        Kn, Vn, KPMn = K + nk * sk_n, V + nk * sv_n, KPM + n * S
        rows_k = rows + OFF  # the rows in key coordinates
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, Kn, Vn, KPMn, rows_k, lo, f_lo, S, W, qk_scale,
                                   sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N,
                                   True, CAUSAL, WINDOW, HAS_KPM, DOT_FP32)  # fmt: skip
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, Kn, Vn, KPMn, rows_k, f_lo, f_hi, S, W, qk_scale,
                                   sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N,
                                   False, CAUSAL, WINDOW, HAS_KPM, DOT_FP32)  # fmt: skip
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, Kn, Vn, KPMn, rows_k, f_hi, hi, S, W, qk_scale,
                                   sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N,
                                   True, CAUSAL, WINDOW, HAS_KPM, DOT_FP32)  # fmt: skip
        dead = l_i == 0.0  # rows that saw no key
        out = acc / tl.where(dead, 1.0, l_i)[:, None]
        l_safe = tl.where(dead, 1.0, l_i)
        lse = tl.where(
            dead, float("inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453
        )
        tl.store(
            O + n * so_n + rows[:, None] * so_t + dv[None, :] * so_d,
            to_store(out, O.dtype.element_ty, INTERP_BF16),
            mask=(rows[:, None] < T) & (dv[None, :] < Dv),
        )
        tl.store(L + n * T + rows, lse, mask=rows < T)
        # kernel-end

    _fwd_tuned = triton.autotune(
        autotune_configs("fwd"), key=TUNE_KEY, prune_configs_by=prune_for("fwd")
    )(_flash_fwd_kernel)


# ---------------------------------------------------------------------- host wrappers
def _check_inputs(q, k, v, fn):
    if triton is None:
        raise ImportError(f"{fn} needs Triton: pip install 'attnlab[gpu]' (or triton)")
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda and not interpreting():
            raise ValueError(
                f"{fn} needs CUDA tensors, got {name} on {t.device} "
                "(use attnlab.flash_attention, which falls back to torch, or set "
                "TRITON_INTERPRET=1 before importing triton to run the interpreter)"
            )
        if not t.is_cuda and not kernels_interpreted():
            raise RuntimeError(
                f"{fn} got {name} on {t.device} with TRITON_INTERPRET set, but "
                "attnlab.kernels.triton_flash was imported before it was: its kernels "
                "are compiled ones, which need CUDA tensors. Set TRITON_INTERPRET=1 "
                "before anything imports attnlab.kernels (or triton)."
            )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{fn} takes float16/bfloat16/float32, got {q.dtype}")
    if (
        q.dim() < 3
        or k.dim() != q.dim()
        or v.dim() != q.dim()
        or q.shape[:-3] != k.shape[:-3]
        or k.shape[:-2] != v.shape[:-2]
        or q.shape[-1] != k.shape[-1]
        or k.shape[-2] != v.shape[-2]
        or q.shape[-3] % k.shape[-3] != 0
    ):
        raise ValueError(
            "shapes must be q (..., H, T, Dh), k (..., H_kv, S, Dh), v (..., H_kv, S, "
            f"Dv) with H divisible by H_kv, got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )


def _forward3(q3, k3, v3, scale, causal, window, offset, kpm, blocks=None):
    """q3 (N, T, Dh), k3 (Nk, S, Dh), v3 (Nk, S, Dv), contiguous -> out, lse (N, T)."""
    N, T = q3.shape[:2]
    out = torch.empty(N, T, v3.shape[2], dtype=q3.dtype, device=q3.device)  # (N, T, Dv)
    lse = torch.empty(N, T, dtype=torch.float32, device=q3.device)  # (N, T)
    kpm_t, sizes, keys, meta = launch_args(
        q3, k3, v3, scale, causal, window, offset, kpm
    )
    args = (q3, k3, v3, out, lse, kpm_t, scale * LOG2E, *sizes, *keys,
            *q3.stride(), *k3.stride(), *v3.stride(), *out.stride())  # fmt: skip
    if blocks is None:
        tuned_grid = lambda m: (triton.cdiv(T, m["BLOCK_M"]), N)  # noqa: E731
        _fwd_tuned[tuned_grid](*args, **meta)
    else:  # a fixed tile (bench/attention_cuda.py's tile sweep)
        bm, bn, *wst = blocks
        extra = dict(num_warps=wst[0], num_stages=wst[1]) if wst else {}
        grid = (triton.cdiv(T, bm), N)
        _flash_fwd_kernel[grid](*args, BLOCK_M=bm, BLOCK_N=bn, **meta, **extra)
    return out, lse


class TritonFlash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q3, k3, v3, scale, causal, window, offset, kpm):
        out, lse = _forward3(q3, k3, v3, scale, causal, window, offset, kpm)
        ctx.save_for_backward(q3, k3, v3, out, lse)  # O(T) statistics
        ctx.kpm = kpm
        ctx.args = (scale, causal, window, offset)
        return out

    @staticmethod
    def backward(ctx, dout):
        q3, k3, v3, out, lse = ctx.saved_tensors
        scale, causal, window, offset = ctx.args
        dq, dk, dv = backward3(
            q3, k3, v3, out, lse, dout, scale, causal, window, offset, ctx.kpm
        )
        return dq, dk, dv, None, None, None, None, None


def _flatten(q, k, v):
    lead, (T, Dh), S, Dv = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    q3 = q.reshape(-1, T, Dh).contiguous()  # (N, T, Dh), N = B * H
    k3 = k.reshape(-1, S, Dh).contiguous()  # (Nk, S, Dh), Nk = B * H_kv
    v3 = v.reshape(-1, S, Dv).contiguous()  # (Nk, S, Dv)
    return lead, q3, k3, v3


def _offset(T, S, align):
    if align not in ("top_left", "bottom_right"):
        raise ValueError(f"align must be 'top_left' or 'bottom_right', got {align!r}")
    return 0 if align == "top_left" else S - T


def _kpm3(key_padding_mask, lead, S):
    """(B, S) or (*lead, S) bool -> (N, S)."""
    if key_padding_mask is None:
        return None
    m = key_padding_mask
    if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
        raise TypeError("key_padding_mask must be a bool tensor, True = may attend")
    if (
        m.dim() < 1
        or m.shape[-1] != S
        or tuple(m.shape[:-1]) != tuple(lead[: m.dim() - 1])
    ):
        raise ValueError(
            f"key_padding_mask must be (B, S) or (*leading dims, S), got {tuple(m.shape)}"
        )
    m = m.reshape(*m.shape[:-1], *([1] * (len(lead) - m.dim() + 1)), S)
    return m.expand(*lead, S).reshape(-1, S)  # (N, S)


def triton_flash_forward(
    q,
    k,
    v,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    window: int | None = None,
    key_padding_mask: torch.Tensor | None = None,
    align: str = "top_left",
    block_m: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
):
    """Run the Triton forward: ``q (..., H, T, Dh), k (..., H_kv, S, Dh),
    v (..., H_kv, S, Dv)`` (``H`` a multiple of ``H_kv``: grouped-query attention) ->
    ``out (..., H, T, Dv)`` and the log-sum-exp ``lse (..., H, T)`` (float32, natural
    log, ``+inf`` for a row that sees no key).

    ``window``: keys at distance at most ``window`` of the diagonal (sliding-window
    attention); ``key_padding_mask`` bool ``(B, S)`` or ``(..., H, S)``, True = may
    attend; ``align`` as :func:`attnlab.flash_attention`. The tile is autotuned unless
    ``block_m`` and ``block_n`` are given (then ``num_warps``/``num_stages`` too).

    Needs CUDA tensors, or ``TRITON_INTERPRET=1`` (then CPU tensors run in the
    interpreter, ~1000x slower than SDPA: tests only). float16, bfloat16 or float32.
    """
    _check_inputs(q, k, v, "triton_flash_forward")
    lead, q3, k3, v3 = _flatten(q, k, v)
    T, S = q3.shape[1], k3.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    blocks: tuple[int, ...] | None = None
    if block_m is not None or block_n is not None:
        blocks = (block_m or 64, block_n or 64)
        if num_warps is not None:
            blocks = (*blocks, num_warps, num_stages or 2)
    out, lse = _forward3(
        q3, k3, v3, scale, is_causal, window, _offset(T, S, align),
        _kpm3(key_padding_mask, lead, S), blocks,
    )  # fmt: skip
    return out.reshape(*lead, T, v.shape[-1]), lse.reshape(*lead, T)


def triton_flash_backward(
    q, k, v, out, lse, dout, *, is_causal=False, scale=None, window=None,
    key_padding_mask=None, align="top_left",
):  # fmt: skip
    """The Triton backward alone: ``(dq, dk, dv)`` in the input dtype, from the saved
    ``out`` and ``lse`` of :func:`triton_flash_forward` (same arguments)."""
    _check_inputs(q, k, v, "triton_flash_backward")
    lead, q3, k3, v3 = _flatten(q, k, v)
    T, S = q3.shape[1], k3.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    dq, dk, dv = backward3(
        q3, k3, v3, out.reshape(q3.shape[0], T, -1), lse.reshape(q3.shape[0], T),
        dout.reshape(q3.shape[0], T, -1), scale, is_causal, window,
        _offset(T, S, align), _kpm3(key_padding_mask, lead, S),
    )  # fmt: skip
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)


def triton_flash_attention(
    q,
    k,
    v,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    window: int | None = None,
    key_padding_mask: torch.Tensor | None = None,
    align: str = "top_left",
) -> torch.Tensor:
    """Differentiable Triton attention: forward and backward kernels of this module.

    Arguments as :func:`triton_flash_forward`; returns ``out (..., H, T, Dv)``."""
    _check_inputs(q, k, v, "triton_flash_attention")
    lead, q3, k3, v3 = _flatten(q, k, v)
    T, S = q3.shape[1], k3.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    out = TritonFlash.apply(
        q3, k3, v3, scale, bool(is_causal), window, _offset(T, S, align),
        _kpm3(key_padding_mask, lead, S),
    )  # fmt: skip
    return out.reshape(*lead, T, v.shape[-1])


def kernels_interpreted() -> bool:
    """Whether this module's kernels were decorated for Triton's interpreter (CPU
    tensors run), which :func:`interpreting` cannot tell once they exist."""
    return triton is not None and decorated_interpreted(_flash_fwd_kernel)


def jit_kernels() -> dict:
    """This module's ``@triton.jit`` kernels by name (``triton_compile`` compiles them
    for a GPU target on a CPU). Needs Triton."""
    return {"fwd": _flash_fwd_kernel}
