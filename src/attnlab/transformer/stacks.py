"""Stacks of layers: :class:`TransformerConfig`, ``TransformerEncoder`` and
``TransformerDecoder``, and the capture of every layer's attention weights."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ..multihead import MultiHeadAttention
from .layers import TransformerDecoderLayer, TransformerEncoderLayer


@dataclass
class TransformerConfig:
    """Sizes and switches of :class:`Seq2SeqTransformer` / :class:`TransformerLM`."""

    src_vocab: int = 16  # source vocabulary size, special tokens included
    tgt_vocab: int = 16  # target vocabulary size (the LM uses this one)
    d_model: int = 64  # D, width of every token vector (paper: 512)
    n_heads: int = 4  # H; D must be divisible by H (paper: 8)
    d_ff: int = 128  # hidden width of the FFN (paper: 2048 = 4 D)
    n_encoder_layers: int = 2  # paper: 6
    n_decoder_layers: int = 2  # paper: 6; the LM uses this many layers
    dropout: float = 0.1  # on embeddings, attention weights, FFN, before residuals
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    activation: str = "relu"  # "relu" (paper) or "gelu" (BERT, GPT)
    positional: str = "sinusoidal"  # "sinusoidal" (paper), "learned" or "none"
    max_len: int = 256  # longest sequence the position table covers
    pad_id: int = 0  # padding id (ignored by the loss, masked as a key)
    bos_id: int = 1  # first decoder input
    eos_id: int = 2  # ends a generated sequence
    scale_embeddings: bool = True  # multiply embeddings by sqrt(D) as in the paper


def _layers(cfg: TransformerConfig, cls, n: int) -> nn.ModuleList:
    kw = dict(d_ff=cfg.d_ff, dropout=cfg.dropout, activation=cfg.activation)
    kw["norm_first"] = cfg.norm_first
    return nn.ModuleList(cls(cfg.d_model, cfg.n_heads, **kw) for _ in range(n))


def _stack(owner: str, layer, num_layers, norm, cls, cfg_layers: str):
    """``(layers, norm)`` of a stack built from a layer (PyTorch's way) or a config."""
    if isinstance(layer, TransformerConfig):
        n = getattr(layer, cfg_layers) if num_layers is None else num_layers
        if norm is None:
            norm = nn.LayerNorm(layer.d_model) if layer.norm_first else None
        layers = _layers(layer, cls, n)
    elif isinstance(layer, cls):
        if num_layers is None:
            raise TypeError(f"{owner}({cls.__name__}, num_layers) needs num_layers")
        layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
    else:
        raise TypeError(
            f"{owner} takes an attnlab.{cls.__name__} (as PyTorch's takes its "
            f"own layer) or a TransformerConfig, got {type(layer).__name__}"
        )
    if isinstance(num_layers, bool) or not isinstance(num_layers, (int, type(None))):
        raise TypeError(f"{owner}: num_layers must be an int, got {num_layers!r}")
    if norm is not None and not isinstance(norm, nn.Module):
        raise TypeError(f"{owner}: norm must be an nn.Module or None, got {norm!r}")
    return layers, (nn.Identity() if norm is None else norm)


class TransformerEncoder(nn.Module):
    """A stack of encoder layers, then ``norm`` (if any).

    ``TransformerEncoder(encoder_layer, num_layers, norm=None)`` as
    :class:`torch.nn.TransformerEncoder` (``num_layers`` deep copies of an
    :class:`TransformerEncoderLayer`), or ``TransformerEncoder(cfg, n_layers=None)``
    from a :class:`TransformerConfig` (a final LayerNorm when ``cfg.norm_first``).
    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=False)`` in
    PyTorch's order; boolean masks: ``True`` = may attend (PyTorch: the opposite),
    float masks are added in both.
    """

    def __init__(
        self,
        encoder_layer: nn.Module | TransformerConfig,
        num_layers: int | None = None,
        norm: nn.Module | None = None,
    ):
        super().__init__()
        self.layers, self.norm = _stack(
            "TransformerEncoder",
            encoder_layer,
            num_layers,
            norm,
            TransformerEncoderLayer,
            "n_encoder_layers",
        )

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool | None = None,
    ) -> torch.Tensor:
        x = src
        for layer in self.layers:  # (B, S, D) -> (B, S, D)
            x = layer(
                x,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )
        return self.norm(x)


