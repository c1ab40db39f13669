"""Small text classifiers with attention: the subjects of the explanation debate.

* :class:`AttentionClassifier` — Jain & Wallace's (2019) model: embedding -> encoder ->
  additive attention over the encoded tokens -> linear -> one logit. The encoder is a
  BiLSTM (``"lstm"``, contextual) or J&W's "average" encoder, a per-token layer that
  sees no context (``"average"``). ``attention="uniform"`` freezes the weights to a
  plain average (the first baseline of Wiegreffe & Pinter, 2019). Every forward pass
  can be given the weights to use instead (``weights=``): the permutation test, the
  adversaries and W&P's diagnostic MLP (frozen weights from another model) run so.
* :class:`TransformerClassifier` — a ``<bos>`` ("CLS") token, sinusoidal positions and
  chapter 7's :class:`attnlab.TransformerEncoderLayer`, classified from the CLS
  vector; it returns every layer's attention, for rollout and flow (chapter 11).
* :func:`attnlab.train.fit_classifier` trains either model on a
  :class:`attnlab.data.RationaleData` (the training loop
  lives in :mod:`attnlab.train`: a model never imports it); :func:`accuracy_f1`
  evaluates; :func:`predict_proba`.

Shapes: B examples, T tokens, E embedding width, D encoder output width, H heads.
Masks are True on real tokens. The output is a logit: ``sigmoid(logit)`` = p(label 1).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from .data import Vocab
from .masking import masked_softmax
from .multihead import MultiHeadAttention
from .positional import sinusoidal_encoding
from .rationales import RationaleData
from .transformer import TransformerEncoderLayer, capture_attention

__all__ = [
    "AttentionClassifier",
    "TransformerClassifier",
    "masked_softmax",
    "accuracy_f1",
    "predict_proba",
]


def _check_ids(ids, mask) -> None:
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise ValueError(
            f"ids must be a (B, T) tensor, got {getattr(ids, 'shape', ids)}"
        )
    if not isinstance(mask, torch.Tensor) or mask.shape != ids.shape:
        got = getattr(mask, "shape", type(mask).__name__)
        raise ValueError(
            f"mask must have the shape of ids {tuple(ids.shape)}, got {got}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be boolean (True on real tokens), got {mask.dtype}")


class AttentionClassifier(nn.Module):
    """Embedding -> BiLSTM or per-token layer -> attention -> linear (Jain & Wallace, 2019).

    ``forward(ids (B, T), mask (B, T), weights=None, embeddings=None)`` returns
    ``(logit (B,), weights (B, T))``. ``weights`` replaces the model's own attention;
    ``embeddings (B, T, E)`` replaces the embedding lookup (to differentiate with
    respect to it). The pieces are separate methods, so an analysis can keep the
    encoded tokens fixed and change only the attention: :meth:`encode`,
    :meth:`attend`, :meth:`decode`.
    """

    def __init__(
        self,
        vocab_size: int,
        encoder: str = "lstm",
        attention: str = "additive",
        d_embed: int = 32,
        d_hidden: int = 32,
    ):
        super().__init__()
        if encoder not in ("lstm", "average"):
            raise ValueError(f"encoder must be 'lstm' or 'average', got {encoder!r}")
        if attention not in ("additive", "uniform"):
            raise ValueError(
                f"attention must be 'additive' or 'uniform', got {attention!r}"
            )
        self.encoder_kind, self.attention_kind = encoder, attention
        self.d_embed, self.d_hidden = d_embed, d_hidden
        self.embedding = nn.Embedding(vocab_size, d_embed, padding_idx=Vocab.pad_id)
        D = 2 * d_hidden  # both directions of the LSTM; the average encoder matches it
        self.encoder: nn.Module
        if encoder == "lstm":
            self.encoder = nn.LSTM(
                d_embed, d_hidden, batch_first=True, bidirectional=True
            )
        else:
            self.encoder = nn.Sequential(nn.Linear(d_embed, D), nn.Tanh())
        self.w_att = nn.Linear(D, D)  # additive scores v^T tanh(W h + b)
        self.v_att = nn.Linear(D, 1, bias=False)
        self.out = nn.Linear(D, 1)

    def encode(self, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Embeddings ``(B, T, E)`` -> token vectors ``(B, T, D)``, zero on padding."""
        B, T, _ = e.shape
        if self.encoder_kind == "average":
            return self.encoder(e) * mask[..., None]  # (B, T, D), each token alone
        lengths = mask.sum(1).clamp_min(1).cpu()  # (B,)
        packed = nn.utils.rnn.pack_padded_sequence(
            e, lengths, batch_first=True, enforce_sorted=False
        )
        h, _ = self.encoder(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=T)
        return h  # (B, T, D)

    def attend(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Attention weights ``(B, T)`` over the real tokens."""
        if self.attention_kind == "uniform":
            m = mask.to(h.dtype)
            return m / m.sum(1, keepdim=True).clamp_min(1)  # (B, T)
        # (B, T, D) -> (B, T)
        scores = self.v_att(torch.tanh(self.w_att(h))).squeeze(-1)
        return masked_softmax(scores, mask)

    def decode(self, h: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Pool ``h (B, T, D)`` with ``weights (B, T)`` and classify: logit ``(B,)``."""
        pooled = (weights.unsqueeze(-1) * h).sum(1)  # (B, T, 1) * (B, T, D) -> (B, D)
        return self.out(pooled).squeeze(-1)  # (B,)

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        weights: torch.Tensor | None = None,
        embeddings: torch.Tensor | None = None,
    ):
        _check_ids(ids, mask)
        if weights is not None and weights.shape != ids.shape:
            raise ValueError(
                f"weights must have the shape of ids {tuple(ids.shape)}, "
                f"got {tuple(weights.shape)}"
            )
        e = self.embedding(ids) if embeddings is None else embeddings  # (B, T, E)
        h = self.encode(e, mask)  # (B, T, D)
        if weights is None:
            weights = self.attend(h, mask)  # (B, T)
        return self.decode(h, weights), weights

    def make_like(self) -> AttentionClassifier:
        """A freshly initialised model of the same architecture."""
        return AttentionClassifier(
            self.embedding.num_embeddings,
            self.encoder_kind,
            self.attention_kind,
            self.d_embed,
            self.d_hidden,
        )


