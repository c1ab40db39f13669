"""Shared pieces of the Triton flash kernels (:mod:`.triton_flash` forward,
:mod:`.triton_flash_bwd` backward): the autotuning configurations and their pruning, the
tile ranges of the two-stage loop, the masked tile, and the 16-bit roundings."""

from __future__ import annotations

import os

import torch

try:  # optional dependency: attnlab[gpu]
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

LOG2E = 1.4426950408889634


def available() -> bool:
    """Whether Triton can be imported (it says nothing about a GPU)."""
    return triton is not None


def interpreting() -> bool:
    """Whether ``TRITON_INTERPRET`` asks for Triton's CPU interpreter now.

    Triton reads it once per kernel, when ``@triton.jit`` decorates it (at import): a
    kernel decorated without it stays compiled whatever the variable says later. See
    :func:`decorated_interpreted` for what a kernel actually is."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def decorated_interpreted(kernel) -> bool:
    """Whether ``kernel`` (a ``@triton.jit`` function, autotuned or not) was decorated
    in interpreter mode, i.e. runs on CPU tensors in Triton's interpreter."""
    fn = kernel
    while type(fn).__name__ == "Autotuner":  # it wraps the jitted function
        fn = fn.fn
    return type(fn).__name__ == "InterpretedFunction"


# ------------------------------------------------------------------ autotuning configs
# (BLOCK_M, BLOCK_N, num_warps, num_stages). The 16-bit lists follow the tutorial's Hopper
# choices (BM = 128 with 8 warps, BN 32..128, 2..4 stages). The first row that survives
# the pruning below is a kernel's *default tile* (the one ATTNLAB_TRITON_AUTOTUNE=0 pins);
# tests/test_triton_compile.py compiles it for sm_80 and sm_90 and fails on a spill.
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
DQ_CONFIGS = [  # BLOCK_M query rows, BLOCK_N keys
    (64, 64, 4, 3),
    (64, 128, 8, 3),
    (128, 64, 8, 3),
    (32, 64, 4, 2),
    (64, 64, 8, 2),
    (32, 128, 4, 3),
]
# dK/dV keeps four (BLOCK_N, head dim) blocks on chip (K, V and the two float32
# accumulators): the most register-hungry kernel. Its default (first) tile compiles
# without spills for sm_80 and sm_90a at head dim 64 (64 x 64 with 4 warps spills 132 B
# for sm_80); at head dim 128 the pruning leaves 32 x 64 with 8 warps first.
DKDV_CONFIGS = [
    (32, 64, 4, 2),
    (64, 64, 4, 3),
    (64, 128, 8, 3),
    (128, 64, 8, 3),
    (64, 64, 8, 2),
    (32, 128, 4, 3),
    (32, 64, 8, 2),
    (32, 32, 4, 2),
]
BWD_CONFIGS = DQ_CONFIGS  # the name the bench scripts used before the split
# float32 inputs multiply in exact float32 (``input_precision="ieee"``: no tensor cores)
# with the operands in registers: the 16-bit tiles spill there (4.9 KB at 128 x 64 for
# the forward), so float32 gets its own small tiles, compiled spill-free
FP32_CONFIGS = {
    "fwd": [(32, 32, 4, 2)],
    "dq": [(32, 32, 4, 2)],
    "dkdv": [(16, 16, 4, 2)],  # 32 x 16 spills 8 B for sm_80
}


def _wide(bm, bn, w):
    return bm * bn >= 128 * 128 or (bm == 128 and w < 8)


def _wide_dkdv(bm, bn, w):
    # measured at head dim 128 (sm_80 / sm_90a): 64 x 64 spills even with 8 warps (20 /
    # 24 B), 32 x 64 and 64 x 32 with 4 warps (132 / 8 B, 56 / 40 B); 32 x 64 with 8
    # warps and 32 x 32 with 4 do not
    return bm * bn > 32 * 64 or (bm * bn == 32 * 64 and w < 8)


# the 16-bit tiles that spill at head dim >= 128 (ptxas for sm_80 / sm_90a), per kernel
WIDE_HEAD_DROP = {"fwd": _wide, "dkdv": _wide_dkdv, "dq": _wide}
# under the interpreter: one pinned configuration each (autotune would run them all);
# small and unequal tiles, so that the tests cross several tiles of each kind
INTERPRETER_CONFIGS = {"fwd": (32, 16, 4, 1), "bwd": (16, 32, 4, 1)}


def _row(c):
    return (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)


