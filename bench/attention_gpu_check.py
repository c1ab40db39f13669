"""One short GPU session for the Triton kernels: the GPU tests, then timed rows.

    timeout 480 python bench/attention_gpu_check.py --json $OUT/attention_gpu.json

Written for a lent GPU with little time (about 15 minutes of device time per task, start
included). It cannot come back empty: the JSON is rewritten after the tests and after
every row, a row that raises is recorded with its error and the run goes on, and a row
that would not fit the time left (``--budget``, 450 s) is recorded as skipped.

1. ``tests/test_gpu.py`` (16-bit error of the output and the gradients against SDPA's
   own, float64 references; GQA, padding, window, head dim 128, float32), with the
   default tile of each kernel pinned (``ATTNLAB_TRITON_AUTOTUNE=0``: no autotuning), in
   four groups side by side (their kernels compile in parallel), at most
   ``--test-limit`` s; each group's pass/fail count goes into the JSON.
2. Rows (bfloat16, B = 4, H = 16), the most useful first: forward and forward + backward
   time of the Triton kernels (:func:`attnlab.kernels.triton_flash.triton_flash_attention`,
   what ``attnlab.flash_attention`` runs on CUDA) against SDPA with the same causality,
   their extra memory, and the sliding window's forward (``w = n / 8``, same kernel)
   against SDPA with the same causality. Each function is called once before timing:
   Triton compiles and autotunes there (autotuning over the first ``--tune`` surviving
   tiles, 3 by default; results cached on disk, ``TRITON_CACHE_AUTOTUNING=1``). A timing
   is the median over ``--reps`` CUDA-event pairs, each around enough back-to-back calls
   (at least ``--min-ms`` of GPU time, 20 ms) that the Python launch cost is amortised;
   ours and SDPA's pairs interleave. The JSON records the tiles the autotuner chose for
   each kernel and the backend SDPA picked.

Cold-cache time, an estimate (nothing here has run on a GPU host): compiling one kernel
for sm_90 took 2.8-4.7 (forward), 3.4-8.5 (dK/dV) and 3.8-4.8 (dQ) CPU seconds on the
project's 2-core CPU (tests/test_triton_compile.py prints them). The tests need about 50
pinned compiles (dtype x causal x GQA / padding / window specialisations x 3 kernels),
about 230 CPU s, so about 60-70 s in four parallel groups; the rows need 12 compiles
(3 tiles x forward, dK/dV, dQ, window forward) for each new (head dim, causality), three
of them, about 170 s, plus about 40 s of timing and imports: about 300 s in all.
``--budget`` keeps the run inside 480 s whatever the rate: a row that would not fit is
recorded as skipped.

``--dry-run`` runs the whole script on a CPU in Triton's interpreter at tiny sizes
(``TRITON_INTERPRET=1`` is set before triton is imported): every row's functions run and
are checked against SDPA, the JSON is written, and what needs CUDA (timings, memory) is
marked ``"not run: no CUDA (dry run)"``.

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
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = ["triton_flash.py", "triton_flash_bwd.py", "triton_tiles.py"]
# (n, head dim, causal), the most useful first
ROWS = [
    (4096, 64, True),
    (4096, 64, False),
    (16384, 64, True),
    (1024, 64, False),
    (16384, 64, False),
    (4096, 128, True),
]
DRY_ROWS = [(64, 16, True), (48, 32, False)]
B, H = 4, 16
NOT_RUN = "not run: no CUDA (dry run)"
# CPU seconds of one sm_90 compile (bf16, tests/test_triton_compile.py on a 2-core VM)
COMPILE_S = {"fwd": 3.5, "dkdv": 8.0, "dq": 5.0}


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


def write(result: dict, path: pathlib.Path) -> None:
    """Rewrite the whole JSON (atomically): a run cut short keeps what it measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)


# tests/test_gpu.py in groups run side by side: each compiles its own kernels (Triton
# compiles on one CPU core per process; the file cache is shared)
TEST_GROUPS = [
    "flash_16bit and dtype0",  # float16
    "flash_16bit and dtype1",  # bfloat16
    "masks_and_groups",
    "not flash_16bit and not masks_and_groups",
]


def run_tests(limit_s: int) -> dict:
    env = dict(os.environ, ATTNLAB_TRITON_AUTOTUNE="0")
    env["PYTHONPATH"] = f"{ROOT / 'src'}:{ROOT}:" + env.get("PYTHONPATH", "")
    t0 = time.time()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "-rfE",
                "tests/test_gpu.py",
                "-k",
                group,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for group in TEST_GROUPS
    ]
    groups = {}
    for group, p in zip(TEST_GROUPS, procs):
        try:
            out, err = p.communicate(timeout=max(1.0, limit_s - (time.time() - t0)))
            lines = out.strip().splitlines()
            groups[group] = {
                "summary": (lines[-1:] or [""])[0],
                "returncode": p.returncode,
                "failed": [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))][
                    :40
                ],
            }
            print(out[-3000:], err[-2000:], flush=True)
        except subprocess.TimeoutExpired:
            p.kill()
            groups[group] = {"summary": "timed out", "returncode": None, "failed": []}
    return {"groups": groups, "seconds": round(time.time() - t0)}


