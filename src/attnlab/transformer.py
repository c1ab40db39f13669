"""The Transformer (Vaswani et al., 2017): encoder and decoder layers, and models.

Two layers, built on :class:`attnlab.MultiHeadAttention`, whose sub-modules are named
as in :class:`torch.nn.TransformerEncoderLayer` / ``TransformerDecoderLayer`` (the
decoder's encoder–decoder attention is ``cross_attn``; PyTorch calls it
``multihead_attn``)::

    encoder layer, post-LN (paper)        encoder layer, pre-LN (most code)
    x = norm1(x + drop(self_attn(x)))     x = x + drop(self_attn(norm1(x)))
    x = norm2(x + drop(ffn(x)))           x = x + drop(ffn(norm2(x)))

    ffn(x) = linear2(dropout(activation(linear1(x))))

The decoder layer has a third sub-block between the two: cross-attention from the
decoder's queries to the encoder output (``memory``) as keys and values, with ``norm2``;
its FFN uses ``norm3``. Masks follow attnlab: boolean ``True`` = may attend (PyTorch's
layers take the opposite boolean convention); float masks are added to the scores in
both libraries and mean the same thing. Shapes: batch-first, B batch, T target
(query) positions, S source positions, D model width.

Constructors take PyTorch's order: ``TransformerEncoderLayer(d_model, n_heads,
d_ff=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5, *, norm_first=False)``
(PyTorch: ``d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
batch_first, norm_first``; we are always batch-first, so ``norm_first`` is keyword-only).

Stacks as PyTorch's: ``TransformerEncoder(encoder_layer, num_layers, norm=None)`` and
``TransformerDecoder(decoder_layer, num_layers, norm=None)`` (deep copies of the layer),
with ``forward`` in PyTorch's positional order; they also accept a
:class:`TransformerConfig` in place of the layer (what the models below use).

Models: :class:`Seq2SeqTransformer` (encoder–decoder with embeddings, positions and an
output layer; a :class:`attnlab.decoding.Seq2SeqModel`) and :class:`TransformerLM`
(decoder-only: the *encoder* layers with a causal mask). Models expose ``step`` for the
decoders of :mod:`attnlab.decoding`, which own every decoding loop; losses and schedules
are in :mod:`attnlab.train`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .decoding import beam_search, generate, greedy_decode
from .masking import derived_masks, padding_mask
from .multihead import MultiHeadAttention
from .positional import get_positional

__all__ = [
    "TransformerConfig",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Seq2SeqTransformer",
    "TransformerLM",
    "copy_from_torch",
]


def _activation(name: str | Callable) -> Callable:
    if callable(name):
        return name
    acts = {"relu": F.relu, "gelu": F.gelu}
    if name not in acts:
        raise ValueError(
            f"activation must be 'relu', 'gelu' or a callable, got {name!r}"
        )
    return acts[name]


def _check_seq(x, name: str, fn: str) -> None:
    """``x`` must be a float tensor ``(B, L, D)`` (batch first)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3:
        raise ValueError(
            f"{fn}: {name} must be batch-first (B, L, D), got {tuple(x.shape)}; add a "
            "batch dimension with x[None]"
        )


