"""Multi-head attention: split -> attend -> concat -> W_o (Vaswani et al., 2017).

Each of the H heads projects the inputs to its own ``Dh = D / H`` sized queries, keys
and values, attends with :func:`attnlab.scaled_dot_product_attention`, and the H
outputs are concatenated back to width D and mixed by ``W_o``::

    query (B, T, D) --w_q--> (B, T, D) --split--> (B, H, T, Dh) ┐
    key   (B, S, Dk) --w_k--> (B, S, D) --split--> (B, H, S, Dh) ├ attend -> (B, H, T, Dh)
    value (B, S, Dv) --w_v--> (B, S, D) --split--> (B, H, S, Dh) ┘
    (B, H, T, Dh) --concat--> (B, T, D) --w_o--> (B, T, D)

Masks follow the one convention of ``attnlab``: boolean ``True`` = may attend, float
masks are added. :class:`torch.nn.MultiheadAttention` reads the *same argument names*
the other way round (``True`` = blocked) for both boolean ``attn_mask`` and
``key_padding_mask``; float masks are added in both libraries and are never flipped.
Passing a PyTorch-style boolean mask here is the easiest mistake to make, and its
sign is a row with no key: a padding mask that blocks every key of a sequence, an
attention mask that leaves a query with no key (PyTorch's ``torch.triu(..., 1)``
causal mask leaves the last one). Such masks warn (:class:`attnlab.MaskConventionWarning`).
A float mask of 0/1 values (an indicator, not an additive mask) raises ValueError.

Constructor and ``forward`` take their arguments in ``nn.MultiheadAttention``'s order,
with its defaults (``average_attn_weights=True``: pass ``False`` for per-head maps).
"""

from __future__ import annotations

import torch
from torch import nn

