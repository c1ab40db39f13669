"""RNN encoder–decoder (seq2seq), with and without attention.

The encoder is a bidirectional GRU: it reads the source ``x_1 .. x_S`` and returns one
annotation ``h_j`` per source position (the keys and values of attention) and a summary
of the whole sentence (its two final states).

The decoder is a GRU that writes the target one token at a time. At step ``t`` it
needs a *context* ``c_t``:

* **no attention** (the RNN encoder–decoder of Cho et al., 2014): ``c_t = summary``,
  the same fixed-size vector at every step — the bottleneck;
* **attention** (Bahdanau et al., 2015): the previous decoder state ``s_{t-1}`` is the
  query, the annotations are keys and values, ``c_t = Σ_j α_tj h_j`` with
  ``α_t = softmax(score(s_{t-1}, h_·))`` over the real (non-padding) source positions.
  ``score`` is any scorer of :mod:`attnlab.scoring`: ``additive`` (Bahdanau),
  ``dot`` or ``bilinear`` (the "dot" and "general" scores of Luong et al., 2015).
  ``mapping`` swaps softmax for another map from scores to weights (sparsemax,
  1.5-entmax, fusedmax, hard Gumbel samples, CRF marginals: chapter 4).

Then ``s_t = GRU([emb(y_{t-1}); c_t], s_{t-1})`` and the next-token logits are a linear
map of ``[s_t; c_t; emb(y_{t-1})]``. That is ``style="bahdanau"``, for every scorer.
``style="luong"`` is a simplified Luong-style variant: the GRU reads
``[emb(y_{t-1}); summary]``, its new state ``s_t`` is the query, and ``c_t`` only feeds
the output layer. Only "query ``s_t``, attention after the RNN step" is Luong et al.'s;
their decoder does not read the summary at every step, combines ``c_t`` and ``s_t`` as
``tanh(W_c [c_t; s_t])`` and feeds that back into the RNN (input feeding).

Shapes: B batch, S source positions, T target positions, D = ``2 * d_hidden`` the
annotation size (also the decoder state size), V vocabulary size.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from . import validation as V
from .attention import attend
from .data import Batch, Task, Vocab
from .decoding import greedy_decode
from .masking import padding_mask
from .scoring import get_scorer
from .structured import MAPPING_NAMES, get_mapping

__all__ = ["Seq2SeqConfig", "Encoder", "Decoder", "Seq2Seq"]

ATTENTIONS = (None, "additive", "dot", "bilinear")
# REINFORCE needs a reward in the loss, so it is not offered as a plain option here.
MAPPINGS = tuple(name for name in MAPPING_NAMES if name != "reinforce")


@dataclass
class Seq2SeqConfig:
    """Sizes of a :class:`Seq2Seq` model (defaults train on a CPU in seconds)."""

    src_vocab: int  # source vocabulary size (with the 4 special tokens)
    tgt_vocab: int  # target vocabulary size (with the 4 special tokens)
    d_emb: int = 32  # token embedding size, source and target
    d_hidden: int = 64  # encoder GRU size per direction; annotations are 2 * d_hidden
    attention: str | None = "additive"  # None, "additive", "dot" or "bilinear"
    d_attn: int = 64  # hidden size of the additive scorer
    # where attention sits: "bahdanau" (query s_{t-1}) or "luong" (query s_t)
    style: str = "bahdanau"
    # scores -> weights: "softmax", "sparsemax", "entmax15", "fusedmax", "gumbel"
    # (hard, straight-through) or "structured" (CRF marginals); see attnlab.structured
    mapping: str = "softmax"

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(
                f"attention must be one of {ATTENTIONS}, got {self.attention!r}"
            )
        if self.mapping not in MAPPINGS:
            raise ValueError(
                f"mapping must be one of {tuple(MAPPINGS)}, got {self.mapping!r}"
            )
        if self.style not in ("bahdanau", "luong"):
            raise ValueError(f"style must be 'bahdanau' or 'luong', got {self.style!r}")
        for name in ("src_vocab", "tgt_vocab", "d_emb", "d_hidden", "d_attn"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def _check_src(src, src_lengths, vocab: int, fn: str = "Seq2Seq"):
    V.tensor(src, "src", fn, dim=2)
    V.token_ids(src, vocab, "src", fn)
    V.tensor(src_lengths, "src_lengths", fn)
    if src_lengths.is_floating_point() or src_lengths.dtype == torch.bool:
        raise TypeError(f"{fn}: src_lengths must be integers, got {src_lengths.dtype}")
    if src_lengths.shape != (src.shape[0],):
        raise ValueError(
            f"src_lengths must have shape (B,) = ({src.shape[0]},), "
            f"got {tuple(src_lengths.shape)}"
        )
    if int(src_lengths.min()) < 1 or int(src_lengths.max()) > src.shape[1]:
        raise ValueError(
            f"src_lengths must be in 1..S={src.shape[1]}, got {src_lengths.tolist()}"
        )


class Encoder(nn.Module):
    """Bidirectional GRU over the source; padding is skipped (packed sequences)."""

    def __init__(self, vocab: int, d_emb: int, d_hidden: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_emb, padding_idx=Vocab.pad_id)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True, bidirectional=True)

    def forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_lengths (B,) -> annotations (B, S, D), summary (B, D)."""
        B, S = src.shape
        x = self.embed(src)  # (B, S, E)
        packed = pack_padded_sequence(
            x, src_lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        out, h_n = self.rnn(packed)  # h_n (2, B, D/2): forward last, backward first
        annotations, _ = pad_packed_sequence(out, batch_first=True, total_length=S)
        summary = torch.cat([h_n[0], h_n[1]], dim=-1)  # (B, D)
        return annotations, summary  # (B, S, D), (B, D); zeros on padding


class Decoder(nn.Module):
    """GRU decoder; its context is the fixed summary or an attention read-out.

    ``style`` says where attention sits (it changes nothing without attention):

    * ``"bahdanau"``: query ``s_{t-1}``; ``c_t`` enters the GRU step. Sequential, so
      teacher forcing runs a Python loop over the T steps.
    * ``"luong"``: a simplified Luong-style variant (no input feeding): the GRU first
      reads ``[emb(y_{t-1}); summary]``, then ``s_t`` is the query. Teacher forcing runs
      the GRU over all steps at once and attends for all T queries in one call.
    """

    def __init__(
        self,
        vocab: int,
        d_emb: int,
        d: int,
        attention: str | None,
        d_attn: int,
        style: str = "bahdanau",
        mapping: str = "softmax",
    ):
        super().__init__()
        self.attention, self.style = attention, style
        self.mapping = get_mapping(mapping) if attention else None
        self.embed = nn.Embedding(vocab, d_emb, padding_idx=Vocab.pad_id)
        self.init = nn.Linear(d, d)  # summary -> s_0
        self.rnn = nn.GRU(d_emb + d, d, batch_first=True)  # input [emb; c or summary]
        self.out = nn.Linear(d + d + d_emb, vocab)
        self.scorer = (
            get_scorer(attention, d_q=d, d_k=d, d_hidden=d_attn) if attention else None
        )

    @property
    def sequential(self) -> bool:
        """True if the context feeds the GRU step (Bahdanau with attention)."""
        return self.scorer is not None and self.style == "bahdanau"

    def start(self, summary: torch.Tensor) -> torch.Tensor:
        """First decoder state ``s_0 = tanh(W summary)``: (B, D) -> (B, D)."""
        return torch.tanh(self.init(summary))

    def context(
        self,
        s: torch.Tensor,
        annotations: torch.Tensor,
        mask: torch.Tensor,
        summary: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Context for queries ``s (B, T, D)``: (c (B, T, D), weights (B, T, S) or None).

        ``annotations (B, S, D)`` are keys and values, ``mask (B, S)`` is True on real
        source tokens. Without attention, ``c`` is the summary at every step.
        """
        if self.scorer is None:
            return summary[:, None, :].expand_as(s), None  # (B, T, D)
        assert self.mapping is not None  # set whenever there is a scorer
        return attend(
            s,  # queries (B, T, D)
            annotations,  # keys (B, S, D)
            annotations,  # values (B, S, D)
            score=self.scorer,
            mapping=self.mapping,
            mask=mask[:, None, :],  # (B, 1, S): padding never receives weight
        )  # (B, T, D), (B, T, S)

    def step(
        self,
        y_prev: torch.Tensor,
        s: torch.Tensor,
        annotations: torch.Tensor,
        mask: torch.Tensor,
        summary: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One step: previous ids (B,), state (B, D) -> logits (B, V), state, weights.

        ``weights`` (B, S) is where this step looked (None without attention).
        """
        e = self.embed(y_prev)[:, None, :]  # (B, 1, E)
        if self.sequential:
            c, w = self.context(s[:, None, :], annotations, mask, summary)  # (B, 1, D)
            _, h = self.rnn(torch.cat([e, c], dim=-1), s[None])  # h (1, B, D)
        else:
            x = torch.cat([e, summary[:, None, :]], dim=-1)  # (B, 1, E + D)
            _, h = self.rnn(x, s[None])  # h (1, B, D)
            c, w = self.context(h[0][:, None, :], annotations, mask, summary)
        s = h[0]  # (B, D)
        logits = self.out(torch.cat([s, c[:, 0], e[:, 0]], dim=-1))  # (B, V)
        return logits, s, (None if w is None else w[:, 0])

    def forward(
        self,
        tgt_in: torch.Tensor,
        annotations: torch.Tensor,
        mask: torch.Tensor,
        summary: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: tgt_in (B, T) -> logits (B, T, V), weights (B, T, S) or None."""
        B, T = tgt_in.shape
        s0 = self.start(summary)  # (B, D)
        if self.sequential:
            s = s0
            logits: list[torch.Tensor] = []
            weights: list[torch.Tensor] = []
            for t in range(T):
                lt, s, w = self.step(tgt_in[:, t], s, annotations, mask, summary)
                logits.append(lt)
                assert w is not None  # the sequential style always attends
                weights.append(w)
            return torch.stack(logits, dim=1), torch.stack(weights, dim=1)
        e = self.embed(tgt_in)  # (B, T, E)
        x = torch.cat([e, summary[:, None, :].expand(B, T, -1)], dim=-1)  # (B, T, E+D)
        states, _ = self.rnn(x, s0[None])  # (B, T, D): s_1 .. s_T
        c, w = self.context(states, annotations, mask, summary)  # (B, T, D), (B, T, S)
        return self.out(torch.cat([states, c, e], dim=-1)), w  # (B, T, V), (B, T, S)


class Seq2Seq(nn.Module):
    """Encoder–decoder with a fixed context (``attention=None``) or with attention.

    >>> cfg = Seq2SeqConfig(src_vocab=16, tgt_vocab=16, attention="additive")
    >>> model = Seq2Seq(cfg)
    >>> logits, weights = model(batch.src, batch.tgt_in, batch.src_lengths)
    >>> ids, weights = model.greedy(batch.src, batch.src_lengths, max_len=30)
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config
        d = 2 * config.d_hidden
        self.encoder = Encoder(config.src_vocab, config.d_emb, config.d_hidden)
        self.decoder = Decoder(
            config.tgt_vocab,
            config.d_emb,
            d,
            config.attention,
            config.d_attn,
            config.style,
            config.mapping,
        )

    @property
    def attention(self) -> str | None:
        return self.config.attention

    def encode(
        self, src: torch.Tensor, src_lengths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> annotations (B, S, D), summary (B, D), mask (B, S) True on real tokens.

        ``src_lengths`` None: every source is S tokens long."""
        V.tensor(src, "src", "Seq2Seq", dim=2)
        if src_lengths is None:
            src_lengths = torch.full((src.shape[0],), src.shape[1], device=src.device)
        _check_src(src, src_lengths, self.config.src_vocab)
        annotations, summary = self.encoder(src, src_lengths)
        mask = padding_mask(src_lengths, src.shape[1], device=src.device)  # (B, S)
        return annotations, summary, mask

    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
    ):
        """Teacher-forced logits (B, T, V) and attention weights (B, T, S) or None.

        The order of :meth:`attnlab.Seq2SeqTransformer.forward` (and of
        ``nn.Transformer``): ``(src, tgt_in, src_lengths=None)``. The 0.1 order
        ``(src, src_lengths, tgt_in)`` is recognised by the ranks ((B,) then (B, T)),
        warns (DeprecationWarning) and still works."""
        if (
            isinstance(tgt_in, torch.Tensor)
            and isinstance(src_lengths, torch.Tensor)
            and tgt_in.dim() == 1
            and src_lengths.dim() == 2
        ):
            warnings.warn(
                "Seq2Seq(src, src_lengths, tgt_in) is the 0.1 order; since attnlab "
                "0.2 it is Seq2Seq(src, tgt_in, src_lengths), as Seq2SeqTransformer",
                DeprecationWarning,
                stacklevel=2,
            )
            tgt_in, src_lengths = src_lengths, tgt_in
        V.tensor(tgt_in, "tgt_in", "Seq2Seq", dim=2)
        V.token_ids(tgt_in, self.config.tgt_vocab, "tgt_in", "Seq2Seq")
        annotations, summary, mask = self.encode(src, src_lengths)
        return self.decoder(tgt_in, annotations, mask, summary)

    pad_id, bos_id, eos_id = Vocab.pad_id, Vocab.bos_id, Vocab.eos_id

    def logits(self, batch: Batch) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) of an :class:`attnlab.data.Batch`."""
        return self(batch.src, batch.tgt_in, batch.src_lengths)[0]

    def step(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
        weights: bool = False,
    ) -> _GRUStep:
        """A decoding step for these sources (see :mod:`attnlab.decoding`).

        It keeps the decoder state between calls, reads only the newest token of the
        prefix, and follows beam search's re-selection through ``reorder(rows)``.
        With ``weights=True`` it returns ``(log-probs (N, V), weights (N, S))``.
        """
        annotations, summary, mask = self.encode(src, src_lengths)
        return _GRUStep(self.decoder, annotations, summary, mask, weights)

    @torch.no_grad()
    def greedy(
        self, src: torch.Tensor, src_lengths: torch.Tensor | None, max_len: int = 50
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Greedy decoding: ids (B, T) ending in ``<eos>`` then ``<pad>``, weights.

        ``weights`` (B, T, S) is where the decoder looked to write each output token
        (zeros after ``<eos>``), or None without attention. ``T <= max_len``. The loop
        is :func:`attnlab.decoding.greedy_decode`.
        """
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        want = self.decoder.scorer is not None
        step = self.step(src, src_lengths, weights=want)
        B, special = src.shape[0], (self.bos_id, self.eos_id)
        out = greedy_decode(
            step, B, *special, max_len, self.pad_id, src.device, return_weights=want
        )
        return out if want else (out, None)  # (B, T), (B, T, S) or None

    @torch.no_grad()
    def translate(
        self, task: Task, text: str | list[str], max_len: int | None = None
    ) -> dict:
        """Translate one typed input with ``task``'s vocabularies.

        Returns ``{"src": tokens, "out": tokens, "text": str, "weights": (T, S) or
        None, "target": tokens, "correct": bool}``.
        """
        batch = task.encode(text, device=next(self.parameters()).device)
        max_len = max_len or batch.tgt.shape[1] + 10
        was_training = self.training
        self.eval()
        ids, w = self.greedy(batch.src, batch.src_lengths, max_len)
        self.train(was_training)
        out = task.tgt_vocab.decode(ids[0])
        n_out = min(len(out) + 1, ids.shape[1])  # + the <eos> step, if it came
        return {
            "src": batch.src_tokens[0],
            "out": out,
            "text": task.join(out),
            "weights": None if w is None else w[0, :n_out].cpu(),
            "target": batch.tgt_tokens[0],
            "correct": out == batch.tgt_tokens[0],
        }


class _GRUStep:
    """The decoder as a :mod:`attnlab.decoding` step: state kept between calls."""

    def __init__(self, decoder: Decoder, annotations, summary, mask, weights: bool):
        self.decoder, self.weights = decoder, weights
        self.annotations, self.summary, self.mask = annotations, summary, mask
        self.s = decoder.start(summary)  # (N, D)

    def __call__(self, prefix: torch.Tensor):
        """prefix (N, t) -> log-probs (N, V) [, weights (N, S)]; reads prefix[:, -1]."""
        V.tensor(prefix, "prefix", "Seq2Seq.step", dim=2)
        if prefix.shape[1] == 0:
            raise ValueError("Seq2Seq.step: prefix needs at least one token (<bos>)")
        vocab = self.decoder.embed.num_embeddings
        V.token_ids(prefix[:, -1], vocab, "prefix", "Seq2Seq.step")
        args = (self.annotations, self.mask, self.summary)
        logits, self.s, w = self.decoder.step(prefix[:, -1], self.s, *args)
        logp = logits.log_softmax(-1)  # (N, V)
        if not self.weights:
            return logp
        if w is None:  # no attention: nothing was looked at
            w = self.annotations.new_zeros(self.annotations.shape[:2])  # (N, S)
        return logp, w

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the state of the surviving beams ``rows (K,)``."""
        self.s = self.s[rows]  # (K, D)
        self.annotations = self.annotations[rows]
        self.summary, self.mask = self.summary[rows], self.mask[rows]