class TransformerEncoderLayer(nn.Module):
    """Self-attention + FFN, each with dropout, a residual connection and LayerNorm.

    ``forward(src (B, S, D), src_mask=None, src_key_padding_mask=None,
    is_causal=False) -> (B, S, D)``. ``src_mask`` (S, S) or (B, S, S) and
    ``src_key_padding_mask`` (B, S) use ``True`` = may attend (``nn.TransformerEncoderLayer``
    reads the same names the other way round: ``True`` = blocked); ``is_causal=True``
    applies the causal mask (decoder-only models). ``norm_first=False`` is the paper's
    post-LN, ``True`` pre-LN. Attention weights: :meth:`Seq2SeqTransformer.attention_maps`.
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
        name = type(self).__name__
        if isinstance(d_ff, bool) or not isinstance(d_ff, int):
            raise TypeError(f"{name}: d_ff must be an int >= 1, got {d_ff!r}")
        if d_ff < 1:
            raise ValueError(f"{name}: d_ff must be >= 1, got {d_ff}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(
                f"{name}: dropout must be a float in [0, 1), got {dropout!r}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if isinstance(layer_norm_eps, bool) or not isinstance(
            layer_norm_eps, (int, float)
        ):
            raise TypeError(
                f"{name}: layer_norm_eps must be a float > 0, got {layer_norm_eps!r}"
            )
        if not 0 < layer_norm_eps < float("inf"):
            raise ValueError(
                f"{name}: layer_norm_eps must be finite and > 0, got {layer_norm_eps}"
            )
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

    def _ff(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(self.activation(self.linear1(x)))  # (B, T, D) -> (B, T, d_ff)
        return self.linear2(h)  # (B, T, d_ff) -> (B, T, D)

    def _residual(self, x, norm: nn.Module, drop: nn.Module, sublayer: Callable):
        """x + drop(sublayer(...)) with norm before (pre-LN) or after (post-LN)."""
        if self.norm_first:
            return x + drop(sublayer(norm(x)))
        return norm(x + drop(sublayer(x)))

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        _check_seq(src, "src", type(self).__name__)
        B, S, D = src.shape
        masks = dict(attn_mask=src_mask, key_padding_mask=src_key_padding_mask)

        def sa(x):  # (B, S, D) -> (B, S, D)
            return self.self_attn(
                x, x, x, **masks, is_causal=is_causal, need_weights=False
            )[0]

        x = self._residual(src, self.norm1, self.dropout1, sa)  # (B, S, D)
        return self._residual(x, self.norm2, self.dropout2, self._ff)  # (B, S, D)


class TransformerDecoderLayer(TransformerEncoderLayer):
    """Masked self-attention, cross-attention to ``memory``, FFN; residuals + norms.

    The encoder layer plus a middle sub-block ``cross_attn`` (with ``norm2``; the FFN
    moves to ``norm3``): queries from the decoder, keys and values from the encoder
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
        sizes = (d_model, n_heads, d_ff, dropout, activation, layer_norm_eps)
        super().__init__(*sizes, norm_first=norm_first)
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
        _check_seq(tgt, "tgt", "TransformerDecoderLayer")
        _check_seq(memory, "memory", "TransformerDecoderLayer")
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

        x = self._residual(tgt, self.norm1, self.dropout1, sa)  # (B, T, D)
        x = self._residual(x, self.norm2, self.dropout2, ca)  # (B, T, D)
        return self._residual(x, self.norm3, self.dropout3, self._ff)  # (B, T, D)


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

    def __init__(self, encoder_layer, num_layers: int | None = None, norm=None):
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

    def __init__(self, decoder_layer, num_layers: int | None = None, norm=None):
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
def _capture_weights(modules: dict[str, list[MultiHeadAttention]]) -> Iterator[dict]:
    """While open, every listed attention module returns and records its weights.

    Yields ``{name: [weights (B, H, T, S) per module]}``, filled by the forward passes
    run inside the block. The layers call attention with ``need_weights=False``; a
    forward pre-hook turns it on, so nothing is stored on the modules themselves.
    """
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


