"""attnlab.MultiHeadAttention against torch.nn.MultiheadAttention, same weights.

    OMP_NUM_THREADS=1 .venv/bin/python bench/mha.py [--repeats 30]

B = 8, T = S = 128, E = 256, 8 heads, float32, CPU, one thread; self-attention with no
mask. Training mode (forward + backward, autograd on) is the headline, eval mode
(forward under ``torch.no_grad``, where PyTorch may take its fused fast path) is
reported too. Ours runs with ``need_weights=False`` (the fast path through
``F.scaled_dot_product_attention``) and with ``need_weights=True`` (the readable path
that builds the weights); PyTorch's with the same ``need_weights``. Prints the median
time of each and the ratio ours / PyTorch's. Timings are not asserted anywhere: a
loaded machine inflates them (say so when you quote one).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

import attnlab

B, T, E, H = 8, 128, 256, 8


def _time(fn, repeats: int) -> float:
    for _ in range(3):  # warm-up
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(E, H, batch_first=True)
    ours = attnlab.MultiHeadAttention(E, H).load_torch(theirs)
    x = torch.randn(B, T, E)
    with torch.no_grad():  # same weights, same numbers
        a = ours(x, x, x, need_weights=False)[0]
        b = theirs(x, x, x, need_weights=False)[0]
    assert torch.allclose(a, b, atol=1e-5), float((a - b).abs().max())

    def train_step(module, need_weights):
        module.train()
        xg = x.clone().requires_grad_(True)

        def run():
            out = module(xg, xg, xg, need_weights=need_weights)[0]
            out.sum().backward()

        return run

    def eval_step(module, need_weights):
        module.eval()

        def run():
            with torch.no_grad():
                module(x, x, x, need_weights=need_weights)

        return run

    rows = {}
    for mode, step in (("train", train_step), ("eval", eval_step)):
        for need in (False, True):
            t_ours = _time(step(ours, need), args.repeats)
            t_theirs = _time(step(theirs, need), args.repeats)
            rows[f"{mode}, need_weights={need}"] = (t_ours, t_theirs)
    print(
        f"MHA B={B} T={T} E={E} H={H} float32 CPU, {torch.get_num_threads()} thread, "
        f"torch {torch.__version__}"
    )
    print(f"{'':28s} {'attnlab ms':>11s} {'torch ms':>9s} {'ratio':>6s}")
    for name, (t_ours, t_theirs) in rows.items():
        print(
            f"{name:28s} {1e3 * t_ours:11.2f} {1e3 * t_theirs:9.2f} "
            f"{t_ours / t_theirs:6.2f}"
        )
    return rows


if __name__ == "__main__":
    main()
