"""Benchmark: attnlab's sparse mappings against the ``entmax`` package and softmax.

    python bench/mappings.py            the full table, n in {16, 128, 1024, 8192}
    python bench/mappings.py --quick    a tiny run (a few seconds)
    python bench/mappings.py --threads 1 --cpu-time   per-thread CPU time (see below)
    python bench/mappings.py --threads 1 --cpu-time --json bench/results/mappings_cpu.json

For every n it times, on scores of shape (1024, n) in float32, the forward pass and the
forward + backward pass of ``torch.softmax``, ``attnlab.sparsemax`` / ``entmax15``
(default method: threshold iteration, a few whole-tensor passes) and ``entmax.sparsemax`` / ``entmax15``
(full sort, the anchor). Each time is the minimum over repetitions, with the
contenders interleaved so that load from other processes hits all of them alike. It
prints the table, the speed-ups over the ``entmax`` package and the cost relative to
softmax, and the largest difference between our weights and the package's. It also
times the floors of the three ways of finding the threshold, alone, on the same
scores: a full ``torch.sort``, a ``torch.topk`` of 16 (the partial sort's first prefix)
and one pass of the threshold iteration (``[z - tau]_+``, its sum and its support
size), with the number of passes the default takes. ``--json`` writes it all with the
machine (``attnlab.devices.run_meta``).

On a shared machine wall-clock times are noisy; ``--threads 1 --cpu-time`` measures
the CPU time of the one compute thread instead, which other processes barely affect.
"""

from __future__ import annotations

import argparse
import json
import sys
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


def floors(x: torch.Tensor, reps: int, clock) -> dict:
    """Forward time (ms) of the building blocks alone on ``x`` (no autograd)."""
    from attnlab.kernels import sparse as K

    z = x - x.amax(-1, keepdim=True)
    tau = torch.full_like(z[:, :1], -0.5)
    r, sg = torch.empty_like(z), torch.empty_like(z)

    def one_pass():  # what each pass of the threshold iteration computes
        torch.sub(z, tau, out=r).clamp_(min=0)
        r.sum(-1, keepdim=True)
        torch.sign(r, out=sg).sum(-1, keepdim=True)

    blocks = {
        "softmax forward": lambda: torch.softmax(x, -1),
        "torch.sort": lambda: torch.sort(x, -1, descending=True),
        "torch.topk k=16": lambda: torch.topk(x, min(16, x.shape[-1]), -1),
        "one threshold pass": one_pass,
    }
    best = dict.fromkeys(blocks, float("inf"))
    with torch.no_grad():
        for _ in range(reps + 1):  # the first round is a warm-up
            for name, fn in blocks.items():
                start = clock()
                fn()
                best[name] = min(best[name], (clock() - start) * 1e3)
    passes = {}
    for kind, fn in (("sparsemax", K.sparsemax_iter), ("entmax15", K.entmax15_iter)):
        passes[kind] = next(  # the fewest passes that settle every row
            (i for i in range(1, 40) if fn(x, -1, kind, max_iter=i) is not None), None
        )
    return {"ms": best, "passes": passes}


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
    ap.add_argument("--json", help="write the results (with the machine) here")
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
    results, floor = {}, {}
    for n in sizes:
        reps = 2 if args.quick else (3 if n >= 8192 else 7)
        x = torch.randn(rows, n)
        results[n] = measure(fns, x, reps, clock)
        floor[n] = floors(x, reps, clock)

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

    print(
        "\nfloors: forward building blocks alone (ms; x softmax's forward + backward)"
    )
    for n in sizes:
        soft = results[n]["softmax", "f+b"]
        cells = ", ".join(
            f"{name} {ms:.2f} ({ms / soft:.1f}x)" for name, ms in floor[n]["ms"].items()
        )
        p = floor[n]["passes"]
        print(
            f"  n={n:5d}: {cells}; passes: sparsemax {p['sparsemax']}, "
            f"entmax15 {p['entmax15']}"
        )

    d = {}
    if entmax is not None:
        n = 128 if args.quick else 1024
        d = max_diff(n, rows)
        print(
            f"\nexactness at n={n}: max |ours - entmax pkg| = "
            f"{d['sparsemax']:.1e} (sparsemax), {d['entmax15']:.1e} (entmax15)"
        )
    if args.json:
        from attnlab.devices import run_meta

        ratios = {
            kind: {
                str(n): results[n][f"{kind} (ours)", "f+b"]
                / results[n]["softmax", "f+b"]
                for n in sizes
            }
            for kind in ("sparsemax", "entmax15")
        }
        out = {
            "meta": {
                **run_meta(),
                "threads": torch.get_num_threads(),
                "clock": "thread CPU time" if args.cpu_time else "wall clock",
                "scores": f"({rows}, n) float32 ~ N(0, 1), seed 0",
                "statistic": "minimum over repetitions, contenders interleaved",
                "command": "python bench/mappings.py " + " ".join(sys.argv[1:]),
            },
            "ms": {
                str(n): {f"{name} | {kind}": v for (name, kind), v in res.items()}
                for n, res in results.items()
            },
            "ratio_to_softmax_fwd_bwd": ratios,
            "floors_ms": {str(n): f["ms"] for n, f in floor.items()},
            "passes": {str(n): f["passes"] for n, f in floor.items()},
            "max_abs_diff_vs_entmax_pkg": d,
        }
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
