"""On a CUDA GPU: attnlab's kernels in 16-bit against SDPA's own error (skipped cleanly
without CUDA; CI has none). The same checks on a CPU are in test_efficient.py
(torch loop) and test_triton_flash.py (the Triton kernel in its interpreter).

On CUDA, ``attnlab.flash_attention`` runs the Triton kernels forward and backward: the
output and the gradients must be within 1.5x SDPA's error against a float64 reference on
the same rounded inputs, with sharp logits; also with grouped-query attention, a key
padding mask and a sliding window; at head dim 128 (other default tiles); float32 on
its own IEEE tiles (bench/attention_gpu_check.py runs this file first). What runs
without a GPU: tests/test_triton_compile.py compiles every kernel for sm_80 and sm_90
and reads from the compiled code that the products and the roundings are 16-bit."""

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
        monkeypatch.setattr(efficient.flash, "_triton_usable", lambda q: False)
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
    limits = (1.5, 1.5, 1.5, 1.5)
    for what, a, b, lim in zip(("out", "dq", "dk", "dv"), e_ours, e_sdpa, limits):
        assert a <= lim * b, f"{what}: ours {a:.2e} > {lim} x SDPA's {b:.2e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("what", ["gqa", "padding", "window", "window_bottom_right"])
def test_triton_masks_and_groups_16bit_within_sdpa_error(dtype, what):
    """GQA (8 query heads on 2), a key padding mask, a window (top-left and, with
    T != S, bottom-right): output and gradients within 1.5x SDPA's 16-bit error."""
    T, S = (768, 1024) if what == "window_bottom_right" else (1024, 1024)
    hk = 2 if what == "gqa" else 8
    gen = torch.Generator(device="cuda").manual_seed(len(what))
    q, k, v, dout = (
        (torch.randn(2, h, n, 64, device="cuda", generator=gen) * m).to(dtype)
        for h, n, m in ((8, T, 4.0), (hk, S, 4.0), (hk, S, 1.0), (8, T, 1.0))
    )
    align = "bottom_right" if what == "window_bottom_right" else "top_left"
    window = 100 if what.startswith("window") else None
    kpm = None
    if what == "padding":
        kpm = torch.ones(2, S, dtype=torch.bool, device="cuda")
        kpm[1, 700:] = False
    mask = efficient.band_mask(T, S, window, True, device="cuda", align=align)
    if kpm is not None:
        mask = mask & kpm[:, None, None, :]  # (B, 1, T, S)

    def sdpa(q, k, v):
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def ours(q, k, v):
        if window is None:
            return attnlab.flash_attention(
                q, k, v, is_causal=True, key_padding_mask=kpm
            )
        return attnlab.sliding_window_attention(
            q, k, v, window, is_causal=True, align=align
        )

    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    ref = sdpa(q64, k64, v64)
    ref_g = torch.autograd.grad(ref, (q64, k64, v64), dout.double())
    e_ours = _errors(ours, q, k, v, dout, ref.detach(), ref_g)
    e_sdpa = _errors(sdpa, q, k, v, dout, ref.detach(), ref_g)
    for what_, a, b in zip(("out", "dq", "dk", "dv"), e_ours, e_sdpa):
        assert a <= 1.5 * b, f"{what_}: ours {a:.2e} > 1.5 x SDPA's {b:.2e}"


def _triton_errors_vs_sdpa(dtype, d, causal=True, n=1024):
    """Errors (out, dq, dk, dv) of the Triton kernels and of SDPA, in ``dtype``, against
    a float64 reference on the same rounded inputs (sharp logits)."""
    from attnlab.kernels import triton_flash

    if not triton_flash.available():
        pytest.skip("Triton is not installed")
    gen = torch.Generator(device="cuda").manual_seed(d + causal)
    q, k, v, dout = (
        (torch.randn(2, 4, n, d, device="cuda", generator=gen) * m).to(dtype)
        for m in (3.0, 3.0, 1.0, 1.0)
    )  # (B, H, n, d)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    ref_g = torch.autograd.grad(ref, (q64, k64, v64), dout.double())

    def ours(q, k, v):
        return triton_flash.triton_flash_attention(q, k, v, is_causal=causal)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    e_ours = _errors(ours, q, k, v, dout, ref.detach(), ref_g)
    e_sdpa = _errors(sdpa, q, k, v, dout, ref.detach(), ref_g)
    return e_ours, e_sdpa


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_triton_head_dim_128_16bit_within_sdpa_error(dtype):
    """Head dim 128 runs other default tiles (dK/dV: 32 x 64, 8 warps): the 16-bit
    products and the rounding of P and dS within 1.5x SDPA's error against float64."""
    e_ours, e_sdpa = _triton_errors_vs_sdpa(dtype, 128)
    for what, a, b in zip(("out", "dq", "dk", "dv"), e_ours, e_sdpa):
        assert a <= 1.5 * b, f"{what}: ours {a:.2e} > 1.5 x SDPA's {b:.2e}"


def test_triton_float32_is_exact_float32():
    """float32 inputs multiply in IEEE float32 (no TF32) on their own small tiles: the
    output and the gradients are float32-accurate against float64."""
    e_ours, _ = _triton_errors_vs_sdpa(torch.float32, 64, n=512)
    for what, a in zip(("out", "dq", "dk", "dv"), e_ours):
        assert a < 1e-4, f"{what}: {a:.2e} against float64"


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
