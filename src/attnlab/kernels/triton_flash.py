"""FlashAttention forward in Triton (Tillet et al. 2019), read beside the torch loop.

One Triton *program* computes one block of ``BLOCK_M`` query rows of one (batch, head)
— the body of the outer loop of :func:`attnlab.efficient._flash_forward` — and walks
the key/value blocks with the same online softmax (FlashAttention-2's loop order, Dao
2023), in base 2 like the torch loop (``exp2``, the scale multiplied by log2(e)). The
difference: the grid runs the row blocks in parallel.

Used automatically by :func:`attnlab.flash_attention` for CUDA tensors when Triton is
installed (``pip install attnlab[gpu]``); its backward is the torch recomputation.
On a machine without a GPU the kernel runs in Triton's interpreter (set
``TRITON_INTERPRET=1`` before importing triton): that is how the tests check it.
Interpreter traps avoided here: ``bf16`` operands of ``tl.dot`` are cast to float32
(the interpreter stores bf16 as integers), and nothing calls
``triton.runtime.driver.active`` (it raises on a CPU-only machine).
"""

from __future__ import annotations

import math
import os

import torch

try:  # optional dependency: attnlab[gpu]
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

__all__ = ["available", "interpreting", "triton_flash_forward"]


def available() -> bool:
    """Whether Triton can be imported (it says nothing about a GPU)."""
    return triton is not None


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


if triton is not None:
    # kernel-begin
    @triton.jit
    def _flash_fwd_kernel(
        Q, K, V, O, L, qk_scale, T, S, Dh, Dv,
        sq_n, sq_t, sq_d, sk_n, sk_s, sk_d, sv_n, sv_s, sv_d, so_n, so_t, so_d,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DH: tl.constexpr,
        BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr,
    ):  # fmt: skip
        start_m = tl.program_id(0)  # which block of query rows
        n = tl.program_id(1).to(tl.int64)  # which (batch, head); int64 offsets below
        rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,)
        dh = tl.arange(0, BLOCK_DH)
        dv = tl.arange(0, BLOCK_DV)
        q = tl.load(
            Q + n * sq_n + rows[:, None] * sq_t + dh[None, :] * sq_d,
            mask=(rows[:, None] < T) & (dh[None, :] < Dh),
            other=0.0,
        )  # (BM, BDh)
        if DOT_FP32:
            q = q.to(tl.float32)
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")  # running max
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum
        acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)  # unnormalised output
        hi = S
        if CAUSAL:  # blocks right of the diagonal are never visited
            hi = tl.minimum((start_m + 1) * BLOCK_M, S)
        for start_n in range(0, hi, BLOCK_N):
            cols = start_n + tl.arange(0, BLOCK_N)  # (BN,)
            kt = tl.load(
                K + n * sk_n + cols[None, :] * sk_s + dh[:, None] * sk_d,
                mask=(cols[None, :] < S) & (dh[:, None] < Dh),
                other=0.0,
            )  # K^T block (BDh, BN)
            if (
                DOT_FP32
            ):  # exact float32 products (no TF32), and no bf16 interpreter trap
                s = tl.dot(q, kt.to(tl.float32), input_precision="ieee")  # (BM, BN)
            else:
                s = tl.dot(q, kt)  # (BM, BN), accumulated in float32
            s = s * qk_scale  # base-2 logits
            ok = cols[None, :] < S
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # dead rows: no NaN
            p = tl.math.exp2(s - m_safe[:, None])  # (BM, BN)
            alpha = tl.math.exp2(m_i - m_safe)  # rescale what was summed so far
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(
                V + n * sv_n + cols[:, None] * sv_s + dv[None, :] * sv_d,
                mask=(cols[:, None] < S) & (dv[None, :] < Dv),
                other=0.0,
            )  # (BN, BDv)
            if DOT_FP32:
                acc = acc * alpha[:, None] + tl.dot(
                    p, v.to(tl.float32), input_precision="ieee"
                )
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        dead = l_i == 0.0  # rows that saw no key
        out = acc / tl.where(dead, 1.0, l_i)[:, None]
        lse = tl.where(
            dead, float("inf"), (m_i + tl.math.log2(l_i)) * 0.6931471805599453
        )
        tl.store(
            O + n * so_n + rows[:, None] * so_t + dv[None, :] * so_d,
            out.to(O.dtype.element_ty),
            mask=(rows[:, None] < T) & (dv[None, :] < Dv),
        )
        tl.store(L + n * T + rows, lse, mask=rows < T)
        # kernel-end


def triton_flash_forward(
    q,
    k,
    v,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_m: int = 64,
    block_n: int = 64,
):
    """Run the Triton forward: ``q (..., T, Dh), k (..., S, Dh), v (..., S, Dv)`` ->
    ``out (..., T, Dv)`` and the log-sum-exp ``lse (..., T)`` (float32, natural log,
    ``+inf`` for a row that sees no key).

    ``block_m`` x ``block_n`` is the tile: 64 x 64 by default. On an H100 (bfloat16,
    B = 4, H = 16, n = 8192, Dh = 64; ``bench/attention_cuda.py``) 32 x 32 tiles ran at
    about 110 TFLOP/s and 64 x 64 at about 400: a program must hold enough work to hide
    the loads of its key and value blocks.

    Needs CUDA tensors, or ``TRITON_INTERPRET=1`` (then CPU tensors run in the
    interpreter, ~1000x slower than SDPA: tests only). float16, bfloat16 or float32.
    """
    if triton is None:
        raise ImportError(
            "triton_flash_forward needs Triton: pip install 'attnlab[gpu]' (or triton)"
        )
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda and not interpreting():
            raise ValueError(
                f"triton_flash_forward needs CUDA tensors, got {name} on {t.device} "
                "(use attnlab.flash_attention, which falls back to torch, or set "
                "TRITON_INTERPRET=1 before importing triton to run the interpreter)"
            )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(
            f"triton_flash_forward takes float16/bfloat16/float32, got {q.dtype}"
        )
    if (
        not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2])
        or q.shape[-1] != k.shape[-1]
        or k.shape[-2] != v.shape[-2]
    ):
        raise ValueError(
            f"shapes must be q (..., T, Dh), k (..., S, Dh), v (..., S, Dv), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    lead, (T, Dh), S, Dv = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    scale = 1.0 / math.sqrt(Dh) if scale is None else scale
    q3, k3, v3 = q.reshape(-1, T, Dh), k.reshape(-1, S, Dh), v.reshape(-1, S, Dv)
    N = q3.shape[0]
    out = torch.empty(N, T, Dv, dtype=q.dtype, device=q.device)  # (N, T, Dv)
    lse = torch.empty(N, T, dtype=torch.float32, device=q.device)  # (N, T)
    dot_fp32 = q.dtype == torch.float32 or interpreting()
    grid = (triton.cdiv(T, block_m), N)
    _flash_fwd_kernel[grid](
        q3,
        k3,
        v3,
        out,
        lse,
        scale * 1.4426950408889634,
        T,
        S,
        Dh,
        Dv,
        *q3.stride(),
        *k3.stride(),
        *v3.stride(),
        *out.stride(),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_DH=max(16, triton.next_power_of_2(Dh)),
        BLOCK_DV=max(16, triton.next_power_of_2(Dv)),
        CAUSAL=bool(is_causal),
        DOT_FP32=dot_fp32,
    )
    return out.reshape(*lead, T, Dv), lse.reshape(*lead, T)
