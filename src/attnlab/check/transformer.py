"""Checks for chapter 7 (the Transformer).

* :func:`decoder_self_mask` — ``fn(tgt_lengths (B,), T) -> (B, T, T)`` boolean,
  ``True`` = may attend: query t sees keys ``0..t`` that are real (``< length``).

The expected answers come from :mod:`attnlab.masking` and attnlab's Transformer layers
themselves.
"""

from __future__ import annotations

import torch

from ._core import Case, close, run_check

__all__ = ["decoder_self_mask"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def decoder_self_mask(fn):
    """Check ``fn(tgt_lengths (B,), T) -> (B, T, T)`` bool, True = may attend."""
    from ..masking import causal_mask, padding_mask

    def ref(lengths, T):
        keys = padding_mask(lengths, T)  # (B, T) real keys
        return causal_mask(T)[None] & keys[:, None, :]  # (1, T, T) & (B, 1, T)

    specs = [
        ("no padding", [3], 3, "query t may see keys 0..t: a lower triangle"),
        ("length 1", [1], 1, "a single token sees itself: [[[True]]]"),
        (
            "padding",
            [2, 4, 1],
            4,
            "mask the padded *keys* (columns) of each example; combine with & and "
            "broadcast (B, 1, T) against (1, T, T)",
        ),
        ("all padding after the first", [1, 1], 3, "column 0 stays True"),
    ]
    cases = [
        Case(label, (torch.tensor(lengths), T), ref(torch.tensor(lengths), T), hint)
        for label, lengths, T, hint in specs
    ]

    def compare(got, expected):
        return (
            isinstance(got, torch.Tensor)
            and got.dtype == torch.bool
            and close(got, expected)
        )

    return run_check("decoder_self_mask", fn, cases, compare)


# ------------------------------------------------------------------ chapter 7 (2)
__all__ += ["label_smoothing_optimum", "pre_ln_decoder_layer"]


def label_smoothing_optimum(fn) -> bool:
    """Check ``fn(eps, V) -> (p_gold, min_loss)`` for label-smoothed cross-entropy.

    The loss ``(1 - eps)(-log p_y) + eps · mean_c(-log p_c)`` over V classes is
    smallest at ``p_y = 1 - eps + eps / V`` (the rest ``eps / V`` each); its minimum
    is the entropy of that smoothed target. Reference: the closed form, and the loss
    itself evaluated at the optimum in float64.
    """
    cases = []
    for eps, V in ((0.1, 15), (0.1, 2), (0.0, 15), (0.3, 100), (0.1, 37000)):
        p_gold = 1 - eps + eps / V
        rest = eps / V
        min_loss = -(p_gold * torch.tensor(p_gold, dtype=torch.float64).log()).item()
        if rest > 0:
            min_loss -= (
                (V - 1) * rest * torch.tensor(rest, dtype=torch.float64).log().item()
            )
        hint = (
            "with eps = 0 the best model puts probability 1 on the gold token: loss 0"
            if eps == 0
            else "the loss is the cross-entropy against the smoothed target q "
            "(1 - eps + eps/V on gold, eps/V elsewhere): it is smallest at p = q, "
            "where it equals the entropy of q"
        )
        cases.append(Case(f"eps={eps}, V={V}", (eps, V), (p_gold, min_loss), hint))

    def compare(got, expected):
        try:
            p, loss = (float(v) for v in got)
        except (TypeError, ValueError):
            return False
        return abs(p - expected[0]) < 1e-6 and abs(loss - expected[1]) < 1e-5

    return run_check("label_smoothing_optimum", fn, cases, compare)


def pre_ln_decoder_layer(fn) -> bool:
    """Check ``fn(layer, y (B, T, D), memory (B, S, D), memory_mask (B, S))``, pre-LN.

    Causal self-attention over ``y``, cross-attention to ``memory`` (padding keys
    ``False`` in ``memory_mask``), FFN; each sub-block normalised at its input, with a
    residual around it. Compared with ``attnlab.TransformerDecoderLayer(norm_first=True)``
    (no final LayerNorm: that belongs to the stack).
    """
    from ..transformer import TransformerDecoderLayer

    with torch.random.fork_rng():  # fixed weights, the caller's RNG left alone
        torch.manual_seed(11)
        layer = TransformerDecoderLayer(8, 2, 16, dropout=0.0, norm_first=True).eval()
        gelu = TransformerDecoderLayer(
            8, 2, 16, dropout=0.0, norm_first=True, activation="gelu"
        ).eval()
    specs = [
        ("B=2, T=3, S=4, padding", layer, 2, 3, 4, [4, 2], 1.0, ""),
        ("T=1", layer, 1, 1, 3, [3], 1.0, "one target token sees only itself"),
        (
            "inputs x 1000",
            layer,
            2,
            4,
            3,
            [3, 1],
            1000.0,
            "normalise *before* each sub-block and add its output to the raw y",
        ),
        ("GELU", gelu, 2, 5, 4, [4, 4], 1.0, "use layer.activation, not F.relu"),
    ]
    cases = []
    for i, (label, lay, B, T, S, lengths, scale, hint) in enumerate(specs):
        g = _gen(800 + i)
        y = torch.randn(B, T, 8, generator=g) * scale
        memory = torch.randn(B, S, 8, generator=g)
        mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        with torch.no_grad():
            expected = lay(y, memory, tgt_mask=causal, memory_key_padding_mask=mask)
        hint = hint or (
            "three sub-blocks, each x = x + sublayer(norm_i(x)): causal self_attn "
            "(attn_mask = lower-triangular, True = may attend), cross_attn with "
            "keys/values = memory and key_padding_mask=memory_mask, then the FFN"
        )
        cases.append(Case(label, (lay, y, memory, mask), expected, hint))

    def compare(got, expected):
        return close(got, expected, atol=1e-4 * float(expected.abs().max()), rtol=1e-4)

    return run_check("pre_ln_decoder_layer", fn, cases, compare)
