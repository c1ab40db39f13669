"""Attention masks, one convention everywhere: boolean ``True`` = may attend.

This is the convention of :func:`torch.nn.functional.scaled_dot_product_attention`.
(:class:`torch.nn.MultiheadAttention` uses the opposite for its boolean masks: there
``True`` means "masked out".) A float mask is *added* to the scores: ``0`` where a key may
be attended, a large negative number (``-inf``, or in older code ``-10000``) where not.

Shapes: T queries, S keys. A mask broadcasts against scores of shape ``(..., T, S)``.

Float masks are additive in both libraries and mean the same thing in both: nothing
is ever flipped. Only *boolean* masks differ between ``F.scaled_dot_product_attention``
(and attnlab: ``True`` = may attend) and ``nn.MultiheadAttention`` (``True`` = blocked).
A float mask of 0/1 indicators is therefore not a mask at all (it adds 1 to some
scores); :class:`attnlab.MultiHeadAttention` refuses one.

Every mask builder of the library lives here (one home per concept): :func:`causal_mask`,
:func:`padding_mask`, :func:`band_mask` (sliding window, causal, top-left or
bottom-right aligned), and, outside the top-level namespace (``__all__``),
:func:`streaming_mask` (rolling cache + sinks), :func:`position_mask` (from positions,
chapter 13), :func:`head_pattern_mask` (previous-token and induction pairs, chapter 12),
:func:`sparse_pattern_mask` (chapter 9's sparse patterns) and :func:`masked_softmax`.
The modules that once built their own re-export them.

The package has three parts, all imported from here: the builders
(``masking/_builders.py``), the application and canonicalisation of masks
(``_canonical.py``: :func:`to_additive`, :func:`apply_mask`, :func:`combine_masks`,
:func:`canonical_mask`, :func:`masked_softmax`) and the checks (``_checks.py``:
:func:`check_mask`, :func:`warn_if_nothing_attended`, the band's arguments).
"""

from __future__ import annotations

from ._builders import (  # noqa: F401  (the names outside __all__ too)
    PATTERNS,
    band_mask,
    causal_mask,
    head_pattern_mask,
    padding_mask,
    position_mask,
    sparse_pattern_mask,
    streaming_mask,
)
from ._canonical import (  # noqa: F401
    apply_mask,
    canonical_mask,
    combine_masks,
    masked_softmax,
    to_additive,
)
from ._checks import (  # noqa: F401
    ALIGNS,
    MaskConventionWarning,
    caller_stacklevel,
    check_align,
    check_mask,
    check_window,
    derived_masks,
    diagonal_offset,
    fully_masked_rows,
    warn_if_nothing_attended,
)

__all__ = [
    "causal_mask",
    "padding_mask",
    "to_additive",
    "apply_mask",
    "check_mask",
    "combine_masks",
    "fully_masked_rows",
    "warn_if_nothing_attended",
    "MaskConventionWarning",
    "derived_masks",
    "canonical_mask",
    "band_mask",
]
