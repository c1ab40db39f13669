"""Benchmark on a CUDA GPU: attnlab's attention kernels against torch's SDPA.

    python bench/attention_cuda.py --json bench/results/attention_cuda.json
    python bench/attention_cuda.py --quick        n = 1024, 2048 (seconds)

Needs a CUDA device (it stops with a message otherwise) and Triton for attnlab's fused
forward. Three parts, all in one run:

* **Time**, B = 4, H = 16, Dh = 64, bfloat16, forward (no grad) and forward + backward,
  causal and not. Contenders on the same q, k, v, each interleaved with the anchor in
  every repetition; CUDA events, median of ``--reps``, ratio to SDPA's median:

  - ``sdpa``         torch.nn.functional.scaled_dot_product_attention (the anchor; its
                     backend is whatever PyTorch picks: reported below)
  - ``sdpa_math``    SDPA forced onto its unfused MATH backend (materialises the scores)
  - ``flash``        attnlab.flash_attention (Triton forward + recomputing torch backward)
  - ``flash_torch``  the same with the torch loop as forward (what a CPU runs)
  - ``window``       attnlab.sliding_window_attention, 128 keys each side (torch loop)
  - ``linear``       attnlab.linear_attention (another function: elu + 1 features)
  - ``naive``        attnlab.scaled_dot_product_attention

  ``naive`` and ``sdpa_math`` only up to n = 4096: their scores alone are B*H*n*n
  numbers.

  The forward's TFLOP/s counts 4 n^2 Dh flops per head (two matrix products), halved
  when causal.
* **Memory**: ``torch.cuda.max_memory_allocated`` during one call, minus what was
  allocated before it (inputs built), in MiB; the caching allocator's stats count each
  allocation exactly, so one process suffices on a GPU (unlike RSS on a CPU).
* **16-bit error**: T = 1024 (and T != S), sharp logits (q, k scaled by 4), each of
  float16 and bfloat16, causal or not: the max abs error of the output and of dq, dk, dv
  against a float64 reference on the same rounded inputs, for SDPA and for attnlab (its
  Triton forward and its torch forward), and the ratio ours / SDPA's.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import attnlab
from attnlab import efficient

WINDOW = 128
DEFAULT_NS = [1024, 2048, 4096, 8192, 16384]
NAIVE_MAX_N = 4096
B, H, DH = 4, 16, 64


def _sdpa_math(q, k, v, is_causal=False):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def _flash_torch(q, k, v, is_causal=False):
    """attnlab.flash_attention with the torch loop as forward (Triton switched off)."""
    usable = efficient.flash._triton_usable
    efficient.flash._triton_usable = lambda q: False
    try:
        return attnlab.flash_attention(q, k, v, is_causal=is_causal)
    finally:
        efficient.flash._triton_usable = usable


def contenders() -> dict:
    return {
        "sdpa": lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c),
        "sdpa_math": lambda q, k, v, c: _sdpa_math(q, k, v, c),
        "flash": lambda q, k, v, c: attnlab.flash_attention(q, k, v, is_causal=c),
        "flash_torch": lambda q, k, v, c: _flash_torch(q, k, v, c),
        "window": lambda q, k, v, c: attnlab.sliding_window_attention(
            q, k, v, WINDOW, is_causal=c
        ),
        "linear": lambda q, k, v, c: attnlab.linear_attention(q, k, v, is_causal=c),
        "naive": lambda q, k, v, c: attnlab.scaled_dot_product_attention(
            q, k, v, is_causal=c
        )[0],
    }


def sdpa_backend(q, k, v, causal) -> str:
    """The first SDPA backend that accepts these inputs, in PyTorch's priority order."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for backend in (
        SDPBackend.CUDNN_ATTENTION,
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.MATH,
    ):
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return backend.name
        except RuntimeError:
            continue
    return "none"


def _inputs(n, dtype):
    gen = torch.Generator(device="cuda").manual_seed(n)
    shape = (B, H, n, DH)
    q, k, v, g = (
        torch.randn(shape, device="cuda", dtype=dtype, generator=gen) for _ in range(4)
    )
    grads = tuple(t.clone().requires_grad_() for t in (q, k, v))
    return (q, k, v), grads, g


def _call(fn, kind, qkv, grads, g, causal):
    if kind == "fwd":
        with torch.no_grad():
            fn(*qkv, causal)
    else:
        fn(*grads, causal).backward(g)
        for t in grads:
            t.grad = None