def prune_configs(configs, named_args, *, kernel="fwd", **kwargs):
    """Autotune's early pruning, as Triton's autotuner calls it: ``named_args`` holds
    the positional arguments, ``kwargs`` the keyword ones (``BLOCK_DH``, ``DOT_FP32``:
    the wrappers pass the constexprs by keyword). Keeps the float32 tiles for float32
    inputs and the 16-bit ones otherwise; drops tiles wider than the (power-of-two
    rounded) problem and, at head dim >= 128, the tiles that spill registers for this
    kernel. With ``ATTNLAB_TRITON_AUTOTUNE=0`` keeps only the first survivor (the
    default tile), with ``ATTNLAB_TRITON_TUNE=k`` the first k. Always keeps at least one configuration."""
    args = {**named_args, **kwargs}
    for name in ("T_KEY", "S_KEY", "BLOCK_DH", "DOT_FP32"):
        if name not in args:
            raise KeyError(f"prune_configs: the launch passed no {name}")
    t_key, s_key, d = args["T_KEY"], args["S_KEY"], args["BLOCK_DH"]
    fp32 = FP32_CONFIGS[kernel]
    keep = []
    for c in configs:
        bm, bn, w, _ = _row(c)
        if (_row(c) in fp32) != bool(args["DOT_FP32"]) and len(configs) > 1:
            continue
        if bm > max(t_key, 16) or bn > max(s_key, 16):
            continue
        if d >= 128 and WIDE_HEAD_DROP[kernel](bm, bn, w):
            continue
        keep.append(c)
    if not keep:  # the smallest tile of the right kind always fits
        kind = [c for c in configs if (_row(c) in fp32) == bool(args["DOT_FP32"])]
        keep = [
            min(
                kind or configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"]
            )
        ]
    if os.environ.get("ATTNLAB_TRITON_AUTOTUNE", "1") == "0":  # GPU tests: pinned
        keep = keep[:1]
    elif os.environ.get("ATTNLAB_TRITON_TUNE"):  # a short tuning (the GPU check)
        keep = keep[: max(1, int(os.environ["ATTNLAB_TRITON_TUNE"]))]
    return keep


def prune_for(kernel):
    """The ``prune_configs_by`` argument of one kernel's autotuner."""

    def prune(configs, named_args, **kwargs):
        return prune_configs(configs, named_args, kernel=kernel, **kwargs)

    return {"early_config_prune": prune}


def config_rows(kernel):
    """The (BLOCK_M, BLOCK_N, num_warps, num_stages) rows a kernel's autotuner holds
    (``kernel`` in fwd, dkdv, dq): the 16-bit tiles, then the float32 ones."""
    rows = {"fwd": FWD_CONFIGS, "dkdv": DKDV_CONFIGS, "dq": DQ_CONFIGS}[kernel]
    return rows + FP32_CONFIGS[kernel]


def default_config(kernel, dtype, head_dim=64):
    """The tile a kernel runs at a long sequence (n = 16k) when autotuning is off: the
    first configuration that the pruning keeps for this dtype and head dim."""
    cfgs = [_Cfg(*r) for r in config_rows(kernel)]
    keep = prune_configs(
        cfgs,
        {"T_KEY": 16384, "S_KEY": 16384},
        kernel=kernel,
        BLOCK_DH=max(16, 1 << (head_dim - 1).bit_length()),
        DOT_FP32=dtype == torch.float32,
    )
    return _row(keep[0])


class _Cfg:  # the two fields of triton.Config that the pruning reads
    def __init__(self, bm, bn, w, s):
        self.kwargs = {"BLOCK_M": bm, "BLOCK_N": bn}
        self.num_warps, self.num_stages = w, s


def autotune_configs(kernel):
    if triton is None:  # pragma: no cover
        return []
    rows = config_rows(kernel)
    if interpreting():
        rows = [INTERPRETER_CONFIGS["fwd" if kernel == "fwd" else "bwd"]]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm, bn, w, s in rows
    ]


TUNE_KEY = ["T_KEY", "S_KEY", "BLOCK_DH", "BLOCK_DV", "CAUSAL", "WINDOW", "HAS_KPM"]


if triton is not None:

    @triton.jit
    def kv_range(m0, T, S, OFF, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
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
    def q_range(n0, T, S, OFF, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, WINDOW: tl.constexpr):  # fmt: skip
        """Query ranges for the keys [n0, n0 + BLOCK_N), as :func:`kv_range`."""
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
    def tile_dot(a, b, acc, DOT_FP32: tl.constexpr):
        """acc + a @ b; exact float32 products (no TF32, no bf16 interpreter trap) when
        DOT_FP32, else the tensor cores with a float32 accumulator."""
        if DOT_FP32:
            return tl.dot(
                a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee"
            )
        else:
            return tl.dot(a, b, acc)

    @triton.jit
    def round_for_dot(x, dtype: tl.constexpr, DOT_FP32: tl.constexpr):
        """x (float32) rounded to ``dtype`` for a 16-bit matrix product (P, dS), as
        FlashAttention-2 does on a GPU; under DOT_FP32 (float32 inputs, or the
        interpreter) it stays float32."""
        if DOT_FP32:
            return x
        else:
            return x.to(dtype)

    @triton.jit
    def to_store(x, dtype: tl.constexpr, INTERP_BF16: tl.constexpr):
        """float32 -> the output dtype, rounding to nearest even. The interpreter
        truncates float32 to bfloat16; there the rounding is done on the bits first."""
        if INTERP_BF16:
            bits = x.to(tl.int32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
            x = bits.to(tl.float32, bitcast=True)
        return x.to(dtype)

    @triton.jit
    def tile_allowed(rows, cols, S, W, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
        """(BM, BN) mask of a tile crossed by the band's edge; rows in key coordinates."""
        ok = cols[None, :] < S
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None])
        if WINDOW:
            ok = ok & (cols[None, :] >= rows[:, None] - W)
            ok = ok & (cols[None, :] <= rows[:, None] + W)
        return ok


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


def launch_args(q3, k3, v3, scale, causal, window, offset, kpm):
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
