"""Benchmark: attention at scale against torch's SDPA, time and peak memory against n.

    python bench/attention.py                         the table, n = 256 ... 4096
    python bench/attention.py --quick                 n = 256, 512 (seconds)
    python bench/attention.py --threads 1 --cpu-time  CPU time of the one compute thread
    python bench/attention.py --json bench/results/attention_cpu.json

Float32, B = 1, H = 8, Dh = 64, no mask. Contenders, all on the same q, k, v:

* ``naive``   attnlab.scaled_dot_product_attention (materialises the (T, S) weights)
* ``sdpa``    torch.nn.functional.scaled_dot_product_attention (the anchor)
* ``flash``   attnlab.flash_attention (tiled, online softmax, recomputing backward)
* ``window``  attnlab.sliding_window_attention, window 128 on each side (another mask)
* ``linear``  attnlab.linear_attention (elu + 1 features; another function)

Time: forward (no grad) and forward + backward, the contenders interleaved with SDPA
in every repetition so that load from other processes hits all alike; the median is
reported, and its ratio to SDPA's median in the same phase. ``naive`` is timed in a
phase of its own (with SDPA again): its gigabytes of allocations slowed whatever ran
next (flash's forward ratio at n = 4096 measured 1.24 and 1.34 beside it, 1.14 and
1.17 without it, in four back-to-back runs). On a shared machine ``--threads 1
--cpu-time`` measures the compute thread's CPU time, which other processes barely
affect (with 2 threads every small op pays a thread barrier, and under load a barrier
can cost a scheduler slice: ratios of many-op kernels to one-op SDPA blow up).

Memory: each (contender, n, forward or forward + backward) is measured in a **fresh
process** (``multiprocessing`` spawn), one thread, with glibc's mmap threshold fixed
(``mallopt``) before torch allocates anything, so that no memory freed by an earlier
call sits in an allocator arena and hides a later peak (a memory pass after the timings,
in the same process, read 0 MiB for tensors of tens of MiB). Reported: the peak
resident set size (VmHWM, reset through /proc/self/clear_refs) above the resident size
before the call, after building the inputs. Each measurement is asserted to be at least
its analytic lower bound: the output, plus the three input gradients for forward +
backward. The extra memory of the forward + backward is what the target is about.

Also printed: the largest n where each ratio was measured, the crossover n where
linear attention's forward beats SDPA's, and linear attention's relative error
||linear - softmax||_F / ||softmax||_F on these random inputs.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import multiprocessing
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F

import attnlab

WINDOW = 128
DEFAULT_NS = [256, 512, 1024, 2048, 4096]


def contenders() -> dict:
    return {
        "naive": lambda q, k, v: attnlab.scaled_dot_product_attention(q, k, v)[0],
        "sdpa": F.scaled_dot_product_attention,
        "flash": attnlab.flash_attention,
        "window": lambda q, k, v: attnlab.sliding_window_attention(q, k, v, WINDOW),
        "linear": attnlab.linear_attention,
    }


def _status(key: str) -> int:
    """A VmHWM/VmRSS line of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _fix_mmap_threshold(nbytes: int = 1 << 20) -> None:
    """Make glibc serve every block >= nbytes with mmap and unmap it when freed, so
    memory freed by one contender is not counted as resident before the next."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, nbytes)  # M_MMAP_THRESHOLD (fixed: disables the sliding one)
        libc.mallopt(-1, nbytes)  # M_TRIM_THRESHOLD
    except OSError:
        pass


def peak_extra(fn) -> int:
    """Peak RSS above the RSS before ``fn()``; bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = _status("VmRSS")
    fn()
    return _status("VmHWM") - before


def _inputs(n):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 8, n, 64) for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    g = torch.randn(1, 8, n, 64)

    def fwd(fn):
        with torch.no_grad():
            fn(q, k, v)

    def fwd_bwd(fn):
        fn(qg, kg, vg).backward(g)
        for t in (qg, kg, vg):
            t.grad = None

    return (q, k, v), fwd, fwd_bwd


