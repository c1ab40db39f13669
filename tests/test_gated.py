"""attnlab.gated: the attention form equals the recurrence; no gate = linear attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.gated import gated_linear_attention, gated_linear_attention_rnn


def inputs(T=9, Dh=4, Dv=3, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, 3, T, Dh, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(2, 3, T, Dv, generator=g, dtype=dtype)
    log_gate = F.logsigmoid(torch.randn(2, 3, T, generator=g, dtype=dtype) * 2)
    return q, k, v, log_gate


def test_attention_form_equals_recurrence():
    q, k, v, lg = inputs()
    torch.testing.assert_close(
        gated_linear_attention(q, k, v, lg), gated_linear_attention_rnn(q, k, v, lg)
    )


def test_no_gate_is_causal_linear_attention():
    q, k, v, lg = inputs(T=13)
    zero = torch.zeros_like(lg)
    ref = attnlab.linear_attention(q, k, v, is_causal=True, chunk=4)
    torch.testing.assert_close(gated_linear_attention(q, k, v, zero), ref)
    assert not torch.allclose(gated_linear_attention(q, k, v, lg), ref)


def test_gate_forgets():
    """With a gate near 0 at step t, query t sees (almost) only key t."""
    q, k, v, lg = inputs(T=6)
    lg = torch.zeros_like(lg)
    lg[..., 3] = -50.0  # g_3 = e^-50: the state is wiped before step 3 is written
    out = gated_linear_attention(q, k, v, lg)
    torch.testing.assert_close(out[..., 3, :], v[..., 3, :])


def test_gradcheck():
    q, k, v, lg = (t[:1, :1, :5].detach().requires_grad_() for t in inputs())
    assert torch.autograd.gradcheck(gated_linear_attention, (q, k, v, lg))


def test_bad_input():
    q, k, v, lg = inputs()
    with pytest.raises(ValueError, match="log_gate must be <= 0"):
        gated_linear_attention(q, k, v, lg.abs())
    with pytest.raises(ValueError, match="log_gate must be"):
        gated_linear_attention(q, k, v, lg[..., :-1])
    with pytest.raises(ValueError, match="same leading"):
        gated_linear_attention(q, k[..., :-1, :], v, lg)
    with pytest.raises(TypeError, match="torch.Tensor"):
        gated_linear_attention(q.numpy(), k, v, lg)


# ------------------------------------------------------------ delta rule, Gated DeltaNet
def _naive_delta(q, k, v, beta, log_gate):
    """The textbook recurrence with explicit matrices, float64, state M (Dv, Dh):
    M_t = g_t M_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, out_t = M_t q_t."""
    q = q / (q.norm(dim=-1, keepdim=True) ** 2 + 1e-6) ** 0.5 * q.shape[-1] ** -0.5
    k = k / (k.norm(dim=-1, keepdim=True) ** 2 + 1e-6) ** 0.5  # as the models' l2norm
    *lead, T, Dh = q.shape
    out = torch.zeros(*lead, T, v.shape[-1], dtype=torch.float64)
    for idx in torch.cartesian_prod(*(torch.arange(n) for n in lead)):
        idx = tuple(idx.tolist())
        M = torch.zeros(v.shape[-1], Dh, dtype=torch.float64)
        for t in range(T):
            kt, vt, b = k[idx][t], v[idx][t], beta[idx][t]
            g = log_gate[idx][t].exp()
            M = g * M @ (torch.eye(Dh, dtype=torch.float64) - b * torch.outer(kt, kt))
            M = M + b * torch.outer(vt, kt)
            out[idx][t] = M @ q[idx][t]
    return out


def _delta_inputs(T=11, Dh=6, Dv=5, seed=3):
    q, k, v, lg = inputs(T=T, Dh=Dh, Dv=Dv, seed=seed)
    beta = torch.sigmoid(torch.randn(lg.shape, dtype=torch.float64))
    return q, k, v, beta, lg


def test_gated_delta_rule_equals_the_naive_loop():
    q, k, v, beta, lg = _delta_inputs()
    got = attnlab.gated.gated_delta_rule(q, k, v, beta, lg)
    torch.testing.assert_close(got, _naive_delta(q, k, v, beta, lg))
    no_gate = attnlab.gated.delta_rule(q, k, v, beta)
    torch.testing.assert_close(no_gate, _naive_delta(q, k, v, beta, 0 * lg))
    assert (no_gate - got).abs().max() > 1e-3  # the gate matters


def test_gated_delta_rule_equals_qwen3_next_recurrence():
    """transformers' torch_recurrent_gated_delta_rule (Qwen3-Next), layout (B, T, H, D)."""
    qn = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    q, k, v, beta, lg = _delta_inputs(T=17, Dh=8, Dv=4, seed=5)
    ref, _ = qn.torch_recurrent_gated_delta_rule(
        *(t.transpose(1, 2) for t in (q, k, v, lg, beta)),
        use_qk_l2norm_in_kernel=True,
    )  # computes in float32
    ours = attnlab.gated.gated_delta_rule(*(t.float() for t in (q, k, v, beta, lg)))
    torch.testing.assert_close(ours, ref.transpose(1, 2).float(), atol=1e-5, rtol=1e-4)


def test_delta_rule_overwrites_where_linear_attention_adds():
    """Write key k1 -> v1, then k1 -> v2: the delta rule (beta = 1) reads back v2
    exactly; the additive (linear) state reads v1 + v2."""
    Dh = 4
    k = torch.zeros(1, 3, Dh, dtype=torch.float64)
    k[0, :, 0] = 1.0  # the same unit key three times (the last step only reads)
    v = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]], dtype=torch.float64)
    q = k.clone()
    beta = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    out = attnlab.gated.delta_rule(q, k, v, beta, scale=1.0, normalize=False)
    torch.testing.assert_close(out[0, 2], torch.tensor([0.0, 1.0], dtype=torch.float64))
    additive = (q[0, 2] @ k[0, :2].T) @ v[0, :2]  # sum of k^T v over the writes
    torch.testing.assert_close(additive, torch.tensor([1.0, 1.0], dtype=torch.float64))


def test_delta_rule_bad_beta_and_16bit():
    q, k, v, beta, lg = _delta_inputs(T=5)
    with pytest.raises(ValueError, match="beta must be in"):
        attnlab.gated.delta_rule(q, k, v, beta * 3)
    with pytest.raises(ValueError, match="beta must be"):
        attnlab.gated.delta_rule(q, k, v, beta[..., :3])
    out = attnlab.gated.gated_delta_rule(*(t.bfloat16() for t in (q, k, v, beta, lg)))
    assert out.dtype == torch.bfloat16
    ref = attnlab.gated.gated_delta_rule(
        *(t.bfloat16().double() for t in (q, k, v, beta, lg))
    )
    assert (out.double() - ref).abs().max() < 2e-2  # float32 state, one rounding


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gated_linear_attention_16bit_state_in_float32(dtype):
    q, k, v, lg = inputs(T=600, Dh=8, Dv=4)
    lg = lg * 0.001  # a slow gate: long memory, large sums
    got = gated_linear_attention_rnn(*(t.to(dtype) for t in (q, k, v, lg)))
    ref = gated_linear_attention_rnn(*(t.to(dtype).double() for t in (q, k, v, lg)))
    assert got.dtype == dtype
    assert ((got.double() - ref).abs() / ref.abs().clamp_min(1e-2)).max() < 2e-2