from . import validation as V
from .attention import attention_core, fused_attention
from .masking import canonical_mask, causal_mask, combine_masks

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention with separate ``w_q, w_k, w_v, w_o``.

    ``MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=True, *, kdim=None,
    vdim=None)``: the order of :class:`torch.nn.MultiheadAttention` (``embed_dim,
    num_heads, dropout, bias``), so ``MultiHeadAttention(64, 4, 0.1)`` means dropout
    0.1 in both. ``kdim``/``vdim`` are keyword-only (PyTorch has ``add_bias_kv`` and
    ``add_zero_attn`` in between).

    Parameters
    ----------
    d_model : D, the width of the queries and of the output; must be divisible by
        ``n_heads``.
    n_heads : H; each head works in ``d_head = D // H`` dimensions.
    dropout : dropout on the attention weights, in training mode only.
    bias : whether the four projections have a bias.
    kdim, vdim : widths of the key and value inputs (default D), for cross-attention
        from another space.

    Masks: boolean ``True`` = may attend, which is the opposite of what
    ``nn.MultiheadAttention`` reads under the same names. See :meth:`forward`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
    ):
        super().__init__()
        fn = "MultiHeadAttention"
        d_model = V.integer(d_model, "d_model", fn)
        n_heads = V.integer(n_heads, "n_heads", fn)
        kdim = V.integer(kdim, "kdim", fn, low=1, optional=True)
        vdim = V.integer(vdim, "vdim", fn, low=1, optional=True)
        if d_model < 1 or n_heads < 1:
            raise ValueError(
                f"need d_model >= 1, n_heads >= 1; got {d_model}, {n_heads}"
            )
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: every head "
                f"needs the same width d_head = d_model / n_heads"
            )
        dropout = V.real(dropout, "dropout", fn, low=0.0)
        if not dropout < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {dropout!r}")
        self.d_model = d_model  # D
        self.n_heads = n_heads  # H
        self.d_head = d_model // n_heads  # Dh
        self.kdim = d_model if kdim is None else kdim  # width of the key input
        self.vdim = d_model if vdim is None else vdim  # width of the value input
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)  # all H query heads at once
        self.w_k = nn.Linear(self.kdim, d_model, bias=bias)
        self.w_v = nn.Linear(self.vdim, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)  # mixes the H heads
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
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query (B, T, D)`` to ``key (B, S, kdim)`` / ``value (B, S, vdim)``.

        Arguments in ``nn.MultiheadAttention.forward``'s order.

        Parameters
        ----------
        key_padding_mask : (B, S); boolean ``True`` on real tokens = may attend
            (``nn.MultiheadAttention`` reads the same name the other way round:
            ``True`` = padding), or float, added to the scores as in PyTorch (0 for a
            real token, ``-inf`` for padding; a 0/1 float mask raises ValueError). A
            boolean mask that blocks every key of some sequence warns: it is almost
            surely a PyTorch-style mask.
        need_weights : return the attention weights (else ``None``).
        attn_mask : (T, S), (B, T, S), PyTorch's (B·H, T, S), or broadcastable to
            (B, H, T, S); boolean ``True`` = may attend (again the opposite of
            ``nn.MultiheadAttention``), or float, added as in PyTorch. A boolean mask
            that leaves some query with no key warns.
        average_attn_weights : return the weights averaged over heads (B, T, S), as
            PyTorch does and by default; ``False`` returns them per head (B, H, T, S).
        is_causal : query i sees keys 0..i, ANDed with any other mask (attnlab's one
            ``is_causal`` rule, see :mod:`attnlab`; PyTorch's needs ``attn_mask`` too
            and reads ``is_causal`` as a hint that it is causal).

        Returns
        -------
        out : (B, T, D)
        weights : (B, H, T, S), (B, T, S) when averaged, or ``None``.
        """
        fn = "MultiHeadAttention"
        self._check_inputs(query, key, value)
        need_weights = V.flag(need_weights, "need_weights", fn)
        average_attn_weights = V.flag(average_attn_weights, "average_attn_weights", fn)
        is_causal = V.flag(is_causal, "is_causal", fn)
        B, T, D = query.shape  # batch, queries, model width
        S, H, Dh = key.shape[1], self.n_heads, self.d_head  # keys, heads, head width
        # the one canonical mask of this call: None, or bool/float (B|1, H|1, T, S);
        # checked here once (shapes; the convention scan of a mask the caller built)
        mask = canonical_mask(
            attn_mask, key_padding_mask, B=B, H=H, T=T, S=S, dtype=query.dtype, fn=fn
        )

        q = self.w_q(query)  # (B, T, D) -> (B, T, D): all H heads at once
        k = self.w_k(key)  # (B, S, kdim) -> (B, S, D)
        v = self.w_v(value)  # (B, S, vdim) -> (B, S, D)
        q = q.view(B, T, H, Dh).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)
        k = k.view(B, S, H, Dh).transpose(1, 2)  # (B, S, D) -> (B, H, S, Dh)
        v = v.view(B, S, H, Dh).transpose(1, 2)  # (B, S, D) -> (B, H, S, Dh)

        p = self.dropout if self.training else 0.0
        if not need_weights:
            # the fast path (nanoGPT's switch): PyTorch's fused kernel, no weights made
            heads = fused_attention(q, k, v, mask, p, is_causal)  # (B, H, T, Dh)
            weights = None
        else:
            if is_causal:
                mask = combine_masks(mask, causal_mask(T, S, device=query.device))
            # (B, H, T, Dh) x (B, H, S, Dh) x (B, H, S, Dh) -> (B, H, T, Dh), (B, H, T, S)
            heads, weights = attention_core(q, k, v, mask, p)
        heads = heads.transpose(1, 2).reshape(B, T, D)  # (B, H, T, Dh) -> (B, T, D)
        out = self.w_o(heads)  # (B, T, D) -> (B, T, D): mixes the heads
        if weights is None:
            return out, None
        return out, (weights.mean(1) if average_attn_weights else weights)

    def _check_inputs(self, query, key, value) -> None:
        """Metadata only (types, ranks, widths, dtypes): no host sync. NaN/inf in the
        inputs raise under :func:`attnlab.debug` only."""
        fn = "MultiHeadAttention"
        for t, name in ((query, "query"), (key, "key"), (value, "value")):
            V.floating(t, name, fn)
            if t.dim() != 3:
                raise ValueError(
                    f"{name} must be batch-first (B, L, width), got {tuple(t.shape)}; "
                    "add a batch dimension with x[None]"
                )
        V.same_dtype(fn, query=query, key=key, value=value)
        if query.dtype != self.w_q.weight.dtype:
            raise TypeError(
                f"{fn}: query is {query.dtype} but the module's weights are "
                f"{self.w_q.weight.dtype} (convert one with .to())"
            )
        widths = (
            (query, "query", self.d_model, "d_model"),
            (key, "key", self.kdim, "kdim"),
            (value, "value", self.vdim, "vdim"),
        )
        for t, name, want, what in widths:
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
        for t, name in ((query, "query"), (key, "key"), (value, "value")):
            V.finite(t, name, fn)

    def check_torch(self, mha: nn.Module) -> None:
        """Raise unless ``mha`` is an ``nn.MultiheadAttention`` whose every weight has
        the shape of ours (widths, heads, kdim/vdim, biases, dtype). Copies nothing."""
        fn = "load_torch"
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(
                f"{fn} takes an nn.MultiheadAttention, got {type(mha).__name__}"
            )
        if (mha.embed_dim, mha.num_heads) != (self.d_model, self.n_heads):
            raise ValueError(
                f"{fn}: shape mismatch: torch module has embed_dim={mha.embed_dim}, "
                f"num_heads={mha.num_heads}; this one d_model={self.d_model}, "
                f"n_heads={self.n_heads}"
            )
        if (mha.kdim, mha.vdim) != (self.kdim, self.vdim):
            raise ValueError(
                f"{fn}: torch module has kdim={mha.kdim}, vdim={mha.vdim}; this one "
                f"kdim={self.kdim}, vdim={self.vdim}"
            )
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                f"{fn}: add_bias_kv / add_zero_attn have no counterpart here"
            )
        if (mha.in_proj_bias is None) != (self.w_q.bias is None) or (
            mha.out_proj.bias is None
        ) != (self.w_o.bias is None):
            raise ValueError(f"{fn}: one module has biases and the other does not")
        for (ours, _), theirs in zip(self._torch_pairs(mha), self._torch_sources(mha)):
            if ours.shape != theirs.shape:
                raise ValueError(
                    f"{fn}: weight of shape {tuple(theirs.shape)} does not fit ours "
                    f"{tuple(ours.shape)}"
                )
            if ours.dtype != theirs.dtype:
                raise TypeError(
                    f"{fn}: torch module is {theirs.dtype}, this one {ours.dtype}"
                )

    def _torch_pairs(self, mha: nn.MultiheadAttention) -> list:
        ours = [self.w_q.weight, self.w_k.weight, self.w_v.weight, self.w_o.weight]
        if self.w_q.bias is not None:
            ours += [self.w_q.bias, self.w_k.bias, self.w_v.bias, self.w_o.bias]
        return [(t, None) for t in ours]

    @staticmethod
    def _torch_sources(mha: nn.MultiheadAttention) -> list:
        if mha._qkv_same_embed_dim:
            w = list(mha.in_proj_weight.chunk(3))  # 3 x (D, D)
        else:
            w = [mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight]
        src = [*w, mha.out_proj.weight]
        if mha.in_proj_bias is not None:
            src += [*mha.in_proj_bias.chunk(3), mha.out_proj.bias]
        return src

    @torch.no_grad()
    def load_torch(self, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (returns ``self``).

        PyTorch stacks the three input projections in ``in_proj_weight`` (3D, D) when
        kdim = vdim = D (else ``q/k/v_proj_weight``); ``out_proj`` is ``w_o``. Every
        shape is checked before anything is copied (:meth:`check_torch`): a mismatch
        raises and leaves this module as it was. Its boolean masks mean the opposite
        of ours: pass ``~mask`` to one of the two.
        """
        self.check_torch(mha)
        for (ours, _), theirs in zip(self._torch_pairs(mha), self._torch_sources(mha)):
            ours.copy_(theirs)
        return self