def timed(fn, min_ms: float, reps: int, other=None) -> tuple[float, float | None]:
    """Median ms per call of ``fn`` (and of ``other``, interleaved): each CUDA-event
    pair brackets ``k`` back-to-back calls, ``k`` chosen so that a pair lasts at least
    ``min_ms`` (the launch cost of one call is then a small share)."""
    import torch

    def pair(f, k):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        ev[0].record()
        for _ in range(k):
            f()
        ev[1].record()
        torch.cuda.synchronize()
        return ev[0].elapsed_time(ev[1])

    def calls(f):
        one = max(pair(f, 1), 1e-3)
        return max(1, min(1000, int(min_ms / one) + 1))

    fs = [fn] if other is None else [fn, other]
    ks = [calls(f) for f in fs]
    ts: list[list[float]] = [[] for _ in fs]
    for _ in range(reps):
        for i, f in enumerate(fs):
            ts[i].append(pair(f, ks[i]) / ks[i])
    med = [statistics.median(t) for t in ts]
    return med[0], (med[1] if other is not None else None)


def peak_mib(fn) -> float:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def sdpa_backend(q, k, v, causal) -> str:
    """The backend SDPA dispatches to for these inputs (torch's own choice function)."""
    import torch

    try:
        from torch.nn.attention import SDPBackend

        return SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=causal)).name
    except Exception as e:  # noqa: BLE001 - private API: record why not
        return f"unknown ({type(e).__name__})"


def tuned_tiles() -> dict:
    """The tile each Triton kernel last ran with (the autotuner's choice)."""
    from attnlab.kernels import triton_flash as tf
    from attnlab.kernels import triton_flash_bwd as bwd

    out = {}
    for name, tuner in (
        ("fwd", tf._fwd_tuned),
        ("dkdv", bwd.dkdv_tuned),
        ("dq", bwd.dq_tuned),
    ):
        c = getattr(tuner, "best_config", None)
        out[name] = None if c is None else {
            **c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages,
        }  # fmt: skip
    return out


def row_cost_s(d: int, causal: bool, seen: set) -> float:
    """Estimated compile seconds of a row's kernels not compiled yet (3 tiles each)."""
    cost = 0.0
    for kern, window in (("fwd", False), ("dkdv", False), ("dq", False), ("fwd", True)):
        if (kern, d, causal, window) not in seen:
            cost += 3 * COMPILE_S[kern]
    return cost


def measure(n, d, causal, a, dry) -> dict:
    """One row: forward, forward + backward and the window's forward, each against
    SDPA with the same causality."""
    import torch
    import torch.nn.functional as F

    from attnlab.kernels import triton_flash as tf

    dev = "cpu" if dry else "cuda"
    b, h = (1, 2) if dry else (B, H)
    if not dry:
        torch.cuda.empty_cache()
    gen = torch.Generator(device=dev).manual_seed(n + d)
    q, k, v, g = (
        torch.randn(b, h, n, d, device=dev, dtype=torch.bfloat16, generator=gen)
        for _ in range(4)
    )  # (b, h, n, d)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    w = max(1, n // 8)

    def sdpa(x=(q, k, v)):
        return F.scaled_dot_product_attention(*x, is_causal=causal)

    def ours(x=(q, k, v)):
        return tf.triton_flash_attention(*x, is_causal=causal)

    def window(x=(q, k, v)):
        return tf.triton_flash_attention(*x, is_causal=causal, window=w)

    def fwd(f):
        def run():
            with torch.no_grad():
                return f()

        return run

    def fb(f):
        def run():
            f((qg, kg, vg)).backward(g)
            for t in (qg, kg, vg):
                t.grad = None

        return run

    row: dict = {"n": n, "head_dim": d, "causal": causal, "window": w}
    row["sdpa_backend"] = NOT_RUN if dry else sdpa_backend(q, k, v, causal)
    t0 = time.time()
    pairs = {
        "fwd": (fwd(ours), fwd(sdpa)),
        "f+b": (fb(ours), fb(sdpa)),
        "window_fwd": (fwd(window), fwd(sdpa)),
    }
    tiles = {}
    for name, (mine, ref) in pairs.items():
        mine(), ref()  # warm-up: Triton compiles and autotunes here
        tiles[name] = tuned_tiles()
    row["warmup_s"] = round(time.time() - t0, 1)
    row["tiles"] = {
        "fwd": tiles["fwd"]["fwd"],
        "dkdv": tiles["f+b"]["dkdv"],
        "dq": tiles["f+b"]["dq"],
        "window_fwd": tiles["window_fwd"]["fwd"],
    }
    # correctness smoke test (bf16 against bf16: not an accuracy figure)
    with torch.no_grad():
        row["max_abs_diff_vs_sdpa"] = float(
            (fwd(ours)().float() - sdpa().float()).abs().max()
        )
        ref_w = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(),
            attn_mask=_band(n, w, causal, dev),
        )  # fmt: skip
        row["window_max_abs_diff_vs_masked_sdpa"] = float(
            (fwd(window)().float() - ref_w).abs().max()
        )
    if dry:
        for name in pairs:
            row[f"{name}_ms"] = row[f"sdpa_{name}_ms"] = NOT_RUN
        row["memory"] = NOT_RUN
        return row
    for name, (mine, ref) in pairs.items():
        mo, ms = timed(mine, a.min_ms, a.reps, ref)
        row[f"{name}_ms"], row[f"sdpa_{name}_ms"] = mo, ms
        row[f"{name}_ratio"] = mo / ms
        if name != "window_fwd":
            row[f"{name}_mem_MiB"] = peak_mib(mine)
            row[f"sdpa_{name}_mem_MiB"] = peak_mib(ref)
    flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
    for who in ("", "sdpa_"):
        row[f"{who}fwd_tflops"] = flops / (row[f"{who}fwd_ms"] * 1e-3) / 1e12
        # backward = 2.5x the forward's flops (FlashAttention-2's count)
        row[f"{who}f+b_tflops"] = 3.5 * flops / (row[f"{who}f+b_ms"] * 1e-3) / 1e12
    return row


