"""One short GPU session for the Triton kernels: the GPU tests, then six timings.

    timeout 480 python bench/attention_gpu_check.py --json bench/results/attention_gpu.json

Written for a lent GPU with little time (about 15 minutes of device time per task, start
included): the whole run stays under 480 s on an H100/H200.

1. ``tests/test_gpu.py`` (16-bit error of the output and the gradients against SDPA's
   own, the Triton kernels forward and backward; GQA, padding, window), with one pinned
   tile configuration (``ATTNLAB_TRITON_AUTOTUNE=0``: no autotuning in the tests), at
   most 150 s; its pass/fail count goes into the JSON.
2. Six configurations (bfloat16, B = 4, H = 16, n in {1k, 4k, 16k}, head dim 64 and 128,
   causal and not), autotuned: forward and forward + backward time of
   ``attnlab.flash_attention`` (Triton) against SDPA (CUDA events, interleaved, median
   of ``--reps``), the extra memory of both, and the forward of the sliding window with
   ``w = n / 8`` (Triton, same kernel) against full SDPA.

The JSON records the GPU, torch, Triton, the date, the kernel's commit (``--commit``,
else ``git rev-parse HEAD`` where git works) and a hash of the kernel sources, so a page
can say which kernel a number describes.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = ["triton_flash.py", "triton_flash_bwd.py", "triton_tiles.py"]
# (n, head dim, causal): at most six, n in {1k, 4k, 16k}, d in {64, 128}
CONFIGS = [
    (1024, 64, False),
    (4096, 64, False),
    (4096, 64, True),
    (16384, 64, True),
    (4096, 128, True),
    (16384, 128, False),
]
B, H = 4, 16


def kernel_id(commit: str | None) -> dict:
    src = b"".join((ROOT / "src/attnlab/kernels" / f).read_bytes() for f in KERNELS)
    if commit is None:
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                timeout=10,
            ).stdout.strip() or None  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {"commit": commit, "sources_sha256": hashlib.sha256(src).hexdigest()[:16]}


def run_tests(limit_s: int) -> dict:
    env = dict(os.environ, ATTNLAB_TRITON_AUTOTUNE="0", TRITON_INTERPRET="0")
    env["PYTHONPATH"] = f"{ROOT / 'src'}:{ROOT}:" + env.get("PYTHONPATH", "")
    t0 = time.time()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
             "tests/test_gpu.py"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit_s,
        )  # fmt: skip
        tail, rc = p.stdout.strip().splitlines()[-1:] or [""], p.returncode
        print(p.stdout[-3000:], p.stderr[-2000:], flush=True)
    except subprocess.TimeoutExpired:
        tail, rc = ["timed out"], None
    return {"summary": tail[0], "returncode": rc, "seconds": round(time.time() - t0)}


def _timed(fn):
    import torch

    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    fn()
    ev[1].record()
    torch.cuda.synchronize()
    return ev[0].elapsed_time(ev[1])


def _peak(fn):
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def measure(n: int, d: int, causal: bool, reps: int) -> dict:
    """One configuration: forward, forward + backward and the window's forward."""
    import torch
    import torch.nn.functional as F

    import attnlab

    torch.cuda.empty_cache()
    gen = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v, g = (
        torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        for _ in range(4)
    )  # (B, H, n, d)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

    def sdpa(x=(q, k, v)):
        return F.scaled_dot_product_attention(*x, is_causal=causal)

    def ours(x=(q, k, v)):
        return attnlab.flash_attention(*x, is_causal=causal)

    def window(x=(q, k, v)):
        return attnlab.sliding_window_attention(*x, n // 8, is_causal=causal)

    def full_sdpa(x=(q, k, v)):
        return F.scaled_dot_product_attention(*x)

    def fwd(f):
        def run():
            with torch.no_grad():
                f()

        return run

    def fb(f):
        def run():
            f((qg, kg, vg)).backward(g)
            for t in (qg, kg, vg):
                t.grad = None

        return run

    pairs = {
        "fwd": (fwd(ours), fwd(sdpa)),
        "f+b": (fb(ours), fb(sdpa)),
        "window_fwd": (fwd(window), fwd(full_sdpa)),
    }
    row = {"n": n, "head_dim": d, "causal": causal}
    for name, (mine, ref) in pairs.items():
        mine(), ref()  # warm-up: Triton compiles and autotunes here
        ts = {"ours": [], "sdpa": []}
        for _ in range(reps):
            ts["ours"].append(_timed(mine))
            ts["sdpa"].append(_timed(ref))
        mo, ms = statistics.median(ts["ours"]), statistics.median(ts["sdpa"])
        row[f"{name}_ms"], row[f"sdpa_{name}_ms"] = mo, ms
        row[f"{name}_ratio"] = mo / ms
        if name != "window_fwd":
            row[f"{name}_mem_MiB"] = _peak(mine)
            row[f"sdpa_{name}_mem_MiB"] = _peak(ref)
            row[f"{name}_mem_ratio"] = row[f"{name}_mem_MiB"] / max(
                row[f"sdpa_{name}_mem_MiB"], 1e-9
            )
    flops = 4 * B * H * n * n * d * (0.5 if causal else 1.0)
    row["fwd_tflops"] = flops / (row["fwd_ms"] * 1e-3) / 1e12
    row["sdpa_fwd_tflops"] = flops / (row["sdpa_fwd_ms"] * 1e-3) / 1e12
    with torch.no_grad():
        row["max_abs_diff_vs_sdpa"] = float(
            (ours().float() - sdpa().float()).abs().max()
        )
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default="bench/results/attention_gpu.json")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--commit", default=None, help="the kernel's commit (else git)")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--test-limit", type=int, default=150, help="seconds")
    a = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench/attention_gpu_check.py needs a CUDA GPU")
    t0 = time.time()
    result = {
        "what": "attnlab's Triton flash attention (forward and backward kernels) vs "
        f"torch SDPA: bfloat16, B={B}, H={H}; medians of {a.reps} interleaved "
        "repetitions (CUDA events); memory = max_memory_allocated during the call "
        "minus before; window = n/8 keys each side, against full (non-causal) SDPA",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="minutes"
        ),
        "kernel": kernel_id(a.commit),
    }
    result["tests"] = None if a.skip_tests else run_tests(a.test_limit)
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    import triton

    props = torch.cuda.get_device_properties(0)
    result["machine"] = {
        "gpu": props.name,
        "multiprocessors": props.multi_processor_count,
        "memory_GiB": round(props.total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
    }

    rows = []
    for n, d, causal in CONFIGS:
        rows.append(measure(n, d, causal, a.reps))
        print(json.dumps(rows[-1]), flush=True)
    result["rows"] = rows
    result["seconds"] = round(time.time() - t0, 1)
    out = ROOT / a.json
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print("wrote", out)
    return result


if __name__ == "__main__":
    main()