def _time_once(fn, kind, qkv, grads, g, causal) -> float:
    start, end = (
        torch.cuda.Event(enable_timing=True),
        torch.cuda.Event(enable_timing=True),
    )
    start.record()
    _call(fn, kind, qkv, grads, g, causal)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)  # ms


def _peak_mib(fn, kind, qkv, grads, g, causal) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    _call(fn, kind, qkv, grads, g, causal)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def time_row(n, reps, causal, dtype) -> dict:
    torch.cuda.empty_cache()
    qkv, grads, g = _inputs(n, dtype)
    fns = contenders()
    if n > NAIVE_MAX_N:  # scores (B, H, n, n) would not fit beside the rest
        fns.pop("naive")
        fns.pop("sdpa_math")
    row = {"n": n, "causal": causal, "sdpa_backend": sdpa_backend(*qkv, causal)}
    for kind in ("fwd", "f+b"):
        for fn in fns.values():  # warm-up (Triton compiles here)
            _call(fn, kind, qkv, grads, g, causal)
        times = {name: [] for name in fns}
        for _ in range(reps):
            for name, fn in fns.items():
                times[name].append(_time_once(fn, kind, qkv, grads, g, causal))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name in fns:
            row[f"{name}_{kind}_ms"] = med[name]
            row[f"{name}_{kind}_ratio"] = med[name] / med["sdpa"]
            row[f"{name}_{kind}_mem_MiB"] = _peak_mib(
                fns[name], kind, qkv, grads, g, causal
            )
    flops = 4 * B * H * n * n * DH * (0.5 if causal else 1.0)
    for name in ("sdpa", "flash"):
        row[f"{name}_fwd_tflops"] = flops / (row[f"{name}_fwd_ms"] * 1e-3) / 1e12
    with torch.no_grad():
        exact = F.scaled_dot_product_attention(*qkv, is_causal=causal).float()
        row["flash_max_err"] = float(
            (attnlab.flash_attention(*qkv, is_causal=causal).float() - exact)
            .abs()
            .max()
        )
    return row


def _errors(fn, q, k, v, dout, ref, ref_g):
    q_, k_, v_ = (t.clone().requires_grad_() for t in (q, k, v))
    out = fn(q_, k_, v_)
    grads = torch.autograd.grad(out, (q_, k_, v_), dout)
    errs = [(out.double() - ref).abs().max().item()]
    errs += [(a.double() - b).abs().max().item() for a, b in zip(grads, ref_g)]
    return dict(zip(("out", "dq", "dk", "dv"), errs))


def precision_case(dtype, T, S, causal) -> dict:
    """One row: errors of SDPA and of attnlab (Triton and torch forward) in ``dtype``
    against float64 on the same rounded inputs (sharp logits: q, k scaled by 4)."""
    gen = torch.Generator(device="cuda").manual_seed(T + S + causal)
    q, k, v, dout = (
        (torch.randn(1, 8, n, DH, device="cuda", generator=gen) * m).to(dtype)
        for n, m in ((T, 4.0), (S, 4.0), (S, 1.0), (T, 1.0))
    )
    # attnlab's flash_attention and SDPA's is_causal both align top-left when T != S
    mask = efficient.band_mask(T, S, None, causal, device="cuda")
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask)
    ref_g = torch.autograd.grad(ref, (q64, k64, v64), dout.double())
    fns = {
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=causal
        ),
        "flash": lambda q, k, v: attnlab.flash_attention(q, k, v, is_causal=causal),
        "flash_torch": lambda q, k, v: _flash_torch(q, k, v, causal),
    }
    e = {
        name: _errors(fn, q, k, v, dout, ref.detach(), ref_g)
        for name, fn in fns.items()
    }
    row = {"dtype": str(dtype).removeprefix("torch."), "T": T, "S": S, "causal": causal}
    for name in fns:
        for what, err in e[name].items():
            row[f"{name}_{what}_err"] = err
    for name in ("flash", "flash_torch"):
        row[f"{name}_worst_ratio"] = max(e[name][w] / e["sdpa"][w] for w in e[name])
    row["flash_out_ratio"] = e["flash"]["out"] / e["sdpa"]["out"]
    return row


