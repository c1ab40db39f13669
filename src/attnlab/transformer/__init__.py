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

from .layers import (
    TransformerDecoderLayer,
    TransformerEncoderLayer,
)
from .models import Seq2SeqTransformer, TransformerLM, copy_from_torch
from .stacks import (
    TransformerConfig,
    TransformerDecoder,
    TransformerEncoder,
    capture_attention,
)

__all__ = [
    "TransformerConfig",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Seq2SeqTransformer",
    "TransformerLM",
    "copy_from_torch",
    "capture_attention",
]


def __getattr__(name: str):
    """``_capture_weights``, the 0.1 name of :func:`capture_attention`: deprecated."""
    if name == "_capture_weights":
        import warnings

        warnings.warn(
            "attnlab.transformer._capture_weights is deprecated: use capture_attention",
            DeprecationWarning,
            stacklevel=2,
        )
        return capture_attention
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
