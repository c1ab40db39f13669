"""FlashAttention-2's backward in Triton (Dao 2023; the structure of Triton's
fused-attention tutorial), the backward of :mod:`.triton_flash`.

A small kernel computes ``delta_i = dO_i . O_i`` block by block (no full-size float32
temporary). One program per key block keeps ``dK`` and ``dV`` on chip while it loops over
the query blocks that see it — for grouped-query attention over the query heads of its
group too, so the shared heads' gradients are summed without atomics — and one program
per query block accumulates ``dQ`` over its key blocks. Both recompute ``P`` from the
saved log-sum-exp (7 matrix products per tile instead of FlashAttention-2's 5 with an
atomic ``dQ``), visit only the tiles the mask allows and compute the mask only on the
tiles its edge crosses (:func:`.triton_tiles.q_range`, ``kv_range``). The gradients
are written in the input dtype: no float32 gradient buffers.
"""

from __future__ import annotations

import torch

try:  # optional dependency: attnlab[gpu]
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

from .triton_tiles import (
    LOG2E,
    TUNE_KEY,
    autotune_configs,
    interpreting,
    launch_args,
    prune_for,
)

if triton is not None:
    from .triton_tiles import (
        kv_range,
        q_range,
        round_for_dot,
        tile_allowed,
        tile_dot,
        to_store,
    )

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

    # dkdv-begin
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
            st = tile_dot(k, qt, tl.zeros([k.shape[0], BLOCK_M], tl.float32), DOT_FP32)
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
            pt_r = round_for_dot(pt, do.dtype, DOT_FP32)  # (BN, BM)
            dv_acc = tile_dot(pt_r, do, dv_acc, DOT_FP32)  # dV += P^T dO  (BN, BDv)
            dpt = tile_dot(
                v, tl.trans(do), tl.zeros([k.shape[0], BLOCK_M], tl.float32), DOT_FP32
            )  # dP^T = V dO^T  (BN, BM)
            dst = pt * (dpt - delta[None, :])  # dS^T = P^T * (dP^T - D)
            dst_r = round_for_dot(dst, qt.dtype, DOT_FP32)  # (BN, BM)
            dk = tile_dot(dst_r, tl.trans(qt), dk, DOT_FP32)  # dK += dS^T Q  (BN, BDh)
        return dk, dv_acc
        # dkdv-end

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
        lo, f_lo, f_hi, hi = q_range(n0, T, S, OFF, W, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
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
                 to_store(dk * scale, DK.dtype.element_ty, INTERP_BF16), mask=ok)  # fmt: skip
        tl.store(DV + nk * sv_n + cols[:, None] * sv_s + dv[None, :] * sv_d,
                 to_store(dv_acc, DV.dtype.element_ty, INTERP_BF16),
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
            s = tile_dot(
                q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32
            )
            p = tl.math.exp2(s * qk_scale - lse2[:, None])  # (BM, BN)
            if MASKED:
                p = tl.where(tile_allowed(rows_k, cols, S, W, CAUSAL, WINDOW), p, 0.0)
            if HAS_KPM:
                keep = tl.load(KPMn + cols, mask=cols < S, other=0)
                p = tl.where(keep[None, :] != 0, p, 0.0)
            dp = tile_dot(do, vt, tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32)
            ds = p * (dp - delta[:, None])  # dS = P * (dP - D)  (BM, BN)
            ds_r = round_for_dot(ds, k.dtype, DOT_FP32)  # (BM, BN)
            dq = tile_dot(ds_r, k, dq, DOT_FP32)  # dQ += dS K  (BM, BDh)
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
        lo, f_lo, f_hi, hi = kv_range(
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
            to_store(dq * scale, DQ.dtype.element_ty, INTERP_BF16),
            mask=(rows[:, None] < T) & (dh[None, :] < Dh),
        )

    dkdv_tuned = triton.autotune(
        autotune_configs("dkdv"), key=TUNE_KEY, prune_configs_by=prune_for("dkdv")
    )(_bwd_dkdv_kernel)
    dq_tuned = triton.autotune(
        autotune_configs("dq"), key=TUNE_KEY, prune_configs_by=prune_for("dq")
    )(_bwd_dq_kernel)


def backward3(q3, k3, v3, out, lse, dout, scale, causal, window, offset, kpm):
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
    kpm_t, sizes, keys, meta = launch_args(
        q3, k3, v3, scale, causal, window, offset, kpm
    )
    common = (scale * LOG2E, scale, *sizes, *keys, *q3.stride(), *k3.stride(),
              *v3.stride(), *dout.stride())  # fmt: skip
    grid_kv = lambda m: (triton.cdiv(S, m["BLOCK_N"]), Nk)  # noqa: E731
    dkdv_tuned[grid_kv](q3, k3, v3, dout, lse, delta, dk, dv, kpm_t, *common, **meta)
    grid_q = lambda m: (triton.cdiv(T, m["BLOCK_M"]), N)  # noqa: E731
    dq_tuned[grid_q](q3, k3, v3, dout, lse, delta, dq, kpm_t, *common, **meta)
    return dq, dk, dv


def jit_kernels() -> dict:
    """This module's ``@triton.jit`` kernels by name (``triton_compile`` compiles them
    for a GPU target on a CPU). Needs Triton."""
    return {
        "dkdv": _bwd_dkdv_kernel,
        "dq": _bwd_dq_kernel,
        "delta": _bwd_delta_kernel,
    }