def _band(n, w, causal, dev):
    import torch

    i = torch.arange(n, device=dev)
    d = i[None, :] - i[:, None]  # key - query  (n, n)
    ok = d.abs() <= w
    return ok & (d <= 0) if causal else ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="default: $OUT/attention_gpu.json, "
                   "else bench/results/attention_gpu.json")  # fmt: skip
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--min-ms", type=float, default=20.0)
    p.add_argument("--tune", type=int, default=3, help="tiles autotuned per kernel")
    p.add_argument("--budget", type=float, default=450.0, help="seconds in all")
    p.add_argument("--commit", default=None, help="the kernel's commit (else git)")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--test-limit", type=int, default=150, help="seconds")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, Triton's interpreter, tiny sizes: no timings")  # fmt: skip
    a = p.parse_args(argv)
    t0 = time.time()
    if a.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    os.environ["TRITON_CACHE_AUTOTUNING"] = "1"  # read when the kernels are defined
    os.environ["ATTNLAB_TRITON_TUNE"] = str(a.tune)
    if a.json is None:
        base = pathlib.Path(os.environ["OUT"]) if os.environ.get("OUT") else None
        a.json = str(base / "attention_gpu.json") if base else (
            "bench/results/attention_gpu.json"
        )  # fmt: skip
    out = pathlib.Path(a.json)
    out = out if out.is_absolute() else ROOT / out
    import torch

    if not a.dry_run and not torch.cuda.is_available():
        sys.exit("bench/attention_gpu_check.py needs a CUDA GPU (or --dry-run)")
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    result: dict = {
        "what": "attnlab's Triton flash attention (forward and backward kernels) vs "
        f"torch SDPA with the same causality: bfloat16, B={B}, H={H}; median of "
        f"{a.reps} interleaved CUDA-event pairs, each over back-to-back calls lasting "
        f">= {a.min_ms} ms; autotuned over the first {a.tune} tiles the pruning keeps; "
        "memory = max_memory_allocated during the call minus before; window = n/8 "
        "keys each side, Triton kernel, against SDPA with the same causality; "
        "f+b TFLOP/s count the backward as 2.5x the forward",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="minutes"
        ),
        "dry_run": a.dry_run,
        "kernel": kernel_id(a.commit),
        "rows": [],
    }
    write(result, out)
    if a.skip_tests:
        result["tests"] = None
    elif a.dry_run:
        result["tests"] = NOT_RUN
    else:
        result["tests"] = run_tests(a.test_limit)
    write(result, out)
    import triton

    machine = {"torch": torch.__version__, "triton": triton.__version__}
    if not a.dry_run:
        props = torch.cuda.get_device_properties(0)
        machine.update(
            gpu=props.name,
            multiprocessors=props.multi_processor_count,
            memory_GiB=round(props.total_memory / 2**30, 1),
            cuda=torch.version.cuda,
        )
    result["machine"] = machine
    seen: set = set()
    for n, d, causal in DRY_ROWS if a.dry_run else ROWS:
        left = a.budget - (time.time() - t0)
        need = row_cost_s(d, causal, seen) + 15
        if not a.dry_run and need > left:
            result["rows"].append({
                "n": n, "head_dim": d, "causal": causal,
                "skipped": f"time budget: {left:.0f} s left, about {need:.0f} s needed",
            })  # fmt: skip
            write(result, out)
            continue
        try:
            row = measure(n, d, causal, a, a.dry_run)
        except Exception as e:  # noqa: BLE001 - a failing row is recorded, not fatal
            row = {"n": n, "head_dim": d, "causal": causal,
                   "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-3000:]}  # fmt: skip
        for kern, window in (("fwd", 0), ("dkdv", 0), ("dq", 0), ("fwd", 1)):
            seen.add((kern, d, causal, bool(window)))
        result["rows"].append(row)
        result["seconds"] = round(time.time() - t0, 1)
        write(result, out)
        print(json.dumps(row)[:2000], flush=True)
    result["seconds"] = round(time.time() - t0, 1)
    write(result, out)
    print("wrote", out)
    return result


if __name__ == "__main__":
    main()