def _interleaved(fns, fwd, fwd_bwd, reps, clock) -> dict:
    """Median seconds of each function, forward and forward + backward, interleaved."""
    times = {(name, kind): [] for name in fns for kind in ("fwd", "f+b")}
    for fn in fns.values():  # warm-up
        fwd(fn)
        fwd_bwd(fn)
    for _ in range(reps):
        for name, fn in fns.items():
            for kind, call in (("fwd", fwd), ("f+b", fwd_bwd)):
                t0 = clock()
                call(fn)
                times[(name, kind)].append(clock() - t0)
    return {key: statistics.median(ts) for key, ts in times.items()}


def time_row(n, reps, clock) -> dict:
    """Median times and their ratios to SDPA measured in the same phase.

    Two phases: SDPA interleaved with the O(n)-memory contenders, then SDPA
    interleaved with ``naive`` alone, whose gigabytes of allocations would otherwise
    disturb the timing of whatever runs right after them."""
    (q, k, v), fwd, fwd_bwd = _inputs(n)
    fns = contenders()
    naive = {"sdpa": fns["sdpa"], "naive": fns.pop("naive")}
    row = {"n": n}
    for phase in (fns, naive):
        med = _interleaved(phase, fwd, fwd_bwd, reps, clock)
        for name in phase:
            for kind in ("fwd", "f+b"):
                if name == "sdpa" and phase is naive:
                    continue  # the anchor reported is the one of the main phase
                row[f"{name}_{kind}_ms"] = 1e3 * med[(name, kind)]
                row[f"{name}_{kind}_ratio"] = med[(name, kind)] / med[("sdpa", kind)]
    with torch.no_grad():
        exact = F.scaled_dot_product_attention(q, k, v)
        row["linear_rel_err"] = float(
            (attnlab.linear_attention(q, k, v) - exact).norm() / exact.norm()
        )
        row["flash_max_err"] = float(
            (attnlab.flash_attention(q, k, v) - exact).abs().max()
        )
    return row


def _measure_child(name: str, n: int, kind: str) -> int:
    """Runs in a fresh process: extra peak bytes of one call of one contender."""
    _fix_mmap_threshold()  # before torch allocates: no arena keeps freed memory
    torch.set_num_threads(1)
    _, fwd, fwd_bwd = _inputs(n)
    fn = contenders()[name]
    return peak_extra(lambda: (fwd if kind == "fwd" else fwd_bwd)(fn))


def lower_bound(n: int, kind: str) -> int:
    """Bytes that must exist at the peak: the output (B=1, H=8, n, 64, float32), and
    for forward + backward also dq, dk, dv."""
    out = 8 * n * 64 * 4
    return out if kind == "fwd" else 4 * out


def memory_row(row, pool) -> None:
    """Adds each contender's extra peak memory (MiB) to ``row``, each measured in a
    fresh process of ``pool`` (spawned, ``maxtasksperchild=1``; with several workers
    the measurements run side by side, each in its own process)."""
    n = row["n"]
    jobs = {
        (name, kind): pool.apply_async(_measure_child, (name, n, kind))
        for name in contenders()
        for kind in ("fwd", "f+b")
    }
    for (name, kind), job in jobs.items():
        extra = job.get()
        row[f"{name}_{kind}_mem_MiB"] = extra / 2**20
        # RSS counts pages: allow a page per output row's end for rounding
        assert extra >= 0.98 * lower_bound(n, kind), (
            f"{name} {kind} n={n}: {extra / 2**20:.1f} MiB is below the "
            f"{lower_bound(n, kind) / 2**20:.1f} MiB the outputs alone need: "
            "the measurement is wrong"
        )


def run(ns, reps, threads, cpu_time, mem=True, mem_workers=1):
    torch.set_num_threads(threads)
    clock = time.thread_time if cpu_time else time.perf_counter
    rows = []
    for n in ns:  # timings first, with the allocator as users have it
        rows.append(time_row(n, reps, clock))
        print(_fmt(rows[-1]), flush=True)
    if mem:  # then the memory pass, one fresh process per measurement
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(mem_workers, maxtasksperchild=1) as pool:
            for row in rows:
                memory_row(row, pool)
                print(_fmt(row), flush=True)
    return rows


