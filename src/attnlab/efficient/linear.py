"""Linear attention (Katharopoulos et al., 2020): a feature map instead of the softmax,
in O(T) time and memory, causal by a running sum."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import validation as V
from .tiles import check_tiled_qkv


# ----------------------------------------------------------------- linear attention
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 >= 0, the feature map of Katharopoulos et al. (2020).

    Positive in exact arithmetic, but it rounds to 0 for very negative x (x <= -17 or
    so in float32), which is why :func:`linear_attention` guards its denominator.

    Parameters
    ----------
    x : floating-point tensor (queries or keys), any shape.

    Returns
    -------
    tensor ``elu(x) + 1`` of the shape and dtype of ``x``.

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor.
    """
    V.floating(x, "x", "elu_feature_map")
    return F.elu(x) + 1.0


def safe_denominator(den: torch.Tensor) -> torch.Tensor:
    """A denominator of 0 means every feature product was 0 (underflow, or no key):
    the numerator is 0 too, and the output is 0 instead of 0/0 = NaN."""
    return den.clamp_min(torch.finfo(den.dtype).tiny)


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    chunk: int = 64,
) -> torch.Tensor:
    r"""Linear attention (Katharopoulos et al. 2020): the softmax kernel
    :math:`\exp(q\cdot k)` replaced by :math:`\phi(q)\cdot\phi(k)`,
    :math:`\phi = \mathrm{elu} + 1`:

    .. math:: \mathrm{out}_i = \frac{\phi(q_i)^\top \sum_j \phi(k_j) v_j^\top}
                                    {\phi(q_i)^\top \sum_j \phi(k_j)}

    By associativity the sums are computed once, O(T·Dh·Dv) instead of O(T·S·Dh). When
    causal the sums run over ``j <= i``: a recurrent state
    :math:`S_i = S_{i-1} + \phi(k_i) v_i^\top` (an RNN), computed here chunk by chunk —
    inside a chunk of ``chunk`` positions the small masked quadratic form, across chunks
    the carried state — so memory stays O(T·Dv + chunk²).

    A query whose feature products with every key are 0 (no key, S = 0, or features
    that underflow) gets a zero output, never NaN. For float16/bfloat16 inputs the
    features, the running sums and the products are computed in float32 and the output
    is rounded once: in bfloat16 the normaliser's increments fall below its spacing
    after a few thousand keys, and float16's sums overflow.

    Shapes: q (..., T, Dh), k (..., S, Dh), v (..., S, Dv) -> (..., T, Dv).

    Parameters
    ----------
    q, k, v : tensors ``(..., T, Dh)``, ``(..., S, Dh)``, ``(..., S, Dv)``.
    is_causal : keyword only; query ``i`` sums over the keys ``j <= i`` only.
    chunk : keyword only; the chunk length of the causal form, an int >= 1.

    Returns
    -------
    tensor ``(..., T, Dv)`` in the dtype of ``q``.

    Raises
    ------
    TypeError
        ``q``, ``k`` or ``v`` is not a floating-point tensor, or their dtypes differ.
    ValueError
        the shapes do not agree (``Dh``, ``S``, the leading dimensions), or
        ``chunk`` is < 1.
    """
    check_tiled_qkv(q, k, v, "linear_attention")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    f = torch.promote_types(q.dtype, torch.float32)  # float32 for 16-bit inputs
    if not is_causal:
        fq, fk = elu_feature_map(q.to(f)), elu_feature_map(k.to(f))  # (..., T/S, Dh)
        # (..., Dh, S) @ (..., S, Dv) -> (..., Dh, Dv)
        kv = fk.transpose(-2, -1) @ v.to(f)
        z = fk.sum(-2)  # (..., Dh)
        num = fq @ kv  # (..., T, Dh) @ (..., Dh, Dv) -> (..., T, Dv)
        den = (fq * z[..., None, :]).sum(-1, keepdim=True)  # (..., T, 1)
        return (num / safe_denominator(den)).to(q.dtype)
    T, S = q.shape[-2], k.shape[-2]
    if T == 0:
        return v.new_zeros(*q.shape[:-1], v.shape[-1]) + 0 * v.sum()  # (..., 0, Dv)
    # the running sums live in float32 for 16-bit inputs: in bfloat16 the increments of
    # z fall below its spacing after a few thousand keys
    # (..., Dh, Dv)
    state = q.new_zeros(*k.shape[:-2], k.shape[-1], v.shape[-1], dtype=f)
    z = q.new_zeros(*k.shape[:-2], 1, k.shape[-1], dtype=f)  # (..., 1, Dh)
    outs = []
    for c0 in range(0, T, chunk):
        c1 = min(c0 + chunk, T)
        qc = elu_feature_map(q[..., c0:c1, :].to(f))  # (..., C, Dh), cast per chunk
        kc = elu_feature_map(k[..., c0 : min(c1, S), :].to(f))  # (..., C', Dh)
        vc = v[..., c0 : min(c1, S), :].to(f)  # (..., C', Dv)
        a = (qc @ kc.transpose(-2, -1)).tril()  # j <= i inside the chunk  (..., C, C')
        num = qc @ state + a @ vc  # (..., C, Dv)
        den = (qc * z).sum(-1, keepdim=True) + a.sum(-1, keepdim=True)  # (..., C, 1)
        outs.append((num / safe_denominator(den)).to(q.dtype))
        state = state + kc.transpose(-2, -1) @ vc  # (..., Dh, Dv)
        z = z + kc.sum(-2, keepdim=True)  # (..., 1, Dh)
    return torch.cat(outs, dim=-2)  # (..., T, Dv)
