"""Compile the Triton flash kernels for a GPU on a machine that has none.

Triton's compiler does not need a GPU: its front end lowers a ``@triton.jit`` kernel to
Triton IR, then to TTGIR and PTX for a target (``GPUTarget("cuda", 90, 32)`` is an H100,
80 an A100), and the ``ptxas`` it bundles assembles the PTX and reports the registers and
spills. This module drives that path the way a launch does — the kernel's own argument
binder decides the specialisations (``== 1`` integers become constants, pointers and
multiples of 16 get divisibility hints) — with the launch arguments that the library's
wrappers build, but with CPU tensors and no launch. It catches what Triton's interpreter
cannot: a helper that is not ``@triton.jit`` (the interpreter never computes a kernel's
cache key), a kernel that does not type-check, and register spills.

Run it in a process where ``TRITON_INTERPRET`` is unset (the kernels must be compiled
functions, not interpreted ones)::

    python -m attnlab.kernels.triton_compile --sm 80 90 --dtype float32 bfloat16

prints one JSON row per compiled kernel (``tests/test_triton_compile.py`` runs it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time

import torch

from . import triton_tiles as tiles

KERNELS = ("fwd", "dkdv", "dq", "delta")

_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
# in TTGIR: a matrix product (tt.dot; ttng.warp_group_dot is Hopper's wgmma) and its
# operand types, and the roundings the kernels name p_r / pt_r (P) and ds_r / dst_r (dS)
_DOT = re.compile(r"= (?:tt\.dot|ttng\.warp_group_dot) .*? : (.*?) -> ")
_ELEM = re.compile(r"x(bf16|f16|f32|tf32|f64)[,>]")
_ROUND = re.compile(
    r"%(p_r|pt_r|ds_r|dst_r)(?:_\d+)? = arith\.truncf \S+ : tensor<\S+xf32, .*?"
    r"to tensor<\S+x(bf16|f16), "
)


def read_ttgir(ttgir: str) -> dict:
    """What the TTGIR says about the arithmetic: how many matrix products, the element
    types of their operands, and which of P, dS are rounded from float32 to 16 bit."""
    dots = [_ELEM.findall(m) for m in _DOT.findall(ttgir)]
    return dict(
        dots=len(dots),
        dot_operand_types=sorted({t for d in dots for t in d}),
        rounded_16bit=sorted({m[0] for m in _ROUND.findall(ttgir)}),
    )


def _jit_functions():
    from . import triton_flash as tf
    from . import triton_flash_bwd as bwd

    return {**tf.jit_kernels(), **bwd.jit_kernels()}


DELTA_CONFIG = (64, 0, 4, 3)  # backward3's fixed launch: 64 rows, Triton's defaults


def configs(kind: str, dtype=torch.bfloat16) -> list[tuple[int, int, int, int]]:
    """Every (BLOCK_M, BLOCK_N, num_warps, num_stages) the autotuner may pick for a
    kernel and dtype (the 16-bit tiles or the float32 ones)."""
    if kind == "delta":
        return [DELTA_CONFIG]
    if kind not in KERNELS:
        raise ValueError(f"kind must be one of {KERNELS}, got {kind!r}")
    fp32 = tiles.FP32_CONFIGS[kind]
    rows = tiles.config_rows(kind)
    return [r for r in rows if (r in fp32) == (dtype == torch.float32)]


def default_config(kind: str, dtype=torch.bfloat16, dh: int = 64):
    """The kernel's default tile for this dtype and head dim (what
    ``ATTNLAB_TRITON_AUTOTUNE=0`` pins at a long sequence)."""
    if kind == "delta":
        return DELTA_CONFIG
    return tiles.default_config(kind, dtype, dh)


def launch(kind, dtype, *, dh=64, T=1024, S=1024, causal=True, window=None,
           padding=False, group=1):  # fmt: skip
    """(kernel, positional args, constexpr kwargs) exactly as the library's wrappers
    launch ``kind`` for these shapes, with CPU tensors standing in for CUDA ones (only
    their dtype, strides and 16-byte alignment matter to the compiler)."""
    N, Nk = 2 * group, 2
    q = torch.empty(N, T, dh, dtype=dtype)
    k = torch.empty(Nk, S, dh, dtype=dtype)
    v = torch.empty(Nk, S, dh, dtype=dtype)
    out = torch.empty(N, T, dh, dtype=dtype)
    lse = torch.empty(N, T, dtype=torch.float32)
    kpm = torch.ones(N, S, dtype=torch.bool) if padding else None
    scale = dh**-0.5
    kpm_t, sizes, keys, meta = tiles.launch_args(q, k, v, scale, causal, window, 0, kpm)
    meta["DOT_FP32"] = dtype == torch.float32  # a GPU launch, not the interpreter's
    meta["INTERP_BF16"] = False
    fn = _jit_functions()[kind]
    if kind == "fwd":
        args = (q, k, v, out, lse, kpm_t, scale * tiles.LOG2E, *sizes, *keys,
                *q.stride(), *k.stride(), *v.stride(), *out.stride())  # fmt: skip
    elif kind == "delta":
        delta = torch.empty(N, T, dtype=torch.float32)
        return fn, (out, out, delta, T, dh), dict(BLOCK_DV=meta["BLOCK_DV"])
    else:
        delta = torch.empty(N, T, dtype=torch.float32)
        common = (scale * tiles.LOG2E, scale, *sizes, *keys, *q.stride(),
                  *k.stride(), *v.stride(), *out.stride())  # fmt: skip
        wrt: tuple[torch.Tensor, ...] = (q, k, v) if kind == "dkdv" else (q,)
        grads = tuple(torch.empty_like(g) for g in wrt)
        if kind == "dkdv":
            args = (q, k, v, out, lse, delta, grads[1], grads[2], kpm_t, *common)
        else:
            args = (q, k, v, out, lse, delta, grads[0], kpm_t, *common)
    return fn, args, meta


def compile_kernel(kind, capability, dtype, config=None, **geometry) -> dict:
    """Compile one kernel for ``sm_<capability>`` and return what ``ptxas`` and the
    compiled code say: registers, spill bytes, shared memory, and which instructions
    the products use. ``config`` defaults to the kernel's default tile. Raises what the
    compiler raises (a missing ``@triton.jit`` among them)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    if tiles.interpreting():
        raise RuntimeError(
            "compile_kernel needs compiled kernels: unset TRITON_INTERPRET "
            "before triton is imported (run it in its own process)"
        )
    fn, args, meta = launch(kind, dtype, **geometry)
    if not isinstance(fn, JITFunction):
        raise TypeError(f"{kind}: {fn!r} is not a @triton.jit function")
    default = default_config(kind, dtype, geometry.get("dh", 64))
    bm, bn, warps, stages = config or default
    kwargs = dict(meta, BLOCK_M=bm, num_warps=warps, num_stages=stages)
    if kind != "delta":
        kwargs["BLOCK_N"] = bn
    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, spec, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(
        backend, kwargs, bound, spec, options
    )
    log = io.StringIO()
    t0, c0 = time.perf_counter(), os.times()
    with contextlib.redirect_stdout(log):  # ptxas -v, printed by TRITON_DUMP_PTXAS_LOG
        ck = triton.compile(
            ASTSource(fn, signature, constexprs, attrs),
            target=target,
            options=options.__dict__,
        )
    c1 = os.times()
    ptxas = log.getvalue()
    spills = [tuple(map(int, m)) for m in _PTXAS_SPILL.findall(ptxas)]
    used = [int(r) for r in _PTXAS_USED.findall(ptxas)]
    if not used:
        raise RuntimeError(
            f"{kind}: no ptxas report (set TRITON_ALWAYS_COMPILE=1 and "
            "TRITON_DUMP_PTXAS_LOG=1, as main() does)"
        )
    ptx = ck.asm["ptx"]
    return dict(
        kernel=kind,
        sm=capability,
        dtype=str(dtype).removeprefix("torch."),
        config=[bm, bn, warps, stages],
        dh=geometry.get("dh", 64),
        default=(bm, bn, warps, stages) == default,
        registers=max(used),
        spill_stores=sum(s for s, _ in spills),
        spill_loads=sum(ld for _, ld in spills),
        shared_bytes=ck.metadata.shared,
        wgmma="wgmma.mma_async" in ptx,
        mma_16bit=bool(re.search(r"mma\S*\.(bf16|f16)", ptx)),
        cp_async="cp.async" in ptx,
        **read_ttgir(ck.asm["ttgir"]),
        wall_s=round(time.perf_counter() - t0, 2),
        cpu_s=round(sum(c1[:4]) - sum(c0[:4]), 2),  # this process and ptxas
    )


def _setup_env():
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # else a cached kernel has no ptxas log
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # 3.9's default, stated


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    p.add_argument("--sm", nargs="+", type=int, default=[80, 90])
    p.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--dh", type=int, default=64)
    p.add_argument("--all-configs", action="store_true",
                   help="every configuration the autotuner may pick, not the default")  # fmt: skip
    a = p.parse_args(argv)
    _setup_env()
    for kind in a.kernels:
        for sm in a.sm:
            for dt in a.dtype:
                dtype = getattr(torch, dt)
                cfgs = [default_config(kind, dtype, a.dh)]
                if a.all_configs:
                    cfgs = configs(kind, dtype)
                for c in cfgs:
                    row = dict(kernel=kind, sm=sm, dtype=dt, config=list(c), dh=a.dh)
                    try:
                        row = compile_kernel(kind, sm, dtype, tuple(c), dh=a.dh)
                    except Exception as e:  # noqa: BLE001 - reported, the caller fails
                        row["error"] = f"{type(e).__name__}: {str(e)[-2000:]}"
                    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
