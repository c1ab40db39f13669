"""Multi-head attention: split -> attend -> concat -> W_o (Vaswani et al., 2017).

Each of the H heads projects the inputs to its own ``Dh = D / H`` sized queries, keys
and values, attends with :func:`attnlab.scaled_dot_product_attention`, and the H
outputs are concatenated back to width D and mixed by ``W_o``::

    query (B, T, D) --w_q--> (B, T, D) --split--> (B, H, T, Dh) ┐
    key   (B, S, Dk) --w_k--> (B, S, D) --split--> (B, H, S, Dh) ├ attend -> (B, H, T, Dh)
    value (B, S, Dv) --w_v--> (B, S, D) --split--> (B, H, S, Dh) ┘
    (B, H, T, Dh) --concat--> (B, T, D) --w_o--> (B, T, D)

Masks follow the one convention of ``attnlab``: boolean ``True`` = may attend, float
masks are added. :class:`torch.nn.MultiheadAttention` uses the *opposite* boolean
convention (``True`` = blocked) for both ``attn_mask`` and ``key_padding_mask``.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import scaled_dot_product_attention
from .masking import causal_mask, combine_masks

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention with separate ``w_q, w_k, w_v, w_o``.

    Parameters
    ----------
    d_model : D, the width of the queries and of the output; must be divisible by
        ``n_heads``.
    n_heads : H; each head works in ``d_head = D // H`` dimensions.
    bias : whether the four projections have a bias.
    dropout : dropout on the attention weights, in training mode only.
    kdim, vdim : widths of the key and value inputs (default D), for cross-attention
        from another space.

    ``forward(query, key, value, attn_mask=None, key_padding_mask=None,
    is_causal=False, need_weights=True)`` returns ``(out (B, T, D), weights)`` with
    the per-head weights ``(B, H, T, S)`` (``None`` if ``need_weights=False``); their
    mean over heads is what ``nn.MultiheadAttention`` returns by default. The last
    weights are also kept, detached, in ``self.last_weights`` for plots.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        kdim: int | None = None,
        vdim: int | None = None,
    ):
        super().__init__()
        if d_model < 1 or n_heads < 1:
            raise ValueError(
                f"need d_model >= 1, n_heads >= 1; got {d_model}, {n_heads}"
            )
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: every head "
                f"needs the same width d_head = d_model / n_heads"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model = d_model  # D
        self.n_heads = n_heads  # H
        self.d_head = d_model // n_heads  # Dh
        self.kdim = d_model if kdim is None else kdim  # width of the key input
        self.vdim = d_model if vdim is None else vdim  # width of the value input
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)  # all H query heads at once
        self.w_k = nn.Linear(self.kdim, d_model, bias=bias)
        self.w_v = nn.Linear(self.vdim, d_model, bias=bias)
        self.w_o = nn.Linear(
            d_model, d_model, bias=bias
        )  # mixes the H concatenated heads
        self.last_weights: torch.Tensor | None = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases (close to PyTorch's initialisation)."""
        for lin in (self.w_q, self.w_k, self.w_v, self.w_o):
            nn.init.xavier_uniform_(lin.weight)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}"
        )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = True,
    ):
        """Attend from ``query (B, T, D)`` to ``key (B, S, kdim)`` / ``value (B, S, vdim)``.

        ``attn_mask``: (T, S), (B, T, S) or broadcastable to (B, H, T, S); boolean
        ``True`` = may attend, or float (added). ``key_padding_mask``: (B, S), ``True``
        on real tokens (or float, added). ``is_causal``: query i sees keys 0..i; it is
        combined with any other mask.
        """
        self._check_inputs(query, key, value, key_padding_mask)
        B, T, D = query.shape  # batch, queries, model width
        S, H, Dh = key.shape[1], self.n_heads, self.d_head  # keys, heads, head width

        q = self.w_q(query)  # (B, T, D) -> (B, T, D): all H heads at once
        k = self.w_k(key)  # (B, S, kdim) -> (B, S, D)
        v = self.w_v(value)  # (B, S, vdim) -> (B, S, D)
        q = q.view(B, T, H, Dh).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)
        k = k.view(B, S, H, Dh).transpose(1, 2)  # (B, S, D) -> (B, H, S, Dh)
        v = v.view(B, S, H, Dh).transpose(1, 2)  # (B, S, D) -> (B, H, S, Dh)

        if attn_mask is not None and attn_mask.dim() == 3:
            attn_mask = attn_mask[:, None]  # (B, T, S) -> (B, 1, T, S)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
        causal = causal_mask(T, S, device=query.device) if is_causal else None  # (T, S)
        mask = combine_masks(attn_mask, key_padding_mask, causal)  # -> (B|1, H|1, T, S)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.to(q.dtype)

        p = self.dropout if self.training else 0.0
        # (B, H, T, Dh) x (B, H, S, Dh) x (B, H, S, Dh) -> (B, H, T, Dh), (B, H, T, S)
        heads, weights = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p
        )
        heads = heads.transpose(1, 2).reshape(B, T, D)  # (B, H, T, Dh) -> (B, T, D)
        out = self.w_o(heads)  # (B, T, D) -> (B, T, D): mixes the heads

        self.last_weights = weights.detach()  # (B, H, T, S), for plots
        return out, (weights if need_weights else None)

    def _check_inputs(self, query, key, value, key_padding_mask) -> None:
        for t, name in ((query, "query"), (key, "key"), (value, "value")):
            if not isinstance(t, torch.Tensor):
                raise TypeError(
                    f"{name} must be a torch.Tensor, got {type(t).__name__}"
                )
            if t.dim() != 3:
                raise ValueError(
                    f"{name} must be batch-first (B, L, width), got {tuple(t.shape)}; "
                    "add a batch dimension with x[None]"
                )
        widths = (
            (query, "query", self.d_model, "d_model"),
            (key, "key", self.kdim, "kdim"),
        )
        for t, name, want, what in widths + ((value, "value", self.vdim, "vdim"),):
            if t.shape[-1] != want:
                raise ValueError(
                    f"{name} has width {t.shape[-1]} but {what}={want} "
                    f"({name} shape {tuple(t.shape)})"
                )
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                "query (B, T, D), key (B, S, kdim), value (B, S, vdim) must agree on B "
                f"and key/value on S; got {tuple(query.shape)}, {tuple(key.shape)}, "
                f"{tuple(value.shape)}"
            )
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != tuple(key.shape[:2]):
                raise ValueError(
                    f"key_padding_mask must have shape (B, S) = {tuple(key.shape[:2])}, "
                    f"got {tuple(key_padding_mask.shape)}"
                )

    @torch.no_grad()
    def load_torch(self, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (returns ``self``).

        PyTorch stacks the three input projections in ``in_proj_weight`` (3D, D) when
        kdim = vdim = D (else ``q/k/v_proj_weight``); ``out_proj`` is ``w_o``. Its
        boolean masks mean the opposite of ours: pass ``~mask`` to one of the two.
        """
        if (mha.embed_dim, mha.num_heads) != (self.d_model, self.n_heads):
            raise ValueError(
                f"shape mismatch: torch module has embed_dim={mha.embed_dim}, "
                f"num_heads={mha.num_heads}; this one d_model={self.d_model}, "
                f"n_heads={self.n_heads}"
            )
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("add_bias_kv / add_zero_attn have no counterpart here")
        if mha._qkv_same_embed_dim:
            w = mha.in_proj_weight.chunk(3)  # 3 x (D, D)
        else:
            w = (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)
        b = (None,) * 3 if mha.in_proj_bias is None else mha.in_proj_bias.chunk(3)
        for lin, wi, bi in zip((self.w_q, self.w_k, self.w_v), w, b):
            lin.weight.copy_(wi)
            if (lin.bias is None) != (bi is None):
                raise ValueError("one module has biases and the other does not")
            if bi is not None:
                lin.bias.copy_(bi)
        self.w_o.weight.copy_(mha.out_proj.weight)
        if self.w_o.bias is not None:
            self.w_o.bias.copy_(mha.out_proj.bias)
        return self
