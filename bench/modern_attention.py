"""attnlab.modern.Attention (its SDPA path) against the same layer written directly on
``F.scaled_dot_product_attention`` (transformers' "sdpa" layer, in a few lines).

    OMP_NUM_THREADS=1 .venv/bin/python bench/modern_attention.py [--repeats 20]

B = 4, T = 128, D = 256, 8 query heads over 2 key/value heads (GQA), RoPE, causal,
float32, CPU, one thread; forward + backward (training). Both use the same weights; the
anchor applies RoPE from cos/sin computed once and calls SDPA with ``enable_gqa``.
Prints the median time of each, the ratio ours / anchor (the target: <= 1.2), and the
eager path's ratio for reference. Timings are not asserted anywhere: a loaded machine
inflates them (say so when you quote one).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from attnlab.modern import Attention, RoPE

B, T, D, H, G = 4, 128, 256, 8, 2


def _time(fns, repeats: int) -> list[float]:
    """Median seconds of each function, the calls interleaved (a load that comes and
    goes then weighs on all of them alike)."""
    for f in fns:  # warm-up
        for _ in range(3):
            f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for f, ts in zip(fns, times):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def anchor(layer: Attention, x: torch.Tensor) -> torch.Tensor:
    """The same layer straight on SDPA: projections, RoPE, fused attention."""
    Dh = layer.head_dim
    q = layer.q_proj(x).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
    k = layer.k_proj(x).view(B, T, G, Dh).transpose(1, 2)  # (B, G, T, Dh)
    v = layer.v_proj(x).view(B, T, G, Dh).transpose(1, 2)  # (B, G, T, Dh)
    cos, sin = layer.rope.cos_sin(torch.arange(T), Dh, x.dtype)  # (T, Dh/2) each
    q, k = layer.rope.rotate(q, cos, sin), layer.rope.rotate(k, cos, sin)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return layer.o_proj(out.transpose(1, 2).reshape(B, T, H * Dh))  # (B, T, D)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    layer = Attention(D, H, G, rope=RoPE())
    x = torch.randn(B, T, D, requires_grad=True)
    torch.testing.assert_close(layer(x), anchor(layer, x), atol=1e-5, rtol=1e-5)

    def run(f):
        return lambda: f().sum().backward()

    eager = Attention(D, H, G, rope=RoPE(), attn_implementation="eager")
    eager.load_state_dict(layer.state_dict())
    t_ours, t_anchor, t_eager = _time(
        [run(lambda: layer(x)), run(lambda: anchor(layer, x)), run(lambda: eager(x))],
        args.repeats,
    )
    assert layer.last_path == "sdpa", layer.last_path
    res = {
        "ours_ms": 1e3 * t_ours,
        "anchor_ms": 1e3 * t_anchor,
        "eager_ms": 1e3 * t_eager,
        "ratio": t_ours / t_anchor,
        "eager_ratio": t_eager / t_anchor,
    }
    print(
        f"modern.Attention (sdpa) {res['ours_ms']:.2f} ms, anchor (SDPA layer) "
        f"{res['anchor_ms']:.2f} ms: ratio {res['ratio']:.2f}x "
        f"(eager path {res['eager_ratio']:.2f}x)"
    )
    return res


if __name__ == "__main__":
    main()
