"""The Transformer's encoder and decoder layers (post-LN or pre-LN), on
:class:`attnlab.MultiHeadAttention`; see :mod:`attnlab.transformer`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .. import validation as V
from ..multihead import MultiHeadAttention
from ..registry import Registry

# The feed-forward activations by name (as PyTorch's layers: a name or a callable).
ACTIVATIONS: Registry[Callable] = Registry(
    "activation", {"relu": F.relu, "gelu": F.gelu}, otherwise="a callable"
)


def _activation(name: str | Callable) -> Callable:
    return name if callable(name) else ACTIVATIONS.get(name)


def _check_seq(x, name: str, fn: str, like: torch.Tensor | None = None) -> None:
    """``x`` must be a float tensor ``(B, L, D)`` (batch first), of the dtype and
    width of the weight ``like`` (D, the layer's d_model) when given."""
    V.floating(x, name, fn)
    if like is not None and x.dtype != like.dtype:
        raise TypeError(
            f"{fn}: {name} is {x.dtype} but the layer's weights are {like.dtype} "
            "(convert one with .to())"
        )
    if like is not None and x.dim() == 3 and x.shape[-1] != like.shape[-1]:
        raise ValueError(
            f"{fn}: {name} has width {x.shape[-1]}, the layer's d_model is "
            f"{like.shape[-1]} ({name} shape {tuple(x.shape)})"
        )
    if x.dim() != 3:
        raise ValueError(
            f"{fn}: {name} must be batch-first (B, L, D), got {tuple(x.shape)}; add a "
            "batch dimension with x[None]"
        )


def check_layer_args(
    name: str, d_ff: int, dropout: float, layer_norm_eps: float
) -> None:
    """The constructor checks both layers share (``name`` is the class, for messages)."""
    if isinstance(d_ff, bool) or not isinstance(d_ff, int):
        raise TypeError(f"{name}: d_ff must be an int >= 1, got {d_ff!r}")
    if d_ff < 1:
        raise ValueError(f"{name}: d_ff must be >= 1, got {d_ff}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(f"{name}: dropout must be a float in [0, 1), got {dropout!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    if isinstance(layer_norm_eps, bool) or not isinstance(layer_norm_eps, (int, float)):
        raise TypeError(
            f"{name}: layer_norm_eps must be a float > 0, got {layer_norm_eps!r}"
        )
    if not 0 < layer_norm_eps < float("inf"):
        raise ValueError(
            f"{name}: layer_norm_eps must be finite and > 0, got {layer_norm_eps}"
        )


def residual(
    x: torch.Tensor,
    norm: nn.Module,
    drop: nn.Module,
    sublayer: Callable[[torch.Tensor], torch.Tensor],
    norm_first: bool,
) -> torch.Tensor:
    """``x + drop(sublayer(norm(x)))`` (pre-LN) or ``norm(x + drop(sublayer(x)))``
    (post-LN): one sub-block of either layer. (B, L, D) -> (B, L, D)."""
    if norm_first:
        return x + drop(sublayer(norm(x)))
    return norm(x + drop(sublayer(x)))


def feed_forward(layer: Any, x: torch.Tensor) -> torch.Tensor:
    """The position-wise FFN of ``layer`` (its ``linear1``, ``activation``,
    ``dropout``, ``linear2``): (B, L, D) -> (B, L, d_ff) -> (B, L, D)."""
    h = layer.dropout(layer.activation(layer.linear1(x)))  # (B, L, d_ff)
    return layer.linear2(h)  # (B, L, D)


class _Sublayers:
    """The two public helpers as methods (both layers mix this in; no forward)."""

    norm_first: bool

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The FFN sub-block: (B, L, D) -> (B, L, D)."""
        return feed_forward(self, x)

    def residual(
        self,
        x: torch.Tensor,
        norm: nn.Module,
        drop: nn.Module,
        sublayer: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        """x + drop(sublayer(...)) with norm before (pre-LN) or after (post-LN)."""
        return residual(x, norm, drop, sublayer, self.norm_first)


class TransformerEncoderLayer(_Sublayers, nn.Module):
    """Self-attention + FFN, each with dropout, a residual connection and LayerNorm.

    ``forward(src (B, S, D), src_mask=None, src_key_padding_mask=None,
    is_causal=False) -> (B, S, D)``. ``src_mask`` (S, S) or (B, S, S) and
    ``src_key_padding_mask`` (B, S) use ``True`` = may attend (``nn.TransformerEncoderLayer``
    reads the same names the other way round: ``True`` = blocked); ``is_causal=True``
    ANDs the causal mask with the others (decoder-only models; the rule in
    :mod:`attnlab`). ``norm_first=False`` is the paper's post-LN, ``True`` pre-LN.
    Attention weights: :meth:`Seq2SeqTransformer.attention_maps`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable = "relu",
        layer_norm_eps: float = 1e-5,
        *,
        norm_first: bool = False,
    ):
        super().__init__()
        check_layer_args(type(self).__name__, d_ff, dropout, layer_norm_eps)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.linear1 = nn.Linear(d_model, d_ff)  # D -> d_ff
        self.dropout = nn.Dropout(dropout)  # inside the FFN
        self.linear2 = nn.Linear(d_ff, d_model)  # d_ff -> D
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)  # on each sub-block's output, before
        self.dropout2 = nn.Dropout(dropout)  # it is added to the residual stream
        self.activation = _activation(activation)

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        _check_seq(src, "src", type(self).__name__, self.linear1.weight)
        B, S, D = src.shape
        masks = dict(attn_mask=src_mask, key_padding_mask=src_key_padding_mask)

        def sa(x):  # (B, S, D) -> (B, S, D)
            return self.self_attn(
                x, x, x, **masks, is_causal=is_causal, need_weights=False
            )[0]

        x = self.residual(src, self.norm1, self.dropout1, sa)  # (B, S, D)
        # (B, S, D)
        return self.residual(x, self.norm2, self.dropout2, self.feed_forward)


class TransformerDecoderLayer(_Sublayers, nn.Module):
    """Masked self-attention, cross-attention to ``memory``, FFN; residuals + norms.

    The encoder layer's sub-blocks plus a middle one, ``cross_attn`` (with ``norm2``;
    the FFN moves to ``norm3``); an independent class, as in PyTorch (a stack of
    encoder layers refuses it): queries from the decoder, keys and values from the encoder
    output. ``forward(tgt (B, T, D), memory (B, S, D), tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False) -> (B, T, D)``. Masks: ``True`` =
    may attend; ``tgt_mask`` (T, T), ``memory_mask`` (T, S), padding (B, T) / (B, S).
    Pass ``tgt_is_causal=True`` (or a causal ``tgt_mask``) so position t cannot see
    the future. (``nn.TransformerDecoderLayer`` reads the same mask names the other
    way round: ``True`` = blocked.) Constructor as the encoder layer's.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable = "relu",
        layer_norm_eps: float = 1e-5,
        *,
        norm_first: bool = False,
    ):
        super().__init__()
        check_layer_args(type(self).__name__, d_ff, dropout, layer_norm_eps)
        # the encoder layer's modules, registered in its order (same initialisation)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.linear1 = nn.Linear(d_model, d_ff)  # D -> d_ff
        self.dropout = nn.Dropout(dropout)  # inside the FFN
        self.linear2 = nn.Linear(d_ff, d_model)  # d_ff -> D
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.activation = _activation(activation)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> torch.Tensor:
        _check_seq(tgt, "tgt", "TransformerDecoderLayer", self.linear1.weight)
        _check_seq(memory, "memory", "TransformerDecoderLayer", self.linear1.weight)
        B, T, D = tgt.shape
        self_masks = dict(attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask)
        cross_masks = dict(
            attn_mask=memory_mask, key_padding_mask=memory_key_padding_mask
        )

        def sa(x):  # (B, T, D) -> (B, T, D): queries, keys, values from the target
            return self.self_attn(
                x, x, x, **self_masks, is_causal=tgt_is_causal, need_weights=False
            )[0]

        def ca(x):  # (B, T, D), memory (B, S, D) -> (B, T, D)
            return self.cross_attn(
                x,
                memory,
                memory,
                **cross_masks,
                is_causal=memory_is_causal,
                need_weights=False,
            )[0]

        x = self.residual(tgt, self.norm1, self.dropout1, sa)  # (B, T, D)
        x = self.residual(x, self.norm2, self.dropout2, ca)  # (B, T, D)
        # (B, T, D)
        return self.residual(x, self.norm3, self.dropout3, self.feed_forward)
