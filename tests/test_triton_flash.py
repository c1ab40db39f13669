"""The Triton flash forward, run on CPU in Triton's interpreter (n <= 256).

TRITON_INTERPRET must be set before triton is imported; nothing in attnlab imports
triton for CPU tensors, so setting it here, at collection, is early enough. Skipped
cleanly when triton is not installed.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

triton = pytest.importorskip("triton")

import attnlab  # noqa: E402
from attnlab import efficient  # noqa: E402
from attnlab.kernels import triton_flash as tf  # noqa: E402

pytestmark = pytest.mark.skipif(
    not tf.interpreting() and not torch.cuda.is_available(),
    reason="triton imported without TRITON_INTERPRET=1 and no CUDA",
)


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "T,S,Dh,Dv", [(64, 64, 16, 16), (50, 90, 12, 8), (90, 50, 16, 20), (1, 7, 16, 16)]
)
def test_forward_equals_sdpa(causal, T, S, Dh, Dv):
    g = dict(device=_dev())
    q, k, v = (
        torch.randn(1, 2, T, Dh, **g),
        torch.randn(1, 2, S, Dh, **g),
        torch.randn(1, 2, S, Dv, **g),
    )
    out, lse = tf.triton_flash_forward(q, k, v, is_causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert (out - ref).abs().max() < 2e-5
    scores = (q @ k.transpose(-2, -1)) * Dh**-0.5  # (1, 2, T, S)
    if causal:
        scores = scores.masked_fill(
            ~efficient.band_mask(T, S, None, True, device=q.device), float("-inf")
        )
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs(dtype):
    """bf16 operands of tl.dot are wrong in the interpreter unless cast: the kernel casts."""
    q, k, v = (torch.randn(1, 2, 48, 16, device=_dev()) for _ in range(3))
    out, _ = tf.triton_flash_forward(
        q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True
    )
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == dtype
    assert (out.float() - ref).abs().max() < 3e-2


def test_flash_attention_dispatches_to_triton_with_torch_backward(monkeypatch):
    """flash_attention = Triton forward + recomputing backward (as on a GPU)."""
    calls = []
    real = tf.triton_flash_forward

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(efficient.flash, "_triton_usable", lambda q: True)
    monkeypatch.setattr(tf, "triton_flash_forward", spy)
    q, k, v = (
        torch.randn(1, 2, 40, 16, device=_dev(), requires_grad=True) for _ in range(3)
    )
    out = attnlab.flash_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = torch.randn_like(out)
    ga = torch.autograd.grad(out, (q, k, v), g)
    gb = torch.autograd.grad(ref, (q, k, v), g)
    assert calls == [1]
    assert (out - ref).abs().max() < 2e-5
    assert max((a - b).abs().max() for a, b in zip(ga, gb)) < 2e-5


def test_cpu_tensors_without_interpreter_are_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="needs CUDA tensors, got q on cpu"):
        tf.triton_flash_forward(q, q, q)


def test_bad_dtype_and_shapes():
    q = torch.randn(1, 1, 8, 16, device=_dev())
    with pytest.raises(TypeError, match="float64"):
        tf.triton_flash_forward(q.double(), q.double(), q.double())
    with pytest.raises(ValueError, match="shapes"):
        tf.triton_flash_forward(q, q[..., :8], q)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S", [(64, 64), (48, 80)])
def test_half_precision_within_2x_sdpa_error(dtype, causal, T, S):
    """Statistics in float32: the output's error against a float64 reference on the
    same rounded inputs is within 2x SDPA's own in the same dtype (sharp logits)."""
    gen = torch.Generator().manual_seed(T + S + causal)
    q, k, v = (
        (torch.randn(1, 2, n, 32, generator=gen, dtype=torch.float64) * m).to(dtype)
        for n, m in ((T, 4.0), (S, 4.0), (S, 1.0))
    )
    mask = efficient.band_mask(T, S, None, causal)
    ref = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=mask
    )
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    dev = _dev()
    out, lse = tf.triton_flash_forward(
        q.to(dev), k.to(dev), v.to(dev), is_causal=causal
    )
    assert out.dtype == dtype and lse.dtype == torch.float32
    e_ours = (out.cpu().double() - ref).abs().max().item()
    e_sdpa = (sdpa.double() - ref).abs().max().item()
    assert e_ours <= 2 * e_sdpa, f"triton {e_ours:.2e} > 2 x SDPA's {e_sdpa:.2e}"