class TransformerDecoder(nn.Module):
    """A stack of decoder layers, then ``norm`` (if any).

    ``TransformerDecoder(decoder_layer, num_layers, norm=None)`` as
    :class:`torch.nn.TransformerDecoder`, or ``TransformerDecoder(cfg)``.
    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)`` in
    PyTorch's order. As in PyTorch nothing is causal unless asked: pass
    ``tgt_is_causal=True`` (or a causal ``tgt_mask``). Boolean masks: ``True`` = may
    attend (PyTorch: the opposite); float masks are added in both.
    """

    def __init__(
        self,
        decoder_layer: nn.Module | TransformerConfig,
        num_layers: int | None = None,
        norm: nn.Module | None = None,
    ):
        super().__init__()
        self.layers, self.norm = _stack(
            "TransformerDecoder",
            decoder_layer,
            num_layers,
            norm,
            TransformerDecoderLayer,
            "n_decoder_layers",
        )

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> torch.Tensor:
        masks = dict(
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=bool(tgt_is_causal),
            memory_is_causal=memory_is_causal,
        )
        x = tgt
        for layer in self.layers:  # (B, T, D), (B, S, D) -> (B, T, D)
            x = layer(x, memory, **masks)
        return self.norm(x)


@contextmanager
def capture_attention(
    modules: dict[str, list[MultiHeadAttention]],
) -> Iterator[dict]:
    """While open, every listed attention module returns and records its weights.

    Yields ``{name: [weights (B, H, T, S) per module]}``, filled by the forward passes
    run inside the block. The layers call attention with ``need_weights=False``; a
    forward pre-hook turns it on, so nothing is stored on the modules themselves.

    Parameters
    ----------
    modules : ``{name: [attention module, ...]}``, e.g.
        ``{"self": [layer.self_attn for layer in model.encoder.layers]}``; each
        module must take ``need_weights``/``average_attn_weights`` and return
        ``(out, weights)`` (:class:`attnlab.MultiHeadAttention`, or PyTorch's).

    Returns
    -------
    A context manager whose ``with ... as got`` gives the dict above; an entry stays
    None until its module runs. The hooks are removed when the block ends.

    Raises
    ------
    TypeError
        ``modules`` is not a dict of lists (or tuples) of ``nn.Module``, on entering
        the block.
    """
    fn = "capture_attention"
    if not isinstance(modules, dict):
        raise TypeError(
            f"{fn}: modules must be a dict {{name: [attention modules]}}, got "
            f"{type(modules).__name__}"
        )
    for name, ms in modules.items():
        if not isinstance(ms, (list, tuple)) or not all(
            isinstance(m, nn.Module) for m in ms
        ):
            raise TypeError(
                f"{fn}: modules[{name!r}] must be a list of attention modules "
                f"(nn.Module), got {type(ms).__name__}"
            )
    got: dict[str, list] = {name: [None] * len(ms) for name, ms in modules.items()}
    handles = []

    def ask(mod, args, kwargs):  # per-head weights, whatever the caller asked
        return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

    for name, ms in modules.items():
        for i, m in enumerate(ms):

            def keep(mod, args, kwargs, out, name=name, i=i):
                got[name][i] = out[1].detach()  # (B, H, T, S)

            handles.append(m.register_forward_pre_hook(ask, with_kwargs=True))
            handles.append(m.register_forward_hook(keep, with_kwargs=True))
    try:
        yield got
    finally:
        for h in handles:
            h.remove()