class TransformerClassifier(nn.Module):
    """``<bos>`` + tokens -> sinusoidal positions -> pre-LN encoder layers -> CLS -> logit.

    The layers are chapter 7's :class:`attnlab.TransformerEncoderLayer`. ``forward(ids
    (B, T), mask (B, T), embeddings=None)`` returns ``(logit (B,), attentions)``:
    ``attentions`` is a list of ``n_layers`` tensors (B, H, T+1, T+1) whose position 0
    is the CLS token (the tokens are shifted by one), captured as
    :meth:`attnlab.Seq2SeqTransformer.attention_maps` does (the layers are asked for
    their weights by a hook; padded keys get zero weight).
    """

    positions: torch.Tensor  # a buffer, (max_len + 1, D)

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 32,
        n_heads: int = 2,
        n_layers: int = 3,
        max_len: int = 64,
        d_ff: int | None = None,
    ):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=Vocab.pad_id)
        # fixed sinusoids: "the word after X" is one rotation away (chapter 5)
        self.register_buffer("positions", sinusoidal_encoding(max_len + 1, d_model))
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(
                d_model,
                n_heads,
                d_ff or 4 * d_model,
                dropout=0.0,
                activation="gelu",
                norm_first=True,
            )
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, 1)

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        embeddings: torch.Tensor | None = None,
    ):
        _check_ids(ids, mask)
        B, T = ids.shape
        if T > self.max_len:
            raise ValueError(f"sequences of {T} tokens exceed max_len={self.max_len}")
        cls = torch.full((B, 1), Vocab.bos_id, dtype=ids.dtype, device=ids.device)
        e = self.embedding(ids) if embeddings is None else embeddings  # (B, T, D)
        x = torch.cat([self.embedding(cls), e], 1)  # (B, T+1, D)
        x = x + self.positions[: T + 1]  # (B, T+1, D)
        keys = torch.cat([torch.ones_like(mask[:, :1]), mask], 1)  # (B, T+1) may attend
        with capture_attention(
            {
                "self": [
                    cast(MultiHeadAttention, layer.self_attn) for layer in self.layers
                ]
            }
        ) as got:
            for layer in self.layers:
                x = layer(x, src_key_padding_mask=keys)  # (B, T+1, D)
        # (B,), L x (B,H,T+1,T+1)
        return self.out(self.norm(x[:, 0])).squeeze(-1), got["self"]


@torch.no_grad()
def predict_proba(model: nn.Module, data: RationaleData, **kwargs) -> torch.Tensor:
    """p(label 1) for every example, (N,); ``kwargs`` go to the model."""
    model.eval()
    return torch.sigmoid(model(data.ids, data.mask, **kwargs)[0])


def accuracy_f1(model: nn.Module, data: RationaleData, **kwargs) -> tuple[float, float]:
    """``(accuracy, F1 of the positive class)`` on ``data``; ``kwargs`` go to the model."""
    pred = (predict_proba(model, data, **kwargs) > 0.5).long()
    y = data.labels
    tp = int(((pred == 1) & (y == 1)).sum())
    fp = int(((pred == 1) & (y == 0)).sum())
    fn = int(((pred == 0) & (y == 1)).sum())
    return float((pred == y).float().mean()), 2 * tp / max(1, 2 * tp + fp + fn)


_MOVED = {"fit_classifier": "attnlab.train", "minibatches": "attnlab.rationales"}


def __getattr__(name: str):
    """The 0.2 names ``fit_classifier`` and ``minibatches``, deprecated: they moved to
    :func:`attnlab.train.fit_classifier` and :func:`attnlab.rationales.minibatches`.
    Models do not import the training loop; this call-time re-export is the one
    exception, named in pyproject's import contracts."""
    if name in _MOVED:
        import warnings

        warnings.warn(
            f"attnlab.classifiers.{name} moved: use {_MOVED[name]}.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        if name == "minibatches":
            from .rationales import minibatches

            return minibatches
        from .train import fit_classifier

        return fit_classifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