def _check_ids(ids, name: str, vocab: int, shape: str) -> None:
    """Token ids: a 2-D integer tensor with every id in ``[0, vocab)``."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(
            f"{name} must be a tensor of token ids {shape}, got {type(ids)}"
        )
    if ids.dim() != 2:
        raise ValueError(
            f"{name} must be token ids {shape}, got shape {tuple(ids.shape)}; add a "
            "batch dimension with ids[None]"
        )
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be integer token ids, got {ids.dtype}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise ValueError(
            f"{name} must be in [0, {vocab}) (the vocabulary size), got ids from "
            f"{int(ids.min())} to {int(ids.max())}"
        )


class _Embed(nn.Module):
    """Token embedding (× √D as in the paper) + positions + dropout."""

    def __init__(self, vocab: int, cfg: TransformerConfig):
        super().__init__()
        self.tokens = nn.Embedding(vocab, cfg.d_model)
        self.positions = get_positional(cfg.positional, cfg.d_model, cfg.max_len)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.dropout = nn.Dropout(cfg.dropout)
        nn.init.normal_(self.tokens.weight, std=cfg.d_model**-0.5)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = self.tokens(ids) * self.scale  # (B, T) -> (B, T, D)
        return self.dropout(self.positions(x, offset))  # (B, T, D)


class Seq2SeqTransformer(nn.Module):
    """Encoder–decoder Transformer: embeddings, positions, N + N layers, output layer.

    ``forward(src (B, S), tgt_in (B, T), src_lengths=None) -> logits (B, T, V)``;
    source padding (``cfg.pad_id``, or positions past ``src_lengths``) is masked as a
    key everywhere. Attention weights of every layer and head after a forward:
    :meth:`attention_maps`.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.src_embed = _Embed(cfg.src_vocab, cfg)
        self.tgt_embed = _Embed(cfg.tgt_vocab, cfg)
        self.encoder = TransformerEncoder(cfg)
        self.decoder = TransformerDecoder(cfg)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab)  # D -> V

    @property
    def pad_id(self) -> int:
        return self.cfg.pad_id

    @property
    def bos_id(self) -> int:
        return self.cfg.bos_id

    @property
    def eos_id(self) -> int:
        return self.cfg.eos_id

    def encode(self, src, src_lengths=None):
        """``src (B, S)`` -> ``(memory (B, S, D), src_key_padding_mask (B, S))``.

        The mask is True on real source tokens: positions before ``src_lengths``, or
        (without lengths) the ids that are not ``cfg.pad_id``. An empty source (length
        0) is attended by no query: its cross-attention contributes zeros, no NaN.
        """
        _check_ids(src, "src", self.cfg.src_vocab, "(B, S)")
        if src_lengths is None:
            mask = src != self.cfg.pad_id  # (B, S)
        else:
            mask = padding_mask(src_lengths, src.shape[1], device=src.device)  # (B, S)
            if mask.shape[0] != src.shape[0]:
                raise ValueError(
                    f"src_lengths has {mask.shape[0]} lengths for a batch of "
                    f"{src.shape[0]} sources"
                )
        with derived_masks():  # built here in our convention: no convention warning
            memory = self.encoder(self.src_embed(src), src_key_padding_mask=mask)
        return memory, mask

    def decode(self, tgt_in, memory, src_key_padding_mask) -> torch.Tensor:
        """``tgt_in (B, T)``, memory (B, S, D) -> next-token logits (B, T, V)."""
        with derived_masks():  # an empty source (length 0) is not a PyTorch mask
            x = self.decoder(
                self.tgt_embed(tgt_in),
                memory,
                memory_key_padding_mask=src_key_padding_mask,
                tgt_is_causal=True,
            )
        return self.out(x)  # (B, T, D) -> (B, T, V)

    def forward(self, src, tgt_in, src_lengths=None) -> torch.Tensor:
        _check_ids(tgt_in, "tgt_in", self.cfg.tgt_vocab, "(B, T)")
        memory, mask = self.encode(src, src_lengths)
        return self.decode(tgt_in, memory, mask)

    def logits(self, batch) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) of an :class:`attnlab.data.Batch`."""
        return self(batch.src, batch.tgt_in, batch.src_lengths)

    def step(self, src, src_lengths=None, weights: bool = False):
        """A decoding step for these sources (see :mod:`attnlab.decoding`).

        ``step(prefix (N, t)) -> log-probs (N, V)``, with N = B, or any N when B = 1
        (the beams of one source). It re-runs the decoder on the whole prefix (no
        key/value cache yet). With ``weights=True`` it returns ``(log-probs, weights
        (N, S))``: the last layer's cross-attention from the newest position, averaged
        over the heads.
        """
        memory, mask = self.encode(src, src_lengths)  # (B, S, D), (B, S)
        last_cross = {"cross": [self.decoder.layers[-1].cross_attn]}

        def step(prefix: torch.Tensor):  # (N, t) -> (N, V) [, (N, S)]
            N = prefix.shape[0]
            m, k = memory.expand(N, -1, -1), mask.expand(N, -1)  # beams of one source
            if not weights:
                return self.decode(prefix, m, k)[:, -1].log_softmax(-1)
            with _capture_weights(last_cross) as got:
                logp = self.decode(prefix, m, k)[:, -1].log_softmax(-1)  # (N, V)
            return logp, got["cross"][0][:, :, -1].mean(1)  # (N, H, t, S) -> (N, S)

        return step

    @torch.no_grad()
    def greedy(self, src, src_lengths=None, max_len: int = 50):
        """Greedy decoding: ``(ids (B, T') ending in <eos> then <pad>, None)``."""
        step = self.step(src, src_lengths)
        B, special = src.shape[0], (self.bos_id, self.eos_id)
        ids = greedy_decode(step, B, *special, max_len, self.pad_id, src.device)
        return ids, None

    @torch.no_grad()
    def beam(self, src, beam_size=4, max_len=50, alpha=0.6, src_length=None):
        """Beam search for one source ``src (S,)`` -> list of (ids, score), best first."""
        if not isinstance(src, torch.Tensor) or src.dim() != 1:
            shape = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src)
            raise ValueError(
                f"beam searches one source: src must be token ids (S,), got {shape}; "
                "for a batch call it once per row (src[i]) or use greedy"
            )
        lengths = None if src_length is None else torch.tensor([src_length])
        step = self.step(src[None], lengths)  # one source, expanded to the beams
        return beam_search(
            step, self.bos_id, self.eos_id, beam_size, max_len, alpha, device=src.device
        )

    @torch.no_grad()
    def attention_maps(self, src, tgt_in, src_lengths=None) -> dict:
        """Run a forward pass and collect the weights of every layer and head.

        Returns ``{"encoder": [(B, H, S, S)] * N, "decoder": [(B, H, T, T)] * N,
        "cross": [(B, H, T, S)] * N}``, one tensor per layer.
        """
        dec = self.decoder.layers
        modules = {
            "encoder": [layer.self_attn for layer in self.encoder.layers],
            "decoder": [layer.self_attn for layer in dec],
            "cross": [layer.cross_attn for layer in dec],
        }
        with _capture_weights(modules) as maps:
            self(src, tgt_in, src_lengths)
        return maps


class TransformerLM(nn.Module):
    """Decoder-only (GPT-style) language model from the *same* encoder layers.

    "Decoder-only" needs no new block: an encoder layer with a causal mask is one.
    (Without the mask, the same stack is encoder-only, as BERT.) ``forward(ids (B, T))
    -> logits (B, T, V)`` over ``cfg.tgt_vocab``; :meth:`generate` continues a prompt.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = _Embed(cfg.tgt_vocab, cfg)
        self.blocks = TransformerEncoder(cfg, cfg.n_decoder_layers)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab)  # D -> V

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _check_ids(ids, "ids", self.cfg.tgt_vocab, "(B, T)")
        B, T = ids.shape
        return self.out(self.blocks(self.embed(ids), is_causal=True))  # (B, T, V)

    def step(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-token log-probs ``(B, V)`` after ``ids (B, t)`` (the last ``max_len``
        tokens are read): a step for :mod:`attnlab.decoding`."""
        return self(ids[:, -self.cfg.max_len :])[:, -1].log_softmax(-1)

    @torch.no_grad()
    def generate(self, prompt, n_new: int, temperature: float = 0.0, generator=None):
        """Append ``n_new`` tokens to ``prompt (B, T0)``; temperature 0 is greedy.

        The loop is :func:`attnlab.decoding.generate`."""
        return generate(self.step, prompt, n_new, temperature, generator)


@torch.no_grad()
def copy_from_torch(layer: nn.Module, torch_layer: nn.Module) -> nn.Module:
    """Copy an ``nn.TransformerEncoderLayer``/``DecoderLayer``'s weights into ``layer``.

    Same names except the decoder's cross-attention: PyTorch's ``multihead_attn`` is
    our ``cross_attn``. Returns ``layer``. (Masks still mean the opposite in PyTorch.)
    """
    ours_dec = isinstance(layer, TransformerDecoderLayer)
    if not isinstance(layer, TransformerEncoderLayer):
        raise TypeError(
            f"copy_from_torch: layer must be an attnlab TransformerEncoderLayer or "
            f"TransformerDecoderLayer, got {type(layer).__name__}"
        )
    want = nn.TransformerDecoderLayer if ours_dec else nn.TransformerEncoderLayer
    if not isinstance(torch_layer, want):
        raise TypeError(
            f"copy_from_torch: a {type(layer).__name__} takes the weights of an "
            f"nn.{want.__name__}, got {type(torch_layer).__name__}"
        )
    pairs = [("self_attn", "self_attn")]
    if ours_dec:
        pairs.append(("cross_attn", "multihead_attn"))
    for ours, theirs in pairs:
        getattr(layer, ours).load_torch(getattr(torch_layer, theirs))
    names = ["linear1", "linear2", "norm1", "norm2"]
    names += ["norm3"] if isinstance(layer, TransformerDecoderLayer) else []
    for name in names:
        getattr(layer, name).load_state_dict(getattr(torch_layer, name).state_dict())
    if layer.norm_first != torch_layer.norm_first:
        raise ValueError(
            f"norm_first differs: ours {layer.norm_first}, torch {torch_layer.norm_first}"
        )
    return layer
