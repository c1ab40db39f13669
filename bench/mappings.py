"""Benchmark: attnlab's sparse mappings against the ``entmax`` package and softmax.

    python bench/mappings.py            the full table, n in {16, 128, 1024, 8192}
    python bench/mappings.py --quick    a tiny run (a few seconds)
    python bench/mappings.py --threads 1 --cpu-time   per-thread CPU time (see below)

For every n it times, on scores of shape (1024, n) in float32, the forward pass and the
forward + backward pass of ``torch.softmax``, ``attnlab.sparsemax`` / ``entmax15``
(default method: partial sort + exact check) and ``entmax.sparsemax`` / ``entmax15``
(full sort, the anchor). Each time is the minimum over repetitions, with the
contenders interleaved so that load from other processes hits all of them alike. It
prints the table, the speed-ups over the ``entmax`` package and the cost relative to
softmax, and the largest difference between our weights and the package's.

On a shared machine wall-clock times are noisy; ``--threads 1 --cpu-time`` measures
the CPU time of the one compute thread instead, which other processes barely affect.
"""

from __future__ import annotations

import argparse
import time

import torch

import attnlab

try:
    import entmax
except ImportError:  # the anchor is a test/bench dependency only
    entmax = None


def contenders() -> dict:
    out = {
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "sparsemax (ours)": attnlab.sparsemax,
        "entmax15 (ours)": attnlab.entmax15,
    }
    if entmax is not None:
        out["sparsemax (entmax pkg)"] = entmax.sparsemax
        out["entmax15 (entmax pkg)"] = entmax.entmax15
    return out


def measure(fns: dict, x: torch.Tensor, reps: int, clock) -> dict:
    """Minimum forward and forward+backward time (ms) of each function on ``x``."""
    g = torch.randn_like(x)
    xg = x.clone().requires_grad_()

    def fwd(fn):
        with torch.no_grad():
            fn(x)

    def fwd_bwd(fn):
        fn(xg).backward(g)
        xg.grad = None

    best = {(name, kind): float("inf") for name in fns for kind in ("fwd", "f+b")}
    for fn in fns.values():  # warm-up
        fwd(fn)
        fwd_bwd(fn)
    for _ in range(reps):
        for name, fn in fns.items():
            for kind, run in (("fwd", fwd), ("f+b", fwd_bwd)):
                start = clock()
                run(fn)
                best[name, kind] = min(best[name, kind], (clock() - start) * 1e3)
    return best


def max_diff(n: int, rows: int) -> dict:
    """Largest |ours - package| over the weights, float32, on N(0, 1) scores."""
    if entmax is None:
        return {}
    x = torch.randn(rows, n)
    return {
        "sparsemax": float((attnlab.sparsemax(x) - entmax.sparsemax(x)).abs().max()),
        "entmax15": float((attnlab.entmax15(x) - entmax.entmax15(x)).abs().max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 repetitions")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    ap.add_argument(
        "--cpu-time", action="store_true", help="thread CPU time (1 thread)"
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.cpu_time and torch.get_num_threads() != 1:
        ap.error("--cpu-time measures one thread: add --threads 1")
    clock = time.thread_time if args.cpu_time else time.perf_counter
    rows, sizes = (128, [16, 128]) if args.quick else (1024, [16, 128, 1024, 8192])
    torch.manual_seed(0)
    fns = contenders()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"{'thread CPU time' if args.cpu_time else 'wall clock'}, float32, "
        f"scores ({rows}, n) ~ N(0, 1); ms, minimum over repetitions"
    )
    if entmax is None:
        print("(the entmax package is not installed: no anchor, no ratios)")
    results = {}
    for n in sizes:
        reps = 2 if args.quick else (3 if n >= 8192 else 7)
        results[n] = measure(fns, torch.randn(rows, n), reps, clock)

    names = list(fns)
    head = f"{'mapping':24s}" + "".join(
        f"{f'n={n} fwd':>12s}{'f+b':>9s}" for n in sizes
    )
    print("\n" + head + "\n" + "-" * len(head))
    for name in names:
        cells = "".join(
            f"{results[n][name, 'fwd']:12.2f}{results[n][name, 'f+b']:9.2f}"
            for n in sizes
        )
        print(f"{name:24s}{cells}")

    print("\nratios (forward + backward)")
    for kind in ("sparsemax", "entmax15"):
        for n in sizes:
            ours = results[n][f"{kind} (ours)", "f+b"]
            soft = results[n]["softmax", "f+b"]
            line = f"  {kind:9s} n={n:5d}: ours / softmax = {ours / soft:6.1f}x"
            if entmax is not None:
                pkg = results[n][f"{kind} (entmax pkg)", "f+b"]
                fwd = results[n][f"{kind} (entmax pkg)", "fwd"]
                fwd /= results[n][f"{kind} (ours)", "fwd"]
                line += (
                    f"   entmax pkg / ours = {pkg / ours:5.1f}x (forward only "
                    f"{fwd:5.1f}x)   entmax pkg / softmax = {pkg / soft:6.1f}x"
                )
            print(line)

    if entmax is not None:
        n = 128 if args.quick else 1024
        d = max_diff(n, rows)
        print(
            f"\nexactness at n={n}: max |ours - entmax pkg| = "
            f"{d['sparsemax']:.1e} (sparsemax), {d['entmax15']:.1e} (entmax15)"
        )


if __name__ == "__main__":
    main()
