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
:func:`attnlab.linear_attention` with ``is_causal=True``. The course keeps the
normaliser ``phi(q).z`` and the positive feature map of linear attention; GLA itself
(Yang et al. 2024) uses a per-key-dimension gate vector and, like RetNet and Mamba-2,
drops both, and such models are trained in a chunkwise form (a masked quadratic inside
a chunk, the state across chunks), not with the full ``T x T`` decay matrix.

**The delta rule** (Schlag et al. 2021; DeltaNet, Yang et al. 2024) replaces the
additive write by an error-correcting one: before writing ``v_t`` under key ``k_t``
the state reads what it already stores there, ``S^T k_t``, and writes only a fraction
``beta_t`` of the difference,

.. math:: S_t = g_t\\,(I - \\beta_t k_t k_t^\\top)\\,S_{t-1} + \\beta_t k_t v_t^\\top,
          \\qquad \\mathrm{out}_t = S_t^\\top q_t,

so a repeated key overwrites its old value instead of adding to it. With unit-norm keys
and ``beta = 1`` the latest write reads back exactly, and *orthogonal* keys (at most
``Dh``) are all stored without interference (as they are by the additive rule). Keys
that are merely linearly independent still interfere: one pass over them is one sweep of
an iterative least-squares solver (Kaczmarz's), not its solution, so the older keys read
back with an error that further sweeps, not this single pass, would remove.
With a gate ``g_t`` it is Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, used by
Qwen3-Next's linear layers): :func:`gated_delta_rule`. No feature map and no normaliser
(q and k are L2-normalised instead), as in those models. Every 16-bit input is computed
with a float32 state.
"""

from __future__ import annotations

import torch

from . import validation as V
from .efficient import elu_feature_map
from .efficient.linear import safe_denominator

__all__ = [
    "gated_linear_attention",
    "gated_linear_attention_rnn",
    "delta_rule",
    "gated_delta_rule",
]


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


def _f32(*ts):
    """float32 copies of 16-bit tensors (float32/float64 unchanged)."""
    f = torch.promote_types(ts[0].dtype, torch.float32)
    return tuple(t.to(f) for t in ts)


def gated_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_gate: torch.Tensor
) -> torch.Tensor:
    """Causal gated linear attention in its attention form (see the module docstring).

    q, k (..., T, Dh), v (..., T, Dv), log_gate (..., T) <= 0 -> (..., T, Dv)."""
    _check(q, k, v, log_gate, "gated_linear_attention")
    T, dtype = q.shape[-2], q.dtype
    q, k, v, log_gate = _f32(q, k, v, log_gate)  # float32 for 16-bit inputs
    fq, fk = elu_feature_map(q), elu_feature_map(k)  # (..., T, Dh)
    c = log_gate.cumsum(-1)  # (..., T): log of the product of gates up to t
    decay = c[..., :, None] - c[..., None, :]  # (..., T, T): c_i - c_j <= 0 for j <= i
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T)
    decay = decay.masked_fill(~causal, -torch.inf).exp()  # (..., T, T), 0 above
    a = (fq @ fk.transpose(-2, -1)) * decay  # (..., T, T) unnormalised weights
    # (..., T, Dv)
    return ((a @ v) / safe_denominator(a.sum(-1, keepdim=True))).to(dtype)


def gated_linear_attention_rnn(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_gate: torch.Tensor
) -> torch.Tensor:
    """The same function as a recurrence over t: one (Dh, Dv) state, O(T) steps."""
    _check(q, k, v, log_gate, "gated_linear_attention_rnn")
    dtype = q.dtype
    q, k, v, log_gate = _f32(q, k, v, log_gate)  # a float32 state for 16-bit inputs
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
        outs.append(num / safe_denominator(den))
    return torch.stack(outs, dim=-2).to(dtype)  # (..., T, Dv)


def _check_beta(beta, q, fn):
    if not isinstance(beta, torch.Tensor) or not beta.is_floating_point():
        raise TypeError(f"{fn}: beta must be a floating-point tensor (..., T)")
    if beta.shape != q.shape[:-1]:
        raise ValueError(
            f"{fn}: beta must be (..., T) = {tuple(q.shape[:-1])}, got {tuple(beta.shape)}"
        )
    if bool(((beta < 0) | (beta > 2) | beta.isnan()).any()):
        raise ValueError(
            f"{fn}: beta must be in [0, 2] (a writing strength; torch.sigmoid(x) maps "
            "any real x into (0, 1))"
        )


def gated_delta_rule(
    q, k, v, beta, log_gate=None, *, normalize: bool = True, scale=None
) -> torch.Tensor:
    """Gated DeltaNet's recurrence (the delta rule when ``log_gate`` is None).

    q, k (..., T, Dh), v (..., T, Dv), beta (..., T) in [0, 2], log_gate (..., T) <= 0
    or None -> (..., T, Dv). ``normalize``: q and k are L2-normalised (as the models
    do; the state then stays bounded for beta in [0, 2]); ``scale`` multiplies q,
    default ``1 / sqrt(Dh)`` (as Qwen3-Next's recurrence). One ``(Dh, Dv)`` state per
    sequence, float32 for 16-bit inputs; the output has the input dtype.
    """
    fn = "gated_delta_rule"
    _check(
        q,
        k,
        v,
        torch.zeros(q.shape[:-1], dtype=q.dtype, device=q.device)
        if log_gate is None
        else log_gate,
        fn,
    )
    _check_beta(beta, q, fn)
    dtype, Dh = q.dtype, q.shape[-1]
    if log_gate is None:
        log_gate = torch.zeros_like(beta)
    q, k, v, beta, log_gate = _f32(q, k, v, beta, log_gate)
    if normalize:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)  # (..., T, Dh)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * (Dh**-0.5 if scale is None else scale)
    g = log_gate.exp()  # (..., T)
    state = q.new_zeros(*q.shape[:-2], Dh, v.shape[-1])  # (..., Dh, Dv)
    outs = []
    for t in range(q.shape[-2]):
        kt, vt = k[..., t, :], v[..., t, :]  # (..., Dh), (..., Dv)
        state = state * g[..., t, None, None]  # forget
        old = (kt[..., :, None] * state).sum(-2)  # what k_t reads now: S^T k  (..., Dv)
        delta = (vt - old) * beta[..., t, None]  # the correction to write   (..., Dv)
        state = state + kt[..., :, None] * delta[..., None, :]  # += k delta^T
        outs.append((q[..., t, :, None] * state).sum(-2))  # S^T q           (..., Dv)
    return torch.stack(outs, dim=-2).to(dtype)  # (..., T, Dv)


def delta_rule(q, k, v, beta, *, normalize: bool = True, scale=None) -> torch.Tensor:
    """The delta rule (Schlag et al. 2021): :func:`gated_delta_rule` with no gate."""
    return gated_delta_rule(q, k, v, beta, None, normalize=normalize, scale=scale)