def _fmt(row) -> str:
    names = list(contenders())
    parts = [f"n={row['n']:5d}"]
    for kind in ("fwd", "f+b"):
        parts.append(
            kind + " " + " ".join(f"{m}={row[f'{m}_{kind}_ratio']:.2f}x" for m in names)
        )
    if row.get("sdpa_f+b_mem_MiB") is not None:
        parts.append(
            "f+b MiB " + " ".join(f"{m}={row[f'{m}_f+b_mem_MiB']:.0f}" for m in names)
        )
    parts.append(f"linear err={row['linear_rel_err']:.2f}")
    return " | ".join(parts)


def crossover(rows):
    """Smallest n from which linear attention's forward is faster than SDPA's."""
    for i, row in enumerate(rows):
        if all(r["linear_fwd_ratio"] < 1.0 for r in rows[i:]):
            return row["n"]
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="n in {256, 512}, 2 repetitions"
    )
    p.add_argument("--ns", type=int, nargs="*", default=DEFAULT_NS)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cpu-time", action="store_true")
    p.add_argument("--no-mem", action="store_true")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--mem-workers", type=int, default=1,
                   help="fresh processes measuring memory side by side")  # fmt: skip
    p.add_argument("--mem-only", default=None, metavar="JSON",
                   help="re-measure only the memory of an existing result file")  # fmt: skip
    a = p.parse_args(argv)
    if a.mem_only:
        return remeasure_memory(
            a.mem_only, a.mem_workers, a.ns if a.ns != DEFAULT_NS else None
        )
    ns, reps = ([256, 512], 2) if a.quick else (a.ns, a.reps)
    load0 = os.getloadavg()
    t0 = time.time()
    rows = run(ns, reps, a.threads, a.cpu_time, mem=not a.no_mem,
               mem_workers=a.mem_workers)  # fmt: skip
    result = {
        "what": "attention at scale vs torch SDPA: float32, B=1, H=8, Dh=64, no mask; "
        f"window={WINDOW} each side; medians of {reps} interleaved repetitions",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="minutes"
        ),
        "machine": {
            "cpu": _cpu_name(),
            "cores": os.cpu_count(),
            "threads": a.threads,
            "clock": "thread CPU time" if a.cpu_time else "wall clock",
            "loadavg_start": load0,
            "loadavg_end": os.getloadavg(),
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "window": WINDOW,
        "memory": "extra peak RSS of forward + backward, each in a fresh process",
        "seconds": round(time.time() - t0, 1),
        "crossover_linear_n": crossover(rows),
        "rows": rows,
    }
    print(
        f"linear attention's forward beats SDPA from n = {result['crossover_linear_n']}"
    )
    for line in targets(rows):
        print(line)
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
        print("wrote", a.json)
    return result


def remeasure_memory(path: str, workers: int, ns=None) -> dict:
    """Replace the memory fields of the rows of a result file by fresh-process
    measurements (the timings are kept as they were measured). Rows whose n is not
    in ``ns`` lose their memory fields (None): an old value is not kept."""
    with open(path) as f:
        result = json.load(f)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers, maxtasksperchild=1) as pool:
        for row in result["rows"]:
            if ns and row["n"] not in ns:
                for key in [k for k in row if k.endswith("_mem_MiB")]:
                    row[key] = None
                continue
            memory_row(row, pool)
            print(_fmt(row), flush=True)
    result["memory"] = (
        "extra peak RSS, each value in a fresh process, measured "
        + datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes")
    )
    for line in targets(result["rows"]):
        print(line)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", path)
    return result


TARGETS = {"flash_fwd_ratio": 1.3, "flash_f+b_ratio": 2.0}  # at the largest n


def targets(rows) -> list[str]:
    """The performance targets at the largest n, each with PASS or MISS."""
    last, lines = rows[-1], []
    for key, limit in TARGETS.items():
        ok = "PASS" if last[key] <= limit else "MISS"
        lines.append(f"{ok} n={last['n']}: {key} = {last[key]:.2f} (target <= {limit})")
    if last.get("flash_f+b_mem_MiB") is not None:
        flash, naive = last["flash_f+b_mem_MiB"], last["naive_f+b_mem_MiB"]
        ok = "PASS" if flash < naive / 10 else "MISS"
        lines.append(
            f"{ok} n={last['n']}: flash f+b extra memory {flash:.0f} MiB "
            f"= {flash / naive:.1%} of naive's {naive:.0f} MiB (target < 10%)"
        )
    return lines


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