def precision_rows() -> list[dict]:
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for T, S in ((1024, 1024), (512, 1536), (1536, 512)):
            for causal in (False, True):
                row = precision_case(dtype, T, S, causal)
                rows.append(row)
                print(
                    f"{row['dtype']:8s} T={T:4d} S={S:4d} causal={causal!s:5s} out err "
                    f"sdpa={row['sdpa_out_err']:.2e} flash={row['flash_out_err']:.2e} "
                    f"torch={row['flash_torch_out_err']:.2e} | worst ratio over "
                    f"out/dq/dk/dv: flash={row['flash_worst_ratio']:.2f} "
                    f"torch={row['flash_torch_worst_ratio']:.2f}",
                    flush=True,
                )
    return rows


def _triton_tiles(q, k, v, causal, block_m, block_n):
    from attnlab.kernels.triton_flash import triton_flash_forward

    out, _ = triton_flash_forward(
        q, k, v, is_causal=causal, block_m=block_m, block_n=block_n
    )
    return out


def block_rows(n=8192, reps=10) -> list[dict]:
    """The Triton forward's speed against its tile size (bfloat16, not causal): the
    library's default is 64 x 64, fixed; production kernels autotune it."""
    (q, k, v), _, _ = _inputs(n, torch.bfloat16)
    flops = 4 * B * H * n * n * DH
    rows = []
    for bm, bn in ((32, 32), (64, 32), (64, 64), (128, 64), (128, 128)):
        fn = functools.partial(_triton_tiles, block_m=bm, block_n=bn)
        try:
            fn(q, k, v, False)
            ms = statistics.median(
                _time_once(fn, "fwd", (q, k, v), None, None, False) for _ in range(reps)
            )
            tflops = flops / (ms * 1e-3) / 1e12
            rows.append(dict(n=n, block_m=bm, block_n=bn, fwd_ms=ms, tflops=tflops))
        except Exception as e:  # e.g. out of shared memory for the largest tiles
            rows.append({"n": n, "block_m": bm, "block_n": bn, "error": repr(e)[:200]})
        print(rows[-1], flush=True)
    return rows


def _fmt(row) -> str:
    names = [m for m in contenders() if f"{m}_fwd_ratio" in row]
    parts = [f"n={row['n']:5d} causal={row['causal']!s:5s} [{row['sdpa_backend']}]"]
    for kind in ("fwd", "f+b"):
        parts.append(
            kind + " " + " ".join(f"{m}={row[f'{m}_{kind}_ratio']:.2f}x" for m in names)
        )
    parts.append(
        "f+b MiB " + " ".join(f"{m}={row[f'{m}_f+b_mem_MiB']:.0f}" for m in names)
    )
    parts.append(
        f"TFLOP/s sdpa={row['sdpa_fwd_tflops']:.0f} flash={row['flash_fwd_tflops']:.0f}"
    )
    return " | ".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n in {1024, 2048}, 3 reps")
    p.add_argument("--ns", type=int, nargs="*", default=DEFAULT_NS)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--json", default=None, help="write the results here")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit(
            "bench/attention_cuda.py needs a CUDA GPU (bench/attention.py is the CPU one)"
        )
    from attnlab.kernels import triton_flash

    if not triton_flash.available():
        sys.exit("bench/attention_cuda.py needs Triton: pip install 'attnlab[gpu]'")
    ns, reps = ([1024, 2048], 3) if a.quick else (a.ns, a.reps)
    t0 = time.time()
    dtype = torch.bfloat16
    rows = []
    for causal in (False, True):
        for n in ns:
            rows.append(time_row(n, reps, causal, dtype))
            print(_fmt(rows[-1]), flush=True)
    precision = precision_rows()
    blocks = block_rows(reps=reps)
    import triton

    props = torch.cuda.get_device_properties(0)
    result = {
        "what": f"attention on a GPU vs torch SDPA: bfloat16, B={B}, H={H}, Dh={DH}; "
        f"window={WINDOW} each side; medians of {reps} interleaved repetitions "
        "(CUDA events); memory = max_memory_allocated during the call minus before",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="minutes"
        ),
        "machine": {
            "gpu": props.name,
            "multiprocessors": props.multi_processor_count,
            "memory_GiB": round(props.total_memory / 2**30, 1),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "triton": triton.__version__,
        },
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
        "precision": precision,
        "triton_blocks": blocks,
    }
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
        print("wrote", a.json)
    return result


if __name__ == "__main__":
    main()
