"""FlashAttention in Triton (Tillet et al. 2019): forward and backward, read beside the
torch loop of :mod:`attnlab.efficient.flash`.

Forward. One Triton *program* computes one block of ``BLOCK_M`` query rows of one
(batch, head) — the body of the outer loop of :func:`attnlab.efficient._flash_forward`
— and walks the key/value blocks with the same online softmax (FlashAttention-2's loop
order, Dao 2023), in base 2 like the torch loop (``exp2``, the scale multiplied by
log2(e)). The difference: the grid runs the row blocks in parallel.

The key blocks a program visits are cut into three ranges (:func:`_kv_range`): blocks
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
import os

import torch

try:  # optional dependency: attnlab[gpu]
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

__all__ = [
    "available",
    "interpreting",
    "triton_flash_forward",
    "triton_flash_backward",
    "triton_flash_attention",
    "prune_configs",
]

LOG2E = 1.4426950408889634


def available() -> bool:
    """Whether Triton can be imported (it says nothing about a GPU)."""
    return triton is not None


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# ------------------------------------------------------------------ autotuning configs
# (BLOCK_M, BLOCK_N, num_warps, num_stages). The GPU lists follow the tutorial's Hopper
# choices (BM = 128 with 8 warps, BN 32..128, 2..4 stages); the pruning below drops the
# tiles larger than the problem and, at head dim 128, the register-hungry ones.
FWD_CONFIGS = [
    (128, 64, 8, 3),
    (128, 64, 4, 3),
    (128, 128, 8, 3),
    (128, 32, 4, 4),
    (64, 64, 4, 3),
    (64, 64, 4, 4),
    (64, 128, 4, 3),
    (128, 64, 8, 4),
]
BWD_CONFIGS = [  # used by both backward kernels: BLOCK_M query rows, BLOCK_N keys
    (64, 64, 4, 3),
    (64, 128, 8, 3),
    (128, 64, 8, 3),
    (32, 64, 4, 2),
    (64, 64, 8, 2),
    (32, 128, 4, 3),
]
# under the interpreter: one pinned configuration each (autotune would run them all);
# small and unequal tiles, so that the tests cross several tiles of each kind
INTERPRETER_CONFIGS = {"fwd": (32, 16, 4, 1), "bwd": (16, 32, 4, 1)}


def prune_configs(configs, named_args, **kwargs):
    """Autotune's early pruning: drop tiles wider than the (power-of-two rounded) problem
    and, at head dim >= 128, tiles of 128 x 128 or with 4 warps and BM = 128 (register
    spills). Always keeps at least one configuration."""
    t_key, s_key = named_args["T_KEY"], named_args["S_KEY"]
    d = named_args.get("BLOCK_DH", 64)
    keep = []
    for c in configs:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        if bm > max(t_key, 16) or bn > max(s_key, 16):
            continue
        if d >= 128 and (bm * bn >= 128 * 128 or (bm == 128 and c.num_warps < 8)):
            continue
        keep.append(c)
    if not keep:  # the smallest tile always fits
        keep = [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]
    return keep


def _configs(kind):
    if triton is None:  # pragma: no cover
        return []
    rows = [INTERPRETER_CONFIGS[kind]] if interpreting() else (
        FWD_CONFIGS if kind == "fwd" else BWD_CONFIGS
    )  # fmt: skip
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm, bn, w, s in rows
    ]


_TUNE_KEY = ["T_KEY", "S_KEY", "BLOCK_DH", "BLOCK_DV", "CAUSAL", "WINDOW", "HAS_KPM"]


if triton is not None:

    @triton.jit
    def _kv_range(m0, T, S, OFF, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, WINDOW: tl.constexpr):  # fmt: skip
        """Key ranges for the query rows [m0, m0 + BLOCK_M): masked [lo, f_lo), unmasked
        [f_lo, f_hi), masked [f_hi, hi); keys outside [lo, hi) are never visited. Row i
        sees key j when j - (i + OFF) is in [-W, W] (window) and <= 0 (causal)."""
        r0 = m0 + OFF  # first row, in key coordinates
        r1 = tl.minimum(m0 + BLOCK_M, T) - 1 + OFF  # last row
        lo = m0 * 0
        hi = lo + S
        f_lo = lo
        f_hi = hi
        if CAUSAL:
            hi = tl.minimum(hi, r1 + 1)
            f_hi = tl.minimum(f_hi, r0 + 1)  # keys every row of the block sees
        if WINDOW:
            lo = tl.maximum(lo, r0 - W)
            hi = tl.minimum(hi, r1 + W + 1)
            f_lo = tl.maximum(f_lo, r1 - W)
            f_hi = tl.minimum(f_hi, r0 + W + 1)
        hi = tl.maximum(hi, 0)
        lo = (lo // BLOCK_N) * BLOCK_N
        f_lo = ((tl.maximum(f_lo, lo) + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
        f_lo = tl.minimum(f_lo, hi)
        f_hi = tl.maximum((tl.maximum(f_hi, 0) // BLOCK_N) * BLOCK_N, f_lo)
        return lo, f_lo, f_hi, hi

    @triton.jit
    def _q_range(n0, T, S, OFF, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, WINDOW: tl.constexpr):  # fmt: skip
        """Query ranges for the keys [n0, n0 + BLOCK_N), as :func:`_kv_range`."""
        c0 = n0 - OFF  # first key, in query coordinates
        c1 = tl.minimum(n0 + BLOCK_N, S) - 1 - OFF  # last key
        lo = n0 * 0
        hi = lo + T
        f_lo = lo
        f_hi = hi
        if CAUSAL:
            lo = tl.maximum(lo, c0)
            f_lo = tl.maximum(f_lo, c1)  # rows that see every key of the block
        if WINDOW:
            lo = tl.maximum(lo, c0 - W)
            hi = tl.minimum(hi, c1 + W + 1)
            f_lo = tl.maximum(f_lo, c1 - W)
            f_hi = tl.minimum(f_hi, c0 + W + 1)
        hi = tl.maximum(hi, 0)
        lo = (tl.minimum(lo, hi) // BLOCK_M) * BLOCK_M
        f_lo = ((tl.maximum(f_lo, lo) + BLOCK_M - 1) // BLOCK_M) * BLOCK_M
        f_lo = tl.minimum(f_lo, hi)
        f_hi = tl.maximum((tl.maximum(f_hi, 0) // BLOCK_M) * BLOCK_M, f_lo)
        return lo, f_lo, f_hi, hi

    @triton.jit
    def _dot(a, b, acc, DOT_FP32: tl.constexpr):
        """acc + a @ b; exact float32 products (no TF32, no bf16 interpreter trap) when
        DOT_FP32, else the tensor cores with a float32 accumulator."""
        if DOT_FP32:
            return tl.dot(
                a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee"
            )
        else:
            return tl.dot(a, b, acc)

    @triton.jit
    def _round(x, dtype: tl.constexpr, DOT_FP32: tl.constexpr):
        """x (float32) rounded to ``dtype`` for a 16-bit matrix product (P, dS), as
        FlashAttention-2 does on a GPU; under DOT_FP32 (float32 inputs, or the
        interpreter) it stays float32."""
        if DOT_FP32:
            return x
        else:
            return x.to(dtype)

    @triton.jit
    def _to_store(x, dtype: tl.constexpr, INTERP_BF16: tl.constexpr):
        """float32 -> the output dtype, rounding to nearest even. The interpreter
        truncates float32 to bfloat16; there the rounding is done on the bits first."""
        if INTERP_BF16:
            bits = x.to(tl.int32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
            x = bits.to(tl.float32, bitcast=True)
        return x.to(dtype)

    @triton.jit
    def _allowed(rows, cols, S, W, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
        """(BM, BN) mask of a tile crossed by the band's edge; rows in key coordinates."""
        ok = cols[None, :] < S
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None])
        if WINDOW:
            ok = ok & (cols[None, :] >= rows[:, None] - W)
            ok = ok & (cols[None, :] <= rows[:, None] + W)
        return ok

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
            s = _dot(q, kt, tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32)
            s = s * qk_scale  # base-2 logits  (BM, BN)
            if MASKED:
                s = tl.where(
                    _allowed(rows_k, cols, S, W, CAUSAL, WINDOW), s, -float("inf")
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
            acc = _dot(_round(p, v.dtype, DOT_FP32), v, acc * alpha[:, None], DOT_FP32)
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
        lo, f_lo, f_hi, hi = _kv_range(
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
            _to_store(out, O.dtype.element_ty, INTERP_BF16),
            mask=(rows[:, None] < T) & (dv[None, :] < Dv),
        )
        tl.store(L + n * T + rows, lse, mask=rows < T)
        # kernel-end

    @triton.jit
    def _bwd_delta_kernel(O, DO, DELTA, T, Dv, BLOCK_M: tl.constexpr,
                          BLOCK_DV: tl.constexpr):  # fmt: skip
        """delta_i = dO_i . O_i in float32, one block of rows at a time (O, dO contiguous)."""
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        n = tl.program_id(1).to(tl.int64)
        dv = tl.arange(0, BLOCK_DV)
        ptr = n * T * Dv + rows[:, None] * Dv + dv[None, :]
        ok = (rows[:, None] < T) & (dv[None, :] < Dv)
        o = tl.load(O + ptr, mask=ok, other=0.0).to(tl.float32)
        do = tl.load(DO + ptr, mask=ok, other=0.0).to(tl.float32)
        tl.store(DELTA + n * T + rows, tl.sum(o * do, 1), mask=rows < T)

    @triton.jit
    def _bwd_dkdv_tiles(dk, dv_acc, k, v, Qn, DOn, Ln, Dn, keep, cols_q, start, end,
                        T, W, qk_scale, sq_t, sq_d, sd_t, sd_d, dh, dv, Dh, Dv,
                        BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                        CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
                        HAS_KPM: tl.constexpr, DOT_FP32: tl.constexpr):  # fmt: skip
        """dK, dV of one key block over the query blocks [start, end); cols_q: the keys
        in query coordinates (key j sits on the diagonal of query j - OFF)."""
        for start_m in range(start, end, BLOCK_M):
            rows = start_m + tl.arange(0, BLOCK_M)  # (BM,)
            qt = tl.load(
                Qn + rows[None, :] * sq_t + dh[:, None] * sq_d,
                mask=(rows[None, :] < T) & (dh[:, None] < Dh),
                other=0.0,
            )  # Q^T block (BDh, BM)
            do = tl.load(
                DOn + rows[:, None] * sd_t + dv[None, :] * sd_d,
                mask=(rows[:, None] < T) & (dv[None, :] < Dv),
                other=0.0,
            )  # (BM, BDv)
            lse2 = (
                tl.load(Ln + rows, mask=rows < T, other=float("inf"))
                * 1.4426950408889634
            )
            delta = tl.load(Dn + rows, mask=rows < T, other=0.0)
            st = _dot(k, qt, tl.zeros([k.shape[0], BLOCK_M], tl.float32), DOT_FP32)
            pt = tl.math.exp2(st * qk_scale - lse2[None, :])  # P^T (BN, BM)
            if MASKED:  # the mask transposed: keys are the rows here
                d = cols_q[:, None] - rows[None, :]  # j - (i + OFF)  (BN, BM)
                ok = rows[None, :] < T
                if CAUSAL:
                    ok = ok & (d <= 0)
                if WINDOW:
                    ok = ok & (d >= -W) & (d <= W)
                pt = tl.where(ok, pt, 0.0)
            if HAS_KPM:
                pt = tl.where(keep[:, None] != 0, pt, 0.0)
            dv_acc = _dot(
                _round(pt, do.dtype, DOT_FP32), do, dv_acc, DOT_FP32
            )  # += P^T dO
            dpt = _dot(
                v, tl.trans(do), tl.zeros([k.shape[0], BLOCK_M], tl.float32), DOT_FP32
            )  # dP^T = V dO^T  (BN, BM)
            dst = pt * (dpt - delta[None, :])  # dS^T = P^T * (dP^T - D)
            dk = _dot(
                _round(dst, qt.dtype, DOT_FP32), tl.trans(qt), dk, DOT_FP32
            )  # += dS^T Q
        return dk, dv_acc

    @triton.jit
    def _bwd_dkdv_kernel(
        Q, K, V, DO, L, DELTA, DK, DV, KPM, qk_scale, scale, T, S, Dh, Dv, OFF, W,
        GROUP, T_KEY, S_KEY, sq_n, sq_t, sq_d, sk_n, sk_s, sk_d, sv_n, sv_s, sv_d,
        sd_n, sd_t, sd_d,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DH: tl.constexpr,
        BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
        HAS_KPM: tl.constexpr, DOT_FP32: tl.constexpr, INTERP_BF16: tl.constexpr,
    ):  # fmt: skip
        """One program per key block of one key/value head: dK, dV stay on chip."""
        n0 = tl.program_id(0) * BLOCK_N
        nk = tl.program_id(1).to(tl.int64)  # key/value head
        cols = n0 + tl.arange(0, BLOCK_N)  # (BN,)
        dh = tl.arange(0, BLOCK_DH)
        dv = tl.arange(0, BLOCK_DV)
        k = tl.load(
            K + nk * sk_n + cols[:, None] * sk_s + dh[None, :] * sk_d,
            mask=(cols[:, None] < S) & (dh[None, :] < Dh),
            other=0.0,
        )  # (BN, BDh)
        v = tl.load(
            V + nk * sv_n + cols[:, None] * sv_s + dv[None, :] * sv_d,
            mask=(cols[:, None] < S) & (dv[None, :] < Dv),
            other=0.0,
        )  # (BN, BDv)
        dk = tl.zeros([BLOCK_N, BLOCK_DH], dtype=tl.float32)
        dv_acc = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)
        lo, f_lo, f_hi, hi = _q_range(
            n0, T, S, OFF, W, BLOCK_M, BLOCK_N, CAUSAL, WINDOW
        )
        cols_q = cols - OFF  # the keys in query coordinates
        for g in range(GROUP):  # the query heads that share this key/value head
            n = nk * GROUP + g
            if HAS_KPM:
                keep = tl.load(KPM + n * S + cols, mask=cols < S, other=0)
            else:
                keep = cols * 0
            Qn, DOn, Ln, Dn = Q + n * sq_n, DO + n * sd_n, L + n * T, DELTA + n * T
            dk, dv_acc = _bwd_dkdv_tiles(dk, dv_acc, k, v, Qn, DOn, Ln, Dn, keep, cols_q, lo, f_lo, T, W,
                                         qk_scale, sq_t, sq_d, sd_t, sd_d, dh, dv, Dh, Dv,
                                         BLOCK_M, True, CAUSAL, WINDOW, HAS_KPM,
                                         DOT_FP32)  # fmt: skip
            dk, dv_acc = _bwd_dkdv_tiles(dk, dv_acc, k, v, Qn, DOn, Ln, Dn, keep, cols_q, f_lo, f_hi, T, W,
                                         qk_scale, sq_t, sq_d, sd_t, sd_d, dh, dv, Dh, Dv,
                                         BLOCK_M, False, CAUSAL, WINDOW, HAS_KPM,
                                         DOT_FP32)  # fmt: skip
            dk, dv_acc = _bwd_dkdv_tiles(dk, dv_acc, k, v, Qn, DOn, Ln, Dn, keep, cols_q, f_hi, hi, T, W,
                                         qk_scale, sq_t, sq_d, sd_t, sd_d, dh, dv, Dh, Dv,
                                         BLOCK_M, True, CAUSAL, WINDOW, HAS_KPM,
                                         DOT_FP32)  # fmt: skip
        ok = (cols[:, None] < S) & (dh[None, :] < Dh)
        tl.store(DK + nk * sk_n + cols[:, None] * sk_s + dh[None, :] * sk_d,
                 _to_store(dk * scale, DK.dtype.element_ty, INTERP_BF16), mask=ok)  # fmt: skip
        tl.store(DV + nk * sv_n + cols[:, None] * sv_s + dv[None, :] * sv_d,
                 _to_store(dv_acc, DV.dtype.element_ty, INTERP_BF16),
                 mask=(cols[:, None] < S) & (dv[None, :] < Dv))  # fmt: skip

    @triton.jit
    def _bwd_dq_tiles(dq, q, do, lse2, delta, Kn, Vn, KPMn, rows_k, start, end, S, W,
                      qk_scale, sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv,
                      BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                      WINDOW: tl.constexpr, HAS_KPM: tl.constexpr,
                      DOT_FP32: tl.constexpr):  # fmt: skip
        """dQ of one query block over the key blocks [start, end)."""
        for start_n in range(start, end, BLOCK_N):
            cols = start_n + tl.arange(0, BLOCK_N)
            k = tl.load(
                Kn + cols[:, None] * sk_s + dh[None, :] * sk_d,
                mask=(cols[:, None] < S) & (dh[None, :] < Dh),
                other=0.0,
            )  # (BN, BDh)
            vt = tl.load(
                Vn + cols[None, :] * sv_s + dv[:, None] * sv_d,
                mask=(cols[None, :] < S) & (dv[:, None] < Dv),
                other=0.0,
            )  # V^T (BDv, BN)
            s = _dot(
                q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32
            )
            p = tl.math.exp2(s * qk_scale - lse2[:, None])  # (BM, BN)
            if MASKED:
                p = tl.where(_allowed(rows_k, cols, S, W, CAUSAL, WINDOW), p, 0.0)
            if HAS_KPM:
                keep = tl.load(KPMn + cols, mask=cols < S, other=0)
                p = tl.where(keep[None, :] != 0, p, 0.0)
            dp = _dot(do, vt, tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32)
            ds = p * (dp - delta[:, None])  # dS = P * (dP - D)  (BM, BN)
            dq = _dot(_round(ds, k.dtype, DOT_FP32), k, dq, DOT_FP32)  # += dS K
        return dq

    @triton.jit
    def _bwd_dq_kernel(
        Q, K, V, DO, L, DELTA, DQ, KPM, qk_scale, scale, T, S, Dh, Dv, OFF, W,
        GROUP, T_KEY, S_KEY, sq_n, sq_t, sq_d, sk_n, sk_s, sk_d, sv_n, sv_s, sv_d,
        sd_n, sd_t, sd_d,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DH: tl.constexpr,
        BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
        HAS_KPM: tl.constexpr, DOT_FP32: tl.constexpr, INTERP_BF16: tl.constexpr,
    ):  # fmt: skip
        """One program per query block: dQ stays on chip (no atomics)."""
        start_m = tl.program_id(0)
        if CAUSAL:
            start_m = tl.num_programs(0) - 1 - start_m
        n = tl.program_id(1).to(tl.int64)
        nk = n // GROUP
        m0 = start_m * BLOCK_M
        rows = m0 + tl.arange(0, BLOCK_M)
        dh = tl.arange(0, BLOCK_DH)
        dv = tl.arange(0, BLOCK_DV)
        q = tl.load(
            Q + n * sq_n + rows[:, None] * sq_t + dh[None, :] * sq_d,
            mask=(rows[:, None] < T) & (dh[None, :] < Dh),
            other=0.0,
        )  # (BM, BDh)
        do = tl.load(
            DO + n * sd_n + rows[:, None] * sd_t + dv[None, :] * sd_d,
            mask=(rows[:, None] < T) & (dv[None, :] < Dv),
            other=0.0,
        )  # (BM, BDv)
        lse2 = (
            tl.load(L + n * T + rows, mask=rows < T, other=float("inf"))
            * 1.4426950408889634
        )
        delta = tl.load(DELTA + n * T + rows, mask=rows < T, other=0.0)
        dq = tl.zeros([BLOCK_M, BLOCK_DH], dtype=tl.float32)
        lo, f_lo, f_hi, hi = _kv_range(
            m0, T, S, OFF, W, BLOCK_M, BLOCK_N, CAUSAL, WINDOW
        )
        Kn, Vn, KPMn, rows_k = K + nk * sk_n, V + nk * sv_n, KPM + n * S, rows + OFF
        dq = _bwd_dq_tiles(dq, q, do, lse2, delta, Kn, Vn, KPMn, rows_k, lo, f_lo, S, W, qk_scale,
                           sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N, True,
                           CAUSAL, WINDOW, HAS_KPM, DOT_FP32)  # fmt: skip
        dq = _bwd_dq_tiles(dq, q, do, lse2, delta, Kn, Vn, KPMn, rows_k, f_lo, f_hi, S, W, qk_scale,
                           sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N, False,
                           CAUSAL, WINDOW, HAS_KPM, DOT_FP32)  # fmt: skip
        dq = _bwd_dq_tiles(dq, q, do, lse2, delta, Kn, Vn, KPMn, rows_k, f_hi, hi, S, W, qk_scale,
                           sk_s, sk_d, sv_s, sv_d, dh, dv, Dh, Dv, BLOCK_N, True,
                           CAUSAL, WINDOW, HAS_KPM, DOT_FP32)  # fmt: skip
        tl.store(
            DQ + n * sq_n + rows[:, None] * sq_t + dh[None, :] * sq_d,
            _to_store(dq * scale, DQ.dtype.element_ty, INTERP_BF16),
            mask=(rows[:, None] < T) & (dh[None, :] < Dh),
        )

    _prune = {"early_config_prune": prune_configs}
    _fwd_tuned = triton.autotune(
        _configs("fwd"), key=_TUNE_KEY, prune_configs_by=_prune
    )(_flash_fwd_kernel)
    _dkdv_tuned = triton.autotune(
        _configs("bwd"), key=_TUNE_KEY, prune_configs_by=_prune
    )(_bwd_dkdv_kernel)
    _dq_tuned = triton.autotune(
        _configs("bwd"), key=_TUNE_KEY, prune_configs_by=_prune
    )(_bwd_dq_kernel)


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


