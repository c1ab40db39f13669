"""Models on the stacks: :class:`Seq2SeqTransformer` (encoder-decoder),
:class:`TransformerLM` (decoder-only), and :func:`copy_from_torch`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from .. import validation as V
from ..decoding import beam_search, generate, greedy_decode
from ..masking import derived_masks, padding_mask
from ..positional import get_positional
from .layers import TransformerDecoderLayer, TransformerEncoderLayer
from .stacks import (
    TransformerConfig,
    TransformerDecoder,
    TransformerEncoder,
    capture_attention,
)

if TYPE_CHECKING:
    from ..data import Batch


def _check_ids(ids, name: str, vocab: int, shape: str, fn: str) -> None:
    """Token ids ``shape`` (2-D), integers in ``[0, vocab)`` (attnlab.validation)."""
    if isinstance(ids, torch.Tensor) and ids.dim() != 2:
        raise ValueError(
            f"{name} must be token ids {shape}, got shape {tuple(ids.shape)}; add a "
            "batch dimension with ids[None]"
        )
    V.token_ids(ids, vocab, name, fn)


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
        self.config = cfg
        self.src_embed = _Embed(cfg.src_vocab, cfg)
        self.tgt_embed = _Embed(cfg.tgt_vocab, cfg)
        self.encoder = TransformerEncoder(cfg)
        self.decoder = TransformerDecoder(cfg)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab)  # D -> V

    @property
    def cfg(
        self,
    ) -> (
        TransformerConfig
    ):  # the 0.1 name of ``config`` (one name per thing: use config)
        return self.config

    @property
    def pad_id(self) -> int:
        return self.config.pad_id

    @property
    def bos_id(self) -> int:
        return self.config.bos_id

    @property
    def eos_id(self) -> int:
        return self.config.eos_id

    def encode(
        self, src: torch.Tensor, src_lengths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``src (B, S)`` -> ``(memory (B, S, D), src_key_padding_mask (B, S))``.

        The mask is True on real source tokens: positions before ``src_lengths``, or
        (without lengths) the ids that are not ``cfg.pad_id``. An empty source (length
        0) is attended by no query: its cross-attention contributes zeros, no NaN.
        """
        _check_ids(src, "src", self.config.src_vocab, "(B, S)", type(self).__name__)
        if src_lengths is None:
            mask = src != self.config.pad_id  # (B, S)
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

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """``tgt_in (B, T)``, memory (B, S, D) -> next-token logits (B, T, V)."""
        with derived_masks():  # an empty source (length 0) is not a PyTorch mask
            x = self.decoder(
                self.tgt_embed(tgt_in),
                memory,
                memory_key_padding_mask=src_key_padding_mask,
                tgt_is_causal=True,
            )
        return self.out(x)  # (B, T, D) -> (B, T, V)

    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        _check_ids(
            tgt_in, "tgt_in", self.config.tgt_vocab, "(B, T)", type(self).__name__
        )
        memory, mask = self.encode(src, src_lengths)
        return self.decode(tgt_in, memory, mask)

    def logits(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) of an :class:`attnlab.data.Batch`."""
        return self(batch.src, batch.tgt_in, batch.src_lengths)

    def step(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
        weights: bool = False,
    ) -> Callable:
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
            with capture_attention(last_cross) as got:
                logp = self.decode(prefix, m, k)[:, -1].log_softmax(-1)  # (N, V)
            return logp, got["cross"][0][:, :, -1].mean(1)  # (N, H, t, S) -> (N, S)

        return step

    @torch.no_grad()
    def greedy(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
        max_len: int = 50,
    ) -> tuple[torch.Tensor, None]:
        """Greedy decoding: ``(ids (B, T') ending in <eos> then <pad>, None)``."""
        step = self.step(src, src_lengths)
        B, special = src.shape[0], (self.bos_id, self.eos_id)
        ids = greedy_decode(step, B, *special, max_len, self.pad_id, src.device)
        return ids, None

    @torch.no_grad()
    def beam(
        self,
        src: torch.Tensor,
        beam_size: int = 4,
        max_len: int = 50,
        alpha: float = 0.6,
        src_length: int | None = None,
    ) -> list:
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
    def attention_maps(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
    ) -> dict:
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
        with capture_attention(modules) as maps:
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
        self.config = cfg
        self.embed = _Embed(cfg.tgt_vocab, cfg)
        self.blocks = TransformerEncoder(cfg, cfg.n_decoder_layers)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab)  # D -> V

    @property
    def cfg(
        self,
    ) -> (
        TransformerConfig
    ):  # the 0.1 name of ``config`` (one name per thing: use config)
        return self.config

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _check_ids(ids, "ids", self.config.tgt_vocab, "(B, T)", type(self).__name__)
        B, T = ids.shape
        return self.out(self.blocks(self.embed(ids), is_causal=True))  # (B, T, V)

    def step(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-token log-probs ``(B, V)`` after ``ids (B, t)`` (the last ``max_len``
        tokens are read): a step for :mod:`attnlab.decoding`."""
        return self(ids[:, -self.config.max_len :])[:, -1].log_softmax(-1)

    @torch.no_grad()
    def generate(
        self,
        prompt: torch.Tensor,
        n_new: int,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Append ``n_new`` tokens to ``prompt (B, T0)``; temperature 0 is greedy.

        The loop is :func:`attnlab.decoding.generate`."""
        return generate(self.step, prompt, n_new, temperature, generator)


def _activation_name(act: object) -> object:
    """ "relu"/"gelu" for the functions and modules of that name, else the object."""
    if act in (F.relu, torch.relu) or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    return act


@torch.no_grad()
def copy_from_torch(layer: nn.Module, torch_layer: nn.Module) -> nn.Module:
    """Copy an ``nn.TransformerEncoderLayer``/``DecoderLayer``'s weights into ``layer``.

    Same names except the decoder's cross-attention: PyTorch's ``multihead_attn`` is
    our ``cross_attn``. Everything is checked before anything is copied: the kind of
    layer, ``norm_first``, the activation, ``layer_norm_eps`` and every weight's shape
    (a mismatch raises and leaves ``layer`` as it was). (Masks still mean the opposite
    in PyTorch.)

    Parameters
    ----------
    layer : an attnlab ``TransformerEncoderLayer`` or ``TransformerDecoderLayer``.
    torch_layer : the matching ``nn.TransformerEncoderLayer`` or
        ``nn.TransformerDecoderLayer``.

    Returns
    -------
    ``layer``, its weights replaced (in place, without autograd history).

    Raises
    ------
    TypeError
        ``layer`` is not an attnlab encoder or decoder layer, or ``torch_layer`` is
        not PyTorch's layer of the same kind.
    ValueError
        ``norm_first``, the activation, ``layer_norm_eps``, a norm's affine
        parameters, an attention module's configuration or a weight's shape differ.
    """
    fn = "copy_from_torch"
    ours_dec = isinstance(layer, TransformerDecoderLayer)
    if not isinstance(layer, (TransformerEncoderLayer, TransformerDecoderLayer)):
        raise TypeError(
            f"{fn}: layer must be an attnlab TransformerEncoderLayer or "
            f"TransformerDecoderLayer, got {type(layer).__name__}"
        )
    want = nn.TransformerDecoderLayer if ours_dec else nn.TransformerEncoderLayer
    if not isinstance(torch_layer, want):
        raise TypeError(
            f"{fn}: a {type(layer).__name__} takes the weights of an "
            f"nn.{want.__name__}, got {type(torch_layer).__name__}"
        )
    if layer.norm_first != torch_layer.norm_first:
        raise ValueError(
            f"{fn}: norm_first differs: ours {layer.norm_first}, torch "
            f"{torch_layer.norm_first}"
        )
    ours_act = _activation_name(layer.activation)
    theirs_act = _activation_name(torch_layer.activation)
    if ours_act != theirs_act:
        raise ValueError(
            f"{fn}: activation differs: ours {ours_act!r}, torch {theirs_act!r}"
        )
    norms = ["norm1", "norm2"] + (["norm3"] if ours_dec else [])
    for name in norms:
        a, b = getattr(layer, name), getattr(torch_layer, name)
        if a.eps != b.eps:
            raise ValueError(
                f"{fn}: layer_norm_eps differs ({name}): ours {a.eps}, torch {b.eps}"
            )
        if a.elementwise_affine != b.elementwise_affine or (
            (a.bias is None) != (b.bias is None)
        ):
            raise ValueError(f"{fn}: {name} differs in its affine parameters")
    pairs = [("self_attn", "self_attn")]
    if ours_dec:
        pairs.append(("cross_attn", "multihead_attn"))
    for ours, theirs in pairs:
        getattr(layer, ours).check_torch(getattr(torch_layer, theirs))
    names = ["linear1", "linear2", *norms]
    for name in names:
        mine = getattr(layer, name).state_dict()
        theirs = getattr(torch_layer, name).state_dict()
        if mine.keys() != theirs.keys() or any(
            mine[k].shape != theirs[k].shape for k in mine
        ):
            raise ValueError(
                f"{fn}: {name} differs: ours "
                f"{ {k: tuple(v.shape) for k, v in mine.items()} }, torch "
                f"{ {k: tuple(v.shape) for k, v in theirs.items()} }"
            )
    # every check passed: copy
    for ours, theirs in pairs:
        getattr(layer, ours).load_torch(getattr(torch_layer, theirs))
    for name in names:
        getattr(layer, name).load_state_dict(getattr(torch_layer, name).state_dict())
    return layer
