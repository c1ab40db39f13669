"""Attention at scale: exact attention in O(n) memory, and cheaper approximations.

==================================  ==============  ==============  ======================
function                            time            extra memory    exact?
==================================  ==============  ==============  ======================
:func:`flash_attention`             O(T S Dh)       O(T + tiles)    yes (Dao et al. 2022)
:func:`sliding_window_attention`    O(T w Dh)       O(T + tiles)    yes, for its band mask
:func:`linear_attention`            O(T Dh Dv)      O(T Dv + C²)    no: another kernel
==================================  ==============  ==============  ======================

``flash_attention`` is the FlashAttention algorithm written in plain torch: the
scores are never held as a (T, S) matrix. Queries are cut into blocks of rows, keys
and values into blocks of columns; for each row block a loop over the column blocks
keeps the *online softmax* statistics (running max ``m`` and running sum ``l``,
Milakov & Gimelshein 2018) and rescales the partial output whenever the max grows.
Only the output and the log-sum-exp ``L = m + log l`` of each row are saved for
backward, which recomputes each tile of probabilities from ``L`` (Dao et al. 2022,
2023). Blocks that a causal or banded mask rules out are never computed.

One engineering detail, as in FlashAttention's own kernels: the tiles use powers of
two, ``exp(x) = 2 ** (x log2 e)``, with ``log2 e`` folded into the scale of ``q``, so
the running max and sum live in base 2; the saved ``L`` is converted back to the
natural log. The result is the same. On a GPU the exponential unit computes ``2**x``
natively and ``exp(x)`` costs an extra multiply per score, which the folded scale
saves; on this course's CPU ``torch.exp2`` is faster than ``torch.exp`` per tile, but
over the whole forward the gain is a few percent (chapter 8 measures both).

Precision: scores, the running max and sum, the accumulator and the saved log-sum-exp
are kept in float32 for float16/bfloat16 inputs (float64 stays float64), and the output
and gradients are cast back to the input dtype, as FlashAttention's kernels do.

On CUDA with Triton installed, forward and backward run the Triton kernels of
:mod:`attnlab.kernels.triton_flash` (the same recomputation, fused); the torch loop is
the CPU path and the readable reference.

Shapes: ``q (..., T, Dh)``, ``k (..., S, Dh)``, ``v (..., S, Dv)`` with equal leading
dims, e.g. (B, H, T, Dh).

Causal alignment when T != S. ``align="top_left"`` (the default, as
:func:`torch.nn.functional.scaled_dot_product_attention` with ``is_causal=True``): query
``i`` sees keys ``j <= i``. ``align="bottom_right"`` (as
``torch.nn.attention.bias.causal_lower_right`` and FlashAttention >= 2.1): the last query
lines up with the last key, query ``i`` sees ``j <= i + S - T`` -- what a decoding step
or a chunked prefill against a cache of ``S - T`` earlier keys needs. The sliding
window's band follows the same diagonal.
"""

from ..masking import ALIGNS, band_mask  # their home: attnlab.masking
from .flash import (  # noqa: F401
    flash_attention,
    sliding_window_attention,
)
from .linear import (  # noqa: F401
    elu_feature_map,
    linear_attention,
)
from .routing import block_routed_attention  # noqa: F401
from .tiles import (  # noqa: F401
    BLOCK_K,
    BLOCK_Q,
    LOG2E,
    tile_plan,
)

__all__ = [
    "flash_attention",
    "sliding_window_attention",
    "linear_attention",
    "block_routed_attention",
    "band_mask",
    "elu_feature_map",
    "ALIGNS",
]
