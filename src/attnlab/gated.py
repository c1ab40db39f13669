"""Gated linear attention: linear attention with a forgetting gate.

Causal linear attention (:func:`attnlab.linear_attention`) is an RNN whose state only
grows, ``S_t = S_{t-1} + phi(k_t) v_t^T``. A **gate** ``g_t`` in (0, 1], computed from
the input at step ``t``, lets the state decay before the new association is written:

.. math:: S_t = g_t\\, S_{t-1} + \\phi(k_t)\\, v_t^\\top, \\qquad
          z_t = g_t\\, z_{t-1} + \\phi(k_t), \\qquad
          \\mathrm{out}_t = \\frac{\\phi(q_t)^\\top S_t}{\\phi(q_t)^\\top z_t}

This is the family of RetNet (a fixed ``g``), gated linear attention (Yang et al. 2024,
a data-dependent ``g``) and the selective state-space models (Mamba-2's scalar-decay
form, Dao & Gu 2024). Unrolled, key ``j`` reaches query ``i >= j`` with the weight
``phi(q_i).phi(k_j) * prod_{j < l <= i} g_l = phi(q_i).phi(k_j) * exp(c_i - c_j)``,
``c = cumsum(log g)``: the same computation written as masked attention with a decay
matrix (the "attention form"). :func:`gated_linear_attention` computes that form
(O(T^2) per sequence, fine for the short sequences of chapter 9);
:func:`gated_linear_attention_rnn` is the step-by-step recurrence, O(T) time and one
``(Dh, Dv)`` state; the tests check that the two agree.

Shapes: ``q, k (..., T, Dh)``, ``v (..., T, Dv)``, ``log_gate (..., T)`` with values
``<= 0`` (``log g``); returns ``(..., T, Dv)``. With ``log_gate = 0`` both are
:func:`attnlab.linear_attention` with ``is_causal=True``.
"""

from __future__ import annotations

import torch

from . import validation as V
from .efficient import _guard, elu_feature_map

__all__ = ["gated_linear_attention", "gated_linear_attention_rnn"]


def _check(q, k, v, log_gate, fn):
    for t, name in ((q, "q"), (k, "k"), (v, "v"), (log_gate, "log_gate")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}"
            )
        if not t.is_floating_point():
            raise TypeError(f"{fn}: {name} must be floating point, got {t.dtype}")
    V.same_dtype(fn, q=q, k=k, v=v, log_gate=log_gate)
    if q.shape != k.shape or q.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"{fn}: q, k must be (..., T, Dh) and v (..., T, Dv) with the same leading "
            f"dims and T, got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if log_gate.shape != q.shape[:-1]:
        raise ValueError(
            f"{fn}: log_gate must be (..., T) = {tuple(q.shape[:-1])}, "
            f"got {tuple(log_gate.shape)}"
        )
    if bool((log_gate > 0).any()) or bool(log_gate.isnan().any()):
        raise ValueError(
            f"{fn}: log_gate must be <= 0 (a gate g = exp(log_gate) in (0, 1]); "
            "use F.logsigmoid(x) to map any real x there"
        )


def gated_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_gate: torch.Tensor
) -> torch.Tensor:
    """Causal gated linear attention in its attention form (see the module docstring).

    q, k (..., T, Dh), v (..., T, Dv), log_gate (..., T) <= 0 -> (..., T, Dv)."""
    _check(q, k, v, log_gate, "gated_linear_attention")
    T = q.shape[-2]
    fq, fk = elu_feature_map(q), elu_feature_map(k)  # (..., T, Dh)
    c = log_gate.cumsum(-1)  # (..., T): log of the product of gates up to t
    decay = c[..., :, None] - c[..., None, :]  # (..., T, T): c_i - c_j <= 0 for j <= i
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T)
    decay = decay.masked_fill(~causal, -torch.inf).exp()  # (..., T, T), 0 above
    a = (fq @ fk.transpose(-2, -1)) * decay  # (..., T, T) unnormalised weights
    return (a @ v) / _guard(a.sum(-1, keepdim=True))  # (..., T, Dv)


def gated_linear_attention_rnn(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_gate: torch.Tensor
) -> torch.Tensor:
    """The same function as a recurrence over t: one (Dh, Dv) state, O(T) steps."""
    _check(q, k, v, log_gate, "gated_linear_attention_rnn")
    fq, fk = elu_feature_map(q), elu_feature_map(k)  # (..., T, Dh)
    g = log_gate.exp()  # (..., T)
    state = fq.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # (..., Dh, Dv)
    z = fq.new_zeros(*q.shape[:-2], q.shape[-1])  # (..., Dh)
    outs = []
    for t in range(q.shape[-2]):
        gt = g[..., t, None]  # (..., 1)
        state = gt[..., None] * state + fk[..., t, :, None] * v[..., t, None, :]
        z = gt * z + fk[..., t, :]  # (..., Dh)
        num = (fq[..., t, :, None] * state).sum(-2)  # (..., Dv)
        den = (fq[..., t, :] * z).sum(-1, keepdim=True)  # (..., 1)
        outs.append(num / _guard(den))
    return torch.stack(outs, dim=-2)  # (..., T, Dv)
