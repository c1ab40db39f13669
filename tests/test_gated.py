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