def _window_arg(window):
    if window is None:
        return 0, False
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be None or an int >= 0, got {window!r}")
    return int(window), True


def _kpm_arg(kpm, N, S, device):
    """key_padding_mask (N, S) bool, True = may attend -> int8 (N, S) or a dummy."""
    if kpm is None:
        return torch.zeros(1, dtype=torch.int8, device=device), False
    if kpm.dtype != torch.bool or tuple(kpm.shape) != (N, S):
        raise ValueError(f"kpm must be bool (N, S) = {(N, S)}, got {tuple(kpm.shape)}")
    return kpm.to(device=device, dtype=torch.int8).contiguous(), True


def _common(q3, k3, v3, scale, causal, window, offset, kpm):
    N, T, Dh = q3.shape
    Nk, S, Dv = k3.shape[0], k3.shape[1], v3.shape[2]
    w, has_w = _window_arg(window)
    kpm_t, has_kpm = _kpm_arg(kpm, N, S, q3.device)
    meta = dict(
        BLOCK_DH=max(16, triton.next_power_of_2(Dh)),
        BLOCK_DV=max(16, triton.next_power_of_2(Dv)),
        CAUSAL=bool(causal),
        WINDOW=has_w,
        HAS_KPM=has_kpm,
        DOT_FP32=q3.dtype == torch.float32 or interpreting(),
        INTERP_BF16=q3.dtype == torch.bfloat16 and interpreting(),
    )
    sizes = (T, S, Dh, Dv, int(offset), w, N // Nk)
    keys = (triton.next_power_of_2(T), triton.next_power_of_2(S))
    return kpm_t, sizes, keys, meta


def _forward3(q3, k3, v3, scale, causal, window, offset, kpm, blocks=None):
    """q3 (N, T, Dh), k3 (Nk, S, Dh), v3 (Nk, S, Dv), contiguous -> out, lse (N, T)."""
    N, T = q3.shape[:2]
    out = torch.empty(N, T, v3.shape[2], dtype=q3.dtype, device=q3.device)  # (N, T, Dv)
    lse = torch.empty(N, T, dtype=torch.float32, device=q3.device)  # (N, T)
    kpm_t, sizes, keys, meta = _common(q3, k3, v3, scale, causal, window, offset, kpm)
    args = (q3, k3, v3, out, lse, kpm_t, scale * LOG2E, *sizes, *keys,
            *q3.stride(), *k3.stride(), *v3.stride(), *out.stride())  # fmt: skip
    if blocks is None:
        grid = lambda m: (triton.cdiv(T, m["BLOCK_M"]), N)  # noqa: E731
        _fwd_tuned[grid](*args, **meta)
    else:  # a fixed tile (bench/attention_cuda.py's tile sweep)
        bm, bn, *wst = blocks
        extra = dict(num_warps=wst[0], num_stages=wst[1]) if wst else {}
        grid = (triton.cdiv(T, bm), N)
        _flash_fwd_kernel[grid](*args, BLOCK_M=bm, BLOCK_N=bn, **meta, **extra)
    return out, lse


def _backward3(q3, k3, v3, out, lse, dout, scale, causal, window, offset, kpm):
    """Gradients dq (N, T, Dh), dk (Nk, S, Dh), dv (Nk, S, Dv), in the input dtype."""
    N, T, Dh = q3.shape
    Nk, S = k3.shape[:2]
    Dv = v3.shape[2]
    dout = dout.contiguous()
    out = out.contiguous()
    delta = torch.empty(N, T, dtype=torch.float32, device=q3.device)  # (N, T)
    bdv = max(16, triton.next_power_of_2(Dv))
    bm = 16 if interpreting() else 64
    _bwd_delta_kernel[(triton.cdiv(T, bm), N)](
        out, dout, delta, T, Dv, BLOCK_M=bm, BLOCK_DV=bdv
    )
    dq, dk, dv = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    kpm_t, sizes, keys, meta = _common(q3, k3, v3, scale, causal, window, offset, kpm)
    common = (scale * LOG2E, scale, *sizes, *keys, *q3.stride(), *k3.stride(),
              *v3.stride(), *dout.stride())  # fmt: skip
    grid_kv = lambda m: (triton.cdiv(S, m["BLOCK_N"]), Nk)  # noqa: E731
    _dkdv_tuned[grid_kv](q3, k3, v3, dout, lse, delta, dk, dv, kpm_t, *common, **meta)
    grid_q = lambda m: (triton.cdiv(T, m["BLOCK_M"]), N)  # noqa: E731
    _dq_tuned[grid_q](q3, k3, v3, dout, lse, delta, dq, kpm_t, *common, **meta)
    return dq, dk, dv


class _TritonFlash(torch.autograd.Function):
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
        dq, dk, dv = _backward3(
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
    blocks = None
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
    dq, dk, dv = _backward3(
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
    out = _TritonFlash.apply(
        q3, k3, v3, scale, bool(is_causal), window, _offset(T, S, align),
        _kpm3(key_padding_mask, lead, S),
    )  # fmt: skip
    return out.reshape(*lead, T, v.shape[-1])
