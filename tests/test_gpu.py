"""On a CUDA GPU: attnlab's kernels in 16-bit against SDPA's own error (skipped cleanly
without CUDA; CI has none). The same checks on a CPU are in test_efficient.py
(torch loop) and test_triton_flash.py (the Triton kernel in its interpreter).

On CUDA, ``attnlab.flash_attention`` runs the Triton forward and the recomputing torch
backward: the output must be within 2x SDPA's error and the gradients within 1.5x,
against a float64 reference on the same rounded inputs, with sharp logits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab import efficient

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _errors(fn, q, k, v, dout, ref, ref_g) -> list[float]:
    q_, k_, v_ = (t.clone().requires_grad_() for t in (q, k, v))
    out = fn(q_, k_, v_)
    assert out.dtype == q.dtype
    grads = torch.autograd.grad(out, (q_, k_, v_), dout)
    errs = [(out.double() - ref).abs().max().item()]
    return errs + [(a.double() - b).abs().max().item() for a, b in zip(grads, ref_g)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S", [(1024, 1024), (384, 1024), (1024, 384)])
@pytest.mark.parametrize("forward", ["triton", "torch"])
def test_flash_16bit_on_gpu_within_sdpa_error(
    dtype, causal, T, S, forward, monkeypatch
):
    if forward == "triton":
        from attnlab.kernels import triton_flash

        if not triton_flash.available():
            pytest.skip("Triton is not installed")
    else:
        monkeypatch.setattr(efficient, "_triton_usable", lambda q: False)
    gen = torch.Generator(device="cuda").manual_seed(T + S + causal)
    q, k, v, dout = (
        (torch.randn(1, 4, n, 64, device="cuda", generator=gen) * m).to(dtype)
        for n, m in ((T, 4.0), (S, 4.0), (S, 1.0), (T, 1.0))
    )  # (B, H, T or S, Dh), sharp logits
    mask = efficient.band_mask(T, S, None, causal, device="cuda")  # top-left, as SDPA
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask)
    ref_g = torch.autograd.grad(ref, (q64, k64, v64), dout.double())
    ref = ref.detach()

    def ours(q, k, v):
        return attnlab.flash_attention(q, k, v, is_causal=causal)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    e_ours = _errors(ours, q, k, v, dout, ref, ref_g)
    e_sdpa = _errors(sdpa, q, k, v, dout, ref, ref_g)
    limits = (2.0 if forward == "triton" else 1.5, 1.5, 1.5, 1.5)
    for what, a, b, lim in zip(("out", "dq", "dk", "dv"), e_ours, e_sdpa, limits):
        assert a <= lim * b, f"{what}: ours {a:.2e} > {lim} x SDPA's {b:.2e}"


@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window_and_linear_run_on_gpu(causal):
    """The torch loops on CUDA equal their CPU results (float32)."""
    q, k, v = (torch.randn(2, 3, 300, 32) for _ in range(3))
    for fn in (
        lambda q, k, v: attnlab.sliding_window_attention(q, k, v, 50, is_causal=causal),
        lambda q, k, v: attnlab.linear_attention(q, k, v, is_causal=causal),
        lambda q, k, v: attnlab.flash_attention(q, k, v, is_causal=causal),
    ):
        cpu = fn(q, k, v)
        gpu = fn(q.cuda(), k.cuda(), v.cuda()).cpu()
        torch.testing.assert_close(gpu, cpu, atol=2e-5, rtol=1e-4)
